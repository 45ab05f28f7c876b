//! Waiting until a mailbox has nothing left to do: nothing queued, delayed or being received
//! (the jobs of `fsync msg recv -- COMMAND` all done).

use std::time::Duration;

use crate::{
    error::{Error, Result},
    platform::{fs as pfs, lock::Mode, procinfo},
    wait::{self, Deadline, Outcome, Wait},
};

use super::{Layout, Mailbox, SHARD, claim, delayed, queue, queued_names};

impl Mailbox {
    /// Wait up to `timeout` (`None`: for ever; zero: look once) until nothing is queued,
    /// delayed or being received: a job being run counts until it is done. `Ok(false)` on
    /// timeout. Dead letters do not count. The mailbox must exist: a path that is none is an
    /// error of kind [`ErrorKind::NotFound`](crate::ErrorKind::NotFound), so that a mistyped path never looks empty.
    ///
    /// The thread sleeps until the mailbox changes: on a local file system a finished job
    /// wakes it at once; on a network file system it also re-checks every
    /// [`poll_interval`](Self::poll_interval).
    pub fn wait_empty(&self, timeout: Option<Duration>) -> Result<bool> {
        Ok(self.wait_empty_inner(timeout, None)?.acquired().is_some())
    }

    /// Like [`wait_empty`](Self::wait_empty), telling a timeout from a cancellation, and
    /// calling `progress` with the time waited when the wait starts blocking and about once
    /// a second after.
    pub fn wait_empty_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.wait_empty_inner(timeout, Some(&mut progress))
    }

    fn wait_empty_inner(
        &self,
        timeout: Option<Duration>,
        mut progress: Option<&mut dyn FnMut(Duration)>,
    ) -> Result<Outcome<()>> {
        let deadline = Deadline::after(timeout);
        let l = Layout {
            deadline,
            ..self.existing_layout()?
        };
        let network = pfs::fs_kind_of_path(&l.q.pinned()).network;
        let waker = std::cell::RefCell::new(queue::Waker::default());
        let mut due: Option<u64> = None;
        let spec = Wait {
            deadline,
            poll: network.then_some(self.poll),
            progress: progress.is_some().then_some(wait::PROGRESS_EVERY),
        };
        let report = |waited| {
            if let Some(p) = progress.as_mut() {
                p(waited);
            }
        };
        let outcome = wait::wait_for(spec, report, |block| -> Result<_, wait::Failed> {
            if block {
                waker.borrow().sleep(&l, due)?;
                return Ok(None);
            }
            loop {
                // A cancellation ended a wait for the `seq` lock: the wait core ends ours.
                let Outcome::Acquired((busy, next)) = l.busy(self.poll)? else {
                    return Ok(None);
                };
                due = next.due;
                if !busy {
                    return Ok(Some(()));
                }
                if waker.borrow().armed_for().as_ref() == Some(&next.watched()) {
                    return Ok(None);
                }
                waker.borrow_mut().arm(&l, next.watched())?;
            }
        });
        outcome.map_err(|f| f.naming(l.q.path(), "cannot wait"))
    }
}

impl Layout {
    /// Whether anything is queued, delayed or being received, and what to wait for next.
    /// Returns the claims of dead receivers to the queue and moves due delayed messages there
    /// first.
    pub(super) fn busy(&self, poll: Duration) -> Result<Outcome<(bool, claim::Next)>> {
        // What comes due after this instant stays delayed: the look below promotes the rest.
        let now = procinfo::now_micros();
        let (pending, claims) = claim::tidy(self, poll)?;
        wait::acquired!(self.current_levels(poll)?); // heads rebuilt, if they must be
        // Under the shared lock on `seq`, messages move only forwards: from a shard to
        // `claimed` (a receiver takes one), from there to `delayed` (a backoff), the dead
        // letters or nowhere (done); back to the queue, or from a delay to `claimed` (a
        // cancel), only under the exclusive lock (and a level's directory is made only under
        // it). So looking in that order sees every
        // message that is anywhere all along.
        let seq = wait::acquired!(self.lock_seq(Mode::Shared, poll, self.deadline)?);
        let last = self.last_seq(&seq)?;
        let present = self.present()?;
        let levels: Vec<u8> = present.iter().map(|l| l.level).filter(|&p| p > 0).collect();
        // A committed batch seen under the lock is a dead poster's, not yet queued (`batch.rs`).
        let mut busy = self.batch_waiting();
        for level in present.iter().filter(|_| !busy) {
            let ends = level.ends_at(last).unwrap_or(queue::Ends { head: 0, last });
            if level.holds_queued(ends)? {
                busy = true;
                break;
            }
        }
        busy = busy
            || (self.claimed.entries())
                .map_err(|e| Error::io(self.claimed.path(), "cannot list", e))?
                .iter()
                .any(|(name, _)| name.contains('~'));
        // A backoff moves a message from `claimed` to a bucket of `delayed` meanwhile: looked
        // for after `claimed`, in the buckets themselves.
        busy = busy || self.holds_delayed(now)?;
        drop(seq);
        let next = claim::Next {
            shard: queue::shard_of(last + 1),
            levels,
            due: pending.due,
            begun: pending.begun,
            claims,
        };
        Ok(Outcome::Acquired((busy, next)))
    }

    /// Whether this level holds a queued message, walked from `ends` (read under the lock on
    /// `seq` its caller holds): messages a walk from the head cannot reach (a head or `seq`
    /// rewritten) count too, since the next receive rebuilds the head and takes them.
    fn holds_queued(&self, ends: queue::Ends) -> Result<bool> {
        if self.out_of_place(ends) {
            return Ok(true);
        }
        let mut first = ends.head;
        let mut missing = 0;
        while first <= ends.newest() {
            if missing >= queue::MAX_MISSING {
                first = self.skip_gap(first, ends.newest())?;
                missing = 0;
                continue;
            }
            match self.shard(first) {
                Ok(Some(shard)) => {
                    if !queued_names(&shard)?.0.is_empty() {
                        return Ok(true);
                    }
                    missing = 0;
                }
                _ => missing += 1,
            }
            first += SHARD;
        }
        Ok(false)
    }

    /// Whether a message due after `now` is held back, after a look begun then (which
    /// promoted what was due): a bucket whose minute has not begun may be empty (its poster
    /// died before the rename), so the buckets are looked into, up to the first such message.
    /// (What was due by `now` and is still there could not be moved: not a message fsync
    /// made, or one this user may not read.) Asked whether anything is delayed or not: a
    /// backoff may have moved a message there since that look.
    fn holds_delayed(&self, now: u64) -> Result<bool> {
        self.any_delayed(|entry| delayed::parse_delayed(entry).is_some_and(|(due, _)| due > now))
            .map_err(|e| Error::io(self.delayed.path(), "cannot list", e))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{
        Mailbox,
        platform::lock::{Mode, flock},
    };

    /// A wait for an empty mailbox ends at its timeout even while another holds the lock on
    /// `seq` (a post under way that hangs): each look waits for that lock only until the
    /// wait's deadline. (Mutant answered: the deadline left out of the looks, which then
    /// waited for the lock for ever.)
    #[test]
    fn a_wait_for_empty_ends_at_its_timeout_while_seq_is_locked() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        let _ = b.post(&mut &b"x"[..]).unwrap();
        let seq = std::fs::File::open(dir.path().join("b/seq")).unwrap();
        assert!(flock(&seq, Mode::Exclusive, false).unwrap());
        let wait = move || b.wait_empty(Some(Duration::from_millis(100)));
        let empty = crate::test_support::within(Duration::from_mins(1), wait);
        assert!(!empty.expect("the wait ended").unwrap());
    }
}
