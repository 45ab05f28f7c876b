//! The queue at any depth: messages in shards of [`SHARD`] consecutive sequence numbers, and a
//! head that says where the oldest may be, so that a receiver lists one shard, not the queue
//! (the protocol's section [*Shards and the head*](super#shards-and-the-head) in [`super`]'s
//! docs).

use std::{fs::File, io, os::unix::fs::FileExt, time::Duration};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
        procinfo,
    },
    wait::{self, Deadline, Outcome, Wait},
};

use super::{
    Layout, MAX_PRIORITY, MAX_SEQ, MessageName, Skipped, delayed, durable_home, flush, queued_names,
};

/// How many consecutive sequence numbers share a shard directory: a receiver lists at most
/// this many entries to find the oldest message, at any depth of the queue.
pub(crate) const SHARD: u64 = 100;

/// The first sequence number of the shard that holds `seq`.
pub(crate) fn shard_of(seq: u64) -> u64 {
    seq / SHARD * SHARD
}

/// A shard directory's name: its first sequence number, in 20 digits as in message names.
pub(crate) fn shard_name(first: u64) -> String {
    format!("{first:020}")
}

/// The shard a directory name stands for, if it is one.
pub(crate) fn parse_shard(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let first: u64 = name.parse().ok()?;
    (first.is_multiple_of(SHARD) && first < MAX_SEQ).then_some(first)
}

/// Entry `s` of shard `first`, named by its path in the queue's directory (`SHARD/NAME`).
pub(super) fn in_shard(first: u64, mut s: Skipped) -> Skipped {
    s.name = format!("{}/{}", shard_name(first), s.name);
    s
}

/// Where receivers start, and the last sequence number handed out, as read together under a
/// shared lock on `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ends {
    /// The first sequence number of the oldest shard that may hold a message.
    pub(super) head: u64,
    /// The last sequence number handed out (0: none yet).
    pub(super) last: u64,
}

impl Ends {
    /// The shard a post goes to next, and beyond which no message can be.
    pub(super) fn newest(&self) -> u64 {
        shard_of(self.last + 1)
    }
}

/// The head as `head` holds it: `FIRST\n`, written only under the exclusive lock on `seq`.
fn parse_head(text: &str) -> Option<u64> {
    let text = text.strip_suffix('\n')?;
    parse_shard(text)
}

/// The last sequence number as `seq` holds it; `Err` for what fsync never writes.
pub(super) fn parse_seq(text: &str) -> std::result::Result<u64, ()> {
    let text = text.trim();
    match text.parse() {
        _ if text.is_empty() => Ok(0), // new, or its creator died before writing it
        Ok(n) if n < MAX_SEQ => Ok(n),
        _ => Err(()),
    }
}

/// Read a small file from its start.
pub(super) fn read_text(file: &File) -> String {
    let mut buf = [0u8; 64];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

impl Layout {
    /// `seq`, the lock that orders posts and guards the head: open, and no one else's file
    /// reached through a hard link.
    pub(super) fn seq_file(&self) -> Result<File> {
        let file = self.top.open_or_create("seq")?;
        // Written by every poster, so no owner is required of it: but it must be no one
        // else's file reached through a hard link.
        let sole = (self.top.sole_link("seq", &file, None))
            .map_err(|e| Error::io(&self.top.join("seq"), "cannot stat", e))?;
        if !sole {
            return Err(self.top.not_sole("seq"));
        }
        Ok(file)
    }

    /// Lock `seq` in `mode`, waiting until `deadline` (or a cancellation signal): whoever may
    /// open it may hold it for ever.
    pub(super) fn lock_seq(
        &self,
        mode: Mode,
        poll: Duration,
        deadline: Deadline,
    ) -> Result<Outcome<File>> {
        let file = self.seq_file()?;
        let spec = Wait {
            deadline,
            poll: pfs::fs_kind(&file).network.then_some(poll),
            progress: None,
        };
        let locked = wait::flock(spec, |_| {}, &file, mode, &self.top.join("seq"))?;
        Ok(locked.map(|()| file))
    }

    /// Lock `seq` exclusively for a short step that another process can do instead (return a
    /// message, move the head): at once if it is free, even after a cancellation signal (a
    /// receiver interrupted while writing a message out returns it on its way out); else
    /// waiting [`LOCK_GRACE`] at most. `None` if it did not come.
    pub(super) fn lock_seq_briefly(&self, poll: Duration) -> Result<Option<File>> {
        let file = self.seq_file()?;
        if lock::flock(&file, Mode::Exclusive, false)
            .map_err(|e| Error::io(&self.top.join("seq"), "cannot lock", e))?
        {
            return Ok(Some(file));
        }
        drop(file);
        let waited = self.lock_seq(Mode::Exclusive, poll, self.deadline.capped(LOCK_GRACE))?;
        Ok(waited.acquired())
    }

    /// The last sequence number, from `seq` locked by us.
    pub(super) fn last_seq(&self, seq: &File) -> Result<u64> {
        parse_seq(&read_text(seq)).map_err(|()| {
            Error::new(
                &self.top.join("seq"),
                ErrorKind::Corrupt,
                "does not hold a sequence number fsync wrote; not posting (a wrong one would \
                 reorder the queue)",
            )
        })
    }

    /// This level's head, as `head` holds it (`None`: missing, or not one fsync wrote).
    fn read_head(&self) -> Option<u64> {
        match self.head_in.open_stat("head", false) {
            Ok(Some((f, st))) => {
                // Written by whoever moves it: fitted for them when its owner reads it.
                self.head_in.fit("head", &f, &st);
                parse_head(&read_text(&f))
            }
            Ok(None) | Err(_) => None,
        }
    }

    /// This level's head with `last`, the last sequence number read under the same lock on
    /// `seq`; `None` for a head that is missing, not one fsync wrote, or past the shard posts
    /// go to (then [`rebuild`](Self::rebuild) it).
    pub(super) fn ends_at(&self, last: u64) -> Option<Ends> {
        // A head past where posts go was never written by fsync: rebuild it.
        (self.read_head())
            .map(|head| Ends { head, last })
            .filter(|e| e.head <= e.newest())
    }

    /// Lower the head to shard `first`, durably, if it lies past it (under the exclusive lock on
    /// `seq`): before a message is put there that a crash left out of the queue (a batch rolled
    /// forward: `super::batch`).
    pub(super) fn lower_head(&self, first: u64) -> Result<()> {
        let head = match self.top.open("head", false) {
            Ok(Some(f)) => parse_head(&read_text(&f)),
            _ => None,
        };
        match head {
            Some(head) if head > first => self.write_head(first, true),
            _ => Ok(()),
        }
    }

    /// Write the head (under the exclusive lock on `seq`); `durable` when lowering it, which
    /// must survive a crash before a message is put behind the old head.
    fn write_head(&self, first: u64, durable: bool) -> Result<()> {
        let file = self.head_in.open_or_create("head")?;
        let text = format!("{}\n", shard_name(first));
        file.write_all_at(text.as_bytes(), 0)
            .and_then(|()| file.set_len(text.len() as u64))
            .and_then(|()| if durable { file.sync_data() } else { Ok(()) })
            .map_err(|e| match self.level {
                0 => self.unwritable("head", e),
                _ => Error::io(&self.head_in.join("head"), "cannot write", e),
            })
    }

    /// After a post made shard `first` (under the exclusive lock on `seq`): a mailbox without a
    /// head gets one now, the oldest shard there is, and its first spare registration, so that
    /// receivers need no new file to drain it once the file system is full. Best effort: a
    /// post does not need the head (a receive rebuilds it, and says what is wrong with it).
    pub(super) fn head_for_new_shard(&self, first: u64) {
        if !matches!(self.head_in.open("head", false), Ok(None)) {
            return;
        }
        let Ok(entries) = self.q.entries() else {
            return;
        };
        // Messages of the layout before shards: the receivers' rebuild moves them first.
        let unsharded = |(name, kind): &(String, Option<Kind>)| {
            MessageName::parse(name).is_some() && self.unsharded(name, *kind)
        };
        if entries.iter().any(unsharded) {
            return;
        }
        let oldest = (entries.iter())
            .filter_map(|(name, _)| parse_shard(name))
            .min();
        if self
            .write_head(oldest.map_or(first, |o| o.min(first)), true)
            .is_ok()
        {
            crate::holder::Registration::make_spare(&self.recv);
        }
    }

    /// The shard directory that begins at `first`: `None` if missing.
    pub(super) fn shard(&self, first: u64) -> Result<Option<Dir>> {
        self.q.open_sub(&shard_name(first))
    }

    /// The shard directory that begins at `first`, made if missing.
    pub(super) fn create_shard(&self, first: u64) -> Result<Dir> {
        self.q.create_sub(&shard_name(first))
    }

    /// The shard that begins at `first`, made if missing, to put a message in: its entry in
    /// `q` durable ([`durable_home`]).
    pub(super) fn shard_to_fill(&self, first: u64) -> Result<Dir> {
        let (shard, made) = match self.shard(first)? {
            Some(shard) => (shard, false),
            None => {
                let made = self.create_shard(first)?;
                self.head_for_new_shard(first);
                (made, true)
            }
        };
        durable_home(&self.q, &shard, made)?;
        Ok(shard)
    }

    /// Where a walk from shard `from` to shard `last` goes on after [`MAX_MISSING`] missing
    /// shards in a row: the first shard the queue's directory holds from `from` on, or past
    /// `last` if none (the directory listed once). So that a walk visits no more shards than
    /// there are, plus a few, however far apart the head and `seq` lie (a `seq` planted far
    /// ahead, a head set back).
    pub(super) fn skip_gap(&self, from: u64, last: u64) -> Result<u64> {
        skip_gap_in(&self.q, from, last)
    }

    /// Rebuild the head from the directory (under the exclusive lock on `seq`): after a crash
    /// that tore it, for a head or `seq` rewritten ([`out_of_place`](Self::out_of_place)),
    /// for a mailbox written by an fsync before shards (its messages are moved into their
    /// shards, in order), and for messages such an fsync posted since. The head goes to the
    /// oldest shard there is; `seq` up to the newest message of the shards past the one posts
    /// go to, if any (so that posts are numbered after them, and walks reach them).
    pub(super) fn rebuild(&self, poll: Duration, deadline: Deadline) -> Result<Outcome<()>> {
        let seq = wait::acquired!(self.lock_seq(Mode::Exclusive, poll, deadline)?);
        let mut last = self.last_seq(&seq)?;
        let entries = self
            .q
            .entries()
            .map_err(|e| pfs::explain_open_error(self.q.path(), "cannot list queue", e))?;
        // The shards that may hold a number past `last`: the one posts go to, and any after.
        let newest = shard_of(last + 1);
        for first in entries.iter().filter_map(|(name, _)| parse_shard(name)) {
            if first >= newest
                && let Ok(Some(shard)) = self.shard(first)
            {
                let names = queued_names(&shard)?.0;
                last = names.iter().map(|(_, n)| n.seq).fold(last, u64::max);
            }
        }
        if last > self.last_seq(&seq)? {
            self.write_seq(&seq, last)?;
        }
        let mut head = shard_of(last + 1);
        for (name, kind) in &entries {
            if let Some(first) = parse_shard(name) {
                head = head.min(first);
            } else if self.unsharded(name, *kind)
                && let Some(parsed) = MessageName::parse(name)
            {
                // A message in the layout before shards: into its shard, keeping its name.
                // (What is not a regular file stays: receivers never look at it there.)
                let first = shard_of(parsed.seq);
                let shard = self.create_shard(first)?;
                self.q
                    .rename(name, &shard, name)
                    .map_err(|e| Error::io(&self.q.join(name), "cannot move message", e))?;
                head = head.min(first);
            }
        }
        if self.read_head() != Some(head) {
            self.write_head(head, true)?;
        }
        Ok(Outcome::Acquired(()))
    }

    /// Write `n` as the last sequence number into `seq`, locked exclusively by us: durably,
    /// before anything it numbers is (a number a power cut took back would be handed out
    /// again, and the posts after it would jump ahead of older messages).
    pub(super) fn write_seq(&self, seq: &File, n: u64) -> Result<()> {
        let text = format!("{n}\n");
        seq.write_all_at(text.as_bytes(), 0)
            .and_then(|()| seq.set_len(text.len() as u64))
            .and_then(|()| seq.sync_data())
            .map_err(|e| self.unwritable("seq", e))
    }

    /// Whether the queue's directory, listed once, holds what a walk between `ends` cannot
    /// see: a shard before the head or past the one posts go to that holds a message (a head
    /// or `seq` rewritten: fsync never leaves one there, a crash included), or messages of the
    /// layout before shards (an older fsync's posts). Then [`rebuild`](Self::rebuild) it.
    /// Asked when a walk from the head found nothing, when the directory holds one shard or a
    /// few (each past the head but the one posts go to is removed as it empties).
    pub(super) fn out_of_place(&self, ends: Ends) -> bool {
        let Ok(entries) = self.q.entries() else {
            return false;
        };
        (entries.iter()).any(|(name, kind)| match parse_shard(name) {
            Some(first) if first < ends.head || first > ends.newest() => {
                matches!(self.shard(first), Ok(Some(shard))
                    if queued_names(&shard).is_ok_and(|(names, _)| !names.is_empty()))
            }
            Some(_) => false,
            None => MessageName::parse(name).is_some() && self.unsharded(name, *kind),
        })
    }

    /// Whether entry `name` of the queue's directory (of type `kind`, if the listing said) is a
    /// regular file: a message of the layout before shards, if it is named like one.
    fn unsharded(&self, name: &str, kind: Option<Kind>) -> bool {
        match kind {
            Some(kind) => kind == Kind::File,
            None => {
                (self.q.stat(name)).is_ok_and(|st| crate::platform::dir::is_kind(&st, Kind::File))
            }
        }
    }

    /// Move the head past shard `first`, found with no message in it, and past the shards after
    /// it that hold none either, up to the first that does or the one posts go to: under the
    /// exclusive lock on `seq`, if the head is still there, and each shard passed still holds
    /// no message and is not the one posts go to (then every number in it was handed out and
    /// its post finished, since posts hold the lock). The empty shard directories go. (Numbers
    /// of delayed messages leave shards that no message reaches before its delay ends: the
    /// head passes them all at once, not one a receive.)
    pub(super) fn advance(&self, first: u64, poll: Duration) -> Result<()> {
        let Some(seq) = self.lock_seq_briefly(poll)? else {
            return Ok(()); // busy: the next receiver moves it
        };
        let last = self.last_seq(&seq)?;
        let head = self.read_head();
        let newest = shard_of(last + 1);
        if head != Some(first) || first >= newest {
            return Ok(());
        }
        let mut head = first;
        let mut missing = 0;
        while head < newest {
            if missing >= MAX_MISSING {
                head = self.skip_gap(head, newest)?.min(newest);
                missing = 0;
                continue;
            }
            // Not a directory fsync made (a link, a file) holds no message either: passed.
            match self.shard(head) {
                Ok(Some(shard)) => {
                    if !queued_names(&shard)?.0.is_empty() {
                        break;
                    }
                    let _ = self.q.rmdir(shard_name(head)); // not if someone put else there
                    missing = 0;
                }
                _ => missing += 1,
            }
            head += SHARD;
        }
        if head != first {
            self.write_head(head, false)?;
        }
        Ok(())
    }

    /// Put claimed message `claimed` back in the queue as `name`, in its shard, under the
    /// exclusive lock on `seq`, lowering the head to it first (durably) if it lies behind.
    /// Waits for the lock a moment at most: if it is busy the claim stays (`false`), and the
    /// next receiver returns it (its receiver's registration is gone by then).
    pub(super) fn requeue(&self, claimed: &str, name: &str, poll: Duration) -> Result<bool> {
        self.queue_from(&self.claimed, claimed, name, poll, || {})
    }

    /// [`requeue`](Self::requeue) a dead receiver's claim as lost, with `record` (its `lost`
    /// line in the history) run under the lock, before the move and only if the claim is
    /// still there: whoever returns it writes the line, once, before another receiver can take
    /// it again and fail it (whose line must come after).
    pub(super) fn requeue_lost(
        &self,
        claimed: &str,
        name: &str,
        poll: Duration,
        record: impl FnOnce(),
    ) -> Result<bool> {
        self.queue_from(&self.claimed, claimed, name, poll, || {
            if self.claimed.stat(claimed).is_ok() {
                record();
            }
        })
    }

    /// Move entry `from` of directory `dir` (`claimed`, `dead`, `delayed`) into the queue as
    /// `name`, at the level its name says ([`requeue`](Self::requeue)); `before_move` runs under
    /// the lock.
    pub(super) fn queue_from(
        &self,
        dir: &Dir,
        from: &str,
        name: &str,
        poll: Duration,
        before_move: impl FnOnce(),
    ) -> Result<bool> {
        let Some(parsed) = MessageName::parse(name) else {
            return Ok(false);
        };
        let Some(_seq) = self.lock_seq_briefly(poll)? else {
            return Ok(false);
        };
        let first = shard_of(parsed.seq);
        let level = self.made_at(parsed.priority)?;
        if level.read_head().is_some_and(|h| h > first) {
            level.write_head(first, true)?;
        }
        let shard = level.shard_to_fill(first)?;
        before_move();
        match dir.rename(from, &shard, name) {
            // Durable before it is reported: a failure counted, a dead letter put back, must
            // stay so after a power cut.
            Ok(()) => flush(&shard).map(|()| true),
            // Another process moved it first (two receivers promoting the same due message;
            // the shard cannot go meanwhile: we hold the lock that removing it takes).
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(Error::io(&dir.join(from), "cannot return message", e)),
        }
    }

    /// The dead letters' directory, `B/dead`: `None` if missing.
    pub(super) fn dead(&self) -> Result<Option<Dir>> {
        self.top.open_sub("dead")
    }

    /// Move claimed message `claimed` to the dead letters as `name`: it failed as often as
    /// the receiver's retries allow. Not queued, so no lock is needed.
    pub(super) fn bury(&self, claimed: &str, name: &str) -> Result<()> {
        let (dead, made) = match self.dead()? {
            Some(dead) => (dead, false),
            None => (self.top.create_sub("dead")?, true),
        };
        durable_home(&self.top, &dead, made)?;
        self.claimed
            .rename(claimed, &dead, name)
            .map_err(|e| Error::io(&self.claimed.join(claimed), "cannot move message", e))?;
        flush(&dead) // a dead letter stays dead after a power cut (and its job is not lost)
    }
}

impl Layout {
    /// The levels that exist (highest first, level 0 last: [`present`](Self::present)), each
    /// with its head and the last sequence number, read together under one shared lock on
    /// `seq`; the head of a level rebuilt from its directory first where it needs it.
    pub(super) fn current_levels(&self, poll: Duration) -> Result<Outcome<Vec<(Layout, Ends)>>> {
        let mut rebuilt = false;
        loop {
            let seq = wait::acquired!(self.lock_seq(Mode::Shared, poll, self.deadline)?);
            let last = self.last_seq(&seq)?;
            let present = self.present()?;
            let mut found = Vec::with_capacity(present.len());
            let mut torn = Vec::new();
            for level in present {
                match level.ends_at(last) {
                    Some(ends) => found.push((level, ends)),
                    None => torn.push(level),
                }
            }
            drop(seq);
            if torn.is_empty() {
                return Ok(Outcome::Acquired(found));
            }
            if rebuilt {
                return Err(Error::new(
                    &torn[0].head_in.join("head"),
                    ErrorKind::Corrupt,
                    "is not a head fsync wrote, even after rebuilding it",
                ));
            }
            for level in torn {
                wait::acquired!(level.rebuild(poll, self.deadline)?);
            }
            rebuilt = true;
        }
    }
}

/// What wakes a thread that waits on a mailbox (a receiver, `wait_empty`): a post into the
/// shard posts go to (made if missing, so that it can be watched), a message coming or going in
/// `claimed`, a bucket made or removed in `delayed`, a message held back in a bucket whose
/// minute has begun, and the first delay's due time; and while living receivers
/// hold claims, the last close of a registration in `recv` (its receiver, and the job it passed
/// its claim down to, exited: however they died, the kernel closes their files), so that a
/// dead receiver's claim goes back to the queue at once, without anything else touching the
/// mailbox. The shard posts go to in each level's directory that exists; the queue's directory
/// only while a level's is missing (its `mkdir` is the first post at that level): watching a
/// directory costs the kernel a pass over its entries, a shard per hundred messages, but a
/// waiter arms only once it found nothing, when the empty shards are gone. Armed before the
/// look that precedes a sleep, so that no change between is missed; armed anew when what it
/// watches changes.
///
/// Closes are seen with inotify only (dnotify does not report them), whose instance costs its
/// process a few milliseconds at exit (`platform::notify`): so only while claims are held.
#[derive(Default)]
pub(super) struct Waker {
    armed: Option<(Watched, DirWatch)>,
}

/// What a [`Waker`] watches: the shard posts go to (in each level that exists), and whether
/// registrations' closes too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Watched {
    pub(super) shard: u64,
    /// The levels above 0 whose directories exist (the queue's directory is watched for the
    /// others to be made).
    pub(super) levels: Vec<u8>,
    /// The buckets of delayed messages begun ([`delayed::Pending::begun`]).
    pub(super) begun: Vec<u64>,
    pub(super) closes: bool,
}

impl super::claim::Next {
    /// What a waiter must watch to see what comes next.
    pub(super) fn watched(&self) -> Watched {
        Watched {
            shard: self.shard,
            levels: self.levels.clone(),
            begun: self.begun.clone(),
            closes: self.claims,
        }
    }
}

impl Waker {
    /// What the watch is armed for, if it is.
    pub(super) fn armed_for(&self) -> Option<Watched> {
        self.armed.as_ref().map(|(at, _)| at.clone())
    }

    /// Watch for what comes next, as `what` says.
    pub(super) fn arm(&mut self, l: &Layout, what: Watched) -> io::Result<()> {
        if self.armed_for().as_ref() == Some(&what) {
            return Ok(());
        }
        self.armed = None; // an inotify instance goes before the next is made
        let mut w = match what.closes {
            true => DirWatch::by_inotify(&l.claimed.pinned())?,
            false => DirWatch::new(&l.claimed.pinned())?,
        };
        w.add(&l.delayed.pinned())?;
        for first in &what.begun {
            // One removed since is made again in `delayed`, which is watched.
            if let Ok(Some(bucket)) = l.delayed.open_sub(&delayed::bucket_name(*first)) {
                w.add(&bucket.pinned())?;
            }
        }
        // The queue's directory too while a level's directory is missing: its `mkdir` is the
        // first post at that level.
        let mut whole = what.levels.len() < usize::from(MAX_PRIORITY);
        for p in what.levels.iter().copied().chain([0]) {
            let level = l.at(p).ok().flatten();
            match level.as_ref().map(|level| level.create_shard(what.shard)) {
                Some(Ok(shard)) => w.add(&shard.pinned())?,
                // Not made (a mailbox we may not write, a name taken): the level's directory,
                // or the queue's for level 0 (and a level gone, which fsync never removes).
                _ => match (p, level) {
                    (1.., Some(level)) => w.add(&level.q.pinned())?,
                    _ => whole = true,
                },
            }
        }
        if whole {
            w.add(&l.levels.q().pinned())?;
        }
        if what.closes {
            w.add_closes(&l.recv.pinned())?;
        }
        self.armed = Some((what, w));
        Ok(())
    }

    /// Sleep until the watch sees a change, or until `due` (microseconds since the epoch: the
    /// first delayed message) at the latest. A registration closed for the last time is
    /// waited for until its lock is released too (the kernel reports the close first, and
    /// releases the lock a moment after): the look that follows sees its owner dead.
    pub(super) fn sleep(&self, l: &Layout, due: Option<u64>) -> io::Result<()> {
        let (_, watch) = self.armed.as_ref().expect("armed before the look");
        let limit =
            due.map(|due| Duration::from_micros(due.saturating_sub(procinfo::now_micros())));
        for name in watch.wait_closes(limit)? {
            let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
                continue;
            };
            if let Ok(Some(file)) = l.recv.open(name, false) {
                released(&file, RELEASE_GRACE)?;
            }
        }
        Ok(())
    }
}

/// Wait a moment for the lock on a registration just closed for the last time to go: the
/// kernel releases it microseconds after it reports the close (`__fput` notifies, then
/// removes the file's locks), and no event follows the release. Bounded by `grace`
/// ([`RELEASE_GRACE`]), since a reader of the registration may hold a lock of its own on it.
/// The watch is not read meanwhile, so that no other close it reports is lost.
fn released(file: &File, grace: Duration) -> io::Result<()> {
    let start = std::time::Instant::now();
    while !lock::flock(file, Mode::Shared, false)? && start.elapsed() < grace {
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

/// How long a waiter gives a closed registration's lock to go ([`released`]).
const RELEASE_GRACE: Duration = Duration::from_millis(100);

/// [`Layout::skip_gap`] for the queue's directory `q`.
pub(super) fn skip_gap_in(q: &Dir, from: u64, last: u64) -> Result<u64> {
    let entries = q
        .entries()
        .map_err(|e| pfs::explain_open_error(q.path(), "cannot list queue", e))?;
    let next = (entries.iter())
        .filter_map(|(name, _)| parse_shard(name))
        .filter(|&first| first >= from && first <= last)
        .min();
    Ok(next.unwrap_or(last.saturating_add(SHARD)))
}

/// Walk the shards of the level directory `q` that a listing looks in, oldest first, without
/// a lock: from `oldest` (the oldest its listing found; `None`: none, and nothing is walked)
/// to the one the post after `last` goes to, which may hold a message already (a post under
/// way). `each` gets each shard's first number and what opening it gave: a shard missing is
/// passed over, and past [`MAX_MISSING`] of them in a row the walk lists `q` for the next
/// one instead of looking for each by number (a `seq` planted far ahead).
pub(super) fn walk_shards(
    q: &Dir,
    oldest: Option<u64>,
    last: u64,
    mut each: impl FnMut(u64, Result<Dir>) -> Result<()>,
) -> Result<()> {
    let newest = shard_of(last.saturating_add(1));
    let mut first = oldest.unwrap_or(u64::MAX);
    let mut missing = 0;
    while first <= newest {
        if missing >= MAX_MISSING {
            first = skip_gap_in(q, first, newest)?;
            missing = 0;
            continue;
        }
        match q.open_sub(&shard_name(first)) {
            Ok(None) => missing += 1,
            Ok(Some(shard)) => {
                missing = 0;
                each(first, Ok(shard))?;
            }
            Err(e) => {
                missing = 0;
                each(first, Err(e))?;
            }
        }
        first += SHARD;
    }
    Ok(())
}

/// How many missing shards in a row a walk looks for by number before it lists the queue's
/// directory instead ([`Layout::skip_gap`]): the head is moved past empty shards as they are
/// found, so a queue's shards lie together but for the few being emptied.
pub(super) const MAX_MISSING: u32 = 4;

/// How long returning a message or moving the head waits for the lock on `seq`, which posts
/// hold for moments: past it, the next receiver does it.
const LOCK_GRACE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;
