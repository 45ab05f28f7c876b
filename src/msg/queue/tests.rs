//! Unit tests of [`super`]: shard and head names, the first post's head, walks across gaps,
//! lowering the head, and a waiter's watch of registrations' closes.

use super::*;
use crate::{Mailbox, msg::tests::post_texts};

/// A mailbox `b` in a new directory, one message posted to it: the directory (kept while it
/// lives), the mailbox's path, and its layout.
fn posted_once() -> (tempfile::TempDir, std::path::PathBuf, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..1);
    let l = b.layout().unwrap();
    (dir, path, l)
}

/// What a waiter watches at shard 0: the levels `levels`, and registrations' closes if `closes`.
fn watching(levels: Vec<u8>, closes: bool) -> Watched {
    Watched {
        shard: 0,
        levels,
        begun: Vec::new(),
        closes,
    }
}

/// A shard's name is 20 digits of a multiple of 100 below the largest sequence number;
/// the head's, the same and an end of line; `seq`'s, a number below the largest (or
/// nothing yet). (Mutants answered: each check loosened, a head read as shard 0.)
#[test]
fn shard_head_and_seq_read_back_only_as_fsync_writes_them() {
    let last = shard_of(MAX_SEQ - 1);
    assert_eq!(parse_shard(&shard_name(100)), Some(100));
    assert_eq!(parse_shard(&shard_name(last)), Some(last));
    for not in [
        "0000000000000000100".to_string(), // 19 digits
        "000000000000000000100".into(),
        "0000000000000000010x".into(),
        shard_name(150),
        shard_name(last + SHARD),
    ] {
        assert_eq!(parse_shard(&not), None, "{not}");
    }
    assert_eq!(parse_head(&format!("{}\n", shard_name(200))), Some(200));
    assert_eq!(parse_head(&shard_name(200)), None, "no end of line");
    assert_eq!(parse_seq(""), Ok(0));
    assert_eq!(parse_seq(&format!("{}\n", MAX_SEQ - 1)), Ok(MAX_SEQ - 1));
    assert_eq!(parse_seq(&MAX_SEQ.to_string()), Err(()));
}

/// The first post into a mailbox gets it a head (and a spare registration), unless the
/// queue's directory holds messages of the layout before shards (a receive's rebuild
/// moves them first): a file there not named like a message, or a directory named like
/// one, is none of those. (Mutant answered: either taken for such a message.)
#[test]
fn a_first_post_makes_the_head_unless_messages_wait_unsharded() {
    for (planted, dir, head) in [
        ("junk", false, true),
        ("00000000000000000007.h-1-0.-.msg", true, true),
        ("00000000000000000007.h-1-0.-.msg", false, false),
    ] {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("b");
        std::fs::create_dir_all(path.join("q")).unwrap();
        match dir {
            true => std::fs::create_dir(path.join("q").join(planted)).unwrap(),
            false => std::fs::write(path.join("q").join(planted), "").unwrap(),
        }
        post_texts(&Mailbox::new(&path), 0..1);
        assert_eq!(
            path.join("head").exists(),
            head,
            "{planted} (a directory: {dir})"
        );
    }
}

/// A walk of the shards passes a gap of a billion missing shards by listing the queue's
/// directory (bounded in a thread, so that a walk by number fails the test), and the
/// gap's end is the first shard at or after where it began and at most the last: past
/// it if none is. (Mutants answered: missing shards counted wrongly, the bounds of the
/// gap's end turned round.)
#[test]
fn a_walk_lists_the_queue_across_a_gap_and_the_gap_ends_at_the_next_shard() {
    let t = tempfile::tempdir().unwrap();
    for first in [0, 500, 1000, 100_000_000_000] {
        std::fs::create_dir(t.path().join(shard_name(first))).unwrap();
    }
    let q = Dir::top(t.path(), false, "x").unwrap().unwrap();
    assert_eq!(skip_gap_in(&q, 100, 2000).unwrap(), 500);
    assert_eq!(skip_gap_in(&q, 500, 2000).unwrap(), 500);
    assert_eq!(skip_gap_in(&q, 600, 1000).unwrap(), 1000);
    assert_eq!(
        skip_gap_in(&q, 600, 900).unwrap(),
        1000,
        "none: past the last"
    );
    let walked = crate::test_support::within(Duration::from_secs(20), move || {
        let mut walked = Vec::new();
        walk_shards(&q, Some(0), 100_000_000_000, |first, shard| {
            walked.push((first, shard.is_ok()));
            Ok(())
        })
        .unwrap();
        walked
    });
    let walked = walked.expect("the walk ended");
    let want = [0, 500, 1000, 100_000_000_000].map(|f| (f, true));
    assert_eq!(walked, want);
}

/// A waiter for a closed registration's lock to go returns once it has gone, and not
/// before; one held for good (a reader's lock) is waited for until the grace ends. The
/// lock is another open description's, let go once the waiter's thread sleeps.
/// (Mutants answered: no wait, the lock's test turned round, the grace's turned round or
/// never ending.)
#[test]
fn a_closed_registrations_lock_is_waited_for_until_it_goes_or_the_grace_ends() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("r");
    std::fs::write(&path, "").unwrap();
    let holder = File::open(&path).unwrap();
    assert!(lock::flock(&holder, Mode::Exclusive, false).unwrap());
    let let_go = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let (let_go, path) = (let_go.clone(), path.clone());
        std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let file = File::open(path).unwrap();
            released(&file, Duration::from_mins(1)).unwrap();
            let_go.load(Ordering::SeqCst)
        })
    };
    let tid = rx.recv().unwrap();
    crate::test_support::until_asleep(tid, || waiter.is_finished());
    let_go.store(true, Ordering::SeqCst);
    drop(holder);
    assert!(waiter.join().unwrap(), "returned while the lock was held");
    // Held for good: until the grace ends.
    let holder = File::open(&path).unwrap();
    assert!(lock::flock(&holder, Mode::Exclusive, false).unwrap());
    let file = File::open(&path).unwrap();
    let ended = crate::test_support::within(Duration::from_secs(20), move || {
        released(&file, Duration::from_millis(50)).is_ok()
    });
    assert_eq!(ended, Some(true), "the grace never ended");
}

/// Lowering the head (a batch rolled forward behind it) writes it where it lies past the
/// shard, and leaves it where it is at or before it. (Mutants answered: never lowered,
/// lowered always, or only when it is at the shard.)
#[test]
fn the_head_is_lowered_only_where_it_lies_past_the_shard() {
    let (_dir, path, l) = posted_once();
    let head = || std::fs::read_to_string(path.join("head")).unwrap();
    std::fs::write(path.join("head"), format!("{}\n", shard_name(200))).unwrap();
    l.lower_head(100).unwrap();
    assert_eq!(head(), format!("{}\n", shard_name(100)));
    l.lower_head(300).unwrap();
    assert_eq!(head(), format!("{}\n", shard_name(100)));
}

/// A waiter woken by a registration's close waits for its lock to go, for as long as the
/// grace allows: here a lock held for good (a reader's, say), so the sleep lasts the grace
/// at least. A waiter that looked at once would see the registration's owner alive, and
/// sleep on with nothing left to wake it. (Mutant answered: only hidden names waited for.)
#[test]
fn a_waiter_woken_by_a_registrations_close_waits_for_its_lock() {
    let (_dir, path, l) = posted_once();
    let registration = path.join("recv").join("r-1");
    std::fs::write(&registration, "").unwrap();
    let holder = File::open(&registration).unwrap();
    assert!(lock::flock(&holder, Mode::Exclusive, false).unwrap());
    let mut waker = Waker::default();
    waker.arm(&l, watching(Vec::new(), true)).unwrap();
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&registration)
            .unwrap(),
    );
    let start = std::time::Instant::now();
    waker.sleep(&l, None).unwrap();
    assert!(
        start.elapsed() >= RELEASE_GRACE,
        "returned after {:?}, the lock still held",
        start.elapsed()
    );
}

/// With every level's directory made, a waiter watches the shards and not the queue's
/// directory, whose other changes (here a directory made in it) do not wake it: it sleeps
/// until it is due. (Mutant answered: the queue's directory watched with every level made.)
#[test]
fn with_every_level_made_the_queues_directory_is_not_watched() {
    let (_dir, path, l) = posted_once();
    for p in 1..=MAX_PRIORITY {
        std::fs::create_dir(path.join("q").join(format!("p{p}"))).unwrap();
    }
    let mut waker = Waker::default();
    waker
        .arm(&l, watching((1..=MAX_PRIORITY).collect(), false))
        .unwrap();
    std::fs::create_dir(path.join("q").join("other")).unwrap();
    let start = std::time::Instant::now();
    let due = procinfo::now_micros() + 200_000;
    waker.sleep(&l, Some(due)).unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "woken after {:?}",
        start.elapsed()
    );
}
