//! Pruning, by a receiver that makes a new shard of records: the records and the jobs' output
//! older than its [`keep`](super::Mailbox::keep), and what killed processes left half made as
//! long ago (`status.rs`' docs say when; PROTOCOL.md's table of files, which).

use std::time::{Duration, SystemTime};

use crate::platform::{
    dir::{Dir, Kind},
    lock::{self, Mode},
};

use super::{queue, status::time_of};

/// Remove the shards of `done` and of `output` (the jobs' output) last written to longer than
/// `keep` ago, but never `current`'s, and what killed processes left half made
/// ([`HALF_MADE`]) as long ago: best effort, bounded by what exists.
pub(super) fn prune(top: &Dir, current: u64, keep: Duration) {
    let now = SystemTime::now();
    let older = |st: &nix::sys::stat::FileStat| {
        now.duration_since(time_of(st.st_mtime, st.st_mtime_nsec))
            .is_ok_and(|age| age > keep)
    };
    for (sub, prefix) in HALF_MADE {
        let Ok(Some(dir)) = top.open_sub(sub) else {
            continue;
        };
        for (name, kind) in dir.entries().unwrap_or_default() {
            if kind == Some(Kind::Dir) || !name.starts_with(prefix) {
                continue;
            }
            // Never through a link; another user's, in a sticky directory, stays theirs. A
            // payload's poster holds it locked while it writes (a stalled pipe may keep it
            // unwritten for days).
            let Ok(Some((file, st))) = dir.open_stat(&name, false) else {
                continue;
            };
            let held =
                sub == "tmp" && !matches!(lock::flock(&file, Mode::Exclusive, false), Ok(true));
            if older(&st) && !held {
                let _ = dir.unlink_file(&name);
            }
        }
    }
    for kept in ["done", "output"] {
        let Ok(Some(dir)) = top.open_sub(kept) else {
            continue;
        };
        for (name, _) in dir.entries().unwrap_or_default() {
            let Some(first) = queue::parse_shard(&name) else {
                continue;
            };
            if first == current {
                continue;
            }
            let Ok(Some(shard)) = dir.open_sub(&name) else {
                continue;
            };
            let old = shard.status().is_ok_and(|st| older(&st));
            if old {
                remove_shard(&shard);
                let _ = shard.remove_self();
            }
        }
    }
}

/// The files a process makes and renames (or locks) at once, which it leaves half made when it
/// is killed in between: (directory, how their names begin). A payload being posted
/// (`tmp/.UNIQ`, locked by its poster while it writes), a registration being made
/// (`recv/.tmp-ID`, `senders/.tmp-ID`), a key being written (`keys/.KEY.PID`). Only a payload
/// is written to for long by a living process (which holds it locked), and none is ever read
/// by another: one untouched for a receiver's [`keep`](super::Mailbox::keep) (and a payload nobody
/// holds) is a dead process's.
const HALF_MADE: [(&str, &str); 4] = [
    ("tmp", "."),
    ("recv", ".tmp-"),
    ("senders", ".tmp-"),
    ("keys", "."),
];

/// Unlink the regular files of a shard (records, output).
fn remove_shard(shard: &Dir) {
    for (name, kind) in shard.entries().unwrap_or_default() {
        if kind != Some(Kind::Dir) {
            let _ = shard.unlink_file(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Old shards of `done` and `output` go, files and all; the current one stays however old.
    /// (Mutants answered: the current shard taken for the only one to prune, a shard's files
    /// left in it, its subdirectories taken for its files.)
    #[test]
    fn old_shards_go_with_their_files_and_the_current_one_stays() {
        let t = tempfile::tempdir().unwrap();
        let (old, current) = (queue::shard_name(0), queue::shard_name(queue::SHARD));
        for kept in ["done", "output"] {
            for shard in [&old, &current] {
                let dir = t.path().join(kept).join(shard);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("00000000000000000001"), b"record").unwrap();
            }
        }
        let top = Dir::top(t.path(), false, "cannot open").unwrap().unwrap();
        // Everything written before the look is older than no time at all.
        prune(&top, queue::SHARD, Duration::ZERO);
        for kept in ["done", "output"] {
            assert!(!t.path().join(kept).join(&old).exists(), "{kept}/{old}");
            assert!(
                t.path()
                    .join(kept)
                    .join(&current)
                    .join("00000000000000000001")
                    .exists()
            );
        }
    }
}
