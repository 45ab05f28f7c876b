/*!
The library's one error type.

Every failure names the path it concerns and the cause in words, so that a program can print
it as one line (the `fsync` command prints `fsync: PATH: cause`). The coarse [`ErrorKind`] is
what a program acts on (the command turns it into its exit status); the library never picks
exit codes and never prints.
*/

use std::{fmt, io, path::Path, path::PathBuf};

/// What kind of failure this is, independent of the wording. More kinds may come: match it
/// with a last arm for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The path, a parent directory or a command does not exist.
    NotFound,
    /// The path exists but is of the wrong kind for what was asked: a directory where a file
    /// is wanted (or a file where a directory is), a symbolic link that is not followed there,
    /// a FIFO, a socket or a device.
    WrongKind,
    /// Permission denied, or a read-only file system where we must write.
    PermissionDenied,
    /// An I/O error of the device or file system (EIO, ENOSPC, EDQUOT).
    Io,
    /// Someone else has it now: a bus name connected by another participant, a message that
    /// kept moving while it was being cancelled, a file locked by another process for longer
    /// than the call waits. Trying again later may succeed.
    Unavailable,
    /// The file system does not support what was asked (no locks there: `ENOLCK`,
    /// `EOPNOTSUPP`, `ENOSYS`).
    NotSupported,
    /// Waiting would never end: this thread holds the lock through another guard that has not
    /// been [unbound](crate::Unbound) (see [`Mutex`](crate::Mutex#threads)), or the kernel
    /// refused with `EDEADLK`.
    WouldDeadlock,
    /// An ancestor process holds the lock without having passed it down, or holds it for us
    /// while what we wait for cannot change: waiting would never end.
    HeldByAncestor,
    /// A bus participant that the call names is not connected.
    NotConnected,
    /// A cancellation signal ended a call that does not wait but reads or writes (a payload
    /// being queued, a message being copied out); [`wait::cancelled`](crate::wait::cancelled)
    /// names the signal. Calls that wait report cancellations as
    /// [`Outcome::Interrupted`](crate::Outcome::Interrupted) instead.
    Interrupted,
    /// A call that does not usually wait, given a time limit for the locks it takes briefly
    /// ([`Mailbox::lock_timeout`](crate::Mailbox::lock_timeout)), gave up: another process held
    /// one for longer (another user sharing the primitive may hold it for ever). Nothing was
    /// done. Calls that wait report their timeouts as
    /// [`Outcome::TimedOut`](crate::Outcome::TimedOut) instead.
    TimedOut,
    /// The request itself is malformed (a bad name or range), or asks for what the primitive's
    /// state refuses (a slot count or cap other than the one in force). Never an
    /// operating-system error: an `EINVAL` from the kernel is [`Os`](ErrorKind::Os).
    Invalid,
    /// A file of a primitive's state holds what fsync never writes there (a slot count, a
    /// sequence number): damaged, or put there by someone else.
    Corrupt,
    /// Any other operating-system error.
    Os,
}

/// A failure concerning one path: displayed as `PATH: cause` (`/var/lock/backup.lck: cannot
/// open lock file: permission denied`), with a [`kind`](Error::kind) to act on and the
/// operating-system error number where there was one.
#[derive(Debug)]
pub struct Error {
    path: PathBuf,
    message: String,
    kind: ErrorKind,
    errno: Option<i32>,
    /// The operating system's error behind it ([`std::error::Error::source`]).
    source: Option<io::Error>,
}

/// The result of a library call: an [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failure of `what` ("cannot open lock file") at `path` with an operating-system error,
    /// its kind derived from the error number (`EACCES`: [`ErrorKind::PermissionDenied`], ...).
    /// For programs that report their own failures as the library does (the `fsync` command
    /// does).
    pub fn io(path: &Path, what: &str, err: io::Error) -> Error {
        let errno = err.raw_os_error();
        let cause = match errno {
            Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
            None => err.to_string(),
        };
        Error {
            path: path.to_path_buf(),
            message: format!("{what}: {}", lowercase_first(&cause)),
            kind: errno.map_or(ErrorKind::Os, kind_of_errno),
            errno,
            source: Some(err),
        }
    }

    /// A failure at `path` described entirely in words, of the given kind. Like
    /// [`Error::io`], for programs that report their own failures as the library does.
    pub fn new(path: &Path, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            path: path.to_path_buf(),
            message: message.into(),
            kind,
            errno: None,
            source: None,
        }
    }

    /// What kind of failure it is: what a program decides on (an exit status, a retry).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The path the failure concerns (a lock file, a primitive's directory, a file in it);
    /// empty for the few failures that concern no file (a wake signal that cannot be chosen).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cause in words, without the path: what [`Display`](fmt::Display) shows after
    /// `PATH: ` (for programs that show the path their own way).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The operating-system error number behind this error, if there was one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// The same error, with the operating-system error number that stands behind its words.
    pub(crate) fn with_errno(mut self, errno: i32) -> Error {
        self.errno = Some(errno);
        self
    }

    /// The same error, naming `shown` where it named `pinned` (a path through an open
    /// directory, `/proc/self/fd/N`, that means nothing to a user), in its path and its words.
    pub(crate) fn shown_as(mut self, pinned: &Path, shown: &Path) -> Error {
        if let Ok(rest) = self.path.strip_prefix(pinned) {
            self.path = shown.join(rest);
        }
        let (pinned, shown) = (pinned.to_string_lossy(), shown.to_string_lossy());
        self.message = self.message.replace(pinned.as_ref(), shown.as_ref());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.as_os_str().is_empty() {
            true => f.write_str(&self.message),
            false => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Why a name is refused ([`bus::check_name`](crate::bus::check_name),
/// [`msg::check_key`](crate::msg::check_key)): the reason in words, naming what was given. The
/// calls that take a name turn it into an [`Error`] of kind [`ErrorKind::Invalid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName(pub(crate) String);

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidName {}

fn kind_of_errno(code: i32) -> ErrorKind {
    use nix::libc::*;
    match code {
        ENOENT | ENAMETOOLONG => ErrorKind::NotFound,
        ENOTDIR | EISDIR | ELOOP | ENXIO => ErrorKind::WrongKind,
        EACCES | EPERM | EROFS => ErrorKind::PermissionDenied,
        EIO | ENOSPC | EDQUOT | EFBIG => ErrorKind::Io,
        ENOLCK | EOPNOTSUPP | ENOSYS => ErrorKind::NotSupported,
        EDEADLK => ErrorKind::WouldDeadlock,
        _ => ErrorKind::Os,
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if !s.starts_with("I/O") => c.to_lowercase().chain(chars).collect(),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_name_path_and_cause() {
        let e = Error::io(
            Path::new("/x/l"),
            "cannot open",
            io::Error::from_raw_os_error(13),
        );
        let source = std::error::Error::source(&e).expect("the io::Error behind it");
        assert_eq!(
            source.to_string(),
            io::Error::from_raw_os_error(13).to_string()
        );
        assert!(
            std::error::Error::source(&Error::new(Path::new("/x"), ErrorKind::Invalid, "no"))
                .is_none()
        );
        assert_eq!(e.to_string(), "/x/l: cannot open: permission denied");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        let e = Error::io(Path::new("/x"), "write", io::Error::from_raw_os_error(5));
        assert_eq!(e.to_string(), "/x: write: I/O error");
        assert_eq!(e.kind(), ErrorKind::Io);
        let e = Error::io(
            Path::new("/x/d"),
            "cannot open",
            io::Error::from_raw_os_error(21),
        );
        assert_eq!(e.kind(), ErrorKind::WrongKind, "EISDIR");
        // The kernel's EINVAL is not a usage error of ours.
        let e = Error::io(Path::new("/x"), "lock", io::Error::from_raw_os_error(22));
        assert_eq!(e.kind(), ErrorKind::Os);
    }
}
