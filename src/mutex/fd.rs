//! Locks on descriptors a program already has open (`exec 9>>lock; fsync mutex lock --fd 9`).

use std::{
    os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
    time::Duration,
};

use super::*;
use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        fs::{self as pfs, Access},
        lock::{self, Mode},
    },
    wait::{self, Deadline, Outcome, Wait},
};

/// [`MutexGuard::still_held`] for a descriptor the caller locked exclusively with [`lock_fd`]
/// (not for a shared lock, which the check would try to convert).
pub fn fd_still_held(fd: BorrowedFd<'_>) -> bool {
    lock::still_held(fd, Mode::Exclusive)
}

/// Lock a descriptor the caller already has open (`exec 9>>lock; fsync mutex lock --fd 9`)
/// in `mode`, waiting up to `timeout` as [`Mutex::acquire`] does
/// (`Ok(false)`: it ran out) and re-checking every `poll` on a network file system. The lock
/// belongs to the open file description, so it outlives this process; nothing releases it but
/// [`unlock_fd`] or the last close of the description. No holder record, fencing token or
/// nesting. Errors: [`ErrorKind::NotFound`] if `fd` is not open on a regular file, a
/// directory, a device or a named pipe, [`ErrorKind::NotSupported`] where the file system does not support locks. (On NFS
/// an exclusive lock needs a descriptor open for writing: `exec 9>>lock`, not `9<lock`.)
pub fn lock_fd(
    fd: BorrowedFd<'_>,
    mode: Mode,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<bool> {
    Ok(lock_fd_with(fd, mode, timeout, poll, |_| {})?
        .acquired()
        .is_some())
}

/// Like [`lock_fd`], telling a timeout from a cancellation, and calling `progress` with the
/// time waited when the wait starts blocking and about once a second after.
pub fn lock_fd_with(
    fd: BorrowedFd<'_>,
    mode: Mode,
    timeout: Option<Duration>,
    poll: Duration,
    progress: impl FnMut(Duration),
) -> Result<Outcome<()>> {
    let path = fd_file(fd.as_raw_fd());
    check_lockable_fd(fd.as_raw_fd(), &path)?;
    let network = pfs::fs_kind(&fd).network;
    let spec = Wait::for_lock(Deadline::after(timeout), network, poll);
    let mut locker = wait::Locker::new(network);
    let got = wait::wait_for(spec, progress, |block| {
        Ok(locker.flock(&fd, mode, block)?.then_some(()))
    });
    locker.settle(&got, &fd);
    got.map_err(|e| lock_error(&path, e, network, Access::ReadWrite))
}

/// Release the lock held through a descriptor (a no-op if it holds none). Errors as
/// [`lock_fd`].
pub fn unlock_fd(fd: BorrowedFd<'_>) -> Result<()> {
    let path = fd_file(fd.as_raw_fd());
    check_lockable_fd(fd.as_raw_fd(), &path)?;
    lock::unlock(&fd).map_err(|e| Error::io(&path, "cannot unlock", e))
}

/// A descriptor of our own for descriptor number `number`, which this process inherited
/// (`exec 9>>lock` in the shell): a close-on-exec duplicate. Locks belong to the open file
/// description both share, so [`lock_fd`] and [`unlock_fd`] on it lock and unlock `number`.
/// Fails if `number` is not open, or is open on something that cannot be a lock file (an
/// anonymous pipe, a socket).
pub(crate) fn inherited_fd(number: RawFd) -> Result<OwnedFd> {
    let path = fd_path(number);
    check_lockable_fd(number, &path)?;
    pfs::duplicate(number).map_err(|e| Error::io(&path, "cannot duplicate descriptor", e))
}

/// What a descriptor that can be locked is open on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lockable {
    File,
    Directory,
    /// A character or block device (`/dev/null`, a disk): every process that opens it locks
    /// the same inode, as with `flock /dev/null` or `flock /dev/sdb dd ...`.
    Device,
    /// A named pipe (FIFO), reached by its name as a file is.
    Fifo,
}

/// That `fd` is open on something `flock(1)` locks: a regular file, a directory, a device or a
/// named pipe; not an anonymous pipe or a socket, where a lock would exclude nobody who opened
/// a file by name. Returns which it is.
pub(crate) fn check_lockable_fd(fd: RawFd, path: &Path) -> Result<Lockable> {
    use nix::sys::stat::SFlag;
    let st = nix::sys::stat::fstat(fd).map_err(|e| {
        Error::new(path, ErrorKind::NotFound, "not an open file descriptor").with_errno(e as i32)
    })?;
    let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => return Ok(Lockable::File),
        SFlag::S_IFDIR => return Ok(Lockable::Directory),
        SFlag::S_IFCHR | SFlag::S_IFBLK => return Ok(Lockable::Device),
        // A named pipe's descriptor leads to its path; an anonymous one's to `pipe:[N]`.
        SFlag::S_IFIFO
            if std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| p.is_absolute()) =>
        {
            return Ok(Lockable::Fifo);
        }
        SFlag::S_IFIFO => "a pipe",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFLNK => "a symbolic link",
        _ => "of an unknown kind",
    };
    let cause = format!("is {kind}, not a lock file");
    Err(Error::new(path, ErrorKind::NotFound, cause))
}

/// A name for a descriptor in messages: the file it is open on (a duplicate's number would
/// mean nothing to whoever passed the original), or `fd N`.
pub(crate) fn fd_file(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_else(|_| format!("fd {fd}").into())
}

/// A name for a descriptor number in messages: `fd N (FILE)`, or `fd N`.
fn fd_path(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).map_or_else(
        |_| PathBuf::from(format!("fd {fd}")),
        |p| PathBuf::from(format!("fd {fd} ({})", p.display())),
    )
}
