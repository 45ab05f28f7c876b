//! `fsync msg work BOX -- COMMAND`: a pool of workers, each taking jobs as `msg recv -- COMMAND`
//! does, one after another, until a cancellation signal (the running jobs finish, no new one is
//! taken) or, with `--until-empty`, until the mailbox has nothing left to do.
//!
//! Each worker is a thread of this process. A cancellation signal ends the wait of every worker
//! at once (the wait core wakes each waiting thread) and is not forwarded to the jobs, which
//! run on to their end ([`fsync::command::spawn_job`]). A worker that cannot start the command
//! stops the others the same way ([`fsync::wait::cancel`]): every job would fail alike.

use std::sync::{
    Mutex,
    atomic::{AtomicBool, Ordering},
};

use fsync::{Mailbox, msg::Received, wait::Outcome};

use super::{Exit, VerbResult, WorkArgs, report};
use crate::cli::Failure;

/// What the workers found, for the exit status.
#[derive(Default)]
struct Found {
    /// The status of the last job that failed.
    failed: Mutex<Option<Exit>>,
    /// What stopped the workers other than a signal or an empty mailbox.
    fatal: Mutex<Option<Failure>>,
    /// Set with `fatal`: no worker takes another job.
    stop: AtomicBool,
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
    let mut mailbox = Mailbox::new(&a.mailbox.mailbox).poll_interval(a.poll);
    if let Some(retries) = a.retries {
        mailbox = mailbox.retries(retries);
    }
    if let Some(backoff) = a.backoff {
        mailbox = mailbox.backoff(backoff);
    }
    let found = Found::default();
    std::thread::scope(|scope| {
        for _ in 0..a.jobs {
            scope.spawn(|| worker(&mailbox, a, &found));
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
    let failed = found
        .failed
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(failed.unwrap_or(Exit::OK))
}

/// Take jobs until told to stop, a signal, or (`--until-empty`) nothing left to do.
fn worker(mailbox: &Mailbox, a: &WorkArgs, found: &Found) {
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
            Ok(_) => return,
            Err(e) => found.stop_for(e.into()),
        }
    }
}

/// Run one job: removed if COMMAND succeeds, back to the queue (or the dead letters) counted if
/// it fails, back uncounted if a cancellation signal killed it or it could not be started.
fn run(msg: Received, a: &WorkArgs, found: &Found) -> Result<(), Failure> {
    let place = a.mailbox.mailbox.display();
    let (id, attempt) = (msg.id(), msg.attempt());
    report::say(a.verbose, || {
        format!("message {id} of {place}: running (attempt {attempt})")
    });
    let job = crate::cli::child::Job {
        argv: &a.command,
        env: vec![
            ("FSYNC_MSG_ID".to_string(), id.to_string()),
            ("FSYNC_MSG_ATTEMPT".to_string(), attempt.to_string()),
        ],
        stdin: Some(
            msg.input()
                .map_err(|e| fsync::Error::io(&a.mailbox.mailbox, "cannot read message", e))?,
        ),
    };
    // A command that cannot be started is no failed attempt: the message goes back as it was.
    let exit = job.run_job()?;
    if exit == Exit::OK {
        msg.finish()?;
        report::say(a.verbose, || format!("message {id} of {place}: done"));
        return Ok(());
    }
    if exit.signal.is_some() && fsync::wait::last_received().is_some() {
        drop(msg); // a signal from the terminal reached the job too: cancelled, not failed
        report::say(a.verbose, || {
            format!("message {id} of {place}: back to the queue, the job was cancelled")
        });
        return Ok(());
    }
    let status = Exit::code(exit.code); // its status, not a signal of ours to die of
    *found
        .failed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(status);
    let became = match msg.fail()? {
        fsync::msg::Failed::Delayed => "held back before its next attempt",
        fsync::msg::Failed::Dead => "moved to the dead letters",
        _ => "back to the queue",
    };
    report::say(a.verbose, || {
        format!(
            "message {id} of {place}: failed with status {} (attempt {attempt}), {became}",
            exit.code
        )
    });
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
