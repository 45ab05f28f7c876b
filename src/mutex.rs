/*!
The mutex: an exclusive lock on a file. It is the mutex and the nesting critical section of
Primoz Gabrijelcic's *Let's Cooperate: File system-based synchronisation primitives*, and the
"semaphore file" of Sean M. Burke's *Resource Locking with Semaphore Files* (The Perl Journal,
2002): lock a separate file for as long as you touch the resource, and Perl and Python
programs that `flock` the same file exclude and are excluded by ours.

# Protocol on disk

A mutex `L` is the file `L` plus, where the directory is writable, the holder record
`DIR/.NAME.fsync` (see [`crate::holder`]). To acquire:

1. **open** `L`: create if missing (mode 0666 less umask), never truncate; read-write, else
   read-only;
2. **lock** it with `flock(LOCK_EX)` (interoperates with `flock(1)`, Perl, Python);
3. **verify** that `L` still names the locked inode and that it still has links; if not (a
   holder with `--delete` unlinked it between our open and our lock), close and go to 1. This
   is what keeps racing acquirers from holding locks on two different files of one name;
4. **record**: read the last token `old` (below), write `fence = max(old + 1, now)` with `now`
   the current time in microseconds since the epoch (so tokens still grow where no record
   survives: `--delete`, a read-only directory), never 2^63 or more, `state held`, pid, host,
   command, time.

To release: write `state released` (keeping the fence); with `--delete` instead unlink the
record and then `L` while still holding the lock; then close `L` (the kernel drops the lock).
A holder whose `L` was deleted (or replaced) by someone else while it held it no longer owns the
record: it keeps its fence in `.fsync.fence` (below), then unlinks the record only if it still
holds its own pid and fence and still has that name, and writes nothing to it. (A holder of a new
`L` that read the record in the instant between that check and the unlink loses its record,
not its lock: status reports fall back on the kernel's lock table, and its token is greater
than the kept one.)

The last token `old` is the greatest of those kept where the caller may believe them (the
library's private `fence` module): the record, and the directory's fence file `.fsync.fence` (where a
`--delete` keeps the token its record took away), each only if it is a regular file with one
link owned by the caller or root, and only below 2^63 (the fence file only without a record of
the caller's, or with one just made: a record that survived holds the lock's last token, since
whoever made it new read the fence file); and the caller's private *mark* for this
lock on this host (a file in `$XDG_RUNTIME_DIR/fsync`, `/run/user/UID/fsync`, `/run/fsync` for
root, or `~/.cache/fsync`, named by the lock's directory and name), which keeps a token wherever
neither shared file could (another user's record or fence file, a directory the caller may not
write; it is looked up only where it can matter: with no record of the caller's, a new one,
or tokens ahead of the clock). fsync writes into a fence file only under the same conditions,
re-checked under its lock (and only if no other name reaches the file); another user's files
are never written, and their values never read. So:

- **on one host, for one user** (and root): each token is greater than every token the user
  handed out before for that lock, whatever other users put in the directory, as long as the
  mark's directory exists (without one, as long as no token ran ahead of the clock);
- **between users who do not trust each other**, and **across hosts**: greater than every token
  kept in a file the caller trusts (the record, the fence file: the same user on every host, or
  root), and otherwise greater only by the clock: as long as clocks agree and no token ran
  ahead of them;
- tokens stay below 2^63: a trusted file that says 2^63-1 (only a hand writes that) makes them
  stop there.

Nesting: a process that passes a held lock down to a command (`fsync mutex run`) adds
`DEV:INO:FD:PID` to the environment variable `FSYNC_MUTEX_HELD` (`;`-separated), with `FD`
the inherited descriptor, or `-` when it was not passed down (`--close`). An acquisition of the
same device and inode inside that tree succeeds at once if `FD` still refers to that inode and a
non-blocking `flock(FD, LOCK_EX)` succeeds (so the inherited description really holds it); with
`-` (or an `FD` that no longer holds it), if the lock is busy and that `PID` is alive, it fails
at once instead of deadlocking.

# Conditional regions

A conditional critical region (Asche, *Compound Win32 Synchronization Objects*) is a region one
process at a time executes, entered only when a condition evaluated under the lock holds
([`Mutex::acquire_when`], `fsync mutex run --when`). A holder *enters* the region when it records
a new fence (step 4 above): every acquisition does, except the evaluation of a condition that
turns out false. Whatever a condition looks at must change only inside the region. To acquire
`L` when the condition `C` holds:

1. **lock** `L` (steps 1 to 3 above) without recording: an evaluation is not an entry, and the
   record keeps saying `released` (status reports name the process from the kernel's lock
   table);
2. **read** the token `F`, the greater of the record's fence (opened as step 4 opens it, so that
   it exists from now on where the directory is writable) and the directory's `.fsync.fence`,
   each only where it may be believed (above), the latter only where step 4 reads it too;
3. **evaluate** `C` while holding `L`; if it holds, **enter** (step 4: a fence greater than `F`)
   and return holding the lock;
4. otherwise **release** `L`, writing nothing, and **sleep until a holder enters**: until the
   record's fence, or `.fsync.fence`, believed as in step 2, is greater than `F`, or the record
   the waiter opened has been removed (a `--delete` holder whose token went where the waiter
   cannot see it: a mark). The waiter watches the directory (change notification) and only
   then looks, and looks again at every change; a change to a file it does not believe (another
   user rewriting `.fsync.fence`) makes it look, never evaluate;
5. go to 1: the lock is granted once that holder has left the region; evaluate `C` again.

No lost wake-up: `F` is read while `L` is held, so no entry comes between the evaluation and
`F`; any holder that enters after our release writes a fence greater than `F` (one more than the
record's, or than `.fsync.fence` where a `--delete` removed the record); tokens only grow, so the
look in step 4 sees that entry however late it looks, and change notification makes it look.
Reading `F` after the release instead (a waiter that looks before it has registered) loses the
wake-up of a holder that enters and leaves in between: `models/ccr.pml` shows both. Waiters do
not wake one another: an evaluation that finds `C` false records nothing, so two waiters whose
conditions stay false both sleep; only an entry wakes them.

Holders that leave no record are not seen by step 4: `flock(1)` and other tools, shared,
byte-range and descriptor locks (`-s`, `--range`, `mutex lock --fd`), and another user's fsync
where the record is not theirs to write; and another host's entry wakes nobody (change
notification does not cross hosts). So on a network file system, and where the waiter could open no record to write
(a read-only directory, another user's record), step 4 also ends every poll interval
([`Mutex::poll_interval`]) and the condition is evaluated again; on a local file system with a
record, those holders wake nobody. Nesting: a process to which an enclosing holder passed `L`
down evaluates `C` once; if it is false, waiting would wait for ever (nobody can enter while the
ancestor holds `L`), which is an error (kind `HeldByAncestor`), or a timeout for a wait of zero.

# Threads

Within one process: a thread that asks for a lock it already holds through another guard
would wait for itself for ever (two open file descriptions of one file exclude each other).
That is an error at once (kind `WouldDeadlock`), not a wait, and not nesting: a second guard
that did not own the lock could outlive the first. Other threads of the process wait as other
processes do. The check is exact because a guard is bound to the thread that took it (it is not
`Send`): to hand one to another thread (a pool, `spawn_blocking`), unbind it
([`MutexGuard::unbind`], [`Unbound`](crate::Unbound)); the hold then belongs to no thread, and
every thread, the one that took it included, waits for its release. (Held locks are kept in a
process-wide table of device, inode and binding.)
*/

use std::{
    fs::File,
    os::{fd::RawFd, unix::fs::MetadataExt},
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    fence, held,
    holder::{self, RecordFile},
    platform::{
        dir::Dir,
        fs::{self as pfs, Access},
        lock::{self, Mode},
        procinfo,
    },
    wait::{self, Deadline, Failed, Outcome, Wait},
};

/// The environment variable through which nested acquisitions find an ancestor's lock (see
/// the module docs): a program that passes a held lock down to a command sets it in the
/// command's environment to what [`MutexGuard::held_env`] returns.
pub const HELD_ENV: &str = "FSYNC_MUTEX_HELD";

/// A file-based mutex; cheap to create, holds nothing until acquired.
///
/// The lock is a `flock(2)` lock on the file at the path (created if missing, never truncated
/// or written, so it may be any file, even a directory), taken by one process at a time and
/// by util-linux `flock(1)`, Perl and Python `flock` on the same file alike. Beside it, where
/// the directory is writable, the holder keeps a record (`DIR/.NAME.fsync`) of who holds it and
/// of the [fencing token](MutexGuard::fence). The kernel, or the file server, releases the lock
/// when its holder dies.
///
/// ```
/// use std::time::Duration;
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("counter.lck");
/// let mutex = fsync::Mutex::new(&path);
/// let guard = mutex.acquire(Some(Duration::from_secs(5)))?.expect("nobody else holds it");
/// // ... work on the shared resource ...
/// // Held: another thread or process would wait; this thread would wait for itself, which is
/// // an error at once (see [threads](crate::mutex#threads)).
/// let again = mutex.try_acquire().unwrap_err();
/// assert_eq!(again.kind(), fsync::ErrorKind::WouldDeadlock);
/// drop(guard); // released
/// assert!(mutex.try_acquire()?.is_some());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Mutex {
    path: PathBuf,
    delete: bool,
    poll: Duration,
    command: Option<String>,
    /// A lock file inside a primitive's directory: never reached through a symbolic link.
    internal: bool,
    /// The mode a missing lock file is created with (less the umask).
    create_mode: u32,
}

impl Mutex {
    /// The mutex at `path`. Touches nothing until it is acquired.
    pub fn new(path: impl AsRef<Path>) -> Mutex {
        Mutex {
            path: path.as_ref().to_path_buf(),
            delete: false,
            poll: wait::DEFAULT_POLL,
            command: None,
            internal: false,
            create_mode: pfs::LOCK_FILE_MODE,
        }
    }

    /// The permissions a missing lock file is created with, less the umask (default 0666, as
    /// `flock(1)` creates it). An existing file keeps its own.
    pub fn create_mode(mut self, mode: u32) -> Mutex {
        self.create_mode = mode & 0o7777;
        self
    }

    /// What the holder record names as the work done under the lock (default: this
    /// process's command line), so that reports name a command about to run under it.
    pub fn command(mut self, command: impl Into<String>) -> Mutex {
        self.command = Some(command.into());
        self
    }

    /// Remove the lock file (and its record) on release, while still holding the lock; a
    /// waiter that already opened the old file notices and locks the new one (module docs).
    /// The fencing token survives in the directory's `.fsync.fence`. A lock file that a process
    /// which inherited the lock still holds is kept ([`Released::KeptStillHeld`]).
    pub fn delete_on_release(mut self, yes: bool) -> Mutex {
        self.delete = yes;
        self
    }

    /// How often a wait re-checks on a network file system, where a release on another host
    /// may not wake a blocked call ([`wait::DEFAULT_POLL`] unless set). Unused on local file
    /// systems, where the kernel wakes the waiter.
    pub fn poll_interval(mut self, every: Duration) -> Mutex {
        self.poll = every;
        self
    }

    /// The lock file's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Take the lock if it is free right now; `Ok(None)` if someone holds it. Never waits.
    ///
    /// Errors as [`acquire`](Self::acquire).
    pub fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        self.acquire(Some(Duration::ZERO))
    }

    /// Wait up to `timeout` (`None`: for ever) for the lock; `Ok(None)` if it did not come.
    ///
    /// Blocks the calling thread in `flock(2)` while another holder has the lock: on a local
    /// file system the release wakes it at once; on a network file system it also re-checks
    /// every [`poll_interval`](Self::poll_interval). A cancellation signal (once the program
    /// has called [`wait::install_cancel_handlers`]) ends the wait as a timeout does; use
    /// [`acquire_with`](Self::acquire_with) to tell them apart.
    ///
    /// A thread that already holds this lock (the same file, by any path) through another
    /// guard bound to it gets an error of kind [`ErrorKind::WouldDeadlock`] at once instead of
    /// waiting for itself; other threads, and holds [unbound](crate::Unbound) from their
    /// thread, wait as other processes do. A process whose ancestor holds the lock without
    /// having passed it down gets [`ErrorKind::HeldByAncestor`] (see nesting in the module
    /// docs).
    /// Other errors: [`ErrorKind::NotFound`] (a missing parent directory, a path through a
    /// file, a FIFO or device where the lock file should be), [`ErrorKind::PermissionDenied`]
    /// (the file can be neither created nor opened; on a network file system, an exclusive lock
    /// needs write access to it), [`ErrorKind::NotSupported`] (the file system does not support
    /// locks).
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<Option<MutexGuard>> {
        Ok(self.acquire_with(timeout, |_| {})?.acquired())
    }

    /// Like [`acquire`](Self::acquire), reporting which of deadline and cancellation ended an
    /// unsuccessful wait, and calling `progress` with the time waited when the wait starts
    /// blocking and about once a second after (a program's "still waiting" messages).
    pub fn acquire_with(
        &self,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<MutexGuard>> {
        self.acquire_until(Deadline::after(timeout), progress)
    }

    /// [`acquire_with`](Self::acquire_with) as one step of a longer wait.
    pub(crate) fn acquire_until(
        &self,
        deadline: Deadline,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<MutexGuard>> {
        match self.ancestor()? {
            Ancestor::PassedDown(guard) => return Ok(Outcome::Acquired(*guard)),
            Ancestor::Closed(pid) => {
                if let Outcome::Acquired(g) = self.wait(Deadline::now(), |_| {})? {
                    return Ok(Outcome::Acquired(g));
                }
                if procinfo::pid_alive(pid) {
                    return Err(self.ancestor_deadlock(pid));
                }
            }
            Ancestor::None => {}
        }
        self.wait(deadline, progress)
    }

    /// Wait up to `timeout` (`None`: for ever) for the lock *and* `condition`: enter the
    /// conditional region (module docs, "Conditional regions") once `condition`, called while
    /// the lock is held, returns `true`; `Ok(None)` if that did not happen in time.
    ///
    /// When `condition` is false the lock is released and the thread sleeps until another
    /// holder has entered the region (a holder of this mutex whose condition held, or any plain
    /// [`acquire`](Self::acquire)) and left it, then evaluates again. On a local file system
    /// change notification wakes it; it never polls there. On a network file system, or where
    /// no holder record can be kept, it also evaluates again every
    /// [`poll_interval`](Self::poll_interval), which is also the only way holders that leave no
    /// record (`flock(1)`, shared or byte-range locks) are noticed. `condition` must only read
    /// what holders change inside the region, and must not take this mutex. A timeout of zero
    /// evaluates once. Errors as [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::{fs, path::Path, time::Duration};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let lock = dir.path().join("queue.lck");
    /// # let queue = dir.path().join("queue");
    /// let non_empty = |q: &Path| fs::metadata(q).is_ok_and(|m| m.len() > 0);
    /// let mutex = fsync::Mutex::new(&lock);
    /// // Nothing queued: the condition stays false, and the wait gives up.
    /// let ms = Some(Duration::from_millis(20));
    /// assert!(mutex.acquire_when(|| non_empty(&queue), ms)?.is_none());
    /// // A producer queues a job inside the region...
    /// let producer = mutex.acquire(None)?.expect("free");
    /// fs::write(&queue, "job 1\n").unwrap();
    /// drop(producer);
    /// // ... and a consumer enters when there is one, holding the lock.
    /// let consumer = mutex.acquire_when(|| non_empty(&queue), None)?.expect("a job is queued");
    /// fs::write(&queue, "").unwrap();
    /// drop(consumer);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn acquire_when(
        &self,
        mut condition: impl FnMut() -> bool,
        timeout: Option<Duration>,
    ) -> Result<Option<MutexGuard>> {
        let outcome = self.acquire_when_with(|| Ok::<_, Error>(condition()), timeout, |_| {})?;
        Ok(outcome.acquired())
    }

    /// Like [`acquire_when`](Self::acquire_when), with a condition that may fail and progress
    /// reports as [`acquire_with`](Self::acquire_with) makes them (when a wait for the lock or
    /// for another holder starts blocking, and about once a second after). An error of
    /// `condition` ends the wait at once, with the lock released, and comes back as it is;
    /// the library's errors come as `E::from`.
    pub fn acquire_when_with<E: From<Error>>(
        &self,
        mut condition: impl FnMut() -> Result<bool, E>,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<MutexGuard>, E> {
        let deadline = Deadline::after(timeout);
        match self.ancestor()? {
            Ancestor::PassedDown(guard) => {
                if condition()? {
                    return Ok(Outcome::Acquired(*guard));
                }
                if deadline.passed() {
                    return Ok(Outcome::TimedOut);
                }
                return Err(Error::new(
                    &self.path,
                    ErrorKind::HeldByAncestor,
                    "held for us by an enclosing process, and the condition is false: nobody \
                     can enter to change it while we wait, so waiting would deadlock",
                )
                .into());
            }
            Ancestor::Closed(pid) => {
                let free = self.lock_file(Mode::Exclusive, Deadline::now(), |_| {})?;
                // (Dropped at once: the loop below locks it again.)
                if free.acquired().is_none() && procinfo::pid_alive(pid) {
                    return Err(self.ancestor_deadlock(pid).into());
                }
            }
            Ancestor::None => {}
        }
        loop {
            // 1. lock, without recording
            let Locked { file, network, key } =
                wait::acquired!(self.lock_file(Mode::Exclusive, deadline, &mut progress)?);
            let evaluating = Evaluating::new(file, key);
            // 2. the token before our evaluation
            let record = RecordFile::open(&self.path);
            let seen = match &record {
                Some(r) => match fence::file_matters(Some(r.opened().fence)) {
                    true => r.opened().fence.max(fence::kept(&self.path)),
                    false => r.opened().fence,
                },
                // Another user's record, say: read it as step 4 will.
                None => self.trusted_fence(),
            };
            // 3. evaluate; enter if it holds
            if condition()? {
                let file = evaluating.into_file();
                return Ok(Outcome::Acquired(MutexGuard::new(self, file, network, key)));
            }
            // 4. release, and sleep until a holder enters
            drop(evaluating);
            if deadline.passed() {
                return Ok(Outcome::TimedOut);
            }
            let reevaluate = (network || record.is_none()).then_some(self.poll);
            let entered = self.wait_for_entry(seen, record, reevaluate, deadline, &mut progress);
            wait::acquired!(entered?);
        }
    }

    /// The greatest token a holder of this lock left where we may believe it: a trusted
    /// holder record, or the directory's trusted fence file (see [`crate::fence`]).
    fn trusted_fence(&self) -> u64 {
        match holder::split(&self.path) {
            Some((dir, name)) => holder::trusted_fence_in(&dir, &name).max(fence::kept_in(&dir)),
            None => 0,
        }
    }

    /// Step 4 of a conditional region: sleep until a holder has recorded a fence greater than
    /// `seen` where we may believe it, or has removed `record` (a holder deleting the lock, whose
    /// token may then rest where we cannot see it), or `reevaluate` has passed.
    fn wait_for_entry(
        &self,
        seen: u64,
        record: Option<RecordFile>,
        reevaluate: Option<Duration>,
        deadline: Deadline,
        progress: &mut dyn FnMut(Duration),
    ) -> Result<Outcome<()>> {
        let dir = pfs::parent_dir(&self.path);
        let watch = crate::platform::notify::DirWatch::new(dir)
            .map_err(|e| Error::io(dir, "cannot watch directory", e))?;
        let start = std::time::Instant::now();
        wait::watch_until(
            deadline,
            reevaluate,
            &watch,
            &self.path,
            Some(progress),
            || {
                if reevaluate.is_some_and(|every| start.elapsed() >= every) {
                    return Ok(Some(()));
                }
                if record.as_ref().is_some_and(|r| !r.linked()) {
                    return Ok(Some(()));
                }
                Ok((self.trusted_fence() > seen).then_some(()))
            },
        )
    }

    /// Waiting for a lock an ancestor holds without having passed it down.
    fn ancestor_deadlock(&self, pid: u32) -> Error {
        Error::new(
            &self.path,
            ErrorKind::HeldByAncestor,
            format!(
                "already held by an ancestor process (pid {pid}) that did not pass it down (it \
                 kept it from its children, or the descriptor was closed on the way); waiting \
                 here would deadlock"
            ),
        )
    }

    fn wait(
        &self,
        deadline: Deadline,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<MutexGuard>> {
        // The lock's directory and record are opened before the wait, so that once the lock
        // is granted only reads and writes of open files stand between the release and the
        // next holder's command: on a network file system each open is a round trip to the
        // server.
        let prepared = Prepared::open(&self.path);
        let locked = self.lock_file(Mode::Exclusive, deadline, progress)?;
        Ok(locked.map(|l| MutexGuard::prepared(self, l.file, l.network, l.key, prepared)))
    }

    /// Take a plain flock(2) lock on the file in `mode`, exactly as `flock(1)` takes it:
    /// steps 1 to 3 of the protocol, writing nothing beside the lock (no holder record, no
    /// fencing token, no nesting), so that it may lock a script in a directory where nothing
    /// else belongs (`fsync flock`). With [`Mode::Shared`] it is a shared lock, as `flock -s`
    /// takes: any number of shared holders together, none while an exclusive holder has it.
    /// Waits and errors as [`acquire_with`](Self::acquire_with);
    /// a mutex set to [`delete_on_release`](Self::delete_on_release) is refused
    /// ([`ErrorKind::Invalid`]).
    pub fn acquire_plain_with(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<PlainGuard>> {
        if self.delete {
            return Err(Error::new(
                &self.path,
                ErrorKind::Invalid,
                "a lock without a holder record is never deleted on release",
            ));
        }
        let locked = self.lock_file(mode, Deadline::after(timeout), progress)?;
        Ok(locked.map(|Locked { file, key, .. }| {
            held::add(key);
            PlainGuard {
                bound: std::marker::PhantomData,
                path: self.path.clone(),
                file,
                key,
                mode,
                acquired: std::time::Instant::now(),
            }
        }))
    }

    /// Open and lock the file in `mode`, per the protocol in the module docs (steps 1 to 3).
    fn lock_file(
        &self,
        mode: Mode,
        deadline: Deadline,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<Locked>> {
        let first = self.open_stat()?;
        let meta = &first.meta;
        if held::held_by_this_thread(held::Key::new(meta, mode)) {
            return Err(held::deadlock(&self.path));
        }
        if self.delete && !meta.is_file() {
            // A path of the wrong kind for what was asked, as a directory for a byte range.
            let kind = match meta.is_dir() {
                true => "a directory",
                false => "a device",
            };
            return Err(Error::new(
                &self.path,
                ErrorKind::WrongKind,
                format!(
                    "is {kind}: it can be the lock, but delete on release removes only lock files"
                ),
            ));
        }
        let network = pfs::fs_kind(&first.file).network;
        let mut open = Some(first);
        let spec = Wait::for_lock(deadline, network, self.poll);
        let mut locker = wait::Locker::new(network);
        let outcome = wait::wait_for(spec, &mut progress, |block| -> Result<_, Failed> {
            let opened = if let Some(o) = open.take() {
                o
            } else {
                locker.forget();
                self.open_stat()?
            };
            match locker.flock(&opened.file, mode, block) {
                Ok(true) => {}
                Ok(false) => {
                    open = Some(opened);
                    return Ok(None);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    open = Some(opened);
                    return Err(e.into());
                }
                Err(e) => return Err(lock_error(&self.path, e, network, opened.access).into()),
            }
            // Unlinked under us: reopen and lock again. By the path: a lookup in the directory
            // opened before would not see that directory itself replaced.
            let named = names(&self.path, None, (opened.meta.dev(), opened.meta.ino()))?;
            Ok(named.then_some(opened))
        });
        if let Some(o) = &open {
            locker.settle(&outcome, &o.file);
        }
        let outcome = outcome.map_err(|f| f.naming(&self.path, "cannot wait for lock"))?;
        let Opened { file, meta, .. } = wait::acquired!(outcome);
        Ok(Outcome::Acquired(Locked {
            file,
            network,
            key: held::Key::new(&meta, mode),
        }))
    }

    /// A lock inside a primitive's directory (a group's `join.lock`): a symbolic link there is
    /// never followed, since only fsync makes these files.
    pub(crate) fn internal(mut self) -> Mutex {
        self.internal = true;
        self
    }

    fn open(&self) -> Result<(File, Access)> {
        match self.internal {
            true => pfs::open_internal_lock(&self.path),
            false => pfs::open_lock_file_mode(&self.path, pfs::Purpose::Flock, self.create_mode),
        }
    }

    /// [`open`](Self::open), with the opened file's status (taken before the lock, where it
    /// costs no one any waiting: on a network file system each status is a round trip).
    fn open_stat(&self) -> Result<Opened> {
        let (file, access) = self.open()?;
        let meta = (file.metadata()).map_err(|e| Error::io(&self.path, "cannot stat", e))?;
        Ok(Opened { file, access, meta })
    }

    /// Whether an ancestor process holds this same lock (see the module docs on nesting).
    fn ancestor(&self) -> Result<Ancestor> {
        let Ok(value) = std::env::var(HELD_ENV) else {
            return Ok(Ancestor::None);
        };
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return Ok(Ancestor::None);
        };
        for entry in value.split(';') {
            let Some(e) = HeldEntry::parse(entry) else {
                continue;
            };
            if (e.dev, e.ino) != (meta.dev(), meta.ino()) {
                continue;
            }
            match e.fd {
                Some(fd) if fd_holds(fd, e.dev, e.ino) => {
                    return Ok(Ancestor::PassedDown(Box::new(MutexGuard::nested(self, fd))));
                }
                // Not passed down (--close), or the descriptor was closed on the way down:
                // waiting could be waiting for ourselves.
                _ => return Ok(Ancestor::Closed(e.pid)),
            }
        }
        Ok(Ancestor::None)
    }
}

/// The lock file as [`Mutex::open_stat`] opened it, not locked yet.
struct Opened {
    file: File,
    /// How it was opened (read-only where we may not write), for the error of a lock refused.
    access: Access,
    meta: std::fs::Metadata,
}

/// What [`Mutex::lock_file`] took: the locked file, whether it is on a network file system,
/// and the lock's key in the process's table of held locks.
struct Locked {
    file: File,
    network: bool,
    key: held::Key,
}

/// The lock held while a condition is evaluated (a conditional region's steps 1 to 3): in the
/// process's table, so that the condition cannot wait for its own thread's lock; released,
/// writing nothing, when dropped.
struct Evaluating {
    file: Option<File>,
    key: held::Key,
}

impl Evaluating {
    fn new(file: File, key: held::Key) -> Evaluating {
        held::add(key);
        Evaluating {
            file: Some(file),
            key,
        }
    }

    /// The lock, to enter with (out of the table: the guard puts it back).
    fn into_file(mut self) -> File {
        held::remove(self.key);
        self.file.take().expect("taken once")
    }
}

impl Drop for Evaluating {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            held::remove(self.key);
        }
    }
}

enum Ancestor {
    None,
    PassedDown(Box<MutexGuard>),
    Closed(u32),
}

/// One `DEV:INO:FD:PID` entry of [`HELD_ENV`].
pub(crate) struct HeldEntry {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) fd: Option<RawFd>,
    pub(crate) pid: u32,
}

impl HeldEntry {
    pub(crate) fn parse(s: &str) -> Option<HeldEntry> {
        let mut it = s.split(':');
        let dev = it.next()?.parse().ok()?;
        let ino = it.next()?.parse().ok()?;
        let fd = match it.next()? {
            "-" => None,
            n => Some(n.parse().ok()?),
        };
        let pid = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(HeldEntry { dev, ino, fd, pid })
    }
}

/// Does descriptor `fd` (inherited) refer to this inode and hold an exclusive lock on it?
fn fd_holds(fd: RawFd, dev: u64, ino: u64) -> bool {
    // Our own descriptor of the same open file description: the same lock, and one that no
    // one closes under us (fails if the number is not open).
    let Ok(own) = pfs::duplicate(fd) else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&own)) else {
        return false;
    };
    if (st.st_dev, st.st_ino) != (dev, ino) {
        return false;
    }
    matches!(lock::flock(&own, Mode::Exclusive, false), Ok(true))
}

/// Whether the lock's name still names the file `held` (device and inode) that we opened and
/// locked: then it also still has a link. By the path, following a symbolic link as opening the
/// lock does; where the caller has the lock's directory opened (a holder's release), first by a
/// lookup there (one round trip on a network file system, where the path costs one per
/// component), and by the path only if that says no (the directory may have been replaced: a
/// group removed and made again).
pub(crate) fn names(
    path: &Path,
    dir: Option<(&Dir, &std::ffi::OsStr)>,
    held: (u64, u64),
) -> Result<bool> {
    if let Some((dir, name)) = dir
        && dir.identity_following(name).is_ok_and(|id| id == held)
    {
        return Ok(true);
    }
    match pfs::identity_at(None, path) {
        Ok(now) => Ok(now == held),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, "cannot stat lock file", e)),
    }
}

fn lock_error(path: &Path, e: std::io::Error, network: bool, access: Access) -> Error {
    if network && access == Access::ReadOnly && e.raw_os_error() == Some(nix::libc::EBADF) {
        return Error::new(
            path,
            ErrorKind::PermissionDenied,
            "an exclusive lock on this network file system needs write access to the lock file",
        );
    }
    if matches!(
        e.raw_os_error(),
        Some(nix::libc::ENOLCK | nix::libc::EOPNOTSUPP)
    ) {
        return Error::io(path, "this file system does not support locks", e);
    }
    Error::io(path, "cannot lock", e)
}

/// A lock's directory and holder record, opened (where they exist) before its lock is
/// taken; the record is read, or created, only under the lock.
struct Prepared {
    dir: Option<(Dir, std::ffi::OsString)>,
    record: Option<RecordFile>,
}

impl Prepared {
    /// Before the lock: open what exists, create nothing.
    fn open(lock: &Path) -> Prepared {
        let dir = holder::split(lock);
        let record = dir
            .as_ref()
            .and_then(|(dir, name)| RecordFile::open_existing_in(dir.try_clone().ok()?, name));
        Prepared { dir, record }
    }

    /// Under the lock: the record, created if missing. One opened before that has no links
    /// any more was removed by a holder that deleted the lock while we waited (`--delete`),
    /// and is opened again.
    fn current(self) -> (Option<Dir>, Option<RecordFile>) {
        let record = match self.record {
            Some(r) if r.linked() => Some(r),
            _ => self
                .dir
                .as_ref()
                .and_then(|(dir, name)| RecordFile::open_in(dir.try_clone().ok()?, name)),
        };
        (self.dir.map(|(dir, _)| dir), record)
    }
}

/// The permissions a lock file is created with unless asked otherwise ([`Mutex::create_mode`]),
/// less the umask: 0666, as `flock(1)`, Perl's `sysopen` and `touch` create files.
pub use crate::platform::fs::LOCK_FILE_MODE;

mod fd;
mod guard;
mod status;

pub(crate) use fd::inherited_fd;
pub(crate) use fd::{Lockable, check_lockable_fd, fd_file};
pub use fd::{fd_still_held, lock_fd, lock_fd_with, unlock_fd};
pub use guard::{MutexGuard, PlainGuard, Released};
pub use status::{
    Change, FenceWithheld, Status, Watch, status, wait_for_change, wait_for_change_with, watch,
};

#[cfg(test)]
mod tests;
