//! Listing a mailbox: its queued messages shard by shard, oldest first, each handed on as it is
//! found, so that listing a queue of any depth takes the memory of one shard.

use std::{
    os::unix::fs::FileExt,
    time::{Duration, SystemTime},
};

use crate::{
    error::Result,
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
    },
};

use super::{
    Listing, MAX_PRIORITY, Mailbox, MessageName, Names, Queued, Skipped, batch, census, delayed,
    held, levels, queue, queued_names, shard_name, skip, sort_entries,
};

/// What a listing finds, one entry at a time ([`Mailbox::scan`](crate::Mailbox::scan)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A message a receiver would take (in the order receivers take them).
    Queued(Queued),
    /// An entry receivers pass over.
    Skipped(Skipped),
    /// A dead letter: a message whose deliveries failed as often as its receivers allow.
    Dead(Queued),
    /// A message being received: its job runs (or its receiver died, and the next receiver
    /// returns it to the queue).
    Running {
        /// The message.
        message: Queued,
        /// The receiver's host.
        host: String,
        /// The receiver's process id.
        pid: u32,
        /// Which delivery this is (1 the first).
        attempt: u32,
        /// When it was taken.
        since: SystemTime,
    },
    /// A message held back until `due`: posted with a [`delay`](crate::Mailbox::delay), or a failed
    /// job's [`backoff`](crate::Mailbox::backoff).
    Delayed {
        /// The message (its `age` counts from when it was posted).
        message: Queued,
        /// When it is due.
        due: SystemTime,
    },
}

impl Mailbox {
    /// The queued messages, oldest first (synchronous ones whose sender is gone are left
    /// out), the number being received, and the entries receivers pass over. Creates nothing;
    /// a path that is no mailbox is an error of kind [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    /// Holds the whole queue in memory: [`scan`](Self::scan) hands on one entry at a time.
    pub fn list(&self) -> Result<Listing> {
        let mut out = Listing::default();
        out.claimed = self.scan(|entry| match entry {
            Entry::Queued(q) => out.queued.push(q),
            Entry::Skipped(s) => out.skipped.push(s),
            Entry::Dead(_) | Entry::Delayed { .. } | Entry::Running { .. } => {}
        })?;
        Ok(out)
    }

    /// Hand each queued message to `each`, oldest first, as it is found, with the entries
    /// receivers pass over where they are met; returns the number of messages being received.
    /// Memory does not grow with the queue. The delayed messages come after the queued ones,
    /// as [`Entry::Delayed`], soonest due first, and the dead letters ([`Mailbox::retries`](crate::Mailbox::retries))
    /// last, as [`Entry::Dead`]. Creates nothing, and takes no lock: a message posted or received
    /// meanwhile may or may not be seen.
    pub fn scan(&self, mut each: impl FnMut(Entry)) -> Result<usize> {
        let top = self.existing_top()?;
        let list_err = |d: &Dir, e| pfs::explain_open_error(d.path(), "cannot list mailbox", e);
        top.entries().map_err(|e| list_err(&top, e))?;
        let Some(q) = top.open_sub("q")? else {
            return Ok(0); // removed meanwhile
        };
        let senders = top.open_sub("senders")?;
        let claimed_dir = top.open_sub("claimed")?;
        let claims = match &claimed_dir {
            Some(claimed) => claimed.entries().map_err(|e| list_err(claimed, e))?,
            None => Vec::new(),
        };
        let claimed = claims.len();
        let emit = |dir: &Dir, names: Names, each: &mut dyn FnMut(Entry)| {
            for (name, parsed) in names {
                if parsed.sync && !senders.as_ref().is_some_and(|s| held(s, &parsed.uniq)) {
                    continue;
                }
                if let Some(entry) = queued_entry(dir, name, parsed) {
                    each(entry);
                }
            }
        };
        // The messages of batches whose posters died before they queued them (`batch.rs`).
        batch::scan_batches(&top, &mut |dir, file, parsed| {
            if let Some(Entry::Queued(mut message)) = queued_entry(dir, file, parsed.clone()) {
                message.name = parsed.render();
                each(Entry::Queued(message));
            }
        });
        let read = |dir: &Dir, name: &str| {
            let f = dir.open(name, false).ok()??;
            let mut buf = [0u8; 64];
            let n = f.read_at(&mut buf, 0).ok()?;
            Some(String::from_utf8_lossy(&buf[..n]).into_owned())
        };
        let last = read(&top, "seq")
            .and_then(|t| queue::parse_seq(&t).ok())
            .unwrap_or(0);
        // The levels, highest first, as receivers take them; level 0 (`q` itself) last.
        let mut levels: Vec<(u8, Dir)> = Vec::new();
        for p in (1..=MAX_PRIORITY).rev() {
            match q.open_sub(&levels::level_name(p)) {
                Ok(Some(dir)) => levels.push((p, dir)),
                Ok(None) => {}
                Err(e) => each(Entry::Skipped(skip(&levels::level_name(p), &e))),
            }
        }
        for (p, dir) in levels.iter().map(|(p, d)| (*p, d)).chain([(0, &q)]) {
            // Entries are named by their path in the queue's directory.
            let prefix = match p {
                0 => String::new(),
                p => format!("{}/", levels::level_name(p)),
            };
            let mut each = |entry| match entry {
                Entry::Skipped(mut s) => {
                    s.name.insert_str(0, &prefix);
                    each(Entry::Skipped(s));
                }
                other => each(other),
            };
            // The level's own directory: shards, and messages of the layout before shards (all
            // of a mailbox an older fsync wrote; or posted since by one), which come first.
            let (unsharded, oldest) = top_level(dir, p)?;
            let (names, bad) = unsharded;
            for s in bad {
                each(Entry::Skipped(s));
            }
            emit(dir, names, &mut each);
            // Then the shards, from the oldest there is to where posts go. The head is not
            // read: a walk from a head before that shard meets only missing ones until it, and
            // one from a head rewritten past it would miss messages.
            queue::walk_shards(dir, oldest, last, |first, found| {
                let shard = match found {
                    Ok(shard) => shard,
                    Err(e) => {
                        each(Entry::Skipped(skip(&shard_name(first), &e)));
                        return Ok(());
                    }
                };
                let mut each = |entry| match entry {
                    Entry::Skipped(s) => each(Entry::Skipped(queue::in_shard(first, s))),
                    other => each(other),
                };
                let (names, bad) = queued_names(&shard)?;
                for s in bad {
                    each(Entry::Skipped(s));
                }
                emit(&shard, names, &mut each);
                Ok(())
            })?;
        }
        if let Some(dir) = &claimed_dir {
            running(dir, claims, &mut each);
        }
        if let Some(delayed) = top.open_sub("delayed")? {
            delayed::scan(&delayed, |(due, entry, name, dir)| {
                if let Some(Entry::Queued(mut message)) = queued_entry(dir, entry, name.clone()) {
                    message.name = name.render();
                    let due = SystemTime::UNIX_EPOCH + Duration::from_micros(due);
                    each(Entry::Delayed { message, due });
                }
            })?;
        }
        if let Some(dead) = top.open_sub("dead")? {
            let (names, _) = queued_names(&dead)?;
            for (name, parsed) in names {
                if let Some(Entry::Queued(q)) = queued_entry(&dead, name, parsed) {
                    each(Entry::Dead(q));
                }
            }
        }
        Ok(claimed)
    }
}

/// The messages being received, in `claimed` as `NAME~RID`, oldest first.
fn running(dir: &Dir, claims: Vec<(String, Option<Kind>)>, each: &mut dyn FnMut(Entry)) {
    let mut found: Vec<(census::RunningJob, String)> = (claims.into_iter())
        .filter_map(|(entry, _)| Some((census::RunningJob::of(&entry, dir)?, entry)))
        .collect();
    found.sort_by(|a, b| (a.0.id, &a.1).cmp(&(b.0.id, &b.1)));
    for (job, entry) in found {
        let Some(parsed) = (entry.rsplit_once('~')).and_then(|(name, _)| MessageName::parse(name))
        else {
            continue;
        };
        let name = parsed.render();
        let Some(Entry::Queued(mut message)) = queued_entry(dir, entry, parsed) else {
            continue;
        };
        message.name = name;
        each(Entry::Running {
            message,
            host: job.host,
            pid: job.pid,
            attempt: job.attempt,
            since: job.since,
        });
    }
}

/// A level's own directory (`q`, or `q/pP` for level `p`): its messages of the layout before
/// shards (oldest first), the entries that are neither those nor shards (nor the levels'
/// directories in `q`, nor the head in a level's), and the oldest shard there.
fn top_level(q: &Dir, p: u8) -> Result<(Sorted, Option<u64>)> {
    let entries = q
        .entries()
        .map_err(|e| pfs::explain_open_error(q.path(), "cannot list queue", e))?;
    let mut oldest: Option<u64> = None;
    let mut rest = Vec::new();
    for (name, kind) in entries {
        match queue::parse_shard(&name) {
            Some(first) if kind != Some(Kind::File) => {
                oldest = Some(oldest.map_or(first, |o| o.min(first)));
            }
            // Named like a level: listed by the look for the levels if it is none.
            _ if p == 0 && levels::parse_level(&name).is_some() => {}
            _ if p > 0 && name == "head" => {}
            _ => rest.push((name, kind)),
        }
    }
    Ok((sort_entries(q, rest), oldest))
}

/// A directory's messages, oldest first, and the entries that are not messages.
type Sorted = (Names, Vec<Skipped>);

/// A queued message as a listing shows it: `None` if it went meanwhile.
fn queued_entry(dir: &Dir, name: String, parsed: MessageName) -> Option<Entry> {
    let file = match dir.open(&name, false) {
        Ok(Some(f)) => f,
        Ok(None) => return None, // received meanwhile
        Err(e) => return Some(Entry::Skipped(skip(&name, &e))),
    };
    let meta = file.metadata().ok()?;
    let age = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    Some(Entry::Queued(Queued {
        name,
        size: meta.len(),
        age: age.unwrap_or_default(),
        from: parsed.from,
        sync: parsed.sync,
    }))
}

#[cfg(test)]
mod tests {
    use crate::Mailbox;

    /// A listing walks the shards up to the one the next post goes to, which may hold a
    /// message already where `seq` lags behind it (a post under way; a `seq` rebuilt): the
    /// 100th message, the first of a new shard, is listed with `seq` at 100 and at 99.
    /// (Mutants answered: the walk ending at the shard of `seq` less one, or of `seq` itself.)
    #[test]
    fn a_listing_reaches_the_shard_the_next_post_goes_to() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        crate::msg::tests::post_texts(&b, 0..100); // sequence numbers 1 to 100
        assert_eq!(b.list().unwrap().queued.len(), 100);
        std::fs::write(dir.path().join("b/seq"), "99\n").unwrap();
        assert_eq!(b.list().unwrap().queued.len(), 100);
    }

    /// In the queue's directory a level's directory and, in a level's, its head are the
    /// protocol's own; anything else that is no message is listed as passed over, once: a
    /// file named like a shard or a level, a `head` at level 0 (whose head is the mailbox's).
    /// (Mutants answered: each of those tests in `top_level` made constant or turned round.)
    #[test]
    fn a_listing_passes_over_only_what_is_not_the_protocols_own() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("b/q");
        let b = Mailbox::new(dir.path().join("b"));
        let _ = b.post(&mut &b"low"[..]).unwrap();
        let _ = b.clone().priority(2).post(&mut &b"high"[..]).unwrap();
        assert!(q.join("p2/head").is_file());
        for planted in ["00000000000000000500", "p3", "head"] {
            std::fs::write(q.join(planted), "").unwrap();
        }
        let listing = b.list().unwrap();
        let mut skipped: Vec<_> = listing.skipped.iter().map(|s| s.name.as_str()).collect();
        skipped.sort_unstable();
        assert_eq!(skipped, ["00000000000000000500", "head", "p3"]);
        let p3 = listing.skipped.iter().find(|s| s.name == "p3").unwrap();
        assert!(p3.reason.contains("not a directory"), "{}", p3.reason);
        assert_eq!(listing.queued.len(), 2);
    }
}
