//! Stopping a running job: its timeout (`--job-timeout`, its own posted with it or the worker's
//! default), a cancel request for it (`fsync msg cancel`), the loss of its claim on a network
//! file system (`--lease`, `--on-lost`, as the `run` verbs check their locks), and the backoff
//! after a failure (`--backoff DUR` or `BASE..MAX`): the options `msg recv -- COMMAND` and
//! `msg work` share.
//!
//! A job leads a process group of its own. To stop it, the worker sends TERM to the group, waits
//! up to the grace period (`--grace`) for the job to exit, and sends KILL to what is left of the
//! group then: the job if it did not exit, or what it started that outlived it (looked for every
//! [`STRAGGLER_LOOK`] until the grace period ends). The job's exit is waited for in the kernel
//! (its pidfd, with the change notification of the cancel requests: [`fsync::msg::Received::watch`]).

use std::{ffi::OsString, time::Duration};

use fsync::{
    command::Running,
    msg::{Backoff, Received, Watched},
};
use nix::libc;

use super::super::{
    Exit, Failure,
    child::{Job, LossArgs, watch_lock},
};

/// How often a stopped job's group is looked at for processes that outlived it, within the
/// grace period.
const STRAGGLER_LOOK: Duration = Duration::from_millis(20);

// The options of the verbs that run jobs. (No doc comment: clap would make it the `about` of
// every command that flattens this struct, clap-rs/clap#3127.)
#[derive(Debug, clap::Args)]
pub(super) struct JobArgs {
    /// With COMMAND: hold a failed job back before its next attempt: DUR after its first
    /// failure, twice as long after each one after, 5m at most (0: not at all); or BASE..MAX
    /// (1s..10m): BASE doubling up to MAX, each wait drawn at random within 20% either way so
    /// that jobs that failed together do not all come back at once [default: 1s]
    #[arg(long, value_name = "DUR|BASE..MAX", requires = "command", value_parser = parse_backoff)]
    pub backoff: Option<Backoff>,

    /// With COMMAND: stop a job that has run for DUR (TERM to its process group, KILL after
    /// --grace), and count it a failed attempt ("timeout" in its history): the default for
    /// jobs posted without their own ('post --job-timeout') [default: no limit]
    #[arg(long, value_name = "DUR", requires = "command", value_parser = parse_job_timeout)]
    pub job_timeout: Option<Duration>,

    /// With COMMAND: how long a job stopped for its timeout or cancelled ('fsync msg cancel')
    /// has after TERM before KILL, it and what it started
    #[arg(long, value_name = "DUR", requires = "command", default_value = "10s",
          value_parser = super::super::duration::parse_duration)]
    pub grace: Duration,

    #[command(flatten)]
    pub loss: LossArgs,
}

/// A `--job-timeout`: a duration of 1 ms at least (a job's name keeps milliseconds).
pub(super) fn parse_job_timeout(s: &str) -> Result<Duration, String> {
    match super::super::duration::parse_duration(s)? {
        d if d < Duration::from_millis(1) => {
            Err(format!("invalid job timeout '{s}': must be at least 1ms"))
        }
        d => Ok(d),
    }
}

/// A `--backoff`: `DUR` (doubling from it, [`fsync::msg::MAX_BACKOFF`] at most, no jitter: as
/// it always was) or `BASE..MAX` (doubling from BASE up to MAX, jittered).
pub(super) fn parse_backoff(s: &str) -> Result<Backoff, String> {
    let parse = super::super::duration::parse_duration;
    let Some((base, max)) = s.split_once("..") else {
        return Ok(Backoff::doubling(parse(s)?, fsync::msg::MAX_BACKOFF));
    };
    let (base, max) = (parse(base)?, parse(max)?);
    if max < base {
        return Err(format!(
            "invalid backoff '{s}': its most ({}) is below its base ({})",
            humantime::format_duration(max),
            humantime::format_duration(base)
        ));
    }
    Ok(Backoff::doubling(base, max).jittered())
}

/// Why a job was stopped before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    /// It ran for this long, its timeout.
    TimedOut(Duration),
    /// Someone asked for it to be cancelled.
    Cancelled,
    /// The claim on its message was lost (a network file system: `--lease`, `--on-lost`).
    Lost,
}

/// Start `msg`'s job as `job` says (signals forwarded to it with `forwarded`, as `recv --`
/// runs it), wait for it, stop it on its timeout (its own, else `--job-timeout`), a cancel
/// request (TERM, `--grace`, KILL) or the loss of its claim (as `--on-lost` says), and reap
/// it: its status, and why it was stopped.
pub(super) fn run_watched(
    msg: &mut Received,
    job: &Job<'_>,
    argv: &[OsString],
    forwarded: bool,
    limits: &JobArgs,
    mailbox: &std::path::Path,
) -> Result<(Exit, Option<Stopped>), Failure> {
    // On a network file system the claim is checked as a `run` verb checks its lock, from
    // before the job starts: a worker cut off stops its job before the server gives the claim
    // away, and the next receiver runs it again only then (never twice at once).
    let watch = match msg.loss_check() {
        Some(check) => match limits.loss.watch(mailbox, &check, false) {
            Some(watch) => Some(watch.of_group(stop)),
            None => return Ok((Exit::LOCK_LOST, Some(Stopped::Lost))),
        },
        None => None,
    };
    let child = match forwarded {
        true => msg.spawn(argv, &job.env),
        false => msg.spawn_job(argv, &job.env),
    }
    .map_err(|e| job.spawn_failure(e))?;
    let timeout = msg.job_timeout().or(limits.job_timeout);
    let msg = &*msg;
    let (stopped, lost) = std::thread::scope(|scope| {
        let checking = (watch.as_ref()).and_then(|w| Some((w, w.lease(msg.loss_check()?))));
        let running = &child;
        let checking =
            checking.map(|(w, lease)| scope.spawn(move || watch_lock(running, w, &lease)));
        // A wait that cannot watch is a plain wait for the exit.
        let stopped = match msg.watch(&child, timeout).unwrap_or(Watched::Exited) {
            Watched::TimedOut => timeout.map(Stopped::TimedOut),
            Watched::CancelRequested => Some(Stopped::Cancelled),
            _ => None,
        };
        if stopped.is_some() {
            stop(&child, limits.grace);
        }
        (stopped, checking.is_some_and(|h| h.join().unwrap_or(false)))
    });
    let exit = super::super::child::exit_of(child.wait());
    match lost {
        true => Ok((Exit::LOCK_LOST, Some(Stopped::Lost))),
        false => Ok((exit, stopped)),
    }
}

/// TERM to `child`'s group; KILL to it once `grace` has passed, if the job or anything of its
/// group still lives then. The job is not reaped yet, so its group's id is no other's.
fn stop(child: &Running, grace: Duration) {
    let deadline = std::time::Instant::now() + grace;
    child.signal_group(libc::SIGTERM);
    // A stopped job continues, to die of TERM.
    child.signal_group(libc::SIGCONT);
    let exited = match child.exit_watch() {
        Some(watch) => watch.exited_within(grace),
        None => false,
    };
    if exited {
        // What it started may outlive it: looked for until the grace period ends.
        while child.group_lives_on() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(STRAGGLER_LOOK));
        }
    }
    child.signal_group(libc::SIGKILL);
}

/// The words of `-v` for a job stopped on its timeout.
pub(super) fn timed_out(after: Duration) -> String {
    let shown = humantime::format_duration(Duration::from_millis(
        u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
    ));
    format!("timed out after {shown}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_is_a_duration_as_before_or_a_jittered_range() {
        let b = parse_backoff("2s").unwrap();
        assert_eq!(
            (b.base(), b.max()),
            (Duration::from_secs(2), fsync::msg::MAX_BACKOFF)
        );
        assert!(!b.is_jittered());
        assert!(parse_backoff("0").unwrap().is_zero());
        let b = parse_backoff("1s..5m").unwrap();
        assert_eq!(
            (b.base(), b.max(), b.is_jittered()),
            (Duration::from_secs(1), Duration::from_mins(5), true)
        );
        let b = parse_backoff("250ms..1h").unwrap();
        assert_eq!(
            (b.base(), b.max()),
            (Duration::from_millis(250), Duration::from_hours(1))
        );
        // Longer than the default most: a range may go past 5m.
        let w = b.after(20);
        assert!(
            w <= Duration::from_hours(1) && w >= Duration::from_mins(48),
            "{w:?}"
        );
        for bad in [
            "5m..1s",
            "1s..",
            "..5m",
            "x..5m",
            "1s..5m..6m",
            "1s...5m",
            "-1s",
        ] {
            assert!(parse_backoff(bad).is_err(), "{bad}");
        }
        assert!(
            parse_backoff("5m..1s")
                .unwrap_err()
                .contains("below its base")
        );
    }

    #[test]
    fn a_job_timeout_is_a_millisecond_at_least() {
        assert_eq!(parse_job_timeout("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_job_timeout("0").is_err());
        assert!(parse_job_timeout("100us").is_err());
        assert_eq!(
            timed_out(Duration::from_micros(2_500_400)),
            "timed out after 2s 500ms"
        );
    }
}
