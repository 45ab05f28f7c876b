/*!
The counting semaphore that survives crashes: the "ultimate challenge" that Primoz Gabrijelcic's
*Let's Cooperate: File system-based synchronisation primitives* set and left unwritten. A
holder that dies gives its slot back at once, because every slot is a kernel lock.

# Protocol on disk

A semaphore `S` with `N` slots is a directory (created if missing) holding:

- `S/slots`: `N` in decimal. Created once, atomically: written under a temporary name and
  `link(2)`ed into place, which fails if another creator was first (then its `N` is read). A
  later acquisition with another `N` is refused.
- `S/slot.0` ... `S/slot.N-1`: a holder holds an **exclusive** `flock` on one of them. The kernel
  (or file server) releases it when the holder dies, so a slot of a dead holder is free at once.
  `S/.slot.I.fsync` records who holds slot `I` (the holder record of [`crate::holder`]).
- `S/queue`: waiters line up on an **exclusive** `flock` of it; only its holder (the head of the
  line) looks for a free slot, so slots go to waiters roughly in arrival order.

Acquire: (1) lock `queue` (blocking); (2) try a non-blocking `flock` on every slot, starting after
the slot taken last; (3) if none is free, block until a file in `S` is *closed* (inotify
`IN_CLOSE_*`) and go to (2). Every holder has its slot file open, and the kernel closes it when
the holder releases it or exits, however it dies, so the head waiter wakes at once; it keeps its
own descriptors of the slot files open while it waits, so it does not wake itself. (4) Release
`queue`. On network file systems, where inotify cannot see other hosts, (3) also re-checks every
`poll` interval.
*/

use std::{
    fs::File,
    io,
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
    probe,
    wait::{self, Deadline, Failed, Outcome, Wait, DEFAULT_POLL},
};

/// A counting semaphore at a directory path: at most N holders at once, each with its own slot
/// number (0 to N-1). N is fixed by whoever creates the semaphore; an acquisition with another
/// N is refused. Waiters are served roughly in order of arrival.
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
}

/// The largest number of slots: one lock file each, which the head waiter keeps open while it
/// waits, so this stays well inside the usual limit of 1024 open files.
pub const MAX_SLOTS: usize = 512;

fn slot_name(i: usize) -> String {
    format!("slot.{i}")
}

impl Semaphore {
    /// The semaphore of `slots` slots (1 to [`MAX_SLOTS`]) at the directory `path`, which is
    /// created on first acquisition. Touches nothing until then.
    pub fn new(path: impl AsRef<Path>, slots: usize) -> Semaphore {
        Semaphore {
            dir: path.as_ref().to_path_buf(),
            slots,
            poll: DEFAULT_POLL,
        }
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
    /// [`ErrorKind::Invalid`] for a slot count outside 1 to [`MAX_SLOTS`] or other than the one
    /// the semaphore was created with, [`ErrorKind::Corrupt`] if its `slots` file holds no
    /// count, [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the directory
    /// cannot be created or opened.
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
        let top = self.setup()?;
        let queue = top.open_or_create("queue")?;
        let network = pfs::fs_kind(&queue).network;
        let spec = Wait::for_lock(deadline, network, self.poll);
        let queue_path = self.dir.join("queue");
        let in_line = wait::flock(spec, &mut progress, &queue, Mode::Exclusive, &queue_path)?;
        wait::acquired!(in_line);
        // Head of the line.
        let mut files = Vec::with_capacity(self.slots);
        for i in 0..self.slots {
            files.push(Some(top.open_or_create(&slot_name(i))?));
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
                        return Err(Error::io(&self.dir.join(slot_name(i)), "cannot lock", e))
                    }
                }
            }
            Ok(None)
        };
        // A free slot needs no watch: an inotify instance costs its closer a wait for the
        // kernel (see `platform::notify`), which was 2 ms of an uncontended acquire + release.
        let mut watch = None;
        let got = match try_slots()? {
            Some(i) => Outcome::Acquired(i),
            None => {
                // None free: watch for closes first, then look again, so no release is missed.
                let w = watch.insert(
                    DirWatch::closes(&top.pinned())
                        .map_err(|e| Error::io(&self.dir, "cannot watch directory", e))?,
                );
                wait::wait_for(spec, &mut progress, |block| -> Result<_, Failed> {
                    if block {
                        w.wait()?;
                        return Ok(None);
                    }
                    Ok(try_slots()?)
                })
                .map_err(|f| f.naming(&self.dir, "cannot wait"))?
            }
        };
        drop(queue); // the next in line may look now
        Ok(got.map(|i| {
            let file = files[i].take().expect("the slot we locked");
            let mut guard = SlotGuard::new(&top, i, file);
            guard._watch = watch.and_then(|w| w.retire().unwrap_or(None));
            guard
        }))
    }

    /// Create the directory and record `N`, or check `N` against the recorded one.
    fn setup(&self) -> Result<Dir> {
        if self.slots == 0 || self.slots > MAX_SLOTS {
            return Err(Error::new(
                &self.dir,
                ErrorKind::Invalid,
                format!("slots must be 1 to {MAX_SLOTS}"),
            ));
        }
        let top = Dir::top(&self.dir, true, "cannot create semaphore")?.expect("created");
        let recorded = match slots_in(&top)? {
            Some(n) => n,
            None => record_slots(&top, self.slots)?,
        };
        if recorded != self.slots {
            return Err(Error::new(
                &self.dir,
                ErrorKind::Invalid,
                format!(
                    "slot count {} differs from the {recorded} this semaphore was created with",
                    self.slots
                ),
            ));
        }
        Ok(top)
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
    let tmp = format!(".slots.{}.{}", std::process::id(), procinfo::now_micros());
    let write = || -> io::Result<()> {
        let mut f = top.create_new(&tmp, 0o644)?;
        crate::platform::fs::set_mode(&f, 0o644); // every user of the semaphore reads it
        io::Write::write_all(&mut f, format!("{n}\n").as_bytes())?;
        f.sync_all()
    };
    let result = write().and_then(|()| top.link(&tmp, "slots"));
    let _ = top.unlink_any(&tmp);
    match result {
        Ok(()) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(slots_in(top)?.unwrap_or(n)),
        Err(e) => Err(Error::io(&top.join("slots"), "cannot create", e)),
    }
}

/// Proof of holding one slot; released on drop.
#[must_use = "the slot is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SlotGuard {
    slot: usize,
    /// The slot's lock file, for errors.
    path: PathBuf,
    file: File,
    record: OwnRecord,
    /// The waiting line's close watch, closed only after the slot (`file`, declared before
    /// it) is free: closing it waits for the kernel (see `platform::notify`), which the next
    /// holder should not wait for, nor our command's start.
    _watch: Option<std::os::fd::OwnedFd>,
}

impl SlotGuard {
    fn new(dir: &Dir, slot: usize, file: File) -> SlotGuard {
        let holder = Holder::this_process(procinfo::now_micros(), procinfo::own_cmdline());
        let record = dir
            .try_clone()
            .ok()
            .and_then(|d| RecordFile::open_in(d, &slot_name(slot)));
        SlotGuard {
            slot,
            path: dir.join(&slot_name(slot)),
            file,
            record: OwnRecord::held(record, 0, holder),
            _watch: None,
        }
    }

    /// On a network file system, the check that the slot is still ours.
    pub fn loss_check(&self) -> Option<crate::LossCheck> {
        crate::LossCheck::of(&self.file, lock::Mode::Exclusive)
    }

    /// Which slot (0 to N-1) is ours: for allocating devices, ports or directories by slot.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Let the slot survive `exec` into children (`true`), as the mutex does, so that it stays
    /// held while they run even if this process dies; `false` keeps it close-on-exec.
    pub fn pass_down(&self, inherit: bool) -> Result<()> {
        lock::set_inheritable(&self.file, inherit)
            .map_err(|e| Error::io(&self.path, "cannot pass the slot down", e))
    }

    /// Record the command that runs in the slot, for status reports ([`status`]): for programs
    /// that run a command under the slot. (Call it with `None` just before starting the
    /// command, so that reports never show a running command as ours, and again with its pid.)
    pub fn set_child(&mut self, pid: Option<u32>, command: String) {
        self.record.set_child(pid, command);
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.record.released();
    }
}

/// One slot as [`status`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotStatus {
    /// Which slot (0 to N-1).
    pub slot: usize,
    /// Whether someone holds it (always, for the slots `status` lists).
    pub held: bool,
    /// Who holds it, where that can be known (its record, or the kernel's lock table).
    pub holder: Option<Holder>,
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
/// lock table and does not touch the locks.
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
        let (is_held, kernel_pid) = match probe::listed(&path, &file, probe::Kinds::Flock)? {
            Some(l) => (!l.locks.is_empty(), l.first_pid()),
            // A probe that fails says "held": never report a slot free on doubt.
            None => (probe::held(&file, Mode::Shared).unwrap_or(true), None),
        };
        if !is_held {
            continue;
        }
        let recorded = holder::read_in(&top, &name)
            .and_then(|r| r.holder)
            .filter(|h| kernel_pid.is_none_or(|k| k == h.pid));
        let holder = recorded.or_else(|| kernel_pid.map(Holder::local));
        held.push(SlotStatus {
            slot: i,
            held: true,
            holder,
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
    fn mismatched_slot_counts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let _a = Semaphore::new(&path, 3).acquire(None).unwrap().unwrap();
        let err = Semaphore::new(&path, 4).acquire(None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert!(
            err.to_string()
                .ends_with("slot count 4 differs from the 3 this semaphore was created with"),
            "{err}"
        );
        assert_eq!(status(&path).unwrap().held.len(), 1);
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
