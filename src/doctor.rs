/*!
`doctor`: what a directory's file system can do for the primitives, found by trying it.

Each check works on scratch files `.fsync-doctor.PID.*` it creates in the directory and removes
afterwards: whole-file `flock` locks (two descriptions must exclude each other), OFD byte-range
locks, atomic `rename`, `link` (used for create-once files), and inotify (a change must be
reported). The mode follows from the file system type: kernel wake-ups on local file systems,
polling where other hosts' changes cannot wake us.
*/

use std::{
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use nix::libc;

use crate::{
    error::{Error, Result},
    platform::{
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
    },
};

/// The findings for one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub dir: PathBuf,
    pub fs_type: &'static str,
    pub network: bool,
    pub flock: Check,
    pub byte_range: Check,
    pub rename: Check,
    pub link: Check,
    pub notify: Check,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Works,
    Fails(String),
}

impl Check {
    pub fn works(&self) -> bool {
        *self == Check::Works
    }
}

impl Report {
    /// How fsync waits here, in words.
    pub fn mode(&self) -> &'static str {
        if self.network {
            "blocking lock calls woken by the file server, re-checked every --poll interval; \
             inotify cannot see other hosts, so event and message waits poll"
        } else {
            "kernel wake-ups: blocking locks and inotify, no polling"
        }
    }
}

fn check(result: std::io::Result<bool>, what: &str) -> Check {
    match result {
        Ok(true) => Check::Works,
        Ok(false) => Check::Fails(what.to_string()),
        Err(e) => Check::Fails(e.to_string()),
    }
}

/// Examine the directory `path` (or the directory of the file `path`).
pub fn examine(path: &Path) -> Result<Report> {
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    if !dir.is_dir() {
        pfs::check_parent(path)?;
        return Err(Error::new(
            path,
            crate::ErrorKind::NotFound,
            "no such directory",
        ));
    }
    let kind = pfs::fs_kind_of_path(&dir);
    let base = dir.join(format!(".fsync-doctor.{}", std::process::id()));
    let scratch = |suffix: &str| PathBuf::from(format!("{}{suffix}", base.display()));
    let a = scratch(".a");
    let open = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(p)
    };
    let first = open(&a).map_err(|e| {
        Error::io(
            &a,
            "cannot create a scratch file (is the directory writable?)",
            e,
        )
    })?;
    let watch = DirWatch::new(&dir);
    let second = open(&a);
    let flock = check(
        second.as_ref().map_err(clone_err).and_then(|second| {
            Ok(lock::flock(&first, Mode::Exclusive, false)?
                && !lock::flock(second, Mode::Exclusive, false)?
                && lock::unlock(&first).is_ok())
        }),
        "a second open file description was not excluded",
    );
    let byte_range = check(
        second.as_ref().map_err(clone_err).and_then(|second| {
            Ok(lock::ofd_lock(&first, Mode::Exclusive, 1 << 40, 1, false)?
                && !lock::ofd_lock(second, Mode::Exclusive, 1 << 40, 1, false)?
                && lock::ofd_lock(second, Mode::Exclusive, 0, 1, false)?)
        }),
        "a conflicting byte range was granted",
    );
    drop(second);
    let b = scratch(".b");
    let rename = check(
        std::fs::rename(&a, &b).map(|()| b.exists() && !a.exists()),
        "the old name remained",
    );
    let c = scratch(".c");
    let link = check(
        std::fs::hard_link(&b, &c).map(|()| std::fs::hard_link(&b, &c).is_err()),
        "a second link to an existing name succeeded",
    );
    let notify = match watch {
        Ok(w) => check(
            w.wait_timeout(Duration::from_millis(200)),
            "no change was reported",
        ),
        Err(e) => Check::Fails(e.to_string()),
    };
    for p in [&a, &b, &c] {
        let _ = std::fs::remove_file(p);
    }
    Ok(Report {
        dir,
        fs_type: kind.name,
        network: kind.network,
        flock,
        byte_range,
        rename,
        link,
        notify,
    })
}

fn clone_err(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_passes_every_check_and_is_left_clean() {
        let dir = tempfile::tempdir().unwrap();
        let r = examine(dir.path()).unwrap();
        assert!(!r.network);
        for c in [&r.flock, &r.byte_range, &r.rename, &r.link, &r.notify] {
            assert_eq!(*c, Check::Works);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
