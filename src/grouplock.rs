/*!
The group lock of Ruediger R. Asche's *Compound Win32 Synchronization Objects* (MSDN, 1994):
any number (or at most M) of processes of one group inside together, never two groups at once,
and no group starved by newcomers of the group inside.

# Protocol on disk

A group lock `L` is a directory (created if missing) holding:

- `L/turnstile`: taken **exclusively** by every process on its way in, and kept only until it
  is inside (as in [`crate::swmr`]);
- `L/group.NAME`: every member of group `NAME` inside holds a **shared** `flock` on it;
- `L/max.NAME/`: the group's cap, once one was set: a semaphore ([`crate::sem`]) whose slot count
  (its `slots` file) is the cap M; every member of `NAME` inside holds one of its slots. The cap
  is the group's, as the slot count is the semaphore's: set by the first member to give
  `--max`; members that omit `--max` run under it; another M is taken in its place once no
  member of `NAME` is inside, and refused while one is.

Enter as group `G`: (1) lock the turnstile, and *verify* that `turnstile` still names the file
locked (a deletion, below, may have removed it between our open and our lock: then start again,
opening `L` anew); (2) for every other `group.H` in `L`, take an exclusive lock (blocking: it is
granted once the last member of `H` has left) and release it at once; (3) read the cap in
force, `max.G/slots` (reached from the open directory of `L` without following a link, and only
if it is a regular file holding a count): a `--max` where no cap is in force yet first takes an
exclusive lock on `group.G` (granted once the members inside, who came in uncapped, have left);
another `--max` than the cap in force takes an exclusive lock on `group.G` *without waiting*:
had, no member of `G` is inside and the new cap is taken; busy, it is an error naming both;
(4) take the shared lock on `group.G` (converting that exclusive one); (5) with a cap, take a
slot of `max.G` (the first cap is recorded there as the semaphore records its count: written
under a temporary name and `link(2)`ed into place; a new one is rewritten there as the
semaphore takes a new count, which it does since nobody holds a slot); (6) release the
turnstile. Leave: release everything (the kernel does it if we die). A conflicting `--max` is
also refused before step (1), so that it fails at once, if the kernel's lock table shows a
member of `G` inside (a process holding `group.G` other than the one holding the turnstile).

Never two groups: a process of `G` is only inside after its step (2) saw every other group file
without shared holders while it held the turnstile, and nobody else can take a shared lock on a
group file without passing the turnstile. No starvation: a process of `H` that waits in step (2)
holds the turnstile, so newcomers of `G` queue behind it; it gets in as soon as the members of
`G` inside leave.

The cap holds from the moment it is recorded: it is recorded (first, or anew) only by a process
that holds the live turnstile and has seen `group.G` without members, and every later member
reads it under the turnstile, so every member inside from then on holds a slot, and all members
inside at once came in under one cap: two processes that start with different caps at once are
never inside together (the first through the turnstile sets the cap, the other is refused while
it is inside).

Passing down (`run`, unless `--close`): the descriptors of `group.G` and of the slot lose
close-on-exec before the command starts, so the command inherits their locks: the membership and
its slot last while the command (or anything it left running with them) runs, even if fsync is
killed, as the mutex's lock does.

# Deleting (`--delete`)

A member that asked for it ([`GroupLock::delete_on_release`]) removes `L` when it leaves, if
nobody else is inside, waiting or arriving; otherwise it leaves it to whoever leaves last.
Leaving is releasing the membership and its slot (the command has exited; a wait that gives up
leaves too). Then the *deletion attempt*:

- **d1** open the turnstile (nothing there: another deletion came first, done), lock it
  exclusively without waiting, and *verify* (replaced meanwhile: start d1 again). If it is busy,
  someone is on their way in (or another leaver is deleting): if the kernel's lock table shows a
  `group.*` file held by another process than the one holding the turnstile, a member is inside
  who leaves after us: stop, keeping the files; otherwise wait until the turnstile is free (a
  blocking lock, let go at once) and go to d1, keeping the files after a second (on network
  file systems the table cannot tell: we wait). A process on its way in holds the turnstile, so
  waiting for it keeps the last to leave from missing it;
- **d2** lock every `group.*` file without waiting, and *verify* each: a busy one means a member
  is inside, who leaves after us: stop, keeping the files;
- **d3** for every cap `max.NAME/`, hold its semaphore whole as the semaphore's own deletion
  does (its `queue`, then every slot file, without waiting: nobody can be in its line, since
  we hold the turnstile); check that every file to remove is a regular file with one link and,
  in a sticky directory, belongs to us or to the directory's owner: otherwise keep them all and
  say why;
- **d4** remove every cap's files and its directory, then the `group.*` files, then the
  turnstile (each still named as held), release them, and remove `L` if it is empty.

Racing acquirers never end up in two incarnations of `L`: nobody enters without holding the
live turnstile (step 1's verify), and a deletion removes files only while it holds the live
turnstile and every group file. The turnstile goes last, so whoever holds the live turnstile
holds the live group files and caps. A process that opened the old turnstile and locks it after
its removal fails *verify* and starts again; one that opened `L` before it was removed fails to
create files in it and starts again too. Files stay while a process the command left running
holds the membership, when another user's file is in one of the places above, or while someone
else is inside.
*/

use std::{
    fs::File,
    os::fd::AsFd,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    held,
    platform::{
        dir::Dir,
        fs as pfs,
        lock::{self, Mode},
        procinfo,
    },
    probe, restart,
    sem::{Semaphore, SlotGuard},
    teardown::{self, Held, Pass, Took},
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

/// A valid group name (1 to 200 letters, digits, `_` and `-`: ASCII, no dot, so that
/// `group.NAME` and `max.NAME` name one group each), or the reason it is not.
pub fn check_group_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "invalid group name '{name}': use letters, digits, '_' and '-'"
        )),
    }
}

pub use crate::teardown::Released;

/// A group lock at a directory path: processes enter as members of a named group (letters,
/// digits, `_` and `-`); any number of one group, or at most the group's cap, are inside
/// together, never two groups at once. A group that waits holds back newcomers of the group
/// inside, so no group is starved.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("repo.glock");
/// let lock = fsync::GroupLock::new(&path);
/// let r1 = lock.enter("readers", None)?.unwrap();
/// let r2 = lock.enter("readers", None)?.unwrap(); // one group shares
/// let gc = lock.clone();
/// let zero = Some(std::time::Duration::ZERO);
/// let waits = std::thread::spawn(move || gc.enter("gc", zero).map(|g| g.is_some()));
/// assert!(!waits.join().unwrap()?); // another waits (in this thread: an error)
/// drop((r1, r2));
/// assert!(lock.enter("gc", Some(std::time::Duration::ZERO))?.is_some());
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GroupLock {
    dir: PathBuf,
    poll: Duration,
    delete: bool,
    max: Option<usize>,
}

/// Proof of being inside; leaving happens on drop (removing the group lock if it was entered
/// with [`GroupLock::delete_on_release`] and nobody else uses it).
#[must_use = "the process leaves as soon as the guard is dropped"]
#[derive(Debug)]
pub struct GroupGuard {
    /// The group's file (`group.NAME`), for errors.
    path: PathBuf,
    /// `None` once left.
    member: Option<File>,
    slot: Option<SlotGuard>,
    /// The group lock's directory as opened, for deleting it on leaving.
    top: Option<Dir>,
    delete: bool,
    poll: Duration,
    /// This membership in the process's table of held locks.
    key: Option<held::Key>,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    acquired: std::time::Instant,
    /// Not `Send`: see [`Unbound`](crate::Unbound).
    bound: crate::platform::binding::Bound,
}

held::bindable!(GroupGuard, key);

/// The check is of our shared lock on the group's file; passing down passes the slot under
/// the cap too. A group lock keeps no record ([`set_child`](crate::Guard::set_child) records
/// nothing).
impl crate::Guard for GroupGuard {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(self.member(), lock::Mode::Shared, self.acquired)
    }

    fn pass_down(&mut self) -> Result<()> {
        lock::set_inheritable(self.member(), true)
            .map_err(|e| Error::io(&self.path, "cannot pass the membership down", e))?;
        self.slot.as_mut().map_or(Ok(()), crate::Guard::pass_down)
    }
}

impl GroupGuard {
    fn member(&self) -> &File {
        self.member.as_ref().expect("inside until left")
    }

    /// The slot held under the group's cap, if one is in force.
    pub fn slot(&self) -> Option<usize> {
        self.slot.as_ref().map(SlotGuard::slot)
    }

    /// Leave now, saying what became of the group lock's files and reporting failures to
    /// delete them (dropping the guard leaves too, silently). With
    /// [`delete_on_release`](GroupLock::delete_on_release) this may wait up to a second for a
    /// process on its way in to enter or give up (module docs, "Deleting").
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("repo.glock");
    /// use fsync::{grouplock::Released, GroupLock};
    /// let lock = GroupLock::new(&path).delete_on_release(true);
    /// let (r1, r2) = (lock.enter("readers", None)?.unwrap(), lock.enter("readers", None)?.unwrap());
    /// assert_eq!(r1.release()?, Released::KeptInUse); // r2 is still inside
    /// assert_eq!(r2.release()?, Released::Deleted); // the last to leave removes it
    /// assert!(!path.exists());
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn release(mut self) -> Result<Released> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<Released> {
        if let Some(key) = self.key.take() {
            held::remove(key);
        }
        let Some(member) = self.member.take() else {
            return Ok(Released::Kept);
        };
        let slot = self.slot.take();
        if !self.delete {
            return Ok(Released::Kept);
        }
        // A process the command left running may hold the membership (and its slot) through
        // inherited descriptors: it is still inside.
        if procinfo::description_shared(member.as_fd()) {
            return Ok(Released::KeptStillHeld);
        }
        drop(slot);
        drop(member); // leave
        match &self.top {
            Some(top) => delete_files(top, self.poll),
            None => Ok(Released::Kept),
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

impl GroupLock {
    /// The group lock at the directory `path`, which is created on first entry. Touches
    /// nothing until then.
    pub fn new(path: impl AsRef<Path>) -> GroupLock {
        GroupLock {
            dir: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            delete: false,
            max: None,
        }
    }

    /// Enter under a cap: at most `max` members of the group entered are inside at once. The
    /// group's cap is set by the first member that gives one; without this, the cap in force
    /// (if any) applies. A `max` other than the cap in force is taken in its place once no
    /// member of the group is inside, and is an error ([`ErrorKind::Invalid`]) while one is.
    pub fn max(mut self, max: usize) -> GroupLock {
        self.max = Some(max);
        self
    }

    /// Remove the group lock's directory and files when leaving, if nobody else is inside,
    /// waiting or arriving (otherwise whoever of them leaves last with this set removes them);
    /// leaving includes a wait that gives up. Processes that opened the files before their
    /// removal notice and take new ones: two groups are still never inside together, and a cap
    /// still holds (module docs, "Deleting"). Never removes a link, or another user's file in a
    /// sticky directory. [`GroupGuard::release`] says what became of the files.
    pub fn delete_on_release(mut self, yes: bool) -> GroupLock {
        self.delete = yes;
        self
    }

    /// How often a wait re-checks on a network file system, where another host's leaving
    /// wakes nobody ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> GroupLock {
        self.poll = every;
        self
    }

    /// Enter as a member of `group`, waiting up to `timeout`, under the cap
    /// [`max`](Self::max) sets, or else the cap in force (if any).
    ///
    /// Blocks in the kernel until the other groups' members have left (and, under a cap,
    /// until a slot is free), which wakes it at once on a local file system; on a network file
    /// system it also re-checks every [`poll_interval`](Self::poll_interval). Other errors:
    /// [`ErrorKind::Invalid`] for a group name that is not letters, digits, `_` and `-`;
    /// [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the directory or its files
    /// cannot be created or opened; [`ErrorKind::Unavailable`] if another process keeps
    /// deleting the directory as we enter (a hundred times in a row).
    pub fn enter(&self, group: &str, timeout: Option<Duration>) -> Result<Option<GroupGuard>> {
        Ok(self.enter_with(group, timeout, |_| {})?.acquired())
    }

    /// Enter if that can be done right now: no other group inside or waiting and, under a
    /// cap, a slot free. `Ok(None)` otherwise, and also while another process is on its way in
    /// at this very instant. Never waits. Caps and errors as [`enter`](Self::enter).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("repo.glock");
    /// let lock = fsync::GroupLock::new(&path);
    /// let reader = lock.try_enter("readers")?.expect("nobody inside");
    /// let gc = lock.clone();
    /// let busy = std::thread::spawn(move || gc.try_enter("gc").map(|g| g.is_some()));
    /// assert!(!busy.join().unwrap()?); // busy: another group is inside
    /// drop(reader);
    /// assert!(lock.try_enter("gc")?.is_some()); // free
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn try_enter(&self, group: &str) -> Result<Option<GroupGuard>> {
        self.enter(group, Some(Duration::ZERO))
    }

    /// Like [`enter`](Self::enter), telling a timeout from a cancellation, and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    pub fn enter_with(
        &self,
        group: &str,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<GroupGuard>> {
        check_group_name(group).map_err(|why| Error::new(&self.dir, ErrorKind::Invalid, why))?;
        let deadline = Deadline::after(timeout);
        // Every file is reached from the directory opened here, never by its path again. A
        // deletion may remove what we opened at any point until we hold the live turnstile:
        // then start over.
        let (top, outcome) = restart::after_deletion(
            &self.dir,
            deadline,
            || Dir::create_top(&self.dir, "cannot create group lock"),
            |top| self.enter_in(top, group, self.max, deadline, &mut progress),
        )?;
        if self.delete && !matches!(outcome, Outcome::Acquired(_)) {
            // Giving up is leaving too: we may have been the last one waiting. Best effort.
            let _ = delete_files(&top, self.poll);
        }
        Ok(outcome)
    }

    /// Steps (1) to (6) of the module docs in the group lock's directory `top`: `None` if the
    /// turnstile we locked was removed meanwhile (a deletion), so that the caller starts over.
    fn enter_in(
        &self,
        top: &Dir,
        group: &str,
        max: Option<usize>,
        deadline: Deadline,
        progress: &mut impl FnMut(Duration),
    ) -> Result<Outcome<Option<GroupGuard>>> {
        let turnstile_path = top.join("turnstile");
        let turnstile = top.open_or_create("turnstile")?;
        let own_name = format!("group.{group}");
        // Another cap fails at once while members of the group are inside (and for certain
        // below, under the turnstile).
        if let (Some(m), Some(c)) = (max, cap_in(top, group)?)
            && m != c
            && teardown::inside_besides(top, &turnstile, std::slice::from_ref(&own_name))
        {
            return Err(self.conflict(group, c, m));
        }
        let network = pfs::fs_kind(&turnstile).network;
        let spec = Wait::for_lock(deadline, network, self.poll);
        let mut step = |file: &File, mode: Mode, path: &Path| {
            wait::flock(spec, &mut *progress, file, mode, path)
        };
        wait::acquired!(step(&turnstile, Mode::Exclusive, &turnstile_path)?);
        if teardown::names(top, "turnstile", &turnstile)?.is_none() {
            return Ok(Outcome::Acquired(None)); // removed between our open and our lock
        }
        // A thread inside a group (through another guard) would wait for itself to leave it.
        let refuse_own = |file: &File, path: &Path| -> Result<()> {
            let meta = file
                .metadata()
                .map_err(|e| Error::io(path, "cannot stat", e))?;
            match held::held_by_this_thread(held::Key::new(&meta, Mode::Exclusive)) {
                true => Err(held::deadlock(path)),
                false => Ok(()),
            }
        };
        for other in groups_in(top)?.into_iter().filter(|g| g != group) {
            let name = format!("group.{other}");
            let file = top.open_or_create(&name)?;
            refuse_own(&file, &top.join(&name))?;
            wait::acquired!(step(&file, Mode::Exclusive, &top.join(&name))?); // granted once that group is empty
        }
        let own = top.join(&own_name);
        let member = top.open_or_create(&own_name)?;
        // The cap is read again under the turnstile: only a process holding it sets one.
        let cap = match (max, cap_in(top, group)?) {
            (Some(m), Some(c)) if m != c => {
                // Another cap: taken only while no member of the group is inside (nobody
                // comes in meanwhile: we hold the turnstile). Our exclusive lock becomes the
                // shared one below.
                let free = lock::flock(&member, Mode::Exclusive, false)
                    .map_err(|e| Error::io(&own, "cannot lock", e))?;
                if !free {
                    return Err(self.conflict(group, c, m));
                }
                Some(m)
            }
            (Some(m), None) => {
                // The first cap: members of the group inside without one would not count
                // against it, so wait until they have left (no one comes in meanwhile: we
                // hold the turnstile). Our exclusive lock becomes the shared one below.
                refuse_own(&member, &own)?;
                wait::acquired!(step(&member, Mode::Exclusive, &own)?);
                Some(m)
            }
            (_, in_force) => in_force,
        };
        wait::acquired!(step(&member, Mode::Shared, &own)?);
        let slot = match cap {
            Some(m) => {
                // Named through the open directory: a link swapped in cannot redirect it. A
                // new cap is taken there as a semaphore takes a new count (nobody holds a
                // slot: no member is inside).
                let max_dir = top.pinned_join(&format!("max.{group}"));
                let sem = Semaphore::new(max_dir, m).poll_interval(self.poll);
                let slot = (sem.acquire_until(deadline, &mut *progress))
                    .map_err(|e| e.shown_as(&top.pinned(), top.path()))?;
                Some(wait::acquired!(slot))
            }
            None => None,
        };
        // Every step granted by now: the last of them, the group's file or the slot, was.
        let acquired = std::time::Instant::now();
        drop(turnstile);
        let key = member
            .metadata()
            .ok()
            .map(|meta| held::Key::new(&meta, Mode::Shared));
        if let Some(key) = key {
            held::add(key);
        }
        Ok(Outcome::Acquired(Some(GroupGuard {
            bound: std::marker::PhantomData,
            path: own,
            member: Some(member),
            slot,
            top: top.try_clone().ok(),
            delete: self.delete,
            poll: self.poll,
            key,
            acquired,
        })))
    }

    /// The cap in force for `group` (the `max` its first capped member gave), if one was set:
    /// the slot count of its `max.NAME` semaphore. Read without following a link or blocking on
    /// a FIFO; anything but what fsync makes there is an error naming it.
    pub fn cap(&self, group: &str) -> Result<Option<usize>> {
        match Dir::top(&self.dir, false, "cannot open group lock")? {
            Some(top) => cap_in(&top, group),
            None => Ok(None),
        }
    }

    /// A `max` other than the cap in force while members of the group are inside.
    fn conflict(&self, group: &str, in_force: usize, given: usize) -> Error {
        Error::new(
            &self.dir,
            ErrorKind::Invalid,
            format!(
                "group '{group}' is in use under a cap of {in_force} members, not {given}: \
                 another cap is taken only once no member of the group is inside; until then \
                 give {in_force} or none"
            ),
        )
    }
}

/// One deletion pass of the module docs (d1 to d4) in the group lock's directory `top`.
fn delete_pass(top: &Dir) -> Result<Pass> {
    let group_files = teardown::names_where(top, |n| n.starts_with("group."))?;
    let mut held = Held::default();
    match held.take(top, "turnstile")? {
        Took::Held => {}
        // Gone: another deletion came first.
        Took::Missing => return Ok(Pass::Done(Released::Deleted)),
        Took::Replaced => return Ok(Pass::Again),
        Took::Busy(turnstile) => {
            return Ok(
                match teardown::inside_besides(top, &turnstile, &group_files) {
                    true => Pass::Done(Released::KeptInUse),
                    false => Pass::Busy(turnstile),
                },
            );
        }
    }
    for name in &group_files {
        match held.take(top, name)? {
            Took::Held | Took::Missing => {}
            Took::Busy(_) => return Ok(Pass::Done(Released::KeptInUse)),
            Took::Replaced => return Ok(Pass::Again),
        }
    }
    // The caps: each a semaphore, held whole (nobody can be in line for it: we hold the
    // turnstile).
    let mut caps = Vec::new();
    let entries = (top.entries()).map_err(|e| Error::io(top.path(), "cannot list", e))?;
    for (name, _) in entries.into_iter().filter(|(n, _)| n.starts_with("max.")) {
        let Some(max_dir) = top.open_sub(&name)? else {
            continue;
        };
        let mut slots = Held::default();
        match slots.take(&max_dir, "queue")? {
            Took::Held | Took::Missing => {}
            Took::Busy(_) => return Ok(Pass::Done(Released::KeptInUse)),
            Took::Replaced => return Ok(Pass::Again),
        }
        if let Some(pass) = crate::sem::hold_slots(&max_dir, &mut slots)? {
            return Ok(pass);
        }
        let also = crate::sem::unlocked_files(&max_dir)?;
        caps.push((max_dir, slots, also));
    }
    // All or nothing: everything is checked before anything is removed.
    for (max_dir, slots, also) in &caps {
        teardown::check_all(max_dir, slots, also)?;
    }
    teardown::check_all(top, &held, &[])?;
    for (max_dir, slots, also) in &caps {
        teardown::remove_all(max_dir, slots, also)?;
        let _ = max_dir.remove_self();
    }
    teardown::remove_all(top, &held, &[])?;
    let _ = top.remove_self(); // fails harmlessly if a newcomer is back
    Ok(Pass::Done(Released::Deleted))
}

/// The deletion attempt of a leaver (module docs, "Deleting").
fn delete_files(top: &Dir, poll: Duration) -> Result<Released> {
    teardown::attempt(top, top.path(), poll, || delete_pass(top))
}

/// The cap in force for `group` in the group lock `top` ([`GroupLock::cap`]).
fn cap_in(top: &Dir, group: &str) -> Result<Option<usize>> {
    match top.open_sub(&format!("max.{group}"))? {
        Some(max_dir) => crate::sem::slots_in(&max_dir),
        None => Ok(None),
    }
}

/// The groups that have been inside the group lock `top` (each has its `group.NAME` file).
fn groups_in(top: &Dir) -> Result<Vec<String>> {
    let entries = (top.entries()).map_err(|e| Error::io(top.path(), "cannot list", e))?;
    Ok(entries
        .into_iter()
        .filter_map(|(n, _)| n.strip_prefix("group.").map(str::to_string))
        .filter(|n| check_group_name(n).is_ok())
        .collect())
}

/// Which groups are inside and how many of each, and how many wait (local file systems; on
/// network file systems the counts are `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLockStatus {
    /// The groups inside (normally one), sorted, each with its number of members inside.
    pub inside: Vec<(String, Option<usize>)>,
    /// Processes waiting to enter, of any group.
    pub waiting: Option<usize>,
}

/// Who is inside the group lock at `dir`, and how many wait. Creates nothing; on a local file
/// system it reads the kernel's lock table and does not touch the locks, on a network file
/// system it probes with locks released at once. A missing group lock is empty.
pub fn status(dir: &Path) -> Result<GroupLockStatus> {
    if !dir.exists() {
        pfs::check_parent(dir)?;
        return Ok(GroupLockStatus {
            inside: Vec::new(),
            waiting: Some(0),
        });
    }
    let Some(top) = Dir::top(dir, false, "cannot open group lock")? else {
        return Ok(GroupLockStatus {
            inside: Vec::new(),
            waiting: Some(0),
        });
    };
    let network = pfs::fs_kind_of_path(dir).network;
    let mut inside = Vec::new();
    for g in groups_in(&top)? {
        let path = top.join(format!("group.{g}"));
        let Some(file) = top.open(format!("group.{g}"), false)? else {
            continue;
        };
        match probe::listed(&path, &file, probe::Kinds::Flock)? {
            Some(listed) => {
                let n = listed.locks.iter().filter(|l| !l.exclusive).count();
                if n > 0 {
                    inside.push((g, Some(n)));
                }
            }
            // An exclusive probe fails while members are inside (or one is checking).
            None if matches!(probe::held(&file, Mode::Exclusive), Ok(true)) => {
                inside.push((g, None));
            }
            None => {}
        }
    }
    let waiting = match top.stat("turnstile") {
        Ok(m) if !network => probe::in_line(m.st_dev, m.st_ino),
        Ok(_) => None,
        Err(_) => Some(0),
    };
    inside.sort();
    Ok(GroupLockStatus { inside, waiting })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread inside a group that asks to enter another (or to set the group's first cap)
    /// through another guard would wait for itself to leave: refused at once. Entering its
    /// own group again is fine; a member that left is forgotten.
    #[test]
    fn the_same_thread_cannot_deadlock_on_its_own_group_lock() {
        // A build that waited would fail here after this long, not hang.
        const BOUND: Duration = Duration::from_secs(5);
        let dir = tempfile::tempdir().unwrap();
        let lock = GroupLock::new(dir.path().join("l"));
        let inside = lock.enter("a", None).unwrap().unwrap();
        let err = lock.enter("b", Some(BOUND)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
        assert!(
            err.to_string().contains("already held by this thread"),
            "{err}"
        );
        let err = lock.clone().max(2).enter("a", Some(BOUND)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
        let again = lock.try_enter("a").unwrap().expect("one group shares");
        drop((inside, again));
        assert!(lock.try_enter("b").unwrap().is_some(), "left: forgotten");
        // Another thread just waits its turn (here: finds it busy).
        let inside = lock.enter("a", None).unwrap().unwrap();
        let other = lock.clone();
        let busy = std::thread::spawn(move || other.try_enter("b").unwrap().is_none());
        assert!(busy.join().unwrap());
        drop(inside);
    }

    #[test]
    fn max_limits_a_group() {
        let dir = tempfile::tempdir().unwrap();
        let lock = GroupLock::new(dir.path().join("g"));
        let a = lock.clone().max(2).enter("x", None).unwrap().unwrap();
        let b = lock.clone().max(2).enter("x", None).unwrap().unwrap();
        assert!(
            lock.clone()
                .max(2)
                .enter("x", Some(Duration::ZERO))
                .unwrap()
                .is_none()
        );
        assert_ne!(a.slot(), b.slot());
        let st = status(&dir.path().join("g")).unwrap();
        assert_eq!(st.inside, vec![("x".to_string(), Some(2))]);
    }

    #[test]
    fn the_cap_is_the_groups() {
        let dir = tempfile::tempdir().unwrap();
        let lock = GroupLock::new(dir.path().join("g"));
        let uncapped = lock.enter("y", None).unwrap().unwrap();
        assert_eq!(uncapped.slot(), None, "no cap in force yet");
        // The first cap waits for the members inside without one (another thread: this one
        // would wait for itself, which is refused).
        let capped = lock.clone().max(1);
        let waits =
            std::thread::spawn(move || capped.enter("y", Some(Duration::ZERO)).unwrap().is_none());
        assert!(waits.join().unwrap());
        drop(uncapped);
        let a = lock.clone().max(1).enter("y", None).unwrap().unwrap();
        assert_eq!(a.slot(), Some(0));
        // Members without a cap run under it; another cap is refused.
        let zero = Some(Duration::ZERO);
        assert!(lock.enter("y", zero).unwrap().is_none());
        let err = lock.clone().max(2).enter("y", zero).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert!(err.to_string().contains("cap of 1"), "{err}");
        drop(a);
        assert_eq!(lock.enter("y", zero).unwrap().unwrap().slot(), Some(0));
    }
}
