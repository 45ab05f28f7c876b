/*!
Guards bound to the thread that took them, and the one way to move one: [`Unbound`].

A lock's guard is not `Send`. That is what makes the library's self-deadlock check exact: a
thread that asks for a lock it holds through a guard still bound to it would wait for itself
for ever, and since the guard cannot have left the thread, nobody else can release it; the
call fails at once with [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock). Were
guards `Send`, a guard handed to another thread (a thread pool, `spawn_blocking`) would look
the same to the check, and the thread that took it would be refused a lock that it should
simply wait for.

To move a guard, unbind it: [`Unbound::new`] (or `guard.unbind()`) marks the hold as belonging
to no thread, so any thread (the one that took it included) that asks for the lock waits for
the unbound guard's release as another process would. The async forms return unbound guards.

Here because an `unsafe impl` is needed: the guards' only field that is not `Send` is their
binding marker ([`Bound`]), which exists to keep them on their thread; [`Unbound`] is `Send`
because it holds one of the library's guards (the [`Bindable`] trait is sealed) whose hold it
has removed from its thread in the process's table of holds.
*/

use std::{
    marker::PhantomData,
    ops::{Deref, DerefMut},
};

/// The marker that keeps a guard on the thread that took it: not `Send`, but `Sync` (a shared
/// reference to a guard may be read from other threads; only its owner releases it).
pub(crate) type Bound = PhantomData<std::sync::MutexGuard<'static, ()>>;

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A guard of the library that can be [`Unbound`] from its thread. Sealed: implemented by the
/// library's lock guards only.
pub trait Bindable: Sealed {
    /// Mark this guard's hold as belonging to no thread (see [`Unbound`]).
    #[doc(hidden)]
    fn set_thread(&self, bound: bool);
}

/// A guard that may move between threads: its hold belongs to no thread, so that any thread
/// that asks for the same lock (the one that took it included) waits for its release, as
/// another process would, instead of failing with
/// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock).
///
/// ```
/// use fsync::{Mutex, Unbound};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("pool.lck");
/// let mutex = Mutex::new(&path);
/// let guard = Unbound::new(mutex.try_acquire()?.expect("free"));
/// let worker = std::thread::spawn(move || {
///     let fence = guard.fence(); // the guard's methods, through `Deref`
///     drop(guard); // released on this thread
///     fence
/// });
/// // This thread took the lock, but gave it away: it waits for the worker's release.
/// let again = mutex.acquire(None)?.expect("released by the worker");
/// assert!(again.fence() > worker.join().unwrap());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct Unbound<G: Bindable>(G);

// SAFETY: `G` is one of the library's guards (the trait is sealed), every field of which but the
// `Bound` marker is `Send` (files, paths, numbers and records; the types were `Send` before the
// marker was added, and the marker is their only `PhantomData` of a non-`Send` type). The marker
// keeps a bound guard on its thread for the self-deadlock check; an `Unbound` guard has told the
// process's table of holds that it belongs to no thread, so moving it breaks nothing.
#[allow(unsafe_code)]
unsafe impl<G: Bindable> Send for Unbound<G> {}

impl<G: Bindable> Unbound<G> {
    /// Unbind `guard` from its thread, so that it can move to another.
    pub fn new(guard: G) -> Unbound<G> {
        guard.set_thread(false);
        Unbound(guard)
    }

    /// Bind the guard to the current thread again (the self-deadlock check applies to it
    /// there).
    pub fn bind(self) -> G {
        self.0.set_thread(true);
        self.0
    }
}

impl<G: Bindable> Deref for Unbound<G> {
    type Target = G;
    fn deref(&self) -> &G {
        &self.0
    }
}

impl<G: Bindable> DerefMut for Unbound<G> {
    fn deref_mut(&mut self) -> &mut G {
        &mut self.0
    }
}
