/*!
Finding out whether a lock is held, and by whom, without holding it: what the status verbs and
the "is anyone inside?" checks of the primitives share.

On a local file system the kernel's lock table (`/proc/locks`) says it without touching the
lock. Where it cannot (a network file system, whose other hosts' locks it never lists, or a
system without `/proc`), a *probe* takes the lock without waiting and releases it at once: it
succeeds only while nobody holds the lock in a conflicting mode, and it is over too soon to
stand in anyone's way for long.
*/

use std::{
    fs::File,
    io,
    os::{fd::AsFd, unix::fs::MetadataExt},
    path::Path,
};

use crate::{
    error::{Error, Result},
    platform::{
        fs as pfs,
        lock::{self, Mode},
        procinfo::{self, KernelLock},
    },
};

/// Whether someone holds a lock on `file` that excludes one in `mode`: the probe, a lock taken
/// without waiting and released at once.
pub(crate) fn held(file: &impl AsFd, mode: Mode) -> io::Result<bool> {
    let free = lock::flock(file, mode, false)?;
    if free {
        let _ = lock::unlock(file);
    }
    Ok(!free)
}

/// Which locks of the kernel's table count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kinds {
    /// Whole-file `flock` locks only.
    Flock,
    /// Every kind: `flock`, POSIX (`fcntl`, `lockf`) and OFD byte-range locks.
    All,
}

/// The locks the kernel's table lists on one file.
#[derive(Debug)]
pub(crate) struct Listed {
    pub(crate) locks: Vec<KernelLock>,
}

impl Listed {
    /// The pid of the first holder the table names.
    pub(crate) fn first_pid(&self) -> Option<u32> {
        self.locks.iter().find_map(|l| l.pid)
    }
}

/// The locks the kernel's table lists on the open `file` (at `path`, which errors name);
/// `None` where the table cannot tell: a network file system, or no `/proc`.
pub(crate) fn listed(path: &Path, file: &File, kinds: Kinds) -> Result<Option<Listed>> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io(path, "cannot stat", e))?;
    if pfs::fs_kind(file).network {
        return Ok(None);
    }
    let (dev, ino) = (meta.dev(), meta.ino());
    let locks = match kinds {
        Kinds::Flock => procinfo::flock_holders(dev, ino),
        Kinds::All => procinfo::lock_holders(dev, ino).map(|mut locks| {
            // The table comes a page at a time and may skip a line while other locks come
            // and go: a byte-range lock it did not list is asked for directly (F_OFD_GETLK,
            // which takes nothing). Its holder stays unnamed.
            if locks.is_empty() && lock::range_lock_held(file).unwrap_or(false) {
                locks.push(procinfo::KernelLock {
                    pid: None,
                    exclusive: true,
                });
            }
            locks
        }),
    };
    Ok(locks.map(|locks| Listed { locks }))
}

/// How many processes hold or wait for a `flock` lock on the local file with this device and
/// inode (the length of a waiting line); `None` where the table cannot tell.
pub(crate) fn in_line(dev: u64, ino: u64) -> Option<usize> {
    procinfo::flock_holders(dev, ino)
        .zip(procinfo::flock_waiters(dev, ino))
        .map(|(holders, waiting)| holders.len() + waiting)
}
