//! Unit tests of [`super`]: the loop's bounds, and the three primitives that use it against a
//! neighbour who deletes their directory in a loop.

use std::{
    fs::File,
    path::{Path, PathBuf},
    sync::mpsc,
    time::Duration,
};

use super::*;
use crate::platform::lock::{self, Mode};

/// The directory `path` as an acquirer opens it.
fn open_at(path: &Path) -> impl FnMut() -> Result<Dir> + '_ {
    move || Dir::create_top(path, "cannot create")
}

/// An attempt that always finds what it locked deleted ends in an error naming the path, after
/// the bound, when the wait has no deadline: no panic, no endless loop. (Mutant answered: the
/// bound off by one either way.)
#[test]
fn deleted_every_time_ends_in_an_error_naming_the_path() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("s");
    let mut attempts = 0;
    let got = after_deletion(&path, Deadline::never(), open_at(&path), |_| {
        attempts += 1;
        Ok(Outcome::<Option<()>>::Acquired(None))
    });
    let err = got.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(err.path(), path);
    assert!(
        err.to_string()
            .contains("another process keeps deleting it"),
        "{err}"
    );
    assert_eq!(
        attempts,
        MAX_RESTARTS + 1,
        "the first attempt and each restart"
    );
}

/// Starting again stops at the deadline: a try without waiting gets one more attempt (the
/// deletion that sent it back is over), then reports the time up, as a busy try does.
#[test]
fn a_try_starts_again_once_then_times_out() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("s");
    let mut answers = vec![Some(7), None];
    let got = after_deletion(&path, Deadline::now(), open_at(&path), |_| {
        Ok(Outcome::Acquired(answers.pop().unwrap()))
    });
    assert_eq!(got.unwrap().1, Outcome::Acquired(7), "the second attempt");
    let mut attempts = 0;
    let got = after_deletion(&path, Deadline::now(), open_at(&path), |_| {
        attempts += 1;
        Ok(Outcome::<Option<()>>::Acquired(None))
    });
    assert_eq!(got.unwrap().1, Outcome::TimedOut);
    assert_eq!(attempts, 2);
}

/// An error of an attempt whose directory was removed meanwhile starts again; any other error
/// is the answer, at once.
#[test]
fn an_error_starts_again_only_where_the_directory_was_removed() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("s");
    let mut attempts = 0;
    let got = after_deletion(&path, Deadline::never(), open_at(&path), |top| {
        attempts += 1;
        match attempts {
            1 => {
                std::fs::remove_dir(&path).unwrap();
                assert!(removed(top));
                Err(Error::new(&path, ErrorKind::NotFound, "gone"))
            }
            _ => Ok(Outcome::Acquired(Some(removed(top)))),
        }
    });
    assert_eq!(
        got.unwrap().1,
        Outcome::Acquired(false),
        "in the new directory"
    );
    let got = after_deletion(&path, Deadline::never(), open_at(&path), |_| {
        Err::<Outcome<Option<()>>, _>(Error::new(&path, ErrorKind::Io, "broken"))
    });
    assert_eq!(got.unwrap_err().kind(), ErrorKind::Io);
}

/// A neighbour who deletes the directory at `dir` whenever the acquirer says it waits
/// (`waits`), having first made it anew holding its waiting line `line` (so every attempt
/// finds the line it locked deleted), until the acquirer is done; returns how many times.
fn deleting_neighbour(
    dir: PathBuf,
    line: &'static str,
    waits: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<u32> {
    let make = move |dir: &Path| -> File {
        std::fs::create_dir(dir).unwrap();
        let file = File::create(dir.join(line)).unwrap();
        assert!(lock::flock(&file, Mode::Exclusive, false).unwrap());
        file
    };
    let mut held = make(&dir);
    std::thread::spawn(move || {
        let mut deletions = 0;
        while waits.recv().is_ok() {
            std::fs::remove_dir_all(&dir).unwrap();
            // The old line goes last: its waiter wakes in a directory already made anew.
            drop(std::mem::replace(&mut held, make(&dir)));
            deletions += 1;
        }
        deletions
    })
}

/// Run `acquire` (which says when it waits) against a neighbour deleting the directory `dir`
/// with waiting line `line` in a loop: it ends in the bound's error, not a panic (which the
/// release build turns into an abort of the whole program), after every restart.
fn against_a_deleting_neighbour(
    dir: PathBuf,
    line: &'static str,
    acquire: impl FnOnce(&mut dyn FnMut(Duration)) -> Result<()>,
) {
    let (tx, rx) = mpsc::channel();
    let neighbour = deleting_neighbour(dir.clone(), line, rx);
    let err = acquire(&mut |_| {
        let _ = tx.send(());
    })
    .unwrap_err();
    drop(tx);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string().starts_with(&format!("{}: ", dir.display())),
        "{err}"
    );
    assert!(
        neighbour.join().unwrap() > MAX_RESTARTS,
        "deleted at every restart"
    );
}

#[test]
fn a_semaphore_acquirer_beside_a_deleting_neighbour_gets_an_error() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("s");
    let sem = crate::Semaphore::new(&path, 1);
    against_a_deleting_neighbour(path.clone(), "queue", |waits| {
        sem.acquire_with(None, waits).map(drop)
    });
}

#[test]
fn a_group_lock_acquirer_beside_a_deleting_neighbour_gets_an_error() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("l");
    let lock = crate::GroupLock::new(&path);
    against_a_deleting_neighbour(path.clone(), "turnstile", |waits| {
        lock.enter_with("a", None, waits).map(drop)
    });
}

#[test]
fn a_joiner_beside_a_deleting_neighbour_gets_an_error() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("g");
    let group = crate::Group::new(&path);
    against_a_deleting_neighbour(path.clone(), "join.lock", |waits| {
        group.join_with(None, waits).map(drop)
    });
}
