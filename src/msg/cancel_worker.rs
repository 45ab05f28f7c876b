//! The worker's side of stopping a running job: its timeout, and a cancel request for it.
//!
//! # On disk
//!
//! A request to cancel message `SEQ` is a file `B/cancel/SEQ` (`SEQ` in 20 digits; `fsync msg
//! cancel` makes it). While a worker runs job `SEQ` it watches for that file: by change
//! notification on `B/cancel` on a local file system (made if missing, so that it can be
//! watched), by a look (one `stat`) every poll interval on a network file system, where other
//! hosts' requests cannot be seen. A job found cancelled is stopped ([`Received::watch`](crate::Received::watch) says
//! so; the worker sends TERM to its process group, KILL after a grace period), then recorded
//! cancelled ([`Received::cancelled`](crate::Received::cancelled): its record in `done/`, its claim removed, never retried,
//! the request unlinked). A job that ends by itself while a request for it exists counts as
//! cancelled too if it failed: the request may have come as it failed of it.
//!
//! A job's timeout (its own, posted with it as `KIND` option `,tMS`, or the worker's default)
//! is kept on this host's clock from the job's start: the wait for the job's exit ends then.

use std::{os::fd::AsFd, time::Duration};

use crate::{
    error::{Error, Result},
    platform::{fs as pfs, notify::DirWatch},
};

use super::Received;

/// Why the wait for a running job ended ([`Received::watch`](crate::Received::watch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Watched {
    /// The job exited (not yet reaped: [`crate::command::Running::wait`] gives its status).
    Exited,
    /// It ran for its timeout, and still runs.
    TimedOut,
    /// Someone asked for it to be cancelled (`B/cancel/SEQ`), and it still runs.
    CancelRequested,
}

impl Received {
    /// Wait until `job` (this message's, from [`spawn`](Self::spawn) or
    /// [`spawn_job`](Self::spawn_job)) exits, has run for `timeout` (`None`: no limit), or is
    /// asked to be cancelled (module docs of `cancel_worker.rs`), whichever comes first. The
    /// thread sleeps in the kernel until the job exits or the request directory changes (on a
    /// network file system it also looks every [`Mailbox::poll_interval`](crate::Mailbox::poll_interval)). A cancellation
    /// signal does not end the wait: the job runs on.
    pub fn watch(
        &self,
        job: &crate::command::Running,
        timeout: Option<Duration>,
    ) -> Result<Watched> {
        let started = std::time::Instant::now();
        let exit = job.exit_watch();
        // Requests can be watched where `cancel` exists or can be made; else only the timeout.
        let requests = self.layout.top.create_sub("cancel").ok();
        let network = requests
            .as_ref()
            .is_some_and(|d| pfs::fs_kind_of_path(&d.pinned()).network);
        let watch = match (&requests, network) {
            (Some(d), false) => DirWatch::new(&d.pinned()).ok(),
            _ => None,
        };
        // Look every poll interval where nothing would wake us.
        let look_every = (requests.is_some() && watch.is_none()).then_some(self.poll);
        loop {
            let exited = match &exit {
                Some(e) => e.exited_within(Duration::ZERO),
                None => job_exited(job),
            };
            if exited {
                return Ok(Watched::Exited);
            }
            if requests.is_some() && self.cancel_requested() {
                return Ok(Watched::CancelRequested);
            }
            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(Watched::TimedOut);
            }
            let limit = match (left, look_every) {
                (Some(l), Some(p)) => Some(l.min(p)),
                (l, p) => l.or(p),
            };
            match (&watch, &exit) {
                (Some(w), Some(e)) => w
                    .wait_or_ready(e.as_fd(), limit)
                    .map_err(|e| Error::io(self.layout.top.path(), "cannot wait for the job", e))?,
                (None, Some(e)) => drop(e.exited_within(limit.unwrap_or(Duration::MAX))),
                // A kernel without pidfds (before 5.3): look again shortly.
                (_, None) => std::thread::sleep(limit.unwrap_or(self.poll).min(self.poll)),
            }
        }
    }
}

/// Whether `job` has exited, without reaping it (kernels without pidfds).
fn job_exited(job: &crate::command::Running) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let pid = nix::unistd::Pid::from_raw(job.pid() as nix::libc::pid_t);
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
    !matches!(waitid(Id::Pid(pid), flags), Ok(WaitStatus::StillAlive))
}
