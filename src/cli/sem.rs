/*!
`fsync sem`: run a command holding one of N slots of a counting semaphore; report it. The
protocol (one lock file per slot, a waiting line, wake-ups on close) is in the library's `sem`
module.
*/

use crate::cli::OrStdout;
use std::{io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::{
    ErrorKind, Semaphore,
    sem::{self, Released},
};
use serde::Serialize;

use super::{
    Exit, Failure, VerbResult,
    args::{CommandArgs, WaitArgs},
    child::LossArgs,
    escape::Show,
    report::{self, Progress},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Counting semaphores: at most N holders at once, crash-safe";

/// The description of `fsync sem --help`.
pub(super) const LONG: &str = "\
A counting semaphore: at most N processes hold it at once, across all machines that share the \
directory. Each holder holds one slot, and COMMAND learns which in FSYNC_SLOT (0 to N-1), to pick \
a device, port or build directory by it. A slot whose holder dies, even by SIGKILL, is free \
again at once, and the longest waiter gets it without delay (waiters are served roughly in \
arrival order).

SEM is a directory (created if missing) that records N when it is created. Another --slots \
is taken once nobody holds a slot (the holders inside decide: while any is, another --slots is \
an error, exit 2). With --delete, whoever leaves last removes SEM, so a semaphore used now and \
then leaves nothing behind.";

#[derive(Debug, Args)]
pub(crate) struct SemCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Run COMMAND while holding one of N slots of SEM",
        long_about = "Run COMMAND while holding one of the N slots of SEM, and exit with COMMAND's \
                      exit status. COMMAND sees FSYNC_SLOT, the slot it holds. Signals are forwarded \
                      to COMMAND as with 'fsync mutex run'.\n\n\
                      The slot is passed down to COMMAND as 'fsync mutex run' passes its lock: it \
                      stays held while COMMAND, or anything it left running with the slot \
                      inherited, runs, even if fsync itself is killed. --close does not pass it \
                      down.\n\n\
                      SEM records N when it is created. A different --slots is taken in its \
                      place once nobody holds a slot; while anyone does, it is an error (exit 2) \
                      that names both counts. Two runs that start with different counts at once \
                      are never inside together: the first in line sets the count, and the \
                      other is refused.\n\n\
                      With --delete, whoever leaves last removes SEM and its files, so a \
                      semaphore used now and then leaves nothing behind. Leaving while others \
                      hold a slot or wait for one keeps it for them: the last of them to leave \
                      with --delete removes it. A run whose wait gives up (-t, -n) leaves too. \
                      Runs that opened SEM just before it went notice and take the new one, so \
                      never more than N are inside. SEM stays while a process COMMAND left \
                      running holds the slot (-v says so); only regular files are removed, never \
                      a symbolic link nor, in a sticky directory, another user's file.",
        after_long_help = "Examples:\n  \
            # At most 4 compile jobs at once on this build farm\n  \
            fsync sem run /shared/cc.sem --slots 4 -- make -C \"$dir\"\n\n  \
            # Give each holder its own GPU\n  \
            fsync sem run gpu.sem --slots 2 -- sh -c 'CUDA_VISIBLE_DEVICES=$FSYNC_SLOT ./train'\n\n  \
            # A semaphore in /tmp that disappears when the last holder is done\n  \
            fsync sem run --delete /tmp/fetch.sem --slots 8 -- ./fetch \"$url\""
    )]
    Run(RunArgs),
    #[command(
        about = "Show slots, holders and waiters; exit 0 if a slot is free, 1 if all are held",
        long_about = "Show the number of slots, who holds each held slot (pid, host, command and \
                      since when, where that can be known) and how many wait; exit 0 if a slot \
                      is free, 1 if all are held. Nothing is created or locked. Where the \
                      kernel's lock table names a slot's holder (local file systems), it is \
                      believed over the slot's holder record (which another user may have \
                      written): a record naming another process is reported as untrusted. Host \
                      names and command lines are shown escaped, as 'ls -b' shows file names.",
        after_long_help = "Examples:\n  fsync sem status /shared/cc.sem\n  fsync sem status --json /shared/cc.sem | jq .waiting"
    )]
    Status(StatusArgs),
}

fn parse_slots(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=sem::MAX_SLOTS).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid slot count '{s}': must be a whole number from 1 to {}",
            sem::MAX_SLOTS
        )),
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The semaphore directory: created if missing
    #[arg(value_name = "SEM")]
    sem: PathBuf,

    /// How many may hold it at once (recorded when SEM is created; another N is taken once
    /// nobody holds a slot, and refused while anyone does)
    #[arg(long, value_name = "N", value_parser = parse_slots)]
    slots: usize,

    #[command(flatten)]
    wait: WaitArgs,

    /// Remove SEM on leaving if nobody else holds a slot or waits for one (else the last of
    /// them to leave with --delete does); runs that opened it just before notice and take the
    /// new one. SEM stays while a process COMMAND left running still holds the slot (-v says
    /// so)
    #[arg(long)]
    delete: bool,

    /// Do not pass the slot down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

    #[command(flatten)]
    loss: LossArgs,

    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[arg(value_name = "SEM")]
    sem: PathBuf,

    /// One JSON object: {"path", "slots", "held": [{"slot", "holder", "record_trusted",
    /// "untrusted_record"}], "waiting"}
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: SemCommand) -> VerbResult {
    match cmd.verb {
        Verb::Run(a) => run_command(a),
        Verb::Status(a) => status(a),
    }
}

fn run_command(a: RunArgs) -> VerbResult {
    if a.wait.verbose {
        report::warn_foreign(
            &a.sem,
            "remove its slot files and so let more holders in than it has slots",
        );
    }
    let sem = Semaphore::new(&a.sem, a.slots)
        .poll_interval(a.wait.poll)
        .delete_on_release(a.delete);
    let mut progress = Progress::new(&a.wait, format!("a slot of {}", a.sem.shown()))
        .holder(|| holders_text(&a.sem));
    let outcome = (sem.acquire_with(a.wait.timeout(), |_| progress.waiting()))
        .map_err(|e| in_our_words(&a, e))?;
    let mut guard = progress.settle(outcome, |g| {
        format!("acquired slot {} of {}", g.slot(), a.sem.shown())
    })?;
    let job = a
        .command
        .job(vec![("FSYNC_SLOT".to_string(), guard.slot().to_string())]);
    let exit = job.run_under(&mut guard, a.close, &a.loss, &a.sem, a.wait.verbose)?;
    // The command's status is what the caller asked for: a failed delete only warns.
    let released = guard.release().unwrap_or_else(|e| {
        super::warn(e.into());
        Released::Kept
    });
    if let Some(why) = report::not_deleted(released, "hold a slot") {
        progress.say(|| format!("not deleting {}: {why}", a.sem.shown()));
    }
    Ok(exit)
}

/// A semaphore in use with another N, said in the command line's words (`--slots`); any other
/// error as it is.
fn in_our_words(a: &RunArgs, e: fsync::Error) -> Failure {
    if e.kind() == ErrorKind::Invalid
        && let Ok(Some(recorded)) = sem::recorded_slots(&a.sem)
        && recorded != a.slots
    {
        let why = format!(
            "is in use with --slots {recorded}, not {}: another --slots is taken only \
                     once nobody holds a slot",
            a.slots
        );
        return Failure::Lib(fsync::Error::new(&a.sem, ErrorKind::Invalid, why));
    }
    e.into()
}

/// "slot 0 held by pid 12 on host: cmd, since ...; slot 1 held by ..." for `-v` (the first
/// few of many).
fn holders_text(sem: &std::path::Path) -> Option<String> {
    const SHOWN: usize = 3;
    let st = sem::status(sem).ok()?;
    let mut parts: Vec<String> = (st.held.iter().take(SHOWN))
        .map(|s| match &s.holder {
            Some(h) => format!("slot {} {}", s.slot, report::held_by(h)),
            None => format!("slot {} held (holder unknown)", s.slot),
        })
        .collect();
    if st.held.len() > SHOWN {
        parts.push(format!("and {} more", st.held.len() - SHOWN));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `fsync sem status --json` (docs/json.md, `sem-status`).
#[derive(Serialize)]
struct StatusJson<'a> {
    path: String,
    /// `None` until the semaphore is created.
    slots: Option<usize>,
    held: Vec<SlotJson<'a>>,
    /// `None` where waiters cannot be counted.
    waiting: Option<usize>,
}

#[derive(Serialize)]
struct SlotJson<'a> {
    slot: usize,
    holder: Option<report::HolderJson<'a>>,
    /// False when the slot's holder record names a holder the kernel's lock table contradicts.
    record_trusted: bool,
    /// That holder (never the one in `holder`).
    untrusted_record: Option<report::HolderJson<'a>>,
}

fn status(a: StatusArgs) -> VerbResult {
    let st = sem::status(&a.sem)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let held = (st.held.iter())
            .map(|s| SlotJson {
                slot: s.slot,
                holder: report::holder_json(s.holder.as_ref()),
                record_trusted: s.untrusted_record.is_none(),
                untrusted_record: report::holder_json(s.untrusted_record.as_ref()),
            })
            .collect();
        let line = StatusJson {
            path: report::path_text(&a.sem),
            slots: st.slots,
            held,
            waiting: st.waiters,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        match st.slots {
            None => {
                writeln!(out, "{}: not created yet (all slots free)", a.sem.shown()).or_stdout()?;
            }
            Some(n) => {
                let waiters = st.waiters.map_or("unknown".to_string(), |w| w.to_string());
                writeln!(
                    out,
                    "{}: {} of {n} slots held, {waiters} waiting",
                    a.sem.shown(),
                    st.held.len()
                )
                .or_stdout()?;
                for s in &st.held {
                    let who = s
                        .holder
                        .as_ref()
                        .map_or("unknown holder".to_string(), report::holder_text);
                    writeln!(out, "  slot {}: {who}", s.slot).or_stdout()?;
                    if let Some(claimed) = &s.untrusted_record {
                        let why = report::untrusted_text(claimed, s.holder.as_ref(), "the slot");
                        writeln!(out, "    record: {why}").or_stdout()?;
                    }
                }
            }
        }
    }
    let full = st.slots.is_some_and(|n| st.held.len() >= n);
    Ok(if full { Exit::NO } else { Exit::OK })
}
