/*!
`fsync msg`: post durable messages, send synchronous ones, receive, list. The protocol (states
by rename, exactly-once claims, sender liveness) is in the library's `msg` module.
*/

use std::{ffi::OsString, io::Write, path::PathBuf, time::SystemTime};

use clap::{Args, Subcommand};

mod batch;
mod work;
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
    /// The mailbox directory (post, send, recv and work create it if missing; list,
    /// wait-empty and retry never do, and exit 66 if it is no mailbox)
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
                      crashes later.\n\n\
                      With --lines (--null), each line (NUL-terminated record) of the input is a \
                      message of its own, and they are queued as one batch: after a crash at any \
                      instant, all of them or none. Their ids are printed one a line, in input \
                      order; one batch of 10,000 posts in about a second.",
        after_long_help = "Examples:\n  fsync msg post /shared/jobs --data 'rebuild index'\n  \
            tar c data | fsync msg post /shared/backups\n\n  \
            # One job per file, all queued or none\n  \
            find src -name '*.c' -print0 | fsync msg post /shared/jobs --null"
    )]
    Post(PostArgs),
    #[command(
        about = "Take the oldest message: write it out, or run COMMAND on it as a job",
        long_about = "Take the oldest message and write its payload, byte for byte, to standard \
                      output; exit 75 if none came before --timeout (-n: do not wait). See the \
                      description of 'fsync msg' for the delivery guarantee.\n\n\
                      With COMMAND (after --), the message is a job: COMMAND runs with the \
                      payload on its standard input and FSYNC_MSG_ID (the message's sequence \
                      number) and FSYNC_MSG_ATTEMPT (1 the first time) in its environment, and \
                      fsync exits with its status. The message is removed only when COMMAND \
                      exits 0. Otherwise it goes back to the queue, one more failed attempt \
                      counted, held back 1s after the first failure and twice as long after \
                      each one after, 5m at most (--backoff). INT, TERM and HUP are passed on \
                      to COMMAND; a job ended that way goes back uncounted. With --retries N, \
                      a message that failed N+1 times goes to the mailbox's dead letters \
                      instead ('fsync msg list' shows them, 'fsync msg retry' puts them back).\n\n\
                      COMMAND holds the message as fsync does (it inherits the descriptor that \
                      proves the claim alive, as 'mutex run' passes its lock down): no job is \
                      lost and none runs twice at once. Killed with its worker (SIGKILL to the \
                      process group, the OOM killer, a power loss), a job's message goes back \
                      to the queue at once, to a waiting receiver, counted as a lost attempt, \
                      not a failed one (a message lost N+3 times goes to the dead letters too). \
                      If fsync alone is killed, the message stays with COMMAND, and with \
                      anything COMMAND left running in the background with that descriptor, \
                      until they have exited; then it goes back to the queue (and runs again \
                      even if COMMAND had succeeded: nobody was left to remove it).",
        after_long_help = "Examples:\n  # A worker that goes on past failed jobs (^C stops it)\n  \
            while :; do fsync msg recv --retries 2 /shared/jobs -- ./run-job; done\n\n  \
            # Give up on a job after 3 tries\n  \
            fsync msg recv --retries 2 /shared/jobs -- sh -c 'xargs -0 make < /dev/stdin'\n\n  \
            # Take one if there is one, and print it\n  fsync msg recv -n /shared/jobs"
    )]
    Recv(RecvArgs),
    #[command(
        about = "Run the mailbox's messages as jobs, with N workers",
        long_about = "Take the mailbox's messages one after another as jobs, as 'recv -- COMMAND' \
                      takes one (removed only when COMMAND exits 0; a failed job goes back \
                      counted, or to the dead letters after --retries; no job is lost when a \
                      worker is killed), with N jobs running at once (-j). Workers wait for \
                      messages and go on until INT, TERM, HUP or QUIT arrives: then the running \
                      jobs finish (the signal is not passed on to them), no new job is taken, and \
                      fsync dies of that signal. With --until-empty they stop once the mailbox \
                      has nothing left to do (no message queued or delayed, no job running), as \
                      'wait-empty' sees it. Each job has FSYNC_MSG_ID and FSYNC_MSG_ATTEMPT in \
                      its environment, and holds its message as 'recv -- COMMAND' describes \
                      (a worker killed with its job gives the message back at once). Without \
                      --retries a job that always fails keeps coming back (held back up to 5m \
                      between tries), and --until-empty never ends: give --retries.\n\n\
                      Exit status: with --until-empty, 0 if every job it took succeeded in the \
                      end (retries included); else the status of the last job that went to the \
                      dead letters (128+N for one that died of signal N). 127 or 126 if \
                      COMMAND cannot be started (the message goes back uncounted, and the \
                      workers stop after their running jobs); an operational error's status \
                      otherwise.",
        after_long_help = "Examples:\n  # Four workers for good (a service), each job retried twice at most\n  \
            fsync msg work -j 4 --retries 2 /shared/jobs -- ./run-job\n\n  \
            # Build everything queued, two at a time, then stop\n  \
            fsync msg work -j 2 --until-empty --retries 2 -v /shared/jobs -- sh -c 'make \"$(cat)\"'"
    )]
    Work(WorkArgs),
    #[command(
        about = "Wait until nothing is queued, delayed or being received",
        long_about = "Wait until the mailbox has nothing left to do: no message queued or \
                      delayed, and none being received (a job that 'recv -- COMMAND' runs counts \
                      until it is done, and one whose worker died wakes it at once). Exit 0 \
                      then, 75 if --timeout passed first, 66 if BOX is no mailbox. Dead \
                      letters do not count. A job that finishes wakes it at once on a local \
                      file system.",
        after_long_help = "Examples:\n  # Queue the jobs, then wait until every worker is done with them\n  \
            for f in *.tex; do fsync msg post /shared/jobs --data \"$f\"; done\n  \
            fsync msg wait-empty /shared/jobs && echo all built"
    )]
    WaitEmpty(WaitEmptyArgs),
    #[command(
        about = "Put dead letters back in the queue",
        long_about = "Put the mailbox's dead letters (messages that failed as often as \
                      'recv --retries' allows) back in the queue, their failed attempts \
                      forgotten: those numbered ID, or all of them. They keep their place, \
                      before the messages queued after them. Says on stderr, with -v, which \
                      were put back; an ID that is not a dead letter is not an error.",
        after_long_help = "Examples:\n  fsync msg list /shared/jobs        # dead letters are marked \"dead\"\n  \
            fsync msg retry /shared/jobs 42 57\n  fsync msg retry /shared/jobs        # all of them"
    )]
    Retry(RetryArgs),
    #[command(
        about = "List the queued messages with their sizes and ages",
        long_about = "List the queued messages with their sizes and ages, oldest first, then \
                      the delayed ones (with when they are due) and the dead letters (with how \
                      their last attempt ended, on which host and process, and when). With \
                      --json, each message also has how every attempt that did not succeed \
                      ended: its exit status, the signal that killed it, or its worker lost.",
        after_long_help = "Examples:\n  fsync msg list /shared/jobs\n  fsync msg list --json /shared/jobs | jq .count\n  \
            # why did job 42 die?\n  \
            fsync msg list --json /shared/jobs | jq '.dead[] | select(.name | startswith(\"00000000000000000042.\")) | .attempts'"
    )]
    List(ListArgs),
}

/// A key for `post --key`: refused at parsing, as a usage error.
fn parse_key(s: &str) -> Result<String, String> {
    fsync::msg::check_key(s).map(|()| s.to_string())
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
    /// Deliver the message no sooner than DUR from now (it waits among the delayed messages
    /// that 'list' shows; once due, it comes before those queued after it)
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_duration)]
    delay: Option<std::time::Duration>,
    /// Do not queue the message while another posted with KEY is still queued, delayed or
    /// being received (exit 0 all the same; -v says which one): jobs that must not pile up
    #[arg(long, value_name = "KEY", value_parser = parse_key)]
    key: Option<String>,
    #[command(flatten)]
    batch: batch::BatchArgs,
    /// Print no id
    #[arg(short, long)]
    quiet: bool,
    /// Say what became of the message: its id, or the pending message with the same key
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Debug, Args)]
struct RecvArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    wait: WaitArgs,
    /// With COMMAND: after N+1 failed attempts of a job, move its message to the dead letters
    #[arg(long, value_name = "N", requires = "command")]
    retries: Option<u32>,
    /// With COMMAND: hold a failed job back DUR before its next attempt, twice as long after
    /// each failure, 5m at most; 0: not at all [default: 1s]
    #[arg(long, value_name = "DUR", requires = "command", value_parser = super::duration::parse_duration)]
    backoff: Option<std::time::Duration>,
    /// Run COMMAND on the message, as a job (after --): see above
    #[arg(
        id = "command",
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

/// How many workers `msg work -j` may run (each a thread of fsync's).
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(format!("invalid number of jobs '{s}': 1 to 64")),
    }
}

#[derive(Debug, Args)]
struct WorkArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// Run up to N jobs at once (1 to 64)
    #[arg(short = 'j', long, value_name = "N", default_value = "1", value_parser = parse_jobs)]
    jobs: usize,
    /// Stop once nothing is queued, delayed or being received
    #[arg(long)]
    until_empty: bool,
    /// After N+1 failed attempts of a job, move its message to the dead letters
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// Hold a failed job back DUR before its next attempt, twice as long after each failure,
    /// 5m at most; 0: not at all [default: 1s]
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_duration)]
    backoff: Option<std::time::Duration>,
    /// Re-check interval where other hosts cannot wake us (network file systems)
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_poll, default_value = "50ms")]
    poll: std::time::Duration,
    /// Say on stderr when each job starts and how it ended
    #[arg(short, long)]
    verbose: bool,
    /// The command each job runs (after --), the message on its standard input
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

#[derive(Debug, Args)]
struct WaitEmptyArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, Args)]
struct RetryArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// The dead letters to put back, by id (their sequence number: FSYNC_MSG_ID, the first
    /// field of their name) [default: all]
    #[arg(value_name = "ID")]
    ids: Vec<u64>,
    /// Say which were put back
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Debug, Args)]
struct ListArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// One JSON object: {"path", "messages": [{"name", "size", "since", "sync", "failed",
    /// "lost"}],
    /// "delayed" (messages, each with its "due" time), "dead" (dead letters, as messages),
    /// "count", "claimed" (being received), "skipped": [{"name", "reason"}] (entries receivers
    /// pass over)}
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
    /// Its deliveries that failed so far.
    failed: u32,
    /// Its deliveries lost with their worker.
    lost: u32,
    /// How its deliveries that did not succeed ended.
    attempts: Vec<AttemptJson>,
    /// When a delayed message is due (in `delayed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    due: Option<String>,
}

/// One delivery of a message that did not succeed (docs/json.md, `msg-attempt`).
#[derive(Serialize)]
struct AttemptJson {
    attempt: u32,
    ended: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    host: String,
    pid: u32,
    at: String,
}

impl From<fsync::msg::Attempt> for AttemptJson {
    fn from(a: fsync::msg::Attempt) -> AttemptJson {
        use fsync::msg::Ended;
        let (ended, status, signal) = match a.ended {
            Ended::Exited(n) => ("exit", Some(n), None),
            Ended::Signalled(n) => ("signal", None, Some(n)),
            Ended::Lost => ("lost", None, None),
            _ => ("failed", None, None),
        };
        AttemptJson {
            attempt: a.attempt,
            ended,
            status,
            signal,
            host: a.host,
            pid: a.pid,
            at: report::timestamp(a.at),
        }
    }
}

#[derive(Serialize)]
struct SkippedJson<'a> {
    name: &'a str,
    reason: &'a str,
}

pub(super) fn run(cmd: MsgCommand) -> VerbResult {
    match cmd.verb {
        Verb::Post(a) => {
            let mut mailbox = Mailbox::new(&a.mailbox.mailbox).payload_mode(a.mode.mode);
            if let Some(delay) = a.delay {
                mailbox = mailbox.delay(delay);
            }
            if let Some(separator) = a.batch.separator() {
                return batch::post(&mailbox, &a.data, separator, a.quiet, a.verbose);
            }
            let place = a.mailbox.mailbox.display();
            let id = |name: &str| name.split('.').next().map_or(0, |s| s.parse().unwrap_or(0));
            match &a.key {
                Some(key) => {
                    let outcome = mailbox.post_keyed(&mut a.data.reader(), key)?;
                    match Exit::unless_acquired(outcome, Exit::OK)? {
                        fsync::msg::Keyed::Queued(name) => report::say(a.verbose, || {
                            format!("queued message {} in {place}", id(&name))
                        }),
                        fsync::msg::Keyed::Pending(name) => report::say(a.verbose, || {
                            format!(
                                "not queued: message {} with key {key} is still pending in {place}",
                                id(&name)
                            )
                        }),
                        _ => {}
                    }
                }
                None => {
                    let name =
                        Exit::unless_acquired(mailbox.post(&mut a.data.reader())?, Exit::OK)?;
                    report::say(a.verbose, || {
                        format!("queued message {} in {place}", id(&name))
                    });
                }
            }
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
        Verb::Recv(a) if !a.command.is_empty() => recv_job(&a),
        Verb::Work(a) => work::work(&a),
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
        Verb::WaitEmpty(a) => {
            let mailbox = Mailbox::new(&a.mailbox.mailbox).poll_interval(a.wait.poll);
            let place = a.mailbox.mailbox.display();
            let mut progress =
                Progress::new(&a.wait, format!("{place} to have nothing left to do"));
            let outcome = mailbox.wait_empty_with(a.wait.timeout(), |_| progress.waiting())?;
            progress.settle(outcome, |()| format!("{place} has nothing left to do"))?;
            Ok(Exit::OK)
        }
        Verb::Retry(a) => {
            let back = Mailbox::new(&a.mailbox.mailbox).retry(&a.ids)?;
            let place = a.mailbox.mailbox.display();
            for id in &back {
                report::say(a.verbose, || {
                    format!("put message {id} back in the queue of {place}")
                });
            }
            report::say(a.verbose, || {
                let s = if back.len() == 1 { "" } else { "s" };
                format!("{} dead letter{s} put back", back.len())
            });
            Ok(Exit::OK)
        }
        Verb::List(a) => list(&a),
    }
}

/// `msg recv BOX -- COMMAND`: the oldest message as a job, removed only if COMMAND succeeds.
fn recv_job(a: &RecvArgs) -> VerbResult {
    let mailbox = job_mailbox(&a.mailbox.mailbox, a.wait.poll, a.retries, a.backoff);
    let place = a.mailbox.mailbox.display();
    let mut progress = Progress::new(&a.wait, format!("a message in {place}"));
    let queue = a.mailbox.mailbox.join("q");
    let outcome = mailbox.recv_with(a.wait.timeout(), Receiving::new(&mut progress, queue))?;
    let msg = progress.settle(outcome, |m| {
        format!(
            "received message {} from {place} (attempt {})",
            m.id(),
            m.attempt()
        )
    })?;
    let (exit, _) = run_job(msg, &a.command, &a.mailbox.mailbox, true, |line| {
        progress.say(|| line);
    })?;
    Ok(exit)
}

/// The mailbox at `path` as jobs take it: `--poll`, `--retries`, `--backoff`.
fn job_mailbox(
    path: &std::path::Path,
    poll: std::time::Duration,
    retries: Option<u32>,
    backoff: Option<std::time::Duration>,
) -> Mailbox {
    let mut mailbox = Mailbox::new(path).poll_interval(poll);
    if let Some(retries) = retries {
        mailbox = mailbox.retries(retries);
    }
    mailbox.backoff(backoff.unwrap_or(DEFAULT_BACKOFF))
}

/// How long a failed job is held back after its first failure, unless `--backoff` says: then
/// twice as long after each failure, up to [`fsync::msg::MAX_BACKOFF`].
const DEFAULT_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);

/// Run COMMAND on `msg` as a job and settle the message: removed if COMMAND exits 0; back to
/// the queue uncounted if a cancellation signal ended it (with `forwarded`, the signal was
/// passed on to COMMAND, so any failure after one counts as cancelled; without, as `msg work`
/// runs jobs, only a death by a signal, which a terminal's ^C sends the job too); otherwise
/// failed (counted: back, held back, or to the dead letters). `say` tells what became of it.
/// A command that cannot be started is no failed attempt: the message goes back as it was.
/// Returns COMMAND's status, and whether the message went to the dead letters.
fn run_job(
    mut msg: fsync::msg::Received,
    argv: &[OsString],
    mailbox: &std::path::Path,
    forwarded: bool,
    mut say: impl FnMut(String),
) -> Result<(Exit, bool), super::Failure> {
    let (id, attempt) = (msg.id(), msg.attempt());
    let place = mailbox.display();
    let job = super::child::Job {
        argv,
        env: vec![
            ("FSYNC_MSG_ID".to_string(), id.to_string()),
            ("FSYNC_MSG_ATTEMPT".to_string(), attempt.to_string()),
        ],
    };
    // The job holds the claim as we do: killed alone, we leave it to the job (module docs).
    let exit = job.run_spawned(|| match forwarded {
        true => msg.spawn(argv, &job.env),
        false => msg.spawn_job(argv, &job.env),
    })?;
    let cancelled = fsync::wait::last_received().is_some() && (forwarded || exit.signal.is_some());
    if exit == Exit::OK {
        msg.finish()?;
        say(format!("message {id} of {place}: done"));
        return Ok((exit, false));
    }
    let mut dead = false;
    if cancelled {
        drop(msg);
        say(format!(
            "message {id} of {place}: back to the queue uncounted, the job was cancelled by a \
             signal"
        ));
    } else {
        let ended = match exit.signal {
            Some(signal) => fsync::msg::Ended::Signalled(signal),
            None => fsync::msg::Ended::Exited(exit.code.into()),
        };
        let became = match msg.fail_as(ended)? {
            fsync::msg::Failed::Delayed => "held back before its next attempt",
            fsync::msg::Failed::Dead => {
                dead = true;
                "moved to the dead letters"
            }
            _ => "back to the queue",
        };
        say(format!(
            "message {id} of {place}: failed with status {} (attempt {attempt}), {became}",
            exit.code
        ));
    }
    Ok((exit, dead))
}

/// `msg list`: each message printed as it is found, so that a queue of any depth is listed in
/// the memory of a few; with `--json`, one object whose `messages` are written one by one.
fn list(a: &ListArgs) -> VerbResult {
    use fsync::msg::Entry;
    let mailbox = Mailbox::new(&a.mailbox.mailbox);
    let mut out = std::io::stdout().lock();
    let mut written: std::io::Result<()> = Ok(());
    // Messages, then delayed ones, then dead letters: in JSON an array each, written as the
    // listing reaches them; `section` is the array open now, `counts` the entries of each.
    const ARRAYS: [&str; 3] = ["messages", "delayed", "dead"];
    let mut section = 0;
    let mut counts = [0usize; 3];
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
                        first| {
        let json = MessageJson {
            name: &m.name,
            size: m.size,
            since: report::timestamp(now.checked_sub(m.age).unwrap_or(now)),
            sync: m.sync,
            failed: m.failed(),
            lost: m.lost(),
            attempts: history(m),
            due: due.map(report::timestamp),
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
        let (at, m, due) = match entry {
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
            Entry::Queued(m) => (0, m, None),
            Entry::Delayed { message, due } => (1, message, Some(due)),
            Entry::Dead(m) => (2, m, None),
            _ => return,
        };
        counts[at] += 1;
        written = if a.json {
            move_to(&mut out, &mut section, at)
                .and_then(|()| json_message(&mut out, &m, due, counts[at] == 1))
        } else {
            let state = match (at, m.sync, m.failed(), due) {
                (1, _, _, Some(due)) => format!("  delayed until {}", report::timestamp(due)),
                (2, _, n, _) => {
                    let lost = match m.lost() {
                        0 => String::new(),
                        l => format!(", {l} lost"),
                    };
                    let last = match history(&m).pop() {
                        Some(a) => {
                            let how = match (a.ended, a.status, a.signal) {
                                (_, Some(n), _) => format!("exited with status {n}"),
                                (_, _, Some(n)) => format!("was killed by signal {n}"),
                                ("lost", ..) => "lost its worker".to_string(),
                                _ => "failed".to_string(),
                            };
                            format!("; the last {how} on {} pid {} at {}", a.host, a.pid, a.at)
                        }
                        None => String::new(),
                    };
                    format!("  dead after {n} failed attempts{lost}{last}")
                }
                (_, true, _, _) => " (waiting sender)".to_string(),
                (_, false, 0, _) => String::new(),
                (_, false, n, _) => format!(" ({n} failed)"),
            };
            writeln!(
                out,
                "{}  {} bytes  {} old{state}",
                escaped(&m.name),
                m.size,
                report::short_duration(m.age)
            )
        };
    })?;
    written?;
    open(&mut out, &mut opened)?;
    let [count, delayed, dead] = counts;
    if a.json {
        move_to(&mut out, &mut section, ARRAYS.len())?;
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
        )?;
    } else {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if claimed > 0 {
            writeln!(out, "{claimed} being received")?;
        }
        if delayed > 0 {
            writeln!(out, "{delayed} delayed message{}", plural(delayed))?;
        }
        if dead > 0 {
            writeln!(out, "{dead} dead letter{}", plural(dead))?;
        }
        writeln!(out, "{count} message{}", plural(count))?;
    }
    Ok(Exit::OK)
}
