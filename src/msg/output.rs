//! A job's output, kept in its mailbox: what a job ([`Received::spawn`](crate::Received::spawn)) wrote to its standard
//! output and error, the latest attempt's, bounded, so that `fsync msg log` can show it (and
//! follow it while the job runs) on any host that shares the mailbox.
//!
//! # On disk
//!
//! `B/output/SHARD/SEQ` (`SHARD` as in the queue: `SEQ` rounded down to 100, both in 20
//! digits): a first line `fsync-output ATTEMPT FROM\n` (which delivery wrote it, 1 for the
//! first; the offset in the job's output of the byte after this line, 0 unless the start was
//! left out), then the job's bytes as it wrote them, standard output and error combined in the
//! order written (one pipe for both, as `2>&1` gives; in `Tee` mode two, one for each stream
//! so that each is passed on to its own, merged as the pump reads them: lines written to the
//! two streams within a moment may swap). The file has the mailbox's payload mode (0640 unless
//! asked: output may be as secret as the payload). It is not flushed to disk: a log, which a
//! power cut may cut short (on a network file system the pump flushes it before it renames it
//! into place, so that other hosts never see the name before the first line, and about once a
//! second, so that they see it as it grows).
//!
//! **Writing.** The receiver makes a pipe for the job's standard output and error, and a
//! thread of its own (the *pump*) copies what comes through it into the file. Before the job
//! starts, an earlier attempt's file is removed (this attempt's replaces it, even if it writes
//! nothing). At the job's first byte the pump writes the file as `output/SHARD/.tmp-UNIQ`
//! (created exclusively, never through a link), holding the first line and the bytes, and
//! renames it to `SEQ` (a rename replaces a link another user put there, never follows it; in a
//! sticky directory another user's entry is not replaced, and the output is then not kept); a
//! job that writes nothing makes no file, so that it costs no inode and no flush of one when
//! its receiver flushes `claimed`. The file may hold `LIMIT` bytes after its first line
//! (`--output-limit`, [`DEFAULT_OUTPUT_LIMIT`]); output that would pass it makes the pump write
//! a new file, as above, holding the last `LIMIT / 2` bytes with `FROM` moved on, and rename
//! it over `SEQ`: the tail is kept (what a failed job said last), at least `LIMIT / 2` bytes of
//! it, and the disk holds at most `LIMIT` for the job, each byte copied at most once more on
//! average. Output that cannot be kept (no room, no permission) is read and dropped: keeping
//! it never stops or blocks a job. The pipe's capacity (64 KiB) is all that a job can write
//! ahead of the pump; past it the job waits for the pump, as for any reader of a pipe.
//!
//! The pump ends when the job has exited ([`Running::wait`](crate::command::Running::wait)
//! stops it): it takes what the pipe still holds, and returns before `wait` does, so all of
//! the job's output is in the file before its message moves on (before the claim goes). What
//! the job left running in the background is cut off then (it gets `EPIPE`/`SIGPIPE`, as in a
//! pipeline whose reader has gone).
//!
//! **Why a pipe, not a file the job writes itself.** Only a reader between the job and the
//! file can bound it: a job writing the file directly could fill the shared disk, and the
//! kernel's only bound on a file's size (`RLIMIT_FSIZE`) would bound every file the job writes
//! and kill it at the limit. The price: a receiver killed alone (not with its job, which keeps
//! the message, see the module docs of [`crate::msg`]) leaves the job a pipe without a reader,
//! so the job's next write of output gets `SIGPIPE` (or `EPIPE` if it ignores it) and it
//! usually ends there, its message then going back to the queue as a lost delivery, which it
//! would do anyway once the job ended (nobody is left to finish it). A job that writes nothing
//! more runs on, as before. Whatever it wrote until then is in the file.
//!
//! **Reading.** [`Mailbox::output`](crate::Mailbox::output) opens `SEQ` (never through a link; a file that is not a
//! regular file, or whose first line is not one fsync writes, is an error; one that holds only
//! the beginning of one, or nothing, is not there yet) and reads it after its first line. [`Mailbox::follow_output`](crate::Mailbox::follow_output) reads it as it grows and goes on, while the job
//! is queued or running (an entry `q/SHARD/SEQ.*` or `claimed/SEQ.*~RID`, looked at in that
//! order, before reading, so that what a job wrote before its claim went is read), to the end:
//! a file replaced under it (`SEQ` names another inode) is read to its end first (the pump
//! renames only a file it has finished), then the new one from the offset its first line
//! gives, so nothing is read twice, and what was left out in between is counted. It sleeps
//! until `claimed` or the output shard changes (change notification), or re-checks every poll
//! interval on a network file system, where other hosts' writes are seen as the client's
//! attribute cache allows.
//!
//! **Pruning.** Output is removed a shard at a time ([`Mailbox::prune_output`](crate::Mailbox::prune_output)), by whoever
//! prunes the records of finished jobs by age: a shard of output goes with that shard of
//! records. A job the mailbox no longer knows (no output, not queued, delayed, running or
//! dead, no history and no record of its end) is unknown to [`Mailbox::output`](crate::Mailbox::output): `NotFound`.

use std::{
    fs::File,
    io::{self, Read},
    os::unix::fs::FileExt as _,
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{dir::Dir, fs as pfs, notify::DirWatch},
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

use super::{Layout, Mailbox, Status, shard_name, shard_of, status};

/// How many bytes of a job's output are kept at most unless asked otherwise (1 MiB).
pub const DEFAULT_OUTPUT_LIMIT: u64 = 1 << 20;

/// What becomes of the standard output and error of a job started by [`Received::spawn`](crate::Received::spawn)
/// ([`Mailbox::job_output`](crate::Mailbox::job_output)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum JobOutput {
    /// The job writes to this process's standard output and error, as any command it starts.
    #[default]
    Inherit,
    /// Kept in the mailbox (module docs): up to `limit` bytes, the last ones.
    Keep {
        /// Bytes at most (0: nothing is kept).
        limit: u64,
    },
    /// Kept as [`Keep`](JobOutput::Keep) does, and also passed on to this process's standard
    /// output and error (each to its own).
    Tee {
        /// Bytes at most kept in the mailbox.
        limit: u64,
    },
}

/// A job's kept output, as [`Mailbox::output`](crate::Mailbox::output) opens it: read it for the bytes.
#[derive(Debug)]
pub struct Output {
    file: File,
    attempt: u32,
    left_out: u64,
}

impl Output {
    /// Which delivery of the message wrote it (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How many bytes at its start were not kept (the limit passed): 0 for all of it.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }
}

impl Read for Output {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// What [`Mailbox::follow_output`](crate::Mailbox::follow_output) hands on, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Piece<'a> {
    /// The job's bytes.
    Bytes(&'a [u8]),
    /// This many bytes of output were not kept before the next ones.
    LeftOut(u64),
    /// A new delivery of the message started writing (its number), replacing the output
    /// followed so far.
    Attempt(u32),
}

/// The first line's longest form (`fsync-output` and two numbers).
const MAX_HEADER: usize = 64;

pub(super) fn header(attempt: u32, from: u64) -> String {
    format!("fsync-output {attempt} {from}\n")
}

/// The first line of an output file: its attempt, its `FROM`, and its length.
pub(super) fn parse_header(bytes: &[u8]) -> Option<(u32, u64, u64)> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut fields = line.split(' ');
    if fields.next()? != "fsync-output" {
        return None;
    }
    let number = |s: &str| {
        (!s.starts_with('+'))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let attempt = u32::try_from(number(fields.next()?)?).ok()?;
    let from = number(fields.next()?)?;
    if fields.next().is_some() {
        return None;
    }
    Some((attempt, from, end as u64 + 1))
}

/// Whether `bytes` (all a file holds, up to [`MAX_HEADER`]) could be the start of a first
/// line that is still being written: nothing yet, or a beginning of `fsync-output` and
/// numbers with no end of line.
fn unfinished_header(bytes: &[u8]) -> bool {
    const WORD: &[u8] = b"fsync-output ";
    let (word, rest) = bytes.split_at(bytes.len().min(WORD.len()));
    bytes.len() < MAX_HEADER
        && WORD.starts_with(word)
        && rest.iter().all(|&b| b.is_ascii_digit() || b == b' ')
}

pub(super) fn file_name(seq: u64) -> String {
    format!("{seq:020}")
}

/// The entry names of message `seq` begin with this.
fn prefix(seq: u64) -> String {
    format!("{seq:020}.")
}

impl Layout {
    /// The output shard of message `seq`: `None` if missing.
    pub(super) fn output_shard(&self, seq: u64) -> Result<Option<Dir>> {
        let Some(output) = self.top.open_sub("output")? else {
            return Ok(None);
        };
        output.open_sub(&shard_name(shard_of(seq)))
    }

    /// The output shard of message `seq`, made if missing.
    pub(super) fn create_output_shard(&self, seq: u64) -> Result<Dir> {
        let output = self.top.create_sub("output")?;
        output.create_sub(&shard_name(shard_of(seq)))
    }

    /// Whether message `seq` is queued or being received: its entry in its shard of the
    /// queue, then in `claimed` (in this order: a message goes from the one to the other).
    fn pending(&self, seq: u64) -> Result<bool> {
        let prefix = prefix(seq);
        let has = |d: &Dir| {
            d.any_entry(|n| n.starts_with(&prefix))
                .map_err(|e| Error::io(d.path(), "cannot list", e))
        };
        if status::queued_at(&self.top, seq)?.is_some() {
            return Ok(true); // at whichever priority level
        }
        has(&self.claimed)
    }

    /// Whether the mailbox knows message `seq` at all ([`Mailbox::status`](crate::Mailbox::status)'s lookup).
    fn knows(&self, seq: u64) -> Result<bool> {
        let status = status::find_in(&self.top, seq, DEFAULT_POLL)?;
        Ok(!matches!(status, Status::Unknown))
    }

    fn no_job(&self, seq: u64) -> Error {
        Error::new(
            self.top.path(),
            ErrorKind::NotFound,
            format!("no job {seq}"),
        )
    }
}

/// An output file opened, its first line read.
struct Opened {
    file: File,
    attempt: u32,
    /// `FROM`.
    from: u64,
    /// Where its bytes begin (the first line's length).
    start: u64,
    /// Its device and inode.
    identity: (u64, u64),
}

/// Open the output file `name` of `shard`, checked: its first line parsed.
fn open_output(shard: &Dir, name: &str) -> Result<Option<Opened>> {
    let Some((file, st)) = shard.open_stat(name, false)? else {
        return Ok(None);
    };
    let mut first = [0u8; MAX_HEADER];
    let n = read_at_most(&file, &mut first, 0)
        .map_err(|e| Error::io(&shard.join(name), "cannot read", e))?;
    let Some(head) = parse_header(&first[..n]) else {
        if unfinished_header(&first[..n]) {
            // Named before its bytes reached this host (a network file system's client may
            // show a rename before the data written ahead of it), or cut short by a crash:
            // nothing to show yet.
            return Ok(None);
        }
        return Err(Error::new(
            &shard.join(name),
            ErrorKind::Corrupt,
            "does not begin as a job's output that fsync keeps (no 'fsync-output' line); not \
             using it",
        ));
    };
    let (attempt, from, start) = head;
    Ok(Some(Opened {
        file,
        attempt,
        from,
        start,
        identity: (st.st_dev, st.st_ino),
    }))
}

/// Read into `buf` from `offset` until it is full or the file ends.
pub(super) fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Mailbox {
    /// What becomes of the output of the jobs that messages received from this mailbox start
    /// ([`Received::spawn`](crate::Received::spawn), [`Received::spawn_job`](crate::Received::spawn_job)): [`JobOutput::Inherit`] unless set.
    pub fn job_output(mut self, output: JobOutput) -> Mailbox {
        self.output = output;
        self
    }

    /// The kept output of job `id` (its message's id), its latest attempt's: `Ok(None)` if the
    /// job is known but none is kept (not run yet, or run without keeping it). Creates nothing.
    /// Errors: [`ErrorKind::NotFound`] for a mailbox that does not exist, or a job it does not
    /// know (no output kept, and not queued, delayed, running, dead or recorded as finished);
    /// [`ErrorKind::WrongKind`] or [`ErrorKind::Corrupt`] for an entry fsync did not write.
    pub fn output(&self, id: u64) -> Result<Option<Output>> {
        let l = self.existing_layout()?;
        let opened = match l.output_shard(id)? {
            Some(shard) => open_output(&shard, &file_name(id))?,
            None => None,
        };
        let Some(Opened {
            mut file,
            attempt,
            from,
            start,
            ..
        }) = opened
        else {
            return match l.knows(id)? {
                true => Ok(None),
                false => Err(l.no_job(id)),
            };
        };
        use std::io::Seek;
        file.seek(io::SeekFrom::Start(start))
            .map_err(|e| Error::io(l.top.path(), "cannot read output", e))?;
        Ok(Some(Output {
            file,
            attempt,
            left_out: from,
        }))
    }

    /// Hand job `id`'s kept output to `each` as [`output`](Self::output) reads it, then what
    /// the job writes after, for as long as the job is queued or running (its message in the
    /// queue or claimed), waiting up to `timeout` (`None`: for as long as it takes): `Acquired`
    /// once it is neither, or `each` said stop (`false`). Sleeps until the output or the
    /// claims change (module docs); a cancellation signal ends it. Errors as
    /// [`output`](Self::output).
    pub fn follow_output(
        &self,
        id: u64,
        timeout: Option<Duration>,
        mut each: impl FnMut(Piece<'_>) -> bool,
    ) -> Result<Outcome<()>> {
        let l = self.existing_layout()?;
        let network = pfs::fs_kind_of_path(&l.claimed.pinned()).network;
        let mut reader = Follower::default();
        if !reader.drain(&l, id, &mut each)? && !l.knows(id)? {
            return Err(l.no_job(id));
        }
        // The directories watched, by what could be opened: the output shard, or what will
        // hold it, once made.
        let armed: std::cell::RefCell<Option<(usize, DirWatch, Vec<Dir>)>> =
            std::cell::RefCell::new(None);
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
                    if let Some((_, watch, _)) = armed.borrow().as_ref() {
                        watch.wait()?;
                    }
                    return Ok(None);
                }
                // Watch the deepest of them that exists; look again after arming a new watch,
                // since what appeared between the look and the arming woke no watch (at most
                // twice more: the depth only grows).
                loop {
                    let output = l.top.open_sub("output")?;
                    let shard = match &output {
                        Some(o) => o.open_sub(&shard_name(shard_of(id)))?,
                        None => None,
                    };
                    let (depth, target) = match (shard, output) {
                        (Some(s), _) => (2, s),
                        (None, Some(o)) => (1, o),
                        (None, None) => (0, l.top.try_clone()?),
                    };
                    if armed.borrow().as_ref().map(|a| a.0) == Some(depth) {
                        break;
                    }
                    let mut watch = DirWatch::new(&l.claimed.pinned())?;
                    watch.add(&target.pinned())?;
                    *armed.borrow_mut() = Some((depth, watch, vec![target]));
                }
                let pending = l.pending(id)?;
                if reader.drain(&l, id, &mut each)? && reader.stopped {
                    return Ok(Some(()));
                }
                Ok((!pending).then_some(()))
            },
        );
        outcome.map_err(|f| f.naming(l.claimed.path(), "cannot wait"))
    }

    /// Remove the kept output of the shard `first` (a multiple of 100: the output of jobs
    /// `first` to `first + 99`), for whoever prunes finished jobs by age (module docs).
    /// Entries that are not regular files, and other users' in a sticky directory, are left.
    pub fn prune_output(&self, first: u64) -> Result<()> {
        prune_output(&*self.existing_top()?, first)
    }
}

/// [`Mailbox::prune_output`](crate::Mailbox::prune_output) in the mailbox `top` (for the library's own pruning, which has
/// the mailbox's directory open already).
pub(super) fn prune_output(top: &Dir, first: u64) -> Result<()> {
    let Some(output) = top.open_sub("output")? else {
        return Ok(());
    };
    let name = shard_name(shard_of(first));
    let Some(shard) = output.open_sub(&name)? else {
        return Ok(());
    };
    let listed = shard
        .entries()
        .map_err(|e| Error::io(shard.path(), "cannot list", e))?;
    for (entry, _) in listed {
        let _ = shard.unlink_file(&entry);
    }
    match output.rmdir(&name) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(()),
        Err(e) => Err(Error::io(shard.path(), "cannot remove", e)),
    }
}

/// Where [`Mailbox::follow_output`](crate::Mailbox::follow_output) is in the output.
#[derive(Default)]
struct Follower {
    /// The file read now: it, its identity, its `FROM` and first line's length, its attempt.
    file: Option<(File, (u64, u64), u64, u64)>,
    attempt: Option<u32>,
    /// The offset in the job's output of the next byte to hand on.
    at: u64,
    /// `each` said stop.
    stopped: bool,
}

impl Follower {
    /// Hand on what is new; whether there was an output file at all.
    fn drain(
        &mut self,
        l: &Layout,
        id: u64,
        each: &mut impl FnMut(Piece<'_>) -> bool,
    ) -> Result<bool> {
        let name = file_name(id);
        let Some(shard) = l.output_shard(id)? else {
            return Ok(self.file.is_some());
        };
        for _ in 0..16 {
            if self.stopped {
                return Ok(true);
            }
            let now = shard
                .stat(name.as_str())
                .ok()
                .map(|st| (st.st_dev, st.st_ino));
            if let Some((_, identity, ..)) = &self.file {
                let replaced = now.is_some_and(|n| n != *identity);
                self.read_rest(&shard, &name, each)?;
                if !replaced {
                    return Ok(true);
                }
                self.file = None;
            }
            let Some(Opened {
                file,
                attempt,
                from,
                start,
                identity,
            }) = open_output(&shard, &name)?
            else {
                return Ok(false);
            };
            if self.attempt != Some(attempt) {
                if self.attempt.is_some() {
                    self.stopped |= !each(Piece::Attempt(attempt));
                }
                self.attempt = Some(attempt);
                self.at = 0;
            }
            // Nothing more once told to stop at the new attempt.
            if from > self.at && !self.stopped {
                self.stopped |= !each(Piece::LeftOut(from - self.at));
                self.at = from;
            }
            self.file = Some((file, identity, from, start));
        }
        Ok(true)
    }

    /// Hand on the rest of the file read now.
    fn read_rest(
        &mut self,
        shard: &Dir,
        name: &str,
        each: &mut impl FnMut(Piece<'_>) -> bool,
    ) -> Result<()> {
        let Some((file, _, from, start)) = &self.file else {
            return Ok(());
        };
        let mut buf = vec![0u8; 64 * 1024];
        while !self.stopped {
            let offset = start + (self.at - from);
            let n = read_at_most(file, &mut buf, offset)
                .map_err(|e| Error::io(&shard.join(name), "cannot read", e))?;
            if n == 0 {
                break;
            }
            self.at += n as u64;
            self.stopped |= !each(Piece::Bytes(&buf[..n]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
