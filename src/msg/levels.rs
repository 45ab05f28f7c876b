/*!
Priority levels: a message posted with a level `P` (1 to [`MAX_PRIORITY`]) is taken before any
of a level below it, in the order of its numbers within its level, at the cost of a receive
without levels (the protocol's section [*Levels*](super#levels) in [`super`]'s docs).

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

use std::sync::{Arc, OnceLock};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::dir::Dir,
};

pub use super::name::MAX_PRIORITY;
use super::{Layout, Mailbox, MessageName, Queued, Skipped, durable_home};

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
    /// `None` if the level's directory is missing (or is not a directory).
    pub(super) fn at(&self, p: u8) -> Result<Option<Layout>> {
        self.level(p, false)
    }

    /// This mailbox's queue at level `p`, its directory made if missing, and made durable (`q`
    /// flushed) before it is returned if it was made now or found empty: only under the
    /// exclusive lock on `seq`.
    pub(super) fn made_at(&self, p: u8) -> Result<Layout> {
        let not_made = || Error::new(self.levels.q.path(), ErrorKind::NotFound, "level not made");
        self.level(p, true)?.ok_or_else(not_made)
    }

    /// The queue at level 0, whose directory is the mailbox's `q` itself.
    pub(super) fn level0(&self) -> Layout {
        Layout {
            q: self.levels.q.clone(),
            head_in: self.top.clone(),
            level: 0,
            ..self.clone()
        }
    }

    fn level(&self, p: u8, create: bool) -> Result<Option<Layout>> {
        if p == 0 {
            return Ok(Some(self.level0()));
        }
        let slot = &self.levels.found[usize::from(p - 1)];
        let dir = match slot.get() {
            Some(dir) if !create => dir.clone(),
            _ => {
                let name = level_name(p);
                let found = match create {
                    true => self.levels.q.open_sub(&name)?,
                    false => self.levels.q.open_sub(&name).ok().flatten(),
                };
                let (dir, made) = match found {
                    Some(dir) => (dir, false),
                    None if create => (self.levels.q.create_sub(&name)?, true),
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
            if let Some(lv) = self.at(p)? {
                out.push(lv);
            }
        }
        out.push(self.level0());
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
    use std::time::Duration;

    use super::*;
    use crate::msg::{
        Keyed, shard_name,
        tests::{next_text, text},
    };

    /// A level's directory found by a look (which makes nothing, and remembers it) is made
    /// durable when a message is first put in it, if it is empty: its maker may have died
    /// before its flush of `q`. (Mutants answered: the directory remembered by the look
    /// returned to the move as it is, without that flush.)
    #[test]
    fn a_level_found_by_a_look_is_made_durable_before_its_first_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        let _ = b.post(&mut &b"zero"[..]).unwrap();
        std::fs::create_dir(path.join("q").join(level_name(2))).unwrap(); // its maker died
        let l = b.layout().unwrap();
        assert!(l.at(2).unwrap().is_some());
        super::super::post::FLUSHED.with_borrow_mut(Vec::clear);
        let _ = l.made_at(2).unwrap();
        let flushed = super::super::post::FLUSHED.take();
        assert!(flushed.contains(&path.join("q")), "flushed: {flushed:?}");
    }

    /// Level 2's messages, sparse in the numbers (level 0's in between), spread over several of
    /// its shards far apart: taken first, in order, and the level's head moves on past its
    /// emptied shards, as level 0's does.
    #[test]
    fn a_level_sparse_in_the_numbers_is_walked_and_its_head_moves_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let zero = Mailbox::new(&path);
        let two = Mailbox::new(&path).priority(2);
        // Numbers 1, 251, 501, 751 at level 2, the next at level 0, the rest handed out (as
        // to messages delayed, or taken since).
        for k in 0..4 {
            let _ = two.post(&mut format!("two {k}").as_bytes()).unwrap();
            let _ = zero.post(&mut format!("zero {k}").as_bytes()).unwrap();
            std::fs::write(path.join("seq"), format!("{}\n", (k + 1) * 250)).unwrap();
        }
        let level = path.join("q").join("p2");
        for k in 0..4 {
            assert_eq!(next_text(&zero), Some(format!("two {k}")));
        }
        assert_eq!(next_text(&zero).as_deref(), Some("zero 0"));
        // The head of level 2 is where posts go now: nothing is left before it.
        assert_eq!(
            std::fs::read_to_string(level.join("head")).unwrap(),
            format!("{}\n", shard_name(1000))
        );
        assert_eq!(crate::test_support::listing(&level), ["head"]);
    }

    /// A head of a level that is torn, missing, or planted past messages (with `seq` set back)
    /// is rebuilt from the level's directory, and nothing is lost.
    #[test]
    fn a_levels_torn_or_planted_head_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let three = Mailbox::new(&path).priority(3);
        for i in 0..150 {
            let _ = three.post(&mut format!("m{i}").as_bytes()).unwrap();
        }
        let head = path.join("q").join("p3").join("head");
        let mut i = 0;
        for torn in ["junk", "", "99999999999999999900\n"] {
            std::fs::write(&head, torn).unwrap();
            assert_eq!(next_text(&three).as_deref(), Some(format!("m{i}").as_str()));
            i += 1;
        }
        std::fs::remove_file(&head).unwrap();
        assert_eq!(next_text(&three).as_deref(), Some(format!("m{i}").as_str()));
        // `seq` rewritten behind the messages of the level's shard 100: a walk from the head
        // ends before it, the check of the directory finds it (and `seq` is raised again).
        std::fs::write(path.join("seq"), "50\n").unwrap();
        for i in i + 1..150 {
            assert_eq!(next_text(&three).as_deref(), Some(format!("m{i}").as_str()));
        }
        assert_eq!(std::fs::read_to_string(path.join("seq")).unwrap(), "150\n");
        assert_eq!(next_text(&three), None);
        assert!(
            Mailbox::new(&path)
                .wait_empty(Some(Duration::ZERO))
                .unwrap()
        );
    }

    /// A key is held while its message is queued at any level.
    #[test]
    fn a_key_is_held_while_its_message_waits_at_a_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let one = Mailbox::new(&path).priority(1);
        let first = one.post_keyed(&mut &b"a"[..], "k").unwrap();
        assert!(matches!(first, Keyed::Queued(_)));
        let second = one.post_keyed(&mut &b"b"[..], "k").unwrap();
        assert!(matches!(second, Keyed::Pending(_)));
        assert_eq!(next_text(&one).as_deref(), Some("a"));
        let third = one.post_keyed(&mut &b"c"[..], "k").unwrap();
        assert!(matches!(third, Keyed::Queued(_)));
    }

    /// Receivers make no level's directory (a mailbox that never used levels stays without
    /// them), and an entry they pass over in a level is named by its path in `q`: `pP/...`.
    #[test]
    fn receivers_make_no_level_and_name_what_they_pass_over_in_one() {
        use crate::test_support::Passed;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let b = Mailbox::new(&path);
        let _ = b.post(&mut &b"zero"[..]).unwrap();
        assert_eq!(next_text(&b).as_deref(), Some("zero"));
        assert_eq!(next_text(&b), None);
        assert_eq!(
            crate::test_support::listing(&path.join("q")),
            [shard_name(0)]
        );
        let _ = b.clone().priority(2).post(&mut &b"two"[..]).unwrap();
        let planted = "00000000000000000001.h-1-0.-.msg,p2";
        let shard = path.join("q").join("p2").join(shard_name(0));
        std::fs::create_dir(shard.join(planted)).unwrap();
        let mut passed = Vec::new();
        let got = b
            .recv_with(Some(Duration::ZERO), Passed(&mut passed))
            .unwrap();
        assert_eq!(got.acquired().map(text).as_deref(), Some("two"));
        assert_eq!(passed, [format!("p2/{}/{planted}", shard_name(0))]);
        assert!(!path.join("q").join("p1").exists() && !path.join("q").join("p3").exists());
    }

    /// A level past the highest is refused, and nothing is queued.
    #[test]
    fn a_level_past_the_highest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let e = Mailbox::new(&path)
            .priority(4)
            .post(&mut &b"x"[..])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(!path.exists());
    }

    /// A layout at a level gives back level 0's (its `q` the queue's directory, its head
    /// the mailbox's), whatever level it is at; entries are named by their path in `q`, a
    /// level's under `pP/`; a listed message tells its level. (Mutants answered: level 0's
    /// layout keeping the level's directory, head or number; level 0's entries named under
    /// `p0/`; a listed message's level a constant.)
    #[test]
    fn a_level_gives_back_level_0_and_names_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let _ = Mailbox::new(&path).post(&mut &b"low"[..]).unwrap();
        let _ = Mailbox::new(&path)
            .priority(2)
            .post(&mut &b"high"[..])
            .unwrap();
        let l = Mailbox::new(&path).layout().unwrap();
        let p2 = l.at(2).unwrap().unwrap();
        let q = path.join("q");
        assert_eq!(
            (p2.level, p2.q.path(), p2.head_in.path()),
            (2, q.join("p2").as_path(), q.join("p2").as_path())
        );
        let l0 = p2.level0();
        assert_eq!(
            (l0.level, l0.q.path(), l0.head_in.path()),
            (0, q.as_path(), path.as_path())
        );
        let s = || Skipped {
            name: "x".to_string(),
            reason: String::new(),
        };
        assert_eq!(
            (l0.in_level(s()).name, p2.in_level(s()).name),
            ("x".to_string(), "p2/x".to_string())
        );
        let levels: Vec<u8> = (Mailbox::new(&path).list().unwrap().queued.iter())
            .map(Queued::priority)
            .collect();
        assert_eq!(levels, [2, 0]);
    }

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
