/*!
The doctor's scratch files: made only by exclusive creation, under names nobody can guess, and
removed only while a name still leads to a file made here.

The directory examined may be shared (`/tmp`), and another user can put anything at a name they
can predict: a file they hold locked (the flock check would then fail on a healthy file
system), a link to someone's file, a FIFO. A doctor that opened such an entry would report on
their doing rather than on the file system, and might lock, write or remove what is theirs. So
each name is [`PREFIX`] and 16 hexadecimal digits drawn from the kernel's random source, and
each file is created with `O_CREAT | O_EXCL | O_NOFOLLOW` from the open directory
([`Dir::create_new`]): a name that exists, whatever is there, is never opened, and another is
drawn, [`TRIES`] times at most. Renames and links go only to names drawn so. When the
[`Scratch`] goes (at the end, and on any early return), each of its names is removed if it is
still a regular file made here (the files are kept open until then, so that no other file can
have one's device and inode).
*/

use std::{fs::File, io, os::unix::fs::MetadataExt};

use nix::libc;

use crate::platform::dir::{Dir, Kind, is_kind};

/// What every scratch name starts with.
pub(super) const PREFIX: &str = ".fsync-doctor.";

/// How many names are drawn before giving up: with random names even one that exists means
/// that someone copies them as they appear (or the random source is broken).
const TRIES: usize = 8;

/// The scratch files made in one directory.
pub(super) struct Scratch<'d> {
    dir: &'d Dir,
    /// Every name given to a file made here (created, renamed to or linked at).
    names: Vec<String>,
    /// Each file made here, kept open until its names are removed: a file of someone else's
    /// put at one of them since cannot have its device and inode while it is open.
    files: Vec<File>,
}

impl<'d> Scratch<'d> {
    pub(super) fn new(dir: &'d Dir) -> Scratch<'d> {
        Scratch {
            dir,
            names: Vec::new(),
            files: Vec::new(),
        }
    }

    /// A new scratch file, open for reading and writing, and its name.
    pub(super) fn create(&mut self) -> io::Result<(String, File)> {
        self.create_from(std::iter::repeat_with(random_name))
    }

    /// [`create`](Self::create), with the names to try.
    fn create_from(&mut self, names: impl Iterator<Item = String>) -> io::Result<(String, File)> {
        for name in names.take(TRIES) {
            match self.dir.create_new(&name, 0o600) {
                Ok(file) => {
                    self.names.push(name.clone());
                    self.files.push(file.try_clone()?);
                    return Ok((name, file));
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(taken())
    }

    /// A second open file description of the scratch file `name`, which `file` has open:
    /// opened by its name, and only if that still leads to the same file.
    pub(super) fn reopen(&self, name: &str, file: &File) -> io::Result<File> {
        let again = (self.dir.open(name, true))
            .map_err(io::Error::other)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the scratch file is gone"))?;
        let (a, b) = (file.metadata()?, again.metadata()?);
        match (a.dev(), a.ino()) == (b.dev(), b.ino()) {
            true => Ok(again),
            false => Err(io::Error::other("the scratch file was replaced")),
        }
    }

    /// Rename the scratch file `from` to a new name, over a scratch file made there first (so
    /// that nothing of anyone else's can be replaced); the new name.
    pub(super) fn rename(&mut self, from: &str) -> io::Result<String> {
        let (to, _) = self.create()?;
        self.dir.rename(from, self.dir, &to)?;
        Ok(to)
    }

    /// Link the scratch file `from` at a new name, drawn until one is free ([`TRIES`] times
    /// at most); the new name.
    pub(super) fn link(&mut self, from: &str) -> io::Result<String> {
        for name in std::iter::repeat_with(random_name).take(TRIES) {
            match self.dir.link(from, &name) {
                Ok(()) => {
                    self.names.push(name.clone());
                    return Ok(name);
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(taken())
    }

    /// Whether `name` leads to the file `file` has open (not through a link).
    pub(super) fn names(&self, name: &str, file: &File) -> bool {
        let Ok(m) = file.metadata() else { return false };
        (self.dir.stat(name)).is_ok_and(|st| (st.st_dev, st.st_ino) == (m.dev(), m.ino()))
    }
}

/// Every name removed that is still a regular file made here; nothing else is touched.
impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        let made: Vec<(u64, u64)> = (self.files.iter())
            .filter_map(|f| f.metadata().ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        for name in &self.names {
            let ours = (self.dir.stat(name))
                .is_ok_and(|st| is_kind(&st, Kind::File) && made.contains(&(st.st_dev, st.st_ino)));
            if ours {
                let _ = self.dir.unlink_any(name);
            }
        }
    }
}

/// The error when every name drawn was taken.
fn taken() -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("each of {TRIES} random scratch names was taken"),
    )
}

/// [`PREFIX`] and 64 random bits in hexadecimal
/// ([`random_u64`](crate::platform::procinfo::random_u64)).
fn random_name() -> String {
    format!("{PREFIX}{:016x}", crate::platform::procinfo::random_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// A name that exists, a file or a link, is never opened: the next name is tried; every
    /// name given to a file made here is removed when the scratch goes, the planted ones never.
    #[test]
    fn scratch_files_are_created_exclusively_and_removed() {
        let t = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let top = t.path().join("d");
        let dir = Dir::top(&top, true, "x").unwrap().unwrap();
        std::fs::write(top.join("taken"), "theirs").unwrap();
        std::os::unix::fs::symlink(&victim, top.join("link")).unwrap();
        let mut scratch = Scratch::new(&dir);
        let names = ["taken", "link", "mine"].map(String::from);
        let (name, file) = scratch.create_from(names.into_iter()).unwrap();
        assert_eq!(name, "mine");
        assert!(scratch.names(&name, &file));
        assert!(scratch.reopen(&name, &file).is_ok());
        let renamed = scratch.rename(&name).unwrap();
        assert!(scratch.names(&renamed, &file) && !top.join(&name).exists());
        let linked = scratch.link(&renamed).unwrap();
        assert!(renamed.starts_with(PREFIX) && linked.starts_with(PREFIX));
        assert_ne!(renamed, linked);
        // A name made here and replaced since by someone else's file is theirs now.
        let (replaced, _) = scratch.create().unwrap();
        std::fs::remove_file(top.join(&replaced)).unwrap();
        std::fs::write(top.join(&replaced), "theirs").unwrap();
        let err = scratch.create_from(["taken", "link"].map(String::from).into_iter());
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(names_in(&top).len(), 5);
        drop(scratch);
        let mut left = vec!["link".to_string(), "taken".to_string(), replaced.clone()];
        left.sort();
        assert_eq!(names_in(&top), left);
        assert_eq!(
            std::fs::read_to_string(top.join("taken")).unwrap(),
            "theirs"
        );
        assert_eq!(
            std::fs::read_to_string(top.join(&replaced)).unwrap(),
            "theirs"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    /// Names are drawn at random: not the pid, not twice the same.
    #[test]
    fn scratch_names_cannot_be_predicted() {
        let a = random_name();
        let b = random_name();
        assert_ne!(a, b);
        assert_eq!(a.len(), PREFIX.len() + 16);
        assert!(!a.contains(&format!(".{}.", std::process::id())));
    }
}
