/*!
Running a command under a lock, as the shell would run it.

[`spawn`] starts `argv` with the shell's rules: a name without `/` is looked up on `PATH` (the
first executable regular file wins; a match that is not executable means "cannot execute", none
at all "not found"), and an executable file the kernel cannot run (a script without `#!`) runs
under `/bin/sh`, as execvp(3), env(1) and every shell run it. The command inherits the process's
environment and descriptors, so a lock held through a descriptor without close-on-exec stays
held for as long as the command (or anything it leaves running) keeps it.

While a [`Running`] command exists, the cancellation signals the program asked for
([`install_cancel_handlers`](crate::wait::install_cancel_handlers)) are forwarded to it instead
of cancelling a wait; [`Running::wait`] stops forwarding before the child is reaped, so a signal
is never sent to a recycled pid. One command at a time per process is forwarded to.

```no_run
# fn main() -> Result<(), Box<dyn std::error::Error>> {
let lock = fsync::Mutex::new("/tmp/nightly.lck");
let _guard = lock.try_acquire()?.ok_or("another run is going on")?;
let status = fsync::command::spawn(&["make", "nightly"])?.wait()?;
println!("make: {status}");
# Ok(())
# }
```
*/

use std::{ffi::OsStr, fmt, io, process::ExitStatus, time::Duration};

use crate::platform::{process, signal};

/// Why a command could not be started.
#[derive(Debug)]
#[non_exhaustive]
pub enum SpawnError {
    /// Not found on `PATH` (or an empty name): the shell's 127.
    NotFound,
    /// Found, but it cannot be executed (permission, format): the shell's 126.
    CannotExecute(io::Error),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::NotFound => f.write_str("command not found"),
            SpawnError::CannotExecute(e) => write!(f, "cannot execute: {e}"),
        }
    }
}

impl std::error::Error for SpawnError {}

/// A command started by [`spawn`], not yet waited for.
pub struct Running {
    child: process::Child,
    /// Cancellation signals are forwarded to it until it is waited for.
    forwarded: bool,
    /// It leads a process group of its own (a message's job).
    group: bool,
    /// Called once it has exited, before [`Running::wait`] returns: the end of the pump that
    /// keeps a job's output ([`crate::msg`]), so that all of it is kept before the message
    /// moves on.
    after_exit: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("child", &self.child)
            .field("forwarded", &self.forwarded)
            .field("group", &self.group)
            .field("after_exit", &self.after_exit.is_some())
            .finish()
    }
}

/// Start `argv` (`argv[0]` the program) with the environment the process has now, and forward
/// cancellation signals to it until [`Running::wait`]. A signal that arrived while it was being
/// started is forwarded at once.
///
/// # Panics
///
/// If `argv` is empty.
pub fn spawn(argv: &[impl AsRef<OsStr>]) -> Result<Running, SpawnError> {
    spawn_with(argv, &[] as &[(&str, &str)])
}

/// [`spawn`], with the variables `env` set in the command's environment (this process's own
/// is left as it is).
///
/// # Panics
///
/// If `argv` is empty.
pub fn spawn_with(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
) -> Result<Running, SpawnError> {
    spawn_fed(argv, env, None)
}

/// [`spawn_with`], the command's standard input read from `input` (a descriptor of it: a
/// message's payload, say) instead of this process's.
///
/// # Panics
///
/// If `argv` is empty.
pub fn spawn_reading(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    input: &std::fs::File,
) -> Result<Running, SpawnError> {
    spawn_fed(argv, env, Some(input))
}

fn spawn_fed(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    input: Option<&std::fs::File>,
) -> Result<Running, SpawnError> {
    spawn_keeping(argv, env, input, None, None, true)
}

/// Start a command as [`spawn_reading`] (`forward`) or [`spawn_job`] do, `keep` (a
/// descriptor of ours) left open in it alone: a lock it holds for as long as it runs, and
/// anything it leaves running with the descriptor (a message's claim, [`crate::msg`]);
/// `output` its standard output and error, where given.
pub(crate) fn spawn_keeping(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    input: Option<&std::fs::File>,
    keep: Option<std::os::fd::BorrowedFd<'_>>,
    output: Option<[std::os::fd::BorrowedFd<'_>; 2]>,
    forward: bool,
) -> Result<Running, SpawnError> {
    // A caller that ignores SIGCHLD (`env --ignore-signal=CHLD`) would lose the command's
    // status to the kernel's reaping.
    signal::unignore_sigchld();
    // A message's job (it keeps the claim) leads a group of its own: stopped on timeout or
    // cancel with all it started.
    let group = keep.is_some();
    let child = process::spawn(argv, env, input, keep, output, group, false)?;
    Ok(Running::started(child, group, forward))
}

/// A job of a pool of workers (`fsync msg work`): started as [`spawn_with`] starts a command
/// (its standard input read from `input` where given, as [`spawn_reading`]), but cancellation
/// signals are not forwarded to it. They end the process's waits (so that no new job is
/// taken) while the job runs on to its end; and any number of jobs may run at once, where
/// forwarding knows one command at a time. A signal from the terminal reaches the job anyway,
/// as it reaches every process of the foreground job.
///
/// # Panics
///
/// If `argv` is empty.
pub fn spawn_job(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    input: Option<&std::fs::File>,
) -> Result<Running, SpawnError> {
    spawn_keeping(argv, env, input, None, None, false)
}

/// Start `argv` as [`spawn`] does, but by fork and exec, as util-linux flock(1) and a shell
/// start a command: then the command has nothing ignored that the process's caller did not
/// ignore (glibc's posix_spawn(3), which [`spawn`] uses, leaves the C library's two internal
/// real-time signals ignored in it). The cost: a copy of the process for a moment, whose
/// descriptors are closed at exec (on a FUSE file system whose server does not answer, a
/// close waits for it); for a process with no descriptor open there but the lock it passes
/// on, as `fsync flock`.
///
/// # Panics
///
/// If `argv` is empty.
pub fn spawn_forked(argv: &[impl AsRef<OsStr>]) -> Result<Running, SpawnError> {
    signal::unignore_sigchld();
    let child = process::spawn(argv, &[] as &[(&str, &str)], None, None, None, false, true)?;
    Ok(Running::started(child, false, true))
}

/// Replace this process with `argv`, found and run as [`spawn`] runs it, with the environment
/// and descriptors the process has now (`flock --no-fork`). Returns only if that failed.
///
/// # Panics
///
/// If `argv` is empty.
pub fn exec(argv: &[impl AsRef<OsStr>]) -> SpawnError {
    process::exec(argv).into()
}

impl From<process::SpawnError> for SpawnError {
    fn from(e: process::SpawnError) -> SpawnError {
        match e {
            process::SpawnError::NotFound => SpawnError::NotFound,
            process::SpawnError::CannotExecute(e) => SpawnError::CannotExecute(e),
        }
    }
}

impl Running {
    /// `child`, just started (leading a process `group` of its own or not), with cancellation
    /// signals forwarded to it if `forward`; one that arrived while it was being started is
    /// forwarded at once.
    fn started(child: process::Child, group: bool, forward: bool) -> Running {
        if forward {
            let pid = child.id();
            if let Some(sig) = signal::set_child(Some(pid as i32), group) {
                match group {
                    true => drop(process::kill_group(pid, sig)),
                    false => process::kill(pid, sig),
                }
            }
        }
        Running {
            child,
            forwarded: forward,
            group,
            after_exit: None,
        }
    }

    /// The command's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send signal `sig` to the command (ignored if it has exited already).
    pub fn signal(&self, sig: i32) {
        process::kill(self.pid(), sig);
    }

    /// Send signal `sig` to the command and everything it started: to its process group if it
    /// leads one of its own (a message's job, [`crate::msg::Received::spawn`]), else to it
    /// alone. Whether any process was there to get it (the command itself counts until it is
    /// waited for, even once it has exited).
    pub fn signal_group(&self, sig: i32) -> bool {
        match self.group {
            true => process::kill_group(self.pid(), sig),
            false => {
                self.signal(sig);
                true
            }
        }
    }

    /// Whether a process of the command's own group other than the command lives on (for a
    /// command that leads one: a message's job). Looks through `/proc`.
    pub fn group_lives_on(&self) -> bool {
        self.group && crate::platform::procinfo::group_lives(self.pid(), self.pid())
    }

    /// A way to wait for the command's exit with a timeout, while it still runs; `None` on
    /// kernels without pidfds (before Linux 5.3).
    pub fn exit_watch(&self) -> Option<ExitWatch> {
        process::PidFd::open(self.pid()).map(ExitWatch)
    }

    /// Wait until the command exits and return its status. Signals are no longer forwarded to
    /// it once it has exited, before its pid is released.
    pub fn wait(mut self) -> io::Result<ExitStatus> {
        let forwarded = self.forwarded;
        let status = process::wait_for_exit(&mut self.child, || {
            if forwarded {
                signal::set_child(None, false);
            }
        });
        if let Some(after) = self.after_exit.take() {
            after();
        }
        status
    }

    /// Have `after` called once the command has exited, before [`wait`](Self::wait) returns.
    pub(crate) fn after_exit(mut self, after: Box<dyn FnOnce() + Send + Sync>) -> Running {
        self.after_exit = Some(after);
        self
    }
}

/// Waits for a [`Running`] command's exit with a timeout (see [`Running::exit_watch`]).
#[derive(Debug)]
pub struct ExitWatch(process::PidFd);

impl ExitWatch {
    /// Whether the command exits within `timeout` (`Duration::MAX`: for ever). A signal that
    /// interrupts the wait counts as "not yet".
    pub fn exited_within(&self, timeout: Duration) -> bool {
        self.0.exited_within(timeout)
    }
}

impl std::os::fd::AsFd for ExitWatch {
    /// A descriptor that becomes readable when the command exits (a pidfd).
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}
