/*!
Working inside a directory that other users may share: every entry is reached from an open
descriptor of its directory, one name at a time, never through a symbolic link.

A primitive's directory (a mailbox, a semaphore, a group) may have been created by another user
first, in a world-writable place such as `/tmp`. Whoever owns a directory can replace any entry in
it at any moment: a file by a symbolic link to a victim's file, a subdirectory by a link to the
victim's directory, a message by a FIFO that blocks whoever opens it. So fsync opens the
directory once ([`Dir::top`]: the path the user gave, whose final symbolic link is followed only
if the caller or root owns it) and then reaches each entry with the `*at`
calls relative to that descriptor and `O_NOFOLLOW`, so a link is never followed and a renamed
directory cannot redirect us. Files are opened with `O_NONBLOCK` (a FIFO or a device cannot hang
the open) and their type is checked on the open descriptor before anything is read or written.

A name is any bytes (`impl AsRef<OsStr>`), as file names are: the lock a user names, and so
its record beside it, need not be UTF-8.

What is trusted is a separate question, answered by [`trusted_owner`]: fsync writes into a file
it did not just create (a holder record), and believes what a file says (a holder's pid), only
when the file belongs to the caller or to root. Files any participant writes by protocol (a
mailbox's `seq`) only need to be regular files with one link: writing them cannot reach anyone
else's data.
*/

use std::{
    ffi::OsStr,
    fs::File,
    io,
    os::fd::{AsFd, AsRawFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
    time::Duration,
};

use nix::{
    fcntl::{self, OFlag},
    libc,
    sys::stat::{self, FileStat, Mode, SFlag},
    unistd::{self, UnlinkatFlags},
};

use crate::error::{Error, ErrorKind, Result};

/// The kind of entry a protocol expects at a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
}

/// What kind of thing a stat says an entry is, in words for error messages.
pub(crate) fn describe(st: &FileStat) -> &'static str {
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFLNK => "a symbolic link",
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        _ => "of an unknown type",
    }
}

/// `openat(2)` of `name` in `dir` (`None`: `open(2)` of a path), retried when interrupted.
/// Through rustix, whose call returns the new descriptor already owned: no step holds a bare
/// number that could leak or be closed twice.
fn open(
    dir: Option<&Dir>,
    name: impl AsRef<Path>,
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let flags = rustix::fs::OFlags::from_bits_retain(flags.bits().cast_unsigned());
    let mode = rustix::fs::Mode::from_bits_retain(mode.bits());
    let name = name.as_ref();
    crate::platform::retrying(|| {
        match dir {
            Some(dir) => rustix::fs::openat(&dir.fd, name, flags, mode),
            None => rustix::fs::open(name, flags, mode),
        }
        .map_err(io::Error::from)
    })
}

fn is_link(st: &FileStat) -> bool {
    st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits()
}

pub(crate) fn is_kind(st: &FileStat, kind: Kind) -> bool {
    let t = st.st_mode & SFlag::S_IFMT.bits();
    match kind {
        Kind::File => t == SFlag::S_IFREG.bits(),
        Kind::Dir => t == SFlag::S_IFDIR.bits(),
    }
}

/// Whether the caller may remove an entry owned by `entry_uid` from a directory of mode
/// `dir_mode` owned by `dir_uid`: in a sticky directory only its own or the directory owner's,
/// the rule the kernel applies to everyone but root, applied to root too.
pub(crate) fn sticky_allows(dir_mode: u32, dir_uid: u32, entry_uid: u32) -> bool {
    let me = unistd::geteuid().as_raw();
    dir_mode & Mode::S_ISVTX.bits() == 0 || entry_uid == me || dir_uid == me
}

/// The error for an entry [`sticky_allows`] keeps.
pub(crate) fn sticky_refusal(path: &Path, entry_uid: u32) -> Error {
    Error::new(
        path,
        ErrorKind::PermissionDenied,
        format!("belongs to another user (uid {entry_uid}) in a sticky directory; not removing it"),
    )
}

/// Whether deletion may remove the entry `name` (status `st`) of `dir` (status `parent`): a
/// regular file with one link (a hard link to someone's file is not ours to drop), and in a
/// sticky directory the caller's or the directory owner's, the rule the kernel applies to
/// everyone but root, applied to root too.
pub(crate) fn removable(
    dir: &Dir,
    name: impl AsRef<OsStr>,
    st: &FileStat,
    parent: &FileStat,
) -> Result<()> {
    let name = name.as_ref();
    let refuse = |kind, why: String| Err(Error::new(&dir.join(name), kind, why));
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    if kind != SFlag::S_IFREG {
        let what = describe(st);
        return refuse(ErrorKind::WrongKind, format!("is {what}; not removing it"));
    }
    if st.st_nlink != 1 {
        return refuse(
            ErrorKind::WrongKind,
            "has other links; not removing it".to_string(),
        );
    }
    if !sticky_allows(parent.st_mode, parent.st_uid, st.st_uid) {
        return Err(sticky_refusal(&dir.join(name), st.st_uid));
    }
    Ok(())
}

// Who may be trusted, and which directories are shared: asked of files as of directories.
pub(crate) use super::fs::{shared_sticky, trusted_owner};

/// An open directory whose entries are reached without following links (module docs).
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// How long [`Dir::top`] and [`Dir::create_sub`] wait, each time, in milliseconds, for a directory
/// they were told exists and then could not find (see there): 63 ms in all.
const MKDIR_RACE_WAITS: [u64; 6] = [1, 2, 4, 8, 16, 32];

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC)
    .union(OFlag::O_NOCTTY);

/// For a lock on the directory itself (`flock(2)`: a staged batch its poster holds).
impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Dir {
    /// The directory at `path`, created (mode 0777 less the umask) if missing and `create`;
    /// `None` if missing otherwise. A final symbolic link is followed only if it belongs to
    /// the caller or root; anything but a directory is an error naming `path`.
    ///
    /// The directories above `path` are the caller's choice and are followed as given; the
    /// last component is reached from an open descriptor of its parent, never by its path
    /// again after a check: another user who swaps it for a link in a loop finds no window
    /// between the look and the open.
    pub(crate) fn top(path: &Path, create: bool, what: &str) -> Result<Option<Dir>> {
        // Usually it is there and is no link: then one open does (one round trip to the server
        // on a network file system, where the way below costs three); anything else takes
        // the long way, which also finds the right error.
        let whole = open(None, path, DIR_FLAGS | OFlag::O_NOFOLLOW, Mode::empty());
        let e = match whole {
            Ok(fd) => return Ok(Some(Dir::own(fd, path))),
            Err(e) => e,
        };
        // Only a name that is missing, a link or no directory needs the long way; any other
        // failure (permission, I/O, a network file system's server gone) is the answer, and
        // asking again would only wait on that server once more.
        if !matches!(
            e.raw_os_error(),
            Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
        ) {
            return Err(super::fs::explain_open_error(path, what, e));
        }
        let Some(name) = path.file_name() else {
            // `/`, `..` and the like: wholly the caller's choice.
            return match e.raw_os_error() {
                Some(libc::ENOENT) if !create => Ok(None),
                _ => Err(super::fs::explain_open_error(path, what, e)),
            };
        };
        let parent = super::fs::parent_dir(path);
        let parent = if let Ok(fd) = open(None, parent, DIR_FLAGS, Mode::empty()) {
            Dir::own(fd, parent)
        } else {
            super::fs::check_parent(path)?;
            return Err(super::fs::explain_open_error(path, what, e));
        };
        parent.child_top(name, path, create, what)
    }

    /// The directory at `path`, created if missing: [`top`](Self::top) with `create`, which
    /// never answers `None` then (a missing name is made, a dangling link is an error).
    pub(crate) fn create_top(path: &Path, what: &str) -> Result<Dir> {
        let missing = || Error::new(path, ErrorKind::NotFound, format!("{what}: not made"));
        Dir::top(path, true, what)?.ok_or_else(missing)
    }

    /// [`top`](Self::top)'s long way: `name` in this (parent) directory, shown as `path`.
    fn child_top(
        &self,
        name: impl AsRef<OsStr>,
        path: &Path,
        create: bool,
        what: &str,
    ) -> Result<Option<Dir>> {
        let name = name.as_ref();
        let mkdir = || match stat::mkdirat(self.raw(), name, Mode::from_bits_truncate(0o777)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
            Err(e) => Err(super::fs::explain_open_error(path, what, e.into())),
        };
        if create {
            mkdir()?;
        }
        let open_dir = |flags: OFlag| open(Some(self), name, DIR_FLAGS | flags, Mode::empty());
        let not_dir = || Error::new(path, ErrorKind::WrongKind, "exists and is not a directory");
        // Another user swapping the name between a directory and a link in a loop can make
        // each look disagree with the open before it: a few tries, then say so.
        let mut missing = 0;
        for _ in 0..3 + MKDIR_RACE_WAITS.len() {
            let e = match open_dir(OFlag::O_NOFOLLOW) {
                Ok(fd) => return Ok(Some(Dir::own(fd, path))),
                Err(e) => e,
            };
            match e.raw_os_error() {
                Some(libc::ENOENT) if !create => return Ok(None),
                // Told it exists, then that it does not: removed since (make it again), or,
                // on GlusterFS, another client's mkdir of the same name half-way, which
                // answers our mkdir EEXIST before a lookup finds it on every brick. Nothing
                // tells us when it is done: a few short waits, a few milliseconds in all.
                Some(libc::ENOENT) if missing < MKDIR_RACE_WAITS.len() => {
                    std::thread::sleep(Duration::from_millis(MKDIR_RACE_WAITS[missing]));
                    missing += 1;
                    mkdir()?;
                    continue;
                }
                // A link says either, with O_DIRECTORY: the status below tells.
                Some(libc::ENOTDIR | libc::ELOOP) => {}
                _ => return Err(super::fs::explain_open_error(path, what, e)),
            }
            // A symbolic link: followed only if we or root own it. In a shared world-writable
            // directory another user could otherwise make us write our files (message
            // payloads, registrations) into a directory of theirs or of a victim's choosing,
            // which the kernel prevents only where `fs.protected_symlinks` is set. Only its
            // owner (or the directory's) can replace a link we trust, so what we open next
            // is what we checked.
            let link = match self.stat(name) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(super::fs::explain_open_error(path, what, e)),
            };
            if !is_link(&link) {
                if !is_kind(&link, Kind::Dir) {
                    return Err(not_dir());
                }
                continue; // replaced since the open
            }
            if !trusted_owner(link.st_uid) {
                return Err(Error::new(
                    path,
                    ErrorKind::PermissionDenied,
                    format!(
                        "is a symbolic link owned by another user (uid {}); not following it",
                        link.st_uid
                    ),
                ));
            }
            return match open_dir(OFlag::empty()) {
                Ok(fd) => Ok(Some(Dir::own(fd, path))),
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(not_dir()),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => match create {
                    false => Ok(None),
                    true => Err(not_dir()), // a dangling link: its target is never created
                },
                Err(e) => Err(super::fs::explain_open_error(path, what, e)),
            };
        }
        Err(Error::new(
            path,
            ErrorKind::PermissionDenied,
            "is being replaced while we open it (another user swaps it); not using it",
        ))
    }

    /// The directory `fd`, which `open(2)` or `openat(2)` has just returned, shown as `path`.
    fn own(fd: OwnedFd, path: &Path) -> Dir {
        Dir {
            fd,
            path: path.to_path_buf(),
        }
    }

    /// A second handle on the same directory.
    pub(crate) fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// The path the user named, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of an entry, for messages.
    pub(crate) fn join(&self, name: impl AsRef<OsStr>) -> PathBuf {
        let name = name.as_ref();
        self.path.join(name)
    }

    /// A path that names exactly this directory (the one we opened, not whatever its name
    /// means now), for interfaces that take paths: change notification, nested locks.
    pub(crate) fn pinned(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// A pinned path of an entry (see [`pinned`](Self::pinned)).
    pub(crate) fn pinned_join(&self, name: &str) -> PathBuf {
        self.pinned().join(name)
    }

    fn raw(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    /// The directory's own status (its device and inode identify it).
    pub(crate) fn status(&self) -> io::Result<FileStat> {
        stat::fstat(self.fd.as_raw_fd()).map_err(io::Error::from)
    }

    /// The subdirectory `name`, created mode 0700 if missing, for the caller's private state:
    /// `None` unless it is a directory (not a link) that the caller owns and nobody else may
    /// enter or write (mode 0700 or less), as checked on the open descriptor.
    pub(crate) fn private_sub(&self, name: &str) -> Option<Dir> {
        match stat::mkdirat(self.raw(), name, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(_) => return None,
        }
        let sub = self.open_sub(name).ok()??;
        let st = sub.status().ok()?;
        (st.st_uid == unistd::geteuid().as_raw() && st.st_mode & 0o077 == 0).then_some(sub)
    }

    /// An entry's status, not following a link.
    pub(crate) fn stat(&self, name: &(impl AsRef<OsStr> + ?Sized)) -> io::Result<FileStat> {
        crate::platform::retrying(|| {
            stat::fstatat(
                self.raw(),
                name.as_ref(),
                fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(io::Error::from)
        })
    }

    /// The device and inode `name` leads to, following a symbolic link (as opening it would),
    /// without fetching its attributes again ([`super::fs::identity_at`]).
    pub(crate) fn identity_following(&self, name: impl AsRef<OsStr>) -> io::Result<(u64, u64)> {
        let name = name.as_ref();
        super::fs::identity_at(Some(self.fd.as_fd()), Path::new(name))
    }

    /// The subdirectory `name`; `None` if it is missing. A link, or anything but a directory,
    /// is an error naming it.
    pub(crate) fn open_sub(&self, name: &str) -> Result<Option<Dir>> {
        match self.open_dir(name) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(self.sub_error(name, e)),
        }
    }

    /// The subdirectory `name`, created (mode 0777 less the umask) if missing. Errors as
    /// [`open_sub`](Self::open_sub)'s.
    pub(crate) fn create_sub(&self, name: &str) -> Result<Dir> {
        let mut waits = MKDIR_RACE_WAITS.iter();
        loop {
            match stat::mkdirat(self.raw(), name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                Err(e) => {
                    let what = "cannot create directory";
                    return Err(super::fs::explain_open_error(
                        &self.join(name),
                        what,
                        e.into(),
                    ));
                }
            }
            // Made, or told it exists, and then not found: as in `child_top`, removed since
            // or another GlusterFS client's mkdir half-way.
            match (self.open_dir(name), waits.next()) {
                (Ok(dir), _) => return Ok(dir),
                (Err(e), Some(wait)) if e.raw_os_error() == Some(libc::ENOENT) => {
                    std::thread::sleep(Duration::from_millis(*wait));
                }
                (Err(e), _) => return Err(self.sub_error(name, e)),
            }
        }
    }

    /// Open the directory `name` here, never through a link.
    fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let fd = open(
            Some(self),
            name,
            DIR_FLAGS | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )?;
        Ok(Dir::own(fd, &self.join(name)))
    }

    /// The error for a subdirectory `name` that [`open_dir`](Self::open_dir) could not open.
    fn sub_error(&self, name: &str, e: io::Error) -> Error {
        match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => self.wrong_kind(name, Kind::Dir),
            _ => Error::io(&self.join(name), "cannot open directory", e),
        }
    }

    /// The error for an entry that is not the kind the protocol puts there.
    pub(crate) fn wrong_kind(&self, name: impl AsRef<OsStr>, want: Kind) -> Error {
        let name = name.as_ref();
        let what = self.stat(name).map_or("not usable", |st| describe(&st));
        let want = match want {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
        };
        Error::new(
            &self.join(name),
            ErrorKind::WrongKind,
            format!("is {what}, not {want} fsync made; not using it"),
        )
    }

    /// Open the existing regular file `name` (read-only, or read-write with `write`), never
    /// through a link and never blocking on a FIFO; `Ok(None)` if it does not exist.
    pub(crate) fn open(&self, name: impl AsRef<OsStr>, write: bool) -> Result<Option<File>> {
        let name = name.as_ref();
        Ok(self.open_stat(name, write)?.map(|(f, _)| f))
    }

    /// [`open`](Self::open), with the file's status.
    pub(crate) fn open_stat(
        &self,
        name: impl AsRef<OsStr>,
        write: bool,
    ) -> Result<Option<(File, FileStat)>> {
        let name = name.as_ref();
        let acc = if write {
            OFlag::O_RDWR
        } else {
            OFlag::O_RDONLY
        };
        match self.openat(name, acc, Mode::empty()) {
            Ok(f) => self.checked_stat(name, f).map(Some),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                Err(self.wrong_kind(name, Kind::File))
            }
            Err(e) => Err(super::fs::explain_open_error(
                &self.join(name),
                "cannot open",
                e,
            )),
        }
    }

    /// Open `name` read-write, creating it if missing: for lock files inside a primitive's
    /// directory. Read-only where we may not write. Its mode, at creation and fitted after
    /// when it is ours, lets only those who may write this directory (or a subdirectory) open
    /// it; one made before the directory was shared is named in the error of those it keeps
    /// out: see [`super::fs`], *Who may lock an internal lock file*.
    pub(crate) fn open_or_create(&self, name: impl AsRef<OsStr>) -> Result<File> {
        let name = name.as_ref();
        let opened = super::fs::open_or_create_with(
            |flags, mode| {
                self.openat(
                    name,
                    OFlag::from_bits_truncate(flags),
                    Mode::from_bits_truncate(mode),
                )
            },
            || self.participants(),
        );
        match opened {
            Ok((f, _)) => {
                let (f, st) = self.checked_stat(name, f)?;
                self.fit(name, &f, &st);
                Ok(f)
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                Err(self.wrong_kind(name, Kind::File))
            }
            Err(e) => {
                let denied = e.raw_os_error() == Some(libc::EACCES);
                let unshared = denied.then(|| self.unshared(name, super::fs::OPEN));
                let unshared = unshared.flatten();
                Err(unshared.unwrap_or_else(|| {
                    super::fs::explain_open_error(&self.join(name), "cannot create lock file", e)
                }))
            }
        }
    }

    /// Fit the mode of the internal lock file `name`, opened here (status `st`, taken after
    /// the open), to the rule, if it is ours and no other name reaches it
    /// ([`super::fs::fit`]).
    pub(crate) fn fit(&self, name: impl AsRef<OsStr>, file: &File, st: &FileStat) {
        let name = name.as_ref();
        super::fs::fit(
            file,
            (st.st_mode, st.st_uid),
            || self.status().map_or(0o777, |st| st.st_mode),
            || self.participants(),
            || self.sole_link(name, file, Some(st)).unwrap_or(false),
        );
    }

    /// [`super::fs::unshared`] for the entry `name`, which the caller could not open (or
    /// write, opened read-only: `what` says which).
    pub(crate) fn unshared(&self, name: impl AsRef<OsStr>, what: &str) -> Option<Error> {
        let name = name.as_ref();
        use rustix::fs::{Access, AtFlags};
        let st = self.stat(name).ok().filter(|st| is_kind(st, Kind::File))?;
        let dir = self.status().ok()?;
        let writable = rustix::fs::accessat(&self.fd, ".", Access::WRITE_OK, AtFlags::EACCESS);
        let st = (st.st_mode, st.st_uid);
        super::fs::unshared(&self.join(name), what, st, dir.st_mode, writable.is_ok())
    }

    /// The union of the modes of this directory and of its subdirectories (not through links):
    /// the directories the primitive's participants write. What cannot be read counts as
    /// writable by everyone, so that doubt never takes access away.
    fn participants(&self) -> u32 {
        let Ok(st) = stat::fstat(self.fd.as_raw_fd()) else {
            return 0o777;
        };
        let mut modes = st.st_mode;
        for (name, kind) in self.entries().unwrap_or_default() {
            if kind == Some(Kind::File) {
                continue;
            }
            match self.stat(&name) {
                Ok(st) if is_kind(&st, Kind::Dir) => modes |= st.st_mode,
                Ok(_) => {}
                Err(_) => modes |= 0o777,
            }
        }
        modes
    }

    /// Open the regular file `name` to append to it, creating it (mode less the umask) if
    /// missing; whether it was created. Never through a link, never a FIFO.
    pub(crate) fn open_append(&self, name: &str, mode: u32) -> Result<(File, bool)> {
        let append = OFlag::O_WRONLY | OFlag::O_APPEND;
        let mode = Mode::from_bits_truncate(mode);
        let (file, new) = match self.openat(name, append, mode) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => (
                self.openat(name, append | OFlag::O_CREAT | OFlag::O_EXCL, mode),
                true,
            ),
            opened => (opened, false),
        };
        let file =
            file.map_err(|e| super::fs::explain_open_error(&self.join(name), "cannot open", e))?;
        Ok((self.checked_stat(name, file)?.0, new))
    }

    /// Rename `from` to `to` in this directory unless `to` exists (`EEXIST` then): without a
    /// new inode or link, where the file system can (`renameat2`'s `RENAME_NOREPLACE`);
    /// elsewhere as a link and an unlink.
    pub(crate) fn rename_new(&self, from: &str, to: &str) -> io::Result<()> {
        let renamed = fcntl::renameat2(
            self.raw(),
            from,
            self.raw(),
            to,
            fcntl::RenameFlags::RENAME_NOREPLACE,
        );
        match renamed {
            Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {
                self.link(from, to)?;
                self.unlink_any(from)
            }
            other => other.map_err(io::Error::from),
        }
    }

    /// Make the directory's entries durable (`fsync(2)` of the directory).
    pub(crate) fn sync(&self) -> io::Result<()> {
        unistd::fsync(self.fd.as_raw_fd()).map_err(io::Error::from)
    }

    /// Make everything written to the file system this directory is on durable: every file's
    /// data and every directory's entries (`syncfs(2)`, one call for any number of files).
    pub(crate) fn sync_fs(&self) -> io::Result<()> {
        rustix::fs::syncfs(&self.fd).map_err(io::Error::from)
    }

    /// Make this directory's own entry durable: `fsync(2)` of its parent, reached as `..` from
    /// this descriptor (the directory it is in now, whatever its path names).
    pub(crate) fn sync_parent(&self) -> io::Result<()> {
        let parent = open(Some(self), "..", DIR_FLAGS, Mode::empty())?;
        Dir::own(parent, Path::new("")).sync()
    }

    /// Create `name` exclusively (mode less the umask), for writing.
    pub(crate) fn create_new(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        let name = name.as_ref();
        self.openat(
            name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::from_bits_truncate(mode),
        )
    }

    fn openat(&self, name: impl AsRef<OsStr>, flags: OFlag, mode: Mode) -> io::Result<File> {
        let name = name.as_ref();
        let flags =
            flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
        match flags.contains(OFlag::O_CREAT) && !flags.contains(OFlag::O_EXCL) {
            // Two hosts creating the file at once: "it exists" means open it.
            true => crate::platform::creating(|| open(Some(self), name, flags, mode)),
            false => open(Some(self), name, flags, mode),
        }
        .map(File::from)
    }

    /// Accept an opened file only if it is a regular file, with its status.
    fn checked_stat(&self, name: impl AsRef<OsStr>, f: File) -> Result<(File, FileStat)> {
        let name = name.as_ref();
        let st = stat::fstat(f.as_raw_fd())
            .map_err(|e| Error::io(&self.join(name), "cannot stat", e.into()))?;
        if !is_kind(&st, Kind::File) {
            return Err(Error::new(
                &self.join(name),
                ErrorKind::WrongKind,
                format!(
                    "is {}, not a regular file fsync made; not using it",
                    describe(&st)
                ),
            ));
        }
        Ok((f, st))
    }

    /// Whether `file`, opened from this directory as `name`, can be reached by no other name:
    /// what fsync must know before it writes into a file it did not just create, or hands its
    /// bytes on (a message). A count of one link is not enough, since another user can add a
    /// hard link to a victim's file at `name` and remove it again right after our open (where
    /// `fs.protected_hardlinks` is off): the count, taken after the open, must be one, and the
    /// entry we opened must still be linked afterwards, in this directory, as `name` (the
    /// kernel's path of our descriptor, which it marks deleted once that entry is unlinked).
    /// Then at the time of the count our entry was the file's only link: it is no victim's,
    /// who would still have their own name for it. The kernel lowers the count before it marks
    /// an unlinked entry deleted, so an unlink under way when we count must be let finish
    /// before we ask ([`settle`]). Without /proc, where the kernel cannot be asked, the count
    /// and a lookup of `name` must agree.
    /// `st`, where given, is the file's status taken on the descriptor after the open (which
    /// saves a round trip to the server on a network file system).
    pub(crate) fn sole_link(
        &self,
        name: impl AsRef<OsStr>,
        file: &File,
        st: Option<&FileStat>,
    ) -> io::Result<bool> {
        let name = name.as_ref();
        let st = match st {
            Some(st) => *st,
            None => stat::fstat(file.as_raw_fd())?,
        };
        if st.st_nlink != 1 {
            return Ok(false);
        }
        // Where no one but the caller and root may add a name (the directory is theirs and
        // nobody else may write it), no one else can have linked the file here: the count
        // is enough, and the kernel need not be asked (two look-ups in /proc, a few percent
        // of a whole `mutex run`).
        let dir = stat::fstat(self.fd.as_raw_fd())?;
        if trusted_owner(dir.st_uid) && dir.st_mode & 0o022 == 0 {
            return Ok(true);
        }
        settle(&self.fd, name);
        let fd_path = |fd: RawFd| std::fs::read_link(format!("/proc/self/fd/{fd}"));
        match (fd_path(file.as_raw_fd()), fd_path(self.fd.as_raw_fd())) {
            (Ok(f), Ok(d)) => Ok(f == d.join(name)),
            _ => Ok(self.names(name, &st).is_some()),
        }
    }

    /// What `name` here is now, if it is still the file whose status is `st` (the same device
    /// and inode; a lookup that fails is not): for a check that nobody swapped or removed an
    /// entry since we looked at it, or opened it.
    pub(crate) fn names(&self, name: impl AsRef<OsStr>, st: &FileStat) -> Option<FileStat> {
        self.stat(name.as_ref())
            .ok()
            .filter(|now| (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino))
    }

    /// The error for an entry that [`sole_link`](Self::sole_link) refused.
    pub(crate) fn not_sole(&self, name: impl AsRef<OsStr>) -> Error {
        let name = name.as_ref();
        Error::new(
            &self.join(name),
            ErrorKind::WrongKind,
            "has other hard links (or was replaced as it was opened): not a file fsync made; \
             not using it",
        )
    }

    /// `renameat(2)` from here to `to_dir`, retried on `EINTR`.
    pub(crate) fn rename(&self, from: &str, to_dir: &Dir, to: &str) -> io::Result<()> {
        crate::platform::retrying(|| {
            fcntl::renameat(self.raw(), from, to_dir.raw(), to).map_err(io::Error::from)
        })
    }

    /// `linkat(2)` within this directory (never following a link).
    pub(crate) fn link(&self, from: &str, to: &str) -> io::Result<()> {
        crate::platform::retrying(|| {
            unistd::linkat(self.raw(), from, self.raw(), to, fcntl::AtFlags::empty())
                .map_err(io::Error::from)
        })
    }

    /// Unlink the entry `name` if it is a regular file, as the protocol left it; anything
    /// else (a link, a FIFO, a directory someone put there) is left alone and reported.
    pub(crate) fn unlink_file(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        let st = self.stat(name)?;
        if !is_kind(&st, Kind::File) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("is {}, not a regular file; not removing it", describe(&st)),
            ));
        }
        self.unlink_any(name)
    }

    /// Unlink `name` whatever it is (a registration fsync itself made and still holds).
    pub(crate) fn unlink_any(&self, name: &(impl AsRef<OsStr> + ?Sized)) -> io::Result<()> {
        crate::platform::retrying(|| {
            unistd::unlinkat(self.raw(), name.as_ref(), UnlinkatFlags::NoRemoveDir)
                .map_err(io::Error::from)
        })
    }

    /// Remove this directory, if it is empty and its name (the path it was opened by) still
    /// names it: never another directory put there since.
    pub(crate) fn remove_self(&self) -> io::Result<()> {
        let (Some(name), Some(parent)) = (self.path.file_name(), self.path.parent()) else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let parent = Dir::own(open(None, parent, DIR_FLAGS, Mode::empty())?, Path::new(""));
        let me = stat::fstat(self.fd.as_raw_fd())?;
        let there = parent.stat(name)?;
        if (there.st_dev, there.st_ino) != (me.st_dev, me.st_ino) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "names another directory now; not removing it",
            ));
        }
        let above = stat::fstat(parent.fd.as_raw_fd())?;
        if !sticky_allows(above.st_mode, above.st_uid, there.st_uid) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        parent.rmdir(name)
    }

    /// Remove the empty subdirectory `name`.
    pub(crate) fn rmdir(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        crate::platform::retrying(|| {
            unistd::unlinkat(self.raw(), name, UnlinkatFlags::RemoveDir).map_err(io::Error::from)
        })
    }

    /// The names in the directory (not `.` and `..`), with their type where the file system
    /// says it without a stat.
    pub(crate) fn entries(&self) -> io::Result<Vec<(String, Option<Kind>)>> {
        let mut out = Vec::new();
        self.walk(|name, kind| {
            out.push((name.to_string(), kind));
            false
        })?;
        Ok(out)
    }

    /// Whether the name of an entry satisfies `want`, reading the directory no further than
    /// the first that does: a look into a directory of any size that stops at its first
    /// entry of a kind.
    pub(crate) fn any_entry(&self, mut want: impl FnMut(&str) -> bool) -> io::Result<bool> {
        let mut found = false;
        self.walk(|name, _| {
            found = want(name);
            found
        })?;
        Ok(found)
    }

    /// Hand each entry to `each` (as [`entries`](Self::entries) lists them) until it says stop.
    fn walk(&self, mut each: impl FnMut(&str, Option<Kind>) -> bool) -> io::Result<()> {
        let fd = crate::platform::retrying(|| {
            fcntl::openat(self.raw(), ".", DIR_FLAGS, Mode::empty()).map_err(io::Error::from)
        })?;
        let mut d = nix::dir::Dir::from_fd(fd).map_err(io::Error::from)?;
        for entry in d.iter() {
            let entry = entry.map_err(io::Error::from)?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(bytes) else {
                continue; // fsync never makes such names
            };
            let kind = match entry.file_type() {
                Some(nix::dir::Type::File) => Some(Kind::File),
                Some(nix::dir::Type::Directory) => Some(Kind::Dir),
                _ => None,
            };
            if each(name, kind) {
                break;
            }
        }
        Ok(())
    }
}

/// Wait until no unlink, link or rename of an entry of `dir` is under way, so that what the
/// kernel says next of `name` is its state after it (see [`Dir::sole_link`]): the kernel
/// unlinks an entry under the directory's lock, dropping the file's link count first and
/// marking the entry deleted last, and a rename takes that lock before it looks at names. A
/// rename of `name` to itself that may not replace anything changes nothing whatever happens
/// (`EEXIST` where `name` exists, `ENOENT` where it does not); its result is of no interest.
pub(crate) fn settle(dir: impl rustix::fd::AsFd, name: impl rustix::path::Arg + Copy) {
    let _ = rustix::fs::renameat_with(&dir, name, &dir, name, rustix::fs::RenameFlags::NOREPLACE);
}

#[cfg(test)]
mod tests;
