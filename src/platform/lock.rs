/*!
The kernel's advisory locks, behind safe functions: whole-file locks with `flock(2)`, byte-range
open-file-description (OFD) locks with `fcntl(F_OFD_SETLK[W])`, and [`ChildLock`], a blocking
lock call made by a child process for network file systems.

`flock` locks belong to the open file description, are released by the kernel (or the file
server) when the last descriptor of it closes, including at process death, and are what util-linux
`flock(1)`, Perl's and Python's `flock` take: using the same call is what makes `fsync mutex` and
those tools exclude each other. A blocking call returns `ErrorKind::Interrupted` when a signal
arrives, which is how the wait core imposes deadlines and cancellation on it.

OFD byte-range locks (`RangeLock`'s) belong to the open file description too, and conflict only
with POSIX or OFD locks of other descriptions on bytes that overlap them. A protocol never takes
both kinds on one file: NFS and FUSE emulate `flock` as a whole-file POSIX lock, and the two
collide there.
*/

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
};

use nix::{
    errno::Errno,
    fcntl::{FcntlArg, FdFlag, fcntl},
    libc,
};

/// How a lock is held: shared with other shared holders, or alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Any number of shared holders together, none while an exclusive holder has it
    /// (`flock -s`, `LOCK_SH`, `F_RDLCK`).
    Shared,
    /// One holder alone (`flock -x`, `LOCK_EX`, `F_WRLCK`).
    Exclusive,
}

/// Try to take the lock. `Ok(true)`: held; `Ok(false)`: someone else holds it (only when not
/// blocking); `Err` with `Interrupted` when a blocking call was interrupted by a signal.
///
/// `flock(2)` on a descriptor the caller keeps (nix 0.29's `Flock` takes the file over and
/// unlocks on drop; rustix borrows it).
pub(crate) fn flock(fd: &impl AsFd, mode: Mode, block: bool) -> io::Result<bool> {
    use rustix::fs::FlockOperation as Op;
    let op = match (mode, block) {
        (Mode::Shared, true) => Op::LockShared,
        (Mode::Shared, false) => Op::NonBlockingLockShared,
        (Mode::Exclusive, true) => Op::LockExclusive,
        (Mode::Exclusive, false) => Op::NonBlockingLockExclusive,
    };
    loop {
        match rustix::fs::flock(fd, op) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if !block => return Ok(false),
            // A non-blocking call has nothing to wait for: a signal just means "again".
            Err(rustix::io::Errno::INTR) if !block => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Release a lock explicitly (closing the last descriptor does it too).
pub(crate) fn unlock(fd: &impl AsFd) -> io::Result<()> {
    loop {
        match rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Let (or stop) a descriptor survive `exec`, to pass a lock down to a child on purpose.
pub(crate) fn set_inheritable(fd: &impl AsRawFd, inherit: bool) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    let flags = super::retrying(|| fcntl(raw, FcntlArg::F_GETFD).map_err(io::Error::from))?;
    // Keep whatever other bits the kernel reports, as the C idiom `flags & ~FD_CLOEXEC` does.
    let mut flags = FdFlag::from_bits_retain(flags);
    flags.set(FdFlag::FD_CLOEXEC, !inherit);
    super::retrying(|| fcntl(raw, FcntlArg::F_SETFD(flags)).map_err(io::Error::from))?;
    Ok(())
}

/// Try to take an open-file-description (OFD) byte-range lock on `len` bytes from `start`
/// (`len` 0: to the end of all offsets), as `fcntl(F_OFD_SETLK[W])`. Same results as [`flock`].
/// Bytes past the end of the file can be locked; the file is never changed.
pub(crate) fn ofd_lock(
    fd: &impl AsRawFd,
    mode: Mode,
    start: u64,
    len: u64,
    block: bool,
) -> io::Result<bool> {
    let fl = request(lock_type(mode), start, len)?;
    loop {
        // A blocking request is not retried on EINTR (nix's `fcntl` does not either): the
        // caller sees `Interrupted`, which is how the wait core ends it.
        let arg = if block {
            FcntlArg::F_OFD_SETLKW(&fl)
        } else {
            FcntlArg::F_OFD_SETLK(&fl)
        };
        match fcntl(fd.as_raw_fd(), arg) {
            Ok(_) => return Ok(true),
            Err(Errno::EAGAIN | Errno::EACCES) if !block => return Ok(false),
            Err(Errno::EINTR) if !block => continue,
            Err(e) => return Err(io::Error::from(e)),
        }
    }
}

/// The `struct flock` of a byte-range request of `kind` (`F_RDLCK`, `F_WRLCK`, `F_UNLCK`) on
/// `len` bytes from `start` (`len` 0: to the end of all offsets); `l_pid` 0, as OFD requests
/// require. EINVAL for offsets past `off_t`, as the kernel answers one it is given negative.
fn request(kind: libc::c_int, start: u64, len: u64) -> io::Result<libc::flock> {
    let overflow = |_| io::Error::from_raw_os_error(libc::EINVAL);
    Ok(libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: i64::try_from(start).map_err(overflow)?,
        l_len: i64::try_from(len).map_err(overflow)?,
        l_pid: 0,
    })
}

/// The lock type of `mode` in a `struct flock`.
fn lock_type(mode: Mode) -> libc::c_int {
    match mode {
        Mode::Shared => libc::F_RDLCK,
        Mode::Exclusive => libc::F_WRLCK,
    }
}

/// Whether some POSIX (`fcntl`, `lockf`) or OFD byte-range lock is held on any byte of the file
/// `fd` is open on, asked with `F_OFD_GETLK`, which takes nothing: the kernel's own answer, for
/// when `/proc/locks` (read a page at a time) may have skipped a line. (`flock` locks have no
/// such question.)
pub(crate) fn range_lock_held(fd: &impl AsRawFd) -> io::Result<bool> {
    // The kernel fills in the conflicting lock, if any.
    let mut fl = request(libc::F_WRLCK, 0, 0)?;
    super::retrying(|| {
        fcntl(fd.as_raw_fd(), FcntlArg::F_OFD_GETLK(&mut fl))
            .map(drop)
            .map_err(io::Error::from)
    })?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// A byte-range lock that `F_OFD_GETLK` reports ([`range_conflict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RangeConflict {
    /// Its first byte.
    pub start: u64,
    /// How many bytes; 0 reaches to the end of all offsets.
    pub len: u64,
    pub mode: Mode,
    /// The process of a POSIX (`fcntl`, `lockf`) lock; `None` for an OFD lock, which belongs
    /// to an open file description, not to a process (the kernel says -1).
    pub pid: Option<u32>,
}

/// A POSIX or OFD byte-range lock that another open file description holds on any of `len`
/// bytes from `start` (`len` 0: to the end of all offsets), in either mode: `F_OFD_GETLK` for
/// an exclusive lock there, which takes nothing and waits for nothing. `None` if there is none.
/// Where several overlap, the kernel reports one of them.
pub(crate) fn range_conflict(
    fd: &impl AsRawFd,
    start: u64,
    len: u64,
) -> io::Result<Option<RangeConflict>> {
    // The kernel fills in the conflicting lock, if any.
    let mut fl = request(libc::F_WRLCK, start, len)?;
    super::retrying(|| {
        fcntl(fd.as_raw_fd(), FcntlArg::F_OFD_GETLK(&mut fl))
            .map(drop)
            .map_err(io::Error::from)
    })?;
    if fl.l_type == libc::F_UNLCK as libc::c_short {
        return Ok(None);
    }
    let mode = match fl.l_type == libc::F_RDLCK as libc::c_short {
        true => Mode::Shared,
        false => Mode::Exclusive,
    };
    Ok(Some(RangeConflict {
        start: u64::try_from(fl.l_start).unwrap_or(0),
        len: u64::try_from(fl.l_len).unwrap_or(0),
        mode,
        pid: u32::try_from(fl.l_pid).ok().filter(|&p| p > 0),
    }))
}

/// Release an open-file-description byte-range lock on `len` bytes from `start`, as
/// `fcntl(F_OFD_SETLK)` with `F_UNLCK` (a no-op where none is held).
pub(crate) fn ofd_unlock(fd: &impl AsRawFd, start: u64, len: u64) -> io::Result<()> {
    let fl = request(libc::F_UNLCK, start, len)?;
    super::retrying(|| {
        fcntl(fd.as_raw_fd(), FcntlArg::F_OFD_SETLK(&fl))
            .map(drop)
            .map_err(io::Error::from)
    })
}

/// Whether the lock held through descriptor `fd` in `mode` is still ours: the descriptor still
/// works, and a non-blocking re-lock of our own open file description succeeds (a no-op while we
/// hold it; it fails once another holder has it, and a file server that dropped our locks
/// answers EBADFD, EIO or ESTALE). For lock-loss detection on network file systems.
pub(crate) fn still_held(fd: std::os::fd::BorrowedFd<'_>, mode: Mode) -> bool {
    // A descriptor that stopped working fails the fstat (EBADF, EIO), which flock would not
    // tell from a lock it could not take.
    nix::sys::stat::fstat(fd.as_raw_fd()).is_ok() && matches!(flock(&fd, mode, false), Ok(true))
}

/// What a [`ChildLock`] asks for: the whole file (`flock`), or a byte range (`F_OFD_SETLKW`,
/// `len` 0: to the end of all offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Whole(Mode),
    Range { mode: Mode, start: u64, len: u64 },
}

impl Request {
    /// Let go of what was asked for on `fd`, if it was granted (a no-op otherwise).
    pub(crate) fn undo(&self, fd: &(impl AsFd + AsRawFd)) -> io::Result<()> {
        match *self {
            Request::Whole(_) => unlock(fd),
            Request::Range { start, len, .. } => ofd_unlock(fd, start, len),
        }
    }
}

/// A blocking `flock` (or byte-range lock) that a child process makes on our open file
/// description, for network file systems. A lock belongs to the description, so what the child is granted, we hold. The
/// point is what happens when the wait must end (a deadline, a signal): a blocking call of our
/// own is ended by interrupting it, and a FUSE file system must then answer the interruption,
/// which a GlusterFS client has been seen never to do, leaving the caller in the call past its
/// timeout, deaf to signals. A child's call we never interrupt: we stop waiting for it (its
/// pipe) and kill it; if the file system never answers its call, only the child stays, and the
/// kernel drops whatever it is granted when it has gone.
#[derive(Debug)]
pub(crate) struct ChildLock {
    pid: libc::pid_t,
    /// Read end: one byte, 0 once granted, else the call's errno.
    answer: std::os::fd::OwnedFd,
    /// It said the lock is ours, and is exiting (not killed, then).
    granted: bool,
}

/// In a child just forked: close every descriptor but `low` and `high` (`low < high`).
/// Async-signal-safe: `close_range`, else `close` one by one.
///
/// # Safety
/// Only in a child process between `fork` and `_exit`.
unsafe fn keep_only(low: libc::c_int, high: libc::c_int) {
    let ranges = [
        (0, low - 1),
        (low + 1, high - 1),
        (high + 1, libc::c_int::MAX),
    ];
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        // SAFETY: closing descriptors of this child only (the caller's contract).
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                last as libc::c_uint,
                0,
            )
        };
        if done != 0 {
            for fd in first..=last.min(65_535) {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Children killed before they had exited, reaped as soon as they can be.
static UNREAPED: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

fn reap_killed() {
    let mut pids = UNREAPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pids.retain(|&pid| still_running(pid));
}

/// Reap our child `pid` if it has exited, without blocking: whether it is still there (not
/// reaped). A pid that is no child of ours (any more) is not.
fn still_running(pid: libc::pid_t) -> bool {
    use rustix::process::{Pid, WaitOptions, waitpid};
    Pid::from_raw(pid)
        .is_some_and(|pid| matches!(waitpid(Some(pid), WaitOptions::NOHANG), Ok(None)))
}

/// SIGKILL to our child `pid` (one we have not reaped yet, so its number is not reused).
fn kill(pid: libc::pid_t) {
    use rustix::process::{Pid, Signal, kill_process};
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process(pid, Signal::KILL);
    }
}

impl ChildLock {
    /// Start a child that takes the lock `request` on `fd`, blocking, with every signal but
    /// KILL blocked (nothing interrupts its call), and dies with this thread.
    pub(crate) fn start(fd: &impl AsRawFd, request: Request) -> io::Result<ChildLock> {
        reap_killed();
        // Everything the child's call needs is made here: the child allocates nothing.
        let (op, ranged, fl) = match request {
            Request::Whole(Mode::Shared) => {
                (libc::LOCK_SH, false, self::request(libc::F_UNLCK, 0, 0)?)
            }
            Request::Whole(Mode::Exclusive) => {
                (libc::LOCK_EX, false, self::request(libc::F_UNLCK, 0, 0)?)
            }
            Request::Range { mode, start, len } => {
                (0, true, self::request(lock_type(mode), start, len)?)
            }
        };
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let lock_fd = fd.as_raw_fd();
        let write_fd = write.as_raw_fd();
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the child calls only async-signal-safe functions (sigprocmask, prctl,
        // getppid, flock or fcntl, write, _exit) and allocates nothing.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; `set` is a local, filled before use.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&raw mut set);
                libc::sigprocmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                // Only the lock's description and the pipe: a copy of any other descriptor
                // would keep its locks (and files) alive as long as we live, after the
                // parent has let go of them.
                keep_only(lock_fd.min(write_fd), lock_fd.max(write_fd));
                let answer: u8 = loop {
                    let done = match ranged {
                        false => libc::flock(lock_fd, op),
                        true => libc::fcntl(lock_fd, libc::F_OFD_SETLKW, &raw const fl),
                    };
                    if done == 0 {
                        break 0;
                    }
                    let e = *libc::__errno_location();
                    if e != libc::EINTR {
                        break u8::try_from(e).unwrap_or(u8::MAX);
                    }
                };
                libc::write(write_fd, (&raw const answer).cast(), 1);
                libc::_exit(0);
            }
        }
        drop(write);
        Ok(ChildLock {
            pid,
            answer: read,
            granted: false,
        })
    }

    /// Wait for the child's answer: `Ok(true)` once the lock is ours, `Err` with `Interrupted`
    /// when a signal ends the wait (the child goes on), or the error of its call.
    pub(crate) fn wait(&mut self) -> io::Result<bool> {
        let mut byte = [0u8; 1];
        // One read, never retried: a signal that interrupts it ends the wait (`Interrupted`).
        match rustix::io::read(&self.answer, &mut byte[..]) {
            Ok(0) => Err(io::Error::other("the process taking the lock died")),
            Ok(_) if byte[0] == 0 => {
                self.granted = true; // it exits by itself
                Ok(true)
            }
            Ok(_) => Err(io::Error::from_raw_os_error(i32::from(byte[0]))),
            Err(e) => Err(e.into()),
        }
    }
}

/// How long a killed child is waited for: its call ends at once unless the file system does
/// not answer it.
const KILLED_EXIT: std::time::Duration = std::time::Duration::from_millis(200);

impl Drop for ChildLock {
    fn drop(&mut self) {
        if !self.granted {
            kill(self.pid);
        }
        // Its exit closes its descriptor of the lock's description: wait for it in the kernel,
        // a moment at most, so that the lock goes when the caller lets go of it (not when the
        // child has gone), and nothing the child was granted as it died is still coming.
        if let Some(exit) = super::process::PidFd::open(self.pid as u32) {
            exit.exited_within(KILLED_EXIT);
        }
        if still_running(self.pid) {
            // Stuck in a call the file system does not answer: reaped later.
            defer_reaping(self.pid);
        }
    }
}

fn defer_reaping(pid: libc::pid_t) {
    UNREAPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(pid);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of process `pid` (`S` sleeping, `Z` exited and not reaped), `None`
    /// once it is gone.
    fn state(pid: libc::pid_t) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rfind(')').and_then(|i| stat[i + 2..].chars().next())
    }

    /// Until `cond` holds, at most 10 s.
    fn within_10s(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !cond() {
            assert!(
                std::time::Instant::now() < deadline,
                "never happened: {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A new open file description of `dir/name`, read-write (created if missing).
    fn lock_file(dir: &std::path::Path, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(dir.join(name))
            .unwrap()
    }

    /// A child left waiting is killed and reaped when dropped; one that was granted the lock
    /// exits by itself, and is waited for and reaped.
    #[test]
    fn child_locks_are_killed_or_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_file(dir.path(), "held");
        let holder = lock_file(dir.path(), "held");
        assert!(flock(&holder, Mode::Exclusive, false).unwrap());
        let waiting = ChildLock::start(&held, Request::Whole(Mode::Exclusive)).unwrap();
        let pid = waiting.pid;
        within_10s("the child waits", || state(pid) == Some('S'));
        drop(waiting);
        assert_eq!(state(pid), None, "killed and reaped");

        let free = lock_file(dir.path(), "free");
        let mut granted = ChildLock::start(&free, Request::Whole(Mode::Exclusive)).unwrap();
        assert!(granted.wait().unwrap());
        let pid = granted.pid;
        drop(granted);
        assert_eq!(state(pid), None, "waited for and reaped");
        // Gone with its copy of the descriptor: the lock goes when we let go.
        drop(free);
        let probe = lock_file(dir.path(), "free");
        assert!(flock(&probe, Mode::Exclusive, false).unwrap());
    }

    /// A killed child still in a call the file system never answers is left to be reaped
    /// later: the next child started reaps it once it has exited, so no zombie stays. A child
    /// that has exited stands here for one that was stuck when it was killed. (Mutants
    /// answered: `reap_killed` and `defer_reaping` doing nothing.)
    #[test]
    #[allow(clippy::zombie_processes)] // left to `reap_killed`: what the test is about
    fn a_child_left_to_be_reaped_is_reaped_by_the_next_start() {
        let exited = std::process::Command::new("true").spawn().unwrap();
        let pid = libc::pid_t::try_from(exited.id()).unwrap();
        within_10s("the child exits", || state(pid) == Some('Z'));
        defer_reaping(pid);
        let dir = tempfile::tempdir().unwrap();
        let free = lock_file(dir.path(), "free");
        let mut next = ChildLock::start(&free, Request::Whole(Mode::Exclusive)).unwrap();
        assert!(next.wait().unwrap());
        assert_eq!(state(pid), None, "reaped");
        assert!(!UNREAPED.lock().unwrap().contains(&pid));
    }

    /// A byte range: the child's lock is our description's (another description cannot take
    /// those bytes, bytes beside them stay free), and undoing it frees them.
    #[test]
    fn a_child_takes_a_byte_range_for_our_description() {
        let dir = tempfile::tempdir().unwrap();
        let ours = lock_file(dir.path(), "r");
        let other = lock_file(dir.path(), "r");
        assert!(ofd_lock(&other, Mode::Exclusive, 10, 5, false).unwrap());
        let row = Request::Range {
            mode: Mode::Exclusive,
            start: 12,
            len: 1,
        };
        let mut waiting = ChildLock::start(&ours, row).unwrap();
        let pid = waiting.pid;
        within_10s("the child waits", || state(pid) == Some('S'));
        ofd_unlock(&other, 10, 5).unwrap();
        assert!(waiting.wait().unwrap());
        drop(waiting);
        assert!(
            !ofd_lock(&other, Mode::Exclusive, 12, 1, false).unwrap(),
            "ours now"
        );
        assert!(
            ofd_lock(&other, Mode::Exclusive, 13, 1, false).unwrap(),
            "only byte 12"
        );
        row.undo(&ours).unwrap();
        assert!(
            ofd_lock(&other, Mode::Exclusive, 12, 1, false).unwrap(),
            "undone"
        );
    }

    /// Why a child could not take the lock: its call's error, or its death.
    #[test]
    fn a_child_lock_says_why_it_failed() {
        struct NotOpen;
        impl AsRawFd for NotOpen {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                1_000_000
            }
        }
        let mut bad = ChildLock::start(&NotOpen, Request::Whole(Mode::Exclusive)).unwrap();
        assert_eq!(bad.wait().unwrap_err().raw_os_error(), Some(libc::EBADF));

        let dir = tempfile::tempdir().unwrap();
        let held = lock_file(dir.path(), "held");
        let holder = lock_file(dir.path(), "held");
        assert!(flock(&holder, Mode::Exclusive, false).unwrap());
        let mut waiting = ChildLock::start(&held, Request::Whole(Mode::Exclusive)).unwrap();
        kill(waiting.pid);
        let died = waiting.wait().unwrap_err();
        assert!(died.to_string().contains("died"), "{died}");
    }

    /// `F_OFD_GETLK` reports a POSIX lock with its process, an OFD lock without one, each with
    /// its bytes and mode, and nothing beside them.
    #[test]
    fn range_conflict_names_a_posix_locks_process_and_no_ofd_lock_process() {
        let dir = tempfile::tempdir().unwrap();
        let open = || lock_file(dir.path(), "l");
        let (posix, ofd, asker) = (open(), open(), open());
        let fl = libc::flock {
            l_type: libc::F_RDLCK as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: 10,
            l_len: 5,
            l_pid: 0,
        };
        fcntl(posix.as_raw_fd(), FcntlArg::F_SETLK(&fl)).unwrap();
        assert!(ofd_lock(&ofd, Mode::Exclusive, 100, 0, false).unwrap());
        assert_eq!(
            range_conflict(&asker, 12, 1).unwrap(),
            Some(RangeConflict {
                start: 10,
                len: 5,
                mode: Mode::Shared,
                pid: Some(std::process::id()),
            })
        );
        assert_eq!(
            range_conflict(&asker, 99, 2).unwrap(),
            Some(RangeConflict {
                start: 100,
                len: 0,
                mode: Mode::Exclusive,
                pid: None,
            })
        );
        assert_eq!(range_conflict(&asker, 15, 85).unwrap(), None);
    }

    /// The kernel's own answer to "is any byte of this file range-locked", for when
    /// /proc/locks skipped a line: yes for a shared lock anywhere in it (even at the end of
    /// all offsets) by another description, no once it goes, and never for a `flock` lock.
    /// (Mutant answered: the answer always no.)
    #[test]
    fn a_range_lock_anywhere_in_the_file_is_seen_by_another_description() {
        let dir = tempfile::tempdir().unwrap();
        let open = || lock_file(dir.path(), "l");
        let (holder, asker) = (open(), open());
        assert!(!range_lock_held(&asker).unwrap());
        assert!(flock(&holder, Mode::Exclusive, false).unwrap());
        assert!(
            !range_lock_held(&asker).unwrap(),
            "a flock lock is no range lock"
        );
        unlock(&holder).unwrap();
        assert!(ofd_lock(&holder, Mode::Shared, u64::MAX >> 2, 1, false).unwrap());
        assert!(range_lock_held(&asker).unwrap());
        ofd_unlock(&holder, u64::MAX >> 2, 1).unwrap();
        assert!(!range_lock_held(&asker).unwrap());
    }
}
