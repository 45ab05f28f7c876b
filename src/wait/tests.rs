//! Unit tests of [`super`].

use super::*;

fn open_for_writing(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap()
}

/// A wait as on a network file system (a child blocks; polled every 50 ms) until `timeout`,
/// reporting progress.
fn polling(timeout: Duration) -> Wait {
    Wait {
        deadline: Deadline::after(Some(timeout)),
        poll: Some(Duration::from_millis(50)),
        progress: Some(PROGRESS_EVERY),
    }
}

/// [`wait_for`] a whole-file lock in `mode` on `file` through `locker` (no `settle`: the
/// tests look at what a wait leaves).
fn wait_locking(
    locker: &mut Locker,
    file: &std::fs::File,
    mode: Mode,
    spec: Wait,
    progress: impl FnMut(Duration),
) -> io::Result<Outcome<()>> {
    wait_for(spec, progress, |block| {
        Ok::<_, io::Error>(locker.flock(file, mode, block)?.then_some(()))
    })
}

/// A writer that takes nothing (`Ok(0)`, as a closed pipe may), or fails, ends the copy
/// with an error; bounded, so that a copy that retries for ever fails the test. (Mutants
/// answered: `Ok(0)` taken as progress, an error taken as an interruption: both spin.)
#[test]
fn a_copy_to_a_writer_that_takes_nothing_or_fails_ends_with_an_error() {
    struct Stuck(Option<io::ErrorKind>);
    impl io::Write for Stuck {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.0.map_or(Ok(0), |kind| Err(io::Error::from(kind)))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    for (writer, want) in [
        (None, io::ErrorKind::WriteZero),
        (Some(io::ErrorKind::StorageFull), io::ErrorKind::StorageFull),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut from: &[u8] = b"payload";
            let _ = tx.send(copy_cancellable(&mut from, &mut Stuck(writer)));
        });
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the copy did not return within 10 s");
        match got {
            Err(CopyFailed::Write(e)) => assert_eq!(e.kind(), want),
            other => panic!("{other:?}"),
        }
    }
}

/// A read interrupted is tried again; a read that fails otherwise (an I/O error of the file
/// system) ends the copy with that error, at once. (Mutant answered: every read error taken
/// as an interruption: the copy spins on the failing read.)
#[test]
fn a_copy_from_a_reader_that_fails_ends_with_its_error() {
    struct Failing(u32);
    impl io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            self.0 += 1;
            match self.0 {
                1 => Err(io::Error::from(io::ErrorKind::Interrupted)),
                _ => Err(io::Error::from_raw_os_error(nix::libc::EIO)),
            }
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut from = Failing(0);
        let got = copy_cancellable(&mut from, &mut Vec::new());
        let _ = tx.send((got, from.0));
    });
    let (got, reads) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the copy did not return within 10 s");
    match got {
        Err(CopyFailed::Read(e)) => assert_eq!(e.raw_os_error(), Some(nix::libc::EIO)),
        other => panic!("{other:?}"),
    }
    assert_eq!(reads, 2, "the interrupted read was tried again, once");
}

/// A flush interrupted (by a signal that cancels nothing) is tried again, and the copy
/// counts what it wrote.
#[test]
fn a_copy_retries_an_interrupted_flush_and_counts_the_bytes() {
    struct Flaky {
        got: Vec<u8>,
        interrupted: bool,
    }
    impl io::Write for Flaky {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // A short write: the copy must carry on from where it stopped.
            let n = buf.len().min(3);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            if std::mem::replace(&mut self.interrupted, false) {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            Ok(())
        }
    }
    let mut to = Flaky {
        got: Vec::new(),
        interrupted: true,
    };
    let mut from: &[u8] = b"payload";
    assert_eq!(copy_cancellable(&mut from, &mut to).unwrap(), 7);
    assert_eq!(to.got, b"payload");
    assert!(!to.interrupted, "the flush was not tried again");
}

/// As on a network file system (a wait that polls): the blocking call is a child's, on our
/// open file description, so what it is granted we hold; the wait ends at its deadline with
/// that call still blocked; and nothing is left locked once we have let go.
#[test]
fn a_polling_wait_for_a_lock_blocks_in_a_child_and_leaves_no_lock_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("L");
    let open = || open_for_writing(&path);
    let other = open();
    assert!(lock::flock(&other, Mode::Exclusive, false).unwrap());
    // Held by another: the wait ends at its deadline (the child's call never returns).
    let ours = open();
    let started = std::time::Instant::now();
    let got = flock(
        polling(Duration::from_millis(300)),
        |_| {},
        &ours,
        Mode::Exclusive,
        &path,
    );
    assert_eq!(got.unwrap(), Outcome::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(other);
    assert!(
        lock::flock(&ours, Mode::Exclusive, false).unwrap(),
        "our description holds nothing: the child that waited is gone"
    );
    drop(ours);
    let probe = open();
    assert!(
        lock::flock(&probe, Mode::Exclusive, false).unwrap(),
        "the child that waited left the lock taken"
    );
    // Released while we wait: granted to the child, held by our description.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn({
        let path = path.clone();
        move || {
            let ours = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            let got = flock(
                polling(Duration::from_secs(30)),
                |_| {
                    let _ = tx.send(());
                },
                &ours,
                Mode::Exclusive,
                &path,
            );
            (got.unwrap(), ours)
        }
    });
    rx.recv().unwrap(); // it waits
    // Let go by closing: the child, forked while `probe` was open, kept no copy of it.
    drop(probe);
    let (got, ours) = waiter.join().unwrap();
    assert_eq!(got, Outcome::Acquired(()));
    let third = open();
    assert!(
        !lock::flock(&third, Mode::Exclusive, false).unwrap(),
        "ours now"
    );
    drop(ours);
    assert!(
        lock::flock(&third, Mode::Exclusive, false).unwrap(),
        "free once we let go"
    );
}

/// The same for a byte range: the wait ends at its deadline, and neither the child nor our
/// description is left holding the bytes.
#[test]
fn a_polling_wait_for_a_byte_range_leaves_the_bytes_free_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("L");
    let open = || open_for_writing(&path);
    let other = open();
    assert!(lock::ofd_lock(&other, Mode::Exclusive, 4, 2, false).unwrap());
    let ours = open();
    let mut locker = Locker::new(true);
    let spec = Wait {
        deadline: Deadline::after(Some(Duration::from_millis(300))),
        poll: Some(Duration::from_millis(50)),
        progress: None,
    };
    let got = wait_for(
        spec,
        |_| {},
        |block| {
            Ok::<_, io::Error>(
                locker
                    .range(&ours, Mode::Exclusive, (5, 1), block)?
                    .then_some(()),
            )
        },
    );
    locker.settle(&got, &ours);
    assert_eq!(got.unwrap(), Outcome::TimedOut);
    lock::ofd_unlock(&other, 4, 2).unwrap();
    assert!(
        lock::ofd_lock(&other, Mode::Exclusive, 5, 1, false).unwrap(),
        "the byte is free: the child that waited for it is gone"
    );
}

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
    let left = Deadline::after(Some(Duration::from_mins(1)))
        .remaining()
        .unwrap();
    assert!(left > Duration::from_secs(59) && left <= Duration::from_mins(1));
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

/// A blocking attempt interrupted (a signal: the deadline's timer, a poll tick) is tried
/// again; one that fails otherwise ends the wait with its error at once, not at the deadline.
/// (Mutant answered: every error taken as an interruption.)
#[test]
fn a_blocking_attempt_that_fails_ends_the_wait_and_an_interrupted_one_goes_on() {
    let spec = Wait {
        deadline: Deadline::after(Some(Duration::from_secs(5))),
        poll: None,
        progress: None,
    };
    let mut tries = Vec::new();
    let got = wait_for(
        spec,
        |_| {},
        |block| {
            tries.push(block);
            match (block, tries.len()) {
                (false, _) => Ok(None::<()>),
                (true, 2) => Err(io::Error::from(io::ErrorKind::Interrupted)),
                (true, _) => Err(io::Error::from_raw_os_error(nix::libc::EIO)),
            }
        },
    );
    assert_eq!(got.unwrap_err().raw_os_error(), Some(nix::libc::EIO));
    // Each blocking attempt is followed by a look that does not block (`wait_for`).
    assert_eq!(tries, [false, true, false, true]);
}

/// The first progress report counts from when the deadline was set, not from this call: a
/// verb that waits in several calls under one deadline reports the whole time it has waited.
/// (Mutant answered: `Deadline::waited` made zero.)
#[test]
fn progress_counts_from_the_deadline_not_from_the_call() {
    let deadline = Deadline {
        start: Instant::now().checked_sub(Duration::from_mins(1)).unwrap(),
        end: None,
    };
    let spec = Wait {
        deadline,
        poll: None,
        progress: Some(PROGRESS_EVERY),
    };
    let mut reports = Vec::new();
    let got = wait_for(
        spec,
        |waited| reports.push(waited),
        |block| Ok::<_, io::Error>(block.then_some(())),
    );
    assert_eq!(got.unwrap(), Outcome::Acquired(()));
    assert!(
        reports
            .first()
            .is_some_and(|&w| w >= Duration::from_mins(1)),
        "{reports:?}"
    );
}

/// On a network file system the blocking call is a child's, kept across a wait that ended
/// (its deadline, a signal) for the next wait on the same file; a next wait that asks for
/// another mode gets a child of its own, never the one still waiting for the old mode, and
/// only once the old one is gone. Here a wait for a shared lock times out, then a wait for an
/// exclusive one is granted when the holder lets go: what our description holds must exclude
/// readers. (Mutant answered: the waiting child taken whatever it was asked for. Found with
/// it: the old child, killed only after the new one started, could be granted its shared lock
/// after the new one's exclusive one, which it then replaced: in every run here.)
#[test]
fn a_child_waiting_for_one_mode_is_not_taken_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("L");
    let open = || open_for_writing(&path);
    let other = open();
    assert!(lock::flock(&other, Mode::Exclusive, false).unwrap());
    let ours = open();
    let mut locker = Locker::new(true);
    let got = wait_locking(
        &mut locker,
        &ours,
        Mode::Shared,
        polling(Duration::from_millis(200)),
        |_| {},
    );
    assert_eq!(got.unwrap(), Outcome::TimedOut);
    // The holder lets go as soon as the second wait reports it waits (before it blocks).
    let got = wait_locking(
        &mut locker,
        &ours,
        Mode::Exclusive,
        polling(Duration::from_secs(30)),
        |_| lock::unlock(&other).unwrap(),
    );
    assert_eq!(got.unwrap(), Outcome::Acquired(()));
    let reader = open();
    assert!(
        !lock::flock(&reader, Mode::Shared, false).unwrap(),
        "granted an exclusive lock, we hold a shared one"
    );
}

/// A network wait's child waits on one description: once the caller turns to another file
/// (the name was replaced while it waited), `forget` ends it, so that the wait on the new file
/// gets a child of its own. Here both files are held; the wait on the first times out, the
/// holder of the second lets go as the wait on it begins: granted, on the second file, and
/// nothing waits on the first any more. (Mutant answered: `forget` doing nothing, the child of
/// the first file left waiting there, taken for the second.)
#[test]
fn a_child_waiting_on_a_file_forgotten_is_not_taken_for_the_next() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str| open_for_writing(&dir.path().join(name));
    let (first_holder, second_holder) = (open("A"), open("B"));
    assert!(lock::flock(&first_holder, Mode::Exclusive, false).unwrap());
    assert!(lock::flock(&second_holder, Mode::Exclusive, false).unwrap());
    let mut locker = Locker::new(true);
    let first = open("A");
    let got = wait_locking(
        &mut locker,
        &first,
        Mode::Exclusive,
        polling(Duration::from_millis(200)),
        |_| {},
    );
    assert_eq!(got.unwrap(), Outcome::TimedOut);
    let meta = first.metadata().unwrap();
    let waiting = || crate::platform::procinfo::flock_waiters(meta.dev(), meta.ino());
    assert_eq!(waiting(), Some(1), "the child waits on the first file");
    locker.forget();
    assert_eq!(
        waiting(),
        Some(0),
        "the child waits on the first file still"
    );
    let second = open("B");
    let got = wait_locking(
        &mut locker,
        &second,
        Mode::Exclusive,
        polling(Duration::from_secs(5)),
        |_| lock::unlock(&second_holder).unwrap(),
    );
    assert_eq!(got.unwrap(), Outcome::Acquired(()));
    assert!(!lock::flock(&open("B"), Mode::Exclusive, false).unwrap());
}

/// A network wait that ended without the lock (its deadline) leaves its child waiting; if the
/// child is granted the lock before `settle` kills it, the lock is on our description, and
/// `settle` lets go of it. Here the holder lets go after the deadline and the kernel's table
/// shows the child granted; after `settle` another may lock the file while our description
/// is still open. (Mutant answered: `settle` doing nothing.)
#[test]
fn a_lock_granted_to_the_child_after_the_deadline_is_let_go_by_settle() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("L");
    let open = || open_for_writing(&path);
    let other = open();
    assert!(lock::flock(&other, Mode::Exclusive, false).unwrap());
    let ours = open();
    let mut locker = Locker::new(true);
    let spec = polling(Duration::from_millis(200));
    let got = wait_locking(&mut locker, &ours, Mode::Exclusive, spec, |_| {});
    assert!(matches!(got, Ok(Outcome::TimedOut)));
    lock::unlock(&other).unwrap();
    let meta = ours.metadata().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while crate::platform::procinfo::flock_holders(meta.dev(), meta.ino())
        .is_none_or(|h| h.is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "the child was never granted the lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !lock::flock(&other, Mode::Exclusive, false).unwrap(),
        "granted to the child, on our description"
    );
    locker.settle(&got, &ours);
    assert!(
        lock::flock(&other, Mode::Exclusive, false).unwrap(),
        "our description still holds what the child was granted"
    );
}
