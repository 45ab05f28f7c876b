/*!
The counting semaphore that survives crashes: the "ultimate challenge" that Primoz Gabrijelcic's
*Let's Cooperate: File system-based synchronisation primitives* set and left unwritten. A
holder that dies gives its slot back at once, because every slot is a kernel lock.

# Protocol on disk

A semaphore `S` with `N` slots is a directory (created if missing) holding:

- `S/slots`: `N` in decimal. Created once, atomically: written under a temporary name and
  `link(2)`ed into place, which fails if another creator was first (then its `N` is read).
  Rewritten (a temporary file `rename(2)`d over it) only as step (2) below says.
- `S/slot.0` ... `S/slot.N-1`: a holder holds an **exclusive** `flock` on one of them. The kernel
  (or file server) releases it when the holder dies, so a slot of a dead holder is free at once.
  `S/.slot.I.fsync` records who holds slot `I` (the holder record of [`crate::holder`]).
- `S/queue`: waiters line up on an **exclusive** `flock` of it; only its holder (the head of the
  line) looks for a free slot, so slots go to waiters roughly in arrival order.

Acquire: (1) lock `queue` (blocking), then *verify* that `queue` still names the file locked
(same device and inode; a deletion, below, may have removed it between our open and our lock:
then start again, opening `S` anew). (2) Read `N`: if none is recorded, record ours; if another
is, take ours in its place only if nobody holds a slot: every `slot.*` file there is (of any
count it had) is locked without waiting, and the new count is written while they are held; one
that is held makes the acquisition an error that names both counts. (3) Try a non-blocking
`flock` on every slot, starting after the slot taken last. (4) If none is free, block until a
slot file in `S` is *closed* (inotify `IN_CLOSE_*`; closes of other names, or of `S` itself,
which anyone who may read `S` can open and close in a loop, wake nobody) and go to (3). Every holder has its slot file open,
and the kernel closes it when the holder releases it or exits, however it dies, so the head
waiter wakes at once; it keeps its own descriptors of the slot files open while it waits, so it
does not wake itself. (5) Release `queue`. On network file systems, where inotify cannot see
other hosts, (4) also re-checks every `poll` interval. Before (1), another count than the one
recorded fails at once if the kernel's lock table shows a slot held by a process other than the
head of the line (a quick answer; step (2) is the one that decides).

**Another count**: the count changes only under the live `queue` while no slot is held, and
every holder took its slot under the live `queue` after reading, there, the count it asked for.
So all processes inside at any moment came in under one count `N`, each holding its own
`slot.I` with `I < N`: never more than `N` inside, and of two processes that start with
different counts at once, the first in line sets the count and the other is refused while the
first is inside. A waiter that queued under the old count cannot slip in beside holders of the
new one either: it reads the count again in line. Slot files of a larger count stay, unused,
until a deletion.

# Deleting (`--delete`)

A holder that asked for it ([`Semaphore::delete_on_release`]) removes `S` when it leaves, if
nobody else holds a slot, waits or arrives; otherwise it leaves it to whoever leaves last.
Leaving is releasing the slot (the command has exited; a wait that gives up leaves too). Then
the *deletion attempt*:

- **d1** open `queue` (nothing there: another deletion came first, done) and lock it
  exclusively without waiting, and *verify* (replaced meanwhile: start d1 again). If it is busy,
  someone is on their way in (or out): if the kernel's lock table shows a slot held by another
  process than the one holding `queue`, someone is inside who leaves after us: stop, keeping the
  files; otherwise wait until `queue` is free (a blocking lock, let go at once) and go to d1,
  keeping the files after a second (on network file systems the table cannot tell: we wait);
- **d2** lock every `slot.*` file without waiting, and *verify* each: a busy one means someone
  is inside, who leaves after us: stop, keeping the files;
- **d3** check that every file to remove (`queue`, the slot files, `slots`, the records
  `.slot.I.fsync`) is a regular file with one link and, in a sticky directory, belongs to us or
  to the directory's owner: otherwise keep them all and say why;
- **d4** remove `slots` and the records, then the slot files, then `queue` (each still named as
  held), release them, and remove `S` if it is empty (a newcomer may already be back in it).

Racing acquirers never end up in two incarnations of `S`: nobody takes a slot without holding
the live `queue` (step 1's verify), and a deletion removes files only while it holds the live
`queue` and every slot. A process that opened the old `queue` before its removal and locks it
after fails *verify* and starts again on new files; one that opened `S` before it was removed
fails to create files in it and starts again too. `queue` goes last, so whoever holds the live
`queue` holds the live slot files.

Files stay when the slot was passed down to a process that still runs (it still holds the slot
through the inherited description), when another user's file is in one of the places above,
or while someone else is inside. A process killed while inside deletes nothing: the next user
with `--delete` who leaves last does.
*/

use std::{
    fs::File,
    io,
    os::fd::AsFd,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::{self, Holder, OwnRecord, RecordFile},
    platform::{
        dir::Dir,
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
        procinfo,
    },
    probe, restart,
    teardown::{self, Held, Pass, Took},
    wait::{self, DEFAULT_POLL, Deadline, Failed, Outcome, Wait},
};

pub use crate::teardown::Released;

/// A counting semaphore at a directory path: at most N holders at once, each with its own slot
/// number (0 to N-1). N is recorded by whoever creates the semaphore; an acquisition with
/// another N takes it in its place once nobody holds a slot, and is refused while anyone does.
/// Waiters are served roughly in order of arrival.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("build.sem");
/// let sem = fsync::Semaphore::new(&path, 2);
/// let a = sem.acquire(None)?.unwrap();
/// let b = sem.acquire(None)?.unwrap();
/// assert_ne!(a.slot(), b.slot());
/// assert!(sem.acquire(Some(std::time::Duration::ZERO))?.is_none()); // both slots taken
/// drop(a);
/// assert!(sem.acquire(Some(std::time::Duration::ZERO))?.is_some());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    dir: PathBuf,
    slots: usize,
    poll: Duration,
    delete: bool,
}

/// The largest number of slots: one lock file each, which the head waiter keeps open while it
/// waits, so this stays well inside the usual limit of 1024 open files.
pub const MAX_SLOTS: usize = 512;

/// What every slot file's name starts with: the closes a waiter wakes for.
const SLOT_PREFIX: &str = "slot.";

fn slot_name(i: usize) -> String {
    format!("{SLOT_PREFIX}{i}")
}

impl Semaphore {
    /// The semaphore of `slots` slots (1 to [`MAX_SLOTS`]) at the directory `path`, which is
    /// created on first acquisition. Touches nothing until then.
    pub fn new(path: impl AsRef<Path>, slots: usize) -> Semaphore {
        Semaphore {
            dir: path.as_ref().to_path_buf(),
            slots,
            poll: DEFAULT_POLL,
            delete: false,
        }
    }

    /// Remove the semaphore's directory and files when leaving, if nobody else holds a slot
    /// or waits for one (otherwise whoever of them leaves last with this set removes them);
    /// leaving includes a wait that gives up. Processes that opened the files before their
    /// removal notice and take new ones, so the limit holds across the removal (module docs,
    /// "Deleting"). Never removes a link, or another user's file in a sticky directory.
    /// [`SlotGuard::release`] says what became of the files.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("build.sem");
    /// use fsync::sem::{Released, Semaphore};
    /// let sem = Semaphore::new(&path, 2).delete_on_release(true);
    /// let (a, b) = (sem.acquire(None)?.unwrap(), sem.acquire(None)?.unwrap());
    /// assert_eq!(a.release()?, Released::KeptInUse); // b still holds a slot
    /// assert_eq!(b.release()?, Released::Deleted); // the last to leave removes it
    /// assert!(!path.exists());
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn delete_on_release(mut self, yes: bool) -> Semaphore {
        self.delete = yes;
        self
    }

    /// How often a wait re-checks on a network file system, where another host's release
    /// wakes nobody ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Semaphore {
        self.poll = every;
        self
    }

    /// Take a slot if one is free right now; `Ok(None)` if all are taken, and also while
    /// another process is choosing its slot at this very instant. Never waits. Errors as
    /// [`acquire`](Self::acquire).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("gpu.sem");
    /// let gpu = fsync::Semaphore::new(&path, 1);
    /// let held = gpu.try_acquire()?.expect("free");
    /// assert!(gpu.try_acquire()?.is_none()); // busy: the one slot is taken
    /// drop(held);
    /// assert_eq!(gpu.try_acquire()?.map(|g| g.slot()), Some(0)); // free again
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn try_acquire(&self) -> Result<Option<SlotGuard>> {
        self.acquire(Some(Duration::ZERO))
    }

    /// Take a slot, waiting up to `timeout` (`None`: for ever); `Ok(None)` if none came.
    ///
    /// Waiters line up on a lock: the first in line blocks until a slot's holder closes it
    /// (releases, or dies), which wakes it at once on a local file system; on a network file
    /// system it also re-checks every [`poll_interval`](Self::poll_interval). Errors:
    /// [`ErrorKind::Invalid`] for a slot count outside 1 to [`MAX_SLOTS`], or other than the
    /// one the semaphore has while someone holds a slot (once nobody does, another count is
    /// taken in its place), [`ErrorKind::Corrupt`] if its `slots` file holds no
    /// count, [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the directory
    /// cannot be created or opened, [`ErrorKind::Unavailable`] if another process keeps
    /// deleting it as we enter (a hundred times in a row).
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<Option<SlotGuard>> {
        Ok(self.acquire_with(timeout, |_| {})?.acquired())
    }

    /// Like [`acquire`](Self::acquire), telling a timeout from a cancellation, and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    pub fn acquire_with(
        &self,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<SlotGuard>> {
        self.acquire_until(Deadline::after(timeout), progress)
    }

    /// [`acquire_with`](Self::acquire_with) as one step of a longer wait.
    pub(crate) fn acquire_until(
        &self,
        deadline: Deadline,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<SlotGuard>> {
        self.check_count()?;
        // A deletion may remove what we opened at any point until we hold the live queue:
        // then start over.
        let (top, outcome) = restart::after_deletion(
            &self.dir,
            deadline,
            || Dir::create_top(&self.dir, "cannot create semaphore"),
            |top| self.enter(top, deadline, &mut progress),
        )?;
        if self.delete && !matches!(outcome, Outcome::Acquired(_)) {
            // Giving up is leaving too: we may have been the last one waiting. Best effort.
            let _ = delete_files(&top, self.poll);
        }
        Ok(outcome)
    }

    /// Steps (1) to (4) of the module docs in the semaphore directory `top`: `None` if the
    /// queue we locked was removed meanwhile (a deletion), so that the caller starts over.
    fn enter(
        &self,
        top: &Dir,
        deadline: Deadline,
        progress: &mut impl FnMut(Duration),
    ) -> Result<Outcome<Option<SlotGuard>>> {
        let queue = top.open_or_create("queue")?;
        // Another count fails at once while someone holds a slot (and for certain below,
        // under the queue).
        if let Some(recorded) = slots_in(top)?
            && recorded != self.slots
            && teardown::inside_besides(top, &queue, &slot_files(top)?)
        {
            return Err(self.in_use(recorded));
        }
        let network = pfs::fs_kind(&queue).network;
        let spec = Wait::for_lock(deadline, network, self.poll);
        let queue_path = self.dir.join("queue");
        let in_line = wait::flock(spec, &mut *progress, &queue, Mode::Exclusive, &queue_path)?;
        wait::acquired!(in_line);
        if teardown::names(top, "queue", &queue)?.is_none() {
            return Ok(Outcome::Acquired(None)); // removed between our open and our lock
        }
        // Head of the line.
        self.configure(top)?;
        let mut files = Vec::with_capacity(self.slots);
        for i in 0..self.slots {
            files.push(Some(top.open_or_create(slot_name(i))?));
        }
        let first = (procinfo::now_micros() as usize) % self.slots;
        let try_slots = || -> Result<Option<usize>> {
            for k in 0..self.slots {
                let i = (first + k) % self.slots;
                match files[i]
                    .as_ref()
                    .map(|f| lock::flock(f, Mode::Exclusive, false))
                {
                    Some(Ok(true)) => return Ok(Some(i)),
                    Some(Ok(false)) | None => {}
                    Some(Err(e)) => {
                        return Err(Error::io(&self.dir.join(slot_name(i)), "cannot lock", e));
                    }
                }
            }
            Ok(None)
        };
        // A free slot needs no watch: an inotify instance costs its closer a wait for the
        // kernel (see `platform::notify`), which was 2 ms of an uncontended acquire + release.
        let mut watch = None;
        let got = if let Some(i) = try_slots()? {
            Outcome::Acquired(i)
        } else {
            // None free: watch for closes first, then look again, so no release is missed.
            let w = watch.insert(
                DirWatch::closes(&top.pinned())
                    .map_err(|e| Error::io(&self.dir, "cannot watch directory", e))?,
            );
            wait::wait_for(spec, &mut *progress, |block| -> Result<_, Failed> {
                if block {
                    w.wait_closing(SLOT_PREFIX, None)?;
                    return Ok(None);
                }
                Ok(try_slots()?)
            })
            .map_err(|f| f.naming(&self.dir, "cannot wait"))?
        };
        drop(queue); // the next in line may look now
        Ok(got.map(|i| {
            let file = files[i].take().expect("the slot we locked");
            let mut guard = SlotGuard::new(top, i, file);
            guard._watch = watch.and_then(|w| w.retire().unwrap_or(None));
            guard.delete = self.delete;
            guard.poll = self.poll;
            Some(guard)
        }))
    }

    /// A slot count outside 1 to [`MAX_SLOTS`] is refused before anything is touched.
    fn check_count(&self) -> Result<()> {
        if self.slots == 0 || self.slots > MAX_SLOTS {
            return Err(Error::new(
                &self.dir,
                ErrorKind::Invalid,
                format!("slots must be 1 to {MAX_SLOTS}"),
            ));
        }
        Ok(())
    }

    /// Step (2), holding the live queue: record `N` if none is, or take it in place of the
    /// recorded one if nobody holds a slot (every slot file there is locked without waiting
    /// while the count is rewritten); another count while someone does is an error.
    fn configure(&self, top: &Dir) -> Result<()> {
        let recorded = match slots_in(top)? {
            Some(n) => n,
            None => record_slots(top, self.slots)?,
        };
        if recorded == self.slots {
            return Ok(());
        }
        let mut held = Vec::new();
        for name in slot_files(top)? {
            let Some(file) = top.open(&name, false)? else {
                continue;
            };
            let free = lock::flock(&file, Mode::Exclusive, false)
                .map_err(|e| Error::io(&top.join(&name), "cannot lock", e))?;
            if !free {
                return Err(self.in_use(recorded));
            }
            held.push(file);
        }
        write_count(top, self.slots, |tmp| top.rename(tmp, top, "slots"))
            .map_err(|e| Error::io(&top.join("slots"), "cannot record the slot count", e))?;
        Ok(())
    }

    /// Another slot count than the `recorded` one while someone holds a slot.
    fn in_use(&self, recorded: usize) -> Error {
        Error::new(
            &self.dir,
            ErrorKind::Invalid,
            format!(
                "slot count {} differs from the {recorded} of this semaphore, which is in use: \
                 another count is taken only once nobody holds a slot",
                self.slots
            ),
        )
    }
}

/// The `N` a semaphore was created with, if it was (`None`: it does not exist yet). Creates
/// nothing. [`ErrorKind::Corrupt`] if its `slots` file holds no count.
pub fn recorded_slots(dir: &Path) -> Result<Option<usize>> {
    match Dir::top(dir, false, "cannot open semaphore")? {
        Some(top) => slots_in(&top),
        None => Ok(None),
    }
}

/// The `N` recorded in the semaphore directory `top` (read without following a link or
/// blocking on a FIFO, and only if it is a count fsync could have written).
pub(crate) fn slots_in(top: &Dir) -> Result<Option<usize>> {
    let path = top.join("slots");
    let Some(file) = top.open("slots", false)? else {
        return Ok(None);
    };
    let mut text = String::new();
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(&file, SLOTS_TEXT + 1), &mut bytes)
        .map_err(|e| Error::io(&path, "cannot read", e))?;
    text.push_str(std::str::from_utf8(&bytes).unwrap_or("-"));
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_SLOTS).contains(&n) && bytes.len() as u64 <= SLOTS_TEXT => Ok(Some(n)),
        _ => Err(Error::new(
            &path,
            ErrorKind::Corrupt,
            "does not hold a slot count",
        )),
    }
}

/// The longest `slots` file we read: a count is a few digits.
pub(crate) const SLOTS_TEXT: u64 = 64;

fn record_slots(top: &Dir, n: usize) -> Result<usize> {
    match write_count(top, n, |tmp| top.link(tmp, "slots")) {
        Ok(()) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(slots_in(top)?.unwrap_or(n)),
        Err(e) => Err(Error::io(&top.join("slots"), "cannot create", e)),
    }
}

/// Write `N` under a temporary name and put it in place with `install` (a `link(2)` that fails
/// if `slots` exists, or a `rename(2)` over it): readers see the old count or the new, whole.
fn write_count(
    top: &Dir,
    n: usize,
    install: impl FnOnce(&str) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = format!(".slots.{}.{}", std::process::id(), procinfo::now_micros());
    let write = || -> io::Result<()> {
        let mut f = top.create_new(&tmp, 0o644)?;
        crate::platform::fs::set_mode(&f, 0o644); // every user of the semaphore reads it
        io::Write::write_all(&mut f, format!("{n}\n").as_bytes())?;
        f.sync_all()
    };
    let result = write().and_then(|()| install(&tmp));
    let _ = top.unlink_any(&tmp);
    result
}

/// The slot files in the semaphore directory `top` (`slot.I`), of any count it had.
pub(crate) fn slot_files(top: &Dir) -> Result<Vec<String>> {
    teardown::names_where(top, |n| {
        n.strip_prefix("slot.")
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Deleting, (d2): holding the live queue in `held` already, hold every slot file; a pass's
/// end if one is held (someone is inside) or was replaced.
pub(crate) fn hold_slots(top: &Dir, held: &mut Held) -> Result<Option<Pass>> {
    for name in slot_files(top)? {
        match held.take(top, &name)? {
            Took::Held | Took::Missing => {}
            Took::Busy(_) => return Ok(Some(Pass::Done(Released::KeptInUse))),
            Took::Replaced => return Ok(Some(Pass::Again)),
        }
    }
    Ok(None)
}

/// Deleting, (d3): the files removed with those held, which have no lock of their own (the
/// count, the holder records).
pub(crate) fn unlocked_files(top: &Dir) -> Result<Vec<String>> {
    teardown::names_where(top, |n| {
        n == "slots" || (n.starts_with(".slot.") && n.ends_with(".fsync"))
    })
}

/// One deletion pass of the module docs (d1 to d4) in the semaphore directory `top`.
fn delete_pass(top: &Dir) -> Result<Pass> {
    let mut held = Held::default();
    match held.take(top, "queue")? {
        Took::Held => {}
        // Gone: another deletion came first.
        Took::Missing => return Ok(Pass::Done(Released::Deleted)),
        Took::Replaced => return Ok(Pass::Again),
        Took::Busy(queue) => {
            return Ok(
                match teardown::inside_besides(top, &queue, &slot_files(top)?) {
                    true => Pass::Done(Released::KeptInUse),
                    false => Pass::Busy(queue),
                },
            );
        }
    }
    if let Some(pass) = hold_slots(top, &mut held)? {
        return Ok(pass);
    }
    let also = unlocked_files(top)?;
    teardown::check_all(top, &held, &also)?;
    teardown::remove_all(top, &held, &also)?;
    let _ = top.remove_self(); // fails harmlessly if a newcomer is back
    Ok(Pass::Done(Released::Deleted))
}

/// The deletion attempt of a leaver (module docs, "Deleting").
fn delete_files(top: &Dir, poll: Duration) -> Result<Released> {
    teardown::attempt(top, top.path(), poll, || delete_pass(top))
}

/// Proof of holding one slot; released on drop (removing the semaphore if it was acquired
/// with [`Semaphore::delete_on_release`] and nobody else uses it).
#[must_use = "the slot is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SlotGuard {
    slot: usize,
    /// The slot's lock file, for errors.
    path: PathBuf,
    /// `None` once released.
    file: Option<File>,
    record: OwnRecord,
    /// The semaphore's directory as opened, for deleting it on release.
    top: Option<Dir>,
    delete: bool,
    poll: Duration,
    /// The waiting line's close watch, closed only after the slot (`file`, released before
    /// it) is free: closing it waits for the kernel (see `platform::notify`), which the next
    /// holder should not wait for, nor our command's start.
    _watch: Option<std::os::fd::OwnedFd>,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    acquired: std::time::Instant,
}

/// Records the command for [`status`].
impl crate::Guard for SlotGuard {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(self.file(), lock::Mode::Exclusive, self.acquired)
    }

    fn pass_down(&mut self) -> Result<()> {
        lock::set_inheritable(self.file(), true)
            .map_err(|e| Error::io(&self.path, "cannot pass the slot down", e))
    }

    fn set_child(&self, pid: Option<u32>, command: &str) {
        self.record.set_child(pid, command.to_string());
    }
}

impl SlotGuard {
    fn new(dir: &Dir, slot: usize, file: File) -> SlotGuard {
        let acquired = std::time::Instant::now();
        let holder = Holder::this_process(procinfo::now_micros(), procinfo::own_cmdline());
        let record = dir
            .try_clone()
            .ok()
            .and_then(|d| RecordFile::open_in(d, slot_name(slot).as_ref()));
        SlotGuard {
            slot,
            path: dir.join(slot_name(slot)),
            file: Some(file),
            record: OwnRecord::held(record, 0, holder),
            top: dir.try_clone().ok(),
            delete: false,
            poll: DEFAULT_POLL,
            _watch: None,
            acquired,
        }
    }

    fn file(&self) -> &File {
        self.file.as_ref().expect("held until released")
    }

    /// Which slot (0 to N-1) is ours: for allocating devices, ports or directories by slot.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Release now, saying what became of the semaphore's files and reporting failures to
    /// delete them (dropping the guard releases too, silently). With
    /// [`delete_on_release`](Semaphore::delete_on_release) this may wait up to a second for a
    /// process at the head of the line to take a slot or give up (module docs, "Deleting").
    pub fn release(mut self) -> Result<Released> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<Released> {
        let Some(file) = self.file.take() else {
            return Ok(Released::Kept);
        };
        self.record.released();
        if !self.delete {
            return Ok(Released::Kept);
        }
        // A process the command left running may hold the slot through an inherited
        // descriptor: it is still inside.
        if procinfo::description_shared(file.as_fd()) {
            return Ok(Released::KeptStillHeld);
        }
        drop(file); // leave: the slot goes with our description
        match &self.top {
            Some(top) => delete_files(top, self.poll),
            None => Ok(Released::Kept),
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// One slot as [`status`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotStatus {
    /// Which slot (0 to N-1).
    pub slot: usize,
    /// Whether someone holds it (always, for the slots `status` lists).
    pub held: bool,
    /// Who holds it, where that can be known: the slot's holder record where the kernel's
    /// lock table bears it out, else the process the table lists.
    pub holder: Option<Holder>,
    /// The holder the slot's record names where the kernel's lock table contradicts it (as
    /// [`mutex::Status::untrusted_record`](crate::mutex::Status::untrusted_record)): never the
    /// [`holder`](SlotStatus::holder), which is then the kernel's.
    pub untrusted_record: Option<Holder>,
}

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemStatus {
    /// `None` if the semaphore was never created.
    pub slots: Option<usize>,
    /// The slots held, in slot order.
    pub held: Vec<SlotStatus>,
    /// Processes waiting for a slot (`None` where it cannot be counted: network file systems).
    pub waiters: Option<usize>,
}

/// Slots, holders and waiters. Creates nothing; on a local file system it reads the kernel's
/// lock table and does not touch the locks. As [`mutex::status`](crate::mutex::status) does,
/// it believes the kernel's lock table over a slot's holder record, which anyone who may write
/// the semaphore's directory could have written.
pub fn status(dir: &Path) -> Result<SemStatus> {
    let none = SemStatus {
        slots: None,
        held: Vec::new(),
        waiters: Some(0),
    };
    let Some(top) = Dir::top(dir, false, "cannot open semaphore")? else {
        return Ok(none);
    };
    let Some(n) = slots_in(&top)? else {
        return Ok(none);
    };
    let mut held = Vec::new();
    for i in 0..n {
        let name = slot_name(i);
        let path = top.join(&name);
        let Some(file) = top.open(&name, false)? else {
            continue;
        };
        let listed = probe::listed(&path, &file, probe::Kinds::Flock)?;
        let is_held = match &listed {
            Some(l) => !l.locks.is_empty(),
            // A probe that fails says "held": never report a slot free on doubt.
            None => probe::held(&file, Mode::Shared).unwrap_or(true),
        };
        if !is_held {
            continue;
        }
        let recorded = holder::read_in(&top, name.as_ref()).and_then(|r| r.holder);
        let (holder, untrusted_record) =
            holder::kernel_over_record(recorded, listed.as_ref(), &file);
        held.push(SlotStatus {
            slot: i,
            held: true,
            holder,
            untrusted_record,
        });
    }
    let waiters = match (
        pfs::fs_kind_of_path(&top.pinned()).network,
        top.stat("queue"),
    ) {
        (true, _) => None,
        (false, Err(_)) => Some(0),
        (false, Ok(m)) => probe::in_line(m.st_dev, m.st_ino),
    };
    Ok(SemStatus {
        slots: Some(n),
        held,
        waiters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_slot_count_is_refused_while_held_and_taken_when_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let a = Semaphore::new(&path, 3).acquire(None).unwrap().unwrap();
        let err = Semaphore::new(&path, 4).acquire(None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert!(
            err.to_string().ends_with(
                "slot count 4 differs from the 3 of this semaphore, which is in use: another \
                 count is taken only once nobody holds a slot"
            ),
            "{err}"
        );
        assert_eq!(status(&path).unwrap().held.len(), 1);
        assert_eq!(recorded_slots(&path).unwrap(), Some(3));
        drop(a);
        // Nobody inside: the new count is taken, and holds.
        let one = Semaphore::new(&path, 1);
        let b = one.acquire(None).unwrap().unwrap();
        assert_eq!((b.slot(), recorded_slots(&path).unwrap()), (0, Some(1)));
        assert!(one.try_acquire().unwrap().is_none());
        let err = Semaphore::new(&path, 3).try_acquire().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        // The slot files of the larger count stay, and are no way around the new one.
        assert!(path.join("slot.2").exists());
        assert_eq!(status(&path).unwrap().slots, Some(1));
    }

    /// A slot record naming, on another host, the very process the kernel lists as the
    /// slot's holder: the kernel's holder is shown, the record reported untrusted.
    #[test]
    fn status_believes_the_kernel_over_a_slot_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let _held = Semaphore::new(&path, 1).acquire(None).unwrap().unwrap();
        let me = std::process::id();
        let forged = format!(
            "fsync-holder 1\nfence 0\nstate held\npid {me}\nhost evil\nsince 1\ncommand evil\nend\n"
        );
        std::fs::write(path.join(".slot.0.fsync"), forged).unwrap();
        let st = status(&path).unwrap();
        let slot = &st.held[0];
        let shown = slot.holder.as_ref().unwrap();
        assert_eq!(
            (shown.pid, shown.host.as_str()),
            (me, procinfo::hostname().as_str())
        );
        let claimed = slot.untrusted_record.as_ref().unwrap();
        assert_eq!((claimed.pid, claimed.host.as_str()), (me, "evil"));
    }

    #[test]
    fn the_last_to_leave_with_delete_removes_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let sem = Semaphore::new(&path, 2).delete_on_release(true);
        let kept = Semaphore::new(&path, 2);
        let a = sem.acquire(None).unwrap().unwrap();
        let b = kept.acquire(None).unwrap().unwrap();
        assert_eq!(a.release().unwrap(), Released::KeptInUse);
        assert_eq!(b.release().unwrap(), Released::Kept);
        assert!(
            path.join("slots").exists(),
            "kept without delete on release"
        );
        let c = sem.acquire(None).unwrap().unwrap();
        assert_eq!(c.release().unwrap(), Released::Deleted);
        assert!(
            !path.exists(),
            "{:?}",
            std::fs::read_dir(&path).map(std::iter::Iterator::count)
        );
        // A give-up leaves too: `try_acquire` of a free semaphore, dropped, deletes.
        drop(sem.try_acquire().unwrap());
        assert!(!path.exists());
        // Only what the protocol names goes: other files in S stay, and with them S.
        std::fs::create_dir(&path).unwrap();
        for other in ["slot.tmp", "slot.", ".slot.notes", "notes.fsync"] {
            std::fs::write(path.join(other), "mine").unwrap();
        }
        assert_eq!(
            sem.acquire(None).unwrap().unwrap().release().unwrap(),
            Released::Deleted
        );
        let mut left: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".slot.notes", "notes.fsync", "slot.", "slot.tmp"]);
    }

    /// A process that opened the queue of a semaphore that is then deleted, and locks it
    /// after, takes the new semaphore's files: never two incarnations at once.
    #[test]
    fn an_acquirer_holding_a_removed_queue_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let sem = Semaphore::new(&path, 1);
        drop(sem.acquire(None).unwrap());
        let top = Dir::top(&path, false, "x").unwrap().unwrap();
        let queue = top.open_or_create("queue").unwrap();
        assert!(lock::flock(&queue, Mode::Exclusive, false).unwrap());
        let waiter = {
            let sem = sem.clone();
            std::thread::spawn(move || sem.acquire(Some(Duration::from_secs(20))).unwrap())
        };
        // The waiter waits on the queue we hold; we delete everything, then let go.
        while probe::in_line(
            top.stat("queue").unwrap().st_dev,
            top.stat("queue").unwrap().st_ino,
        ) != Some(2)
        {
            std::thread::yield_now();
        }
        let mut held = Held::default();
        assert!(hold_slots(&top, &mut held).unwrap().is_none());
        let also = unlocked_files(&top).unwrap();
        teardown::remove_all(&top, &held, &also).unwrap();
        top.unlink_file("queue").unwrap();
        top.remove_self().unwrap();
        drop(queue);
        let got = waiter.join().unwrap().expect("a slot of the new semaphore");
        assert!(path.join("slot.0").exists(), "the new incarnation");
        // It holds the new slot.0: nobody else gets in.
        assert!(sem.try_acquire().unwrap().is_none());
        drop(got);
    }

    #[test]
    fn a_waiter_gets_a_released_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let sem = Semaphore::new(&path, 1);
        let held = sem.acquire(None).unwrap().unwrap();
        let waiter = {
            let sem = sem.clone();
            std::thread::spawn(move || {
                sem.acquire(Some(Duration::from_secs(20)))
                    .unwrap()
                    .map(|g| g.slot())
            })
        };
        drop(held);
        assert_eq!(waiter.join().unwrap(), Some(0));
    }
}
