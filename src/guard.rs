/*!
What a guard offers to code that runs a command under it: a check that the lock is still held.

On a local file system a living holder cannot lose its lock. On a network file system it can (a
partition, an expired lease: the server gives the lock to another client), so a holder that runs
a long command checks now and then; every guard's `loss_check()` gives that check where it is
needed, and `None` elsewhere.
*/

use std::os::fd::{AsFd, AsRawFd, RawFd};

use crate::platform::{
    fs as pfs,
    lock::{self, Mode},
};

/// A check that a lock is still ours, valid while the guard it came from lives: what a holder
/// that runs long work on a network file system calls now and then, to stop (or stop writing)
/// once the file server has given its lock to someone else. Guards return one only where the
/// lock can be lost (`loss_check()` is `None` on a local file system).
#[derive(Debug, Clone, Copy)]
pub struct LossCheck {
    fd: RawFd,
    mode: Mode,
}

impl LossCheck {
    /// The check for a lock held through `file` in `mode`, if `file` lies on a network file
    /// system.
    pub(crate) fn of(file: &(impl AsFd + AsRawFd), mode: Mode) -> Option<LossCheck> {
        pfs::fs_kind(file).network.then(|| LossCheck {
            fd: file.as_raw_fd(),
            mode,
        })
    }

    /// The check for a lock held through descriptor `fd` (which may be inherited from an
    /// ancestor that holds it, for a nested guard), if `network`.
    pub(crate) fn on(network: bool, fd: RawFd, mode: Mode) -> Option<LossCheck> {
        network.then_some(LossCheck { fd, mode })
    }

    /// Whether the lock is still ours: the descriptor still works, and a non-blocking re-lock
    /// of our own open file description succeeds (a no-op while we hold it; it fails once
    /// another holder has it, and the file server answers EBADFD/EIO/ESTALE to a client whose
    /// locks it has dropped).
    pub fn still_held(&self) -> bool {
        lock::still_held(self.fd, self.mode)
    }
}
