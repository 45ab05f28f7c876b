/*!
Change notification: block until something changes in a directory.

It only sees changes made through this machine's kernel; on network file systems other hosts'
changes are invisible, which is why the wait core also polls there.

Directory watches use dnotify (`fcntl(F_NOTIFY)`), the older interface, where the kernel has
it; inotify otherwise, and for close events (semaphore slots), which only inotify reports. The
reason is the end of a wait: closing an inotify instance (at the latest, when its process exits)
waits for the kernel to retire its watches, a deferred worker and then an SRCU grace period.
Measured here (`python3` loop of fork, watch, exit, waitpid): a process with an inotify watch
took 8.5 ms (p50) to exit against 0.57 ms with a dnotify watch or none, and a script waiting on
`fsync event wait` sees the exit, not the wake-up (about 25 us after the change either way).

dnotify reports by signal: [`wake_signal`](crate::platform::signal::wake_signal), sent to the thread that
made the watch (`F_SETSIG`, `F_SETOWN_EX` with `F_OWNER_TID`; so a watch is used on the thread
that made it). Its handler counts; [`DirWatch::wait`] blocks with `ppoll`, which unblocks the
signal only while it sleeps, and returns at once if the count moved since the last return (a
change that came while the caller was checking). The wait core's timer sends the same signal,
so deadlines and cancellation end these waits too.

When the real-time signal cannot be queued (the user's pending-signal queue is full,
`RLIMIT_SIGPENDING`), the kernel sends plain SIGIO instead, whose default action ends the
process ("I/O possible"). So before the first watch is armed (`F_SETSIG` before `F_NOTIFY`,
both after the handlers), SIGIO gets the same counting handler, once per process, unless the
program gave it a disposition of its own
([`install_overflow_handler`](crate::platform::signal::install_overflow_handler)); it is then
blocked and unblocked with the wake signal, and wakes a watch as the wake signal does.
inotify is read, never armed with `O_ASYNC`: it sends no signal.
*/

use std::{
    cell::Cell,
    ffi::OsString,
    io,
    marker::PhantomData,
    os::fd::{AsRawFd, OwnedFd},
    path::Path,
    time::Duration,
};

use nix::{
    libc,
    sys::inotify::{AddWatchFlags, InitFlags, Inotify},
};

/// A watch on one or more directories for entries being created, removed, renamed, written or
/// having their attributes changed (not opened or read, so that checking a file does not wake
/// us).
pub(crate) struct DirWatch {
    backend: Backend,
    /// Signals go to the thread that made the watch: keep it there.
    _thread_bound: PhantomData<*const ()>,
}

enum Backend {
    Dnotify {
        dirs: Vec<OwnedFd>,
        /// [`crate::platform::signal::wakes`] when we last returned (or began).
        seen: Cell<u64>,
    },
    Inotify(Inotify),
}

/// dnotify, where the `fcntl` values are the asm-generic ones (they are not in the `libc` crate
/// for glibc targets; from `<linux/fcntl.h>`). Raw `fcntl`: nix's `FcntlArg` has no
/// `F_NOTIFY`, `F_SETSIG` or `F_SETOWN_EX`.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x"
))]
mod dn {
    use super::*;

    const F_SETSIG: i32 = 10;
    const F_SETOWN_EX: i32 = 15;
    const F_OWNER_TID: i32 = 0;
    const DN_MODIFY: u32 = 0x2;
    const DN_CREATE: u32 = 0x4;
    const DN_DELETE: u32 = 0x8;
    const DN_RENAME: u32 = 0x10;
    const DN_ATTRIB: u32 = 0x20;
    const DN_MULTISHOT: u32 = 0x8000_0000;

    #[repr(C)]
    struct FOwnerEx {
        kind: i32,
        pid: i32,
    }

    /// Open `dir` and ask for a signal to this thread on every change in it.
    pub(super) fn watch(dir: &Path) -> io::Result<OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt;
        // Both handlers before anything is armed: the wake signal's, and SIGIO's, which the
        // kernel sends instead when the wake signal cannot be queued (module docs).
        crate::platform::signal::install_wake_handler();
        crate::platform::signal::install_overflow_handler();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)?;
        let fd = file.as_raw_fd();
        let mask = DN_CREATE | DN_DELETE | DN_RENAME | DN_MODIFY | DN_ATTRIB | DN_MULTISHOT;
        let owner = FOwnerEx {
            kind: F_OWNER_TID,
            pid: nix::unistd::gettid().as_raw(),
        };
        let call = |f: &dyn Fn() -> libc::c_int| {
            crate::platform::retrying(|| crate::platform::cvt(f())).map(drop)
        };
        // SAFETY: fcntl on a descriptor we own; F_SETOWN_EX reads the struct we pass. F_NOTIFY
        // makes the process the owner, so the thread is named after it; a signal in between goes
        // to some thread of ours and still moves the count.
        unsafe {
            call(&|| libc::fcntl(fd, F_SETSIG, crate::platform::signal::wake_signal()))?;
            call(&|| libc::fcntl(fd, libc::F_NOTIFY, mask as libc::c_int))?;
            call(&|| libc::fcntl(fd, F_SETOWN_EX, &raw const owner))?;
        }
        Ok(file.into())
    }
}

/// Elsewhere: no dnotify, so inotify.
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x"
)))]
mod dn {
    use super::*;

    pub fn watch(_: &Path) -> io::Result<OwnedFd> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

const INOTIFY_MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_DELETE_SELF);

impl DirWatch {
    pub(crate) fn new(dir: &Path) -> io::Result<DirWatch> {
        let backend = match dn::watch(dir) {
            Ok(fd) => Backend::Dnotify {
                dirs: vec![fd],
                seen: Cell::new(crate::platform::signal::wakes()),
            },
            // EINVAL: a kernel built without dnotify; the directory's own errors come
            // again from inotify.
            _ => {
                let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
                inotify
                    .add_watch(dir, INOTIFY_MASK)
                    .map_err(io::Error::from)?;
                Backend::Inotify(inotify)
            }
        };
        Ok(DirWatch {
            backend,
            _thread_bound: PhantomData,
        })
    }

    /// Also watch a second directory with the same watch.
    pub(crate) fn add(&mut self, dir: &Path) -> io::Result<()> {
        match &mut self.backend {
            Backend::Dnotify { dirs, .. } => {
                dirs.push(dn::watch(dir)?);
                Ok(())
            }
            Backend::Inotify(inotify) => inotify
                .add_watch(dir, INOTIFY_MASK)
                .map(drop)
                .map_err(io::Error::from),
        }
    }

    /// Block until at least one change (`Interrupted` if a signal came first).
    pub(crate) fn wait(&self) -> io::Result<()> {
        match &self.backend {
            Backend::Dnotify { seen, .. } => {
                if sleep_for_signal(seen, None) {
                    Ok(())
                } else {
                    Err(io::Error::from(io::ErrorKind::Interrupted))
                }
            }
            Backend::Inotify(inotify) => inotify.read_events().map(|_| ()).map_err(io::Error::from),
        }
    }

    /// Block until a change or until `limit` passes, for the rare waits whose end no file
    /// system event announces (a process dying while it holds a lock). `true` if something
    /// changed (with dnotify: if any wake signal came).
    pub(crate) fn wait_timeout(&self, limit: Duration) -> io::Result<bool> {
        let inotify = match &self.backend {
            Backend::Dnotify { seen, .. } => return Ok(sleep_for_signal(seen, Some(limit))),
            Backend::Inotify(inotify) => inotify,
        };
        match self.readable_within(inotify, limit)? {
            true => self.wait().map(|()| true),
            false => Ok(false),
        }
    }

    /// Stop waiting but keep the kernel's watch alive in the returned descriptor (a second
    /// reference to an inotify instance; `None` for dnotify): closing the last reference waits
    /// for the kernel to retire the watch (module docs), so a caller with somewhere to be
    /// drops it later, off that path.
    pub(crate) fn retire(self) -> io::Result<Option<OwnedFd>> {
        use std::os::fd::AsFd;
        match &self.backend {
            Backend::Dnotify { .. } => Ok(None),
            Backend::Inotify(inotify) => inotify.as_fd().try_clone_to_owned().map(Some),
        }
    }

    /// Block until a change, until `fd` is readable (a process's pidfd: it exited), until
    /// `limit` passes (`None`: no limit), or until a signal comes: whichever is first. Says
    /// nothing of which: the caller looks again at what it waits for.
    pub(crate) fn wait_or_ready(
        &self,
        fd: std::os::fd::BorrowedFd<'_>,
        limit: Option<Duration>,
    ) -> io::Result<()> {
        use std::os::fd::AsFd;
        let inotify = match &self.backend {
            Backend::Dnotify { seen, .. } => {
                sleep_for_signal_or(seen, limit, Some(fd));
                return Ok(());
            }
            Backend::Inotify(inotify) => inotify,
        };
        let mut fds = [
            nix::poll::PollFd::new(inotify.as_fd(), nix::poll::PollFlags::POLLIN),
            nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN),
        ];
        let timeout = match limit {
            None => nix::poll::PollTimeout::NONE,
            Some(t) => nix::poll::PollTimeout::try_from(t).unwrap_or(nix::poll::PollTimeout::MAX),
        };
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(io::Error::from(e)),
        }
        let changed = fds[0]
            .revents()
            .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN));
        if changed {
            inotify.read_events().map_err(io::Error::from)?;
        }
        Ok(())
    }

    /// Which interface watches (for `fsync doctor`).
    pub(crate) fn interface(&self) -> &'static str {
        match self.backend {
            Backend::Dnotify { .. } => "dnotify",
            Backend::Inotify(_) => "inotify",
        }
    }
}

/// Sleep until a wake signal is handled (or `limit` passes), unless one was handled since
/// `seen` last moved; `true` if one was. The signal is blocked from the look at the count to
/// the sleep, so none slips in between.
///
/// Raw libc rather than nix's `SigSet`, `pthread_sigmask` and `ppoll`: the wake signal is a
/// real-time one, which nix 0.29's `Signal` (and so every safe `SigSet` method) cannot name.
fn sleep_for_signal(seen: &Cell<u64>, limit: Option<Duration>) -> bool {
    sleep_for_signal_or(seen, limit, None)
}

/// [`sleep_for_signal`], also ending when `fd` becomes readable.
fn sleep_for_signal_or(
    seen: &Cell<u64>,
    limit: Option<Duration>,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> bool {
    let mut fds: Vec<libc::pollfd> = fd
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .into_iter()
        .collect();
    let sig = crate::platform::signal::wake_signal();
    // SAFETY: sigset and sigmask calls on sets we own; ppoll on `fds`, which we own (its
    // descriptor borrowed for the call), or on none, which only sleeps.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut block);
        libc::sigaddset(&raw mut block, sig);
        let sigio = crate::platform::signal::sigio_wakes();
        if sigio {
            libc::sigaddset(&raw mut block, libc::SIGIO);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &raw const block, &raw mut old);
        if crate::platform::signal::wakes() == seen.get() {
            let mut during = old;
            libc::sigdelset(&raw mut during, sig);
            if sigio {
                libc::sigdelset(&raw mut during, libc::SIGIO);
            }
            let ts = limit.map(|d| libc::timespec {
                tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: libc::c_long::from(d.subsec_nanos()),
            });
            let ts_ptr = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
            let n = fds.len() as libc::nfds_t;
            libc::ppoll(fds.as_mut_ptr(), n, ts_ptr, &raw const during);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, std::ptr::null_mut());
    }
    let now = crate::platform::signal::wakes();
    now != seen.replace(now)
}

impl DirWatch {
    /// A watch like [`new`](Self::new)'s, always by inotify: one that
    /// [`add_closes`](Self::add_closes) can extend.
    pub(crate) fn by_inotify(dir: &Path) -> io::Result<DirWatch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        inotify
            .add_watch(dir, INOTIFY_MASK)
            .map_err(io::Error::from)?;
        Ok(DirWatch {
            backend: Backend::Inotify(inotify),
            _thread_bound: PhantomData,
        })
    }

    /// Also watch `dir` for its files being closed after writing, at their last close (when
    /// their owner exits, however it dies): only an inotify watch can
    /// ([`by_inotify`](Self::by_inotify)). Opening and reading do not wake it, nor does a
    /// close by a reader.
    pub(crate) fn add_closes(&mut self, dir: &Path) -> io::Result<()> {
        match &mut self.backend {
            Backend::Dnotify { .. } => Err(io::Error::from(io::ErrorKind::Unsupported)),
            Backend::Inotify(inotify) => {
                let mask = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_DELETE_SELF;
                inotify
                    .add_watch(dir, mask)
                    .map(drop)
                    .map_err(io::Error::from)
            }
        }
    }

    /// Block until a change (until `limit` passes at most; `None`: no limit), and name the
    /// files closed after writing among the changes (those of a directory given to
    /// [`add_closes`](Self::add_closes); a dnotify watch names none). The kernel reports a
    /// close before it releases the file's locks: a caller that wants the lock free waits
    /// for it.
    pub(crate) fn wait_closes(&self, limit: Option<Duration>) -> io::Result<Vec<OsString>> {
        let inotify = match (&self.backend, limit) {
            (Backend::Dnotify { .. }, Some(limit)) => {
                return self.wait_timeout(limit).map(|_| vec![]);
            }
            (Backend::Dnotify { .. }, None) => return self.wait().map(|()| vec![]),
            (Backend::Inotify(inotify), _) => inotify,
        };
        if let Some(limit) = limit
            && !self.readable_within(inotify, limit)?
        {
            return Ok(vec![]);
        }
        let events = inotify.read_events().map_err(io::Error::from)?;
        Ok(events
            .into_iter()
            .filter(|e| e.mask.contains(AddWatchFlags::IN_CLOSE_WRITE))
            .filter_map(|e| e.name)
            .collect())
    }

    /// Whether the inotify instance has events within `limit` (`false` on a signal).
    fn readable_within(&self, inotify: &Inotify, limit: Duration) -> io::Result<bool> {
        use std::os::fd::AsFd;
        let mut fds = [nix::poll::PollFd::new(
            inotify.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = nix::poll::PollTimeout::try_from(limit.as_millis().min(60_000) as i32)
            .unwrap_or(nix::poll::PollTimeout::MAX);
        match nix::poll::poll(&mut fds, ms) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(io::Error::from(e)),
        }
    }

    /// Block until a file of the watched directory whose name starts with `prefix` is closed,
    /// or the directory goes, or `limit` passes (`None`: no limit): `false` for the limit.
    /// `Interrupted` if a signal comes first. Closes of other names, and of the directory
    /// itself (anyone who may read it can open and close it in a loop), wake nobody: whoever
    /// waits for lock files to be let go watches only what their holders can do.
    pub(crate) fn wait_closing(&self, prefix: &str, limit: Option<Duration>) -> io::Result<bool> {
        let Backend::Inotify(inotify) = &self.backend else {
            return match limit {
                Some(limit) => self.wait_timeout(limit),
                None => self.wait().map(|()| true),
            };
        };
        let end = limit.map(|l| std::time::Instant::now() + l);
        loop {
            if let Some(end) = end {
                let left = end.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() || !self.readable_within(inotify, left)? {
                    return Ok(false);
                }
            }
            let events = inotify.read_events().map_err(io::Error::from)?;
            let ends = AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_IGNORED
                | AddWatchFlags::IN_Q_OVERFLOW;
            let woken = events.iter().any(|e| {
                e.mask.intersects(ends)
                    || e.name.as_ref().is_some_and(|n| {
                        std::os::unix::ffi::OsStrExt::as_bytes(n.as_os_str())
                            .starts_with(prefix.as_bytes())
                    })
            });
            if woken {
                return Ok(true);
            }
        }
    }

    /// A watch for files in `dir` being closed (after writing or not). A process's open files
    /// are closed when it exits, however it dies, so this sees lock holders go away.
    pub(crate) fn closes(dir: &Path) -> io::Result<DirWatch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        let mask = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CLOSE_NOWRITE
            | AddWatchFlags::IN_DELETE_SELF;
        inotify.add_watch(dir, mask).map_err(io::Error::from)?;
        Ok(DirWatch {
            backend: Backend::Inotify(inotify),
            _thread_bound: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A close watch wakes only for the names asked: not for the directory itself opened and
    /// closed, nor for another file; then for a file of the name, read-only too.
    #[test]
    fn a_close_watch_wakes_only_for_the_names_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("queue"), b"").unwrap();
        std::fs::write(dir.path().join("slot.0"), b"").unwrap();
        let watch = DirWatch::closes(dir.path()).unwrap();
        for _ in 0..3 {
            drop(std::fs::File::open(dir.path()).unwrap());
            drop(std::fs::File::open(dir.path().join("queue")).unwrap());
        }
        let limit = Some(Duration::from_millis(100));
        assert!(
            !watch.wait_closing("slot.", limit).unwrap(),
            "woken by others"
        );
        drop(std::fs::File::open(dir.path().join("slot.0")).unwrap());
        assert!(
            watch.wait_closing("slot.", limit).unwrap(),
            "not woken by a slot"
        );
    }

    /// A change between making the watch and waiting (while the caller checks) is not lost.
    #[test]
    fn a_change_before_the_wait_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DirWatch::new(dir.path()).unwrap();
        std::fs::write(dir.path().join("x"), b"").unwrap();
        assert!(watch.wait_timeout(Duration::from_secs(30)).unwrap());
    }

    /// Another thread's change wakes the thread that made the watch.
    #[test]
    fn a_change_by_another_thread_wakes_the_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = DirWatch::new(dir.path()).unwrap();
        let second = tempfile::tempdir().unwrap();
        watch.add(second.path()).unwrap();
        // (No "nothing yet" check here: the count is the process's, and tests running at the
        // same time move it too; a wake without a change is allowed, callers look again.)
        let path = second.path().join("y");
        let writer = std::thread::spawn(move || {
            // Most likely after the waiter blocked; before is fine too (the count moved).
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(path, b"").unwrap();
        });
        while watch.wait().is_err() {} // Interrupted: a stray wake signal, wait again
        writer.join().unwrap();
        assert_eq!(watch.interface(), "dnotify");
    }
}
