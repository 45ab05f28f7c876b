/*!
`fsync mutex`: run a command under an exclusive lock, lock a descriptor a script holds, report
and watch a lock. The protocol is in the library's `mutex` module.
*/

use std::{
    ffi::{OsStr, OsString},
    io::Write,
    os::fd::AsFd,
    path::PathBuf,
};

use clap::{Args, Subcommand};
use fsync::{
    Guard, Mode, Mutex,
    mutex::{self, HELD_ENV, Status},
};
use serde::Serialize;

use super::{
    Exit, Failure, VerbResult,
    args::{CommandArgs, WaitArgs, WatchArgs},
    child::{Job, LossArgs},
    escape::Show,
    report::{self, Progress},
};

mod status;

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Exclusive locks: run a command while holding a lock file";

/// The description of `fsync mutex --help`.
pub(super) const LONG: &str = "\
Exclusive locks on a file. 'fsync mutex run LOCK -- COMMAND' runs COMMAND while holding LOCK, \
so that two cron jobs, CI steps or scripts never touch the resource LOCK stands for at once.

The lock is a flock(2) lock, the same as util-linux flock(1), Perl's and Python's flock take, \
so fsync and those tools exclude each other on the same file. The lock file is created if \
missing and never truncated or written; who holds it is recorded in a separate file \
.NAME.fsync beside it, where the directory is writable. A lock file an administrator created \
read-only, in a directory users cannot write, works too.";

#[derive(Debug, Args)]
pub(crate) struct MutexCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Run COMMAND while holding LOCK exclusively",
        long_about = RUN_LONG,
        after_long_help = RUN_EXAMPLES,
        override_usage = "fsync mutex run [OPTIONS] <LOCK> <COMMAND>...\n       \
                          fsync mutex run [OPTIONS] <LOCK> -c <CMDSTRING>"
    )]
    Run(RunArgs),
    #[command(
        about = "Lock a descriptor the calling shell already has open",
        long_about = "Lock file descriptor N, which fsync inherits from the calling shell, for \
                      scripts of the form 'exec 9>>/var/lock/x; fsync mutex lock --fd 9'. The lock \
                      belongs to the shell's open file, so it stays held after fsync exits, until \
                      the shell closes descriptor N or runs 'fsync mutex unlock --fd N'.",
        after_long_help = LOCK_EXAMPLES
    )]
    Lock(LockArgs),
    #[command(
        about = "Release the lock held through a descriptor",
        after_long_help = "Examples:\n  exec 9>>/var/lock/mytool.lck\n  fsync mutex lock --fd 9\n  \
                           ... critical work ...\n  fsync mutex unlock --fd 9"
    )]
    Unlock(UnlockArgs),
    #[command(
        about = "Tell whether LOCK is held (exit 1) or free (exit 0), and by whom",
        long_about = "Tell whether LOCK is held (exit status 1) or free (0), and who holds it: pid, \
                      host, command and since when, where that can be known. On a local file system \
                      the lock is not touched (the kernel's lock table is read); on a network file \
                      system it is tested with a non-blocking lock that is released at once. A \
                      missing LOCK is free. Where the kernel's lock table names the holder, it is \
                      believed over the holder record beside LOCK (which another user may have \
                      written): a record naming another process is reported as untrusted. Paths, \
                      host names and command lines are shown escaped, as 'ls -b' shows file names.\n\n\
                      With --range START[:LEN], tell whether any byte of that range is locked \
                      (held, 1) or not (free, 0): a byte-range lock of 'mutex run --range', \
                      'swmr --range', 'mutex lock --fd N --range' or any program's fcntl or lockf \
                      lock, shared or exclusive, asked of the kernel (or the file server) without \
                      taking anything. It names the lock found (its bytes and mode) and, on a \
                      local file system, the process that holds it (pid and command) where /proc \
                      tells. Whole-file locks (flock) do not count for a range.",
        after_long_help = "Examples:\n  fsync mutex status /var/lock/backup.lck && echo free\n  \
                           fsync mutex status --json /var/lock/backup.lck | jq .holder.pid\n  \
                           fsync mutex status --range 7 /shared/table.lck || echo row 7 is busy"
    )]
    Status(StatusArgs),
    #[command(
        about = "Print whether LOCK is held, then a line each time it is acquired or released",
        long_about = "Print a line with a timestamp and the state of LOCK when the watch starts, \
                      'held' and the holder where known, or 'free'; then one each time LOCK is \
                      acquired or released: a timestamp, 'acquired' or 'released', and the holder \
                      where known. Changes made by fsync are seen at once; those of other tools \
                      (flock(1)) within the --poll interval. Runs until --timeout (then exits 0) or \
                      until interrupted by signal N (INT, TERM, HUP, QUIT; then exits 128+N).",
        after_long_help = "Examples:\n  fsync mutex watch /var/lock/backup.lck\n  \
                           fsync mutex watch --json -t 1h /var/lock/backup.lck >> lock-history.jsonl"
    )]
    Watch(WatchCmd),
}

const RUN_LONG: &str = "\
Run COMMAND while holding LOCK exclusively, and exit with COMMAND's exit status.

Everything from the first word after LOCK on is COMMAND's ('fsync mutex run L echo -n x' passes \
-n to echo); options go before it. LOCK is opened read-only (created if missing, never \
truncated or written), so it may be the script that runs, or a directory; on a network file \
system it is opened read-write where permitted, since an exclusive lock needs that there.

While COMMAND runs, INT, TERM, HUP and QUIT sent to fsync are forwarded to it, and the lock is \
released only after it has exited. A signal that was ignored when fsync started (nohup, trap '' \
HUP, the INT and QUIT a shell ignores for background jobs) stays ignored, by fsync and by \
COMMAND. If COMMAND dies of a signal, or a signal cancels the wait, fsync dies of that same \
signal once the lock is released, so that the shell sees it (status 128+N; ^C stops a shell \
loop around fsync).

The lock is passed down to COMMAND (as flock(1) does): it stays held while COMMAND, or anything \
it left running with the lock inherited, runs, even if fsync itself is killed. --close does not \
pass it down.

COMMAND sees FSYNC_FENCE, a fencing token greater than that of every earlier holder of LOCK: a \
resource that remembers the largest token it has seen can reject a stale holder.

Nesting: 'fsync mutex run LOCK' started anywhere inside COMMAND's process tree on the same LOCK \
runs at once (the lock is already held for it). Under --close a nested attempt fails at once \
with exit status 69 instead of waiting for ever.

--when CONDITION makes a conditional critical region: COMMAND runs, holding LOCK, only once \
'sh -c CONDITION', run while fsync holds LOCK, exits 0. Until then fsync releases LOCK after each \
evaluation and sleeps until another holder of LOCK has entered (a 'mutex run' without --when, or \
one whose CONDITION held) and left, then evaluates again: a file-based condition variable, for \
queues and hand-overs between scripts. Make CONDITION look only at what holders change under \
LOCK, and keep it from taking LOCK itself. An evaluation that finds CONDITION false wakes nobody, \
so waiters do not keep each other busy. The wake-up comes from the holder record (.NAME.fsync) \
through change notification, with no polling on a local file system; holders that leave no \
record (flock(1), -s, --range, 'mutex lock --fd', another user's fsync where the record is not \
theirs) are seen only by the --poll re-check, which runs on network file systems and where no \
record can be written (a read-only directory): there CONDITION is also evaluated every --poll.

flock(1)'s options work as they do there: -w SECS, -n/--nb, -c CMDSTRING, -s, -x/-e, -o, -E, \
--fcntl; the differences are listed in docs/flock-compat.md. A wait that gives up exits 75, not \
1, unless -E says otherwise.";

const RUN_EXAMPLES: &str = "\
Examples:
  # A cron job that must never overlap with itself; skip this run if the last one is still busy
  fsync mutex run -n /var/lock/backup.lck -- /usr/local/bin/backup

  # Wait at most 5 minutes for the deploy lock, and tell which exit status means 'gave up'
  fsync mutex run -t 5m -E 99 /srv/app/deploy.lck -- ./deploy.sh

  # A page counter, safe under any number of concurrent runs
  fsync mutex run counter.sem -- sh -c 'n=$(cat counter.dat); echo $((n+1)) > counter.dat'

  # A lock file that should not outlive its last user
  fsync mutex run --delete /tmp/job.lck -- make

  # Byte 7 of a shared file as a lock of its own: disjoint ranges run together
  fsync mutex run --range 7 /shared/table.lck -- ./update-row 7

  # A script that runs one copy at a time of itself (the FLOCKER idiom of flock(1)), locking
  # its own file; 'fsync mutex run' replaces 'flock' in it and nothing else changes
  [ \"${FLOCKER}\" != \"$0\" ] && exec env FLOCKER=\"$0\" fsync mutex run -n -E 0 \"$0\" \"$0\" \"$@\" || :

  # A bounded queue of at most 10 jobs in the file q, between a producer and a consumer: each
  # enters only when its condition holds, and sleeps (no polling) until the other has been in
  touch q; while read -r job; do fsync mutex run q.lck --when '[ $(wc -l < q) -lt 10 ]' -- sh -c 'echo \"$1\" >> q' - \"$job\"; done < jobs.txt
  while :; do fsync mutex run q.lck --when 'test -s q' -c 'head -n 1 q; sed -i 1d q'; done | sh

  # As flock(1) is used: a command string, a timeout in seconds, a shared lock
  fsync mutex run -w 10 /var/lock/db.lck -c 'pg_dump app > app.sql'
  fsync mutex run -s /var/lock/db.lck -- ./report";

#[derive(Debug, Args)]
#[command(mut_arg("command", |arg| {
    // Required, but checked by `run_command`, which can tell a descriptor number given as LOCK.
    arg.required(false)
        .help(
            "The command to run, and its arguments: everything from the first word after LOCK \
             on belongs to COMMAND ('--' before it is accepted too)",
        )
}))]
struct RunArgs {
    /// The lock file: created if missing, never truncated
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    #[command(flatten)]
    wait: WaitArgs,

    /// Remove LOCK (and its holder record) on release; racing acquirers never end up holding
    /// two different files of the same name. LOCK stays while a process COMMAND left running
    /// still holds the lock (-v says so)
    #[arg(long)]
    delete: bool,

    /// Do not pass the lock down to COMMAND's processes (flock -o)
    #[arg(short = 'o', long)]
    close: bool,

    #[command(flatten)]
    loss: LossArgs,

    /// Lock only LEN bytes of LOCK from START (decimal or 0x hex; LEN 1 if absent, 0 to the end
    /// of all offsets; bytes past the end of the file are fine) with an OFD byte-range lock:
    /// disjoint ranges do not exclude each other. No holder record, fence or nesting.
    #[arg(long, value_name = "START[:LEN]", value_parser = fsync::range::ByteRange::parse, conflicts_with = "delete")]
    range: Option<fsync::range::ByteRange>,

    /// Lock the whole file with an fcntl (OFD) lock instead of flock(2), as fcntl-lock tools
    /// (s6-setlock, flock --fcntl) do: the same as --range 0:0
    #[arg(long, conflicts_with_all = ["range", "delete"])]
    fcntl: bool,

    /// Take a shared lock (as flock -s): shared holders run together, an exclusive one waits
    /// for all of them. No holder record, fence or nesting. Of -s and -x the last given wins
    #[arg(
        short = 's',
        long,
        conflicts_with = "delete",
        overrides_with = "exclusive"
    )]
    shared: bool,

    /// Take an exclusive lock: the default (accepted as flock(1) takes it)
    #[arg(short = 'x', short_alias = 'e', long, overrides_with = "shared")]
    exclusive: bool,

    /// The permissions of LOCK if fsync creates it, less the umask (default 0666, as flock(1)
    /// creates it; octal, as chmod takes it): 0660 for a group's lock, 0666 under 'umask 0'
    /// for every user's processes
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
    mode: Option<u32>,

    /// Enter only when CONDITION holds: a shell command ('sh -c CONDITION') run under the lock,
    /// exit status 0 meaning yes. Otherwise release LOCK, sleep until another holder has entered
    /// and left (kernel-woken; also every --poll on network file systems), and evaluate again.
    /// Its output goes where fsync's does; a CONDITION the shell cannot run (status 126 or 127)
    /// is an error. With -n: evaluate once
    #[arg(
        long,
        value_name = "CONDITION",
        conflicts_with_all = ["range", "fcntl", "shared"]
    )]
    when: Option<OsString>,

    /// Run CMDSTRING with 'sh -c' (as flock -c) instead of COMMAND
    #[arg(
        short = 'c',
        long = "command",
        value_name = "CMDSTRING",
        conflicts_with = "command"
    )]
    command_string: Option<OsString>,

    /// flock -u: not an option of 'run' (see 'fsync mutex unlock')
    #[arg(short = 'u', long, hide = true)]
    unlock: bool,

    /// flock -F: not an option of 'run' (fsync always waits for COMMAND)
    #[arg(short = 'F', long, hide = true)]
    no_fork: bool,

    #[command(flatten)]
    command: CommandArgs,
}

const LOCK_EXAMPLES: &str = "\
Examples:
  # Hold a lock for the rest of a shell script (released when the script exits)
  exec 9>>/var/lock/mytool.lck
  fsync mutex lock --fd 9 -t 30s || { echo 'busy' >&2; exit 1; }

  # Several readers may share it
  exec 8</etc/app.conf
  fsync mutex lock --fd 8 --shared

  # Row 7 of a shared table, as 'mutex run --range 7' locks it
  exec 7>>/shared/table.lck
  fsync mutex lock --fd 7 --range 7 && ./update-row 7; fsync mutex unlock --fd 7 --range 7";

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("descriptor").required(true).args(["fd", "fd_number"])))]
struct LockArgs {
    /// The open file descriptor to lock
    #[arg(long = "fd", value_name = "N")]
    fd: Option<i32>,

    /// The descriptor as flock(1) takes it: 'fsync mutex lock 9' is 'fsync mutex lock --fd 9'
    #[arg(value_name = "N")]
    fd_number: Option<i32>,

    /// Take a shared lock instead of an exclusive one. Of -s and -x the last given wins
    #[arg(short = 's', long, overrides_with = "exclusive")]
    shared: bool,

    /// Take an exclusive lock: the default (accepted as flock(1) takes it)
    #[arg(short = 'x', short_alias = 'e', long, overrides_with = "shared")]
    exclusive: bool,

    /// flock -u N: not an option of 'lock' (see 'fsync mutex unlock')
    #[arg(short = 'u', long, hide = true)]
    unlock: bool,

    #[command(flatten)]
    fd_range: FdRangeArgs,

    #[command(flatten)]
    wait: WaitArgs,
}

// `--range`/`--fcntl` on `lock` and `unlock`: an OFD byte-range lock through the descriptor
// instead of a flock. (A plain comment: a doc comment would become the verbs' about text.)
#[derive(Debug, Args)]
struct FdRangeArgs {
    /// Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all
    /// offsets) with an OFD byte-range lock, as 'mutex run --range' does: disjoint ranges do not
    /// exclude each other. An exclusive range needs N open for writing
    #[arg(long, value_name = "START[:LEN]", value_parser = fsync::range::ByteRange::parse)]
    range: Option<fsync::range::ByteRange>,

    /// The whole file with an fcntl (OFD) lock instead of flock(2): the same as --range 0:0
    #[arg(long, conflicts_with = "range")]
    fcntl: bool,
}

impl FdRangeArgs {
    /// The byte range asked for, if any.
    fn range(&self) -> Option<fsync::range::ByteRange> {
        match self.fcntl {
            true => Some(fsync::range::ByteRange { start: 0, len: 0 }),
            false => self.range,
        }
    }
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("descriptor").required(true).args(["fd", "fd_number"])))]
struct UnlockArgs {
    /// The open file descriptor to unlock
    #[arg(long = "fd", value_name = "N")]
    fd: Option<i32>,

    /// The descriptor as a plain argument: 'fsync mutex unlock 9' is 'fsync mutex unlock --fd 9'
    #[arg(value_name = "N")]
    fd_number: Option<i32>,

    #[command(flatten)]
    fd_range: FdRangeArgs,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    /// One JSON object: {"path", "state": "free"|"held", "holder", "fence", "fence_withheld",
    /// "record_trusted", "untrusted_record"}, with --range also "range" and "lock" ({"start",
    /// "len", "mode": "shared"|"exclusive"}). "fence" is null where the holder record is
    /// another user's, has other links, or names a holder the kernel contradicts, and
    /// "fence_withheld" says which ("another-user", "hard-links", "contradicted")
    #[arg(long)]
    json: bool,

    /// Tell about that byte range only (LEN 1 when absent, 0: to the end of all offsets):
    /// held if any byte-range lock is held on any of its bytes
    #[arg(long, value_name = "START[:LEN]", value_parser = fsync::range::ByteRange::parse)]
    range: Option<fsync::range::ByteRange>,
}

#[derive(Debug, Args)]
#[command(mut_arg("poll", |arg| {
    arg.help("Re-check interval for changes made by tools other than fsync")
}))]
struct WatchCmd {
    #[arg(value_name = "LOCK")]
    lock: PathBuf,

    /// One JSON object per line: {"time", "event": "held"|"free"|"acquired"|"released",
    /// "path", "holder"}
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    watch: WatchArgs,
}

pub(super) fn run(cmd: MutexCommand) -> VerbResult {
    match cmd.verb {
        Verb::Run(a) => run_command(a),
        Verb::Lock(a) => lock_fd(a),
        Verb::Unlock(a) => {
            let fd = fsync::internal::inherited_fd(a.fd.or(a.fd_number).unwrap_or_default())?;
            match a.fd_range.range() {
                Some(range) => fsync::range::unlock_fd(fd.as_fd(), range)?,
                None => mutex::unlock_fd(fd.as_fd())?,
            }
            Ok(Exit::OK)
        }
        Verb::Status(a) => status::status(a),
        Verb::Watch(a) => status::watch(a),
    }
}

fn run_command(mut a: RunArgs) -> VerbResult {
    flock_only_options(&a)?;
    if a.command.argv.is_empty() && a.command_string.is_none() {
        return Err(missing_command(&a.lock));
    }
    if let Some(cmdstring) = a.command_string.take() {
        a.command.argv = vec!["sh".into(), "-c".into(), cmdstring];
    }
    if a.fcntl {
        a.range = Some(fsync::range::ByteRange { start: 0, len: 0 });
    }
    if let Some(range) = a.range {
        return run_range(&a, range);
    }
    if a.shared {
        return run_shared(&a);
    }
    let mut job = a.command.job(Vec::new());
    // The record names the command from the start: reports never show it as ours.
    let mutex = Mutex::new(&a.lock)
        .delete_on_release(a.delete)
        .poll_interval(a.wait.poll)
        .create_mode(a.mode.unwrap_or(mutex::LOCK_FILE_MODE))
        .command(job.command_line());
    let what = match &a.when {
        None => a.lock.shown().to_string(),
        Some(c) => format!("{} when '{}'", a.lock.shown(), c.shown()),
    };
    let mut progress = Progress::new(&a.wait, what.clone())
        .holder(|| holder_of(&a.lock))
        .note(mode_note(&a.lock, a.wait.poll));
    let outcome = match &a.when {
        None => mutex.acquire_with(a.wait.timeout(), |_| progress.waiting())?,
        Some(c) => {
            mutex.acquire_when_with(|| evaluate(c), a.wait.timeout(), |_| progress.waiting())?
        }
    };
    let mut guard = progress.settle(outcome, |g| match g.is_nested() {
        true => format!("acquired {what} (already held for us by an enclosing fsync)"),
        false => format!("acquired {what} (fence {})", g.fence()),
    })?;
    // Passed down before the environment is made: FSYNC_MUTEX_HELD then names the descriptor
    // (run_under's own pass_down finds it done).
    if !a.close {
        guard.pass_down()?;
    }
    job.env = vec![
        ("FSYNC_FENCE".to_string(), guard.fence().to_string()),
        (HELD_ENV.to_string(), guard.held_env()?),
    ];
    let exit = job.run_under(&mut guard, a.close, &a.loss, &a.lock, a.wait.verbose)?;
    // The command's status is what the caller asked for: a failed delete only warns.
    let released = guard.release().unwrap_or_else(|e| {
        super::warn(e.into());
        mutex::Released::Kept
    });
    if released == mutex::Released::KeptStillHeld {
        progress.say(|| {
            format!(
                "not deleting {}: another process still holds the lock (one the command left \
                 running, through a descriptor it inherited)",
                a.lock.shown()
            )
        });
    }
    Ok(exit)
}

/// `--when CONDITION`: run `sh -c CONDITION` (under the lock) and say whether it exited 0. The
/// shell's 126 and 127 (it could not run CONDITION, or found no such command) are errors, not
/// "false", so that a typing mistake does not wait for ever; a CONDITION killed by a signal (a
/// forwarded ^C) ends fsync as a COMMAND killed by it would.
fn evaluate(condition: &std::ffi::OsStr) -> Result<bool, Failure> {
    let argv = ["sh".into(), "-c".into(), condition.to_os_string()];
    let failed = |exit, cause: String| Failure::Exec {
        program: [OsStr::new("--when '"), condition, OsStr::new("'")]
            .into_iter()
            .collect(),
        exit,
        cause,
    };
    let exit = Job {
        argv: &argv,
        env: Vec::new(),
    }
    .run(|_| {})
    .map_err(|f| match f {
        Failure::Exec { exit, cause, .. } => failed(exit, format!("cannot run sh: {cause}")),
        other => other,
    })?;
    match exit {
        Exit {
            signal: Some(_), ..
        } => Err(Failure::Ended(exit)),
        Exit { code: 0, .. } => Ok(true),
        Exit { code: 126, .. } => Err(failed(exit, "cannot be executed (sh exited 126)".into())),
        Exit { code: 127, .. } => Err(failed(exit, "not found (sh exited 127)".into())),
        Exit { .. } => Ok(false),
    }
}

/// `mutex run LOCK` without a command; where LOCK is a number, the descriptor form of flock(1)
/// was meant (`flock -n 9`), which is `mutex lock`.
fn missing_command(lock: &std::path::Path) -> Failure {
    let mut message =
        "the following required arguments were not provided: <COMMAND>...".to_string();
    let lock = lock.to_string_lossy();
    if lock.parse::<u32>().is_ok() {
        message += &format!(
            "; tip: to lock descriptor {lock} as 'flock {lock}' does, use 'fsync mutex lock \
             {lock}' with the same options"
        );
    }
    Failure::Usage(format!("{message} (try 'fsync mutex run --help')"))
}

/// `--mode OCTAL`: permission bits, as chmod(1) takes them in octal.
fn parse_mode(text: &str) -> Result<u32, String> {
    match u32::from_str_radix(text, 8) {
        Ok(mode) if mode <= 0o7777 && !text.is_empty() => Ok(mode),
        _ => Err(format!(
            "'{text}' is not a mode: octal permission bits, 0 to 7777 (as chmod takes them: 0644)"
        )),
    }
}

/// The options of flock(1) that fsync has no use for, refused with what to do instead.
fn flock_only_options(a: &RunArgs) -> Result<(), Failure> {
    let refuse = |what: &str| {
        Err(Failure::Usage(format!(
            "{what} (try 'fsync mutex run --help')"
        )))
    };
    if a.unlock {
        return refuse(
            "'mutex run' has no --unlock (flock -u): the lock is released when COMMAND \
             exits; to release a lock held through a descriptor, use 'fsync mutex unlock --fd N'",
        );
    }
    if a.no_fork {
        return refuse(
            "'mutex run' has no --no-fork (flock -F): fsync waits for COMMAND to report its \
             status and release the lock after it; COMMAND keeps the lock it inherits either \
             way, and --close keeps it from inheriting it",
        );
    }
    Ok(())
}

/// `run -s`: a shared flock on LOCK, as `flock -s` takes it.
fn run_shared(a: &RunArgs) -> VerbResult {
    let mutex = Mutex::new(&a.lock)
        .poll_interval(a.wait.poll)
        .create_mode(a.mode.unwrap_or(mutex::LOCK_FILE_MODE));
    let what = format!("a shared lock on {}", a.lock.shown());
    let mut progress = Progress::new(&a.wait, what.clone())
        .holder(|| holder_of(&a.lock))
        .note(mode_note(&a.lock, a.wait.poll));
    let outcome =
        mutex.acquire_plain_with(Mode::Shared, a.wait.timeout(), |_| progress.waiting())?;
    let guard = progress.settle(outcome, |_| format!("acquired {what}"))?;
    run_holding(a, guard)
}

/// `run --range` (and `--fcntl`): an OFD lock on a byte range instead of the whole-file
/// protocol.
fn run_range(a: &RunArgs, range: fsync::range::ByteRange) -> VerbResult {
    let lock = fsync::range::RangeLock::new(&a.lock, range)
        .poll_interval(a.wait.poll)
        .create_mode(a.mode.unwrap_or(mutex::LOCK_FILE_MODE));
    let what = format!("bytes {range} of {}", a.lock.shown());
    let mut progress = Progress::new(&a.wait, what.clone())
        .holder(|| status::range_holder(fsync::range::status(&a.lock, range)));
    let mode = match a.shared {
        true => Mode::Shared,
        false => Mode::Exclusive,
    };
    let outcome = lock.acquire_with(mode, a.wait.timeout(), |_| progress.waiting())?;
    let guard = progress.settle(outcome, |_| format!("acquired {what}"))?;
    run_holding(a, guard)
}

/// COMMAND run under a plain or byte-range lock, which keeps no record beside it.
fn run_holding(a: &RunArgs, mut guard: impl fsync::Guard) -> VerbResult {
    let exit = a.command.job(Vec::new()).run_under(
        &mut guard,
        a.close,
        &a.loss,
        &a.lock,
        a.wait.verbose,
    )?;
    drop(guard);
    Ok(exit)
}

/// How we wait where that is not the kernel alone: "nfs network file system: also
/// re-checking every 50ms".
fn mode_note(lock: &std::path::Path, poll: std::time::Duration) -> String {
    let kind = fsync::doctor::file_system(lock);
    match kind.network {
        true => format!(
            "{} network file system: also re-checking every {}",
            kind.name,
            humantime::format_duration(poll)
        ),
        false => String::new(),
    }
}

/// "held by pid 12 on host: cmd, since ..." for `-v`, where it can be known.
fn holder_of(lock: &std::path::Path) -> Option<String> {
    match mutex::status(lock).ok()? {
        Status {
            held: true,
            holder: Some(h),
            ..
        } => Some(report::held_by(&h)),
        Status { held: true, .. } => Some("holder unknown".to_string()),
        Status { held: false, .. } => None,
    }
}

fn lock_fd(a: LockArgs) -> VerbResult {
    let fd = a.fd.or(a.fd_number).unwrap_or_default(); // one of them: clap requires it
    if a.unlock {
        return Err(Failure::Usage(format!(
            "'mutex lock' has no --unlock (flock -u): to release the lock held through \
             descriptor {fd}, use 'fsync mutex unlock {fd}' (try 'fsync mutex unlock --help')"
        )));
    }
    let range = a.fd_range.range();
    // The file behind the descriptor, to say what we wait for and ask who holds it.
    let file = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok();
    let mut what = match (a.shared, range) {
        (false, None) => format!("fd {fd}"),
        (true, None) => format!("a shared lock on fd {fd}"),
        (false, Some(r)) => format!("bytes {r} of fd {fd}"),
        (true, Some(r)) => format!("a shared lock on bytes {r} of fd {fd}"),
    };
    if let Some(f) = &file {
        what = format!("{what} ({})", f.shown());
    }
    let inherited = fsync::internal::inherited_fd(fd)?;
    // A byte range has no holder record: the kernel and /proc tell who holds it.
    let mut progress = Progress::new(&a.wait, what.clone()).holder(|| match range {
        Some(r) => status::range_holder(fsync::range::status_fd(inherited.as_fd(), r)),
        None => file.as_deref().and_then(holder_of),
    });
    let mode = match a.shared {
        true => fsync::Mode::Shared,
        false => fsync::Mode::Exclusive,
    };
    let (fd, timeout, poll) = (inherited.as_fd(), a.wait.timeout(), a.wait.poll);
    let outcome = match range {
        Some(r) => fsync::range::lock_fd_with(fd, r, mode, timeout, poll, |_| progress.waiting())?,
        None => mutex::lock_fd_with(fd, mode, timeout, poll, |_| progress.waiting())?,
    };
    progress.settle(outcome, |()| format!("acquired {what}"))?;
    Ok(Exit::OK)
}
