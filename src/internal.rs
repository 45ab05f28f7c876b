/*!
Not part of the library's API: what the `fsync` command needs of the library's insides and a
library must not offer its programs (dispositions of process-wide signals, which belong to the
program; descriptor numbers inherited by number, which may have been closed and reused).

Hidden from the documentation and outside semantic versioning: anything here may change or
go in any release, and `.ci/api-check` does not hold it to the last release. Programs use the
documented API.
*/

use std::os::fd::{OwnedFd, RawFd};

pub use crate::platform::signal::{catch_sigalrm, die_of, ignore_sigpipe, note_sigpipe};

/// A descriptor of our own for descriptor number `number`, which this process inherited
/// (`exec 9>>lock` in the shell): a close-on-exec duplicate; `mutex::lock_fd` and
/// `unlock_fd` on it lock and unlock `number`. Fails if `number` is not open, or is open on
/// something that cannot be a lock file (an anonymous pipe, a socket).
pub fn inherited_fd(number: RawFd) -> crate::Result<OwnedFd> {
    crate::mutex::inherited_fd(number)
}
