/*!
`fsync group`: join a pool of processes while a command runs; ask whether it is empty, wait
for it to empty, list and watch its members. The protocol is in the library's `group` module.
*/

use std::{io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::{
    group::{self, Left},
    Group,
};
use serde::Serialize;

use super::{
    args::{CommandArgs, WaitArgs, WatchArgs},
    report::{self, Progress},
    Exit, VerbResult,
};

/// The one-line description, for `fsync --help`.
pub const ABOUT: &str = "Pools of processes: join while a command runs; is the group empty?";

/// The description of `fsync group --help`.
pub const LONG: &str = "\
A group is a pool of processes: each joins while its command runs, and anyone can ask whether \
the group is empty, wait until it is, or list its members. The typical use: application \
instances join 'app.grp'; a maintenance script waits until the group is empty first.

GROUP is a directory (created if missing) holding a gate file every member holds a shared lock \
on, and one registration file per member. A member that dies, even by SIGKILL, has left at once: \
the kernel drops its locks, and its registration is removed by whoever lists the group next. \
A member is fsync together with its command (which inherits the membership, unless --close): \
killing fsync alone does not end the membership while the command runs.";

#[derive(Debug, Args)]
pub struct GroupCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Be a member of GROUP while COMMAND runs",
        long_about = "Be a member of GROUP while COMMAND runs, and exit with COMMAND's exit status. \
                      COMMAND sees FSYNC_GROUP_FIRST=1 if the group was empty when it joined, else \
                      0. With -v fsync says on stderr when it was the first to join and the last to \
                      leave. Signals are forwarded to COMMAND as with 'fsync mutex run'.\n\n\
                      The membership is passed down to COMMAND as 'fsync mutex run' passes its \
                      lock: it lasts while COMMAND, or anything it left running with the \
                      membership inherited, runs, even if fsync itself is killed. --close does not \
                      pass it down.",
        after_long_help = "Examples:\n  \
            # Each application instance is a member while it runs\n  \
            fsync group join /srv/app/app.grp -- ./app-server\n\n  \
            # Initialise shared state only in the first instance\n  \
            fsync group join app.grp -- sh -c '[ \"$FSYNC_GROUP_FIRST\" = 1 ] && ./init; exec ./app'\n\n  \
            # Leave no files behind when the last member goes\n  \
            fsync group join --delete /tmp/batch.grp -- ./worker"
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

    /// Remove the group's files when the last member leaves
    #[arg(long)]
    delete: bool,

    /// Do not pass the membership down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

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

pub fn run(cmd: GroupCommand) -> VerbResult {
    match cmd.verb {
        Verb::Join(a) => join(a),
        Verb::Empty(a) => Ok(if group::is_empty(&a.group)? {
            Exit::OK
        } else {
            Exit::NO
        }),
        Verb::WaitEmpty(a) => {
            let mut progress = Progress::new(&a.wait, format!("{} to be empty", a.group.display()))
                .holder(|| members_text(&a.group));
            let outcome =
                group::wait_empty_reporting(&a.group, a.wait.timeout(), a.wait.poll, |_| {
                    progress.waiting()
                })?;
            progress.settle(outcome, |()| format!("{} is empty", a.group.display()))?;
            Ok(Exit::OK)
        }
        Verb::Members(a) => members(a),
        Verb::Watch(a) => watch(a),
    }
}

fn join(a: JoinArgs) -> VerbResult {
    let group = Group::new(&a.group)
        .delete_when_empty(a.delete)
        .poll_interval(a.wait.poll);
    // Joining waits only while another member joins or leaves, holding GROUP/join.lock (the
    // protocol is in the library's `group` module).
    let join_lock = a.group.join("join.lock");
    let mut progress = Progress::new(&a.wait, format!("{} to let us join", a.group.display()))
        .holder(|| {
            let h = fsync::mutex::status(&join_lock).ok()?.holder?;
            Some(format!("join lock {}", report::held_by(&h)))
        });
    let outcome = group.join_with(a.wait.timeout(), |_| progress.waiting())?;
    let mut member = progress.settle(outcome, |m| match m.first() {
        true => format!("joined {} as its first member", a.group.display()),
        false => format!("joined {}", a.group.display()),
    })?;
    let first = member.first();
    let job = a.command.job(vec![(
        "FSYNC_GROUP_FIRST".to_string(),
        if first { "1" } else { "0" }.to_string(),
    )]);
    member.set_child(None, job.display());
    member.pass_down(!a.close)?;
    let exit = job.run(|pid| member.set_child(Some(pid), job.display()))?;
    let left = member.leave_reporting()?;
    progress.say(|| match left {
        Left::Last => format!("left {} as its last member", a.group.display()),
        Left::NotLast => format!("left {}", a.group.display()),
        Left::StillHeld => format!(
            "left {}; a process the command left running is still a member (it inherited \
             the membership)",
            a.group.display()
        ),
    });
    Ok(exit)
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
        report::print_json(&mut out, &line)?;
    } else {
        for h in &list {
            writeln!(out, "{}", report::holder_text(h))?;
        }
        writeln!(
            out,
            "{} member{}",
            list.len(),
            if list.len() == 1 { "" } else { "s" }
        )?;
    }
    Ok(Exit::OK)
}

fn watch(a: WatchCmd) -> VerbResult {
    let start = std::time::Instant::now();
    let mut empty = group::is_empty(&a.group)?;
    loop {
        let event = if empty {
            WatchEvent::Empty
        } else {
            WatchEvent::NotEmpty
        };
        let now = report::timestamp(std::time::SystemTime::now());
        let mut out = std::io::stdout().lock();
        if a.json {
            let line = WatchJson {
                time: now,
                event,
                path: report::path_text(&a.group),
            };
            report::print_json(&mut out, &line)?;
        } else {
            writeln!(out, "{now} {}", event.word())?;
        }
        out.flush()?;
        drop(out);
        let remaining = a.watch.remaining(start)?;
        let outcome = group::wait_for_state(&a.group, !empty, remaining, a.watch.poll)?;
        Exit::unless_acquired(outcome, Exit::OK)?;
        empty = !empty;
    }
}
