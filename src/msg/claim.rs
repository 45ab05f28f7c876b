//! Finding the oldest message and claiming it, recovering claims of receivers that died, and a synchronous sender's withdrawal (steps of the protocol in [`super`]'s docs).

use std::{
    fs::File,
    io,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, Result},
    holder::{Found, Registration},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        notify::DirWatch,
        procinfo,
    },
    wait::{self, Outcome},
};

use super::{
    Attempt, Layout, MessageName, SHARD, Skipped, batch, delayed, payload, queue, shard_name,
    shard_of, skip,
};

/// Is the registration `dir/id` held by a living process? Missing means no; what cannot be
/// told means yes: never discard on doubt.
pub(super) fn held(dir: &Dir, id: &str) -> bool {
    !matches!(Registration::find(dir, id), Found::Nothing | Found::Dead)
}

/// Queue entries that are messages, with their parsed names.
pub(super) type Names = Vec<(String, MessageName)>;

/// The names in `q` that are messages, oldest first, and the entries that are not.
pub(super) fn queued_names(q: &Dir) -> Result<(Names, Vec<Skipped>)> {
    let entries = q
        .entries()
        .map_err(|e| pfs::explain_open_error(q.path(), "cannot list queue", e))?;
    Ok(sort_entries(q, entries))
}

/// Of the `entries` of directory `q`: those that are messages, oldest first, and the others.
pub(super) fn sort_entries(q: &Dir, entries: Vec<(String, Option<Kind>)>) -> (Names, Vec<Skipped>) {
    let mut names = Vec::new();
    let mut bad = Vec::new();
    for (name, kind) in entries {
        // fsync never makes such a name, and printed it could forge a line of a listing.
        if !name.starts_with('.') && name.chars().any(char::is_control) {
            bad.push(Skipped {
                name,
                reason: "has control characters in its name: not a message fsync made".to_string(),
            });
            continue;
        }
        let Some(parsed) = MessageName::parse(&name) else {
            if !name.starts_with('.') {
                bad.push(Skipped {
                    name,
                    reason: "is not named like a message".to_string(),
                });
            }
            continue;
        };
        if let Some(Kind::Dir) = kind {
            bad.push(skip(&name, &q.wrong_kind(&name, Kind::File)));
            continue;
        }
        names.push((name, parsed));
    }
    names.sort_by(|a, b| (a.1.seq, &a.0).cmp(&(b.1.seq, &b.0)));
    (names, bad)
}

/// Before a look at the queue: return the claims of dead receivers and the delayed messages
/// that are due to it; what is left to wait for of the delayed ones, and whether claims of
/// living receivers remain (whose deaths a waiter must see: [`queue::Waker`]).
pub(super) fn tidy(l: &Layout, poll: Duration) -> Result<(delayed::Pending, bool)> {
    let claims = recover(l, poll);
    let batch_left = l.finish_batches(poll)?; // a dead poster's batch (`batch.rs`)
    let mut pending = l.promote(poll)?;
    if batch_left {
        let soon = procinfo::now_micros() + batch::RETRY_AFTER.as_micros() as u64;
        pending.due = Some(pending.due.map_or(soon, |d| d.min(soon)));
    }
    Ok((pending, claims))
}

/// Return the claims of dead receivers to the queue; whether claims of living ones remain.
fn recover(l: &Layout, poll: Duration) -> bool {
    let Ok(entries) = l.claimed.entries() else {
        return false;
    };
    let mut living = false;
    for (claimed, kind) in entries {
        if kind == Some(Kind::Dir) {
            continue;
        }
        let Some((name, rid)) = claimed.rsplit_once('~') else {
            continue;
        };
        // Its receiver died with it (and its job, which holds the claim too): a delivery
        // lost, not failed; it comes back without spending a retry.
        let Some(parsed) = MessageName::parse(name) else {
            continue;
        };
        let back = parsed.one_more_lost().render();
        // Into its history by whoever returns it, before it is back (`Layout::requeue_lost`):
        // not if its receiver moved it on before it died, nor twice when two return it.
        let record = || {
            let attempt = parsed.failed.saturating_add(parsed.lost).saturating_add(1);
            if let Some(attempt) = Attempt::lost_with(attempt, rid) {
                l.record(parsed.seq, &attempt);
            }
        };
        // Living, or left claimed (the lock was busy): look again when woken.
        if held(&l.recv, rid) || !matches!(l.requeue_lost(&claimed, &back, poll, record), Ok(true))
        {
            living = true;
        }
    }
    living
}

/// What a receiver took: the payload open, its name in `claimed/`, and its name in the queue.
pub(super) type Claim = (File, String, MessageName);

/// Where to look for what comes next, when a receive found nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Next {
    /// The shard posts go to: the directory to watch (in each level) besides `claimed` and
    /// `delayed`.
    pub(super) shard: u64,
    /// The levels above 0 whose directories exist ([`queue::Watched::levels`]).
    pub(super) levels: Vec<u8>,
    /// When the first delayed message may be due (microseconds since the epoch).
    pub(super) due: Option<u64>,
    /// Whether living receivers hold claims: their deaths must wake a waiter too.
    pub(super) claims: bool,
    /// The buckets of delayed messages to watch besides ([`delayed::Pending::begun`]).
    pub(super) begun: Vec<u64>,
}

/// Claim the oldest message we can read; entries we cannot use are reported and passed over.
/// `Ok(None)`: nothing to take now, and `next` says what to wait for.
pub(super) fn try_claim(
    l: &Layout,
    rid: &str,
    poll: Duration,
    retries: Option<u32>,
    skipped: &mut dyn FnMut(Skipped),
    next: &mut Next,
) -> Result<Outcome<Option<Claim>>> {
    let (pending, claims) = tidy(l, poll)?;
    (next.due, next.begun, next.claims) = (pending.due, pending.begun, claims);
    let mut rebuilt = false;
    loop {
        // The levels, highest first: the first message of the highest that holds one.
        let levels = wait::acquired!(l.current_levels(poll)?);
        for (level, ends) in &levels {
            if let Some(claim) = claim_level(level, *ends, rid, poll, retries, skipped)? {
                return Ok(Outcome::Acquired(Some(claim)));
            }
        }
        // Empty: unless a head or `seq` was rewritten past messages, or an fsync from before
        // shards posted into the queue's directory.
        if !rebuilt {
            let lost = |(level, ends): &&(Layout, queue::Ends)| level.out_of_place(*ends);
            let lost: Vec<_> = levels.iter().filter(lost).collect();
            for (level, _) in &lost {
                wait::acquired!(level.rebuild(poll, l.deadline)?);
            }
            rebuilt = true;
            if !lost.is_empty() {
                continue;
            }
        }
        next.shard = levels.last().expect("level 0").1.newest();
        next.levels = levels
            .iter()
            .map(|(level, _)| level.level)
            .filter(|&p| p > 0)
            .collect();
        return Ok(Outcome::Acquired(None));
    }
}

/// Claim the oldest message we can read of the level `l` is at, walking it from its head
/// (`ends`, read under the lock on `seq` with the other levels').
fn claim_level(
    l: &Layout,
    ends: queue::Ends,
    rid: &str,
    poll: Duration,
    retries: Option<u32>,
    skipped: &mut dyn FnMut(Skipped),
) -> Result<Option<Claim>> {
    let mut first = ends.head;
    let mut missing = 0;
    while first <= ends.newest() {
        if missing >= queue::MAX_MISSING {
            first = l.skip_gap(first, ends.newest())?;
            missing = 0;
            continue;
        }
        let shard = match l.shard(first) {
            Ok(shard) => shard,
            Err(e) => {
                // Not a directory fsync made (a link, a file): passed over.
                skipped(l.in_level(skip(&shard_name(first), &e)));
                first += SHARD;
                continue;
            }
        };
        missing = if shard.is_none() { missing + 1 } else { 0 };
        let mut messages = false;
        if let Some(shard) = &shard {
            // Entries are named by their path in the queue's directory.
            let mut skipped = |s: Skipped| skipped(l.in_level(queue::in_shard(first, s)));
            let (names, bad) = queued_names(shard)?;
            bad.into_iter().for_each(&mut skipped);
            messages = !names.is_empty();
            if let Some(claim) = claim_in(l, shard, names, rid, retries, &mut skipped)? {
                return Ok(Some(claim));
            }
        }
        if !messages && first == ends.head && first < ends.newest() {
            l.advance(first, poll)?;
        }
        first += SHARD;
    }
    Ok(None)
}

/// Claim the first of `names` (a shard's messages, oldest first) that we can read.
fn claim_in(
    l: &Layout,
    shard: &Dir,
    names: Names,
    rid: &str,
    retries: Option<u32>,
    skipped: &mut dyn FnMut(Skipped),
) -> Result<Option<Claim>> {
    for (name, parsed) in names {
        // Open before claiming: a message we may not read, or that is not a file fsync made,
        // stays in the queue for whoever can use it.
        let (file, meta) = match shard.open_stat(&name, false) {
            Ok(Some(f)) => f,
            Ok(None) => continue, // another receiver won
            Err(e) => {
                skipped(skip(&name, &e));
                continue;
            }
        };
        if !shard.sole_link(&name, &file, Some(&meta)).unwrap_or(false) {
            if shard.stat(&name).is_err() {
                continue; // claimed by another receiver since our open (or a link gone)
            }
            skipped(Skipped {
                name,
                reason: "has other hard links: not a message fsync made".to_string(),
            });
            continue;
        }
        let mut claimed = format!("{name}~{rid}");
        match shard.rename(&name, &l.claimed, &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // another receiver won
            // Too long with our receiver's id after it: no name fsync makes (a sender's name is
            // short enough, `crate::bus`), so no message; passed over, not blocking the queue.
            Err(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                skipped(Skipped {
                    name,
                    reason: "has a name too long to be received: not a message fsync made"
                        .to_string(),
                });
                continue;
            }
            Err(e) => return Err(Error::io(&shard.join(&name), "cannot claim message", e)),
        }
        // What we claimed must be what we opened (the owner of the mailbox could swap it).
        let same = l
            .claimed
            .stat(&claimed)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (meta.st_dev, meta.st_ino));
        if !same {
            let _ = l.claimed.rename(&claimed, shard, &name);
            skipped(Skipped {
                name,
                reason: "was replaced while being received".to_string(),
            });
            continue;
        }
        // Failed, or lost with its receivers, as often as we allow: a dead letter.
        if parsed.dead_under(retries) {
            l.bury(&claimed, &name)?;
            continue;
        }
        if parsed.sync {
            if !held(&l.senders, &parsed.uniq) {
                let _ = l.claimed.unlink_file(&claimed); // its sender died or gave up
                let _ = l.senders.unlink_file(&parsed.uniq);
                continue;
            }
            let taken = format!(
                "{}~{rid}",
                MessageName {
                    sync: false,
                    ..parsed.clone()
                }
                .render()
            );
            l.claimed
                .rename(&claimed, &l.claimed, &taken)
                .map_err(|e| Error::io(&l.claimed.join(&claimed), "cannot take message", e))?;
            claimed = taken;
        }
        let parsed = MessageName {
            sync: false,
            ..parsed
        };
        // Cancelled while it waited, and put back before its worker saw the request: recorded
        // cancelled, never delivered ([`Mailbox::cancel`]).
        if l.cancel_requested(parsed.seq) {
            let attempts = parsed.failed.saturating_add(parsed.lost);
            l.cancel_claimed(&claimed, &parsed, attempts, SystemTime::now())?;
            continue;
        }
        // Delivered before: a crash may have left the record of a delivery that then came
        // back (lost), which must not outlive this one.
        if parsed.lost > 0 {
            l.forget_finished(parsed.seq);
        }
        // What the receiver and its job read: what it held when claimed, whoever can write it.
        let snapshot = payload::snapshot(file, &meta)
            .map_err(|e| Error::io(&l.claimed.join(&claimed), "cannot read message", e))?;
        let Some(file) = snapshot else {
            l.bury(&claimed, &parsed.render())?;
            skipped(Skipped {
                name,
                reason: "changed while being received (written to after it was posted): moved \
                         to the dead letters"
                    .to_string(),
            });
            continue;
        };
        return Ok(Some((file, claimed, parsed)));
    }
    Ok(None)
}

pub(super) enum SendState {
    Queued,
    Claiming(String),
    Taken,
}

/// Where synchronous message `name` (`stem` without its kind) stands.
pub(super) fn send_state(l: &Layout, name: &str, stem: &str) -> Result<SendState> {
    if queued_in(l, name).is_some() {
        return Ok(SendState::Queued);
    }
    let prefix = format!("{stem}.sync~");
    let entries = l
        .claimed
        .entries()
        .map_err(|e| Error::io(l.claimed.path(), "cannot list", e))?;
    for (entry, _) in entries {
        if let Some(rid) = entry.strip_prefix(&prefix) {
            return Ok(SendState::Claiming(rid.to_string()));
        }
    }
    Ok(SendState::Taken)
}

/// Take a synchronous message back; `true` if withdrawn, `false` if a receiver took it first.
pub(super) fn withdraw(
    l: &Layout,
    name: &str,
    stem: &str,
    watch: &DirWatch,
    poll: Duration,
) -> Result<bool> {
    loop {
        if let Some(shard) = queued_in(l, name) {
            match shard.unlink_any(name) {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&shard.join(name), "cannot withdraw message", e)),
            }
        }
        match send_state(l, name, stem)? {
            SendState::Taken => return Ok(false),
            SendState::Queued => continue,
            SendState::Claiming(rid) => {
                if !held(&l.recv, &rid) {
                    let claimed = format!("{stem}.sync~{rid}");
                    l.requeue(&claimed, name, poll)?;
                    continue;
                }
                // The receiver converts it in microseconds; its death shows in no event.
                watch
                    .wait_timeout(Duration::from_millis(10))
                    .map(drop)
                    .map_err(|e| Error::io(l.claimed.path(), "cannot wait", e))?;
            }
        }
    }
}

/// The shard directory that holds queued message `name`, if it is queued.
fn queued_in(l: &Layout, name: &str) -> Option<Dir> {
    let parsed = MessageName::parse(name)?;
    let level = l.at(parsed.priority).ok()??;
    let shard = level.shard(shard_of(parsed.seq)).ok()??;
    shard.stat(name).is_ok().then_some(shard)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{
        Mailbox,
        msg::{
            MessageName, shard_name,
            tests::{next_text, post_texts, text},
        },
        platform::{lock, procinfo},
        test_support::while_locked,
        wait::Deadline,
    };

    use super::{Layout, recover, withdraw};

    /// A message behind a head rewritten past it (another user's planted head, a restore
    /// from a backup) is still received: a walk from the head finds nothing, and the queue's
    /// directory, looked at once then, shows the shard before it, from which the head is
    /// rebuilt. (Mutant answered: that look made only after a rebuild, so never.)
    #[test]
    fn a_message_behind_a_head_rewritten_past_it_is_received() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1); // sequence number 1, in shard 0
        std::fs::write(path.join("seq"), "150\n").unwrap();
        std::fs::write(path.join("head"), format!("{}\n", shard_name(100))).unwrap();
        assert_eq!(next_text(&b).as_deref(), Some("m0"));
        assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
    }

    /// A receiver waiting where two of the three levels exist wakes for the first post at
    /// the third: it watches the queue's directory, where that post makes the level's. The
    /// post comes once the receiver's thread sleeps. (Mutant answered: level 0 counted among
    /// the levels found, so that two found look like all three and the queue's directory is
    /// not watched.)
    #[test]
    fn a_receiver_wakes_for_the_first_post_at_a_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        for p in [1, 2] {
            post_texts(&Mailbox::new(&path).priority(p), 0..1);
        }
        let b = Mailbox::new(&path);
        while next_text(&b).is_some() {}
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = b.clone();
        std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            tx.send(i32::from(waiter.recv(None).unwrap().is_some()))
                .unwrap();
        });
        let tid = rx.recv().unwrap();
        let start = std::time::Instant::now();
        while !crate::test_support::sleeping(tid) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the receiver never slept"
            );
            std::thread::yield_now();
        }
        post_texts(&Mailbox::new(&path).priority(3), 0..1);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(20)),
            Ok(1),
            "the receiver slept on"
        );
    }

    /// The claims of dead receivers go back to the queue, and `recover` says whether claims
    /// are left that a waiter must watch for their receivers' deaths: none once the dead
    /// one's is returned; one of a living receiver; one it could not return, `seq` being held
    /// past its deadline. (Mutant answered: the check of the return inverted, so that a claim
    /// returned counted as left and one left as returned.)
    #[test]
    fn recover_returns_dead_receivers_claims_and_says_whether_any_are_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        let l = b.layout().unwrap();
        // A claim whose receiver (no registration in `recv`) died.
        let plant = || {
            post_texts(&b, 0..1);
            let shard = path.join("q").join(shard_name(0));
            let name = crate::test_support::listing(&shard).pop().unwrap();
            std::fs::rename(
                shard.join(&name),
                path.join("claimed").join(format!("{name}~dead")),
            )
            .unwrap();
        };
        plant();
        assert!(
            !recover(&l, Duration::from_millis(10)),
            "a returned claim counted as left"
        );
        assert!(crate::test_support::listing(&path.join("claimed")).is_empty());
        let living = b
            .recv(Some(Duration::ZERO))
            .unwrap()
            .expect("returned to the queue");
        assert!(
            recover(&l, Duration::from_millis(10)),
            "a living receiver's claim"
        );
        living.finish().unwrap();
        plant();
        let seq = std::fs::File::open(path.join("seq")).unwrap();
        assert!(lock::flock(&seq, lock::Mode::Exclusive, true).unwrap());
        let busy = Layout {
            deadline: Deadline::after(Some(Duration::ZERO)),
            ..b.layout().unwrap()
        };
        assert!(
            recover(&busy, Duration::from_millis(10)),
            "a claim left for a busy seq"
        );
        assert_eq!(crate::test_support::listing(&path.join("claimed")).len(), 1);
    }

    /// A file where the head's shard should be (not a directory fsync made) is passed over,
    /// reported, and the walk goes on to the next shard: bounded in a thread of its own, so
    /// that a walk that never leaves the first shard fails the test. (Mutant answered: the
    /// step past it a multiplication, which at shard 0 stays there.)
    #[test]
    fn a_receive_passes_over_a_file_in_a_shards_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1); // in shard 0, the head
        std::fs::write(path.join("seq"), "150\n").unwrap();
        post_texts(&b, 1..2); // in shard 100
        let first = path.join("q").join(shard_name(0));
        std::fs::remove_dir_all(&first).unwrap();
        std::fs::write(&first, "").unwrap();
        let got = crate::test_support::within(Duration::from_secs(20), move || {
            let mut passed = Vec::new();
            let got = b.recv_with(
                Some(Duration::ZERO),
                crate::test_support::Passed(&mut passed),
            );
            (got.unwrap().acquired().map(text), passed)
        });
        let (got, passed) = got.expect("the walk ended");
        assert_eq!(got.as_deref(), Some("m1"));
        assert_eq!(passed, [shard_name(0)]);
    }

    /// A receive moves the head (under the exclusive lock on `seq`) only past an empty shard
    /// at the head before the one posts go to: not past one holding an entry it passes over,
    /// nor past an empty one behind it, nor at the shard posts go to. Here another process
    /// holds `seq` shared throughout, and the receive never waits for it. (Mutants answered:
    /// each of the three conditions of the move loosened, which take the lock for nothing, or
    /// wait up to a second for it.)
    #[test]
    fn a_receive_takes_seq_to_move_the_head_only_past_an_empty_shard_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1);
        assert_eq!(next_text(&b).as_deref(), Some("m0"));
        // The head's shard, the one posts go to, empty: nothing to move past.
        let waiter = b.clone();
        let (got, waited) = while_locked(&path.join("seq"), lock::Mode::Shared, false, move || {
            waiter
                .recv(Some(Duration::from_millis(1500)))
                .unwrap()
                .is_none()
        });
        assert!(
            got && !waited,
            "waited for seq with the head at the newest shard"
        );
        // An entry passed over at the head (a second link), nothing in shard 100, a message in
        // shard 200.
        let shard = path.join("q").join(shard_name(0));
        let planted = shard.join("00000000000000000002.h-1-0.-.msg");
        std::fs::write(&planted, "linked").unwrap();
        std::fs::hard_link(&planted, dir.path().join("link")).unwrap();
        std::fs::write(path.join("seq"), "250\n").unwrap();
        post_texts(&b, 1..2);
        let (got, waited) = while_locked(&path.join("seq"), lock::Mode::Shared, false, move || {
            b.recv(Some(Duration::from_secs(10))).unwrap().map(text)
        });
        assert_eq!(got.as_deref(), Some("m1"));
        assert!(
            !waited,
            "waited for seq to move the head past a shard not empty at it"
        );
    }

    /// An entry named like a message whose name is too long to be claimed (its receiver's id
    /// added), which fsync never makes, is passed over and reported, and the message after it
    /// received. (Mutant answered: every error of the claim's rename taken for another
    /// receiver's win, so that the entry went unreported.)
    #[test]
    fn an_entry_too_long_to_be_claimed_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1);
        assert_eq!(next_text(&b).as_deref(), Some("m0"));
        let long = format!("00000000000000000002.u.{}.msg", "x".repeat(220));
        let shard = path.join("q").join(shard_name(0));
        std::fs::write(shard.join(&long), "long").unwrap();
        std::fs::write(path.join("seq"), "2\n").unwrap();
        post_texts(&b, 1..2);
        let mut passed = Vec::new();
        let got = b.recv_with(
            Some(Duration::ZERO),
            crate::test_support::Passed(&mut passed),
        );
        assert_eq!(got.unwrap().acquired().map(text).as_deref(), Some("m1"));
        assert_eq!(passed, [format!("{}/{long}", shard_name(0))]);
        assert!(shard.join(&long).exists(), "the entry is left where it was");
    }

    /// A synchronous send returns once a receiver has taken its message, while the receiver
    /// still holds it (its job may run for hours). (Mutant answered: the claim keeping its
    /// `.sync` mark, so that the sender waits for the receiver to finish.)
    #[test]
    fn a_send_returns_once_its_message_is_taken_not_when_it_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        let sender = b.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(sender.send(&mut &b"sync"[..], Some(Duration::from_mins(1))))
        });
        let held = b.recv(Some(Duration::from_mins(1))).unwrap().expect("sent");
        let sent = rx.recv_timeout(Duration::from_secs(20));
        assert!(
            matches!(sent, Ok(Ok(true))),
            "the send has not returned: {sent:?}"
        );
        assert_eq!(text(held), "sync");
    }

    /// A synchronous message at its sender's timeout: withdrawn (`true`) while queued, or
    /// while claimed by a receiver that died (returned to the queue, then removed); not
    /// (`false`) once a receiver has taken it. (Mutant answered: every withdrawal said to have
    /// succeeded, so that a send taken at the last moment reported its timeout.)
    #[test]
    fn withdraw_takes_back_a_message_no_living_receiver_has_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        let l = b.layout().unwrap();
        let watch = crate::platform::notify::DirWatch::new(&l.claimed.pinned()).unwrap();
        let poll = Duration::from_millis(10);
        let claimed = path.join("claimed");
        // A synchronous message, queued: where it is, and its name and stem.
        let queue = || {
            post_texts(&b, 0..1);
            let shard = path.join("q").join(shard_name(0));
            let posted = crate::test_support::listing(&shard).pop().unwrap();
            let parsed = MessageName {
                sync: true,
                ..MessageName::parse(&posted).unwrap()
            };
            let name = parsed.render();
            std::fs::rename(shard.join(&posted), shard.join(&name)).unwrap();
            (shard.join(&name), name, parsed)
        };
        let (at, name, parsed) = queue();
        assert!(withdraw(&l, &name, &parsed.stem(), &watch, poll).unwrap());
        assert!(!at.exists());
        // Claimed by a receiver that died before taking it.
        let (at, name, parsed) = queue();
        std::fs::rename(&at, claimed.join(format!("{name}~dead"))).unwrap();
        assert!(withdraw(&l, &name, &parsed.stem(), &watch, poll).unwrap());
        assert!(!at.exists());
        assert!(crate::test_support::listing(&claimed).is_empty());
        // Taken: its claim no longer marked synchronous.
        let (at, name, parsed) = queue();
        let taken = MessageName {
            sync: false,
            ..parsed.clone()
        };
        std::fs::rename(&at, claimed.join(format!("{}~gone", taken.render()))).unwrap();
        assert!(!withdraw(&l, &name, &parsed.stem(), &watch, poll).unwrap());
    }

    /// A dead poster's committed batch, found while another process holds `seq` shared (a
    /// receiver's look) past the grace a receive waits for the lock to finish it, is looked at
    /// again soon, not left until the queue changes: once that lock goes, nothing else
    /// happening, the batch is finished and received. The receive's tries for the lock show
    /// in the kernel's table as a waiter on `seq`; the lock goes after the first try has given
    /// up. (Mutant answered: the time of the next look set at the current time multiplied by
    /// the retry interval, far in the future or past the largest number.)
    #[test]
    fn a_dead_posters_batch_left_for_a_busy_seq_is_finished_soon_after() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1);
        assert_eq!(next_text(&b).as_deref(), Some("m0"));
        // The poster died after its commit (step 3 of the batch's protocol): sequence number
        // 2 handed out, the batch in `batches`, none of it queued.
        let name = MessageName {
            seq: 2,
            uniq: crate::msg::uniq(),
            from: None,
            sync: false,
            failed: 0,
            lost: 0,
            priority: 0,
            timeout_ms: None,
        };
        let batch = path.join("batches").join(name.render());
        std::fs::create_dir_all(&batch).unwrap();
        std::fs::write(batch.join("0"), "batched").unwrap();
        std::fs::write(path.join("seq"), "2\n").unwrap();
        let seq = std::fs::File::open(path.join("seq")).unwrap();
        assert!(lock::flock(&seq, lock::Mode::Shared, true).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(b.recv(Some(Duration::from_mins(1))).unwrap().map(text))
        });
        let meta = seq.metadata().unwrap();
        let waiters = || procinfo::flock_waiters(meta.dev(), meta.ino()).unwrap();
        let start = std::time::Instant::now();
        let mut tried = false;
        while !tried || waiters() > 0 {
            tried = tried || waiters() > 0;
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the receive never gave up a try for the lock on seq"
            );
            std::thread::yield_now();
        }
        drop(seq);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Some("batched".to_string())),
            "the batch was not finished and received"
        );
    }

    /// A receive walks from the head across a gap of a billion shards (a `seq` set far ahead,
    /// the next post beyond it) by listing the queue's directory once the shards it looks for
    /// are missing four in a row, not by looking for each: bounded in a thread of its own,
    /// so that a walk that never ends fails the test. (Mutant answered: missing shards not
    /// counted.)
    #[test]
    fn a_receive_skips_a_gap_in_the_shards() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..1);
        assert_eq!(next_text(&b).as_deref(), Some("m0"));
        std::fs::write(path.join("seq"), "100000000000\n").unwrap();
        post_texts(&b, 1..2);
        let got = crate::test_support::within(Duration::from_secs(20), move || next_text(&b));
        assert_eq!(got.expect("the walk ended").as_deref(), Some("m1"));
    }
}
