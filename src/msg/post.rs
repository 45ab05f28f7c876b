//! Posting: the payload written and flushed, then numbered under the exclusive lock on `seq`
//! (written and flushed first) and renamed into its shard, its bucket of delayed messages, or
//! refused for a pending key (the protocol's section [*post*](super#post) in [`super`]'s docs).

use std::{fs::File, io::Read, path::Path, time::Duration};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        dir::Dir,
        fs as pfs,
        lock::{self, Mode},
    },
    wait::{self, Deadline, Outcome},
};

use super::{Keyed, Layout, MessageName, shard_of};

/// Where a post goes besides its shard.
#[derive(Default)]
pub(super) struct Place<'a> {
    /// Held in `delayed/` until then (microseconds since the epoch).
    pub(super) due: Option<u64>,
    /// Not queued while a message with this key is pending.
    pub(super) key: Option<&'a str>,
}

/// Write `payload` and queue it as `name` (numbered now), as `place` says.
pub(super) fn post(
    l: &Layout,
    payload: &mut dyn Read,
    mut name: MessageName,
    mode: u32,
    poll: Duration,
    deadline: Deadline,
    place: &Place<'_>,
) -> Result<Outcome<Keyed>> {
    let due = place.due;
    let tmp = format!(".{}", name.uniq);
    let mut file = l
        .tmp
        .create_new(&tmp, mode)
        .map_err(|e| pfs::explain_open_error(&l.tmp.join(&tmp), "cannot write message", e))?;
    let _ = lock::flock(&file, Mode::Exclusive, false); // "being written", for cleaners
    let discard = || {
        let _ = l.tmp.unlink_any(&tmp);
    };
    let written = match wait::copy_cancellable(payload, &mut file) {
        Ok(_) => file.sync_all().map_err(wait::CopyFailed::Write),
        Err(failed) => Err(failed),
    };
    if let Err(failed) = written {
        discard();
        return match failed {
            wait::CopyFailed::Cancelled(sig) => Ok(Outcome::Interrupted(sig)),
            wait::CopyFailed::Read(e) => Err(Error::io(
                l.top.path(),
                "cannot read the message to queue",
                e,
            )),
            wait::CopyFailed::Write(e) => {
                Err(Error::io(&l.tmp.join(&tmp), "cannot write message", e))
            }
        };
    }
    let result = with_seq(l, poll, deadline, |n| {
        if let Some(sig) = wait::cancelled() {
            return Ok(Outcome::Interrupted(sig)); // the last moment to give up
        }
        if let Some(key) = place.key {
            if let Some(pending) = l.key_pending(key)? {
                return Ok(Outcome::Acquired(Err(pending)));
            }
            l.set_key(key, &format!("{n:020}.{}", name.uniq))?;
        }
        name.seq = n;
        let dest = name.render();
        if let Some(due) = due {
            return Ok(Outcome::Acquired(Ok(l.hold(&l.tmp, &tmp, due, &dest)?)));
        }
        // Its level's directory made if missing (under this lock, as it must be).
        let level = l.made_at(name.priority)?;
        let dir = level.shard_to_fill(shard_of(n))?;
        l.tmp
            .rename(&tmp, &dir, &dest)
            .map_err(|e| pfs::explain_open_error(&dir.join(&dest), "cannot queue message", e))?;
        Ok(Outcome::Acquired(Ok(dir)))
    });
    let shard = match result {
        Ok(Outcome::Acquired(Ok(placed))) => placed,
        Ok(Outcome::Acquired(Err(pending))) => {
            discard();
            return Ok(Outcome::Acquired(Keyed::Pending(pending)));
        }
        Ok(gave_up) => {
            discard();
            return Ok(gave_up.map(|_| unreachable!("not acquired")));
        }
        Err(e) => {
            discard();
            return Err(e);
        }
    };
    // The rename is durable once the shard's directory is (a bucket's, for a delayed
    // message); the shard's own entry was made durable before the rename (`durable_home`).
    flush(&shard)?;
    Ok(Outcome::Acquired(Keyed::Queued(name.render())))
}

/// Make directory `d`'s entries durable (`fsync` of the directory): a rename, create or unlink
/// in it survives a power cut only then.
pub(crate) fn flush(d: &Dir) -> Result<()> {
    #[cfg(test)]
    FLUSHED.with_borrow_mut(|f| f.push(d.path().to_path_buf()));
    d.sync()
        .map_err(|e| Error::io(d.path(), "cannot flush directory", e))
}

#[cfg(test)]
thread_local! {
    /// The directories this thread flushed, in order: for the tests of a step's durability
    /// (the crash states of `tests/crash_states.rs` check it between processes).
    pub(crate) static FLUSHED: std::cell::RefCell<Vec<std::path::PathBuf>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Make `sub`'s own entry in `parent` durable before a message is put in `sub`, if this
/// process `made` it or finds it empty: whoever finds a message in it already knows that the
/// one who put it there did this first. (A directory made by another process, a receiver that
/// made the shard to watch it, may not be durable yet: its entry in `parent` needs a flush of
/// `parent`, and a flush of `sub` alone would leave a message that survives the crash in a
/// directory that does not.)
pub(crate) fn durable_home(parent: &Dir, sub: &Dir, made: bool) -> Result<()> {
    let empty = made
        || !sub
            .any_entry(|_| true)
            .map_err(|e| Error::io(sub.path(), "cannot list", e))?;
    match empty {
        true => flush(parent),
        false => Ok(()),
    }
}

/// The largest sequence number we believe: far beyond any real count, and leaving room to
/// grow (a planted `u64::MAX` would otherwise wrap).
pub(super) const MAX_SEQ: u64 = 1 << 62;

/// Run `f` with the next sequence number, under the exclusive lock on `seq`: a wait that ends
/// at `deadline` (a send's) or on a cancellation signal, since a process that may open `seq`
/// (a participant of a shared mailbox) may hold that lock for ever.
fn with_seq<T>(
    l: &Layout,
    poll: Duration,
    deadline: Deadline,
    f: impl FnOnce(u64) -> Result<Outcome<T>>,
) -> Result<Outcome<T>> {
    with_seqs(l, poll, deadline, 1, |next, _| f(next))
}

/// [`with_seq`] for `count` (at least 1) consecutive numbers, the first of them handed to `f`
/// with `seq` (locked exclusively) still held (a batch: `super::batch`).
pub(super) fn with_seqs<T>(
    l: &Layout,
    poll: Duration,
    deadline: Deadline,
    count: u64,
    f: impl FnOnce(u64, &File) -> Result<Outcome<T>>,
) -> Result<Outcome<T>> {
    let file = wait::acquired!(l.lock_seq(Mode::Exclusive, poll, deadline)?);
    let next = l.last_seq(&file)? + 1;
    if next.saturating_add(count) > MAX_SEQ {
        return Err(Error::new(
            &l.top.join("seq"),
            ErrorKind::Corrupt,
            "would pass the largest sequence number fsync hands out; not posting",
        ));
    }
    // Durable before the message it numbers can be: a number a power cut took back would be
    // handed out again, and the posts after it would jump ahead of older messages.
    l.write_seq(&file, next + count - 1)?;
    if next == 1 {
        // The first number: `seq`'s entry (made by whoever opened it first) is durable only
        // once the mailbox's directory is, and the mailbox (with `q`, `tmp`... made before
        // this) once its parent is; without them a power cut could take back the mailbox, or
        // `seq` with the numbers it handed out.
        flush(&l.top)?;
        (l.top.sync_parent())
            .map_err(|e| Error::io(&l.top.join(".."), "cannot flush directory", e))?;
    }
    f(next, &file) // the lock goes with `file`
}

/// A post's outcome as a call that does not wait gives it: a cancellation while the payload
/// was read is an error (nothing was queued). (A post waits for nobody, with no deadline: it
/// never times out.)
pub(super) fn posted<T>(mailbox: &Path, outcome: Outcome<T>) -> Result<T> {
    match outcome {
        Outcome::Acquired(v) => Ok(v),
        Outcome::Interrupted(sig) => Err(Error::new(
            mailbox,
            ErrorKind::Interrupted,
            format!("cancelled by signal {sig} while reading the message: nothing was queued"),
        )),
        Outcome::TimedOut => Err(seq_timed_out(mailbox)),
    }
}

/// A post that gave up waiting for the numbering lock
/// ([`Mailbox::lock_timeout`](crate::Mailbox::lock_timeout)).
pub(super) fn seq_timed_out(mailbox: &Path) -> Error {
    Error::new(
        &mailbox.join("seq"),
        ErrorKind::TimedOut,
        "gave up waiting for the lock that numbers messages, which another process holds: \
         nothing was queued",
    )
}

#[cfg(test)]
mod tests {
    use super::MAX_SEQ;
    use crate::{ErrorKind, Mailbox};

    /// Numbers are handed out up to the one below [`MAX_SEQ`], the largest a reader believes;
    /// a post that would pass it is refused as a corrupt `seq`, and `seq` is left as it was.
    /// (Mutants answered: the bound moved by one, or met only when hit exactly.)
    #[test]
    fn numbers_are_handed_out_up_to_the_largest_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let seq = dir.path().join("b/seq");
        let b = Mailbox::new(dir.path().join("b"));
        let _ = b.post(&mut &b"first"[..]).unwrap();
        std::fs::write(&seq, format!("{}\n", MAX_SEQ - 2)).unwrap();
        let _ = b.post(&mut &b"last"[..]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&seq).unwrap(),
            format!("{}\n", MAX_SEQ - 1)
        );
        let refused = b.post(&mut &b"one too many"[..]).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Corrupt, "{refused}");
        assert_eq!(
            std::fs::read_to_string(&seq).unwrap(),
            format!("{}\n", MAX_SEQ - 1)
        );
    }
}
