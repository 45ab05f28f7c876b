/*!
The message bus: named participants on a shared directory, made safe. The design is that of a
(Russian) article on a message bus between BlackBox processes on the machines of a local
network, through a shared network directory.

# Protocol on disk

A bus `B` is a directory (created if missing). A participant `NAME` is connected while the
directory `B/NAME` exists; `connect` creates it (first removing a hidden `B/.NAME` an earlier
`disconnect` left), `disconnect` hides it by renaming it to `B/.NAME` (as in the article).

## Names on disk

A name ([`check_name`]) is 1 to [`MAX_NAME_BYTES`] bytes of UTF-8: letters of any alphabet,
digits, `_`, `-` and `.`, with `.` neither first nor last (a file server for Windows clients
drops a final dot), and not beginning with `fsync.` in any case. The entries of `B` are then
told apart by their first two characters alone, whatever a name holds:

| entry of `B` | what it is |
| --- | --- |
| `NAME` (no leading `.`) | a connected participant |
| `.NAME` (`.` and then no `.`, not `.fsync.`) | a participant hidden by `disconnect` |
| `..NAME.new` (two dots) | a held participant being made (connect_held, step 2) |
| `.fsync.lock` (and any `.fsync.*`) | the bus lock |

A dot inside a name is never read as a separator: no two participants share any of these
entries (`a.new` is hidden as `.a.new`; `a` is made as `..a.new`), and fsync keeps `fsync.*`
for itself so that no hidden participant is its lock, also on a file system that ignores case.
Names are compared byte for byte, as the file system stores them; on one that ignores case (or
normalises Unicode) names that it takes for the same are one participant.

The sender's name is part of every message's file name in the receiver's mailbox
(`SEQ.UNIQ.FROM.KIND`, [`crate::msg`]): `FROM` is what lies between the second dot and the last,
which no `SEQ`, `UNIQ` or `KIND` contains, so a dotted sender is read back whole. The longest
file name a name takes part in is a message from it being received,
`claimed/SEQ.UNIQ.FROM.sync~RID` (`UNIQ` and `RID` at most 57 bytes each): with a name of
[`MAX_NAME_BYTES`], 242 bytes, within the 255 file systems allow.

(fsync 0.1 made a held participant as `.NAME.new`, which with dots allowed could be the hidden
`.NAME` of the participant `NAME.new`; such a leftover of a crash is now taken for that hidden
participant, and removed when `NAME.new` next connects.)

Each participant's directory is a mailbox ([`crate::msg`]), which keeps the article's three states
of a message, moved between by rename, with unique names (`tmp/` being written, `q/` done,
`claimed/` being received) and closes its gaps: a message is visible to the receiver only once
complete and flushed, each is received exactly once in the order queued, and a receiver's crash
returns the message it was reading to the queue. A message's name records its sender (`FROM`).

`send` posts into `B/TO`; when `TO` is not connected the post fails (the rename into a missing
directory cannot succeed, even if `TO` disconnects mid-way). `broadcast` posts one copy into every
connected participant's mailbox but the sender's.

## Owned names

A participant connected by a holder ([`Bus::connect_held`], `fsync bus connect --hold`) has an
*owner file* `B/NAME/owner`: the holder keeps an exclusive `flock` on it for as long as it is
connected, and writes its holder record into it (the format of [`crate::holder`]: pid, the
command's pid, host, since, command). A participant is in one of three states
([`ParticipantState`]):

| `B/NAME/owner` | state | meaning |
| --- | --- | --- |
| missing | connected | a plain connection: it lasts until `disconnect` |
| locked | held | its holder, or a process the holder passed the lock down to, lives |
| not locked | stale | its holder died without disconnecting: the name stays, its messages wait |

Readers (`members`, `send`, `broadcast`) tell locked from not locked with a non-blocking
**shared** `flock` released at once: only owners lock exclusively, so readers never exclude one
another, and they never change anything.

Every change of a participant's state (connect, a takeover, disconnect) happens under the
**bus lock**, an exclusive `flock` on `B/.fsync.lock` held for a moment. Its name, like
`..NAME.new`, is never a participant or a hidden participant (*Names on disk*); `.owner.new`
is inside a participant's directory, beside its mailbox.

1. **connect** (plain), under the bus lock: `B/NAME` missing: remove `B/.NAME` (messages left
   for an earlier participant of the name are discarded) and create `B/NAME`. Connected
   already: nothing. Held: refuse. Stale: unlink `owner` (a takeover: the name is plainly
   connected from now on, and keeps its queued messages).
2. **connect_held**, under the bus lock: held, or plainly connected: refuse. `B/NAME` missing:
   remove `B/.NAME` and whatever a crashed connect left at `B/..NAME.new`; create the directory
   `B/..NAME.new`, its owner file (step 4), and rename it to `B/NAME`, so the participant appears
   held in one step. Stale (a takeover, keeping the queued messages): remove a leftover
   `B/NAME/.owner.new`, create it as the owner file (step 4) and rename it over `owner`.
3. The holder **passes the lock down** to the command it runs (unless `--close`), as the mutex
   does: its descriptor of `owner` survives `exec`, so the name stays held while the command,
   or anything it left running with the descriptor, runs, even if the holder is killed.
4. **An owner file** is created exclusively (`O_EXCL`, `O_NOFOLLOW`, mode 0644 less the umask),
   locked exclusively without waiting (nobody else can have it open yet), and given the
   holder's record, before it is renamed into place: a visible owner file is locked while its
   holder lives, and one that is not locked belongs to a holder that died.
5. **The holder disconnects** when its command has exited (or its [`Connection`] is dropped),
   through the descriptor of `B` it opened to connect, never by the path `B` again (a network
   file system's server may have gone meanwhile, and a path lookup would wait on it; a `B`
   renamed or replaced meanwhile is not another bus's business), under the bus lock: if `B/NAME/owner` is still the file it created (device and inode) and no
   other process shares its open file description (one it passed the lock down to, still
   running), it hides `B/NAME` as `B/.NAME`, as `disconnect` does; otherwise it changes
   nothing (the name stays held by that process, and is stale once it exits). Then it closes
   the owner file.
6. **disconnect** (plain), under the bus lock: refused while held; a connected or stale name is
   hidden as `B/.NAME`.
7. **send** to a stale participant fails, as to one not connected; **broadcast** skips stale
   participants. A holder that dies between that check and the post leaves the message queued
   for the next holder of the name.

Of any number of processes that find a name stale and take it over at once, exactly one does:
each holds the bus lock from its look at `owner` to its rename, so the others find it held.
*/

use std::{
    fs::File,
    io::{self, Read},
    os::unix::fs::{FileExt, MetadataExt},
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::{self, Holder, Record},
    msg::{Mailbox, Received},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        lock::{self, Mode},
        procinfo,
    },
    probe,
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

/// The owner file of a held participant, in its directory.
const OWNER: &str = "owner";
/// An owner file being made, in the participant's directory.
const OWNER_NEW: &str = ".owner.new";
/// The bus lock, in the bus directory.
const BUS_LOCK: &str = ".fsync.lock";

/// A bus directory: participants connect under a name, send each other messages (or
/// broadcast to all), and receive their own, each from its own [`Mailbox`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("bus");
/// let bus = fsync::Bus::new(&path);
/// bus.connect("alice")?;
/// bus.connect("bob")?;
/// bus.send("alice", "bob", &b"hi"[..])?;
/// let mut msg = bus.recv("bob", None)?.expect("one message");
/// assert_eq!(msg.from.as_deref(), Some("alice"));
/// let mut text = String::new();
/// std::io::Read::read_to_string(&mut msg, &mut text).unwrap();
/// assert_eq!(text, "hi");
/// msg.finish()?;
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Bus {
    dir: PathBuf,
    poll: Duration,
    /// How long a verb waits for the locks others hold for a moment (`None`: for ever).
    lock_timeout: Option<Duration>,
}

mod names;
pub use names::{MAX_NAME_BYTES, check_name};

/// The state of a connected participant (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParticipantState {
    /// Connected without a holder ([`Bus::connect`]): until someone disconnects it.
    Connected,
    /// Connected by a holder that lives ([`Bus::connect_held`]): nobody else can connect or
    /// disconnect it. Also a participant whose owner file cannot be read or tested (another
    /// user's, or not a file fsync made): in doubt, it counts as held.
    Held,
    /// Connected by a holder that died without disconnecting: still connected, but messages
    /// are not sent to it; the next [`connect`](Bus::connect) or
    /// [`connect_held`](Bus::connect_held) takes the name over, with its queued messages.
    Stale,
}

/// A connected participant, as [`Bus::participants`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// Its name.
    pub name: String,
    /// Whether it is held, and whether its holder lives.
    pub state: ParticipantState,
    /// Who holds it ([`ParticipantState::Held`]) or held it ([`ParticipantState::Stale`]), as
    /// its owner file records it; `None` for a plain connection, and where the record cannot
    /// be read or believed (another user's record naming a process not theirs). Where the
    /// holder and its command have exited on this host but a process they left running still
    /// holds the name, that process is named as `child`.
    pub holder: Option<Holder>,
}

/// What a connection found ([`Bus::connect`], [`Connection::how`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Connected {
    /// The name was not connected: it is now.
    New,
    /// The name was connected already, without a holder: nothing changed.
    Already,
    /// The name was stale: its holder (as far as its record tells) had died. It is ours now,
    /// with the messages queued for it.
    TookOver {
        /// The holder that died, where its record can be read and believed.
        holder: Option<Holder>,
    },
}

/// What a participant's owner file says, read without the bus lock.
enum Owner {
    /// No owner file: a plain connection.
    None,
    /// Locked: its holder lives. The file, open for reading.
    Held(File),
    /// Not locked: its holder died.
    Dead(File),
}

impl Bus {
    /// The bus at the directory `path`, which is created on first connection. Touches nothing
    /// until then.
    pub fn new(path: impl AsRef<Path>) -> Bus {
        Bus {
            dir: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            lock_timeout: None,
        }
    }

    /// [`connect`](Self::connect), [`connect_held`](Self::connect_held),
    /// [`disconnect`](Self::disconnect), [`send`](Self::send) and
    /// [`broadcast`](Self::broadcast) wait at most `timeout` in all for the locks they take
    /// for a moment (the bus lock, a receiver's numbering lock:
    /// [`Mailbox::lock_timeout`]); by default as long as another process holds them, which
    /// another user sharing the bus can make for ever. One that gives up changes nothing and
    /// fails with [`ErrorKind::TimedOut`]; a broadcast leaves out the receivers it could not
    /// reach in time.
    pub fn lock_timeout(mut self, timeout: Duration) -> Bus {
        self.lock_timeout = Some(timeout);
        self
    }

    /// The deadline of a verb's short waits, fixed as it starts.
    fn deadline(&self) -> Deadline {
        Deadline::after(self.lock_timeout)
    }

    /// A receiver's mailbox, posting within `deadline`.
    fn posting(&self, member: Dir, deadline: Deadline) -> Mailbox {
        let mailbox = Mailbox::in_dir(member).poll_interval(self.poll);
        match deadline.remaining() {
            Some(left) => mailbox.lock_timeout(left),
            None => mailbox,
        }
    }

    /// How often a receiver re-checks on a network file system, where change notification
    /// cannot see other hosts' messages ([`crate::wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Bus {
        self.poll = every;
        self
    }

    /// The bus directory, as given.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The bus directory, opened (see [`crate::platform::dir`]: another user may have made it
    /// and put links in it); `None` if it does not exist.
    /// The bus's directory, if it exists.
    fn top(&self) -> Result<Option<Dir>> {
        Dir::top(&self.dir, false, "cannot create bus directory")
    }

    /// The bus's directory, made if missing.
    fn made_top(&self) -> Result<Dir> {
        Dir::create_top(&self.dir, "cannot create bus directory")
    }

    fn check(&self, name: &str) -> Result<()> {
        check_name(name).map_err(|why| Error::new(&self.dir, ErrorKind::Invalid, why.to_string()))
    }

    fn mailbox(&self, name: &str, role: &str) -> Result<Mailbox> {
        Ok(Mailbox::in_dir(self.member(name, role)?).poll_interval(self.poll))
    }

    /// The directory of the connected participant `name`.
    fn member(&self, name: &str, role: &str) -> Result<Dir> {
        self.check(name)?;
        let not_connected = || {
            Error::new(
                &self.dir,
                ErrorKind::NotConnected,
                format!("{role} '{name}' is not connected to this bus"),
            )
        };
        let top = self.top()?.ok_or_else(not_connected)?;
        top.open_sub(name)?.ok_or_else(not_connected)
    }

    /// The exclusive lock under which participants change state (module docs), waited for in
    /// the kernel. A cancellation signal while waiting gives an error
    /// ([`wait::cancelled`] names the signal).
    fn lock(&self, top: &Dir, deadline: Deadline) -> Result<File> {
        let shown = top.join(BUS_LOCK);
        let file = top.open_or_create(BUS_LOCK)?;
        let spec = Wait {
            deadline,
            poll: pfs::fs_kind(&file).network.then_some(self.poll),
            progress: None,
        };
        match wait::flock(spec, |_| {}, &file, Mode::Exclusive, &shown)? {
            Outcome::Acquired(()) => Ok(file),
            Outcome::TimedOut => Err(Error::new(
                &shown,
                ErrorKind::TimedOut,
                "gave up waiting for the bus lock, which another process holds: nothing was \
                 changed",
            )),
            Outcome::Interrupted(_) => Err(Error::io(
                &shown,
                "interrupted while waiting for the bus lock",
                io::Error::from_raw_os_error(nix::libc::EINTR),
            )),
        }
    }

    /// Connect the participant `name` (creating the bus if missing) until someone disconnects
    /// it. Connecting a name that is connected already changes nothing
    /// ([`Connected::Already`]); a stale name (its holder died) is taken over
    /// ([`Connected::TookOver`]), keeping its queued messages. Messages left for an earlier,
    /// disconnected, participant of that name are discarded.
    ///
    /// Waits only for the bus lock, which others hold for a moment; a cancellation signal
    /// ([`wait::install_cancel_handlers`]) while waiting gives an error, and
    /// [`wait::cancelled`] names the signal. Errors: [`ErrorKind::Unavailable`] if a living
    /// holder has the name ([`connect_held`](Self::connect_held)), naming it;
    /// [`ErrorKind::Invalid`] for a name [`check_name`] refuses;
    /// [`ErrorKind::NotFound`] for an entry of the bus that is not what fsync makes there (a
    /// link, a FIFO).
    ///
    /// ```
    /// use fsync::bus::Connected;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let bus = fsync::Bus::new(dir.path().join("bus"));
    /// assert_eq!(bus.connect("alice")?, Connected::New);
    /// assert_eq!(bus.connect("alice")?, Connected::Already); // fine for scripts
    /// let held = bus.connect_held("bob")?;
    /// let refused = bus.connect("bob").unwrap_err();
    /// assert_eq!(refused.kind(), fsync::ErrorKind::Unavailable);
    /// assert!(refused.to_string().contains("already connected by pid"), "{refused}");
    /// # drop(held);
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn connect(&self, name: &str) -> Result<Connected> {
        self.check(name)?;
        let top = self.made_top()?;
        let _serial = self.lock(&top, self.deadline())?;
        let Some(member) = top.open_sub(name)? else {
            remove_hidden(&top, name)?;
            top.create_sub(name)?;
            return Ok(Connected::New);
        };
        match owner(&member)? {
            Owner::None => Ok(Connected::Already),
            Owner::Held(file) => Err(self.held_error(name, &file, "")),
            Owner::Dead(file) => {
                let holder = holder::read_believed(&file).and_then(|r| r.holder);
                member
                    .unlink_file(OWNER)
                    .map_err(|e| Error::io(&member.join(OWNER), "cannot take over", e))?;
                Ok(Connected::TookOver { holder })
            }
        }
    }

    /// Connect `name` for as long as the returned [`Connection`] lives: dropping it (or
    /// [`Connection::disconnect`]) disconnects the name, and if this process dies the name is
    /// left [stale](ParticipantState::Stale), for the next connection to take over. Nobody
    /// else can connect or disconnect the name meanwhile. A stale name is taken over, keeping
    /// its queued messages (a restarted service gets its backlog); of several processes taking
    /// it over at once, exactly one does.
    ///
    /// Waits as [`connect`](Self::connect) does. Errors: [`ErrorKind::Unavailable`] if a
    /// living holder has the name (naming its pid and command), or if it is connected without
    /// a holder (a plain [`connect`](Self::connect): [`disconnect`](Self::disconnect) it
    /// first); others as [`connect`](Self::connect).
    ///
    /// ```
    /// use fsync::bus::ParticipantState;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let bus = fsync::Bus::new(dir.path().join("bus"));
    /// let service = bus.connect_held("service")?;
    /// let listed = bus.participants()?;
    /// assert_eq!(listed[0].state, ParticipantState::Held);
    /// assert_eq!(listed[0].holder.as_ref().map(|h| h.pid), Some(std::process::id()));
    /// assert!(bus.connect_held("service").is_err()); // ours while `service` lives
    /// drop(service); // disconnects
    /// assert!(bus.participants()?.is_empty());
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn connect_held(&self, name: &str) -> Result<Connection> {
        self.check(name)?;
        let top = self.made_top()?;
        let serial = self.lock(&top, self.deadline())?;
        let now = procinfo::now_micros();
        let holder = Holder::this_process(now, procinfo::own_cmdline());
        // Before the name's lock is asked for (a connection never waits for it).
        let acquired = std::time::Instant::now();
        let (file, how) = match top.open_sub(name)? {
            None => {
                remove_hidden(&top, name)?;
                let staging = format!("..{name}.new");
                remove_dir(&top, &staging)?;
                let new = top.create_sub(&staging)?;
                let file = create_owner(&new, &holder)?;
                let placed = new
                    .rename(OWNER_NEW, &new, OWNER)
                    .and_then(|()| top.rename(&staging, &top, name));
                if let Err(e) = placed {
                    drop(file);
                    let _ = remove_dir(&top, &staging);
                    return Err(Error::io(&top.join(name), "cannot connect", e));
                }
                (file, Connected::New)
            }
            Some(member) => match owner(&member)? {
                Owner::None => return Err(self.plain_error(name)),
                Owner::Held(file) => return Err(self.held_error(name, &file, "")),
                Owner::Dead(old) => {
                    let stale = holder::read_believed(&old).and_then(|r| r.holder);
                    let file = create_owner(&member, &holder)?;
                    member
                        .rename(OWNER_NEW, &member, OWNER)
                        .map_err(|e| Error::io(&member.join(OWNER), "cannot take over", e))?;
                    (file, Connected::TookOver { holder: stale })
                }
            },
        };
        drop(serial);
        let meta = file
            .metadata()
            .map_err(|e| Error::io(&top.join(name).join(OWNER), "cannot stat", e))?;
        Ok(Connection {
            bus: self.clone(),
            top,
            name: name.to_string(),
            file: Some(file),
            id: (meta.dev(), meta.ino()),
            holder: std::sync::Mutex::new(holder),
            how,
            passed_down: false,
            acquired,
        })
    }

    /// The error for a name a living holder has.
    fn held_error(&self, name: &str, owner: &File, more: &str) -> Error {
        let who = match holder::read_believed(owner).and_then(|r| r.holder) {
            Some(h) => by_whom(&live_holder(h, owner)),
            None => "a living holder".to_string(),
        };
        Error::new(
            &self.dir.join(name),
            ErrorKind::Unavailable,
            format!("already connected by {who}{more}"),
        )
    }

    fn plain_error(&self, name: &str) -> Error {
        Error::new(
            &self.dir.join(name),
            ErrorKind::Unavailable,
            "already connected without a holder (a plain 'connect'); disconnect it first to \
             hold it",
        )
    }

    /// Disconnect the participant `name`: from now on nobody can send to it, and messages
    /// queued for it stay hidden until it connects again (which discards them). A stale
    /// participant can be disconnected; a held one disconnects itself. Waits as
    /// [`connect`](Self::connect) does. Errors: [`ErrorKind::NotConnected`] if it is not
    /// connected, [`ErrorKind::Unavailable`] if a living holder has it.
    pub fn disconnect(&self, name: &str) -> Result<()> {
        self.member(name, "participant")?;
        // Gone since the look just above: removed under us, so not connected either.
        let top = self.top()?.ok_or_else(|| {
            Error::new(
                &self.dir,
                ErrorKind::NotConnected,
                format!("participant '{name}' is not connected to this bus"),
            )
        })?;
        let _serial = self.lock(&top, self.deadline())?;
        // Looked at again under the lock: it may have changed since.
        let member = self.member(name, "participant")?;
        if let Owner::Held(file) = owner(&member)? {
            return Err(self.held_error(name, &file, "; it disconnects when its holder exits"));
        }
        hide(&top, name)
    }

    /// The connected participants, sorted (held and stale ones too).
    pub fn members(&self) -> Result<Vec<String>> {
        let Some(top) = self.top()? else {
            return Ok(Vec::new());
        };
        let entries = top
            .entries()
            .map_err(|e| pfs::explain_open_error(&self.dir, "cannot list bus", e))?;
        let mut names: Vec<String> = entries
            .into_iter()
            .filter(|(n, kind)| {
                check_name(n).is_ok()
                    && match kind {
                        Some(k) => *k == Kind::Dir,
                        None => top
                            .stat(n)
                            .is_ok_and(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR),
                    }
            })
            .map(|(n, _)| n)
            .collect();
        names.sort();
        Ok(names)
    }

    /// The connected participants, sorted by name, each with its state and holder. Creates
    /// and locks nothing (a held participant is told by a lock probe released at once).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let Some(top) = self.top()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for name in self.members()? {
            // Gone meanwhile (disconnected), or not a directory fsync made: not listed.
            let Ok(Some(member)) = top.open_sub(&name) else {
                continue;
            };
            out.push(participant(&member, name));
        }
        Ok(out)
    }

    /// Queue a message from `from` for `to`, durably, as [`Mailbox::post`] does; fails
    /// ([`ErrorKind::NotConnected`]) if either is not connected, or if `to` is
    /// [stale](ParticipantState::Stale) (its holder died). Waits for nobody.
    pub fn send(&self, from: &str, to: &str, mut payload: impl Read) -> Result<()> {
        self.member(from, "sender")?;
        let member = self.member(to, "receiver")?;
        if let Ok(Owner::Dead(file)) = owner(&member) {
            let whose = match holder::read_believed(&file).and_then(|r| r.holder) {
                Some(h) => format!(" ({})", brief(&h)),
                None => String::new(),
            };
            return Err(Error::new(
                &self.dir,
                ErrorKind::NotConnected,
                format!(
                    "receiver '{to}' is not connected any more: its holder died{whose}; not \
                     sending (a new connection takes the name over with its messages)"
                ),
            ));
        }
        self.posting(member, self.deadline())
            .post_from(&mut payload, Some(from))?;
        Ok(())
    }

    /// Queue one copy for every connected participant but `from` and the
    /// [stale](ParticipantState::Stale) ones; returns who got one.
    pub fn broadcast(&self, from: &str, mut payload: impl Read) -> Result<Vec<String>> {
        let deadline = self.deadline();
        self.member(from, "sender")?;
        let mut data = Vec::new();
        match crate::wait::copy_cancellable(&mut payload, &mut data) {
            Ok(_) => {}
            Err(crate::wait::CopyFailed::Cancelled(sig)) => {
                return Err(Error::new(
                    &self.dir,
                    ErrorKind::Interrupted,
                    format!(
                        "cancelled by signal {sig} while reading the message: nothing was sent"
                    ),
                ));
            }
            Err(crate::wait::CopyFailed::Read(e) | crate::wait::CopyFailed::Write(e)) => {
                return Err(Error::io(
                    &self.dir,
                    "cannot read the message to broadcast",
                    e,
                ));
            }
        }
        let mut sent = Vec::new();
        for to in self.members()?.into_iter().filter(|m| m != from) {
            // A participant that disconnects meanwhile simply misses it.
            let Ok(member) = self.member(&to, "receiver") else {
                continue;
            };
            if let Ok(Owner::Dead(_)) = owner(&member) {
                continue;
            }
            let mailbox = self.posting(member, deadline);
            if mailbox.post_from(&mut &data[..], Some(from)).is_ok() {
                sent.push(to);
            }
        }
        Ok(sent)
    }

    /// Take the oldest message for `name`, waiting up to `timeout` as [`Mailbox::recv`] does;
    /// [`ErrorKind::NotConnected`] if `name` is not connected.
    pub fn recv(&self, name: &str, timeout: Option<Duration>) -> Result<Option<Received>> {
        self.mailbox(name, "participant")?.recv(timeout)
    }

    /// Like [`recv`](Self::recv), telling a timeout from a cancellation, and telling
    /// `progress` what [`Mailbox::recv_with`] tells it.
    pub fn recv_with(
        &self,
        name: &str,
        timeout: Option<Duration>,
        progress: impl crate::msg::Report,
    ) -> Result<Outcome<Received>> {
        self.mailbox(name, "participant")?
            .recv_with(timeout, progress)
    }

    /// Messages waiting for `name`.
    pub fn pending(&self, name: &str) -> Result<usize> {
        let mut pending = 0;
        self.mailbox(name, "participant")?.scan(|entry| {
            if let crate::msg::Entry::Queued(_) = entry {
                pending += 1;
            }
        })?;
        Ok(pending)
    }
}

mod connection;
pub use connection::{Connection, Disconnected};

/// "pid 12 (make -j4)", naming the process that lives where the holder was killed but its
/// command runs on; with its host where that is not this one.
fn by_whom(h: &Holder) -> String {
    let local = h.host == procinfo::hostname();
    let pid = match h.child {
        Some(c) if local && !procinfo::pid_alive(h.pid) => c,
        _ => h.pid,
    };
    let mut s = format!("pid {pid}");
    if !h.command.is_empty() {
        s += &format!(" ({})", h.command);
    }
    if !local && !h.host.is_empty() {
        s += &format!(" on {}", h.host);
    }
    s
}

/// "pid 12: make -j4", for a holder that died.
fn brief(h: &Holder) -> String {
    match h.command.is_empty() {
        true => format!("pid {}", h.pid),
        false => format!("pid {}: {}", h.pid, h.command),
    }
}

/// What the owner file of the participant directory `member` says (module docs).
fn owner(member: &Dir) -> Result<Owner> {
    let Some(file) = member.open(OWNER, false)? else {
        return Ok(Owner::None);
    };
    match probe::held(&file, Mode::Shared) {
        Ok(true) => Ok(Owner::Held(file)),
        Ok(false) => Ok(Owner::Dead(file)),
        Err(e) => Err(Error::io(&member.join(OWNER), "cannot test lock", e)),
    }
}

/// The participant `name` whose directory is `member`, as [`Bus::participants`] shows it.
fn participant(member: &Dir, name: String) -> Participant {
    let (state, holder) = match owner(member) {
        Ok(Owner::None) => (ParticipantState::Connected, None),
        Ok(Owner::Held(file)) => {
            let holder = holder::read_believed(&file).and_then(|r| r.holder);
            (
                ParticipantState::Held,
                holder.map(|h| live_holder(h, &file)),
            )
        }
        Ok(Owner::Dead(file)) => (
            ParticipantState::Stale,
            holder::read_believed(&file).and_then(|r| r.holder),
        ),
        // Never taken for a dead holder's: in doubt, it is held.
        Err(_) => (ParticipantState::Held, None),
    };
    Participant {
        name,
        state,
        holder,
    }
}

/// The holder as it is now: where the fsync that connected and its command have both exited
/// on this host, the owner file is held by a process the command left running with the lock
/// inherited, which is then named as `child`.
fn live_holder(mut h: Holder, owner: &File) -> Holder {
    let local = h.host == procinfo::hostname();
    if !local || procinfo::pid_alive(h.pid) || h.child.is_some_and(procinfo::pid_alive) {
        return h;
    }
    if let Some(pid) = procinfo::live_lock_holder(std::os::fd::AsFd::as_fd(owner), None) {
        h.child = Some(pid);
        h.command = procinfo::cmdline(pid).unwrap_or_default();
    }
    h
}

/// Create the owner file `.owner.new` in `dir`, locked, with `holder`'s record (module docs,
/// step 4), removing one a crashed connection left (under the bus lock nobody else makes it).
/// The caller renames it into place.
fn create_owner(dir: &Dir, holder: &Holder) -> Result<File> {
    let shown = dir.join(OWNER_NEW);
    match dir.unlink_any(OWNER_NEW) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(Error::io(&shown, "cannot remove", e));
        }
        _ => {}
    }
    let file = dir
        .create_new(OWNER_NEW, 0o644)
        .map_err(|e| pfs::explain_open_error(&shown, "cannot create owner file", e))?;
    if !matches!(lock::flock(&file, Mode::Exclusive, false), Ok(true)) {
        let _ = dir.unlink_any(OWNER_NEW);
        return Err(Error::new(
            &shown,
            ErrorKind::Os,
            "cannot lock own owner file",
        ));
    }
    write_record(&file, holder);
    Ok(file)
}

/// Write `holder`'s record into an owner file (best effort: a report, not the lock).
fn write_record(file: &File, holder: &Holder) {
    let text = holder::render(&Record {
        fence: 0,
        holder: Some(holder.clone()),
    });
    if file.write_all_at(text.as_bytes(), 0).is_ok() {
        let _ = file.set_len(text.len() as u64);
    }
}

/// Hide the participant `name` as `.NAME` (the disconnect of the article).
fn hide(top: &Dir, name: &str) -> Result<()> {
    remove_hidden(top, name)?;
    top.rename(name, top, &format!(".{name}"))
        .map_err(|e| Error::io(&top.join(name), "cannot disconnect", e))
}

/// Remove the hidden `.NAME` an earlier `disconnect` left (never following a link in it).
fn remove_hidden(top: &Dir, name: &str) -> Result<()> {
    remove_dir(top, &format!(".{name}"))
}

/// Remove the directory `name` of `top` and all in it, if it exists (never following a link
/// in it); anything but a directory there is an error naming it.
fn remove_dir(top: &Dir, name: &str) -> Result<()> {
    match top.stat(name) {
        Err(_) => Ok(()),
        Ok(st) if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFDIR => {
            Err(top.wrong_kind(name, Kind::Dir))
        }
        Ok(_) => std::fs::remove_dir_all(top.pinned_join(name))
            .map_err(|e| Error::io(&top.join(name), "cannot remove", e)),
    }
}

#[cfg(test)]
mod tests;
