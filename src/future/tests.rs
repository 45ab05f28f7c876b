use std::{os::unix::fs::MetadataExt, task::Wake, time::Instant};

use super::*;
use crate::platform::procinfo;

const BOUND: Duration = Duration::from_secs(20);

/// Poll `future` once, with a waker that counts its wakes.
fn poll_once<F: Future + Unpin>(future: &mut F) -> (Poll<F::Output>, Arc<Count>) {
    let count = Arc::new(Count::default());
    let waker = Waker::from(Arc::clone(&count));
    let got = Pin::new(future).poll(&mut Context::from_waker(&waker));
    (got, count)
}

#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Until the kernel lists `n` blocked requests for the lock on `path`.
fn until_waiters(path: &Path, n: usize) {
    let meta = std::fs::metadata(path).unwrap();
    let give_up = Instant::now() + BOUND;
    while procinfo::flock_waiters(meta.dev(), meta.ino()) != Some(n) {
        assert!(Instant::now() < give_up, "never {n} waiters");
        std::thread::yield_now();
    }
}

/// The future waits in the kernel on its helper thread, wakes its task when the holder lets
/// go, and hands over an unbound guard that another thread may release.
#[test]
fn a_future_gets_the_lock_once_it_is_released_and_its_guard_moves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    let held = mutex.try_acquire().unwrap().unwrap();
    let mut waiting = mutex.acquire_async(Some(BOUND));
    let (first, woken) = poll_once(&mut waiting);
    assert!(first.is_pending());
    until_waiters(&path, 1);
    drop(held);
    // The helper wakes the task that polled last, once it has the lock.
    let give_up = Instant::now() + BOUND;
    while woken.0.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < give_up, "the task was never woken");
        std::thread::yield_now();
    }
    let Poll::Ready(got) = poll_once(&mut waiting).0 else {
        panic!("woken, but not ready");
    };
    let guard = got.unwrap().expect("released");
    let elsewhere = std::thread::spawn(move || drop(guard));
    elsewhere.join().unwrap();
    assert!(
        mutex.try_acquire().unwrap().is_some(),
        "released on the other thread"
    );
}

/// Dropping a future that waits ends its wait at once (the kernel no longer lists it) and
/// leaves nothing held, though the lock is released just after.
#[test]
fn dropping_a_waiting_future_ends_its_wait_and_takes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    let held = mutex.try_acquire().unwrap().unwrap();
    let mut waiting = mutex.acquire_async(None);
    assert!(poll_once(&mut waiting).0.is_pending());
    until_waiters(&path, 1);
    // The helper lets go of the wait's state when its wait has ended, and only then.
    let state = Arc::downgrade(&waiting.shared);
    drop(waiting);
    let give_up = Instant::now() + BOUND;
    while state.upgrade().is_some() {
        assert!(Instant::now() < give_up, "the helper's wait did not end");
        std::thread::yield_now();
    }
    until_waiters(&path, 0);
    drop(held);
    // Bound here: a lock the helper had taken would make this an error or a wait.
    assert!(mutex.try_acquire().unwrap().is_some());
}

/// A receive dropped while it waits takes no message: one posted after is there for the
/// next receiver (had the helper claimed it, dropping it returned it to the queue).
#[test]
fn a_dropped_receive_loses_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let mailbox = Mailbox::new(dir.path().join("B"));
    for _ in 0..20 {
        let mut waiting = mailbox.recv_async(None);
        assert!(poll_once(&mut waiting).0.is_pending());
        drop(waiting);
        mailbox.post(&b"job"[..]).unwrap();
        let mut got = mailbox
            .recv(Some(BOUND))
            .unwrap()
            .expect("the message is kept");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut got, &mut text).unwrap();
        assert_eq!(text, "job");
        got.finish().unwrap();
    }
}

/// An event's waiter, a semaphore's and a group's complete as their blocking forms return.
#[test]
fn events_slots_and_groups_complete_as_the_blocking_forms() {
    let dir = tempfile::tempdir().unwrap();
    let event = Event::new(dir.path().join("e"));
    let waiting = event.wait_async(Some(BOUND));
    event.signal().unwrap();
    assert!(block_on(waiting).unwrap());
    let sem = Semaphore::new(dir.path().join("s"), 1);
    let slot = block_on(sem.acquire_async(Some(BOUND)))
        .unwrap()
        .expect("free");
    assert!(
        block_on(sem.acquire_async(Some(Duration::ZERO)))
            .unwrap()
            .is_none()
    );
    drop(slot);
    let group = dir.path().join("g");
    let member = crate::Group::new(&group)
        .join(Some(BOUND))
        .unwrap()
        .unwrap();
    let empty = wait_empty(&group, Some(BOUND), crate::wait::DEFAULT_POLL);
    drop(member);
    assert!(block_on(empty).unwrap());
}
