/*!
Running COMMAND under a primitive: the shell's conventions for what can go wrong.

The child's exit status passes through; a child killed by signal N makes fsync die of N too,
once it has released everything (the shell sees 128+N, and knows a signal ended the job); a
command that is not found gives 127 and one that cannot be executed 126; an executable file
without `#!` runs under /bin/sh, as execvp(3) runs it. While it runs, INT, TERM, HUP and QUIT
sent to fsync are forwarded to it (the wait core's handlers do that once the child is
registered), except those that were ignored when fsync started: they stay ignored, for fsync
and the command. fsync waits for the child to exit before releasing anything.
*/

use std::{ffi::OsString, io::Write as _, os::unix::process::ExitStatusExt};

use fsync::command::{self, Running, SpawnError};
use nix::libc;

use super::{Exit, Failure};

/// A command line to run.
pub(super) struct Job<'a> {
    pub argv: &'a [OsString],
    pub env: Vec<(String, String)>,
    /// Its standard input, if not ours.
    pub stdin: Option<std::fs::File>,
}

impl super::args::CommandArgs {
    /// COMMAND, to be run with `env` added to its environment.
    pub(super) fn job(&self, env: Vec<(String, String)>) -> Job<'_> {
        Job {
            argv: &self.argv,
            env,
            stdin: None,
        }
    }
}

impl Job<'_> {
    /// Run the command under `guard` as every verb that runs one does: passed down to it
    /// unless `close` (`-o`), recorded in the guard's status before it starts and with its pid
    /// once it has, its lock (`lock`) checked as `loss` says.
    pub(super) fn run_under(
        &self,
        guard: &mut impl fsync::Guard,
        close: bool,
        loss: &LossArgs,
        lock: &std::path::Path,
        verbose: bool,
    ) -> Result<Exit, Failure> {
        if !close {
            guard.pass_down()?;
        }
        let shown = self.display();
        guard.set_child(None, &shown);
        self.run_guarded(
            guard,
            |g, pid| g.set_child(Some(pid), &shown),
            |g| loss.guard_telling(lock, g.loss_check(), verbose),
        )
    }

    /// The command line as one string, for holder records and messages.
    pub(super) fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Start the command; `started` learns its pid (to record it) before we wait for it.
    pub(super) fn run(&self, started: impl FnOnce(u32)) -> Result<Exit, Failure> {
        self.run_guarded(&mut (), |(), pid| started(pid), |()| None)
    }

    /// Like [`run`](Self::run), checking every `guard.every` that the lock is still ours and
    /// acting on a loss as `guard.on_lost` says (network file systems, where a partition or an
    /// expired lease can take a lock away from a living holder). `guard` is made once the
    /// command has started: reading the lease from the mount takes calls to the file system
    /// (some milliseconds on a FUSE client), which would delay every hand-over; and the
    /// environment is set for the command while no checking thread runs yet.
    pub(super) fn run_guarded<G: ?Sized>(
        &self,
        guard: &mut G,
        started: impl FnOnce(&mut G, u32),
        check: impl for<'g> FnOnce(&'g G) -> Option<LossGuard<'g>>,
    ) -> Result<Exit, Failure> {
        self.run_guarded_or(guard, started, check, |e| self.spawn_failure(e))
    }

    /// [`run_guarded`](Self::run_guarded), saying with `failed` why the command could not be
    /// started (as `fsync flock` says it, in flock's words).
    pub(super) fn run_guarded_or<G: ?Sized>(
        &self,
        guard: &mut G,
        started: impl FnOnce(&mut G, u32),
        check: impl for<'g> FnOnce(&'g G) -> Option<LossGuard<'g>>,
        failed: impl FnOnce(SpawnError) -> Failure,
    ) -> Result<Exit, Failure> {
        let child = self.spawn().map_err(failed)?;
        started(guard, child.pid());
        // From here on the guard is only looked at: the check borrows it until the end.
        let lost = match check(guard) {
            Some(g) => watch_lock(&child, g),
            None => false,
        };
        let status = child.wait();
        if lost {
            return Ok(Exit::LOCK_LOST);
        }
        Ok(match status.map(|s| (s.code(), s.signal())) {
            Ok((Some(code), _)) => Exit::code(code as u8),
            Ok((None, Some(sig))) => Exit::signal(sig),
            // ECHILD cannot happen for a child we own; report it as a failure of the child.
            _ => Exit::INTERNAL,
        })
    }

    fn spawn(&self) -> Result<Running, SpawnError> {
        match &self.stdin {
            Some(input) => command::spawn_reading(self.argv, &self.env, input),
            None => command::spawn_with(self.argv, &self.env),
        }
    }

    /// The shell's words and status (127, 126) for a command that could not be started.
    fn spawn_failure(&self, e: SpawnError) -> Failure {
        {
            let (exit, cause) = match e {
                SpawnError::NotFound => (Exit::COMMAND_NOT_FOUND, "command not found".to_string()),
                SpawnError::CannotExecute(e)
                    if e.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    (
                        Exit::CANNOT_EXECUTE,
                        "cannot execute: permission denied".to_string(),
                    )
                }
                SpawnError::CannotExecute(e) => (
                    Exit::CANNOT_EXECUTE,
                    format!("cannot execute: {}", describe(&e)),
                ),
                _ => (Exit::CANNOT_EXECUTE, "cannot execute".to_string()),
            };
            Failure::Exec {
                program: self.argv[0].to_string_lossy().into_owned(),
                exit,
                cause,
            }
        }
    }
}

/// What to do when the lock is lost while the command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum OnLost {
    /// Send TERM, then KILL after a grace period, and exit with status 76
    Term,
    /// Send KILL at once and exit with status 76
    Kill,
    /// Only say so on stderr; the command goes on
    Ignore,
}

/// Checking a lock while its command runs: from a thread of its own, with a lease.
pub(super) struct LossGuard<'g> {
    /// How often to look at what the checking thread found.
    pub every: std::time::Duration,
    pub lease: fsync::Lease<'g>,
    pub on_lost: OnLost,
    pub what: String,
    /// How long the command has to stop after TERM before KILL.
    pub grace: std::time::Duration,
    /// Say on stderr when the lease changes (`-v`).
    pub verbose: bool,
}

// The `--on-lost` and `--lease` options of the verbs that run a command under a lock. (No doc
// comment: clap would make it the `about` of every command that flattens this struct,
// clap-rs/clap#3127.)
#[derive(Debug, clap::Args)]
pub(super) struct LossArgs {
    /// On a network file system, what to do if the lock is lost while COMMAND runs (it is
    /// checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or
    /// only say so
    #[arg(long, value_enum, value_name = "ACTION", default_value = "term")]
    pub on_lost: OnLost,

    /// On a network file system, count the lock as lost (and act as --on-lost says) once it
    /// could not be confirmed with the file server for DUR: shorter than the time after which
    /// the server gives a silent host's locks away, so that COMMAND stops first. Default:
    /// read from the mount where it shows that time (GlusterFS's ping-timeout, NFSv4's lease
    /// time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s,
    /// SMB 20s, others 10s; -v warns);
    /// 'fsync doctor' prints it. At least 1s
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_lease)]
    pub lease: Option<std::time::Duration>,
}

impl LossArgs {
    /// Checking the lock on `lock` with the guard's `check` while COMMAND runs; the guard
    /// gives one only on a network file system (elsewhere a living holder cannot lose its
    /// lock, and nothing is checked).
    pub(super) fn guard<'g>(
        &self,
        lock: &std::path::Path,
        check: Option<fsync::LossCheck<'g>>,
    ) -> Option<LossGuard<'g>> {
        self.guard_telling(lock, check, false)
    }

    /// [`guard`](Self::guard), saying on stderr where `verbose` (`-v`) when the lease is a
    /// guess (no `--lease`, and a mount that does not show its server's timeout), and when a
    /// lease read from the mount changes while the command runs.
    pub(super) fn guard_telling<'g>(
        &self,
        lock: &std::path::Path,
        check: Option<fsync::LossCheck<'g>>,
        verbose: bool,
    ) -> Option<LossGuard<'g>> {
        let check = check?;
        let default = check.default_lease();
        if verbose && self.lease.is_none() && default.source == fsync::doctor::LeaseSource::Guess {
            super::report::warn(
                lock,
                &format!(
                    "lease {} on {} is a guess by file system type (the mount does not show its \
                 server's timeout: {}); give --lease shorter than the server's timeout",
                    humantime::format_duration(default.lease),
                    default.file_system.name,
                    default.file_system.server_timeout
                ),
            );
        }
        let lease = self.lease.unwrap_or(default.lease);
        // Several checks within a lease, and at least one a second.
        let every = (lease / 4).clamp(
            std::time::Duration::from_millis(50),
            std::time::Duration::from_secs(1),
        );
        Some(LossGuard {
            every,
            // A default read from the mount is read again while the command runs; a given
            // --lease, or a guess (a mount that shows nothing), stays as it is.
            lease: match (self.lease, &default.source) {
                (None, fsync::doctor::LeaseSource::Mount { .. }) => {
                    check.lease_following_mount(every, lease)
                }
                _ => check.lease(every, lease),
            },
            verbose,
            on_lost: self.on_lost,
            what: lock.display().to_string(),
            grace: default.grace(lease),
        })
    }
}

/// Until the child exits (seen on a pidfd, so no exit is noticed late), look every
/// `guard.every` at what the lease's thread found; on a loss say so and act. Returns whether the
/// lock was lost and the command stopped for it.
fn watch_lock(child: &Running, guard: LossGuard<'_>) -> bool {
    let Some(pidfd) = child.exit_watch() else {
        return false; // an old kernel: no checking, as on a local file system
    };
    let mut length = guard.lease.length();
    while !pidfd.exited_within(guard.every) {
        if guard.lease.length() != length {
            length = guard.lease.length();
            if guard.verbose {
                let _ = writeln!(
                    std::io::stderr(),
                    "fsync: {}: the lease is now {}: the server's timeout the mount shows changed",
                    guard.what,
                    humantime::format_duration(length)
                );
            }
        }
        let why = match guard.lease.state() {
            fsync::LeaseState::Held => continue,
            fsync::LeaseState::Lost => {
                "the lock was lost while the command ran (network partition or expired lease?)"
                    .to_string()
            }
            fsync::LeaseState::Expired(since) => format!(
                "the lock was lost: the file server has not confirmed it for {:.1}s, longer than \
                 its lease ({}), so another host may be given it",
                since.as_secs_f64(),
                humantime::format_duration(guard.lease.length())
            ),
            // A state a later library names: not held, as far as we can tell.
            _ => "the lock was lost while the command ran".to_string(),
        };
        let _ = writeln!(std::io::stderr(), "fsync: {}: {why}", guard.what);
        match guard.on_lost {
            OnLost::Ignore => {
                // Say it once, then just wait for the command.
                pidfd.exited_within(std::time::Duration::MAX);
                return false;
            }
            OnLost::Term => {
                child.signal(libc::SIGTERM);
                if !pidfd.exited_within(guard.grace) {
                    child.signal(libc::SIGKILL);
                }
            }
            OnLost::Kill => child.signal(libc::SIGKILL),
        }
        return true;
    }
    false
}

fn describe(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_lowercase(),
        None => e.to_string(),
    }
}
