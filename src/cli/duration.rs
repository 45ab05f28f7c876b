/*!
Durations on the command line: humantime's forms (250ms, 5s, 1h30m) and bare seconds as
flock(1) takes them, with the floors of the options that need one (`--poll`, `--lease`).
*/

use std::time::Duration;

/// The longest duration accepted: about 31,700 years, for ever in practice (and far from the
/// overflow of a deadline).
const MAX_DURATION: Duration = Duration::from_secs(1_000_000_000_000);

/// Durations as humantime writes them, plus bare (fractional) seconds as flock(1) takes them.
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
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

pub(super) fn parse_poll(s: &str) -> Result<Duration, String> {
    at_least(s, Duration::from_millis(1), "poll interval")
}

/// A `--lease`: at least a second, since the lock is checked only every 50 ms to 1 s and one
/// check is a round trip to the file server (a zero lease would stop every command at once).
pub(super) fn parse_lease(s: &str) -> Result<Duration, String> {
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
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_mins(90)));
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
