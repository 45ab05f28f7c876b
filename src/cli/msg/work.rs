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

use super::{
    Exit, VerbResult, WorkArgs,
    progress::{self, StatusLine, Tally},
};
use crate::cli::{Failure, escape::Show, report};

/// What every worker shares.
#[derive(Clone, Copy)]
struct Shared<'a> {
    found: &'a Found,
    status: &'a StatusLine,
    tally: &'a Tally,
}

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
    let output = a.output.job_output(super::log::OutputMode::Keep);
    let mailbox = super::job_mailbox(&a.mailbox.mailbox, a.poll, a.retries, a.job.backoff)
        .keep(a.keep)
        .job_output(output);
    let found = Found::default();
    found.workers.store(a.jobs, Ordering::SeqCst);
    // The live line, unless jobs write to the terminal themselves.
    let status = StatusLine::new(matches!(output, fsync::msg::JobOutput::Keep { .. }));
    let tally = Tally::default();
    let place = a.mailbox.mailbox.shown().to_string();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let shared = Shared {
        found: &found,
        status: &status,
        tally: &tally,
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..a.jobs)
            .map(|_| {
                scope.spawn(|| {
                    if worker(&mailbox, a, shared) {
                        found.workers.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let (status, tally, mailbox, place) = (&status, &tally, &mailbox, &place);
        scope.spawn(move || progress::run(status, tally, mailbox, place, &stopped));
        for w in workers {
            let _ = w.join();
        }
        drop(stop);
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
fn worker(mailbox: &Mailbox, a: &WorkArgs, shared: Shared<'_>) -> bool {
    let found = shared.found;
    let queue = a.mailbox.mailbox.join("q");
    let mut skipped = Skipped {
        queue: &queue,
        status: shared.status,
    };
    while !found.stop.load(Ordering::SeqCst) && fsync::wait::cancelled().is_none() {
        let got = match a.until_empty {
            true => mailbox.recv_or_empty_with(None, &mut skipped),
            false => mailbox.recv_with(None, &mut skipped).map(|o| o.map(Some)),
        };
        match got {
            Ok(Outcome::Acquired(Some(msg))) => {
                if let Err(failure) = run(msg, a, shared) {
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
                (shared.status).say(a.verbose, || {
                    format!("{}; one worker fewer", report::error_text(&e))
                });
                return false;
            }
            Err(e) => found.stop_for(e.into()),
        }
    }
    true
}

/// Run one job ([`super::run_job`], signals not passed on), noting the status of one whose
/// message went to the dead letters.
fn run(msg: Received, a: &WorkArgs, shared: Shared<'_>) -> Result<(), Failure> {
    let say = |line: String| shared.status.say(a.verbose, || line);
    let (id, attempt) = (msg.id(), msg.attempt());
    say(format!(
        "message {id} of {}: running (attempt {attempt})",
        a.mailbox.mailbox.shown()
    ));
    let tally = shared.tally;
    tally.running.fetch_add(1, Ordering::Relaxed);
    let ran = super::run_job(msg, &a.command, &a.mailbox.mailbox, false, &a.job, say);
    tally.running.fetch_sub(1, Ordering::Relaxed);
    let (exit, dead) = ran?;
    match exit == Exit::OK {
        true => tally.done.fetch_add(1, Ordering::Relaxed),
        false => tally.failed.fetch_add(1, Ordering::Relaxed),
    };
    if dead {
        // Its status, not a signal of ours to die of.
        *(shared.found.dead)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Exit::code(exit.code));
    }
    Ok(())
}

/// Warn of each entry of the queue the workers pass over, as `msg recv` does.
struct Skipped<'a> {
    queue: &'a std::path::Path,
    status: &'a StatusLine,
}

impl fsync::msg::Report for &mut Skipped<'_> {
    fn waiting(&mut self, _: std::time::Duration) {}

    fn reports_waiting(&self) -> bool {
        false
    }

    fn skipped(&mut self, entry: &fsync::msg::Skipped) {
        (self.status).warn(
            &self.queue.join(&entry.name),
            &format!("{}; skipped", entry.reason),
        );
    }
}
