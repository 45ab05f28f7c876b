/*!
`fsync group`: join a pool of processes while a command runs; ask whether it is empty, wait
for it to empty, list and watch its members. The protocol is in the library's `group` module.
*/

use crate::cli::OrStdout;
use std::{
    ffi::OsString,
    io::Write,
    path::{Path, PathBuf},
};

use clap::{Args, Subcommand};
use fsync::{
    Group,
    group::{self, Left},
};
use serde::Serialize;

use super::{
    Exit, Failure, VerbResult,
    args::{CommandArgs, WaitArgs, WatchArgs},
    child::{Job, LossArgs},
    escape::Show,
    report::{self, Progress},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Pools of processes: join while a command runs; is the group empty?";

/// The description of `fsync group --help`.
pub(super) const LONG: &str = "\
A group is a pool of processes: each joins while its command runs, and anyone can ask whether \
the group is empty, wait until it is, or list its members. The typical use: application \
instances join 'app.grp'; a maintenance script waits until the group is empty first.

GROUP is a directory (created if missing) holding a gate file every member holds a shared lock \
on, and one registration file per member. A member that dies, even by SIGKILL, has left at once: \
the kernel drops its locks, and its registration is skipped by every look and removed by the next member to join or leave. \
A member is fsync together with its command (which inherits the membership, unless --close): \
killing fsync alone does not end the membership while the command runs.";

#[derive(Debug, Args)]
pub(crate) struct GroupCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Be a member of GROUP while COMMAND runs",
        long_about = JOIN_LONG,
        after_long_help = JOIN_AFTER
    )]
    Join(JoinArgs),
    #[command(
        about = "Exit 0 if GROUP is empty, 1 if it has members",
        long_about = "Exit 0 if GROUP is empty (or does not exist), 1 if it has members. On a local \
                      file system this reads the kernel's lock table and disturbs no one.",
        after_long_help = "Examples:\n  \
            # Maintenance only when no instance runs\n  \
            fsync group empty /srv/app/app.grp && ./maintenance.sh"
    )]
    Empty(EmptyArgs),
    #[command(
        about = "Wait until GROUP is empty",
        long_about = "Wait until GROUP is empty: exit 0 when the last member has left, or the \
                      conflict exit code (75) when --timeout expires first. On a local file system \
                      the kernel wakes us when the last member leaves; on a network file system \
                      fsync re-checks every --poll interval.",
        after_long_help = "Examples:\n  \
            # Wait up to 10 minutes for running instances to finish, then upgrade\n  \
            fsync group wait-empty -t 10m /srv/app/app.grp && ./upgrade.sh"
    )]
    WaitEmpty(WaitEmptyArgs),
    #[command(
        about = "List the live members of GROUP",
        long_about = "List the live members of GROUP (pid, host, command, since), oldest first, and \
                      their count. Members that died never appear.",
        after_long_help = "Examples:\n  \
            fsync group members /srv/app/app.grp\n  \
            fsync group members --json app.grp | jq '.count'"
    )]
    Members(MembersArgs),
    #[command(
        about = "Print 'empty' / 'not-empty' each time GROUP changes",
        long_about = "Print a line with a timestamp and 'empty' or 'not-empty' for the current state \
                      of GROUP (a GROUP that does not exist is empty; watching creates nothing), \
                      then one each time it changes, until --timeout (then exits 0) or \
                      until interrupted by signal N (INT, TERM, HUP, QUIT; then exits 128+N).",
        after_long_help = "Examples:\n  \
            fsync group watch /srv/app/app.grp\n  \
            fsync group watch --json -t 1h app.grp >> app-usage.jsonl"
    )]
    Watch(WatchCmd),
}

const JOIN_LONG: &str = "\
Be a member of GROUP while COMMAND runs, and exit with COMMAND's exit status. COMMAND sees \
FSYNC_GROUP_FIRST=1 if the group was empty when it joined, else 0. With -v fsync says on stderr \
when it was the first to join and the last to leave. Signals are forwarded to COMMAND as with \
'fsync mutex run'.

The membership is passed down to COMMAND as 'fsync mutex run' passes its lock: it lasts while \
COMMAND, or anything it left running with the membership inherited, runs, even if fsync itself \
is killed. --close does not pass it down.

--last CMDSTRING is the clean-up to FSYNC_GROUP_FIRST's set-up: the member that leaves last runs \
'sh -c CMDSTRING' before anyone can join again. A process that joins meanwhile waits until \
CMDSTRING has exited, and is then the first; until then the group is not empty to anyone who \
asks ('empty' exits 1, 'members' lists the member with CMDSTRING as its command, 'wait-empty' \
and 'watch' wait). CMDSTRING has COMMAND's environment (FSYNC_GROUP_FIRST too), its signals are \
forwarded as COMMAND's were, and unless --close it inherits what keeps joiners out, so that they \
stay out while it runs even if fsync is killed. It does not run when other members are still \
in, nor when a process COMMAND left running still holds the membership: then the last to leave \
is that process, which runs nothing (nor does --delete delete anything then). It runs whether \
COMMAND succeeded or not. fsync exits with COMMAND's status all the same: if CMDSTRING fails, \
fsync says so on stderr ('fsync: GROUP: --last command exited N') and the exit status is still \
COMMAND's. CMDSTRING must not join GROUP (it would wait for itself), nor, on a network file \
system, ask whether GROUP is empty (that waits for it too).

-t bounds leaving too (by at least a second): a member that cannot have the join step within it \
(another user sharing the group can hold it for ever) leaves without checking whether it is the \
last, runs no --last and deletes nothing, and says so.";

const JOIN_AFTER: &str = "\
Preparing a group directory: members create nothing but their registrations, in GROUP/members; \
the rest they only open and lock, and opening an existing file read-only is enough for that on \
a local file system. So an administrator can prepare GROUP for users who may not write it: the \
directory GROUP, the empty files GROUP/gate and GROUP/join.lock, and the directory GROUP/members, \
writable by every member and sticky, so that members cannot remove each other's registrations \
(mode 1777, or 3770 with the group of the members). Everything else may stay read-only, owned by \
the administrator. On a network file system an exclusive lock needs write access: there gate and \
join.lock must be writable by the members (mode 0666, or 0660 with their group). A member that \
cannot create its registration, or what is missing from GROUP, fails with status 77 and says \
what must be writable. --delete removes nothing from a directory the member may not change: a \
prepared directory stays as it was made. In a sticky members directory a member that died \
leaves its registration behind until its owner or root lists the group; everyone passes over it \
meanwhile.

Examples:
  # Each application instance is a member while it runs
  fsync group join /srv/app/app.grp -- ./app-server

  # Initialise shared state only in the first instance
  fsync group join app.grp -- sh -c '[ \"$FSYNC_GROUP_FIRST\" = 1 ] && ./init; exec ./app'

  # Set up with the first instance (./app sees FSYNC_GROUP_FIRST=1), tear down after the
  # last one; no instance starts while ./teardown runs
  fsync group join --last ./teardown app.grp -- ./app

  # Leave no files behind when the last member goes
  fsync group join --delete /tmp/batch.grp -- ./worker

  # Prepare a group directory for the users of Unix group 'app' (as root)
  install -d -m 0755 /srv/app/app.grp
  install -m 0644 /dev/null /srv/app/app.grp/gate
  install -m 0644 /dev/null /srv/app/app.grp/join.lock
  install -d -g app -m 3770 /srv/app/app.grp/members";

#[derive(Debug, Args)]
#[command(mut_arg("command", |arg| {
    arg.help("The command to run as a member, and its arguments (after `--`)")
}))]
struct JoinArgs {
    /// The group directory: created if missing
    #[arg(value_name = "GROUP")]
    group: PathBuf,

    #[command(flatten)]
    wait: WaitArgs,

    /// Remove the group's files when the last member leaves (nothing from a directory the
    /// member may not change)
    #[arg(long)]
    delete: bool,

    /// Do not pass the membership down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

    /// When this member is the last to leave, run CMDSTRING with 'sh -c' before anyone can
    /// join again (clean-up: the mirror of FSYNC_GROUP_FIRST)
    #[arg(long, value_name = "CMDSTRING")]
    last: Option<OsString>,

    #[command(flatten)]
    loss: LossArgs,

    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
struct EmptyArgs {
    #[arg(value_name = "GROUP")]
    group: PathBuf,
}

#[derive(Debug, Args)]
struct WaitEmptyArgs {
    #[arg(value_name = "GROUP")]
    group: PathBuf,

    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, Args)]
struct MembersArgs {
    #[arg(value_name = "GROUP")]
    group: PathBuf,

    /// One JSON object: {"path", "count", "members": [{"pid", "child_pid", "host", "command",
    /// "since"}]}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct WatchCmd {
    #[arg(value_name = "GROUP")]
    group: PathBuf,

    /// One JSON object per line: {"time", "event": "empty"|"not-empty", "path"}
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    watch: WatchArgs,
}

pub(super) fn run(cmd: GroupCommand) -> VerbResult {
    let verbose = match &cmd.verb {
        Verb::Join(a) => Some((&a.group, a.wait.verbose)),
        Verb::WaitEmpty(a) => Some((&a.group, a.wait.verbose)),
        _ => None,
    };
    if let Some((group, true)) = verbose {
        report::warn_foreign(
            group,
            "remove its gate or its members' registrations and so make it look empty while members are in",
        );
    }
    match cmd.verb {
        Verb::Join(a) => join(a),
        Verb::Empty(a) => Ok(if group::is_empty(&a.group)? {
            Exit::OK
        } else {
            Exit::NO
        }),
        Verb::WaitEmpty(a) => {
            let mut progress = Progress::new(&a.wait, format!("{} to be empty", a.group.shown()))
                .holder(|| members_text(&a.group));
            let outcome = group::wait_empty_with(&a.group, a.wait.timeout(), a.wait.poll, |_| {
                progress.waiting();
            })?;
            progress.settle(outcome, |()| format!("{} is empty", a.group.shown()))?;
            Ok(Exit::OK)
        }
        Verb::Members(a) => members(a),
        Verb::Watch(a) => watch(a),
    }
}

/// The shortest wait to leave that `-t` gives: members joining and leaving hold the join lock
/// a moment each.
const LEAVE_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(1);

fn join(a: JoinArgs) -> VerbResult {
    let mut group = Group::new(&a.group)
        .delete_when_empty(a.delete)
        .poll_interval(a.wait.poll);
    // -t bounds leaving too (another user sharing the group can hold its join lock for ever),
    // never below a moment's wait for a member joining or leaving at the same instant.
    if let Some(timeout) = a.wait.timeout() {
        group = group.leave_timeout(timeout.max(LEAVE_AT_LEAST));
    }
    // Joining waits only while another member joins or leaves, holding GROUP/join.lock (the
    // protocol is in the library's `group` module).
    let join_lock = a.group.join("join.lock");
    let mut progress = Progress::new(&a.wait, format!("{} to let us join", a.group.shown()))
        .holder(|| {
            let h = fsync::mutex::status(&join_lock).ok()?.holder?;
            Some(format!("join lock {}", report::held_by(&h)))
        });
    let outcome = group.join_with(a.wait.timeout(), |_| progress.waiting())?;
    let mut member = progress.settle(outcome, |m| match m.first() {
        true => format!("joined {} as its first member", a.group.shown()),
        false => format!("joined {}", a.group.shown()),
    })?;
    let first = member.first();
    let job = a.command.job(vec![(
        "FSYNC_GROUP_FIRST".to_string(),
        if first { "1" } else { "0" }.to_string(),
    )]);
    // COMMAND that cannot be started ends the membership as any other COMMAND does (the last
    // member still runs --last); its error is said after.
    let exit = job.run_under(&mut member, a.close, &a.loss, &a.group, a.wait.verbose);
    let left = match leave(member, a.last.as_deref(), &job.env, &a.group, &mut progress) {
        Ok(left) => left,
        // The lock was lost with the link to the file server, which leaving needs too: the
        // loss, already reported, is the outcome.
        Err(failure) if exit.as_ref().is_ok_and(|e| *e == Exit::LOCK_LOST) => {
            super::warn(failure);
            return exit;
        }
        Err(failure) => return Err(failure),
    };
    progress.say(|| match left {
        Left::Last => format!("left {} as its last member", a.group.shown()),
        Left::NotLast => format!("left {}", a.group.shown()),
        Left::StillHeld => format!(
            "left {}; a process the command left running is still a member (it inherited \
             the membership)",
            a.group.shown()
        ),
        Left::Unchecked => format!("left {} without checking for others", a.group.shown()),
        _ => format!("left {}", a.group.shown()),
    });
    if left == Left::Unchecked
        && (a.last.is_some() || a.delete)
        && fsync::wait::cancelled().is_none()
    {
        super::warn(Failure::Lib(fsync::Error::new(
            &join_lock,
            fsync::ErrorKind::TimedOut,
            "gave up waiting for the join lock to leave, which another process holds: left \
             without checking whether this was the last member (no --last, no --delete)",
        )));
    }
    exit
}

/// Leave the group, running CMDSTRING first if this member is the last (--last).
fn leave(
    member: group::Membership,
    last: Option<&std::ffi::OsStr>,
    env: &[(String, String)],
    group: &Path,
    progress: &mut Progress,
) -> Result<Left, Failure> {
    Ok(match last {
        None => member.leave()?,
        Some(cmdstring) => {
            let argv = ["sh".into(), "-c".into(), cmdstring.to_os_string()];
            // The environment COMMAND had (FSYNC_GROUP_FIRST).
            let cleanup = Job {
                argv: &argv,
                env: env.to_vec(),
            };
            let (left, ran) = member.leave_then(|c| {
                progress.say(|| {
                    format!(
                        "left {} as its last member; running the --last command",
                        group.shown()
                    )
                });
                c.set_child(None, &cleanup.command_line());
                cleanup.run(|pid| c.set_child(Some(pid), &cleanup.command_line()))
            })?;
            if let Some(done) = ran {
                last_failed(group, done);
            }
            left
        }
    })
}

/// Say how the --last command failed, if it did. It does not decide fsync's exit status:
/// COMMAND's does (as after a failed --delete of 'mutex run').
fn last_failed(group: &Path, done: VerbResult) {
    let what = match done {
        Ok(exit) if exit == Exit::OK => return,
        Ok(Exit {
            signal: Some(sig), ..
        }) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string());
            format!("--last command died of {name}")
        }
        Ok(exit) => format!("--last command exited {}", exit.code),
        Err(failure) => format!("--last command: {}", super::failure_text(&failure)),
    };
    report::warn_escaped(group, &what);
}

/// "1 member: pid 12 on host: cmd, since ..." for `-v` (the first few of many).
fn members_text(group: &std::path::Path) -> Option<String> {
    const SHOWN: usize = 3;
    let list = group::members(group).ok()?;
    let named: Vec<String> = list.iter().take(SHOWN).map(report::holder_text).collect();
    let mut text = match list.len() {
        0 => return None,
        1 => format!("1 member: {}", named.join("; ")),
        n => format!("{n} members: {}", named.join("; ")),
    };
    if list.len() > SHOWN {
        text += &format!("; and {} more", list.len() - SHOWN);
    }
    Some(text)
}

/// `fsync group members --json` (docs/json.md, `group-members`).
#[derive(Serialize)]
struct MembersJson<'a> {
    path: String,
    count: usize,
    members: Vec<report::HolderJson<'a>>,
}

/// A line of `fsync group watch --json` (docs/json.md, `group-watch`).
#[derive(Serialize)]
struct WatchJson {
    time: String,
    event: WatchEvent,
    path: String,
}

#[derive(Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
enum WatchEvent {
    Empty,
    NotEmpty,
}

impl WatchEvent {
    /// Its word in the text form (the same as in JSON).
    fn word(self) -> &'static str {
        match self {
            WatchEvent::Empty => "empty",
            WatchEvent::NotEmpty => "not-empty",
        }
    }
}

fn members(a: MembersArgs) -> VerbResult {
    let list = group::members(&a.group)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let line = MembersJson {
            path: report::path_text(&a.group),
            count: list.len(),
            members: list.iter().map(report::HolderJson::from).collect(),
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        for h in &list {
            writeln!(out, "{}", report::holder_text(h)).or_stdout()?;
        }
        writeln!(
            out,
            "{} member{}",
            list.len(),
            if list.len() == 1 { "" } else { "s" }
        )
        .or_stdout()?;
    }
    Ok(Exit::OK)
}

fn watch(a: WatchCmd) -> VerbResult {
    let mut watch = group::watch(&a.group, a.watch.timeout, a.watch.poll)?;
    let event = |empty| match empty {
        true => WatchEvent::Empty,
        false => WatchEvent::NotEmpty,
    };
    print_event(&a, event(watch.is_empty()))?;
    for change in watch.by_ref() {
        print_event(&a, event(change? == group::Change::Empty))?;
    }
    Ok(watch.interrupted().map_or(Exit::OK, Exit::signal))
}

/// A line of `fsync group watch`: the time and the state the group is in from now on.
fn print_event(a: &WatchCmd, event: WatchEvent) -> Result<(), Failure> {
    let json = |time| WatchJson {
        time,
        event,
        path: report::path_text(&a.group),
    };
    report::watch_line(a.json, json, || event.word().to_string()).or_stdout()
}
