/*!
The message bus: named participants on a shared directory, made safe. The design is that of a
(Russian) article on a message bus between BlackBox processes on the machines of a local
network, through a shared network directory.

# Protocol on disk

A bus `B` is a directory (created if missing). A participant `NAME` is connected while the
directory `B/NAME` exists; `connect` creates it (first removing a hidden `B/.NAME` an earlier
`disconnect` left), `disconnect` hides it by renaming it to `B/.NAME` (as in the article). Names are
letters, digits, `_` and `-`, so they can never be hidden or path names.

Each participant's directory is a mailbox ([`crate::msg`]), which keeps the article's three states
of a message, moved between by rename, with unique names (`tmp/` being written, `q/` done,
`claimed/` being received) and closes its gaps: a message is visible to the receiver only once
complete and flushed, each is received exactly once in the order queued, and a receiver's crash
returns the message it was reading to the queue. A message's name records its sender (`FROM`).

`send` posts into `B/TO`; when `TO` is not connected the post fails (the rename into a missing
directory cannot succeed, even if `TO` disconnects mid-way). `broadcast` posts one copy into every
connected participant's mailbox but the sender's.
*/

use std::{
    io::Read,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    msg::{Mailbox, Received},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
    },
    wait::{Outcome, DEFAULT_POLL},
};

/// A bus directory: participants connect under a name, send each other messages (or
/// broadcast to all), and receive their own, each from its own [`Mailbox`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("bus");
/// let bus = fsync::Bus::new(&path);
/// bus.connect("alice")?;
/// bus.connect("bob")?;
/// bus.send("alice", "bob", &mut &b"hi"[..])?;
/// let mut msg = bus.recv("bob", None)?.expect("one message");
/// assert_eq!(msg.from.as_deref(), Some("alice"));
/// assert_eq!(msg.read_all().unwrap(), b"hi");
/// msg.finish()?;
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Bus {
    dir: PathBuf,
    poll: Duration,
}

/// A valid participant name (1 to 200 letters, digits, `_` and `-`), or the reason it is not.
/// The same rule holds for [`GroupLock`](crate::GroupLock) group names.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "invalid participant name '{name}': use letters, digits, '_' and '-'"
        )),
    }
}

impl Bus {
    /// The bus at the directory `path`, which is created on first connection. Touches nothing
    /// until then.
    pub fn new(path: impl AsRef<Path>) -> Bus {
        Bus {
            dir: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
        }
    }

    /// How often a receiver re-checks on a network file system, where change notification
    /// cannot see other hosts' messages ([`crate::wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Bus {
        self.poll = every;
        self
    }

    /// The bus directory, opened (see [`crate::platform::dir`]: another user may have made it
    /// and put links in it); `None` if it does not exist.
    fn top(&self, create: bool) -> Result<Option<Dir>> {
        Dir::top(&self.dir, create, "cannot create bus directory")
    }

    fn mailbox(&self, name: &str, role: &str) -> Result<Mailbox> {
        check_name(name).map_err(|why| Error::new(&self.dir, ErrorKind::Invalid, why))?;
        let not_connected = || {
            Error::new(
                &self.dir,
                ErrorKind::Unavailable,
                format!("{role} '{name}' is not connected to this bus"),
            )
        };
        let top = self.top(false)?.ok_or_else(not_connected)?;
        let member = top.sub(name, false)?.ok_or_else(not_connected)?;
        Ok(Mailbox::in_dir(member).poll_interval(self.poll))
    }

    /// Connect the participant `name` (creating the bus if missing); connecting again is fine.
    /// Messages left for an earlier, disconnected, participant of that name are discarded.
    /// Errors:
    /// [`ErrorKind::Invalid`] for a name that is not 1 to 200 letters, digits, `_` and `-`.
    pub fn connect(&self, name: &str) -> Result<()> {
        check_name(name).map_err(|why| Error::new(&self.dir, ErrorKind::Invalid, why))?;
        let top = self.top(true)?.expect("created");
        remove_hidden(&top, name)?;
        top.sub(name, true).map(drop) // already connected is fine
    }

    /// Disconnect the participant `name`: from now on nobody can send to it, and messages
    /// queued for it stay hidden until it connects again (which discards them). Errors:
    /// [`ErrorKind::Unavailable`] if it is not connected.
    pub fn disconnect(&self, name: &str) -> Result<()> {
        self.mailbox(name, "participant")?;
        let top = self.top(false)?.expect("it has a member");
        remove_hidden(&top, name)?;
        top.rename(name, &top, &format!(".{name}"))
            .map_err(|e| Error::io(&top.join(name), "cannot disconnect", e))
    }

    /// The connected participants, sorted.
    pub fn members(&self) -> Result<Vec<String>> {
        let Some(top) = self.top(false)? else {
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

    /// Queue a message from `from` for `to`, durably, as [`Mailbox::post`] does; fails
    /// ([`ErrorKind::Unavailable`]) if either is not connected. Waits for nobody.
    pub fn send(&self, from: &str, to: &str, payload: &mut dyn Read) -> Result<Outcome<()>> {
        self.mailbox(from, "sender")?;
        let posted = self
            .mailbox(to, "receiver")?
            .post_from(payload, Some(from))?;
        Ok(posted.map(drop))
    }

    /// Queue one copy for every connected participant but `from`; returns who got one.
    pub fn broadcast(&self, from: &str, payload: &mut dyn Read) -> Result<Outcome<Vec<String>>> {
        self.mailbox(from, "sender")?;
        let mut data = Vec::new();
        if let Err(e) = crate::wait::copy_cancellable(payload, &mut data) {
            return match crate::wait::cancelled() {
                Some(s) => Ok(Outcome::Interrupted(s)),
                None => Err(Error::io(Path::new("standard input"), "cannot read", e)),
            };
        }
        let mut sent = Vec::new();
        for to in self.members()?.into_iter().filter(|m| m != from) {
            // A participant that disconnects meanwhile simply misses it.
            if let Ok(mailbox) = self.mailbox(&to, "receiver") {
                if let Ok(Outcome::Acquired(_)) = mailbox.post_from(&mut &data[..], Some(from)) {
                    sent.push(to);
                }
            }
        }
        Ok(Outcome::Acquired(sent))
    }

    /// Take the oldest message for `name`, waiting up to `timeout` as [`Mailbox::recv`] does;
    /// [`ErrorKind::Unavailable`] if `name` is not connected.
    pub fn recv(&self, name: &str, timeout: Option<Duration>) -> Result<Option<Received>> {
        Ok(self.recv_with(name, timeout)?.acquired())
    }

    /// Like [`recv`](Self::recv), telling a timeout from a cancellation.
    pub fn recv_with(&self, name: &str, timeout: Option<Duration>) -> Result<Outcome<Received>> {
        self.mailbox(name, "participant")?.recv_with(timeout)
    }

    /// Like [`recv_with`](Self::recv_with), calling `skipped` for each entry passed over and
    /// `progress` as [`Mailbox::recv_reporting`] does.
    pub fn recv_reporting(
        &self,
        name: &str,
        timeout: Option<Duration>,
        skipped: impl FnMut(&crate::msg::Skipped),
        progress: impl FnMut(Duration),
    ) -> Result<Outcome<Received>> {
        self.mailbox(name, "participant")?
            .recv_reporting(timeout, skipped, progress)
    }

    /// Messages waiting for `name`.
    pub fn pending(&self, name: &str) -> Result<usize> {
        Ok(self.mailbox(name, "participant")?.list()?.queued.len())
    }
}

/// Remove the hidden `.NAME` an earlier `disconnect` left (never following a link in it).
fn remove_hidden(top: &Dir, name: &str) -> Result<()> {
    let hidden = format!(".{name}");
    match top.stat(&hidden) {
        Err(_) => Ok(()),
        Ok(st) if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFDIR => {
            Err(top.wrong_kind(&hidden, Kind::Dir))
        }
        Ok(_) => std::fs::remove_dir_all(top.pinned_join(&hidden))
            .map_err(|e| Error::io(&top.join(&hidden), "cannot remove", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_skips_the_sender_and_disconnected_members() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::new(dir.path().join("bus"));
        for n in ["a", "b", "c"] {
            bus.connect(n).unwrap();
        }
        bus.disconnect("c").unwrap();
        assert_eq!(bus.members().unwrap(), ["a", "b"]);
        assert_eq!(
            bus.broadcast("a", &mut &b"x"[..]).unwrap(),
            Outcome::Acquired(vec!["b".to_string()])
        );
        assert_eq!(bus.pending("a").unwrap(), 0);
        let err = bus.send("a", "c", &mut &b"x"[..]).unwrap_err();
        assert!(err.to_string().contains("not connected"), "{err}");
        assert!(bus.connect("../x").is_err());
    }
}
