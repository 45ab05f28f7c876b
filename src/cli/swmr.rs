/*!
`fsync swmr`: run a command as a reader or as the writer of a reader/writer lock; report it.
The protocol (and why writers are not starved) is in the library's `swmr` module.
*/

use crate::cli::OrStdout;
use std::{io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::{
    Mode, Swmr,
    swmr::{self, Released},
};
use serde::Serialize;

use super::{
    Exit, VerbResult,
    args::{CommandArgs, WaitArgs},
    child::LossArgs,
    escape::Show,
    report::{self, Progress},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Reader/writer locks that never starve the writer";

/// The description of `fsync swmr --help`.
pub(super) const LONG: &str = "\
A reader/writer lock: any number of readers at once, or one writer alone. Once a writer waits, \
readers that arrive after it queue behind it, so a stream of overlapping readers cannot starve \
it (util-linux 'flock -s' readers can); it gets in as soon as the readers already inside leave.

Readers hold a shared flock(2) lock on LOCK and the writer an exclusive one, so 'flock -s LOCK' \
and 'flock -x LOCK' interoperate with them (but 'flock -s' readers do not queue behind a waiting \
writer). The queue is the file .NAME.turnstile beside LOCK. There is no read-to-write upgrade: \
flock(2) converts by dropping the shared lock first, so an upgrade could not be atomic.";

#[derive(Debug, Args)]
pub(crate) struct SwmrCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(about = RUN_ABOUT, long_about = RUN_LONG, after_long_help = RUN_EXAMPLES)]
    Read(RunArgs),
    #[command(about = RUN_ABOUT, long_about = RUN_LONG, after_long_help = RUN_EXAMPLES)]
    Write(RunArgs),
    #[command(
        about = "Show readers, writer and waiting writers; exit 0 if free, 1 if held",
        long_about = "Show how many readers hold LOCK, whether a writer does (and who), and how many \
                      writers wait. Exit 0 if nobody holds it, 1 if someone does. On a network file \
                      system readers and waiting writers cannot be counted and show as unknown.",
        after_long_help = "Examples:\n  \
            fsync swmr status /srv/db/db.lck\n  \
            fsync swmr status --json /srv/db/db.lck | jq .readers"
    )]
    Status(StatusArgs),
}

/// The texts of `read` and `write`, which take the same arguments.
const RUN_ABOUT: &str = "Run COMMAND holding LOCK as a reader (read) or as the writer (write)";

const RUN_LONG: &str = "\
Run COMMAND while holding LOCK, shared with other readers ('read') or alone ('write'), and exit \
with COMMAND's exit status. Signals are forwarded to COMMAND as with 'fsync mutex run'.

The lock is passed down to COMMAND as 'fsync mutex run' passes its lock: it stays held while \
COMMAND, or anything it left running with the lock inherited, runs, even if fsync itself is \
killed. --close does not pass it down.

With --delete, whoever leaves last removes LOCK and its two companions .NAME.turnstile and \
.NAME.writers, so a lock used now and then leaves nothing behind. Leaving while others are \
inside or waiting keeps the files for them: the last of them to leave with --delete removes \
them. A run whose wait gives up (-t, -n) leaves too. Readers and writers that opened the files \
just before they went notice and take new ones, so a writer is still alone, and a waiting writer \
keeps its place. Only regular files are removed: never a symbolic link, nor, in a sticky \
directory such as /tmp, another user's file (fsync says so on stderr and leaves all three).";

const RUN_EXAMPLES: &str = "\
Examples:
  # Many report jobs may read the database at once
  fsync swmr read /srv/db/db.lck -- ./report.sh

  # The nightly import waits for readers inside to finish, and new readers wait for it
  fsync swmr write -t 30m /srv/db/db.lck -- ./import.sh

  # A lock in /tmp that disappears when the last reader or writer is done
  fsync swmr read --delete /tmp/cache.lck -- ./use-cache.sh
  fsync swmr write --delete /tmp/cache.lck -- ./refresh-cache.sh";

#[derive(Debug, Args)]
struct RunArgs {
    /// The lock file: created if missing, never truncated
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    #[command(flatten)]
    wait: WaitArgs,

    /// Remove LOCK, .NAME.turnstile and .NAME.writers on leaving if nobody else is inside,
    /// waiting or arriving (else the last to leave with --delete does); processes that opened
    /// them just before notice and take new ones. Files stay while a process COMMAND left
    /// running still holds the lock (-v says so)
    #[arg(long, conflicts_with = "range")]
    delete: bool,

    /// Do not pass the lock down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

    #[command(flatten)]
    loss: LossArgs,

    /// Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all
    /// offsets) with OFD byte-range locks; disjoint ranges do not exclude each other
    #[arg(long, value_name = "START[:LEN]", value_parser = fsync::range::ByteRange::parse)]
    range: Option<fsync::range::ByteRange>,

    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    /// One JSON object: {"path", "state": "free"|"read"|"write", "readers", "writer" (the
    /// holder), "waiting" (writers)}
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: SwmrCommand) -> VerbResult {
    match cmd.verb {
        Verb::Read(a) => run_locked(a, Mode::Shared),
        Verb::Write(a) => run_locked(a, Mode::Exclusive),
        Verb::Status(a) => status(a),
    }
}

fn run_locked(a: RunArgs, mode: Mode) -> VerbResult {
    let role = if mode == Mode::Exclusive {
        "the writer"
    } else {
        "a reader"
    };
    let lock = Swmr::new(&a.lock)
        .poll_interval(a.wait.poll)
        .range(a.range)
        .delete_on_release(a.delete);
    let what = match a.range {
        None => format!("{} as {role}", a.lock.shown()),
        Some(r) => format!("bytes {r} of {} as {role}", a.lock.shown()),
    };
    let mut progress = Progress::new(&a.wait, what.clone()).holder(|| holders_text(&a.lock, mode));
    let outcome = lock.acquire_with(mode, a.wait.timeout(), |_| progress.waiting())?;
    let mut guard = progress.settle(outcome, |_| format!("acquired {what}"))?;
    let exit = a.command.job(Vec::new()).run_under(
        &mut guard,
        a.close,
        &a.loss,
        &a.lock,
        a.wait.verbose,
    )?;
    // The command's status is what the caller asked for: a failed delete only warns.
    let released = guard.release().unwrap_or_else(|e| {
        super::warn(e.into());
        Released::Kept
    });
    let why = match released {
        Released::KeptInUse => {
            "others are inside or waiting; the last of them to leave with \
                                --delete removes it"
        }
        Released::KeptStillHeld => {
            "another process still holds the lock (one the command left \
                                    running, through a descriptor it inherited)"
        }
        _ => return Ok(exit),
    };
    progress.say(|| format!("not deleting {}: {why}", a.lock.shown()));
    Ok(exit)
}

/// Who holds the lock, and the writers a newcomer in `mode` waits behind, for `-v`: "held by
/// the writer pid 12 on host: cmd", "held by 3 readers; 1 writer waiting first".
fn holders_text(lock: &std::path::Path, mode: Mode) -> Option<String> {
    let st = swmr::status(lock).ok()?;
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    match (&st.writer_holder, st.writer, st.readers) {
        (Some(h), _, _) => parts.push(format!("held by the writer {}", report::holder_text(h))),
        (None, true, _) => parts.push("held by a writer".to_string()),
        (None, false, Some(0)) => {}
        (None, false, Some(n)) => parts.push(format!("held by {}", plural(n, "reader"))),
        (None, false, None) => parts.push("held by readers".to_string()),
    }
    // A waiting writer counts itself among the waiting writers.
    let others = match mode {
        Mode::Exclusive => st.waiting_writers.map(|n| n.saturating_sub(1)),
        Mode::Shared => st.waiting_writers,
    };
    if let Some(n @ 1..) = others {
        parts.push(format!("{} waiting first", plural(n, "writer")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `fsync swmr status --json` (docs/json.md, `swmr-status`).
#[derive(Serialize)]
struct StatusJson<'a> {
    path: String,
    state: State,
    /// `None` where readers cannot be counted (network file systems).
    readers: Option<usize>,
    /// The writer inside, where it can be named (`state` says whether there is one).
    writer: Option<report::HolderJson<'a>>,
    /// Writers waiting; `None` where they cannot be counted.
    waiting: Option<usize>,
}

/// Who is inside: nobody, readers, or the writer.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum State {
    Free,
    Read,
    Write,
}

fn status(a: StatusArgs) -> VerbResult {
    let st = swmr::status(&a.lock)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let state = match (st.writer, st.held()) {
            (true, _) => State::Write,
            (false, true) => State::Read,
            (false, false) => State::Free,
        };
        let line = StatusJson {
            path: report::path_text(&a.lock),
            state,
            readers: st.readers,
            writer: report::holder_json(st.writer_holder.as_ref()),
            waiting: st.waiting_writers,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        let count = |n: Option<usize>| n.map_or("unknown".to_string(), |n| n.to_string());
        let writer = match (&st.writer, &st.writer_holder) {
            (false, _) => "none".to_string(),
            (true, Some(h)) => report::holder_brief(h),
            (true, None) => "yes".to_string(),
        };
        writeln!(
            out,
            "{}: readers {}, writer {}, waiting writers {}",
            a.lock.shown(),
            count(st.readers),
            writer,
            count(st.waiting_writers)
        )
        .or_stdout()?;
    }
    Ok(if st.held() { Exit::NO } else { Exit::OK })
}
