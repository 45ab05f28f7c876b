//! Keys: a message posted with a key is not queued while another with the same key is queued,
//! delayed or being received (de-duplication of jobs). `B/keys/KEY` names the last message
//! posted with `KEY` (`SEQ.UNIQ`, the start of its name); it is read and written under the
//! exclusive lock on `seq`, which posts hold, so of two posts with one key only one queues.
//! Whether that message is still pending is looked up where it can be: its shard, `claimed`,
//! the buckets of `delayed`. A key whose message is gone (delivered, or a dead letter) is
//! simply replaced.

use std::io::{Read, Write};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{dir::Dir, fs as pfs},
};

use super::{Layout, Mailbox, durable_home, flush, posted, shard_of};

/// What a post with a key did ([`Mailbox::post_keyed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keyed {
    /// Queued (or delayed) as this name.
    Queued(String),
    /// Not queued: the message that starts with this `SEQ.UNIQ` has the same key and is
    /// still queued, delayed or being received.
    Pending(String),
}

/// The longest key, in bytes.
const MAX_KEY_BYTES: usize = 128;

/// Why `key` is not a key ([`Mailbox::post_keyed`]): 1 to 128 letters, digits, `.`, `_` or `-`,
/// not first a dot.
///
/// # Errors
///
/// The reason in words, naming the key.
pub fn check_key(key: &str) -> std::result::Result<(), crate::error::InvalidName> {
    let fine = !key.is_empty()
        && key.len() <= MAX_KEY_BYTES
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    match fine {
        true => Ok(()),
        false => Err(crate::error::InvalidName(format!(
            "invalid key {key:?}: 1 to {MAX_KEY_BYTES} letters, digits, '.', '_' or '-', not \
             starting with '.'"
        ))),
    }
}

impl Layout {
    /// `B/keys`, made if missing, its entry in `B` durable.
    fn keys(&self) -> Result<Dir> {
        let (keys, made) = match self.top.open_sub("keys")? {
            Some(keys) => (keys, false),
            None => (self.top.create_sub("keys")?, true),
        };
        durable_home(&self.top, &keys, made)?;
        Ok(keys)
    }

    /// Under the exclusive lock on `seq`: the message (`SEQ.UNIQ`) that holds `key` and is
    /// still pending, if any.
    pub(super) fn key_pending(&self, key: &str) -> Result<Option<String>> {
        let keys = self.keys()?;
        // Not a file fsync made (a link, a FIFO): as if missing; it is replaced.
        let Ok(Some(file)) = keys.open(key, false) else {
            return Ok(None);
        };
        let mut text = String::new();
        let _ = (&file).take(256).read_to_string(&mut text);
        let stem = text.trim_end();
        let Some((seq, _)) = stem.split_once('.') else {
            return Ok(None);
        };
        let Ok(seq) = seq.parse::<u64>() else {
            return Ok(None);
        };
        let prefix = format!("{stem}.");
        let has = |dir: &Dir, strip: fn(&str) -> &str| {
            dir.entries()
                .is_ok_and(|e| e.iter().any(|(n, _)| strip(n).starts_with(&prefix)))
        };
        // Queued at whichever level it was posted.
        let mut queued = false;
        for level in self.present()? {
            queued =
                queued || (level.shard(shard_of(seq))?).is_some_and(|shard| has(&shard, |n| n));
        }
        let pending = queued
            || has(&self.claimed, |n| n)
            || (self.any_delayed(|n| {
                n.split_once('.')
                    .is_some_and(|(_, rest)| rest.starts_with(&prefix))
            }))
            .unwrap_or(false);
        Ok(pending.then(|| stem.to_string()))
    }

    /// Under the exclusive lock on `seq`: `key` now names message `stem` (`SEQ.UNIQ`).
    pub(super) fn set_key(&self, key: &str, stem: &str) -> Result<()> {
        let keys = self.keys()?;
        let tmp = format!(".{key}.{}", std::process::id());
        let _ = keys.unlink_any(&tmp);
        let mut file = keys
            .create_new(&tmp, 0o644)
            .map_err(|e| pfs::explain_open_error(&keys.join(&tmp), "cannot write key", e))?;
        // Durable before the post that holds the key returns: a key a power cut took back (or
        // emptied) would let a second post with it queue while its message is pending.
        let written = file
            .write_all(format!("{stem}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .and_then(|()| keys.rename(&tmp, &keys, key));
        if let Err(e) = written {
            let _ = keys.unlink_any(&tmp);
            return Err(Error::io(&keys.join(key), "cannot write key", e));
        }
        flush(&keys)
    }
}

impl Mailbox {
    /// Post (as [`post`](Self::post) does) unless a message posted with the same `key` is
    /// still queued, delayed or being received: then nothing is queued and the answer names
    /// that message. For jobs that must not pile up ("rebuild the index" posted on every
    /// commit). Errors as [`post`](Self::post), and [`ErrorKind::Invalid`] for a key that is
    /// not 1 to 128 letters, digits, `.`, `_` or `-` (not first a dot).
    pub fn post_keyed(&self, mut payload: impl Read, key: &str) -> Result<Keyed> {
        check_key(key)
            .map_err(|why| Error::new(self.path(), ErrorKind::Invalid, why.to_string()))?;
        posted(
            self.path(),
            self.post_placed(&mut payload, None, Some(key))?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key is 1 to 128 letters, digits, `.`, `_` or `-`, not first a dot: each rule alone
    /// refuses a key that keeps the others. (Mutants answered: the check made to pass all, or
    /// any rule joined with `||`.)
    #[test]
    fn a_key_breaking_any_one_rule_is_refused() {
        let longest = "k".repeat(MAX_KEY_BYTES);
        for fine in ["a", "job-1.2_x", "a.", longest.as_str()] {
            assert!(check_key(fine).is_ok(), "{fine:?}");
        }
        let too_long = "k".repeat(MAX_KEY_BYTES + 1);
        for bad in ["", too_long.as_str(), ".hidden", "a/b", "a b", "é"] {
            let err = check_key(bad).expect_err(bad);
            assert!(err.0.contains("invalid key"), "{bad:?}: {}", err.0);
        }
    }
}
