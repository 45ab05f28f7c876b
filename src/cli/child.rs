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

use super::{Exit, Failure, escape::Show};

/// A command line to run.
pub(super) struct Job<'a> {
    pub argv: &'a [OsString],
    pub env: Vec<(String, String)>,
}

impl super::args::CommandArgs {
    /// COMMAND, to be run with `env` added to its environment.
    pub(super) fn job(&self, env: Vec<(String, String)>) -> Job<'_> {
        Job {
            argv: &self.argv,
            env,
        }
    }
}

impl Job<'_> {
    /// Run the command under `guard` as every verb that runs one does: passed down to it
    /// unless `close` (`-o`), recorded in the guard's status before it starts and with its pid
    /// once it has, its lock (`lock`) checked as `loss` says.
    pub(super) fn run_under<G: fsync::Guard>(
        &self,
        guard: &mut G,
        close: bool,
        loss: &LossArgs,
        lock: &std::path::Path,
        verbose: bool,
    ) -> Result<Exit, Failure> {
        if !close {
            guard.pass_down()?;
        }
        let line = self.command_line();
        guard.set_child(None, &line);
        let checking = Checking {
            loss,
            lock,
            verbose,
            check: <G as fsync::Guard>::loss_check,
        };
        self.run_guarded(
            guard,
            |g, pid| g.set_child(Some(pid), &line),
            Some(checking),
        )
    }

    /// The command line as one string, for holder records (raw: text output shows it
    /// escaped).
    pub(super) fn command_line(&self) -> String {
        self.argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Start the command; `started` learns its pid (to record it) before we wait for it.
    pub(super) fn run(&self, started: impl FnOnce(u32)) -> Result<Exit, Failure> {
        self.run_guarded(&(), |(), pid| started(pid), None)
    }

    /// Like [`run`](Self::run), checking the lock as `checking` says while the command runs
    /// (network file systems, where a partition or an expired lease can take a lock away from
    /// a living holder). The lease runs from when the lock was taken
    /// ([`fsync::LossCheck::since`]), its checks start before the command does, and it is
    /// watched from the moment the command starts: recording the command can wait long on the
    /// server (one cut off: the command must stop before the lease runs out; one slow to write
    /// a file: the lock, still confirmed meanwhile, is not given up).
    pub(super) fn run_guarded<G: ?Sized>(
        &self,
        guard: &G,
        started: impl FnOnce(&G, u32),
        checking: Option<Checking<'_, G>>,
    ) -> Result<Exit, Failure> {
        self.run_guarded_or(guard, started, checking, |e| self.spawn_failure(e))
    }

    /// [`run_guarded`](Self::run_guarded), saying with `failed` why the command could not be
    /// started (as `fsync flock` says it, in flock's words).
    pub(super) fn run_guarded_or<G: ?Sized>(
        &self,
        guard: &G,
        started: impl FnOnce(&G, u32),
        checking: Option<Checking<'_, G>>,
        failed: impl FnOnce(SpawnError) -> Failure,
    ) -> Result<Exit, Failure> {
        // Planned before the command starts, so that it is watched from its first instant: the
        // lease must be known by then (on GlusterFS it is read from the client's meta
        // directory, one call through FUSE; elsewhere from /proc, or a guess). Its checks
        // start here too, and go on while the command is recorded.
        let lease = match &checking {
            Some(c) => match (c.check)(guard) {
                Some(check) => match c.loss.watch(c.lock, &check, c.verbose) {
                    Some(watch) => Some((watch.lease(check), watch)),
                    None => return Ok(Exit::LOCK_LOST),
                },
                None => None,
            },
            None => None,
        };
        let child = self.spawn().map_err(failed)?;
        let lost = std::thread::scope(|scope| {
            let running = &child;
            let watching = lease
                .as_ref()
                .map(|(l, w)| scope.spawn(move || watch_lock(running, w, l)));
            started(guard, child.pid());
            watching.is_some_and(|h| h.join().unwrap_or(false))
        });
        let status = child.wait();
        if lost {
            return Ok(Exit::LOCK_LOST);
        }
        Ok(exit_of(status))
    }

    fn spawn(&self) -> Result<Running, SpawnError> {
        command::spawn_with(self.argv, &self.env)
    }

    /// The shell's words and status (127, 126) for a command that could not be started.
    pub(super) fn spawn_failure(&self, e: SpawnError) -> Failure {
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
                program: self.argv[0].clone(),
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

/// What checking a command's lock takes: the options, the lock's name for messages, `-v`, and
/// the guard's check (`None` where its lock cannot be lost).
pub(super) struct Checking<'a, G: ?Sized> {
    pub loss: &'a LossArgs,
    pub lock: &'a std::path::Path,
    pub verbose: bool,
    pub check: for<'g> fn(&'g G) -> Option<fsync::LossCheck<'g>>,
}

/// How a lock is checked while its command runs, planned before it starts: a lease of
/// `lease` from `since`, looked at every `every`.
pub(super) struct Watch {
    every: std::time::Duration,
    lease: std::time::Duration,
    /// The lease is the mount's default, read again while the command runs.
    follow: bool,
    /// When the lock was last known to be ours.
    since: std::time::Instant,
    on_lost: OnLost,
    /// The lock, as text output shows it.
    what: String,
    /// How long the command has to stop after TERM before KILL.
    grace: std::time::Duration,
    /// Say on stderr when the lease changes (`-v`).
    verbose: bool,
    /// How a job, which leads a process group of its own, is stopped with all it started
    /// (TERM, the grace, KILL: `msg`'s own stop); `None`: the command alone is signalled.
    stop_group: Option<fn(&Running, std::time::Duration)>,
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
    /// How to check `lock` with `check` while its command runs, saying on stderr where
    /// `verbose` (`-v`) when the lease is a guess (no `--lease`, and a mount that does not show
    /// its server's timeout). A lock taken more than half a lease ago (a second at least) is
    /// asked about before anything starts under it: the calls since (recording the holder,
    /// reading the lease from the mount) may have waited on a server that stopped answering,
    /// and a lease read from a mount that no longer answers is only a guess, perhaps longer
    /// than the server's timeout (a GlusterFS client answers nothing, its meta directory
    /// included, until it gives up on the server, which takes the whole timeout). `None`, said on stderr, if the lock is not ours or the answer
    /// came too late.
    pub(super) fn watch(
        &self,
        lock: &std::path::Path,
        check: &fsync::LossCheck<'_>,
        verbose: bool,
    ) -> Option<Watch> {
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
        let mut watch = Watch {
            // Several checks within a lease, and at least one a second.
            every: (lease / 4).clamp(
                std::time::Duration::from_millis(50),
                std::time::Duration::from_secs(1),
            ),
            lease,
            // A default read from the mount is read again while the command runs; a given
            // --lease, or a guess (a mount that shows nothing), stays as it is.
            follow: self.lease.is_none()
                && matches!(default.source, fsync::doctor::LeaseSource::Mount { .. }),
            since: check.since(),
            on_lost: self.on_lost,
            what: lock.shown().to_string(),
            grace: default.grace(lease),
            verbose,
            stop_group: None,
        };
        if watch.since.elapsed() > (lease / 2).max(std::time::Duration::from_secs(1)) {
            let asked = std::time::Instant::now();
            let held = check.still_held();
            watch.since = asked;
            if !held || asked.elapsed() > lease {
                let why = match held {
                    false => "the lock was lost before the command started".to_string(),
                    true => expired(asked.elapsed(), lease),
                };
                let _ = writeln!(std::io::stderr(), "fsync: {}: {why}", watch.what);
                return None;
            }
        }
        Some(watch)
    }
}

impl Watch {
    /// The same, stopping the command's whole process group on a loss with `stop` (a job's).
    pub(super) fn of_group(self, stop: fn(&Running, std::time::Duration)) -> Watch {
        Watch {
            stop_group: Some(stop),
            ..self
        }
    }

    /// The lease on `check`'s lock, from the time the lock was last known to be ours.
    pub(super) fn lease<'g>(&self, check: fsync::LossCheck<'g>) -> fsync::Lease<'g> {
        let check = check.confirmed_at(self.since);
        match self.follow {
            true => check.lease_following_mount(self.every, self.lease),
            false => check.lease(self.every, self.lease),
        }
    }

    /// Say why the lock counts as lost, and stop the command as `--on-lost` says; whether it
    /// was stopped for it.
    fn act(&self, child: &Running, pidfd: &command::ExitWatch, why: &str) -> bool {
        let _ = writeln!(std::io::stderr(), "fsync: {}: {why}", self.what);
        match self.on_lost {
            OnLost::Ignore => {
                // Say it once, then just wait for the command.
                pidfd.exited_within(std::time::Duration::MAX);
                return false;
            }
            OnLost::Term => match self.stop_group {
                Some(stop) => stop(child, self.grace),
                None => {
                    child.signal(libc::SIGTERM);
                    if !pidfd.exited_within(self.grace) {
                        child.signal(libc::SIGKILL);
                    }
                }
            },
            OnLost::Kill => match self.stop_group {
                Some(_) => {
                    let _ = child.signal_group(libc::SIGKILL);
                }
                None => child.signal(libc::SIGKILL),
            },
        }
        true
    }
}

/// Until the child exits (seen on a pidfd, so no exit is noticed late), look every
/// `watch.every` at what the lease's thread found; on a loss say so and act. Returns whether the
/// lock was lost and the command stopped for it.
pub(super) fn watch_lock(child: &Running, watch: &Watch, lease: &fsync::Lease<'_>) -> bool {
    let Some(pidfd) = child.exit_watch() else {
        return false; // an old kernel: no checking, as on a local file system
    };
    let mut length = lease.length();
    while !pidfd.exited_within(watch.every) {
        if lease.length() != length {
            length = lease.length();
            if watch.verbose {
                let _ = writeln!(
                    std::io::stderr(),
                    "fsync: {}: the lease is now {}: the server's timeout the mount shows changed",
                    watch.what,
                    humantime::format_duration(length)
                );
            }
        }
        let why = match lease.state() {
            fsync::LeaseState::Held => continue,
            fsync::LeaseState::Lost => {
                "the lock was lost while the command ran (network partition or expired lease?)"
                    .to_string()
            }
            fsync::LeaseState::Expired(since) => expired(since, lease.length()),
            // A state a later library names: not held, as far as we can tell.
            _ => "the lock was lost while the command ran".to_string(),
        };
        return watch.act(child, &pidfd, &why);
    }
    false
}

/// Why a lock not confirmed for `since`, longer than its `lease`, counts as lost.
fn expired(since: std::time::Duration, lease: std::time::Duration) -> String {
    format!(
        "the lock was lost: the file server has not confirmed it for {:.1}s, longer than its \
         lease ({}), so another host may be given it",
        since.as_secs_f64(),
        humantime::format_duration(lease)
    )
}

/// A command's exit status as ours: its code, or death by its signal.
pub(super) fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    match status.map(|s| (s.code(), s.signal())) {
        Ok((Some(code), _)) => Exit::code(code as u8),
        Ok((None, Some(sig))) => Exit::signal(sig),
        // ECHILD cannot happen for a child we own; report it as a failure of the child.
        _ => Exit::INTERNAL,
    }
}

fn describe(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_lowercase(),
        None => e.to_string(),
    }
}
