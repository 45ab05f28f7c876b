/*!
Holder records: who holds a lock, kept in a small file beside it.

The lock file itself is never written (it may be someone's data, or a file other tools truncate),
so each lock `DIR/NAME` has a record file `DIR/.NAME.fsync` that only fsync creates and writes,
and only while holding the lock. It carries the fencing token, so it survives releases; `--delete`
removes it with the lock.

Format (text, one `key value` per line, `end` last so that a torn read is detected; a record
rewritten shorter than the file is padded with empty lines after `end`, which readers ignore):

```text
fsync-holder 1
fence 17
state held            (or: released)
pid 1234              (the process that took the lock)
child 1235            (the command it runs, if any)
host build-3
since 1795430012345678    (microseconds since the Unix epoch)
command make -j4
end
```

Safety in shared directories (`/tmp`): the record is opened with `O_NOFOLLOW`, must be a regular
file with one link, and is written only if it already starts with the magic line or we created it
ourselves just now; otherwise holder reporting is skipped, never forced.
*/

use std::{
    ffi::{OsStr, OsString},
    fmt::Write as _,
    fs::File,
    os::unix::fs::{FileExt, MetadataExt},
    path::{Path, PathBuf},
};

use crate::{
    platform::{
        dir::Dir,
        lock::{self, Mode},
        procinfo,
    },
    probe,
};

const MAGIC: &str = "fsync-holder 1";

/// Who holds (or last held) a lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The process that took the lock (on `host`).
    pub pid: u32,
    /// The command it runs under the lock, if any (on `host`).
    pub child: Option<u32>,
    /// The host it runs on, as its `gethostname` says.
    pub host: String,
    /// When it took the lock, in microseconds since the Unix epoch (0: unknown).
    pub since_us: u64,
    /// The work it does under the lock: its command line, or the command it runs.
    pub command: String,
}

impl Holder {
    /// This process, holding since `since_us` to run `command`.
    pub(crate) fn this_process(since_us: u64, command: String) -> Holder {
        Holder {
            pid: std::process::id(),
            child: None,
            host: procinfo::hostname(),
            since_us,
            command,
        }
    }

    /// A process of this host known only by its pid (the kernel's lock table names it), with
    /// its command line as it is now.
    pub(crate) fn local(pid: u32) -> Holder {
        Holder {
            pid,
            host: procinfo::hostname(),
            command: procinfo::cmdline(pid).unwrap_or_default(),
            ..Holder::default()
        }
    }
}

/// The content of a record file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Record {
    pub fence: u64,
    /// `Some` while held, `None` once released.
    pub holder: Option<Holder>,
}

/// `DIR/.NAME{suffix}` beside the lock `DIR/NAME`, byte for byte (a name need not be UTF-8):
/// its record (`.fsync`), a reader/writer lock's turnstile and `.writers`.
pub(crate) fn side_path(lock: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(lock.file_name().unwrap_or(OsStr::new("lock")));
    name.push(suffix);
    lock.with_file_name(name)
}

/// The record file that belongs to a lock path.
#[cfg(test)]
pub(crate) fn record_path(lock: &Path) -> PathBuf {
    side_path(lock, ".fsync")
}

/// An open record file we are allowed to write.
#[derive(Debug)]
pub(crate) struct RecordFile {
    file: File,
    dir: Dir,
    name: OsString,
    /// The file's length as we last saw or left it: a rewrite pads up to it.
    len: std::cell::Cell<u64>,
    /// What it said when we opened it.
    opened: Record,
}

/// Records are small; a read stops at this size.
const MAX_RECORD: usize = 64 * 1024;

/// The largest fence we believe from a file: far beyond any clock in microseconds (the year
/// 294,000), so that a planted `u64::MAX` can neither wrap the next token nor stop its growth.
pub(crate) const MAX_FENCE: u64 = 1 << 63;

/// The record's name for a lock named `lock_name` (any bytes, as file names are).
fn record_name(lock_name: &OsStr) -> OsString {
    let mut name = OsString::from(".");
    name.push(lock_name);
    name.push(".fsync");
    name
}

/// The lock's directory (opened) and file name, as records need them.
pub(crate) fn split(lock: &Path) -> Option<(Dir, OsString)> {
    let name = lock.file_name()?.to_os_string();
    let dir = Dir::top(crate::platform::fs::parent_dir(lock), false, "cannot open").ok()??;
    Some((dir, name))
}

impl RecordFile {
    /// Open (or create) the record of `lock` for writing; `None` where we may not or cannot
    /// (a read-only directory, a file someone else put there).
    pub(crate) fn open(lock: &Path) -> Option<RecordFile> {
        let (dir, name) = split(lock)?;
        Self::open_in(dir, &name)
    }

    /// Open (or create) the record of the lock `lock_name` in `dir`.
    pub(crate) fn open_in(dir: Dir, lock_name: &OsStr) -> Option<RecordFile> {
        Self::open_or_create(dir, lock_name, true)
    }

    /// Open the record of the lock `lock_name` in `dir` if it exists: what a process that
    /// does not hold the lock yet may do (it creates nothing).
    pub(crate) fn open_existing_in(dir: Dir, lock_name: &OsStr) -> Option<RecordFile> {
        Self::open_or_create(dir, lock_name, false)
    }

    fn open_or_create(dir: Dir, lock_name: &OsStr, create: bool) -> Option<RecordFile> {
        let name = record_name(lock_name);
        // Usually the record exists already (it outlives releases): open it first.
        let (file, len, opened) = match dir.open_stat(&name, true) {
            Ok(Some((f, st))) => Self::check(&dir, &name, f, &st)?,
            Ok(None) if !create => return None,
            Ok(None) => match dir.create_new(&name, 0o644) {
                Ok(f) => {
                    let fresh = format!("{MAGIC}\nend\n");
                    let _ = f.write_all_at(fresh.as_bytes(), 0);
                    (f, fresh.len() as u64, Record::default())
                }
                // Created by another fsync a moment ago (it has since given the lock up), or
                // not ours to create (a read-only directory): take it if it is there now.
                Err(_) => {
                    let (f, st) = dir.open_stat(&name, true).ok()??;
                    Self::check(&dir, &name, f, &st)?
                }
            },
            Err(_) => return None,
        };
        Some(RecordFile {
            file,
            dir,
            name,
            len: std::cell::Cell::new(len),
            opened,
        })
    }

    /// Accept an existing record file (`st` its status) only if it is ours to write: a
    /// regular file reachable by no other name ([`Dir::sole_link`]), owned by us (we never
    /// write into another user's file: a record names our command line), that starts with the
    /// magic line or is empty (its
    /// creator died before writing it). Returns it with its length and what it says, read
    /// once (each read is a round trip to the server on a network file system).
    fn check(
        dir: &Dir,
        name: &OsStr,
        f: File,
        st: &nix::sys::stat::FileStat,
    ) -> Option<(File, u64, Record)> {
        if st.st_uid != nix::unistd::geteuid().as_raw()
            || !dir.sole_link(name, &f, Some(st)).ok()?
        {
            return None;
        }
        let head = read_head(&f).ok()?;
        if !head.is_empty() && !head.starts_with(MAGIC.as_bytes()) {
            return None;
        }
        let opened = String::from_utf8(head)
            .ok()
            .and_then(|t| parse(&t))
            .unwrap_or_default();
        Some((f, st.st_size as u64, opened))
    }

    /// Whether the file still has a name (a holder deleting its lock removes its record).
    pub(crate) fn linked(&self) -> bool {
        self.file.metadata().is_ok_and(|m| m.nlink() > 0)
    }

    /// What the record said when it was opened.
    pub(crate) fn opened(&self) -> &Record {
        &self.opened
    }

    /// Read the record; for the lock holder, the only writer, so one read is enough.
    pub(crate) fn read(&self) -> Record {
        read_head(&self.file)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| parse(&t))
            .unwrap_or_default()
    }

    pub(crate) fn write(&self, rec: &Record) {
        let mut text = render(rec);
        // Readers stop at `end`; a shorter record is padded with empty lines to the length
        // the file has, instead of truncating it: one write, where a truncation would be a
        // second round trip to the server on a network file system.
        let old_len = self.len.get() as usize;
        if text.len() < old_len && old_len <= MAX_RECORD {
            text.push_str(&"\n".repeat(old_len - text.len()));
        }
        let new_len = text.len() as u64;
        // Best effort: a failure to report the holder must not fail the lock.
        match self.file.write_all_at(text.as_bytes(), 0) {
            Ok(()) if new_len >= self.len.get() => self.len.set(new_len),
            Ok(()) => {
                if self.file.set_len(new_len).is_ok() {
                    self.len.set(new_len);
                }
            }
            // Part of it may have been written: the file is at least that long.
            Err(_) => self.len.set(self.len.get().max(new_len)),
        }
    }

    /// Remove the record (with its lock, `--delete`).
    pub(crate) fn remove(self) {
        let _ = self.dir.unlink_file(&self.name);
    }

    /// Remove the record if its name still names this file.
    fn remove_if_named(self) {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = self.file.metadata() else {
            return;
        };
        if self
            .dir
            .stat(&self.name)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (meta.dev(), meta.ino()))
        {
            let _ = self.dir.unlink_file(&self.name);
        }
    }
}

/// A holder's own record of its lock: who holds it (this process, and the command it runs
/// under the lock), written to the record file, where there is one, at every change.
#[derive(Debug)]
pub(crate) struct OwnRecord {
    file: Option<RecordFile>,
    fence: u64,
    /// Behind a lock so that [`set_child`](Self::set_child) takes the record shared.
    holder: std::sync::Mutex<Holder>,
}

impl OwnRecord {
    /// Start holding: record `holder` with `fence` in `file`.
    pub(crate) fn held(file: Option<RecordFile>, fence: u64, holder: Holder) -> OwnRecord {
        let record = OwnRecord {
            file,
            fence,
            holder: std::sync::Mutex::new(holder),
        };
        record.write(true);
        record
    }

    /// A holding that keeps no record (one an ancestor's lock satisfied).
    pub(crate) fn none(fence: u64) -> OwnRecord {
        OwnRecord {
            file: None,
            fence,
            holder: std::sync::Mutex::default(),
        }
    }

    pub(crate) fn fence(&self) -> u64 {
        self.fence
    }

    /// Record the command that runs under the lock: with `None` just before it starts, so
    /// that reports never show a running command as ours; then again with its pid.
    /// A record that says so already is not written again (a round trip on a network file
    /// system, before the command can start).
    pub(crate) fn set_child(&self, pid: Option<u32>, command: String) {
        let mut holder = crate::guard::lock_ignoring_poison(&self.holder);
        if holder.child == pid && holder.command == command {
            return;
        }
        holder.child = pid;
        holder.command = command;
        self.write_as(true, &holder);
    }

    /// Record the release (the fence stays for the next holder).
    pub(crate) fn released(&self) {
        self.write(false);
    }

    /// Remove the record file (with its lock, which is being deleted).
    pub(crate) fn remove(&mut self) {
        if let Some(file) = self.file.take() {
            file.remove();
        }
    }

    /// Remove the record file if it is still as we left it (our holding, our fence): for a
    /// holder whose lock file was deleted under it, which is no longer the record's writer.
    pub(crate) fn remove_if_unchanged(&mut self) {
        let Some(file) = self.file.take() else { return };
        let rec = file.read();
        let ours =
            rec.fence == self.fence && rec.holder.as_ref().map(|h| h.pid) == Some(self.pid());
        if ours {
            file.remove_if_named();
        }
    }

    fn pid(&self) -> u32 {
        crate::guard::lock_ignoring_poison(&self.holder).pid
    }

    fn write(&self, held: bool) {
        self.write_as(held, &crate::guard::lock_ignoring_poison(&self.holder));
    }

    fn write_as(&self, held: bool, holder: &Holder) {
        if let Some(file) = &self.file {
            file.write(&Record {
                fence: self.fence,
                holder: held.then(|| holder.clone()),
            });
        }
    }
}

/// The start of a file, up to [`MAX_RECORD`] bytes, read with `pread` (the file position may
/// be shared with other processes). One call for a record of the usual size.
fn read_head(file: &File) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 1024];
    let mut n = 0;
    loop {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if n < buf.len() {
                    break; // a short read of a regular file: its end
                }
                if n >= MAX_RECORD {
                    break;
                }
                buf.resize((n * 4).min(MAX_RECORD), 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

mod registration;
pub(crate) use registration::{Found, Registration};

/// Read the record of the lock `lock_name` in `dir`, believing only what its owner could
/// know: a holder on this host must be a process of the record's owner (another user could
/// otherwise plant a record that names, say, root's pid for a status report to aim a kill
/// at), unless the record is the caller's or root's.
pub(crate) fn read_in(dir: &Dir, lock_name: &OsStr) -> Option<Record> {
    let file = dir.open(record_name(lock_name), false).ok()??;
    read_believed(&file)
}

/// The fencing token in the record of the lock `lock_name` in `dir`, if the record may be
/// believed about tokens: a regular file with one link, owned by the caller or root (0
/// otherwise). Another user's record could name any token (see [`crate::fence`]).
pub(crate) fn trusted_fence_in(dir: &Dir, lock_name: &OsStr) -> u64 {
    match dir.open_stat(record_name(lock_name), false) {
        Ok(Some((f, st))) if st.st_nlink == 1 && crate::platform::dir::trusted_owner(st.st_uid) => {
            read_from(&f).map_or(0, |r| r.fence)
        }
        _ => 0,
    }
}

/// A record file as a status report reads it: what it says, believed as [`read_in`] believes
/// it (`None`: torn, not a record, or more than one link), and whether its fencing token may
/// be believed, which depends on its owner and its links (as [`trusted_fence_in`] decides).
#[derive(Debug)]
pub(crate) struct Looked {
    pub record: Option<Record>,
    /// The file's owner.
    pub uid: u32,
    /// Whether the file has one link.
    pub one_link: bool,
}

/// The record file of the lock `lock_name` in `dir`, read as a status report reads it; `None`
/// if there is none (or it is no regular file).
pub(crate) fn look_in(dir: &Dir, lock_name: &OsStr) -> Option<Looked> {
    let (file, st) = dir.open_stat(record_name(lock_name), false).ok()??;
    Some(Looked {
        record: read_believed(&file),
        uid: st.st_uid,
        one_link: st.st_nlink == 1,
    })
}

/// Who holds a lock, for a status report, the kernel's lock table believed over the holder
/// record: the record's holder `recorded` where the table bears it out (it lists that process,
/// or names nobody: a network file system, where only a record of this host must name a live
/// process); otherwise the process the table lists (`listed`, of the lock file `file`), with
/// its command line as it is now, or one that inherited the lock from it if it exited (a daemon
/// a locked command left). The second holder is the record's where the table contradicts it
/// (another process holds the lock: a record another user planted, or one of another host on
/// a local file); a record of this host whose processes are all dead is merely stale, and
/// neither.
pub(crate) fn kernel_over_record(
    recorded: Option<Holder>,
    listed: Option<&probe::Listed>,
    file: &File,
) -> (Option<Holder>, Option<Holder>) {
    let kernel_pids: Vec<u32> = (listed.iter())
        .flat_map(|l| l.locks.iter().filter_map(|k| k.pid))
        .collect();
    let host = procinfo::hostname();
    let mut untrusted = None;
    let believed = recorded.filter(|h| {
        let local = h.host == host;
        let alive =
            local && (procinfo::pid_alive(h.pid) || h.child.is_some_and(procinfo::pid_alive));
        if kernel_pids.is_empty() {
            return !local || alive;
        }
        let listed = |pid: u32| kernel_pids.contains(&pid);
        if local && (listed(h.pid) || h.child.is_some_and(listed)) {
            return alive;
        }
        if !local || alive {
            untrusted = Some(h.clone());
        }
        false
    });
    let holder = believed.or_else(|| {
        let first = listed.and_then(probe::Listed::first_pid);
        let pid = match listed {
            Some(_) => procinfo::live_lock_holder(std::os::fd::AsFd::as_fd(file), first).or(first),
            None => first,
        };
        pid.map(Holder::local)
    });
    (holder, untrusted)
}

/// Read a record from an open file (a bus participant's `owner`), believing only what its
/// owner could know, as [`read_in`] does.
pub(crate) fn read_believed(file: &File) -> Option<Record> {
    let meta = file.metadata().ok()?;
    if meta.nlink() != 1 {
        return None;
    }
    let mut rec = read_from(file)?;
    if !crate::platform::dir::trusted_owner(meta.uid()) {
        let local = crate::platform::procinfo::hostname();
        let owner_runs = |pid: u32| crate::platform::procinfo::pid_uid(pid) == Some(meta.uid());
        if let Some(h) = &rec.holder
            && h.host == local
            && !owner_runs(h.pid)
            && !h.child.is_some_and(owner_runs)
        {
            rec.holder = None;
        }
    }
    Some(rec)
}

/// Read a record from an open file.
///
/// The holder rewrites its record in place (one `pwrite`, padded), so a read can catch it
/// half-way: a record counts only when two reads in a row agree and parse (a writer preempted
/// half-way through its copy can leave two reads the same torn text), and parsing stops at the
/// first `end` line (a shorter record written over a longer one leaves a stale tail).
pub(crate) fn read_from(file: &File) -> Option<Record> {
    // Only what comes before the first `end` line counts (a stale tail may be anything).
    let read = || {
        let mut bytes = read_head(file).ok()?;
        if let Some(i) = bytes.windows(5).position(|w| w == b"\nend\n") {
            bytes.truncate(i + 5);
        }
        String::from_utf8(bytes).ok()
    };
    let mut last = read()?;
    for _ in 0..5 {
        let again = read()?;
        if again == last
            && let Some(rec) = parse(&again)
        {
            return Some(rec);
        }
        last = again;
    }
    None
}

/// The longest command line a record keeps, so that a record stays well inside [`MAX_RECORD`].
const MAX_COMMAND: usize = 16 * 1024;

pub(crate) fn truncated(s: &str) -> &str {
    let mut end = s.len().min(MAX_COMMAND);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The record as text (the format in the module docs).
pub(crate) fn render(rec: &Record) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{MAGIC}\nfence {}", rec.fence);
    match &rec.holder {
        None => out.push_str("state released\n"),
        Some(h) => {
            let _ = writeln!(out, "state held\npid {}", h.pid);
            if let Some(c) = h.child {
                let _ = writeln!(out, "child {c}");
            }
            let one_line = |s: &str| s.replace(['\n', '\r'], " ");
            let _ = writeln!(out, "host {}\nsince {}", one_line(&h.host), h.since_us);
            let _ = writeln!(out, "command {}", one_line(truncated(&h.command)));
        }
    }
    out.push_str("end\n");
    out
}

/// Parse a record; `None` if it is not one or is torn.
pub(crate) fn parse(text: &str) -> Option<Record> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let lines: Vec<&str> = lines.collect();
    let end = lines.iter().position(|&l| l == "end")?;
    let lines = &lines[..end];
    let mut rec = Record::default();
    let mut holder = Holder::default();
    let mut held = false;
    for line in lines.iter().copied() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            // A fence beyond MAX_FENCE is not one fsync handed out: read it as none.
            "fence" => rec.fence = value.parse().ok().filter(|&f| f < MAX_FENCE).unwrap_or(0),
            "state" => held = value == "held",
            "pid" => holder.pid = value.parse().ok()?,
            "child" => holder.child = value.parse().ok(),
            "host" => holder.host = value.to_string(),
            "since" => holder.since_us = value.parse().ok()?,
            "command" => holder.command = value.to_string(),
            _ => {}
        }
    }
    // A holder without a pid is no holder (pid 0 would name our own process group).
    rec.holder = (held && holder.pid > 0).then_some(holder);
    Some(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record rewritten shorter is padded to the file's length, not truncated (one write, no
    /// second round trip), and reads back as the shorter record; a file longer than any record
    /// (not one fsync wrote so) is cut to the record. (Mutants answered: padding skipped, or
    /// never cutting, changed the file's length.)
    #[test]
    fn a_shorter_record_is_padded_and_an_overlong_file_cut() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("L");
        let len = || {
            std::fs::metadata(dir.path().join(".L.fsync"))
                .unwrap()
                .len()
        };
        let with = |command: &str| Record {
            fence: 9,
            holder: Some(Holder {
                command: command.into(),
                ..Holder::this_process(1, String::new())
            }),
        };
        let file = RecordFile::open(&lock).unwrap();
        file.write(&with(&"x".repeat(500)));
        let long = len();
        file.write(&with("short"));
        assert_eq!(
            len(),
            long,
            "the record was not padded to the file's length"
        );
        assert_eq!(file.read(), with("short"));
        drop(file);
        let overlong = format!("{MAGIC}\nend\n{}", "\n".repeat(MAX_RECORD * 2));
        std::fs::write(dir.path().join(".L.fsync"), overlong).unwrap();
        let file = RecordFile::open(&lock).unwrap();
        file.write(&with("short"));
        assert_eq!(
            len(),
            render(&with("short")).len() as u64,
            "not cut to the record"
        );
        assert_eq!(file.read(), with("short"));
    }

    #[test]
    fn record_round_trips_and_torn_records_are_rejected() {
        let rec = Record {
            fence: 42,
            holder: Some(Holder {
                pid: 7,
                child: Some(8),
                host: "h".into(),
                since_us: 99,
                command: "echo a\nb".into(),
            }),
        };
        let text = render(&rec);
        let back = parse(&text).unwrap();
        assert_eq!(back.fence, 42);
        assert_eq!(back.holder.as_ref().unwrap().command, "echo a b");
        assert!(parse(&text[..text.len() - 2]).is_none());
        assert_eq!(
            record_path(Path::new("/a/b.lck")),
            Path::new("/a/.b.lck.fsync")
        );
    }

    /// The calling thread's count of read or write calls (`syscr`, `syscw` in its `/proc`
    /// io counters): the calls `f` makes.
    fn calls_of(counter: &str, f: impl FnOnce()) -> u64 {
        crate::test_support::thread_count("io", counter, f).0
    }

    /// A record of the usual size is read in one call; a long one in a few, the buffer growing
    /// fourfold each time. (Mutants answered: the end of a short read not taken for the
    /// file's, the buffer growing by 4 bytes.)
    #[test]
    fn a_record_is_read_in_one_call_and_a_long_one_in_a_few() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        for (len, calls) in [(200, 1), (60_000, 4)] {
            std::fs::write(&path, "x".repeat(len)).unwrap();
            let file = File::open(&path).unwrap();
            let mut read = Vec::new();
            let made = calls_of("syscr:", || read = read_head(&file).unwrap());
            assert_eq!((read.len(), made), (len, calls), "{len} bytes");
        }
    }

    /// A token at or past 2^63 is none fsync handed out: it reads as none (0); one below it is
    /// kept. (Mutant answered: `<` made `<=`.)
    #[test]
    fn a_token_past_the_last_fsync_hands_out_reads_as_none() {
        let fence = |f: u64| {
            let text = format!("{MAGIC}\nfence {f}\nstate released\nend\n");
            parse(&text).unwrap().fence
        };
        assert_eq!(fence(MAX_FENCE - 1), MAX_FENCE - 1);
        assert_eq!(fence(MAX_FENCE), 0);
    }

    /// The command a holder runs is recorded, with its pid, once: asked again to record what
    /// the record says already, it writes nothing. (Mutants answered: `set_child` made a no-op,
    /// its check of what the record says made to skip a change or to write what is there.)
    #[test]
    fn a_child_is_recorded_once() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("L");
        let file = RecordFile::open(&lock);
        let own = OwnRecord::held(file, 5, Holder::this_process(1, "make".into()));
        let read = || {
            let h = read_in(
                &Dir::top(dir.path(), false, "x").unwrap().unwrap(),
                "L".as_ref(),
            );
            h.and_then(|r| r.holder).map(|h| (h.child, h.command))
        };
        for (child, command, writes) in [
            (None, "make", 0),
            (None, "make all", 1),
            (Some(7), "make all", 1),
            (Some(7), "make all", 0),
            (Some(8), "make all", 1),
        ] {
            let made = calls_of("syscw:", || own.set_child(child, command.to_string()));
            assert_eq!(
                read(),
                Some((child, command.to_string())),
                "{child:?} {command}"
            );
            assert_eq!(made, writes, "{child:?} {command}");
        }
    }

    /// A holder whose lock file was deleted under it removes the record on release only if it
    /// is still as it left it: its token and its pid. (Mutants answered: the removal made a
    /// no-op, either check dropped or inverted, the pid made a constant.)
    #[test]
    fn a_record_is_removed_only_if_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("L");
        let path = record_path(&lock);
        let me = std::process::id();
        let other = |fence: u64, pid: u32| Record {
            fence,
            holder: Some(Holder {
                pid,
                ..Holder::this_process(1, String::new())
            }),
        };
        for (rewritten, removed) in [
            (None, true),
            (Some(other(6, me)), false),
            (Some(other(5, me + 1)), false),
            (Some(other(6, me + 1)), false),
        ] {
            let file = RecordFile::open(&lock);
            let mut own = OwnRecord::held(file, 5, Holder::this_process(1, "x".into()));
            if let Some(rec) = &rewritten {
                std::fs::write(&path, render(rec)).unwrap();
            }
            own.remove_if_unchanged();
            assert_eq!(!path.exists(), removed, "{rewritten:?}");
            let _ = std::fs::remove_file(&path);
        }
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let lock = dir.path().join("l");
        std::os::unix::fs::symlink(&victim, record_path(&lock)).unwrap();
        assert!(RecordFile::open(&lock).is_none());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }
}
