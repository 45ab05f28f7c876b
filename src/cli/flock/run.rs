//! Running a parsed request as flock(1) runs it: taking the lock, with its messages and exit
//! statuses, then the command.

use super::*;

/// How a lock attempt ended that did not get the lock: flock's status and message for it.
struct Refusal {
    code: u8,
    /// As it is shown: its path and words escaped.
    message: String,
}

/// A lock of ours: the descriptor FILE was opened on, kept open until fsync exits (and passed
/// on to COMMAND, as flock passes it), or none (a descriptor of the caller's, or -u).
enum Held {
    File(OwnedFd),
    None,
}

impl Request {
    pub(super) fn run(self, say: &Say) -> Exit {
        let timeout = match self.wait {
            Wait::Forever => None,
            Wait::No => Some(Duration::ZERO),
            Wait::For(d) => Some(d),
        };
        // A timed wait catches SIGALRM from then on, as flock's timer handler does: a SIGALRM
        // no longer ends fsync, and the command starts with its default disposition.
        if timeout.is_some_and(|t| !t.is_zero()) {
            fsync::internal::catch_sigalrm();
        }
        let started = Instant::now();
        let outcome = match &self.target {
            Target::File { path, .. } => self.lock_file(path, timeout),
            Target::Fd(n) => self.lock_fd(*n, timeout),
        };
        let held = match outcome {
            Ok(Outcome::Acquired(held)) => held,
            Ok(Outcome::TimedOut) => {
                if self.verbose {
                    say.line(match self.wait {
                        Wait::No => "failed to get lock",
                        _ => "timeout while waiting to get lock",
                    });
                }
                return Exit::code(self.conflict);
            }
            Ok(Outcome::Interrupted(sig)) => return Exit::signal(sig),
            Err(refusal) => {
                say.shown_line(&refusal.message);
                return Exit::code(refusal.code);
            }
        };
        // flock prints these with printf: at once on a terminal, at its exit where standard
        // output is a file or a pipe (after the command's own output; lost with -F).
        let mut verbose = Verbose::new(self.verbose, say.name);
        let took = started.elapsed();
        verbose.line(format!(
            "getting lock took {}.{:06} seconds",
            took.as_secs(),
            took.subsec_micros()
        ));
        let Target::File { argv, .. } = &self.target else {
            return say.after_output(verbose.finish(), Exit::OK);
        };
        verbose.line(format!("executing {}", argv[0].shown()));
        // -o: the command does not get the lock's descriptor (flock closes it in the child).
        if let (true, Held::File(fd)) = (self.close, &held) {
            let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
        }
        if self.no_fork {
            verbose.flush_if_terminal();
            let e = fsync::command::exec(argv);
            say.shown_line(&exec_failure(&argv[0], &e));
            return Exit::code(EX_UNAVAILABLE);
        }
        verbose.flush_if_terminal();
        let exit = run_command(argv, say);
        drop(held);
        say.after_output(verbose.finish(), exit)
    }

    /// Open FILE as flock opens it ([`open_lock_file`]) and lock that descriptor (or, with -u,
    /// neither). Nothing looks at the name again: a holder that removes or renames the file
    /// while we wait hands us the lock on the file we opened, as flock's waiters get it.
    fn lock_file(
        &self,
        path: &std::path::Path,
        timeout: Option<Duration>,
    ) -> Result<Outcome<Held>, Refusal> {
        use rustix::fs::OFlags;
        if self.op == Op::Unlock {
            return Ok(Outcome::Acquired(Held::None));
        }
        // An exclusive fcntl lock needs a descriptor open for writing.
        let mut flags = match (self.range, self.op) {
            (Some(_), Op::Exclusive) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        let (mut fd, _) = open_lock_file(path, &mut flags)?;
        loop {
            let e = match self.lock(fd.as_fd(), timeout) {
                Ok(o) => return Ok(o.map(|()| Held::File(fd))),
                Err(e) => e,
            };
            // flock reports what errno holds when it gives up: the lock's, or that of the
            // steps below.
            let mut errno = e.errno();
            // flock's way with NFSv4, where flock(2) is emulated by fcntl locks: open again
            // for writing, if we may, and try again.
            if matches!(errno, Some(nix::libc::EIO | nix::libc::EBADF))
                && !flags.contains(OFlags::RDWR)
                && self.op != Op::Shared
            {
                let may = rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK;
                match rustix::fs::access(path, may) {
                    Err(denied) => errno = Some(denied.raw_os_error()),
                    Ok(()) => {
                        flags = OFlags::RDWR;
                        let opened_dir;
                        (fd, opened_dir) = open_lock_file(path, &mut flags)?;
                        if flags.contains(OFlags::RDWR) {
                            continue;
                        }
                        // A directory, opened read-only after "Is a directory".
                        if opened_dir {
                            errno = Some(nix::libc::EISDIR);
                        }
                    }
                }
            }
            let cause = errno.map_or_else(|| own_words(&e), strerror);
            return Err(Refusal {
                code: match errno {
                    Some(nix::libc::ENOLCK | nix::libc::ENOMEM) => EX_OSERR,
                    _ => EX_DATAERR,
                },
                message: format!("{}: {}", path.shown(), escaped(&cause)),
            });
        }
    }

    /// Take the lock on `fd`, waiting up to `timeout`.
    fn lock(&self, fd: BorrowedFd<'_>, timeout: Option<Duration>) -> fsync::Result<Outcome<()>> {
        let mode = match self.op {
            Op::Shared => Mode::Shared,
            _ => Mode::Exclusive,
        };
        let poll = fsync::wait::DEFAULT_POLL;
        match self.range {
            None => fsync::mutex::lock_fd_with(fd, mode, timeout, poll, |_| {}),
            Some(r) => fsync::range::lock_fd_with(fd, r, mode, timeout, poll, |_| {}),
        }
    }

    /// Lock (or unlock) descriptor `n`, which the caller has open.
    fn lock_fd(&self, n: i32, timeout: Option<Duration>) -> Result<Outcome<Held>, Refusal> {
        let fd = fsync::internal::inherited_fd(n).map_err(|e| fd_refusal(n, &e))?;
        let poll = fsync::wait::DEFAULT_POLL;
        let fd = fd.as_fd();
        let done = match (self.op, self.range) {
            (Op::Unlock, None) => fsync::mutex::unlock_fd(fd).map(Outcome::Acquired),
            (Op::Unlock, Some(r)) => fsync::range::unlock_fd(fd, r).map(Outcome::Acquired),
            (op, range) => {
                let mode = match op {
                    Op::Shared => Mode::Shared,
                    _ => Mode::Exclusive,
                };
                match range {
                    None => fsync::mutex::lock_fd_with(fd, mode, timeout, poll, |_| {}),
                    Some(r) => fsync::range::lock_fd_with(fd, r, mode, timeout, poll, |_| {}),
                }
            }
        };
        // The lock belongs to the caller's descriptor: nothing of ours holds it.
        done.map(|o| o.map(|()| Held::None))
            .map_err(|e| fd_refusal(n, &e))
    }
}

/// Run the command as flock's child and wait for it: its status, 128+N if it died of signal
/// N. Nothing is forwarded: a signal that ends fsync meanwhile ends it alone, as it ends flock,
/// and leaves the command running with the lock.
fn run_command(argv: &[OsString], say: &Say) -> Exit {
    let running = match fsync::command::spawn_forked(argv) {
        Ok(running) => running,
        Err(e) => {
            say.shown_line(&exec_failure(&argv[0], &e));
            return Exit::code(EX_UNAVAILABLE);
        }
    };
    match running.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt as _;
            match (status.code(), status.signal()) {
                (Some(code), _) => Exit::code(code as u8),
                (None, Some(sig)) => Exit::code((128 + sig) as u8),
                (None, None) => Exit::code(EX_OSERR),
            }
        }
        Err(e) => {
            say.line(&format!(
                "waitpid failed: {}",
                e.raw_os_error().map_or_else(|| e.to_string(), strerror)
            ));
            Exit::code(1)
        }
    }
}

/// Open FILE as flock(1) opens it: `flags` (read-only unless an exclusive fcntl lock needs
/// writing), created mode 0666 less the umask if missing, never truncated, no controlling
/// terminal; a directory read-only. On success `flags` say how it was opened; with whether a
/// directory made the first open fail (flock's errno then says so).
///
/// One thing more than flock: a symbolic link is followed only to something that exists, never
/// to create its target (a dangling link planted in a shared directory would otherwise make us
/// create a file wherever it points). It costs nothing where FILE is no link: the first open
/// does not follow one, and only a link (ELOOP) is opened again, following it, without O_CREAT.
fn open_lock_file(
    path: &std::path::Path,
    flags: &mut rustix::fs::OFlags,
) -> Result<(OwnedFd, bool), Refusal> {
    use rustix::fs::{Mode as M, OFlags, open};
    use rustix::io::Errno;
    let retrying = |f: &dyn Fn() -> rustix::io::Result<OwnedFd>| loop {
        match f() {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    };
    let mut fl = *flags | OFlags::NOCTTY;
    let mode = M::from_raw_mode(0o666);
    let mut opened = retrying(&|| open(path, fl | OFlags::CREATE | OFlags::NOFOLLOW, mode));
    if opened.as_ref().err() == Some(&Errno::LOOP) {
        opened = retrying(&|| open(path, fl, M::empty()));
    }
    let mut dir = false;
    if opened.as_ref().err() == Some(&Errno::ISDIR) {
        dir = true;
        fl = OFlags::NOCTTY; // read-only: O_RDONLY is 0
        opened = retrying(&|| open(path, fl, M::empty()));
    }
    match opened {
        Ok(fd) => {
            *flags = fl;
            Ok((fd, dir))
        }
        Err(e) => Err(Refusal {
            code: match e.raw_os_error() {
                nix::libc::ENOMEM | nix::libc::EMFILE | nix::libc::ENFILE => EX_OSERR,
                nix::libc::EROFS | nix::libc::ENOSPC => EX_CANTCREAT,
                _ => EX_NOINPUT,
            },
            message: format!(
                "cannot open lock file {}: {}",
                path.shown(),
                escaped(&strerror(e.raw_os_error()))
            ),
        }),
    }
}

/// "failed to execute CMD: No such file or directory", as flock's child says it (shown:
/// escaped).
fn exec_failure(program: &OsStr, e: &SpawnError) -> String {
    format!(
        "failed to execute {}: {}",
        program.shown(),
        escaped(&spawn_cause(e))
    )
}

/// Why a command could not be started, in the C library's words.
fn spawn_cause(e: &SpawnError) -> String {
    match e {
        SpawnError::NotFound => strerror(nix::libc::ENOENT),
        SpawnError::CannotExecute(e) => match e.raw_os_error() {
            Some(n) => strerror(n),
            None => e.to_string(),
        },
        _ => strerror(nix::libc::ENOEXEC),
    }
}

/// The C library's text for `errno`, as flock's `warn` prints it ("Bad file descriptor").
pub(super) fn strerror(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let suffix = format!(" (os error {errno})");
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// Descriptor `n` could not be locked: "9: Bad file descriptor".
fn fd_refusal(n: i32, e: &fsync::Error) -> Refusal {
    let cause = e.errno().map_or_else(|| own_words(e), strerror);
    Refusal {
        code: match e.errno() {
            Some(nix::libc::ENOLCK | nix::libc::ENOMEM) => EX_OSERR,
            _ => EX_DATAERR,
        },
        message: format!("{n}: {}", escaped(&cause)),
    }
}

/// The library's description of an error without its path: "is a pipe, not a lock file".
fn own_words(e: &fsync::Error) -> String {
    e.message().to_string()
}

/// `--verbose`'s lines, printed when flock's buffered standard output would show them.
struct Verbose<'a> {
    on: bool,
    name: &'a str,
    lines: Vec<String>,
    /// The first write that failed (reported at the end, as flock reports it at its exit).
    failed: Option<std::io::Error>,
}

impl<'a> Verbose<'a> {
    fn new(on: bool, name: &'a str) -> Verbose<'a> {
        Verbose {
            on,
            name,
            lines: Vec::new(),
            failed: None,
        }
    }

    fn line(&mut self, text: String) {
        if self.on {
            self.lines.push(format!("{}: {text}\n", self.name));
        }
    }

    /// On a terminal (line-buffered), the lines are out before the command starts.
    fn flush_if_terminal(&mut self) {
        use std::io::IsTerminal as _;
        if std::io::stdout().is_terminal() {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let mut out = std::io::stdout().lock();
        let written = (self.lines.drain(..))
            .try_for_each(|line| out.write_all(line.as_bytes()))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            self.failed.get_or_insert(e);
        }
    }

    /// The lines left written out: the first error of any write.
    fn finish(mut self) -> std::io::Result<()> {
        self.flush();
        self.failed.map_or(Ok(()), Err)
    }
}
