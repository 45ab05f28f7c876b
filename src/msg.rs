/*!
Mailboxes: durable queued messages (`post`), synchronous messages that are never delivered once
their sender died or gave up (`send`, seed 000's SendMessage), and exactly-once receipt.

# Protocol on disk

A mailbox `B` is a directory (created if missing) whose subdirectories are the states of seed
003's messages, each step between them one `rename(2)`:

| state | place | seed 003 |
| --- | --- | --- |
| being written | `B/tmp/.UNIQ` | `w` |
| queued (done) | `B/q/NAME` | `d` |
| being received | `B/claimed/NAME~RID` | `r` |

`NAME` is `SEQ.UNIQ.FROM.KIND`: `SEQ` a 20-digit sequence number, `UNIQ` `HOST-PID-RANDOM`,
`FROM` the bus sender or `-`, `KIND` `msg` (queued) or `sync` (a synchronous send). Receivers
take the smallest `NAME`, so messages come out in enqueue order.

**post**: write the payload to `tmp/.UNIQ` (mode 0640 unless asked, less the umask), `fsync` it; take an exclusive `flock`
on `B/seq`, read `n`, write `n + 1`, rename the file to `q/NAME` with `SEQ = n + 1`, release
`seq`; `fsync` the directory `q`. A crash at any instant leaves no message or the whole one.

**receive**: register as receiver `RID` = `HOST.PID.RANDOM`: create `recv/.tmp-RID`, lock it
exclusively, rename it to `recv/RID` (so a visible registration is locked while its receiver
lives). Then (1) *recover*: every `claimed/NAME~R` whose `recv/R` is missing or unlocked belongs
to a dead receiver and is renamed back to `q/NAME`; (2) *claim* the smallest `q/NAME` by renaming
it to `claimed/NAME~RID`: of competing receivers exactly one rename succeeds, the others try the
next name; (3) for `KIND` `sync`, check the sender (below): dead, discard the message; alive,
rename it to the `msg` kind (from now on it is taken, whatever happens to the sender); (4) copy the
payload out, then unlink it and the registration. A receiver that dies before (4) finishes leaves
a claim that goes back to the queue: delivery is exactly once, except at least once for a
receiver that crashes after writing the payload out and before unlinking it.

**send** (synchronous): the sender creates and locks `senders/.tmp-UNIQ`, renames it to
`senders/UNIQ`, posts the message as `STEM.sync` (`STEM` is `NAME` without `KIND`), and waits
(change notification on `q` and `claimed`) until neither `q/STEM.sync` nor `claimed/STEM.sync~*` exists:
then a receiver converted it, and it is taken. To give up (timeout, signal), it unlinks
`q/STEM.sync`: if that succeeds the message is withdrawn, and no receiver can ever see it again;
if a receiver claimed it first, the sender waits for the conversion (or for that receiver's death,
when it renames the claim back and withdraws it). A sender that dies holds no lock any more, so
the receiver that claims its message discards it: a message whose sender died is never received.

Receivers sleep until the kernel reports a change in `q` (local file systems), re-checking every
`poll` interval where other hosts' posts cannot be seen (network file systems).
*/

use std::{
    fs::File,
    io::{self, Read, Write},
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use nix::libc;

use crate::{
    error::{Error, ErrorKind, Result},
    holder::Registration,
    mutex::DEFAULT_POLL,
    platform::{
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
        procinfo,
    },
    wait::{self, Outcome},
};

/// A mailbox directory.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("jobs");
/// let jobs = fsync::Mailbox::new(&path);
/// jobs.post(&mut &b"first"[..])?;
/// jobs.post(&mut &b"second"[..])?;
/// let mut msg = jobs.recv(None)?.expect("queued");
/// let mut text = Vec::new();
/// msg.copy_to(&mut text).unwrap();
/// msg.finish()?;
/// assert_eq!(text, b"first");
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Mailbox {
    dir: PathBuf,
    poll: Duration,
    create: bool,
    mode: u32,
}

/// Payloads are readable by their owner and group only, unless asked otherwise.
pub const DEFAULT_PAYLOAD_MODE: u32 = 0o640;

struct Layout {
    dir: PathBuf,
    tmp: PathBuf,
    q: PathBuf,
    claimed: PathBuf,
    recv: PathBuf,
    senders: PathBuf,
    seq: PathBuf,
}

impl Layout {
    fn new(dir: &Path) -> Layout {
        Layout {
            dir: dir.to_path_buf(),
            tmp: dir.join("tmp"),
            q: dir.join("q"),
            claimed: dir.join("claimed"),
            recv: dir.join("recv"),
            senders: dir.join("senders"),
            seq: dir.join("seq"),
        }
    }
}

/// A message's file name in the queue (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageName {
    pub(crate) seq: u64,
    pub(crate) uniq: String,
    pub(crate) from: Option<String>,
    pub(crate) sync: bool,
}

impl MessageName {
    pub(crate) fn parse(name: &str) -> Option<MessageName> {
        let mut parts = name.split('.');
        let seq = parts.next()?.parse().ok()?;
        let uniq = parts.next()?.to_string();
        let from = match parts.next()? {
            "-" => None,
            f => Some(f.to_string()),
        };
        let sync = match parts.next()? {
            "msg" => false,
            "sync" => true,
            _ => return None,
        };
        parts.next().is_none().then_some(MessageName {
            seq,
            uniq,
            from,
            sync,
        })
    }

    pub(crate) fn stem(&self) -> String {
        format!(
            "{:020}.{}.{}",
            self.seq,
            self.uniq,
            self.from.as_deref().unwrap_or("-")
        )
    }

    pub(crate) fn render(&self) -> String {
        format!("{}.{}", self.stem(), if self.sync { "sync" } else { "msg" })
    }
}

/// A unique `HOST-PID-RANDOM` (host made safe for file names).
fn uniq() -> String {
    let host: String = procinfo::hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut random = [0u8; 8];
    let _ = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random));
    format!(
        "{host}-{}-{:016x}",
        std::process::id(),
        u64::from_ne_bytes(random) ^ procinfo::now_micros()
    )
}

/// A queued message, as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub name: String,
    pub size: u64,
    pub age: Duration,
    pub from: Option<String>,
    /// A synchronous message whose sender waits for it.
    pub sync: bool,
}

impl Mailbox {
    /// A mailbox that is created (with its parent directory required) on first use.
    pub fn new(path: impl AsRef<Path>) -> Mailbox {
        Mailbox {
            dir: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            create: true,
            mode: DEFAULT_PAYLOAD_MODE,
        }
    }

    /// Permissions of the payload files this mailbox creates (less the umask); 0640 unless set,
    /// so that other users cannot read messages unless asked to (`--mode 0644`).
    pub fn payload_mode(mut self, mode: u32) -> Mailbox {
        self.mode = mode & 0o777;
        self
    }

    /// A mailbox that must already exist (a bus member's): posting to a missing one fails.
    pub fn existing(path: impl AsRef<Path>) -> Mailbox {
        Mailbox {
            create: false,
            ..Mailbox::new(path)
        }
    }

    pub fn poll_interval(mut self, every: Duration) -> Mailbox {
        self.poll = every;
        self
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn layout(&self) -> Result<Layout> {
        let l = Layout::new(&self.dir);
        if self.create {
            pfs::ensure_dir(&l.dir, "cannot create mailbox directory")?;
        } else if !l.dir.is_dir() {
            return Err(Error::new(&l.dir, ErrorKind::NotFound, "no such mailbox"));
        }
        for d in [&l.tmp, &l.q, &l.claimed, &l.recv, &l.senders] {
            pfs::ensure_dir(d, "cannot create mailbox directory")?;
        }
        Ok(l)
    }

    /// Queue a message durably (see the module docs); returns its name.
    pub fn post(&self, payload: &mut dyn Read) -> Result<String> {
        self.post_from(payload, None)
    }

    /// Queue a message recording who sent it (the bus).
    pub fn post_from(&self, payload: &mut dyn Read, from: Option<&str>) -> Result<String> {
        let l = self.layout()?;
        let name = MessageName {
            seq: 0,
            uniq: uniq(),
            from: from.map(str::to_string),
            sync: false,
        };
        post(&l, payload, name, self.mode)
    }

    /// Send synchronously: return `Acquired` once a receiver has taken the message; on timeout
    /// or cancellation the message is withdrawn and never delivered.
    pub fn send(&self, payload: &mut dyn Read, timeout: Option<Duration>) -> Result<Outcome<()>> {
        let l = self.layout()?;
        let name = MessageName {
            seq: 0,
            uniq: uniq(),
            from: None,
            sync: true,
        };
        let sender = Registration::create(&l.senders, &name.uniq, b"")?;
        let mut watch = DirWatch::new(&l.q).map_err(|e| Error::io(&l.q, "cannot watch", e))?;
        watch
            .add(&l.claimed)
            .map_err(|e| Error::io(&l.claimed, "cannot watch", e))?;
        let name = post(&l, payload, name, self.mode)?;
        let parsed = MessageName::parse(&name).expect("we made it");
        let stem = parsed.stem();
        let network = pfs::fs_kind_of_path(&l.q).network;
        let poll = network.then_some(self.poll);
        let outcome = wait::watch_until(timeout, poll, &watch, &l.q, || {
            Ok(matches!(send_state(&l, &name, &stem)?, SendState::Taken).then_some(()))
        })?;
        let result = match outcome {
            Outcome::Acquired(()) => Outcome::Acquired(()),
            gave_up => match withdraw(&l, &name, &stem, &watch)? {
                true => gave_up,
                false => Outcome::Acquired(()), // taken at the last moment
            },
        };
        drop(sender);
        Ok(result)
    }

    /// Take the oldest message, waiting up to `timeout` for one.
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Received>> {
        Ok(match self.recv_with(timeout)? {
            Outcome::Acquired(r) => Some(r),
            _ => None,
        })
    }

    /// Like [`recv`](Self::recv), telling a timeout from a cancellation.
    pub fn recv_with(&self, timeout: Option<Duration>) -> Result<Outcome<Received>> {
        let l = self.layout()?;
        let rid = uniq();
        let me = Registration::create(&l.recv, &rid, b"")?;
        let watch = DirWatch::new(&l.q).map_err(|e| Error::io(&l.q, "cannot watch", e))?;
        let network = pfs::fs_kind_of_path(&l.q).network;
        let mut me = Some(me);
        let poll = network.then_some(self.poll);
        wait::watch_until(timeout, poll, &watch, &l.q, || {
            Ok(try_claim(&l, &rid)?.map(|(file, claimed, from)| Received {
                file,
                claimed,
                from,
                _me: me.take().expect("once"),
            }))
        })
    }

    /// The queued messages, oldest first (synchronous ones whose sender is gone are left out).
    pub fn list(&self) -> Result<Vec<Queued>> {
        let l = Layout::new(&self.dir);
        if !l.dir.exists() {
            pfs::check_parent(&l.dir)?;
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (name, parsed) in queued_names(&l)? {
            if parsed.sync && !sender_alive(&l, &parsed.uniq) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(l.q.join(&name)) else {
                continue;
            };
            let age = meta
                .modified()
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok());
            out.push(Queued {
                name,
                size: meta.len(),
                age: age.unwrap_or_default(),
                from: parsed.from,
                sync: parsed.sync,
            });
        }
        Ok(out)
    }
}

fn post(l: &Layout, payload: &mut dyn Read, mut name: MessageName, mode: u32) -> Result<String> {
    let tmp = l.tmp.join(format!(".{}", name.uniq));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| pfs::explain_open_error(&tmp, "cannot write message", e))?;
    let _ = lock::flock(&file, Mode::Exclusive, false); // "being written", for cleaners
    let written = io::copy(payload, &mut file)
        .and_then(|_| file.sync_all())
        .map_err(|e| Error::io(&tmp, "cannot write message", e));
    if let Err(e) = written {
        let _ = crate::platform::fs::remove_file(&tmp);
        return Err(e);
    }
    let result = with_seq(l, |n| {
        name.seq = n;
        let dest = l.q.join(name.render());
        crate::platform::fs::rename(&tmp, &dest)
            .map_err(|e| pfs::explain_open_error(&dest, "cannot queue message", e))
    });
    if let Err(e) = result {
        let _ = crate::platform::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the directory is.
    File::open(&l.q)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(&l.q, "cannot flush queue", e))?;
    Ok(name.render())
}

/// Run `f` with the next sequence number, under the exclusive lock on `seq`.
fn with_seq(l: &Layout, f: impl FnOnce(u64) -> Result<()>) -> Result<()> {
    let (file, _) = pfs::open_lock_file(&l.seq)?;
    loop {
        match lock::flock(&file, Mode::Exclusive, true) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(&l.seq, "cannot lock", e)),
        }
    }
    let mut buf = [0u8; 32];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    let last: u64 = std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let next = last + 1;
    let text = format!("{next}\n");
    file.write_all_at(text.as_bytes(), 0)
        .and_then(|_| file.set_len(text.len() as u64))
        .map_err(|e| Error::io(&l.seq, "cannot write", e))?;
    f(next) // the lock goes with `file`
}

/// Is the registration `dir/id` held by a living process? Missing means no.
fn held(path: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    match lock::flock(&file, Mode::Shared, false) {
        Ok(got) => !got,
        Err(_) => true, // cannot tell: assume alive, never discard on doubt
    }
}

fn sender_alive(l: &Layout, uniq: &str) -> bool {
    held(&l.senders.join(uniq))
}

fn queued_names(l: &Layout) -> Result<Vec<(String, MessageName)>> {
    let entries = match std::fs::read_dir(&l.q) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()), // nothing posted yet
        Err(e) => return Err(Error::io(&l.q, "cannot list queue", e)),
    };
    let mut names: Vec<(String, MessageName)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let parsed = MessageName::parse(&name)?;
            Some((name, parsed))
        })
        .collect();
    names.sort_by(|a, b| (a.1.seq, &a.0).cmp(&(b.1.seq, &b.0)));
    Ok(names)
}

/// Return the claims of dead receivers to the queue.
fn recover(l: &Layout) {
    let Ok(entries) = std::fs::read_dir(&l.claimed) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(claimed) = entry.file_name().into_string() else {
            continue;
        };
        let Some((name, rid)) = claimed.rsplit_once('~') else {
            continue;
        };
        if !held(&l.recv.join(rid)) {
            let _ = crate::platform::fs::rename(entry.path(), l.q.join(name));
        }
    }
}

fn try_claim(l: &Layout, rid: &str) -> Result<Option<(File, PathBuf, Option<String>)>> {
    recover(l);
    for (name, parsed) in queued_names(l)? {
        let mut claimed = l.claimed.join(format!("{name}~{rid}"));
        match crate::platform::fs::rename(l.q.join(&name), &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // another receiver won
            Err(e) => return Err(Error::io(&l.q.join(&name), "cannot claim message", e)),
        }
        if parsed.sync {
            if !sender_alive(l, &parsed.uniq) {
                let _ = crate::platform::fs::remove_file(&claimed); // its sender died or gave up
                let _ = crate::platform::fs::remove_file(l.senders.join(&parsed.uniq));
                continue;
            }
            let taken = l.claimed.join(format!(
                "{}~{rid}",
                MessageName {
                    sync: false,
                    ..parsed.clone()
                }
                .render()
            ));
            crate::platform::fs::rename(&claimed, &taken)
                .map_err(|e| Error::io(&claimed, "cannot take message", e))?;
            claimed = taken;
        }
        let file =
            File::open(&claimed).map_err(|e| Error::io(&claimed, "cannot read message", e))?;
        return Ok(Some((file, claimed, parsed.from)));
    }
    Ok(None)
}

enum SendState {
    Queued,
    Claiming(String),
    Taken,
}

fn send_state(l: &Layout, name: &str, stem: &str) -> Result<SendState> {
    if l.q.join(name).exists() {
        return Ok(SendState::Queued);
    }
    let prefix = format!("{stem}.sync~");
    let entries =
        std::fs::read_dir(&l.claimed).map_err(|e| Error::io(&l.claimed, "cannot list", e))?;
    for entry in entries.flatten() {
        if let Some(rid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
        {
            return Ok(SendState::Claiming(rid.to_string()));
        }
    }
    Ok(SendState::Taken)
}

/// Take a synchronous message back; `true` if withdrawn, `false` if a receiver took it first.
fn withdraw(l: &Layout, name: &str, stem: &str, watch: &DirWatch) -> Result<bool> {
    loop {
        match crate::platform::fs::remove_file(l.q.join(name)) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&l.q.join(name), "cannot withdraw message", e)),
        }
        match send_state(l, name, stem)? {
            SendState::Taken => return Ok(false),
            SendState::Queued => continue,
            SendState::Claiming(rid) => {
                if !held(&l.recv.join(&rid)) {
                    let claimed = l.claimed.join(format!("{stem}.sync~{rid}"));
                    let _ = crate::platform::fs::rename(&claimed, l.q.join(name));
                    continue;
                }
                // The receiver converts it in microseconds; its death shows in no event.
                watch
                    .wait_timeout(Duration::from_millis(10))
                    .map(drop)
                    .map_err(|e| Error::io(&l.claimed, "cannot wait", e))?;
            }
        }
    }
}

/// A claimed message: read it, then [`finish`](Received::finish) to consume it. Dropped
/// unfinished, it returns to the queue.
#[must_use = "an unfinished message goes back to the queue"]
#[derive(Debug)]
pub struct Received {
    file: File,
    claimed: PathBuf,
    /// The bus member that sent it, if any.
    pub from: Option<String>,
    _me: Registration,
}

impl Received {
    /// Stream the payload to `out`.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> io::Result<u64> {
        let n = io::copy(&mut self.file, out)?;
        out.flush()?;
        Ok(n)
    }

    /// The payload in memory (for JSON output).
    pub fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.file.read_to_end(&mut buf)?;
        Ok(buf)
    }

    /// The message has been delivered: remove it for good.
    pub fn finish(self) -> Result<()> {
        crate::platform::fs::remove_file(&self.claimed)
            .map_err(|e| Error::io(&self.claimed, "cannot remove delivered message", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: Received) -> String {
        let mut r = r;
        let mut out = Vec::new();
        r.copy_to(&mut out).unwrap();
        r.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_round_trip() {
        let n = MessageName {
            seq: 7,
            uniq: "h-1-ff".into(),
            from: Some("alice".into()),
            sync: true,
        };
        assert_eq!(MessageName::parse(&n.render()), Some(n));
        assert!(MessageName::parse("junk").is_none());
    }

    #[test]
    fn fifo_and_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        for i in 0..5 {
            b.post(&mut format!("m{i}").as_bytes()).unwrap();
        }
        assert_eq!(b.list().unwrap().len(), 5);
        for i in 0..5 {
            assert_eq!(
                text(b.recv(Some(Duration::ZERO)).unwrap().unwrap()),
                format!("m{i}")
            );
        }
        assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
    }

    #[test]
    fn an_unfinished_message_returns_to_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        b.post(&mut &b"x"[..]).unwrap();
        drop(b.recv(Some(Duration::ZERO)).unwrap().unwrap()); // a receiver that "crashed"
        assert_eq!(text(b.recv(Some(Duration::ZERO)).unwrap().unwrap()), "x");
    }

    #[test]
    fn a_timed_out_send_is_withdrawn() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b"));
        let out = b
            .send(&mut &b"late"[..], Some(Duration::from_millis(20)))
            .unwrap();
        assert_eq!(out, Outcome::TimedOut);
        assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
        assert!(b.list().unwrap().is_empty());
    }
}
