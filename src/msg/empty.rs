//! Waiting until a mailbox has nothing left to do: nothing queued, delayed or being received
//! (the jobs of `fsync msg recv -- COMMAND` all done).

use super::*;

impl Mailbox {
    /// Wait up to `timeout` (`None`: for ever; zero: look once) until nothing is queued,
    /// delayed or being received: a job being run counts until it is done. `Ok(false)` on
    /// timeout. Dead letters do not count. Creates the mailbox if missing (an empty one).
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
        let l = self.layout()?;
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
                waker.borrow().sleep(due)?;
                return Ok(None);
            }
            loop {
                // A cancellation ended a wait for the `seq` lock: the wait core ends ours.
                let Outcome::Acquired((busy, newest, pending)) = l.busy(self.poll)? else {
                    return Ok(None);
                };
                due = pending.due;
                if !busy {
                    return Ok(Some(()));
                }
                // Armed so since before the look (which changes no watch): wait.
                if waker.borrow().armed_for(newest, &pending.begun) {
                    return Ok(None);
                }
                waker.borrow_mut().arm(&l, newest, &pending.begun)?;
            }
        });
        outcome.map_err(|f| f.naming(l.q.path(), "cannot wait"))
    }
}

impl Layout {
    /// Whether anything is queued, delayed or being received; the shard posts go to; what is
    /// left to wait for of the delayed messages. Returns the claims of dead receivers to the
    /// queue and moves due delayed messages there first.
    pub(super) fn busy(&self, poll: Duration) -> Result<Outcome<(bool, u64, delayed::Pending)>> {
        // What comes due after this instant stays delayed: the look below promotes the rest.
        let now = procinfo::now_micros();
        let pending = claim::tidy(self, poll)?;
        let ends = wait::acquired!(self.current_ends(poll)?);
        let claimed = (self.claimed.entries())
            .map_err(|e| Error::io(self.claimed.path(), "cannot list", e))?
            .iter()
            .any(|(name, _)| name.contains('~'));
        let mut busy = claimed || self.holds_delayed(&pending, now)? || self.has_unsharded();
        let mut first = ends.head;
        while !busy && first <= ends.newest() {
            if let Ok(Some(shard)) = self.shard(first, false) {
                busy = !queued_names(&shard)?.0.is_empty();
            }
            first += SHARD;
        }
        Ok(Outcome::Acquired((busy, ends.newest(), pending)))
    }

    /// Whether a message due after `now` is held back, after a look begun then that left
    /// `pending` (and promoted what was due): a bucket whose minute has not begun may be empty
    /// (its poster died before the rename), so the buckets are looked into, up to the first
    /// such message. (What was due by `now` and is still there could not be moved: not a
    /// message fsync made, or one this user may not read.)
    fn holds_delayed(&self, pending: &delayed::Pending, now: u64) -> Result<bool> {
        if pending.due.is_none() {
            return Ok(false);
        }
        self.any_delayed(|entry| delayed::parse_delayed(entry).is_some_and(|(due, _)| due > now))
            .map_err(|e| Error::io(self.delayed.path(), "cannot list", e))
    }
}
