/*!
`fsync msg`: post durable messages, send synchronous ones, receive, list. The protocol (states
by rename, exactly-once claims, sender liveness) is in the library's `msg` module.
*/

use std::{io::Write, path::PathBuf, time::SystemTime};

use clap::{Args, Subcommand};
use fsync::Mailbox;
use serde::Serialize;

use super::{
    Exit, VerbResult,
    args::WaitArgs,
    escape::escaped,
    payload::{DataArg, check_output, output_error},
    report::{self, Progress},
};

/// What a receiver says: the `-v` waiting line, and a warning for each entry of the queue
/// (`queue`) it passes over.
pub(super) struct Receiving<'p, 'a> {
    progress: &'p mut Progress<'a>,
    queue: PathBuf,
}

impl<'p, 'a> Receiving<'p, 'a> {
    pub(super) fn new(progress: &'p mut Progress<'a>, queue: PathBuf) -> Self {
        Receiving { progress, queue }
    }
}

impl fsync::msg::Report for Receiving<'_, '_> {
    fn waiting(&mut self, _: std::time::Duration) {
        self.progress.waiting();
    }

    fn skipped(&mut self, entry: &fsync::msg::Skipped) {
        let path = self.queue.join(&entry.name);
        report::warn(&path, &format!("{}; skipped", entry.reason));
    }
}

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Mailboxes: durable and synchronous messages, received exactly once";

/// The description of `fsync msg --help`.
pub(super) const LONG: &str = "\
A mailbox BOX is a directory of queued messages (created if missing). Each message goes to \
exactly one receiver, however many compete, in the order queued. 'post' queues durably and \
returns; 'send' returns only once a receiver has taken the message, and a message whose sender \
gave up (timeout) or died is never delivered.

Delivery is exactly once, with one exception: a receiver killed after writing the payload out \
but before removing the message leaves it to be delivered again (at least once for crashed \
receivers). A receiver killed earlier loses nothing: its claim returns to the queue.";

#[derive(Debug, Args)]
pub(crate) struct MsgCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Args)]
struct BoxArg {
    /// The mailbox directory (post, send and recv create it if missing; list never does)
    #[arg(value_name = "BOX")]
    mailbox: PathBuf,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Send a message and wait until a receiver has taken it",
        long_about = "Queue a message and wait until a receiver has taken it (exit 0). On \
                      timeout (exit 75) or a signal the message is withdrawn and never delivered; \
                      if fsync is killed, receivers discard it.",
        after_long_help = "Examples:\n  # Hand a job to a worker; fail if none takes it within 30s\n  \
            fsync msg send -t 30s /shared/jobs --data 'rebuild index'\n\n  \
            # Binary payloads from standard input\n  fsync msg send /shared/jobs < job.tar"
    )]
    Send(SendArgs),
    #[command(
        about = "Queue a message durably and return at once",
        long_about = "Queue a message durably: when 'post' exits 0 the whole message is on disk \
                      (file and directory flushed) and will be received exactly once, whatever \
                      crashes later.",
        after_long_help = "Examples:\n  fsync msg post /shared/jobs --data 'rebuild index'\n  \
            tar c data | fsync msg post /shared/backups"
    )]
    Post(PostArgs),
    #[command(
        about = "Take the oldest message and write its payload to standard output",
        long_about = "Take the oldest message and write its payload, byte for byte, to standard \
                      output; exit 75 if none came before --timeout (-n: do not wait). See the \
                      description of 'fsync msg' for the delivery guarantee.",
        after_long_help = "Examples:\n  # A worker loop\n  \
            while fsync msg recv /shared/jobs > job; do ./run-job job; done\n\n  \
            # Take one if there is one\n  fsync msg recv -n /shared/jobs"
    )]
    Recv(RecvArgs),
    #[command(
        about = "List the queued messages with their sizes and ages",
        after_long_help = "Examples:\n  fsync msg list /shared/jobs\n  fsync msg list --json /shared/jobs | jq .count"
    )]
    List(ListArgs),
}

/// Permissions of a payload file, in octal.
fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s.trim_start_matches("0o"), 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(format!(
            "invalid mode '{s}': octal permissions such as 0640 or 0644"
        )),
    }
}

#[derive(Debug, Args)]
struct ModeArg {
    /// Permissions of the payload file (octal, less the umask); the default keeps messages
    /// from users outside the owner's group
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode, default_value = "0640")]
    mode: u32,
}

#[derive(Debug, Args)]
struct SendArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    data: DataArg,
    #[command(flatten)]
    mode: ModeArg,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, Args)]
struct PostArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    data: DataArg,
    #[command(flatten)]
    mode: ModeArg,
}

#[derive(Debug, Args)]
struct RecvArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, Args)]
struct ListArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// One JSON object: {"path", "count", "messages": [{"name", "size", "since", "sync"}],
    /// "claimed" (being received), "skipped": [{"name", "reason"}] (entries receivers pass over)}
    #[arg(long)]
    json: bool,
}

/// A message of `fsync msg list --json` (docs/json.md, `msg-message`). The object around them
/// (`msg-list`) is written by hand, a message at a time ([`list`]).
#[derive(Serialize)]
struct MessageJson<'a> {
    name: &'a str,
    /// Bytes.
    size: u64,
    /// When it was queued (the payload file's modification time).
    since: String,
    /// A synchronous message whose sender waits for it.
    sync: bool,
}

#[derive(Serialize)]
struct SkippedJson<'a> {
    name: &'a str,
    reason: &'a str,
}

pub(super) fn run(cmd: MsgCommand) -> VerbResult {
    match cmd.verb {
        Verb::Post(a) => {
            let outcome = Mailbox::new(&a.mailbox.mailbox)
                .payload_mode(a.mode.mode)
                .post(&mut a.data.reader())?;
            Exit::unless_acquired(outcome, Exit::OK)?;
            Ok(Exit::OK)
        }
        Verb::Send(a) => {
            let mailbox = Mailbox::new(&a.mailbox.mailbox)
                .poll_interval(a.wait.poll)
                .payload_mode(a.mode.mode);
            let place = a.mailbox.mailbox.display();
            let what = format!("a receiver to take the message in {place}");
            let mut progress = Progress::new(&a.wait, what);
            let outcome = mailbox.send_with(&mut a.data.reader(), a.wait.timeout(), |_| {
                progress.waiting();
            })?;
            match progress.settle(outcome, |()| {
                format!("a receiver took the message in {place}")
            }) {
                Ok(()) => Ok(Exit::OK),
                Err(exit) => {
                    progress.say(|| "the message was withdrawn: no receiver will get it".into());
                    Ok(exit)
                }
            }
        }
        Verb::Recv(a) => {
            check_output()?;
            let mailbox = Mailbox::new(&a.mailbox.mailbox).poll_interval(a.wait.poll);
            let place = a.mailbox.mailbox.display();
            let mut progress = Progress::new(&a.wait, format!("a message in {place}"));
            let queue = a.mailbox.mailbox.join("q");
            let outcome =
                mailbox.recv_with(a.wait.timeout(), Receiving::new(&mut progress, queue))?;
            let mut msg =
                progress.settle(outcome, |_| format!("received a message from {place}"))?;
            if let Err(e) = msg.copy_to(&mut std::io::stdout().lock()) {
                return match fsync::wait::cancelled() {
                    Some(s) => Ok(Exit::signal(s)), // dropped: back to the queue
                    None => Err(output_error(e)),
                };
            }
            msg.finish()?;
            Ok(Exit::OK)
        }
        Verb::List(a) => list(&a),
    }
}

/// `msg list`: each message printed as it is found, so that a queue of any depth is listed in
/// the memory of a few; with `--json`, one object whose `messages` are written one by one.
fn list(a: &ListArgs) -> VerbResult {
    let mailbox = Mailbox::new(&a.mailbox.mailbox);
    let mut out = std::io::stdout().lock();
    let mut written: std::io::Result<()> = Ok(());
    let mut count = 0usize;
    let mut skipped = Vec::new();
    let now = SystemTime::now();
    if a.json {
        let path = serde_json::to_string(&report::path_text(&a.mailbox.mailbox))
            .expect("a string serialises");
        written = write!(out, "{{\"path\":{path},\"messages\":[");
    }
    let claimed = mailbox.scan(|entry| {
        if written.is_err() {
            return;
        }
        written = match entry {
            fsync::msg::Entry::Queued(m) if a.json => {
                let comma = if count > 0 { "," } else { "" };
                count += 1;
                let since = report::timestamp(now.checked_sub(m.age).unwrap_or(now));
                let json = MessageJson {
                    name: &m.name,
                    size: m.size,
                    since,
                    sync: m.sync,
                };
                write!(out, "{comma}").and_then(|()| Ok(serde_json::to_writer(&mut out, &json)?))
            }
            fsync::msg::Entry::Queued(m) => {
                count += 1;
                // Names are another user's choice: escaped, so that none forges a line.
                let kind = if m.sync { " (waiting sender)" } else { "" };
                writeln!(
                    out,
                    "{}  {} bytes  {} old{kind}",
                    escaped(&m.name),
                    m.size,
                    report::short_duration(m.age)
                )
            }
            fsync::msg::Entry::Skipped(s) if a.json => {
                skipped.push(s);
                Ok(())
            }
            fsync::msg::Entry::Skipped(s) => {
                let (name, reason) = (escaped(&s.name), escaped(&s.reason));
                writeln!(out, "{name}  skipped: {reason}")
            }
            _ => Ok(()),
        };
    })?;
    written?;
    if a.json {
        let skipped: Vec<SkippedJson<'_>> = (skipped.iter())
            .map(|s| SkippedJson {
                name: &s.name,
                reason: &s.reason,
            })
            .collect();
        let skipped = serde_json::to_string(&skipped).expect("strings serialise");
        writeln!(
            out,
            "],\"count\":{count},\"claimed\":{claimed},\"skipped\":{skipped}}}"
        )?;
    } else {
        if claimed > 0 {
            writeln!(out, "{claimed} being received")?;
        }
        writeln!(out, "{count} message{}", if count == 1 { "" } else { "s" })?;
    }
    Ok(Exit::OK)
}
