//! Unit tests of [`super`].

use super::*;
use crate::test_support::listing;

/// A writer that asks to read (or write) through another guard in the same thread would
/// wait for itself: refused at once. Two readers are fine; a released writer is forgotten.
#[test]
fn the_same_thread_cannot_deadlock_on_its_own_swmr_lock() {
    // A build that waited would fail here after this long, not hang.
    const BOUND: Duration = Duration::from_secs(5);
    let dir = tempfile::tempdir().unwrap();
    let lock = Swmr::new(dir.path().join("l"));
    let writer = lock.try_write().unwrap().unwrap();
    for err in [
        lock.read(Some(BOUND)).unwrap_err(),
        lock.try_write().unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
        assert!(
            err.to_string().contains("already held by this thread"),
            "{err}"
        );
    }
    drop(writer);
    let (r1, r2) = (
        lock.try_read().unwrap().unwrap(),
        lock.try_read().unwrap().unwrap(),
    );
    assert_eq!(
        lock.try_write().unwrap_err().kind(),
        ErrorKind::WouldDeadlock
    );
    drop((r1, r2));
    let w = lock.try_write().unwrap().unwrap();
    assert!(w.release().is_ok());
    // Another thread just waits its turn (here: finds it busy).
    let writer = lock.try_write().unwrap().unwrap();
    let lock2 = Swmr::new(dir.path().join("l"));
    let busy = std::thread::spawn(move || lock2.try_read().unwrap().is_none());
    assert!(busy.join().unwrap());
    drop(writer);
}

#[test]
fn waiting_writer_holds_back_new_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let lock = Swmr::new(&path);
    let reader = lock.read(None).unwrap().unwrap();
    // A writer that is waiting holds the turnstile: simulate by holding it ourselves.
    let (t, _) = pfs::open_lock_file(&side_file(&path, ".turnstile"), pfs::Purpose::Flock).unwrap();
    assert!(lock::flock(&t, Mode::Exclusive, false).unwrap());
    assert!(
        lock.read(Some(Duration::ZERO)).unwrap().is_none(),
        "new reader queues"
    );
    drop(t);
    assert!(lock.read(Some(Duration::ZERO)).unwrap().is_some());
    let st = status(&path).unwrap();
    assert_eq!(st.readers, Some(1));
    assert!(!st.writer);
    drop(reader);
    assert_eq!(
        side_file(&path, ".turnstile"),
        dir.path().join(".l.turnstile")
    );
}

#[test]
fn the_last_to_leave_with_delete_removes_the_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    let lock = Swmr::new(&path).delete_on_release(true);
    let (r1, r2) = (
        lock.try_read().unwrap().unwrap(),
        lock.try_read().unwrap().unwrap(),
    );
    assert_eq!(r1.release().unwrap(), Released::KeptInUse);
    assert_eq!(listing(dir.path()), [".l.turnstile", "l"]);
    assert_eq!(r2.release().unwrap(), Released::Deleted);
    assert!(listing(dir.path()).is_empty());

    let w = lock.try_write().unwrap().unwrap();
    assert_eq!(listing(dir.path()), [".l.turnstile", ".l.writers", "l"]);
    assert_eq!(w.release().unwrap(), Released::Deleted);
    assert!(listing(dir.path()).is_empty());

    // Without delete on release, or with a user who does not delete inside, files stay.
    let keeper = Swmr::new(&path).try_read().unwrap().unwrap();
    let leaver = lock.try_read().unwrap().unwrap();
    assert_eq!(leaver.release().unwrap(), Released::KeptInUse);
    assert_eq!(keeper.release().unwrap(), Released::Kept);
    assert_eq!(listing(dir.path()), [".l.turnstile", "l"]);
    // A wait that gives up leaves too: the last to go removes the files.
    let writer = Swmr::new(&path).try_write().unwrap().unwrap();
    let gives_up = Swmr::new(&path).delete_on_release(true);
    let busy = std::thread::spawn(move || gives_up.try_read().unwrap().is_none());
    assert!(busy.join().unwrap(), "another thread finds it busy");
    assert_eq!(listing(dir.path()), [".l.turnstile", ".l.writers", "l"]);
    drop(writer);
    assert!(lock.try_write().unwrap().is_some()); // acquired, then dropped: deleted
    assert!(listing(dir.path()).is_empty());
}

/// Wait until a process or thread blocks in `flock` on the file at `path`.
fn until_blocked_on(path: &Path) {
    let m = std::fs::metadata(path).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while procinfo::flock_waiters(m.dev(), m.ino()) != Some(1) {
        assert!(
            std::time::Instant::now() < deadline,
            "nobody blocks on {path:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn whoever_locks_removed_files_takes_the_new_ones() {
    for mode in [Mode::Shared, Mode::Exclusive] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let turnstile = side_file(&path, ".turnstile");
        // A deletion in progress: it holds the turnstile while it removes the files.
        let (t, _) = pfs::open_lock_file(&turnstile, pfs::Purpose::Flock).unwrap();
        assert!(lock::flock(&t, Mode::Exclusive, false).unwrap());
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let got = Swmr::new(&path).acquire(mode, None);
                got.map(|g| g.map(SwmrGuard::unbind))
            })
        };
        until_blocked_on(&turnstile); // it opened `l` and the turnstile, and waits
        for name in ["l", ".l.turnstile", ".l.writers"] {
            let _ = std::fs::remove_file(dir.path().join(name));
        }
        drop(t);
        let guard = waiter.join().unwrap().unwrap().unwrap();
        // It holds the new `l`, not the one it opened first, and made a new turnstile.
        let st = status(&path).unwrap();
        assert_eq!(
            (st.writer, st.readers),
            (
                mode == Mode::Exclusive,
                Some(usize::from(mode == Mode::Shared))
            )
        );
        assert!(names(&path, guard.file()).unwrap());
        assert!(turnstile.exists());
    }
}

#[test]
fn delete_never_removes_a_link_and_keeps_all_three() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l");
    std::fs::write(dir.path().join("target"), "").unwrap();
    std::os::unix::fs::symlink("target", dir.path().join(".l.turnstile")).unwrap();
    let lock = Swmr::new(&path).delete_on_release(true);
    let e = lock.try_write().unwrap().unwrap().release().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongKind);
    assert!(
        e.to_string().contains(".l.turnstile: is a symbolic link"),
        "{e}"
    );
    assert_eq!(
        listing(dir.path()),
        [".l.turnstile", ".l.writers", "l", "target"]
    );
    // The lock's own name a link: not removed either.
    std::fs::remove_file(dir.path().join(".l.turnstile")).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("l", &link).unwrap();
    let e = Swmr::new(&link)
        .delete_on_release(true)
        .try_read()
        .unwrap()
        .unwrap()
        .release()
        .unwrap_err();
    assert!(e.to_string().contains("link: is a symbolic link"), "{e}");
    assert!(link.exists() && path.exists());
}

#[test]
fn delete_is_refused_for_ranges_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let lock = Swmr::new(dir.path().join("l")).delete_on_release(true);
    let range = Some(ByteRange { start: 0, len: 1 });
    let e = lock.clone().range(range).try_read().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    let e = Swmr::new(dir.path())
        .delete_on_release(true)
        .try_read()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongKind);
    assert!(lock.try_read().unwrap().is_some());
}

/// The turnstile and `.writers` are `.NAME.turnstile` and `.NAME.writers`, byte for byte, as
/// the module docs name them: two locks named in bytes that are not UTF-8 never share them,
/// nor does `x.fsync` share those of `x`.
#[test]
fn side_files_are_named_after_the_lock_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    let p = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
    assert_eq!(
        side_file(&p(b"/d/a\xff"), ".turnstile"),
        p(b"/d/.a\xff.turnstile")
    );
    assert_eq!(
        side_file(&p(b"/d/a\xfe"), ".writers"),
        p(b"/d/.a\xfe.writers")
    );
    assert_eq!(
        side_file(Path::new("/d/x.fsync"), ".turnstile"),
        Path::new("/d/.x.fsync.turnstile")
    );
}
