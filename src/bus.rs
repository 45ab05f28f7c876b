/*!
The message bus (seed 003): named participants on a shared directory, made safe.

# Protocol on disk

A bus `B` is a directory (created if missing). A participant `NAME` is connected while the
directory `B/NAME` exists; `connect` creates it (first removing a hidden `B/.NAME` an earlier
`disconnect` left), `disconnect` hides it by renaming it to `B/.NAME` (as in the seed). Names are
letters, digits, `_` and `-`, so they can never be hidden or path names.

Each participant's directory is a mailbox ([`crate::msg`]), which keeps the seed's three states
of a message, moved between by rename, with unique names (`tmp/` being written, `q/` done,
`claimed/` being received) and closes its gaps: a message is visible to the receiver only once
complete and flushed, each is received exactly once in the order queued, and a receiver's crash
returns the message it was reading to the queue. A message's name records its sender (`FROM`).

`send` posts into `B/TO`; when `TO` is not connected the post fails (the rename into a missing
directory cannot succeed, even if `TO` disconnects mid-way). `broadcast` posts one copy into every
connected participant's mailbox but the sender's.
*/

use std::{
    io::{self, Read},
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    msg::{Mailbox, Received},
    mutex::DEFAULT_POLL,
    platform::fs as pfs,
    wait::Outcome,
};

/// A bus directory.
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

/// A valid participant name, or the reason it is not.
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
    pub fn new(path: impl AsRef<Path>) -> Bus {
        Bus {
            dir: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
        }
    }

    pub fn poll_interval(mut self, every: Duration) -> Bus {
        self.poll = every;
        self
    }

    fn member_dir(&self, name: &str) -> Result<PathBuf> {
        check_name(name).map_err(|why| Error::new(&self.dir, ErrorKind::Invalid, why))?;
        Ok(self.dir.join(name))
    }

    fn mailbox(&self, name: &str, role: &str) -> Result<Mailbox> {
        let dir = self.member_dir(name)?;
        if !dir.is_dir() {
            if !self.dir.is_dir() {
                pfs::check_parent(&self.dir)?;
            }
            return Err(Error::new(
                &self.dir,
                ErrorKind::Unavailable,
                format!("{role} '{name}' is not connected to this bus"),
            ));
        }
        Ok(Mailbox::existing(dir).poll_interval(self.poll))
    }

    pub fn connect(&self, name: &str) -> Result<()> {
        let dir = self.member_dir(name)?;
        pfs::ensure_dir(&self.dir, "cannot create bus directory")?;
        let hidden = self.dir.join(format!(".{name}"));
        if hidden.exists() {
            std::fs::remove_dir_all(&hidden).map_err(|e| Error::io(&hidden, "cannot remove", e))?;
        }
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()), // already connected
            Err(e) => Err(Error::io(&dir, "cannot connect", e)),
        }
    }

    pub fn disconnect(&self, name: &str) -> Result<()> {
        let dir = self.mailbox(name, "participant")?.path().to_path_buf();
        let hidden = self.dir.join(format!(".{name}"));
        if hidden.exists() {
            std::fs::remove_dir_all(&hidden).map_err(|e| Error::io(&hidden, "cannot remove", e))?;
        }
        crate::platform::fs::rename(&dir, &hidden)
            .map_err(|e| Error::io(&dir, "cannot disconnect", e))
    }

    /// The connected participants, sorted.
    pub fn members(&self) -> Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                pfs::check_parent(&self.dir)?;
                return Ok(Vec::new());
            }
            Err(e) => return Err(pfs::explain_open_error(&self.dir, "cannot list bus", e)),
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Queue a message from `from` for `to`; fails if either is not connected.
    pub fn send(&self, from: &str, to: &str, payload: &mut dyn Read) -> Result<()> {
        self.mailbox(from, "sender")?;
        self.mailbox(to, "receiver")?
            .post_from(payload, Some(from))
            .map(drop)
    }

    /// Queue one copy for every connected participant but `from`; returns who got one.
    pub fn broadcast(&self, from: &str, payload: &mut dyn Read) -> Result<Vec<String>> {
        self.mailbox(from, "sender")?;
        let mut data = Vec::new();
        payload
            .read_to_end(&mut data)
            .map_err(|e| Error::io(Path::new("standard input"), "cannot read", e))?;
        let mut sent = Vec::new();
        for to in self.members()?.into_iter().filter(|m| m != from) {
            // A participant that disconnects meanwhile simply misses it.
            if let Ok(mailbox) = self.mailbox(&to, "receiver") {
                if mailbox.post_from(&mut &data[..], Some(from)).is_ok() {
                    sent.push(to);
                }
            }
        }
        Ok(sent)
    }

    /// Take the oldest message for `name`.
    pub fn recv(&self, name: &str, timeout: Option<Duration>) -> Result<Option<Received>> {
        Ok(match self.recv_with(name, timeout)? {
            Outcome::Acquired(r) => Some(r),
            _ => None,
        })
    }

    pub fn recv_with(&self, name: &str, timeout: Option<Duration>) -> Result<Outcome<Received>> {
        self.mailbox(name, "participant")?.recv_with(timeout)
    }

    /// Messages waiting for `name`.
    pub fn pending(&self, name: &str) -> Result<usize> {
        Ok(self.mailbox(name, "participant")?.list()?.len())
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
        assert_eq!(bus.broadcast("a", &mut &b"x"[..]).unwrap(), ["b"]);
        assert_eq!(bus.pending("a").unwrap(), 0);
        let err = bus.send("a", "c", &mut &b"x"[..]).unwrap_err();
        assert!(err.to_string().contains("not connected"), "{err}");
        assert!(bus.connect("../x").is_err());
    }
}
