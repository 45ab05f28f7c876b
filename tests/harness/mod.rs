/*!
A small harness for running `fsync` as separate processes (after ripgrep's `tests/util.rs` and
just's `tests/test.rs`).

- [`TestDir`]: a temporary directory per test; commands run inside it.
- [`Cmd`]: a builder for one process (`fsync`, `sh -c`, `flock`, ...). [`Cmd::run`] waits for it
  under a deadline, so a deadlock fails the test instead of hanging it, and returns an
  [`Output`] whose `#[track_caller]` assertions show command, status, stdout and stderr.
- [`Holder`]: a running process we talk to line by line. [`Cmd::hold`] returns once it has
  printed `acquired`, so a test contends only when the lock is really held. Tests synchronise on
  what processes say, never on sleeps; holders keep the lock until their stdin is closed.
*/

use std::{
    ffi::OsStr,
    io::{BufRead, BufReader, Read, Write},
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        process::{CommandExt, ExitStatusExt},
    },
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    thread,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{self, Signal},
    unistd::Pid,
};

/// The longest any one process may run before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_mins(1);

/// The longest we wait for one expected line from a running process.
const LINE_DEADLINE: Duration = Duration::from_secs(30);

/// The longest we read a running process's lines for one that says something: it may print
/// others first, but not forever.
const SAYS_DEADLINE: Duration = Duration::from_mins(2);

/// What a holder runs under the lock: say so, then hold until stdin is closed.
pub(crate) const HOLD: &str = "echo acquired; read x || true";

/// The `fsync` executable under test.
pub(crate) fn fsync_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fsync"))
}

/// Fail (not skip) when a tool the test needs is missing: CI installs them (`.ci/run`).
#[track_caller]
pub(crate) fn require(tool: &str, package: &str) {
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(tool)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
    });
    assert!(
        on_path,
        "this test needs `{tool}` (package {package}), which is not on PATH; \
         .ci/run installs it, or: apt-get install {package}"
    );
}

/// Whether we run as root: some tests do more with it (act as `nobody`, make a device).
pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Fail (not pass) a root-only test run without root. Such tests are `#[ignore]`d, so a plain
/// `cargo test` reports them as ignored; `.ci/run` runs them as root with `--ignored`.
#[track_caller]
pub(crate) fn require_root() {
    assert!(
        is_root(),
        "this test needs root (it acts as another user or makes files of one); \
         run it as root: cargo test --test integration -- --ignored --skip netfs_"
    );
}

/// A temporary directory for one test, removed when the test ends.
pub(crate) struct TestDir {
    dir: tempfile::TempDir,
}

impl TestDir {
    pub(crate) fn new() -> TestDir {
        let dir = tempfile::Builder::new()
            .prefix("fsync-test.")
            .tempdir()
            .expect("cannot create a temporary directory");
        TestDir { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `name` inside the directory, as a string for command lines.
    pub(crate) fn arg(&self, name: &str) -> String {
        self.join(name)
            .to_str()
            .expect("UTF-8 temp dir")
            .to_string()
    }

    pub(crate) fn write(&self, name: &str, content: &str) {
        std::fs::write(self.join(name), content).expect("cannot write test file");
    }

    #[track_caller]
    pub(crate) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.join(name))
            .unwrap_or_else(|e| panic!("cannot read {name}: {e}"))
    }

    /// `fsync ARGS...`, run in this directory.
    /// `fsync ARGS` run under strace, which answers `inject` (`-e inject=...`) to the calls
    /// of `calls` (`-e trace=...`) that touch `path` (`-P`: its name, or a descriptor of it).
    /// Run it and check the output, less strace's note on where a relative path leads.
    pub(crate) fn fsync_under_strace(
        &self,
        path: &str,
        calls: &str,
        inject: &str,
        args: &[&str],
    ) -> Output {
        let mut out = self
            .cmd("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-P", path])
            .args(["-e", &format!("trace={calls}"), "-e", inject])
            .arg(fsync_bin())
            .args(args)
            .run();
        out.stderr = (out.stderr.lines())
            .filter(|l| !l.starts_with("strace: Requested path"))
            .map(|l| format!("{l}\n"))
            .collect();
        out
    }

    pub(crate) fn fsync<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd(fsync_bin()).args(args)
    }

    /// `sh -c SCRIPT`, with `$FSYNC` naming the executable under test.
    pub(crate) fn sh(&self, script: &str) -> Cmd {
        self.cmd("sh").args(["-c", script])
    }

    /// Any program, run in this directory.
    pub(crate) fn cmd(&self, program: impl AsRef<OsStr>) -> Cmd {
        Cmd::new(program.as_ref(), self.path())
    }

    /// `fsync mutex run LOCK -- sh -c HOLD`, once it holds LOCK.
    #[track_caller]
    pub(crate) fn hold(&self, lock: &str) -> Holder {
        self.fsync(["mutex", "run", lock, "--", "sh", "-c", HOLD])
            .hold()
    }

    /// Let other users (`nobody`) into the directory, and check they can reach it and the
    /// executable under test: every directory above them must be searchable by others.
    #[track_caller]
    pub(crate) fn open_to_others(&self) {
        std::fs::set_permissions(self.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod temp dir");
        for path in [self.path(), fsync_bin()] {
            for dir in path.ancestors().skip(1) {
                let mode = std::fs::metadata(dir).map_or(0, |m| m.mode());
                assert!(
                    mode & 0o001 != 0,
                    "{} is not searchable by other users (mode {:o}), so `nobody` cannot reach \
                     {}; run the tests from a tree (and TMPDIR) other users can reach",
                    dir.display(),
                    mode & 0o7777,
                    path.display()
                );
            }
        }
    }
}

/// Start `command`, again while the kernel says its program is open for writing (ETXTBSY): a
/// test that has just written a script runs it, and another test's thread may have forked (to
/// start a process of its own) while the script was open, so that the child holds it open for
/// writing until it execs. That lasts an instant; bounded all the same.
fn spawn(command: &mut Command) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < 1000 => {
                tries += 1;
                thread::sleep(Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// A process to run: a builder, in the style of `std::process::Command`.
pub(crate) struct Cmd {
    command: Command,
    shown: String,
    /// How long [`Cmd::run`] lets it run ([`DEADLINE`] unless shortened).
    deadline: Duration,
}

impl Cmd {
    fn new(program: &OsStr, dir: &Path) -> Cmd {
        let mut command = Command::new(program);
        command
            .current_dir(dir)
            .env("FSYNC", fsync_bin())
            // The tests may themselves run under an fsync lock: start every process afresh.
            .env_remove("FSYNC_MUTEX_HELD")
            .env_remove("FSYNC_FENCE");
        Cmd {
            command,
            shown: program.to_string_lossy().into_owned(),
            deadline: DEADLINE,
        }
    }

    /// Let [`Cmd::run`] wait at most `deadline` (instead of [`DEADLINE`]) before it kills the
    /// process and fails: for commands that must not block at all (a FIFO planted where a file
    /// is expected), so that a hang fails fast.
    pub(crate) fn deadline(mut self, deadline: Duration) -> Cmd {
        self.deadline = deadline;
        self
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        let arg = arg.as_ref();
        self.shown.push(' ');
        self.shown.push_str(&shell_word(arg));
        self.command.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    /// Run it in `dir` instead of the test's directory.
    pub(crate) fn current_dir(mut self, dir: &Path) -> Cmd {
        self.command.current_dir(dir);
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Cmd {
        self.command.env(key, value);
        self
    }

    /// Start it as the leader of a process group of its own, so that
    /// [`Holder::kill_process_group`] reaches it and everything it starts (an `fsync` and
    /// the command it runs).
    pub(crate) fn own_process_group(mut self) -> Cmd {
        self.command.process_group(0);
        self
    }

    /// Run to completion (stdin empty) and collect the output; fail if it takes longer than
    /// [`DEADLINE`] (or the one set with [`Cmd::deadline`]).
    #[track_caller]
    pub(crate) fn run(mut self) -> Output {
        let start = Instant::now();
        let child = spawn(
            self.command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", self.shown));
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let deadline = self.deadline;
        match rx.recv_timeout(deadline) {
            Ok(Ok(out)) => Output {
                shown: self.shown,
                status: out.status,
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stdout_bytes: out.stdout,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                elapsed: start.elapsed(),
            },
            Ok(Err(e)) => panic!("cannot wait for `{}`: {e}", self.shown),
            Err(_) => {
                kill(pid, Signal::SIGKILL);
                panic!(
                    "`{}` did not finish within {deadline:?} (a deadlock?)",
                    self.shown
                )
            }
        }
    }

    /// Start it, with stdin, stdout and stderr connected to us.
    #[track_caller]
    pub(crate) fn start(mut self) -> Holder {
        let mut child = spawn(
            self.command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", self.shown));
        Holder {
            stdin: child.stdin.take(),
            stdout: lines(child.stdout.take().expect("piped stdout")),
            stderr: lines(child.stderr.take().expect("piped stderr")),
            shown: self.shown,
            pid: child.id(),
            child: Some(child),
            status: None,
            log: String::new(),
            start: Instant::now(),
        }
    }

    /// Start it and return once it has printed `acquired`.
    #[track_caller]
    pub(crate) fn hold(self) -> Holder {
        let mut holder = self.start();
        holder.expect("acquired");
        holder
    }
}

/// A word of a command line as a shell would need it, for messages.
fn shell_word(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The lines of a pipe, as they come, from a thread that ends at end of file.
fn lines(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(pipe).split(b'\n') {
            let Ok(line) = line else { break };
            if tx
                .send(String::from_utf8_lossy(&line).into_owned())
                .is_err()
            {
                break;
            }
        }
    });
    rx
}

/// `Command::output` with the harness's bound: for commands a test builds itself (the chaos
/// runs), so that one that hangs fails the test after [`DEADLINE`] instead of hanging it.
/// Standard input is empty, as with `output`.
pub(crate) trait OutputWithin {
    fn output_within_deadline(&mut self) -> std::process::Output;
}

impl OutputWithin for Command {
    #[track_caller]
    fn output_within_deadline(&mut self) -> std::process::Output {
        let shown = format!("{self:?}");
        let child = spawn(
            self.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(DEADLINE) {
            Ok(out) => out.unwrap_or_else(|e| panic!("cannot wait for {shown}: {e}")),
            Err(_) => {
                kill(pid, Signal::SIGKILL);
                panic!("{shown} did not finish within {DEADLINE:?} (a deadlock?)")
            }
        }
    }
}

fn kill(pid: u32, sig: Signal) {
    let _ = signal::kill(Pid::from_raw(pid as i32), sig);
}

/// A running process (a lock holder, a watcher, a worker) we read from line by line.
pub(crate) struct Holder {
    shown: String,
    pid: u32,
    /// `None` once it has exited and been reaped (`status`).
    child: Option<Child>,
    status: Option<ExitStatus>,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    /// Every line read so far, for failure messages.
    log: String,
    start: Instant,
}

impl Holder {
    /// The pid of the process we started (not of the command it runs).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The next line on its stdout.
    #[track_caller]
    pub(crate) fn line(&mut self) -> String {
        self.next(false)
    }

    /// The next line on its stderr.
    #[track_caller]
    pub(crate) fn stderr_line(&mut self) -> String {
        self.next(true)
    }

    /// Read its stderr up to the first line containing `part`, and return that line; fail if it
    /// ends its output or has not said it within [`SAYS_DEADLINE`].
    #[track_caller]
    pub(crate) fn stderr_until(&mut self, part: &str) -> String {
        let deadline = Instant::now() + SAYS_DEADLINE;
        loop {
            let line = self.stderr_line();
            if line.contains(part) {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "`{}` did not say {part:?} on stderr within {SAYS_DEADLINE:?}\n{}",
                self.shown,
                self.drain_log()
            );
        }
    }

    /// Assert that the next line on its stdout is `want`.
    #[track_caller]
    pub(crate) fn expect(&mut self, want: &str) {
        let got = self.line();
        assert_eq!(got, want, "`{}` printed an unexpected line", self.shown);
    }

    #[track_caller]
    fn next(&mut self, stderr: bool) -> String {
        let (rx, name) = match stderr {
            false => (&self.stdout, "stdout"),
            true => (&self.stderr, "stderr"),
        };
        let got = rx.recv_timeout(LINE_DEADLINE);
        match got {
            Ok(line) => {
                self.log.push_str(&format!("{name}: {line}\n"));
                line
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "`{}` printed no line on {name} within {LINE_DEADLINE:?}\n{}",
                self.shown,
                self.drain_log()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                let status = (self.child.as_mut())
                    .and_then(|c| c.try_wait().ok().flatten())
                    .or(self.status);
                panic!(
                    "`{}` closed its {name} (exit: {status:?}) before the expected line\n{}",
                    self.shown,
                    self.drain_log()
                )
            }
        }
    }

    /// What it said so far, and whatever is waiting to be read, for failure messages.
    fn drain_log(&self) -> String {
        let mut log = self.log.clone();
        for line in self.stdout.try_iter() {
            log.push_str(&format!("stdout: {line}\n"));
        }
        for line in self.stderr.try_iter() {
            log.push_str(&format!("stderr: {line}\n"));
        }
        log
    }

    /// Write a line to its stdin.
    #[track_caller]
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("cannot write to `{}`: {e}", self.shown));
    }

    /// Send a signal to the process we started (only that one).
    pub(crate) fn signal(&self, sig: Signal) {
        kill(self.pid(), sig);
    }

    /// Whether the process we started is still running (it is reaped if it has exited).
    pub(crate) fn running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.as_mut().map(std::process::Child::try_wait) {
            Some(Ok(Some(status))) => {
                self.status = Some(status);
                self.child = None;
                false
            }
            Some(Ok(None)) => true,
            _ => false,
        }
    }

    /// SIGKILL the process group this holder leads (see [`Cmd::own_process_group`]): the
    /// process we started and all it started. Returns once the process we started is reaped
    /// (and died of the SIGKILL) and every other process of the group has died, with the pids
    /// that were in the group.
    #[track_caller]
    pub(crate) fn kill_process_group(&mut self) -> Vec<u32> {
        let pgid = self.pid;
        assert_eq!(
            process_group_of(pgid),
            Some(pgid),
            "`{}` does not lead a process group (use Cmd::own_process_group)",
            self.shown
        );
        // The jobs it runs lead groups of their own: killed with it, right after it (its
        // death first, as when both die at once: it never sees its job die).
        let jobs = job_groups_of(pgid);
        let mut pids = process_group(pgid);
        pids.extend(jobs.iter().flat_map(|&g| process_group(g)));
        let _ = signal::killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
        for &job in &jobs {
            let _ = signal::killpg(Pid::from_raw(job as i32), Signal::SIGKILL);
        }
        let status = self.wait_exit();
        assert_eq!(
            status.signal(),
            Some(Signal::SIGKILL as i32),
            "`{}` ended otherwise than by our SIGKILL: {status:?}",
            self.shown
        );
        eventually("every process of the killed groups died", || {
            process_group(pgid).is_empty() && jobs.iter().all(|&g| process_group(g).is_empty())
        });
        pids
    }

    /// Wait until the process we started has exited (not its descendants), with its stdin
    /// still open.
    #[track_caller]
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        self.wait_exit_within(DEADLINE)
    }

    /// [`wait_exit`](Self::wait_exit), for a process that may rightly take longer than
    /// [`DEADLINE`] (a wait for a network file system's server to give up on a host).
    #[track_caller]
    pub(crate) fn wait_exit_within(&mut self, deadline: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let mut child = self.child.take().expect("running");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let status = match rx.recv_timeout(deadline) {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("cannot wait for `{}`: {e}", self.shown),
            Err(_) => {
                kill(self.pid, Signal::SIGKILL);
                panic!(
                    "`{}` did not exit within {deadline:?}\n{}",
                    self.shown,
                    self.drain_log()
                )
            }
        };
        self.status = Some(status);
        status
    }

    /// [`wait_exit`](Self::wait_exit) for a process that works through many rounds, however
    /// long they take on a busy machine: it fails only once `progress` (a count of rounds done)
    /// has stood still for [`DEADLINE`]. A hang is a stall; a slow machine is not.
    #[track_caller]
    pub(crate) fn wait_exit_while(&mut self, mut progress: impl FnMut() -> usize) -> ExitStatus {
        let (mut last, mut since) = (progress(), Instant::now());
        while self.running() {
            let now = progress();
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() > DEADLINE {
                kill(self.pid, Signal::SIGKILL);
                panic!(
                    "`{}` made no progress for {DEADLINE:?} (stuck at {last})\n{}",
                    self.shown,
                    self.drain_log()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.wait_exit()
    }

    /// Close its stdin (a holder releases), wait until it has exited and its output has
    /// ended (so have all its descendants that shared it), and return what it printed that
    /// was not read yet.
    #[track_caller]
    pub(crate) fn finish(mut self) -> Output {
        drop(self.stdin.take());
        let status = self.wait_exit();
        let deadline = Instant::now() + DEADLINE;
        let rest = |rx: &Receiver<String>| {
            let mut text = String::new();
            loop {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) => {
                        text.push_str(&line);
                        text.push('\n');
                    }
                    Err(RecvTimeoutError::Disconnected) => return Some(text),
                    Err(RecvTimeoutError::Timeout) => return None,
                }
            }
        };
        let (Some(stdout), Some(stderr)) = (rest(&self.stdout), rest(&self.stderr)) else {
            panic!(
                "`{}` exited ({status:?}) but something it started still holds its output open",
                self.shown
            )
        };
        Output {
            shown: std::mem::take(&mut self.shown),
            status,
            stdout_bytes: stdout.clone().into_bytes(),
            stdout,
            stderr,
            elapsed: self.start.elapsed(),
        }
    }
}

impl Drop for Holder {
    /// A test that failed half-way: release, then ask it to stop, then make it.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        for sig in [None, Some(Signal::SIGTERM), Some(Signal::SIGKILL)] {
            if let Some(sig) = sig {
                kill(child.id(), sig);
            }
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                thread::sleep(Duration::from_millis(10)); // cleanup, not synchronisation
            }
        }
        // Alive 2 s after SIGKILL: asleep in the kernel (a file system that stopped answering).
        // Reap it whenever it dies, without holding up the test.
        thread::spawn(move || child.wait());
    }
}

/// What a finished process did.
pub(crate) struct Output {
    shown: String,
    pub status: ExitStatus,
    pub stdout: String,
    /// Standard output byte for byte (`run` only; from a `Holder`, its lines).
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
    /// From start to exit.
    pub elapsed: Duration,
}

impl Output {
    fn context(&self) -> String {
        format!(
            "command: {}\nstatus:  {:?}\nstdout:\n{}\nstderr:\n{}",
            self.shown, self.status, self.stdout, self.stderr
        )
    }

    /// Assert the exit code.
    #[track_caller]
    pub(crate) fn code(&self, want: i32) -> &Output {
        assert_eq!(
            self.status.code(),
            Some(want),
            "unexpected exit status\n{}",
            self.context()
        );
        self
    }

    /// Assert that it was killed by `sig`.
    #[track_caller]
    pub(crate) fn killed_by(&self, sig: Signal) -> &Output {
        assert_eq!(
            self.status.signal(),
            Some(sig as i32),
            "expected death by {sig}\n{}",
            self.context()
        );
        self
    }

    #[track_caller]
    pub(crate) fn stdout(&self, want: &str) -> &Output {
        assert_eq!(self.stdout, want, "unexpected stdout\n{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn stdout_has(&self, part: &str) -> &Output {
        assert!(
            self.stdout.contains(part),
            "stdout lacks {part:?}\n{}",
            self.context()
        );
        self
    }

    #[track_caller]
    pub(crate) fn stderr(&self, want: &str) -> &Output {
        assert_eq!(self.stderr, want, "unexpected stderr\n{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn stderr_has(&self, part: &str) -> &Output {
        assert!(
            self.stderr.contains(part),
            "stderr lacks {part:?}\n{}",
            self.context()
        );
        self
    }

    /// The CONTRACT's error form: exactly one line on stderr, starting `fsync: `, naming `path`.
    #[track_caller]
    pub(crate) fn error_naming(&self, path: &str) -> &Output {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("fsync: ") && lines[0].contains(path),
            "expected one line `fsync: ...{path}...` on stderr\n{}",
            self.context()
        );
        self
    }

    /// An operational error: any exit code but 0, 1 and 75 (and not a signal), and the
    /// CONTRACT's error form naming `path`.
    #[track_caller]
    pub(crate) fn operational_error(&self, path: &str) -> &Output {
        let code = self.status.code();
        assert!(
            code.is_some_and(|c| ![0, 1, 75].contains(&c)),
            "expected an operational error (not 0, 1 or 75)\n{}",
            self.context()
        );
        self.error_naming(path)
    }
}

/// A shell script of `rounds` rounds that each start six runs of `command(n)` at once, for n
/// 1, 2, 3, 1, 2, 3 turned by the round (so that each n is started first in some rounds), and
/// wait for them; each run prints `in` if it exited 0, `refused` for 2, else `exit N`. For
/// races between runs that ask for different numbers (slot counts, caps).
pub(crate) fn racing_rounds(rounds: usize, command: impl Fn(u32) -> String) -> String {
    let run = |n: u32| {
        format!(
            "({}; s=$?; case $s in 0) echo in;; 2) echo refused;; *) echo \"exit $s\";; esac) &",
            command(n)
        )
    };
    (0..rounds)
        .map(|r| {
            let round: Vec<String> = (0..6).map(|i| run([1, 2, 3][(r + i) % 3])).collect();
            format!("{} wait;", round.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Wait (observing, not timing) until `cond` holds; fail after [`DEADLINE`].
#[track_caller]
pub(crate) fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` has ended (gone, or a zombie whose files are closed).
pub(crate) fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .is_some_and(|i| stat[i + 2..].starts_with(['Z', 'X'])),
    }
}

/// Parse one JSON document (a `--json` line).
#[track_caller]
pub(crate) fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The live processes (not zombies) of process group `pgid`, from `/proc`.
pub(crate) fn process_group(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| !dead(pid) && process_group_of(pid) == Some(pgid))
        .collect()
}

/// The process groups that children of group `pgid`'s members lead (a worker's jobs, each in
/// a group of its own), from `/proc`.
pub(crate) fn job_groups_of(pgid: u32) -> Vec<u32> {
    let members = process_group(pgid);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let parent = fields.get(1).and_then(|f| f.parse::<u32>().ok());
            let group = fields.get(2).and_then(|f| f.parse::<u32>().ok());
            group == Some(pid) && parent.is_some_and(|p| members.contains(&p))
        })
        .collect()
}

/// The process group of `pid` (field 5 of `/proc/PID/stat`), if it still exists.
fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// One `flock(2)` lock, or one blocked request for it, on a file, as the kernel lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flock {
    /// The process that took (or waits for) it; a lock passed down to a child keeps the pid of
    /// the process that took it.
    pub pid: u32,
    pub exclusive: bool,
    /// A request that blocks (`->` in `/proc/locks`) rather than a lock held.
    pub waiting: bool,
}

/// The `flock` locks held on, and requests blocked for, the local file `path`, read from the
/// kernel's lock table (`/proc/locks`): a witness independent of `fsync`.
#[track_caller]
pub(crate) fn flocks_on(path: &Path) -> Vec<Flock> {
    let meta =
        std::fs::metadata(path).unwrap_or_else(|e| panic!("cannot stat {}: {e}", path.display()));
    let (major, minor) = (
        nix::sys::stat::major(meta.dev()),
        nix::sys::stat::minor(meta.dev()),
    );
    let table = std::fs::read_to_string("/proc/locks").expect("cannot read /proc/locks");
    let mut out = Vec::new();
    for line in table.lines() {
        // "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; blocked: "1: -> FLOCK ...".
        let mut fields: Vec<&str> = line.split_whitespace().skip(1).collect();
        let waiting = fields.first() == Some(&"->");
        if waiting {
            fields.remove(0);
        }
        if fields.len() < 5 || fields[0] != "FLOCK" {
            continue;
        }
        let id: Vec<&str> = fields[4].split(':').collect();
        let same_file = id.len() == 3
            && u64::from_str_radix(id[0], 16) == Ok(major)
            && u64::from_str_radix(id[1], 16) == Ok(minor)
            && id[2].parse::<u64>() == Ok(meta.ino());
        if let (true, Ok(pid)) = (same_file, fields[3].parse::<u32>()) {
            out.push(Flock {
                pid,
                exclusive: fields[2] == "WRITE",
                waiting,
            });
        }
    }
    out
}

/// A tiny pseudo-random generator (xorshift), seeded from `FSYNC_TEST_SEED` if set, else from
/// the clock; tests print the seed when they fail, so a failure can be replayed.
pub(crate) struct Rng {
    seed: u64,
    state: u64,
}

impl Rng {
    pub(crate) fn from_env() -> Rng {
        let seed = std::env::var("FSYNC_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            })
            .max(1);
        Rng { seed, state: seed }
    }

    /// The seed, to replay a run with `FSYNC_TEST_SEED`.
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % n as u64) as usize
    }

    /// `k` distinct indices out of `0..n`, in increasing order.
    pub(crate) fn subset(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        let mut picked = all[..k].to_vec();
        picked.sort_unstable();
        picked
    }
}

/// A process the test started in the background (one a command left running), killed when the
/// test ends, even a failed one.
pub(crate) struct Daemon(pub u32);

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0 as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// The directory of a mailbox's first shard (sequence numbers 0 to 99), where the first
/// messages posted to it are queued: `BOX/q/00000000000000000000`.
pub(crate) fn first_shard(mailbox: impl AsRef<Path>) -> PathBuf {
    mailbox.as_ref().join("q").join("00000000000000000000")
}

/// The names of the entries queued in mailbox `mailbox`: in its shards (`q/FIRST/`) and in
/// `q/` itself (not the shard directories), sorted.
pub(crate) fn queued_files(mailbox: impl AsRef<Path>) -> Vec<String> {
    let q = mailbox.as_ref().join("q");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&q).into_iter().flatten() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let shard = name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit());
        if shard && entry.file_type().unwrap().is_dir() {
            for inner in std::fs::read_dir(entry.path()).unwrap() {
                names.push(inner.unwrap().file_name().to_string_lossy().into_owned());
            }
        } else {
            names.push(name);
        }
    }
    names.sort();
    names
}
