/*!
Exit codes: the one table, used by `main` and rendered into every man page's EXIT STATUS.

The values are fixed by the command-line contract; operational errors use the BSD `sysexits.h` codes so
that scripts can tell a missing directory from a permission problem, and never 0, 1 or 75.
*/

use fsync::{ErrorKind, Outcome};

/// How the process ends: an exit status, or death by a signal (whose status the shell shows as
/// 128+N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    /// The exit status (128+N for a signal, where the signal cannot be re-raised).
    pub code: u8,
    /// Die of this signal rather than exit (see [`fsync::internal::die_of`]).
    pub signal: Option<i32>,
}

impl Exit {
    pub(crate) const OK: Exit = Exit::code(0);
    /// Predicate verbs: held, not empty, not signalled.
    pub(crate) const NO: Exit = Exit::code(1);
    pub(crate) const USAGE: Exit = Exit::code(2);
    /// A file of a primitive holds what no writer of the protocol writes (EX_DATAERR).
    pub(crate) const CORRUPT: Exit = Exit::code(65);
    pub(crate) const NOT_FOUND: Exit = Exit::code(66);
    pub(crate) const UNAVAILABLE: Exit = Exit::code(69);
    pub(crate) const INTERNAL: Exit = Exit::code(70);
    pub(crate) const OS: Exit = Exit::code(71);
    pub(crate) const IO: Exit = Exit::code(74);
    /// The lock was lost while the command ran, and the command was stopped (`--on-lost`).
    pub(crate) const LOCK_LOST: Exit = Exit::code(76);
    /// The default for `-E`: the wait gave up.
    pub(crate) const CONFLICT: Exit = Exit::code(75);
    pub(crate) const NO_PERMISSION: Exit = Exit::code(77);
    pub(crate) const CANNOT_EXECUTE: Exit = Exit::code(126);
    pub(crate) const COMMAND_NOT_FOUND: Exit = Exit::code(127);

    /// Exit with status `code`.
    pub(crate) const fn code(code: u8) -> Exit {
        Exit { code, signal: None }
    }

    /// Die of signal `n`: fsync was cancelled by it, or its command died of it. A shell sees
    /// 128+N, and knows that a signal ended the job (bash stops a loop after ^C so).
    pub(crate) fn signal(n: i32) -> Exit {
        Exit {
            code: (128 + n).clamp(0, 255) as u8,
            signal: Some(n),
        }
    }

    /// What a wait's outcome means for how fsync ends: the thing waited for, or `Err` with the
    /// exit of a wait that gave up (`timed_out`: the conflict exit code; 0 for a watch that has
    /// run its time, or a wait that cannot time out) or was interrupted (death by its signal).
    pub(crate) fn unless_acquired<T>(outcome: Outcome<T>, timed_out: Exit) -> Result<T, Exit> {
        match outcome {
            Outcome::Acquired(v) => Ok(v),
            Outcome::TimedOut => Err(timed_out),
            Outcome::Interrupted(sig) => Err(Exit::signal(sig)),
        }
    }

    /// The exit status for a library error.
    pub(crate) fn of_error(kind: ErrorKind) -> Exit {
        match kind {
            // A path of the wrong kind is not there for what was asked: the same status.
            ErrorKind::NotFound | ErrorKind::WrongKind => Exit::NOT_FOUND,
            ErrorKind::PermissionDenied => Exit::NO_PERMISSION,
            ErrorKind::Io => Exit::IO,
            ErrorKind::Unavailable
            | ErrorKind::NotSupported
            | ErrorKind::WouldDeadlock
            | ErrorKind::HeldByAncestor
            | ErrorKind::NotConnected => Exit::UNAVAILABLE,
            ErrorKind::Invalid => Exit::USAGE,
            ErrorKind::Corrupt => Exit::CORRUPT,
            ErrorKind::Os => Exit::OS,
            // A short wait given a limit (`msg post -t`) gave up: what every wait's -t gives.
            ErrorKind::TimedOut => Exit::CONFLICT,
            // A kind a later library adds: an operating-system error until named here.
            _ => Exit::OS,
        }
    }
}

/// The EXIT STATUS table of the man pages: (code, meaning).
pub(super) const TABLE: &[(&str, &str)] = &[
    (
        "the command's own",
        "run and join verbs exit with the status of COMMAND; if COMMAND dies of signal N, fsync dies of N too once it has released everything, which the shell shows as 128+N",
    ),
    (
        "0",
        "success; for predicate verbs (status, empty): free, empty or signalled",
    ),
    ("1", "predicate verbs: held, not empty or not signalled"),
    (
        "2",
        "usage error: unknown option, bad duration, range or number",
    ),
    (
        "65",
        "a file of a primitive holds what the protocol never writes (a semaphore's slot count, a mailbox's sequence number): damaged, or not made by fsync",
    ),
    (
        "66",
        "a path does not exist, its parent directory is missing, or it is of the wrong kind (a directory where a file is needed, a dangling symbolic link)",
    ),
    (
        "69",
        "the request cannot be carried out: the file system has no locking, waiting would deadlock (a nested acquisition of a lock an enclosing --close run did not pass down), or a bus participant is not connected, is stale, or is held by another process (connect --hold)",
    ),
    ("70", "internal error (a bug; please report it)"),
    ("71", "another operating-system error"),
    (
        "74",
        "an I/O error of the file system (EIO, no space, quota exceeded)",
    ),
    (
        "75",
        "the timeout (or --no-wait) expired before the lock, slot, event or message was had; change it with -E/--conflict-exit-code",
    ),
    (
        "76",
        "the lock was lost while COMMAND ran (network file systems: a partition or expired lease) and COMMAND was stopped, as --on-lost term (the default) or kill says",
    ),
    (
        "77",
        "permission denied, or a read-only file system where fsync must write",
    ),
    ("126", "COMMAND was found but could not be executed"),
    ("127", "COMMAND was not found"),
    (
        "128+N",
        "fsync was cancelled by signal N (INT, TERM, HUP or QUIT, unless ignored when it started) while waiting: it dies of N after cleaning up, which the shell shows as 128+N",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operational_errors_never_collide_with_predicates_or_conflict() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::WrongKind,
            ErrorKind::PermissionDenied,
            ErrorKind::Io,
            ErrorKind::Unavailable,
            ErrorKind::NotSupported,
            ErrorKind::WouldDeadlock,
            ErrorKind::HeldByAncestor,
            ErrorKind::NotConnected,
            ErrorKind::Os,
            ErrorKind::Corrupt,
        ] {
            let code = Exit::of_error(kind).code;
            assert!(![0, 1, 75].contains(&code), "{kind:?} -> {code}");
        }
        assert_eq!(Exit::signal(9).code, 137);
        assert_eq!(Exit::signal(15).code, 143);
    }

    #[test]
    fn a_wait_ends_in_what_it_waited_for_or_an_exit() {
        let conflict = Exit::code(99);
        assert_eq!(Exit::unless_acquired(Outcome::Acquired(7), conflict), Ok(7));
        assert_eq!(
            Exit::unless_acquired(Outcome::<()>::TimedOut, conflict),
            Err(conflict)
        );
        assert_eq!(
            Exit::unless_acquired(Outcome::<()>::Interrupted(15), conflict),
            Err(Exit::signal(15))
        );
    }

    #[test]
    fn every_exit_constant_is_documented() {
        for code in [0, 1, 2, 65, 66, 69, 70, 71, 74, 75, 76, 77, 126, 127] {
            assert!(
                TABLE.iter().any(|(c, _)| *c == code.to_string()),
                "{code} missing from TABLE"
            );
        }
    }
}
