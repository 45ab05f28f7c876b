//! How many jobs a mailbox holds in each state, and which run where: what a progress line
//! (`msg work` on a terminal) and `msg watch` show, cheap enough to take once a second at any
//! depth.
//!
//! A census reads names only: the shards of the queue, at each priority level, from the oldest
//! to the one posts go to (walked as receivers walk them, so no more shards than there are: at
//! a depth of 100,000, 1,000 directories of 100 names), `claimed` (one status each: when it was
//! claimed), the buckets of `delayed` and `dead`. It opens no message and takes no lock: what moves
//! meanwhile may be counted twice or not at all, as in [`Mailbox::scan`](crate::Mailbox::scan). A claim's name is
//! `NAME~RID`, `RID` the receiver's `HOST-PID-RANDOM`: so a running job shows its worker's host
//! and process (the process that runs it is that worker's child) and, from `NAME`'s counts,
//! its attempt; it is running since the claim's rename (the entry's change time).

use std::{
    os::unix::fs::FileExt,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, Result},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        notify::DirWatch,
    },
    wait::{self, Deadline, Outcome, Wait},
};

use super::{Attempt, Mailbox, MessageName, delayed, levels, queue, shard_name};

/// What [`Mailbox::census`](crate::Mailbox::census) counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Census {
    /// Messages queued (synchronous ones included).
    pub queued: u64,
    /// Messages held back ([`Mailbox::delay`](crate::Mailbox::delay), a failed job's backoff).
    pub delayed: u64,
    /// Dead letters.
    pub dead: u64,
    /// The messages being received (jobs running), oldest claim first.
    pub running: Vec<RunningJob>,
    /// The last id handed out (`seq`): how many messages were ever posted, so that two
    /// censuses tell how many jobs left the mailbox between them (`msg watch`'s rate).
    pub last_id: u64,
}

/// A message being received, as [`Mailbox::census`](crate::Mailbox::census) sees its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunningJob {
    /// Its id.
    pub id: u64,
    /// Which delivery this is (1 for the first).
    pub attempt: u32,
    /// The receiver's host (as in message names), empty if its name does not say.
    pub host: String,
    /// The receiver's process (the job is its child), 0 if its name does not say.
    pub pid: u32,
    /// When it was claimed.
    pub since: SystemTime,
}

/// The messages queued in the level directory `q` (level 0's `q` or a `q/pP`), `last` the
/// last id handed out: those at its top (a level made before shards) and in its shards from
/// the oldest to the one posts go to, walked as a listing walks them
/// ([`queue::walk_shards`]). With the names of the priority levels' directories found in it.
fn count_level(
    q: &Dir,
    last: u64,
    count: &dyn Fn(&Dir) -> Result<u64>,
) -> Result<(u64, Vec<String>)> {
    let list_err = |e| pfs::explain_open_error(q.path(), "cannot list mailbox", e);
    let (mut queued, mut levels) = (0, Vec::new());
    let mut oldest: Option<u64> = None;
    for (name, kind) in q.entries().map_err(list_err)? {
        match queue::parse_shard(&name) {
            Some(first) if kind != Some(Kind::File) => {
                oldest = Some(oldest.map_or(first, |o| o.min(first)));
            }
            _ if levels::parse_level(&name).is_some() && kind != Some(Kind::File) => {
                levels.push(name);
            }
            _ => queued += u64::from(MessageName::parse(&name).is_some()),
        }
    }
    queue::walk_shards(q, oldest, last, |_, shard| {
        queued += match shard {
            Ok(shard) => count(&shard)?,
            Err(_) => 0,
        };
        Ok(())
    })?;
    Ok((queued, levels))
}

impl RunningJob {
    /// The job claimed as `entry` (`NAME~RID`) in `claimed`.
    pub(super) fn of(entry: &str, claimed: &Dir) -> Option<RunningJob> {
        let (name, rid) = entry.rsplit_once('~')?;
        let name = MessageName::parse(name)?;
        let worker = Attempt::lost_with(0, rid);
        let since = claimed.stat(entry).ok().map_or(SystemTime::now(), |st| {
            let at = Duration::new(st.st_ctime.max(0) as u64, st.st_ctime_nsec.max(0) as u32);
            SystemTime::UNIX_EPOCH + at
        });
        Some(RunningJob {
            id: name.seq,
            attempt: name.failed.saturating_add(name.lost).saturating_add(1),
            host: worker.as_ref().map_or_else(String::new, |w| w.host.clone()),
            pid: worker.map_or(0, |w| w.pid),
            since,
        })
    }
}

impl Mailbox {
    /// Count the mailbox's messages in each state, and list those being received (module
    /// docs of `census`): by names only, without a lock. Creates nothing; a path that is no
    /// mailbox is an error of kind [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn census(&self) -> Result<Census> {
        let top = self.existing_top()?;
        let list_err = |d: &Dir, e| pfs::explain_open_error(d.path(), "cannot list mailbox", e);
        let count = |d: &Dir| -> Result<u64> {
            let entries = d.entries().map_err(|e| list_err(d, e))?;
            let messages = (entries.iter())
                .filter(|(n, k)| *k != Some(Kind::Dir) && MessageName::parse(n).is_some());
            Ok(messages.count() as u64)
        };
        let mut census = Census::default();
        let Some(q) = top.open_sub("q")? else {
            return Ok(census);
        };
        let read = |d: &Dir, name: &str| {
            let f = d.open(name, false).ok()??;
            let mut buf = [0u8; 64];
            let n = f.read_at(&mut buf, 0).ok()?;
            Some(String::from_utf8_lossy(&buf[..n]).into_owned())
        };
        let last = read(&top, "seq")
            .and_then(|t| queue::parse_seq(&t).ok())
            .unwrap_or(0);
        census.last_id = last;
        // Level 0 (`q`), then each priority level (`q/pP`).
        let (queued, levels) = count_level(&q, last, &count)?;
        census.queued += queued;
        for name in levels {
            if let Ok(Some(level)) = q.open_sub(&name) {
                census.queued += count_level(&level, last, &count)?.0;
            }
        }
        if let Some(claimed) = top.open_sub("claimed")? {
            let entries = claimed.entries().map_err(|e| list_err(&claimed, e))?;
            census.running = (entries.iter())
                .filter_map(|(entry, _)| RunningJob::of(entry, &claimed))
                .collect();
            census.running.sort_by_key(|r| (r.since, r.id));
        }
        if let Some(delayed) = top.open_sub("delayed")? {
            delayed::scan(&delayed, |_| census.delayed += 1)?;
        }
        if let Some(dead) = top.open_sub("dead")? {
            census.dead = count(&dead)?;
        }
        Ok(census)
    }

    /// Wait until the mailbox may have changed (a post, a receive, a job's end, a delay's
    /// move: `q`, its newest shard, `claimed` or `delayed` changed here), up to `timeout`:
    /// the pause between two looks of a watch (`msg watch`), `Acquired` on a change. Other
    /// hosts' changes on a network file system wake nobody: a watch there looks again at its
    /// timeout. A cancellation signal ends it.
    pub fn wait_change(&self, timeout: Option<Duration>) -> Result<Outcome<()>> {
        let top = self.existing_top()?;
        let mut dirs = Vec::new();
        for name in ["claimed", "q", "delayed"] {
            if let Some(d) = top.open_sub(name)? {
                dirs.push(d);
            }
        }
        let Some(first) = dirs.first() else {
            return Ok(Outcome::TimedOut);
        };
        let watch_err = |e| Error::io(top.path(), "cannot watch", e);
        let mut watch = DirWatch::new(&first.pinned()).map_err(watch_err)?;
        for d in &dirs[1..] {
            watch.add(&d.pinned()).map_err(watch_err)?;
        }
        if let Some(q) = top.open_sub("q")?
            && let Some(last) = (q.entries().unwrap_or_default().into_iter())
                .filter_map(|(n, _)| queue::parse_shard(&n))
                .max()
            && let Ok(Some(shard)) = q.open_sub(&shard_name(last))
        {
            watch.add(&shard.pinned()).map_err(watch_err)?;
            dirs.push(shard);
        }
        let network = pfs::fs_kind_of_path(&top.pinned()).network;
        let mut woken = false;
        let spec = Wait {
            deadline: Deadline::after(timeout),
            poll: network.then_some(self.poll),
            progress: None,
        };
        let outcome = wait::wait_for(
            spec,
            |_| {},
            |block| -> Result<_, wait::Failed> {
                if block {
                    watch.wait()?;
                    woken = true;
                    return Ok(None);
                }
                Ok(std::mem::take(&mut woken).then_some(()))
            },
        );
        outcome.map_err(|f| f.naming(top.path(), "cannot wait"))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{
        Mailbox,
        msg::{
            Failed,
            tests::{next_text, post_texts},
        },
    };

    /// A census counts what the mailbox holds in each state, at every priority level: messages in
    /// several shards of level 0 and of two levels, one delayed, one dead, one being received.
    /// (Before, the levels' messages were not counted at all.)
    #[test]
    fn a_census_counts_every_state_at_every_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path).retries(0);
        // 1 to die, 1 to be held, then 150 at level 0 (two shards and more), 7 at level 2, 3 at 3.
        post_texts(&b, 0..2);
        let r = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        assert_eq!(r.fail().unwrap(), Failed::Dead);
        let held = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        post_texts(&b, 0..150);
        post_texts(&Mailbox::new(&path).priority(2), 0..7);
        post_texts(&Mailbox::new(&path).priority(3), 0..3);
        let _ = (Mailbox::new(&path).delay(Duration::from_hours(1)))
            .post(&b"later"[..])
            .unwrap();
        let c = b.census().unwrap();
        assert_eq!((c.queued, c.delayed, c.dead), (160, 1, 1), "{c:?}");
        assert_eq!(c.last_id, 2 + 150 + 7 + 3 + 1);
        let running: Vec<_> = c.running.iter().map(|j| (j.id, j.attempt)).collect();
        assert_eq!(running, [(held.id(), 1)]);
        assert_eq!(c.running[0].pid, std::process::id());
        let since = std::time::SystemTime::now().duration_since(c.running[0].since);
        assert!(
            since.unwrap() < Duration::from_mins(10),
            "running since its claim"
        );
        // Taken from the highest level down, each leaves the count.
        for left in (150..160).rev() {
            next_text(&b).unwrap();
            assert_eq!(b.census().unwrap().queued, left);
        }
        drop(held);
    }

    /// A census counts messages only: one of the layout before shards at the top of `q`
    /// counts; a file named like a shard or a level, a file in a shard not named like a
    /// message, and a directory that is no level's (whatever it holds) do not. (Mutants
    /// answered: the tests of what in `q` is a shard, a level or a message made constant or
    /// turned round, the count at the top not added, any file in a shard counted.)
    #[test]
    fn a_census_counts_messages_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        post_texts(&b, 0..2);
        let q = path.join("q");
        let message = format!("{:020}.h-1-9.-.msg", 9);
        std::fs::write(q.join(&message), "of the layout before shards").unwrap();
        for planted in ["00000000000000000500", "p3", "00000000000000000000/junk"] {
            std::fs::write(q.join(planted), "").unwrap();
        }
        std::fs::create_dir(q.join("other")).unwrap();
        std::fs::write(q.join("other").join(&message), "").unwrap();
        assert_eq!(b.census().unwrap().queued, 3);
    }
}
