//! What a receiver reads: the payload as it was when claimed, even when its poster (another
//! user) can still write to the file (the protocol's section [*Payloads*](super#payloads) in
//! [`super`]'s docs).

use std::{fs::File, io};

use nix::sys::stat::FileStat;

use crate::platform::fs as pfs;

/// Whether someone but this receiver may write the payload whose status was `st`: its owner
/// is another user (who may give themselves write access at any time, or kept a descriptor
/// from posting), or its mode lets the group or others write it.
pub(super) fn foreign(st: &FileStat) -> bool {
    st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o022 != 0
}

/// Whether statuses `a` and `b` of a file show it unchanged: the same size and times, which
/// any write, truncation or growth moves (`ctime` even when its owner sets the others back),
/// as finely as the file system keeps them.
fn unchanged(a: &FileStat, b: &FileStat) -> bool {
    (
        a.st_size,
        a.st_mtime,
        a.st_mtime_nsec,
        a.st_ctime,
        a.st_ctime_nsec,
    ) == (
        b.st_size,
        b.st_mtime,
        b.st_mtime_nsec,
        b.st_ctime,
        b.st_ctime_nsec,
    )
}

fn status(file: &File) -> io::Result<FileStat> {
    use std::os::fd::AsRawFd;
    Ok(nix::sys::stat::fstat(file.as_raw_fd())?)
}

/// The payload `file` just claimed (`meta`: its status when opened), to be read by the
/// receiver and its job: `file` itself if only this receiver may write it (no copy), else a
/// sealed copy in memory of what it held when claimed, up to its size then. `None` if it
/// changed while it was copied (its size or times moved, or it ended early): not what was
/// posted, nor a state of it anyone can tell. Errors: the copy could not be made.
pub(super) fn snapshot(file: File, meta: &FileStat) -> io::Result<Option<File>> {
    snapshot_by(file, meta, pfs::sealed_copy)
}

/// [`snapshot`], copying with `copy` (as [`pfs::sealed_copy`]).
fn snapshot_by(
    file: File,
    meta: &FileStat,
    copy: impl FnOnce(&File, u64) -> io::Result<(File, u64)>,
) -> io::Result<Option<File>> {
    if !foreign(meta) {
        return Ok(Some(file));
    }
    // Claimed now (the rename changed its times): what it holds from here is what is read.
    let before = status(&file)?;
    let (copy, copied) = copy(&file, before.st_size as u64)?;
    let after = status(&file)?;
    let same = copied == before.st_size as u64 && unchanged(&before, &after);
    Ok(same.then_some(copy))
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Seek, Write},
        path::Path,
    };

    use super::*;

    /// A file of ours holding `text`, with mode `mode`, and its status.
    fn file(dir: &Path, text: &str, mode: u32) -> (File, FileStat) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("payload");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let file = File::open(&path).unwrap();
        let st = status(&file).unwrap();
        (file, st)
    }

    fn read(mut f: &File) -> String {
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn foreign_means_another_owner_or_writable_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let (_, st) = file(dir.path(), "x", 0o644);
        assert!(!foreign(&st));
        for mode in [0o664, 0o646, 0o666] {
            let mut other = st;
            other.st_mode = st.st_mode & !0o777 | mode;
            assert!(foreign(&other), "{mode:o}");
        }
        let mut theirs = st;
        theirs.st_uid = st.st_uid.wrapping_add(1);
        assert!(foreign(&theirs));
    }

    #[test]
    fn our_own_payload_is_read_in_place_another_writable_one_from_a_sealed_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (f, st) = file(dir.path(), "mine", 0o600);
        let same = snapshot(f, &st).unwrap().unwrap();
        assert_eq!(
            status(&same).unwrap().st_ino,
            st.st_ino,
            "copied our own payload"
        );
        let (f, st) = file(dir.path(), "posted", 0o666);
        let mut copy = snapshot(f, &st).unwrap().unwrap();
        assert_ne!(status(&copy).unwrap().st_ino, st.st_ino, "not copied");
        // What it holds is what was there, from its start, whatever the file holds after.
        std::fs::write(dir.path().join("payload"), "REWRITTEN and longer").unwrap();
        assert_eq!(read(&copy), "posted");
        // Nobody can change the copy, not even through it.
        copy.rewind().unwrap();
        assert!(copy.write_all(b"x").is_err());
        assert!(copy.set_len(100).is_err());
        assert!(copy.set_len(1).is_err());
    }

    #[test]
    fn a_payload_that_changes_while_it_is_copied_is_none_of_what_was_posted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payload");
        // Grown or shrunk while copied: told by its size. (A rewrite of the same size is told
        // by its times, as fine as the file system keeps them: not tested here.)
        let changes: [&dyn Fn(); 2] = [
            &|| {
                let mut f = File::options().append(true).open(&path).unwrap();
                f.write_all(b"more").unwrap();
            },
            &|| {
                let f = File::options().write(true).open(&path).unwrap();
                f.set_len(1).unwrap();
            },
        ];
        for change in changes {
            let (f, st) = file(dir.path(), "posted!!", 0o666);
            let got = snapshot_by(f, &st, |f, len| {
                let copied = pfs::sealed_copy(f, len)?;
                change();
                Ok(copied)
            });
            assert!(got.unwrap().is_none());
        }
        // Copied short (the file ended early), though its size and times came back alike.
        let (f, st) = file(dir.path(), "posted", 0o666);
        let got = snapshot_by(f, &st, |f, len| Ok((pfs::sealed_copy(f, len)?.0, len - 1)));
        assert!(got.unwrap().is_none());
        // Unchanged: the copy.
        let (f, st) = file(dir.path(), "posted", 0o666);
        let got = snapshot_by(f, &st, pfs::sealed_copy).unwrap().unwrap();
        assert_eq!(read(&got), "posted");
    }
}
