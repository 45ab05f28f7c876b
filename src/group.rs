/*!
The group: a pool of processes that join and leave; others ask whether it is empty (the
`TGpFileGroup` of Primoz Gabrijelcic's *Let's Cooperate: File system-based synchronisation
primitives*, made countable and crash-safe).

# Protocol on disk

A group `G` is a directory (created if missing) holding:

- `G/gate`: every member holds a **shared** `flock` on it for as long as it is a member. The
  kernel (or file server) drops it when a member dies, so a crashed member has left at once.
- `G/join.lock`: a mutex (see [`crate::mutex`], with its unlink-safe acquisition) that
  serialises the join and leave steps which must know whether they are first or last, and the
  lock probes of observers on network file systems.
- `G/members/HOST.PID.STAMP`: one registration per member, in the holder record format of
  [`crate::holder`] (pid, host, command, since). The member holds an **exclusive** `flock` on
  it; a registration nobody has locked belongs to a dead member: observers pass over it, and
  joiners and leavers remove it (below). A registration is written as `members/.tmp-NAME`,
  locked, then renamed into place, so a visible registration is always locked while its member
  lives.

**Is anyone in?** On a local file system: some registration in `members/` is locked (a member
takes `gate` before it registers and unregisters before it lets `gate` go, so this proves it; a
leaver with a clean-up keeps its registration until the clean-up is over, and is in until then,
see below), or else the kernel's lock table (`/proc/locks`) lists a shared lock on `gate`: passive reads that
disturb no one. On a network file system: under
`join.lock`, a non-blocking exclusive lock on `gate` fails (it is released at once if it
succeeds); holding `join.lock` keeps two observers' probes from colliding.

**join**: (1) create `G`, `G/members`; (2) acquire `join.lock` (if `G` vanished meanwhile, a
last member leaving with `--delete`, start over); re-create `G/members` if it is gone; (3)
*first* = nobody is in (see *leave with a clean-up* for the holds of a killed clean-up that
are still going away); (4) take the shared lock on `gate`; (5) register; (6) release
`join.lock`.

**Dead members' registrations** are removed only by joiners and leavers, holding `join.lock`:
on a local file system, those that *is anyone in?* passes over on its way to a held one (so
all of them when nobody is in); on a network file system, where it looks at none, all of them
when the joiner is *first* or the leaver *last*. Observers (*empty*, *members*, *wait-empty*,
*watch*) only read: they pass over a dead member's registration and remove nothing. Steps (2) and (4) wait until the join's deadline: only fsync's momentary probes
hold `gate` exclusively, but whoever may open it may hold it for ever. `gate` and `join.lock`
get the mode of the platform layer's rule (`src/platform/fs.rs`, *Who may lock an internal
lock file*): only those who may write `G` or `G/members` can open them.

**leave**: (1) acquire `join.lock`; (2) unlink the registration and close it; (3) close `gate`
(dropping the shared lock); (4) *last* = nobody is in; (5) with `--delete` and *last*: remove
`gate`, reap `members/` and remove it, release `join.lock` deleting it, and remove `G` if it is
empty (a joiner that already waits on the old `join.lock` re-creates everything: the mutex's
acquisition notices the unlinked file and retries).

**leave with a clean-up** ([`Membership::leave_then`], `fsync group join --last`): the
clean-up runs when the leaver is the last, before anyone can join again. (1) acquire
`join.lock`; (2) close `gate` (our shared lock goes, unless a process we passed the
membership down to keeps it) but keep the registration, locked; (3) *last* = nobody else is
in: *is anyone in?* passing over our own registration; (4) if not *last*: unregister as
leave's step (2) does (*not last*, or kept by a descendant) and release `join.lock`; (5) if
*last*: take a shared lock on `gate` again (a new open of it; only a momentary exclusive
probe can be in the way, and we wait for that in the kernel, a second at most: without it the
registration alone says we are in), add the line `cleanup 1` to our registration (before
`end`; holder records ignore keys they do not know), run the clean-up, then
unregister, close `gate`, with `--delete` remove the files as leave's step (5) does, and
release `join.lock`.
- Joiners take `join.lock` first, so from the moment the leaver finds itself last until its
  clean-up has finished nobody joins; the next joiner then is *first* (its set-up never
  overlaps the clean-up). Leaving is serialised the same way: a clean-up never runs twice for
  one period of the group.
- Observers see the leaver as a member until the clean-up has finished: its registration stays
  locked throughout, and its shared lock on `gate` is missing only between steps (2) and (5),
  while the registration says it is in. So `is_empty` says no, `members` lists it (with the
  clean-up's command, which the leaver records), and *wait-empty* and *watch*, blocked on
  `gate`, wake when it is over. (A local *wait-empty* that wakes between steps (2) and (5) finds
  the registration and waits again.) On a network file system observers take `join.lock`, so
  they wait for the clean-up there too: a clean-up must not ask whether its own group is empty
  there.
- If the membership was passed down ([`Guard::pass_down`](crate::Guard::pass_down)), so are the leaver's holds
  while the clean-up runs (`join.lock`, `gate` and the registration): a command the clean-up
  starts inherits them, and a leaver killed while it runs keeps joiners out until that command,
  and anything it left running with them, has exited. A member whose membership outlives it
  (see below) never runs the clean-up, since nobody runs its *last* step.
- When those processes exit, the kernel drops their holds one after the other, in an order
  it chooses (recent Linux kernels drop the last-opened first), so a joiner can get
  `join.lock` while the registration or the shared lock on `gate` are still going. So a
  joiner holding `join.lock` that finds a registration marked `cleanup 1` still held waits
  for it (a blocking shared lock, until its deadline: a process the clean-up left running
  with it keeps joiners out as `join.lock` would), and one that finds a shared lock on `gate`
  but no registration held (an exiting process's last hold, or a stranger's) waits for it a
  second at most; then it asks again.

**A prepared directory**: members create only their registrations, in `G/members`; `G`,
`gate` and `join.lock` they only open and lock, and opening an existing file read-only is
enough for `flock` on a local file system (on a network file system an exclusive lock needs
write access, so there `gate` and `join.lock` must be writable by every member). So an
administrator can create `G`, the empty files `gate` and `join.lock`, and a `members`
directory that every member may write (sticky, `1777`, or `3770` for the members of one Unix
group), and leave the rest read-only to them. A member that cannot create what is missing, or
its registration, fails with [`ErrorKind::PermissionDenied`] naming what must be writable.
With `--delete`, a last leaver that may not remove `gate` removes nothing: a prepared directory
stays as it was made. In a sticky `members`, a dead member's registration can be removed only
by its owner (or root): until then readers pass over it, as over any dead member's.

**Passing the membership down** (`fsync group join`, unless `--close`): before the command
starts, the member clears close-on-exec on its descriptors of `gate` and of its registration,
so the command inherits both open file descriptions, and with them both locks (a `flock` lock
belongs to the description, not to a process). The membership then lasts as long as any process
holding them: the command, or a daemon it left running.
- *The member (fsync) is killed* while its command runs: it never leaves. The command still
  holds the shared lock on `gate` and the exclusive lock on the registration, which still names
  the member and its command: *is anyone in?* says yes, `members` lists it, a joiner is not
  *first*. When the command exits, the kernel drops both locks; the registration is then an
  unlocked one, a dead member's, which readers pass over and the next joiner or leaver removes. Nobody runs the *last* step for this
  member, so `--delete` deletes nothing then (the next last leaver does).
- *The command exits but left a process running* with the descriptors: leave's step (2) becomes
  close the registration first, then probe it with a non-blocking **shared** lock (only its
  holders ever lock it exclusively; readers probe with shared locks, which do not conflict): if
  the probe fails, a descendant still holds it, and it stays, locked, as that descendant's;
  otherwise it is unlinked. A kept registration means the group is not empty, so the leaver is
  not *last* and deletes nothing. `members` names the live process holding the registration as
  the member's `child` once the member and its command are gone from this host.
- Readers never confuse the two states: a registration is removed only when nobody holds it,
  and only its creator ever locked it, so once unlocked it stays dead.

**watch** creates nothing: until a joiner has made `G`, `G/members` and `G/gate`, it watches
`G` (or `G`'s parent, until `G` appears) for them; then it waits as *wait-empty* does, or for
a registration to appear in `members/`.

**wait-empty**: on a local file system, a blocking exclusive `flock` on `gate` returns when the
last shared lock goes (kernel wake-up; Linux `flock` does not hold back new shared lockers for a
waiting exclusive one, so members can still join meanwhile); it is released at once and the
answer is confirmed by the passive check. On network file systems it polls the probe.
*/

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use nix::libc;

use crate::{
    error::{Error, ErrorKind, Result},
    holder::{self, Found, Holder, Record, Registration},
    mutex::{Mutex, MutexGuard},
    platform::{
        dir::Dir,
        fs as pfs,
        lock::{self, Mode},
        procinfo,
    },
    probe, restart,
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

/// A group of processes at a directory path. Members join and leave (or die: a dead member has
/// left at once); anyone can ask whether the group is empty ([`is_empty`]), list its members
/// ([`members`]) or wait until it is empty ([`wait_empty`]). A joiner learns whether it was the
/// first, a leaver whether it was the last: what "start the server if nobody runs it, stop it
/// with the last client" needs ([`Membership::leave_then`] stops it before anyone can join
/// again).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("app.grp");
/// let group = fsync::Group::new(&path);
/// assert!(fsync::group::is_empty(&path)?);
/// let member = group.join(None)?.expect("joins at once");
/// assert!(member.first());
/// assert!(!fsync::group::is_empty(&path)?);
/// assert_eq!(member.leave()?, fsync::group::Left::Last); // we were the last to leave
/// assert!(fsync::group::is_empty(&path)?);
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Group {
    dir: PathBuf,
    delete: bool,
    poll: Duration,
    /// How long leaving waits for the join step (`None`: for ever).
    leave_timeout: Option<Duration>,
}

struct Paths {
    dir: PathBuf,
    gate: PathBuf,
    members: PathBuf,
}

fn paths(dir: &Path) -> Paths {
    Paths {
        dir: dir.to_path_buf(),
        gate: dir.join("gate"),
        members: dir.join("members"),
    }
}

impl Group {
    /// The group at the directory `path`, which is created on first join. Touches nothing
    /// until then.
    pub fn new(path: impl AsRef<Path>) -> Group {
        Group {
            dir: path.as_ref().to_path_buf(),
            delete: false,
            poll: DEFAULT_POLL,
            leave_timeout: None,
        }
    }

    /// Leaving waits at most `timeout` for the join step (`join.lock`), which it takes to tell
    /// whether it is the last member; by default as long as another process holds it, which
    /// another user sharing the group can make for ever. A member that gives up leaves all
    /// the same (its registration goes, so it is no member any more) without asking:
    /// [`Left::Unchecked`], no clean-up ([`Membership::leave_then`]) and no deletion
    /// ([`delete_when_empty`](Self::delete_when_empty)).
    pub fn leave_timeout(mut self, timeout: Duration) -> Group {
        self.leave_timeout = Some(timeout);
        self
    }

    /// Remove the group's files (and its directory, if then empty) when the last member leaves.
    pub fn delete_when_empty(mut self, yes: bool) -> Group {
        self.delete = yes;
        self
    }

    /// How often a wait re-checks on a network file system, where other hosts' changes wake
    /// nobody ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Group {
        self.poll = every;
        self
    }

    /// Join, waiting up to `timeout` for the join step; `Ok(None)` if it did not come.
    ///
    /// Joining never waits for the members: any number join. It waits only while another
    /// process joins or leaves (a short lock that makes *first* and *last* exact), blocking in
    /// the kernel. Errors: [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the
    /// group's directory or files cannot be created or opened; [`ErrorKind::Unavailable`] if
    /// another process keeps deleting the directory as we join (a hundred times in a row).
    pub fn join(&self, timeout: Option<Duration>) -> Result<Option<Membership>> {
        Ok(self.join_with(timeout, |_| {})?.acquired())
    }

    /// Join if no other process is joining or leaving at this instant; `Ok(None)` if one is.
    /// Never waits for it. Errors as [`join`](Self::join).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("app.grp");
    /// let group = fsync::Group::new(&path);
    /// let member = group.try_join()?.expect("nobody else is joining or leaving");
    /// assert!(member.first());
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn try_join(&self) -> Result<Option<Membership>> {
        self.join(Some(Duration::ZERO))
    }

    /// Join, reporting how an unsuccessful wait ended, and calling `progress` with the time
    /// waited when the wait starts blocking and about once a second after.
    pub fn join_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<Membership>> {
        let p = paths(&self.dir);
        let deadline = Deadline::after(timeout);
        // A last member leaving with --delete may remove the directory under us at any point
        // until we hold join.lock: then start over.
        let (top, acquired) = restart::after_deletion(
            &p.dir,
            deadline,
            || Dir::create_top(&p.dir, "cannot create group directory"),
            |top| {
                top.create_sub("members")?;
                Ok(serial_lock(top, self.poll, deadline, &mut progress)?.map(Some))
            },
        )
        .map_err(|e| prepared(e, &p))?;
        let serial = wait::acquired!(acquired);
        let gate = top.open_or_create("gate").map_err(|e| prepared(e, &p))?;
        // The last leaver may have removed `members` before we got join.lock.
        let members = top.create_sub("members").map_err(|e| prepared(e, &p))?;
        let spec = Wait {
            deadline,
            poll: Some(self.poll),
            progress: Some(wait::PROGRESS_EVERY),
        };
        let first = match first_joiner(&top, &p, &gate, &serial, spec, &mut progress)? {
            Ok(first) => first,
            Err(got) => return Ok(got.map(|()| unreachable!("not acquired"))),
        };
        if first {
            reap(&members); // all dead: see the module docs
        }
        // Only a momentary exclusive probe of fsync's can stand in the way; wait for it in the
        // kernel, until the join's deadline (whoever may open `gate` may hold it for ever).
        let got = wait::flock(spec, &mut progress, &gate, Mode::Shared, &p.gate)?;
        if !matches!(got, Outcome::Acquired(())) {
            return Ok(got.map(|()| unreachable!("not acquired")));
        }
        let acquired = std::time::Instant::now();
        let registration = register(&members).map_err(|e| prepared(e, &p))?;
        drop(serial);
        Ok(Outcome::Acquired(Membership {
            group: self.clone(),
            top,
            gate: Some(gate),
            registration: Some(registration),
            first,
            passed_down: false,
            acquired,
        }))
    }
}

/// How long a last leaver waits to take `gate` again for its clean-up (see
/// [`Membership::leave_then`]): fsync's own probes hold it exclusively for an instant.
const GATE_GRACE: Duration = Duration::from_secs(1);

/// Proof of membership; leaving happens on drop, or explicitly with [`Membership::leave`].
#[must_use = "the process leaves the group as soon as the membership is dropped"]
#[derive(Debug)]
pub struct Membership {
    group: Group,
    /// The group's directory as opened on joining: every later step works in it.
    top: Dir,
    gate: Option<File>,
    registration: Option<Member>,
    first: bool,
    passed_down: bool,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    acquired: std::time::Instant,
}

#[derive(Debug)]
struct Member {
    reg: Registration,
    /// Behind a lock so that [`set_child`](crate::Guard::set_child) takes the guard shared.
    holder: std::sync::Mutex<Holder>,
    /// Its file name in `members/`.
    name: String,
    /// Its clean-up runs ([`Membership::leave_then`]).
    cleaning: bool,
}

impl Member {
    fn set_child(&self, pid: Option<u32>, command: String) {
        let mut holder = crate::guard::lock_ignoring_poison(&self.holder);
        holder.child = pid;
        holder.command = command;
        self.rewrite_as(&holder);
    }

    fn rewrite(&self) {
        self.rewrite_as(&crate::guard::lock_ignoring_poison(&self.holder));
    }

    fn rewrite_as(&self, holder: &Holder) {
        let text = render_member(holder, self.cleaning);
        self.reg.rewrite(text.as_bytes());
    }
}

/// The check is of our shared lock on `gate`, which the file server can drop for a host it
/// lost touch with (then another host may find the group empty while we still work in it).
/// Passing down passes the lock on the gate and the registration: the command, and anything
/// it leaves running with the descriptors inherited, stays a member even if this process
/// dies (see the module docs for what leaving means then). The command is recorded for
/// [`members`].
impl crate::Guard for Membership {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(self.gate.as_ref()?, Mode::Shared, self.acquired)
    }

    fn pass_down(&mut self) -> Result<()> {
        let gate_path = self.group.dir.join("gate");
        if let Some(gate) = &self.gate {
            lock::set_inheritable(gate, true)
                .map_err(|e| Error::io(&gate_path, "cannot pass the membership down", e))?;
        }
        if let Some(r) = &mut self.registration {
            r.reg
                .pass_down(true)
                .map_err(|e| Error::io(&r.reg.path, "cannot pass the membership down", e))?;
        }
        self.passed_down = true;
        Ok(())
    }

    fn set_child(&self, pid: Option<u32>, command: &str) {
        if let Some(r) = &self.registration {
            r.set_child(pid, command.to_string());
        }
    }
}

impl Membership {
    /// Whether the group was empty when we joined.
    pub fn first(&self) -> bool {
        self.first
    }

    /// Leave, saying whether we were the last member ([`Left::Last`]), or whether a process we
    /// passed the membership down to is still a member ([`Left::StillHeld`]). Dropping the
    /// membership leaves too, silently. Waits, like joining, only while another process joins
    /// or leaves. To act as the last member before anyone can join again, use
    /// [`leave_then`](Self::leave_then).
    pub fn leave(mut self) -> Result<Left> {
        self.leave_inner()
    }

    /// Leave, and if we are the last member, run `cleanup` first, under the group's join lock:
    /// no process joins from the moment we are found to be the last until `cleanup` has
    /// returned (a joiner waits, and is then [`first`](Self::first)), and observers still count
    /// us as a member meanwhile ([`is_empty`] says no, [`members`] lists us, [`wait_empty`]
    /// waits). The mirror of [`first`](Self::first): set-up by the first member, clean-up by
    /// the last. Returns how we left and, exactly when that is [`Left::Last`], what `cleanup`
    /// returned.
    ///
    /// `cleanup` is not run when others are still in, nor when a process we passed the
    /// membership down to still holds it ([`Left::StillHeld`]): then whoever leaves last is
    /// another member, or nobody (a passed-down membership ends with its last process, which
    /// runs nothing). It may record the command it runs, for [`members`], through the
    /// [`Cleanup`] it is given. If the membership was passed down ([`pass_down`](crate::Guard::pass_down)),
    /// the holds that keep joiners out are passed down to the commands `cleanup` starts, so
    /// they last while such a command runs even if this process dies.
    ///
    /// `cleanup` must not join this group (in this thread that fails at once with
    /// [`ErrorKind::WouldDeadlock`]; another thread or process would wait for ever), nor, on a
    /// network file system, ask whether it is empty (that waits for the join lock too). The
    /// module docs have the protocol.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("app.grp");
    /// let group = fsync::Group::new(&path);
    /// let a = group.join(None)?.expect("joins at once");
    /// let b = group.join(None)?.expect("joins at once");
    /// let (left, ran) = a.leave_then(|_| "cleaned up")?;
    /// assert_eq!((left, ran), (fsync::group::Left::NotLast, None)); // b is still in
    /// let (left, ran) = b.leave_then(|_| {
    ///     // Nobody can join now, and the group is not empty yet.
    ///     assert!(!fsync::group::is_empty(&path).unwrap());
    ///     "cleaned up"
    /// })?;
    /// assert_eq!((left, ran), (fsync::group::Left::Last, Some("cleaned up")));
    /// assert!(fsync::group::is_empty(&path)?);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn leave_then<T>(
        mut self,
        cleanup: impl FnOnce(&mut Cleanup<'_>) -> T,
    ) -> Result<(Left, Option<T>)> {
        let Some(gate) = self.gate.take() else {
            return Ok((Left::NotLast, None));
        };
        let p = paths(&self.group.dir);
        let top = self
            .top
            .try_clone()
            .map_err(|e| Error::io(&p.dir, "cannot open", e))?;
        let leave_by = Deadline::after(self.group.leave_timeout);
        let serial = serial_lock(&top, self.group.poll, leave_by, |_| {})?;
        let Outcome::Acquired(mut serial) = serial else {
            // Interrupted, or out of time, while waiting to leave: leave without asking.
            self.registration.take();
            return Ok((Left::Unchecked, None));
        };
        // Our shared lock goes (unless a process we passed it down to keeps it); our
        // registration stays, locked: to observers we are in until the clean-up is over.
        drop(gate);
        let own = self.registration.as_ref().map(|r| r.name.as_str());
        let reopened = open_existing_gate(&top)?;
        let last = match &reopened {
            Some(g) => !has_members(&top, &p, g, Some(&serial), own)?,
            None => true,
        };
        if !last {
            let kept = self.registration.take().is_some_and(|r| r.reg.unregister());
            return Ok((if kept { Left::StillHeld } else { Left::NotLast }, None));
        }
        let gate = match reopened {
            Some(g) => g,
            None => top.open_or_create("gate")?,
        };
        // Marked, so that a joiner let in while the clean-up's holds go away after all (see
        // `first_joiner`) waits for the rest of them.
        if let Some(member) = self.registration.as_mut() {
            member.cleaning = true;
            member.rewrite();
        }
        // Only a momentary exclusive probe of fsync's can stand in the way (nobody can join:
        // we hold join.lock); wait for it in the kernel, a moment at most (whoever may open
        // `gate` may hold it for ever). Not had (that, or a cancellation signal came as we
        // left): clean up all the same, the registration alone saying we are in.
        let spec = Wait {
            deadline: Deadline::after(Some(GATE_GRACE)),
            poll: Some(self.group.poll),
            progress: None,
        };
        let _ = wait::flock(spec, |_| {}, &gate, Mode::Shared, &p.gate)?;
        if self.passed_down {
            lock::set_inheritable(&gate, true)
                .map_err(|e| Error::io(&p.gate, "cannot pass the membership down", e))?;
            // If the clean-up's processes die, their holds go one after the other; kernels
            // that drop them in the order of their descriptors drop join.lock last, and a
            // joiner let in earlier waits for the rest (`first_joiner`).
            let own = self.registration.as_ref().and_then(|r| r.reg.raw_fd());
            serial.raise_descriptor(own.unwrap_or(0).max(std::os::fd::AsRawFd::as_raw_fd(&gate)));
            crate::Guard::pass_down(&mut serial)?;
        }
        let value = cleanup(&mut Cleanup {
            member: self.registration.as_mut(),
        });
        let kept = self.registration.take().is_some_and(|r| r.reg.unregister());
        drop(gate);
        if self.group.delete && !kept {
            delete_files(&top, serial)?;
        } else {
            reap_in(&top); // all dead, but one a process we passed down to keeps
        }
        Ok((Left::Last, Some(value)))
    }

    fn leave_inner(&mut self) -> Result<Left> {
        let Some(gate) = self.gate.take() else {
            return Ok(Left::NotLast);
        };
        let p = paths(&self.group.dir);
        let top = self
            .top
            .try_clone()
            .map_err(|e| Error::io(&p.dir, "cannot open", e))?;
        let leave_by = Deadline::after(self.group.leave_timeout);
        let serial = serial_lock(&top, self.group.poll, leave_by, |_| {});
        // Unlinks the registration, unless a process we passed it down to still holds it.
        let kept = self.registration.take().is_some_and(|r| r.reg.unregister());
        drop(gate);
        let Outcome::Acquired(serial) = serial? else {
            return Ok(Left::Unchecked);
        };
        if kept {
            return Ok(Left::StillHeld); // so the group is not empty: nothing to delete
        }
        // Read-write where we may: a network file system's exclusive probe needs it.
        let reopened = open_existing_gate(&top)?;
        let last = match &reopened {
            Some(g) => !has_members(&top, &p, g, Some(&serial), None)?,
            None => true,
        };
        drop(reopened);
        if last && self.group.delete {
            delete_files(&top, serial)?;
        } else if last {
            reap_in(&top); // all dead: see the module docs
        }
        Ok(if last { Left::Last } else { Left::NotLast })
    }
}

/// The last member's clean-up under way ([`Membership::leave_then`]).
#[derive(Debug)]
pub struct Cleanup<'a> {
    member: Option<&'a mut Member>,
}

impl Cleanup<'_> {
    /// Record the command that runs the clean-up, for [`members`], which lists the leaving
    /// member until the clean-up is over: as [`Guard::set_child`](crate::Guard::set_child)
    /// records the member's command (with `None` just before starting it, then with its pid).
    pub fn set_child(&mut self, pid: Option<u32>, command: &str) {
        if let Some(m) = self.member.as_deref_mut() {
            m.set_child(pid, command.to_string());
        }
    }
}

/// The last leaver's `--delete`, holding `join.lock` (`serial`): remove `gate`, reap `members/`
/// and remove it, release `join.lock` deleting it, and remove the directory if it is empty. In
/// a directory we may not change (prepared by an administrator), nothing.
fn delete_files(top: &Dir, mut serial: MutexGuard) -> Result<()> {
    match top.unlink_file("gate") {
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS)
            ) =>
        {
            return Ok(()); // a prepared directory: it stays as it was made
        }
        _ => {}
    }
    reap_in(top);
    let _ = top.rmdir("members");
    serial.set_delete_on_release(true);
    serial.release()?;
    let _ = top.remove_self(); // fails harmlessly if a joiner is back
    Ok(())
}

/// How a member left ([`Membership::leave`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Left {
    /// Others are still in.
    NotLast,
    /// We were the last member: the group is empty now.
    Last,
    /// A process we passed the membership down to (one the command left running) still holds
    /// it: it stays a member until it exits.
    StillHeld,
    /// Left without the join step (interrupted by a cancellation signal, or out of
    /// [`Group::leave_timeout`]): we are no member any more, but whether we were the last was
    /// not asked, so no clean-up ran and nothing was deleted.
    Unchecked,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let _ = self.leave_inner();
    }
}

/// Take `join.lock` in the group's directory `top`: named through the open directory, so that
/// a directory swapped for a link meanwhile cannot take us elsewhere. A group removed and made
/// again while we wait leaves us in the removed one, where the lock cannot be created again:
/// [`ErrorKind::NotFound`], and the caller starts over.
fn serial_lock(
    top: &Dir,
    poll: Duration,
    deadline: Deadline,
    progress: impl FnMut(Duration),
) -> Result<Outcome<MutexGuard>> {
    Mutex::new(top.pinned_join("join.lock"))
        .internal()
        .poll_interval(poll)
        .acquire_until(deadline, progress)
        .map_err(|e| e.shown_as(&top.pinned(), top.path()))
}

/// Is anyone in (but the member whose registration is `own`, which the caller holds)? See the
/// module docs.
fn has_members(
    top: &Dir,
    p: &Paths,
    gate: &File,
    serial: Option<&MutexGuard>,
    own: Option<&str>,
) -> Result<bool> {
    Ok(!matches!(
        presence(top, p, gate, serial, own)?,
        Presence::Empty
    ))
}

/// What *is anyone in?* found, for a joiner that must tell a member from a clean-up's last
/// holds going away.
#[derive(Debug)]
enum Presence {
    Empty,
    In,
    /// A registration marked as a clean-up's (on a local file system): while we hold
    /// `join.lock`, its leaver let that go, so its holds are going one after the other.
    CleanupEnding(String, File),
    /// A shared lock on `gate` and no registration held (on a local file system): to a
    /// joiner, which holds `join.lock` (so nobody is between taking it and registering), an
    /// exiting member's last hold going, or a stranger's lock; to an observer, someone in.
    GateOnly,
}

fn presence(
    top: &Dir,
    p: &Paths,
    gate: &File,
    serial: Option<&MutexGuard>,
    own: Option<&str>,
) -> Result<Presence> {
    if !pfs::fs_kind(gate).network {
        // A registration that some member holds proves someone is in (a member takes the
        // gate before it registers, and unregisters before it lets the gate go or, leaving
        // with a clean-up, once the clean-up is over): a few probes instead of the kernel's
        // lock table, which costs ~3 ms per pass with 1000 members.
        // A joiner or leaver (holding join.lock) removes the dead ones it passes over.
        if let Some(members) = top.open_sub("members")?
            && let Some((name, file)) = held_registration(&members, own, serial.is_some())
        {
            return Ok(match is_cleanup(&file) {
                true => Presence::CleanupEnding(name, file),
                false => Presence::In,
            });
        }
        if let Some(listed) = probe::listed(&p.gate, gate, probe::Kinds::Flock)? {
            return Ok(match listed.locks.iter().any(|l| !l.exclusive) {
                true => Presence::GateOnly,
                false => Presence::Empty,
            });
        }
    }
    let _own;
    if serial.is_none() {
        _own = serial_lock(top, DEFAULT_POLL, Deadline::never(), |_| {})?;
    }
    let held = probe::held(gate, Mode::Exclusive)
        .map_err(|e| Error::io(&p.gate, "cannot test lock", e))?;
    Ok(if held { Presence::In } else { Presence::Empty })
}

/// *first* for a joiner holding `join.lock`: nobody is in, once the holds of a killed leaver's
/// clean-up (or of an exiting member) that are still going away have gone. A process exits
/// dropping its locks one after the other, in an order the kernel chooses (recent Linux
/// kernels drop the last-opened first), so `join.lock` can be free while the clean-up's
/// registration and gate lock are not yet: its clean-up is over, and a joiner let in then is
/// first. A registration marked as a clean-up's is waited for until the join's `deadline` (a
/// process the clean-up left running with it keeps joiners out, as `join.lock` would); a lone
/// shared lock on `gate` a moment at most ([`GATE_GRACE`]: whoever may open it may hold it for
/// ever). `Ok(Err(outcome))` if the join's wait ended first.
fn first_joiner(
    top: &Dir,
    p: &Paths,
    gate: &File,
    serial: &MutexGuard,
    spec: Wait,
    progress: &mut dyn FnMut(Duration),
) -> Result<std::result::Result<bool, Outcome<()>>> {
    let mut gate_waited = false;
    loop {
        match presence(top, p, gate, Some(serial), None)? {
            Presence::Empty => return Ok(Ok(true)),
            Presence::In => return Ok(Ok(false)),
            Presence::CleanupEnding(name, file) => {
                let got = wait::flock(
                    spec,
                    &mut *progress,
                    &file,
                    Mode::Shared,
                    &p.members.join(name),
                )?;
                if !matches!(got, Outcome::Acquired(())) {
                    return Ok(Err(got));
                }
            }
            Presence::GateOnly if gate_waited => return Ok(Ok(false)),
            Presence::GateOnly => {
                gate_waited = true;
                let brief = Wait {
                    deadline: spec.deadline.capped(GATE_GRACE),
                    ..spec
                };
                let got = wait::flock(brief, &mut *progress, gate, Mode::Exclusive, &p.gate)?;
                if matches!(got, Outcome::Acquired(())) {
                    lock::unlock(gate).map_err(|e| Error::io(&p.gate, "cannot unlock", e))?;
                }
            }
        }
    }
}

fn register(members: &Dir) -> Result<Member> {
    let holder = Holder::this_process(procinfo::now_micros(), procinfo::own_cmdline());
    let host = holder.host.replace(['/', '.'], "_");
    let name = format!("{host}.{}.{:x}", holder.pid, holder.since_us);
    let reg = Registration::create(members, &name, render_holder(&holder).as_bytes(), 0o644)?;
    Ok(Member {
        reg,
        holder: std::sync::Mutex::new(holder),
        name,
        cleaning: false,
    })
}

/// A join that may not create what it needs: say what must be writable, for a group directory
/// prepared by someone else (see the module docs). Other errors pass as they are.
fn prepared(e: Error, p: &Paths) -> Error {
    if e.kind() != ErrorKind::PermissionDenied {
        return e;
    }
    if e.path().parent() == Some(p.members.as_path()) {
        // Our registration (a temporary name in `members/`, then its own).
        let cause = e.errno().map_or_else(
            || "permission denied".to_string(),
            |n| nix::errno::Errno::from_raw(n).desc().to_lowercase(),
        );
        return Error::new(
            &p.members,
            e.kind(),
            format!(
                "cannot register as a member: {cause}; every member must be able to create its \
                 registration here (in a prepared group directory: mode 1777, or 3770 for the \
                 members of one Unix group)"
            ),
        );
    }
    // A member who may write the group's directory needs no preparing: its error says what
    // keeps it out (a file made before the directory was shared names its owner's remedy).
    let writable = rustix::fs::accessat(
        rustix::fs::CWD,
        &p.dir,
        rustix::fs::Access::WRITE_OK,
        rustix::fs::AtFlags::EACCESS,
    );
    if writable.is_ok() {
        return e;
    }
    let message = e.message();
    Error::new(
        e.path(),
        e.kind(),
        format!(
            "{message}; where members may not write {}, it must be prepared for them: the \
             empty files gate and join.lock in it, and a directory members that every member \
             can write",
            p.dir.display()
        ),
    )
}

fn open_existing_gate(top: &Dir) -> Result<Option<File>> {
    // Read-write where we may (NFS needs it for the exclusive probe), read-only otherwise.
    match top.open("gate", true) {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => top.open("gate", false),
        other => other,
    }
}

mod observe;
mod registrations;
use registrations::{held_registration, is_cleanup, reap, reap_in, render_holder, render_member};

pub use observe::{
    Change, Watch, is_empty, members, wait_empty, wait_empty_with, wait_joined, wait_joined_with,
    watch,
};

#[cfg(test)]
mod tests;
