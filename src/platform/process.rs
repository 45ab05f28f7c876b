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
    path::{Path, PathBuf},
    process::{Command, ExitStatus},
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
///
/// Where the C library can (`keep` needs glibc 2.29), the command is started by posix_spawn(3):
/// without a copy of our address space, and without a moment in which a copy of our
/// descriptors exists (a copy of a descriptor on a FUSE file system closed at exec waits for
/// the server: while it is cut off, for minutes). With `fork`, it is started by fork and exec,
/// as util-linux flock(1) starts it: glibc's posix_spawn leaves its two internal real-time
/// signals ignored in the command, which flock's commands do not have. Either way the command
/// gets the signal mask and SIGPIPE's disposition the process started with
/// ([`super::signal::ignore_sigpipe`], [`super::signal::note_sigpipe`]).
pub(crate) fn spawn(
    argv: &[impl AsRef<OsStr>],
    env: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)],
    stdin: Option<&std::fs::File>,
    keep: Option<BorrowedFd<'_>>,
    output: Option<[BorrowedFd<'_>; 2]>,
    group: bool,
    fork: bool,
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
        inherit_signals(command);
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
    if !fork && (keep.is_none() || spawn_keeps_fds()) {
        let fds = Fds {
            stdin: stdin.map(AsFd::as_fd),
            output,
            keep,
        };
        let env: Vec<(&OsStr, &OsStr)> = env.clone().collect();
        let args: Vec<&OsStr> = args.clone().collect();
        let first = posix_spawn(&path, program, &args, &env, &fds, group);
        let spawned = match first {
            Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => {
                let args: Vec<&OsStr> = std::iter::once(path.as_os_str()).chain(args).collect();
                posix_spawn(
                    Path::new("/bin/sh"),
                    "/bin/sh".as_ref(),
                    &args,
                    &env,
                    &fds,
                    group,
                )
            }
            other => other,
        };
        return spawned.map(Child::Spawned).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => SpawnError::NotFound,
            _ => SpawnError::CannotExecute(e),
        });
    }
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
    spawned.map(Child::Std).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound,
        _ => SpawnError::CannotExecute(e),
    })
}

/// Give a command the signal mask the process started with (the standard library would empty
/// it) and SIGPIPE ignored where our caller ignored it ([`super::signal::ignore_sigpipe`]; the
/// standard library would set the default): what it inherits from us is what it would have
/// inherited from our caller, as a shell or flock(1) passes them on. Done as a step between
/// fork and exec, which also keeps the standard library from starting the command by
/// posix_spawn(3).
fn inherit_signals(command: &mut Command) {
    let mask = super::signal::mask_for_commands();
    let pipe_ignored = super::signal::sigpipe_ignored_for_commands();
    // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls are
    // allowed: pthread_sigmask(3) and signal(2) are; `mask` is a copy the closure owns.
    unsafe {
        command.pre_exec(move || {
            mask.thread_set_mask()?;
            if pipe_ignored {
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            }
            Ok(())
        });
    }
}

/// A command started: by the standard library, or by [`posix_spawn`] (a child of ours, not
/// yet reaped).
#[derive(Debug)]
pub(crate) enum Child {
    Std(std::process::Child),
    Spawned(u32),
}

impl Child {
    /// Its process id.
    pub(crate) fn id(&self) -> u32 {
        match self {
            Child::Std(c) => c.id(),
            Child::Spawned(pid) => *pid,
        }
    }

    /// Reap it (once).
    fn wait(&mut self) -> io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Child::Std(c) => c.wait(),
            Child::Spawned(pid) => {
                use rustix::process::{Pid, WaitOptions, waitpid};
                let pid = Pid::from_raw(*pid as i32)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
                match waitpid(Some(pid), WaitOptions::empty()) {
                    Ok(Some((_, status))) => Ok(ExitStatus::from_raw(status.as_raw())),
                    // Only a wait that does not block answers without a status.
                    Ok(None) => Err(io::Error::other("no status of the command")),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }
}

/// The descriptors a job gets: its standard input (else ours), output and error (else ours),
/// and one of ours it holds too.
struct Fds<'a> {
    stdin: Option<BorrowedFd<'a>>,
    output: Option<[BorrowedFd<'a>; 2]>,
    keep: Option<BorrowedFd<'a>>,
}

/// Whether this C library's posix_spawn(3) clears the close-on-exec flag of a descriptor
/// duplicated onto itself (`posix_spawn_file_actions_adddup2(fd, fd)`, as POSIX 2024 asks;
/// glibc since 2.29): then a job that keeps a descriptor of ours is started without a copy of
/// our address space (no fork: the cost of a job's start falls by the copy of our page tables
/// and the faults that follow it), else by fork with the flag cleared in the child.
fn spawn_keeps_fds() -> bool {
    static KEEPS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KEEPS.get_or_init(|| {
        #[cfg(target_env = "gnu")]
        {
            // SAFETY: gnu_get_libc_version(3) returns a static NUL-terminated string.
            let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
            let mut parts = version.to_str().unwrap_or("").split('.');
            let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
            matches!((next(), next()), (Some(major), Some(minor)) if (major, minor) >= (2, 29))
        }
        #[cfg(not(target_env = "gnu"))]
        false
    })
}

/// Start `path` with `argv` (`arg0` then `args`), our environment with `env` set in it, the
/// descriptors `fds` and, with `group`, a process group of its own, by posix_spawn(3): its
/// signal mask and SIGPIPE as [`inherit_signals`] gives them (glibc's posix_spawn leaves its
/// internal real-time signals ignored in the job: a job cannot tell).
fn posix_spawn(
    path: &Path,
    arg0: &OsStr,
    args: &[&OsStr],
    env: &[(&OsStr, &OsStr)],
    fds: &Fds<'_>,
    group: bool,
) -> io::Result<u32> {
    use std::ffi::CString;
    let bytes =
        |s: Vec<u8>| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let c = |s: &OsStr| bytes(s.as_bytes().to_vec());
    let path = c(path.as_os_str())?;
    let argv: Vec<CString> = std::iter::once(arg0)
        .chain(args.iter().copied())
        .map(c)
        .collect::<io::Result<_>>()?;
    let mut envp = Vec::new();
    for (key, value) in std::env::vars_os() {
        if !env.iter().any(|(k, _)| *k == key) {
            envp.push(bytes([key.as_bytes(), b"=", value.as_bytes()].concat())?);
        }
    }
    for (key, value) in env {
        envp.push(bytes([key.as_bytes(), b"=", value.as_bytes()].concat())?);
    }
    let pointers = |v: &[CString]| -> Vec<*mut libc::c_char> {
        (v.iter().map(|s| s.as_ptr().cast_mut()))
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv_p, envp_p) = (pointers(&argv), pointers(&envp));
    // A source among 0 to 2 would be overwritten by the duplication onto it of another: such
    // a one is copied above 2 first (close-on-exec, closed when this returns).
    let mut copies = Vec::new();
    let mut high = |fd: BorrowedFd<'_>| -> io::Result<i32> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd.as_raw_fd());
        }
        let copy = fd.try_clone_to_owned()?;
        let raw = copy.as_raw_fd();
        copies.push(copy);
        Ok(raw)
    };
    let mut dups = Vec::new();
    if let Some(fd) = fds.stdin {
        dups.push((high(fd)?, 0));
    }
    if let Some([out, err]) = fds.output {
        dups.push((high(out)?, 1));
        dups.push((high(err)?, 2));
    }
    if let Some(keep) = fds.keep {
        let keep = high(keep)?;
        dups.push((keep, keep)); // its close-on-exec flag cleared in the child alone
    }
    let check = |r: libc::c_int| match r {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    };
    let mut actions = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
    let mut attr = std::mem::MaybeUninit::<libc::posix_spawnattr_t>::uninit();
    // SAFETY: each object is initialised by its _init call before any other use, destroyed
    // once after its last, and lives on this stack frame meanwhile; the descriptors named are
    // open for the whole call (borrowed, or copies owned here); the argument and environment
    // arrays are NULL-terminated arrays of pointers to NUL-terminated strings that outlive the
    // call; `pid` is a live local. posix_spawn(3) copies what it needs before it returns.
    unsafe {
        check(libc::posix_spawn_file_actions_init(actions.as_mut_ptr()))?;
        if let Err(e) = check(libc::posix_spawnattr_init(attr.as_mut_ptr())) {
            libc::posix_spawn_file_actions_destroy(actions.as_mut_ptr());
            return Err(e);
        }
        let spawned = (|| {
            for &(from, to) in &dups {
                check(libc::posix_spawn_file_actions_adddup2(
                    actions.as_mut_ptr(),
                    from,
                    to,
                ))?;
            }
            let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
            if group {
                flags |= libc::POSIX_SPAWN_SETPGROUP;
                check(libc::posix_spawnattr_setpgroup(attr.as_mut_ptr(), 0))?;
            }
            let mask = super::signal::mask_for_commands();
            check(libc::posix_spawnattr_setsigmask(
                attr.as_mut_ptr(),
                mask.as_ref(),
            ))?;
            let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(set.as_mut_ptr());
            if !super::signal::sigpipe_ignored_for_commands() {
                libc::sigaddset(set.as_mut_ptr(), libc::SIGPIPE);
            }
            check(libc::posix_spawnattr_setsigdefault(
                attr.as_mut_ptr(),
                set.as_ptr(),
            ))?;
            check(libc::posix_spawnattr_setflags(
                attr.as_mut_ptr(),
                flags as libc::c_short,
            ))?;
            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawn(
                &raw mut pid,
                path.as_ptr(),
                actions.as_ptr(),
                attr.as_ptr(),
                argv_p.as_ptr(),
                envp_p.as_ptr(),
            ))?;
            Ok(pid as u32)
        })();
        libc::posix_spawnattr_destroy(attr.as_mut_ptr());
        libc::posix_spawn_file_actions_destroy(actions.as_mut_ptr());
        spawned
    }
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
    let mut command = Command::new(&path);
    inherit_signals(&mut command);
    let mut e = command.arg0(program).args(args.clone()).exec();
    if e.raw_os_error() == Some(libc::ENOEXEC) {
        let mut command = Command::new("/bin/sh");
        inherit_signals(&mut command);
        e = command.arg(&path).args(args).exec();
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
