/*!
Change notification with inotify: block until something changes in a directory.

It only sees changes made through this machine's kernel; on network file systems other hosts'
changes are invisible, which is why the wait core also polls there.
*/

use std::{io, path::Path};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// A watch on one directory for entries being created, removed, renamed, written or closed
/// after writing (not opened or read, so that checking a file does not wake us).
pub struct DirWatch {
    inotify: Inotify,
}

impl DirWatch {
    pub fn new(dir: &Path) -> io::Result<DirWatch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_DELETE_SELF;
        inotify.add_watch(dir, mask).map_err(io::Error::from)?;
        Ok(DirWatch { inotify })
    }

    /// Block until at least one change (`Interrupted` if a signal came first).
    pub fn wait(&self) -> io::Result<()> {
        self.inotify
            .read_events()
            .map(|_| ())
            .map_err(io::Error::from)
    }
}

impl DirWatch {
    /// Also watch a second directory with the same descriptor.
    pub fn add(&self, dir: &Path) -> io::Result<()> {
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_CLOSE_WRITE;
        self.inotify
            .add_watch(dir, mask)
            .map(drop)
            .map_err(io::Error::from)
    }

    /// Block until a change or until `limit` passes, for the rare waits whose end no file
    /// system event announces (a process dying while it holds a lock). `true` if something
    /// changed.
    pub fn wait_timeout(&self, limit: std::time::Duration) -> io::Result<bool> {
        use std::os::fd::AsFd;
        let mut fds = [nix::poll::PollFd::new(
            self.inotify.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = nix::poll::PollTimeout::try_from(limit.as_millis().min(60_000) as i32)
            .unwrap_or(nix::poll::PollTimeout::MAX);
        match nix::poll::poll(&mut fds, ms) {
            Ok(n) if n > 0 => self.wait().map(|()| true),
            Ok(_) => Ok(false),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(io::Error::from(e)),
        }
    }
}

impl DirWatch {
    /// A watch for files in `dir` being closed (after writing or not). A process's open files
    /// are closed when it exits, however it dies, so this sees lock holders go away.
    pub fn closes(dir: &Path) -> io::Result<DirWatch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        let mask = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CLOSE_NOWRITE
            | AddWatchFlags::IN_DELETE_SELF;
        inotify.add_watch(dir, mask).map_err(io::Error::from)?;
        Ok(DirWatch { inotify })
    }
}
