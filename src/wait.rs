/*!
The wait core: every primitive that waits (for a lock, a slot, an event, a message) waits here.

One loop owns the three things every wait needs: a deadline, cancellation by a signal (INT,
TERM, HUP, QUIT, once the CLI has called [`install_cancel_handlers`]), and an [`Outcome`] that
says which of them ended the wait. The primitive supplies one *attempt* function:

- `attempt(false)` must not block: it checks once (a non-blocking lock, a directory scan);
- `attempt(true)` may block in the kernel (a blocking `flock`, a sleep until change notification)
  until the thing happens (`Some`) or may have happened (`None`: the core re-checks with
  `attempt(false)`), so on a local file system a release wakes the waiter at once.

A blocking call is ended by a signal: a per-thread POSIX timer sends [`wake_signal`] to the
waiting thread at the deadline (and on network file systems every `poll` interval, because a
release on another host may not wake a blocked call); its handler does nothing and is installed
without `SA_RESTART`, so the call returns `EINTR` and the loop re-checks. The timer keeps firing
every few milliseconds after it first expires, which closes the window in which a signal arrives
just before the thread enters the blocking call. Cancellation handlers fire that same timer.
*/

use std::{
    io,
    os::fd::AsRawFd,
    path::Path,
    ptr,
    sync::{
        atomic::{AtomicI32, AtomicPtr, Ordering},
        Once,
    },
    time::{Duration, Instant},
};

use nix::libc;

use crate::{
    error::{Error, Result},
    platform::{
        lock::{self, Mode},
        notify::DirWatch,
    },
};

/// Default re-check interval on network file systems.
pub const DEFAULT_POLL: Duration = Duration::from_millis(50);

/// How often a wait that reports progress (`-v`) calls its progress callback.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome<T> {
    /// The thing waited for was had.
    Acquired(T),
    /// The deadline passed first.
    TimedOut,
    /// A cancellation signal (its number) arrived first.
    Interrupted(i32),
}

impl<T> Outcome<T> {
    /// The thing waited for, if it was had.
    pub fn acquired(self) -> Option<T> {
        match self {
            Outcome::Acquired(v) => Some(v),
            Outcome::TimedOut | Outcome::Interrupted(_) => None,
        }
    }

    /// The same outcome, with the thing waited for (if it was had) made into another.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Acquired(v) => Outcome::Acquired(f(v)),
            Outcome::TimedOut => Outcome::TimedOut,
            Outcome::Interrupted(s) => Outcome::Interrupted(s),
        }
    }
}

/// The value of an [`Outcome::Acquired`]; any other outcome is returned at once, as `Ok`, from
/// the enclosing function (which returns a `Result<Outcome<_>>`): how a wait made of steps gives
/// up at the first step that did not succeed.
macro_rules! acquired {
    ($outcome:expr) => {
        match $outcome {
            $crate::wait::Outcome::Acquired(v) => v,
            $crate::wait::Outcome::TimedOut => return Ok($crate::wait::Outcome::TimedOut),
            $crate::wait::Outcome::Interrupted(s) => {
                return Ok($crate::wait::Outcome::Interrupted(s))
            }
        }
    };
}
pub(crate) use acquired;

/// When a wait must end, fixed when it begins. A wait made of steps (a queue, then a slot)
/// passes the same deadline to each, so that the whole takes no longer than asked and its
/// progress counts from its beginning. A caller that waits in a loop (a watch that runs until a
/// timeout) keeps one too, and passes on what [`remaining`](Deadline::remaining) says.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    start: Instant,
    /// `None`: never.
    end: Option<Instant>,
}

impl Deadline {
    /// `timeout` from now: `None` waits for ever, zero tries once. A timeout too large to
    /// represent is no timeout at all.
    pub fn after(timeout: Option<Duration>) -> Deadline {
        let start = Instant::now();
        Deadline {
            start,
            end: timeout.and_then(|t| start.checked_add(t)),
        }
    }

    /// Try once, without waiting.
    pub fn now() -> Deadline {
        Deadline::after(Some(Duration::ZERO))
    }

    /// Wait until the thing happens or a cancellation signal arrives.
    pub fn never() -> Deadline {
        Deadline::after(None)
    }

    /// The time left (zero once it has passed); `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.end
            .map(|end| end.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn passed(&self) -> bool {
        self.passed_at(Instant::now())
    }

    fn passed_at(&self, now: Instant) -> bool {
        self.end.is_some_and(|end| end <= now)
    }

    /// How long since the wait began.
    pub fn waited(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The parameters of one wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    pub(crate) deadline: Deadline,
    /// Re-check at least this often even if nothing wakes us (network file systems).
    pub(crate) poll: Option<Duration>,
    /// Call the progress callback when the wait starts blocking and then this often (`-v`).
    pub(crate) progress: Option<Duration>,
}

impl Wait {
    /// A wait for a lock: until `deadline`, re-checking every `poll` on a network file system
    /// (where a release on another host may not wake a blocked call), reporting progress.
    pub(crate) fn for_lock(deadline: Deadline, network: bool, poll: Duration) -> Wait {
        Wait {
            deadline,
            poll: network.then_some(poll),
            progress: Some(PROGRESS_EVERY),
        }
    }
}

/// What the wait core needs to know of an attempt's error: whether a signal interrupted a
/// blocking call (the deadline, a poll tick or a cancellation ended it: look again) or the
/// attempt failed. Errors of waiting itself (its timer) come as `io::Error`.
pub(crate) trait AttemptError: From<io::Error> {
    fn is_interrupted(&self) -> bool;
}

impl AttemptError for io::Error {
    fn is_interrupted(&self) -> bool {
        self.kind() == io::ErrorKind::Interrupted
    }
}

/// The error of an attempt that speaks the library's errors: one of them, passed through as it
/// is, or an operating-system error of waiting (a blocking call, the timer), which the caller
/// names with [`Failed::naming`].
#[derive(Debug)]
pub(crate) enum Failed {
    Lib(Error),
    Os(io::Error),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::Lib(e)
    }
}

impl From<io::Error> for Failed {
    fn from(e: io::Error) -> Failed {
        Failed::Os(e)
    }
}

impl AttemptError for Failed {
    fn is_interrupted(&self) -> bool {
        matches!(self, Failed::Os(e) if e.is_interrupted())
    }
}

impl Failed {
    /// The library error: the attempt's own, or the operating-system error of waiting as a
    /// failure to do `what` at `path`.
    pub(crate) fn naming(self, path: &Path, what: &str) -> Error {
        match self {
            Failed::Lib(e) => e,
            Failed::Os(e) => Error::io(path, what, e),
        }
    }
}

/// How soon a missed timer signal is repeated; bounds timeout inaccuracy in the worst case.
const RETRY: Duration = Duration::from_millis(5);

/// Wait until `attempt` succeeds, the deadline passes, or a cancellation signal arrives.
/// `progress` gets the time waited since the deadline was set.
pub(crate) fn wait_for<T, E: AttemptError>(
    spec: Wait,
    mut progress: impl FnMut(Duration),
    mut attempt: impl FnMut(bool) -> Result<Option<T>, E>,
) -> Result<Outcome<T>, E> {
    let start = Instant::now();
    let deadline = spec.deadline;
    if let Some(sig) = cancelled() {
        return Ok(Outcome::Interrupted(sig));
    }
    if let Some(v) = attempt(false)? {
        return Ok(Outcome::Acquired(v));
    }
    if deadline.passed() {
        return Ok(Outcome::TimedOut); // zero tries once
    }
    let timer = WakeTimer::new()?;
    if spec.progress.is_some() {
        progress(deadline.waited()); // say at once what we wait for
    }
    let mut next_progress = spec.progress.map(|p| start + p);
    loop {
        if let Some(sig) = cancelled() {
            return Ok(Outcome::Interrupted(sig));
        }
        let now = Instant::now();
        if deadline.passed_at(now) {
            return Ok(Outcome::TimedOut);
        }
        if let Some(p) = next_progress.filter(|&p| p <= now) {
            progress(now.saturating_duration_since(deadline.start));
            next_progress = spec.progress.map(|step| p.max(now) + step);
        }
        let next = [deadline.end, spec.poll.map(|p| now + p), next_progress]
            .into_iter()
            .flatten()
            .min();
        timer.arm(next.map(|t| t.saturating_duration_since(now)))?;
        match attempt(true) {
            Ok(Some(v)) => return Ok(Outcome::Acquired(v)),
            // Something may have changed, or a poll tick, the deadline or a cancellation
            // interrupted the call: re-check without blocking (polling sees other hosts so).
            Ok(None) => {}
            Err(e) if e.is_interrupted() => {}
            Err(e) => return Err(e),
        }
        if cancelled().is_none() {
            if let Some(v) = attempt(false)? {
                return Ok(Outcome::Acquired(v));
            }
        }
    }
}

/// Wait for a whole-file `flock` lock on `file` in `mode`, blocking in the kernel so that a
/// release wakes us at once. Errors name `path`.
pub(crate) fn flock(
    spec: Wait,
    progress: impl FnMut(Duration),
    file: &impl AsRawFd,
    mode: Mode,
    path: &Path,
) -> Result<Outcome<()>> {
    wait_for(spec, progress, |block| {
        Ok(lock::flock(file, mode, block)?.then_some(()))
    })
    .map_err(|e| Error::io(path, "cannot lock", e))
}

/// Wait until `check` finds what we wait for, blocking in `watch` (change notification) between
/// checks: the common shape of the waits on files appearing and disappearing (events, messages,
/// lock holders). `poll` re-checks where notification cannot see other hosts. `progress`, if
/// given, is called as [`wait_for`] calls it (`-v`). Errors of `check` come back as they are;
/// errors of waiting itself name `what`.
pub(crate) fn watch_until<T>(
    deadline: Deadline,
    poll: Option<Duration>,
    watch: &DirWatch,
    what: &Path,
    mut progress: Option<&mut dyn FnMut(Duration)>,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<Outcome<T>> {
    let spec = Wait {
        deadline,
        poll,
        progress: progress.is_some().then_some(PROGRESS_EVERY),
    };
    let report = |waited| {
        if let Some(p) = progress.as_mut() {
            p(waited);
        }
    };
    wait_for(spec, report, |block| -> Result<_, Failed> {
        if block {
            watch.wait()?;
            return Ok(None);
        }
        Ok(check()?)
    })
    .map_err(|f| f.naming(what, "cannot wait"))
}

/// Copy `from` to `to` until the end, or until a cancellation signal arrives: a read or write
/// that a signal interrupted is retried only if it was not a cancellation (the std copy retries
/// every `EINTR`, so a `^C` at a terminal or a TERM during a blocked write would go unheeded).
/// A cancellation gives an error of kind `Interrupted`; [`cancelled`] names the signal.
pub fn copy_cancellable(from: &mut dyn io::Read, to: &mut dyn io::Write) -> io::Result<u64> {
    let interrupted = || io::Error::new(io::ErrorKind::Interrupted, "cancelled by a signal");
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        if cancelled().is_some() {
            return Err(interrupted());
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut done = 0;
        while done < n {
            match to.write(&buf[done..n]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if cancelled().is_some() {
                        return Err(interrupted());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
    loop {
        match to.flush() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted && cancelled().is_none() => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(interrupted()),
            other => return other.map(|()| total),
        }
    }
}

/// The signal that interrupts blocking calls at deadlines and poll ticks. A real-time signal,
/// so that a program using the library keeps SIGALRM for itself.
pub fn wake_signal() -> i32 {
    libc::SIGRTMIN() + 5
}

static CANCELLED: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicI32 = AtomicI32::new(0);
static ACTIVE_TIMER: AtomicPtr<libc::c_void> = AtomicPtr::new(ptr::null_mut());
static CANCEL_INSTALLED: Once = Once::new();

/// The cancellation signal received so far, if any.
pub fn cancelled() -> Option<i32> {
    match CANCELLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The signals that cancel a wait and are forwarded to a running child.
pub const CANCEL_SIGNALS: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Make INT, TERM, HUP and QUIT cancel waits (outcome `Interrupted`) instead of killing the
/// process, and forward them to the child registered with [`set_child`] while one runs.
/// For programs (the CLI), not libraries: it replaces the process's handlers.
///
/// A signal that is ignored when this is called stays ignored, as the Unix convention wants
/// (`nohup`, `trap '' HUP`, the INT and QUIT a non-interactive shell ignores for `&` jobs): it
/// neither cancels a wait nor is forwarded, and a command started later inherits it ignored.
pub fn install_cancel_handlers() {
    CANCEL_INSTALLED.call_once(|| {
        for sig in CANCEL_SIGNALS {
            if !is_ignored(sig) {
                install(sig, on_cancel as *const () as usize, libc::SA_SIGINFO);
            }
        }
    });
}

/// Whether `sig`'s disposition is SIG_IGN.
fn is_ignored(sig: i32) -> bool {
    // SAFETY: querying a disposition (a null new action) into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// End the process by signal `sig`, as if it had not been handled: the convention that lets a
/// shell see that its child died of, say, SIGINT and stop a loop (bash stops a loop after ^C
/// only when the child died of SIGINT). The default action is restored and the signal
/// unblocked and raised; no core is dumped for it (the core would be ours, not that of the
/// process that crashed). Returns only if the signal's default action does not end a process.
pub fn die_of(sig: i32) {
    // SAFETY: plain system calls on our own process; no handler code is installed.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
        libc::raise(sig);
    }
}

/// Register the running child (`Some(pid)`) to which cancellation signals are forwarded, or
/// none. Returns a signal that arrived before the child was registered, to be forwarded by
/// the caller.
pub fn set_child(pid: Option<i32>) -> Option<i32> {
    CHILD.store(pid.unwrap_or(0), Ordering::SeqCst);
    if pid.is_some() {
        return match CANCELLED.swap(0, Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        };
    }
    None
}

extern "C" fn on_cancel(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // A signal the terminal sent (si_code > 0: from the kernel) reached the child already,
        // since it shares our process group; forward only what a process sent to us.
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
        if !from_kernel {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(child, sig) };
        }
        return;
    }
    CANCELLED.store(sig, Ordering::SeqCst);
    let timer = ACTIVE_TIMER.load(Ordering::SeqCst);
    if !timer.is_null() {
        // SAFETY: timer_settime is async-signal-safe; the timer stays alive while registered.
        unsafe {
            libc::timer_settime(
                timer,
                0,
                &spec(Some(Duration::from_nanos(1))),
                ptr::null_mut(),
            )
        };
    }
}

/// Wake signals handled so far in this process: lets a waiter that blocks on signals
/// ([`crate::platform::notify`]'s dnotify watches) tell one that came before it blocked.
static WAKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn on_wake(_: libc::c_int) {
    WAKES.fetch_add(1, Ordering::SeqCst);
}

/// How many [`wake_signal`]s this process has handled.
pub(crate) fn wakes() -> u64 {
    WAKES.load(Ordering::SeqCst)
}

/// Install the handler of [`wake_signal`] (once per process).
pub(crate) fn install_wake_handler() {
    static WAKE_INSTALLED: Once = Once::new();
    WAKE_INSTALLED.call_once(|| install(wake_signal(), on_wake as *const () as usize, 0));
}

fn install(sig: i32, handler: usize, flags: i32) {
    // SAFETY: a zeroed sigaction with a valid handler and an empty mask; no SA_RESTART, so
    // blocking calls return EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, ptr::null_mut());
    }
}

fn spec(first: Option<Duration>) -> libc::itimerspec {
    let ts = |d: Duration| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    match first {
        // it_value zero would disarm the timer: fire "now" as 1 ns.
        Some(d) => libc::itimerspec {
            it_value: ts(d.max(Duration::from_nanos(1))),
            it_interval: ts(RETRY),
        },
        None => libc::itimerspec {
            it_value: ts(Duration::ZERO),
            it_interval: ts(Duration::ZERO),
        },
    }
}

/// A POSIX timer that signals the current thread; deleted (with any pending signal) on drop.
struct WakeTimer {
    id: libc::timer_t,
    registered: bool,
}

impl WakeTimer {
    fn new() -> io::Result<WakeTimer> {
        install_wake_handler();
        // SAFETY: a zeroed sigevent filled in for SIGEV_THREAD_ID delivery to this thread.
        let id = unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = wake_signal();
            sev.sigev_notify_thread_id = libc::gettid();
            let mut id: libc::timer_t = ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) != 0 {
                return Err(io::Error::last_os_error());
            }
            id
        };
        let registered = CANCEL_INSTALLED.is_completed()
            && ACTIVE_TIMER
                .compare_exchange(ptr::null_mut(), id, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        Ok(WakeTimer { id, registered })
    }

    /// Fire after `after` (then every few ms until re-armed), or never.
    fn arm(&self, after: Option<Duration>) -> io::Result<()> {
        // SAFETY: the timer is alive for the lifetime of self.
        if unsafe { libc::timer_settime(self.id, 0, &spec(after), ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for WakeTimer {
    fn drop(&mut self) {
        if self.registered {
            ACTIVE_TIMER.store(ptr::null_mut(), Ordering::SeqCst);
        }
        // SAFETY: deleting our own timer; Linux also discards its pending signal.
        unsafe { libc::timer_delete(self.id) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_timeout_tries_once() {
        let mut calls = 0;
        let out = wait_for(
            Wait {
                deadline: Deadline::now(),
                poll: None,
                progress: None,
            },
            |_| {},
            |b| {
                assert!(!b);
                calls += 1;
                Ok::<_, io::Error>(None::<()>)
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::TimedOut);
        assert_eq!(calls, 1);
    }

    #[test]
    fn deadlines_try_once_wait_for_ever_or_count_down() {
        assert!(Deadline::now().passed());
        assert_eq!(Deadline::now().remaining(), Some(Duration::ZERO));
        assert!(!Deadline::never().passed());
        assert_eq!(Deadline::never().remaining(), None);
        // Too large to represent: no deadline at all.
        assert_eq!(Deadline::after(Some(Duration::MAX)).remaining(), None);
        let left = Deadline::after(Some(Duration::from_secs(60)))
            .remaining()
            .unwrap();
        assert!(left > Duration::from_secs(59) && left <= Duration::from_secs(60));
    }

    /// A library error of an attempt comes back as it is, whether the attempt blocked or not;
    /// an interrupted blocking call is looked at again.
    #[test]
    fn an_attempts_own_error_comes_back_unchanged() {
        let spec = Wait {
            deadline: Deadline::never(),
            poll: None,
            progress: None,
        };
        let mut calls = 0;
        let got = wait_for(
            spec,
            |_| {},
            |block| -> Result<Option<()>, Failed> {
                calls += 1;
                match (block, calls) {
                    (false, 1) => Ok(None),
                    (true, 2) => Err(io::Error::from(io::ErrorKind::Interrupted).into()),
                    (false, 3) => Ok(None),
                    _ => Err(Error::new(Path::new("/x"), crate::ErrorKind::Corrupt, "bad").into()),
                }
            },
        )
        .map_err(|f| f.naming(Path::new("/y"), "cannot wait"));
        let err = got.unwrap_err();
        assert_eq!(
            (err.path(), err.kind()),
            (Path::new("/x"), crate::ErrorKind::Corrupt)
        );
        assert_eq!(calls, 4);
    }

    #[test]
    fn deadline_interrupts_a_blocking_attempt() {
        let out = wait_for(
            Wait {
                deadline: Deadline::after(Some(Duration::from_millis(30))),
                poll: None,
                progress: None,
            },
            |_| {},
            |b| {
                if b {
                    nix::unistd::pause(); // returns when the wake signal's handler has run
                    return Err(io::Error::from(io::ErrorKind::Interrupted));
                }
                Ok(None::<()>)
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::TimedOut);
    }

    #[test]
    fn polling_rechecks_until_success() {
        let mut checks = 0;
        let out = wait_for(
            Wait {
                deadline: Deadline::never(),
                poll: Some(Duration::from_millis(1)),
                progress: None,
            },
            |_| {},
            |b| {
                if b {
                    nix::unistd::pause();
                    return Err(io::Error::from(io::ErrorKind::Interrupted));
                }
                checks += 1;
                Ok((checks == 3).then_some(checks))
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::Acquired(3));
    }
}
