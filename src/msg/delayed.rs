//! Delayed messages: posted with a delay, or a failed job held back before its next attempt.
//! They wait in `B/delayed/` as `DUE.NAME` (`DUE` the time in microseconds since the epoch, in
//! 20 digits) and go to their shard once due, moved there by the receivers (the protocol's
//! *Delays* in [`super`]'s docs).

use super::*;

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

impl Layout {
    /// Move the delayed messages that are due into the queue, in their shards (lowering the
    /// head as any returned message does); the earliest due time of those that are not.
    pub(super) fn promote(&self, poll: Duration) -> Result<Option<u64>> {
        let entries = self
            .delayed
            .entries()
            .map_err(|e| pfs::explain_open_error(self.delayed.path(), "cannot list", e))?;
        let now = procinfo::now_micros();
        let mut next: Option<u64> = None;
        for (entry, kind) in entries {
            if kind == Some(Kind::Dir) {
                continue;
            }
            let Some((due, name)) = parse_delayed(&entry) else {
                continue;
            };
            if due > now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            // Only regular files with one link: what fsync made (not a link planted there).
            let Ok(Some((file, meta))) = self.delayed.open_stat(&entry, false) else {
                continue;
            };
            if !self
                .delayed
                .sole_link(&entry, &file, Some(&meta))
                .unwrap_or(false)
            {
                continue;
            }
            self.queue_from(&self.delayed, &entry, &name.render(), poll)?;
        }
        Ok(next)
    }

    /// Hold claimed message `claimed` back until `due`, as `name`: a failed job's backoff.
    pub(super) fn delay_claimed(&self, claimed: &str, name: &str, due: u64) -> Result<()> {
        self.claimed
            .rename(claimed, &self.delayed, &delayed_name(due, name))
            .map_err(|e| Error::io(&self.claimed.join(claimed), "cannot hold message back", e))
    }
}
