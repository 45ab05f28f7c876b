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
ancestor holds `L`), which is an error (kind `Unavailable`), or a timeout for a wait of zero.

Within one process: a thread that asks for a lock it already holds through another guard
would wait for itself for ever (two open file descriptions of one file exclude each other).
That is an error at once (kind `Unavailable`), not a wait, and not nesting: a second guard that
did not own the lock could outlive the first. Other threads of the process wait as other
processes do. (Held locks are kept in a process-wide table of device, inode and thread.)
*/

use std::{
    fs::File,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd},
        unix::fs::MetadataExt,
    },
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    fence, held,
    holder::{self, Holder, OwnRecord, RecordFile},
    platform::{
        dir::Dir,
        fs::{self as pfs, Access},
        lock::{self, Mode},
        procinfo,
    },
    probe,
    wait::{self, Deadline, Failed, Outcome, Wait},
};

/// The environment variable through which nested acquisitions find an ancestor's lock (see
/// the module docs): a program that passes a held lock down to a command sets it in the
/// command's environment to what [`MutexGuard::pass_down`] returns.
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
/// // an error at once.
/// let again = mutex.try_acquire().unwrap_err();
/// assert_eq!(again.kind(), fsync::ErrorKind::Unavailable);
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
    /// guard gets an error of kind [`ErrorKind::Unavailable`] at once instead of waiting for
    /// itself; other threads wait as other processes do. So does a process whose ancestor
    /// holds the lock without having passed it down (see nesting in the module docs).
    /// Other errors: [`ErrorKind::NotFound`] (a missing parent directory, a path through a
    /// file, a FIFO or device where the lock file should be), [`ErrorKind::PermissionDenied`]
    /// (the file can be neither created nor opened; on a network file system, an exclusive lock
    /// needs write access to it), [`ErrorKind::Unavailable`] (the file system does not support
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
                    ErrorKind::Unavailable,
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
            let (file, network, key) =
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
            ErrorKind::Unavailable,
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
        Ok(locked
            .map(|(file, network, key)| MutexGuard::prepared(self, file, network, key, prepared)))
    }

    /// Take a shared lock on the file instead, as `flock -s` does: any number of shared
    /// holders together, none while an exclusive holder has it. It is a plain flock(2) lock:
    /// no holder record, no fencing token and no nesting. Waits and errors as
    /// [`acquire_with`](Self::acquire_with); a mutex set to
    /// [`delete_on_release`](Self::delete_on_release) is refused ([`ErrorKind::Invalid`]).
    pub fn acquire_shared_with(
        &self,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<PlainGuard>> {
        self.acquire_plain_with(Mode::Shared, timeout, progress)
    }

    /// Take a plain flock(2) lock on the file in `mode`, exactly as `flock(1)` takes it:
    /// steps 1 to 3 of the protocol, writing nothing beside the lock (no holder record, no
    /// fencing token, no nesting), so that it may lock a script in a directory where nothing
    /// else belongs (`fsync flock`). Waits and errors as [`acquire_with`](Self::acquire_with);
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
        Ok(locked.map(|(file, _, key)| {
            held::add(key);
            PlainGuard {
                path: self.path.clone(),
                file,
                key,
                mode,
            }
        }))
    }

    /// Open and lock the file in `mode`, per the protocol in the module docs (steps 1 to 3):
    /// the locked file, whether it is on a network file system, and its in-process key.
    fn lock_file(
        &self,
        mode: Mode,
        deadline: Deadline,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<(File, bool, held::Key)>> {
        let first = self.open_stat()?;
        let meta = &first.2;
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
        let network = pfs::fs_kind(&first.0).network;
        let mut open = Some(first);
        let spec = Wait::for_lock(deadline, network, self.poll);
        let mut locker = wait::Locker::new(network);
        let outcome = wait::wait_for(spec, &mut progress, |block| -> Result<_, Failed> {
            let (file, access, meta) = if let Some(f) = open.take() {
                f
            } else {
                locker.forget();
                self.open_stat()?
            };
            match locker.flock(&file, mode, block) {
                Ok(true) => {}
                Ok(false) => {
                    open = Some((file, access, meta));
                    return Ok(None);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    open = Some((file, access, meta));
                    return Err(e.into());
                }
                Err(e) => return Err(lock_error(&self.path, e, network, access).into()),
            }
            // Unlinked under us: reopen and lock again. By the path: a lookup in the directory
            // opened before would not see that directory itself replaced.
            let named = names(&self.path, None, (meta.dev(), meta.ino()))?;
            Ok(named.then_some((file, meta)))
        });
        if let Some((file, ..)) = &open {
            locker.settle(&outcome, file);
        }
        let outcome = outcome.map_err(|f| f.naming(&self.path, "cannot wait for lock"))?;
        let (file, meta) = wait::acquired!(outcome);
        Ok(Outcome::Acquired((
            file,
            network,
            held::Key::new(&meta, mode),
        )))
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
    fn open_stat(&self) -> Result<(File, Access, std::fs::Metadata)> {
        let (file, access) = self.open()?;
        let meta = (file.metadata()).map_err(|e| Error::io(&self.path, "cannot stat", e))?;
        Ok((file, access, meta))
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
    let Ok(st) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    if (st.st_dev, st.st_ino) != (dev, ino) {
        return false;
    }
    matches!(lock::flock(&fd, Mode::Exclusive, false), Ok(true))
}

/// [`MutexGuard::still_held`] for a descriptor the caller locked exclusively with [`lock_fd`]
/// (not for a shared lock, which the check would try to convert).
pub fn fd_still_held(fd: BorrowedFd<'_>) -> bool {
    lock::still_held(fd, Mode::Exclusive)
}

/// Whether the lock's name still names the file `held` (device and inode) that we opened and
/// locked: then it also still has a link. By the path, following a symbolic link as opening the
/// lock does; where the caller has the lock's directory opened (a holder's release), first by a
/// lookup there (one round trip on a network file system, where the path costs one per
/// component), and by the path only if that says no (the directory may have been replaced: a
/// group removed and made again).
pub(crate) fn names(path: &Path, dir: Option<(&Dir, &str)>, held: (u64, u64)) -> Result<bool> {
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
    dir: Option<(Dir, String)>,
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

/// Proof of holding a [`Mutex`]; releases it when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MutexGuard {
    path: PathBuf,
    /// `None` for a nested acquisition: the ancestor's descriptor holds the lock.
    file: Option<File>,
    /// For a nested guard, our own descriptor of the ancestor's open file description (the
    /// ancestor's holds the lock).
    nested_fd: Option<OwnedFd>,
    delete: bool,
    /// The fencing token and who holds the lock, as recorded beside it.
    record: OwnRecord,
    /// The lock's directory, as opened for the record.
    dir: Option<Dir>,
    network: bool,
    /// Keep the fence in the directory's fence file when deleting (not for the internal
    /// locks of other primitives, whose directories must be left empty).
    keep_fence: bool,
    /// This holding in the process's table (`None` when nested).
    in_process: Option<held::Key>,
}

impl MutexGuard {
    fn new(mutex: &Mutex, file: File, network: bool, key: held::Key) -> MutexGuard {
        let prepared = Prepared::open(&mutex.path);
        Self::prepared(mutex, file, network, key, prepared)
    }

    /// The guard for the lock `file` just locked, with its directory and record opened
    /// before (step 4 of the protocol).
    fn prepared(
        mutex: &Mutex,
        file: File,
        network: bool,
        key: held::Key,
        prepared: Prepared,
    ) -> MutexGuard {
        held::add(key);
        // A device (`/dev/null`) lies in a directory of the system's, where nothing of ours
        // belongs: no record, and the token grows with the clock.
        let (dir, record) = match key.device() {
            false => prepared.current(),
            true => (None, None),
        };
        let name = mutex.path.file_name().and_then(|n| n.to_str());
        let lock_dir = dir.as_ref().zip(name);
        let old = match (&record, lock_dir) {
            (Some(r), _) => r.read().fence,
            (None, Some((dir, name))) => holder::trusted_fence_in(dir, name),
            (None, None) => 0,
        };
        let now = procinfo::now_micros();
        let kept = match fence::file_matters(record.as_ref().map(|_| old)) {
            true => dir.as_ref().map_or(0, fence::kept_in),
            false => 0, // a round trip to the file server saved on every hand-over
        };
        // Our mark holds tokens handed out while no record of ours could: it matters only
        // without a record of ours, with one just made (fence 0), or where tokens run ahead of
        // the clock. Otherwise the record's token is the last, or the clock is ahead of them
        // all, and a run saves the mark's look-up (a dozen system calls).
        let mark = match record.is_none() || old == 0 || old.max(kept) >= now {
            true => lock_dir.map_or(0, |(dir, name)| fence::mark(dir, name)),
            false => 0,
        };
        // Greater than the last token kept where we may believe it (the record, the directory's
        // fence file where a `--delete` left it, our own mark), and never behind the clock:
        // tokens still grow where nothing could be kept, between hosts whose clocks agree.
        let fence = fence::next(old.max(kept).max(mark), now);
        if record.is_none() {
            // No record of ours keeps it: our mark does.
            if let Some((dir, name)) = lock_dir {
                fence::raise_mark(dir, name, fence);
            }
        }
        let command = mutex.command.clone().unwrap_or_else(procinfo::own_cmdline);
        MutexGuard {
            path: mutex.path.clone(),
            file: Some(file),
            nested_fd: None,
            delete: mutex.delete,
            record: OwnRecord::held(record, fence, Holder::this_process(now, command)),
            dir,
            network,
            keep_fence: !mutex.internal,
            in_process: Some(key),
        }
    }

    fn nested(mutex: &Mutex, fd: RawFd) -> MutexGuard {
        let fence = std::env::var("FSYNC_FENCE")
            .ok()
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        MutexGuard {
            path: mutex.path.clone(),
            file: None,
            nested_fd: pfs::duplicate(fd).ok(),
            delete: false,
            record: OwnRecord::none(fence),
            dir: None,
            // The ancestor's descriptor, named through /proc: the file system of its file.
            network: pfs::fs_kind_of_path(Path::new(&format!("/proc/self/fd/{fd}"))).network,
            keep_fence: false,
            in_process: None,
        }
    }

    /// Whether the lock file lies on a network file system, where a living holder can lose
    /// its lock (partition, expired lease) and should check with [`still_held`](Self::still_held).
    pub fn on_network(&self) -> bool {
        self.network
    }

    /// Whether the lock is still ours: the descriptor still works, and a non-blocking
    /// re-lock of our own open file description succeeds (a no-op while we hold it; it fails
    /// once another holder has it, and the file server answers EBADFD/EIO/ESTALE to a client
    /// whose locks it has dropped). A nested guard answers for its ancestor's descriptor.
    pub fn still_held(&self) -> bool {
        self.held_fd()
            .is_some_and(|fd| lock::still_held(fd, Mode::Exclusive))
    }

    /// The fencing token: greater than that of every earlier holder of this lock. Pass it to
    /// the resource the lock protects, which then refuses writes with a smaller token than one
    /// it has seen: a holder that lost its lock without knowing (a network partition, a long
    /// pause) cannot overwrite its successor's work. It is the current time in microseconds
    /// or one more than the last recorded token, whichever is greater, and below 2^63; so
    /// tokens grow even where no record can be kept (a read-only directory), as long as clocks
    /// agree. Only files of the caller or root are believed; the module docs say what holds on
    /// one host and across hosts. A nested guard has its ancestor's token (from `FSYNC_FENCE`,
    /// or 0).
    pub fn fence(&self) -> u64 {
        self.record.fence()
    }

    /// The lock file's path, as the mutex was given it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this acquisition was satisfied by an ancestor's lock (nesting).
    pub fn is_nested(&self) -> bool {
        self.file.is_none()
    }

    /// On a network file system, the check that the lock is still ours (through an
    /// ancestor's descriptor for a nested guard).
    pub fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        // Whether the file system is a network one was learnt when the lock was taken.
        crate::LossCheck::on(self.network, self.held_fd()?, Mode::Exclusive)
    }

    /// The descriptor that holds the lock (for a nested guard: one on the same open file
    /// description as the ancestor's).
    fn held_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.file {
            Some(f) => Some(f.as_fd()),
            None => self.nested_fd.as_ref().map(|fd| fd.as_fd()),
        }
    }

    /// Let the lock survive `exec` into children (`true`), as `flock(1)` does, so that it stays
    /// held while they run even if this process dies; and return the value of
    /// [`HELD_ENV`] the children need for nesting. With `false` the lock stays close-on-exec,
    /// and the value tells children that an ancestor holds it without having passed it down
    /// (their acquisitions then fail at once instead of deadlocking).
    pub fn pass_down(&self, inherit: bool) -> Result<String> {
        let Some(file) = &self.file else {
            return Ok(std::env::var(HELD_ENV).unwrap_or_default()); // nested
        };
        lock::set_inheritable(file, inherit)
            .map_err(|e| Error::io(&self.path, "cannot pass lock down", e))?;
        let fd = file.as_raw_fd();
        let (dev, ino) = self.held_file(fd)?;
        let fd_text = if inherit {
            fd.to_string()
        } else {
            "-".to_string()
        };
        let own = format!("{}:{}:{}:{}", dev, ino, fd_text, std::process::id());
        Ok(match std::env::var(HELD_ENV) {
            Ok(prev) if !prev.is_empty() => format!("{prev};{own}"),
            _ => own,
        })
    }

    /// Move the lock's descriptor above `floor` (the same open file, so the same lock): a dying
    /// process's descriptors are closed in ascending order, so a lock passed down with others
    /// is then released after them (a group's `join.lock` after its `gate` and registration, so
    /// that a joiner it lets in finds them released too). Best effort.
    pub(crate) fn raise_descriptor(&mut self, floor: RawFd) {
        let Some(file) = &self.file else { return };
        if file.as_raw_fd() > floor {
            return;
        }
        if let Ok(fd) = pfs::duplicate_from(file.as_raw_fd(), floor + 1) {
            self.file = Some(File::from(fd));
        }
    }

    /// Decide at release time whether the lock file goes (compound primitives that learn only
    /// while holding the lock whether they were the last user).
    pub(crate) fn set_delete_on_release(&mut self, yes: bool) {
        self.delete = yes && !self.is_nested();
    }

    /// Record the command that runs under the lock, for status reports ([`status`]): for
    /// programs that run a command under the lock. (Name it at acquisition with
    /// [`Mutex::command`], or call this with `None` just before starting it, so that reports
    /// never show a running command as ours; then again with its pid.)
    pub fn set_child(&mut self, pid: Option<u32>, command: String) {
        self.record.set_child(pid, command);
    }

    /// Release now, saying what became of the lock file and reporting failures (dropping the
    /// guard releases too, silently).
    pub fn release(mut self) -> Result<Released> {
        self.release_inner()
    }

    /// The device and inode of the file we hold (open as `fd`), as learnt when it was locked:
    /// a stat is a round trip to the server on a network file system.
    fn held_file(&self, fd: RawFd) -> Result<(u64, u64)> {
        if let Some(key) = &self.in_process {
            Ok(key.file())
        } else {
            let st = nix::sys::stat::fstat(fd).map_err(|e| {
                Error::io(&self.path, "cannot stat lock file", std::io::Error::from(e))
            })?;
            Ok((st.st_dev, st.st_ino))
        }
    }

    /// Keep our token for the next holder where our record no longer does (see
    /// [`crate::fence::keep`]).
    fn keep_fence(&self) {
        if !self.keep_fence {
            return;
        }
        let Some(name) = self.path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        match &self.dir {
            Some(dir) => fence::keep(dir, name, self.record.fence()),
            None => {
                if let Some((dir, _)) = holder::split(&self.path) {
                    fence::keep(&dir, name, self.record.fence());
                }
            }
        }
    }

    /// Whether the lock's name still names the file we hold, open as `file` (see [`names`]).
    fn still_named(&self, file: &File) -> Result<bool> {
        let held = self.held_file(file.as_raw_fd())?;
        let name = self.path.file_name().and_then(|n| n.to_str());
        names(&self.path, self.dir.as_ref().zip(name), held)
    }

    fn release_inner(&mut self) -> Result<Released> {
        let Some(file) = self.file.take() else {
            return Ok(Released::Kept);
        };
        let mut result = Ok(Released::Kept);
        // A process the command left running may hold the lock through an inherited
        // descriptor: deleting LOCK then would let the next acquirer lock a new file.
        let still_held = self.delete && procinfo::description_shared(file.as_fd());
        if still_held {
            result = Ok(Released::KeptStillHeld);
        }
        if self.delete && !still_held {
            // The fence outlives the record in the directory's fence file, so that tokens
            // keep growing after the lock is gone (whatever the next holder's clock says).
            self.keep_fence();
            self.record.remove();
            // Unlink only the file we hold: if the path now names another inode, leave it.
            if matches!(self.still_named(&file), Ok(true)) {
                result = match crate::platform::fs::remove_file(&self.path) {
                    Ok(()) => Ok(Released::Deleted),
                    // Removed meanwhile (by the command): what was asked for.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Released::Deleted),
                    Err(e) => Err(Error::io(&self.path, "cannot delete lock file", e)),
                };
            }
        } else if matches!(self.still_named(&file), Ok(false)) {
            // LOCK was deleted (or replaced) while we held it: the record now belongs to
            // whoever locks that name next. Keep the fence for them, and remove the record
            // unless someone has written it since we did.
            self.keep_fence();
            self.record.remove_if_unchanged();
        } else {
            self.record.released();
        }
        if let Some(key) = self.in_process.take() {
            held::remove(key);
        }
        drop(file);
        result
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// Proof of holding a plain lock on a [`Mutex`]'s file ([`Mutex::acquire_plain_with`],
/// [`Mutex::acquire_shared_with`]); releases it when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct PlainGuard {
    path: PathBuf,
    file: File,
    key: held::Key,
    mode: Mode,
}

impl PlainGuard {
    /// Let commands started from now on inherit the lock (`inherit`), or not: an inherited
    /// lock stays held while any process that inherited it runs.
    pub fn pass_down(&self, inherit: bool) -> Result<()> {
        lock::set_inheritable(&self.file, inherit)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }

    /// On a network file system, the check that the lock is still ours.
    pub fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(&self.file, self.mode)
    }
}

impl Drop for PlainGuard {
    fn drop(&mut self) {
        held::remove(self.key);
    }
}

/// What [`MutexGuard::release`] did with the lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Released {
    /// Left in place: not asked to delete it, or the path names another file by now.
    Kept,
    /// Deleted, as asked.
    Deleted,
    /// Left in place although asked to delete it: another process (one the command left
    /// running) still holds the lock through a descriptor it inherited.
    KeptStillHeld,
}

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Whether any lock is held on the file.
    pub held: bool,
    /// Who holds it, where that can be known.
    pub holder: Option<Holder>,
    /// The last fencing token handed out, if recorded.
    pub fence: Option<u64>,
    /// The holder the record names where the kernel's lock table contradicts it: the kernel
    /// names the processes that hold the lock, and the record's process is not among them (a
    /// record another user planted, say). Never the [`holder`](Status::holder), which is then
    /// the kernel's. `None` where the record agrees, says nothing, or cannot be checked (a
    /// network file system).
    pub untrusted_record: Option<Holder>,
}

/// Is the mutex at `path` held, and by whom? Held means any lock on the file: `flock`, POSIX or
/// OFD, on any byte range ([`RangeLock`](crate::RangeLock), other tools' `fcntl` locks). Never
/// creates the lock file, and on a local file system never touches the lock (it reads
/// `/proc/locks`); on a network file system it probes with a non-blocking lock, released at
/// once, and cannot always name the holder.
///
/// The kernel's lock table is believed over the holder record: where it names the processes
/// that hold the lock (local file systems), a record whose process is not one of them, or is
/// on another host, is reported as [`untrusted_record`](Status::untrusted_record) and the
/// holder is the process the kernel names. (A record of this host whose processes are all dead
/// is merely stale, and left out.)
pub fn status(path: &Path) -> Result<Status> {
    let Some(file) = pfs::open_if_exists(path)? else {
        return Ok(Status {
            held: false,
            holder: None,
            fence: None,
            untrusted_record: None,
        });
    };
    let listed = probe::listed(path, &file, probe::Kinds::All)?;
    let (held, kernel_pid) = match &listed {
        Some(l) => (!l.locks.is_empty(), l.first_pid()),
        None => (held_by_probe(path, &file)?, None),
    };
    let record = holder::read(path);
    let fence = record.as_ref().map(|r| r.fence).filter(|&f| f > 0);
    if !held {
        return Ok(Status {
            held,
            holder: None,
            fence,
            untrusted_record: None,
        });
    }
    // The processes the kernel lists as holding the lock, where it names any.
    let kernel_pids: Vec<u32> = (listed.iter())
        .flat_map(|l| l.locks.iter().filter_map(|k| k.pid))
        .collect();
    let host = procinfo::hostname();
    let mut untrusted_record = None;
    let recorded = record.and_then(|r| r.holder).filter(|h| {
        let local = h.host == host;
        let alive =
            local && (procinfo::pid_alive(h.pid) || h.child.is_some_and(procinfo::pid_alive));
        if kernel_pids.is_empty() {
            // The kernel names nobody (a network file system, or locks it lists without a
            // pid): a record of another host cannot be checked, and is trusted; one of this
            // host must name a live process.
            return !local || alive;
        }
        let listed = |pid: u32| kernel_pids.contains(&pid);
        if local && (listed(h.pid) || h.child.is_some_and(listed)) {
            return alive;
        }
        // A local file is locked by processes of this host only: the record disagrees with
        // the kernel. Unless it is just stale (its processes of this host died), say so.
        if !local || alive {
            untrusted_record = Some(h.clone());
        }
        false
    });
    // The pid the kernel lists took the lock; it may have exited and left the lock to a
    // process that inherited the descriptor (a daemon the command left): name a live holder.
    let kernel_pid = match &listed {
        Some(l) if recorded.is_none() => {
            procinfo::live_lock_holder(file.as_fd(), kernel_pid).or(kernel_pid)
        }
        _ => kernel_pid,
    };
    let holder = recorded.or_else(|| kernel_pid.map(Holder::local));
    Ok(Status {
        held,
        holder,
        fence,
        untrusted_record,
    })
}

/// Whether someone holds the lock, by a probe: exclusive, or shared where a read-only file
/// allows no exclusive lock (NFS).
fn held_by_probe(path: &Path, file: &File) -> Result<bool> {
    match probe::held(file, Mode::Exclusive) {
        Err(e) if e.raw_os_error() == Some(nix::libc::EBADF) => probe::held(file, Mode::Shared),
        other => other,
    }
    .map_err(|e| Error::io(path, "cannot test lock", e))
}

/// Lock a descriptor the caller already has open (`exec 9>>lock; fsync mutex lock --fd 9`,
/// with [`inherited_fd`]): exclusively, or `shared`, waiting up to `timeout` as
/// [`Mutex::acquire`] does and re-checking every `poll` on a network file system. The lock
/// belongs to the open file description, so it outlives this process; nothing releases it but
/// [`unlock_fd`] or the last close of the description. No holder record, fencing token or
/// nesting. Errors: [`ErrorKind::NotFound`] if `fd` is not open on a regular file or a
/// directory, [`ErrorKind::Unavailable`] where the file system does not support locks. (On NFS
/// an exclusive lock needs a descriptor open for writing: `exec 9>>lock`, not `9<lock`.)
pub fn lock_fd(
    fd: BorrowedFd<'_>,
    shared: bool,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<Outcome<()>> {
    lock_fd_with(fd, shared, timeout, poll, |_| {})
}

/// Like [`lock_fd`], calling `progress` with the time waited when the wait starts blocking and
/// about once a second after.
pub fn lock_fd_with(
    fd: BorrowedFd<'_>,
    shared: bool,
    timeout: Option<Duration>,
    poll: Duration,
    progress: impl FnMut(Duration),
) -> Result<Outcome<()>> {
    let path = fd_file(fd.as_raw_fd());
    check_lockable_fd(fd.as_raw_fd(), &path)?;
    let network = pfs::fs_kind(&fd).network;
    let mode = if shared {
        Mode::Shared
    } else {
        Mode::Exclusive
    };
    let spec = Wait::for_lock(Deadline::after(timeout), network, poll);
    let mut locker = wait::Locker::new(network);
    let got = wait::wait_for(spec, progress, |block| {
        Ok(locker.flock(&fd, mode, block)?.then_some(()))
    });
    locker.settle(&got, &fd);
    got.map_err(|e| lock_error(&path, e, network, Access::ReadWrite))
}

/// Release the lock held through a descriptor (a no-op if it holds none). Errors as
/// [`lock_fd`].
pub fn unlock_fd(fd: BorrowedFd<'_>) -> Result<()> {
    let path = fd_file(fd.as_raw_fd());
    check_lockable_fd(fd.as_raw_fd(), &path)?;
    lock::unlock(&fd).map_err(|e| Error::io(&path, "cannot unlock", e))
}

/// A descriptor of our own for descriptor number `number`, which this process inherited
/// (`exec 9>>lock` in the shell): a close-on-exec duplicate. Locks belong to the open file
/// description both share, so [`lock_fd`] and [`unlock_fd`] on it lock and unlock `number`.
/// Fails if `number` is not open, or is open on something that cannot be a lock file (a pipe,
/// a socket, a block device).
pub fn inherited_fd(number: RawFd) -> Result<OwnedFd> {
    let path = fd_path(number);
    check_lockable_fd(number, &path)?;
    pfs::duplicate(number).map_err(|e| Error::io(&path, "cannot duplicate descriptor", e))
}

/// What a descriptor that can be locked is open on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lockable {
    File,
    Directory,
    /// A character device (`/dev/null`): every process that opens it locks the same inode,
    /// as with `flock /dev/null`.
    Device,
}

/// That `fd` is open on a regular file, a directory or a character device, the things
/// `flock(1)` locks: a lock on a pipe or a socket would exclude nobody who opened it by name.
/// Returns which it is.
pub(crate) fn check_lockable_fd(fd: RawFd, path: &Path) -> Result<Lockable> {
    use nix::sys::stat::SFlag;
    let st = nix::sys::stat::fstat(fd).map_err(|e| {
        Error::new(path, ErrorKind::NotFound, "not an open file descriptor").with_errno(e as i32)
    })?;
    let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => return Ok(Lockable::File),
        SFlag::S_IFDIR => return Ok(Lockable::Directory),
        SFlag::S_IFCHR => return Ok(Lockable::Device),
        SFlag::S_IFIFO => "a pipe",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFLNK => "a symbolic link",
        _ => "of an unknown kind",
    };
    let cause = format!("is {kind}, not a lock file");
    Err(Error::new(path, ErrorKind::NotFound, cause))
}

/// A name for a descriptor in messages: the file it is open on (a duplicate's number would
/// mean nothing to whoever passed the original), or `fd N`.
pub(crate) fn fd_file(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_else(|_| format!("fd {fd}").into())
}

/// A name for a descriptor number in messages: `fd N (FILE)`, or `fd N`.
fn fd_path(fd: RawFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).map_or_else(
        |_| PathBuf::from(format!("fd {fd}")),
        |p| PathBuf::from(format!("fd {fd} ({})", p.display())),
    )
}

/// Block until the status of the mutex at `path` differs from `seen` (a holder came or went),
/// the timeout passes, or a cancellation signal arrives. fsync holders write their record and
/// close the lock file after writing, which wakes us at once (change notification); other tools
/// (`flock(1)`) leave no trace we can be notified of, so this also re-checks every `poll`.
/// [`watch`] turns this into an iterator over acquisitions and releases.
pub fn wait_for_change(
    path: &Path,
    seen: &Status,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<Outcome<Status>> {
    change_by(path, seen, Deadline::after(timeout), poll)
}

fn change_by(
    path: &Path,
    seen: &Status,
    deadline: Deadline,
    poll: Duration,
) -> Result<Outcome<Status>> {
    let dir = pfs::parent_dir(path);
    let watch = crate::platform::notify::DirWatch::new(dir)
        .map_err(|e| Error::io(dir, "cannot watch directory", e))?;
    wait::watch_until(deadline, Some(poll), &watch, path, None, || {
        let now = status(path)?;
        Ok((now != *seen).then_some(now))
    })
}

/// Watch the mutex at `path` for up to `timeout` (`None`: for ever), re-checking every `poll`
/// where nothing wakes us (as [`wait_for_change`]): an iterator over its acquisitions and
/// releases, in order, that ends when the time is up or a cancellation signal arrives
/// ([`Watch::interrupted`] tells which). [`Watch::status`] is the state it started in, then the
/// latest seen. A new holder that took over without a visible gap comes as a release followed by
/// an acquisition.
///
/// ```
/// use std::time::Duration;
/// use fsync::mutex::{self, Change};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("l");
/// let mut watch = mutex::watch(&path, Some(Duration::from_secs(5)), fsync::wait::DEFAULT_POLL)?;
/// assert!(!watch.status().held);
/// let guard = fsync::Mutex::new(&path).acquire(None)?.expect("free");
/// assert!(matches!(watch.next(), Some(Ok(Change::Acquired(_)))));
/// drop(guard);
/// assert!(matches!(watch.next(), Some(Ok(Change::Released(_)))));
/// # Ok::<(), fsync::Error>(())
/// ```
pub fn watch(path: impl AsRef<Path>, timeout: Option<Duration>, poll: Duration) -> Result<Watch> {
    let deadline = Deadline::after(timeout);
    let path = path.as_ref().to_path_buf();
    let seen = status(&path)?;
    Ok(Watch {
        path,
        seen,
        pending: std::collections::VecDeque::new(),
        deadline,
        poll,
        end: wait::WatchEnd::default(),
    })
}

/// A change [`Watch`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The lock was taken; the status just after.
    Acquired(Status),
    /// The lock was released; the status of the holding that ended.
    Released(Status),
}

/// The acquisitions and releases of a mutex, as they happen ([`watch`]).
#[derive(Debug)]
pub struct Watch {
    path: PathBuf,
    seen: Status,
    pending: std::collections::VecDeque<Change>,
    deadline: Deadline,
    poll: Duration,
    end: wait::WatchEnd,
}

impl Watch {
    /// The state the watch started in, and after each change the latest seen.
    pub fn status(&self) -> &Status {
        &self.seen
    }

    /// The cancellation signal that ended the watch, if one did (`None` while it runs, and
    /// when its time ran out).
    pub fn interrupted(&self) -> Option<i32> {
        self.end.interrupted()
    }
}

impl Iterator for Watch {
    type Item = Result<Change>;

    fn next(&mut self) -> Option<Result<Change>> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Some(Ok(change));
            }
            if self.end.ended() {
                return None;
            }
            let waited = change_by(&self.path, &self.seen, self.deadline, self.poll);
            let current = match self.end.pass(waited) {
                Ok(Some(st)) => st,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            // The record of one holding fills in as it goes (kernel pid, then command, then
            // child), so a holding is told apart by its pid.
            let pid = |st: &Status| st.holder.as_ref().map(|h| h.pid);
            let changed = self.seen.held != current.held || pid(&self.seen) != pid(&current);
            if self.seen.held && changed {
                self.pending.push_back(Change::Released(self.seen.clone()));
            }
            if current.held && changed {
                self.pending.push_back(Change::Acquired(current.clone()));
            }
            self.seen = current;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each holding comes as an acquisition then a release, in order; a watch whose time is up
    /// ends, and says it was not interrupted.
    #[test]
    fn a_watch_sees_each_holding_in_order_and_ends_when_its_time_is_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let poll = wait::DEFAULT_POLL;
        let mut changes = watch(&path, Some(Duration::from_mins(1)), poll).unwrap();
        assert!(!changes.status().held);
        for _ in 0..3 {
            let guard = Mutex::new(&path).acquire(None).unwrap().unwrap();
            match changes.next() {
                Some(Ok(Change::Acquired(st))) => {
                    assert!(st.held);
                    assert_eq!(st.holder.map(|h| h.pid), Some(std::process::id()));
                }
                other => panic!("expected an acquisition, got {other:?}"),
            }
            drop(guard);
            assert!(matches!(changes.next(), Some(Ok(Change::Released(_)))));
        }
        let mut over = watch(&path, Some(Duration::ZERO), poll).unwrap();
        assert!(over.next().is_none());
        assert_eq!(over.interrupted(), None);
        assert!(over.next().is_none(), "an ended watch stays ended");
    }

    /// A thread that asks again for a lock it holds fails at once instead of waiting for
    /// itself; another thread of the process waits for it as another process would, and gets
    /// it once the first guard is gone.
    #[test]
    fn the_same_thread_cannot_deadlock_on_its_own_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let held = Mutex::new(&path).acquire(None).unwrap().unwrap();
        for again in [&path, &link] {
            let err = Mutex::new(again).acquire(None).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
            assert!(
                err.to_string().contains("already held by this thread"),
                "{err}"
            );
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let other = std::thread::spawn({
            let path = path.clone();
            move || {
                tx.send("waiting").unwrap();
                let g = Mutex::new(&path).acquire(None).unwrap().unwrap();
                tx.send("acquired").unwrap();
                drop(g);
            }
        });
        assert_eq!(rx.recv().unwrap(), "waiting");
        // The other thread blocks in the kernel (the lock table lists its request) and cannot
        // have the lock while this one does.
        let meta = std::fs::metadata(&path).unwrap();
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        while procinfo::flock_waiters(meta.dev(), meta.ino()) != Some(1) {
            assert!(
                std::time::Instant::now() < give_up,
                "the other thread never blocked"
            );
            std::thread::yield_now();
        }
        assert!(rx.try_recv().is_err());
        drop(held);
        assert_eq!(rx.recv().unwrap(), "acquired");
        other.join().unwrap();
        // Released everywhere: this thread may take it again.
        drop(Mutex::new(&path).try_acquire().unwrap().unwrap());
    }

    #[test]
    fn fences_grow_and_status_sees_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let m = Mutex::new(&path);
        let g1 = m.try_acquire().unwrap().unwrap();
        let f1 = g1.fence();
        let st = status(&path).unwrap();
        assert!(st.held);
        assert_eq!(st.holder.unwrap().pid, std::process::id());
        drop(g1);
        assert!(!status(&path).unwrap().held);
        let g2 = m.try_acquire().unwrap().unwrap();
        assert!(g2.fence() > f1);
    }

    /// A consumer thread waits in `acquire_when` until a producer has entered and made its
    /// condition true; a false evaluation records nothing; a failing condition releases.
    #[test]
    fn acquire_when_sleeps_until_a_holder_makes_the_condition_true() {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering::SeqCst},
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let items = Arc::new(AtomicUsize::new(0));
        let mutex = Mutex::new(&path);
        // Once: false, and nothing recorded (no entry, so no new fence).
        drop(mutex.try_acquire().unwrap().unwrap());
        let fence = status(&path).unwrap().fence;
        let mut evaluations = 0;
        let no = mutex.acquire_when(
            || {
                evaluations += 1;
                false
            },
            Some(Duration::ZERO),
        );
        assert!(no.unwrap().is_none());
        assert_eq!((evaluations, status(&path).unwrap().fence), (1, fence));
        // A consumer that sleeps until an item is there.
        let (tx, rx) = std::sync::mpsc::channel();
        let consumer = std::thread::spawn({
            let (path, items) = (path.clone(), items.clone());
            move || {
                let mut evaluations = 0;
                let got = Mutex::new(&path).acquire_when_with(
                    || {
                        evaluations += 1;
                        Ok::<_, Error>(items.load(SeqCst) > 0)
                    },
                    None,
                    |_| {
                        let _ = tx.send(());
                    },
                );
                let guard = got.unwrap().acquired().unwrap();
                items.fetch_sub(1, SeqCst);
                (guard.fence(), evaluations)
            }
        });
        rx.recv().unwrap(); // it evaluated, released, and sleeps
        let producer = mutex.acquire(None).unwrap().unwrap();
        items.fetch_add(1, SeqCst);
        let produced = producer.fence();
        drop(producer);
        let (consumed, evaluations) = consumer.join().unwrap();
        assert!(consumed > produced);
        assert_eq!((evaluations, items.load(SeqCst)), (2, 0));
        // A condition that fails ends the wait with its error, the lock released.
        let failed = mutex.acquire_when_with(
            || Err(Error::new(&path, ErrorKind::Corrupt, "cannot tell")),
            None,
            |_| {},
        );
        assert_eq!(failed.unwrap_err().kind(), ErrorKind::Corrupt);
        assert!(mutex.acquire_when(|| true, None).unwrap().is_some());
    }

    #[test]
    fn delete_on_release_removes_lock_and_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let g = Mutex::new(&path)
            .delete_on_release(true)
            .try_acquire()
            .unwrap()
            .unwrap();
        assert!(path.exists() && holder::record_path(&path).exists());
        g.release().unwrap();
        assert!(!path.exists() && !holder::record_path(&path).exists());
    }

    #[test]
    fn held_entries_parse() {
        let e = HeldEntry::parse("2049:77:5:123").unwrap();
        assert_eq!((e.dev, e.ino, e.fd, e.pid), (2049, 77, Some(5), 123));
        assert!(HeldEntry::parse("2049:77:-:9").unwrap().fd.is_none());
        assert!(HeldEntry::parse("junk").is_none());
    }
}
