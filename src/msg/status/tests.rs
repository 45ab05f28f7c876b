//! Unit tests of [`super`]: what status says of a job, and the records it reads.

use super::*;

fn cancelled(b: &Mailbox, id: u64) -> bool {
    matches!(b.status(id).unwrap(), Status::Finished(f) if f.how == Finish::Cancelled)
}

/// A job has finished once it succeeded, was cancelled or is dead, or is unknown; not
/// while queued or running. (Mutants answered: the answer a constant.)
#[test]
fn a_job_is_finished_once_done_cancelled_or_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    let finished = |id| b.status(id).unwrap().is_finished();
    for data in [&b"1"[..], b"2"] {
        b.post(&mut &data[..]).unwrap();
    }
    assert!(!finished(1), "queued");
    let one = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert!(!finished(1), "running");
    one.finish().unwrap();
    assert!(finished(1), "done");
    assert_eq!(b.cancel(2).unwrap(), Cancel::Removed);
    assert!(finished(2), "cancelled");
    assert!(finished(3), "unknown");
}

/// A cancellation is recorded even where records of finished jobs are not kept, for a
/// minute at least: whoever cancelled it is told. (Mutant answered: kept as long as the
/// others, here not at all.)
#[test]
fn a_cancellation_is_recorded_where_no_record_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B")).keep(Duration::ZERO);
    b.post(&mut &b"1"[..]).unwrap();
    assert_eq!(b.cancel(1).unwrap(), Cancel::Removed);
    assert!(cancelled(&b, 1));
}

/// A mailbox `B` where job 1 succeeded and job 2 is queued with a record of its own already:
/// a copy of job 1's, as a delivery a crash undid after its record was made leaves one.
fn job_2_with_job_1s_record() -> (tempfile::TempDir, std::path::PathBuf, Mailbox) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("B");
    let b = Mailbox::new(&path);
    for data in [&b"1"[..], b"2"] {
        b.post(&mut &data[..]).unwrap();
    }
    b.recv(Some(Duration::ZERO))
        .unwrap()
        .unwrap()
        .finish()
        .unwrap();
    let done = path.join("done").join(crate::msg::shard_name(0));
    std::fs::copy(done.join(record_name(1)), done.join(record_name(2))).unwrap();
    (dir, path, b)
}

/// A record left by a delivery a crash undid (the job then queued again) is replaced by
/// the job's next end, here its cancellation. (Mutant answered: the record there taken for
/// a failure to record.)
#[test]
fn a_record_from_a_delivery_undone_is_replaced() {
    let (_dir, _, b) = job_2_with_job_1s_record();
    assert_eq!(b.cancel(2).unwrap(), Cancel::Removed);
    assert!(cancelled(&b, 2));
}

/// A lost delivery taken again forgets the record an earlier delivery left (a crash
/// undid it after the record was made): when that delivery fails for good, the job is
/// dead, not finished. (Mutant answered: the record left, which status reads first.)
#[test]
fn a_lost_delivery_taken_again_forgets_an_earlier_record() {
    let (_dir, path, b) = job_2_with_job_1s_record();
    let shard = path.join("q").join(crate::msg::shard_name(0));
    let queued = crate::test_support::listing(&shard).pop().unwrap();
    let lost = MessageName::parse(&queued)
        .unwrap()
        .one_more_lost()
        .render();
    std::fs::rename(shard.join(&queued), shard.join(lost)).unwrap();
    let running = b
        .clone()
        .retries(0)
        .recv(Some(Duration::ZERO))
        .unwrap()
        .unwrap();
    let _ = running.fail().unwrap();
    let status = b.status(2).unwrap();
    assert!(matches!(status, Status::Dead { .. }), "{status:?}");
}

/// A `seq` that is no file fsync made (here a directory) makes a status an error, not a
/// look without the lock as for a reader who may not open it. (Mutant answered: every
/// error of its opening taken for that.)
#[test]
fn a_status_where_seq_is_no_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("B");
    let b = Mailbox::new(&path);
    b.post(&mut &b"1"[..]).unwrap();
    std::fs::remove_file(path.join("seq")).unwrap();
    std::fs::create_dir(path.join("seq")).unwrap();
    let e = b.status(1).unwrap_err();
    assert!(e.to_string().contains("seq"), "{e}");
}

/// A running job asked to stop: its worker sees the request and records it cancelled; one
/// that goes back to the queue before its worker saw it is recorded cancelled by the next
/// receiver, never delivered; the request goes with the record.
#[test]
fn a_job_asked_to_stop_is_cancelled_by_its_worker_or_the_next_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    let post = |data: &[u8]| b.post(&mut &data[..]).unwrap();
    let (one, two) = (post(b"1"), post(b"2"));
    assert_eq!((one, two), (1, 2));
    let got = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert!(!got.cancel_requested());
    assert_eq!(b.cancel(one).unwrap(), Cancel::Requested);
    assert!(got.cancel_requested());
    got.cancelled().unwrap();
    assert!(cancelled(&b, one));
    assert!(!dir.path().join("B/cancel/00000000000000000001").exists());

    let got = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert_eq!(got.id(), two);
    assert_eq!(b.cancel(two).unwrap(), Cancel::Requested);
    drop(got); // back to the queue, the request unseen
    assert!(matches!(b.status(two).unwrap(), Status::Queued { .. }));
    assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
    assert!(cancelled(&b, two));
    assert!(!dir.path().join("B/cancel/00000000000000000002").exists());
    assert_eq!(b.cancel(two).unwrap(), Cancel::Finished);
    assert_eq!(b.cancel(3).unwrap(), Cancel::Unknown);

    // A job that succeeds while asked to stop: a success, the request gone with it.
    let three = post(b"3");
    let got = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert_eq!(b.cancel(three).unwrap(), Cancel::Requested);
    got.finish().unwrap();
    assert!(matches!(b.status(three).unwrap(), Status::Finished(f) if f.how == Finish::Succeeded));
    assert!(!dir.path().join("B/cancel/00000000000000000003").exists());
}

#[test]
fn a_record_reads_back_as_written_and_anything_else_is_passed_over() {
    let f = Finished {
        how: Finish::Cancelled,
        attempt: 2,
        host: "box-1".into(),
        pid: 42,
        started: time(1_000_000),
        ended: time(3_500_000),
    };
    assert_eq!(f.render(), "cancelled 2 box-1 42 1000000 3500000\n");
    assert_eq!(Finished::parse(&f.render()), Some(f.clone()));
    let ok = Finished {
        how: Finish::Succeeded,
        ..f
    };
    assert_eq!(Finished::parse(&ok.render()), Some(ok));
    for bad in [
        "",
        "exit:1 1 h 1 1 1\n",
        "exit:0 1 h 1 1\n",
        "exit:0 1 h 1 1 1 1\n",
        "exit:0 x h 1 1 1\n",
        "exit:0 1 h\u{1b} 1 1 1\n",
        "exit:0 1  1 1 1\n",
    ] {
        assert_eq!(Finished::parse(bad), None, "{bad:?}");
    }
}

/// A delayed job's status is its own, among other delayed ones. (Mutant answered: another's
/// taken for it.)
#[test]
fn a_delayed_jobs_status_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    let later = |hours: u64| SystemTime::now() + Duration::from_hours(hours);
    for hours in [1, 2] {
        let posted = b
            .clone()
            .delay(Duration::from_hours(hours))
            .post(&mut &b"x"[..]);
        assert_eq!(posted.unwrap(), hours);
    }
    let Status::Delayed { until, .. } = b.status(2).unwrap() else {
        panic!("not delayed");
    };
    assert!(until > later(1) && until <= later(2), "{until:?}");
}

/// A running job asked to stop twice: the second request finds the first, which stands.
/// (Mutant answered: the request there taken for a failure.)
#[test]
fn a_running_job_asked_to_stop_twice_is_asked_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    b.post(&mut &b"x"[..]).unwrap();
    let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    assert_eq!(b.cancel(1).unwrap(), Cancel::Requested);
    assert_eq!(b.cancel(1).unwrap(), Cancel::Requested);
}

/// Cancelling the later of two delayed jobs takes that one, though the other is found
/// first, and leaves the other delayed. (Mutants answered: the first found taken whatever
/// its id.)
#[test]
fn cancelling_a_delayed_job_takes_that_one() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    for hours in [1, 2] {
        let _ = b
            .clone()
            .delay(Duration::from_hours(hours))
            .post(&mut &b"x"[..]);
    }
    assert_eq!(b.cancel(2).unwrap(), Cancel::Removed);
    assert!(cancelled(&b, 2));
    let status = b.status(1).unwrap();
    assert!(matches!(status, Status::Delayed { .. }), "{status:?}");
    // One no longer delayed (a receiver moved it meanwhile): nothing taken.
    let l = b.layout().unwrap();
    let taken = l.take_delayed(7, "r", Duration::from_millis(10)).unwrap();
    assert!(taken.is_none(), "{taken:?}");
    assert!(matches!(b.status(1).unwrap(), Status::Delayed { .. }));
}

/// A wait in a mailbox without `claimed` (removed here; made by hand elsewhere) watches the
/// mailbox's directory and looks again every poll: a job taken meanwhile makes `claimed`
/// again, and its end, which changes nothing in the mailbox's directory, is seen by the
/// next poll (not a second later, by the look each second's progress report makes). (Mutant
/// answered: no polls there on a local file system.)
#[test]
fn a_wait_where_claimed_is_missing_sees_a_job_finish_by_polling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("B");
    let b = Mailbox::new(&path).poll_interval(Duration::from_millis(10));
    for data in [&b"1"[..], b"2"] {
        b.post(&mut &data[..]).unwrap();
    }
    let one = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    one.finish().unwrap(); // `done` and its shard made
    std::fs::remove_dir(path.join("claimed")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let b = b.clone();
        std::thread::spawn(move || {
            let blocking = move |_| {
                let _ = tx.send(nix::unistd::gettid().as_raw());
            };
            b.wait_finished(&[2], Some(Duration::from_secs(20)), blocking)
        })
    };
    let tid = rx.recv().unwrap();
    let two = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    // `claimed` made again: the waiter wakes, sees job 2 running, and sleeps again.
    crate::test_support::until_asleep(tid, || false);
    two.finish().unwrap();
    let finished = std::time::Instant::now();
    match waiter.join().unwrap().unwrap() {
        wait::Outcome::Acquired(all) => assert!(all[0].is_finished(), "{:?}", all[0]),
        other => panic!("the end of job 2 was not seen: {other:?}"),
    }
    // Seen by a poll, not by the look the wait's progress makes once a second.
    assert!(
        finished.elapsed() < Duration::from_millis(500),
        "{:?}",
        finished.elapsed()
    );
}

/// A running job put back in the queue between the request to stop it and the look after
/// (its job failed first) is taken out of the queue and recorded cancelled there and then:
/// the canceller is told it was removed, not that it was asked to stop. (Mutant answered:
/// the look after the request ignored.)
#[test]
fn a_job_put_back_while_asked_to_stop_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("B"));
    b.post(&mut &b"1"[..]).unwrap();
    let got = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
    AFTER_REQUEST.with_borrow_mut(|then| *then = Some(Box::new(move || drop(got))));
    assert_eq!(b.cancel(1).unwrap(), Cancel::Removed);
    assert!(cancelled(&b, 1));
    assert!(
        AFTER_REQUEST.with_borrow(Option::is_none),
        "never asked to stop"
    );
}
