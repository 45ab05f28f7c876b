/*!
The command-line layer: the only place clap types exist.

Each subcommand module turns its arguments into plain calls of the library, and returns an
[`Exit`] or a [`Failure`]; [`main`] is the one place that prints failures and picks exit codes.
*/

mod bus;
mod child;
mod doctor;
mod event;
mod exit_code;
#[cfg(test)]
mod generate;
mod group;
mod grouplock;
mod msg;
mod mutex;
mod payload;
mod report;
mod sem;
mod swmr;

use std::{fmt, io::Write, process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand};

pub use exit_code::Exit;

const ABOUT: &str = "Synchronise processes through the file system";

const NOTES: &str = "\
Network file systems (NFS, SMB/CIFS, FUSE such as GlusterFS or sshfs, Ceph; found with statfs, \
see 'fsync doctor'): whole-file and byte-range locks, exclusive create, link and rename work \
across hosts, so every primitive keeps its promises there. What does not cross hosts is change \
notification: inotify never sees another host's changes, so waits for events, messages, \
semaphore slots and watches re-check every --poll interval (50ms by default); lock waits block in \
the lock call, which the file server wakes. Measured between two clients of GlusterFS \
(bench/netfs.sh): a mutex hand-over in 6 ms, an event wake-up in 19 ms and a message in 47 ms \
(p50).

A host cut off from the server keeps believing it holds its locks, while the server gives them \
to others after its timeout (10 s on that bed): 'fsync mutex run' checks its lock every second \
there and stops its command (exit 76; see --on-lost), 18 s after the cut on the bed. Use \
FSYNC_FENCE to let the protected resource reject a stale holder. The locks of a client whose \
process dies go at once; those of a machine that vanishes, after the server's timeout.

Mount options: on NFS never 'nolock' or 'local_lock' (locks would stay on one host), and \
'lookupcache=positive' (or 'noac') so that new and removed files are seen promptly; an exclusive \
lock needs write access to the lock file. On GlusterFS turn client caching off (entry and \
attribute timeouts 0, stat-prefetch, quick-read, io-cache, open-behind and write-behind off), as \
../shared/netfs/setup.sh does: with the defaults, stale caches lose updates made under a lock. \
Do not mix whole-file and byte-range locks on one file (--range): NFS and FUSE emulate flock(2) \
with a whole-file POSIX lock, and the two collide.

Shared directories such as /tmp: fsync never writes through, truncates or deletes via another \
user's symbolic link (its own files are opened with O_NOFOLLOW, and a symbolic link is followed \
only to lock a file that already exists), never writes into a file it did not create, and \
creates holder records 0644 and message payloads 0640.";

const LONG_ABOUT: &str = "\
Synchronise processes through the file system: locks, groups, events and messages that work \
between shell scripts, cron jobs and CI steps on one machine, and between machines that share \
a directory over NFS, SMB or a cluster file system. No server, no daemon: the shared \
directory is the medium.

On a local file system every wait blocks in the kernel, so a release wakes the next waiter at \
once; on a network file system fsync also re-checks every --poll interval, because other \
hosts cannot wake it.";

#[derive(Debug, Parser)]
#[command(
    name = "fsync",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = NOTES,
    infer_long_args = true,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Mutex(mutex::MutexCommand),
    Group(group::GroupCommand),
    Event(event::EventCommand),
    Msg(msg::MsgCommand),
    Bus(bus::BusCommand),
    Swmr(swmr::SwmrCommand),
    Sem(sem::SemCommand),
    Grouplock(grouplock::GroupLockCommand),
    Doctor(doctor::DoctorArgs),
}

/// The options every waiting verb shares.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait
    /// for ever]
    #[arg(short = 't', long, visible_alias = "wait", value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Do not wait: give up at once if it is not free (same as --timeout 0)
    #[arg(
        short = 'n',
        long,
        visible_alias = "nonblock",
        conflicts_with = "timeout"
    )]
    pub no_wait: bool,

    /// Exit status when the wait gives up
    #[arg(short = 'E', long, value_name = "N", default_value_t = Exit::CONFLICT.0)]
    pub conflict_exit_code: u8,

    /// Re-check interval where other hosts cannot wake us (network file systems)
    #[arg(long, value_name = "DUR", value_parser = parse_poll, default_value = "50ms")]
    pub poll: Duration,

    /// Say on stderr what we wait for, who holds it, and for how long
    #[arg(short, long)]
    pub verbose: bool,
}

impl WaitArgs {
    pub fn timeout(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.timeout
        }
    }
}

/// Durations as humantime writes them, plus bare (fractional) seconds as flock(1) takes them.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if (0.0..1e12).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!(
            "invalid duration '{s}': must be a non-negative number of seconds"
        ));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("invalid duration '{s}': {e} (try 250ms, 5s, 2m, 1h30m)"))
}

fn parse_poll(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < Duration::from_millis(1) => {
            Err(format!("invalid poll interval '{s}': must be at least 1ms"))
        }
        d => Ok(d),
    }
}

/// Why a verb failed; printed by [`main`] as one `fsync: ...` line.
#[derive(Debug)]
pub enum Failure {
    Lib(fsync::Error),
    /// COMMAND could not be started.
    Exec {
        program: String,
        exit: Exit,
        cause: String,
    },
    /// Our own output went away (`fsync mutex watch L | head -1`): stop quietly.
    BrokenPipe,
}

impl From<fsync::Error> for Failure {
    fn from(e: fsync::Error) -> Failure {
        Failure::Lib(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::BrokenPipe;
        }
        Failure::Lib(fsync::Error::io(
            std::path::Path::new("standard output"),
            "cannot write",
            e,
        ))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Lib(e) => write!(f, "{e}"),
            Failure::Exec { program, cause, .. } => write!(f, "{program}: {cause}"),
            Failure::BrokenPipe => write!(f, "broken pipe"),
        }
    }
}

impl Failure {
    fn exit(&self) -> Exit {
        match self {
            Failure::Lib(e) => Exit::of_error(e.kind()),
            Failure::Exec { exit, .. } => *exit,
            Failure::BrokenPipe => Exit::OK,
        }
    }
}

pub type Outcome = Result<Exit, Failure>;

pub fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        // Never panic again here, even if stderr is gone.
        let _ = writeln!(std::io::stderr(), "fsync: internal error: {info}");
        std::process::exit(Exit::INTERNAL.0.into());
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                Exit::USAGE.0
            } else {
                Exit::OK.0
            });
        }
    };
    fsync::wait::install_cancel_handlers();
    let result = match cli.command {
        Command::Mutex(cmd) => mutex::run(cmd),
        Command::Group(cmd) => group::run(cmd),
        Command::Swmr(cmd) => swmr::run(cmd),
        Command::Sem(cmd) => sem::run(cmd),
        Command::Grouplock(cmd) => grouplock::run(cmd),
        Command::Doctor(a) => doctor::run(a),
        Command::Event(cmd) => event::run(cmd),
        Command::Msg(cmd) => msg::run(cmd),
        Command::Bus(cmd) => bus::run(cmd),
    };
    match result {
        Ok(exit) => ExitCode::from(exit.0),
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(failure) => {
            let _ = writeln!(std::io::stderr(), "fsync: {failure}");
            ExitCode::from(failure.exit().0)
        }
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

    #[test]
    fn durations_accept_humantime_and_bare_seconds() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_poll("0").is_err());
    }
}
