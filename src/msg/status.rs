//! Jobs by id: where a message is now ([`Mailbox::status`]), the records of finished ones,
//! waiting for them to finish ([`Mailbox::wait_finished`]) and cancelling them
//! ([`Mailbox::cancel`]).
//!
//! # On disk
//!
//! **Finished records**: a delivery that succeeded ([`Received::finish`]), or a job cancelled
//! ([`Mailbox::cancel`], [`Received::cancelled`]), leaves `B/done/SHARD/SEQ` (`SHARD` as in
//! `q/`, `SEQ` in 20 digits), one line `OUTCOME ATTEMPT HOST PID STARTED ENDED\n`, fields
//! separated by one space: `OUTCOME` `exit:0` (it succeeded) or `cancelled`; `ATTEMPT` the
//! delivery it was (0: cancelled before any); `HOST` and `PID` the receiver's (or the
//! canceller's), as in `UNIQ`; `STARTED` when that delivery began and `ENDED` when it ended, in
//! microseconds since the epoch. A success's record is, where it can be, the message's own file:
//! the claim renamed to `done/SHARD/SEQ` (that rename removes the claim: the success), then its
//! payload replaced by the line, so that a job makes no file and frees none (each costs a
//! search of the inode table on ext4 without a journal, a round trip on a network file
//! system); a crash between leaves the payload there, which reads as a success with nothing
//! known of it; then the file gets a new record's mode (the payload's may have been private).
//! Where it cannot be (keeping no records, a payload another user owns or that has other
//! links), and for a cancellation, it is a new file written before the claim is removed: a
//! crash leaves the record of a job that is then delivered again (the later state wins, since a
//! lookup looks in the queue and `claimed` first; and the redelivery removes it). A cancellation's
//! record is flushed, its line and its directory, before the claim is unlinked, and `claimed`
//! after (which makes the unlink durable). A success's is not flushed on its own: a
//! flush is a device cache flush, and one more per job doubled a job's cost on a virtio disk
//! (BENCHMARKS.md 41). Where the file system commits metadata in order (ext4 and
//! XFS: one journal transaction holds the record and the claim's removal, which is flushed
//! before the success is reported) it survives a power cut all the same; elsewhere a power cut
//! may take the record back, never the success (the job is not run again): its status is then
//! unknown, as for a record pruned. A record whose line does not parse (its line lost in a
//! crash) reads as a success, with nothing known of it but when its file was written. A
//! record is kept while its shard is younger than the receiver's [`keep`](Mailbox::keep)
//! ([`DEFAULT_KEEP`]): a receiver that makes a new shard of records removes the shards of
//! records and of job output (`B/output/SHARD`) not written to for longer, and what killed
//! processes left half made as long ago (`src/msg/prune.rs`); with a keep of zero, nothing is
//! recorded and nothing removed. A record is read as a record, never an instruction: a line
//! that does not parse says only "finished".
//!
//! **Cancel requests**: `B/cancel/SEQ` (an empty file, flushed) asks whoever runs job `SEQ` to
//! stop it: the worker stops the job's process group and records it cancelled
//! ([`Received::cancelled`]), and a receiver that claims a message with a request records it
//! cancelled at once instead of delivering it. Whoever records it removes the request.
//!
//! **Lookup** ([`Mailbox::status`]) never lists the queue: under a shared lock on `seq` (messages
//! then move only forwards: the protocol's section [*Locks*](super#locks) in [`super`]'s docs)
//! it looks at the one shard the id belongs to (at each level), then `claimed`, then the places
//! a claim moves to and that it does not leave under that lock: the record, the dead letters,
//! the delayed buckets (cheapest first). The first place that has it is where it is. A record left by a crash between its writing and the claim's
//! removal would be wrong once the message is delivered again: the receiver that claims a
//! message delivered before (a crash makes it a lost delivery) removes its record first.

use std::{
    io::{self, Read, Write},
    os::unix::fs::FileExt,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::Registration,
    platform::{dir::Dir, fs as pfs, lock::Mode, notify::DirWatch, procinfo},
    wait::{self, Deadline, Wait},
};

use super::{
    DEFAULT_PAYLOAD_MODE, Layout, MAX_PRIORITY, Mailbox, MessageName, Names, census, delayed,
    durable_home, flush, levels, queue, queued_names, shard_name, shard_of, uniq, uniq_host,
};

/// How long a finished job's record is kept unless [`Mailbox::keep`] says: a day, some
/// kilobytes per job (a few hundred megabytes for 100,000 jobs a day on ext4, where each
/// record takes a block).
pub const DEFAULT_KEEP: Duration = Duration::from_hours(24);

/// How a finished job ended ([`Finished::how`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finish {
    /// Its last delivery succeeded (its job exited 0).
    Succeeded,
    /// It was cancelled ([`Mailbox::cancel`]).
    Cancelled,
}

/// The record of a finished job ([`Status::Finished`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finished {
    /// How it ended.
    pub how: Finish,
    /// The delivery it was (1 the first; 0 for a job cancelled before any delivery).
    pub attempt: u32,
    /// The receiver's host (or the canceller's).
    pub host: String,
    /// The receiver's process id (or the canceller's).
    pub pid: u32,
    /// When that delivery began.
    pub started: SystemTime,
    /// When it ended.
    pub ended: SystemTime,
}

/// Where a job is now ([`Mailbox::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Queued: a receiver takes it in its turn. `attempts`: its deliveries so far (failed or
    /// lost).
    Queued {
        /// When it was posted (the payload's modification time).
        since: SystemTime,
        /// Its deliveries so far that did not succeed.
        attempts: u32,
    },
    /// Held back until `until`: posted with a delay, or failed `failed` times and waiting its
    /// backoff.
    Delayed {
        /// When it is due.
        until: SystemTime,
        /// Its failed deliveries so far.
        failed: u32,
        /// Its deliveries lost with their receiver so far.
        lost: u32,
    },
    /// Being received: its job runs.
    Running {
        /// The receiver's host.
        host: String,
        /// The receiver's process id.
        pid: u32,
        /// Which delivery this is (1 the first).
        attempt: u32,
        /// When it was taken.
        since: SystemTime,
    },
    /// Finished: succeeded or cancelled.
    Finished(Finished),
    /// A dead letter: it failed as often as its receivers allow ([`Mailbox::history`] says how).
    Dead {
        /// Its failed deliveries.
        failed: u32,
        /// Its deliveries lost with their receiver.
        lost: u32,
    },
    /// No such job: never posted, or finished longer ago than records are kept.
    Unknown,
}

impl Status {
    /// Whether it has finished: succeeded, cancelled or dead (what [`Mailbox::wait_finished`]
    /// waits for); unknown ids count too.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            Status::Finished(_) | Status::Dead { .. } | Status::Unknown
        )
    }
}

/// What [`Mailbox::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancel {
    /// It was queued or delayed: removed, and recorded as cancelled.
    Removed,
    /// Its job runs: its worker was asked to stop it (within its poll interval on a network
    /// file system); [`Mailbox::wait_finished`] waits for that.
    Requested,
    /// It had finished already (succeeded, cancelled, or dead): nothing done.
    Finished,
    /// No such job.
    Unknown,
}

fn micros(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn time(us: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(us)
}

impl Finished {
    /// A record of this process's, ending now.
    pub(super) fn here(how: Finish, attempt: u32, started: SystemTime) -> Finished {
        Finished {
            how,
            attempt,
            host: uniq_host(&procinfo::hostname()),
            pid: std::process::id(),
            started,
            ended: SystemTime::now(),
        }
    }

    fn render(&self) -> String {
        let how = match self.how {
            Finish::Succeeded => "exit:0",
            Finish::Cancelled => "cancelled",
        };
        let (started, ended) = (micros(self.started), micros(self.ended));
        format!(
            "{how} {} {} {} {started} {ended}\n",
            self.attempt, self.host, self.pid
        )
    }

    fn parse(line: &str) -> Option<Finished> {
        let mut f = line.strip_suffix('\n').unwrap_or(line).split(' ');
        let how = match f.next()? {
            "exit:0" => Finish::Succeeded,
            "cancelled" => Finish::Cancelled,
            _ => return None,
        };
        let attempt = f.next()?.parse().ok()?;
        let host = f.next()?;
        let pid = f.next()?.parse().ok()?;
        let started = time(f.next()?.parse().ok()?);
        let ended = time(f.next()?.parse().ok()?);
        if f.next().is_some() || host.is_empty() || uniq_host(host) != host {
            return None;
        }
        Some(Finished {
            how,
            attempt,
            host: host.to_string(),
            pid,
            started,
            ended,
        })
    }
}

/// A record's name in its shard.
fn record_name(seq: u64) -> String {
    format!("{seq:020}")
}

/// The longest record read: a file another user grew is read no further.
const MAX_RECORD: u64 = 512;

impl Layout {
    /// Record message `seq` as finished (a cancellation's line flushed; its caller flushes the
    /// shard's directory it returns); none if records are not [kept](Mailbox::keep).
    pub(super) fn record_finished(&self, seq: u64, finished: &Finished) -> Option<Dir> {
        let keep = match finished.how {
            Finish::Cancelled => self.keep.max(MIN_CANCEL_KEEP),
            _ => self.keep,
        };
        if keep.is_zero() {
            return None;
        }
        // Best effort: a full file system, or a name another user put there, loses the
        // record and nothing else (a full file system must still drain).
        self.write_record(seq, finished, keep).ok()
    }

    /// Remove claimed message `claimed` (`seq`), which succeeded, making its own file its
    /// record (module docs): `false`, the claim untouched, where it cannot (records not kept,
    /// a file another user owns or that has other links, no room for the shard); the caller
    /// then writes a record and removes the claim.
    pub(super) fn record_in_place(&self, claimed: &str, seq: u64, finished: &Finished) -> bool {
        if self.keep.is_zero() {
            return false;
        }
        let me = nix::unistd::geteuid().as_raw();
        let Ok(Some((file, st))) = self.claimed.open_stat(claimed, true) else {
            return false;
        };
        if st.st_uid != me
            || !self
                .claimed
                .sole_link(claimed, &file, Some(&st))
                .unwrap_or(false)
        {
            return false;
        }
        let Ok(shard) = self.record_shard(seq, self.keep) else {
            return false;
        };
        // The claim goes here, in one rename: from now on the message is delivered.
        if self
            .claimed
            .rename(claimed, &shard, &record_name(seq))
            .is_err()
        {
            return false;
        }
        // Its payload becomes the line (until then it reads as a success with nothing known).
        let line = finished.render();
        if file.write_all_at(line.as_bytes(), 0).is_ok() {
            let _ = file.set_len(line.len() as u64);
        }
        // Readable as a record made anew would be (the payload's mode may have been private),
        // once the payload is gone from it.
        if st.st_mode & 0o777 != DEFAULT_PAYLOAD_MODE {
            use std::os::unix::fs::PermissionsExt;
            let mode = DEFAULT_PAYLOAD_MODE & !crate::platform::procinfo::umask();
            let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
        }
        true
    }

    /// The shard of records for message `seq`, made if missing (and the records older than
    /// `keep` pruned when it is).
    fn record_shard(&self, seq: u64, keep: Duration) -> Result<Dir> {
        let (done, made_done) = match self.top.open_sub("done")? {
            Some(d) => (d, false),
            None => (self.top.create_sub("done")?, true),
        };
        let first = shard_of(seq);
        let (shard, made) = match done.open_sub(&shard_name(first))? {
            Some(s) => (s, false),
            None => (done.create_sub(&shard_name(first))?, true),
        };
        if made_done {
            flush(&self.top)?;
        }
        if made {
            flush(&done)?;
            super::prune::prune(&self.top, first, keep);
        }
        Ok(shard)
    }

    fn write_record(&self, seq: u64, finished: &Finished, keep: Duration) -> Result<Dir> {
        let shard = self.record_shard(seq, keep)?;
        let name = record_name(seq);
        let created = match shard.create_new(&name, DEFAULT_PAYLOAD_MODE) {
            // Recorded before (a delivery a crash undid): the later record replaces it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = shard.unlink_file(&name);
                shard.create_new(&name, DEFAULT_PAYLOAD_MODE)
            }
            other => other,
        };
        let file = created.map_err(|e| Error::io(&shard.join(&name), "cannot record job", e))?;
        (&file)
            .write_all(finished.render().as_bytes())
            .map_err(|e| Error::io(&shard.join(&name), "cannot record job", e))?;
        // A success's line need not survive a power cut: its file does (the caller flushes
        // the shard), and a record that does not parse reads as a success. A cancellation's
        // must, or it would read as one.
        if finished.how != Finish::Succeeded {
            (file.sync_data())
                .map_err(|e| Error::io(&shard.join(&name), "cannot record job", e))?;
        }
        Ok(shard)
    }

    /// Where message `id` is (module docs): its status.
    fn find(&self, id: u64, poll: Duration) -> Result<Status> {
        find_in(&self.top, id, poll)
    }

    /// Remove message `seq`'s record, if any: it is delivered again (module docs).
    pub(super) fn forget_finished(&self, seq: u64) {
        if let Ok(Some(done)) = self.top.open_sub("done")
            && let Ok(Some(shard)) = done.open_sub(&shard_name(shard_of(seq)))
        {
            // Flushed: a crash must not bring it back beside a dead letter or a delay.
            if shard.unlink_file(record_name(seq)).is_ok() {
                let _ = shard.sync();
            }
        }
    }

    /// Whether a cancel request for `seq` exists. Looked for in a listing of `cancel` (most
    /// often empty), not by its name: a look up of a name that is not there leaves the kernel a
    /// negative entry in its cache of the directory, one per job, and a watch set on the
    /// directory (each running job's, [`Received::watch`]) goes over every one of them.
    pub(super) fn cancel_requested(&self, seq: u64) -> bool {
        let name = record_name(seq);
        matches!(self.top.open_sub("cancel"), Ok(Some(d))
            if d.any_entry(|n| n == name).unwrap_or(false))
    }

    /// Remove the cancel request for `seq`, if any (looked for as
    /// [`cancel_requested`](Self::cancel_requested) does).
    pub(super) fn forget_cancel(&self, seq: u64) {
        let name = record_name(seq);
        if let Ok(Some(d)) = self.top.open_sub("cancel")
            && d.any_entry(|n| n == name).unwrap_or(false)
        {
            let _ = d.unlink_file(&name);
        }
    }

    /// Record claimed message `claimed` (`parsed`, delivery `attempt`, begun at `started`)
    /// cancelled and remove it, durably.
    pub(super) fn cancel_claimed(
        &self,
        claimed: &str,
        parsed: &MessageName,
        attempt: u32,
        started: SystemTime,
    ) -> Result<()> {
        let finished = Finished::here(Finish::Cancelled, attempt, started);
        // The record's entry is durable before the claim's removal can be: a directory may be
        // written back at any time, `claimed` before the record's shard.
        if let Some(shard) = self.record_finished(parsed.seq, &finished) {
            flush(&shard)?;
        }
        (self.claimed.unlink_any(claimed))
            .map_err(|e| Error::io(&self.claimed.join(claimed), "cannot remove message", e))?;
        flush(&self.claimed)?;
        self.forget_cancel(parsed.seq);
        Ok(())
    }
}

/// Where message `id` of the mailbox `top` is (module docs): its status. Reads only, and
/// needs no write permission: whoever may read a mailbox may ask.
pub(super) fn find_in(top: &Dir, id: u64, poll: Duration) -> Result<Status> {
    // Under the shared lock messages move only forwards, so the look order sees every
    // message that is anywhere all along. A lock held for long is another user's doing: the
    // look goes on without it (a message moving back meanwhile may be missed).
    // `seq` opens only for those who may write the mailbox (module docs of [`super`]): a
    // reader looks without the lock.
    let seq = match top.open("seq", false) {
        Ok(Some(seq)) => Some(seq),
        Ok(None) => return Ok(Status::Unknown), // nothing was ever posted
        Err(e) if e.kind() == ErrorKind::PermissionDenied => None,
        Err(e) => return Err(e),
    };
    if let Some(seq) = &seq {
        let spec = Wait {
            deadline: Deadline::after(Some(Duration::from_secs(1))),
            poll: pfs::fs_kind(seq).network.then_some(poll),
            progress: None,
        };
        // Held until `seq` closes; a wait that timed out looks without it.
        let _ = wait::flock(spec, |_| {}, seq, Mode::Shared, &top.join("seq"))?;
        let last = queue::parse_seq(&queue::read_text(seq)).unwrap_or(u64::MAX);
        if id > last {
            return Ok(Status::Unknown);
        }
    }
    if id == 0 {
        return Ok(Status::Unknown);
    }
    let matching = |names: Names| names.into_iter().find(|(_, n)| n.seq == id);
    if let Some((shard, name, parsed)) = queued_at(top, id)?
        && let Ok(st) = shard.stat(&name)
    {
        return Ok(Status::Queued {
            since: time_of(st.st_mtime, st.st_mtime_nsec),
            attempts: parsed.failed.saturating_add(parsed.lost),
        });
    }
    if let Some(claimed) = top.open_sub("claimed")? {
        let entries =
            (claimed.entries()).map_err(|e| Error::io(claimed.path(), "cannot list", e))?;
        let running = entries.iter().find_map(|(entry, _)| {
            census::RunningJob::of(entry, &claimed).filter(|job| job.id == id)
        });
        if let Some(job) = running {
            return Ok(Status::Running {
                host: job.host,
                pid: job.pid,
                attempt: job.attempt,
                since: job.since,
            });
        }
    }
    // Then the places a claim moves to, which under the lock it never leaves: the record
    // (a redelivery removes a record left by a crash: [`Layout::forget_finished`]), the dead
    // letters, the delayed messages, cheapest first.
    if let Some(finished) = finished_in(top, id)? {
        return Ok(Status::Finished(finished));
    }
    if let Some(dead) = top.open_sub("dead")?
        && let Some((_, parsed)) = matching(queued_names(&dead)?.0)
    {
        return Ok(Status::Dead {
            failed: parsed.failed,
            lost: parsed.lost,
        });
    }
    if let Some(delayed) = top.open_sub("delayed")? {
        let mut found = None;
        (delayed::any_delayed_in(&delayed, |entry| {
            found = delayed::parse_delayed(entry).filter(|(_, n)| n.seq == id);
            found.is_some()
        }))
        .map_err(|e| Error::io(delayed.path(), "cannot list", e))?;
        if let Some((due, name)) = found {
            return Ok(Status::Delayed {
                until: time(due),
                failed: name.failed,
                lost: name.lost,
            });
        }
    }
    Ok(Status::Unknown)
}

/// The record of finished job `id`, if kept. One that does not parse (a crash before its
/// line was on disk) says it finished, no more: it is read as a success.
fn finished_in(top: &Dir, id: u64) -> Result<Option<Finished>> {
    let Some(done) = top.open_sub("done")? else {
        return Ok(None);
    };
    let Some(shard) = done.open_sub(&shard_name(shard_of(id)))? else {
        return Ok(None);
    };
    let name = record_name(id);
    let Some((file, st)) = shard.open_stat(&name, false)? else {
        return Ok(None);
    };
    let mut text = String::new();
    let _ = file.take(MAX_RECORD).read_to_string(&mut text);
    let at = time_of(st.st_mtime, st.st_mtime_nsec);
    Ok(Some(Finished::parse(&text).unwrap_or(Finished {
        how: Finish::Succeeded,
        attempt: 0,
        host: String::new(),
        pid: 0,
        started: at,
        ended: at,
    })))
}

/// Queued message `id` of the mailbox `top`: the shard that holds it (at whichever priority
/// level: `src/msg/levels.rs`), its name there, its parsed name.
pub(super) fn queued_at(top: &Dir, id: u64) -> Result<Option<(Dir, String, MessageName)>> {
    let Some(q) = top.open_sub("q")? else {
        return Ok(None);
    };
    for p in 0..=MAX_PRIORITY {
        let level = match p {
            0 => None,
            p => match q.open_sub(&levels::level_name(p))? {
                Some(level) => Some(level),
                None => continue,
            },
        };
        let Some(shard) = level
            .as_ref()
            .unwrap_or(&q)
            .open_sub(&shard_name(shard_of(id)))?
        else {
            continue;
        };
        let found = queued_names(&shard)?
            .0
            .into_iter()
            .find(|(_, n)| n.seq == id);
        if let Some((name, parsed)) = found {
            return Ok(Some((shard, name, parsed)));
        }
    }
    Ok(None)
}

/// A cancelled job's record is kept this long at least: whoever cancelled it is told.
const MIN_CANCEL_KEEP: Duration = Duration::from_mins(1);

pub(super) fn time_of(s: i64, ns: i64) -> SystemTime {
    let (s, ns) = (
        u64::try_from(s).unwrap_or(0),
        u32::try_from(ns).unwrap_or(0),
    );
    SystemTime::UNIX_EPOCH + Duration::new(s, ns)
}

impl Mailbox {
    /// Where job (message) `id` is now: queued, delayed, running, finished (succeeded or
    /// cancelled, for as long as records are [kept](Self::keep)), dead, or unknown. Looks at
    /// the places `id` can be, never the whole queue. Creates nothing; a path that is no
    /// mailbox is an error of kind [`ErrorKind::NotFound`].
    ///
    /// ```
    /// use fsync::msg::{Finish, Status};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let jobs = fsync::Mailbox::new(dir.path().join("jobs"));
    /// let id = jobs.post(&b"rebuild index"[..])?;
    /// assert!(matches!(jobs.status(id)?, Status::Queued { .. }));
    /// let job = jobs.recv(None)?.expect("queued");
    /// assert!(matches!(jobs.status(id)?, Status::Running { attempt: 1, .. }));
    /// job.finish()?;
    /// assert!(matches!(jobs.status(id)?, Status::Finished(f) if f.how == Finish::Succeeded));
    /// assert_eq!(jobs.status(id + 1)?, Status::Unknown);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn status(&self, id: u64) -> Result<Status> {
        find_in(&*self.existing_top()?, id, self.poll)
    }

    /// Keep the records of finished jobs (succeeded or cancelled: [`Mailbox::status`]) this
    /// long; [`DEFAULT_KEEP`] unless set; zero: record none.
    pub fn keep(mut self, keep: Duration) -> Mailbox {
        self.keep = keep;
        self
    }

    /// Wait until every job of `ids` has finished ([`Status::is_finished`]), up to `timeout`
    /// (`None`: for ever); their statuses, in the order of `ids`. Every finish takes a job out
    /// of `claimed`, so the wait sleeps until that directory changes (on a network file system
    /// it also re-checks every [`poll_interval`](Self::poll_interval)). `progress` hears of
    /// the time waited, when the wait starts blocking and about once a second after.
    pub fn wait_finished(
        &self,
        ids: &[u64],
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<wait::Outcome<Vec<Status>>> {
        let top = self.existing_top()?;
        let deadline = Deadline::after(timeout);
        // Every post makes `claimed`: a mailbox without it (made by hand, or a bus member's
        // that nothing came to yet) is watched as a whole, and re-checked every poll.
        let claimed = top.open_sub("claimed")?;
        let watched = claimed.as_ref().map_or(&*top, |c| c);
        let watch = DirWatch::new(&watched.pinned())
            .map_err(|e| Error::io(watched.path(), "cannot watch", e))?;
        let network = pfs::fs_kind_of_path(&watched.pinned()).network || claimed.is_none();
        let mut progress = progress;
        wait::watch_until(
            deadline,
            network.then_some(self.poll),
            &watch,
            watched.path(),
            Some(&mut progress),
            || {
                let all = (ids.iter())
                    .map(|&id| find_in(&top, id, self.poll))
                    .collect::<Result<Vec<_>>>()?;
                Ok(all.iter().all(Status::is_finished).then_some(all))
            },
        )
    }

    /// Cancel job `id`: a queued or delayed one is removed and recorded as cancelled (it never
    /// runs); a running one's worker is asked to stop it (module docs of `status`), and
    /// records it cancelled once it has: it is not delivered again. A synchronous message is
    /// its sender's to withdraw: an error of kind [`ErrorKind::Invalid`].
    pub fn cancel(&self, id: u64) -> Result<Cancel> {
        let l = self.existing_layout()?;
        let rid = uniq();
        let me = Registration::create_spared(&l.recv, &rid, l.registration_mode())?;
        // A message moves on while we look (a receiver takes it, a failure puts it back): look
        // again, a few times, each time where it is now.
        for _ in 0..8 {
            let taken = match l.find(id, self.poll)? {
                Status::Unknown => return Ok(Cancel::Unknown),
                Status::Finished(_) | Status::Dead { .. } => return Ok(Cancel::Finished),
                Status::Running { .. } => {
                    l.request_cancel(id)?;
                    #[cfg(test)]
                    AFTER_REQUEST.with_borrow_mut(|then| then.take().map(|then| then()));
                    // Put back meanwhile (its job failed before the request): look again.
                    match l.find(id, self.poll)? {
                        Status::Queued { .. } | Status::Delayed { .. } => continue,
                        _ => return Ok(Cancel::Requested),
                    }
                }
                Status::Queued { .. } => l.take_queued(id, &rid)?,
                Status::Delayed { .. } => l.take_delayed(id, &rid, self.poll)?,
            };
            if let Some((claimed, parsed)) = taken {
                if parsed.sync {
                    let _ = l.requeue(&claimed, &parsed.render(), self.poll);
                    return Err(Error::new(
                        l.top.path(),
                        ErrorKind::Invalid,
                        format!(
                            "message {id} is a synchronous one: its sender withdraws it, not \
                             'cancel'"
                        ),
                    ));
                }
                let attempts = parsed.failed.saturating_add(parsed.lost);
                l.cancel_claimed(&claimed, &parsed, attempts, SystemTime::now())?;
                drop(me);
                return Ok(Cancel::Removed);
            }
        }
        Err(Error::new(
            l.top.path(),
            ErrorKind::Unavailable,
            format!("message {id} kept moving while it was being cancelled; try again"),
        ))
    }
}

impl Layout {
    /// Ask the worker running `seq` to stop it: `B/cancel/SEQ`, durable.
    fn request_cancel(&self, seq: u64) -> Result<()> {
        let (dir, made) = match self.top.open_sub("cancel")? {
            Some(d) => (d, false),
            None => (self.top.create_sub("cancel")?, true),
        };
        let name = record_name(seq);
        match dir.create_new(&name, DEFAULT_PAYLOAD_MODE) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&dir.join(&name), "cannot request cancel", e)),
        }
        durable_home(&self.top, &dir, made)?;
        flush(&dir)
    }

    /// Claim queued message `id` as receiver `rid`; `None` if it moved meanwhile.
    fn take_queued(&self, id: u64, rid: &str) -> Result<Option<(String, MessageName)>> {
        let Some((shard, name, parsed)) = queued_at(&self.top, id)? else {
            return Ok(None);
        };
        self.take_from(&shard, &name, &name, parsed, rid)
    }

    /// Claim delayed message `id` as receiver `rid`; `None` if it moved meanwhile.
    fn take_delayed(
        &self,
        id: u64,
        rid: &str,
        poll: Duration,
    ) -> Result<Option<(String, MessageName)>> {
        let mut found = None;
        delayed::scan(&self.delayed, |(_, entry, name, dir)| {
            if name.seq == id && found.is_none() {
                found = dir.try_clone().ok().map(|d| (d, entry, name));
            }
        })?;
        let Some((dir, entry, parsed)) = found else {
            return Ok(None);
        };
        let name = parsed.render();
        // From a delay to `claimed` runs against the order a look under the shared lock goes
        // (queue, `claimed`, delays: `Layout::busy`), which would see it nowhere: exclusively.
        let Some(_seq) = self.lock_seq_briefly(poll)? else {
            return Ok(None); // looked for again
        };
        self.take_from(&dir, &entry, &name, parsed, rid)
    }

    /// Rename `entry` of `dir` to `claimed/NAME~RID`.
    fn take_from(
        &self,
        dir: &Dir,
        entry: &str,
        name: &str,
        parsed: MessageName,
        rid: &str,
    ) -> Result<Option<(String, MessageName)>> {
        let claimed = format!("{name}~{rid}");
        match dir.rename(entry, &self.claimed, &claimed) {
            Ok(()) => Ok(Some((claimed, parsed))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&dir.join(entry), "cannot cancel message", e)),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// What a test does in [`Mailbox::cancel`] once the request to stop a running job is
    /// made, once: the job put back meanwhile, say.
    pub(super) static AFTER_REQUEST: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
mod tests;
