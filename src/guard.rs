/*!
What a guard offers to code that runs a command under it: a check that the lock is still held.

On a local file system a living holder cannot lose its lock. On a network file system it can (a
partition, an expired lease: the server gives the lock to another client), so a holder that runs
a long command checks now and then; every guard's `loss_check()` gives that check where it is
needed, and `None` elsewhere.

Checking is not enough when the check itself cannot get through. A host cut off from the file
server learns nothing until the link comes back: on MooseFS its calls on the mount block until
then, on GlusterFS until the client's ping timeout. Meanwhile the server gives the lock to
another host once *its* timeout passes. So a holder must stop its command before that: a
[`Lease`] checks from a thread of its own (which a hung call can block without blocking the
holder), and a lock not confirmed with the server within the lease counts as lost. The lease
must be shorter than the server's timeout, less the time the command takes to stop; the
defaults per file system are in [`crate::doctor::default_lease`].
*/

use std::{
    marker::PhantomData,
    os::fd::{AsFd, AsRawFd, BorrowedFd},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use crate::platform::{
    fs as pfs,
    lock::{self, Mode},
    mounts,
};

/// What every guard offers a program that runs a command while holding it, as `fsync ... run`
/// does: passing the hold down to the command, recording the command for status reports, and
/// on a network file system checking that the hold is still ours. Every guard implements it
/// ([`MutexGuard`](crate::MutexGuard), [`PlainGuard`](crate::PlainGuard),
/// [`RangeGuard`](crate::RangeGuard), [`SwmrGuard`](crate::SwmrGuard),
/// [`SlotGuard`](crate::SlotGuard), [`GroupGuard`](crate::GroupGuard),
/// [`Membership`](crate::Membership), [`Connection`](crate::bus::Connection)).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("build.lck");
/// use fsync::{Guard, Mutex};
///
/// let mut guard = Mutex::new(&path).try_acquire()?.expect("free");
/// guard.set_child(None, "make"); // before it starts: reports never show it as ours
/// guard.pass_down()?; // the command inherits the lock, as with flock(1)
/// let mut child = std::process::Command::new("true").spawn().expect("spawn");
/// guard.set_child(Some(child.id()), "make");
/// child.wait().expect("wait");
/// # Ok::<(), fsync::Error>(())
/// ```
pub trait Guard {
    /// On a network file system, the check that the hold is still ours (see [`LossCheck`]);
    /// `None` on a local file system, where a living holder cannot lose it.
    fn loss_check(&self) -> Option<LossCheck<'_>>;

    /// Let commands started from now on inherit the hold, as `flock(1)` does: it then stays
    /// held while any process that inherited it runs, even if this one dies. Without this
    /// call the hold is close-on-exec (`flock -o`) and ends with this process. Passing down
    /// again does nothing more.
    fn pass_down(&mut self) -> crate::Result<()>;

    /// Record the command that runs under the hold (`pid`, and its command line), for the
    /// primitive's status reports: call it with `None` just before starting the command, so
    /// that reports never show it as ours, then again with its pid. Guards whose primitive
    /// reports no holders record nothing. It takes the guard shared, so that a
    /// [`Lease`] on the hold keeps confirming it meanwhile: on a network file system the
    /// record's write can wait long on the server (MooseFS holds a file's chunk for a client
    /// it lost touch with for up to two minutes).
    fn set_child(&self, pid: Option<u32>, command: &str) {
        let _ = (pid, command);
    }
}

/// A check that a lock is still ours: what a holder that runs long work on a network file
/// system calls now and then, to stop (or stop writing) once the file server has given its lock
/// to someone else. Guards return one only where the lock can be lost (`loss_check()` is `None`
/// on a local file system). It borrows its guard, so it cannot outlive it: a check kept after
/// the lock was released would ask about whatever file then had the descriptor's number.
///
/// ```compile_fail,E0597
/// # let dir = tempfile::tempdir().unwrap();
/// let mutex = fsync::Mutex::new(dir.path().join("lock"));
/// let check = {
///     let guard = mutex.acquire(None)?.expect("free");
///     guard.loss_check() // error: `guard` does not live long enough
/// };
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LossCheck<'guard> {
    fd: BorrowedFd<'guard>,
    mode: Mode,
    since: Instant,
}

impl<'guard> LossCheck<'guard> {
    /// The check for a lock held through `file` in `mode` since `since` (when it was taken), if
    /// `file` lies on a network file system. The mount table tells, not the file server: asked
    /// with `fstatfs(2)`, a server that a partition has just cut off would keep us waiting until
    /// the client gives up, while the command runs unchecked. Without /proc, `fstatfs` tells,
    /// and a file system it cannot tell is checked: a check of a lock that cannot be lost costs
    /// a little; none of one that can, two holders.
    pub(crate) fn of(
        file: &'guard impl AsFd,
        mode: Mode,
        since: Instant,
    ) -> Option<LossCheck<'guard>> {
        let fd = file.as_fd();
        let network = match mounts::of_fd(fd) {
            Some(mount) => mount.network(),
            None => {
                let kind = pfs::fs_kind(&fd);
                kind.network || kind.name == pfs::UNKNOWN
            }
        };
        LossCheck::on(network, fd, mode, since)
    }

    /// The check for a lock held through descriptor `fd` since `since`, if `network`.
    pub(crate) fn on(
        network: bool,
        fd: BorrowedFd<'guard>,
        mode: Mode,
        since: Instant,
    ) -> Option<LossCheck<'guard>> {
        network.then_some(LossCheck { fd, mode, since })
    }

    /// When the lock was last known to be ours before any lease's check: when it was taken,
    /// or a later time given by [`confirmed_at`](Self::confirmed_at). A [`Lease`] runs from
    /// there, so that the time between taking the lock and starting the lease (starting a
    /// command, recording it: calls that a partition can block) counts against it.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// This check, with the lock known to be ours at `when` (a [`still_held`](Self::still_held)
    /// that began then said so): [`since`](Self::since) becomes the later of the two.
    #[must_use]
    pub fn confirmed_at(self, when: Instant) -> LossCheck<'guard> {
        LossCheck {
            since: self.since.max(when),
            ..self
        }
    }

    /// Whether the lock is still ours: the descriptor still works, and a non-blocking re-lock
    /// of our own open file description succeeds (a no-op while we hold it; it fails once
    /// another holder has it, and the file server answers EBADFD/EIO/ESTALE to a client whose
    /// locks it has dropped).
    pub fn still_held(&self) -> bool {
        lock::still_held(self.fd, self.mode)
    }

    /// The default lease of the file system the lock lies on: from the mount's configuration
    /// where it shows the server's timeout, else [`crate::doctor::LEASES`]; learnt without a
    /// round trip to its server.
    pub fn default_lease(&self) -> crate::doctor::DefaultLease {
        crate::doctor::lease_of(self.fd)
    }

    /// Check the lock every `every` from a thread of its own (the first check `every` after
    /// [`since`](Self::since)), and count it as lost once it has not been confirmed with the
    /// file server for `lease` ([`Lease::state`]). The lease, like the check, cannot outlive
    /// the guard: dropping it stops its thread and waits for it (unless it expired: see
    /// [`Lease`]).
    pub fn lease(&self, every: Duration, lease: Duration) -> Lease<'guard> {
        self.start(every, lease, false)
    }

    /// [`lease`](Self::lease), of the length the mount's configuration gives
    /// ([`default_lease`](Self::default_lease)), read again every few seconds by the checking
    /// thread, so that the lease follows a server timeout changed while the command runs (a
    /// GlusterFS volume's ping-timeout set under mounted clients). Where the mount shows
    /// nothing, `lease` stays.
    pub fn lease_following_mount(&self, every: Duration, lease: Duration) -> Lease<'guard> {
        self.start(every, lease, true)
    }

    fn start(self, every: Duration, lease: Duration, follow: bool) -> Lease<'guard> {
        let length = Arc::new(AtomicU64::new(millis(lease)));
        let shared = Arc::new(Shared {
            in_call: Mutex::new(()),
            duplicating: Mutex::new(()),
            stop: AtomicBool::new(false),
            seen: Mutex::new(Seen {
                confirmed: self.since,
                lost: false,
            }),
        });
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (mode, since) = (self.mode, self.since);
        // The thread checks through a descriptor of its own on the same open file description:
        // one left behind in a call the file system does not answer (an expired lease) then
        // never touches a number the process has since given to another file. It makes that
        // descriptor only when its first check is due, `every` after `since`: a lease begun
        // as its lock was granted is begun before the holder starts its command, and a
        // descriptor that existed when the command was forked would be closed by its exec,
        // which a FUSE client answers with a round trip to the server (a flush). The number it
        // duplicates stays the guard's while the lease lives, and `Drop` waits for a
        // duplication under way (a local call, never one the server must answer).
        let number = self.fd.as_raw_fd();
        let thread = {
            let shared = Arc::clone(&shared);
            let length = Arc::clone(&length);
            let mut read_at = Instant::now();
            std::thread::Builder::new()
                .name("fsync-lease".into())
                .spawn(move || {
                    // The lock was ours at `since`: the first check is due `every` after it.
                    if let Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) =
                        stop_rx.recv_timeout(every.saturating_sub(since.elapsed()))
                    {
                        return;
                    }
                    let own = {
                        let _duplicating = lock_ignoring_poison(&shared.duplicating);
                        if shared.stop.load(Ordering::SeqCst) {
                            return;
                        }
                        // Without a descriptor nothing confirms the lock: the lease expires.
                        let Ok(own) = pfs::duplicate(number) else {
                            return;
                        };
                        own
                    };
                    let check = LossCheck {
                        fd: own.as_fd(),
                        mode,
                        since,
                    };
                    loop {
                        let started = Instant::now();
                        let held = {
                            // The stop flag and the call are one step for `Drop`: once it has
                            // set the flag and taken this lock, no call on the descriptor
                            // follows.
                            let _call = lock_ignoring_poison(&shared.in_call);
                            if shared.stop.load(Ordering::SeqCst) {
                                return;
                            }
                            if follow && read_at.elapsed() >= REREAD {
                                read_at = Instant::now();
                                let now = check.default_lease();
                                if matches!(now.source, crate::doctor::LeaseSource::Mount { .. }) {
                                    length.store(millis(now.lease), Ordering::SeqCst);
                                }
                            }
                            check.still_held()
                        };
                        {
                            let mut seen = lock_ignoring_poison(&shared.seen);
                            match held {
                                // The server answered at some point after `started`: the lease
                                // runs from there, not from the answer.
                                true => seen.confirmed = seen.confirmed.max(started),
                                false => seen.lost = true,
                            }
                            if seen.lost {
                                return;
                            }
                        }
                        match stop_rx.recv_timeout(every) {
                            Err(mpsc::RecvTimeoutError::Timeout) => continue,
                            _ => return,
                        }
                    }
                })
                .ok()
        };
        Lease {
            shared,
            stop: Some(stop_tx),
            thread,
            length,
            guard: PhantomData,
        }
    }
}

/// How often a lease that follows its mount reads the mount's configuration again.
const REREAD: Duration = Duration::from_secs(5);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A lock checked from a thread of its own, lost once not confirmed for a while
/// ([`LossCheck::lease`]). Like the check it comes from, it cannot outlive the guard. Dropping
/// it stops the thread and waits for it; a thread whose lease expired is left in the call the
/// file system does not answer, with its own descriptor of the lock's open file description,
/// which it closes (and so lets go of the lock, which the server has given away by then) when
/// the call returns.
#[derive(Debug)]
pub struct Lease<'guard> {
    shared: Arc<Shared>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Its length in milliseconds (the checking thread may change it: a lease that follows
    /// its mount).
    length: Arc<AtomicU64>,
    guard: PhantomData<BorrowedFd<'guard>>,
}

#[derive(Debug)]
struct Shared {
    in_call: Mutex<()>,
    /// Held while the thread duplicates the guard's descriptor (a local call): `Drop` takes
    /// it, so the number is not closed and given to another file meanwhile.
    duplicating: Mutex<()>,
    stop: AtomicBool,
    seen: Mutex<Seen>,
}

#[derive(Debug)]
struct Seen {
    /// When the last check that the server confirmed began.
    confirmed: Instant,
    lost: bool,
}

/// What a [`Lease`] knows of its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseState {
    /// Confirmed with the server within the lease.
    Held,
    /// The server said it is not ours any more (another holder has it, or our locks were
    /// dropped).
    Lost,
    /// Not confirmed for this long, more than the lease: the check cannot get through (a
    /// partition, a hung server), and the server may give the lock away at any moment.
    Expired(Duration),
}

impl Lease<'_> {
    /// The lock's state now.
    pub fn state(&self) -> LeaseState {
        let seen = lock_ignoring_poison(&self.shared.seen);
        let since = seen.confirmed.elapsed();
        match (seen.lost, since > self.length()) {
            (true, _) => LeaseState::Lost,
            (false, true) => LeaseState::Expired(since),
            (false, false) => LeaseState::Held,
        }
    }

    /// When the lock was last known to be ours: the start of the last check the server
    /// confirmed, or the check's [`since`](LossCheck::since) before any did.
    pub fn confirmed(&self) -> Instant {
        lock_ignoring_poison(&self.shared.seen).confirmed
    }

    /// How long the lease is (now: one that follows its mount may change).
    pub fn length(&self) -> Duration {
        Duration::from_millis(self.length.load(Ordering::SeqCst))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        drop(self.stop.take()); // wakes the thread from its pause
        // A duplication under way ends before the guard can close the number it copies; one
        // not begun sees the stop flag.
        drop(lock_ignoring_poison(&self.shared.duplicating));
        if matches!(self.state(), LeaseState::Expired(_)) {
            // Its thread is stuck in a call the file system does not answer; it makes no
            // other call once that returns (the stop flag), so it is left behind, closing
            // its own descriptor then.
            return;
        }
        // Once this is ours, the thread is not in a call and will not start one.
        drop(lock_ignoring_poison(&self.shared.in_call));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn lock_ignoring_poison<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock on a local file system is not checked (a living holder cannot lose it); a check
    /// keeps the time its lock was taken, and a confirmation moves it only forward.
    #[test]
    fn a_local_lock_has_no_check_and_a_check_runs_from_the_taking() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("l")).unwrap();
        let taken = Instant::now();
        assert!(LossCheck::of(&file, Mode::Exclusive, taken).is_none());
        let check = LossCheck::on(true, file.as_fd(), Mode::Exclusive, taken).unwrap();
        assert_eq!(check.since(), taken);
        let later = taken + Duration::from_secs(3);
        assert_eq!(check.confirmed_at(later).since(), later);
        assert_eq!(check.confirmed_at(later).confirmed_at(taken).since(), later);
    }

    /// A lease makes its own descriptor of the lock only when its first check is due, so that
    /// a command started meanwhile (on FUSE, where closing one costs a round trip) does not
    /// inherit it; it has one while it checks, and none once dropped. (Mutant answered: the
    /// first check made at once, which the time its confirmation keeps shows; a descriptor
    /// made at once but used later is caught only when its thread wins the race to the count.)
    #[test]
    fn a_lease_makes_its_descriptor_when_its_first_check_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let ours = std::fs::File::create(&path).unwrap();
        assert!(lock::flock(&ours, Mode::Exclusive, false).unwrap());
        // Descriptors of this process open on the lock file (no other test opens it).
        let open_on_it = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                .filter(|target| *target == path)
                .count()
        };
        assert_eq!(open_on_it(), 1);
        let check = LossCheck::on(true, ours.as_fd(), Mode::Exclusive, Instant::now()).unwrap();
        let later = check.lease(Duration::from_mins(1), Duration::from_mins(10));
        assert_eq!(
            open_on_it(),
            1,
            "no descriptor before the first check is due"
        );
        drop(later);

        let (taken, every) = (Instant::now(), Duration::from_millis(200));
        let soon = LossCheck::on(true, ours.as_fd(), Mode::Exclusive, taken)
            .unwrap()
            .lease(every, Duration::from_mins(1));
        let give_up = Instant::now() + Duration::from_secs(30);
        while soon.confirmed() == taken {
            assert!(Instant::now() < give_up, "the lease never checked");
            std::thread::yield_now();
        }
        // The confirmation keeps the time its check began: not before it was due.
        assert!(soon.confirmed() >= taken + every, "checked at once");
        assert_eq!(open_on_it(), 2, "its own, while it checks");
        drop(soon);
        assert_eq!(open_on_it(), 1, "closed once the lease is dropped");
    }

    /// A lease on a lock this process holds is confirmed at each check and stays held; one on
    /// a lock another open file description holds is lost at its first check. (Mutants
    /// answered: a check that confirms nothing, a lease that never sees the loss.)
    #[test]
    fn a_lease_is_held_while_the_lock_is_ours_and_lost_once_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let ours = std::fs::File::create(&path).unwrap();
        assert!(lock::flock(&ours, Mode::Exclusive, false).unwrap());
        let every = Duration::from_millis(10);
        let taken = Instant::now();
        let held = LossCheck::on(true, ours.as_fd(), Mode::Exclusive, taken)
            .unwrap()
            .lease(every, Duration::from_mins(1));
        assert_eq!(held.confirmed(), taken);
        // Each check that the server confirms moves the time on; three of them.
        let give_up = Instant::now() + Duration::from_secs(30);
        let mut seen = taken;
        for _ in 0..3 {
            while held.confirmed() == seen {
                assert!(
                    Instant::now() < give_up,
                    "the lease never confirmed its lock"
                );
                std::thread::yield_now();
            }
            assert!(held.confirmed() > seen);
            seen = held.confirmed();
            assert_eq!(held.state(), LeaseState::Held);
        }
        drop(held);

        let theirs = std::fs::File::open(&path).unwrap();
        let lost = LossCheck::on(true, theirs.as_fd(), Mode::Exclusive, Instant::now())
            .unwrap()
            .lease(every, Duration::from_mins(1));
        let give_up = Instant::now() + Duration::from_secs(30);
        while lost.state() != LeaseState::Lost {
            assert!(Instant::now() < give_up, "the lease never saw the loss");
            std::thread::yield_now();
        }
        drop(lost);
        drop(ours);
    }
}
