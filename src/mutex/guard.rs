//! Holding a mutex: the guard, its record and its release (steps 4 and the release of the
//! protocol in [`super`]'s docs).

use std::{
    fs::File,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
};

use super::*;
use crate::{
    error::{Error, Result},
    fence,
    guard::Guard,
    held,
    holder::{self, Holder, OwnRecord},
    platform::{
        dir::Dir,
        fs::{self as pfs},
        lock::{self, Mode},
        procinfo,
    },
};

/// Proof of holding a [`Mutex`]; releases it when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MutexGuard {
    path: PathBuf,
    /// `None` for a nested acquisition: the ancestor's descriptor holds the lock.
    file: Option<File>,
    /// For a nested guard, our own descriptor of the ancestor's open file description (the
    /// ancestor's holds the lock).
    nested_fd: Option<OwnedFd>,
    delete: bool,
    /// The fencing token and who holds the lock, as recorded beside it.
    record: OwnRecord,
    /// The lock's directory, as opened for the record.
    dir: Option<Dir>,
    network: bool,
    /// Keep the fence in the directory's fence file when deleting (not for the internal
    /// locks of other primitives, whose directories must be left empty).
    keep_fence: bool,
    /// This holding in the process's table (`None` when nested).
    in_process: Option<held::Key>,
    /// Passed down to commands ([`Guard::pass_down`]).
    passed_down: bool,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    acquired: std::time::Instant,
    /// Not `Send`: see [`Unbound`](crate::Unbound).
    bound: crate::platform::binding::Bound,
}

held::bindable!(MutexGuard, in_process);
held::bindable!(PlainGuard, key);

impl MutexGuard {
    pub(super) fn new(mutex: &Mutex, file: File, network: bool, key: held::Key) -> MutexGuard {
        let prepared = Prepared::open(&mutex.path);
        Self::prepared(mutex, file, network, key, prepared)
    }

    /// The guard for the lock `file` just locked, with its directory and record opened
    /// before (step 4 of the protocol).
    pub(super) fn prepared(
        mutex: &Mutex,
        file: File,
        network: bool,
        key: held::Key,
        prepared: Prepared,
    ) -> MutexGuard {
        let acquired = std::time::Instant::now();
        held::add(key);
        // A device (`/dev/null`) lies in a directory of the system's, where nothing of ours
        // belongs: no record, and the token grows with the clock.
        let (dir, record) = match key.device() {
            false => prepared.current(),
            true => (None, None),
        };
        let lock_dir = dir.as_ref().zip(mutex.path.file_name());
        let old = match (&record, lock_dir) {
            (Some(r), _) => r.read().fence,
            (None, Some((dir, name))) => holder::trusted_fence_in(dir, name),
            (None, None) => 0,
        };
        let now = procinfo::now_micros();
        let kept = match fence::file_matters(record.as_ref().map(|_| old)) {
            true => dir.as_ref().map_or(0, fence::kept_in),
            false => 0, // a round trip to the file server saved on every hand-over
        };
        // Our mark holds tokens handed out while no record of ours could: it matters only
        // without a record of ours, with one just made (fence 0), or where tokens run ahead of
        // the clock. Otherwise the record's token is the last, or the clock is ahead of them
        // all, and a run saves the mark's look-up (a dozen system calls).
        let mark = match record.is_none() || old == 0 || old.max(kept) >= now {
            true => lock_dir.map_or(0, |(dir, name)| fence::mark(dir, name)),
            false => 0,
        };
        // Greater than the last token kept where we may believe it (the record, the directory's
        // fence file where a `--delete` left it, our own mark), and never behind the clock:
        // tokens still grow where nothing could be kept, between hosts whose clocks agree.
        let fence = fence::next(old.max(kept).max(mark), now);
        if record.is_none() {
            // No record of ours keeps it: our mark does.
            if let Some((dir, name)) = lock_dir {
                fence::raise_mark(dir, name, fence);
            }
        }
        let command = mutex.command.clone().unwrap_or_else(procinfo::own_cmdline);
        MutexGuard {
            path: mutex.path.clone(),
            file: Some(file),
            nested_fd: None,
            delete: mutex.delete,
            record: OwnRecord::held(record, fence, Holder::this_process(now, command)),
            dir,
            network,
            keep_fence: !mutex.internal,
            in_process: Some(key),
            passed_down: false,
            acquired,
            bound: std::marker::PhantomData,
        }
    }

    pub(super) fn nested(mutex: &Mutex, fd: RawFd) -> MutexGuard {
        let fence = std::env::var("FSYNC_FENCE")
            .ok()
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        MutexGuard {
            bound: std::marker::PhantomData,
            path: mutex.path.clone(),
            file: None,
            nested_fd: pfs::duplicate(fd).ok(),
            delete: false,
            record: OwnRecord::none(fence),
            dir: None,
            // The ancestor's descriptor, named through /proc: the file system of its file.
            network: pfs::fs_kind_of_path(Path::new(&format!("/proc/self/fd/{fd}"))).network,
            keep_fence: false,
            in_process: None,
            passed_down: false,
            acquired: std::time::Instant::now(),
        }
    }

    /// Whether the lock file lies on a network file system, where a living holder can lose
    /// its lock (partition, expired lease) and should check with [`still_held`](Self::still_held).
    pub fn on_network(&self) -> bool {
        self.network
    }

    /// Whether the lock is still ours: the descriptor still works, and a non-blocking
    /// re-lock of our own open file description succeeds (a no-op while we hold it; it fails
    /// once another holder has it, and the file server answers EBADFD/EIO/ESTALE to a client
    /// whose locks it has dropped). A nested guard answers for its ancestor's descriptor.
    pub fn still_held(&self) -> bool {
        self.held_fd()
            .is_some_and(|fd| lock::still_held(fd, Mode::Exclusive))
    }

    /// The fencing token: greater than that of every earlier holder of this lock. Pass it to
    /// the resource the lock protects, which then refuses writes with a smaller token than one
    /// it has seen: a holder that lost its lock without knowing (a network partition, a long
    /// pause) cannot overwrite its successor's work. It is the current time in microseconds
    /// or one more than the last recorded token, whichever is greater, and below 2^63; so
    /// tokens grow even where no record can be kept (a read-only directory), as long as clocks
    /// agree. Only files of the caller or root are believed; the module docs say what holds on
    /// one host and across hosts. A nested guard has its ancestor's token (from `FSYNC_FENCE`,
    /// or 0).
    pub fn fence(&self) -> u64 {
        self.record.fence()
    }

    /// The lock file's path, as the mutex was given it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this acquisition was satisfied by an ancestor's lock (nesting).
    pub fn is_nested(&self) -> bool {
        self.file.is_none()
    }

    /// The descriptor that holds the lock (for a nested guard: one on the same open file
    /// description as the ancestor's).
    fn held_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.file {
            Some(f) => Some(f.as_fd()),
            None => self.nested_fd.as_ref().map(|fd| fd.as_fd()),
        }
    }

    /// The value of [`HELD_ENV`] that commands started under the lock need for nesting: after
    /// [`pass_down`](Guard::pass_down) it names the inherited descriptor, so that their own
    /// acquisitions of the lock are satisfied by it; before, it tells them that an ancestor
    /// holds the lock without having passed it down (their acquisitions then fail at once
    /// instead of deadlocking). A nested guard gives its ancestor's value.
    pub fn held_env(&self) -> Result<String> {
        let Some(file) = &self.file else {
            return Ok(std::env::var(HELD_ENV).unwrap_or_default()); // nested
        };
        let fd = file.as_raw_fd();
        let (dev, ino) = self.held_file(fd)?;
        let fd_text = if self.passed_down {
            fd.to_string()
        } else {
            "-".to_string()
        };
        let own = format!("{}:{}:{}:{}", dev, ino, fd_text, std::process::id());
        Ok(match std::env::var(HELD_ENV) {
            Ok(prev) if !prev.is_empty() => format!("{prev};{own}"),
            _ => own,
        })
    }

    /// Move the lock's descriptor above `floor` (the same open file, so the same lock): a dying
    /// process's descriptors are closed in ascending order, so a lock passed down with others
    /// is then released after them (a group's `join.lock` after its `gate` and registration, so
    /// that a joiner it lets in finds them released too). Best effort.
    pub(crate) fn raise_descriptor(&mut self, floor: RawFd) {
        let Some(file) = &self.file else { return };
        if file.as_raw_fd() > floor {
            return;
        }
        if let Ok(fd) = pfs::duplicate_from(file.as_fd(), floor + 1) {
            self.file = Some(File::from(fd));
        }
    }

    /// Decide at release time whether the lock file goes (compound primitives that learn only
    /// while holding the lock whether they were the last user).
    pub(crate) fn set_delete_on_release(&mut self, yes: bool) {
        self.delete = yes && !self.is_nested();
    }

    /// Release now, saying what became of the lock file and reporting failures (dropping the
    /// guard releases too, silently).
    pub fn release(mut self) -> Result<Released> {
        self.release_inner()
    }

    /// The device and inode of the file we hold (open as `fd`), as learnt when it was locked:
    /// a stat is a round trip to the server on a network file system.
    fn held_file(&self, fd: RawFd) -> Result<(u64, u64)> {
        if let Some(key) = &self.in_process {
            Ok(key.file())
        } else {
            let st = nix::sys::stat::fstat(fd).map_err(|e| {
                Error::io(&self.path, "cannot stat lock file", std::io::Error::from(e))
            })?;
            Ok((st.st_dev, st.st_ino))
        }
    }

    /// Keep our token for the next holder where our record no longer does (see
    /// [`crate::fence::keep`]).
    fn keep_fence(&self) {
        if !self.keep_fence {
            return;
        }
        let Some(name) = self.path.file_name() else {
            return;
        };
        match &self.dir {
            Some(dir) => fence::keep(dir, name, self.record.fence()),
            None => {
                if let Some((dir, _)) = holder::split(&self.path) {
                    fence::keep(&dir, name, self.record.fence());
                }
            }
        }
    }

    /// Whether the lock's name still names the file we hold, open as `file` (see [`names`]).
    fn still_named(&self, file: &File) -> Result<bool> {
        let held = self.held_file(file.as_raw_fd())?;
        names(
            &self.path,
            self.dir.as_ref().zip(self.path.file_name()),
            held,
        )
    }

    fn release_inner(&mut self) -> Result<Released> {
        let Some(file) = self.file.take() else {
            return Ok(Released::Kept);
        };
        let mut result = Ok(Released::Kept);
        // A process the command left running may hold the lock through an inherited
        // descriptor: deleting LOCK then would let the next acquirer lock a new file.
        let still_held = self.delete && procinfo::description_shared(file.as_fd());
        if still_held {
            result = Ok(Released::KeptStillHeld);
        }
        if self.delete && !still_held {
            // The fence outlives the record in the directory's fence file, so that tokens
            // keep growing after the lock is gone (whatever the next holder's clock says).
            self.keep_fence();
            self.record.remove();
            // Unlink only the file we hold: if the path now names another inode, leave it.
            if matches!(self.still_named(&file), Ok(true)) {
                result = match crate::platform::fs::remove_file(&self.path) {
                    Ok(()) => Ok(Released::Deleted),
                    // Removed meanwhile (by the command): what was asked for.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Released::Deleted),
                    Err(e) => Err(Error::io(&self.path, "cannot delete lock file", e)),
                };
            }
        } else if matches!(self.still_named(&file), Ok(false)) {
            // LOCK was deleted (or replaced) while we held it: the record now belongs to
            // whoever locks that name next. Keep the fence for them, and remove the record
            // unless someone has written it since we did.
            self.keep_fence();
            self.record.remove_if_unchanged();
        } else {
            self.record.released();
        }
        if let Some(key) = self.in_process.take() {
            held::remove(key);
        }
        drop(file);
        result
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// Proof of holding a plain lock on a [`Mutex`]'s file ([`Mutex::acquire_plain_with`],
/// in either mode); releases it when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct PlainGuard {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) key: held::Key,
    pub(super) mode: Mode,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    pub(super) acquired: std::time::Instant,
    /// Not `Send`: see [`Unbound`](crate::Unbound).
    pub(super) bound: crate::platform::binding::Bound,
}

impl Guard for MutexGuard {
    /// Through an ancestor's descriptor for a nested guard.
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        // Whether the file system is a network one was learnt when the lock was taken.
        crate::LossCheck::on(
            self.network,
            self.held_fd()?,
            Mode::Exclusive,
            self.acquired,
        )
    }

    /// Then give the commands [`held_env`](MutexGuard::held_env) in their environment. A
    /// nested guard's lock is its ancestor's: nothing to do.
    fn pass_down(&mut self) -> Result<()> {
        if self.passed_down {
            return Ok(());
        }
        if let Some(file) = &self.file {
            lock::set_inheritable(file, true)
                .map_err(|e| Error::io(&self.path, "cannot pass lock down", e))?;
            self.passed_down = true;
        }
        Ok(())
    }

    /// For [`status`] (or name the command at acquisition with [`Mutex::command`]). A nested
    /// guard records nothing: its ancestor's record names the holder.
    fn set_child(&self, pid: Option<u32>, command: &str) {
        if !self.is_nested() {
            self.record.set_child(pid, command.to_string());
        }
    }
}

impl PlainGuard {
    /// Release now, as every guard can (dropping it releases too). A plain lock keeps no files
    /// beside it: always [`Released::Kept`].
    pub fn release(self) -> Result<Released> {
        drop(self);
        Ok(Released::Kept)
    }
}

/// A plain lock keeps no record: [`set_child`](Guard::set_child) records nothing.
impl Guard for PlainGuard {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(&self.file, self.mode, self.acquired)
    }

    fn pass_down(&mut self) -> Result<()> {
        lock::set_inheritable(&self.file, true)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }
}

impl Drop for PlainGuard {
    fn drop(&mut self) {
        held::remove(self.key);
    }
}

/// What [`MutexGuard::release`] did with the lock file: the one result of every guard's
/// release (a mutex is never [`Released::KeptInUse`]: nobody else is inside).
pub use crate::teardown::Released;
