/*!
Running a command as the shell would, and watching it: spawning with execvp's rules, waiting
for its exit without reaping it (so that a signal is never forwarded to a recycled pid), a pidfd
to wait for its exit with a timeout, and signalling it.

The rules a command line is started by are the shell's: a name without `/` is looked up on
`PATH` (the first executable regular file wins; a match that is not executable means "cannot
execute", none at all "not found"), and an executable file the kernel cannot run (a script
without `#!`) runs under `/bin/sh`, as execvp(3), env(1) and every shell run it.
*/

use std::{
    ffi::OsStr,
    io,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
        unix::{ffi::OsStrExt, process::CommandExt},
    },
    path::PathBuf,
    process::{Child, Command, ExitStatus},
    time::Duration,
};

use nix::libc;

/// Why a command could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// Not found on `PATH` (or an empty name): the shell's 127.
    NotFound,
    /// Found, but it cannot be executed (permission, format): the shell's 126.
    CannotExecute(io::Error),
}

/// Start `argv` (`argv[0]` the program, looked up on `PATH` as the shell does), with the
/// environment the process has now and the variables `env` set in it (the process's own
/// environment is not changed: another thread may be reading it).
///
/// `keep`, a descriptor of ours that is close-on-exec, is left open in the command alone (its
/// flag cleared in the child between fork and exec): a lock that the command then holds too,
/// and that no command another thread starts meanwhile inherits. `output`, where given, are
/// the command's standard output and error (a job's kept output, [`crate::msg`]) instead of
/// ours. With `group`, the command leads a process group of its own (its id the command's
/// pid), so that it can be stopped with everything it started ([`kill_group`]).
pub(crate) fn spawn(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    stdin: Option<&std::fs::File>,
    keep: Option<BorrowedFd<'_>>,
    output: Option<[BorrowedFd<'_>; 2]>,
    group: bool,
) -> Result<Child, SpawnError> {
    let program = argv[0].as_ref();
    let path = resolve(program)?;
    let args = argv[1..].iter().map(AsRef::as_ref);
    let env = env.iter().map(|(k, v)| (k.as_ref(), v.as_ref()));
    let input = || -> io::Result<std::process::Stdio> {
        Ok(match stdin {
            Some(f) => f.try_clone()?.into(),
            None => std::process::Stdio::inherit(),
        })
    };
    let keeping = |command: &mut Command| -> io::Result<()> {
        if group {
            command.process_group(0);
        }
        if let Some([out, err]) = output {
            command.stdout(out.try_clone_to_owned()?);
            command.stderr(err.try_clone_to_owned()?);
        }
        if let Some(fd) = keep {
            let raw = fd.as_raw_fd();
            // SAFETY: runs in the child between fork and exec, where only async-signal-safe
            // calls are allowed: fcntl(2) is one, and `raw` is a descriptor the parent keeps
            // open for the whole call (it is borrowed for it), so the child has it too.
            unsafe {
                command.pre_exec(move || match libc::fcntl(raw, libc::F_SETFD, 0) {
                    -1 => Err(io::Error::last_os_error()),
                    _ => Ok(()),
                });
            }
        }
        Ok(())
    };
    let first = input().and_then(|input| {
        let mut command = Command::new(&path);
        keeping(&mut command)?;
        command
            .arg0(program)
            .args(args.clone())
            .envs(env.clone())
            .stdin(input)
            .spawn()
    });
    let spawned = match first {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => input().and_then(|input| {
            let mut command = Command::new("/bin/sh");
            keeping(&mut command)?;
            command.arg(&path).args(args).envs(env).stdin(input).spawn()
        }),
        other => other,
    };
    spawned.map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound,
        _ => SpawnError::CannotExecute(e),
    })
}

/// Replace this process with `argv`, found as [`spawn`] finds it (a script without `#!` under
/// `/bin/sh`); returns only if that failed.
pub(crate) fn exec(argv: &[impl AsRef<OsStr>]) -> SpawnError {
    use std::os::unix::process::CommandExt;
    let program = argv[0].as_ref();
    let path = match resolve(program) {
        Ok(path) => path,
        Err(e) => return e,
    };
    let args = argv[1..].iter().map(AsRef::as_ref);
    let mut e = Command::new(&path).arg0(program).args(args.clone()).exec();
    if e.raw_os_error() == Some(libc::ENOEXEC) {
        e = Command::new("/bin/sh").arg(&path).args(args).exec();
    }
    match e.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound,
        _ => SpawnError::CannotExecute(e),
    }
}

/// Find a command on PATH the way the shell does: the first executable regular file wins; a
/// match that is not executable means 126, none at all 127 (whatever directories on PATH we
/// could not search, which `execvp` would report as "permission denied").
fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    if program.is_empty() {
        return Err(SpawnError::NotFound);
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
        true => SpawnError::CannotExecute(io::Error::from_raw_os_error(libc::EACCES)),
        false => SpawnError::NotFound,
    })
}

/// Send `sig` to process `pid` (our own child, not yet reaped); errors are ignored (it may have
/// exited already).
pub(crate) fn kill(pid: u32, sig: i32) {
    if let Ok(sig) = nix::sys::signal::Signal::try_from(sig) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as libc::pid_t), sig);
    }
}

/// Send `sig` to process group `pgid` (a command we started with a group of its own, whose
/// leader we have not reaped yet, so the id is not another's); errors are ignored (the group
/// may be gone). Whether any of the group was there to receive it.
pub(crate) fn kill_group(pgid: u32, sig: i32) -> bool {
    let pgid = nix::unistd::Pid::from_raw(pgid as libc::pid_t);
    let sig = nix::sys::signal::Signal::try_from(sig).ok();
    nix::sys::signal::killpg(pgid, sig).is_ok()
}

/// Wait until `child` has exited, without reaping it (so its pid cannot be reused meanwhile),
/// then call `before_reap` (unregister it from signal forwarding), then reap it.
pub(crate) fn wait_for_exit(
    child: &mut Child,
    before_reap: impl FnOnce(),
) -> io::Result<ExitStatus> {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let pid = nix::unistd::Pid::from_raw(child.id() as libc::pid_t);
    while let Err(nix::errno::Errno::EINTR) =
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
    {}
    before_reap();
    loop {
        match child.wait() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// A pidfd of a child: lets us wait for its exit with a timeout.
#[derive(Debug)]
pub(crate) struct PidFd(OwnedFd);

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl PidFd {
    /// `None` on kernels without pidfd_open (before 5.3).
    pub(crate) fn open(pid: u32) -> Option<PidFd> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .ok()
            .map(PidFd)
    }

    /// Whether the process exits within `timeout` (`Duration::MAX`: for ever). A signal that
    /// interrupts the wait counts as "not yet".
    pub(crate) fn exited_within(&self, timeout: Duration) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        let timeout = match timeout {
            Duration::MAX => PollTimeout::NONE,
            t => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
        };
        matches!(poll(&mut fds, timeout), Ok(n) if n > 0)
    }
}
