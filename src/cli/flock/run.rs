//! Running a parsed request as flock(1) runs it: taking the lock, with its messages and exit
//! statuses, then the command.

use super::*;

/// How a lock attempt ended that did not get the lock: flock's status and message for it.
struct Refusal {
    code: u8,
    message: String,
}

/// A held lock: kept until fsync exits.
enum Held {
    Whole(fsync::PlainGuard),
    Range(fsync::RangeGuard),
    None,
}

impl Held {
    fn pass_down(&mut self) -> fsync::Result<()> {
        match self {
            Held::Whole(g) => fsync::Guard::pass_down(g),
            Held::Range(g) => fsync::Guard::pass_down(g),
            Held::None => Ok(()),
        }
    }
}

impl Request {
    pub(super) fn run(self, say: &Say) -> Exit {
        let timeout = match self.wait {
            Wait::Forever => None,
            Wait::No => Some(Duration::ZERO),
            Wait::For(d) => Some(d),
        };
        let started = Instant::now();
        let outcome = match &self.target {
            Target::File { path, .. } => self.lock_file(path, timeout),
            Target::Fd(n) => self.lock_fd(*n, timeout),
        };
        let mut held = match outcome {
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
                say.line(&refusal.message);
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
        let Target::File { path, argv } = &self.target else {
            return say.after_output(verbose.finish(), Exit::OK);
        };
        verbose.line(format!("executing {}", argv[0].to_string_lossy()));
        if let Err(e) = if self.close { Ok(()) } else { held.pass_down() } {
            say.line(&e.to_string());
            return Exit::code(EX_OSERR);
        }
        if self.no_fork {
            verbose.flush_if_terminal();
            let e = fsync::command::exec(argv);
            say.line(&exec_failure(&argv[0], &e));
            return Exit::code(EX_UNAVAILABLE);
        }
        verbose.flush_if_terminal();
        let exit = self.run_command(path, argv, &held, say);
        drop(held);
        say.after_output(verbose.finish(), exit)
    }

    /// Open FILE as flock opens it and lock it (or, with -u, neither).
    fn lock_file(
        &self,
        path: &std::path::Path,
        timeout: Option<Duration>,
    ) -> Result<Outcome<Held>, Refusal> {
        let mode = match self.op {
            Op::Shared => Mode::Shared,
            Op::Exclusive => Mode::Exclusive,
            Op::Unlock => return Ok(Outcome::Acquired(Held::None)),
        };
        match self.range {
            None => Mutex::new(path)
                .acquire_plain_with(mode, timeout, |_| {})
                .map(|o| o.map(Held::Whole)),
            Some(range) => RangeLock::new(path, range)
                .acquire_with(mode, timeout, |_| {})
                .map(|o| o.map(Held::Range)),
        }
        .map_err(|e| file_refusal(path, &e))
    }

    /// Lock (or unlock) descriptor `n`, which the caller has open.
    fn lock_fd(&self, n: i32, timeout: Option<Duration>) -> Result<Outcome<Held>, Refusal> {
        let fd = fsync::mutex::inherited_fd(n).map_err(|e| fd_refusal(n, &e))?;
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

    /// Run the command as flock's child, with the lease of `mutex run` on a network file
    /// system; its status as flock reports it.
    fn run_command(
        &self,
        path: &std::path::Path,
        argv: &[OsString],
        held: &Held,
        say: &Say,
    ) -> Exit {
        let job = Job {
            argv,
            env: Vec::new(),
        };
        let loss = LossArgs {
            on_lost: OnLost::Term,
            lease: None,
        };
        let failed = |e: SpawnError| super::super::Failure::Exec {
            program: format!("failed to execute {}", argv[0].to_string_lossy()),
            exit: Exit::code(EX_UNAVAILABLE),
            cause: spawn_cause(&e),
        };
        let checking = super::super::child::Checking {
            loss: &loss,
            lock: path,
            verbose: false,
            check: whole_loss_check,
        };
        let ran = job.run_guarded_or(held, |_, _| {}, Some(checking), failed);
        match ran {
            // flock dies of INT, TERM, HUP or QUIT sent to it (fsync forwarded it and waited
            // for the command), and reports a signal its command died of alone as 128+N.
            Ok(exit) => match fsync::wait::last_received() {
                Some(sig) => Exit::signal(sig),
                None => Exit::code(exit.code),
            },
            Err(failure @ super::super::Failure::Exec { exit, .. }) => {
                say.line(&failure.to_string());
                exit
            }
            Err(other) => {
                say.line(&other.to_string());
                Exit::code(EX_OSERR)
            }
        }
    }
}

/// The check of a whole-file lock of ours; none of a byte range or of the caller's descriptor
/// (`mutex run`'s byte ranges are not checked either).
fn whole_loss_check(held: &Held) -> Option<fsync::LossCheck<'_>> {
    match held {
        Held::Whole(g) => g.loss_check(),
        _ => None,
    }
}

/// "failed to execute CMD: No such file or directory", as flock's child says it.
fn exec_failure(program: &OsStr, e: &SpawnError) -> String {
    format!(
        "failed to execute {}: {}",
        program.to_string_lossy(),
        spawn_cause(e)
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

/// FILE could not be opened or locked: flock's words and status for it.
fn file_refusal(path: &std::path::Path, e: &fsync::Error) -> Refusal {
    use fsync::ErrorKind;
    let cause = || e.errno().map_or_else(|| own_words(e), strerror);
    let path = path.display();
    match (e.kind(), e.errno()) {
        (ErrorKind::NotFound | ErrorKind::WrongKind | ErrorKind::PermissionDenied, errno) => {
            Refusal {
                code: match errno {
                    Some(nix::libc::EROFS | nix::libc::ENOSPC) => EX_CANTCREAT,
                    _ => EX_NOINPUT,
                },
                message: format!("cannot open lock file {path}: {}", cause()),
            }
        }
        (_, Some(nix::libc::ENOMEM | nix::libc::EMFILE | nix::libc::ENFILE)) => Refusal {
            code: EX_OSERR,
            message: format!("cannot open lock file {path}: {}", cause()),
        },
        (_, errno) => Refusal {
            code: match errno {
                Some(nix::libc::ENOLCK) => EX_OSERR,
                _ => EX_DATAERR,
            },
            message: format!("{path}: {}", cause()),
        },
    }
}

/// Descriptor `n` could not be locked: "9: Bad file descriptor".
fn fd_refusal(n: i32, e: &fsync::Error) -> Refusal {
    let cause = e.errno().map_or_else(|| own_words(e), strerror);
    Refusal {
        code: match e.errno() {
            Some(nix::libc::ENOLCK | nix::libc::ENOMEM) => EX_OSERR,
            _ => EX_DATAERR,
        },
        message: format!("{n}: {cause}"),
    }
}

/// The library's description of an error without its path: "is a pipe, not a lock file".
fn own_words(e: &fsync::Error) -> String {
    let text = e.to_string();
    let path = format!("{}: ", e.path().display());
    text.strip_prefix(&path).unwrap_or(&text).to_string()
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
