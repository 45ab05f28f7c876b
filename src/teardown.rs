/*!
The last one out removes the directory: `--delete` of the semaphore ([`crate::sem`]) and of the
group lock ([`crate::grouplock`]), both a directory of lock files. Each module's docs say, under
"Deleting", which of its files are locked, in what order, and why racing acquirers never end up
in two incarnations of one name; this holds what the two share: holding a file for removal
(locked without waiting, then *verified*: its name still names it), the all-or-nothing removal
(only regular files with one link that, in a sticky directory, are the caller's or the
directory owner's), and the wait of a leaver who finds the line busy.
*/

use std::{fs::File, os::unix::fs::MetadataExt, path::Path, time::Duration};

use nix::sys::stat::{FileStat, SFlag};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        dir::{self, Dir, Kind},
        fs as pfs,
        lock::{self, Mode},
        procinfo,
    },
    wait::{self, Deadline, Failed, Outcome, Wait},
};

/// How long a leaver waits for a busy waiting line (a semaphore's `queue`, a group lock's
/// `turnstile`) before it leaves the files to whoever holds it.
pub(crate) const DELETE_GRACE: Duration = Duration::from_secs(1);

/// What a release did with the primitive's files: one type for every guard that can delete
/// them ([`crate::MutexGuard::release`], [`crate::sem::SlotGuard::release`],
/// [`crate::swmr::SwmrGuard::release`], [`crate::grouplock::GroupGuard::release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Released {
    /// Left in place: not asked to delete them (or, for a mutex, its path names another file
    /// by now, which is not ours to delete).
    Kept,
    /// Deleted, as asked: nobody else was inside, waiting or arriving.
    Deleted,
    /// Left in place although asked to delete them: others are inside or waiting, and whoever
    /// of them leaves last with delete on release removes them.
    KeptInUse,
    /// Left in place although asked to delete them: another process (one the command left
    /// running) still holds what this one held, through a descriptor it inherited.
    KeptStillHeld,
}

/// One pass of a deletion attempt, which never waits.
pub(crate) enum Pass {
    Done(Released),
    /// The waiting line is busy with someone on their way in (or out): wait for it.
    Busy(File),
    /// A file we locked was removed and made anew meanwhile (another deletion came first, and
    /// newcomers made new files): look again.
    Again,
}

/// Run deletion passes (`pass`) until one is done, waiting for a busy line between them, up
/// to [`DELETE_GRACE`]; then the files stay with whoever holds the line. Errors name `path`
/// (the primitive's, as its user gave it).
pub(crate) fn attempt(
    top: &Dir,
    path: &Path,
    poll: Duration,
    mut pass: impl FnMut() -> Result<Pass>,
) -> Result<Released> {
    let mut busy: Option<File> = None;
    let mut again = 0;
    // On a network file system the blocking call is a child's (see `wait::Locker`): one that
    // the server never answers once interrupted must not keep us past the grace.
    let mut locker = wait::Locker::new(pfs::fs_kind_of_path(&top.pinned()).network);
    let mut step = |block: bool| -> Result<Option<Released>, Failed> {
        if block {
            // Wait until the busy line is free (let go at once), or a tick.
            if let Some(f) = busy.take() {
                locker.flock(&f, Mode::Exclusive, true)?;
            }
            return Ok(None);
        }
        locker.forget(); // a pass opens the files anew
        loop {
            match pass()? {
                Pass::Done(released) => return Ok(Some(released)),
                Pass::Busy(f) => {
                    busy = Some(f);
                    return Ok(None);
                }
                // Each needs a whole deletion between: a few, then leave the files.
                Pass::Again if again < 8 => again += 1,
                Pass::Again => return Ok(Some(Released::KeptInUse)),
            }
        }
    };
    // One pass whatever happens; a cancellation ends only the wait.
    if let Some(released) = step(false).map_err(|f| f.naming(path, "cannot delete"))? {
        return Ok(released);
    }
    let spec = Wait {
        deadline: Deadline::after(Some(DELETE_GRACE)),
        poll: Some(poll.min(DELETE_GRACE)),
        progress: None,
    };
    match wait::wait_for(spec, |_| {}, step).map_err(|f| f.naming(path, "cannot delete"))? {
        Outcome::Acquired(released) => Ok(released),
        Outcome::TimedOut | Outcome::Interrupted(_) => Ok(Released::KeptInUse),
    }
}

/// Files held for removal: each locked exclusively by us and verified, with its status.
#[derive(Default)]
pub(crate) struct Held {
    files: Vec<(String, File, FileStat)>,
}

/// What [`Held::take`] found at a name.
pub(crate) enum Took {
    /// Locked and verified: now held.
    Held,
    /// Nothing there.
    Missing,
    /// Someone holds it (the file, to wait for it).
    Busy(File),
    /// Replaced between our open and our lock.
    Replaced,
}

impl Held {
    /// Open the existing entry `name` of `dir` (never through a link), lock it exclusively
    /// without waiting, and verify that `name` still names it.
    pub(crate) fn take(&mut self, dir: &Dir, name: &str) -> Result<Took> {
        let Some(file) = open_entry(dir, name)? else {
            return Ok(Took::Missing);
        };
        let locked = lock::flock(&file, Mode::Exclusive, false)
            .map_err(|e| Error::io(&dir.join(name), "cannot lock", e))?;
        if !locked {
            return Ok(Took::Busy(file));
        }
        match names(dir, name, &file)? {
            Some(st) => {
                self.files.push((name.to_string(), file, st));
                Ok(Took::Held)
            }
            None => Ok(Took::Replaced),
        }
    }
}

/// Open the existing entry `name` of `dir` for a lock (read-write where a network file system
/// needs it and we may); `None` if it does not exist. A link there is an error naming it.
pub(crate) fn open_entry(dir: &Dir, name: &str) -> Result<Option<File>> {
    if let Ok(st) = dir.stat(name)
        && st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits()
    {
        return Err(Error::new(
            &dir.join(name),
            ErrorKind::WrongKind,
            "is a symbolic link; delete on release removes only regular files, not removing it",
        ));
    }
    let network = pfs::fs_kind_of_path(&dir.pinned()).network;
    match dir.open(name, network) {
        Err(e) if network && e.kind() == ErrorKind::PermissionDenied => dir.open(name, false),
        other => other,
    }
}

/// *Verify*: the status of entry `name` if it is `file` (not following a link), `None` if it
/// is another one, or missing, by now.
pub(crate) fn names(
    dir: &Dir,
    name: &(impl AsRef<std::ffi::OsStr> + ?Sized),
    file: &File,
) -> Result<Option<FileStat>> {
    let name = name.as_ref();
    let held = file
        .metadata()
        .map_err(|e| Error::io(&dir.join(name), "cannot stat", e))?;
    match dir.stat(name) {
        Ok(st) if (st.st_dev, st.st_ino) == (held.dev(), held.ino()) => Ok(Some(st)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&dir.join(name), "cannot stat", e)),
    }
}

/// The names in `dir` of regular files (or of anything that is no directory) whose name
/// `keep` accepts.
pub(crate) fn names_where(dir: &Dir, keep: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let entries = dir
        .entries()
        .map_err(|e| Error::io(dir.path(), "cannot list", e))?;
    Ok(entries
        .into_iter()
        .filter(|(n, kind)| *kind != Some(Kind::Dir) && keep(n))
        .map(|(n, _)| n)
        .collect())
}

/// Whether the kernel's lock table shows a lock on one of `files` of `dir` held by a process
/// that does not hold `line` (whoever holds the waiting line and a member's file is on its way
/// in or out: a waiter, or another deletion). `false` where it cannot tell (network file
/// systems), so that the caller waits for the line instead.
pub(crate) fn inside_besides(dir: &Dir, line: &File, files: &[String]) -> bool {
    let pids = |file: &File| -> Option<Vec<Option<u32>>> {
        if pfs::fs_kind(file).network {
            return None;
        }
        let m = file.metadata().ok()?;
        let locks = procinfo::flock_holders(m.dev(), m.ino())?;
        Some(locks.into_iter().map(|l| l.pid).collect())
    };
    let Some(in_line) = pids(line) else {
        return false;
    };
    files.iter().any(|name| {
        let Ok(Some(file)) = dir.open(name, false) else {
            return false;
        };
        pids(&file)
            .is_some_and(|holders| (holders.iter()).any(|p| p.is_some() && !in_line.contains(p)))
    })
}

/// Check that every file of `held` and every entry of `also` (statuses taken now) may be
/// removed: a regular file with one link (a hard link to someone's file is not ours to drop),
/// and in a sticky directory the caller's or the directory owner's. The caller checks every
/// directory before it removes anything from any: all or nothing.
pub(crate) fn check_all(dir: &Dir, held: &Held, also: &[String]) -> Result<()> {
    let parent = dir
        .status()
        .map_err(|e| Error::io(dir.path(), "cannot stat", e))?;
    for name in also {
        match dir.stat(name) {
            Ok(st) => dir::removable(dir, name, &st, &parent)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&dir.join(name), "cannot stat", e)),
        }
    }
    for (name, _, st) in &held.files {
        dir::removable(dir, name, st, &parent)?;
    }
    Ok(())
}

/// Remove what [`check_all`] accepted: `also` first, then the files of `held` in the reverse
/// of the order they were taken (the waiting line, taken first, goes last), each only while
/// its name still names the file we hold.
pub(crate) fn remove_all(dir: &Dir, held: &Held, also: &[String]) -> Result<()> {
    let unlink = |name: &str| match dir.unlink_file(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(&dir.join(name), "cannot delete", e))
        }
        _ => Ok(()),
    };
    for name in also {
        unlink(name)?;
    }
    for (name, file, _) in held.files.iter().rev() {
        if names(dir, name, file)?.is_some() {
            unlink(name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whoever holds the waiting line and a member's file is on its way in or out; a member's
    /// file held by anyone else means someone is inside.
    #[test]
    fn inside_besides_counts_only_holders_other_than_the_lines() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::top(t.path(), false, "x").unwrap().unwrap();
        let line = dir.open_or_create("line").unwrap();
        let member = dir.open_or_create("member").unwrap();
        let files = ["member".to_string(), "missing".to_string()];
        assert!(
            !inside_besides(&dir, &line, &files),
            "nobody holds anything"
        );
        assert!(lock::flock(&line, Mode::Exclusive, false).unwrap());
        assert!(lock::flock(&member, Mode::Exclusive, false).unwrap());
        assert!(!inside_besides(&dir, &line, &files), "the line's holder");
        lock::unlock(&line).unwrap();
        assert!(inside_besides(&dir, &line, &files), "a member inside");
    }

    /// All or nothing: one entry that may not go (here a hard link to a file elsewhere) keeps
    /// every other, and is named.
    #[test]
    fn one_entry_that_may_not_go_keeps_them_all() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::top(t.path(), false, "x").unwrap().unwrap();
        std::fs::write(t.path().join("a"), "").unwrap();
        std::fs::write(t.path().join("elsewhere"), "precious").unwrap();
        std::fs::hard_link(t.path().join("elsewhere"), t.path().join("b")).unwrap();
        let mut held = Held::default();
        assert!(matches!(held.take(&dir, "a").unwrap(), Took::Held));
        let also = ["b".to_string()];
        let err = check_all(&dir, &held, &also).unwrap_err();
        assert!(err.to_string().contains("b: has other links"), "{err}");
        assert!(check_all(&dir, &held, &[]).is_ok());
        remove_all(&dir, &held, &[]).unwrap();
        assert!(!t.path().join("a").exists() && t.path().join("b").exists());
    }
}
