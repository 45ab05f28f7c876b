//! Unit tests of the mailbox's own calls (`src/msg.rs`): the options a mailbox passes on, the
//! modes of what it makes, the deadlines of its waits.

use std::os::unix::fs::PermissionsExt as _;

use super::*;
use crate::{platform::lock, test_support::while_locked};

/// The mode of the file a receiver's registration is, by the modes of the mailbox's
/// directory, `recv` and `senders`: group read-write if one of them is group-writable, for
/// others if one is writable by others, less the umask. (Mutants answered: the mode a constant, the
/// directories' modes joined with `&` or `^`.)
#[test]
fn a_registration_is_open_to_those_who_may_write_the_mailbox() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..1);
    let _ = b
        .send(&mut &b"made senders"[..], Some(Duration::ZERO))
        .unwrap();
    let chmod = |d: &str, mode: u32| {
        let p = path.join(d);
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for (modes, want) in [
        ([0o700, 0o700, 0o700], 0o600),
        ([0o770, 0o700, 0o700], 0o660),
        ([0o700, 0o770, 0o700], 0o660),
        ([0o700, 0o700, 0o773], 0o666),
        ([0o770, 0o770, 0o700], 0o660),
        ([0o770, 0o700, 0o770], 0o660),
        ([0o700, 0o770, 0o770], 0o660),
    ] {
        for (d, mode) in ["", "recv", "senders"].into_iter().zip(modes) {
            chmod(d, mode);
        }
        let held = b.recv(Some(Duration::ZERO)).unwrap().expect("queued");
        let registrations = listing(&path.join("recv"));
        assert_eq!(registrations.len(), 1, "{registrations:?}");
        let meta = std::fs::metadata(path.join("recv").join(&registrations[0])).unwrap();
        let want = want & !procinfo::umask();
        assert_eq!(
            meta.permissions().mode() & 0o777,
            want,
            "directories {modes:?}"
        );
        drop(held);
    }
}

/// A queued message's id and lost deliveries as a listing shows them. (Mutants answered:
/// each a constant.)
#[test]
fn a_listing_shows_each_messages_id_and_lost_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..3);
    let queued = kill_receiver_of(&path, &format!("{:020}", 2));
    let _ = b.existing_layout().unwrap().requeue_lost(
        &format!("{queued}~h.1.dead"),
        &MessageName::parse(&queued)
            .unwrap()
            .one_more_lost()
            .render(),
        Duration::from_millis(100),
        || {},
    );
    let listed = b.list().unwrap().queued;
    let got: Vec<(u64, u32)> = listed.iter().map(|q| (q.id(), q.lost())).collect();
    assert_eq!(got, [(1, 0), (2, 1), (3, 0)]);
}

/// Payloads are made with the mode asked for (less the umask), its permission bits only.
/// (Mutants answered: the bits kept with `|` or `^`.)
#[test]
fn payloads_take_the_permission_bits_of_the_mode_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path).payload_mode(0o4640);
    post_texts(&b, 0..1);
    let shard = path.join("q").join(shard_name(0));
    let payload = shard.join(listing(&shard).pop().unwrap());
    let mode = std::fs::metadata(payload).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

/// A message posted carries the mailbox's job timeout. (Mutant answered: left out.)
#[test]
fn a_post_carries_the_job_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("b")).job_timeout(Duration::from_secs(7));
    post_texts(&b, 0..1);
    let r = b.recv(Some(Duration::ZERO)).unwrap().expect("queued");
    assert_eq!(r.job_timeout(), Some(Duration::from_secs(7)));
}

/// A receive ends at its timeout even where `seq`, which its look takes shared, is held by a
/// poster that does not let go. (Mutant answered: the look's waits without the receive's
/// deadline.)
#[test]
fn a_receive_ends_at_its_timeout_while_seq_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..1);
    let waiter = b.clone();
    let (got, _) = while_locked(&path.join("seq"), lock::Mode::Exclusive, false, move || {
        crate::test_support::within(Duration::from_secs(20), move || {
            waiter
                .recv(Some(Duration::from_millis(100)))
                .unwrap()
                .is_none()
        })
    });
    assert_eq!(got, Some(true), "the receive did not end at its timeout");
}

/// A message received with a timeout of zero and then dropped unfinished goes back to the
/// queue as it was (not as a lost delivery), waiting for `seq` as long as a return does,
/// whatever the receive's timeout was. (Mutant answered: the message keeping the receive's
/// deadline, so that its return gave up at once and it came back later as lost.)
#[test]
fn a_message_dropped_goes_back_waiting_for_seq_past_the_receives_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..1);
    let held = b.recv(Some(Duration::ZERO)).unwrap().expect("queued");
    let seq = path.join("seq");
    while_locked(&seq, lock::Mode::Exclusive, true, move || drop(held));
    let again = b.recv(Some(Duration::ZERO)).unwrap().expect("back");
    assert_eq!(again.attempt(), 1, "it came back as a lost delivery");
}

#[test]
fn a_lost_delivery_is_written_down_once_by_whoever_returns_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let b = Mailbox::new(&path);
    post_texts(&b, 0..1);
    let queued = kill_receiver_of(&path, &format!("{:020}", 1));
    let claimed = format!("{queued}~h.1.dead");
    let back = MessageName::parse(&queued)
        .unwrap()
        .one_more_lost()
        .render();
    let l = b.existing_layout().unwrap();
    let mut written = 0;
    let again = l.requeue_lost(&claimed, &back, Duration::from_millis(100), || written += 1);
    assert_eq!((again.unwrap(), written), (true, 1));
    // Returned already (by another process, or moved on by its receiver before it died).
    assert!(
        l.requeue_lost(&claimed, &back, Duration::from_millis(100), || written += 1)
            .unwrap()
    );
    assert_eq!(written, 1, "no line for a claim that is no longer there");
    assert!(path.join("q").join(shard_name(0)).join(&back).is_file());
}
