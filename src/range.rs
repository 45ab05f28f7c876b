/*!
Byte-range locks: any byte of a file, even one far past its end, is a lock, as Raymond Chen's
*You can use a file as a synchronization object, too* (The Old New Thing) tells.

# Protocol on disk

A range lock on `L` is an open-file-description (OFD) lock, `fcntl(F_OFD_SETLK[W])`, on `LEN`
bytes of `L` from `START` (`LEN` 0: from `START` to the end of all offsets): shared
(`F_RDLCK`) or exclusive (`F_WRLCK`). Disjoint ranges do not conflict; the file's content is
never changed; `lslocks` shows them as `OFDLCK`. Like `flock` locks they belong to the open file
description, so they pass down to children and are released when the last descriptor closes.

To acquire: **open** `L` (created if missing, never truncated), **lock** the range, then
**verify** that `L` still names the file locked; if not (it was deleted, or replaced, while we
waited), close it and start again on the file the name names now, as the mutex does (see
[`crate::mutex`], steps 1 to 3). Otherwise a waiter that opened the old file would lock it once
its holder lets go, beside a holder of the same range of the new file. (Through a descriptor,
[`lock_fd`], the caller chose the file: nothing is verified.)

A file locked by ranges must not also be locked whole with `flock` by the same protocol: on NFS
and FUSE file systems `flock` is emulated with a whole-file POSIX lock, and the two collide.

**Status** ([`status`]): whether anyone holds a byte of a range is asked with `F_OFD_GETLK`
for an exclusive lock on it, which takes nothing and waits for nothing; the kernel (or the file
server) answers with one lock that overlaps it, shared or exclusive, OFD or POSIX (`fcntl`,
`lockf`, another program's), or with none. Who holds it is told on a local file system only:
the pid of a POSIX lock, which the kernel gives, else the process whose descriptor
`/proc/PID/fdinfo` lists with a lock on those bytes (an OFD lock belongs to an open file
description, not to a process; of a holder and the command it passed the lock down to, the
holder is named).
*/

use std::{
    fs::File,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd},
        unix::fs::MetadataExt,
    },
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    held,
    holder::Holder,
    platform::{
        fs::{self as pfs, Access},
        lock::{self, Mode},
        procinfo,
    },
    wait::{self, DEFAULT_POLL, Deadline, Failed, Outcome, Wait},
};

/// `LEN` bytes from `START`; `LEN` 0 reaches to the end of all offsets. Displayed, and parsed,
/// as `START:LEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// The first byte (0 to 2^63-1).
    pub start: u64,
    /// How many bytes; 0 reaches to the end of all offsets.
    pub len: u64,
}

impl ByteRange {
    /// Parse `START[:LEN]`, each decimal or `0x` hex, `LEN` 1 when absent; the range must lie
    /// within 0 to 2^63-1.
    pub fn parse(s: &str) -> std::result::Result<ByteRange, String> {
        let number = |t: &str| -> std::result::Result<u64, String> {
            let t = t.trim();
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => t.parse::<u64>(),
            };
            parsed.map_err(|_| {
                format!("invalid range '{s}': '{t}' is not a decimal or 0x hex number")
            })
        };
        let (start, len) = match s.split_once(':') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(s)?, 1),
        };
        let max = i64::MAX as u64;
        if start > max || len > max || (len > 0 && start + (len - 1) > max) {
            return Err(format!(
                "invalid range '{s}': it must lie within 0 and 0x7fffffffffffffff"
            ));
        }
        Ok(ByteRange { start, len })
    }
}

impl std::fmt::Display for ByteRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.start, self.len)
    }
}

/// A byte range of a lock file, locked shared ([`Mode::Shared`]: any number of holders) or
/// exclusively ([`Mode::Exclusive`]: one holder). Ranges that do not overlap do not exclude each
/// other, so one file holds any number of independent locks: one per record of a database,
/// per device, per port. The file is created if missing (it must be writable for an exclusive
/// lock) and never changed; its bytes need not exist.
///
/// The locks are open-file-description (OFD) locks, `fcntl(F_OFD_SETLK[W])`: they belong to
/// the guard's own open file, so two guards exclude each other even in one process, and the
/// kernel (or the file server) releases them when their holder dies. A thread that asks for
/// bytes it holds through another guard in a conflicting mode would wait for itself: that is
/// an error at once ([`ErrorKind::WouldDeadlock`]); other threads, and guards
/// [unbound](crate::Unbound) from their thread, wait as other processes do. Do not lock the same file
/// whole with [`Mutex`](crate::Mutex) or `flock(1)` as well: NFS and FUSE emulate `flock` with
/// a whole-file lock of this kind, and the two collide there.
///
/// ```
/// use fsync::{ByteRange, Mode, RangeLock};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("records.lck");
/// let first = RangeLock::new(&path, ByteRange::parse("0:100").unwrap());
/// let second = RangeLock::new(&path, ByteRange { start: 100, len: 100 });
/// let a = first.acquire(Mode::Exclusive, None)?.expect("free");
/// let b = second.try_acquire(Mode::Exclusive)?.expect("does not overlap");
/// let other = first.clone();
/// let busy = std::thread::spawn(move || other.try_acquire(Mode::Shared).unwrap().is_none());
/// assert!(busy.join().unwrap()); // busy: held exclusively
/// assert!(first.try_acquire(Mode::Shared).is_err()); // and this thread's own: refused
/// drop((a, b));
/// let r1 = first.try_acquire(Mode::Shared)?.expect("free");
/// let r2 = first.try_acquire(Mode::Shared)?.expect("shared holders share");
/// # drop((r1, r2));
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RangeLock {
    path: PathBuf,
    range: ByteRange,
    poll: Duration,
    create_mode: u32,
}

/// Proof of holding a byte range ([`RangeLock`]); released on drop.
#[must_use = "the range is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct RangeGuard {
    path: PathBuf,
    file: File,
    /// This holding in the process's table (see `held`).
    key: held::Key,
    /// Not `Send`: see [`Unbound`](crate::Unbound).
    bound: crate::platform::binding::Bound,
}

held::bindable!(RangeGuard, key);

impl Drop for RangeGuard {
    fn drop(&mut self) {
        held::remove(self.key);
    }
}

impl RangeGuard {
    /// Release now, as every guard can (dropping it releases too). A byte range keeps no
    /// files beside it: always [`Released::Kept`](crate::mutex::Released::Kept).
    pub fn release(self) -> Result<crate::teardown::Released> {
        drop(self);
        Ok(crate::teardown::Released::Kept)
    }
}

/// A byte range is not re-checked ([`loss_check`](crate::Guard::loss_check) is `None`: the check
/// locks the whole file) and keeps no record ([`set_child`](crate::Guard::set_child) records nothing).
impl crate::Guard for RangeGuard {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        None
    }

    fn pass_down(&mut self) -> Result<()> {
        lock::set_inheritable(&self.file, true)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }
}

impl RangeLock {
    /// The lock on `range` of the file at `path`. Touches nothing until acquired.
    pub fn new(path: impl AsRef<Path>, range: ByteRange) -> RangeLock {
        RangeLock {
            path: path.as_ref().to_path_buf(),
            range,
            poll: DEFAULT_POLL,
            create_mode: pfs::LOCK_FILE_MODE,
        }
    }

    /// The permissions a missing lock file is created with, less the umask (default 0666).
    pub fn create_mode(mut self, mode: u32) -> RangeLock {
        self.create_mode = mode & 0o7777;
        self
    }

    /// How often a wait re-checks on a network file system, where another host's release may
    /// not wake a blocked call ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> RangeLock {
        self.poll = every;
        self
    }

    /// Lock the range in `mode` if nobody holds an overlapping range in a conflicting mode
    /// right now; `Ok(None)` if someone does. Never waits. Errors as
    /// [`acquire`](Self::acquire); see the type's docs for an example.
    pub fn try_acquire(&self, mode: Mode) -> Result<Option<RangeGuard>> {
        self.acquire(mode, Some(Duration::ZERO))
    }

    /// Lock the range in `mode`, waiting up to `timeout` (`None`: for ever); `Ok(None)` if it
    /// did not come.
    ///
    /// Blocks in the kernel (`F_OFD_SETLKW`), so a release on this host wakes it at once; on a
    /// network file system it also re-checks every [`poll_interval`](Self::poll_interval).
    /// Errors: [`ErrorKind::PermissionDenied`] for an exclusive lock on a file this process may
    /// only read; [`ErrorKind::WrongKind`] for a path that is a directory or not a regular file,
    /// [`ErrorKind::NotFound`] for one whose directory is missing; [`ErrorKind::NotSupported`] where the file system does
    /// not support byte-range locks.
    pub fn acquire(&self, mode: Mode, timeout: Option<Duration>) -> Result<Option<RangeGuard>> {
        Ok(self.acquire_with(mode, timeout, |_| {})?.acquired())
    }

    /// Like [`acquire`](Self::acquire), telling a timeout from a cancellation, and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    pub fn acquire_with(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<RangeGuard>> {
        let deadline = Deadline::after(timeout);
        let first = self.open(mode)?;
        let r = self.range;
        if held::held_by_this_thread(held::Key::range(&first.1, mode, r.start, r.len)) {
            return Err(held::deadlock(&self.path));
        }
        let network = pfs::fs_kind(&first.0).network;
        let mut open = Some(first);
        let spec = Wait::for_lock(deadline, network, self.poll);
        let mut locker = wait::Locker::new(network);
        let outcome = wait::wait_for(spec, progress, |block| -> Result<_, Failed> {
            let (file, meta) = if let Some(f) = open.take() {
                f
            } else {
                locker.forget();
                self.open(mode)?
            };
            match locker.range(&file, mode, (r.start, r.len), block) {
                Ok(true) => {}
                Ok(false) => {
                    open = Some((file, meta));
                    return Ok(None);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    open = Some((file, meta));
                    return Err(e.into());
                }
                Err(e) => {
                    return Err(Error::io(&self.path, &format!("cannot lock bytes {r}"), e).into());
                }
            }
            // Deleted (or replaced) while we waited: the lock we got is on a file nobody else
            // will lock again, so drop it and lock the file the name names now (protocol, 3).
            let named = crate::mutex::names(&self.path, None, (meta.dev(), meta.ino()))?;
            Ok(named.then_some((file, meta)))
        });
        if let Some((file, _)) = &open {
            locker.settle(&outcome, file);
        }
        let outcome =
            outcome.map_err(|f| f.naming(&self.path, &format!("cannot lock bytes {r}")))?;
        Ok(outcome.map(|(file, meta)| {
            let key = held::Key::range(&meta, mode, r.start, r.len);
            held::add(key);
            RangeGuard {
                bound: std::marker::PhantomData,
                path: self.path.clone(),
                file,
                key,
            }
        }))
    }

    /// Open (creating) the lock file for a lock in `mode`, with its status.
    fn open(&self, mode: Mode) -> Result<(File, std::fs::Metadata)> {
        let (file, access) =
            pfs::open_lock_file_mode(&self.path, pfs::Purpose::Fcntl, self.create_mode)?;
        self.check_access(mode, access)?;
        let meta = (file.metadata()).map_err(|e| Error::io(&self.path, "cannot stat", e))?;
        Ok((file, meta))
    }

    fn check_access(&self, mode: Mode, access: Access) -> Result<()> {
        if mode == Mode::Exclusive && access == Access::ReadOnly {
            return Err(Error::new(
                &self.path,
                ErrorKind::PermissionDenied,
                "an exclusive byte-range lock needs write access to the lock file",
            ));
        }
        Ok(())
    }

    /// Lock the range through an already open lock file.
    pub(crate) fn lock_file(
        &self,
        file: &File,
        access: Access,
        mode: Mode,
        deadline: Deadline,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.check_access(mode, access)?;
        let network = pfs::fs_kind(file).network;
        let spec = Wait::for_lock(deadline, network, self.poll);
        let r = self.range;
        let mut locker = wait::Locker::new(network);
        let got = wait::wait_for(spec, progress, |block| {
            Ok(locker
                .range(file, mode, (r.start, r.len), block)?
                .then_some(()))
        });
        locker.settle(&got, file);
        got.map_err(|e| Error::io(&self.path, &format!("cannot lock bytes {r}"), e))
    }
}

/// Lock `range` of the file open on descriptor `fd` in `mode`, waiting up to `timeout` (`None`:
/// for ever; `Ok(false)`: it ran out) and re-checking every `poll` on a network file system.
/// The lock belongs to the open file description, so it is held
/// through every duplicate of `fd` (`exec 9>>L` in a shell, then this on fd 9) until the last
/// one is closed or
/// [`unlock_fd`] releases it. Ranges that do not overlap do not exclude each other, and ranges
/// taken through one descriptor never exclude each other (they merge, as `fcntl` locks do).
///
/// On a network file system the blocking call is made by a child process on the same open file
/// description (see [`crate::wait`]); a wait that ends without the lock lets go of
/// `range` on that description, so that nothing the child was granted as it was stopped stays
/// taken: a lock the descriptor held on those bytes before is let go of too.
///
/// `fd` may be open on a regular file, a directory (shared locks only: it cannot be open for
/// writing), a device or a named pipe, as with util-linux `flock --fcntl`. Errors:
/// [`ErrorKind::NotFound`] for an anonymous pipe or a socket; [`ErrorKind::WrongKind`] for an
/// exclusive lock on a directory; [`ErrorKind::PermissionDenied`] for an exclusive lock through
/// a descriptor not open for writing, or a shared one through a descriptor not open for
/// reading (each with the errno, `EBADF`); [`ErrorKind::NotSupported`] where the file system
/// has no byte-range locks.
///
/// ```
/// use std::os::fd::AsFd;
/// use fsync::{range, ByteRange, Mode};
/// # let dir = tempfile::tempdir().unwrap();
/// let file = std::fs::File::options().create(true).append(true).open(dir.path().join("l"))?;
/// let row = ByteRange { start: 7, len: 1 };
/// let poll = fsync::wait::DEFAULT_POLL;
/// assert!(range::lock_fd(file.as_fd(), row, Mode::Exclusive, None, poll)?);
/// range::unlock_fd(file.as_fd(), row)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lock_fd(
    fd: BorrowedFd<'_>,
    range: ByteRange,
    mode: Mode,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<bool> {
    Ok(lock_fd_with(fd, range, mode, timeout, poll, |_| {})?
        .acquired()
        .is_some())
}

/// Like [`lock_fd`], telling a timeout from a cancellation, and calling `progress` with the
/// time waited when the wait starts blocking and about once a second after.
pub fn lock_fd_with(
    fd: BorrowedFd<'_>,
    range: ByteRange,
    mode: Mode,
    timeout: Option<Duration>,
    poll: Duration,
    progress: impl FnMut(Duration),
) -> Result<Outcome<()>> {
    let (path, kind) = check_range_fd(fd)?;
    let network = pfs::fs_kind(&fd).network;
    let spec = Wait::for_lock(Deadline::after(timeout), network, poll);
    let r = range;
    let mut locker = wait::Locker::new(network);
    let got = wait::wait_for(spec, progress, |block| {
        Ok(locker
            .range(&fd, mode, (r.start, r.len), block)?
            .then_some(()))
    });
    locker.settle(&got, &fd);
    got.map_err(|e: std::io::Error| match e.raw_os_error() {
        Some(nix::libc::EBADF) if kind == crate::mutex::Lockable::Directory => Error::new(
            &path,
            ErrorKind::WrongKind,
            "is a directory: an exclusive byte range needs a regular file open for writing",
        )
        .with_errno(nix::libc::EBADF),
        Some(nix::libc::EBADF) => Error::new(
            &path,
            ErrorKind::PermissionDenied,
            match mode {
                Mode::Exclusive => {
                    "an exclusive byte-range lock needs a descriptor open for writing (exec N>>FILE)"
                }
                Mode::Shared => {
                    "a shared byte-range lock needs a descriptor open for reading (exec N<FILE)"
                }
            },
        )
        .with_errno(nix::libc::EBADF),
        _ => Error::io(&path, &format!("cannot lock bytes {r}"), e),
    })
}

/// Release `range` of the lock held through descriptor `fd` (a no-op where none is held);
/// the rest of what the open file description holds stays locked. Errors as [`lock_fd`].
pub fn unlock_fd(fd: BorrowedFd<'_>, range: ByteRange) -> Result<()> {
    let (path, _) = check_range_fd(fd)?;
    lock::ofd_unlock(&fd, range.start, range.len)
        .map_err(|e| Error::io(&path, &format!("cannot unlock bytes {range}"), e))
}

/// What [`status`] found on a byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeStatus {
    /// The range asked about.
    pub range: ByteRange,
    /// A lock that another open file description holds on some of its bytes, shared or
    /// exclusive, where there is one (where several overlap it, one of them): the range is
    /// held. `None`: free.
    pub lock: Option<HeldRange>,
    /// Who holds that lock, where that can be known (a local file system): the process, with
    /// its command line as `/proc` tells it.
    pub holder: Option<Holder>,
}

impl RangeStatus {
    /// Whether some byte of the range is locked (by anyone but the caller's own open file).
    pub fn held(&self) -> bool {
        self.lock.is_some()
    }
}

/// A byte-range lock found by [`status`]: its bytes (which may reach beyond the range asked
/// about) and its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldRange {
    /// The bytes it holds.
    pub range: ByteRange,
    /// Shared (`F_RDLCK`) or exclusive (`F_WRLCK`).
    pub mode: Mode,
}

/// Is any byte of `range` of the file at `path` locked, and by whom (module docs, *Status*)?
/// Locks of every program count: OFD locks ([`RangeLock`], `fsync mutex run --range`) and
/// POSIX ones (`fcntl`, `lockf`); whole-file `flock` locks do not (on a local file system they
/// never exclude a byte range). Never creates the file, never waits, takes nothing. A missing
/// file is free. Errors: [`ErrorKind::WrongKind`] for a directory or what is not a regular file,
/// [`ErrorKind::NotFound`] for a missing parent directory; [`ErrorKind::NotSupported`] where the file system cannot tell.
///
/// ```
/// use fsync::{range, ByteRange, Mode, RangeLock};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("table.lck");
/// let row7 = ByteRange { start: 7, len: 1 };
/// assert!(!range::status(&path, row7)?.held());
/// let guard = RangeLock::new(&path, ByteRange::parse("0:10").unwrap()).try_acquire(Mode::Exclusive)?;
/// let st = range::status(&path, row7)?;
/// let lock = st.lock.expect("bytes 0 to 9 are locked");
/// assert_eq!((lock.range, lock.mode), (ByteRange { start: 0, len: 10 }, Mode::Exclusive));
/// assert!(!range::status(&path, ByteRange { start: 10, len: 0 })?.held());
/// # drop(guard);
/// # Ok::<(), fsync::Error>(())
/// ```
pub fn status(path: &Path, range: ByteRange) -> Result<RangeStatus> {
    let Some(file) = pfs::open_if_exists(path)? else {
        return Ok(RangeStatus {
            range,
            lock: None,
            holder: None,
        });
    };
    let meta = (file.metadata()).map_err(|e| Error::io(path, "cannot stat", e))?;
    if meta.is_dir() {
        return Err(Error::new(
            path,
            ErrorKind::WrongKind,
            "is a directory, not a lock file",
        ));
    }
    status_of(file.as_fd(), path, range)
}

/// [`status`] of `range` of the file open on descriptor `fd` (as [`lock_fd`] takes it): locks
/// held through other open file descriptions. Errors as [`lock_fd`].
pub fn status_fd(fd: BorrowedFd<'_>, range: ByteRange) -> Result<RangeStatus> {
    let (path, _) = check_range_fd(fd)?;
    status_of(fd, &path, range)
}

fn status_of(fd: BorrowedFd<'_>, path: &Path, range: ByteRange) -> Result<RangeStatus> {
    let found = lock::range_conflict(&fd, range.start, range.len)
        .map_err(|e| Error::io(path, &format!("cannot test bytes {range}"), e))?;
    let Some(found) = found else {
        return Ok(RangeStatus {
            range,
            lock: None,
            holder: None,
        });
    };
    let holder = match pfs::fs_kind(&fd).network {
        // Another host's pid means nothing here, and /proc sees this host only.
        true => None,
        false => procinfo::range_lock_holder(fd, range.start, range.len, found.pid)
            .or(found.pid)
            .map(Holder::local),
    };
    Ok(RangeStatus {
        range,
        lock: Some(HeldRange {
            range: ByteRange {
                start: found.start,
                len: found.len,
            },
            mode: found.mode,
        }),
        holder,
    })
}

/// That `fd` is open on something a byte range can be taken on (`mutex::check_lockable_fd`):
/// the file's name for messages, and its kind.
fn check_range_fd(fd: BorrowedFd<'_>) -> Result<(PathBuf, crate::mutex::Lockable)> {
    let path = crate::mutex::fd_file(fd.as_raw_fd());
    let kind = crate::mutex::check_lockable_fd(fd.as_raw_fd(), &path)?;
    Ok((path, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread asking again for bytes it holds through another guard would wait for
    /// itself: refused at once; bytes beside them, or shared with shared, are fine.
    #[test]
    fn the_same_thread_cannot_deadlock_on_its_own_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let held = RangeLock::new(&path, ByteRange { start: 10, len: 5 })
            .try_acquire(Mode::Exclusive)
            .unwrap()
            .unwrap();
        let err = RangeLock::new(&path, ByteRange { start: 14, len: 0 })
            .acquire(Mode::Shared, Some(Duration::from_secs(5)))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
        assert!(
            err.to_string().contains("already held by this thread"),
            "{err}"
        );
        let beside = RangeLock::new(&path, ByteRange { start: 15, len: 1 })
            .try_acquire(Mode::Exclusive)
            .unwrap();
        assert!(beside.is_some(), "the next byte is free");
        assert_eq!(held.release().unwrap(), crate::teardown::Released::Kept);
        assert!(
            RangeLock::new(&path, ByteRange { start: 12, len: 1 })
                .try_acquire(Mode::Exclusive)
                .unwrap()
                .is_some(),
            "released: forgotten"
        );
    }

    #[test]
    fn ranges_parse_and_check_bounds() {
        assert_eq!(ByteRange::parse("10"), Ok(ByteRange { start: 10, len: 1 }));
        assert_eq!(
            ByteRange::parse("0x10:0"),
            Ok(ByteRange { start: 16, len: 0 })
        );
        assert_eq!(
            ByteRange::parse("0x7fffffffffffffff"),
            Ok(ByteRange {
                start: i64::MAX as u64,
                len: 1
            })
        );
        assert!(ByteRange::parse("0x7fffffffffffffff:2").is_err());
        assert!(ByteRange::parse("-1").is_err());
        assert!(ByteRange::parse("1:x").is_err());
    }

    /// Status of ranges beside, across and inside held ones, shared and exclusive, naming
    /// this process (the holder: its OFD locks are found through its descriptors).
    #[test]
    fn status_tells_held_from_free_and_names_the_lock_and_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let r = |s: &str| ByteRange::parse(s).unwrap();
        assert_eq!(
            status(&path, r("0:0")).unwrap(),
            RangeStatus {
                range: r("0:0"),
                lock: None,
                holder: None
            },
            "a missing file is free"
        );
        assert!(!path.exists(), "status created the file");
        let _a = RangeLock::new(&path, r("10:10"))
            .try_acquire(Mode::Exclusive)
            .unwrap()
            .unwrap();
        let _b = RangeLock::new(&path, r("100:0"))
            .try_acquire(Mode::Shared)
            .unwrap()
            .unwrap();
        for (asked, want) in [
            ("0:10", None),
            ("9:1", None),
            ("0:11", Some(("10:10", Mode::Exclusive))),
            ("19", Some(("10:10", Mode::Exclusive))),
            ("15:2", Some(("10:10", Mode::Exclusive))),
            ("20:80", None),
            ("99", None),
            ("100", Some(("100:0", Mode::Shared))),
            ("0x7fffffffffffffff", Some(("100:0", Mode::Shared))),
            ("50:0", Some(("100:0", Mode::Shared))),
        ] {
            let st = status(&path, r(asked)).unwrap();
            assert_eq!(st.range, r(asked));
            let got = st.lock.map(|l| (l.range, l.mode));
            assert_eq!(got, want.map(|(range, mode)| (r(range), mode)), "{asked}");
            assert_eq!(st.held(), want.is_some(), "{asked}");
            match want {
                Some(_) => assert_eq!(st.holder.map(|h| h.pid), Some(std::process::id())),
                None => assert_eq!(st.holder, None),
            }
        }
        let file = File::open(&path).unwrap();
        let through_fd = status_fd(file.as_fd(), r("12")).unwrap();
        assert_eq!(through_fd.lock.map(|l| l.range), Some(r("10:10")));
        let e = status(dir.path(), r("0")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKind);
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = status(&dir.path().join("no/l"), r("0")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn disjoint_ranges_do_not_conflict_and_past_eof_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let a = RangeLock::new(&path, ByteRange::parse("0:10").unwrap());
        let b = RangeLock::new(&path, ByteRange::parse("10:10").unwrap());
        let far = RangeLock::new(&path, ByteRange::parse("0x7ffffffffffffff0:0").unwrap());
        let zero = Some(Duration::ZERO);
        let _ga = a.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap();
        assert!(matches!(
            b.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap(),
            Outcome::Acquired(_)
        ));
        // Another thread finds the held range busy (this one would be refused: its own).
        let again = RangeLock::new(&path, ByteRange::parse("0:10").unwrap());
        let busy = std::thread::spawn(move || {
            let got = again.acquire_with(Mode::Shared, zero, |_| {});
            got.map(|o| o.map(RangeGuard::unbind))
        });
        assert!(matches!(busy.join().unwrap().unwrap(), Outcome::TimedOut));
        assert!(matches!(
            far.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap(),
            Outcome::Acquired(_)
        ));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "content never changes"
        );
    }
}
