/*!
The single-writer-multiple-reader lock that never starves a writer: the SWMR guard of Primoz
Gabrijelcic's *Let's Cooperate: File system-based synchronisation primitives*, and the
reader/writer lock of Ruediger R. Asche's *Compound Win32 Synchronization Objects* (MSDN, 1994).

# Protocol on disk

A lock `DIR/NAME` is three files:

- `NAME` itself: readers hold a **shared** `flock`, the writer an **exclusive** one, exactly as
  `flock -s` and `flock -x` would, so those tools interoperate on it;
- `DIR/.NAME.turnstile`: everyone who enters takes it **exclusively** and keeps it only while
  waiting for `NAME`, releasing it as soon as `NAME` is had;
- `DIR/.NAME.writers`: a writer holds a **shared** lock on it from arrival until it has `NAME`,
  so that `status` can count waiting writers.

Missing files are created (mode 0666 less the umask), never truncated or written.

Reader: **r1** open `NAME`; **r2** lock the turnstile (exclusive), *verify*; **r3** if `NAME`
no longer names the file opened in r1, open it again; **r4** lock `NAME` (shared), *verify*;
**r5** release the turnstile; read; release `NAME`.

Writer: **w1** open `NAME`; **w2** lock `.writers` (shared), *verify*; **w3** lock the
turnstile (exclusive), *verify*; **w4** as r3; **w5** lock `NAME` (exclusive), *verify*;
**w6** release the turnstile and `.writers`; write; release `NAME`.

*Verify* (after every lock): the name still names the file locked (same device and inode, and
at least one link); if not, a deletion (below) removed it between our open and our lock:
release everything and start again at r1 or w1. A process that locked a removed file so never
goes on with it, which is what keeps two writers, or a reader and a writer, from holding locks on
two different files of one name. Whoever holds the live turnstile has the live `NAME` to lock
(a deletion holds the turnstile, and removes `NAME` before it), so after r3 and w4 the verify of
`NAME` passes.

Why writers are not starved: Linux `flock` grants a shared lock to a newcomer even while an
exclusive request waits, which is how `flock -s` readers starve `flock -x`. Here a waiting writer
holds the turnstile, so newly arriving readers queue on the turnstile instead of joining the
readers inside; the writer gets `NAME` as soon as the readers already inside leave. Readers hold
the turnstile only for the instant it takes to get their shared lock, so readers do not exclude
each other. Crashes at any step release everything (all three are kernel locks).

Readers using `flock -s` directly bypass the turnstile and can still starve a writer; a read-only
directory where the turnstile cannot be created (and does not exist) degrades to plain
`flock` semantics. There is no read-to-write upgrade: `flock` converts by dropping the shared lock
first, which is not atomic, so we offer none rather than a silent one.

With a byte range ([`crate::range`]), readers and the writer take OFD locks on that range of
`NAME` instead of `flock` (never both kinds on one file); the turnstile is still whole-file, so
a waiting writer holds back new readers of every range.

# Deleting (`--delete`)

A reader or writer that asked for it ([`Swmr::delete_on_release`]) removes the three files
when it leaves, if nobody else is inside, waiting, or arriving; otherwise it leaves them to
whoever leaves last. Leaving is releasing everything (the command has exited); a wait that gives
up (timeout, cancellation) leaves too. Then the *deletion attempt*, which holds nothing at first
and never waits for a lock except in d5:

- **d1** open the turnstile (creating it, as entering does, so that every removal happens under
  the live turnstile) and lock it exclusively without waiting: busy, go to d5; *verify* (not
  live: start d1 again);
- **d2** open `NAME` if it exists and lock it exclusively without waiting: busy means someone is
  inside, who leaves after us: release everything and stop, keeping the files; *verify*;
- **d3** the same for `.writers` if it exists: busy means a writer arrives: go to d5; *verify*;
- **d4** remove `NAME`, then the turnstile, then `.writers` (each only if its name still names
  the file we hold, and only a regular file with one link that, in a sticky directory, belongs
  to us or the directory's owner: never another user's file, never through a link), and
  release. `NAME` goes first: until the turnstile goes too, nobody can lock a new turnstile, so
  whoever holds the live turnstile holds the live `NAME`;
- **d5** release everything but the busy file, and wait until it is free (a blocking exclusive
  lock on it, let go at once), then go to d1; stop, keeping the files, as soon as anyone holds
  `NAME` (the kernel's lock table, read without locking; not on network file systems), or after
  a second. A waiter that holds the turnstile either enters (and will leave after us) or gives up
  (and makes its own attempt), so waiting for it keeps the last to leave from missing the other.

Deletion never removes a file that someone holds (d1 to d3 hold all three exclusively), nor
one someone is waiting for (the turnstile, or `.writers`, is then busy). A process that opened
a file before its removal and locks it after fails *verify* and starts again on new files. A
waiting writer keeps its turnstile, so deletion never costs it its place: the attempt takes
`NAME` only while holding the turnstile itself. `models/swmr_delete.pml` checks mutual
exclusion, that nothing is left behind once everyone has left (unless the last crashed), and
that a writer holding the turnstile is never starved, with deletions, give-ups and crashes.

Files stay when the lock was passed down to a process that still runs (it still holds `NAME`
through the inherited description), when another user's file is in one of the three places, or
when `flock(1)` users hold `NAME`. A process killed while inside deletes nothing: the next user
with `--delete` who leaves last does.
*/

use std::{
    ffi::{OsStr, OsString},
    fs::File,
    os::{fd::AsFd, unix::fs::MetadataExt},
    path::{Path, PathBuf},
    time::Duration,
};

use nix::sys::stat::SFlag;

use crate::{
    error::{Error, ErrorKind, Result},
    held,
    holder::Holder,
    platform::{
        dir::{self, Dir},
        fs::{self as pfs, Access},
        lock::{self, Mode},
        procinfo,
    },
    probe,
    range::{ByteRange, RangeLock},
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

/// A reader/writer lock at a path: any number of readers together, or one writer alone; a
/// waiting writer holds back readers who arrive after it, so a stream of readers cannot starve
/// it. The lock file is created if missing and never written; `flock -s` and `flock -x` on it
/// interoperate (module docs). A thread that asks for a lock that its own guard excludes (a
/// writer that asks to read) would wait for itself: that is an error at once
/// ([`ErrorKind::WouldDeadlock`]); other threads, and guards [unbound](crate::Unbound) from
/// their thread, wait as other processes do.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("db.lck");
/// let lock = fsync::Swmr::new(&path);
/// let r1 = lock.read(None)?.unwrap();
/// let r2 = lock.read(None)?.unwrap(); // readers share
/// let writer = lock.clone();
/// let zero = Some(std::time::Duration::ZERO);
/// let waits = std::thread::spawn(move || writer.write(zero).map(|g| g.is_some()));
/// assert!(!waits.join().unwrap()?); // the writer waits
/// drop((r1, r2));
/// assert!(lock.write(Some(std::time::Duration::ZERO))?.is_some());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Swmr {
    path: PathBuf,
    poll: Duration,
    range: Option<ByteRange>,
    delete: bool,
}

/// Proof of holding a [`Swmr`] lock for reading or writing; released on drop (removing the
/// lock's files if it was acquired with [`Swmr::delete_on_release`] and nobody else uses them).
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SwmrGuard {
    path: PathBuf,
    /// `None` once released.
    file: Option<File>,
    /// This holding in the process's table (see `held`).
    key: held::Key,
    mode: Mode,
    /// Held on a byte range (OFD locks), which lock-loss checks do not cover.
    ranged: bool,
    delete: bool,
    poll: Duration,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    acquired: std::time::Instant,
    /// Not `Send`: see [`Unbound`](crate::Unbound).
    bound: crate::platform::binding::Bound,
}

held::bindable!(SwmrGuard, key);

/// What [`SwmrGuard::release`] did with the lock's files (the same as for a semaphore and a
/// group lock).
pub use crate::teardown::Released;

/// A reader/writer lock keeps no record ([`set_child`](crate::Guard::set_child) records
/// nothing); a byte range is not re-checked ([`loss_check`](crate::Guard::loss_check) is
/// `None`: the check locks the whole file).
impl crate::Guard for SwmrGuard {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        match self.ranged {
            false => crate::LossCheck::of(self.file(), self.mode, self.acquired),
            true => None,
        }
    }

    fn pass_down(&mut self) -> Result<()> {
        lock::set_inheritable(self.file(), true)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }
}

impl SwmrGuard {
    fn file(&self) -> &File {
        self.file.as_ref().expect("held until released")
    }

    /// Whether this is the writer's (exclusive) lock rather than a reader's.
    pub fn is_writer(&self) -> bool {
        self.mode == Mode::Exclusive
    }

    /// Release now, saying what became of the lock's files and reporting failures to delete
    /// them (dropping the guard releases too, silently). With
    /// [`delete_on_release`](Swmr::delete_on_release) this may wait up to a second for a
    /// process that holds the turnstile to enter or give up (module docs, d5).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db.lck");
    /// use fsync::swmr::{Released, Swmr};
    /// let lock = Swmr::new(&path).delete_on_release(true);
    /// let (r1, r2) = (lock.read(None)?.unwrap(), lock.read(None)?.unwrap());
    /// assert_eq!(r1.release()?, Released::KeptInUse); // r2 is still inside
    /// assert_eq!(r2.release()?, Released::Deleted); // the last to leave removes the files
    /// assert!(!path.exists());
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn release(mut self) -> Result<Released> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<Released> {
        let Some(file) = self.file.take() else {
            return Ok(Released::Kept);
        };
        held::remove(self.key);
        if !self.delete {
            return Ok(Released::Kept);
        }
        // A process the command left running may hold the lock through an inherited
        // descriptor: it is still inside.
        if procinfo::description_shared(file.as_fd()) {
            return Ok(Released::KeptStillHeld);
        }
        drop(file); // leave: the lock goes with our description
        delete_files(&self.path, self.poll)
    }
}

impl Drop for SwmrGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    crate::holder::side_path(path, suffix)
}

impl Swmr {
    /// The lock at `path`. Touches nothing until acquired.
    pub fn new(path: impl AsRef<Path>) -> Swmr {
        Swmr {
            path: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            range: None,
            delete: false,
        }
    }

    /// Lock only this byte range of the file, with OFD locks (see [`crate::range`]); readers
    /// and writers of disjoint ranges do not exclude each other. Not with
    /// [`delete_on_release`](Self::delete_on_release).
    pub fn range(mut self, range: Option<ByteRange>) -> Swmr {
        self.range = range;
        self
    }

    /// How often a wait re-checks on a network file system, where another host's release
    /// wakes nobody ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Swmr {
        self.poll = every;
        self
    }

    /// Remove the lock's three files when leaving, if nobody else is inside, waiting or
    /// arriving (otherwise whoever of them leaves last with this set removes them); leaving
    /// includes a wait that gives up. Processes that opened the files before their removal
    /// notice and take new ones: readers and writers keep excluding each other, and a waiting
    /// writer keeps its place (module docs, "Deleting"). Never removes a link, or another
    /// user's file in a sticky directory. Acquiring a directory, or a byte range, with it set
    /// is refused ([`ErrorKind::NotFound`], [`ErrorKind::Invalid`]).
    pub fn delete_on_release(mut self, yes: bool) -> Swmr {
        self.delete = yes;
        self
    }

    /// Take a shared (reader) lock, waiting up to `timeout` (`None`: for ever) while a writer
    /// is inside or waiting; `Ok(None)` if it did not come. Errors as
    /// [`acquire`](Self::acquire).
    pub fn read(&self, timeout: Option<Duration>) -> Result<Option<SwmrGuard>> {
        self.acquire(Mode::Shared, timeout)
    }

    /// Take the exclusive (writer) lock, waiting up to `timeout` (`None`: for ever) until the
    /// readers inside have left; `Ok(None)` if it did not come. Errors as
    /// [`acquire`](Self::acquire).
    pub fn write(&self, timeout: Option<Duration>) -> Result<Option<SwmrGuard>> {
        self.acquire(Mode::Exclusive, timeout)
    }

    /// Take a reader's lock if no writer is inside or waiting right now; `Ok(None)` otherwise.
    /// Never waits.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db.lck");
    /// let lock = fsync::Swmr::new(&path);
    /// let writer = lock.try_write()?.expect("free");
    /// let other = lock.clone();
    /// let busy = std::thread::spawn(move || other.try_read().unwrap().is_none());
    /// assert!(busy.join().unwrap()); // busy: the writer is inside
    /// drop(writer);
    /// let reader = lock.try_read()?.expect("free again");
    /// assert!(lock.try_read()?.is_some()); // readers share
    /// let other = lock.clone();
    /// let busy = std::thread::spawn(move || other.try_write().unwrap().is_none());
    /// assert!(busy.join().unwrap()); // but exclude the writer
    /// assert!(lock.try_write().is_err()); // (this thread would wait for its own reader)
    /// drop(reader);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn try_read(&self) -> Result<Option<SwmrGuard>> {
        self.read(Some(Duration::ZERO))
    }

    /// Take the writer's lock if nobody is inside right now; `Ok(None)` otherwise. Never
    /// waits (see [`try_read`](Self::try_read) for an example).
    pub fn try_write(&self) -> Result<Option<SwmrGuard>> {
        self.write(Some(Duration::ZERO))
    }

    /// Acquire in `mode` ([`Mode::Shared`] for a reader, [`Mode::Exclusive`] for the writer),
    /// following the protocol in the module docs, waiting up to `timeout` (`None`: for ever);
    /// `Ok(None)` if it did not come: [`read`](Self::read) or [`write`](Self::write).
    pub fn acquire(&self, mode: Mode, timeout: Option<Duration>) -> Result<Option<SwmrGuard>> {
        Ok(self.acquire_with(mode, timeout, |_| {})?.acquired())
    }

    /// Like [`acquire`](Self::acquire), telling a timeout from a cancellation, and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    ///
    /// The thread blocks in the kernel (`flock`, or an OFD lock with a byte range), so a
    /// release on this host wakes it at once; on a network file system it also re-checks every
    /// [`poll_interval`](Self::poll_interval). Errors: [`ErrorKind::NotFound`] or
    /// [`ErrorKind::PermissionDenied`] if the lock file cannot be created or opened (a
    /// writer on a network file system needs write access to it), [`ErrorKind::NotSupported`]
    /// where the file system does not support locks.
    pub fn acquire_with(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<SwmrGuard>> {
        if self.delete && self.range.is_some() {
            return Err(Error::new(
                &self.path,
                ErrorKind::Invalid,
                "a byte range is never deleted on release",
            ));
        }
        let outcome = self.lock_all(mode, Deadline::after(timeout), progress)?;
        if self.delete && !matches!(outcome, Outcome::Acquired(_)) {
            // Giving up is leaving too: we may have been the last one waiting. Best effort.
            let _ = delete_files(&self.path, self.poll);
        }
        Ok(outcome.map(|(file, key)| {
            held::add(key);
            SwmrGuard {
                bound: std::marker::PhantomData,
                path: self.path.clone(),
                file: Some(file),
                key,
                mode,
                ranged: self.range.is_some(),
                delete: self.delete,
                poll: self.poll,
                acquired: std::time::Instant::now(),
            }
        }))
    }

    /// Open `NAME` (r1, w1), checking what a lock of `mode` needs of it.
    fn open(&self, mode: Mode) -> Result<(File, Access, bool)> {
        let purpose = match self.range {
            None => pfs::Purpose::Flock,
            Some(_) => pfs::Purpose::Fcntl,
        };
        let (file, access) = pfs::open_lock_file(&self.path, purpose)?;
        let network = pfs::fs_kind(&file).network;
        if network && mode == Mode::Exclusive && access == Access::ReadOnly {
            return Err(Error::new(
                &self.path,
                ErrorKind::PermissionDenied,
                "an exclusive lock on this network file system needs write access to the lock file",
            ));
        }
        if self.delete && is_dir(&self.path, &file)? {
            // A path of the wrong kind for what was asked, as a directory for a byte range.
            return Err(Error::new(
                &self.path,
                ErrorKind::WrongKind,
                "is a directory: it can be the lock, but delete on release removes only lock files",
            ));
        }
        Ok((file, access, network))
    }

    /// Steps r1 to r5 (w1 to w6) of the module docs: the locked `NAME`, once had.
    fn lock_all(
        &self,
        mode: Mode,
        deadline: Deadline,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<(File, held::Key)>> {
        let (mut file, mut access, network) = self.open(mode)?;
        // Ours in this thread already, through another guard: we would wait for ourselves.
        let key = |file: &File| -> Result<held::Key> {
            let meta = file
                .metadata()
                .map_err(|e| Error::io(&self.path, "cannot stat lock file", e))?;
            Ok(match self.range {
                None => held::Key::new(&meta, mode),
                Some(r) => held::Key::range(&meta, mode, r.start, r.len),
            })
        };
        let mut held_as = key(&file)?;
        if held::held_by_this_thread(held_as) {
            return Err(held::deadlock(&self.path));
        }
        let step = |progress: &mut dyn FnMut(Duration), file: &File, mode, deadline| {
            let spec = Wait::for_lock(deadline, network, self.poll);
            wait::flock(spec, progress, file, mode, &self.path)
        };
        let (writers_path, turnstile_path) = (
            side_file(&self.path, ".writers"),
            side_file(&self.path, ".turnstile"),
        );
        loop {
            let writers = match mode {
                Mode::Exclusive => optional_side(&writers_path)?,
                Mode::Shared => None,
            };
            if let Some(w) = &writers {
                // Only a deletion of fsync's holds it exclusively, for an instant; but whoever
                // may open it may hold it for ever: the caller's deadline.
                wait::acquired!(step(&mut progress, w, Mode::Shared, deadline)?);
                if !names(&writers_path, w)? {
                    continue;
                }
            }
            let turnstile = optional_side(&turnstile_path)?;
            if let Some(t) = &turnstile {
                wait::acquired!(step(&mut progress, t, Mode::Exclusive, deadline)?);
                if !names(&turnstile_path, t)? {
                    continue;
                }
            }
            if !crate::mutex::names(&self.path, None, held_as.file())? {
                (file, access, _) = self.open(mode)?; // r3, w4
                held_as = key(&file)?;
            }
            let got = match self.range {
                None => step(&mut progress, &file, mode, deadline)?,
                Some(r) => RangeLock::new(&self.path, r)
                    .poll_interval(self.poll)
                    .lock_file(&file, access, mode, deadline, &mut progress)?,
            };
            wait::acquired!(got);
            if !crate::mutex::names(&self.path, None, held_as.file())? {
                // Removed under us (only where there is no turnstile): start again.
                (file, access, _) = self.open(mode)?;
                held_as = key(&file)?;
                continue;
            }
            drop(turnstile); // others may queue again
            return Ok(Outcome::Acquired((file, held_as)));
        }
    }
}

/// Open (creating) a side file; `None` where it cannot exist (read-only directory).
fn optional_side(path: &Path) -> Result<Option<File>> {
    match pfs::open_lock_file(path, pfs::Purpose::Flock) {
        Ok((f, _)) => {
            widen(path, &f);
            Ok(Some(f))
        }
        Err(e) if matches!(e.kind(), ErrorKind::PermissionDenied) => {
            // Left out only where we may not write the directory: there we cannot take part
            // in the lock's fairness, but one made before the directory was shared is named.
            pfs::unshared_at(path).map_or(Ok(None), Err)
        }
        Err(e) => Err(e),
    }
}

/// A side file of ours made before its directory was shared: widened for those who may now
/// write the directory ([`pfs::widen`]), never tightened: made 0666 less the umask, they are
/// the lock's, as `NAME` is. Never a file reached through a link (opening follows one).
fn widen(path: &Path, file: &File) {
    let Ok(meta) = file.metadata() else { return };
    let dir = pfs::parent_dir(path);
    let dir_mode = || std::fs::metadata(dir).map_or(0, |m| m.mode());
    let sole = || pfs::sole_link_at(path, file, meta.nlink());
    pfs::widen(file, (meta.mode(), meta.uid()), dir_mode, sole);
}

fn is_dir(path: &Path, file: &File) -> Result<bool> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io(path, "cannot stat", e))?;
    Ok(meta.is_dir())
}

/// *Verify*: does `path` still name the file `file` has open (and so has it a link)? The
/// mutex's check ([`crate::mutex::names`]), by the path.
fn names(path: &Path, file: &File) -> Result<bool> {
    let held = file
        .metadata()
        .map_err(|e| Error::io(path, "cannot stat lock file", e))?;
    crate::mutex::names(path, None, (held.dev(), held.ino()))
}

/// The names of a lock's three files in their directory.
struct Names {
    lock: OsString,
    turnstile: OsString,
    writers: OsString,
}

impl Names {
    /// `None` for a path that names no file (`/`, `..`): such locks are kept.
    fn of(path: &Path) -> Option<Names> {
        let name = |p: &Path| p.file_name().map(OsStr::to_os_string);
        Some(Names {
            lock: name(path)?,
            turnstile: name(&side_file(path, ".turnstile"))?,
            writers: name(&side_file(path, ".writers"))?,
        })
    }
}

/// How one pass of the deletion attempt (d1 to d4) ended.
enum Pass {
    Done(Released),
    /// The turnstile or `.writers` is busy: wait for it (d5).
    Busy(File),
}

/// The deletion attempt of the module docs (d1 to d5), after leaving `path`.
fn delete_files(path: &Path, poll: Duration) -> Result<Released> {
    let Some(names) = Names::of(path) else {
        return Err(Error::new(
            path,
            ErrorKind::Invalid,
            "names no file (it ends in / or ..): not deleting it",
        ));
    };
    let Some(dir) = Dir::top(pfs::parent_dir(path), false, "cannot open directory")? else {
        return Ok(Released::Deleted); // gone with its directory
    };
    let network = pfs::fs_kind_of_path(dir.path()).network;
    // d5 between passes, up to the grace; a cancellation ends only the wait.
    crate::teardown::attempt(&dir, path, poll, || {
        Ok(match delete_pass(&dir, &names, network)? {
            Pass::Done(released) => crate::teardown::Pass::Done(released),
            Pass::Busy(_) if name_held(&dir, &names.lock) => {
                crate::teardown::Pass::Done(Released::KeptInUse)
            }
            Pass::Busy(f) => crate::teardown::Pass::Busy(f),
        })
    })
}

/// Steps d1 to d4, without waiting.
fn delete_pass(dir: &Dir, names: &Names, network: bool) -> Result<Pass> {
    let lock_now = |file: &File, name: &OsStr| {
        lock::flock(file, Mode::Exclusive, false)
            .map_err(|e| Error::io(&dir.join(name), "cannot lock", e))
    };
    // A file that was removed between our open and our lock: another deletion came first, and
    // newcomers made new files; look again (a few times: each needs a whole deletion between).
    for _ in 0..8 {
        // d1
        no_link(dir, &names.turnstile)?;
        let turnstile = dir.open_or_create(&names.turnstile)?;
        if !lock_now(&turnstile, &names.turnstile)? {
            return Ok(Pass::Busy(turnstile));
        }
        let Some(t) = crate::teardown::names(dir, &names.turnstile, &turnstile)? else {
            continue;
        };
        // d2
        let lock = open_entry(dir, &names.lock, network)?;
        let mut n = None;
        if let Some(file) = &lock {
            if !lock_now(file, &names.lock)? {
                return Ok(Pass::Done(Released::KeptInUse)); // someone is inside
            }
            match crate::teardown::names(dir, &names.lock, file)? {
                Some(st) => n = Some(st),
                None => continue,
            }
        }
        // d3
        let writers = open_entry(dir, &names.writers, network)?;
        let mut w = None;
        if let Some(file) = writers {
            if !lock_now(&file, &names.writers)? {
                return Ok(Pass::Busy(file)); // a writer arrives
            }
            match crate::teardown::names(dir, &names.writers, &file)? {
                Some(st) => w = Some((st, file)),
                None => continue,
            }
        }
        // d4: all or nothing, and only what we hold
        let parent = dir
            .stat(".")
            .map_err(|e| Error::io(dir.path(), "cannot stat", e))?;
        let held = [
            (&names.lock, lock.as_ref().zip(n.as_ref())),
            (&names.turnstile, Some((&turnstile, &t))),
            (&names.writers, w.as_ref().map(|(st, f)| (f, st))),
        ];
        for (name, entry) in &held {
            if let Some((_, st)) = entry {
                dir::removable(dir, name, st, &parent)?;
            }
        }
        for (name, entry) in held {
            let Some((file, _)) = entry else { continue };
            if crate::teardown::names(dir, name, file)?.is_some() {
                dir.unlink_file(name)
                    .map_err(|e| Error::io(&dir.join(name), "cannot delete", e))?;
            }
        }
        return Ok(Pass::Done(Released::Deleted));
    }
    Ok(Pass::Done(Released::KeptInUse))
}

/// Open the existing entry `name` for a lock (read-write where it must be, on a network file
/// system, and may be); `None` if it does not exist. Never through a link.
fn open_entry(dir: &Dir, name: &OsStr, network: bool) -> Result<Option<File>> {
    no_link(dir, name)?;
    match dir.open(name, network) {
        Err(e) if network && e.kind() == ErrorKind::PermissionDenied => dir.open(name, false),
        other => other,
    }
}

/// A symbolic link where a lock file belongs (the user's own, for `NAME`) is never removed, nor
/// followed to remove what it points to: then the files stay.
fn no_link(dir: &Dir, name: &OsStr) -> Result<()> {
    match dir.stat(name) {
        Ok(st) if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits() => Err(Error::new(
            &dir.join(name),
            ErrorKind::WrongKind,
            "is a symbolic link; delete on release removes only regular files, not removing it",
        )),
        _ => Ok(()),
    }
}

/// Whether anyone holds `name` (d5): the kernel's lock table, read without locking; `false`
/// where it cannot tell (network file systems).
fn name_held(dir: &Dir, name: &OsStr) -> bool {
    let Ok(Some(file)) = dir.open(name, false) else {
        return false;
    };
    let path = dir.join(name);
    matches!(probe::listed(&path, &file, probe::Kinds::Flock), Ok(Some(l)) if !l.locks.is_empty())
}

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwmrStatus {
    /// Readers inside (`None` where it cannot be counted: network file systems).
    pub readers: Option<usize>,
    /// Whether a writer is inside.
    pub writer: bool,
    /// Who the writer is, where that can be known (local file systems).
    pub writer_holder: Option<Holder>,
    /// Writers waiting (fsync writers; `None` where it cannot be counted).
    pub waiting_writers: Option<usize>,
}

/// Readers, writer and waiting writers of the lock at `path`. Creates nothing; on a local file
/// system reads the kernel's lock table only.
pub fn status(path: &Path) -> Result<SwmrStatus> {
    let none = SwmrStatus {
        readers: Some(0),
        writer: false,
        writer_holder: None,
        waiting_writers: Some(0),
    };
    let Some(file) = pfs::open_if_exists(path)? else {
        return Ok(none);
    };
    if let Some(listed) = probe::listed(path, &file, probe::Kinds::Flock)? {
        let locks = listed.locks;
        let readers = locks.iter().filter(|l| !l.exclusive).count();
        let writer = locks.iter().find(|l| l.exclusive);
        let waiting = std::fs::metadata(side_file(path, ".writers"))
            .ok()
            .and_then(|m| procinfo::flock_holders(m.dev(), m.ino()))
            .map_or(0, |l| l.iter().filter(|l| !l.exclusive).count());
        return Ok(SwmrStatus {
            readers: Some(readers),
            writer: writer.is_some(),
            writer_holder: writer.and_then(|w| w.pid).map(Holder::local),
            waiting_writers: Some(waiting),
        });
    }
    // Network: probes released at once. An exclusive one succeeds only if nobody is inside
    // (it needs write access on NFS); a shared one fails only while a writer is inside. Readers
    // cannot be counted.
    let held =
        |f: &File, mode| probe::held(f, mode).map_err(|e| Error::io(path, "cannot test lock", e));
    if let Ok(rw) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        && !held(&rw, Mode::Exclusive)?
    {
        return Ok(SwmrStatus {
            readers: Some(0),
            writer: false,
            writer_holder: None,
            waiting_writers: None,
        });
    }
    let writer = held(&file, Mode::Shared)?;
    Ok(SwmrStatus {
        readers: if writer { Some(0) } else { None },
        writer,
        writer_holder: None,
        waiting_writers: None,
    })
}

impl SwmrStatus {
    /// Whether anyone holds the lock (unknown reader counts on network file systems mean
    /// "at least one").
    pub fn held(&self) -> bool {
        self.writer || self.readers != Some(0)
    }
}

#[cfg(test)]
mod tests;
