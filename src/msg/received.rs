//! A claimed message: what a receiver holds until it finishes, fails or drops it.

use std::{
    fs::File,
    io::{self, Read, Write},
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, Result},
    holder::Registration,
    wait,
};

use super::{
    Attempt, Backoff, Ended, Finish, JobOutput, Layout, MessageName, delayed, flush, pump, status,
};

/// A claimed message: read it, then [`finish`](crate::Received::finish) to consume it. Dropped
/// unfinished, it returns to the queue.
#[must_use = "an unfinished message goes back to the queue"]
#[derive(Debug)]
pub struct Received {
    pub(super) file: File,
    pub(super) claimed: String,
    /// Its name in the queue.
    pub(super) name: MessageName,
    pub(super) layout: Layout,
    pub(super) poll: Duration,
    pub(super) retries: Option<u32>,
    pub(super) backoff: Option<Backoff>,
    /// When it was taken.
    pub(super) since: SystemTime,
    /// What becomes of its job's output, and the mode of the file that keeps it.
    pub(super) output: (JobOutput, u32),
    /// The bus member that sent it, if any.
    pub from: Option<String>,
    pub(super) done: bool,
    /// The registration whose lock says the claim is alive, and when that lock was taken (a
    /// lease runs from there: [`crate::LossCheck::since`]).
    pub(super) me: Registration,
    pub(super) locked: std::time::Instant,
}

/// The payload, read from where the last read stopped (the start, at first).
impl Read for Received {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// Why [`Received::copy_to`](crate::Received::copy_to) stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum CopyError {
    /// The payload could not be read: the error names the message's file.
    Read(Error),
    /// The writer failed: its own error (a full disk, a closed pipe).
    Write(io::Error),
    /// A cancellation signal ([`crate::wait::install_cancel_handlers`]) ended the copy.
    Interrupted(i32),
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyError::Read(e) => write!(f, "{e}"),
            CopyError::Write(e) => write!(f, "cannot write message: {e}"),
            CopyError::Interrupted(sig) => write!(f, "cancelled by signal {sig}"),
        }
    }
}

impl std::error::Error for CopyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CopyError::Read(e) => Some(e),
            CopyError::Write(e) => Some(e),
            CopyError::Interrupted(_) => None,
        }
    }
}

/// What became of a message whose delivery failed ([`Received::fail`](crate::Received::fail)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failed {
    /// Back in the queue, to be delivered again.
    Queued,
    /// Moved to the dead letters: it failed as often as [`Mailbox::retries`](crate::Mailbox::retries) allows.
    Dead,
    /// Left claimed: the queue's lock was busy; the next receiver returns it.
    Left,
    /// Held back for the mailbox's [`backoff`](crate::Mailbox::backoff_with), then queued again.
    Delayed,
}

impl Received {
    /// The message's id in its mailbox: its sequence number (the first field of its name),
    /// the same at every delivery.
    pub fn id(&self) -> u64 {
        self.name.seq
    }

    /// The job's own timeout, posted with it ([`Mailbox::job_timeout`](crate::Mailbox::job_timeout)), if any: a worker
    /// stops the job once it has run that long (`fsync msg work --job-timeout`).
    pub fn job_timeout(&self) -> Option<Duration> {
        self.name.timeout_ms.map(Duration::from_millis)
    }

    /// Which delivery this is: 1 the first time, one more after each that failed
    /// ([`fail`](Self::fail), or a receiver killed while it had the message).
    pub fn attempt(&self) -> u32 {
        (self.name.failed)
            .saturating_add(self.name.lost)
            .saturating_add(1)
    }

    /// The delivery failed: the message goes back to the queue to be delivered again, with
    /// one more failed delivery counted; or, if that makes more than the mailbox's
    /// [`retries`](crate::Mailbox::retries) allow, to the dead letters. (Dropping an unfinished
    /// message returns it without counting: a delivery that was cancelled did not fail.)
    pub fn fail(self) -> Result<Failed> {
        self.fail_as(Ended::Failed)
    }

    /// [`fail`](Self::fail), saying how the delivery ended: the message's history
    /// ([`Mailbox::history`](crate::Mailbox::history)) keeps it, with this host, this process and the time.
    pub fn fail_as(mut self, ended: Ended) -> Result<Failed> {
        self.done = true;
        let failed = self.name.failed(self.name.failed.saturating_add(1));
        let l = &self.layout;
        l.record(self.name.seq, &Attempt::here(self.attempt(), ended));
        if failed.dead_under(self.retries) {
            l.bury(&self.claimed, &failed.render())?;
            return Ok(Failed::Dead);
        }
        if let Some(backoff) = self.backoff.filter(|b| !b.is_zero()) {
            let wait = backoff.after(failed.failed);
            match l.delay_claimed(&self.claimed, &failed.render(), delayed::due_after(wait)) {
                Ok(()) => return Ok(Failed::Delayed),
                // The minute's directory cannot be made on a full file system: back to the
                // queue at once, which needs nothing new, rather than left claimed.
                Err(e) if matches!(e.errno(), Some(nix::libc::ENOSPC | nix::libc::EDQUOT)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(
            match l.requeue(&self.claimed, &failed.render(), self.poll)? {
                true => Failed::Queued,
                false => Failed::Left,
            },
        )
    }

    /// Stream the payload to `out`; returns how many bytes it copied. A cancellation signal
    /// (see [`crate::wait`]) ends it ([`CopyError::Interrupted`]); the message then goes back
    /// to the queue when dropped. For the payload in memory, read it: a `Received` is a
    /// [`Read`] of its payload.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> std::result::Result<u64, CopyError> {
        let path = self.layout.claimed.join(&self.claimed);
        wait::copy_cancellable(&mut self.file, out).map_err(|failed| match failed {
            wait::CopyFailed::Read(e) => {
                CopyError::Read(Error::io(&path, "cannot read message", e))
            }
            wait::CopyFailed::Write(e) => CopyError::Write(e),
            wait::CopyFailed::Cancelled(sig) => CopyError::Interrupted(sig),
        })
    }

    /// The payload as a file of its own, read from its start: for a command's standard input
    /// ([`crate::command::spawn_reading`]).
    pub fn input(&self) -> io::Result<File> {
        use std::io::Seek;
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        Ok(file)
    }

    /// Start `argv` as this message's job, as [`command::spawn_reading`](crate::command::spawn_reading)
    /// starts a command (cancellation signals forwarded to it): the payload on its standard
    /// input, `env` added to its environment, and the claim passed down to it. The job then
    /// holds the message as this receiver does: if this process dies (killed alone, say) while
    /// the job runs on, no other receiver takes the message until the job, and whatever it
    /// left running with the inherited descriptor, has exited too; then it goes back to the
    /// queue as a delivery lost, not failed. Its standard output and error go where the
    /// mailbox's [`job_output`](crate::Mailbox::job_output) says: kept in the mailbox, this receiver
    /// then copying them until the job exits ([`Running::wait`](crate::command::Running::wait)
    /// returns once all of it is kept), or inherited (output that cannot be kept is inherited). The job leads a
    /// process group of its own, so that it can be stopped with all it started
    /// ([`Running::signal_group`](crate::command::Running::signal_group)): cancellation signals
    /// are forwarded to that group, and a terminal's reach this process alone.
    pub fn spawn(
        &mut self,
        argv: &[impl AsRef<std::ffi::OsStr>],
        env: &[(impl AsRef<std::ffi::OsStr>, impl AsRef<std::ffi::OsStr>)],
    ) -> std::result::Result<crate::command::Running, crate::command::SpawnError> {
        self.spawn_as(argv, env, true)
    }

    /// On a network file system, the check that the claim is still ours: the lock on the
    /// receiver's registration, which a partition can take away from a living receiver (the
    /// server gives it to nobody, but the claim then counts as dead, and the next receiver
    /// delivers the message again). A job run for the message is stopped before the lease runs
    /// out ([`LossCheck::lease`](crate::LossCheck::lease)), so that it never runs twice at once.
    /// `None` on a local file system, where the claim cannot be lost while we live.
    pub fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(
            self.me.file()?,
            crate::platform::lock::Mode::Exclusive,
            self.locked,
        )
    }

    /// [`spawn`](Self::spawn), as [`command::spawn_job`](crate::command::spawn_job) starts a
    /// command: cancellation signals are not forwarded to it (a pool of workers); in a process
    /// group of its own, it does not get a terminal's either.
    pub fn spawn_job(
        &mut self,
        argv: &[impl AsRef<std::ffi::OsStr>],
        env: &[(impl AsRef<std::ffi::OsStr>, impl AsRef<std::ffi::OsStr>)],
    ) -> std::result::Result<crate::command::Running, crate::command::SpawnError> {
        self.spawn_as(argv, env, false)
    }

    fn spawn_as(
        &mut self,
        argv: &[impl AsRef<std::ffi::OsStr>],
        env: &[(impl AsRef<std::ffi::OsStr>, impl AsRef<std::ffi::OsStr>)],
        forward: bool,
    ) -> std::result::Result<crate::command::Running, crate::command::SpawnError> {
        let input = self
            .input()
            .map_err(crate::command::SpawnError::CannotExecute)?;
        let (output, mode) = self.output;
        // Output that cannot be kept (no room, no permission) goes where it went before
        // keeping it was asked for: the job is never stopped for it.
        let capture = pump::Capture::prepare(&self.layout, self.id(), self.attempt(), output, mode);
        let capture = capture.ok().flatten();
        let keep = self.me.hand_down();
        let ends = capture.as_ref().map(pump::Capture::ends);
        let spawned = crate::command::spawn_keeping(argv, env, Some(&input), keep, ends, forward);
        match (spawned, capture) {
            (Ok(running), Some(capture)) => Ok(running.after_exit(capture.start())),
            (spawned, _) => spawned,
        }
    }

    /// The message has been delivered: remove it for good, and record the job as succeeded
    /// ([`Mailbox::status`](crate::Mailbox::status), for as long as the mailbox [keeps](crate::Mailbox::keep) records).
    pub fn finish(mut self) -> Result<()> {
        self.done = true;
        let seq = self.name.seq;
        if self.attempt() > 1 {
            self.layout.forget(seq);
        }
        let finished = status::Finished::here(Finish::Succeeded, self.attempt(), self.since);
        let claimed = &self.layout.claimed;
        // The message's own file becomes its record, in one rename (no new file to make, and
        // none to free: both cost a search of the inode table on some file systems).
        if !self.layout.record_in_place(&self.claimed, seq, &finished) {
            // Else written before the claim goes: a crash between leaves a record of a job
            // delivered again, never a success without one.
            let record = self.layout.record_finished(seq, &finished);
            claimed.unlink_any(&self.claimed).map_err(|e| {
                Error::io(
                    &claimed.join(&self.claimed),
                    "cannot remove delivered message",
                    e,
                )
            })?;
            drop(record);
        }
        // The record is not flushed on its own (a device flush each, which doubled the cost of
        // a job): it rides on the flush of `claimed` below wherever the file system commits
        // metadata in order (ext4, XFS: one journal transaction holds both), and elsewhere a
        // power cut may take it back, never the success itself (module docs of `status`).
        // Durable before the success is reported: else a power cut could bring the claim (or
        // the queued message, the claim's rename undone too) back, and run the job again.
        flush(claimed)?;
        self.layout.forget_cancel(seq); // asked to stop a job that succeeded first
        Ok(())
    }

    /// The job was cancelled ([`Mailbox::cancel`](crate::Mailbox::cancel), or its worker was asked to stop it: see
    /// [`cancel_requested`](Self::cancel_requested)): remove the message for good, without
    /// another delivery, and record it as cancelled.
    pub fn cancelled(mut self) -> Result<()> {
        self.done = true;
        let l = &self.layout;
        l.cancel_claimed(&self.claimed, &self.name, self.attempt(), self.since)
    }

    /// Whether someone asked to cancel this job ([`Mailbox::cancel`](crate::Mailbox::cancel)) since it was taken: one
    /// look at the mailbox (a worker watches `B/cancel` for changes, or polls this).
    pub fn cancel_requested(&self) -> bool {
        self.layout.cancel_requested(self.name.seq)
    }
}

impl Drop for Received {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Not delivered: back to the queue now (a receiver that dies instead leaves it to the
        // next receiver's recovery).
        let _ = self
            .layout
            .requeue(&self.claimed, &self.name.render(), self.poll);
    }
}

#[cfg(test)]
mod tests {
    use std::{error::Error as _, io, time::Duration};

    use super::{CopyError, Failed};
    use crate::{
        Mailbox,
        msg::{Backoff, delayed},
    };

    /// What a copy's error says, and the error under it. (Mutants answered: the words left
    /// out, the source lost.)
    #[test]
    fn a_copy_error_says_what_failed_and_keeps_its_cause() {
        let write = CopyError::Write(io::Error::from_raw_os_error(nix::libc::ENOSPC));
        assert_eq!(
            write.to_string(),
            "cannot write message: No space left on device (os error 28)"
        );
        assert_eq!(
            write.source().unwrap().to_string(),
            "No space left on device (os error 28)"
        );
        let read = CopyError::Read(crate::Error::new(
            std::path::Path::new("/b/m"),
            crate::ErrorKind::Corrupt,
            "torn",
        ));
        assert_eq!(read.to_string(), read.source().unwrap().to_string());
        assert!(read.to_string().contains("torn"), "{read}");
        let cancelled = CopyError::Interrupted(2);
        assert_eq!(cancelled.to_string(), "cancelled by signal 2");
        assert!(cancelled.source().is_none());
    }

    /// A failed job that cannot be held back for its backoff for another reason than a full
    /// file system (here a file in the place of the bucket it goes to) is an error: not
    /// queued again at once, which only a full file system calls for. (Mutant answered: every
    /// error taken for a full file system.)
    #[test]
    fn a_backoff_that_cannot_hold_the_message_back_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_hours(1);
        let b = Mailbox::new(dir.path().join("b")).backoff_with(Backoff::doubling(hour, hour));
        let _ = b.post(&mut &b"job"[..]).unwrap();
        let msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        // Every bucket the hold may fall in, this minute or the next few.
        let due = delayed::due_after(hour);
        std::fs::create_dir_all(dir.path().join("b/delayed")).unwrap();
        for minute in 0..3 {
            let first = delayed::bucket_of(due + minute * 60_000_000);
            let planted = dir
                .path()
                .join("b/delayed")
                .join(delayed::bucket_name(first));
            std::fs::write(planted, "").unwrap();
        }
        let failed: crate::Result<Failed> = msg.fail();
        assert!(failed.is_err(), "{failed:?}");
        assert!(b.list().unwrap().queued.is_empty(), "queued again");
    }
}
