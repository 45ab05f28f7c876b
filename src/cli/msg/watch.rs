//! `fsync msg watch BOX`: what any mailbox is doing, until a signal (or `--timeout`): how many
//! jobs are queued, delayed, running and dead, how fast they leave it and when it will be
//! empty at that pace, and each running job (its id, its worker's host and pid, its attempt,
//! since when). A census ([`fsync::Mailbox::census`]) at each refresh: once a second, sooner
//! after a change (a change seen by the kernel wakes it), four times a second at most. Text
//! lines are printed when the counts or the running jobs change; `--json` prints one object
//! per refresh (docs/json.md, `msg-watch`).
//!
//! The rate is jobs that left the mailbox (done, or dead) per second since the watch began:
//! from two censuses, the fall in queued, delayed and running plus the ids handed out
//! meanwhile (`seq`), so a job that ran between two looks counts too.

use crate::cli::OrStdout;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use fsync::{Mailbox, Outcome, msg::Census};
use serde::Serialize;

use super::{BoxArg, Exit, VerbResult};
use crate::cli::{
    args::WatchArgs,
    escape::{Show, escaped},
    report,
};

#[derive(Debug, Args)]
pub(super) struct WatchCmd {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    watch: WatchArgs,
    /// One JSON object per line per refresh: {"time", "path", "queued", "delayed", "dead",
    /// "running": [{"id", "host", "pid", "attempt", "since"}], "rate", "eta"}
    #[arg(long)]
    json: bool,
}

/// One refresh of `msg watch --json` (docs/json.md, `msg-watch`).
#[derive(Serialize)]
struct WatchJson<'a> {
    time: String,
    path: String,
    queued: u64,
    delayed: u64,
    dead: u64,
    running: Vec<RunningJson<'a>>,
    /// Jobs per second that left the mailbox since the watch began; `null` until known.
    rate: Option<f64>,
    /// Seconds until nothing is left at that rate; `null` if not known or nothing is left.
    eta: Option<f64>,
}

/// A running job (docs/json.md, `msg-running`).
#[derive(Serialize)]
struct RunningJson<'a> {
    id: u64,
    host: &'a str,
    pid: u32,
    attempt: u32,
    since: String,
}

/// The least time between two refreshes, and the most.
const QUICKEST: Duration = Duration::from_millis(250);
const SLOWEST: Duration = Duration::from_secs(1);

pub(super) fn watch(a: &WatchCmd) -> VerbResult {
    let mailbox = Mailbox::existing(&a.mailbox.mailbox).poll_interval(a.watch.poll);
    let place = a.mailbox.mailbox.shown().to_string();
    let start = Instant::now();
    let end = a.watch.timeout.map(|t| start + t);
    let first = mailbox.census()?;
    let mut shown: Option<String> = None;
    let mut census = first.clone();
    loop {
        let rate = rate(&first, &census, start.elapsed());
        let left = census.queued + census.delayed + census.running.len() as u64;
        let eta = rate
            .filter(|r| *r > 0.0 && left > 0)
            .map(|r| left as f64 / r);
        let key = state_key(&place, &census);
        if a.json || shown.as_ref() != Some(&key) {
            let json = |time| WatchJson {
                time,
                path: report::path_text(&a.mailbox.mailbox),
                queued: census.queued,
                delayed: census.delayed,
                dead: census.dead,
                running: (census.running.iter())
                    .map(|r| RunningJson {
                        id: r.id,
                        host: &r.host,
                        pid: r.pid,
                        attempt: r.attempt,
                        since: report::timestamp(r.since),
                    })
                    .collect(),
                rate,
                eta,
            };
            let text = || {
                let mut line = state_text(&place, &census);
                if let Some(r) = rate.filter(|r| *r > 0.0) {
                    line += &format!(", {r:.1}/s");
                }
                if let Some(eta) = eta {
                    let eta = Duration::from_secs_f64(eta.min(1e9));
                    line += &format!(", ETA {}", report::short_duration(eta));
                }
                for r in &census.running {
                    let age = SystemTime::now()
                        .duration_since(r.since)
                        .unwrap_or_default();
                    line += &format!(
                        "\n  job {} on {} pid {}, attempt {}, since {} ({} ago)",
                        r.id,
                        escaped(&r.host),
                        r.pid,
                        r.attempt,
                        report::timestamp(r.since),
                        report::short_duration(age)
                    );
                }
                line
            };
            report::watch_line(a.json, json, text).or_stdout()?;
            shown = Some(key);
        }
        // The next refresh: not before QUICKEST, then at a change or SLOWEST.
        let next = Instant::now() + SLOWEST;
        std::thread::sleep(QUICKEST);
        if let Some(sig) = fsync::wait::cancelled() {
            return Ok(Exit::signal(sig));
        }
        if end.is_some_and(|e| Instant::now() >= e) {
            return Ok(Exit::OK);
        }
        let wait = next.saturating_duration_since(Instant::now());
        let wait = end.map_or(wait, |e| {
            wait.min(e.saturating_duration_since(Instant::now()))
        });
        if let Outcome::Interrupted(sig) = mailbox.wait_change(Some(wait))? {
            return Ok(Exit::signal(sig));
        }
        census = mailbox.census()?;
    }
}

/// The counts, without the rate.
fn state_text(place: &str, c: &Census) -> String {
    let mut line = format!("{place}: {} queued, {} running", c.queued, c.running.len());
    if c.delayed > 0 {
        line += &format!(", {} delayed", c.delayed);
    }
    if c.dead > 0 {
        line += &format!(", {} dead", c.dead);
    }
    line
}

/// What a text line is printed again for: the counts, and which attempt of which job runs.
fn state_key(place: &str, c: &Census) -> String {
    let mut key = state_text(place, c);
    for r in &c.running {
        key += &format!(" {}:{}", r.id, r.attempt);
    }
    key
}

/// Jobs per second that left the mailbox between `first` and `now`, `elapsed` apart.
fn rate(first: &Census, now: &Census, elapsed: Duration) -> Option<f64> {
    let pending = |c: &Census| c.queued + c.delayed + c.running.len() as u64;
    let posted = now.last_id.saturating_sub(first.last_id);
    let left = (pending(first) + posted).saturating_sub(pending(now));
    (elapsed >= Duration::from_secs(1)).then(|| left as f64 / elapsed.as_secs_f64())
}
