/*!
Who we are and who holds a lock: pid, host name, command line, wall-clock time, and the holders
of locks on local files as the kernel lists them in `/proc/locks`.
*/

use std::{
    ffi::OsString,
    os::{
        fd::{AsRawFd, BorrowedFd},
        unix::{ffi::OsStringExt, fs::MetadataExt},
    },
    time::{SystemTime, UNIX_EPOCH},
};

/// This machine's host name (as other hosts sharing the directory will see it in reports).
/// Read once per process: holders record it on every acquisition.
pub(crate) fn hostname() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "unknown".to_string())
    })
    .clone()
}

/// This process's own command line, as [`cmdline`] would give it (but without reading
/// `/proc`).
pub(crate) fn own_cmdline() -> String {
    static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        std::env::args_os()
            .filter(|a| !a.is_empty())
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    })
    .clone()
}

/// The process's umask, as `/proc/self/status` shows it (reading it with umask(2) would set
/// it, for every thread, for a moment); 022 where it does not.
pub(crate) fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|m| u32::from_str_radix(m.trim(), 8).ok())
        .unwrap_or(0o022)
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// 64 random bits, from `/dev/urandom`; where that cannot be read, a hash keyed by the
/// standard library's random keys (drawn from the same kernel source) of the time. For names
/// nobody may guess or share (scratch files, message names), not for cryptography.
pub(crate) fn random_u64() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)) {
        Ok(()) => u64::from_ne_bytes(bytes),
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(now_micros());
            h.finish()
        }
    }
}

/// Whether a process with this pid exists on this host.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// The user a local process runs as, if it exists.
pub(crate) fn pid_uid(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// The command line of a local process, its arguments joined by spaces.
pub(crate) fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| {
            OsString::from_vec(w.to_vec())
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// A lock the kernel reports on a local file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelLock {
    pub pid: Option<u32>,
    pub exclusive: bool,
}

/// The `flock` locks held (not waited for) on the file with this device and inode, from
/// `/proc/locks`. `None` if the kernel does not tell us (no procfs).
pub(crate) fn flock_holders(dev: u64, ino: u64) -> Option<Vec<KernelLock>> {
    stable_read(|text| parse_proc_locks(text, dev, ino, &["FLOCK"]))
}

/// The locks of every kind held (not waited for) on the file with this device and inode, from
/// `/proc/locks`: `flock`, POSIX (`fcntl`, `lockf`) and open-file-description (OFD) byte-range
/// locks, on any range. `None` if the kernel does not tell us (no procfs).
pub(crate) fn lock_holders(dev: u64, ino: u64) -> Option<Vec<KernelLock>> {
    stable_read(|text| parse_proc_locks(text, dev, ino, &["FLOCK", "POSIX", "OFDLCK"]))
}

/// The kernel produces `/proc/locks` a page at a time without a snapshot, so while other locks
/// come and go lines can be skipped or repeated (a lock taken anywhere is put first in the
/// list, moving every line after it down one: the line at a page's end comes again at the
/// next page's start). Trust what this file's lines say only when [`AGREEING_READS`] reads in
/// a row agree on them: two were seen to agree on a reader counted twice, with many tests
/// taking locks beside it.
fn stable_read<T: PartialEq>(parse: impl Fn(&str) -> T) -> Option<T> {
    let mut last = parse(&std::fs::read_to_string("/proc/locks").ok()?);
    let mut agreeing = 1;
    for _ in 0..30 {
        let again = parse(&std::fs::read_to_string("/proc/locks").ok()?);
        agreeing = if again == last { agreeing + 1 } else { 1 };
        if agreeing == AGREEING_READS {
            return Some(again);
        }
        last = again;
    }
    Some(last)
}

/// How many reads of `/proc/locks` in a row must agree ([`stable_read`]).
const AGREEING_READS: usize = 3;

/// The held locks of the given kinds (`FLOCK`, `POSIX`, `OFDLCK`) on this file.
pub(crate) fn parse_proc_locks(text: &str, dev: u64, ino: u64, kinds: &[&str]) -> Vec<KernelLock> {
    let want = proc_locks_key(dev, ino);
    let mut out = Vec::new();
    for line in text.lines() {
        // "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; waiters are "1: -> FLOCK ...".
        // OFD locks may show pid -1 (they belong to no process).
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || !kinds.contains(&fields[1]) || fields[5] != want {
            continue;
        }
        let pid = fields[4]
            .parse::<i64>()
            .ok()
            .filter(|&p| p > 0)
            .and_then(|p| u32::try_from(p).ok());
        out.push(KernelLock {
            pid,
            exclusive: fields[3] == "WRITE",
        });
    }
    out
}

/// How many processes wait (blocked) for a `flock` lock on this local file, from `/proc/locks`
/// ("->" lines). `None` if the kernel does not tell us.
pub(crate) fn flock_waiters(dev: u64, ino: u64) -> Option<usize> {
    let want = proc_locks_key(dev, ino);
    stable_read(|text| {
        text.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 7 && f[1] == "->" && f[2] == "FLOCK" && f[6] == want
            })
            .count()
    })
}

/// A live local process that holds a lock on `file`'s file through one of its descriptors:
/// `hint` (the pid `/proc/locks` names) if it still does, else the first process found with
/// such a descriptor. `/proc/locks` names the process that took a lock, which may have exited
/// since, leaving it to one that inherited the descriptor (a daemon a locked command left
/// running). Only processes whose descriptors we may read are seen.
pub(crate) fn live_lock_holder(file: BorrowedFd<'_>, hint: Option<u32>) -> Option<u32> {
    let key = FileKey::of(file)?;
    if let Some(pid) = hint
        && descriptors_on(pid, &key).any(|d| d.holds_lock())
    {
        return Some(pid);
    }
    processes()
        .filter(|&pid| Some(pid) != hint)
        .find(|&pid| descriptors_on(pid, &key).any(|d| d.holds_lock()))
}

/// A live local process that holds a POSIX or OFD byte-range lock on any of `len` bytes from
/// `start` (`len` 0: to the end of all offsets) of `file`'s file, through one of its
/// descriptors (`/proc/PID/fdinfo` lists the locks each holds): `hint` if it does; else, of
/// those that do, the first whose parent is not one of them: the process that took the lock
/// rather than a command it passed the lock down to. Only processes whose descriptors we may
/// read are seen.
pub(crate) fn range_lock_holder(
    file: BorrowedFd<'_>,
    start: u64,
    len: u64,
    hint: Option<u32>,
) -> Option<u32> {
    let key = FileKey::of(file)?;
    let holds = |pid: u32| descriptors_on(pid, &key).any(|d| d.holds_range(start, len));
    if let Some(pid) = hint.filter(|&p| holds(p)) {
        return Some(pid);
    }
    let holders: Vec<u32> = processes().filter(|&p| holds(p)).collect();
    let topmost = holders
        .iter()
        .copied()
        .find(|&p| parent_pid(p).is_none_or(|parent| !holders.contains(&parent)));
    topmost.or(holders.first().copied())
}

/// The parent of process `pid`, from `/proc/PID/stat`.
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMMAND) STATE PPID ...": the command may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The bytes `[first, last]` of a byte-range lock (POSIX or OFD) that a `lock:` line of
/// `/proc/PID/fdinfo` lists ("lock:\t1: OFDLCK  ADVISORY  WRITE -1 00:2a:5678 7 7", the end
/// `EOF` for a lock to the end of all offsets); `None` for a `flock` lock or another line.
fn locked_bytes(line: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = line.strip_prefix("lock:")?.split_whitespace().collect();
    let fields: Vec<&str> = fields.into_iter().filter(|&f| f != "->").collect();
    if fields.len() < 8 || !matches!(fields[1], "POSIX" | "OFDLCK") {
        return None;
    }
    let first = fields[fields.len() - 2].parse().ok()?;
    let last = match fields[fields.len() - 1] {
        "EOF" => u64::MAX,
        n => n.parse().ok()?,
    };
    Some((first, last))
}

/// Whether the bytes `[first, last]` meet `len` bytes from `start` (`len` 0: to the end).
fn overlaps((first, last): (u64, u64), start: u64, len: u64) -> bool {
    let end = match len {
        0 => u64::MAX,
        n => start.saturating_add(n - 1),
    };
    first <= end && start <= last
}

/// Whether another process has `fd`'s open file description among its descriptors (the same
/// description, as `kcmp(2)` compares them, not merely the same file): one that inherited it
/// from us or from a child, such as a daemon a locked command left running. The lock belongs to
/// the description, so such a process still holds it after we close ours. Only processes whose
/// descriptors we may read are seen (as a non-root user, our own, which covers descendants).
/// Where `kcmp` cannot tell, a descriptor on the same file that holds a lock counts.
pub(crate) fn description_shared(fd: BorrowedFd<'_>) -> bool {
    let Some(key) = FileKey::of(fd) else {
        return false;
    };
    let me = std::process::id();
    processes().filter(|&pid| pid != me).any(|pid| {
        descriptors_on(pid, &key).any(|other| {
            let Ok(other_fd) = other.fd.parse::<i32>() else {
                return false;
            };
            same_description(me, fd.as_raw_fd(), pid, other_fd)
                .unwrap_or_else(|| other.holds_lock())
        })
    })
}

/// Whether descriptor `fd1` of process `pid1` and `fd2` of `pid2` are one open file
/// description (`kcmp(2)`, `KCMP_FILE`); `None` where the kernel does not say (no `kcmp`, not
/// permitted, gone).
fn same_description(pid1: u32, fd1: i32, pid2: u32, fd2: i32) -> Option<bool> {
    use nix::libc;
    const KCMP_FILE: libc::c_int = 0;
    let (Ok(pid1), Ok(pid2)) = (libc::pid_t::try_from(pid1), libc::pid_t::try_from(pid2)) else {
        return None;
    };
    // SAFETY: kcmp takes only integers and reads no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid1,
            pid2,
            KCMP_FILE,
            fd1 as libc::c_ulong,
            fd2 as libc::c_ulong,
        )
    };
    match rc {
        0 => Some(true),
        1..=3 => Some(false),
        _ => None,
    }
}

/// Whether a process of group `pgid` other than `except` (its leader, exited but not reaped)
/// still lives (not a zombie), from `/proc/PID/stat`.
pub(crate) fn group_lives(pgid: u32, except: u32) -> bool {
    processes().filter(|&p| p != except).any(|pid| {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // "PID (COMMAND) STATE PPID PGRP ...": the command may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = after.split_whitespace();
        let state = fields.next();
        let group = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        group == Some(pgid) && !matches!(state, Some("Z" | "X"))
    })
}

/// The pids in `/proc`, in increasing order.
fn processes() -> impl Iterator<Item = u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter()
}

/// How a file is told apart from others among the descriptors of all processes.
///
/// From `/proc/PID/fdinfo`, which describes a descriptor without touching its file: a `stat`
/// of `/proc/PID/fd/N` follows the link into the file system, and one descriptor on a hung
/// network mount anywhere on the machine (a host cut off from its server) would hang us with
/// it. There a file is its mount and inode number (`mnt_id`, `ino`); a process that opened the
/// same file through another mount of it (a bind mount) is not seen. On older kernels, whose
/// fdinfo shows no `ino`, the link is followed after all.
#[derive(Debug, PartialEq, Eq)]
enum FileKey {
    Mount { mnt_id: u64, ino: u64 },
    Stat { dev: u64, ino: u64 },
}

impl FileKey {
    /// The key of our own descriptor `fd`.
    fn of(fd: BorrowedFd<'_>) -> Option<FileKey> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok();
        if let Some((mnt_id, ino)) = info.as_deref().and_then(mount_and_ino) {
            Some(FileKey::Mount { mnt_id, ino })
        } else {
            let st = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
            Some(FileKey::Stat {
                dev: st.st_dev,
                ino: st.st_ino,
            })
        }
    }

    /// Whether descriptor `fd` of process `pid`, which `info` describes, is on this file.
    fn matches(&self, pid: u32, fd: &str, info: &str) -> bool {
        match *self {
            FileKey::Mount { mnt_id, ino } => mount_and_ino(info) == Some((mnt_id, ino)),
            FileKey::Stat { dev, ino } => std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
                .is_ok_and(|m| m.dev() == dev && m.ino() == ino),
        }
    }
}

/// The `mnt_id` and `ino` lines of a `/proc/PID/fdinfo/N`.
fn mount_and_ino(info: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("mnt_id:")?, field("ino:")?))
}

/// A descriptor of another process, as `/proc/PID/fdinfo` describes it.
struct Descriptor {
    /// Its number, as named in `/proc/PID/fd`.
    fd: String,
    info: String,
}

impl Descriptor {
    /// Whether a lock is held through it.
    fn holds_lock(&self) -> bool {
        self.info.lines().any(|l| l.starts_with("lock:"))
    }

    /// Whether a byte-range lock on any of `len` bytes from `start` is held through it.
    fn holds_range(&self, start: u64, len: u64) -> bool {
        (self.info.lines())
            .filter_map(locked_bytes)
            .any(|bytes| overlaps(bytes, start, len))
    }
}

/// The descriptors process `pid` has open on the file `key` names; none if we may not look.
fn descriptors_on(pid: u32, key: &FileKey) -> impl Iterator<Item = Descriptor> + '_ {
    let dir = format!("/proc/{pid}/fdinfo");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(move |e| {
            let fd = e.file_name().into_string().ok()?;
            let info = std::fs::read_to_string(e.path()).ok()?;
            key.matches(pid, &fd, &info)
                .then_some(Descriptor { fd, info })
        })
}

/// How `/proc/locks` names a file: `MAJOR:MINOR:INODE`, the device numbers in hex.
fn proc_locks_key(dev: u64, ino: u64) -> String {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    format!("{major:02x}:{minor:02x}:{ino}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_range_lock_lines_of_fdinfo() {
        let ofd = "lock:\t1: OFDLCK  ADVISORY  WRITE -1 00:2a:5678 7 16";
        assert_eq!(locked_bytes(ofd), Some((7, 16)));
        let posix = "lock:\t2: POSIX  ADVISORY  READ 1234 00:2a:5678 100 EOF";
        assert_eq!(locked_bytes(posix), Some((100, u64::MAX)));
        assert_eq!(
            locked_bytes("lock:\t3: -> POSIX  ADVISORY  WRITE 9 00:2a:5678 0 0"),
            Some((0, 0))
        );
        assert_eq!(
            locked_bytes("lock:\t1: FLOCK  ADVISORY  WRITE 1 00:2a:5678 0 EOF"),
            None
        );
        assert_eq!(locked_bytes("pos:\t0"), None);
        assert_eq!(
            locked_bytes("lock:\t1: OFDLCK  ADVISORY  WRITE -1 00:2a:5678 x 7"),
            None
        );
        assert_eq!(locked_bytes("lock:\t1: OFDLCK ADVISORY WRITE -1 7 7"), None);
        // Bytes 7..=16 against ranges beside, across and inside them.
        for (start, len, want) in [
            (0, 7, false),
            (0, 8, true),
            (16, 1, true),
            (17, 1, false),
            (17, 0, false),
            (10, 0, true),
            (0, 0, true),
            (8, 2, true),
        ] {
            assert_eq!(overlaps((7, 16), start, len), want, "{start}:{len}");
        }
        assert!(overlaps((100, u64::MAX), u64::MAX - 1, 5));
        assert_eq!(
            parent_pid(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
        assert_eq!(parent_pid(u32::MAX), None);
    }

    #[test]
    fn parses_holders_and_skips_waiters() {
        let dev = nix::sys::stat::makedev(0, 0x2a);
        let text = "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 99 00:2a:5678 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 7 00:2a:5678 0 EOF\n\
                    3: FLOCK  ADVISORY  READ -1 00:2a:5678 0 EOF\n";
        let got = parse_proc_locks(text, dev, 5678, &["FLOCK"]);
        assert_eq!(
            got,
            vec![
                KernelLock {
                    pid: Some(1234),
                    exclusive: true
                },
                KernelLock {
                    pid: None,
                    exclusive: false
                }
            ]
        );
    }

    #[test]
    fn lock_holders_include_posix_and_ofd_locks() {
        let dev = nix::sys::stat::makedev(0, 0x2a);
        let text = "1: POSIX  ADVISORY  WRITE 7 00:2a:5678 10 109\n\
                    2: OFDLCK ADVISORY  READ  -1 00:2a:5678 0 EOF\n\
                    2: -> OFDLCK ADVISORY  WRITE -1 00:2a:5678 0 EOF\n\
                    3: LEASE  ACTIVE    READ  8 00:2a:5678 0 EOF\n\
                    4: POSIX  ADVISORY  WRITE 9 00:2a:1 0 EOF\n";
        let got = parse_proc_locks(text, dev, 5678, &["FLOCK", "POSIX", "OFDLCK"]);
        assert_eq!(
            got,
            vec![
                KernelLock {
                    pid: Some(7),
                    exclusive: true
                },
                KernelLock {
                    pid: None,
                    exclusive: false
                }
            ]
        );
    }
}
