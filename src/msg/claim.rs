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
            shard_name,
            tests::{next_text, post_texts},
        },
    };

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
