/*!
Opening lock files and classifying file systems.

Lock files are opened the way util-linux `flock(1)` opens them: created if missing, never
truncated (a lock file may be someone's data, or Perl's `open ">"` semaphore file), `O_NOCTTY`,
close-on-exec (the mutex clears that flag on purpose when it passes a lock down to a child).

The access mode is what the lock needs ([`Purpose`]). A flock(2) lock on a local file system
needs only read access, so such lock files are opened read-only, as `flock(1)` does: then a lock
file can be a script that is running (a file open for writing cannot be executed: the FLOCKER
idiom of flock(1)'s manual locks the script itself), a directory, or a file an administrator
made read-only in a directory users cannot write. On a network file system flock(2) is emulated
with a POSIX lock, whose exclusive form needs write access, so there the file is reopened
read-write where permitted. An exclusive byte-range lock always needs write access.

A symbolic link is followed to an existing file but never used to create one: a dangling link in
a shared directory must not make us create a file somewhere else.

# Who may lock an internal lock file

Anyone who can open a file can `flock` it, read access is enough, and a lock held for ever
stalls every wait for it. So the lock files fsync makes inside a primitive's directory (a
mailbox's `seq`, a group's `gate` and `join.lock`, a group lock's turnstile, a bus's lock, a
semaphore's queue and slots: [`open_internal_lock`] and
[`Dir::open_or_create`](super::dir::Dir::open_or_create)) may be opened only by those who take
part in the primitive, and taking part means writing into its directory (registering, queueing):
their mode is [`internal_lock_mode`], read-write for the owner always, for the group only if
the primitive's directory (or a subdirectory of it, as a prepared group's `members`) is
group-writable, for others only if it is writable by others. A user who cannot write there
cannot take part anyway, and now cannot even open the file to stall those who can. The
directories decide, not the umask (which decided their modes when fsync made them): a file is
created with no more than the rule allows even under umask 0.

A directory may be shared after the fact (`chmod -R g+w BOX`, or `chmod 0777` of its
directories): its files keep the mode they were made with. So whenever the file's owner opens
it, its mode is fitted to the rule with `fchmod` on the open descriptor ([`fit`]): widened for
those who may now write the directory, tightened where a file has more (one an older fsync made
0644); best effort and silent. A file someone else owns, or one another name reaches (a link
planted at its name), is left as it is. Until its owner
uses it again, another user who may write the directory but not open the file is told which
file, why, and what its owner can run ([`unshared`]).
*/

use std::{
    fs::File,
    io,
    os::{
        fd::{AsFd, AsRawFd},
        unix::{fs::OpenOptionsExt, fs::PermissionsExt},
    },
    path::Path,
};

use crate::error::{Error, ErrorKind, Result};
use nix::libc;

/// Whether we could open the file for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    ReadWrite,
    ReadOnly,
}

/// What a lock file is opened for: the lock that will be taken on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// flock(2) locks: read-only, and read-write on a network file system where permitted.
    /// The lock file may be a directory.
    Flock,
    /// fcntl (OFD) byte-range locks: read-write where permitted, since an exclusive one needs
    /// it; read-only otherwise, enough for a shared one.
    Fcntl,
}

/// The mode a lock file is created with, less the umask, unless the caller asks for another
/// (`--mode`): 0666, as `flock(1)`, Perl's `sysopen` and `touch` create files.
pub const LOCK_FILE_MODE: u32 = 0o666;

/// Open (creating if missing) a lock file for `purpose`, per the module docs.
pub(crate) fn open_lock_file(path: &Path, purpose: Purpose) -> Result<(File, Access)> {
    open_lock_file_mode(path, purpose, LOCK_FILE_MODE)
}

/// [`open_lock_file`], creating a missing file with `mode` (less the umask).
pub(crate) fn open_lock_file_mode(
    path: &Path,
    purpose: Purpose,
    mode: u32,
) -> Result<(File, Access)> {
    let access_mode = match purpose {
        Purpose::Flock => libc::O_RDONLY,
        Purpose::Fcntl => libc::O_RDWR,
    };
    let create = open_mode(path, access_mode | libc::O_CREAT | libc::O_NOFOLLOW, mode);
    let (file, access) = match create {
        Ok(f) if purpose == Purpose::Flock => (f, Access::ReadOnly),
        Ok(f) => (f, Access::ReadWrite),
        Err(e) => match e.raw_os_error() {
            // A symbolic link: follow it, but only to a file that exists, and only if it is
            // the caller's or root's.
            Some(libc::ELOOP) => {
                trusted_link(path)?;
                open_existing(path, true, purpose)?
            }
            // An existing directory (O_CREAT refuses it): a flock can be taken on one.
            Some(libc::EISDIR) if purpose == Purpose::Flock => open_existing(path, false, purpose)?,
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => {
                match open_existing(path, false, purpose) {
                    Ok(x) => x,
                    Err(e2) if e2.errno() == Some(libc::ENOENT) => {
                        return Err(Error::io(path, "cannot create lock file", e));
                    }
                    Err(e2) => return Err(e2),
                }
            }
            _ => return Err(explain_open_error(path, "cannot create lock file", e)),
        },
    };
    let meta = check_lockable(path, &file, purpose)?;
    check_owner(path, std::os::unix::fs::MetadataExt::uid(&meta))?;
    if purpose == Purpose::Flock && meta.is_file() && fs_kind(&file).network {
        // Reopen the same file (not the path, which may have changed) for writing.
        if let Ok(rw) = open(
            Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())),
            libc::O_RDWR,
        ) {
            return Ok((rw, Access::ReadWrite));
        }
    }
    Ok((file, access))
}

/// Open (creating if missing) a lock file that only fsync makes, inside a primitive's
/// directory: like [`open_lock_file`], but a symbolic link is never followed, even to an
/// existing file, and a FIFO or device is refused without blocking. Created with, and fitted
/// to, the mode of the module docs ([`internal_lock_mode`], [`fit`]); where the caller may not
/// open it, the error says why ([`unshared`]).
///
/// Not built on [`open_existing`]: that one never creates, falls back to read-only on more
/// errors (`ETXTBSY`, `EISDIR`), follows a link when asked and words its errors as opening, not
/// creating; sharing it would change what this reports.
pub(crate) fn open_internal_lock(path: &Path) -> Result<(File, Access)> {
    let nofollow = libc::O_NOFOLLOW;
    let dir = parent_dir(path);
    let opened = open_or_create_with(
        |flags, mode| open_mode(path, flags | nofollow, mode),
        || participants_of(dir),
    );
    let (file, access) = match opened {
        Ok(x) => x,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Error::new(
                path,
                ErrorKind::WrongKind,
                "is a symbolic link, not a lock file fsync made; not following it",
            ));
        }
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            return Err(unshared_at(path)
                .unwrap_or_else(|| explain_open_error(path, "cannot create lock file", e)));
        }
        Err(e) => return Err(explain_open_error(path, "cannot create lock file", e)),
    };
    let meta = check_lockable(path, &file, Purpose::Fcntl)?;
    {
        use std::os::unix::fs::MetadataExt;
        let dir_mode = || std::fs::metadata(dir).map_or(0o777, |m| m.mode());
        let sole = || sole_link_at(path, &file, meta.nlink());
        fit(
            &file,
            (meta.mode(), meta.uid()),
            dir_mode,
            || participants_of(dir),
            sole,
        );
    }
    Ok((file, access))
}

/// [`unshared`] for the internal lock file at `path`, looked at by its path (not following a
/// link): `None` unless it is a regular file the caller may not open in a directory it may write.
pub(crate) fn unshared_at(path: &Path) -> Option<Error> {
    use rustix::fs::{Access, AtFlags, CWD};
    use std::os::unix::fs::MetadataExt;
    let st = std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)?;
    let dir = parent_dir(path);
    let dir_mode = std::fs::metadata(dir).ok()?.mode();
    let writable = rustix::fs::accessat(CWD, dir, Access::WRITE_OK, AtFlags::EACCESS).is_ok();
    unshared(path, OPEN, (st.mode(), st.uid()), dir_mode, writable)
}

/// The one way internal lock files are opened ([`open_internal_lock`], and
/// [`Dir::open_or_create`](super::dir::Dir::open_or_create) relative to a directory): read-write
/// if it exists; created read-write with the mode of [`internal_lock_mode`] for the directory's
/// participants (`participants`, asked only when it must be created) if missing; read-only where
/// we may not write (`open(flags, mode)` opens the name).
pub(crate) fn open_or_create_with(
    open: impl Fn(libc::c_int, u32) -> io::Result<File>,
    participants: impl FnOnce() -> u32,
) -> io::Result<(File, Access)> {
    let denied = |e: &io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EACCES | libc::EPERM | libc::EROFS)
        )
    };
    let read_only = |e: io::Error| match open(libc::O_RDONLY, 0) {
        Ok(f) => Ok((f, Access::ReadOnly)),
        Err(e2) if e2.raw_os_error() == Some(libc::ENOENT) => Err(e),
        Err(e2) => Err(e2),
    };
    match open(libc::O_RDWR, 0) {
        Ok(f) => Ok((f, Access::ReadWrite)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let mode = internal_lock_mode(participants());
            match open(libc::O_RDWR | libc::O_CREAT, mode) {
                Ok(f) => Ok((f, Access::ReadWrite)),
                Err(e) if denied(&e) => read_only(e),
                Err(e) => Err(e),
            }
        }
        Err(e) if denied(&e) => read_only(e),
        Err(e) => Err(e),
    }
}

/// The permission bits an internal lock file may have (module docs), given the union of the
/// modes of the directories its participants write (`dir_modes`): read-write for the owner;
/// for the group if one of them is group-writable; for others if one is writable by others.
pub(crate) fn internal_lock_mode(dir_modes: u32) -> u32 {
    let mut mode = 0o600;
    if dir_modes & 0o020 != 0 {
        mode |= 0o060;
    }
    if dir_modes & 0o002 != 0 {
        mode |= 0o006;
    }
    mode
}

/// The union of the modes of the directory at `dir` and of its subdirectories (not through
/// links): the directories a primitive's participants write. What cannot be read counts as
/// writable by everyone, so that doubt never takes access away.
pub(crate) fn participants_of(dir: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::metadata(dir) else {
        return 0o777;
    };
    let mut modes = top.mode();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                modes |= entry.metadata().map_or(0o777, |m| m.mode());
            }
        }
    }
    modes
}

/// Fit the mode of an internal lock file we own to the rule (module docs): widened for those
/// who may now write its directory, tightened where it gives more; best effort and silent.
/// `st` is the file's `(st_mode, st_uid)`, from the status taken on its descriptor. Cheap
/// where the file already fits: `dir_mode` (the primitive's directory alone) is asked only
/// for a file of ours, and `participants` (which lists the directory: a lock file may lie in
/// a large one, `/tmp`) only when that mode alone would not leave the file as it is. `sole`,
/// asked only before a change, says that no other name reaches the file: a hard link another
/// user planted at its name could lead to any file of ours, which must keep its mode.
pub(crate) fn fit(
    file: &File,
    (st_mode, st_uid): (u32, u32),
    dir_mode: impl FnOnce() -> u32,
    participants: impl FnOnce() -> u32,
    sole: impl FnOnce() -> bool,
) {
    if st_uid != nix::unistd::geteuid().as_raw() {
        return;
    }
    let perm = st_mode & 0o777;
    let fitted = |modes| perm & 0o700 | internal_lock_mode(modes);
    if fitted(dir_mode()) == perm {
        return;
    }
    let want = fitted(participants());
    if want != perm && sole() {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(want));
    }
}

/// [`fit`], widening only: for lock files that may have more than the rule gives (a reader/
/// writer lock's side files, made 0666 less the umask).
pub(crate) fn widen(
    file: &File,
    (st_mode, st_uid): (u32, u32),
    dir_mode: impl FnOnce() -> u32,
    sole: impl FnOnce() -> bool,
) {
    if st_uid != nix::unistd::geteuid().as_raw() {
        return;
    }
    let perm = st_mode & 0o777;
    let want = perm | internal_lock_mode(dir_mode());
    if want != perm && sole() {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(want));
    }
}

/// Whether `file`, opened as `path` and counted `nlink` links on its descriptor after the open,
/// can be reached by no other name, as [`Dir::sole_link`](super::dir::Dir::sole_link) asks it:
/// one link, and the entry opened still linked as `path` (the kernel's path of the descriptor),
/// so not reached through a symbolic link, nor through a hard link to a file with a name of its
/// own elsewhere (asked once an unlink under way has finished: [`settle`](super::dir::settle)).
pub(crate) fn sole_link_at(path: &Path, file: &File, nlink: u64) -> bool {
    let dir = std::fs::canonicalize(parent_dir(path));
    let (Some(name), Ok(dir)) = (path.file_name(), dir) else {
        return false;
    };
    if nlink != 1 {
        return false;
    }
    super::dir::settle(rustix::fs::CWD, path);
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
    opened.is_ok_and(|p| p == dir.join(name))
}

/// The error for an internal lock file `path` of status `(st_mode, st_uid)` that the caller
/// could not open (or write: `what` says which, "cannot open lock file"), where the caller may
/// write its directory (`dir_writable`, of mode `dir_mode`) and the rule gives what the file
/// lacks: its mode is from before the directory was shared, and its owner's next use widens
/// it ([`fit`]). `None` otherwise.
pub(crate) fn unshared(
    path: &Path,
    what: &str,
    (st_mode, st_uid): (u32, u32),
    dir_mode: u32,
    dir_writable: bool,
) -> Option<Error> {
    let perm = st_mode & 0o777;
    let rule = internal_lock_mode(dir_mode);
    if !dir_writable || rule & !perm & 0o066 == 0 {
        return None;
    }
    let who = match rule & 0o066 {
        0o060 => "g",
        0o006 => "o",
        _ => "go",
    };
    let message = format!(
        "{what}: permission denied (its mode {perm:04o} is from before its \
         directory was shared: the next use by its owner, uid {st_uid}, widens it, or they \
         can run: chmod {who}+rw {})",
        shell_word(&path.display().to_string())
    );
    Some(Error::new(path, ErrorKind::PermissionDenied, message).with_errno(libc::EACCES))
}

/// What [`unshared`] says of a file the caller could not open.
pub(crate) const OPEN: &str = "cannot open lock file";

/// `word` as one word of a shell command line: as it is if it needs no quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    match !word.is_empty() && word.chars().all(plain) {
        true if word.starts_with('-') => format!("./{word}"),
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// Open an existing file without creating it; `follow` permits a final symbolic link.
fn open_existing(path: &Path, follow: bool, purpose: Purpose) -> Result<(File, Access)> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let read_only = || {
        open(path, libc::O_RDONLY | nofollow)
            .map(|f| (f, Access::ReadOnly))
            .map_err(|e| explain_open_error(path, "cannot open lock file", e))
    };
    if purpose == Purpose::Flock {
        return read_only().map_err(|e| match e.errno() {
            Some(libc::ENOENT) if follow => dangling(path),
            _ => e,
        });
    }
    match open(path, libc::O_RDWR | nofollow) {
        Ok(f) => Ok((f, Access::ReadWrite)),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY | libc::EISDIR)
            ) =>
        {
            read_only()
        }
        Err(e) if follow && e.raw_os_error() == Some(libc::ENOENT) => Err(dangling(path)),
        Err(e) => Err(explain_open_error(path, "cannot open lock file", e)),
    }
}

/// A symbolic link at a lock's path is followed only if the caller or root owns it: another
/// user's could point at any file of the caller's, which fsync would then open and lock (and
/// hold against its owner's own use of it). The kernel's `fs.protected_symlinks` refuses it
/// only in a world-writable sticky directory the link's owner does not own; this refuses it
/// in their own directory and in one shared with their group too. Only its owner (or the
/// directory's) can replace a link, so what is opened next is what was checked, unless the
/// directory is theirs, where nothing can be kept from them (SECURITY.md).
fn trusted_link(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() && !trusted_owner(m.uid()) => Err(Error::new(
            path,
            ErrorKind::PermissionDenied,
            format!(
                "is a symbolic link owned by another user (uid {}); not following it",
                m.uid()
            ),
        )),
        _ => Ok(()),
    }
}

fn dangling(path: &Path) -> Error {
    Error::new(
        path,
        ErrorKind::WrongKind,
        "is a dangling symbolic link; not creating its target",
    )
}

/// Open an existing lock file read-only without creating it (status and watch verbs); `None`
/// if the file does not exist. It may be a directory, which flock(2) can lock.
pub(crate) fn open_if_exists(path: &Path) -> Result<Option<File>> {
    match open(path, libc::O_RDONLY) {
        Ok(f) => {
            check_lockable(path, &f, Purpose::Flock)?;
            Ok(Some(f))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            check_parent(path)?;
            Ok(None)
        }
        Err(e) => Err(explain_open_error(path, "cannot open", e)),
    }
}

fn open(path: &Path, flags: libc::c_int) -> io::Result<File> {
    open_mode(path, flags, 0o666)
}

/// [`open`], creating with `mode` (less the umask).
fn open_mode(path: &Path, flags: libc::c_int, mode: u32) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options
        .read(true)
        .write(flags & libc::O_ACCMODE == libc::O_RDWR)
        .mode(mode)
        // O_CREAT as a custom flag: std refuses to create through a read-only descriptor,
        // which open(2) does not. O_NONBLOCK so that a FIFO at the path cannot hang us; it
        // changes nothing for locks.
        .custom_flags((flags & !libc::O_ACCMODE) | libc::O_NOCTTY | libc::O_NONBLOCK);
    match flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT {
        // Two hosts creating the lock file at once: "it exists" means open it.
        true => super::creating(|| options.open(path)),
        false => options.open(path),
    }
}

/// That `file` is something a lock of `purpose` can be taken on: a regular file, or for a
/// flock(2) lock also a directory or a character device (`/dev/null`), as `flock(1)` allows.
/// Returns its status.
fn check_lockable(path: &Path, file: &File, purpose: Purpose) -> Result<std::fs::Metadata> {
    use std::os::unix::fs::FileTypeExt;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(path, "cannot stat", e))?;
    if purpose == Purpose::Flock && meta.file_type().is_char_device() {
        return Ok(meta);
    }
    if meta.is_dir() {
        if purpose == Purpose::Flock {
            return Ok(meta);
        }
        return Err(Error::new(
            path,
            ErrorKind::WrongKind,
            "is a directory, not a lock file",
        ));
    }
    if !meta.is_file() {
        return Err(Error::new(
            path,
            ErrorKind::WrongKind,
            "is not a regular file",
        ));
    }
    Ok(meta)
}

/// Turn the errors of `open(2)` into the words a user needs: which part of the path is wrong.
pub(crate) fn explain_open_error(path: &Path, what: &str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) => match check_parent(path) {
            Err(parent_err) => parent_err,
            Ok(()) => Error::io(path, what, e),
        },
        Some(libc::EISDIR) => Error::new(
            path,
            ErrorKind::WrongKind,
            "is a directory, not a lock file",
        ),
        Some(libc::ENOTDIR) => Error::new(
            path,
            ErrorKind::WrongKind,
            "a component of the path is not a directory",
        ),
        _ => Error::io(path, what, e),
    }
}

/// The directory a path lies in (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The owner of an entry of a shared directory who is neither the caller nor root, when the
/// entry lies in a world-writable sticky directory (`/tmp`) that this user does not own: they
/// may remove or replace it at any moment (as the owner of a lock file, letting a second
/// holder in; of a semaphore or group directory, removing its slot files or registrations).
/// The kernel's `fs.protected_regular` refuses to open such a file with `O_CREAT`, to everyone
/// but its owner and the directory's. `st_uid` is the entry's owner, `path` its name.
pub(crate) fn foreign_in_shared(path: &Path, st_uid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    if trusted_owner(st_uid) {
        return None;
    }
    let parent = std::fs::metadata(parent_dir(path)).ok()?;
    (shared_sticky(parent.mode()) && parent.uid() != st_uid).then_some(st_uid)
}

/// [`foreign_in_shared`] as an error, for a lock file owned by `uid`: `Ok` if the rule
/// allows it.
fn check_owner(path: &Path, uid: u32) -> Result<()> {
    match foreign_in_shared(path, uid) {
        None => Ok(()),
        Some(uid) => Err(Error::new(
            path,
            ErrorKind::PermissionDenied,
            format!(
                "belongs to another user (uid {uid}) in a world-writable sticky directory, who \
                 can remove it at any moment and so let a second holder in; not using it (the \
                 kernel's fs.protected_regular refuses it too): lock in a directory only \
                 trusted users can write, or remove it and let fsync create it"
            ),
        )),
    }
}

/// A missing *parent* directory is an error (the contract): say so in those words.
pub(crate) fn check_parent(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => return Ok(()),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::new(
            path,
            ErrorKind::WrongKind,
            format!("parent {} is not a directory", parent.display()),
        )
        .with_errno(libc::ENOTDIR)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(Error::new(
            path,
            ErrorKind::NotFound,
            format!("parent directory {} does not exist", parent.display()),
        )
        .with_errno(libc::ENOENT)),
        Err(e) => Err(Error::io(parent, "cannot examine parent directory", e)),
    }
}

/// The kind of file system a path lies on, for choosing how to wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsKind {
    /// A short name: `ext4`, `tmpfs`, `nfs`, `fuse`, ...
    pub name: &'static str,
    /// Other hosts may share this file system: their releases cannot be seen by change
    /// notification and a blocked lock call may not be woken promptly, so waits also poll.
    pub network: bool,
}

/// The [`FsKind::name`] of a file system `statfs` could not tell.
pub(crate) const UNKNOWN: &str = "unknown";

/// Classify the file system of `file` by its `statfs` magic number.
pub(crate) fn fs_kind(file: &impl AsFd) -> FsKind {
    match nix::sys::statfs::fstatfs(file) {
        Ok(st) => classify(magic(&st)),
        Err(_) => FsKind {
            name: UNKNOWN,
            network: false,
        },
    }
}

/// Classify the file system that holds `path` (or its parent, if it does not exist yet).
pub(crate) fn fs_kind_of_path(path: &Path) -> FsKind {
    let probe = if path.exists() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    let probe = if probe.as_os_str().is_empty() {
        Path::new(".")
    } else {
        probe
    };
    // A path with a NUL byte in it fails (EINVAL) like any other error: "unknown".
    match nix::sys::statfs::statfs(probe) {
        Ok(st) => classify(magic(&st)),
        Err(_) => FsKind {
            name: "unknown",
            network: false,
        },
    }
}

/// The magic number of a `statfs` result (`f_type`), whose C type depends on the target.
#[allow(clippy::unnecessary_cast)] // i64 here; u32 on s390x, c_ulong with musl
fn magic(st: &nix::sys::statfs::Statfs) -> i64 {
    st.filesystem_type().0 as i64
}

fn classify(magic: i64) -> FsKind {
    let (name, network) = match magic as u32 {
        0x6969 => ("nfs", true),
        0x517b => ("smb", true),
        0xff53_4d42 => ("cifs", true),
        0xfe53_4d42 => ("smb2", true),
        0x6573_5546 => ("fuse", true), // GlusterFS, sshfs, ...: assume shared
        0x00c3_6400 => ("ceph", true),
        0x5346_414f => ("afs", true),
        0x0102_1997 => ("9p", true),
        0x0116_1970 => ("gfs2", true),
        0x7461_636f => ("ocfs2", true),
        0x0bd0_0bd0 => ("lustre", true),
        0x4750_4653 => ("gpfs", true),
        0xef53 => ("ext4", false),
        0x0102_1994 => ("tmpfs", false),
        0x5846_5342 => ("xfs", false),
        0x9123_683e => ("btrfs", false),
        0x794c_7630 => ("overlayfs", false),
        0x2fc1_2fc1 => ("zfs", false),
        0xf2f5_2010 => ("f2fs", false),
        _ => ("local", false),
    };
    FsKind { name, network }
}

/// Make a file we created readable by everyone who can use the lock, whatever the umask.
pub(crate) fn set_mode(file: &File, mode: u32) {
    let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
}

/// A copy of the first `len` bytes of `file`, read from its start (fewer if it ends first), in
/// an anonymous file in memory (`memfd_create(2)`) that nobody can change, not even through the
/// copy: sealed against writes, growth and shrinking (`F_SEAL_*`), and against new seals. The
/// copy is read from its start; with it, how many bytes it holds.
pub(crate) fn sealed_copy(file: &File, len: u64) -> io::Result<(File, u64)> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::io::{Read, Seek};
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    let mut copy = File::from(rustix::fs::memfd_create("fsync-payload", flags)?);
    let mut from = file.try_clone()?;
    from.rewind()?;
    let copied = io::copy(&mut from.take(len), &mut copy)?;
    let seals = SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL;
    rustix::fs::fcntl_add_seals(&copy, seals)?;
    copy.rewind()?;
    Ok((copy, copied))
}

/// `unlink(2)`, retried on `EINTR`.
pub(crate) fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    super::retrying(|| std::fs::remove_file(path.as_ref()))
}

/// A descriptor of our own for the open file description behind descriptor number `number`
/// (one this process inherited, `exec 9>>lock` in the shell, or a guard's that a lease's
/// thread copies while the guard lives): a close-on-exec duplicate. Locks
/// taken with `flock(2)` or OFD `fcntl(2)` belong to the description, so they are shared with
/// `number` and outlive the duplicate.
pub(crate) fn duplicate(number: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, fcntl};
    // The lowest free descriptor from 3 on: never one of the standard three. EBADF if `number`
    // is not open.
    let fd = super::retrying(|| Ok(fcntl(number, FcntlArg::F_DUPFD_CLOEXEC(3))?))?;
    // SAFETY: a descriptor the kernel just gave us, owned by nobody else. (The one place a
    // bare number becomes a descriptor of ours: the number itself is the caller's.)
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// A close-on-exec duplicate of `fd`, as the lowest free descriptor from `lowest` on.
pub(crate) fn duplicate_from(
    fd: std::os::fd::BorrowedFd<'_>,
    lowest: std::os::fd::RawFd,
) -> io::Result<std::os::fd::OwnedFd> {
    super::retrying(|| Ok(rustix::io::fcntl_dupfd_cloexec(fd, lowest)?))
}

/// The device and inode a name (relative to the directory open as `dir`, or to the current
/// directory with `None`) leads
/// to, following symbolic links as opening it does. The name is looked up afresh (on a network
/// file system each component is revalidated with the server, so a name that now leads
/// elsewhere is seen), but the file's attributes are not fetched again
/// (`AT_STATX_DONT_SYNC`): the device and inode come with the lookup, and a FUSE client saves a
/// round trip to its server.
pub(crate) fn identity_at(
    dir: Option<std::os::fd::BorrowedFd<'_>>,
    name: &Path,
) -> io::Result<(u64, u64)> {
    use rustix::fs::{AtFlags, CWD, StatxFlags};
    loop {
        let r = match dir {
            Some(dir) => rustix::fs::statx(dir, name, AtFlags::STATX_DONT_SYNC, StatxFlags::INO),
            None => rustix::fs::statx(CWD, name, AtFlags::STATX_DONT_SYNC, StatxFlags::INO),
        };
        match r {
            Ok(st) => {
                return Ok((
                    libc::makedev(st.stx_dev_major, st.stx_dev_minor),
                    st.stx_ino,
                ));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether a directory of mode `mode` is world-writable and sticky (`/tmp`): shared by every
/// user, each able to remove only their own entries.
pub(crate) fn shared_sticky(mode: u32) -> bool {
    mode & 0o1002 == 0o1002
}

/// Whether fsync may write into, or believe, a file owned by `uid`: the caller's or root's.
pub(crate) fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

#[cfg(test)]
mod tests;
