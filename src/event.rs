/*!
The event: set by one process, awaited by others (the `TGpFileEvent` of Primoz Gabrijelcic's
*Let's Cooperate: File system-based synchronisation primitives*).

# Protocol on disk

An event `E` is signalled exactly when the file `E` exists (as in the article), so a signal
survives the crash of whoever sent it and needs no process to keep it.

- **signal**: create `E` exclusively (`O_CREAT | O_EXCL`, which never opens, truncates or
  follows what is there): `EEXIST` means it was set already, which is fine. Whether it was set
  is the answer of that one atomic operation: of any number of processes signalling an unset
  event at once, exactly one is told it was not set (its create won).
- **reset**: unlink `E` (already gone is fine). Whether it was set is whether *our* unlink
  removed it: of two resets racing (or a reset and a `--reset` waiter), only the one whose
  unlink succeeded is told it was set.
- **wait**: return once `E` exists; needs only read access to the directory;
- **wait with reset (auto-reset)**: return once *we* unlinked `E`. `unlink` is one atomic
  file-system operation that exactly one of any number of competitors wins (on one host or
  several, the file server decides), so one signal wakes exactly one `--reset` waiter ("each Ping
  will always trigger exactly one Pong"); the losers go back to waiting.

Waking: on a local file system waiters sleep until the kernel reports a change in the directory
(dnotify), so a signal wakes them at once. Change notification
never sees another host's changes, so on network file systems the wait core also re-checks
every `poll` interval.
*/

use std::{
    io,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use nix::libc;

use nix::sys::stat::{FileStat, SFlag};

use crate::{
    error::{Error, ErrorKind, Result},
    platform::{
        dir::{self, Dir},
        fs as pfs,
        notify::DirWatch,
    },
    wait::{self, DEFAULT_POLL, Deadline, Outcome},
};

/// A file-system event at a path: set while the file exists. [`signal`](Event::signal) sets
/// it, [`reset`](Event::reset) clears it (both say whether it was set, as the operation itself
/// found it), [`wait`](Event::wait) waits until it is set, or, for an
/// [`auto_reset`](Event::auto_reset) event, consumes it: one signal then wakes exactly one such
/// waiter, on one host or several.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("ping");
/// let ping = fsync::Event::new(&path);
/// assert!(!ping.is_set()?);
/// assert!(!ping.signal()?); // it was not set before
/// assert!(ping.signal()?); // now it was: still one signal
/// assert!(ping.wait(Some(std::time::Duration::ZERO))?); // set: a plain wait leaves it set
/// let pong = ping.clone().auto_reset(true);
/// assert!(pong.wait(Some(std::time::Duration::ZERO))?); // consumed it
/// assert!(!ping.is_set()?);
/// assert!(!ping.reset()?); // nothing to clear
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Event {
    path: PathBuf,
    poll: Duration,
    auto_reset: bool,
}

impl Event {
    /// The event at `path` (a file in an existing directory). Touches nothing until used.
    pub fn new(path: impl AsRef<Path>) -> Event {
        Event {
            path: path.as_ref().to_path_buf(),
            poll: DEFAULT_POLL,
            auto_reset: false,
        }
    }

    /// Whether a wait consumes the signal it returns for (`true`: auto-reset, as the `--reset`
    /// of `fsync event wait`): of any number of such waiters, one signal wakes exactly one,
    /// which resets the event; the others wait on. A plain wait (`false`, the default)
    /// returns once the event is set and leaves it set.
    pub fn auto_reset(mut self, yes: bool) -> Event {
        self.auto_reset = yes;
        self
    }

    /// How often a wait re-checks on a network file system, where change notification cannot
    /// see other hosts' signals ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Event {
        self.poll = every;
        self
    }

    /// Set the event (a no-op if it is set); `Ok(true)` if it was set already.
    ///
    /// The answer is that of the operation itself, not of a look beforehand: the file is
    /// created with `O_EXCL`, which fails exactly when something is there. So of any number
    /// of processes signalling an unset event at once, exactly one is told `false`. Whatever
    /// is already at the path (even a link or a FIFO another user put there) means "set", and
    /// is never opened. Creates an empty file.
    ///
    /// Errors: [`ErrorKind::NotFound`] if the directory is missing,
    /// [`ErrorKind::PermissionDenied`] if it is not writable (and the event is not set).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let ready = fsync::Event::new(dir.path().join("ready"));
    /// if !ready.signal()? {
    ///     println!("we set it"); // the first signaller since the last reset
    /// }
    /// assert!(ready.signal()?); // set already
    /// # Ok::<(), fsync::Error>(())
    /// ```
    pub fn signal(&self) -> Result<bool> {
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(&self.path);
        match created {
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Something is there: set, unless it is a directory (not an event).
                self.is_set().map(|_| true)
            }
            // Where we may not create (a read-only directory or file system, some file
            // servers that check permission first), an event that is set is still set.
            Err(e)
                if e.kind() == io::ErrorKind::PermissionDenied
                    || e.raw_os_error() == Some(libc::EROFS) =>
            {
                match self.is_set() {
                    Ok(true) => Ok(true),
                    _ => Err(pfs::explain_open_error(
                        &self.path,
                        "cannot signal event",
                        e,
                    )),
                }
            }
            Err(e) => {
                // A missing directory, or a path that is a directory, said as `is_set` says it.
                self.is_set()?;
                Err(pfs::explain_open_error(
                    &self.path,
                    "cannot signal event",
                    e,
                ))
            }
        }
    }

    /// Clear the event (a no-op if it is clear); `Ok(true)` if it was set.
    ///
    /// The answer is that of the operation itself: `true` exactly when our `unlink` removed the
    /// event file, so of two resets racing (or a reset and a resetting waiter), only the one
    /// whose unlink won is told it was set. Only an event file is removed: an empty regular
    /// file, not in a sticky directory another user's. Errors: [`ErrorKind::NotFound`] for
    /// anything else at the path (a link, a directory, a file with data), which is left alone;
    /// [`ErrorKind::PermissionDenied`] where it may not be removed.
    pub fn reset(&self) -> Result<bool> {
        self.consume()
    }

    /// Whether the event is set (something exists at the path). Never waits. Errors:
    /// [`ErrorKind::NotFound`] if the path is a directory or its directory is missing.
    pub fn is_set(&self) -> Result<bool> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_dir() => Err(Error::new(
                &self.path,
                ErrorKind::WrongKind,
                "is a directory, not an event",
            )),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                pfs::check_parent(&self.path).map(|()| false)
            }
            Err(e) => Err(pfs::explain_open_error(
                &self.path,
                "cannot examine event",
                e,
            )),
        }
    }

    /// Wait up to `timeout` (`None`: for ever; zero: look once) for the event; for an
    /// [`auto_reset`](Self::auto_reset) event, consume it (only one of any number of
    /// resetting waiters gets each signal; the others wait on). `Ok(false)` on timeout.
    ///
    /// The thread sleeps until the directory changes: on a local file system a signal wakes it
    /// at once; on a network file system, whose other hosts' changes notify nobody, it
    /// re-checks every [`poll_interval`](Self::poll_interval). Errors as
    /// [`is_set`](Self::is_set) and, when auto-resetting, [`reset`](Self::reset).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        Ok(matches!(
            self.wait_inner(timeout, None)?,
            Outcome::Acquired(())
        ))
    }

    /// Like [`wait`](Self::wait), telling a timeout from a cancellation, and calling
    /// `progress` with the time waited when the wait starts blocking and about once a second
    /// after.
    pub fn wait_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.wait_inner(timeout, Some(&mut progress))
    }

    fn wait_inner(
        &self,
        timeout: Option<Duration>,
        progress: Option<&mut dyn FnMut(Duration)>,
    ) -> Result<Outcome<()>> {
        let deadline = Deadline::after(timeout);
        pfs::check_parent(&self.path)?;
        let dir = pfs::parent_dir(&self.path);
        let network = pfs::fs_kind_of_path(dir).network;
        // Watch before the first check, so a signal between the two is not missed.
        let watch = DirWatch::new(dir).map_err(|e| Error::io(dir, "cannot watch directory", e))?;
        let poll = network.then_some(self.poll);
        wait::watch_until(deadline, poll, &watch, &self.path, progress, || {
            let got = if self.auto_reset {
                self.consume()?
            } else {
                self.is_set()?
            };
            Ok(got.then_some(()))
        })
    }

    /// Take the signal if it is there: the unlink that only one waiter can win. The name is
    /// looked at and removed in the directory opened once, so a directory swapped for a link
    /// meanwhile cannot send the unlink elsewhere.
    fn consume(&self) -> Result<bool> {
        let parent = pfs::parent_dir(&self.path);
        let Some(dir) = Dir::top(parent, false, "cannot reset event")? else {
            return pfs::check_parent(&self.path).map(|()| false);
        };
        let name = self.path.file_name().unwrap_or(self.path.as_os_str());
        let explain = |e| pfs::explain_open_error(&self.path, "cannot reset event", e);
        let st = match dir.stat(name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(explain(e)),
            Ok(st) => st,
        };
        let within = dir.status().map_err(explain)?;
        removable(&self.path, &st, &within)?;
        match dir.unlink_any(name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(explain(e)),
        }
    }
}

/// Whether resetting may unlink what is at `path` (status `st`, in a directory of status
/// `within`): an event file is an empty regular file (fsync creates it so); a device, a FIFO, a
/// link, or a file with data is someone else's and stays. In a sticky directory (`/tmp`) only
/// the file's owner, or the directory's, may remove it: the rule the kernel applies to everyone
/// but root, applied to root too.
fn removable(path: &Path, st: &FileStat, within: &FileStat) -> Result<()> {
    let refuse = |why: String| Err(Error::new(path, ErrorKind::WrongKind, why));
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => {}
        kind => {
            let what = match kind {
                SFlag::S_IFLNK => "a symbolic link",
                SFlag::S_IFDIR => "a directory",
                _ => "a FIFO, socket or device",
            };
            return refuse(format!("is {what}, not an event file; not removing it"));
        }
    }
    if st.st_size > 0 {
        return refuse("holds data, so it is not an event file; not removing it".into());
    }
    if !dir::sticky_allows(within.st_mode, within.st_uid, st.st_uid) {
        return Err(dir::sticky_refusal(path, st.st_uid));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_signal_wakes_one_resetting_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let e = Event::new(dir.path().join("e"));
        assert!(!e.signal().unwrap(), "was not set");
        assert!(e.signal().unwrap(), "still one signal, and it was set");
        assert!(
            e.wait(Some(Duration::ZERO)).unwrap(),
            "plain wait leaves it set"
        );
        assert!(
            e.clone()
                .auto_reset(true)
                .wait(Some(Duration::ZERO))
                .unwrap()
        );
        assert!(
            !e.clone()
                .auto_reset(true)
                .wait(Some(Duration::ZERO))
                .unwrap()
        );
        assert!(!e.reset().unwrap(), "consumed: nothing to clear");
        e.signal().unwrap();
        assert!(e.reset().unwrap(), "cleared a set event");
        assert!(!e.is_set().unwrap());
    }

    /// Of many threads signalling an unset event at once, exactly one is told it was not set;
    /// of many resetting a set one, exactly one is told it was.
    #[test]
    fn was_set_is_decided_by_the_operation_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e");
        let race = |op: fn(&Event) -> bool| {
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        let e = Event::new(path);
                        start.wait();
                        op(&e)
                    })
                })
                .collect();
            let answers: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            answers.iter().filter(|&&was_set| was_set).count()
        };
        for _ in 0..20 {
            assert_eq!(
                race(|e| e.signal().unwrap()),
                7,
                "one signaller found it unset"
            );
            assert_eq!(race(|e| e.reset().unwrap()), 1, "one resetter found it set");
        }
    }

    #[test]
    fn a_waiter_wakes_on_a_signal_from_another_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e");
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                Event::new(path)
                    .auto_reset(true)
                    .wait(Some(Duration::from_secs(20)))
                    .unwrap()
            })
        };
        Event::new(&path).signal().unwrap();
        assert!(waiter.join().unwrap());
    }
}
