use super::*;
use crate::test_support::sleeping;

/// How long a test waits for what must come at once: a mutant that loses a wake-up or
/// waits for itself fails the test there instead of hanging it.
const BOUND: Duration = Duration::from_secs(20);

/// A lock held by this process with a record naming it ("the holder"), as a holder leaves
/// them: the directory, the lock's path, the locked file and the status that shows it.
fn held_with_record() -> (tempfile::TempDir, std::path::PathBuf, File, Status) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let lock = File::create(&path).unwrap();
    assert!(crate::platform::lock::flock(&lock, Mode::Exclusive, false).unwrap());
    write_record(
        &path,
        Some(crate::holder::Holder::this_process(1, "the holder".into())),
    );
    let held = status(&path).unwrap();
    (dir, path, lock, held)
}

/// Write the record of the lock `path`: `holder` holds it, or (`None`) it was released.
fn write_record(path: &Path, holder: Option<crate::holder::Holder>) {
    use crate::holder::{Record, record_path, render};
    std::fs::write(record_path(path), render(&Record { fence: 7, holder })).unwrap();
}

/// Each holding comes as an acquisition then a release, in order; a watch whose time is up
/// ends, and says it was not interrupted.
#[test]
fn a_watch_sees_each_holding_in_order_and_ends_when_its_time_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let poll = wait::DEFAULT_POLL;
    let mut changes = watch(&path, Some(Duration::from_mins(1)), poll).unwrap();
    assert!(!changes.status().held);
    for _ in 0..3 {
        let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
        match changes.next() {
            Some(Ok(Change::Acquired(st))) => {
                assert!(st.held);
                assert_eq!(st.holder.map(|h| h.pid), Some(std::process::id()));
            }
            other => panic!("expected an acquisition, got {other:?}"),
        }
        drop(guard);
        assert!(matches!(changes.next(), Some(Ok(Change::Released(_)))));
    }
    let mut over = watch(&path, Some(Duration::ZERO), poll).unwrap();
    assert!(over.next().is_none());
    assert_eq!(over.interrupted(), None);
    assert!(over.next().is_none(), "an ended watch stays ended");
}

/// A wait for a change answers with the new status once a holder comes or goes: at once
/// where the change already happened, after blocking (it says so first) where it had not;
/// `None` when the time runs out first. (Mutants answered: either form answering a constant.)
#[test]
fn a_wait_for_a_change_answers_with_the_new_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let poll = wait::DEFAULT_POLL;
    let free = status(&path).unwrap();
    assert_eq!(
        wait_for_change(&path, &free, Some(Duration::ZERO), poll).unwrap(),
        None
    );
    let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    let held = wait_for_change(&path, &free, Some(BOUND), poll)
        .unwrap()
        .expect("held now");
    assert!(held.held);
    assert_eq!(
        held.holder.as_ref().map(|h| h.pid),
        Some(std::process::id())
    );

    let (blocked_tx, blocked) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn({
        let (path, held) = (path.clone(), held.clone());
        move || {
            let said = |_| {
                let _ = blocked_tx.send(());
            };
            let got = wait_for_change_with(&path, &held, None, poll, said);
            let _ = done_tx.send(got.map(Outcome::acquired));
        }
    });
    blocked.recv_timeout(BOUND).expect("the waiter blocks");
    drop(guard);
    let after = done
        .recv_timeout(BOUND)
        .expect("woken by the release")
        .unwrap();
    assert!(!after.expect("a change").held);
}

/// A holder records its release before it unlocks: a record that says released while the
/// kernel still lists that holder's lock is no change. A wait reports none then (not a
/// "held" with the holder the kernel names), and the free lock once the unlock has come,
/// which no notification reports. A lock taken with no record (`flock(1)`) is still a change.
/// (Mutants answered: any record change reported; the unlock waited for until `poll`.)
#[test]
fn a_release_under_way_is_no_change_until_the_kernel_unlocks() {
    let (_dir, path, lock, held) = held_with_record();
    let record = |holder| write_record(&path, holder);
    assert_eq!(
        held.holder.as_ref().map(|h| h.command.as_str()),
        Some("the holder")
    );

    // Its release, half-way: the record says so, the kernel still lists the lock.
    record(None);
    let poll = Duration::from_mins(1); // far longer than the test: the unlock must be seen sooner
    assert_eq!(
        wait_for_change(&path, &held, Some(Duration::ZERO), poll).unwrap(),
        None
    );
    // No progress reports: their ticks would wake the waiter too. It is blocked once its
    // thread sleeps.
    let (tid_tx, tid) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn({
        let (path, held) = (path.clone(), held.clone());
        move || {
            tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = done_tx.send(wait_for_change(&path, &held, None, poll));
        }
    });
    let tid = tid.recv().unwrap();
    while !sleeping(tid) {
        std::thread::yield_now();
    }
    drop(lock);
    let after = done
        .recv_timeout(BOUND)
        .expect("the unlock seen, well before the poll");
    assert!(!after.unwrap().expect("a change").held);

    // A lock with no record (flock(1)'s) after a free one: a change.
    let free = status(&path).unwrap();
    let plain = File::open(&path).unwrap();
    assert!(crate::platform::lock::flock(&plain, Mode::Exclusive, false).unwrap());
    let taken = wait_for_change(&path, &free, Some(Duration::ZERO), poll).unwrap();
    assert!(taken.expect("held with no record").held);
}

/// While a release is under way (the record says released, the kernel still lists the lock)
/// the waiter looks again after 1 ms, then 2, 4 and so on up to `poll`: a second of it is
/// about ten looks, not a spin. Counted by the read calls of the waiting thread (its counters
/// in `/proc`): about 460 here, where a spin made 155,000. (Mutant answered: the pause
/// halved instead of doubled.)
#[test]
fn a_release_under_way_is_looked_at_ever_more_rarely() {
    let (_dir, path, lock, held) = held_with_record();
    let record = |holder| write_record(&path, holder);
    record(None);
    let (tid_tx, tid) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn({
        let (path, held) = (path.clone(), held.clone());
        move || {
            tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = done_tx.send(wait_for_change(&path, &held, None, Duration::from_mins(1)));
        }
    });
    let io = format!("/proc/self/task/{}/io", tid.recv().unwrap());
    let reads = || -> u64 {
        let text = std::fs::read_to_string(&io).unwrap();
        let line = text.lines().find(|l| l.starts_with("syscr:")).unwrap();
        line["syscr:".len()..].trim().parse().unwrap()
    };
    std::thread::sleep(Duration::from_secs(1)); // the window counted, not a wait for an event
    let count = reads();
    drop(lock);
    let after = done.recv_timeout(BOUND).expect("the unlock seen");
    assert!(!after.unwrap().expect("a change").held);
    assert!(
        count < 5_000,
        "{count} reads in a second of a release under way"
    );
}

/// A holder that took over with no gap the watch could see (the watch looks only when asked
/// for its next change) comes as the old holder's release, then the new one's acquisition.
/// The holders are `flock(1)` processes: the kernel names each, with its command line.
/// (Mutants answered: a change told only where both whether it is held and who holds it
/// differ; the command of a holder the kernel names left out.)
#[test]
fn a_holder_taking_over_unseen_comes_as_a_release_then_an_acquisition() {
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    File::create(&path).unwrap();
    let hold = || {
        let mut child = Command::new("flock")
            .arg(&path)
            .args(["-c", "echo acquired; read x"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("flock(1)");
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        assert_eq!(line, "acquired\n");
        child
    };
    let let_go = |mut child: std::process::Child| {
        child.stdin.take().unwrap().write_all(b"\n").unwrap();
        assert!(child.wait().unwrap().success());
    };
    let pid = |st: &Status| st.holder.as_ref().map(|h| h.pid);
    let first = hold();
    let mut watch = watch(&path, Some(BOUND), wait::DEFAULT_POLL).unwrap();
    let before = pid(watch.status()).expect("the first holder named");
    // Named by the kernel, with its command line.
    let command = watch.status().holder.as_ref().map(|h| h.command.clone());
    assert!(
        command.as_deref().is_some_and(|c| c.starts_with("flock ")),
        "{command:?}"
    );
    let_go(first);
    let second = hold();
    let mut changes = Vec::new();
    for _ in 0..2 {
        changes.push(match watch.next() {
            Some(Ok(Change::Released(st))) => ("released", pid(&st)),
            Some(Ok(Change::Acquired(st))) => ("acquired", pid(&st)),
            other => panic!("{other:?} after {changes:?}"),
        });
    }
    let after = changes[1].1.expect("the second holder named");
    assert_eq!(
        changes,
        [("released", Some(before)), ("acquired", Some(after))]
    );
    assert_ne!(before, after);
    let_go(second);
}

/// The record of one holding fills in as it goes (its command, then its child): no change
/// while the same process holds the lock, and its release reports the record as it was last.
/// (Mutant answered: any difference of status taken for a change while the lock stays held.)
#[test]
fn a_record_filling_in_is_no_change_of_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let record = |command: &str| {
        write_record(
            &path,
            Some(crate::holder::Holder::this_process(1, command.into())),
        );
    };
    let lock = File::create(&path).unwrap();
    assert!(crate::platform::lock::flock(&lock, Mode::Exclusive, false).unwrap());
    record("first");
    let mut watch = watch(&path, Some(BOUND), wait::DEFAULT_POLL).unwrap();
    record("filled in");
    let (tid_tx, tid) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
        let _ = done_tx.send(watch.next());
    });
    // Blocked once it has seen the record filled in and waits for more.
    let tid = tid.recv().unwrap();
    let early = loop {
        if let Ok(change) = done.try_recv() {
            break Some(change);
        }
        if sleeping(tid) {
            break None;
        }
        std::thread::yield_now();
    };
    assert!(
        early.is_none(),
        "a change while the same holder held: {early:?}"
    );
    drop(lock);
    match done.recv_timeout(BOUND).expect("the release seen") {
        Some(Ok(Change::Released(st))) => {
            assert_eq!(st.holder.map(|h| h.command).as_deref(), Some("filled in"));
        }
        other => panic!("{other:?}"),
    }
}

/// A thread that asks again for a lock it holds fails at once instead of waiting for
/// itself; another thread of the process waits for it as another process would, and gets
/// it once the first guard is gone.
#[test]
fn the_same_thread_cannot_deadlock_on_its_own_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let held = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    for again in [&path, &link] {
        let err = Mutex::new(again)
            .acquire(Some(Duration::from_secs(5)))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
        assert!(
            err.to_string().contains("already held by this thread"),
            "{err}"
        );
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let other = std::thread::spawn({
        let path = path.clone();
        move || {
            tx.send("waiting").unwrap();
            let g = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
            tx.send("acquired").unwrap();
            drop(g);
        }
    });
    assert_eq!(rx.recv().unwrap(), "waiting");
    // The other thread blocks in the kernel (the lock table lists its request) and cannot
    // have the lock while this one does.
    let meta = std::fs::metadata(&path).unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while procinfo::flock_waiters(meta.dev(), meta.ino()) != Some(1) {
        assert!(
            std::time::Instant::now() < give_up,
            "the other thread never blocked"
        );
        std::thread::yield_now();
    }
    assert!(rx.try_recv().is_err());
    drop(held);
    assert_eq!(rx.recv().unwrap(), "acquired");
    other.join().unwrap();
    // Released everywhere: this thread may take it again.
    drop(Mutex::new(&path).try_acquire().unwrap().unwrap());
}

/// A guard handed to another thread (a thread pool, `spawn_blocking`) is unbound first; the
/// thread that took it then waits for its release, as any other would, instead of being told
/// it would deadlock. Binding it again on the receiving thread moves the check there.
#[test]
fn an_unbound_guard_moves_between_threads_and_its_taker_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    let guard = mutex.try_acquire().unwrap().unwrap();
    let kind = |r: Result<Option<MutexGuard>>| r.map(|g| g.is_some()).map_err(|e| e.kind());
    assert_eq!(kind(mutex.try_acquire()), Err(ErrorKind::WouldDeadlock));
    let guard = guard.unbind();
    assert_eq!(
        kind(mutex.try_acquire()),
        Ok(false),
        "unbound: busy, not a deadlock"
    );
    let (to_holder, holder_gets) = std::sync::mpsc::channel::<crate::Unbound<MutexGuard>>();
    let (to_taker, taker_gets) = std::sync::mpsc::channel();
    let holder = std::thread::spawn({
        let mutex = mutex.clone();
        move || {
            let bound = holder_gets.recv().unwrap().bind();
            // Bound here now: this thread would deadlock, the taker would only wait.
            to_taker.send(kind(mutex.try_acquire())).unwrap();
            holder_gets.recv().unwrap_err(); // until the taker is waiting and hangs up
            drop(bound);
        }
    });
    to_holder.send(guard).unwrap();
    assert_eq!(taker_gets.recv().unwrap(), Err(ErrorKind::WouldDeadlock));
    assert_eq!(kind(mutex.try_acquire()), Ok(false));
    drop(to_holder); // the holder releases once it sees this
    let again = mutex
        .acquire(Some(BOUND))
        .unwrap()
        .expect("released by the holder");
    holder.join().unwrap();
    drop(again);
}

/// Two pool threads take the lock in turn and hand each guard, unbound, to a third that
/// releases it: every acquisition waits for the previous guard wherever it is, none is refused,
/// and no two guards are ever alive at once.
#[test]
fn a_thread_pool_handing_guards_on_never_overlaps_and_never_refuses() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let mutex = Mutex::new(dir.path().join("l"));
    let alive = std::sync::Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel::<crate::Unbound<MutexGuard>>();
    let releaser = std::thread::spawn({
        let alive = alive.clone();
        move || {
            let mut released = 0;
            for guard in rx {
                alive.fetch_sub(1, Ordering::SeqCst);
                drop(guard);
                released += 1;
            }
            released
        }
    });
    let pool: Vec<_> = (0..2)
        .map(|_| {
            let (mutex, alive, tx) = (mutex.clone(), alive.clone(), tx.clone());
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let guard = mutex.acquire(Some(BOUND)).unwrap().expect("in time");
                    assert_eq!(alive.fetch_add(1, Ordering::SeqCst), 0, "two guards alive");
                    tx.send(guard.unbind()).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for t in pool {
        t.join().unwrap();
    }
    assert_eq!(releaser.join().unwrap(), 100);
}

#[test]
fn fences_grow_and_status_sees_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let m = Mutex::new(&path);
    let g1 = m.try_acquire().unwrap().unwrap();
    let f1 = g1.fence();
    let st = status(&path).unwrap();
    assert!(st.held);
    assert_eq!(st.holder.unwrap().pid, std::process::id());
    drop(g1);
    assert!(!status(&path).unwrap().held);
    let g2 = m.try_acquire().unwrap().unwrap();
    assert!(g2.fence() > f1);
}

/// A consumer thread waits in `acquire_when` until a producer has entered and made its
/// condition true; a false evaluation records nothing; a failing condition releases.
#[test]
fn acquire_when_sleeps_until_a_holder_makes_the_condition_true() {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let items = Arc::new(AtomicUsize::new(0));
    let mutex = Mutex::new(&path);
    // Once: false, and nothing recorded (no entry, so no new fence).
    drop(mutex.try_acquire().unwrap().unwrap());
    let fence = status(&path).unwrap().fence;
    let mut evaluations = 0;
    let no = mutex.acquire_when(
        || {
            evaluations += 1;
            false
        },
        Some(Duration::ZERO),
    );
    assert!(no.unwrap().is_none());
    assert_eq!((evaluations, status(&path).unwrap().fence), (1, fence));
    // A consumer that sleeps until an item is there.
    let (tx, rx) = std::sync::mpsc::channel();
    let consumer = std::thread::spawn({
        let (path, items) = (path.clone(), items.clone());
        move || {
            let mut evaluations = 0;
            let got = Mutex::new(&path).acquire_when_with(
                || {
                    evaluations += 1;
                    Ok::<_, Error>(items.load(SeqCst) > 0)
                },
                Some(BOUND),
                |_| {
                    let _ = tx.send(());
                },
            );
            let guard = got
                .unwrap()
                .acquired()
                .expect("the consumer was never woken");
            items.fetch_sub(1, SeqCst);
            (guard.fence(), evaluations)
        }
    });
    // It evaluated, released, and sleeps.
    rx.recv_timeout(BOUND).expect("the consumer never waited");
    let producer = mutex
        .acquire(Some(BOUND))
        .unwrap()
        .expect("the producer got no lock");
    items.fetch_add(1, SeqCst);
    let produced = producer.fence();
    drop(producer);
    let (consumed, evaluations) = consumer.join().unwrap();
    assert!(consumed > produced);
    assert_eq!((evaluations, items.load(SeqCst)), (2, 0));
    // A condition that fails ends the wait with its error, the lock released.
    let failed = mutex.acquire_when_with(
        || Err(Error::new(&path, ErrorKind::Corrupt, "cannot tell")),
        Some(BOUND),
        |_| {},
    );
    assert_eq!(failed.unwrap_err().kind(), ErrorKind::Corrupt);
    assert!(mutex.acquire_when(|| true, Some(BOUND)).unwrap().is_some());
}

#[test]
fn delete_on_release_removes_lock_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let g = Mutex::new(&path)
        .delete_on_release(true)
        .try_acquire()
        .unwrap()
        .unwrap();
    assert!(path.exists() && holder::record_path(&path).exists());
    g.release().unwrap();
    assert!(!path.exists() && !holder::record_path(&path).exists());
}

#[test]
fn held_entries_parse() {
    let e = HeldEntry::parse("2049:77:5:123").unwrap();
    assert_eq!((e.dev, e.ino, e.fd, e.pid), (2049, 77, Some(5), 123));
    assert!(HeldEntry::parse("2049:77:-:9").unwrap().fd.is_none());
    assert!(HeldEntry::parse("junk").is_none());
}

/// A plain lock releases as every guard does, and keeps no files to report on.
#[test]
fn a_plain_guard_releases_with_nothing_to_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mutex = Mutex::new(dir.path().join("l"));
    let shared = mutex
        .acquire_plain_with(Mode::Shared, Some(Duration::ZERO), |_| {})
        .unwrap()
        .acquired()
        .unwrap();
    assert_eq!(shared.release().unwrap(), Released::Kept);
    assert!(mutex.try_acquire().unwrap().is_some(), "free once released");
}

/// The holder record says the lock is held, by whom, while it is, and `released` once it is
/// not, keeping the fence for the next holder (the protocol on disk, which a status on another
/// host reads where it cannot see the kernel's lock table). (Mutant answered: the release not
/// recorded.)
#[test]
fn the_record_says_held_then_released_and_keeps_the_fence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let record = || std::fs::read_to_string(holder::record_path(&path)).unwrap();
    let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    let held = record();
    assert!(held.contains("\nstate held\n"), "{held}");
    assert!(
        held.contains(&format!("\npid {}\n", std::process::id())),
        "{held}"
    );
    let fence = held
        .lines()
        .find(|l| l.starts_with("fence "))
        .unwrap()
        .to_string();
    drop(guard);
    let released = record();
    assert!(released.contains("\nstate released\n"), "{released}");
    assert!(!released.contains("\npid "), "names no holder: {released}");
    assert!(
        released.lines().any(|l| l == fence),
        "the fence kept: {released}"
    );
}

/// The holder record's token is shown only while it may be believed: a record with a second
/// link (a hard link to someone's record, say) gives none, and says why.
#[test]
fn status_shows_no_fence_from_a_record_with_other_links() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    let fence = guard.fence();
    drop(guard);
    let st = status(&path).unwrap();
    assert_eq!((st.fence, st.fence_withheld), (Some(fence), None));
    std::fs::hard_link(dir.path().join(".l.fsync"), dir.path().join("elsewhere")).unwrap();
    let st = status(&path).unwrap();
    assert_eq!(
        (st.fence, st.fence_withheld),
        (None, Some(FenceWithheld::Links))
    );
}

/// Whether a lock's name still names the file held is asked first in the directory the holder
/// opened, and only then by the path: a directory renamed meanwhile (the path now names
/// nothing) still has the file under its name, and a lock whose directory was removed and
/// made again (the path names another file) is told by neither. (Mutants answered: the
/// lookup in the directory made to answer a constant.)
#[test]
fn a_locks_name_is_looked_up_in_the_directory_held_before_its_path() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let (old, new) = (t.path().join("d"), t.path().join("moved"));
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("l"), b"").unwrap();
    let meta = std::fs::metadata(old.join("l")).unwrap();
    let held = (meta.dev(), meta.ino());
    let dir = Dir::top(&old, false, "cannot open").unwrap().unwrap();
    let name = std::ffi::OsStr::new("l");
    let path = old.join("l");
    assert!(names(&path, Some((&dir, name)), held).unwrap());
    std::fs::rename(&old, &new).unwrap();
    assert!(names(&path, Some((&dir, name)), held).unwrap(), "renamed");
    assert!(!names(&path, None, held).unwrap(), "by the path alone");
    // Another directory made at the path, another file in it: the held one has no name there.
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("l"), b"").unwrap();
    std::fs::remove_file(new.join("l")).unwrap();
    assert!(!names(&path, Some((&dir, name)), held).unwrap(), "removed");
}

/// `fd_still_held`: true while our description holds the lock, false once another has it
/// (ours let go meanwhile). (Mutant answered: `fd_still_held` made a constant.)
#[test]
fn a_descriptor_is_still_held_until_another_description_has_the_lock() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let open = || std::fs::File::create(dir.path().join("L")).unwrap();
    let (ours, other) = (open(), open());
    let poll = Duration::from_millis(100);
    assert!(lock_fd(ours.as_fd(), Mode::Exclusive, Some(Duration::ZERO), poll).unwrap());
    assert!(fd_still_held(ours.as_fd()));
    unlock_fd(ours.as_fd()).unwrap();
    assert!(lock_fd(other.as_fd(), Mode::Exclusive, Some(Duration::ZERO), poll).unwrap());
    assert!(!fd_still_held(ours.as_fd()));
}

/// The caller's private mark is believed over a record whose token ran ahead of the clock: the
/// record says `ahead`, the mark (a token handed out while no record of ours could keep it)
/// says more, and the next token is past the mark. (Mutant answered: the mark looked up only
/// while the tokens kept are behind the clock.)
#[test]
fn a_mark_past_a_token_ahead_of_the_clock_is_believed() {
    let dir = tempfile::tempdir().unwrap();
    // A name of its own: the mark lives in the caller's private directory, beyond this test.
    let name = format!("ahead-{}", std::process::id());
    let ahead = crate::platform::procinfo::now_micros() + 1_000_000_000_000; // eleven days
    let record = format!("fsync-holder 1\nfence {ahead}\nstate released\nend\n");
    std::fs::write(dir.path().join(format!(".{name}.fsync")), record).unwrap();
    let top = Dir::top(dir.path(), false, "cannot open").unwrap().unwrap();
    let os = std::ffi::OsStr::new(&name);
    crate::fence::raise_mark(&top, os, ahead + 1000);
    let marked = crate::fence::mark(&top, os);
    let guard = Mutex::new(dir.path().join(&name)).acquire(Some(BOUND));
    let fence = guard.unwrap().unwrap().fence();
    crate::fence::forget_mark(&top, os);
    assert_eq!(marked, ahead + 1000, "the mark was not kept");
    assert_eq!(fence, ahead + 1001);
}

/// A guard says whether its lock lies on a network file system as its acquisition learnt it:
/// not for a lock in a local directory; so for one whose acquisition found a network file
/// system (here told so: no such file system is mounted for the tests), which then offers a
/// check for the loss of its lock. (Mutants answered: `on_network` made a constant,
/// `loss_check` made `None`.)
#[test]
fn a_guard_says_whether_its_lock_is_on_a_network_file_system() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    let local = mutex.acquire(Some(BOUND)).unwrap().unwrap();
    assert!(!local.on_network());
    // Another lock file: `l`'s lock may outlive `local` for a moment, in a copy of its
    // descriptor that another test's fork holds until its exec.
    let other = Mutex::new(dir.path().join("n"));
    let file = std::fs::File::create(dir.path().join("n")).unwrap();
    let poll = Duration::from_millis(100);
    assert!(lock_fd(file.as_fd(), Mode::Exclusive, Some(Duration::ZERO), poll).unwrap());
    let key = held::Key::new(&file.metadata().unwrap(), Mode::Exclusive);
    let network = MutexGuard::new(&other, file, true, key);
    assert!(network.on_network());
    // There a living holder can lose its lock: a check is offered for it.
    assert!(crate::Guard::loss_check(&network).is_some());
}

/// `still_held`: true while the guard's lock is ours, false once another description has it
/// (ours let go behind the guard's back, as a file server that dropped our locks would).
/// (Mutants answered: `MutexGuard::still_held` made a constant.)
#[test]
fn a_guard_is_still_held_until_another_description_has_the_lock() {
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    assert!(guard.still_held());
    // The guard's descriptor, by its name among ours: the test's own directory, open only
    // there while the guard lives.
    let number = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .find_map(|e| {
            let e = e.ok()?;
            let named = std::fs::read_link(e.path()).ok()? == path;
            named.then(|| e.file_name().to_str()?.parse().ok())?
        })
        .unwrap();
    let ours = crate::platform::fs::duplicate(number).unwrap();
    unlock_fd(ours.as_fd()).unwrap();
    let other = std::fs::File::open(&path).unwrap();
    let poll = Duration::from_millis(100);
    assert!(lock_fd(other.as_fd(), Mode::Exclusive, Some(Duration::ZERO), poll).unwrap());
    assert!(!guard.still_held());
}

/// What a guard passes down names its descriptor (`DEV:INO:FD:PID`: `-` for the descriptor
/// before [`Guard::pass_down`], its number after); raised above a floor, the descriptor is
/// the same lock above it; a guard made from it is nested, and holds the lock. (Mutants
/// answered: `is_nested` made `false`, `raise_descriptor` made a no-op or its `>` another
/// comparison.)
#[test]
fn a_guard_passes_its_descriptor_down_raised_where_asked_and_nests_on_it() {
    use crate::Guard as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    let mut guard = mutex.acquire(Some(BOUND)).unwrap().unwrap();
    assert!(!guard.is_nested());
    // Ours is the last entry (the tests may run under a lock of their own).
    let own = |g: &MutexGuard| {
        let env = g.held_env().unwrap();
        let own = env.rsplit(';').next().unwrap().to_string();
        own.split(':').map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(
        own(&guard)[2..],
        ["-".to_string(), std::process::id().to_string()]
    );
    guard.pass_down().unwrap();
    let fd: RawFd = own(&guard)[2].parse().unwrap();
    guard.raise_descriptor(fd + 20);
    let raised: RawFd = own(&guard)[2].parse().unwrap();
    assert!(raised > fd + 20, "{fd} raised to {raised}");
    guard.raise_descriptor(raised - 1); // above the floor already: where it is
    assert_eq!(own(&guard)[2], raised.to_string());
    guard.raise_descriptor(raised); // at the floor: above it
    let raised: RawFd = own(&guard)[2].parse().unwrap();
    assert!(raised > fd + 21, "{fd} raised to {raised}");
    assert_eq!(
        std::fs::read_link(format!("/proc/self/fd/{raised}")).unwrap(),
        path
    );
    assert!(guard.still_held());
    let nested = MutexGuard::nested(&mutex, raised);
    assert!(nested.is_nested() && nested.still_held());
}

/// A guard told at release time whether it was the last user deletes the lock file only if
/// told so. (Mutant answered: `&&` made `||` in `set_delete_on_release`, which deleted it
/// when told not to.)
#[test]
fn a_guard_deletes_its_lock_file_only_if_told_so_at_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let mutex = Mutex::new(&path);
    for delete in [false, true] {
        let mut guard = mutex.acquire(Some(BOUND)).unwrap().unwrap();
        guard.set_delete_on_release(delete);
        let released = guard.release().unwrap();
        assert_eq!(
            (released, path.exists()),
            (match delete {
                false => (Released::Kept, true),
                true => (Released::Deleted, false),
            })
        );
    }
}

/// A record whose token is 0 keeps none: status shows no token from it. (Mutant answered: a
/// token of 0 shown.)
#[test]
fn status_shows_no_token_from_a_record_that_keeps_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    std::fs::write(&path, b"").unwrap();
    let record = "fsync-holder 1\nfence 0\nstate released\nend\n";
    std::fs::write(dir.path().join(".l.fsync"), record).unwrap();
    let st = status(&path).unwrap();
    assert_eq!((st.held, st.fence, st.fence_withheld), (false, None, None));
}

/// A record with a second link (a hard link to someone's file, say) is neither written nor
/// believed about tokens: a token it names far ahead of the clock is not followed. (Mutants
/// answered: its token believed whatever its links or owner.)
#[test]
fn a_token_in_a_record_with_other_links_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let ahead = crate::platform::procinfo::now_micros() + 1_000_000_000_000; // eleven days
    let record = format!("fsync-holder 1\nfence {ahead}\nstate released\nend\n");
    std::fs::write(dir.path().join(".l.fsync"), record).unwrap();
    std::fs::hard_link(dir.path().join(".l.fsync"), dir.path().join("elsewhere")).unwrap();
    let guard = Mutex::new(&path).acquire(Some(BOUND)).unwrap().unwrap();
    assert!(guard.fence() < ahead, "{} followed {ahead}", guard.fence());
}

/// Where the kernel's table names no process for the lock (an OFD lock, listed with pid -1),
/// a record of this host is believed only while its process lives: a live holder's record
/// names it, a dead one's does not. (Mutants answered: the checks of "this host" and "alive"
/// joined with the wrong operator or inverted.)
#[test]
fn where_the_kernel_names_no_holder_a_record_is_believed_while_its_process_lives() {
    use crate::holder::{Holder, Record, record_path, render};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let range = crate::range::ByteRange { start: 0, len: 1 };
    let lock = crate::range::RangeLock::new(&path, range);
    let _held = lock.acquire(Mode::Exclusive, Some(BOUND)).unwrap().unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    for (pid, believed) in [(std::process::id(), true), (dead, false)] {
        let holder = Holder {
            pid,
            ..Holder::this_process(1, "the record's".to_string())
        };
        let text = render(&Record {
            fence: 7,
            holder: Some(holder),
        });
        std::fs::write(record_path(&path), text).unwrap();
        let st = status(&path).unwrap();
        let named = st.holder.map(|h| (h.pid, h.command));
        let record = (pid, "the record's".to_string());
        assert_eq!(named.as_ref() == Some(&record), believed, "{named:?}");
        assert!(st.held);
    }
}
