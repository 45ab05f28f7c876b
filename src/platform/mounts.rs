//! The mount table (`/proc/self/mountinfo`): which mount holds a descriptor or a directory, and
//! its type and options. Read from the kernel, never from the file server: on a network file
//! system `fstatfs(2)` is a round trip to the server, which a host cut off from it waits on
//! until its client gives up (and which then fails), while the mount table answers at once.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;

/// One line of /proc/self/mountinfo: the mount's id, where it is mounted, its type (with the
/// FUSE subtype, or for a plain `fuse` mount its source: MooseFS's `mfs#HOST:PORT`), its source
/// and its options.
#[derive(Debug, Clone)]
pub(crate) struct Mount {
    pub(crate) id: u64,
    pub(crate) point: String,
    pub(crate) kind: String,
    /// What is mounted (`SERVER:VOLUME`, `SERVER:/EXPORT`, a device).
    pub(crate) source: String,
    pub(crate) opts: String,
}

impl Mount {
    /// Whether other hosts may share this mount: the types `fs::fs_kind` counts as network
    /// ones by their `statfs` magic (every FUSE file system among them).
    pub(crate) fn network(&self) -> bool {
        network_type(&self.kind)
    }
}

/// Whether a mount of type `kind` (as [`Mount::kind`] spells it) may be shared with other hosts.
pub(crate) fn network_type(kind: &str) -> bool {
    const NETWORK: &[&str] = &[
        "nfs", "cifs", "smb", "fuse", "ceph", "afs", "9p", "gfs2", "ocfs2", "lustre", "gpfs",
    ];
    NETWORK.iter().any(|t| kind.starts_with(t))
}

pub(crate) fn parse(line: &str) -> Option<Mount> {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS
    let (left, right) = line.split_once(" - ")?;
    let l: Vec<&str> = left.split(' ').collect();
    let r: Vec<&str> = right.split(' ').collect();
    if l.len() < 6 || r.len() < 3 {
        return None;
    }
    Some(Mount {
        id: l[0].parse().ok()?,
        point: l[4].replace("\\040", " "),
        kind: match r[0] {
            "fuse" => format!("fuse {}", r[1].replace("\\043", "#")),
            other => other.to_string(),
        },
        source: r[1].replace("\\040", " ").replace("\\043", "#"),
        opts: format!("{},{}", l[5], r[2]),
    })
}

/// The mount the kernel names for our descriptor `fd` (its `mnt_id` in /proc/self/fdinfo).
/// `None` where /proc does not tell.
pub(crate) fn of_fd(fd: BorrowedFd<'_>) -> Option<Mount> {
    let info = read_whole(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    let id = info
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse::<u64>().ok())?;
    let text = read_whole("/proc/self/mountinfo").ok()?;
    text.lines().filter_map(parse).find(|m| m.id == id)
}

/// The mount that holds `dir` (the longest mount point that is a prefix of its canonical path).
pub(crate) fn of_dir(dir: &Path) -> Option<Mount> {
    let canon = std::fs::canonicalize(dir).ok()?;
    let text = read_whole("/proc/self/mountinfo").ok()?;
    let mut best: Option<Mount> = None;
    for m in text.lines().filter_map(parse) {
        if canon.starts_with(&m.point)
            && best.as_ref().is_none_or(|b| m.point.len() >= b.point.len())
        {
            best = Some(m);
        }
    }
    best
}

/// A small file of the kernel's or of a FUSE client's, whole, in as few reads as it allows:
/// such files show a size of 0, so `read_to_string` would start with a 32-byte read and double
/// from there, and on FUSE every read is a round trip to the client.
pub(crate) fn read_whole(path: impl AsRef<Path>) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::with_capacity(16 * 1024);
    super::retrying(|| file.read_to_end(&mut bytes))?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mount that holds a path is the one with the longest mount point above it; a
    /// descriptor's mount is the one the kernel names for it.
    #[test]
    fn the_mount_of_a_path_or_a_descriptor_is_the_innermost() {
        let proc_mount = of_dir(Path::new("/proc/self")).unwrap();
        assert_eq!(
            (proc_mount.point.as_str(), proc_mount.kind.as_str()),
            ("/proc", "proc")
        );
        assert_eq!(of_dir(Path::new("/")).unwrap().point, "/");
        let status = std::fs::File::open("/proc/self/status").unwrap();
        use std::os::fd::AsFd;
        assert_eq!(of_fd(status.as_fd()).unwrap().point, "/proc");
        assert!(!proc_mount.network());
    }

    /// The types that count as network ones, FUSE subtypes and MooseFS's plain `fuse` source
    /// among them; local ones do not.
    #[test]
    fn network_types_are_known_by_name() {
        for kind in [
            "nfs",
            "nfs4",
            "cifs",
            "smb3",
            "ceph",
            "fuse.glusterfs",
            "fuse mfs#srv:9421",
            "fuse.ceph-fuse",
            "fuseblk",
            "9p",
            "lustre",
        ] {
            assert!(network_type(kind), "{kind}");
        }
        for kind in [
            "ext4", "xfs", "btrfs", "tmpfs", "overlay", "proc", "zfs", "",
        ] {
            assert!(!network_type(kind), "{kind}");
        }
        let line = "36 35 98:0 /mnt1 /mnt/my\\040share rw,noatime master:1 - fuse \
                    mfs\\043srv:9421 rw,user_id=0";
        let m = parse(line).unwrap();
        assert_eq!(
            (m.id, m.point.as_str(), m.kind.as_str()),
            (36, "/mnt/my share", "fuse mfs#srv:9421")
        );
        assert_eq!(m.source, "mfs#srv:9421");
        assert!(m.network());
        assert!(parse("garbage").is_none());
    }
}
