//! Who holds a mutex, and watching holders come and go.

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, Result},
    holder::{self, Holder},
    platform::{
        dir::trusted_owner,
        fs::{self as pfs},
        lock::Mode,
    },
    probe,
    wait::{self, Deadline, Outcome},
};

/// What [`status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Whether any lock is held on the file.
    pub held: bool,
    /// Who holds it, where that can be known.
    pub holder: Option<Holder>,
    /// The last fencing token handed out, as the holder record keeps it, where it may be
    /// believed: a record the caller or root owns, with one link, that the kernel's lock table
    /// does not contradict. `None` if none is recorded, or if the record may not be believed
    /// about tokens ([`fence_withheld`](Status::fence_withheld) says why).
    pub fence: Option<u64>,
    /// Why [`fence`](Status::fence) shows nothing of the holder record there is: `None` where it
    /// shows the record's token, or there is no record.
    pub fence_withheld: Option<FenceWithheld>,
    /// The holder the record names where the kernel's lock table contradicts it: the kernel
    /// names the processes that hold the lock, and the record's process is not among them (a
    /// record another user planted, say). Never the [`holder`](Status::holder), which is then
    /// the kernel's. `None` where the record agrees, says nothing, or cannot be checked (a
    /// network file system).
    pub untrusted_record: Option<Holder>,
}

/// Why a mutex's [`Status`] shows no fencing token from its holder record: the record is not
/// one whose tokens fsync believes (the [mutex](crate::mutex)'s module docs: which kept tokens
/// are believed). Nothing else it says is shown then either, but what the kernel's lock table
/// bears out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FenceWithheld {
    /// The record belongs to another user (this uid) than the caller and root: they could
    /// have written any token into it.
    AnotherUser(u32),
    /// The record has other hard links: it may be another file's (a link to someone's record
    /// of another lock).
    Links,
    /// The kernel's lock table contradicts the holder the record names
    /// ([`Status::untrusted_record`]).
    Contradicted,
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
/// is merely stale, and left out.) Its fencing token is shown only where it may be believed
/// ([`Status::fence`]), never from another user's record or one the kernel contradicts.
pub fn status(path: &Path) -> Result<Status> {
    Ok(observe(path)?.status)
}

/// What [`status`] found, and whether the holder record names a holder (`false`: it says
/// released, or there is none).
struct Observed {
    status: Status,
    recorded: bool,
}

impl Observed {
    /// Whether this is the holding `seen` showed being released: the holder record names
    /// nobody any more while the kernel still lists the lock, held by that process (or by
    /// a process it cannot name). A holder writes `released` (or, deleting, removes the
    /// record) before it unlocks: until the unlock, nothing has changed.
    fn releasing(&self, seen: &Status) -> bool {
        let pid = |st: &Status| st.holder.as_ref().map(|h| h.pid);
        let now = &self.status;
        seen.held
            && now.held
            && !self.recorded
            && pid(seen).is_some()
            && (pid(now).is_none() || pid(now) == pid(seen))
    }
}

fn observe(path: &Path) -> Result<Observed> {
    let Some(file) = pfs::open_if_exists(path)? else {
        let status = Status {
            held: false,
            holder: None,
            fence: None,
            fence_withheld: None,
            untrusted_record: None,
        };
        return Ok(Observed {
            status,
            recorded: false,
        });
    };
    let listed = probe::listed(path, &file, probe::Kinds::All)?;
    let held = match &listed {
        Some(l) => !l.locks.is_empty(),
        None => held_by_probe(path, &file)?,
    };
    let looked = holder::split(path).and_then(|(dir, name)| holder::look_in(&dir, &name));
    // A token is shown only from a record whose tokens may be believed.
    let mut fence_withheld = looked.as_ref().and_then(|l| match l.one_link {
        false => Some(FenceWithheld::Links),
        true if !trusted_owner(l.uid) => Some(FenceWithheld::AnotherUser(l.uid)),
        true => None,
    });
    let record = looked.and_then(|l| l.record);
    let mut fence =
        (record.as_ref().map(|r| r.fence)).filter(|&f| f > 0 && fence_withheld.is_none());
    let record_names = record.as_ref().is_some_and(|r| r.holder.is_some());
    if !held {
        let status = Status {
            held,
            holder: None,
            fence,
            fence_withheld,
            untrusted_record: None,
        };
        return Ok(Observed {
            status,
            recorded: record_names,
        });
    }
    let recorded = record.and_then(|r| r.holder);
    let (holder, untrusted_record) = holder::kernel_over_record(recorded, listed.as_ref(), &file);
    // Nothing of a record the kernel contradicts is shown, its token neither.
    if untrusted_record.is_some() {
        fence = None;
        fence_withheld = fence_withheld.or(Some(FenceWithheld::Contradicted));
    }
    let status = Status {
        held,
        holder,
        fence,
        fence_withheld,
        untrusted_record,
    };
    Ok(Observed {
        status,
        recorded: record_names,
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

/// Block until the status of the mutex at `path` differs from `seen` (a holder came or went)
/// or the timeout passes (`Ok(None)`). fsync holders write their record and close the lock file
/// after writing, which wakes us at once (change notification); other tools (`flock(1)`) leave
/// no trace we can be notified of, so this also re-checks every `poll`. [`watch`] turns this
/// into an iterator over acquisitions and releases.
///
/// Only states the kernel confirms are reported: a holder records its release before it
/// unlocks, and a record that says released while the kernel still lists that holder's lock
/// is a release under way, not a change. Until the lock goes (an unlock no notification
/// reports) this looks again after 1 ms, then 2, 4 and so on up to `poll`.
pub fn wait_for_change(
    path: &Path,
    seen: &Status,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<Option<Status>> {
    Ok(change_by(path, seen, Deadline::after(timeout), poll, None)?.acquired())
}

/// Like [`wait_for_change`], telling a timeout from a cancellation, and calling `progress` with
/// the time waited when the wait starts blocking and about once a second after.
pub fn wait_for_change_with(
    path: &Path,
    seen: &Status,
    timeout: Option<Duration>,
    poll: Duration,
    mut progress: impl FnMut(Duration),
) -> Result<Outcome<Status>> {
    let deadline = Deadline::after(timeout);
    change_by(path, seen, deadline, poll, Some(&mut progress))
}

/// How soon [`change_by`] looks again, first, while a release is under way (then twice as
/// long each time, up to the poll interval): the holder is between its record and its unlock.
const RELEASE_RECHECK: Duration = Duration::from_millis(1);

fn change_by(
    path: &Path,
    seen: &Status,
    deadline: Deadline,
    poll: Duration,
    mut progress: Option<&mut dyn FnMut(Duration)>,
) -> Result<Outcome<Status>> {
    let dir = pfs::parent_dir(path);
    let watch = crate::platform::notify::DirWatch::new(dir)
        .map_err(|e| Error::io(dir, "cannot watch directory", e))?;
    let spec = wait::Wait {
        deadline,
        poll: Some(poll),
        progress: progress.is_some().then_some(wait::PROGRESS_EVERY),
    };
    let report = |waited| {
        if let Some(p) = progress.as_mut() {
            p(waited);
        }
    };
    // While a release is under way, how long to wait before looking again.
    let mut releasing: Option<Duration> = None;
    wait::wait_for(spec, report, |block| -> Result<_, wait::Failed> {
        if block {
            match releasing {
                // The unlock wakes nobody: look again soon.
                Some(after) => {
                    watch.wait_timeout(after)?;
                }
                None => watch.wait()?,
            }
            return Ok(None);
        }
        let now = observe(path)?;
        if now.releasing(seen) {
            releasing = Some(releasing.map_or(RELEASE_RECHECK, |d| (d * 2).min(poll)));
            return Ok(None);
        }
        releasing = None;
        Ok((now.status != *seen).then_some(now.status))
    })
    .map_err(|f| f.naming(path, "cannot wait"))
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
            let waited = change_by(&self.path, &self.seen, self.deadline, self.poll, None);
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
