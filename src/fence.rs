/*!
Where a mutex's fencing tokens are kept between holders, and which kept tokens are believed
(the mutex's module docs say what the tokens promise).

A token is kept in three places:

- the lock's holder record (`DIR/.NAME.fsync`, [`crate::holder`]), while it exists;
- the directory's fence file `DIR/.fsync.fence`: one decimal line, the highest token handed out
  by a lock of this directory whose record is gone (`--delete`), rewritten in place under an
  exclusive `flock` of the file;
- the caller's private *mark* on this host, for the locks whose token no place above could take
  (a record or fence file that is another user's, a directory the caller may not write): one
  file per lock in a directory only the caller can write ([`mark_dir`]), named by the lock's
  directory (device and inode) and name, holding the highest token the caller handed out for it.
  Marks whose token the clock has passed by more than a week are removed whenever a mark is made
  ([`prune`]): tokens never fall behind the clock, so such a mark adds nothing unless the clock
  is set back by more than that.

A value in the directory is believed only from a file that fsync may trust there: a regular
file with one link, owned by the caller or root ([`trusted_owner`]), and only below
[`MAX_FENCE`]; fsync writes only into such a fence file. Another user's file could say anything
(a planted 2^63-2 made tokens wrap), and a hard link could make a write land in a victim's file.
In a sticky directory (`/tmp`) nobody but its owner (or root) can remove a name of a file owned
by the caller or root, so a file that has one link when checked on the descriptor keeps it.
*/

use std::{
    ffi::OsStr,
    io::Read,
    os::unix::{
        ffi::OsStrExt,
        fs::{FileExt, MetadataExt},
    },
    path::{Path, PathBuf},
    sync::OnceLock,
};

use crate::{
    holder::MAX_FENCE,
    platform::{
        dir::{Dir, trusted_owner},
        lock,
    },
    wait,
};

/// The directory's fence file.
pub(crate) const FENCE_FILE: &str = ".fsync.fence";

/// The next token after `last` (the greatest believed) at time `now` (microseconds): greater,
/// never behind the clock, and always below [`MAX_FENCE`] (a trusted file that says 2^63-1,
/// which only a hand can write, makes the tokens stop there).
pub(crate) fn next(last: u64, now: u64) -> u64 {
    (last.saturating_add(1)).max(now).min(MAX_FENCE - 1)
}

/// Whether the directory's fence file can hold a lock's last token, given the fence of the
/// caller's record of it (`None`: no record of the caller's). Only without a record, or with
/// one just made (fence 0): a record that survived holds its lock's last token, since whoever
/// made it new read the fence file, and a `--delete` that takes a token there removes the
/// record. (The file also keeps other locks' tokens, which a lock's tokens need not exceed.)
pub(crate) fn file_matters(record_fence: Option<u64>) -> bool {
    !matches!(record_fence, Some(f) if f > 0)
}

/// A decimal token, believed only below [`MAX_FENCE`] (0 if not one).
fn read(file: &std::fs::File) -> u64 {
    let mut text = String::new();
    let _ = file.take(64).read_to_string(&mut text);
    text.trim()
        .parse()
        .ok()
        .filter(|&f| f < MAX_FENCE)
        .unwrap_or(0)
}

/// Whether a file in a shared directory, with one link or more, owned by `uid`, may be
/// believed about tokens, and written (module docs).
fn trusted(one_link: bool, uid: u32) -> bool {
    one_link && trusted_owner(uid)
}

/// The token kept in `dir`'s fence file, if it is one fsync may believe (0 otherwise).
pub(crate) fn kept_in(dir: &Dir) -> u64 {
    match dir.open_stat(FENCE_FILE, false) {
        Ok(Some((f, st))) if trusted(st.st_nlink == 1, st.st_uid) => read(&f),
        _ => 0,
    }
}

/// The token kept in the fence file of `lock`'s directory (0 if none, or not believed).
pub(crate) fn kept(lock: &Path) -> u64 {
    crate::holder::split(lock).map_or(0, |(dir, _)| kept_in(&dir))
}

/// Keep `fence`, a token of the lock `name` in `dir` whose record is going (or is no longer the
/// holder's), in the directory's fence file if it is the highest there; where the fence file
/// cannot take it (another user's file, one with more links, a directory we may not write),
/// in the caller's mark instead. Best effort.
pub(crate) fn keep(dir: &Dir, name: &OsStr, fence: u64) {
    if !keep_in(dir, fence) {
        raise_mark(dir, name, fence);
    }
}

/// [`keep`] in the fence file only; whether it holds `fence` (or more) now.
fn keep_in(dir: &Dir, fence: u64) -> bool {
    let opened = match dir.open_stat(FENCE_FILE, true) {
        Ok(Some((f, st))) => Some((f, st.st_nlink == 1, st.st_uid)),
        Ok(None) => match dir.create_new(FENCE_FILE, 0o644) {
            // Ours, just made: one link, a regular file.
            Ok(f) => f.metadata().ok().map(|m| (f, m.nlink() == 1, m.uid())),
            Err(_) => match dir.open_stat(FENCE_FILE, true) {
                Ok(Some((f, st))) => Some((f, st.st_nlink == 1, st.st_uid)),
                _ => None,
            },
        },
        Err(_) => None,
    };
    let Some((file, one_link, uid)) = opened else {
        return false;
    };
    if !trusted(one_link, uid) {
        return false; // never written: not a file fsync may trust
    }
    // Held for microseconds by fsync; bounded, so that a process holding it cannot hang us.
    let spec = wait::Wait {
        deadline: wait::Deadline::after(Some(std::time::Duration::from_secs(1))),
        poll: None,
        progress: None,
    };
    let shown = dir.join(FENCE_FILE);
    let got = wait::flock(spec, |_| {}, &file, lock::Mode::Exclusive, &shown);
    if !matches!(got, Ok(wait::Outcome::Acquired(()))) {
        return false;
    }
    // Checked again now that we hold it: reachable by no other name (a hard link to a
    // victim's file flipped in and out at the name shows here), and still trusted.
    let sole = dir.sole_link(FENCE_FILE, &file, None).unwrap_or(false);
    if !sole || !file.metadata().is_ok_and(|m| trusted(true, m.uid())) {
        return false;
    }
    if read(&file) >= fence {
        return true;
    }
    let text = format!("{fence}\n");
    file.write_all_at(text.as_bytes(), 0).is_ok() && file.set_len(text.len() as u64).is_ok()
}

/// The caller's private directory for marks: `fsync/` (mode 0700, the caller's) in the first of
/// `$XDG_RUNTIME_DIR`, `/run/user/UID`, `/run` (root only), `$XDG_CACHE_HOME`, `$HOME/.cache`
/// that exists, is absolute, and belongs to the caller or root with no write access for group
/// or others. `None` where there is none: then tokens rest on the files in the lock's directory
/// and the clock alone.
fn mark_dir() -> Option<&'static Dir> {
    static DIR: OnceLock<Option<Dir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let uid = nix::unistd::geteuid().as_raw();
        let env = |var: &str| std::env::var_os(var).map(PathBuf::from);
        let bases = [
            env("XDG_RUNTIME_DIR"),
            Some(PathBuf::from(format!("/run/user/{uid}"))),
            (uid == 0).then(|| PathBuf::from("/run")),
            env("XDG_CACHE_HOME"),
            env("HOME").map(|h| h.join(".cache")),
        ];
        bases.into_iter().flatten().find_map(|base| {
            if !base.is_absolute() {
                return None;
            }
            let dir = Dir::top(&base, false, "cannot open").ok()??;
            let st = dir.status().ok()?;
            if !trusted_owner(st.st_uid) || st.st_mode & 0o022 != 0 {
                return None;
            }
            dir.private_sub("fsync")
        })
    })
    .as_ref()
}

/// The name of the mark of the lock `name` in `dir`: the directory's device and inode, and a
/// 64-bit FNV-1a hash of the name (two locks whose names collide would share a mark, which only
/// makes their tokens jump).
fn mark_name(dir: &Dir, name: &OsStr) -> Option<String> {
    let st = dir.status().ok()?;
    let hash = name
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    Some(format!("fence-{:x}-{:x}-{hash:016x}", st.st_dev, st.st_ino))
}

/// The caller's mark for the lock `name` in `dir` (0 if none).
pub(crate) fn mark(dir: &Dir, name: &OsStr) -> u64 {
    let (Some(marks), Some(file)) = (mark_dir(), mark_name(dir, name)) else {
        return 0;
    };
    match marks.open(&file, false) {
        Ok(Some(f)) => read(&f),
        _ => 0,
    }
}

/// Raise the caller's mark for the lock `name` in `dir` to `fence`. Its writers hold the lock
/// (a holder, or a holder releasing it), so they come one at a time.
pub(crate) fn raise_mark(dir: &Dir, name: &OsStr, fence: u64) {
    let (Some(marks), Some(file)) = (mark_dir(), mark_name(dir, name)) else {
        return;
    };
    let new = !matches!(marks.open(&file, false), Ok(Some(_)));
    let Ok(f) = marks.open_or_create(&file) else {
        return;
    };
    if read(&f) < fence {
        // Fixed width: one write replaces the whole value, with no truncation.
        let _ = f.write_all_at(format!("{fence:020}\n").as_bytes(), 0);
    }
    if new {
        prune(marks, crate::platform::procinfo::now_micros());
    }
}

/// Remove the caller's mark for the lock `name` in `dir` (tests that make one of their own).
#[cfg(test)]
pub(crate) fn forget_mark(dir: &Dir, name: &OsStr) {
    if let (Some(marks), Some(file)) = (mark_dir(), mark_name(dir, name)) {
        let _ = marks.unlink_file(&file);
    }
}

/// How far behind the clock a mark's token may fall before the mark goes: tokens never fall
/// behind the clock ([`next`]), so such a mark adds nothing unless the clock is set back by
/// more than this.
const MARK_KEPT_FOR_US: u64 = 7 * 24 * 3600 * 1_000_000;

/// Remove the marks of `marks` whose token the clock (`now`, in microseconds) has passed by
/// more than [`MARK_KEPT_FOR_US`]: one file per lock ever used without a record of the
/// caller's would otherwise pile up for ever. Run when a mark is made, so the directory holds
/// about as many marks as locks used in the last week; bounded by what it holds.
fn prune(marks: &Dir, now: u64) {
    let Ok(entries) = marks.entries() else { return };
    for (name, _) in entries {
        if !name.starts_with("fence-") {
            continue;
        }
        let stale = match marks.open(&name, false) {
            Ok(Some(f)) => read(&f).saturating_add(MARK_KEPT_FOR_US) < now,
            _ => false,
        };
        if stale {
            let _ = marks.unlink_file(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_grows_stays_below_the_limit_and_follows_the_clock() {
        assert_eq!(next(5, 3), 6);
        assert_eq!(next(5, 100), 100);
        assert_eq!(next(MAX_FENCE - 2, 0), MAX_FENCE - 1);
        assert_eq!(next(MAX_FENCE - 1, 0), MAX_FENCE - 1);
        assert_eq!(next(u64::MAX, 0), MAX_FENCE - 1);
    }

    /// Marks whose token the clock passed by more than a week go when a mark is made; the
    /// others (and whatever else is there) stay.
    #[test]
    fn marks_the_clock_passed_long_ago_are_pruned() {
        let t = tempfile::tempdir().unwrap();
        let marks = Dir::top(t.path(), false, "x").unwrap().unwrap();
        let now = 10 * MARK_KEPT_FOR_US;
        let write = |name: &str, token: u64| {
            std::fs::write(t.path().join(name), format!("{token:020}\n")).unwrap();
        };
        write("fence-1-1-old", now - MARK_KEPT_FOR_US - 1);
        write("fence-1-2-week", now - MARK_KEPT_FOR_US);
        write("fence-1-3-ahead", now + 5);
        write("other", 1);
        prune(&marks, now);
        let mut left: Vec<String> = marks.entries().unwrap().into_iter().map(|e| e.0).collect();
        left.sort();
        assert_eq!(left, ["fence-1-2-week", "fence-1-3-ahead", "other"]);
    }

    #[test]
    fn fence_files_with_more_links_are_neither_believed_nor_written() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "7\n").unwrap();
        let top = t.path().join("d");
        let dir = Dir::top(&top, true, "x").unwrap().unwrap();
        std::fs::hard_link(&victim, top.join(FENCE_FILE)).unwrap();
        assert_eq!(kept_in(&dir), 0);
        assert!(!keep_in(&dir, 100));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "7\n");
        std::fs::remove_file(top.join(FENCE_FILE)).unwrap();
        assert!(keep_in(&dir, 100));
        assert_eq!(kept_in(&dir), 100);
        assert!(keep_in(&dir, 50), "a lower token leaves the higher one");
        assert_eq!(kept_in(&dir), 100);
    }
}
