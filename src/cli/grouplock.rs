/*!
`fsync grouplock`: run a command as a member of one group of a group lock. The
protocol (turnstile, one shared lock per group) is in the library's `grouplock` module.
*/

use crate::cli::OrStdout;
use std::{io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::{GroupLock, grouplock};
use serde::Serialize;

use super::{
    Exit, VerbResult,
    args::{CommandArgs, WaitArgs},
    child::LossArgs,
    escape::{Show, escaped},
    report::{self, Progress},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Group locks: one group at a time, any number of its members";

/// The description of `fsync grouplock --help`.
pub(super) const LONG: &str = "\
Asche's group lock: processes belong to named groups; any number of processes of one group (or \
at most --max M) may be inside together, but never two groups at once. Once a process of another \
group waits, newcomers of the group inside queue behind it, so the waiting group goes in as soon \
as the current one drains: no group is starved.

LOCK is a directory (created if missing). Group names are letters, digits, '_' and '-'. With \
--delete, whoever leaves last removes LOCK, so a group lock used now and then leaves nothing \
behind.";

#[derive(Debug, Args)]
pub(crate) struct GroupLockCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Run COMMAND inside LOCK as a member of group NAME",
        long_about = "Run COMMAND inside LOCK as a member of group NAME, and exit with COMMAND's exit \
                      status. With --max M at most M members of NAME are inside at once (COMMAND sees \
                      its slot in FSYNC_SLOT). The cap is the group's: the first --max given for \
                      NAME sets it (once the members inside without one have left), and members \
                      that omit --max run under it. Another M is taken in its place once no member \
                      of NAME is inside; while any is, it is an error (exit 2) that names both. \
                      Signals are forwarded as with 'fsync mutex run'.\n\n\
                      The lock (and the slot) is passed down to COMMAND as 'fsync mutex run' passes \
                      its lock: it stays held while COMMAND, or anything it left running with the \
                      lock inherited, runs, even if fsync itself is killed. --close does not pass \
                      it down.\n\n\
                      With --delete, whoever leaves last removes LOCK and everything in it (every \
                      group's file and cap), so a group lock used now and then leaves nothing \
                      behind. Leaving while others are inside or on their way in keeps it for \
                      them: the last of them to leave with --delete removes it. A run whose wait \
                      gives up (-t, -n) leaves too. Runs that opened LOCK just before it went \
                      notice and take the new one, so two groups are still never inside \
                      together. LOCK stays while a process COMMAND left running holds the lock \
                      (-v says so); only regular files are removed, never a symbolic link nor, in \
                      a sticky directory, another user's file.",
        after_long_help = "Examples:\n  \
            # Many builds may read the cache together; the cleaner runs alone\n  \
            fsync grouplock run /shared/cache.glock --group build -- make\n  \
            fsync grouplock run /shared/cache.glock --group clean -- ./prune-cache\n\n  \
            # At most 2 uploaders at once, never while downloads run\n  \
            fsync grouplock run xfer.glock --group up --max 2 -- ./upload\n\n  \
            # A group lock in /tmp that disappears when the last member leaves\n  \
            fsync grouplock run --delete /tmp/cache.glock --group build -- make"
    )]
    Run(RunArgs),
    #[command(
        about = "Show which group is inside and how many wait; exit 0 if none is inside, 1 if one is",
        after_long_help = "Examples:\n  fsync grouplock status /shared/cache.glock"
    )]
    Status(StatusArgs),
}

fn parse_group(s: &str) -> Result<String, String> {
    grouplock::check_group_name(s).map(|()| s.to_string())
}

fn parse_max(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=fsync::sem::MAX_SLOTS).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid --max '{s}': must be a whole number from 1 to {}",
            fsync::sem::MAX_SLOTS
        )),
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The group lock directory: created if missing
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    /// The group this process belongs to
    #[arg(long, value_name = "NAME", value_parser = parse_group)]
    group: String,

    /// At most M members of the group inside at once: the group's cap, set by the first --max
    /// given for it; members that omit --max run under it; another M is taken once no member
    /// of the group is inside, and refused while any is
    #[arg(long, value_name = "M", value_parser = parse_max)]
    max: Option<usize>,

    #[command(flatten)]
    wait: WaitArgs,

    /// Remove LOCK on leaving if nobody else is inside, waiting or arriving (else the last of
    /// them to leave with --delete does); runs that opened it just before notice and take the
    /// new one. LOCK stays while a process COMMAND left running still holds the lock (-v says
    /// so)
    #[arg(long)]
    delete: bool,

    /// Do not pass the lock down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

    #[command(flatten)]
    loss: LossArgs,

    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    /// One JSON object: {"path", "inside": [{"group", "count"}], "waiting"}
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: GroupLockCommand) -> VerbResult {
    if let Verb::Run(a) = &cmd.verb
        && a.wait.verbose
    {
        report::warn_foreign(
            &a.lock,
            "remove its group files and so let two groups in at once",
        );
    }
    match cmd.verb {
        Verb::Run(a) => run_command(a),
        Verb::Status(a) => status(a),
    }
}

/// The library refuses a `max` other than the group's cap in its own terms; say it with the
/// option the user gave. (The cap is read again only on this error path.)
fn in_our_words(lock: &GroupLock, a: &RunArgs, e: fsync::Error) -> fsync::Error {
    let (Some(given), fsync::ErrorKind::Invalid) = (a.max, e.kind()) else {
        return e;
    };
    match lock.cap(&a.group) {
        Ok(Some(in_force)) if in_force != given => fsync::Error::new(
            &a.lock,
            fsync::ErrorKind::Invalid,
            format!(
                "group '{}' is in use under --max {in_force}, not {given}: another --max is \
                 taken once no member of the group is inside; until then give --max \
                 {in_force}, or leave --max out",
                a.group
            ),
        ),
        _ => e,
    }
}

fn run_command(a: RunArgs) -> VerbResult {
    let mut lock = GroupLock::new(&a.lock)
        .poll_interval(a.wait.poll)
        .delete_on_release(a.delete);
    if let Some(max) = a.max {
        lock = lock.max(max);
    }
    let what = format!("{} as group {}", a.lock.shown(), escaped(&a.group));
    let mut progress = Progress::new(&a.wait, what.clone()).holder(|| inside_text(&a.lock));
    let outcome = lock
        .enter_with(&a.group, a.wait.timeout(), |_| progress.waiting())
        .map_err(|e| in_our_words(&lock, &a, e))?;
    let mut guard = progress.settle(outcome, |g| match g.slot() {
        Some(slot) => format!("entered {what} (slot {slot})"),
        None => format!("entered {what}"),
    })?;
    let mut env = vec![("FSYNC_GROUP".to_string(), a.group.clone())];
    if let Some(slot) = guard.slot() {
        env.push(("FSYNC_SLOT".to_string(), slot.to_string()));
    }
    let exit =
        a.command
            .job(env)
            .run_under(&mut guard, a.close, &a.loss, &a.lock, a.wait.verbose)?;
    // The command's status is what the caller asked for: a failed delete only warns.
    let released = guard.release().unwrap_or_else(|e| {
        super::warn(e.into());
        fsync::grouplock::Released::Kept
    });
    if let Some(why) = report::not_deleted(released, "are inside") {
        progress.say(|| format!("not deleting {}: {why}", a.lock.shown()));
    }
    Ok(exit)
}

/// The group inside, for `-v`: "held by group build (3 inside)".
fn inside_text(lock: &std::path::Path) -> Option<String> {
    let st = grouplock::status(lock).ok()?;
    let texts: Vec<String> = (st.inside.iter())
        .map(|(g, n)| match n {
            Some(n) => format!("group {} ({n} inside)", escaped(g)),
            None => format!("group {}", escaped(g)),
        })
        .collect();
    (!texts.is_empty()).then(|| format!("held by {}", texts.join(", ")))
}

/// `fsync grouplock status --json` (docs/json.md, `grouplock-status`).
#[derive(Serialize)]
struct StatusJson<'a> {
    path: String,
    inside: Vec<InsideJson<'a>>,
    /// `None` where waiters cannot be counted.
    waiting: Option<usize>,
}

#[derive(Serialize)]
struct InsideJson<'a> {
    group: &'a str,
    /// `None` where members cannot be counted.
    count: Option<usize>,
}

fn status(a: StatusArgs) -> VerbResult {
    let st = grouplock::status(&a.lock)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let inside = (st.inside.iter())
            .map(|(group, count)| InsideJson {
                group,
                count: *count,
            })
            .collect();
        let line = StatusJson {
            path: report::path_text(&a.lock),
            inside,
            waiting: st.waiting,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        let waiting = st.waiting.map_or("unknown".to_string(), |w| w.to_string());
        match st.inside.first() {
            None => writeln!(out, "{}: free, {waiting} waiting", a.lock.shown()).or_stdout()?,
            Some((g, n)) => {
                let n = n.map_or("some".to_string(), |n| n.to_string());
                writeln!(
                    out,
                    "{}: group {} inside ({n}), {waiting} waiting",
                    a.lock.shown(),
                    escaped(g)
                )
                .or_stdout()?;
            }
        }
    }
    Ok(if st.inside.is_empty() {
        Exit::OK
    } else {
        Exit::NO
    })
}
