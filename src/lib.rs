/*!
`fsync`: synchronise processes through the file system.

Mutexes, reader/writer locks, byte-range locks, counting semaphores, group locks, groups,
events, mailboxes and a message bus whose state lives in files. They work between unrelated
processes on one machine, between machines that share a directory over NFS, SMB or a cluster
file system, and alongside util-linux `flock(1)` and Perl's and Python's `flock` on the same
files. There is no server and no daemon: the shared directory is the medium. Locks are kernel
locks, so a process that dies, however it dies, releases everything it held.

The smallest useful program: one process at a time runs the critical section, the others wait
up to ten seconds for it.

```
use std::time::Duration;
use fsync::Mutex;
# let dir = tempfile::tempdir().unwrap();
# let path = dir.path().join("counter.lck");

let lock = Mutex::new(&path); // any path; the file is created if missing, never truncated
match lock.acquire(Some(Duration::from_secs(10)))? {
    Some(_guard) => {
        // ... only one process (and one thread) at a time gets here ...
    } // released when the guard is dropped, or by the kernel if the process dies
    None => eprintln!("still busy after 10 s"),
}
# Ok::<(), fsync::Error>(())
```

# Depending on the library

The package is `fsync-tool`; the library crate in it is `fsync`. Its default feature `cli`
builds the `fsync` command too (with its command-line parser and JSON output); a program that
only uses the library turns it off, and builds no command-line parser, JSON or man-page code:

```toml
[dependencies]
fsync-tool = { version = "0.3", default-features = false }
```

and writes `use fsync::Mutex;`. The library runs on Linux only.

# The primitives

| type | what it is | module (with its protocol on disk) |
| --- | --- | --- |
| [`Mutex`] | an exclusive (or shared, as `flock -s`) lock on a file, with fencing tokens | [`mutex`] |
| [`RangeLock`] | a shared or exclusive lock on a byte range of a file | [`range`] |
| [`Swmr`] | a reader/writer lock that never starves a writer | [`swmr`] |
| [`Semaphore`] | at most N holders at once, each with a slot number | [`sem`] |
| [`GroupLock`] | members of one named group inside at once (optionally at most M) | [`grouplock`] |
| [`Group`] | processes join and leave; others ask whether it is empty, or wait until it is | [`group`] |
| [`Event`] | set by one process, awaited by others; auto-reset wakes exactly one | [`event`] |
| [`Mailbox`] | durable queued messages, synchronous sends, exactly-once receipt | [`msg`] |
| [`Bus`] | named participants exchanging messages on a shared directory | [`bus`] |

Each type is a path and a few settings: cheap to create, it holds nothing until used, and it
can be cloned and shared. What acquires returns a guard that releases when dropped (or
explicitly, where releasing can report something). Every call that may wait comes in the same
three forms, with one vocabulary across the primitives:

| form | waits | returns | examples |
| --- | --- | --- | --- |
| `try_X()` | never: tries once | `Ok(None)` (or `false`) when busy | [`Mutex::try_acquire`], [`Swmr::try_write`], [`Group::try_join`] |
| `X(timeout)` | up to `timeout` (`None`: for ever) | `Ok(None)` (or `false`) if it ran out | [`Mutex::acquire`], [`Swmr::acquire`], [`Semaphore::acquire`], [`Event::wait`], [`Mailbox::recv`], [`Mailbox::send`], [`mutex::lock_fd`] |
| `X_with(timeout, progress)` | the same, calling `progress` with the time waited once it blocks and about once a second after | an [`Outcome`]: acquired, timed out, or interrupted by a cancellation signal | [`Mutex::acquire_with`], [`Swmr::acquire_with`], [`GroupLock::enter_with`], [`Event::wait_with`], [`Mailbox::recv_with`], [`Mailbox::send_with`], [`range::lock_fd_with`] |

Observers that wait without taking part (a group emptying, a mutex changing hands) follow the
same rule ([`group::wait_empty`] and [`group::wait_empty_with`], [`mutex::wait_for_change`]
and [`mutex::wait_for_change_with`]). Calls that wait for nobody but read a payload
([`Mailbox::post`], [`bus::Bus::send`]) return an [`Outcome`] too: a cancellation signal can end
the read.

Lock modes are a [`Mode`] ([`Mode::Shared`], [`Mode::Exclusive`]) wherever a call takes one.
Guards release when dropped; where releasing can report something (files deleted or kept) they
also have `release()`. Every guard implements [`Guard`], for programs that run a command
while holding it: `pass_down()` lets the command inherit the hold, `set_child()` records it for
status reports, and on a network file system `loss_check()` checks that the hold is still ours
(see [`LossCheck`]).

Errors are [`Error`]s: each names the path it concerns and the cause in words, has an
[`ErrorKind`] (not found, of the wrong kind, permission denied, unavailable here, invalid
request, corrupt state, ...) and, where the operating system failed, that `io::Error` as its
[`source`](std::error::Error::source). The library never prints and never exits the process.

The enums that report what happened ([`ErrorKind`], [`LeaseState`], the `Released`, `Change`,
`Left`, `Connected` and `Disconnected` of the primitives) are `#[non_exhaustive]`: a later
version may name more cases, so a `match` on them ends with an arm for the others. [`Outcome`]
(acquired, timed out, interrupted) and [`Mode`] (shared, exclusive) are complete as they are.

Within one process, threads exclude each other as processes do: every acquisition opens the
files it locks anew. So a thread that asks for what it already holds through another guard
would wait for itself; a [`Mutex`], a [`Swmr`] (a writer that asks to read, or to write again),
a [`RangeLock`] (bytes that overlap its own, in a conflicting mode) and a [`GroupLock`] (a member
of one group that asks to enter another, or to set its own group's first cap) notice and fail
at once instead ([`ErrorKind::WouldDeadlock`]; a guard is bound to the thread that took
it until [unbound](Unbound), so the check is exact). (A [`Semaphore`] slot holder may take another slot; one
that holds them all and asks for one more waits until its timeout.)

# Threads and async

Lock guards are not `Send`: to hand one to another thread (a thread pool, `spawn_blocking`),
unbind it ([`Unbound`], `guard.unbind()`); every thread then waits for its release as another
process would. With the `async` feature (on by default), [`future`] has every wait as a future
that needs no runtime (`acquire_async`, `recv_async`, ...): dropping one ends that wait alone
and leaks nothing, and no signal handler of the program's is touched, so `tokio::signal` keeps
working. `examples/` in the package has complete programs, one under tokio.

# Waiting, and the signal it installs

A waiting thread blocks in the kernel, so on a local file system a release wakes it at once;
on network file systems waits also re-check every poll interval. See [`wait`] for the details,
and for cancellation by INT, TERM, HUP and QUIT, which only a program that asks for it gets
([`wait::install_cancel_handlers`]).

**Waiting installs a process-wide signal handler** for a real-time signal, by default
`SIGRTMIN+5`: the first time the library waits (or watches a directory), it installs a handler,
without `SA_RESTART`, that does nothing but count; its only purpose is to interrupt the
blocking call it arrives in, so that deadlines and wake-ups end it. A program that embeds the library must not use that signal
for anything else, nor block it in threads that wait; it can choose another real-time signal
with [`wait::set_wake_signal`] before the first wait. Watching a directory also gives SIGIO
that handler if SIGIO has its default action (the kernel's fallback when the real-time signal
cannot be queued, which would otherwise kill the process).

# Network file systems

Every primitive works across hosts that share a directory, with three differences the
primitives' docs spell out: waits poll (each type's `poll_interval`), status reports cannot
always count holders (`None` where the kernel's lock table cannot see other hosts), and a living
holder can lose its lock (a partition, an expired lease): guards offer a [`LossCheck`] there.
[`doctor::examine`] tries what a directory's file system can do.
*/
#![deny(missing_docs)]
// Unsafe code lives in the platform layer only, and the compiler holds us to it.
#![deny(unsafe_code)]

pub mod bus;
pub mod command;
pub mod doctor;
pub mod error;
pub mod event;
mod fence;
#[cfg(feature = "async")]
pub mod future;
pub mod group;
pub mod grouplock;
mod guard;
mod held;
pub mod holder;
#[doc(hidden)]
pub mod internal;
pub mod msg;
pub mod mutex;
#[allow(unsafe_code)] // the one layer that talks to the operating system directly
pub(crate) mod platform;
mod probe;
pub mod range;
mod restart;
pub mod sem;
pub mod swmr;
mod teardown;
#[cfg(test)]
mod test_support;
pub mod wait;

#[cfg(test)]
mod proptests;

pub use bus::Bus;
pub use error::{Error, ErrorKind, InvalidName, Result};
pub use event::Event;
pub use group::{Group, Membership};
pub use grouplock::{GroupGuard, GroupLock};
pub use guard::{Guard, Lease, LeaseState, LossCheck};
pub use msg::{Mailbox, Received};
pub use mutex::{Mutex, MutexGuard, PlainGuard};
pub use platform::{
    binding::{Bindable, Unbound},
    lock::Mode,
};
pub use range::{ByteRange, RangeGuard, RangeLock};
pub use sem::{Semaphore, SlotGuard};
pub use swmr::{Swmr, SwmrGuard};
pub use wait::Outcome;
