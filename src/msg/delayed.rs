/*!
Delayed messages: posted with a delay, or a failed job held back before its next attempt. They
wait in buckets of a minute of due time, so that a receive lists the minutes that hold messages
and opens only those that have begun, however many messages wait (the protocol's section
[*Delays*](super#delays) in [`super`]'s docs; the names and the order of the flushes are in its
sections *Names* and *Durability*).

# On disk

A delayed message is the file `B/delayed/BUCKET/DUE.NAME`: `NAME` is its name in the queue
(`SEQ.UNIQ.FROM.KIND`), `DUE` when it is due, in microseconds since the Unix epoch, and
`BUCKET` is `DUE` rounded down to a multiple of [`SPAN`] (60,000,000: a minute); both in 20
digits. So `delayed/00001767225600000000/` holds the messages due in the first minute of 2026
(UTC), from 1,767,225,600 s after the epoch.

- **Holding a message back** (a post with a delay, under the exclusive lock on `seq` as every
  post; a failed job's backoff, renamed from `claimed`, without it): make the bucket if missing
  (`mkdir`), then rename the file into it. Receivers remove buckets they emptied without a lock
  (`rmdir`, which fails on a bucket that is not empty any more), so a rename that fails with
  `ENOENT` while the file is still there met a bucket removed since it was opened: make it
  again and rename again. Then `delayed` is flushed (the bucket's entry: whoever made the
  bucket, it may not be durable yet) and the bucket, before a post or a failed job's backoff
  returns.
- **Promoting** (each receive, before it looks at the queue): list `delayed`, then in order
  each bucket whose minute has begun (`BUCKET <= now`): move its entries with `DUE <= now` to
  the queue as a returned message goes (to its shard, under the exclusive lock on `seq`,
  lowering the head to it first, keeping `NAME`), then, once its minute has ended, remove the
  bucket (`rmdir`: it stays if anything is left in it; the bucket of the current minute stays
  until it ends, since messages held back now go into it). Stop at the first bucket whose minute has not begun: none of its
  messages is due. Only regular files with one link are moved; anything else in a bucket stays,
  passed over, and so does an entry of `delayed` that is not a directory named as a bucket.
- **Waiting**: a receiver with nothing to take sleeps until the earliest `DUE` left in the
  buckets it opened, or until the first bucket it did not open begins, whichever is sooner,
  and watches `delayed` and every bucket it opened that is still there (armed before the look
  that precedes the sleep). A message held back while it sleeps is then either in a bucket it
  watches, or in a bucket made since (a change in `delayed`), or in one whose minute begins no
  sooner than it wakes: none comes due while it sleeps (`models/msg_delays.pml` checks this).
- **Listing** (`msg list`): the buckets in order, the entries of each by `DUE`, then by name.
- **The layout before buckets** kept delayed messages in `delayed` itself, as `DUE.NAME`. A
  receive that meets such an entry in its listing of `delayed` moves it to the queue if it is
  due, else into its bucket (a regular file with one link; anything else stays, passed over), so
  that the next receive lists it no more. Receivers of that layout do not look into buckets:
  upgrade the receivers of a mailbox before its posters.
*/

use std::{io, time::Duration};

use crate::{
    error::Result,
    platform::{
        dir::{Dir, Kind},
        fs as pfs, procinfo,
    },
};

use super::{Layout, MessageName, flush};

/// How much due time a bucket holds, in microseconds: a minute. A receive lists the name of
/// every bucket, and every entry of the buckets whose minute has begun: long enough that the
/// messages posted with one delay over minutes fill a handful of buckets, short enough that
/// the bucket of the current minute holds only what comes due within it.
pub(super) const SPAN: u64 = 60_000_000;

/// How often holding a message back makes its bucket again after a receiver removed it between
/// the `mkdir` and the rename: every time is a receiver emptying it at that very moment.
const HOLD_TRIES: u32 = 8;

/// The first due time of the bucket that holds `due`.
pub(super) fn bucket_of(due: u64) -> u64 {
    due / SPAN * SPAN
}

/// A bucket directory's name: its first due time, in 20 digits.
pub(super) fn bucket_name(first: u64) -> String {
    format!("{first:020}")
}

/// The bucket a directory name stands for, if it is one.
pub(super) fn parse_bucket(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let first: u64 = name.parse().ok()?;
    first.is_multiple_of(SPAN).then_some(first)
}

/// A delayed entry's name: due at `due` (microseconds since the epoch), message `name`.
pub(super) fn delayed_name(due: u64, name: &str) -> String {
    format!("{due:020}.{name}")
}

/// The due time and message of a delayed entry, if it is one.
pub(super) fn parse_delayed(entry: &str) -> Option<(u64, MessageName)> {
    let (due, name) = entry.split_once('.')?;
    if due.len() != 20 || !due.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((due.parse().ok()?, MessageName::parse(name)?))
}

/// `delay` from now, in microseconds since the epoch.
pub(super) fn due_after(delay: Duration) -> u64 {
    let delay = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
    procinfo::now_micros().saturating_add(delay)
}

/// What is left to wait for once the due messages are promoted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Pending {
    /// When the first message left may come due (microseconds since the epoch): the earliest
    /// due time in the buckets opened, or the start of the first bucket not opened. `None`:
    /// nothing is delayed.
    pub(super) due: Option<u64>,
    /// The buckets opened (their minute has begun) that are still there, in order: a message
    /// put in one may come due before `due`, so a waiter watches them.
    pub(super) begun: Vec<u64>,
}

impl Pending {
    fn due_at(&mut self, due: u64) {
        self.due = Some(self.due.map_or(due, |d| d.min(due)));
    }
}

impl Layout {
    /// Move the delayed messages that are due into the queue (module docs), and entries of the
    /// layout before buckets into their buckets; what is left to wait for.
    pub(super) fn promote(&self, poll: Duration) -> Result<Pending> {
        let entries = self
            .delayed
            .entries()
            .map_err(|e| pfs::explain_open_error(self.delayed.path(), "cannot list", e))?;
        let now = procinfo::now_micros();
        let mut pending = Pending::default();
        let mut buckets = Vec::new();
        for (entry, kind) in entries {
            if kind != Some(Kind::File)
                && let Some(first) = parse_bucket(&entry)
            {
                buckets.push(first);
            } else if kind != Some(Kind::Dir)
                && let Some((due, name)) = parse_delayed(&entry)
            {
                // The layout before buckets: due, to the queue; else into its bucket.
                if due <= now {
                    self.promote_one(&self.delayed, &entry, &name, poll)?;
                    continue;
                }
                pending.due_at(due);
                let regular = (self.delayed.stat(entry.as_str())).is_ok_and(|st| {
                    st.st_nlink == 1 && crate::platform::dir::is_kind(&st, Kind::File)
                });
                if regular {
                    // Another receiver may move it first; if it stays, the next look tries.
                    let _ = self.hold(&self.delayed, &entry, due, &name.render());
                }
            }
        }
        buckets.sort_unstable();
        for first in buckets {
            if first > now {
                pending.due_at(first);
                break;
            }
            // Not a directory fsync made (a link, a file), or one we may not list: passed over.
            let Ok(Some(bucket)) = self.delayed.open_sub(&bucket_name(first)) else {
                continue;
            };
            let Ok(entries) = bucket.entries() else {
                continue;
            };
            self.promote_bucket(&bucket, entries, now, poll, &mut pending)?;
            // It stays if anything is left in it (a message due later, what fsync never
            // makes, a message put there since), and while its minute lasts: a failed job
            // held back now goes into it, and removing it under that job's receiver at each
            // of its tries (woken by its `mkdir`) could outlast them. A waiter watches it.
            let ended = first.saturating_add(SPAN) <= now;
            if !ended || self.delayed.rmdir(bucket_name(first)).is_err() {
                pending.begun.push(first);
            }
        }
        Ok(pending)
    }

    /// Move the due messages of `bucket` (whose `entries` these are) to the queue, and note
    /// the others in `pending`.
    fn promote_bucket(
        &self,
        bucket: &Dir,
        entries: Vec<(String, Option<Kind>)>,
        now: u64,
        poll: Duration,
        pending: &mut Pending,
    ) -> Result<()> {
        for (entry, kind) in entries {
            if kind == Some(Kind::Dir) {
                continue;
            }
            match parse_delayed(&entry) {
                Some((due, name)) if due <= now => self.promote_one(bucket, &entry, &name, poll)?,
                Some((due, _)) => pending.due_at(due),
                None => {}
            }
        }
        Ok(())
    }

    /// Move delayed entry `entry` of `dir`, message `name`, to the queue: only a regular file
    /// with one link (what fsync made, not a link planted there); anything else stays, passed
    /// over, and so does a message whose queue's lock stays busy (the next receive moves it).
    fn promote_one(
        &self,
        dir: &Dir,
        entry: &str,
        name: &MessageName,
        poll: Duration,
    ) -> Result<()> {
        // Missing: another receiver moved it.
        let Ok(Some((file, meta))) = dir.open_stat(entry, false) else {
            return Ok(());
        };
        if dir.sole_link(entry, &file, Some(&meta)).unwrap_or(false) {
            self.queue_from(dir, entry, &name.render(), poll, || {})?;
        }
        Ok(())
    }

    /// Rename entry `from` of `dir` into the bucket of `due`, as message `name` due then:
    /// the bucket, whose entry in `delayed` is durable (flush the bucket for the message to
    /// survive a crash). A bucket removed between its opening and the rename (a receiver found
    /// it empty) is made again.
    pub(super) fn hold(&self, dir: &Dir, from: &str, due: u64, name: &str) -> Result<Dir> {
        let bucket = bucket_name(bucket_of(due));
        let entry = delayed_name(due, name);
        let mut tries = 1;
        loop {
            let opened = match self.delayed.open_sub(&bucket)? {
                Some(held) => Ok(Some(held)),
                None => self.delayed.create_sub(&bucket).map(Some),
            };
            // Made, then removed by a receiver that found it empty before we opened it.
            let held = match opened {
                Ok(Some(held)) => held,
                Ok(None) | Err(_) if tries < HOLD_TRIES && self.delayed.stat(&bucket).is_err() => {
                    tries += 1;
                    continue;
                }
                Ok(None) => return Err(self.delayed.wrong_kind(&bucket, Kind::Dir)),
                Err(e) => return Err(e),
            };
            match dir.rename(from, &held, &entry) {
                // The bucket's entry in `delayed` made durable, whoever made the bucket: not
                // before the rename (`durable_home`), where a flush would widen the window in
                // which a receiver removes the bucket, empty, to a flush's length at every try.
                Ok(()) => return flush(&self.delayed).map(|()| held),
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        && tries < HOLD_TRIES
                        && dir.stat(from).is_ok() =>
                {
                    tries += 1;
                }
                Err(e) => {
                    let shown = held.join(&entry);
                    return Err(pfs::explain_open_error(
                        &shown,
                        "cannot hold message back",
                        e,
                    ));
                }
            }
        }
    }

    /// Hold claimed message `claimed` back until `due`, as `name`: a failed job's backoff.
    pub(super) fn delay_claimed(&self, claimed: &str, name: &str, due: u64) -> Result<()> {
        // Durable before the failure is reported: a power cut must not undo the delay (nor the
        // failure it counts).
        flush(&self.hold(&self.claimed, claimed, due, name)?)
    }

    /// Whether a delayed entry's name (`DUE.NAME`) satisfies `want`: in `delayed` itself (the
    /// layout before buckets) or in a bucket, soonest buckets first, each read no further than
    /// the first that does.
    pub(super) fn any_delayed(&self, want: impl FnMut(&str) -> bool) -> io::Result<bool> {
        any_delayed_in(&self.delayed, want)
    }
}

/// [`Layout::any_delayed`] in the directory `delayed`.
pub(super) fn any_delayed_in(
    delayed: &Dir,
    mut want: impl FnMut(&str) -> bool,
) -> io::Result<bool> {
    {
        let mut buckets = Vec::new();
        for (entry, kind) in delayed.entries()? {
            // A bucket's name is no delayed entry's, and what is not a directory is opened
            // as none below.
            match parse_bucket(&entry) {
                Some(first) => buckets.push(first),
                None if kind != Some(Kind::Dir) && want(&entry) => return Ok(true),
                None => {}
            }
        }
        buckets.sort_unstable();
        for first in buckets {
            if let Ok(Some(bucket)) = delayed.open_sub(&bucket_name(first))
                && bucket.any_entry(&mut want)?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// A delayed message as a listing finds it: due then, its entry in `dir` (its bucket, or
/// `delayed` itself), its name in the queue.
pub(super) type Held<'a> = (u64, String, MessageName, &'a Dir);

/// Hand each delayed message of `delayed` to `each`, soonest due first, holding one bucket in
/// memory at a time (and the entries of the layout before buckets, which are few once a
/// receive has moved them).
pub(super) fn scan(delayed: &Dir, mut each: impl FnMut(Held<'_>)) -> Result<()> {
    let list = |d: &Dir| {
        d.entries()
            .map_err(|e| pfs::explain_open_error(d.path(), "cannot list mailbox", e))
    };
    let mut flat = Vec::new();
    let mut buckets = Vec::new();
    for (entry, kind) in list(delayed)? {
        if kind != Some(Kind::File)
            && let Some(first) = parse_bucket(&entry)
        {
            buckets.push(first);
        } else if let Some((due, name)) = parse_delayed(&entry) {
            flat.push((due, entry, name));
        }
    }
    buckets.sort_unstable();
    flat.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut flat = flat.into_iter().peekable();
    for first in buckets {
        let Ok(Some(bucket)) = delayed.open_sub(&bucket_name(first)) else {
            continue;
        };
        let mut held: Vec<(u64, String, MessageName, bool)> = Vec::new();
        for (entry, kind) in list(&bucket)? {
            if kind != Some(Kind::Dir)
                && let Some((due, name)) = parse_delayed(&entry)
            {
                held.push((due, entry, name, true));
            }
        }
        // Those of the layout before buckets that are due before this bucket ends.
        while let Some((due, entry, name)) = flat.next_if(|f| f.0 < first.saturating_add(SPAN)) {
            held.push((due, entry, name, false));
        }
        held.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (due, entry, name, in_bucket) in held {
            each((due, entry, name, if in_bucket { &bucket } else { delayed }));
        }
    }
    for (due, entry, name) in flat {
        each((due, entry, name, delayed));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
