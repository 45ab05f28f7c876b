/*!
`fsync`: synchronise processes through the file system.

Each primitive is one module with its on-disk protocol written in its docs; they share the wait
core ([`wait`]) and a platform layer (private: the only code that talks to the operating system
directly). The `fsync` command-line tool is a thin
layer over this library.
*/

pub mod bus;
pub mod command;
pub mod doctor;
pub mod error;
pub mod event;
pub mod group;
pub mod grouplock;
pub mod guard;
pub mod holder;
pub mod msg;
pub mod mutex;
pub(crate) mod platform;
mod probe;
pub mod range;
pub mod sem;
pub mod swmr;
pub mod wait;

#[cfg(test)]
mod proptests;

pub use bus::Bus;
pub use error::{Error, ErrorKind, Result};
pub use event::Event;
pub use group::{Group, Membership};
pub use grouplock::{GroupGuard, GroupLock};
pub use guard::LossCheck;
pub use msg::{Mailbox, Received};
pub use mutex::{Mutex, MutexGuard, SharedGuard};
pub use platform::lock::Mode;
pub use sem::{Semaphore, SlotGuard};
pub use swmr::{Swmr, SwmrGuard};
pub use wait::Outcome;
