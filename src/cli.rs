/*!
The command-line layer: the only place clap types exist.

Each subcommand module turns its arguments into plain calls of the library, and returns an
[`Exit`] or a [`Failure`]; [`main`] is the one place that prints failures and picks exit codes.
*/

mod args;
mod bus;
mod child;
mod doctor;
mod duration;
mod environment;
mod escape;
mod event;
mod exit_code;
mod flock;
mod generate;
mod group;
mod grouplock;
mod msg;
mod mutex;
mod payload;
mod report;
mod sem;
mod swmr;

use std::{fmt, io::Write};

use clap::{Parser, Subcommand};
use escape::Show as _;

pub(crate) use exit_code::Exit;

const ABOUT: &str = "Synchronise processes through the file system";

/// The top manual page's NOTES (too long for `--help`).
const NOTES: &str = "\
Network file systems (NFS, SMB/CIFS, FUSE such as GlusterFS, MooseFS or sshfs, Ceph; found with \
statfs, see 'fsync doctor'): whole-file and byte-range locks, exclusive create, link and rename \
work across hosts, so every primitive keeps its promises there. What does not cross hosts is \
change notification: dnotify and inotify never see another host's changes, so waits for events, \
messages, semaphore slots and watches re-check every --poll interval (50ms by default); lock \
waits block in the lock call, which the file server wakes (made, for whole files and byte ranges, by a child \
process on the same open file, which fsync kills when -t or a signal ends the wait: a call the server must answer \
once interrupted, and a GlusterFS client has been seen never to, cannot hold fsync). Measured between two clients \
(bench/netfs.sh, p50): a mutex hand-over in 6.6 ms on GlusterFS and 5.0 ms on MooseFS (flock(1) \
on the same work: 3.6 and 3.1 ms; the rest is the name check by the path and the holder \
record's round trips to the server, which the lock's guarantees need); a waiter sees an event or has a message about half a poll \
interval after the signal or post returned, 25 to 28 ms at the default. Measured on GlusterFS, MooseFS and CephFS (ceph-fuse); NFS and SMB are \
described from their documentation: check a mount with 'fsync doctor'.

A host cut off from the server keeps believing it holds its locks, while the server gives them \
to others after its timeout. So a command run under a lock on a network file system (by a run \
verb, 'group join' or 'bus connect --hold') has a lease (--lease): the lock is checked every \
second, from a thread that a hung call cannot stop, and once \
the server has not confirmed it for the lease, or has said it is gone, fsync stops the command \
(exit 76; see --on-lost). The lease must end before the server's timeout, less the time the \
command needs to stop (up to 10 s of grace after TERM, then KILL). Where the mount shows the \
server's timeout, the default lease is read from it: on GlusterFS the client's ping-timeout in \
force (MOUNT/.meta/graphs/active/VOLUME-client-N/private; a volume option changed under a \
mounted client is followed, also by a command already running: its lease is read again every \
5 s, and -v says when it changes), the lease half of it less a second (20 s for the default 42 s, 4 s \
for 10 s) and the grace what is left less a second, at most 10 s; on NFSv4 the client's lease \
time (lease_time in /proc/self/mountstats, 90 s by default: a 44 s lease). Elsewhere it is a guess by \
file system type, which 'fsync doctor' and -v say (a MooseFS client's .params shows its own \
settings, not the master's session timeout): MooseFS 30s (the master keeps a silent \
client's session, and its locks, for SESSION_SUSTAIN_TIME: 60 s at the least, a day by \
default), NFSv3 30s, CephFS 14s (the MDS frees a silent client's locks after the larger of its \
session_timeout and session_autoclose, which Ceph does not let go below 30 s; the client shows \
the first only on its admin socket), SMB 20s, other network file systems \
10s; lower --lease where the server's timeout is lower. Measured with one host cut off (its link down, or its \
packets silently dropped), holding a lock, a group membership and a bus name: on MooseFS its \
commands stopped 28 to 30 s after the cut, the other host got each after 74 to 76 s; on \
GlusterFS (ping-timeout lowered to 10 s, the default lease read from the mount: 4 s) they \
stopped after 3.9 s, the other host got each after 10.6 s. While cut off, fsync itself may not be able to exit until the server \
answers again (its command is stopped), and on FUSE file systems every process that inherited \
the lock's descriptor blocks when it exits, until then (the kernel flushes the file with the \
server on every close). Use FSYNC_FENCE to let the protected resource reject a stale holder. \
The locks of a client whose process dies go at once; those of a machine that vanishes, after the \
server's timeout.

Mount options: on NFS never 'nolock' or 'local_lock' (locks would stay on one host), and \
'lookupcache=positive' (or 'noac') so that new and removed files are seen promptly; an exclusive \
lock needs write access to the lock file. On GlusterFS turn client caching off (entry and \
attribute timeouts 0, stat-prefetch, quick-read, io-cache, open-behind and write-behind off), as \
fsync's own cross-host test bed does: with the defaults, stale caches lose updates made under a lock. \
Do not mix whole-file and byte-range locks on one file (--range): NFS and GlusterFS emulate \
flock(2) with a whole-file POSIX lock, and the two collide (on MooseFS they do not, but a lock \
protocol should not depend on it).

Shared directories such as /tmp (threat model; SECURITY.md in the sources has the details): \
fsync trusts the caller, root, and the path it was given (a final symbolic link only if the \
caller or root owns it). Another user sharing the directory may have created a primitive's \
directory first and may put links, FIFOs, devices, directories or files of their own anywhere \
in it; fsync reaches every entry from an open descriptor of its directory with O_NOFOLLOW and \
O_NONBLOCK and checks its type, so it never reads, writes, truncates, locks or deletes anything \
through a link, never hangs on a FIFO, and reports such an entry (exit 66 or 77) or, in a \
queue, skips it with one warning and goes on. The primitive's own directory is opened from its \
parent's descriptor and never by its path again, so swapping it with a link in a loop finds no \
window. It writes into a file it did not just create only where the protocol shares it (a \
mailbox's seq) and only if no other name reaches it (a hard link to your file, even one \
removed right after the open, is refused), writes holder records only if the caller owns them, and believes a record of another user only about that user's own \
processes. 'event reset' removes only an empty regular file, and in a sticky directory only \
the caller's. In a world-writable sticky directory such as /tmp a lock file another user made is \
refused (exit 77), as the kernel's fs.protected_regular refuses it: they could remove it while \
you hold it; a semaphore or group another user made there is used, and -v and 'fsync doctor' \
say what they can do to it. Such a user can still deny service (hold a lock, fill a queue, signal an event, \
make a directory unusable); they cannot make fsync act on a file of yours or read one for them. \
Holder records and registrations are created 0644 and payloads 0640, less the umask. \
Lock files inside a primitive's directory (a mailbox's seq, a group's gate) can be opened only \
by who may write that directory, and follow its mode when their owner uses them: after a chmod \
that shares it, the owner's next use widens them; until then others are told which file. \
FSYNC_FENCE grows strictly from holder to holder and stays below 2^63: it is kept in the record \
(with --delete, in the directory's .fsync.fence), believed and written only in files of the \
caller or root with one link, and where no such file can keep it, in a private mark on this \
host (under $XDG_RUNTIME_DIR, /run/user/UID, /run for root, or ~/.cache). Between users who \
do not trust each other, and across hosts without a shared record, it grows with the clock.";

const LONG_ABOUT: &str = "\
Synchronise processes through the file system: locks, groups, events, messages and semaphores \
for shell scripts, cron jobs and CI steps, on one machine or between machines that share a \
directory (NFS, SMB, cluster file systems). No server, no daemon: the shared directory is the \
medium. Waits block in the kernel, so a release wakes the next waiter at once. Linux only.

'fsync COMMAND --help' explains each command; the manual page fsync(1) covers network file \
systems, shared directories and the environment.";

/// The top-level `--help`'s examples, after the commands and options.
const ROOT_EXAMPLES: &str = "\
Examples:
  fsync mutex run -n /var/lock/backup.lck -- /usr/local/bin/backup
  fsync group join /srv/app.grp -- ./server   # elsewhere: fsync group empty /srv/app.grp";

/// The parsed command line.
///
/// Arguments are built only for the subcommand and verb the command line names: `Command` and
/// every subcommand's verb enum say `#[command(defer = true)]`. clap would otherwise build every
/// argument of every verb before it looks at one: for a lock wrapper that runs once per cron
/// job or CI step, about a third of its start-up. The root still holds the nine subcommands as
/// unbuilt shells (names and texts), a few microseconds that `--version` pays too; BENCHMARKS.md
/// section 16 has the instruction counts.
///
/// A parent lists its subcommands with their `about` before building them, so the texts of a
/// command sit on its enum variant, not on the struct of its arguments; and the structs that
/// are flattened into others carry no doc comment, which clap would make the `about` of the
/// command they are flattened into (clap-rs/clap#3127). A unit test checks that every `--help`
/// printed from the lazily built tree is that of the whole tree.
#[derive(Debug, Parser)]
#[command(
    name = "fsync",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = ROOT_EXAMPLES,
    infer_long_args = true,
    propagate_version = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Parse the process's arguments.
fn parse() -> Result<Cli, ParseError> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    let parsed = cmd.try_get_matches_from_mut(&args).and_then(|mut matches| {
        // (`from_arg_matches` would clone the matches first.)
        let cli = Cli::from_arg_matches_mut(&mut matches);
        std::mem::forget(matches);
        cli
    });
    let parsed = parsed.map_err(|error| ParseError {
        command: command_path(&cmd, &args),
        error,
    });
    // Tearing the tree down costs as much as a fifth of a short run, and the process is about
    // to end: leave it to exit.
    std::mem::forget(cmd);
    parsed
}

/// What clap said, and the (sub)command the arguments name, for its `--help`.
struct ParseError {
    command: String,
    error: clap::Error,
}

impl ParseError {
    /// Help and version (and help instead of a missing subcommand) print as clap renders them.
    fn is_help(&self) -> bool {
        use clap::error::ErrorKind;
        !self.error.use_stderr()
            || self.error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    }

    /// A usage error as one line: clap's message and tips, without its usage block, then where
    /// the help is: `unexpected argument '-1' found; tip: ... (try 'fsync mutex run --help')`.
    fn one_line(&self) -> String {
        let rendered = self.error.render().to_string();
        let rendered = rendered.strip_prefix("error: ").unwrap_or(&rendered);
        let mut parts: Vec<String> = Vec::new();
        for (i, block) in rendered.split("\n\n").enumerate() {
            let block = block.trim();
            if i > 0 && (block.starts_with("Usage:") || block.starts_with("For more information")) {
                continue;
            }
            for raw in block.lines() {
                let line = raw.trim();
                match parts.last_mut() {
                    _ if line.is_empty() => {}
                    // "... not provided:\n  <LOCK>\n  <COMMAND>..." continues its line.
                    Some(last) if raw.starts_with(' ') && !line.starts_with("tip:") => {
                        last.push_str(if last.ends_with(':') { " " } else { ", " });
                        last.push_str(line);
                    }
                    _ => parts.push(line.to_owned()),
                }
            }
        }
        format!("{} (try '{} --help')", parts.join("; "), self.command)
    }
}

/// The command and subcommands that `args` name, as far as they are known: `fsync mutex run`.
fn command_path(root: &clap::Command, args: &[std::ffi::OsString]) -> String {
    let mut cmd = root;
    let mut path = String::from(root.get_name());
    for arg in args.iter().skip(1) {
        let Some(arg) = arg.to_str() else { break };
        if arg.starts_with('-') {
            continue;
        }
        let Some(sub) = cmd.find_subcommand(arg) else {
            break;
        };
        path.push(' ');
        path.push_str(sub.get_name());
        cmd = sub;
    }
    path
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    #[command(about = mutex::ABOUT, long_about = mutex::LONG)]
    Mutex(mutex::MutexCommand),
    #[command(about = group::ABOUT, long_about = group::LONG)]
    Group(group::GroupCommand),
    #[command(about = event::ABOUT, long_about = event::LONG)]
    Event(event::EventCommand),
    #[command(about = msg::ABOUT, long_about = msg::LONG)]
    Msg(msg::MsgCommand),
    #[command(about = bus::ABOUT, long_about = bus::LONG)]
    Bus(bus::BusCommand),
    #[command(about = swmr::ABOUT, long_about = swmr::LONG)]
    Swmr(swmr::SwmrCommand),
    #[command(about = sem::ABOUT, long_about = sem::LONG)]
    Sem(sem::SemCommand),
    #[command(about = grouplock::ABOUT, long_about = grouplock::LONG)]
    Grouplock(grouplock::GroupLockCommand),
    #[command(about = doctor::ABOUT, long_about = doctor::LONG, after_long_help = doctor::EXAMPLES)]
    Doctor(doctor::DoctorArgs),
    #[command(about = flock::ABOUT, long_about = flock::LONG, after_long_help = flock::EXAMPLES)]
    Flock(flock::FlockArgs),
    #[command(
        about = generate::COMPLETIONS_ABOUT,
        long_about = generate::COMPLETIONS_LONG,
        after_long_help = generate::COMPLETIONS_EXAMPLES
    )]
    Completions(generate::CompletionsArgs),
    #[command(
        about = generate::MAN_ABOUT,
        long_about = generate::MAN_LONG,
        after_long_help = generate::MAN_EXAMPLES
    )]
    Man(generate::ManArgs),
}

/// Why a verb failed; printed by [`main`] as one `fsync: ...` line.
#[derive(Debug)]
pub(crate) enum Failure {
    Lib(fsync::Error),
    /// COMMAND (or what stands for it, `--when 'CONDITION'`) could not be started.
    Exec {
        program: std::ffi::OsString,
        exit: Exit,
        cause: String,
    },
    /// Our own output went away (`fsync mutex watch L | head -1`): stop quietly.
    BrokenPipe,
    /// The command line is wrong (clap's message, on one line).
    Usage(String),
    /// The verb ends early with this status, with nothing left to say: its wait gave up or was
    /// interrupted (which `-v` has said).
    Ended(Exit),
    /// A limit on a short wait gave up (`msg post -t`): the error says on what; the status is
    /// `-E`'s.
    GaveUp(fsync::Error, Exit),
}

/// A library error; one of kind `Interrupted` (a cancellation signal ended a call that does not
/// wait, such as a post reading its payload) ends fsync as the signal would, without a message.
impl From<fsync::Error> for Failure {
    fn from(e: fsync::Error) -> Failure {
        match (e.kind(), fsync::wait::cancelled()) {
            (fsync::ErrorKind::Interrupted, Some(sig)) => Failure::Ended(Exit::signal(sig)),
            _ => Failure::Lib(e),
        }
    }
}

impl From<Exit> for Failure {
    fn from(exit: Exit) -> Failure {
        Failure::Ended(exit)
    }
}

/// Our own output failed: says so of standard output, or stops quietly when its reader has
/// gone (`BrokenPipe`). Written out at each write (`.or_stdout()?`), so that no other failure
/// can pass for one of output.
pub(crate) trait OrStdout<T> {
    fn or_stdout(self) -> Result<T, Failure>;
}

impl<T> OrStdout<T> for std::io::Result<T> {
    fn or_stdout(self) -> Result<T, Failure> {
        self.map_err(stdout_failed)
    }
}

/// A write to standard output that failed (a closed pipe ends the program quietly).
pub(crate) fn stdout_failed(e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => Failure::BrokenPipe,
        _ => Failure::Lib(fsync::Error::io(
            std::path::Path::new("standard output"),
            "cannot write",
            e,
        )),
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Lib(e) | Failure::GaveUp(e, _) => write!(f, "{e}"),
            Failure::Exec { program, cause, .. } => {
                write!(f, "{}: {cause}", program.to_string_lossy())
            }
            Failure::BrokenPipe => write!(f, "broken pipe"),
            Failure::Usage(message) => write!(f, "{message}"),
            Failure::Ended(exit) => write!(f, "ended with status {}", exit.code),
        }
    }
}

impl Failure {
    fn exit(&self) -> Exit {
        match self {
            Failure::Lib(e) => Exit::of_error(e.kind()),
            Failure::Exec { exit, .. } => *exit,
            Failure::BrokenPipe => Exit::OK,
            Failure::Usage(_) => Exit::USAGE,
            Failure::Ended(exit) | Failure::GaveUp(_, exit) => *exit,
        }
    }
}

/// How a verb ends: the exit status, or why it failed. (Named so as not to be confused with
/// [`fsync::Outcome`], how a wait ended.)
pub(crate) type VerbResult = Result<Exit, Failure>;

/// Whether this is `fsync flock` (or `flock` through a link), which leaves closed standard
/// descriptors closed: its lock file takes the first free one, as flock(1)'s does.
pub(crate) fn is_flock() -> bool {
    flock::invocation(&std::env::args_os().take(2).collect::<Vec<_>>()).is_some()
}

/// Run the command line; returns how the process is to end.
pub(crate) fn main() -> Exit {
    std::panic::set_hook(Box::new(|info| {
        // Never panic again here, even if stderr is gone.
        let info = escape::escaped(&info.to_string()).into_owned();
        let _ = writeln!(std::io::stderr(), "fsync: internal error: {info}");
        std::process::exit(Exit::INTERNAL.code.into());
    }));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some((name, words)) = flock::invocation(&args) {
        return flock::main(&name, words);
    }
    let result = match parse() {
        Ok(cli) => {
            fsync::wait::install_cancel_handlers();
            dispatch(cli.command)
        }
        Err(e) if e.is_help() => {
            let _ = e.error.print();
            return if e.error.use_stderr() {
                Exit::USAGE
            } else {
                Exit::OK
            };
        }
        Err(e) => Err(Failure::Usage(e.one_line())),
    };
    match result {
        Ok(exit) => exit,
        Err(Failure::BrokenPipe) => Exit::OK,
        Err(Failure::Ended(exit)) => exit,
        Err(failure) => {
            print_failure(&failure);
            failure.exit()
        }
    }
}

/// A failure that does not decide the exit status (the command's does, as after a failed
/// `--delete`): the same one `fsync: ` line on stderr, as a warning.
pub(crate) fn warn(failure: Failure) {
    print_failure(&failure);
}

/// The one `fsync: ` line of a failure. Its paths may name entries another user made (a
/// message in a shared queue), so the line is escaped: one line, no control characters.
fn print_failure(failure: &Failure) {
    let _ = writeln!(std::io::stderr(), "{}", failure_line(failure));
}

fn failure_line(failure: &Failure) -> String {
    format!("fsync: {}", failure_text(failure))
}

/// A failure as text output shows it: `PATH: cause`, the path escaped byte for byte (as every
/// text output shows paths) and the cause escaped.
fn failure_text(failure: &Failure) -> String {
    match failure {
        Failure::Lib(e) => report::error_text(e),
        Failure::Exec { program, cause, .. } => {
            format!("{}: {}", program.shown(), escape::escaped(cause))
        }
        _ => escape::escaped(&failure.to_string()).into_owned(),
    }
}

fn dispatch(command: Command) -> VerbResult {
    match command {
        Command::Mutex(cmd) => mutex::run(cmd),
        Command::Group(cmd) => group::run(cmd),
        Command::Swmr(cmd) => swmr::run(cmd),
        Command::Sem(cmd) => sem::run(cmd),
        Command::Grouplock(cmd) => grouplock::run(cmd),
        Command::Doctor(a) => doctor::run(a),
        // `main` hands `fsync flock ...` to flock's own parser before clap sees it; should clap
        // ever parse it, the process's words still go to that parser.
        Command::Flock(_) => {
            let args: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
            Ok(flock::main("fsync", args))
        }
        Command::Event(cmd) => event::run(cmd),
        Command::Msg(cmd) => msg::run(cmd),
        Command::Bus(cmd) => bus::run(cmd),
        Command::Completions(a) => generate::completions(a),
        Command::Man(a) => generate::man(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// What `-h` and `--help` print, from a tree the parser builds only as far as the command
    /// line names, is what the whole tree built at once says: deferred construction loses no
    /// text (a parent lists its subcommands with the `about` they have before they are built).
    #[test]
    fn help_is_the_same_when_built_lazily() {
        fn check(cmd: &mut clap::Command, path: &mut Vec<String>) {
            for flag in ["-h", "--help"] {
                let args: Vec<&str> = std::iter::once("fsync")
                    .chain(path.iter().map(String::as_str))
                    .chain([flag])
                    .collect();
                let lazy = Cli::command().try_get_matches_from(&args).unwrap_err();
                let whole = match flag {
                    "-h" => cmd.render_help(),
                    _ => cmd.render_long_help(),
                };
                assert_eq!(lazy.to_string(), whole.to_string(), "{}", args.join(" "));
            }
            for sub in cmd.get_subcommands_mut().filter(|s| s.get_name() != "help") {
                path.push(sub.get_name().to_owned());
                check(sub, path);
                path.pop();
            }
        }
        let mut whole = Cli::command();
        whole.build();
        check(&mut whole, &mut Vec::new());
    }

    /// Help text is shown as written: no escape (`\"`) of the source shows through.
    #[test]
    fn help_text_has_no_backslashes() {
        fn check(cmd: &clap::Command, path: &str, wrong: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            let texts = [
                cmd.get_about(),
                cmd.get_long_about(),
                cmd.get_after_long_help(),
            ];
            let args = cmd
                .get_arguments()
                .flat_map(|a| [a.get_help(), a.get_long_help()]);
            for text in texts.into_iter().chain(args).flatten() {
                let text = text.to_string();
                if text.contains('\\') {
                    wrong.push(format!("{path}: {text}"));
                }
            }
            for sub in cmd.get_subcommands() {
                check(sub, &path, wrong);
            }
        }
        let mut wrong = Vec::new();
        let mut root = Cli::command();
        root.build();
        check(&root, "", &mut wrong);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// An error naming an entry another user made is one line, with no control character.
    #[test]
    fn failure_lines_are_escaped() {
        let path = std::path::Path::new("/tmp/box/q/x\nfsync: forged\x1b]0;pwned\x07");
        let e = fsync::Error::new(path, fsync::ErrorKind::NotFound, "is a FIFO, not a message");
        assert_eq!(
            failure_line(&Failure::Lib(e)),
            "fsync: /tmp/box/q/x\\nfsync: forged\\e]0;pwned\\a: is a FIFO, not a message"
        );
        // A path that is not UTF-8 keeps its bytes, as `\xHH`.
        use std::os::unix::ffi::OsStrExt as _;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/tmp/\xff.lck"));
        let e = fsync::Error::new(path, fsync::ErrorKind::Invalid, "bad");
        assert_eq!(failure_line(&Failure::Lib(e)), "fsync: /tmp/\\xff.lck: bad");
    }

    /// Every watch verb's help says how it ends: 0 at the timeout, 128+N when interrupted.
    #[test]
    fn watch_help_gives_the_exit_status_when_interrupted() {
        let mut root = Cli::command();
        root.build();
        let watches: Vec<&clap::Command> = root
            .get_subcommands()
            .filter_map(|c| c.find_subcommand("watch"))
            .collect();
        assert!(watches.len() >= 2);
        for watch in watches {
            let text = watch.get_long_about().expect("long help").to_string();
            assert!(text.contains("128+N"), "{text}");
        }
    }
}
