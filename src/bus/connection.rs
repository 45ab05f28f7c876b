//! A name held by this process on a bus ([`Bus::connect_held`]): its handle, and the
//! disconnection that ends it (step 5 of the protocol in the module docs of [`crate::bus`]).

use super::*;

/// A participant name held by this process ([`Bus::connect_held`]): connected while it lives,
/// disconnected when dropped (or by [`disconnect`](Self::disconnect), which reports how).
#[must_use = "the name is disconnected as soon as the connection is dropped"]
#[derive(Debug)]
pub struct Connection {
    pub(super) bus: Bus,
    /// The bus directory as opened to connect: the disconnection goes through it, never
    /// through the bus's path again (module docs, step 5).
    pub(super) top: Dir,
    pub(super) name: String,
    /// The owner file, locked; `None` once disconnected.
    pub(super) file: Option<File>,
    /// Its device and inode: how the holder knows it is still its own.
    pub(super) id: (u64, u64),
    /// Behind a lock so that [`set_child`](crate::Guard::set_child) takes the guard shared.
    pub(super) holder: std::sync::Mutex<Holder>,
    pub(super) how: Connected,
    pub(super) passed_down: bool,
    /// When the lock was taken: a lease runs from there ([`crate::LossCheck::since`]).
    pub(super) acquired: std::time::Instant,
}

/// How a [`Connection`] ended ([`Connection::disconnect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disconnected {
    /// The name is disconnected.
    Yes,
    /// A process the lock was passed down to ([`Guard::pass_down`](crate::Guard::pass_down); one the command left
    /// running) still holds it: the name stays held by that process, and is stale once it
    /// exits.
    StillHeld,
    /// The name was no longer this connection's (its directory or owner file was removed or
    /// replaced by hand): nothing was changed.
    NotOurs,
}

/// The check is of our lock on the name's owner file, which the file server can drop for a
/// host it lost touch with (then another host may take the name over). Passing down keeps the
/// name held by the command, and anything it leaves running with the descriptor inherited,
/// even if this process dies; without it the name is stale as soon as this process dies. The
/// command is recorded for [`Bus::participants`] and for the error that refuses another
/// connection.
impl crate::Guard for Connection {
    fn loss_check(&self) -> Option<crate::LossCheck<'_>> {
        crate::LossCheck::of(self.file.as_ref()?, Mode::Exclusive, self.acquired)
    }

    fn pass_down(&mut self) -> Result<()> {
        if let Some(file) = &self.file {
            lock::set_inheritable(file, true)
                .map_err(|e| Error::io(&self.owner_path(), "cannot pass the connection down", e))?;
        }
        self.passed_down = true;
        Ok(())
    }

    fn set_child(&self, pid: Option<u32>, command: &str) {
        let mut holder = crate::guard::lock_ignoring_poison(&self.holder);
        holder.child = pid;
        holder.command = command.to_string();
        if let Some(file) = &self.file {
            write_record(file, &holder);
        }
    }
}

impl Connection {
    /// The participant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the connection found: [`Connected::New`], or [`Connected::TookOver`] for a stale
    /// name (never [`Connected::Already`]).
    pub fn how(&self) -> &Connected {
        &self.how
    }

    fn owner_path(&self) -> PathBuf {
        self.top.join(&self.name).join(OWNER)
    }

    /// Disconnect the name now (module docs, step 5), saying how it went; dropping the
    /// connection does the same silently. Waits for the bus lock as [`Bus::connect`] does
    /// (within the bus's [`lock_timeout`](Bus::lock_timeout)); interrupted or out of time, it
    /// leaves the name stale, which the next connection takes over.
    pub fn disconnect(mut self) -> Result<Disconnected> {
        self.disconnect_inner()
    }

    fn disconnect_inner(&mut self) -> Result<Disconnected> {
        let Some(file) = self.file.take() else {
            return Ok(Disconnected::NotOurs);
        };
        let top = &self.top;
        let _serial = self.bus.lock(top, self.bus.deadline())?;
        let Some(member) = top.open_sub(&self.name)? else {
            return Ok(Disconnected::NotOurs);
        };
        let ours = member
            .stat(OWNER)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == self.id);
        if !ours {
            return Ok(Disconnected::NotOurs);
        }
        if self.passed_down && procinfo::description_shared(std::os::fd::AsFd::as_fd(&file)) {
            return Ok(Disconnected::StillHeld);
        }
        hide(top, &self.name)?;
        drop(file); // after the rename: nobody ever sees it stale
        Ok(Disconnected::Yes)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.disconnect_inner();
    }
}
