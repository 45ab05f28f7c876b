/*!
`fsync event`: set, clear, test and wait for an event file. The protocol (and why one signal
wakes exactly one `--reset` waiter) is in the library's `event` module.
*/

use crate::cli::OrStdout;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use fsync::Event;
use serde::Serialize;

use super::{
    Exit, VerbResult,
    args::WaitArgs,
    escape::Show,
    report::{self, Progress},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Events: signal, wait (optionally auto-resetting), reset, status";

/// The description of `fsync event --help`.
pub(super) const LONG: &str = "\
An event is set while the file EVENT exists (so it survives the crash of whoever set it). \
'wait' returns once it is set; 'wait --reset' also clears it, and one signal wakes exactly one \
of any number of --reset waiters, on one machine or several. On a local file system waiters are \
woken by the kernel at once (dnotify); on a network file system they re-check every --poll interval.";

#[derive(Debug, Args)]
pub(crate) struct EventCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Args)]
struct PathArg {
    /// The event file
    #[arg(value_name = "EVENT")]
    event: PathBuf,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Set EVENT (exit 0 whether or not it was set already)",
        long_about = "Set EVENT: exit 0 whether or not it was set already. With --json, say \
                      which: {\"was_set\": false} exactly when this signal set it. The answer is \
                      that of the signal itself (an exclusive create, which fails when the file \
                      is there), not of a look beforehand: of any number of processes signalling \
                      an unset event at once, exactly one is told it was not set.",
        after_long_help = "Examples:\n  # Tell the waiting job the data is ready\n  \
            fsync event signal /shared/data.ready\n\n  \
            # Of all who ask for a rebuild before it runs, only the first schedules it\n  \
            [ \"$(fsync event signal --json /shared/rebuild | jq .was_set)\" = false ] && ./schedule-rebuild"
    )]
    Signal(ChangeArgs),
    #[command(
        about = "Wait until EVENT is set (exit 0), or the timeout (75)",
        long_about = "Wait until EVENT is set: exit 0, or the conflict exit code (75) when \
                      --timeout expires first. Without --reset every waiter wakes and the event \
                      stays set (this needs only read access); with --reset the waiter that wakes \
                      clears it, and one signal wakes exactly one --reset waiter.",
        after_long_help = "Examples:\n  # Ping-pong: each ping wakes exactly one worker\n  \
            fsync event wait --reset /shared/ping && ./handle-one\n\n  \
            # Wait at most a minute for the data\n  fsync event wait -t 1m /shared/data.ready"
    )]
    Wait(WaitCmd),
    #[command(
        about = "Clear EVENT (exit 0 whether or not it was set)",
        long_about = "Clear EVENT: exit 0 whether or not it was set. With --json, say which: \
                      {\"was_set\": true} exactly when this reset removed the event file. Of two \
                      resets racing (or a reset and a 'wait --reset'), only the one that removed \
                      it is told it was set. Only an event file (an empty regular file) is \
                      removed; anything else at EVENT is an error and stays.",
        after_long_help = "Examples:\n  fsync event reset /shared/data.ready\n\n  \
            # The rebuild job: run only if someone asked, taking the request\n  \
            fsync event reset --json /shared/rebuild | jq -e .was_set >/dev/null && ./rebuild"
    )]
    Reset(ChangeArgs),
    #[command(
        about = "Exit 0 if EVENT is set, 1 if not",
        after_long_help = "Examples:\n  fsync event status /shared/data.ready && echo ready\n  \
                           fsync event status --json /shared/data.ready | jq -r .state"
    )]
    Status(StatusArgs),
}

#[derive(Debug, Args)]
struct ChangeArgs {
    #[command(flatten)]
    path: PathArg,

    /// One JSON object: {"path", "was_set"}, whether EVENT was set before
    #[arg(long)]
    json: bool,
}

/// `fsync event signal --json` and `reset --json` (docs/json.md, `event-signal`, `event-reset`).
#[derive(Serialize)]
struct ChangeJson {
    path: String,
    was_set: bool,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    path: PathArg,

    /// One JSON object: {"path", "state": "set"|"unset"}
    #[arg(long)]
    json: bool,
}

/// `fsync event status --json` (docs/json.md, `event-status`).
#[derive(Serialize)]
struct StatusJson {
    path: String,
    state: State,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum State {
    Set,
    Unset,
}

#[derive(Debug, Args)]
struct WaitCmd {
    #[command(flatten)]
    path: PathArg,

    /// Consume the event: one signal wakes exactly one --reset waiter
    #[arg(long)]
    reset: bool,

    #[command(flatten)]
    wait: WaitArgs,
}

pub(super) fn run(cmd: EventCommand) -> VerbResult {
    match cmd.verb {
        Verb::Signal(a) => {
            let was_set = Event::new(&a.path.event).signal()?;
            report_change(&a, was_set)
        }
        Verb::Reset(a) => {
            let was_set = Event::new(&a.path.event).reset()?;
            report_change(&a, was_set)
        }
        Verb::Status(a) => {
            let set = Event::new(&a.path.event).is_set()?;
            if a.json {
                let line = StatusJson {
                    path: report::path_text(&a.path.event),
                    state: if set { State::Set } else { State::Unset },
                };
                report::print_json(&mut std::io::stdout().lock(), &line).or_stdout()?;
            }
            Ok(if set { Exit::OK } else { Exit::NO })
        }
        Verb::Wait(a) => {
            let event = Event::new(&a.path.event)
                .poll_interval(a.wait.poll)
                .auto_reset(a.reset);
            let what = format!("event {}", a.path.event.shown());
            let mut progress = Progress::new(&a.wait, what.clone());
            let outcome = event.wait_with(a.wait.timeout(), |_| progress.waiting())?;
            progress.settle(outcome, |()| format!("{what} is set"))?;
            Ok(Exit::OK)
        }
    }
}

/// `signal` and `reset` exit 0 either way; with `--json` they say whether EVENT was set.
fn report_change(a: &ChangeArgs, was_set: bool) -> VerbResult {
    if a.json {
        let line = ChangeJson {
            path: report::path_text(&a.path.event),
            was_set,
        };
        report::print_json(&mut std::io::stdout().lock(), &line).or_stdout()?;
    }
    Ok(Exit::OK)
}
