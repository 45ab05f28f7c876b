//! `fsync msg work BOX -- COMMAND`: a pool of workers, each taking jobs as `msg recv -- COMMAND`
//! does, one after another, until a cancellation signal (the running jobs finish, no new one is
//! taken) or, with `--until-empty`, until the mailbox has nothing left to do.
//!
//! Each worker is a thread of this process. A cancellation signal ends the wait of every worker
//! at once (the wait core wakes each waiting thread) and is not forwarded to the jobs, which
//! run on to their end ([`fsync::command::spawn_job`]). A worker that cannot start the command
//! stops the others the same way ([`fsync::wait::cancel`]): every job would fail alike. A
//! worker the file system has no room for (no spare registration on a full file system) leaves
//! the others to drain it, unless it is the last.

use std::sync::{
    Mutex,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use fsync::{Mailbox, msg::Received, wait::Outcome};

use super::{Exit, VerbResult, WorkArgs, report};
use crate::cli::Failure;

/// What the workers found, for the exit status.
#[derive(Default)]
struct Found {
    /// The status of the last job that went to the dead letters.
    dead: Mutex<Option<Exit>>,
    /// What stopped the workers other than a signal or an empty mailbox.
    fatal: Mutex<Option<Failure>>,
    /// Set with `fatal`: no worker takes another job.
    stop: AtomicBool,
    /// The workers still taking jobs.
    workers: AtomicUsize,
}

impl Found {
    fn stop_for(&self, failure: Failure) {
        let mut fatal = self
            .fatal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fatal.get_or_insert(failure);
        self.stop.store(true, Ordering::SeqCst);
        // Wake the workers waiting for a message; `last_received` stays unset, which tells
        // this from a signal.
        fsync::wait::cancel(nix::libc::SIGTERM);
    }
}

pub(super) fn work(a: &WorkArgs) -> VerbResult {
    let mailbox =
        super::job_mailbox(&a.mailbox.mailbox, a.poll, a.retries, a.job.backoff).keep(a.keep);
    let found = Found::default();
    found.workers.store(a.jobs, Ordering::SeqCst);
    std::thread::scope(|scope| {
        for _ in 0..a.jobs {
            scope.spawn(|| {
                if worker(&mailbox, a, &found) {
                    found.workers.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
    });
    if let Some(failure) = found
        .fatal
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(failure);
    }
    if let Some(sig) = fsync::wait::last_received() {
        return Ok(Exit::signal(sig));
    }
    let dead = found
        .dead
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(dead.unwrap_or(Exit::OK))
}

/// Take jobs until told to stop, a signal, or (`--until-empty`) nothing left to do; whether it
/// still counts among [`Found::workers`] (it does, unless it left for want of room).
fn worker(mailbox: &Mailbox, a: &WorkArgs, found: &Found) -> bool {
    let queue = a.mailbox.mailbox.join("q");
    let mut skipped = Skipped { queue: &queue };
    while !found.stop.load(Ordering::SeqCst) && fsync::wait::cancelled().is_none() {
        let got = match a.until_empty {
            true => mailbox.recv_or_empty_with(None, &mut skipped),
            false => mailbox.recv_with(None, &mut skipped).map(|o| o.map(Some)),
        };
        match got {
            Ok(Outcome::Acquired(Some(msg))) => {
                if let Err(failure) = run(msg, a, found) {
                    found.stop_for(failure);
                }
            }
            // Nothing left to do, or a cancellation.
            Ok(_) => return true,
            // No room for this one (a full file system): the others go on, if any.
            // (Never the last: it reports what stops it.)
            Err(e)
                if matches!(e.errno(), Some(nix::libc::ENOSPC | nix::libc::EDQUOT))
                    && (found.workers)
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            (n > 1).then(|| n - 1)
                        })
                        .is_ok() =>
            {
                report::say(a.verbose, || format!("{e}; one worker fewer"));
                return false;
            }
            Err(e) => found.stop_for(e.into()),
        }
    }
    true
}

/// Run one job ([`super::run_job`], signals not passed on), noting the status of one whose
/// message went to the dead letters.
fn run(msg: Received, a: &WorkArgs, found: &Found) -> Result<(), Failure> {
    let say = |line: String| report::say(a.verbose, || line);
    let (id, attempt) = (msg.id(), msg.attempt());
    say(format!(
        "message {id} of {}: running (attempt {attempt})",
        a.mailbox.mailbox.display()
    ));
    let (exit, dead) = super::run_job(msg, &a.command, &a.mailbox.mailbox, false, &a.job, say)?;
    if dead {
        // Its status, not a signal of ours to die of.
        *found
            .dead
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Exit::code(exit.code));
    }
    Ok(())
}

/// Warn of each entry of the queue the workers pass over, as `msg recv` does.
struct Skipped<'a> {
    queue: &'a std::path::Path,
}

impl fsync::msg::Report for &mut Skipped<'_> {
    fn waiting(&mut self, _: std::time::Duration) {}

    fn reports_waiting(&self) -> bool {
        false
    }

    fn skipped(&mut self, entry: &fsync::msg::Skipped) {
        report::warn(
            &self.queue.join(&entry.name),
            &format!("{}; skipped", entry.reason),
        );
    }
}
