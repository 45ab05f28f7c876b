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

use std::{
    ffi::{OsStr, OsString},
    os::unix::{
        ffi::OsStrExt,
        process::{CommandExt, ExitStatusExt},
    },
    path::PathBuf,
    process::{Child, Command},
};

use std::io::Write as _;

use fsync::wait;
use nix::libc;

use super::{Exit, Failure};

/// A command line to run.
pub struct Job<'a> {
    pub argv: &'a [OsString],
    pub env: Vec<(String, String)>,
}

impl Job<'_> {
    /// The command line as one string, for holder records and messages.
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Start the command; `started` learns its pid (to record it) before we wait for it.
    pub fn run(&self, started: impl FnOnce(u32)) -> Result<Exit, Failure> {
        self.run_guarded(started, None)
    }

    /// Like [`run`](Self::run), checking every `guard.every` that the lock is still ours and
    /// acting on a loss as `guard.on_lost` says (network file systems, where a partition or an
    /// expired lease can take a lock away from a living holder).
    pub fn run_guarded(
        &self,
        started: impl FnOnce(u32),
        guard: Option<LossGuard<'_>>,
    ) -> Result<Exit, Failure> {
        let mut child = self.spawn()?;
        let pid = child.id();
        // A signal that arrived while we were starting it is forwarded now.
        if let Some(sig) = wait::set_child(Some(pid as i32)) {
            // SAFETY: signalling our own child, which we have not reaped.
            unsafe { libc::kill(pid as i32, sig) };
        }
        started(pid);
        let lost = match guard {
            Some(g) => watch_lock(pid, g),
            None => false,
        };
        let status = wait_for_exit(&mut child);
        if lost {
            return Ok(Exit::LOCK_LOST);
        }
        Ok(match (status.code(), status.signal()) {
            (Some(code), _) => Exit::code(code as u8),
            (None, Some(sig)) => Exit::signal(sig),
            _ => Exit::INTERNAL,
        })
    }

    fn spawn(&self) -> Result<Child, Failure> {
        let program = &self.argv[0];
        let path = resolve(program)?;
        let mut cmd = Command::new(&path);
        cmd.arg0(program).args(&self.argv[1..]);
        // Into our own environment, which the child inherits as it is: `Command::envs` would
        // copy the whole environment into a map and back (a tenth of a short run's
        // instructions). This process is single-threaded here and only waits from now on.
        for (k, v) in &self.env {
            std::env::set_var(k, v);
        }
        let spawned = match cmd.spawn() {
            // An executable file the kernel cannot run (a script without `#!`) is a shell
            // script, as execvp(3), env(1) and every shell have it: /bin/sh runs it.
            Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => Command::new("/bin/sh")
                .arg(&path)
                .args(&self.argv[1..])
                .spawn(),
            other => other,
        };
        spawned.map_err(|e| {
            let (exit, cause) = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    (Exit::COMMAND_NOT_FOUND, "command not found".to_string())
                }
                std::io::ErrorKind::PermissionDenied => (
                    Exit::CANNOT_EXECUTE,
                    "cannot execute: permission denied".to_string(),
                ),
                _ => (
                    Exit::CANNOT_EXECUTE,
                    format!("cannot execute: {}", describe(&e)),
                ),
            };
            Failure::Exec {
                program: program.to_string_lossy().into_owned(),
                exit,
                cause,
            }
        })
    }
}

/// What to do when the lock is lost while the command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLost {
    /// Send TERM, then KILL after a grace period, and exit with status 76
    Term,
    /// Send KILL at once and exit with status 76
    Kill,
    /// Only say so on stderr; the command goes on
    Ignore,
}

/// How long a command has to stop after TERM when its lock was lost.
const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Checking a lock while its command runs.
pub struct LossGuard<'a> {
    pub every: std::time::Duration,
    pub still_held: Box<dyn FnMut() -> bool + 'a>,
    pub on_lost: OnLost,
    pub what: String,
}

// The `--on-lost` option of the verbs that run a command under a lock. (No doc comment: clap
// would make it the `about` of every command that flattens this struct, clap-rs/clap#3127.)
#[derive(Debug, clap::Args)]
pub struct LossArgs {
    /// On a network file system, what to do if the lock is lost while COMMAND runs (it is
    /// checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or
    /// only say so
    #[arg(long, value_enum, value_name = "ACTION", default_value = "term")]
    pub on_lost: OnLost,
}

impl LossArgs {
    /// A check of the lock held through `fd` in `mode`, where `lock` lies on a network file
    /// system (elsewhere a living holder cannot lose its lock, and nothing is checked).
    pub fn guard(
        &self,
        lock: &std::path::Path,
        fd: std::os::fd::RawFd,
        mode: fsync::platform::lock::Mode,
    ) -> Option<LossGuard<'static>> {
        // SAFETY: the caller's guard keeps `fd` open while we look at it.
        let held = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        fsync::platform::fs::fs_kind(&held)
            .network
            .then(|| LossGuard {
                every: std::time::Duration::from_secs(1),
                still_held: Box::new(move || fsync::platform::lock::still_held(fd, mode)),
                on_lost: self.on_lost,
                what: lock.display().to_string(),
            })
    }
}

/// Until the child exits (seen on a pidfd, so no exit is noticed late), check the lock every
/// `guard.every`; on a loss say so and act. Returns whether the lock was lost and the command
/// stopped for it.
fn watch_lock(pid: u32, mut guard: LossGuard<'_>) -> bool {
    // SAFETY: pidfd_open on our own, unreaped child; the descriptor is closed below.
    let pidfd =
        unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) } as libc::c_int;
    if pidfd < 0 {
        return false; // an old kernel: no checking, as on a local file system
    }
    let exited = |timeout: std::time::Duration| {
        let mut fds = [libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: poll on one descriptor we own.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                1,
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
        n > 0
    };
    let mut lost = false;
    while !exited(guard.every) {
        if (guard.still_held)() {
            continue;
        }
        let _ = writeln!(
            std::io::stderr(),
            "fsync: {}: the lock was lost while the command ran (network partition or expired lease?)",
            guard.what
        );
        match guard.on_lost {
            OnLost::Ignore => {
                // Say it once, then just wait for the command.
                exited(std::time::Duration::MAX);
                break;
            }
            OnLost::Term => {
                // SAFETY: signalling our own, unreaped child.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                if !exited(GRACE) {
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            }
            OnLost::Kill => unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            },
        }
        lost = true;
        break;
    }
    // SAFETY: closing the pidfd we opened.
    unsafe { libc::close(pidfd) };
    lost
}

/// Wait for the child to exit without reaping it first, unregister it (so no signal is ever
/// forwarded to a recycled pid), then reap it.
fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id() as libc::id_t;
    loop {
        // SAFETY: waitid on our own child with a zeroed siginfo buffer we own.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    wait::set_child(None);
    loop {
        match child.wait() {
            Ok(status) => return status,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // ECHILD cannot happen for a child we own; report it as a failure of the child.
            Err(_) => return std::process::ExitStatus::from_raw((Exit::INTERNAL.code as i32) << 8),
        }
    }
}

/// Find a command on PATH the way the shell does: the first executable regular file wins; a
/// match that is not executable means 126, none at all 127 (whatever directories on PATH we
/// could not search, which `execvp` would report as "permission denied").
fn resolve(program: &OsStr) -> Result<PathBuf, Failure> {
    let fail = |exit, cause: &str| Failure::Exec {
        program: program.to_string_lossy().into_owned(),
        exit,
        cause: cause.to_string(),
    };
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    if program.is_empty() {
        return Err(fail(Exit::COMMAND_NOT_FOUND, "command not found"));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut not_executable = false;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        if !candidate.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        if nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok() {
            return Ok(candidate);
        }
        not_executable = true;
    }
    Err(match not_executable {
        true => fail(Exit::CANNOT_EXECUTE, "cannot execute: permission denied"),
        false => fail(Exit::COMMAND_NOT_FOUND, "command not found"),
    })
}

fn describe(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_lowercase(),
        None => e.to_string(),
    }
}
