//! Unit tests of [`super`]: delayed messages in their buckets.

use std::{
    os::unix::fs::symlink,
    path::Path,
    time::{Duration, Instant},
};

use super::*;
use crate::{
    msg::{Entry, Failed, Keyed, Mailbox, Received, SHARD, shard_name},
    platform::procinfo,
    test_support::listing,
    wait::DEFAULT_POLL,
};

fn text(r: Received) -> String {
    let mut r = r;
    let mut out = Vec::new();
    r.copy_to(&mut out).unwrap();
    r.finish().unwrap();
    String::from_utf8(out).unwrap()
}

fn next_text(b: &Mailbox) -> Option<String> {
    b.recv(Some(Duration::ZERO)).unwrap().map(text)
}

/// Post `data` to be delivered no sooner than `delay` from now: its name in the queue.
fn post_later(b: &Mailbox, delay: Duration, data: &str) -> String {
    b.clone()
        .delay(delay)
        .post_from(&mut data.as_bytes(), None)
        .unwrap()
}

/// The delayed entries of the mailbox at `path`: (bucket, `DUE.NAME`), bucket by bucket.
fn held(path: &Path) -> Vec<(String, String)> {
    let delayed = path.join("delayed");
    let mut out = Vec::new();
    for bucket in listing(&delayed) {
        if !delayed.join(&bucket).symlink_metadata().unwrap().is_dir() {
            continue;
        }
        for entry in listing(&delayed.join(&bucket)) {
            out.push((bucket.clone(), entry));
        }
    }
    out
}

/// A message name for a file a test writes into the mailbox itself, numbered `seq`.
fn planted(seq: u64) -> String {
    format!("{seq:020}.test-1-{seq:016x}.-.msg")
}

const HOUR: Duration = Duration::from_hours(1);

#[test]
fn buckets_are_named_by_the_minute_their_messages_come_due() {
    assert_eq!(SPAN, 60_000_000);
    assert_eq!(bucket_of(0), 0);
    assert_eq!(bucket_of(SPAN - 1), 0);
    assert_eq!(bucket_of(SPAN), SPAN);
    assert_eq!(bucket_of(7 * SPAN + 5), 7 * SPAN);
    assert_eq!(bucket_name(SPAN), "00000000000060000000");
    for first in [0, SPAN, 29_453_760 * SPAN, bucket_of(u64::MAX)] {
        assert_eq!(parse_bucket(&bucket_name(first)), Some(first));
    }
    for bad in [
        "00000000000060000001", // not the start of a minute
        "0000000000060000000",  // 19 digits
        "000000000000060000000",
        "0000000000006000000x",
        "+0000000000060000000",
        "",
    ] {
        assert_eq!(parse_bucket(bad), None, "{bad}");
    }
    let name = planted(7);
    let entry = delayed_name(SPAN + 3, &name);
    assert_eq!(entry, format!("00000000000060000003.{name}"));
    let (due, parsed) = parse_delayed(&entry).unwrap();
    assert_eq!((due, parsed.render()), (SPAN + 3, name.clone()));
    for bad in [
        format!("6000000.{name}"),
        format!("0000000000006000000x.{name}"),
        "00000000000060000003.junk".to_string(),
        bucket_name(SPAN),
    ] {
        assert!(parse_delayed(&bad).is_none(), "{bad}");
    }
}

/// A post with a delay, a failed job's backoff and a keyed post each wait in the bucket of the
/// minute they come due in, as `DUE.NAME`; a keyed one keeps its key while it waits.
#[test]
fn a_delayed_message_waits_in_the_bucket_of_its_minute() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path).backoff(2 * HOUR);
    let before = procinfo::now_micros();
    let name = post_later(&b, HOUR, "later");
    let after = procinfo::now_micros();
    let [(bucket, entry)] = &held(&path)[..] else {
        panic!("{:?}", held(&path));
    };
    let (due, parsed) = parse_delayed(entry).unwrap();
    assert_eq!(parsed.render(), name);
    assert!((before + 3_600_000_000..=after + 3_600_000_000).contains(&due));
    assert_eq!(bucket, &bucket_name(bucket_of(due)));

    let _ = b.post(&mut &b"now"[..]).unwrap();
    let job = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    let failed_at = procinfo::now_micros();
    assert_eq!(job.fail().unwrap(), Failed::Delayed);
    let backed_off: Vec<_> = held(&path)
        .into_iter()
        .filter(|(_, e)| e.ends_with(".msg+1"))
        .collect();
    let [(bucket, entry)] = &backed_off[..] else {
        panic!("{:?}", held(&path));
    };
    let (due, _) = parse_delayed(entry).unwrap();
    assert!(due >= failed_at + 7_200_000_000);
    assert_eq!(bucket, &bucket_name(bucket_of(due)));

    let keyed = |data: &str| {
        (b.clone().delay(HOUR))
            .post_keyed(&mut data.as_bytes(), "nightly")
            .unwrap()
    };
    assert!(matches!(keyed("one"), Keyed::Queued(_)));
    assert!(
        matches!(keyed("two"), Keyed::Pending(_)),
        "a delayed message in its bucket holds its key"
    );
}

/// `scan` hands on the delayed messages soonest first, across buckets and among the entries
/// of the layout before buckets.
#[test]
fn scan_lists_delayed_messages_soonest_first_across_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    let mut posted = Vec::new();
    for (delay, data) in [
        (3 * HOUR, "3h"),
        (HOUR, "1h"),
        (2 * HOUR + Duration::from_secs(90), "2h1m30s"),
        (HOUR + Duration::from_millis(1), "1h+1ms"),
        (2 * HOUR, "2h"),
    ] {
        posted.push((delay, post_later(&b, delay, data)));
    }
    // Of the layout before buckets: one due among them, one after them all.
    let now = procinfo::now_micros();
    for (later, seq) in [(HOUR + Duration::from_secs(30), 100), (5 * HOUR, 101)] {
        let due = now + u64::try_from(later.as_micros()).unwrap();
        let entry = delayed_name(due, &planted(seq));
        std::fs::write(path.join("delayed").join(entry), b"old").unwrap();
        posted.push((later, planted(seq)));
    }
    posted.sort();
    let mut want: Vec<String> = posted.into_iter().map(|(_, name)| name).collect();
    // Due the same microsecond, the first of a bucket and one of the layout before buckets:
    // by name, after the bucket before. (Mutant answered: the one before buckets listed with
    // the bucket before.)
    let minute = bucket_of(now) + 4 * 60 * SPAN; // between the last two
    for (first, due, seq) in [(minute - SPAN, minute - 1, 104), (minute, minute, 102)] {
        let bucket = path.join("delayed").join(bucket_name(first));
        std::fs::create_dir(&bucket).unwrap();
        std::fs::write(bucket.join(delayed_name(due, &planted(seq))), b"b").unwrap();
    }
    let flat = path
        .join("delayed")
        .join(delayed_name(minute, &planted(103)));
    std::fs::write(flat, b"old").unwrap();
    let last = want.pop().unwrap(); // the one due in 5 hours
    want.extend([planted(104), planted(102), planted(103), last]);
    let mut got = Vec::new();
    let mut dues = Vec::new();
    b.scan(|e| {
        if let Entry::Delayed { message, due } = e {
            got.push(message.name);
            dues.push(due);
        }
    })
    .unwrap();
    assert_eq!(got, want);
    assert!(dues.is_sorted());
}

/// A receive opens the buckets whose minute has begun, never one that has not: a message due
/// already, put in a bucket of a later minute, waits for that minute. A bucket it empties goes.
#[test]
fn a_receive_opens_only_the_buckets_whose_minute_has_begun() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    assert!(next_text(&b).is_none()); // made
    let now = procinfo::now_micros();
    let plant = |bucket: u64, seq: u64, data: &str| {
        let dir = path.join("delayed").join(bucket_name(bucket));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(delayed_name(now - 1, &planted(seq))), data).unwrap();
    };
    plant(bucket_of(now) - SPAN, 1, "last minute's");
    plant(bucket_of(now) + 60 * SPAN, 2, "in an hour's bucket");
    std::fs::write(path.join("seq"), "2\n").unwrap();
    assert_eq!(next_text(&b).as_deref(), Some("last minute's"));
    assert_eq!(next_text(&b), None, "an hour's bucket was opened");
    assert_eq!(
        listing(&path.join("delayed")),
        [bucket_name(bucket_of(now) + 60 * SPAN)],
        "the emptied bucket went, the later one stays"
    );
}

/// The layout before buckets (`delayed/DUE.NAME`): a receive moves what is due to the queue
/// and the rest into its bucket; entries fsync never makes stay where they are.
#[test]
fn delayed_messages_of_the_layout_before_buckets_are_promoted_or_moved_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    assert!(next_text(&b).is_none()); // made
    let delayed = path.join("delayed");
    let now = procinfo::now_micros();
    let later = now + 3_600_000_000;
    let old = |due: u64, seq: u64| delayed_name(due, &planted(seq));
    std::fs::write(delayed.join(old(now - 1, 1)), "due").unwrap();
    std::fs::write(delayed.join(old(later, 2)), "later").unwrap();
    std::fs::write(path.join("victim"), "not a message").unwrap();
    symlink(path.join("victim"), delayed.join(old(now - 1, 3))).unwrap();
    symlink(path.join("victim"), delayed.join(old(later, 4))).unwrap();
    nix::unistd::mkfifo(&delayed.join(old(later, 5)), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(path.join("seq"), "5\n").unwrap();

    assert_eq!(next_text(&b).as_deref(), Some("due"));
    assert_eq!(
        held(&path),
        [(bucket_name(bucket_of(later)), old(later, 2))],
        "the one due later is in its bucket"
    );
    let mut left = listing(&delayed);
    left.retain(|e| parse_bucket(e).is_none());
    let mut want = vec![old(now - 1, 3), old(later, 4), old(later, 5)];
    want.sort();
    assert_eq!(left, want, "what fsync never makes stays");
    assert_eq!(next_text(&b), None);
    assert_eq!(
        std::fs::read_to_string(path.join("victim")).unwrap(),
        "not a message"
    );
}

/// A receiver waiting for a message due late in the current minute sleeps until then, and a
/// message held back meanwhile in that same bucket, due sooner, wakes it at its own due time:
/// the receiver watches the buckets whose minute has begun.
#[test]
fn a_post_into_a_begun_bucket_wakes_a_receiver_waiting_for_a_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("b"));
    // Both messages must come due in this minute: at least 10 s of it left.
    let into_minute = procinfo::now_micros() % SPAN;
    if into_minute > SPAN - 10_000_000 {
        std::thread::sleep(Duration::from_micros(SPAN - into_minute));
    }
    let now = procinfo::now_micros();
    let late = Duration::from_micros(bucket_of(now) + SPAN - 2_000_000 - now);
    let _ = post_later(&b, late, "late");
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let b = b.clone();
        std::thread::spawn(move || {
            let waiting = move |_| {
                let _ = tx.send(());
            };
            let got = b.recv_with(Some(Duration::from_secs(30)), waiting).unwrap();
            got.acquired().map(text)
        })
    };
    rx.recv().unwrap(); // it looked, found the late one, and sleeps
    let soon = Duration::from_millis(300);
    let posted = Instant::now();
    let _ = post_later(&b, soon, "soon");
    assert_eq!(held(b.path()).len(), 2, "both in one bucket");
    assert_eq!(waiter.join().unwrap().as_deref(), Some("soon"));
    let waited = posted.elapsed();
    assert!(
        waited >= soon,
        "delivered after {waited:?}, before it was due"
    );
    assert!(
        waited < late.saturating_sub(Duration::from_secs(1)),
        "woken only when the late one came due ({waited:?})"
    );
}

/// A bucket emptied by a receive stays while its minute lasts (a job held back now goes into
/// it: removing it under that job's receiver, woken by its `mkdir`, made the receiver's tries
/// run out under load), and goes at a receive after; a bucket of a later minute that holds no
/// message (its poster died before the rename) keeps nobody waiting for an empty mailbox.
#[test]
fn an_emptied_bucket_goes_and_an_empty_one_is_not_work_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    let _ = post_later(&b, Duration::from_millis(100), "soon");
    let its = held(&path);
    assert_eq!(its.len(), 1);
    let got = b.recv(Some(Duration::from_secs(20))).unwrap().map(text);
    assert_eq!(got.as_deref(), Some("soon"));
    let delayed = path.join("delayed");
    let now = bucket_of(procinfo::now_micros());
    if its[0].0 == bucket_name(now) {
        // (Unless the minute turned meanwhile: then the receive may have removed it.)
        assert_eq!(listing(&delayed), [its[0].0.clone()], "its minute lasts");
    }
    for left in listing(&delayed) {
        assert!(
            left >= bucket_name(now),
            "{left}: its minute ended, yet it stays"
        );
        assert_eq!(listing(&delayed.join(&left)), Vec::<String>::new());
    }
    // One whose minute has ended goes at the next receive.
    let ended = bucket_name(now - SPAN);
    std::fs::create_dir(delayed.join(&ended)).unwrap();
    assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
    assert!(!listing(&delayed).contains(&ended));

    let future = bucket_of(procinfo::now_micros()) + 60 * SPAN;
    std::fs::create_dir(path.join("delayed").join(bucket_name(future))).unwrap();
    assert!(
        b.wait_empty(Some(Duration::ZERO)).unwrap(),
        "an empty bucket"
    );
    let _ = post_later(&b, HOUR, "later");
    assert!(!b.wait_empty(Some(Duration::ZERO)).unwrap(), "one delayed");
}

/// What counts as a delayed message (work left for `wait_empty`, a pending key) is an entry
/// named as one, not a directory: in a bucket, or of the layout before buckets. (Mutants
/// answered: any entry of `delayed` counted, or none of the layout before buckets.)
#[test]
fn only_a_delayed_message_is_work_left_or_a_pending_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none(), "made");
    assert!(b.wait_empty(Some(Duration::ZERO)).unwrap());
    let delayed = path.join("delayed");
    let later = procinfo::now_micros() + 3_600_000_000;
    // An empty bucket of a later minute makes the look go through the entries.
    std::fs::create_dir(delayed.join(bucket_name(bucket_of(later)))).unwrap();
    std::fs::write(delayed.join("junk"), b"").unwrap();
    std::fs::create_dir(delayed.join(delayed_name(later, &planted(1)))).unwrap();
    assert!(b.wait_empty(Some(Duration::ZERO)).unwrap(), "no message");
    // A key naming a message that waits as the layout before buckets kept it.
    std::fs::write(delayed.join(delayed_name(later, &planted(2))), b"old").unwrap();
    std::fs::create_dir(path.join("keys")).unwrap();
    std::fs::write(
        path.join("keys/nightly"),
        format!("{:020}.test-1-{:016x}\n", 2, 2),
    )
    .unwrap();
    std::fs::write(path.join("seq"), "2\n").unwrap();
    let posted = b.post_keyed(&mut &b"again"[..], "nightly").unwrap();
    assert!(
        matches!(posted, Keyed::Pending(_)),
        "the key of a message waiting in delayed/ itself"
    );
}

/// Delayed messages take sequence numbers that no shard sees before their delay ends: once the
/// head's shard is drained, the head passes every shard without a message at once, to the
/// next that has one. (Before, it moved one shard a receive, each receive looking through all
/// the missing shards after it.)
#[test]
fn the_head_passes_the_numbers_of_delayed_messages_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    let _ = b.post(&mut &b"first"[..]).unwrap(); // 1, in shard 0
    let later = b.clone().delay(HOUR);
    for _ in 0..250 {
        let _ = later.post(&mut &b"later"[..]).unwrap(); // 2 to 251
    }
    let _ = b.post(&mut &b"second"[..]).unwrap(); // 252, in shard 200
    assert_eq!(next_text(&b).as_deref(), Some("first"));
    assert_eq!(next_text(&b).as_deref(), Some("second"));
    assert_eq!(
        std::fs::read_to_string(path.join("head")).unwrap(),
        format!("{}\n", shard_name(200))
    );
    assert_eq!(listing(&path.join("q")), [shard_name(200)]);
}

/// The head moves on only from where it is (another receiver may have moved it, or a returned
/// message lowered it), and never past the shard posts go to, even one not made yet. (Mutants
/// answered: the head moved from a shard it had left; moved past the shard posts go to;
/// stopped a shard short of it.)
#[test]
fn the_head_moves_from_where_it_is_up_to_the_shard_posts_go_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    let _ = b.post(&mut &b"first"[..]).unwrap(); // 1, in shard 0
    let l = b.layout().unwrap();
    let head = || std::fs::read_to_string(path.join("head")).unwrap();
    std::fs::write(path.join("head"), format!("{}\n", shard_name(0))).unwrap();
    std::fs::write(path.join("seq"), "299\n").unwrap(); // posts go to shard 300 now
    l.advance(100, DEFAULT_POLL).unwrap();
    assert_eq!(
        head(),
        format!("{}\n", shard_name(0)),
        "moved from a shard it had left"
    );
    assert_eq!(next_text(&b).as_deref(), Some("first"));
    l.advance(0, DEFAULT_POLL).unwrap();
    assert_eq!(head(), format!("{}\n", shard_name(300)));
    assert_eq!(listing(&path.join("q")), Vec::<String>::new());
}

/// A watch is armed for one shard posts go to and one set of buckets begun: a look that finds
/// either changed watches anew before it sleeps. (Mutant answered: armed when either matched.)
#[test]
fn a_watch_is_armed_for_one_shard_and_one_set_of_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    assert!(next_text(&b).is_none()); // made
    let l = b.layout().unwrap();
    let begun = bucket_of(procinfo::now_micros());
    std::fs::create_dir(path.join("delayed").join(bucket_name(begun))).unwrap();
    use crate::msg::queue::{Waker, Watched};
    let watched = |shard, begun: &[u64], closes| Watched {
        shard,
        levels: Vec::new(),
        begun: begun.to_vec(),
        closes,
    };
    let mut waker = Waker::default();
    assert_eq!(waker.armed_for(), None);
    waker.arm(&l, watched(0, &[begun], false)).unwrap();
    assert_eq!(waker.armed_for(), Some(watched(0, &[begun], false)));
    for other in [
        watched(0, &[], false),
        watched(SHARD, &[begun], false),
        watched(0, &[begun], true),
    ] {
        assert_ne!(waker.armed_for(), Some(other), "what it watches changed");
    }
    // Armed anew for registrations' closes too (an inotify watch).
    waker.arm(&l, watched(0, &[begun], true)).unwrap();
    assert_eq!(waker.armed_for(), Some(watched(0, &[begun], true)));
}
