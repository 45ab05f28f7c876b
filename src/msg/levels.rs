/*!
Priority levels: a message posted with a level `P` (1 to [`MAX_PRIORITY`]) is taken before any
of a level below it, in the order of its numbers within its level, at the cost of a receive
without levels (the protocol's *Levels* in [`super`]'s docs).

# On disk

Level 0, the default, is the queue of the protocol: `B/q/SHARD/NAME`, its head `B/head`. Level
`P` is a queue of its own in the level directory `B/q/pP`: messages in shards
`B/q/pP/SHARD/NAME`, its head `B/q/pP/head` (`SHARD\n`), every rule of *Shards and the head* the
same within it. What the levels share: the one `seq` (a message's `SEQ` is its id in the
mailbox, whatever its level: numbers are handed out across levels, so a level's shards are
sparse in them), its lock (which guards every level's head), `claimed`, `delayed`, `dead` and
`recv`. A message's level travels in its name, `KIND` option `,pP` (`src/msg/name.rs`), so every
step that moves it back to the queue (a requeue, a backoff's promotion, a dead letter put back,
the recovery of a dead receiver's claim) puts it in its own level: [`Layout::queue_from`] reads
the level from the name.

- **post** at level `P`: as at level 0, under the exclusive lock on `seq`, into
  `q/pP/SHARD/NAME`; the level directory is made first if missing (`mkdir`), and `q` flushed
  before anything goes into it if this post made it or found it empty (its maker may have
  died before the flush). Level directories are made only under the exclusive lock on `seq`,
  and never removed, so what a walk under the shared lock sees of them stays true while it
  holds it. The post that makes a level's first shard writes the level's head.
- **receive**: the levels that exist (one failed `openat` for each level that does not, or
  none once found: a process remembers the level directories it found), highest first, then
  level 0. Their heads and `seq` are read together under one shared lock; each level is walked
  from its head to the shard posts go to, as the protocol walks level 0 (moving the head past
  empty shards; after [`queue::MAX_MISSING`] missing shards, its directory listed once), and the
  receiver claims the first message of the highest level that holds one. So a receive lists
  one shard of each level in use, never a whole queue, and a message of a higher level queued
  before the receive began is taken before any of a lower one (unless another receiver takes
  it). A level whose head is missing or torn is rebuilt from its directory, as level 0's is;
  one that nothing reached is checked against its directory (`out_of_place`) as level 0 is.
- **waiting**: besides what the protocol watches, the shard posts go to in each level
  directory that exists (made if missing, as level 0's), and `q` while a level directory is
  missing (its `mkdir` is the first post at that level; shards come and go there once in a
  hundred posts, the only other changes it sees).
- **wait_empty** and listings look at every level: the first at all of them under the shared
  lock on `seq` (a level made meanwhile holds only messages posted, or moved back under the
  exclusive lock, after the look began); listings show the levels highest first, in the order
  receivers take them, with each message's level.

An fsync from before levels takes no message of a level above 0 (their names are no messages
to it, and `q/pP` no shard): upgrade the receivers of a mailbox before its posters use levels.
*/

use std::sync::OnceLock;

use super::*;
pub use name::MAX_PRIORITY;

/// The queue's directory `q` (level 0) and the level directories found so far: a level's
/// directory, once made, is never removed, so it is looked for only until found.
#[derive(Debug)]
pub(super) struct Levels {
    q: Arc<Dir>,
    found: [OnceLock<Arc<Dir>>; MAX_PRIORITY as usize],
}

impl Levels {
    pub(super) fn new(q: Arc<Dir>) -> Levels {
        Levels {
            q,
            found: Default::default(),
        }
    }

    /// The queue's directory, `B/q`: level 0's, and the parent of the others'.
    pub(super) fn q(&self) -> &Arc<Dir> {
        &self.q
    }
}

/// The name of level `p`'s directory in `q`: `pP`.
pub(super) fn level_name(p: u8) -> String {
    format!("p{p}")
}

/// The level an entry of `q` named `name` is the directory of, if it is one.
pub(super) fn parse_level(name: &str) -> Option<u8> {
    let p = name.strip_prefix('p')?;
    match p.as_bytes() {
        [d @ b'1'..=b'9'] => Some(d - b'0').filter(|&p| p <= MAX_PRIORITY),
        _ => None,
    }
}

impl Layout {
    /// This mailbox's queue at level `p` (this layout with its `q` and head those of the level):
    /// `None` if the level's directory is missing (or is not a directory) and not `create`.
    /// Made, it is made durable (`q` flushed) before it is returned, if it was made now or found
    /// empty: call with `create` only under the exclusive lock on `seq`.
    pub(super) fn at(&self, p: u8, create: bool) -> Result<Option<Layout>> {
        if p == 0 {
            return Ok(Some(Layout {
                q: self.levels.q.clone(),
                head_in: self.top.clone(),
                level: 0,
                ..self.clone()
            }));
        }
        let slot = &self.levels.found[usize::from(p - 1)];
        let dir = match slot.get() {
            Some(dir) if !create => dir.clone(),
            _ => {
                let name = level_name(p);
                let found = match create {
                    true => self.levels.q.sub(&name, false)?,
                    false => self.levels.q.sub(&name, false).ok().flatten(),
                };
                let (dir, made) = match found {
                    Some(dir) => (dir, false),
                    None if create => (self.levels.q.sub(&name, true)?.expect("created"), true),
                    None => return Ok(None),
                };
                if create {
                    durable_home(&self.levels.q, &dir, made)?;
                }
                slot.get_or_init(|| Arc::new(dir)).clone()
            }
        };
        Ok(Some(Layout {
            q: dir.clone(),
            head_in: dir,
            level: p,
            ..self.clone()
        }))
    }

    /// Entry `s` of this level's directory, named by its path in the queue's directory (`pP/...`).
    pub(super) fn in_level(&self, mut s: Skipped) -> Skipped {
        if self.level > 0 {
            s.name = format!("{}/{}", level_name(self.level), s.name);
        }
        s
    }

    /// The levels whose directories exist, highest first, level 0 last: the order a receive
    /// looks in. Under a lock on `seq` (shared will do), what it says stays true while it is
    /// held.
    pub(super) fn present(&self) -> Result<Vec<Layout>> {
        let mut out = Vec::with_capacity(usize::from(MAX_PRIORITY) + 1);
        for p in (1..=MAX_PRIORITY).rev() {
            if let Some(lv) = self.at(p, false)? {
                out.push(lv);
            }
        }
        out.push(self.at(0, false)?.expect("level 0 always"));
        Ok(out)
    }
}

impl Mailbox {
    /// Messages posted through this mailbox have priority level `level` (0, the default, to
    /// [`MAX_PRIORITY`]): a receiver takes a message of a higher level before any of a lower
    /// one, and those of one level in the order they were posted. A level past
    /// [`MAX_PRIORITY`] makes posts fail with an error of kind [`ErrorKind::Invalid`]. The
    /// level stays with the message through failures, backoffs, dead letters and
    /// [`retry`](Self::retry).
    pub fn priority(mut self, level: u8) -> Mailbox {
        self.priority = level;
        self
    }

    /// The error for a priority past [`MAX_PRIORITY`], if this mailbox's is.
    pub(super) fn check_priority(&self) -> Result<()> {
        if self.priority <= MAX_PRIORITY {
            return Ok(());
        }
        Err(Error::new(
            self.path(),
            ErrorKind::Invalid,
            format!(
                "priority {} is not a level (0 to {MAX_PRIORITY})",
                self.priority
            ),
        ))
    }
}

impl Queued {
    /// Its priority level (0 to [`MAX_PRIORITY`]): receivers take higher levels first.
    pub fn priority(&self) -> u8 {
        MessageName::parse(&self.name).map_or(0, |n| n.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_names() {
        for p in 1..=MAX_PRIORITY {
            assert_eq!(parse_level(&level_name(p)), Some(p));
        }
        for bad in ["p0", "p4", "p", "p01", "p10", "q1", "P1", "p1 "] {
            assert_eq!(parse_level(bad), None, "{bad}");
        }
    }
}
