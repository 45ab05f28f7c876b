//! `fsync msg list`: each message printed as it is found, so that a queue of any depth is listed
//! in the memory of a few; with `--json`, one object whose arrays are written one entry at a time.

use crate::cli::OrStdout;
use std::{io::Write, time::SystemTime};

use fsync::Mailbox;
use serde::Serialize;

use super::{AttemptJson, Exit, ListArgs, VerbResult, escaped, report};

/// A message of `fsync msg list --json` (docs/json.md, `msg-message`). The object around them
/// (`msg-list`) is written by hand, a message at a time ([`list`]).
#[derive(Serialize)]
struct MessageJson<'a> {
    /// Its id (the sequence number its name begins with).
    id: u64,
    name: &'a str,
    /// Bytes.
    size: u64,
    /// When it was queued (the payload file's modification time).
    since: String,
    /// A synchronous message whose sender waits for it.
    sync: bool,
    /// Its deliveries that failed so far.
    failed: u32,
    /// Its deliveries lost with their worker.
    lost: u32,
    /// Its priority level (0 to 3): higher levels are taken first.
    priority: u8,
    /// How its deliveries that did not succeed ended.
    attempts: Vec<AttemptJson>,
    /// When a delayed message is due (in `delayed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    due: Option<String>,
    /// Who runs it, and since when (in `running` only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    running: Option<RunningJson>,
}

/// The receiver of a message being received (docs/json.md, `msg-message`).
#[derive(Serialize)]
struct RunningJson {
    host: String,
    pid: u32,
    attempt: u32,
    taken: String,
}

#[derive(Serialize)]
struct SkippedJson<'a> {
    name: &'a str,
    reason: &'a str,
}

/// `msg list`: each message printed as it is found, so that a queue of any depth is listed in
/// the memory of a few; with `--json`, one object whose `messages` are written one by one.
pub(super) fn list(a: &ListArgs) -> VerbResult {
    use fsync::msg::Entry;
    let mailbox = Mailbox::new(&a.mailbox.mailbox);
    let mut out = std::io::stdout().lock();
    let mut written: std::io::Result<()> = Ok(());
    // Messages, then delayed ones, then dead letters: in JSON an array each, written as the
    // listing reaches them; `section` is the array open now, `counts` the entries of each.
    const ARRAYS: [&str; 4] = ["messages", "running", "delayed", "dead"];
    let mut section = 0;
    let mut counts = [0usize; 4];
    let mut skipped = Vec::new();
    let now = SystemTime::now();
    // The JSON object is opened with the first entry (or once the listing is done): a path
    // that is no mailbox writes nothing to standard output.
    let path =
        serde_json::to_string(&report::path_text(&a.mailbox.mailbox)).expect("a string serialises");
    let mut opened = !a.json;
    let open = |out: &mut std::io::StdoutLock<'_>, opened: &mut bool| {
        let was = std::mem::replace(opened, true);
        match was {
            true => Ok(()),
            false => write!(out, "{{\"path\":{path},\"messages\":["),
        }
    };
    // Close the arrays before `to` and open those up to it.
    let move_to = |out: &mut std::io::StdoutLock<'_>, section: &mut usize, to: usize| {
        let mut result = Ok(());
        while *section < to && result.is_ok() {
            *section += 1;
            result = match ARRAYS.get(*section) {
                Some(name) => write!(out, "],\"{name}\":["),
                None => write!(out, "]"),
            };
        }
        result
    };
    // Only a message that failed or was lost has a history to read.
    let history = |m: &fsync::msg::Queued| match m.failed().saturating_add(m.lost()) {
        0 => Vec::new(),
        _ => (mailbox.history(m.id()).unwrap_or_default().into_iter())
            .map(AttemptJson::from)
            .collect(),
    };
    let json_message = |out: &mut std::io::StdoutLock<'_>,
                        m: &fsync::msg::Queued,
                        due: Option<SystemTime>,
                        running: Option<RunningJson>,
                        first| {
        let json = MessageJson {
            id: m.id(),
            name: &m.name,
            size: m.size,
            since: report::timestamp(now.checked_sub(m.age).unwrap_or(now)),
            sync: m.sync,
            failed: m.failed(),
            lost: m.lost(),
            priority: m.priority(),
            attempts: history(m),
            due: due.map(report::timestamp),
            running,
        };
        let comma = if first { "" } else { "," };
        write!(out, "{comma}").and_then(|()| Ok(serde_json::to_writer(&mut *out, &json)?))
    };
    let claimed = mailbox.scan(|entry| {
        if written.is_err() {
            return;
        }
        if let Err(e) = open(&mut out, &mut opened) {
            written = Err(e);
            return;
        }
        let (at, m, due, running) = match entry {
            Entry::Skipped(s) if a.json => {
                skipped.push(s);
                return;
            }
            Entry::Skipped(s) => {
                // Names are another user's choice: escaped, so that none forges a line.
                let (name, reason) = (escaped(&s.name), escaped(&s.reason));
                written = writeln!(out, "{name}  skipped: {reason}");
                return;
            }
            Entry::Queued(m) => (0, m, None, None),
            Entry::Running {
                message,
                host,
                pid,
                attempt,
                since,
                ..
            } => {
                let taken = report::timestamp(since);
                (
                    1,
                    message,
                    None,
                    Some(RunningJson {
                        host,
                        pid,
                        attempt,
                        taken,
                    }),
                )
            }
            Entry::Delayed { message, due } => (2, message, Some(due), None),
            Entry::Dead(m) => (3, m, None, None),
            _ => return,
        };
        counts[at] += 1;
        written = if a.json {
            move_to(&mut out, &mut section, at)
                .and_then(|()| json_message(&mut out, &m, due, running, counts[at] == 1))
        } else {
            let state = match (at, m.sync, m.failed(), due, running) {
                (_, _, _, _, Some(r)) => format!(
                    "running on {} pid {} attempt {} since {}",
                    escaped(&r.host),
                    r.pid,
                    r.attempt,
                    r.taken
                ),
                (_, _, _, Some(due), _) => format!("delayed until {}", report::timestamp(due)),
                (3, _, n, _, _) => {
                    let lost = match m.lost() {
                        0 => String::new(),
                        l => format!(", {l} lost"),
                    };
                    let last = match history(&m).pop() {
                        Some(a) => format!("; the last {}", a.how()),
                        None => String::new(),
                    };
                    format!("dead after {n} failed attempts{lost}{last}")
                }
                (_, true, ..) => "queued (waiting sender)".to_string(),
                (_, false, 0, ..) => "queued".to_string(),
                (_, false, n, ..) => format!("queued ({n} failed)"),
            };
            let priority = match m.priority() {
                0 => String::new(),
                p => format!("  priority {p}"),
            };
            writeln!(
                out,
                "{}  {state}  {} bytes  {} old{priority}",
                m.id(),
                m.size,
                report::short_duration(m.age)
            )
        };
    })?;
    written.or_stdout()?;
    open(&mut out, &mut opened).or_stdout()?;
    let [count, _, delayed, dead] = counts;
    if a.json {
        move_to(&mut out, &mut section, ARRAYS.len()).or_stdout()?;
        let skipped: Vec<SkippedJson<'_>> = (skipped.iter())
            .map(|s| SkippedJson {
                name: &s.name,
                reason: &s.reason,
            })
            .collect();
        let skipped = serde_json::to_string(&skipped).expect("strings serialise");
        writeln!(
            out,
            ",\"count\":{count},\"claimed\":{claimed},\"skipped\":{skipped}}}"
        )
        .or_stdout()?;
    } else {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if claimed > 0 {
            writeln!(out, "{claimed} being received").or_stdout()?;
        }
        if delayed > 0 {
            writeln!(out, "{delayed} delayed message{}", plural(delayed)).or_stdout()?;
        }
        if dead > 0 {
            writeln!(out, "{dead} dead letter{}", plural(dead)).or_stdout()?;
        }
        writeln!(out, "{count} message{}", plural(count)).or_stdout()?;
    }
    Ok(Exit::OK)
}
