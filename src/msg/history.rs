//! A message's history: how each of its deliveries that did not succeed ended, so that a dead
//! letter says why it died (which status, which signal, which worker was lost, where and when),
//! not only how often.
//!
//! # On disk
//!
//! `B/attempts/SEQ` (`SEQ` in 20 digits, as in the message's name): one line per delivery that
//! ended without success, appended by whoever saw it end, oldest first:
//! `ATTEMPT ENDED HOST PID AT\n`, fields separated by one space: `ATTEMPT` which delivery it
//! was (1 for the first: the message's failed and lost deliveries before it, plus one);
//! `ENDED` is `exit:N` (its job exited
//! with status `N`), `signal:N` (killed by signal `N`), `timeout` (it ran for its job timeout
//! and was stopped: TERM, then KILL after a grace period), `lost` (its receiver died with it:
//! killed, out of memory, its host gone), or `failed` (its receiver said so, no more);
//! `HOST` the receiver's host as in `UNIQ` (letters, digits, `-` and `_`), `PID` its process;
//! `AT` when it ended (for `lost`: when another process found it lost), in microseconds since
//! the epoch. Each line is one `write(2)` to a file opened `O_APPEND`, `fdatasync`ed before the
//! message moves on (and the directory `fsync`ed when the file is new). A successful delivery
//! removes the file; a dead letter keeps it, and [`Mailbox::retry`](crate::Mailbox::retry)
//! removes it with the counts it forgets (the next deliveries are numbered from 1 again). A line that does not parse is passed over: the file lives in a
//! shared directory, so it is a record, never an instruction.
//!
//! A line is written before the message moves on, so a receiver killed between the two leaves
//! a line for a delivery that then comes back as lost: the process that returns it writes a
//! `lost` line for the same delivery, under the queue's lock and before the message is back
//! (so before anyone can take it again: the next delivery's line comes after it), and only if
//! the claim is still there (so once, and never for a message its receiver moved on before it
//! died). Of adjacent lines of one delivery, the last is the one that counts (it agrees with
//! the counts in the message's name); readers keep that one.
//!
//! Writing the history is never what stops a delivery: a full file system, or a name another
//! user put there, loses the line and nothing else.

use std::{
    io::{Read, Write},
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, Result},
    platform::procinfo,
};

use super::{DEFAULT_PAYLOAD_MODE, Layout, Mailbox, uniq_host};

/// How one delivery of a message ended without success ([`Mailbox::history`](crate::Mailbox::history)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// Its job exited with this status (not 0).
    Exited(i32),
    /// Its job was killed by this signal.
    Signalled(i32),
    /// Its receiver died with it (killed, out of memory, its host lost): how the job ended,
    /// nobody saw.
    Lost,
    /// Its receiver said it failed ([`Received::fail`](crate::Received::fail)), and no more.
    Failed,
    /// It ran for its job timeout ([`Received::job_timeout`](crate::Received::job_timeout), or the worker's default) and
    /// was stopped: a failed attempt like any other.
    TimedOut,
}

/// One delivery of a message that did not succeed, as its history keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// Which delivery it was: 1 for the first ([`Received::attempt`](crate::Received::attempt)).
    pub attempt: u32,
    /// How it ended.
    pub ended: Ended,
    /// The receiver's host (as in message names: letters, digits, `-` and `_`).
    pub host: String,
    /// The receiver's process id.
    pub pid: u32,
    /// When it ended (a lost one: when another receiver found it lost).
    pub at: SystemTime,
}

/// The longest history read: a file another user grew is read no further.
const MAX_HISTORY: u64 = 64 * 1024;

impl Ended {
    fn render(self) -> String {
        match self {
            Ended::Exited(n) => format!("exit:{n}"),
            Ended::Signalled(n) => format!("signal:{n}"),
            Ended::Lost => "lost".to_string(),
            Ended::Failed => "failed".to_string(),
            Ended::TimedOut => "timeout".to_string(),
        }
    }

    fn parse(s: &str) -> Option<Ended> {
        match s.split_once(':') {
            Some(("exit", n)) => n.parse().ok().map(Ended::Exited),
            Some(("signal", n)) => n.parse().ok().map(Ended::Signalled),
            None if s == "lost" => Some(Ended::Lost),
            None if s == "failed" => Some(Ended::Failed),
            None if s == "timeout" => Some(Ended::TimedOut),
            _ => None,
        }
    }
}

impl Attempt {
    /// This process's delivery, ending now.
    pub(super) fn here(attempt: u32, ended: Ended) -> Attempt {
        Attempt {
            attempt,
            ended,
            host: uniq_host(&procinfo::hostname()),
            pid: std::process::id(),
            at: SystemTime::now(),
        }
    }

    /// Delivery `attempt`, lost with the receiver registered as `rid` (`HOST-PID-RANDOM`),
    /// found now.
    pub(super) fn lost_with(attempt: u32, rid: &str) -> Option<Attempt> {
        let mut fields = rid.rsplitn(3, '-');
        let (_, pid, host) = (fields.next()?, fields.next()?, fields.next()?);
        Some(Attempt {
            attempt,
            ended: Ended::Lost,
            host: host.to_string(),
            pid: pid.parse().ok()?,
            at: SystemTime::now(),
        })
    }

    fn render(&self) -> String {
        let at = self
            .at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let (attempt, ended) = (self.attempt, self.ended.render());
        format!("{attempt} {ended} {} {} {at}\n", self.host, self.pid)
    }

    fn parse(line: &str) -> Option<Attempt> {
        let mut fields = line.split(' ');
        let attempt = fields.next()?.parse().ok()?;
        let ended = Ended::parse(fields.next()?)?;
        let host = fields.next()?;
        let pid = fields.next()?.parse().ok()?;
        let at: u64 = fields.next()?.parse().ok()?;
        if fields.next().is_some() || host.is_empty() || uniq_host(host) != host {
            return None;
        }
        Some(Attempt {
            attempt,
            ended,
            host: host.to_string(),
            pid,
            at: SystemTime::UNIX_EPOCH + Duration::from_micros(at),
        })
    }
}

/// The name of message `seq`'s history in `attempts/`.
fn file_name(seq: u64) -> String {
    format!("{seq:020}")
}

impl Layout {
    /// Append `attempt` to message `seq`'s history, durably; best effort (module docs).
    pub(super) fn record(&self, seq: u64, attempt: &Attempt) {
        let Ok(dir) = self.top.create_sub("attempts") else {
            return;
        };
        let name = file_name(seq);
        let Ok((file, new)) = dir.open_append(&name, DEFAULT_PAYLOAD_MODE) else {
            return;
        };
        // Never through a second name: another user's hard link to someone else's file.
        if !dir.sole_link(&name, &file, None).unwrap_or(false) {
            return;
        }
        if (&file).write_all(attempt.render().as_bytes()).is_ok() && file.sync_data().is_ok() && new
        {
            let _ = dir.sync();
        }
    }

    /// Forget message `seq`'s history: it was delivered, or put back from the dead letters.
    pub(super) fn forget(&self, seq: u64) {
        if let Ok(Some(dir)) = self.top.open_sub("attempts") {
            let _ = dir.unlink_file(file_name(seq));
        }
    }
}

impl Mailbox {
    /// How each delivery of message `id` that did not succeed ended, oldest first: empty for
    /// a message never delivered, delivered at the first attempt, or unknown. Creates nothing.
    pub fn history(&self, id: u64) -> Result<Vec<Attempt>> {
        let top = self.existing_top()?;
        let Some(dir) = top.open_sub("attempts")? else {
            return Ok(Vec::new());
        };
        let name = file_name(id);
        let Some(file) = dir.open(&name, false)? else {
            return Ok(Vec::new());
        };
        let mut text = String::new();
        file.take(MAX_HISTORY)
            .read_to_string(&mut text)
            .map_err(|e| Error::io(&dir.join(&name), "cannot read", e))?;
        Ok(last_of_each(text.lines().filter_map(Attempt::parse)))
    }
}

/// Of adjacent attempts of one delivery, the last (module docs).
fn last_of_each(attempts: impl Iterator<Item = Attempt>) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = Vec::new();
    for a in attempts {
        match out.last_mut() {
            Some(last) if last.attempt == a.attempt => *last = a,
            _ => out.push(a),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_written_and_anything_else_is_passed_over() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        for ended in [
            Ended::Exited(3),
            Ended::Signalled(9),
            Ended::Lost,
            Ended::Failed,
            Ended::TimedOut,
        ] {
            let a = Attempt {
                attempt: 2,
                ended,
                host: "build-1".to_string(),
                pid: 42,
                at,
            };
            let line = a.render();
            assert!(line.ends_with('\n'));
            assert_eq!(Attempt::parse(line.trim_end()), Some(a));
        }
        for bad in [
            "",
            "1 exit:x h 1 2",
            "1 died h 1 2",
            "1 timeout:5 h 1 2",
            "1 timedout h 1 2",
            "1 lost h x 2",
            "1 lost h 1 x",
            "1 lost h 1 2 3",
            "1 lost h\u{1b} 1 2",
            "1 lost  1 2",
            "x lost h 1 2",
            "lost h 1 2",
        ] {
            assert_eq!(Attempt::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_lost_receivers_host_and_pid_come_from_its_registration() {
        let a = Attempt::lost_with(3, "build-host-7-4410-9c2e51a0d3b47f18").unwrap();
        assert_eq!(
            (a.attempt, a.ended, a.host.as_str(), a.pid),
            (3, Ended::Lost, "build-host-7", 4410)
        );
        assert_eq!(Attempt::lost_with(1, "nopid"), None);
        assert_eq!(Attempt::lost_with(1, "h-x-1"), None);
    }

    #[test]
    fn of_adjacent_lines_of_one_delivery_the_last_counts() {
        let at = |attempt, ended| Attempt {
            attempt,
            ended,
            host: "h".to_string(),
            pid: 1,
            at: SystemTime::UNIX_EPOCH,
        };
        let lines = [
            at(1, Ended::Exited(1)),
            at(2, Ended::Exited(1)), // its receiver was killed before it moved the message
            at(2, Ended::Lost),
            at(2, Ended::Lost), // two receivers found it lost
            at(3, Ended::Signalled(9)),
            at(1, Ended::Exited(2)), // put back from the dead letters: counted from 1 again
        ];
        let kept: Vec<_> = last_of_each(lines.into_iter())
            .iter()
            .map(|a| (a.attempt, a.ended))
            .collect();
        assert_eq!(
            kept,
            [
                (1, Ended::Exited(1)),
                (2, Ended::Lost),
                (3, Ended::Signalled(9)),
                (1, Ended::Exited(2))
            ]
        );
    }

    /// A message delivered after a failed attempt has its history forgotten with it: nothing
    /// is left in `attempts`. (Mutants answered: the history kept after a later delivery.)
    #[test]
    fn a_delivery_after_a_failure_forgets_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let b = crate::Mailbox::new(dir.path().join("b"));
        let _ = b.post(&mut &b"job"[..]).unwrap();
        let first = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        assert_eq!(first.fail().unwrap(), crate::msg::Failed::Queued);
        assert_eq!(b.history(1).unwrap().len(), 1);
        let second = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
        assert_eq!(second.attempt(), 2);
        second.finish().unwrap();
        assert_eq!(b.history(1).unwrap(), []);
        let attempts = crate::test_support::listing(&dir.path().join("b/attempts"));
        assert!(attempts.is_empty(), "{attempts:?}");
    }

    /// Each message has a history of its own, read whole up to its cap: 40 failed deliveries
    /// of one (40 lines, past 1,088 bytes) all read back, none of them in another's. (Mutants
    /// answered: one file for every message's history, the cap of 64 KiB made 1,088 bytes.)
    #[test]
    fn each_message_has_a_history_of_its_own_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let b = crate::Mailbox::new(dir.path().join("b")).retries(100);
        let _ = b.post(&mut &b"first"[..]).unwrap();
        for _ in 0..40 {
            let first = b.recv(Some(Duration::ZERO)).unwrap().unwrap();
            assert_eq!(first.fail().unwrap(), crate::msg::Failed::Queued);
        }
        let _ = b.post(&mut &b"second"[..]).unwrap();
        assert_eq!(b.history(1).unwrap().len(), 40);
        assert_eq!(b.history(2).unwrap(), []);
    }
}
