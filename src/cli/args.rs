/*!
The arguments several verbs share: how to wait ([`WaitArgs`]), how long to watch
([`WatchArgs`]), the COMMAND of the verbs that run one ([`CommandArgs`]).

These structs are flattened into the verbs' own, so they carry no doc comment: clap would make it
the `about` of every command they are flattened into (clap-rs/clap#3127). A verb that needs
another help text for one of their arguments says so with `mut_arg`. They skip the argument group
clap derives for each struct, which nothing refers to (and which costs start-up time).
*/

use std::{ffi::OsString, time::Duration};

use clap::Args;

use super::{
    Exit, Failure, VerbResult,
    duration::{parse_duration, parse_poll},
};

// The options every verb that waits shares.
#[derive(Debug, Clone, Args)]
#[group(skip)]
pub(super) struct WaitArgs {
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
    pub(super) fn timeout(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.timeout
        }
    }
}

// The limit of the verbs that do not wait for anything but the internal locks others take for
// a moment (`msg post`, `bus connect`, `send`...), which another user sharing the directory
// can hold for ever.
#[derive(Debug, Clone, Args)]
#[group(skip)]
pub(super) struct LockWaitArgs {
    /// Give up after DUR if another process holds a lock this takes for a moment (in a
    /// directory others may write, they can hold it for ever): nothing is changed, exit 75
    /// [default: wait for ever]
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Same as --timeout 0
    #[arg(short = 'n', long)]
    pub no_wait: bool,

    /// Exit status when it gives up
    #[arg(short = 'E', long, value_name = "N", default_value_t = Exit::CONFLICT.code)]
    pub conflict_exit_code: u8,
}

impl LockWaitArgs {
    /// How long to wait: `None` for ever, zero for `--no-wait`.
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.no_wait.then_some(Duration::ZERO).or(self.timeout)
    }

    /// How the verb ends: as it does, but with `-E`'s status where the limit gave up.
    pub(super) fn ended(&self, result: VerbResult) -> VerbResult {
        result.map_err(|f| match f {
            Failure::Lib(e) if e.kind() == fsync::ErrorKind::TimedOut => {
                Failure::GaveUp(e, Exit::code(self.conflict_exit_code))
            }
            f => f,
        })
    }
}

// COMMAND of every verb that runs one (`mutex run`, `group join`, `swmr read` and `write`,
// `sem run`, `grouplock run`): everything after the verb's own arguments.
#[derive(Debug, Args)]
#[group(skip)]
pub(super) struct CommandArgs {
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

// How long a watch verb (`mutex watch`, `group watch`) runs, and how often it re-checks.
#[derive(Debug, Args)]
#[group(skip)]
pub(super) struct WatchArgs {
    /// Stop watching after DUR
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Re-check interval on network file systems
    #[arg(long, value_name = "DUR", value_parser = parse_poll, default_value = "50ms")]
    pub poll: Duration,
}
