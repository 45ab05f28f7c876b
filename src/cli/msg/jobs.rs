//! `fsync msg status`, `wait` and `cancel`: jobs by id ([`fsync::msg::Status`]). Each prints
//! one line per id (one JSON object with `--json`), in the order given; an id the mailbox does
//! not know is told on stderr and makes the exit status 66, after the others are printed.

use std::{io::Write, path::Path};

use clap::Args;
use fsync::{
    Mailbox,
    msg::{Cancel, Finish, Status},
};
use serde::Serialize;

use super::{AttemptJson, BoxArg, Exit, VerbResult, WaitArgs, report};
use crate::cli::{Failure, escape::Show};

#[derive(Debug, Args)]
pub(super) struct StatusArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// The jobs, by id (what 'post' printed: FSYNC_MSG_ID)
    #[arg(value_name = "ID", required = true)]
    ids: Vec<u64>,
    /// One JSON object per job and line: {"id", "state" ("queued", "delayed", "running",
    /// "succeeded", "cancelled", "dead", "unknown"), and as the state has them "since",
    /// "until", "host", "pid", "attempt", "failed", "lost", "started", "ended", "attempts"}
    #[arg(long)]
    json: bool,
}

// `wait` and `cancel`: the jobs, and how long to wait for them to finish. (No doc comment: clap
// would make it the about of both verbs.)
#[derive(Debug, Args)]
pub(super) struct WaitArgsIds {
    #[command(flatten)]
    jobs: StatusArgs,
    #[command(flatten)]
    wait: WaitArgs,
}

/// A job's status as `--json` prints it (docs/json.md, `msg-status`).
#[derive(Serialize)]
struct StatusJson {
    id: u64,
    /// queued, delayed, running, succeeded, cancelled, dead, unknown
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lost: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended: Option<String>,
    /// A dead letter's deliveries, how each ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<Vec<AttemptJson>>,
}

impl StatusJson {
    fn new(id: u64, state: &'static str) -> StatusJson {
        StatusJson {
            id,
            state,
            since: None,
            until: None,
            host: None,
            pid: None,
            attempt: None,
            failed: None,
            lost: None,
            started: None,
            ended: None,
            attempts: None,
        }
    }
}

fn state_name(s: &Status) -> &'static str {
    match s {
        Status::Queued { .. } => "queued",
        Status::Delayed { .. } => "delayed",
        Status::Running { .. } => "running",
        Status::Finished(f) if f.how == Finish::Cancelled => "cancelled",
        Status::Finished(_) => "succeeded",
        Status::Dead { .. } => "dead",
        _ => "unknown",
    }
}

fn json(mailbox: &Mailbox, id: u64, s: &Status) -> StatusJson {
    let ts = report::timestamp;
    let mut j = StatusJson::new(id, state_name(s));
    match s {
        Status::Queued { since, attempts } => {
            j.since = Some(ts(*since));
            j.attempt = Some(attempts + 1);
        }
        Status::Delayed {
            until,
            failed,
            lost,
        } => {
            j.until = Some(ts(*until));
            (j.failed, j.lost) = (Some(*failed), Some(*lost));
        }
        Status::Running {
            host,
            pid,
            attempt,
            since,
        } => {
            (j.host, j.pid, j.attempt) = (Some(host.clone()), Some(*pid), Some(*attempt));
            j.since = Some(ts(*since));
        }
        Status::Finished(f) => {
            (j.host, j.pid, j.attempt) = (Some(f.host.clone()), Some(f.pid), Some(f.attempt));
            (j.started, j.ended) = (Some(ts(f.started)), Some(ts(f.ended)));
        }
        Status::Dead { failed, lost } => {
            (j.failed, j.lost) = (Some(*failed), Some(*lost));
            let history = mailbox.history(id).unwrap_or_default();
            j.attempts = Some(history.into_iter().map(AttemptJson::from).collect());
        }
        _ => {}
    }
    j
}

/// The line `status` prints for a job.
fn text(mailbox: &Mailbox, id: u64, s: &Status) -> String {
    let ts = report::timestamp;
    let esc = super::escaped;
    match s {
        Status::Queued { since, attempts: 0 } => format!("{id} queued since {}", ts(*since)),
        Status::Queued { since, attempts } => {
            format!(
                "{id} queued since {}, attempt {} next",
                ts(*since),
                attempts + 1
            )
        }
        Status::Delayed {
            until, failed: 0, ..
        } => format!("{id} delayed until {}", ts(*until)),
        Status::Delayed { until, failed, .. } => {
            format!(
                "{id} failed {failed} time{}, next attempt at {}",
                plural(*failed),
                ts(*until)
            )
        }
        Status::Running {
            host,
            pid,
            attempt,
            since,
        } => format!(
            "{id} running on {} pid {pid} attempt {attempt} since {}",
            esc(host),
            ts(*since)
        ),
        Status::Finished(f) => {
            let how = match f.how {
                Finish::Cancelled => "cancelled",
                _ => "succeeded",
            };
            let took = f.ended.duration_since(f.started).unwrap_or_default();
            let mut line = format!("{id} {how} at {}", ts(f.ended));
            if f.attempt > 0 {
                line += &format!(
                    " after {} (attempt {} on {} pid {})",
                    report::short_duration(took),
                    f.attempt,
                    esc(&f.host),
                    f.pid
                );
            }
            line
        }
        Status::Dead { failed, lost } => {
            let mut line = format!("{id} dead after {failed} failed attempt{}", plural(*failed));
            if *lost > 0 {
                line += &format!(", {lost} lost");
            }
            if let Some(a) = mailbox.history(id).unwrap_or_default().pop() {
                line += &format!("; the last {}", AttemptJson::from(a).how());
            }
            line
        }
        _ => format!("{id} unknown"),
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Print each job's status; whether any was unknown (told on stderr).
fn print(
    mailbox: &Mailbox,
    path: &Path,
    all: &[(u64, Status)],
    as_json: bool,
) -> Result<bool, Failure> {
    let mut out = std::io::stdout().lock();
    let mut unknown = false;
    for (id, s) in all {
        if matches!(s, Status::Unknown) {
            unknown = true;
            report::warn(
                path,
                &format!(
                    "no job {id}: never posted, or finished longer ago than its record is kept"
                ),
            );
            if !as_json {
                continue;
            }
        }
        let written = match as_json {
            true => report::print_json(&mut out, &json(mailbox, *id, s)),
            false => writeln!(out, "{}", text(mailbox, *id, s)),
        };
        written.map_err(super::stdout_error)?;
    }
    out.flush().map_err(super::stdout_error)?;
    Ok(unknown)
}

pub(super) fn status(a: &StatusArgs) -> VerbResult {
    let mailbox = Mailbox::new(&a.mailbox.mailbox);
    match statuses_of(&mailbox, &a.mailbox.mailbox, &a.ids, a.json)? {
        true => Ok(Exit::NOT_FOUND),
        false => Ok(Exit::OK),
    }
}

/// The exit status of `wait` for jobs that finished: 0 if all succeeded; else that of the
/// first that did not: a dead letter's last status (128+N for a signal, 1 for a worker lost
/// or a failure with no status), 1 for one cancelled.
fn finished_exit(mailbox: &Mailbox, all: &[(u64, Status)]) -> Exit {
    for (id, s) in all {
        match s {
            Status::Finished(f) if f.how == Finish::Succeeded => {}
            Status::Dead { .. } => {
                use fsync::msg::Ended;
                let last = mailbox.history(*id).unwrap_or_default().pop();
                return match last.map(|a| a.ended) {
                    Some(Ended::Exited(n)) => Exit::code(u8::try_from(n).unwrap_or(1)),
                    Some(Ended::Signalled(n)) => Exit::signal(n),
                    _ => Exit::NO,
                };
            }
            _ => return Exit::NO,
        }
    }
    Exit::OK
}

pub(super) fn wait(a: &WaitArgsIds) -> VerbResult {
    let mailbox = &Mailbox::new(&a.jobs.mailbox.mailbox).poll_interval(a.wait.poll);
    let (path, ids, wait, as_json) = (&a.jobs.mailbox.mailbox, &a.jobs.ids, &a.wait, a.jobs.json);
    let place = path.shown();
    let what = match ids.as_slice() {
        [id] => format!("job {id} of {place} to finish"),
        _ => format!("{} jobs of {place} to finish", ids.len()),
    };
    let mut progress = report::Progress::new(wait, what);
    let outcome = mailbox.wait_finished(ids, wait.timeout(), |_| progress.waiting())?;
    let statuses = match progress.settle(outcome, |_| "finished".to_string()) {
        Ok(s) => s,
        Err(exit) => {
            // Where each one is now, for whoever reads on.
            statuses_of(mailbox, path, ids, as_json)?;
            return Ok(exit);
        }
    };
    let all: Vec<(u64, Status)> = ids.iter().copied().zip(statuses).collect();
    if print(mailbox, path, &all, as_json)? {
        return Ok(Exit::NOT_FOUND);
    }
    Ok(finished_exit(mailbox, &all))
}

pub(super) fn cancel(a: &WaitArgsIds) -> VerbResult {
    let mailbox = Mailbox::new(&a.jobs.mailbox.mailbox).poll_interval(a.wait.poll);
    let place = a.jobs.mailbox.mailbox.shown();
    let mut running = Vec::new();
    for &id in &a.jobs.ids {
        let said = match mailbox.cancel(id)? {
            Cancel::Unknown => continue,
            Cancel::Requested => {
                running.push(id);
                "runs: its worker was asked to stop it"
            }
            Cancel::Finished => "had finished already",
            _ => "cancelled",
        };
        report::say(a.wait.verbose, || format!("job {id} of {place} {said}"));
    }
    // The running ones: until their workers have stopped them.
    if !running.is_empty() {
        let what = format!("the workers of {place} to stop {} job(s)", running.len());
        let mut progress = report::Progress::new(&a.wait, what);
        let outcome = mailbox.wait_finished(&running, a.wait.timeout(), |_| progress.waiting())?;
        if let Err(exit) = progress.settle(outcome, |_| "stopped".to_string()) {
            statuses_of(&mailbox, &a.jobs.mailbox.mailbox, &a.jobs.ids, a.jobs.json)?;
            return Ok(exit);
        }
    }
    match statuses_of(&mailbox, &a.jobs.mailbox.mailbox, &a.jobs.ids, a.jobs.json)? {
        true => Ok(Exit::NOT_FOUND),
        false => Ok(Exit::OK),
    }
}

/// Look up and print the status of each of `ids`; whether any was unknown.
fn statuses_of(
    mailbox: &Mailbox,
    path: &Path,
    ids: &[u64],
    as_json: bool,
) -> Result<bool, Failure> {
    let all = (ids.iter())
        .map(|&id| Ok((id, mailbox.status(id)?)))
        .collect::<Result<Vec<_>, fsync::Error>>()?;
    print(mailbox, path, &all, as_json)
}
