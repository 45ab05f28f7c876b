/*!
Looking at a group from outside, without joining it: is it empty, who is in it, wait until it
is empty (or not), and watch it become so. Nothing here creates or removes a file: an observer
of a group that does not exist yet sees an empty group, and waits for a joiner to make its
files; one that finds a dead member's registration passes over it, and leaves it to the next
joiner or leaver to remove (see the protocol). The
steps are those of *members*, *empty*, *wait-empty* and *watch* in the protocol of
[`crate::group`].
*/

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{Paths, has_members, open_existing_gate, paths};
use crate::{
    error::{Error, ErrorKind, Result},
    holder::{self, Found, Holder, Registration},
    platform::{
        dir::Dir,
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
        procinfo,
    },
    wait::{self, Deadline, Failed, Outcome, Wait},
};

/// Is the group at `path` empty? A group that does not exist is empty (see [`wait_empty`] for
/// what that means exactly), as `fsync group empty` says. Creates nothing, and never waits on
/// a local file system (it reads the kernel's lock table); on a network file system it probes
/// with a lock released at once. [`ErrorKind::WrongKind`] if `path` is not a directory,
/// [`ErrorKind::NotFound`] if its parent directory is missing.
pub fn is_empty(path: &Path) -> Result<bool> {
    let p = paths(path);
    check_dir(path)?;
    let Some(top) = Dir::top(path, false, "cannot open group directory")? else {
        return Ok(true);
    };
    let Some(gate) = open_existing_gate(&top)? else {
        return Ok(true);
    };
    Ok(!has_members(&top, &p, &gate, None, None)?)
}

fn check_dir(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::new(
            path,
            ErrorKind::WrongKind,
            "is not a group directory",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => pfs::check_parent(path),
        Err(e) => Err(Error::io(path, "cannot examine", e)),
    }
}

/// The live members of the group at `path`, oldest first. Dead members never appear; their
/// registrations stay, for the next joiner or leaver to remove: reading removes nothing.
pub fn members(path: &Path) -> Result<Vec<Holder>> {
    check_dir(path)?;
    let Some(top) = Dir::top(path, false, "cannot open group directory")? else {
        return Ok(Vec::new());
    };
    let Some(members) = top.open_sub("members")? else {
        return Ok(Vec::new());
    };
    let entries = members
        .entries()
        .map_err(|e| Error::io(members.path(), "cannot list members", e))?;
    let mut out = Vec::new();
    for (name, _) in entries {
        if name.starts_with('.') {
            continue;
        }
        match Registration::find(&members, &name) {
            Found::Alive(file) => {
                if let Some(h) = holder::read_from(&file).and_then(|r| r.holder) {
                    out.push(live_member(h, &file));
                }
            }
            // A dead member's, gone meanwhile, or not a registration fsync made.
            Found::Dead | Found::Nothing | Found::Unknown => {}
        }
    }
    out.sort_by_key(|h| (h.since_us, h.pid));
    Ok(out)
}

/// The member as it is now: where the fsync that joined and its command have both exited on
/// this host, the registration is held by a process the command left running with the
/// membership inherited (see the module docs), which is then named as `child`.
fn live_member(mut h: Holder, registration: &File) -> Holder {
    use std::os::fd::AsFd;
    let local = h.host == procinfo::hostname();
    if !local || procinfo::pid_alive(h.pid) || h.child.is_some_and(procinfo::pid_alive) {
        return h;
    }
    if let Some(pid) = procinfo::live_lock_holder(registration.as_fd(), None) {
        h.child = Some(pid);
        h.command = procinfo::cmdline(pid).unwrap_or_default();
    }
    h
}

/// Block until the group at `path` is empty, up to `timeout` (`None`: for ever). `Ok(false)` if
/// the time ran out. Creates nothing. On a local file system the kernel wakes the waiter when
/// the last member leaves (or dies); on a network file system it re-checks every `poll`.
///
/// Empty means that nobody is a member now, so a group that does not exist is empty and this
/// returns at once: its directory is missing, or it has no `gate` file (nobody has joined
/// since it was made, or the last member left with delete on release). It does not wait for
/// the group to be created, or for a first member to come and go: a waiter that means "until
/// the members that are coming have left" waits for [`wait_joined`] first, then for this (a
/// member that joins and leaves before `wait_joined` looks is not seen: it waits for the
/// next). A parent directory that is missing is an error ([`ErrorKind::NotFound`]), and so is
/// a path that is not a directory ([`ErrorKind::WrongKind`]). `fsync group wait-empty` behaves
/// the same: it exits 0 at once for a group that does not exist.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("app.grp");
/// use fsync::group;
/// let poll = fsync::wait::DEFAULT_POLL;
/// assert!(group::wait_empty(&path, None, poll)?); // nobody has joined: empty at once
/// assert!(!path.exists()); // and nothing was created
/// # Ok::<(), fsync::Error>(())
/// ```
pub fn wait_empty(path: &Path, timeout: Option<Duration>, poll: Duration) -> Result<bool> {
    let deadline = Deadline::after(timeout);
    Ok(wait_for_state(path, State::Empty, deadline, poll, None)?
        .acquired()
        .is_some())
}

/// Like [`wait_empty`] (a group that does not exist is empty at once), telling a timeout from
/// a cancellation, and calling `progress` with the time waited when the wait starts blocking
/// and about once a second after.
pub fn wait_empty_with(
    path: &Path,
    timeout: Option<Duration>,
    poll: Duration,
    mut progress: impl FnMut(Duration),
) -> Result<Outcome<()>> {
    let deadline = Deadline::after(timeout);
    wait_for_state(path, State::Empty, deadline, poll, Some(&mut progress))
}

/// Block until the group at `path` has a member, up to `timeout` (`None`: for ever);
/// `Ok(false)` if the time ran out. Creates nothing: for a group that does not exist yet it
/// watches for its creation. Woken as [`wait_empty`] is.
pub fn wait_joined(path: &Path, timeout: Option<Duration>, poll: Duration) -> Result<bool> {
    let deadline = Deadline::after(timeout);
    Ok(wait_for_state(path, State::Joined, deadline, poll, None)?
        .acquired()
        .is_some())
}

/// Like [`wait_joined`], telling a timeout from a cancellation, and calling `progress` as
/// [`wait_empty_with`] does.
pub fn wait_joined_with(
    path: &Path,
    timeout: Option<Duration>,
    poll: Duration,
    mut progress: impl FnMut(Duration),
) -> Result<Outcome<()>> {
    let deadline = Deadline::after(timeout);
    wait_for_state(path, State::Joined, deadline, poll, Some(&mut progress))
}

/// A `progress` to pass on to another wait while keeping it for later ones.
fn reborrow<'a>(
    progress: &'a mut Option<&mut dyn FnMut(Duration)>,
) -> Option<&'a mut dyn FnMut(Duration)> {
    progress
        .as_mut()
        .map(|f| &mut **f as &mut dyn FnMut(Duration))
}

/// The state of a group that a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    Joined,
}

/// Watch the group at `path` for up to `timeout` (`None`: for ever), re-checking every `poll`
/// on a network file system: an iterator over the times it became empty and non-empty, in
/// order, that ends when the time is up or a cancellation signal arrives ([`Watch::interrupted`]
/// tells which). [`Watch::is_empty`] is the state it started in, then the latest. Creates
/// nothing.
///
/// ```
/// use std::time::Duration;
/// use fsync::group::{self, Change};
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("app.grp");
/// let mut watch = group::watch(&path, Some(Duration::from_secs(5)), fsync::wait::DEFAULT_POLL)?;
/// assert!(watch.is_empty());
/// let member = fsync::Group::new(&path).join(None)?.expect("joined");
/// assert_eq!(watch.next().transpose()?, Some(Change::NotEmpty));
/// drop(member);
/// assert_eq!(watch.next().transpose()?, Some(Change::Empty));
/// # Ok::<(), fsync::Error>(())
/// ```
pub fn watch(path: impl AsRef<Path>, timeout: Option<Duration>, poll: Duration) -> Result<Watch> {
    let deadline = Deadline::after(timeout);
    let path = path.as_ref().to_path_buf();
    let empty = is_empty(&path)?;
    Ok(Watch {
        path,
        empty,
        deadline,
        poll,
        end: wait::WatchEnd::default(),
    })
}

/// A change [`Watch`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The group became empty: its last member left.
    Empty,
    /// The group became non-empty: a member joined an empty group.
    NotEmpty,
}

/// The times a group becomes empty and non-empty, as they happen ([`watch`]).
#[derive(Debug)]
pub struct Watch {
    path: PathBuf,
    empty: bool,
    deadline: Deadline,
    poll: Duration,
    end: wait::WatchEnd,
}

impl Watch {
    /// Whether the group was empty when the watch started, and after each change whether it
    /// is now.
    pub fn is_empty(&self) -> bool {
        self.empty
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
        if self.end.ended() {
            return None;
        }
        let want = if self.empty {
            State::Joined
        } else {
            State::Empty
        };
        let waited = wait_for_state(&self.path, want, self.deadline, self.poll, None);
        self.end.pass(waited).transpose().map(|changed| {
            changed.map(|()| {
                self.empty = !self.empty;
                if self.empty {
                    Change::Empty
                } else {
                    Change::NotEmpty
                }
            })
        })
    }
}

fn wait_for_state(
    path: &Path,
    want: State,
    deadline: Deadline,
    poll: Duration,
    mut progress: Option<&mut dyn FnMut(Duration)>,
) -> Result<Outcome<()>> {
    check_dir(path)?;
    let p = paths(path);
    let want_empty = want == State::Empty;
    let (top, gate, network, watch) = loop {
        if !want_empty {
            // An observer creates nothing: wait for a joiner to make the group's files.
            wait::acquired!(wait_for_files(&p, deadline, poll, reborrow(&mut progress))?);
        }
        let found = match Dir::top(path, false, "cannot open group directory")? {
            Some(top) => open_existing_gate(&top)?.map(|gate| (top, gate)),
            None => None,
        };
        let Some((top, gate)) = found else {
            if want_empty {
                return Ok(Outcome::Acquired(()));
            }
            continue; // removed again (a last member leaving with --delete)
        };
        let network = pfs::fs_kind(&gate).network;
        if want_empty || network {
            break (top, gate, network, None);
        }
        // A joiner's registration is what wakes us.
        let Some(members) = top.open_sub("members")? else {
            continue;
        };
        match DirWatch::new(&members.pinned()) {
            Ok(w) => break (top, gate, network, Some(w)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&p.members, "cannot watch directory", e)),
        }
    };
    let spec = Wait {
        deadline,
        poll: network.then_some(poll),
        progress: progress.is_some().then_some(wait::PROGRESS_EVERY),
    };
    let report = |waited| {
        if let Some(p) = progress.as_mut() {
            p(waited);
        }
    };
    wait::wait_for(spec, report, |block| -> Result<_, Failed> {
        if block {
            if let Some(w) = &watch {
                w.wait()?;
            } else if !network && lock::flock(&gate, Mode::Exclusive, true)? {
                lock::unlock(&gate)?;
            }
            return Ok(None);
        }
        Ok((has_members(&top, &p, &gate, None, None)? != want_empty).then_some(()))
    })
    .map_err(|f| f.naming(path, "cannot wait"))
}

/// Block until the group's directory, `members/` and `gate` exist (a joiner makes them), without
/// creating any of them: watch the group's directory, or its parent until the group appears.
fn wait_for_files(
    p: &Paths,
    deadline: Deadline,
    poll: Duration,
    mut progress: Option<&mut dyn FnMut(Duration)>,
) -> Result<Outcome<()>> {
    let ready = || p.members.is_dir() && p.gate.exists();
    loop {
        if ready() {
            return Ok(Outcome::Acquired(()));
        }
        let in_parent = !p.dir.is_dir();
        let dir = if in_parent {
            pfs::parent_dir(&p.dir)
        } else {
            &p.dir
        };
        let watch = match DirWatch::new(dir) {
            Ok(w) => w,
            // The group went again before we could watch it: look again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !in_parent => continue,
            Err(e) => return Err(Error::io(dir, "cannot watch directory", e)),
        };
        let network = pfs::fs_kind_of_path(dir).network;
        // Done when ready, or when the group has appeared while we watched its parent.
        let poll = network.then_some(poll);
        let outcome =
            wait::watch_until(deadline, poll, &watch, dir, reborrow(&mut progress), || {
                Ok((ready() || (in_parent && p.dir.is_dir())).then_some(()))
            })?;
        if !matches!(outcome, Outcome::Acquired(())) {
            return Ok(outcome);
        }
    }
}
