/*!
Signals and timers: cancellation by INT, TERM, HUP and QUIT, forwarding them to a running child,
death by a signal, and the per-thread timer whose signal interrupts blocking calls.

The wait core ([`crate::wait`]) decides *when* to wake and what a cancellation means; this module
is the machinery underneath. Two kinds of handler are installed, neither with `SA_RESTART`, so a
blocking call returns `EINTR`:

- the *wake* handler ([`wake_signal`], a real-time signal, so that a program using the library
  keeps SIGALRM for itself; `SIGRTMIN+5` unless the program chose another with
  [`set_wake_signal`] before the handler was installed) only counts wake-ups ([`wakes`]);
  [`WakeTimer`] sends it to the waiting thread at deadlines and poll ticks, and dnotify
  ([`super::notify`]) reports changes with it. The first of them to need it installs it, and
  fixes the signal for the life of the process;
- the *cancel* handler (only once a program calls [`install_cancel_handlers`]) records the signal
  ([`cancelled`]) and fires every waiting thread's timer at once (so that every wait in the
  process ends, whichever thread the signal landed on), or forwards the signal to the child
  registered with [`set_child`].

A [`Stop`] ends the waits of one thread alone, the same way (a flag, then that thread's timer
fired): what an async wait's future does when it is dropped, with no signal handler of the
program's involved.
*/

use std::{
    cell::RefCell,
    io,
    path::Path,
    ptr,
    sync::{
        Arc, Once, PoisonError,
        atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering},
    },
    time::Duration,
};

use crate::error::{Error, ErrorKind, Result};

use nix::{
    libc,
    sys::signal::{Signal, kill},
    unistd::Pid,
};

/// How soon a missed timer signal is repeated; bounds timeout inaccuracy in the worst case.
const RETRY: Duration = Duration::from_millis(5);

/// The default wake signal is `SIGRTMIN + DEFAULT_WAKE_OFFSET`.
const DEFAULT_WAKE_OFFSET: i32 = 5;

/// The wake signal chosen with [`set_wake_signal`] (0: the default), with [`WAKE_FIXED`] set
/// once its handler is installed: from then on it never changes. One word, so that a choice
/// and the first installation cannot interleave.
static WAKE: AtomicI32 = AtomicI32::new(0);

/// The bit of [`WAKE`] that says the handler is installed (signal numbers are far below it).
const WAKE_FIXED: i32 = 1 << 30;

/// The signal that interrupts blocking calls at deadlines and poll ticks (and that dnotify
/// reports directory changes with): `SIGRTMIN + 5` unless [`set_wake_signal`] chose another. A
/// real-time signal, so that a program using the library keeps SIGALRM for itself.
pub fn wake_signal() -> i32 {
    wake_signal_of(WAKE.load(Ordering::SeqCst))
}

fn wake_signal_of(state: i32) -> i32 {
    match state & !WAKE_FIXED {
        0 => libc::SIGRTMIN() + DEFAULT_WAKE_OFFSET,
        sig => sig,
    }
}

/// Choose the wake signal, for a program that needs `SIGRTMIN+5` for something else: call it
/// early in `main`, before any thread waits (the first wait installs the handler and fixes the
/// signal for the life of the process; see the `wait` module docs). `sig` is a signal number,
/// `SIGRTMIN() + k` as libc's `SIGRTMIN()` counts (glibc keeps the first two real-time signals
/// for itself, so its `SIGRTMIN()` is usually 34).
///
/// Errors, of kind [`ErrorKind::Invalid`] and naming the pseudo-path `wake signal`: `sig` is
/// not in `SIGRTMIN()..=SIGRTMAX()`, or the handler is installed already (this process has
/// waited, or watched a directory).
pub fn set_wake_signal(sig: i32) -> Result<()> {
    choose_wake_signal(&WAKE, sig)
}

fn choose_wake_signal(state: &AtomicI32, sig: i32) -> Result<()> {
    // A failure that concerns no file: no path.
    let what = Path::new("");
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if !(min..=max).contains(&sig) {
        return Err(Error::new(
            what,
            ErrorKind::Invalid,
            format!(
                "cannot use {sig} as the wake signal: it is not a real-time signal \
                 (SIGRTMIN..=SIGRTMAX is {min}..={max} here)"
            ),
        ));
    }
    state
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
            (s & WAKE_FIXED == 0).then_some(sig)
        })
        .map(drop)
        .map_err(|s| {
            Error::new(
                what,
                ErrorKind::Invalid,
                format!(
                    "cannot change the wake signal to {sig}: a wait already installed the \
                     handler of signal {}; choose the wake signal before the first wait",
                    wake_signal_of(s)
                ),
            )
        })
}

/// Fix the wake signal for good (its handler is being installed) and return it.
fn fix_wake_signal(state: &AtomicI32) -> i32 {
    wake_signal_of(state.fetch_or(WAKE_FIXED, Ordering::SeqCst))
}

static CANCELLED: AtomicI32 = AtomicI32::new(0);
/// The last cancellation signal received, whether it cancelled a wait or a child was running.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicI32 = AtomicI32::new(0);
/// The registered child leads a process group of its own: signals go to the group, and those
/// the terminal sent too (it sends them to our group, which the child is not in).
static CHILD_GROUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// How many threads' waits a cancellation ends at once: a thread that waits while as many
/// others do ends its wait at its next poll tick or deadline instead.
const WAITERS: usize = 64;
/// The timers of the threads waiting now, which a cancellation fires: each as its id plus one
/// (0: a free slot), since the kernel numbers timers from 0 and glibc's `timer_t` for a timer
/// that signals a thread is that number (the process's first timer is a null pointer).
static TIMERS: [AtomicUsize; WAITERS] = [const { AtomicUsize::new(0) }; WAITERS];
/// Cancel handlers between their look at `TIMERS` and their last use of what they found: a
/// timer's owner deletes it only once none is (see [`WakeTimer`]'s `Drop`).
static TIMER_USERS: AtomicI32 = AtomicI32::new(0);
static CANCEL_INSTALLED: Once = Once::new();

/// The cancellation signal received so far, if any: always `None` until the program has
/// called [`install_cancel_handlers`]. While it is set, every wait in the process ends at once
/// with [`Outcome::Interrupted`](crate::wait::Outcome::Interrupted).
pub fn cancelled() -> Option<i32> {
    match CANCELLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The last cancellation signal the process received, if any, including those that arrived
/// while a child ran (and were forwarded to it, or reached it from the terminal): tells a
/// child that died of a signal sent to us from one that died of its own.
pub fn last_received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The signals that cancel a wait and are forwarded to a running child, once the program has
/// called [`install_cancel_handlers`]: INT, TERM, HUP and QUIT.
pub const CANCEL_SIGNALS: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Make INT, TERM, HUP and QUIT cancel waits (outcome `Interrupted`) instead of killing the
/// process, and forward them to the child registered by [`crate::command::spawn`] while one runs.
/// For a program whose ^C, or `kill`, should end its waits cleanly and release what it holds
/// before it exits (a library must not call it: it replaces the process's handlers of those
/// four signals). An async program uses its runtime's signals instead, and drops the futures
/// of the waits it ends ([`crate::future`]).
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

/// Whether `sig`'s disposition is SIG_IGN. Raw `sigaction`: nix has no safe way to query a
/// disposition (its `sigaction` always installs one).
fn is_ignored(sig: i32) -> bool {
    // SAFETY: querying a disposition (a null new action) into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &raw mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// End the process by signal `sig`, as if it had not been handled: the convention that lets a
/// shell see that its child died of, say, SIGINT and stop a loop (bash stops a loop after ^C
/// only when the child died of SIGINT). The default action is restored and the signal
/// unblocked and raised; no core is dumped for it (the core would be ours, not that of the
/// process that crashed). Returns only if the signal's default action does not end a process.
///
/// For programs, not libraries: it ends the process. Call it last, once everything is released.
pub fn die_of(sig: i32) {
    // Failures are ignored: at worst a core is dumped.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let _ = nix::sys::prctl::set_dumpable(false);
    // Raw libc for the rest: `sig` may be a real-time signal (a command that died of
    // SIGRTMIN+n), which nix 0.29's `Signal` cannot name; nix's `signal` is not a safe fn either.
    // SAFETY: plain system calls on our own process on a set we own; restoring the default
    // action installs no handler code.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, ptr::null_mut());
        libc::raise(sig);
    }
}

/// Register the running child (`Some(pid)`) to which cancellation signals are forwarded, or
/// none; with `group`, the child leads a process group of its own, to which they go, whoever
/// sent them. Returns a signal that arrived before the child was registered, to be forwarded
/// by the caller.
pub(crate) fn set_child(pid: Option<i32>, group: bool) -> Option<i32> {
    CHILD_GROUP.store(group, Ordering::SeqCst);
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
    // The interrupted code may be about to read errno: give it back as it was.
    let errno = nix::errno::Errno::last_raw();
    on_cancel_signal(sig, info);
    nix::errno::Errno::set_raw(errno);
}

fn on_cancel_signal(sig: libc::c_int, info: *mut libc::siginfo_t) {
    RECEIVED.store(sig, Ordering::SeqCst);
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // A signal the terminal sent (si_code > 0: from the kernel) reached the child already,
        // since it shares our process group; forward only what a process sent to us.
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
        // A child in a group of its own gets them all, to the whole group.
        let group = CHILD_GROUP.load(Ordering::SeqCst);
        if !from_kernel || group {
            // Only installed for CANCEL_SIGNALS, which `Signal` names; the conversion is a
            // plain `match` and nix's `kill` the bare system call: async-signal-safe.
            if let Ok(sig) = Signal::try_from(sig) {
                let target = if group { -child } else { child };
                let _ = kill(Pid::from_raw(target), sig);
            }
        }
        return;
    }
    cancel_waits(sig);
}

/// End every wait in the process as cancellation signal `sig` would (but without forwarding it
/// to a command, or counting it as received: [`last_received`] stays as it was): for a program
/// that stops its own threads' waits, a worker pool whose command cannot be started, say.
/// Only once the program has called [`install_cancel_handlers`] (it does nothing before: a
/// library must not end its program's waits).
pub fn cancel(sig: i32) {
    if CANCEL_INSTALLED.is_completed() {
        cancel_waits(sig);
    }
}

/// Record the cancellation and fire every waiting thread's timer (async-signal-safe).
fn cancel_waits(sig: i32) {
    CANCELLED.store(sig, Ordering::SeqCst);
    TIMER_USERS.fetch_add(1, Ordering::SeqCst);
    for slot in &TIMERS {
        let entry = slot.load(Ordering::SeqCst);
        if entry != 0 {
            let timer = (entry - 1) as libc::timer_t;
            // SAFETY: timer_settime is async-signal-safe; the timer is not deleted while we
            // are counted in TIMER_USERS having found it registered (its owner's `Drop` waits).
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
    TIMER_USERS.fetch_sub(1, Ordering::SeqCst);
}

/// Wake signals handled so far in this process: lets a waiter that blocks on signals
/// ([`super::notify`]'s dnotify watches) tell one that came before it blocked.
static WAKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn on_wake(_: libc::c_int) {
    WAKES.fetch_add(1, Ordering::SeqCst);
}

/// How many [`wake_signal`]s this process has handled.
pub(crate) fn wakes() -> u64 {
    WAKES.load(Ordering::SeqCst)
}

/// Install the handler of [`wake_signal`] (once per process), which fixes the signal: every
/// use of it (timers, dnotify) comes after this call.
pub(crate) fn install_wake_handler() {
    static WAKE_INSTALLED: Once = Once::new();
    WAKE_INSTALLED.call_once(|| install(fix_wake_signal(&WAKE), on_wake as *const () as usize, 0));
}

/// Whether [`install_overflow_handler`] gave SIGIO the wake handler.
static SIGIO_OURS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make dnotify's fallback signal harmless, once per process, before any watch is armed:
/// dnotify reports a change with the [`wake_signal`] (`F_SETSIG`), but when that real-time
/// signal cannot be queued (the pending-signal queue is full: `RLIMIT_SIGPENDING`, counted
/// for the whole user) the kernel sends SIGIO instead (fcntl(2), `F_SETSIG`), whose default
/// action kills the process ("I/O possible"). Unless the program gave SIGIO a disposition of
/// its own (a handler, or ignoring it), SIGIO gets the wake handler too, so that it counts as
/// a wake-up: the change it stands for is seen. With `SA_RESTART`, so that a stray SIGIO
/// interrupts none of the program's other calls (`ppoll`, where the watches sleep, is never
/// restarted).
pub(crate) fn install_overflow_handler() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        if disposition_is_default(libc::SIGIO) {
            install(libc::SIGIO, on_wake as *const () as usize, libc::SA_RESTART);
            SIGIO_OURS.store(true, Ordering::SeqCst);
        }
    });
}

/// Whether SIGIO wakes watches ([`install_overflow_handler`] installed the wake handler for
/// it): then a watch blocks it with the wake signal and unblocks it while it sleeps.
pub(crate) fn sigio_wakes() -> bool {
    SIGIO_OURS.load(Ordering::SeqCst)
}

/// Whether `sig`'s disposition is SIG_DFL (raw `sigaction`, as [`is_ignored`]).
fn disposition_is_default(sig: i32) -> bool {
    // SAFETY: querying a disposition (a null new action) into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &raw mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
    }
}

/// Raw `sigaction`: nix's is not a safe fn either, and its `Signal` cannot name the real-time
/// [`wake_signal`].
fn install(sig: i32, handler: usize, flags: i32) {
    // SAFETY: a zeroed sigaction with a valid handler and an empty mask; no SA_RESTART unless
    // `flags` has it (the wake and cancel handlers: blocking calls return EINTR).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        libc::sigemptyset(&raw mut sa.sa_mask);
        libc::sigaction(sig, &raw const sa, ptr::null_mut());
    }
}

fn spec(first: Option<Duration>) -> libc::itimerspec {
    let ts = |d: Duration| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(d.subsec_nanos()),
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

/// The stop of one thread's waits: set, it ends them as a cancellation would (the wait core
/// looks at [`thread_stopped`] where it looks at [`cancelled`]), without touching any other
/// thread or any signal disposition.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    stopped: AtomicBool,
    /// The thread's timer while it waits (its `timer_t` as a number), which [`Stop::stop`]
    /// fires; the timer's owner clears it under the lock before deleting the timer.
    timer: std::sync::Mutex<Option<usize>>,
}

thread_local! {
    static STOP: RefCell<Option<Arc<Stop>>> = const { RefCell::new(None) };
}

// Used by the futures (`crate::future`), which the `async` feature builds.
#[cfg_attr(not(feature = "async"), allow(dead_code))]
impl Stop {
    /// End the thread's waits: the one under way at once, and every later one before it blocks.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let timer = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = *timer {
            // SAFETY: the timer is alive: its owner clears `timer` under this lock before it
            // deletes it. Fired now, and every few ms until re-armed, so that a signal landing
            // just before the blocking call is repeated into it.
            unsafe {
                libc::timer_settime(
                    id as libc::timer_t,
                    0,
                    &spec(Some(Duration::from_nanos(1))),
                    ptr::null_mut(),
                )
            };
        }
    }

    /// Make `stop` the current thread's (`None`: no stop), until the next call.
    pub(crate) fn install(stop: Option<Arc<Stop>>) {
        STOP.with(|s| *s.borrow_mut() = stop);
    }
}

/// Whether the current thread's [`Stop`] has been set.
pub(crate) fn thread_stopped() -> bool {
    STOP.with(|s| {
        s.borrow()
            .as_ref()
            .is_some_and(|s| s.stopped.load(Ordering::SeqCst))
    })
}

/// A POSIX timer that signals the current thread; deleted (with any pending signal) on drop.
///
/// Raw `timer_*` calls rather than nix's `Timer`: its `SigevNotify::SigevThreadId` takes a
/// `Signal`, which cannot name the real-time [`wake_signal`]; and the cancel handler re-arms the
/// waiting threads' timers through the bare `timer_t`s in `TIMERS`, which `Timer` does not expose (its
/// `set` also wants `&mut`, which a handler cannot have without aliasing the owner's).
pub(crate) struct WakeTimer {
    id: libc::timer_t,
    /// Its slot in `TIMERS`, where a cancellation finds it.
    registered: Option<&'static AtomicUsize>,
    /// The thread's [`Stop`], which fires the timer when set.
    stop: Option<Arc<Stop>>,
}

impl WakeTimer {
    pub(crate) fn new() -> io::Result<WakeTimer> {
        install_wake_handler();
        let tid = nix::unistd::gettid().as_raw();
        // SAFETY: a zeroed sigevent filled in for SIGEV_THREAD_ID delivery to this thread.
        let id = unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = wake_signal();
            sev.sigev_notify_thread_id = tid;
            let mut id: libc::timer_t = ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &raw mut sev, &raw mut id) != 0 {
                return Err(io::Error::last_os_error());
            }
            id
        };
        let registered = match CANCEL_INSTALLED.is_completed() {
            true => TIMERS.iter().find(|slot| {
                slot.compare_exchange(0, id as usize + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            }),
            false => None,
        };
        let stop = STOP.with(|s| s.borrow().clone());
        if let Some(s) = &stop {
            *s.timer.lock().unwrap_or_else(PoisonError::into_inner) = Some(id as usize);
        }
        Ok(WakeTimer {
            id,
            registered,
            stop,
        })
    }

    /// Fire after `after` (then every few ms until re-armed), or never.
    pub(crate) fn arm(&self, after: Option<Duration>) -> io::Result<()> {
        // SAFETY: the timer is alive for the lifetime of self.
        if unsafe { libc::timer_settime(self.id, 0, &spec(after), ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for WakeTimer {
    fn drop(&mut self) {
        if let Some(s) = &self.stop {
            let mut timer = s.timer.lock().unwrap_or_else(PoisonError::into_inner);
            if *timer == Some(self.id as usize) {
                *timer = None;
            }
        }
        if let Some(slot) = self.registered {
            slot.store(0, Ordering::SeqCst);
            // A handler on another thread may have found the timer just before: wait until it
            // is done with it (a few instructions). One on this thread ran to its end before
            // we resumed. (Sequentially consistent: a handler that saw the timer was counted
            // before it looked, so before the store above, and is seen here.)
            while TIMER_USERS.load(Ordering::SeqCst) > 0 {
                std::thread::yield_now();
            }
        }
        // SAFETY: deleting our own timer; Linux also discards its pending signal.
        unsafe { libc::timer_delete(self.id) };
    }
}

/// Ignore SIGPIPE: a write to a closed pipe then fails with `EPIPE`, which a program can report,
/// instead of killing it. Commands started later get the disposition SIGPIPE had before the
/// first call (ignored where the program's caller ignored it, as a systemd service's commands
/// are started), as if it had never been changed; without a call they get the default, as the
/// standard library's `Command` gives them.
///
/// For programs, not libraries: it changes a process-wide disposition.
pub fn ignore_sigpipe() {
    note_mask();
    // Raw libc: nix's `signal` is not a safe fn either, so using it would gain nothing.
    // SAFETY: setting a disposition to SIG_IGN installs no handler code.
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let _ = SIGPIPE_BEFORE.compare_exchange(
        0,
        if before == libc::SIG_IGN { 2 } else { 1 },
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
}

/// Note SIGPIPE's disposition as it is, without changing it, as the one commands started later
/// get (as [`ignore_sigpipe`] notes it before it ignores the signal): for a program that leaves
/// SIGPIPE as its caller set it, as util-linux flock(1) does, and starts commands. Returns
/// whether it is ignored (as first noted).
pub fn note_sigpipe() -> bool {
    note_mask();
    let ignored = is_ignored(libc::SIGPIPE);
    let _ = SIGPIPE_BEFORE.compare_exchange(
        0,
        if ignored { 2 } else { 1 },
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    sigpipe_ignored_for_commands()
}

/// SIGPIPE's disposition before the first [`ignore_sigpipe`] (or as [`note_sigpipe`] found
/// it): 0 not noted, 1 not ignored, 2 ignored.
static SIGPIPE_BEFORE: AtomicI32 = AtomicI32::new(0);

/// The signal mask commands start with: the calling thread's at the first [`ignore_sigpipe`]
/// or [`note_sigpipe`] (a program calls one as it starts: its caller's), else none blocked.
static COMMAND_MASK: std::sync::OnceLock<nix::sys::signal::SigSet> = std::sync::OnceLock::new();

fn note_mask() {
    if let Ok(mask) = nix::sys::signal::SigSet::thread_get_mask() {
        let _ = COMMAND_MASK.set(mask);
    }
}

/// The signal mask commands are to start with (see [`COMMAND_MASK`]).
pub(crate) fn mask_for_commands() -> nix::sys::signal::SigSet {
    COMMAND_MASK
        .get()
        .copied()
        .unwrap_or_else(nix::sys::signal::SigSet::empty)
}

/// Whether commands are to start with SIGPIPE ignored (see [`ignore_sigpipe`]).
pub(crate) fn sigpipe_ignored_for_commands() -> bool {
    SIGPIPE_BEFORE.load(Ordering::SeqCst) == 2
}

extern "C" fn on_alarm(_: libc::c_int) {}

/// Catch SIGALRM with a handler that does nothing, for the rest of the process's life: a
/// SIGALRM then interrupts a blocking call (which the waits retry) instead of ending the
/// process, and commands started later get its default disposition (exec resets a handler),
/// even where it was ignored. What util-linux flock(1) does from the start of a `-w` wait on,
/// whose timer signals with SIGALRM; `fsync flock -w` does the same, so that it ends on the
/// same signals.
///
/// For programs, not libraries: it changes a process-wide disposition.
pub fn catch_sigalrm() {
    install(libc::SIGALRM, on_alarm as *const () as usize, 0);
}

/// Make SIGCHLD's disposition the default where it is ignored (or asks that children not be
/// waited for, `SA_NOCLDWAIT`): then the kernel reaps our children itself and their exit
/// statuses are lost, so a command started cannot be waited for. Commands inherit the
/// default, as they do from util-linux flock(1), which does the same before it starts one.
/// Whether it was changed.
pub(crate) fn unignore_sigchld() -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: sigaction(2) with no new action only writes the current one into `old`, a live
    // local (zeroed, so fully initialised whatever it writes).
    let read = unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: initialised above (zeroed, then written by the call).
    let old = unsafe { old.assume_init() };
    let ignored = old.sa_sigaction == libc::SIG_IGN || old.sa_flags & libc::SA_NOCLDWAIT != 0;
    if read != 0 || !ignored {
        return false;
    }
    // SAFETY: setting a disposition to SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's stop knows the timer of the wait under way, and forgets it when the wait's
    /// timer is deleted: a later stop must not fire a timer that is gone (or another's that
    /// took its number).
    #[test]
    fn a_stop_knows_the_timer_of_the_wait_under_way_only() {
        let stop = Arc::new(Stop::default());
        let known = |stop: &Stop| *stop.timer.lock().unwrap();
        Stop::install(Some(Arc::clone(&stop)));
        let timer = WakeTimer::new().unwrap();
        assert_eq!(known(&stop), Some(timer.id as usize));
        drop(timer);
        assert_eq!(known(&stop), None);
        Stop::install(None);
        let other = WakeTimer::new().unwrap();
        assert_eq!(known(&stop), None, "installed no more");
        drop(other);
    }

    /// A real-time signal can be chosen until the handler is installed, never after; anything
    /// else is refused and changes nothing.
    #[test]
    fn the_wake_signal_is_a_real_time_one_chosen_before_the_first_wait() {
        let state = AtomicI32::new(0);
        let default = libc::SIGRTMIN() + DEFAULT_WAKE_OFFSET;
        assert_eq!(wake_signal_of(state.load(Ordering::SeqCst)), default);
        let other = libc::SIGRTMIN() + 7;
        choose_wake_signal(&state, other).unwrap();
        assert_eq!(wake_signal_of(state.load(Ordering::SeqCst)), other);
        for bad in [0, libc::SIGALRM, libc::SIGRTMIN() - 1, libc::SIGRTMAX() + 1] {
            let err = choose_wake_signal(&state, bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
            assert!(err.to_string().contains("not a real-time signal"), "{err}");
            assert_eq!(err.path(), std::path::Path::new(""), "no file: no path");
            assert!(
                err.to_string().starts_with("cannot use "),
                "no path before it: {err}"
            );
        }
        assert_eq!(
            fix_wake_signal(&state),
            other,
            "the choice is what gets installed"
        );
        let err = choose_wake_signal(&state, libc::SIGRTMIN() + 8).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert!(err.to_string().contains("already installed"), "{err}");
        assert_eq!(wake_signal_of(state.load(Ordering::SeqCst)), other);
        assert_eq!(fix_wake_signal(&state), other, "fixed for good");

        // This process's own: once installed (by a wait, or here), no choice is taken.
        install_wake_handler();
        let err = set_wake_signal(libc::SIGRTMIN() + 9).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert_eq!(wake_signal(), default, "no test chose another one");
    }

    /// The cancel handler gives the interrupted code its errno back, whatever its own calls
    /// set (here a forward to a process that does not exist: ESRCH).
    #[test]
    fn the_cancel_handler_keeps_errno() {
        let none = i32::MAX - 1; // above any pid_max
        CHILD.store(none, Ordering::SeqCst);
        nix::errno::Errno::set_raw(libc::EINTR);
        on_cancel(libc::SIGTERM, ptr::null_mut(), ptr::null_mut());
        let after = nix::errno::Errno::last_raw();
        CHILD.store(0, Ordering::SeqCst);
        RECEIVED.store(0, Ordering::SeqCst);
        assert_eq!(after, libc::EINTR, "errno as the handler found it");
        // The forward itself did fail, and set errno on its way.
        assert_eq!(
            kill(Pid::from_raw(none), Signal::SIGTERM),
            Err(nix::errno::Errno::ESRCH)
        );
    }
}
