//! Dead letters: messages whose deliveries failed as often as their receivers allow
//! ([`Mailbox::retries`](crate::Mailbox::retries)), kept in `B/dead/` under their names until [`Mailbox::retry`](crate::Mailbox::retry) puts
//! them back in the queue. A receiver moves a message there when its delivery fails once too
//! often, or when it takes one that failed too often already (its receivers were killed). A
//! receiver killed between taking such a message and moving it counts as one more failure, as
//! any receiver that dies with a message does.

use crate::error::{Error, ErrorKind, Result};

use super::{Mailbox, queued_names};

impl Mailbox {
    /// Put dead letters back in the queue, their failed and lost deliveries forgotten (with
    /// their [`history`](crate::Mailbox::history)): those numbered
    /// `ids` (the sequence numbers of [`Received::id`](crate::Received::id) and `FSYNC_MSG_ID`), or all of them
    /// when `ids` is empty. They keep their place: oldest first, before the messages queued
    /// after them. Returns the ids put back; an id that is not a dead letter is not an error
    /// (another process may have put it back first), it is just not in the answer.
    pub fn retry(&self, ids: &[u64]) -> Result<Vec<u64>> {
        let l = self.existing_layout()?;
        let Some(dead) = l.dead()? else {
            return Ok(Vec::new());
        };
        let (names, _) = queued_names(&dead)?;
        let mut back = Vec::new();
        for (name, parsed) in names {
            if !ids.is_empty() && !ids.contains(&parsed.seq) {
                continue;
            }
            // Its history goes with the counts it explains, before anyone can add to it.
            l.forget(parsed.seq);
            let fresh = parsed.forgotten().render();
            if l.queue_from(&dead, &name, &fresh, self.poll, || {})? {
                back.push(parsed.seq);
            } else {
                return Err(Error::new(
                    &l.top.join("seq"),
                    ErrorKind::Unavailable,
                    "is locked by another process for more than a second; try again",
                ));
            }
        }
        Ok(back)
    }
}
