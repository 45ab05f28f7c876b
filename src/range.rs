/*!
Byte-range locks (seed 004): any byte of a file, even one far past its end, is a lock.

# Protocol on disk

A range lock on `L` is an open-file-description (OFD) lock, `fcntl(F_OFD_SETLK[W])`, on `LEN`
bytes of `L` from `START` (`LEN` 0: from `START` to the end of all offsets): shared
(`F_RDLCK`) or exclusive (`F_WRLCK`). Disjoint ranges do not conflict; the file's content is
never changed; `lslocks` shows them as `OFDLCK`. Like `flock` locks they belong to the open file
description, so they pass down to children and are released when the last descriptor closes.

A file locked by ranges must not also be locked whole with `flock` by the same protocol: on NFS
and FUSE file systems `flock` is emulated with a whole-file POSIX lock, and the two collide.
*/

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        fs::{self as pfs, Access},
        lock::{self, Mode},
    },
    wait::{self, Deadline, Outcome, Wait, DEFAULT_POLL},
};

/// `LEN` bytes from `START`; `LEN` 0 reaches to the end of all offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub len: u64,
}

impl ByteRange {
    /// Parse `START[:LEN]`, each decimal or `0x` hex, `LEN` 1 when absent; the range must lie
    /// within 0 to 2^63-1.
    pub fn parse(s: &str) -> std::result::Result<ByteRange, String> {
        let number = |t: &str| -> std::result::Result<u64, String> {
            let t = t.trim();
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => t.parse::<u64>(),
            };
            parsed.map_err(|_| {
                format!("invalid range '{s}': '{t}' is not a decimal or 0x hex number")
            })
        };
        let (start, len) = match s.split_once(':') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(s)?, 1),
        };
        let max = i64::MAX as u64;
        if start > max || len > max || (len > 0 && start + (len - 1) > max) {
            return Err(format!(
                "invalid range '{s}': it must lie within 0 and 0x7fffffffffffffff"
            ));
        }
        Ok(ByteRange { start, len })
    }
}

impl std::fmt::Display for ByteRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.start, self.len)
    }
}

/// A byte range of a lock file.
#[derive(Debug, Clone)]
pub struct RangeLock {
    path: PathBuf,
    range: ByteRange,
    poll: Duration,
}

/// Proof of holding a byte range; released on drop.
#[must_use = "the range is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct RangeGuard {
    path: PathBuf,
    file: File,
}

impl RangeGuard {
    /// Let the lock survive `exec` into children, as the mutex does.
    pub fn pass_down(&self, inherit: bool) -> Result<()> {
        lock::set_inheritable(&self.file, inherit)
            .map_err(|e| Error::io(&self.path, "cannot pass the lock down", e))
    }
}

impl RangeLock {
    pub fn new(path: impl AsRef<Path>, range: ByteRange) -> RangeLock {
        RangeLock {
            path: path.as_ref().to_path_buf(),
            range,
            poll: DEFAULT_POLL,
        }
    }

    pub fn poll_interval(mut self, every: Duration) -> RangeLock {
        self.poll = every;
        self
    }

    /// Lock the range shared or exclusively, waiting up to `timeout`.
    pub fn acquire_with(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<RangeGuard>> {
        let deadline = Deadline::after(timeout);
        let (file, access) = pfs::open_lock_file(&self.path, pfs::Purpose::Fcntl)?;
        let locked = self.lock_file(&file, access, mode, deadline, progress)?;
        Ok(locked.map(|()| RangeGuard {
            path: self.path.clone(),
            file,
        }))
    }

    /// Lock the range through an already open lock file.
    pub(crate) fn lock_file(
        &self,
        file: &File,
        access: Access,
        mode: Mode,
        deadline: Deadline,
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        if mode == Mode::Exclusive && access == Access::ReadOnly {
            return Err(Error::new(
                &self.path,
                ErrorKind::PermissionDenied,
                "an exclusive byte-range lock needs write access to the lock file",
            ));
        }
        let network = pfs::fs_kind(file).network;
        let spec = Wait::for_lock(deadline, network, self.poll);
        let r = self.range;
        wait::wait_for(spec, progress, |block| {
            Ok(lock::ofd_lock(file, mode, r.start, r.len, block)?.then_some(()))
        })
        .map_err(|e| Error::io(&self.path, &format!("cannot lock bytes {r}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_check_bounds() {
        assert_eq!(ByteRange::parse("10"), Ok(ByteRange { start: 10, len: 1 }));
        assert_eq!(
            ByteRange::parse("0x10:0"),
            Ok(ByteRange { start: 16, len: 0 })
        );
        assert_eq!(
            ByteRange::parse("0x7fffffffffffffff"),
            Ok(ByteRange {
                start: i64::MAX as u64,
                len: 1
            })
        );
        assert!(ByteRange::parse("0x7fffffffffffffff:2").is_err());
        assert!(ByteRange::parse("-1").is_err());
        assert!(ByteRange::parse("1:x").is_err());
    }

    #[test]
    fn disjoint_ranges_do_not_conflict_and_past_eof_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let a = RangeLock::new(&path, ByteRange::parse("0:10").unwrap());
        let b = RangeLock::new(&path, ByteRange::parse("10:10").unwrap());
        let far = RangeLock::new(&path, ByteRange::parse("0x7ffffffffffffff0:0").unwrap());
        let zero = Some(Duration::ZERO);
        let _ga = a.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap();
        assert!(matches!(
            b.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap(),
            Outcome::Acquired(_)
        ));
        assert!(matches!(
            a.acquire_with(Mode::Shared, zero, |_| {}).unwrap(),
            Outcome::TimedOut
        ));
        assert!(matches!(
            far.acquire_with(Mode::Exclusive, zero, |_| {}).unwrap(),
            Outcome::Acquired(_)
        ));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "content never changes"
        );
    }
}
