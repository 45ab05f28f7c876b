/*!
`doctor`: what a directory's file system can do for the primitives, found by trying it.

Each check works on scratch files `.fsync-doctor.PID.*` it creates in the directory and removes
afterwards: whole-file `flock` locks (two descriptions must exclude each other), OFD byte-range
locks, atomic `rename`, `link` (used for create-once files), and change notification (dnotify, or inotify where the
kernel lacks it: a change must be reported). The mode follows from the file system type: kernel wake-ups on local file systems,
polling where other hosts' changes cannot wake us.
*/

use std::{
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use nix::libc;

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        fs as pfs,
        lock::{self, Mode},
        mounts::{self, Mount},
        notify::DirWatch,
    },
};

/// The findings for one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The directory examined.
    pub dir: PathBuf,
    /// The file system's kind by its magic number (`ext4`, `tmpfs`, `nfs`, `fuse`, ...).
    pub fs_type: &'static str,
    /// Whether other hosts may share it: then waits poll, and status reports cannot always
    /// count holders.
    pub network: bool,
    /// The FUSE subtype (`glusterfs`, `sshfs`, ...) or the mount's type from mountinfo.
    pub mount_type: Option<String>,
    /// Mount options that defeat locking across hosts (`nolock`, `local_lock=...`).
    pub warnings: Vec<String>,
    /// Whole-file `flock` locks: two open file descriptions exclude each other (what
    /// [`Mutex`](crate::Mutex) and most primitives need).
    pub flock: Check,
    /// OFD byte-range locks: conflicting ranges exclude each other, others do not (what
    /// [`RangeLock`](crate::RangeLock) needs).
    pub byte_range: Check,
    /// Whether a whole-file flock and a byte-range lock on one file exclude each other (they
    /// do on NFS and FUSE, which emulate flock with POSIX locks; never mix them there).
    pub kinds_collide: bool,
    /// `rename` is atomic (messages, registrations).
    pub rename: Check,
    /// `link` refuses an existing name (files created once, such as a semaphore's count).
    pub link: Check,
    /// Change notification reports a change made here (prompt wake-ups of event and message
    /// waits on this host).
    pub notify: Check,
    /// The interface that watches here (`dnotify`, or `inotify` where the kernel lacks it).
    pub notify_interface: &'static str,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// It behaves as the primitives need.
    Works,
    /// It does not: what went wrong, in words.
    Fails(String),
}

impl Check {
    /// Whether it works.
    pub fn works(&self) -> bool {
        *self == Check::Works
    }
}

impl Report {
    /// How fsync waits here, in words.
    pub fn mode(&self) -> &'static str {
        if self.network {
            "blocking lock calls woken by the file server, re-checked every poll interval; \
             change notification cannot see other hosts, so event and message waits poll"
        } else {
            "kernel wake-ups: blocking locks and change notification, no polling"
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

/// The kind of file system `path` (or, if it does not exist, its parent) lies on, from its
/// `statfs` magic number alone: cheap enough to ask before every wait.
pub fn file_system(path: &Path) -> FileSystem {
    pfs::fs_kind_of_path(path)
}

/// The kind of file system a path lies on ([`file_system`]): its name, and whether it is a
/// network one.
pub use crate::platform::fs::FsKind as FileSystem;

/// The owner of the primitive at `path` (a lock file, a semaphore's or a group's directory)
/// when that is another user than the caller and root, in a world-writable sticky directory
/// (`/tmp`) that they do not own either: they can remove its files at any moment (a lock file,
/// letting a second holder in; a semaphore's slot files, letting more holders in than it has
/// slots; a group's `gate` or registrations, making it look empty). Lock files fsync refuses
/// there; a semaphore or group it uses, and the command says so. `None` if `path` is missing.
pub fn foreign_owner(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::symlink_metadata(path).ok()?.uid();
    pfs::foreign_in_shared(path, uid)
}

/// Examine the directory `path` (or the directory of the file `path`) by trying what the
/// primitives need on scratch files, removed afterwards. Takes a few hundred milliseconds (it
/// waits up to 200 ms for a change notification). Errors: [`ErrorKind::NotFound`] if there
/// is no such directory; [`ErrorKind::PermissionDenied`] if it is not writable (the checks need
/// to create files). Installs the [wake signal](crate::wait#the-wake-signal)'s handler, as a
/// wait does.
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
        return Err(Error::new(path, ErrorKind::NotFound, "no such directory"));
    }
    let kind = pfs::fs_kind_of_path(&dir);
    let base = format!(".fsync-doctor.{}", std::process::id());
    let scratch = |suffix: &str| dir.join(format!("{base}{suffix}"));
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
    // On fresh open file descriptions: a whole-file flock, then a byte-range lock.
    let d = scratch(".d");
    let kinds_collide = match (open(&d), open(&d)) {
        (Ok(x), Ok(y)) => {
            lock::flock(&x, Mode::Exclusive, false).unwrap_or(false)
                && !lock::ofd_lock(&y, Mode::Exclusive, 0, 0, false).unwrap_or(true)
        }
        _ => false,
    };
    // Between hosts NFS and FUSE emulate flock with whole-file POSIX locks (measured on the
    // GlusterFS bed), which one client cannot see: assume the worst there.
    let kinds_collide = kinds_collide || kind.network;
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
    let notify_interface = watch.as_ref().map_or("none", |w| w.interface());
    let notify = match watch {
        Ok(w) => check(
            w.wait_timeout(Duration::from_millis(200)),
            "no change was reported",
        ),
        Err(e) => Check::Fails(e.to_string()),
    };
    for p in [&a, &b, &c, &d] {
        let _ = std::fs::remove_file(p);
    }
    let (mount_type, mut warnings) = mount_info(&dir);
    warnings.extend(sharing_warning(path, &dir));
    Ok(Report {
        dir,
        fs_type: kind.name,
        network: kind.network,
        mount_type,
        warnings,
        kinds_collide,
        flock,
        byte_range,
        rename,
        link,
        notify,
        notify_interface,
    })
}

/// The lease a holder on the file system of `path` uses by default ([`crate::Lease`]): a safe
/// fraction of the time after which that file system's server gives a silent client's locks to
/// another, so that the holder stops its command first. `None` on a local file system, where a
/// living holder cannot lose its lock. Read from the mount's own configuration where the file
/// system shows it (a GlusterFS client's ping-timeout, an NFSv4 client's lease time); otherwise the row of [`LEASES`] for the
/// file system, the last one for a network file system it does not know.
pub fn default_lease(path: &Path) -> Option<DefaultLease> {
    if !pfs::fs_kind_of_path(path).network {
        return None;
    }
    let dir = if path.is_dir() {
        path
    } else {
        pfs::parent_dir(path)
    };
    let mount = mounts::of_dir(dir);
    Some(lease_of_mount(mount.as_ref()))
}

/// A network file system's default lease, and where it was learnt.
#[derive(Debug, Clone)]
pub struct DefaultLease {
    /// The file system's row of [`LEASES`].
    pub file_system: &'static LeaseDefault,
    /// The lease.
    pub lease: Duration,
    /// Where it comes from.
    pub source: LeaseSource,
}

/// Where a [`DefaultLease`] was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseSource {
    /// From the mount's own configuration: the server's timeout, and the file that says it.
    Mount {
        /// The time after which the server gives a silent client's locks away.
        server_timeout: Duration,
        /// Where the mount shows it (GlusterFS: `MOUNT/.meta/graphs/active/VOLUME-client-0/private`,
        /// the client's state, or its `options/ping-timeout`; NFSv4: `/proc/self/mountstats`).
        file: std::path::PathBuf,
    },
    /// The file system shows nothing: the table's value for its type ([`LEASES`]), which
    /// assumes the server's default timeout.
    Guess,
}

impl DefaultLease {
    /// How long a command stopped with TERM for a lost lock is given before KILL, for a lease
    /// of `lease`: 10 s, or less where the server's timeout is known and would come first.
    pub fn grace(&self, lease: Duration) -> Duration {
        const GRACE: Duration = Duration::from_secs(10);
        match &self.source {
            LeaseSource::Mount { server_timeout, .. } => server_timeout
                .saturating_sub(lease + Duration::from_secs(1))
                .clamp(Duration::from_secs(1), GRACE),
            LeaseSource::Guess => GRACE,
        }
    }
}

/// The lease for a server timeout of `timeout`: half of it in whole seconds, less a second, at
/// least a second; so that the lease, the grace after TERM ([`DefaultLease::grace`]) and a
/// second of margin fit in it (42 s: 20 s; 10 s: 4 s).
fn lease_within(timeout: Duration) -> Duration {
    Duration::from_secs((timeout.as_secs() / 2).saturating_sub(1).max(1))
}

/// The default lease of a mount (none known: the last row of [`LEASES`]).
fn lease_of_mount(mount: Option<&Mount>) -> DefaultLease {
    let row = lease_for(mount.map_or("", |m| m.kind.as_str()));
    let guess = DefaultLease {
        file_system: row,
        lease: row.lease,
        source: LeaseSource::Guess,
    };
    let Some(m) = mount else { return guess };
    let shown = match row.name {
        "GlusterFS" => gluster_ping_timeout(Path::new(&m.point), &m.source),
        "NFS" => nfs_lease_time(&m.point),
        _ => None,
    };
    match shown {
        Some((server_timeout, file)) => DefaultLease {
            file_system: row,
            lease: lease_within(server_timeout),
            source: LeaseSource::Mount {
                server_timeout,
                file,
            },
        },
        None => guess,
    }
}

/// An NFSv4 client's lease time, as the kernel shows it for the mount at `point` in
/// `/proc/self/mountstats` (`lease_time=` on its `nfsv4:` line: the time after which the server
/// may give a client that has not renewed its state, locks included, away), and that file.
/// `None` for NFSv3, which has no lease (its lock manager's timeouts are the server's).
fn nfs_lease_time(point: &str) -> Option<(Duration, std::path::PathBuf)> {
    let file = std::path::PathBuf::from("/proc/self/mountstats");
    let text = std::fs::read_to_string(&file).ok()?;
    let secs = nfs_lease_in(&text, point)?;
    Some((Duration::from_secs(secs), file))
}

/// The `lease_time` of the mount at `point` in the text of a `mountstats` file.
fn nfs_lease_in(mountstats: &str, point: &str) -> Option<u64> {
    let mut ours = false;
    for line in mountstats.lines() {
        if let Some(device) = line.strip_prefix("device ") {
            // device SERVER:/EXPORT mounted on POINT with fstype nfs4 statvers=1.1
            let mounted_on = device
                .split_once(" mounted on ")
                .and_then(|(_, rest)| rest.rsplit_once(" with fstype "))
                .map(|(p, _)| p.replace("\\040", " "));
            ours = mounted_on.as_deref() == Some(point);
            continue;
        }
        if !ours {
            continue;
        }
        if let Some(v4) = line.trim_start().strip_prefix("nfsv4:") {
            return v4
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("lease_time="))
                .and_then(|v| v.trim().parse().ok())
                .filter(|&s| s > 0);
        }
    }
    None
}

/// A GlusterFS client's ping-timeout, as its mount shows it: in the active graph of its meta
/// directory, the `ping_timeout` in force of each `protocol/client` translator (one per brick;
/// the shortest wins), and the file it was read from. `None` where the mount shows none (the
/// option not set: the server's default, 42 s, applies, which the table assumes).
///
/// It is read before a command starts under a lock, and each call on the meta directory is a
/// round trip through FUSE to the client (a third of a millisecond or more): where the mount's
/// source (`SERVER:VOLUME`) names the volume, its first client translator (`VOLUME-client-0`;
/// every brick's gets the volume's option) is read alone.
fn gluster_ping_timeout(point: &Path, source: &str) -> Option<(Duration, std::path::PathBuf)> {
    let graph = point.join(".meta/graphs/active");
    let volume = source
        .split_once(':')
        .map(|(_, v)| v.trim_start_matches('/'))
        .and_then(|v| v.split('/').next())
        .filter(|v| !v.is_empty());
    if let Some(volume) = volume {
        let live = graph.join(format!("{volume}-client-0")).join("private");
        if let Some(secs) = gluster_value(&live, "ping_timeout") {
            return Some((Duration::from_secs(secs), live));
        }
    }
    let mut best: Option<(Duration, std::path::PathBuf)> = None;
    // Each file read is a few calls through FUSE, and a command under the lock starts
    // meanwhile: read the type only of the translators glusterd names as clients
    // (VOLUME-client-N), and of all only where none is named so.
    let entries: Vec<std::path::PathBuf> = std::fs::read_dir(&graph)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    let named_client = |x: &Path| {
        x.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once("-client-"))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let named: Vec<&std::path::PathBuf> = entries.iter().filter(|x| named_client(x)).collect();
    let candidates = match named.is_empty() {
        true => entries.iter().collect(),
        false => named,
    };
    for xlator in candidates {
        let kind = mounts::read_whole(xlator.join("type")).unwrap_or_default();
        if kind.trim() != "protocol/client" {
            continue;
        }
        let xlator = xlator.clone();
        // The client's state shows the value in force (a volume option changed since the
        // mount is applied in place, and the graph's options keep the old one); the options,
        // what it was mounted with.
        let live = xlator.join("private");
        let configured = xlator.join("options/ping-timeout");
        let (secs, file) = match gluster_value(&live, "ping_timeout") {
            Some(secs) => (secs, live),
            None => match gluster_value(&configured, "") {
                Some(secs) => (secs, configured),
                None => continue,
            },
        };
        let timeout = Duration::from_secs(secs);
        if best.as_ref().is_none_or(|(b, _)| timeout < *b) {
            best = Some((timeout, file));
        }
    }
    best
}

/// A positive number of seconds in a file of a GlusterFS meta directory: the whole file, or
/// the value of `key = N` in it.
fn gluster_value(file: &Path, key: &str) -> Option<u64> {
    let text = mounts::read_whole(file).ok()?;
    let found = match key {
        "" => text.trim().parse().ok(),
        key => text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().parse().ok())?
        }),
    };
    found.filter(|&s| s > 0)
}

/// A network file system's default lease ([`default_lease`]).
#[derive(Debug)]
pub struct LeaseDefault {
    /// Its name.
    pub name: &'static str,
    /// How mountinfo names its mounts (type, or type and source): prefixes.
    pub mount_types: &'static [&'static str],
    /// The server's own timeout, in words.
    pub server_timeout: &'static str,
    /// The default lease.
    pub lease: Duration,
}

/// The default leases, by file system; the last row is for any other network file system.
pub const LEASES: &[LeaseDefault] = &[
    LeaseDefault {
        name: "GlusterFS",
        mount_types: &["fuse.glusterfs"],
        server_timeout: "network.ping-timeout, 42 s by default",
        lease: Duration::from_secs(20),
    },
    LeaseDefault {
        name: "MooseFS",
        mount_types: &["fuse.mfs", "fuse mfs#"],
        server_timeout: "the master's SESSION_SUSTAIN_TIME, 60 s at the least (a day by default)",
        lease: Duration::from_secs(30),
    },
    LeaseDefault {
        name: "NFS",
        mount_types: &["nfs"],
        server_timeout: "the NFSv4 lease, 90 s by default (NFSv3: the lock manager's)",
        lease: Duration::from_secs(30),
    },
    LeaseDefault {
        name: "CephFS",
        mount_types: &["fuse.ceph-fuse", "ceph"],
        server_timeout: "the MDS's session_timeout and session_autoclose, 30 s at the least (60 s and \
                         300 s by default)",
        lease: Duration::from_secs(14),
    },
    LeaseDefault {
        name: "SMB",
        mount_types: &["cifs", "smb3"],
        server_timeout: "the server's session timeout",
        lease: Duration::from_secs(20),
    },
    LeaseDefault {
        name: "another network file system",
        mount_types: &[],
        server_timeout: "unknown",
        lease: Duration::from_secs(10),
    },
];

/// The default lease for a lock held through our descriptor `fd` on a network file system: found from the
/// mount the kernel names for the descriptor, without asking the file server anything (a
/// path's checks would be round trips to it).
pub(crate) fn lease_of(fd: std::os::fd::BorrowedFd<'_>) -> DefaultLease {
    lease_of_mount(mounts::of_fd(fd).as_ref())
}

/// The row of [`LEASES`] for a mount of this kind, the last one for a kind it does not know.
fn lease_for(kind: &str) -> &'static LeaseDefault {
    LEASES
        .iter()
        .find(|l| l.mount_types.iter().any(|t| kind.starts_with(t)))
        .unwrap_or(&LEASES[LEASES.len() - 1])
}

/// The type (with FUSE subtype) of the mount that holds `dir`, and warnings about its options.
fn mount_info(dir: &Path) -> (Option<String>, Vec<String>) {
    let Some(Mount {
        kind: fstype, opts, ..
    }) = mounts::of_dir(dir)
    else {
        return (None, Vec::new());
    };
    let mut warnings = Vec::new();
    for o in opts.split(',') {
        if o == "nolock" || o.starts_with("local_lock=") && o != "local_lock=none" {
            warnings.push(format!(
                "mounted with '{o}': locks are local to this host and exclude nobody elsewhere"
            ));
        }
    }
    (Some(fstype), warnings)
}

/// What another user of a shared sticky directory can do to what is at `path` (or, for a
/// directory, to what is made in it).
fn sharing_warning(path: &Path, dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(uid) = foreign_owner(path) {
        return Some(format!(
            "{} belongs to another user (uid {uid}) in a world-writable sticky directory: they \
             can remove its files at any moment; fsync refuses it as a lock file and warns \
             when it uses it as a semaphore or group",
            path.display()
        ));
    }
    let meta = std::fs::metadata(dir).ok()?;
    crate::platform::dir::shared_sticky(meta.mode()).then(|| {
        "world-writable sticky directory: a lock file another user made here first is refused; \
         a semaphore or group another user made here first is used with a warning, since they \
         can remove its files at any moment"
            .to_string()
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
        assert!(
            !r.kinds_collide,
            "flock and OFD locks are independent on a local file system"
        );
        assert!(r.warnings.is_empty());
        assert!(r.mount_type.is_some());
        assert_eq!(
            r.notify_interface, "dnotify",
            "the kernel wakes waiters by dnotify here"
        );
        for c in [&r.flock, &r.byte_range, &r.rename, &r.link, &r.notify] {
            assert_eq!(*c, Check::Works);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Half the server's timeout, less a second, at least a second; the grace after TERM is
    /// what is left less a second, at most 10 s (and 10 s for a guess).
    #[test]
    fn the_lease_and_the_grace_fit_in_the_servers_timeout() {
        let secs = Duration::from_secs;
        assert_eq!(lease_within(secs(42)), secs(20));
        assert_eq!(lease_within(secs(10)), secs(4));
        assert_eq!(lease_within(secs(6)), secs(2));
        assert_eq!(lease_within(secs(2)), secs(1));
        let read = |timeout| DefaultLease {
            file_system: &LEASES[0],
            lease: lease_within(timeout),
            source: LeaseSource::Mount {
                server_timeout: timeout,
                file: "x".into(),
            },
        };
        assert_eq!(read(secs(10)).grace(secs(4)), secs(5));
        assert_eq!(read(secs(42)).grace(secs(20)), secs(10));
        assert_eq!(read(secs(2)).grace(secs(1)), secs(1));
        let guess = lease_of_mount(None);
        assert_eq!(guess.source, LeaseSource::Guess);
        assert_eq!(guess.lease, secs(10));
        assert_eq!(guess.grace(secs(3)), secs(10));
    }

    /// An NFSv4 mount's lease time, from the kernel's mountstats (the real layout of a 6.x
    /// kernel, abridged): the block of the mount asked for, not its neighbours'; NFSv3, which
    /// has no lease, gives none.
    #[test]
    fn an_nfs4_mounts_lease_time_is_read_from_mountstats() {
        let stats = "device proc mounted on /proc with fstype proc
device srv:/export mounted on /mnt/a with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600
\tage:\t12
\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255
\tnfsv4:\tbm0=0xfdffbfff,bm1=0xf9be3e,bm2=0x68800,acl=0x3,sessions,pnfs=not configured,lease_time=45,lease_expired=0
\tsec:\tflavor=1,pseudoflavor=1
device srv:/other mounted on /mnt/my\\040share with fstype nfs4 statvers=1.1
\tnfsv4:\tbm0=0xfdffbfff,acl=0x3,sessions,lease_time=90,lease_expired=0
device srv:/v3 mounted on /mnt/v3 with fstype nfs statvers=1.1
\topts:\trw,vers=3,rsize=1048576
";
        assert_eq!(nfs_lease_in(stats, "/mnt/a"), Some(45));
        assert_eq!(nfs_lease_in(stats, "/mnt/my share"), Some(90));
        assert_eq!(nfs_lease_in(stats, "/mnt/v3"), None);
        assert_eq!(nfs_lease_in(stats, "/mnt"), None);
        assert_eq!(nfs_lease_in(&stats.replace("=45", "=0"), "/mnt/a"), None);
        assert_eq!(
            lease_within(Duration::from_secs(45)),
            Duration::from_secs(21)
        );
        // A mount this process's mountstats does not list (no NFS here): a guess.
        let nowhere = Mount {
            id: 1,
            point: "/nonexistent/fsync-nfs-mount".into(),
            kind: "nfs4".into(),
            source: String::new(),
            opts: String::new(),
        };
        let guess = lease_of_mount(Some(&nowhere));
        assert_eq!(guess.source, LeaseSource::Guess);
        assert_eq!(guess.file_system.name, "NFS");
        assert_eq!(guess.lease, Duration::from_secs(30));
    }

    /// Translators are looked at by name only where some are named as clients (digits after
    /// `-client-`); otherwise every translator's type is read.
    #[test]
    fn gluster_clients_not_named_so_are_found_by_their_type() {
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join(".meta/graphs/active");
        for (name, kind, secs) in [
            ("v-client-x", "cluster/replicate", "3"),
            ("v-client-", "cluster/replicate", "3"),
            ("brick-link", "protocol/client", "8"),
        ] {
            let x = graph.join(name);
            std::fs::create_dir_all(&x).unwrap();
            std::fs::write(x.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(x.join("private"), format!("ping_timeout = {secs}\n")).unwrap();
        }
        let (t, file) = gluster_ping_timeout(dir.path(), "").unwrap();
        assert_eq!(t, Duration::from_secs(8));
        assert!(file.ends_with("brick-link/private"));
    }

    /// Where the mount's source names the volume, its first client translator is read alone
    /// (no type read, no listing: a translator of the same name elsewhere in the graph is not
    /// looked at); a source that does not, or a volume whose client shows nothing there, is
    /// looked for by listing the graph.
    #[test]
    fn a_gluster_volumes_first_client_is_read_alone_where_the_source_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join(".meta/graphs/active");
        let x = graph.join("vol-client-0");
        std::fs::create_dir_all(&x).unwrap();
        // No `type` file: the scan would skip it.
        std::fs::write(x.join("private"), "ping_timeout = 7\n").unwrap();
        let other = graph.join("other-client-0");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("type"), "protocol/client\n").unwrap();
        std::fs::write(other.join("private"), "ping_timeout = 3\n").unwrap();
        for source in ["srv:vol", "srv:/vol", "srv:/vol/sub/dir"] {
            let (t, file) = gluster_ping_timeout(dir.path(), source).unwrap();
            assert_eq!(
                (t, file),
                (Duration::from_secs(7), x.join("private")),
                "{source}"
            );
        }
        for source in ["", "srv:", "srv:/", "srv:gone"] {
            let (t, _) = gluster_ping_timeout(dir.path(), source).unwrap();
            assert_eq!(t, Duration::from_secs(3), "{source}");
        }
    }

    /// A GlusterFS mount's meta directory: the value in force (`private`) over the mounted
    /// option, the shortest of several bricks' clients, translators of other kinds ignored.
    #[test]
    fn a_gluster_clients_ping_timeout_is_read_from_its_meta_directory() {
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join(".meta/graphs/active");
        let xlator = |name: &str, kind: &str, private: Option<&str>, option: Option<&str>| {
            let x = graph.join(name);
            std::fs::create_dir_all(x.join("options")).unwrap();
            std::fs::write(x.join("type"), format!("{kind}\n")).unwrap();
            if let Some(p) = private {
                std::fs::write(x.join("private"), p).unwrap();
            }
            if let Some(o) = option {
                std::fs::write(x.join("options/ping-timeout"), o).unwrap();
            }
        };
        assert_eq!(gluster_ping_timeout(dir.path(), ""), None);
        xlator(
            "v-dht",
            "cluster/distribute",
            Some("ping_timeout = 1\n"),
            Some("1\n"),
        );
        xlator("v-client-0", "protocol/client", None, Some("12\n"));
        let (t, file) = gluster_ping_timeout(dir.path(), "").unwrap();
        assert_eq!(t, Duration::from_secs(12));
        assert!(file.ends_with("v-client-0/options/ping-timeout"));
        xlator(
            "v-client-1",
            "protocol/client",
            Some("[xlator.protocol.client.v-client-1.priv]\nconnected = 1\nping_timeout = 7\n"),
            Some("30\n"),
        );
        let (t, file) = gluster_ping_timeout(dir.path(), "").unwrap();
        assert_eq!(t, Duration::from_secs(7));
        assert!(file.ends_with("v-client-1/private"));
        // The shortest wins whichever the directory lists first; a 0 in force (no timeout) is
        // not believed, and the mounted option is read instead.
        let swapped = tempfile::tempdir().unwrap();
        for (name, secs) in [("v-client-0", "7"), ("v-client-1", "12")] {
            let x = swapped.path().join(".meta/graphs/active").join(name);
            std::fs::create_dir_all(x.join("options")).unwrap();
            std::fs::write(x.join("type"), "protocol/client\n").unwrap();
            std::fs::write(x.join("private"), format!("ping_timeout = {secs}\n")).unwrap();
        }
        assert_eq!(
            gluster_ping_timeout(swapped.path(), "").unwrap().0,
            Duration::from_secs(7)
        );
        let zero = swapped.path().join(".meta/graphs/active/v-client-0");
        std::fs::write(zero.join("private"), "ping_timeout = 0\n").unwrap();
        std::fs::write(zero.join("options/ping-timeout"), "9\n").unwrap();
        assert_eq!(
            gluster_ping_timeout(swapped.path(), "").unwrap().0,
            Duration::from_secs(9)
        );
        // A GlusterFS mount there: its lease is read; the same tree under another kind of
        // mount is not looked at.
        let mount = |kind: &str| Mount {
            id: 1,
            point: dir.path().to_string_lossy().into_owned(),
            kind: kind.to_string(),
            source: String::new(),
            opts: String::new(),
        };
        let read = lease_of_mount(Some(&mount("fuse.glusterfs")));
        assert_eq!(read.lease, Duration::from_secs(2));
        assert!(
            matches!(read.source, LeaseSource::Mount { server_timeout, .. }
            if server_timeout == Duration::from_secs(7))
        );
        let other = lease_of_mount(Some(&mount("fuse.mfs")));
        assert_eq!(
            (other.file_system.name, other.source),
            ("MooseFS", LeaseSource::Guess)
        );
        assert_eq!(other.lease, Duration::from_secs(30));
    }
}
