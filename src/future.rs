/*!
Waits as futures, for async programs (feature `async`): the primitives' waits `.await`ed instead
of blocking a runtime's thread.

```
# fn main() -> fsync::Result<()> {
# let dir = tempfile::tempdir().unwrap();
# let path = dir.path().join("job.lck");
# fsync::future::block_on(async {
use std::time::Duration;
let mutex = fsync::Mutex::new(&path);
match mutex.acquire_async(Some(Duration::from_secs(10))).await? {
    Some(guard) => { /* ... the critical section, across .await points ... */ drop(guard) }
    None => eprintln!("still busy after 10 s"),
}
# Ok(())
# })
# }
```

# How

Each wait runs as it always does, blocking in the kernel (a lock call, a change notification),
on a helper thread of its own; its future completes when the helper is done. So it wakes as
soon as the blocking form would, on local and network file systems alike, and needs no runtime:
the futures work under tokio, async-std, smol or a plain executor, and hold no runtime thread
while they wait. Helper threads are kept for ten seconds once idle, for the next waits.
(`benches/async_handoff.rs` measures a handoff through futures beside a blocking one.)

# Dropping a future cancels its wait

Dropping a future before it completes (a `select!` that another branch won, a timeout of the
runtime's) ends that one wait at once, as a cancellation signal would end a blocking one: the
helper's blocking call is interrupted by the library's own wake signal, sent to the helper
thread alone. Nothing else is touched: no signal handler of the program's (`tokio::signal` keeps
working), no other wait. Whatever the helper got in the meantime is let go on the helper
thread: a lock taken just as the future was dropped is released, a slot freed, a message
received goes back to its queue. Nothing leaks.

# Guards

Guards of locks that keep a thread binding ([`Mutex`], [`Swmr`]) come back [`Unbound`]: taken on
the helper thread, they may be held across `.await` points and moved between a runtime's
threads. Because they are unbound, a task that asks for a lock its own task holds waits for
ever instead of failing with [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock): as
with an async mutex, do not hold a guard while you wait for the same lock.
*/

use std::{
    future::Future,
    path::Path,
    pin::Pin,
    sync::{Arc, Mutex as StdMutex, PoisonError},
    task::{Context, Poll, Waker},
    time::Duration,
};

use crate::{
    Event, Mailbox, Mode, Mutex, MutexGuard, Received, Result, Semaphore, SlotGuard, Swmr,
    SwmrGuard, Unbound, platform::signal::Stop,
};

/// A wait under way on its helper thread; completes with what the blocking form returns.
/// Dropping it ends the wait (see the [module docs](self)).
#[must_use = "a future does nothing unless awaited; dropping it ends the wait"]
pub struct Wait<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    state: StdMutex<State<T>>,
    stop: Arc<Stop>,
}

enum State<T> {
    /// Under way; the waker of the task that last polled.
    Waiting(Option<Waker>),
    Done(Result<T>),
    /// Handed to the task.
    Taken,
}

impl<T> std::fmt::Debug for Wait<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fsync::future::Wait")
    }
}

impl<T: Send + 'static> Wait<T> {
    /// Run `wait` on a helper thread whose waits this future's drop ends.
    fn spawn(wait: impl FnOnce() -> Result<T> + Send + 'static) -> Wait<T> {
        let shared = Arc::new(Shared {
            state: StdMutex::new(State::Waiting(None)),
            stop: Arc::new(Stop::default()),
        });
        let helper = Arc::clone(&shared);
        let job = Box::new(move || {
            Stop::install(Some(Arc::clone(&helper.stop)));
            let got = wait();
            Stop::install(None);
            let mut state = helper.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let State::Waiting(waker) = std::mem::replace(&mut *state, State::Done(got)) {
                drop(state);
                if let Some(w) = waker {
                    w.wake();
                }
            }
            // A future dropped meanwhile left the result to us: `helper` is the last
            // reference, and dropping it here releases whatever was got.
        });
        if let Err(e) = helpers::run(job) {
            let failed = crate::Error::io(Path::new("fsync-wait"), "cannot start a thread", e);
            *shared.state.lock().unwrap_or_else(PoisonError::into_inner) = State::Done(Err(failed));
        }
        Wait { shared }
    }
}

/// The helper threads: one per wait under way, kept for a while once idle, so that a program
/// that waits often does not start a thread for every wait (a thread's start costs about as
/// much as a handoff: `benches/async_handoff.rs`).
mod helpers {
    use std::{
        io,
        sync::{
            Mutex, PoisonError,
            atomic::{AtomicU64, Ordering},
            mpsc::{self, RecvTimeoutError, Sender},
        },
        time::Duration,
    };

    pub(super) type Job = Box<dyn FnOnce() + Send>;

    /// How long an idle helper waits for another wait before it ends.
    const IDLE_FOR: Duration = Duration::from_secs(10);

    /// The idle helpers, each by its number and the sender of its jobs; the last idle first.
    static IDLE: Mutex<Vec<(u64, Sender<Job>)>> = Mutex::new(Vec::new());

    fn idle() -> std::sync::MutexGuard<'static, Vec<(u64, Sender<Job>)>> {
        IDLE.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `job` on an idle helper, or on a new one.
    pub(super) fn run(mut job: Job) -> io::Result<()> {
        loop {
            let Some((_, helper)) = idle().pop() else {
                break;
            };
            // A helper taken off the list always receives (see `serve`): this only fails if it
            // died, which a panic in a job would do.
            match helper.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        std::thread::Builder::new()
            .name("fsync-wait".into())
            .spawn(move || serve(id, job))
            .map(drop)
    }

    /// A helper's life: its first job, then each job sent while it is on the idle list, until
    /// it has been idle for [`IDLE_FOR`].
    fn serve(id: u64, first: Job) {
        let (tx, rx) = mpsc::channel::<Job>();
        first();
        loop {
            idle().push((id, tx.clone()));
            let job = match rx.recv_timeout(IDLE_FOR) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) => {
                    let mut list = idle();
                    match list.iter().position(|(n, _)| *n == id) {
                        // Still idle: leave the list, and end.
                        Some(at) => {
                            list.swap_remove(at);
                            return;
                        }
                        // Taken off the list just now: its job is on the way.
                        None => {
                            drop(list);
                            match rx.recv() {
                                Ok(job) => job,
                                Err(_) => return,
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            job();
        }
    }
}

impl<T> Future for Wait<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(got) => Poll::Ready(got),
            State::Waiting(_) => {
                *state = State::Waiting(Some(cx.waker().clone()));
                Poll::Pending
            }
            State::Taken => panic!("fsync::future::Wait polled after it completed"),
        }
    }
}

impl<T> Drop for Wait<T> {
    fn drop(&mut self) {
        let state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if matches!(*state, State::Waiting(_)) {
            drop(state);
            self.shared.stop.stop();
        }
    }
}

/// Run a future to completion on the current thread, parking it between polls: for tests,
/// examples and programs that have no runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

impl Mutex {
    /// [`acquire`](Mutex::acquire) as a future; the guard comes back [`Unbound`].
    pub fn acquire_async(&self, timeout: Option<Duration>) -> Wait<Option<Unbound<MutexGuard>>> {
        let mutex = self.clone();
        Wait::spawn(move || Ok(mutex.acquire(timeout)?.map(Unbound::new)))
    }
}

impl Swmr {
    /// [`acquire`](Swmr::acquire) as a future; the guard comes back [`Unbound`].
    pub fn acquire_async(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Wait<Option<Unbound<SwmrGuard>>> {
        let lock = self.clone();
        Wait::spawn(move || Ok(lock.acquire(mode, timeout)?.map(Unbound::new)))
    }
}

impl Semaphore {
    /// [`acquire`](Semaphore::acquire) as a future.
    pub fn acquire_async(&self, timeout: Option<Duration>) -> Wait<Option<SlotGuard>> {
        let sem = self.clone();
        Wait::spawn(move || sem.acquire(timeout))
    }
}

impl Event {
    /// [`wait`](Event::wait) as a future.
    pub fn wait_async(&self, timeout: Option<Duration>) -> Wait<bool> {
        let event = self.clone();
        Wait::spawn(move || event.wait(timeout))
    }
}

impl Mailbox {
    /// [`recv`](Mailbox::recv) as a future. Dropped before it completes, no message is taken
    /// (one taken just then goes back to the queue).
    pub fn recv_async(&self, timeout: Option<Duration>) -> Wait<Option<Received>> {
        let mailbox = self.clone();
        Wait::spawn(move || mailbox.recv(timeout))
    }

    /// [`send`](Mailbox::send) as a future, the payload given whole. Dropped before it
    /// completes, the message is withdrawn as a send that times out withdraws it.
    pub fn send_async(&self, payload: Vec<u8>, timeout: Option<Duration>) -> Wait<bool> {
        let mailbox = self.clone();
        Wait::spawn(move || mailbox.send(&payload[..], timeout))
    }
}

/// [`group::wait_empty`](crate::group::wait_empty) as a future.
pub fn wait_empty(path: impl AsRef<Path>, timeout: Option<Duration>, poll: Duration) -> Wait<bool> {
    let path = path.as_ref().to_path_buf();
    Wait::spawn(move || crate::group::wait_empty(&path, timeout, poll))
}

#[cfg(test)]
mod tests;
