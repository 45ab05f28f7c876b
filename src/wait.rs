/*!
How the primitives wait: timeouts, outcomes, cancellation, and the one signal the library uses.

Every primitive that waits (for a lock, a slot, an event, a message) waits in this one core.

# Timeouts and outcomes

Every call that may wait takes a timeout: `None` waits for ever, `Some(Duration::ZERO)` tries
once and never waits, anything else waits at most that long. The plain calls
([`Mutex::acquire`](crate::Mutex::acquire)) return `Ok(None)` when the wait ended without
success, the `try_*` calls try once, and the `*_with` calls return an [`Outcome`] that tells a
timeout from a cancellation. A wait that merely did not succeed is not an error: [`Error`]s
are failures (a missing directory, a file that cannot be opened).

# Blocking, local and network file systems

A waiting thread blocks in the kernel: in a blocking `flock(2)` or byte-range lock, or asleep
until a directory changes (dnotify, or inotify where the kernel lacks it). On a local file
system a release or a change wakes it at once, with no polling. On a network file system (NFS,
SMB, CIFS, FUSE: see [`doctor::file_system`](crate::doctor::file_system)) another host's release
may not wake a blocked call and change notification never sees other hosts, so the wait also
re-checks every *poll interval* ([`DEFAULT_POLL`] unless a primitive's `poll_interval` sets
another). A call never spins: between checks the thread sleeps. There a blocking lock call
(whole file or byte range) is made by a short-lived child process on the same open file
description, which the wait kills when it ends without the lock: a call that the file server
must answer once interrupted (a GlusterFS client has been seen never to) cannot keep the
caller past its deadline or a signal.

# Cancellation

Nothing cancels a wait unless the program asks: after [`install_cancel_handlers`] (for
programs, not libraries: it replaces the process's handlers of INT, TERM, HUP and QUIT), one of
those signals ends every wait in every thread with [`Outcome::Interrupted`] carrying its number,
at once whichever thread the signal lands on (the handler wakes each waiting thread; past 64
threads waiting at once, the others end at their next poll tick or deadline), and [`cancelled`]
says which arrived. Without it those signals keep whatever disposition the program gave them.

# The wake signal

**Waiting installs a process-wide signal handler.** To end a blocking call at a deadline or at
a poll tick, the core sends a real-time signal, the *wake signal* ([`wake_signal`]: `SIGRTMIN+5`
unless chosen otherwise), to the waiting thread from a per-thread POSIX timer; the kernel also
sends it to a thread that watches a directory with dnotify when the directory changes. Its
handler is installed, without `SA_RESTART`, the first time the library waits or watches a
directory (a wait that does not succeed at once, an event or message wait, a group watch,
[`doctor::examine`](crate::doctor::examine)), and stays installed for the life of the process.
It does nothing but count: it exists only to interrupt a blocking call (`EINTR`), after which
the core looks again.

**Watching a directory with dnotify also gives SIGIO that handler** (with `SA_RESTART`), if
SIGIO still has its default disposition: when the wake signal cannot be queued (the user's
pending-signal queue is full), the kernel reports the change with SIGIO instead, which would
otherwise kill the process. A program that handles or ignores SIGIO itself keeps its choice.

A program that embeds the library must therefore:

- leave the wake signal to the library: not install its own handler for it, nor send it for
  another purpose (a stray one only costs a spurious re-check, but a replaced handler breaks
  deadlines and wake-ups);
- not block it (`pthread_sigmask`) in threads that wait: a blocked wake signal stays pending and
  a wait on a lock held elsewhere then outlives its timeout;
- choose another real-time signal with [`set_wake_signal`] before the first wait if `SIGRTMIN+5`
  is taken (by the program or by another library).

```
use std::time::Duration;
# use nix::libc;
# let dir = tempfile::tempdir().unwrap();
# let path = dir.path().join("ready");
// Early in main, before any wait: the program uses SIGRTMIN+5 for its own purposes.
fsync::wait::set_wake_signal(libc::SIGRTMIN() + 7)?;
let ready = fsync::Event::new(&path);
assert!(!ready.wait(Some(Duration::from_millis(20)))?); // timed out, woken by SIGRTMIN+7
assert_eq!(fsync::wait::wake_signal(), libc::SIGRTMIN() + 7);
// Fixed for the life of the process now.
let too_late = fsync::wait::set_wake_signal(libc::SIGRTMIN() + 8).unwrap_err();
assert_eq!(too_late.kind(), fsync::ErrorKind::Invalid);
# Ok::<(), fsync::Error>(())
```

# How it works

One loop owns the three things every wait needs: a deadline, cancellation by a signal, and an
[`Outcome`] that says which of them ended the wait. The primitive supplies one *attempt*
function:

- `attempt(false)` must not block: it checks once (a non-blocking lock, a directory scan);
- `attempt(true)` may block in the kernel (a blocking `flock`, a sleep until change notification)
  until the thing happens (`Some`) or may have happened (`None`: the core re-checks with
  `attempt(false)`), so on a local file system a release wakes the waiter at once.

The per-thread timer sends the wake signal at the deadline (and on network file systems every
poll interval), and keeps firing every few milliseconds after it first expires, which closes the
window in which a signal arrives just before the thread enters the blocking call. Cancellation
handlers fire that same timer. The handlers and the timer are platform machinery (the crate's
private platform layer); the functions a program needs of it are re-exported here.
*/

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
    path::Path,
    time::{Duration, Instant},
};

use crate::platform::signal::WakeTimer;
pub use crate::platform::signal::{
    CANCEL_SIGNALS, cancel, cancelled, install_cancel_handlers, last_received, set_wake_signal,
    wake_signal,
};

use crate::{
    error::{Error, Result},
    platform::{
        lock::{self, Mode},
        notify::DirWatch,
    },
};

/// The default re-check interval on network file systems (50 ms), where other hosts' releases
/// and changes wake nobody: every primitive's `poll_interval` starts at this.
pub const DEFAULT_POLL: Duration = Duration::from_millis(50);

/// How often a wait that reports progress (`-v`) calls its progress callback.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How a wait ended: what the `*_with` calls return, so that a program can tell a timeout
/// from a cancellation (and exit with a different status for each, as the `fsync` command
/// does).
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome<T> {
    /// The thing waited for was had.
    Acquired(T),
    /// The deadline passed first.
    TimedOut,
    /// A cancellation signal (its number) arrived first; only once the program has called
    /// [`install_cancel_handlers`].
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

/// Where an iterator over changes (a watch: [`crate::mutex::watch`], [`crate::group::watch`])
/// stands: running, or ended by its deadline, a cancellation signal or an error.
#[derive(Debug, Default)]
pub(crate) struct WatchEnd {
    ended: bool,
    interrupted: Option<i32>,
}

impl WatchEnd {
    /// Whether the watch has ended (it yields nothing more).
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// The cancellation signal that ended it, if one did.
    pub(crate) fn interrupted(&self) -> Option<i32> {
        self.interrupted
    }

    /// A wait's result as the watch passes it on: `Ok(Some(change))`; `Ok(None)` once the time
    /// is up or a signal came, which ends the watch; an error, once, which ends it too.
    pub(crate) fn pass<T>(&mut self, waited: Result<Outcome<T>>) -> Result<Option<T>> {
        match waited {
            Ok(Outcome::Acquired(v)) => return Ok(Some(v)),
            Ok(Outcome::TimedOut) => {}
            Ok(Outcome::Interrupted(sig)) => self.interrupted = Some(sig),
            Err(e) => {
                self.ended = true;
                return Err(e);
            }
        }
        self.ended = true;
        Ok(None)
    }
}

/// When a wait must end, fixed when it begins. A wait made of steps (a queue, then a slot)
/// passes the same deadline to each, so that the whole takes no longer than asked and its
/// progress counts from its beginning.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    start: Instant,
    /// `None`: never.
    end: Option<Instant>,
}

impl Deadline {
    /// `timeout` from now: `None` waits for ever, zero tries once. A timeout too large to
    /// represent is no timeout at all.
    pub(crate) fn after(timeout: Option<Duration>) -> Deadline {
        let start = Instant::now();
        Deadline {
            start,
            end: timeout.and_then(|t| start.checked_add(t)),
        }
    }

    /// Try once, without waiting.
    pub(crate) fn now() -> Deadline {
        Deadline::after(Some(Duration::ZERO))
    }

    /// Wait until the thing happens or a cancellation signal arrives.
    pub(crate) fn never() -> Deadline {
        Deadline::after(None)
    }

    /// The time left (zero once it has passed); `None` without a deadline.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.end
            .map(|end| end.saturating_duration_since(Instant::now()))
    }

    /// This deadline, or `at_most` from now if that comes sooner (the wait still counts from
    /// its beginning).
    pub(crate) fn capped(&self, at_most: Duration) -> Deadline {
        let cap = Instant::now().checked_add(at_most);
        let end = match (self.end, cap) {
            (Some(end), Some(cap)) => Some(end.min(cap)),
            (end, cap) => end.or(cap),
        };
        Deadline {
            start: self.start,
            end,
        }
    }

    /// Whether the deadline has passed.
    pub(crate) fn passed(&self) -> bool {
        self.passed_at(Instant::now())
    }

    fn passed_at(&self, now: Instant) -> bool {
        self.end.is_some_and(|end| end <= now)
    }

    /// How long since the wait began.
    pub(crate) fn waited(&self) -> Duration {
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

/// Why waits end early: a cancellation signal ([`cancelled`]), or this thread's stop (an
/// async wait whose future was dropped, [`crate::future`]; reported as signal 0, which nobody
/// sees: the result is dropped with the future).
pub(crate) fn stopped() -> Option<i32> {
    cancelled().or_else(|| crate::platform::signal::thread_stopped().then_some(0))
}

/// Wait until `attempt` succeeds, the deadline passes, or a cancellation signal arrives.
/// `progress` gets the time waited since the deadline was set.
pub(crate) fn wait_for<T, E: AttemptError>(
    spec: Wait,
    mut progress: impl FnMut(Duration),
    mut attempt: impl FnMut(bool) -> Result<Option<T>, E>,
) -> Result<Outcome<T>, E> {
    let start = Instant::now();
    let deadline = spec.deadline;
    if let Some(sig) = stopped() {
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
    // Polls keep to a fixed beat from the start, however long each check takes, so that a
    // change is seen on average half an interval after it happens (plus the check), not half
    // an interval plus a whole check later. A beat missed by a long check is skipped. (The
    // beat starts at the start: the loop moves a tick that has come by whole intervals.)
    let mut next_poll = spec.poll.map(|_| start);
    loop {
        if let Some(sig) = stopped() {
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
        if let (Some(step), Some(tick)) = (spec.poll, next_poll.as_mut()) {
            while *tick <= now {
                *tick += step;
            }
        }
        let next = [deadline.end, next_poll, next_progress]
            .into_iter()
            .flatten()
            .min();
        timer.arm(next.map(|t| t.saturating_duration_since(now)))?;
        // A cancellation between the look above and the arming fired the timer, which the
        // arming then set back: look again now that a later one fires it for the call below.
        if let Some(sig) = stopped() {
            return Ok(Outcome::Interrupted(sig));
        }
        match attempt(true) {
            Ok(Some(v)) => return Ok(Outcome::Acquired(v)),
            // Something may have changed, or a poll tick, the deadline or a cancellation
            // interrupted the call: re-check without blocking (polling sees other hosts so).
            Ok(None) => {}
            Err(e) if e.is_interrupted() => {}
            Err(e) => return Err(e),
        }
        // The check runs with the timer stopped: a tick that fired would repeat every few ms,
        // and each would interrupt the check's calls (on a network file system, requests to
        // the server, which an interrupt slows down or makes fail).
        timer.arm(None)?;
        if stopped().is_none()
            && let Some(v) = attempt(false)?
        {
            return Ok(Outcome::Acquired(v));
        }
    }
}

/// Wait for a whole-file `flock` lock on `file` in `mode`, blocking in the kernel so that a
/// release wakes us at once (on a network file system, in a child process of ours). Errors
/// name `path`.
pub(crate) fn flock(
    spec: Wait,
    progress: impl FnMut(Duration),
    file: &(impl AsFd + AsRawFd),
    mode: Mode,
    path: &Path,
) -> Result<Outcome<()>> {
    let mut locker = Locker::new(spec.poll.is_some());
    let got = wait_for(spec, progress, |block| {
        Ok(locker.flock(file, mode, block)?.then_some(()))
    });
    locker.settle(&got, file);
    got.map_err(|e| Error::io(path, "cannot lock", e))
}

/// The `flock` calls of one wait for a lock: made by this process on a local file system; on a
/// network file system (where waits poll) the blocking call is made by a child
/// ([`lock::ChildLock`]), kept across the wait's attempts, so that a call the file system
/// never answers once interrupted cannot keep us past the deadline or a signal.
pub(crate) struct Locker {
    network: bool,
    child: Option<(lock::ChildLock, lock::Request)>,
}

impl Locker {
    pub(crate) fn new(network: bool) -> Locker {
        Locker {
            network,
            child: None,
        }
    }

    /// [`lock::flock`] on `file`, which must stay the same file until [`forget`](Self::forget).
    pub(crate) fn flock(
        &mut self,
        file: &(impl AsFd + AsRawFd),
        mode: Mode,
        block: bool,
    ) -> io::Result<bool> {
        self.lock(file, lock::Request::Whole(mode), block)
    }

    /// [`lock::ofd_lock`] of `len` bytes from `start` on `file`, as [`flock`](Self::flock).
    pub(crate) fn range(
        &mut self,
        file: &(impl AsFd + AsRawFd),
        mode: Mode,
        (start, len): (u64, u64),
        block: bool,
    ) -> io::Result<bool> {
        self.lock(file, lock::Request::Range { mode, start, len }, block)
    }

    fn lock(
        &mut self,
        file: &(impl AsFd + AsRawFd),
        request: lock::Request,
        block: bool,
    ) -> io::Result<bool> {
        if !block || !self.network {
            return match request {
                lock::Request::Whole(mode) => lock::flock(file, mode, block),
                lock::Request::Range { mode, start, len } => {
                    lock::ofd_lock(file, mode, start, len, block)
                }
            };
        }
        let mut waiting = match self.child.take() {
            Some((c, asked)) if asked == request => c,
            // Gone before another starts: granted late, on our description, its lock would
            // replace the one the new child is granted (a flock on a description converts).
            old => {
                drop(old);
                lock::ChildLock::start(file, request)?
            }
        };
        let granted = waiting.wait();
        if matches!(&granted, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            // still waiting: looked at again after the check
            self.child = Some((waiting, request));
        }
        granted
    }

    /// The next call is for another file: stop the child waiting for this one.
    pub(crate) fn forget(&mut self) {
        self.child = None;
    }

    /// The wait for `file` has ended as `got` says. Where it ended without the lock (a
    /// deadline, a signal, an error): stop the child, and let go of whatever it was granted as
    /// it died, which our description would otherwise hold. (Nothing where no child waited:
    /// `file` may hold a lock of its own.)
    pub(crate) fn settle<T, E>(
        &mut self,
        got: &Result<Outcome<T>, E>,
        file: &(impl AsFd + AsRawFd),
    ) {
        if !matches!(got, Ok(Outcome::Acquired(_)))
            && let Some((child, request)) = self.child.take()
        {
            drop(child); // killed, and gone (or left to be reaped) before the undo
            let _ = request.undo(file);
        }
    }
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

/// Why [`copy_cancellable`] stopped: the side that failed, so that each caller names the right
/// file (a payload that cannot be read is not an output that cannot be written).
#[derive(Debug)]
pub(crate) enum CopyFailed {
    Read(io::Error),
    Write(io::Error),
    /// A cancellation signal: [`cancelled`] names it.
    Cancelled(i32),
}

/// Copy `from` to `to` until the end, or until a cancellation signal arrives: a read or write
/// that a signal interrupted is retried only if it was not a cancellation (the std copy retries
/// every `EINTR`, so a `^C` at a terminal or a TERM during a blocked write would go unheeded).
pub(crate) fn copy_cancellable(
    from: &mut dyn io::Read,
    to: &mut dyn io::Write,
) -> Result<u64, CopyFailed> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        if let Some(sig) = cancelled() {
            return Err(CopyFailed::Cancelled(sig));
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyFailed::Read(e)),
        };
        let mut done = 0;
        while done < n {
            match to.write(&buf[done..n]) {
                Ok(0) => return Err(CopyFailed::Write(io::ErrorKind::WriteZero.into())),
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if let Some(sig) = cancelled() {
                        return Err(CopyFailed::Cancelled(sig));
                    }
                }
                Err(e) => return Err(CopyFailed::Write(e)),
            }
        }
        total += n as u64;
    }
    loop {
        match to.flush() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                if let Some(sig) = cancelled() {
                    return Err(CopyFailed::Cancelled(sig));
                }
            }
            Err(e) => return Err(CopyFailed::Write(e)),
            Ok(()) => return Ok(total),
        }
    }
}

#[cfg(test)]
mod tests;
