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

#[cfg(test)]
mod tests {
    use std::{fs::File, time::Duration};

    use super::*;
    use crate::{Mailbox, command::spawn_reading, test_support::thread_count};

    /// The look for a job's exit on kernels without pidfds: "no" while it runs, "yes" once it
    /// has exited, and the job left unreaped, its status still to be had. (Mutants answered:
    /// the look made a constant or its answer turned round, and its flags joined with `&`,
    /// which the kernel refuses.)
    #[test]
    fn a_job_is_seen_to_exit_and_left_to_be_reaped() {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let input = File::from(read);
        let no_env: &[(&str, &str)] = &[];
        let job = spawn_reading(&["sh", "-c", "read line; exit 3"], no_env, &input).unwrap();
        // Declared after the job, so that a failing assertion drops it first: the job then
        // reads the end of its input and exits, and the job's drop does not wait for ever.
        let write = File::from(write);
        assert!(!job_exited(&job), "a job waiting for its input has exited");
        drop(write);
        let exit = job.exit_watch().expect("a kernel with pidfds");
        assert!(exit.exited_within(Duration::from_mins(1)));
        assert!(job_exited(&job), "a job that exited has not");
        assert_eq!(
            job.wait().unwrap().code(),
            Some(3),
            "the look reaped the job"
        );
    }

    /// Where the request directory is watched, the wait for a job sleeps until the job exits:
    /// it does not also wake every poll interval, which only a network file system needs.
    /// Counted as the thread's voluntary context switches while a job runs for 0.3 s, the
    /// poll interval 1 ms. (Mutant answered: the poll taken on where a watch was armed.)
    #[test]
    fn the_wait_for_a_watched_job_sleeps_until_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let b = Mailbox::new(dir.path().join("b")).poll_interval(Duration::from_millis(1));
        let _ = b.post(&mut &b"x"[..]).unwrap();
        let mut msg = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        let no_env: &[(&str, &str)] = &[];
        let job = msg.spawn_job(&["sleep", "0.3"], no_env).unwrap();
        let (sleeps, watched) = thread_count("status", "voluntary_ctxt_switches:", || {
            msg.watch(&job, None).unwrap()
        });
        assert_eq!(watched, Watched::Exited);
        assert!(job.wait().unwrap().success());
        assert!(sleeps < 50, "the wait went to sleep {sleeps} times");
    }
}
