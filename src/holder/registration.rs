//! Registrations: files that say "I am here" for as long as their owners live (group members,
//! mailbox receivers, synchronous senders), and the spares that let a full file system, or a
//! worker that registers once per job, do without a new file.

use super::*;

/// A registration: a file that says "I am here" for as long as its owner lives (group members,
/// mailbox receivers, synchronous senders). Created under a temporary name `.tmp-ID`, locked
/// exclusively, given its content, then renamed to `ID`: so a visible registration is always
/// locked while its owner lives, and one nobody has locked belongs to a dead owner. Dropping
/// it unlinks it (the kernel drops the lock when the owner dies instead). Its mode is its
/// primitive's choice, less the umask: a group member's is 0644 (it names the command line, which
/// a umask of 077 keeps private); a mailbox receiver's or sender's is the rule for internal lock
/// files (`platform::fs`), so that nobody who may not write the mailbox can open it to lock it
/// (and make a dead receiver look alive).
///
/// A registration passed down to a child ([`pass_down`](Self::pass_down)) belongs to every
/// process that inherited its descriptor: dropping it then closes ours first and unlinks it only
/// if nobody holds it any more; one a descendant still holds stays, until that process exits
/// and a reader removes it as a dead owner's.
#[derive(Debug)]
pub(crate) struct Registration {
    pub(crate) path: PathBuf,
    dir: crate::platform::dir::Dir,
    name: String,
    file: Option<File>,
    passed_down: bool,
    /// Kept as a spare when let go, and a spare taken where no new one can be made
    /// ([`create_spared`](Self::create_spared)).
    spares: bool,
}

/// How many spare registrations a directory keeps (`.spare-0` to `.spare-3`).
const SPARES: usize = 4;

impl Registration {
    /// The number of its descriptor, while it has one.
    pub(crate) fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }

    /// Register as `id` in `dir`, with `content`, readable as `mode` says (less the umask).
    /// The file is made readable by its owner alone until it is locked: nobody else can open
    /// it to take a lock first (which would make its owner fail, or look dead) in the moment
    /// between.
    pub(crate) fn create(
        dir: &crate::platform::dir::Dir,
        id: &str,
        content: &[u8],
        mode: u32,
    ) -> crate::Result<Registration> {
        Registration::make(dir, id, content, mode, false)
    }

    /// [`create`](Self::create), but taking a spare (`.spare-K`, K below 4) where there is one:
    /// one of ours that an earlier registration left when its owner let it go, that nobody
    /// holds, with one link. And let go, it is kept as a spare if one of the four names is
    /// free. So that receivers can still drain a full file system, and a worker that registers
    /// once per job recycles one file instead of making and removing one each time.
    pub(crate) fn create_spared(
        dir: &crate::platform::dir::Dir,
        id: &str,
        mode: u32,
    ) -> crate::Result<Registration> {
        Registration::make(dir, id, b"", mode, true)
    }

    /// Make the first spare of `dir` (best effort): for a directory that may fill up before
    /// anyone registers in it.
    pub(crate) fn make_spare(dir: &crate::platform::dir::Dir) {
        let _ = dir.create_new(format!(".spare-{}", 0), 0o600);
    }

    fn make(
        dir: &crate::platform::dir::Dir,
        id: &str,
        content: &[u8],
        mode: u32,
        spares: bool,
    ) -> crate::Result<Registration> {
        use crate::{Error, ErrorKind};
        let tmp = format!(".tmp-{id}");
        // A spare first: a rename, where a new file costs an inode's allocation (a search of
        // the inode table past the recently freed ones on ext4 without a journal, a round trip
        // on a network file system), and a full file system can make none. Made ready under
        // its spare's name (locked: nobody else takes it), then renamed to `id` in one step.
        let spare = match spares {
            true => Registration::take_spare(dir),
            false => None,
        };
        let (file, staged, spare) = match spare {
            Some((file, name, st)) => (file, name, Some(st)),
            None => {
                let file = dir.create_new(&tmp, 0o600).map_err(|e| {
                    crate::platform::fs::explain_open_error(&dir.join(&tmp), "cannot register", e)
                })?;
                (file, tmp, None)
            }
        };
        let forget = || match spare {
            Some(_) => {} // still a spare: unlocked as `file` closes
            None => drop(dir.unlink_any(&staged)),
        };
        if !matches!(lock::flock(&file, lock::Mode::Exclusive, false), Ok(true)) {
            forget();
            return Err(Error::new(
                &dir.join(&staged),
                ErrorKind::Os,
                "cannot lock own registration",
            ));
        }
        let mode = mode & 0o777 & !crate::platform::procinfo::umask();
        if mode != 0o600 || spare.is_some() {
            use std::os::unix::fs::PermissionsExt;
            let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
        }
        if spare.is_some() {
            let _ = file.set_len(0); // what an earlier registration held
        }
        if !content.is_empty() {
            let _ = file.write_all_at(content, 0);
        }
        if let Err(e) = dir.rename(&staged, dir, id) {
            forget();
            return Err(Error::io(&dir.join(id), "cannot register", e));
        }
        // A spare swapped between our look and the rename (by someone who may write `dir`):
        // `id` names a file we do not hold.
        if let Some(st) = spare
            && dir.names(id, &st).is_none()
        {
            return Err(Error::new(
                &dir.join(id),
                ErrorKind::Os,
                "cannot register: the spare registration taken was replaced",
            ));
        }
        let dir = dir
            .try_clone()
            .map_err(|e| Error::io(dir.path(), "cannot register", e))?;
        Ok(Registration {
            path: dir.join(id),
            dir,
            name: id.to_string(),
            file: Some(file),
            passed_down: false,
            spares,
        })
    }

    /// A spare of `dir` (ours, one link, nobody holding it), locked: its file, name and
    /// identity.
    fn take_spare(dir: &Dir) -> Option<(File, String, nix::sys::stat::FileStat)> {
        let me = nix::unistd::geteuid().as_raw();
        (0..SPARES).find_map(|k| {
            let name = format!(".spare-{k}");
            let (file, st) = dir.open_stat(&name, true).ok()??;
            let ours = st.st_uid == me && dir.sole_link(&name, &file, Some(&st)).unwrap_or(false);
            if !ours || !matches!(lock::flock(&file, Mode::Exclusive, false), Ok(true)) {
                return None;
            }
            dir.names(&name, &st).map(|_| (file, name, st))
        })
    }

    /// Keep the registration as a spare (renamed to a free `.spare-K`: no new inode or link,
    /// which a full file system may refuse), or unlink it.
    fn unlink_keeping_spare(&self) {
        let kept = self.spares
            && (0..SPARES).any(|k| {
                self.dir
                    .rename_new(&self.name, &format!(".spare-{k}"))
                    .is_ok()
            });
        if !kept {
            let _ = self.dir.unlink_any(&self.name);
        }
    }

    /// Replace the content (the owner is the only writer).
    pub(crate) fn rewrite(&self, content: &[u8]) {
        if let Some(file) = &self.file
            && file.write_all_at(content, 0).is_ok()
        {
            let _ = file.set_len(content.len() as u64);
        }
    }

    /// Let the registration survive `exec` into children (`true`), so that it stays held
    /// while they run even if this process dies; or keep it close-on-exec (`false`).
    pub(crate) fn pass_down(&mut self, inherit: bool) -> std::io::Result<()> {
        if let Some(file) = &self.file {
            crate::platform::lock::set_inheritable(file, inherit)?;
        }
        self.passed_down = inherit;
        Ok(())
    }

    /// Whether this registration is still ours, as readers see it: its lock held through our
    /// descriptor (a non-blocking re-lock of our own open file description, which a network
    /// file system's server answers; it regains a lock the server dropped while nobody took
    /// it), and its name still naming that file, with one link. A lock regained on a file that
    /// a reaper unlinked meanwhile (it counted the owner dead) is not: readers find nothing at
    /// the name, and take the owner for dead.
    pub(crate) fn confirm(&self) -> bool {
        let Some(file) = &self.file else {
            return false;
        };
        if !lock::still_held(std::os::fd::AsFd::as_fd(file), Mode::Exclusive) {
            return false;
        }
        let Ok(ours) = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(file)) else {
            return false;
        };
        (self.dir.names(&self.name, &ours)).is_some_and(|now| now.st_nlink == 1)
    }

    /// Its file, while it has one: the lock on it says its owner lives.
    pub(crate) fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Its descriptor, to be left open in a child that holds it too
    /// ([`crate::command::spawn_keeping`]): from now on it is passed down, as
    /// [`pass_down`](Self::pass_down) does it for every child.
    pub(crate) fn hand_down(&mut self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.passed_down |= self.file.is_some();
        self.file.as_ref().map(std::os::fd::AsFd::as_fd)
    }

    /// Unregister: `false` if it is gone, `true` if it stays because a process this one passed
    /// it down to still holds it (see the type's docs).
    pub(crate) fn unregister(mut self) -> bool {
        self.unregister_inner()
    }

    fn unregister_inner(&mut self) -> bool {
        let Some(file) = self.file.take() else {
            return false;
        };
        if !self.passed_down {
            // Unlinked while still locked: nobody ever sees it unlocked.
            self.unlink_keeping_spare();
            return false;
        }
        drop(file);
        // A process that inherited our descriptor may still hold it.
        let held = matches!(Registration::find(&self.dir, &self.name), Found::Alive(_));
        if !held {
            self.unlink_keeping_spare();
        }
        held
    }

    /// Remove the registrations in `dir` whose owners died (nobody holds them), never a live
    /// one: each is locked exclusively, without waiting (a living owner holds it, so that
    /// fails), and unlinked only if its name still names the file locked, a regular file with
    /// one link; nobody ever locks a registration again once its owner let it go, so a locked
    /// dead one stays dead. Registrations being made (`.tmp-*`, unlocked for the instant
    /// between their creation and their lock) are left alone, and in a sticky directory those
    /// of other users than the caller or the directory's owner (the kernel's rule, applied to
    /// root too). Best effort and silent; returns how many went.
    pub(crate) fn reap_dead(dir: &Dir) -> usize {
        let (Ok(entries), Ok(parent)) = (dir.entries(), dir.stat(".")) else {
            return 0;
        };
        let mut reaped = 0;
        for (name, kind) in entries {
            if name.starts_with('.') || kind == Some(crate::platform::dir::Kind::Dir) {
                continue;
            }
            let Ok(Some((file, st))) = dir.open_stat(&name, false) else {
                continue;
            };
            let removable =
                crate::platform::dir::sticky_allows(parent.st_mode, parent.st_uid, st.st_uid);
            if st.st_nlink != 1 || !removable {
                continue;
            }
            if !matches!(lock::flock(&file, Mode::Exclusive, false), Ok(true)) {
                continue; // alive (or not lockable here): never removed
            }
            let same = (dir.names(&name, &st)).is_some_and(|now| now.st_nlink == 1);
            if same && dir.unlink_file(&name).is_ok() {
                reaped += 1;
            }
        }
        reaped
    }

    /// What is at the registration `name` in `dir`, as a reader sees it. Only a registration's
    /// owners ever lock it, exclusively; readers probe it with shared locks, which do not
    /// conflict with each other, and fail exactly while an owner holds it.
    pub(crate) fn find(dir: &Dir, name: &str) -> Found {
        let file = match dir.open(name, false) {
            Ok(Some(f)) => f,
            Ok(None) => return Found::Nothing,
            Err(_) => return Found::Unknown,
        };
        match probe::held(&file, Mode::Shared) {
            Ok(true) => Found::Alive(file),
            Ok(false) => Found::Dead,
            Err(_) => Found::Unknown,
        }
    }
}

/// What a reader finds at a registration's name ([`Registration::find`]).
#[derive(Debug)]
pub(crate) enum Found {
    /// Nothing: the owner unregistered.
    Nothing,
    /// A registration its owner holds, open for reading.
    Alive(File),
    /// A registration nobody holds: its owner died.
    Dead,
    /// Something that cannot be told: not a registration fsync made (a link, a FIFO), one we
    /// may not read, or a probe that failed. Never taken for a dead owner's.
    Unknown,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.unregister_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spared registration let go is kept as `.spare-0`, and the next one takes it (the same
    /// file, given its mode, emptied, locked) rather than making a file; one still held (a
    /// descendant kept it) is neither kept nor taken.
    #[test]
    fn a_spared_registration_recycles_the_file_of_the_last_one() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::top(t.path(), false, "x").unwrap().unwrap();
        let first = Registration::create_spared(&dir, "one", 0o640).unwrap();
        let inode = std::fs::metadata(t.path().join("one")).unwrap().ino();
        std::fs::write(t.path().join("one"), "left over").unwrap();
        std::fs::set_permissions(t.path().join("one"), PermissionsExt::from_mode(0o604)).unwrap();
        assert!(!first.unregister());
        assert_eq!(
            std::fs::metadata(t.path().join(".spare-0")).unwrap().ino(),
            inode
        );
        let second = Registration::create_spared(&dir, "two", 0o600).unwrap();
        let meta = std::fs::metadata(t.path().join("two")).unwrap();
        assert_eq!(
            (meta.ino(), meta.len(), meta.mode() & 0o777),
            (inode, 0, 0o600)
        );
        assert!(!t.path().join(".spare-0").exists());
        assert!(matches!(Registration::find(&dir, "two"), Found::Alive(_)));
        let plain = Registration::create(&dir, "three", b"", 0o600).unwrap();
        assert!(!plain.unregister());
        assert!(
            !t.path().join(".spare-0").exists(),
            "a plain registration is no spare"
        );
        drop(second);
    }

    /// A registration is confirmed while its lock is held through its descriptor and its name
    /// names its file; one whose lock was dropped (as a server drops a cut-off client's) is
    /// confirmed again by the re-lock if nobody took it, but not once another holds the lock,
    /// a reaper removed it, or another file took its name.
    #[test]
    fn a_registration_is_confirmed_only_while_readers_would_find_it_alive() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::top(t.path(), false, "x").unwrap().unwrap();
        let dropped = |r: &Registration| lock::unlock(r.file().unwrap()).unwrap();
        let me = Registration::create(&dir, "me", b"", 0o600).unwrap();
        assert!(me.confirm());
        dropped(&me);
        assert!(matches!(Registration::find(&dir, "me"), Found::Dead));
        assert!(me.confirm(), "a dropped lock nobody took is regained");
        assert!(matches!(Registration::find(&dir, "me"), Found::Alive(_)));

        // Another holder took it meanwhile (a reaper about to remove it).
        dropped(&me);
        let other = std::fs::File::open(t.path().join("me")).unwrap();
        assert!(lock::flock(&other, Mode::Exclusive, false).unwrap());
        assert!(!me.confirm());
        drop(other);

        // Reaped: the lock regained, on a file nobody finds.
        let reaped = Registration::create(&dir, "reaped", b"", 0o600).unwrap();
        dropped(&reaped);
        assert_eq!(Registration::reap_dead(&dir), 2);
        assert!(!reaped.confirm());
        assert!(!me.confirm());

        // Another file at its name.
        let swapped = Registration::create(&dir, "swapped", b"", 0o600).unwrap();
        std::fs::remove_file(t.path().join("swapped")).unwrap();
        std::fs::write(t.path().join("swapped"), "").unwrap();
        assert!(!swapped.confirm());

        // A second link to it: not a registration a reader trusts.
        let linked = Registration::create(&dir, "linked", b"", 0o600).unwrap();
        std::fs::hard_link(t.path().join("linked"), t.path().join("link")).unwrap();
        assert!(!linked.confirm());
        std::fs::remove_file(t.path().join("link")).unwrap();
        assert!(linked.confirm());
    }
}
