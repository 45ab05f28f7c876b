/*!
The single-writer-multiple-reader lock that never starves a writer: the SWMR guard of Primoz
Gabrijelcic's *Let's Cooperate: File system-based synchronisation primitives*, and the
reader/writer lock of Ruediger R. Asche's *Compound Win32 Synchronization Objects* (MSDN, 1994).

# Protocol on disk

A lock `DIR/NAME` is three files:

- `NAME` itself: readers hold a **shared** `flock`, the writer an **exclusive** one, exactly as
  `flock -s` and `flock -x` would, so those tools interoperate on it;
- `DIR/.NAME.turnstile`: everyone who enters takes it **exclusively** and keeps it only while
  waiting for `NAME`, releasing it as soon as `NAME` is had;
- `DIR/.NAME.writers`: a writer holds a **shared** lock on it from arrival until it has `NAME`,
  so that `status` can count waiting writers.

Reader: turnstile (exclusive) -> `NAME` (shared) -> release turnstile -> read -> release `NAME`.
Writer: `.writers` (shared) -> turnstile (exclusive) -> `NAME` (exclusive) -> release turnstile
and `.writers` -> write -> release `NAME`.

Why writers are not starved: Linux `flock` grants a shared lock to a newcomer even while an
exclusive request waits, which is how `flock -s` readers starve `flock -x`. Here a waiting writer
holds the turnstile, so newly arriving readers queue on the turnstile instead of joining the
readers inside; the writer gets `NAME` as soon as the readers already inside leave. Readers hold
the turnstile only for the instant it takes to get their shared lock, so readers do not exclude
each other. Crashes at any step release everything (all three are kernel locks).

Readers using `flock -s` directly bypass the turnstile and can still starve a writer; a read-only
directory where the turnstile cannot be created (and does not exist) degrades to plain
`flock` semantics. There is no read-to-write upgrade: `flock` converts by dropping the shared lock
first, which is not atomic, so we offer none rather than a silent one.

With a byte range ([`crate::range`]), readers and the writer take OFD locks on that range of
`NAME` instead of `flock` (never both kinds on one file); the turnstile is still whole-file, so
a waiting writer holds back new readers of every range.
*/

use std::{
    fs::File,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::{record_path, Holder},
    platform::{
        fs as pfs,
        lock::{self, Mode},
        procinfo,
    },
    probe,
    range::{ByteRange, RangeLock},
    wait::{self, Deadline, Outcome, Wait, DEFAULT_POLL},
};

/// A reader/writer lock at a path: any number of readers together, or one writer alone; a
/// waiting writer holds back readers who arrive after it, so a stream of readers cannot starve
/// it. The lock file is created if missing and never written; `flock -s` and `flock -x` on it
/// interoperate (module docs).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("db.lck");
/// let lock = fsync::Swmr::new(&path);
/// let r1 = lock.read(None)?.unwrap();
/// let r2 = lock.read(None)?.unwrap(); // readers share
/// assert!(lock.write(Some(std::time::Duration::ZERO))?.is_none()); // the writer waits
/// drop((r1, r2));
/// assert!(lock.write(Some(std::time::Duration::ZERO))?.is_some());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Swmr {
    path: PathBuf,
    poll: Duration,
    range: Option<ByteRange>,
}

/// Proof of holding a [`Swmr`] lock for reading or writing; released on drop.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SwmrGuard {
    path: PathBuf,
    file: File,
    mode: Mode,
    /// Held on a byte range (OFD locks), which lock-loss checks do not cover.
    ranged: bool,
}

impl SwmrGuard {
    /// Whether this is the writer's (exclusive) lock rather than a reader's.
    pub fn is_writer(&self) -> bool {
        self.mode == Mode::Exclusive
    }

    /// On a network file system, the check that the lock is still ours (not for byte ranges,
    /// which are not re-checked).
    pub fn loss_check(&self) -> Option<crate::LossCheck> {
        match self.ranged {
            false => crate::LossCheck::of(&self.file, self.mode),
            true => None,
        }
    }

    /// Let the lock survive `exec` into children (`true`), as the mutex does, so that it stays
    /// held while they run even if this process dies; `false` keeps it close-on-exec.
    pub fn pass_down(&self, inherit: bool) -> Result<()> {
        lock::set_inheritable(&self.file, inherit)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let base = record_path(path); // DIR/.NAME.fsync
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.with_file_name(name.trim_end_matches(".fsync").to_string() + suffix)
}

impl Swmr {
    /// The lock at `path`. Touches nothing until acquired.
    pub fn new(path: impl AsRef<Path>) -> Swmr {
        Swmr {
            path: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            range: None,
        }
    }

    /// Lock only this byte range of the file, with OFD locks (see [`crate::range`]); readers
    /// and writers of disjoint ranges do not exclude each other.
    pub fn range(mut self, range: Option<ByteRange>) -> Swmr {
        self.range = range;
        self
    }

    /// How often a wait re-checks on a network file system, where another host's release
    /// wakes nobody ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Swmr {
        self.poll = every;
        self
    }

    /// Take a shared (reader) lock, waiting up to `timeout` (`None`: for ever) while a writer
    /// is inside or waiting; `Ok(None)` if it did not come. Errors as
    /// [`acquire`](Self::acquire).
    pub fn read(&self, timeout: Option<Duration>) -> Result<Option<SwmrGuard>> {
        Ok(self.acquire(Mode::Shared, timeout, |_| {})?.acquired())
    }

    /// Take the exclusive (writer) lock, waiting up to `timeout` (`None`: for ever) until the
    /// readers inside have left; `Ok(None)` if it did not come. Errors as
    /// [`acquire`](Self::acquire).
    pub fn write(&self, timeout: Option<Duration>) -> Result<Option<SwmrGuard>> {
        Ok(self.acquire(Mode::Exclusive, timeout, |_| {})?.acquired())
    }

    /// Take a reader's lock if no writer is inside or waiting right now; `Ok(None)` otherwise.
    /// Never waits.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db.lck");
    /// let lock = fsync::Swmr::new(&path);
    /// let writer = lock.try_write()?.expect("free");
    /// assert!(lock.try_read()?.is_none()); // busy: the writer is inside
    /// drop(writer);
    /// let reader = lock.try_read()?.expect("free again");
    /// assert!(lock.try_read()?.is_some()); // readers share
    /// assert!(lock.try_write()?.is_none()); // but exclude the writer
    /// drop(reader);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn try_read(&self) -> Result<Option<SwmrGuard>> {
        self.read(Some(Duration::ZERO))
    }

    /// Take the writer's lock if nobody is inside right now; `Ok(None)` otherwise. Never
    /// waits (see [`try_read`](Self::try_read) for an example).
    pub fn try_write(&self) -> Result<Option<SwmrGuard>> {
        self.write(Some(Duration::ZERO))
    }

    /// Acquire in `mode` ([`Mode::Shared`] for a reader, [`Mode::Exclusive`] for the writer),
    /// following the protocol in the module docs, waiting up to `timeout` and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    ///
    /// The thread blocks in the kernel (`flock`, or an OFD lock with a byte range), so a
    /// release on this host wakes it at once; on a network file system it also re-checks every
    /// [`poll_interval`](Self::poll_interval). Errors: [`ErrorKind::NotFound`] or
    /// [`ErrorKind::PermissionDenied`] if the lock file cannot be created or opened (a
    /// writer on a network file system needs write access to it), [`ErrorKind::Unavailable`]
    /// where the file system does not support locks.
    pub fn acquire(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<SwmrGuard>> {
        let deadline = Deadline::after(timeout);
        let purpose = match self.range {
            None => pfs::Purpose::Flock,
            Some(_) => pfs::Purpose::Fcntl,
        };
        let (file, access) = pfs::open_lock_file(&self.path, purpose)?;
        let network = pfs::fs_kind(&file).network;
        if network && mode == Mode::Exclusive && access == pfs::Access::ReadOnly {
            return Err(Error::new(
                &self.path,
                ErrorKind::PermissionDenied,
                "an exclusive lock on this network file system needs write access to the lock file",
            ));
        }
        let _writers = match mode {
            Mode::Exclusive => optional_side(&side_file(&self.path, ".writers"))?,
            Mode::Shared => None,
        };
        let mut step = |file: &File, mode: Mode, deadline: Deadline| {
            let spec = Wait::for_lock(deadline, network, self.poll);
            wait::flock(spec, &mut progress, file, mode, &self.path)
        };
        if let Some(w) = &_writers {
            let _ = step(w, Mode::Shared, Deadline::never())?;
        }
        let turnstile = optional_side(&side_file(&self.path, ".turnstile"))?;
        if let Some(t) = &turnstile {
            wait::acquired!(step(t, Mode::Exclusive, deadline)?);
        }
        let got = match self.range {
            None => step(&file, mode, deadline)?,
            Some(r) => RangeLock::new(&self.path, r)
                .poll_interval(self.poll)
                .lock_file(&file, access, mode, deadline, progress)?,
        };
        drop(turnstile); // others may queue again
        Ok(got.map(|()| SwmrGuard {
            path: self.path.clone(),
            file,
            mode,
            ranged: self.range.is_some(),
        }))
    }
}

/// Open (creating) a side file; `None` where it cannot exist (read-only directory).
fn optional_side(path: &Path) -> Result<Option<File>> {
    match pfs::open_lock_file(path, pfs::Purpose::Flock) {
        Ok((f, _)) => Ok(Some(f)),
        Err(e) if matches!(e.kind(), ErrorKind::PermissionDenied) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwmrStatus {
    /// Readers inside (`None` where it cannot be counted: network file systems).
    pub readers: Option<usize>,
    /// Whether a writer is inside.
    pub writer: bool,
    /// Who the writer is, where that can be known (local file systems).
    pub writer_holder: Option<Holder>,
    /// Writers waiting (fsync writers; `None` where it cannot be counted).
    pub waiting_writers: Option<usize>,
}

/// Readers, writer and waiting writers of the lock at `path`. Creates nothing; on a local file
/// system reads the kernel's lock table only.
pub fn status(path: &Path) -> Result<SwmrStatus> {
    let none = SwmrStatus {
        readers: Some(0),
        writer: false,
        writer_holder: None,
        waiting_writers: Some(0),
    };
    let Some(file) = pfs::open_if_exists(path)? else {
        return Ok(none);
    };
    if let Some(listed) = probe::listed(path, &file, probe::Kinds::Flock)? {
        let locks = listed.locks;
        let readers = locks.iter().filter(|l| !l.exclusive).count();
        let writer = locks.iter().find(|l| l.exclusive);
        let waiting = std::fs::metadata(side_file(path, ".writers"))
            .ok()
            .and_then(|m| procinfo::flock_holders(m.dev(), m.ino()))
            .map_or(0, |l| l.iter().filter(|l| !l.exclusive).count());
        return Ok(SwmrStatus {
            readers: Some(readers),
            writer: writer.is_some(),
            writer_holder: writer.and_then(|w| w.pid).map(Holder::local),
            waiting_writers: Some(waiting),
        });
    }
    // Network: probes released at once. An exclusive one succeeds only if nobody is inside
    // (it needs write access on NFS); a shared one fails only while a writer is inside. Readers
    // cannot be counted.
    let held =
        |f: &File, mode| probe::held(f, mode).map_err(|e| Error::io(path, "cannot test lock", e));
    if let Ok(rw) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        if !held(&rw, Mode::Exclusive)? {
            return Ok(SwmrStatus {
                readers: Some(0),
                writer: false,
                writer_holder: None,
                waiting_writers: None,
            });
        }
    }
    let writer = held(&file, Mode::Shared)?;
    Ok(SwmrStatus {
        readers: if writer { Some(0) } else { None },
        writer,
        writer_holder: None,
        waiting_writers: None,
    })
}

impl SwmrStatus {
    /// Whether anyone holds the lock (unknown reader counts on network file systems mean
    /// "at least one").
    pub fn held(&self) -> bool {
        self.writer || self.readers != Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_writer_holds_back_new_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let lock = Swmr::new(&path);
        let reader = lock.read(None).unwrap().unwrap();
        // A writer that is waiting holds the turnstile: simulate by holding it ourselves.
        let (t, _) =
            pfs::open_lock_file(&side_file(&path, ".turnstile"), pfs::Purpose::Flock).unwrap();
        assert!(lock::flock(&t, Mode::Exclusive, false).unwrap());
        assert!(
            lock.read(Some(Duration::ZERO)).unwrap().is_none(),
            "new reader queues"
        );
        drop(t);
        assert!(lock.read(Some(Duration::ZERO)).unwrap().is_some());
        let st = status(&path).unwrap();
        assert_eq!(st.readers, Some(1));
        assert!(!st.writer);
        drop(reader);
        assert_eq!(
            side_file(&path, ".turnstile"),
            dir.path().join(".l.turnstile")
        );
    }
}
