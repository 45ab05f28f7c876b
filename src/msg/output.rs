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
mod tests {
    use super::*;

    #[test]
    fn the_first_line_reads_back_and_nothing_else_passes_for_it() {
        let line = header(3, 1_048_576);
        assert_eq!(
            parse_header(format!("{line}job output").as_bytes()),
            Some((3, 1_048_576, line.len() as u64))
        );
        assert!(header(u32::MAX, u64::MAX).len() <= MAX_HEADER);
        for bad in [
            "",
            "fsync-output 1 0",
            "fsync-output 1\n",
            "fsync-output 1 0 2\n",
            "fsync-output x 0\n",
            "fsync-output 1 +0\n",
            "fsync-output 1 -1\n",
            "fsync-outputs 1 0\n",
            "hello\n",
        ] {
            assert_eq!(parse_header(bad.as_bytes()), None, "{bad:?}");
        }
    }

    /// A first line not all there yet (a rename seen before the bytes, on a network file
    /// system) is nothing to show yet; anything else that is not one is refused.
    #[test]
    fn a_first_line_still_being_written_is_nothing_yet_not_a_stranger() {
        for yet in [
            "",
            "f",
            "fsync-out",
            "fsync-output ",
            "fsync-output 1",
            "fsync-output 1 0",
        ] {
            assert!(unfinished_header(yet.as_bytes()), "{yet:?}");
        }
        let long = format!("fsync-output {}", "1".repeat(MAX_HEADER));
        let full = format!("fsync-output {}", "1".repeat(MAX_HEADER - 13)); // as read
        for not in [
            "x",
            "fsync-outputs",
            "fsync-output x",
            "hello\n",
            long.as_str(),
            full.as_str(),
        ] {
            assert!(!unfinished_header(not.as_bytes()), "{not:?}");
        }
        let t = tempfile::tempdir().unwrap();
        let b = Mailbox::new(t.path().join("B"));
        b.post(&mut &b"job"[..]).unwrap();
        let shard = t.path().join("B/output/00000000000000000000");
        std::fs::create_dir_all(&shard).unwrap();
        for (content, kept) in [("fsync-out", Ok(false)), ("fsync-output 1 0\nhi", Ok(true))] {
            std::fs::write(shard.join(file_name(1)), content).unwrap();
            assert_eq!(b.output(1).map(|o| o.is_some()).map_err(|e| e.kind()), kept);
        }
        std::fs::write(shard.join(file_name(1)), "hello\n").unwrap();
        assert_eq!(b.output(1).unwrap_err().kind(), ErrorKind::Corrupt);
    }

    /// The output kept is the latest attempt's, and past the limit says how much of its
    /// beginning was left out. (Mutants answered: the attempt and what was left out
    /// constants.)
    #[test]
    fn output_kept_says_which_attempt_wrote_it_and_what_was_left_out() {
        let t = tempfile::tempdir().unwrap();
        let b = Mailbox::new(t.path().join("B")).job_output(JobOutput::Keep { limit: 8 });
        b.post(&mut &b"x"[..]).unwrap();
        for attempt in [1, 2] {
            let mut msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
            let script = format!("printf 'attempt {attempt}: 0123456789'");
            let job = msg.spawn_job(&["sh", "-c", &script], &[] as &[(&str, &str)]);
            assert!(job.unwrap().wait().unwrap().success());
            let _ = msg.fail().unwrap();
        }
        let mut kept = b.output(1).unwrap().expect("kept");
        let mut text = String::new();
        kept.read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), kept.attempt()), ("6789", 2));
        assert_eq!(kept.left_out(), "attempt 2: 0123456789".len() as u64 - 4);
    }

    /// What a follower was handed, its bytes as text.
    #[derive(Debug, PartialEq)]
    enum Got {
        Bytes(String),
        LeftOut(u64),
        Attempt(u32),
    }

    impl From<Piece<'_>> for Got {
        fn from(p: Piece<'_>) -> Got {
            match p {
                Piece::Bytes(b) => Got::Bytes(String::from_utf8_lossy(b).into_owned()),
                Piece::LeftOut(n) => Got::LeftOut(n),
                Piece::Attempt(a) => Got::Attempt(a),
            }
        }
    }

    /// Put `text` in place as message 1's kept output (written aside, then renamed over, as
    /// the pump does).
    fn put_output(b: &std::path::Path, text: &str) {
        let shard = b.join("output").join(shard_name(0));
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join(".new"), text).unwrap();
        std::fs::rename(shard.join(".new"), shard.join(file_name(1))).unwrap();
    }

    /// A follower hands on the output as it is replaced: a new attempt's (announced), what
    /// its limit left out, its bytes; it stops at whichever piece it is told to. (Mutants
    /// answered: a replaced file taken for the same or the same for a replaced one, a new
    /// attempt not announced, a stop not heeded, what was left out not said.)
    #[test]
    fn a_follower_hands_on_each_attempts_output_and_stops_when_told() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("B");
        let b = Mailbox::new(&path);
        b.post(&mut &b"x"[..]).unwrap();
        let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        let want = [
            Got::Bytes("first".into()),
            Got::Attempt(2),
            Got::LeftOut(5),
            Got::Bytes("second".into()),
        ];
        for stop in 1..want.len() {
            put_output(&path, "fsync-output 1 0\nfirst");
            let mut got = Vec::new();
            let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
                let p = Got::from(p);
                if p == Got::Bytes("first".into()) {
                    put_output(&path, "fsync-output 2 5\nsecond");
                }
                let go_on = p != want[stop];
                got.push(p);
                go_on
            });
            assert!(
                matches!(followed, Ok(Outcome::Acquired(()))),
                "{followed:?}"
            );
            assert_eq!(got, want[..=stop], "told to stop at {:?}", want[stop]);
        }
        let e = b
            .follow_output(9, Some(Duration::ZERO), |_| true)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        // Known, queued, nothing written yet: followed until the timeout.
        b.post(&mut &b"y"[..]).unwrap();
        let queued = b.follow_output(2, Some(Duration::ZERO), |_| true);
        assert!(matches!(queued, Ok(Outcome::TimedOut)), "{queued:?}");
    }

    /// The same attempt's output compacted past the limit (a new file, its tail, `FROM` past
    /// what was handed on): the follower says how much it missed, then goes on. (Mutant
    /// answered: what was missed counted from the start.)
    #[test]
    fn a_follower_says_what_a_compaction_left_out() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("B");
        let b = Mailbox::new(&path);
        b.post(&mut &b"x"[..]).unwrap();
        let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        put_output(&path, "fsync-output 1 0\nfirst");
        let mut got = Vec::new();
        let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
            let p = Got::from(p);
            if p == Got::Bytes("first".into()) {
                put_output(&path, "fsync-output 1 8\nxyz");
            }
            let go_on = p != Got::Bytes("xyz".into());
            got.push(p);
            go_on
        });
        assert!(
            matches!(followed, Ok(Outcome::Acquired(()))),
            "{followed:?}"
        );
        let want = [
            Got::Bytes("first".into()),
            Got::LeftOut(3),
            Got::Bytes("xyz".into()),
        ];
        assert_eq!(got, want);
    }

    /// A follower that has handed on the output there is and sleeps switches to the file
    /// a new attempt puts in its place, and stops when told at the new attempt's start.
    /// (Mutants answered: a replaced file taken for the same and the same for a replaced one,
    /// so that the follower stays on the old; a stop at the attempt not heeded.)
    #[test]
    fn a_sleeping_follower_moves_to_a_new_attempts_file() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("B");
        let b = Mailbox::new(&path);
        b.post(&mut &b"x"[..]).unwrap();
        let _running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        put_output(&path, "fsync-output 1 0\nfirst");
        let drained = std::sync::Arc::new(AtomicBool::new(false));
        let tid = nix::unistd::gettid().as_raw();
        let writer = {
            let (drained, path) = (drained.clone(), path.clone());
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                let asleep =
                    || drained.load(Ordering::SeqCst) && crate::test_support::sleeping(tid);
                while !asleep() && start.elapsed().as_secs() < 5 {
                    std::thread::yield_now();
                }
                put_output(&path, "fsync-output 2 0\nsecond");
            })
        };
        let mut got = Vec::new();
        let followed = b.follow_output(1, Some(Duration::from_secs(20)), |p| {
            drained.store(true, Ordering::SeqCst);
            let p = Got::from(p);
            let go_on = p != Got::Attempt(2);
            got.push(p);
            go_on
        });
        writer.join().unwrap();
        assert!(
            matches!(followed, Ok(Outcome::Acquired(()))),
            "{followed:?}"
        );
        assert_eq!(got, [Got::Bytes("first".into()), Got::Attempt(2)]);
    }

    /// A read of a file into a buffer fills it in one call where the file holds enough, and
    /// stops at the file's end. (Mutant answered: a read of nothing more after the buffer is
    /// full.)
    #[test]
    fn a_read_fills_the_buffer_in_one_call_and_stops_at_the_end() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "0123456789").unwrap();
        let file = File::open(t.path().join("f")).unwrap();
        let mut buf = [0u8; 4];
        let (calls, n) = crate::test_support::thread_count("io", "syscr:", || {
            read_at_most(&file, &mut buf, 2).unwrap()
        });
        assert_eq!((n, &buf, calls), (4, b"2345", 1));
        let mut buf = [0u8; 8];
        assert_eq!(read_at_most(&file, &mut buf, 6).unwrap(), 4);
        assert_eq!(&buf[..4], b"6789");
    }

    /// Pruning a shard of output removes its files and the shard; a shard that cannot be
    /// removed (something not a file left in it) is an error. (Mutants answered: every
    /// failure of the removal taken for a shard gone already.)
    #[test]
    fn pruning_a_shard_with_a_directory_in_it_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("B");
        let b = Mailbox::new(&path);
        b.post(&mut &b"x"[..]).unwrap();
        put_output(&path, "fsync-output 1 0\nout");
        let shard = path.join("output").join(shard_name(0));
        std::fs::create_dir(shard.join("left")).unwrap();
        let e = b.prune_output(0).unwrap_err();
        assert!(e.to_string().contains("cannot remove"), "{e}");
        assert_eq!(crate::test_support::listing(&shard), ["left"]);
    }

    /// A job is pending while its message is queued or claimed, and only its own claim
    /// counts. (Mutants answered: the names' prefix empty or a stranger's, the answer a
    /// constant.)
    #[test]
    fn a_job_is_pending_while_queued_or_claimed() {
        let t = tempfile::tempdir().unwrap();
        let b = Mailbox::new(t.path().join("B"));
        for data in [&b"one"[..], b"two"] {
            b.post(&mut &data[..]).unwrap();
        }
        let l = b.layout().unwrap();
        let pending = |id| l.pending(id).unwrap();
        assert!(pending(1) && pending(2));
        let one = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        assert!(pending(1), "claimed");
        one.finish().unwrap();
        let _two = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        assert!(!pending(1), "finished, while 2 is claimed");
        assert!(pending(2));
    }

    /// A follower of a running job, once it has handed on what there is, sleeps (it reads
    /// nothing) until the job's claim goes, and ends then, though another job is being
    /// received. (Mutants answered: the watch never armed, so that it spins; the job taken
    /// for running when any is, or always.)
    #[test]
    fn a_follower_sleeps_while_the_job_runs_and_ends_with_it() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("B");
        let b = Mailbox::new(&path);
        for data in [&b"one"[..], b"two"] {
            b.post(&mut &data[..]).unwrap();
        }
        let running = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        let _other = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        put_output(&path, "fsync-output 1 0\nout");
        let finished = std::sync::Arc::new(AtomicBool::new(false));
        let drained = std::sync::Arc::new(AtomicBool::new(false));
        let tid = nix::unistd::gettid().as_raw();
        let ender = {
            let (finished, drained) = (finished.clone(), drained.clone());
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                let asleep =
                    || drained.load(Ordering::SeqCst) && crate::test_support::sleeping(tid);
                while !asleep() && start.elapsed().as_secs() < 5 {
                    std::thread::yield_now();
                }
                finished.store(true, Ordering::SeqCst);
                running.finish().unwrap();
            })
        };
        let (reads, followed) = crate::test_support::thread_count("io", "syscr:", || {
            b.follow_output(1, Some(Duration::from_secs(20)), |_| {
                drained.store(true, Ordering::SeqCst);
                true
            })
        });
        ender.join().unwrap();
        assert!(
            matches!(followed, Ok(Outcome::Acquired(()))),
            "{followed:?}"
        );
        assert!(
            finished.load(Ordering::SeqCst),
            "it ended while the job ran"
        );
        assert!(reads < 200, "{reads} reads while it waited");
    }

    /// A job's output kept, read back, and pruned with its shard; other shards stay.
    #[test]
    fn output_is_kept_read_and_pruned_by_shard() {
        let t = tempfile::tempdir().unwrap();
        let b = Mailbox::new(t.path().join("B")).job_output(JobOutput::Keep { limit: 1024 });
        for data in [&b"one"[..], b"two"] {
            b.post(&mut &data[..]).unwrap();
        }
        let mut msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        let job = msg.spawn_job(
            &["sh", "-c", "cat; echo; echo err >&2"],
            &[] as &[(&str, &str)],
        );
        assert!(job.unwrap().wait().unwrap().success());
        msg.finish().unwrap();
        let mut text = String::new();
        let mut kept = b.output(1).unwrap().expect("kept");
        kept.read_to_string(&mut text).unwrap();
        assert_eq!(
            (text.as_str(), kept.attempt(), kept.left_out()),
            ("one\nerr\n", 1, 0)
        );
        assert!(b.output(2).unwrap().is_none(), "queued, nothing kept yet");
        let e = b.output(3).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let other = t.path().join("B/output/00000000000000000100");
        std::fs::create_dir(&other).unwrap();
        b.prune_output(0).unwrap();
        assert!(!t.path().join("B/output/00000000000000000000").exists());
        assert!(other.exists());
        b.prune_output(0).unwrap(); // gone already: nothing to do
    }
}
