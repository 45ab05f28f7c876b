//! Unit tests of [`super`]: the output file's first line, reading kept output back,
//! following it, and pruning it.

use super::*;

#[test]
fn the_first_line_reads_back_and_nothing_else_passes_for_it() {
    let line = header(3, 1_048_576);
    assert_eq!(
        parse_header(format!("{line}job output").as_bytes()),
        Some((3, 1_048_576, line.len() as u64))
    );
    assert!(header(u32::MAX, u64::MAX).len() <= MAX_HEADER);
    for bad in [
        "",
        "fsync-output 1 0",
        "fsync-output 1\n",
        "fsync-output 1 0 2\n",
        "fsync-output x 0\n",
        "fsync-output 1 +0\n",
        "fsync-output 1 -1\n",
        "fsync-outputs 1 0\n",
        "hello\n",
    ] {
        assert_eq!(parse_header(bad.as_bytes()), None, "{bad:?}");
    }
}

/// A first line not all there yet (a rename seen before the bytes, on a network file
/// system) is nothing to show yet; anything else that is not one is refused.
#[test]
fn a_first_line_still_being_written_is_nothing_yet_not_a_stranger() {
    for yet in [
        "",
        "f",
        "fsync-out",
        "fsync-output ",
        "fsync-output 1",
        "fsync-output 1 0",
    ] {
        assert!(unfinished_header(yet.as_bytes()), "{yet:?}");
    }
    let long = format!("fsync-output {}", "1".repeat(MAX_HEADER));
    let full = format!("fsync-output {}", "1".repeat(MAX_HEADER - 13)); // as read
    for not in [
        "x",
        "fsync-outputs",
        "fsync-output x",
        "hello\n",
        long.as_str(),
        full.as_str(),
    ] {
        assert!(!unfinished_header(not.as_bytes()), "{not:?}");
    }
    let t = tempfile::tempdir().unwrap();
    let b = Mailbox::new(t.path().join("B"));
    b.post(&mut &b"job"[..]).unwrap();
    let shard = t.path().join("B/output/00000000000000000000");
    std::fs::create_dir_all(&shard).unwrap();
    for (content, kept) in [("fsync-out", Ok(false)), ("fsync-output 1 0\nhi", Ok(true))] {
        std::fs::write(shard.join(file_name(1)), content).unwrap();
        assert_eq!(b.output(1).map(|o| o.is_some()).map_err(|e| e.kind()), kept);
    }
    std::fs::write(shard.join(file_name(1)), "hello\n").unwrap();
    assert_eq!(b.output(1).unwrap_err().kind(), ErrorKind::Corrupt);
}

/// The output kept is the latest attempt's, and past the limit says how much of its
/// beginning was left out. (Mutants answered: the attempt and what was left out
/// constants.)
#[test]
fn output_kept_says_which_attempt_wrote_it_and_what_was_left_out() {
    let t = tempfile::tempdir().unwrap();
    let b = Mailbox::new(t.path().join("B")).job_output(JobOutput::Keep { limit: 8 });
    b.post(&mut &b"x"[..]).unwrap();
    for attempt in [1, 2] {
        let mut msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        let script = format!("printf 'attempt {attempt}: 0123456789'");
        let job = msg.spawn_job(&["sh", "-c", &script], &[] as &[(&str, &str)]);
        assert!(job.unwrap().wait().unwrap().success());
        let _ = msg.fail().unwrap();
    }
    let mut kept = b.output(1).unwrap().expect("kept");
    let mut text = String::new();
    kept.read_to_string(&mut text).unwrap();
    assert_eq!((text.as_str(), kept.attempt()), ("6789", 2));
    assert_eq!(kept.left_out(), "attempt 2: 0123456789".len() as u64 - 4);
}

/// What a follower was handed, its bytes as text.
#[derive(Debug, PartialEq)]
enum Got {
    Bytes(String),
    LeftOut(u64),
    Attempt(u32),
}

impl From<Piece<'_>> for Got {
    fn from(p: Piece<'_>) -> Got {
        match p {
            Piece::Bytes(b) => Got::Bytes(String::from_utf8_lossy(b).into_owned()),
            Piece::LeftOut(n) => Got::LeftOut(n),
            Piece::Attempt(a) => Got::Attempt(a),
        }
    }
}

/// Put `text` in place as message 1's kept output (written aside, then renamed over, as
/// the pump does).
fn put_output(b: &std::path::Path, text: &str) {
    let shard = b.join("output").join(shard_name(0));
    std::fs::create_dir_all(&shard).unwrap();
    std::fs::write(shard.join(".new"), text).unwrap();
    std::fs::rename(shard.join(".new"), shard.join(file_name(1))).unwrap();
}

/// A follower hands on the output as it is replaced: a new attempt's (announced), what
/// its limit left out, its bytes; it stops at whichever piece it is told to. (Mutants
/// answered: a replaced file taken for the same or the same for a replaced one, a new
/// attempt not announced, a stop not heeded, what was left out not said.)
#[test]
fn a_follower_hands_on_each_attempts_output_and_stops_when_told() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("B");
    let b = Mailbox::new(&path);
    b.post(&mut &b"x"[..]).unwrap();
    let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    let want = [
        Got::Bytes("first".into()),
        Got::Attempt(2),
        Got::LeftOut(5),
        Got::Bytes("second".into()),
    ];
    for stop in 1..want.len() {
        put_output(&path, "fsync-output 1 0\nfirst");
        let mut got = Vec::new();
        let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
            let p = Got::from(p);
            if p == Got::Bytes("first".into()) {
                put_output(&path, "fsync-output 2 5\nsecond");
            }
            let go_on = p != want[stop];
            got.push(p);
            go_on
        });
        assert!(
            matches!(followed, Ok(Outcome::Acquired(()))),
            "{followed:?}"
        );
        assert_eq!(got, want[..=stop], "told to stop at {:?}", want[stop]);
    }
    let e = b
        .follow_output(9, Some(Duration::ZERO), |_| true)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // Known, queued, nothing written yet: followed until the timeout.
    b.post(&mut &b"y"[..]).unwrap();
    let queued = b.follow_output(2, Some(Duration::ZERO), |_| true);
    assert!(matches!(queued, Ok(Outcome::TimedOut)), "{queued:?}");
}

/// The same attempt's output compacted past the limit (a new file, its tail, `FROM` past
/// what was handed on): the follower says how much it missed, then goes on. (Mutant
/// answered: what was missed counted from the start.)
#[test]
fn a_follower_says_what_a_compaction_left_out() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("B");
    let b = Mailbox::new(&path);
    b.post(&mut &b"x"[..]).unwrap();
    let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    put_output(&path, "fsync-output 1 0\nfirst");
    let mut got = Vec::new();
    let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
        let p = Got::from(p);
        if p == Got::Bytes("first".into()) {
            put_output(&path, "fsync-output 1 8\nxyz");
        }
        let go_on = p != Got::Bytes("xyz".into());
        got.push(p);
        go_on
    });
    assert!(
        matches!(followed, Ok(Outcome::Acquired(()))),
        "{followed:?}"
    );
    let want = [
        Got::Bytes("first".into()),
        Got::LeftOut(3),
        Got::Bytes("xyz".into()),
    ];
    assert_eq!(got, want);
}

/// Run `then` on a thread once this thread has set `drained` and sleeps (after five seconds
/// at the latest, so that a thread that never sleeps fails its test instead of hanging it).
fn once_asleep(
    drained: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    then: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let tid = nix::unistd::gettid().as_raw();
    let drained = drained.clone();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let asleep = || {
            drained.load(std::sync::atomic::Ordering::SeqCst) && crate::test_support::sleeping(tid)
        };
        while !asleep() && start.elapsed().as_secs() < 5 {
            std::thread::yield_now();
        }
        then();
    })
}

/// A follower that has handed on the output there is and sleeps switches to the file
/// a new attempt puts in its place, and stops when told at the new attempt's start.
/// (Mutants answered: a replaced file taken for the same and the same for a replaced one,
/// so that the follower stays on the old; a stop at the attempt not heeded.)
#[test]
fn a_sleeping_follower_moves_to_a_new_attempts_file() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("B");
    let b = Mailbox::new(&path);
    b.post(&mut &b"x"[..]).unwrap();
    let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    put_output(&path, "fsync-output 1 0\nfirst");
    let drained = std::sync::Arc::new(AtomicBool::new(false));
    let writer = {
        let path = path.clone();
        once_asleep(&drained, move || {
            put_output(&path, "fsync-output 2 0\nsecond");
        })
    };
    let mut got = Vec::new();
    let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
        drained.store(true, Ordering::SeqCst);
        let p = Got::from(p);
        let go_on = p != Got::Attempt(2);
        got.push(p);
        go_on
    });
    writer.join().unwrap();
    assert!(
        matches!(followed, Ok(Outcome::Acquired(()))),
        "{followed:?}"
    );
    assert_eq!(got, [Got::Bytes("first".into()), Got::Attempt(2)]);
}

/// A read of a file into a buffer fills it in one call where the file holds enough, and
/// stops at the file's end. (Mutant answered: a read of nothing more after the buffer is
/// full.)
#[test]
fn a_read_fills_the_buffer_in_one_call_and_stops_at_the_end() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f"), "0123456789").unwrap();
    let file = File::open(t.path().join("f")).unwrap();
    let mut buf = [0u8; 4];
    let (calls, n) = crate::test_support::thread_count("io", "syscr:", || {
        read_at_most(&file, &mut buf, 2).unwrap()
    });
    assert_eq!((n, &buf, calls), (4, b"2345", 1));
    let mut buf = [0u8; 8];
    assert_eq!(read_at_most(&file, &mut buf, 6).unwrap(), 4);
    assert_eq!(&buf[..4], b"6789");
}

/// Pruning a shard of output removes its files and the shard; a shard that cannot be
/// removed (something not a file left in it) is an error. (Mutants answered: every
/// failure of the removal taken for a shard gone already.)
#[test]
fn pruning_a_shard_with_a_directory_in_it_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("B");
    let b = Mailbox::new(&path);
    b.post(&mut &b"x"[..]).unwrap();
    put_output(&path, "fsync-output 1 0\nout");
    let shard = path.join("output").join(shard_name(0));
    std::fs::create_dir(shard.join("left")).unwrap();
    let e = b.prune_output(0).unwrap_err();
    assert!(e.to_string().contains("cannot remove"), "{e}");
    assert_eq!(crate::test_support::listing(&shard), ["left"]);
}

/// A job is pending while its message is queued or claimed, and only its own claim
/// counts. (Mutants answered: the names' prefix empty or a stranger's, the answer a
/// constant.)
#[test]
fn a_job_is_pending_while_queued_or_claimed() {
    let t = tempfile::tempdir().unwrap();
    let b = Mailbox::new(t.path().join("B"));
    for data in [&b"one"[..], b"two"] {
        b.post(&mut &data[..]).unwrap();
    }
    let l = b.layout().unwrap();
    let pending = |id| l.pending(id).unwrap();
    assert!(pending(1) && pending(2));
    let one = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert!(pending(1), "claimed");
    one.finish().unwrap();
    let _two = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert!(!pending(1), "finished, while 2 is claimed");
    assert!(pending(2));
}

/// A follower of a running job, once it has handed on what there is, sleeps (it reads
/// nothing) until the job's claim goes, and ends then, though another job is being
/// received. (Mutants answered: the watch never armed, so that it spins; the job taken
/// for running when any is, or always.)
#[test]
fn a_follower_sleeps_while_the_job_runs_and_ends_with_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("B");
    let b = Mailbox::new(&path);
    for data in [&b"one"[..], b"two"] {
        b.post(&mut &data[..]).unwrap();
    }
    let running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    let _other = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    put_output(&path, "fsync-output 1 0\nout");
    let finished = std::sync::Arc::new(AtomicBool::new(false));
    let drained = std::sync::Arc::new(AtomicBool::new(false));
    let ender = {
        let finished = finished.clone();
        once_asleep(&drained, move || {
            finished.store(true, Ordering::SeqCst);
            running.finish().unwrap();
        })
    };
    let (reads, followed) = crate::test_support::thread_count("io", "syscr:", || {
        b.follow_output(1, Some(Duration::from_secs(20)), |_| {
            drained.store(true, Ordering::SeqCst);
            true
        })
    });
    ender.join().unwrap();
    assert!(
        matches!(followed, Ok(Outcome::Acquired(()))),
        "{followed:?}"
    );
    assert!(
        finished.load(Ordering::SeqCst),
        "it ended while the job ran"
    );
    assert!(reads < 200, "{reads} reads while it waited");
}

/// A job's output kept, read back, and pruned with its shard; other shards stay.
#[test]
fn output_is_kept_read_and_pruned_by_shard() {
    let t = tempfile::tempdir().unwrap();
    let b = Mailbox::new(t.path().join("B")).job_output(JobOutput::Keep { limit: 1024 });
    for data in [&b"one"[..], b"two"] {
        b.post(&mut &data[..]).unwrap();
    }
    let mut msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    let job = msg.spawn_job(
        &["sh", "-c", "cat; echo; echo err >&2"],
        &[] as &[(&str, &str)],
    );
    assert!(job.unwrap().wait().unwrap().success());
    msg.finish().unwrap();
    let mut text = String::new();
    let mut kept = b.output(1).unwrap().expect("kept");
    kept.read_to_string(&mut text).unwrap();
    assert_eq!(
        (text.as_str(), kept.attempt(), kept.left_out()),
        ("one\nerr\n", 1, 0)
    );
    assert!(b.output(2).unwrap().is_none(), "queued, nothing kept yet");
    let e = b.output(3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let other = t.path().join("B/output/00000000000000000100");
    std::fs::create_dir(&other).unwrap();
    b.prune_output(0).unwrap();
    assert!(!t.path().join("B/output/00000000000000000000").exists());
    assert!(other.exists());
    b.prune_output(0).unwrap(); // gone already: nothing to do
}

/// Two pruners of one shard at once both succeed: the one that finds the shard gone by the
/// time it removes it (the other removed it since it looked) has nothing left to do. The
/// race is run many times, the pruners let go together. (Mutant answered: that removal's
/// failure reported.)
#[test]
fn two_pruners_of_one_shard_at_once_both_succeed() {
    use std::sync::{Arc, Barrier};
    let t = tempfile::tempdir().unwrap();
    let b = Mailbox::new(t.path().join("B"));
    crate::msg::tests::post_texts(&b, 0..1);
    let shard = t.path().join("B/output").join(shard_name(0));
    let go = Arc::new(Barrier::new(3));
    let pruners: Vec<_> = (0..2)
        .map(|_| {
            let (b, go) = (b.clone(), go.clone());
            std::thread::spawn(move || {
                (0..300)
                    .map(|_| {
                        go.wait();
                        let pruned = b.prune_output(0).map_err(|e| e.to_string());
                        go.wait();
                        pruned
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for _ in 0..300 {
        std::fs::create_dir_all(&shard).unwrap();
        for n in 1..64 {
            std::fs::write(shard.join(file_name(n)), "").unwrap();
        }
        go.wait();
        go.wait();
        assert!(!shard.exists());
    }
    for pruner in pruners {
        let failed: Vec<_> = pruner
            .join()
            .unwrap()
            .into_iter()
            .filter_map(Result::err)
            .collect();
        assert_eq!(failed, Vec::<String>::new());
    }
}
