/*!
The arguments several verbs share: how to wait ([`WaitArgs`]), how long to watch
([`WatchArgs`]), the COMMAND of the verbs that run one ([`CommandArgs`]), and durations.

These structs are flattened into the verbs' own, so they carry no doc comment: clap would make it
the `about` of every command they are flattened into (clap-rs/clap#3127). A verb that needs
another help text for one of their arguments says so with `mut_arg`. They skip the argument group
clap derives for each struct, which nothing refers to (and which costs start-up time).
*/

use std::{ffi::OsString, time::Duration};

use clap::Args;

use super::{Exit, child::Job};

// The options every verb that waits shares.
#[derive(Debug, Clone, Args)]
#[group(skip)]
pub struct WaitArgs {
    /// Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait
    /// for ever]
    #[arg(
        short = 't',
        long,
        visible_short_alias = 'w',
        visible_alias = "wait",
        value_name = "DUR",
        value_parser = parse_duration
    )]
    pub timeout: Option<Duration>,

    /// Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout,
    /// as flock -n -w: no wait)
    #[arg(short = 'n', long, visible_aliases = ["nonblock", "nb", "nonblocking"])]
    pub no_wait: bool,

    /// Exit status when the wait gives up
    #[arg(short = 'E', long, value_name = "N", default_value_t = Exit::CONFLICT.code)]
    pub conflict_exit_code: u8,

    /// Re-check interval where other hosts cannot wake us (network file systems)
    #[arg(long, value_name = "DUR", value_parser = parse_poll, default_value = "50ms")]
    pub poll: Duration,

    /// Say on stderr what the wait is for and who holds it, since when, if it has to wait;
    /// then how long it waited, whether it got it, gave up or was interrupted
    #[arg(short, long)]
    pub verbose: bool,
}

impl WaitArgs {
    /// How long to wait: `None` for ever, zero for `--no-wait`.
    pub fn timeout(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.timeout
        }
    }
}

// COMMAND of every verb that runs one (`mutex run`, `group join`, `swmr read` and `write`,
// `sem run`, `grouplock run`): everything after the verb's own arguments.
#[derive(Debug, Args)]
#[group(skip)]
pub struct CommandArgs {
    /// The command to run, and its arguments (after `--`)
    #[arg(
        id = "command",
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub argv: Vec<OsString>,
}

impl CommandArgs {
    /// COMMAND, to be run with `env` added to its environment.
    pub fn job(&self, env: Vec<(String, String)>) -> Job<'_> {
        Job {
            argv: &self.argv,
            env,
        }
    }
}

// How long a watch verb (`mutex watch`, `group watch`) runs, and how often it re-checks.
#[derive(Debug, Args)]
#[group(skip)]
pub struct WatchArgs {
    /// Stop watching after DUR
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Re-check interval on network file systems
    #[arg(long, value_name = "DUR", value_parser = parse_poll, default_value = "50ms")]
    pub poll: Duration,
}

/// The longest duration accepted: about 31,700 years, for ever in practice (and far from the
/// overflow of a deadline).
const MAX_DURATION: Duration = Duration::from_secs(1_000_000_000_000);

/// Durations as humantime writes them, plus bare (fractional) seconds as flock(1) takes them.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let too_large = || {
        format!(
            "duration '{s}' is too large (at most {}s, about 31,700 years)",
            MAX_DURATION.as_secs()
        )
    };
    let duration = if let Ok(secs) = s.parse::<f64>() {
        if secs.is_nan() {
            return Err(format!("invalid duration '{s}': not a number"));
        }
        if secs < 0.0 {
            return Err(format!(
                "invalid duration '{s}': must be a non-negative number of seconds"
            ));
        }
        if secs >= MAX_DURATION.as_secs_f64() {
            return Err(too_large());
        }
        Duration::from_secs_f64(secs)
    } else {
        humantime::parse_duration(s).map_err(|e| match e {
            humantime::DurationError::NumberOverflow => too_large(),
            e => format!("invalid duration '{s}': {e} (for example 250ms, 5s, 2m, 1h30m)"),
        })?
    };
    if duration > MAX_DURATION {
        return Err(too_large());
    }
    Ok(duration)
}

fn parse_poll(s: &str) -> Result<Duration, String> {
    at_least(s, Duration::from_millis(1), "poll interval")
}

/// A `--lease`: at least a second, since the lock is checked only every 50 ms to 1 s and one
/// check is a round trip to the file server (a zero lease would stop every command at once).
pub fn parse_lease(s: &str) -> Result<Duration, String> {
    at_least(s, Duration::from_secs(1), "lease")
}

fn at_least(s: &str, min: Duration, what: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < min => Err(format!(
            "invalid {what} '{s}': must be at least {}",
            humantime::format_duration(min)
        )),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_humantime_and_bare_seconds() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1").is_err());
        for huge in [
            "18446744073709551615",
            "1e300",
            "inf",
            "99999999999999999999s",
            "100000000000000h",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains(&format!("'{huge}' is too large")), "{e}");
        }
        assert!(parse_duration("nan").unwrap_err().contains("not a number"));
        assert!(parse_duration("soon").is_err());
        assert!(parse_poll("0").is_err());
        assert!(
            parse_lease("0")
                .unwrap_err()
                .contains("must be at least 1s")
        );
        assert_eq!(parse_lease("4s"), Ok(Duration::from_secs(4)));
    }
}
