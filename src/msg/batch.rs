/*!
Posting many messages at once, durable as one batch: after a crash at any instant either every
message of a batch is queued or none is ([`Mailbox::post_batch`], `fsync msg post --lines`).

A batch costs one flush of its payloads for any number of them, and one flush per shard it
fills, instead of three flushes per message: 10,000 messages post in about a second where one
`msg post` each takes a minute (BENCHMARKS.md).

# Protocol on disk

1. **Stage** (no lock): make `B/tmp/.batch-UNIQ/` and lock it (`flock` on the directory, held
   until the end), write payload `i` (from 0) to `B/tmp/.batch-UNIQ/i` (decimal, mode as for
   `post`), then make them all durable at once with `syncfs(2)` on the mailbox's file system
   (the payloads' data and the staging directory's entries; one call instead of an `fsync` per
   file, which is 7 times slower for 10,000 small files). Nothing of it is visible to receivers.
2. **Number** (exclusive `flock` on `B/seq`, as `post` takes it): read `n`, write `n + k` for
   `k` payloads and `fsync` it; the batch's ids are `n + 1` to `n + k`, in input order. Before
   its own, the poster finishes any committed batch a dead poster left (step 4).
3. **Commit**: rename the staging directory to `B/batches/NAME`, `NAME` the first message's
   name (`SEQ.UNIQ.-.msg`, `SEQ` = `n + 1`), and `fsync` `B/batches` (made if missing, its
   entry in `B` flushed first as a shard's in `q` is). From here the whole batch survives a
   power cut; before it, none of it does (the staged directory is garbage, below).
4. **Queue** (roll forward, still under the lock): lower the head to the first message's shard
   if it lies past it (durably: only a recovery can find it there); make the shards the batch
   fills (and flush `q` if one was made or found empty, as `post` does); rename each `i` to
   `q/SHARD/NAME` with `SEQ` = first + `i` (the batch's `UNIQ`, `FROM` and `KIND` kept for
   every message); `fsync` each shard; remove the batch's directory; release `seq`. Every
   rename is atomic and durable before the directory goes, so a crash in the middle leaves
   each message either queued or still in the batch's directory, never both, never neither.

**Recovery.** Posters hold `seq` from the commit until the batch's directory is gone, so a
committed batch that anyone finds under the exclusive lock on `seq` is a dead poster's (killed,
or a power cut): it is rolled forward as in step 4, with its remaining files, by the next
receiver (before its look at the queue, with the dead receivers' claims: `tidy`), the next
`wait_empty` (the same way), or the next batch poster (step 2). The look is one `openat` of
`B/batches` (missing until a batch is first posted) and, once it exists, one read of it.
A receiver that cannot have the lock within a moment (another poster holds it) looks again
within [`RETRY_AFTER`]; `wait_empty` counts a committed batch found under its shared lock on
`seq` as busy, so it never says empty while one waits. Listings (`msg list`) show the messages
of such a batch as queued, before those of the shards. A single `post` does not look.

**Garbage.** A staging directory whose poster died before the commit (killed, a power cut, an
error) holds nothing anyone will queue. The next batch poster removes each `tmp/.batch-*` that
nobody holds locked and that has not changed for [`STALE`] (a poster locks its directory an
instant after making it: the age covers that instant): its files, then the directory. A poster
that fails (an error, a cancellation signal before the commit) removes its own at once.

Batches are neither delayed nor given a priority level: a mailbox with a [`delay`](Mailbox::delay)
or a [`priority`](Mailbox::priority) refuses them; a job timeout ([`Mailbox::job_timeout`]) goes
with every message of a batch.
*/

use std::{
    io::{self, Write},
    ops::Range,
    path::Path,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        lock::{self, Mode},
    },
    wait::{self, Outcome},
};

use super::{Layout, MAX_SEQ, Mailbox, MessageName, durable_home, flush, post, shard_of, uniq};

/// The directory of committed batches, `B/batches`.
const BATCHES: &str = "batches";

/// The prefix of a staging directory in `B/tmp`.
const STAGING: &str = ".batch-";

/// How long a staging directory nobody holds must have been left alone before another poster
/// removes it.
pub(super) const STALE: Duration = Duration::from_mins(1);

/// How soon a receiver that found a dead poster's batch, and could not have the lock to finish
/// it, looks again (it would otherwise sleep until the queue changes).
pub(super) const RETRY_AFTER: Duration = Duration::from_millis(100);

impl Mailbox {
    /// Queue the `payloads` durably as one batch (module docs of `src/msg/batch.rs`): after a
    /// crash at any instant, all of them are queued or none. Their ids are consecutive, in the
    /// order given: the range returned (empty for no payloads, which touches nothing). Each
    /// payload is written out as it comes, so memory holds one at a time, whatever their
    /// number (and, while they are moved into the queue, their file names: 30 bytes each); the lock that numbers messages is taken only once all are written, and held
    /// while they are moved into the queue (receivers wait for it meanwhile: about 10 ms per
    /// thousand messages on a local disk).
    ///
    /// Errors as [`post`](Self::post), and [`ErrorKind::Invalid`] for a mailbox with a
    /// [`delay`](Self::delay). On an error nothing is queued, except when the batch was
    /// committed and then could not be moved into the queue: then the next receiver queues it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let jobs = fsync::Mailbox::new(dir.path().join("jobs"));
    /// let ids = jobs.post_batch(["a", "b", "c"])?.acquired().expect("not cancelled");
    /// assert_eq!(ids, 1..4);
    /// let mut first = jobs.recv(None)?.expect("queued");
    /// assert_eq!(first.id(), 1);
    /// first.finish()?;
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn post_batch<I>(&self, payloads: I) -> Result<Outcome<Range<u64>>>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut payloads = payloads.into_iter();
        self.batch(&mut |buf| {
            Ok(payloads
                .next()
                .map(|p| buf.extend_from_slice(p.as_ref()))
                .is_some())
        })
    }

    /// Queue each record of `input` as a message, as [`post_batch`](Self::post_batch) does:
    /// records end at `separator` (`b'\n'`: lines; `0`: NUL-separated), which is not part of
    /// the message; a last record without one counts; an empty record is an empty message
    /// (ids and input records line up one to one). Memory holds one record at a time. A read
    /// error, or a cancellation signal (once the program has called
    /// [`install_cancel_handlers`](crate::wait::install_cancel_handlers)) before the batch is
    /// committed, queues none of it ([`Outcome::Interrupted`] for the signal).
    pub fn post_records(
        &self,
        input: &mut dyn io::BufRead,
        separator: u8,
    ) -> Result<Outcome<Range<u64>>> {
        self.batch(&mut |buf| next_record(input, separator, buf))
    }

    /// Post a batch whose payloads `next` writes into the buffer it is given, one a call,
    /// saying whether there was one.
    fn batch(
        &self,
        next: &mut dyn FnMut(&mut Vec<u8>) -> io::Result<bool>,
    ) -> Result<Outcome<Range<u64>>> {
        if self.delay.is_some() {
            return Err(Error::new(
                self.path(),
                ErrorKind::Invalid,
                "a batch is queued at once: posting many messages with a delay is not supported",
            ));
        }
        if self.priority > 0 {
            return Err(Error::new(
                self.path(),
                ErrorKind::Invalid,
                "a batch is queued at the default priority: posting many messages at a priority \
                 level is not supported",
            ));
        }
        let mut buf = Vec::new();
        let read = |buf: &mut Vec<u8>, next: &mut dyn FnMut(&mut Vec<u8>) -> io::Result<bool>| {
            buf.clear();
            next(buf).map_err(|e| Error::io(Path::new("input"), "cannot read messages", e))
        };
        if !read(&mut buf, next)? {
            return Ok(Outcome::Acquired(0..0));
        }
        let l = self.layout()?;
        l.clear_stale_batches();
        // Each message keeps this name's options: a job timeout, not a level (refused above).
        let name = MessageName {
            timeout_ms: (self.job_timeout)
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)),
            ..MessageName::new_message(uniq(), None, false)
        };
        let staged = format!("{STAGING}{}", name.uniq);
        let stage = l.tmp.create_sub(&staged)?;
        let _ = lock::flock(&stage, Mode::Exclusive, false); // "being written", for cleaners
        let discard = || remove_batch(&l.tmp, &stage, &staged);
        let count = match write_staged(&stage, self.mode, &mut buf, &mut |buf| read(buf, next)) {
            Ok(count) => count,
            Err(e) => {
                discard();
                return match wait::cancelled() {
                    Some(sig) => Ok(Outcome::Interrupted(sig)),
                    None => Err(e),
                };
            }
        };
        let batches = match l.batches_to_fill() {
            Ok(batches) => batches,
            Err(e) => {
                discard();
                return Err(e);
            }
        };
        let committed = post::with_seqs(&l, self.poll, self.lock_deadline(), count, |first, _| {
            if let Some(sig) = wait::cancelled() {
                return Ok(Outcome::Interrupted(sig)); // the last moment to give up
            }
            l.roll_all_forward(&batches)?; // a dead poster's, numbered before ours
            let committed = MessageName {
                seq: first,
                ..name.clone()
            }
            .render();
            (l.tmp.rename(&staged, &batches, &committed))
                .and_then(|()| batches.sync())
                .map_err(|e| Error::io(&batches.join(&committed), "cannot commit batch", e))?;
            l.roll_forward(&batches, &committed)?;
            Ok(Outcome::Acquired(first..first + count))
        });
        if !matches!(committed, Ok(Outcome::Acquired(_))) && l.tmp.stat(&staged).is_ok() {
            discard(); // never committed
        }
        match committed {
            Ok(Outcome::TimedOut) => Err(post::seq_timed_out(self.path())),
            other => other,
        }
    }
}

/// Write each payload `next` gives into the staging directory `stage` as `0`, `1`, ...
/// (the first already in `buf`), then make them durable; how many.
fn write_staged(
    stage: &Dir,
    mode: u32,
    buf: &mut Vec<u8>,
    next: &mut dyn FnMut(&mut Vec<u8>) -> Result<bool>,
) -> Result<u64> {
    let mut count = 0u64;
    loop {
        let file = count.to_string();
        let mut f = (stage.create_new(&file, mode))
            .map_err(|e| pfs::explain_open_error(&stage.join(&file), "cannot write message", e))?;
        (f.write_all(buf)).map_err(|e| Error::io(&stage.join(&file), "cannot write message", e))?;
        count += 1;
        if let Some(sig) = wait::cancelled() {
            let e = io::Error::new(io::ErrorKind::Interrupted, format!("signal {sig}"));
            return Err(Error::io(stage.path(), "cannot write messages", e));
        }
        if !next(buf)? {
            break;
        }
    }
    // The payloads' data and the staging directory's entries, for any number of files.
    (stage.sync_fs()).map_err(|e| Error::io(stage.path(), "cannot flush messages", e))?;
    Ok(count)
}

/// Read the next record of `input`, up to `separator` (not kept) or the end, into `buf`;
/// `false` at the end of the input. A cancellation signal ends the read with an error.
fn next_record(input: &mut dyn io::BufRead, separator: u8, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut any = false;
    loop {
        if wait::cancelled().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "cancelled by a signal",
            ));
        }
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(any);
        }
        any = true;
        match available.iter().position(|&b| b == separator) {
            Some(end) => {
                buf.extend_from_slice(&available[..end]);
                input.consume(end + 1);
                return Ok(true);
            }
            None => {
                let n = available.len();
                buf.extend_from_slice(available);
                input.consume(n);
            }
        }
    }
}

/// The payloads of committed batch `batch`, whose first message is `first`: their numbers
/// in the batch, in order. Only files named in canonical decimal with a number in range are
/// (a directory, or `01`, is no payload fsync wrote).
fn payloads(batch: &Dir, first: &MessageName) -> io::Result<Vec<u64>> {
    let mut files: Vec<u64> = (batch.entries()?.into_iter())
        .filter(|(_, kind)| *kind != Some(Kind::Dir))
        .filter_map(|(f, _)| f.parse::<u64>().ok().filter(|i| i.to_string() == f))
        .filter(|&i| in_range(first.seq, i))
        .collect();
    files.sort_unstable();
    Ok(files)
}

/// The name payload `i` of the batch whose first message is `first` is queued under.
fn payload(first: &MessageName, i: u64) -> MessageName {
    MessageName {
        seq: first.seq + i,
        ..first.clone()
    }
}

/// Whether payload `i` of a batch whose first message is `first` has a number fsync hands out
/// (a name planted in a batch's directory could overflow it).
fn in_range(first: u64, i: u64) -> bool {
    first.checked_add(i).is_some_and(|seq| seq < MAX_SEQ)
}

/// Remove batch directory `dir`, named `name` in `parent`: its payloads, then itself (best
/// effort: what is not a payload fsync wrote stays, and the directory with it).
fn remove_batch(parent: &Dir, dir: &Dir, name: &str) {
    if let Ok(entries) = dir.entries() {
        for (entry, _) in entries {
            if entry.parse::<u64>().is_ok() {
                let _ = dir.unlink_file(&entry);
            }
        }
    }
    let _ = parent.rmdir(name);
}

impl Layout {
    /// `B/batches`, made if missing, its entry durable before a batch is committed into it.
    fn batches_to_fill(&self) -> Result<Dir> {
        let (batches, made) = match self.top.open_sub(BATCHES)? {
            Some(b) => (b, false),
            None => (self.top.create_sub(BATCHES)?, true),
        };
        durable_home(&self.top, &batches, made)?;
        Ok(batches)
    }

    /// Before a look at the queue: roll forward the committed batches of dead posters (module
    /// docs, *Recovery*). `true` if one is left waiting (the lock did not come at once): look
    /// again within [`RETRY_AFTER`].
    pub(super) fn finish_batches(&self, poll: Duration) -> Result<bool> {
        if !self.batch_waiting() {
            return Ok(false);
        }
        let Some(_seq) = self.lock_seq_briefly(poll)? else {
            return Ok(true);
        };
        match self.top.open_sub(BATCHES)? {
            Some(batches) => self.roll_all_forward(&batches).map(|()| false),
            None => Ok(false),
        }
    }

    /// Whether `B/batches` holds a committed batch (under the exclusive lock on `seq`: a dead
    /// poster's; under the shared lock too, since posters finish theirs before letting go).
    pub(super) fn batch_waiting(&self) -> bool {
        let Ok(Some(batches)) = self.top.open_sub(BATCHES) else {
            return false;
        };
        (batches.any_entry(|name| MessageName::parse(name).is_some())).unwrap_or(false)
    }

    /// Roll forward every committed batch in `batches`, oldest first (under the exclusive lock
    /// on `seq`).
    fn roll_all_forward(&self, batches: &Dir) -> Result<()> {
        let entries =
            (batches.entries()).map_err(|e| Error::io(batches.path(), "cannot list batches", e))?;
        let mut committed: Vec<(u64, String)> = (entries.into_iter())
            .filter_map(|(name, _)| Some((MessageName::parse(&name)?.seq, name)))
            .collect();
        committed.sort();
        for (_, name) in committed {
            self.roll_forward(batches, &name)?;
        }
        Ok(())
    }

    /// Move the messages of committed batch `name` (its first message's name) into their
    /// shards, then remove its directory (step 4 of the module docs), under the exclusive lock
    /// on `seq`.
    fn roll_forward(&self, batches: &Dir, name: &str) -> Result<()> {
        let Some(first) = MessageName::parse(name) else {
            return Ok(());
        };
        let Some(batch) = batches.open_sub(name)? else {
            return Ok(());
        };
        let files = payloads(&batch, &first)
            .map_err(|e| Error::io(batch.path(), "cannot list batch", e))?;
        if let Some(&i) = files.first() {
            self.lower_head(shard_of(payload(&first, i).seq))?;
        }
        // The shards, made first and their entries in `q` durable (`durable_home`), once.
        let mut shards: Vec<(u64, Dir)> = Vec::new();
        let mut home = false;
        for &i in &files {
            let at = shard_of(payload(&first, i).seq);
            if shards.last().is_some_and(|(s, _)| *s == at) {
                continue;
            }
            let (shard, made) = match self.shard(at)? {
                Some(shard) => (shard, false),
                None => {
                    let made = self.create_shard(at)?;
                    self.head_for_new_shard(at);
                    (made, true)
                }
            };
            home = home
                || made
                || !(shard.any_entry(|_| true))
                    .map_err(|e| Error::io(shard.path(), "cannot list", e))?;
            shards.push((at, shard));
        }
        if home {
            flush(&self.q)?;
        }
        let mut at = 0;
        for &i in &files {
            let message = payload(&first, i);
            while shards[at].0 != shard_of(message.seq) {
                at += 1;
            }
            let (dest, shard) = (message.render(), &shards[at].1);
            match batch.rename(&i.to_string(), shard, &dest) {
                Ok(()) => {}
                // Another process rolled it forward first (not under the lock: none does).
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(pfs::explain_open_error(
                        &shard.join(&dest),
                        "cannot queue message",
                        e,
                    ));
                }
            }
        }
        // Each rename durable before the directory goes (else a crash could lose the messages
        // with it).
        for (_, shard) in &shards {
            flush(shard)?;
        }
        if batches.rmdir(name).is_err() {
            // Something else was put in it: out of the way, to the garbage of `tmp`.
            let _ = batches.rename(name, &self.tmp, &format!("{STAGING}done-{name}"));
        }
        Ok(())
    }

    /// Remove the staging directories of dead posters (module docs, *Garbage*). Best effort.
    fn clear_stale_batches(&self) {
        let Ok(entries) = self.tmp.entries() else {
            return;
        };
        for (name, _) in entries {
            if !name.starts_with(STAGING) {
                continue;
            }
            let Ok(Some(dir)) = self.tmp.open_sub(&name) else {
                continue;
            };
            if !matches!(lock::flock(&dir, Mode::Exclusive, false), Ok(true)) {
                continue; // its poster is at work
            }
            let old = dir.status().is_ok_and(|st| {
                let changed = SystemTime::UNIX_EPOCH
                    + Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
                changed.elapsed().is_ok_and(|age| age >= STALE)
            });
            let same = (self.tmp.stat(&name), dir.status());
            let same =
                matches!(same, (Ok(a), Ok(b)) if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino));
            if old && same {
                remove_batch(&self.tmp, &dir, &name);
            }
        }
    }
}

/// The messages of committed batches that no one has rolled forward yet (their posters died),
/// for a listing: each message's name and its payload file, oldest first.
pub(super) fn scan_batches(top: &Dir, each: &mut dyn FnMut(&Dir, String, MessageName)) {
    let Ok(Some(batches)) = top.open_sub(BATCHES) else {
        return;
    };
    let Ok(entries) = batches.entries() else {
        return;
    };
    let mut committed: Vec<(u64, String, MessageName)> = (entries.into_iter())
        .filter_map(|(name, _)| {
            let parsed = MessageName::parse(&name)?;
            Some((parsed.seq, name, parsed))
        })
        .collect();
    committed.sort_by_key(|c| c.0);
    for (_, name, first) in committed {
        let Ok(Some(batch)) = batches.open_sub(&name) else {
            continue;
        };
        let Ok(files) = payloads(&batch, &first) else {
            continue;
        };
        for i in files {
            each(&batch, i.to_string(), payload(&first, i));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead, Read},
        path::PathBuf,
        time::Duration,
    };

    use super::*;
    use crate::{
        msg::tests::{post_texts, text},
        test_support::{listing, within},
    };

    /// A mailbox `b` in a new directory.
    fn mailbox() -> (tempfile::TempDir, PathBuf, Mailbox) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        (dir, path, b)
    }

    /// Everything the mailbox holds, received in order: id and text.
    fn drain(b: &Mailbox) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        while let Some(r) = b.recv(Some(Duration::ZERO)).unwrap() {
            out.push((r.id(), text(r)));
        }
        out
    }

    /// Input that fails once with `kind` where `at` bytes of it have been read.
    struct Failing {
        data: &'static [u8],
        read: usize,
        fail: Option<(usize, io::ErrorKind)>,
    }

    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.fill_buf()?.read(buf)?;
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Failing {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            if let Some((at, kind)) = self.fail
                && at == self.read
            {
                self.fail = None;
                return Err(kind.into());
            }
            Ok(&self.data[self.read..])
        }
        fn consume(&mut self, n: usize) {
            self.read += n;
        }
    }

    /// Records end at the separator, which is left out; a last one without it counts, an
    /// empty one is an empty message. Their ids follow the mailbox's last, one a record, in
    /// order, here across two shards' ends. Bounded in a thread of its own, so that a reading
    /// of records that never ends fails the test.
    #[test]
    fn records_become_messages_numbered_in_order_across_shards() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        std::fs::write(path.join("seq"), "95\n").unwrap();
        let mut input: String = (0..150).map(|i| format!("r{i}\n")).collect();
        input.push_str("\nlast");
        let poster = b.clone();
        let ids = within(Duration::from_mins(1), move || {
            poster.post_records(&mut input.as_bytes(), b'\n').unwrap()
        });
        assert_eq!(ids.expect("the batch ended").acquired(), Some(96..248));
        let mut want = vec![(1, "m0".to_string())];
        want.extend((0..150).map(|i| (96 + i, format!("r{i}"))));
        want.extend([(246, String::new()), (247, "last".to_string())]);
        assert_eq!(drain(&b), want);
        assert_eq!(listing(&path.join("tmp")), Vec::<String>::new());
        assert_eq!(listing(&path.join("batches")), Vec::<String>::new());
        let ids = b.post_records(&mut &b"x\0y\ny"[..], 0).unwrap();
        assert_eq!(ids.acquired(), Some(248..250));
        assert_eq!(drain(&b), [(248, "x".into()), (249, "y\ny".into())]);
    }

    /// An empty input posts nothing and makes nothing; a batch at a priority level or with a
    /// delay is refused (at level 0 it is not).
    #[test]
    fn an_empty_batch_makes_nothing_and_a_level_or_a_delay_is_refused() {
        let (_dir, path, b) = mailbox();
        let none = b.post_records(&mut &b""[..], b'\n').unwrap();
        assert_eq!(none.acquired(), Some(0..0));
        assert!(!path.exists(), "an empty batch made the mailbox");
        let refused = |b: Mailbox| b.post_batch(["x"]).unwrap_err().kind();
        for p in [1, 3] {
            assert_eq!(refused(b.clone().priority(p)), ErrorKind::Invalid);
        }
        assert_eq!(
            refused(b.clone().delay(Duration::from_secs(1))),
            ErrorKind::Invalid
        );
        let ids = b.clone().priority(0).post_batch(["x"]).unwrap();
        assert_eq!(ids.acquired(), Some(1..2));
    }

    /// Each message of a batch carries the mailbox's job timeout.
    #[test]
    fn a_batch_carries_the_job_timeout() {
        let (_dir, _path, b) = mailbox();
        let b = b.job_timeout(Duration::from_secs(7));
        let _ = b.post_batch(["a", "b"]).unwrap();
        for _ in 0..2 {
            let r = b.recv(Some(Duration::ZERO)).unwrap().expect("queued");
            assert_eq!(r.job_timeout(), Some(Duration::from_secs(7)));
            r.finish().unwrap();
        }
    }

    /// A read interrupted by a signal is made again; one that fails queues none of the batch
    /// and leaves nothing staged. Bounded, as a read retried for ever would not end.
    #[test]
    fn an_interrupted_read_goes_on_and_a_failing_one_queues_nothing() {
        let (_dir, path, b) = mailbox();
        let posting = |kind| {
            let b = b.clone();
            let got = within(Duration::from_mins(1), move || {
                let mut input = Failing {
                    data: b"a\nb\n",
                    read: 0,
                    fail: Some((2, kind)),
                };
                b.post_records(&mut input, b'\n').map(Outcome::acquired)
            });
            got.expect("the batch ended")
        };
        assert_eq!(posting(io::ErrorKind::Interrupted).unwrap(), Some(1..3));
        let e = posting(io::ErrorKind::Other).unwrap_err();
        assert!(e.to_string().contains("cannot read messages"), "{e}");
        assert_eq!(listing(&path.join("tmp")), Vec::<String>::new());
        assert_eq!(drain(&b), [(1, "a".into()), (2, "b".into())]);
    }

    /// A batch that cannot have `seq` in time queues nothing and leaves nothing staged.
    #[test]
    fn a_batch_that_times_out_on_seq_leaves_nothing() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        let seq = std::fs::File::open(path.join("seq")).unwrap();
        assert!(lock::flock(&seq, Mode::Exclusive, true).unwrap());
        let late = b.clone().lock_timeout(Duration::from_millis(50));
        assert!(late.post_batch(["x"]).is_err());
        assert_eq!(listing(&path.join("tmp")), Vec::<String>::new());
        drop(seq);
        assert_eq!(drain(&b), [(1, "m0".into())]);
    }

    /// A batch committed and then not queued (a file where a shard it fills goes) is left
    /// whole in `batches`, and queued by the first receiver once the way is clear.
    #[test]
    fn a_batch_committed_and_not_queued_is_kept_for_the_next_receiver() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        std::fs::write(path.join("seq"), "98\n").unwrap();
        let blocker = path.join("q").join(crate::msg::shard_name(100));
        std::fs::write(&blocker, "").unwrap();
        assert!(b.post_batch(["a", "b", "c"]).is_err());
        let committed = listing(&path.join("batches"));
        assert_eq!(committed.len(), 1);
        assert_eq!(
            listing(&path.join("batches").join(&committed[0])),
            ["0", "1", "2"]
        );
        std::fs::remove_file(&blocker).unwrap();
        let want = [
            (1, "m0".into()),
            (99, "a".into()),
            (100, "b".into()),
            (101, "c".into()),
        ];
        assert_eq!(drain(&b), want);
    }

    /// A dead poster's committed batch is listed as queued, and queued by the next receiver:
    /// each payload under its number (the batch's name's and on), in order, here across a
    /// shard's end. What is no payload of it (a name not in canonical decimal, a directory, a name past the last
    /// number) stays, with the batch's directory, moved out of the way into `tmp`.
    #[test]
    fn a_dead_posters_batch_is_queued_by_the_next_receiver() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        let first = MessageName {
            seq: 98,
            ..MessageName::new_message(uniq(), None, false)
        };
        let batch = path.join("batches").join(first.render());
        std::fs::create_dir_all(batch.join("4")).unwrap();
        for (file, text) in [
            ("0", "p0"),
            ("1", "p1"),
            ("2", "p2"),
            ("3", "p3"),
            ("01", "x"),
        ] {
            std::fs::write(batch.join(file), text).unwrap();
        }
        std::fs::write(batch.join((MAX_SEQ - 98).to_string()), "past").unwrap();
        std::fs::write(path.join("seq"), "101\n").unwrap();
        let listed = b.list().unwrap().queued;
        let mut ids: Vec<u64> = listed.iter().map(crate::msg::Queued::id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 98, 99, 100, 101], "listed");
        let want = [(1, "m0"), (98, "p0"), (99, "p1"), (100, "p2"), (101, "p3")];
        let want: Vec<(u64, String)> = want.iter().map(|&(i, t)| (i, t.to_string())).collect();
        assert_eq!(drain(&b), want);
        assert_eq!(listing(&path.join("batches")), Vec::<String>::new());
        let aside = path
            .join("tmp")
            .join(format!("{STAGING}done-{}", first.render()));
        let mut left = vec!["01".to_string(), "4".into(), (MAX_SEQ - 98).to_string()];
        left.sort();
        assert_eq!(listing(&aside), left);
    }

    /// The numbers a batch's payloads may take: below the largest fsync hands out.
    #[test]
    fn a_payloads_number_is_in_range_below_the_largest() {
        assert!(in_range(1, 0));
        assert!(in_range(MAX_SEQ - 2, 1));
        assert!(!in_range(MAX_SEQ - 1, 1));
        assert!(!in_range(u64::MAX, 1));
    }

    /// `q` is flushed when a batch makes a shard, or finds one empty, to put its messages in
    /// (its entry in `q` must survive a power cut as they do), and not when it finds one
    /// holding messages.
    #[test]
    fn a_batch_flushes_q_only_for_a_shard_made_or_found_empty() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        let q = path.join("q");
        let flushed_q = |payloads: &[&str]| {
            crate::msg::post::FLUSHED.with_borrow_mut(Vec::clear);
            let _ = b.post_batch(payloads).unwrap();
            crate::msg::post::FLUSHED.take().contains(&q)
        };
        assert!(!flushed_q(&["into shard 0, which holds m0"]));
        std::fs::write(path.join("seq"), "199\n").unwrap();
        assert!(flushed_q(&["200", "201"]), "a shard made");
        let _ = drain(&b);
        std::fs::create_dir(q.join(crate::msg::shard_name(300))).unwrap();
        std::fs::write(path.join("seq"), "299\n").unwrap();
        assert!(flushed_q(&["300"]), "a shard found empty");
    }

    /// A dead poster's batch rolled forward into a shard it makes and then one that holds
    /// messages posted since flushes `q`, for the shard it made. (Mutant answered: the
    /// second shard's look undoing the first's answer.)
    #[test]
    fn a_batch_rolled_into_a_new_shard_then_a_full_one_flushes_q() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        std::fs::write(path.join("seq"), "201\n").unwrap();
        post_texts(&b, 1..2); // 202, in shard 200
        let first = MessageName {
            seq: 198,
            ..MessageName::new_message(uniq(), None, false)
        };
        let batch = path.join("batches").join(first.render());
        std::fs::create_dir_all(&batch).unwrap();
        for (file, text) in [("0", "p0"), ("1", "p1"), ("2", "p2")] {
            std::fs::write(batch.join(file), text).unwrap();
        }
        crate::msg::post::FLUSHED.with_borrow_mut(Vec::clear);
        let got = drain(&b);
        assert!(crate::msg::post::FLUSHED.take().contains(&path.join("q")));
        let ids: Vec<u64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [1, 198, 199, 200, 202]);
    }

    /// A poster clears away dead posters' staging directories: nobody holds them and they
    /// have not changed for a minute. Not one held (its poster at work), nor one changed
    /// since, nor anything else in `tmp`.
    #[test]
    fn a_poster_clears_away_only_dead_posters_staging() {
        let (_dir, path, b) = mailbox();
        post_texts(&b, 0..1);
        let tmp = path.join("tmp");
        let hour_ago = SystemTime::now() - Duration::from_hours(1);
        let make = |name: &str, old: bool| {
            let dir = tmp.join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("0"), "staged").unwrap();
            let handle = std::fs::File::open(&dir).unwrap();
            if old {
                handle.set_modified(hour_ago).unwrap();
            }
            handle
        };
        drop(make(".batch-dead", true));
        let held = make(".batch-held", true);
        assert!(lock::flock(&held, Mode::Exclusive, true).unwrap());
        drop(make(".batch-new", false));
        drop(make("other", true));
        let _ = b.post_batch(["x"]).unwrap();
        assert_eq!(listing(&tmp), [".batch-held", ".batch-new", "other"]);
    }
}
