/*!
`fsync msg`: post durable messages, send synchronous ones, receive, list. The protocol (states
by rename, exactly-once claims, sender liveness) is in the library's `msg` module.
*/

use std::{ffi::OsString, io::Write, path::PathBuf};

use clap::{Args, Subcommand};

mod batch;
mod jobs;
mod kill;
mod list;
mod log;
mod progress;
mod watch;
mod work;
use fsync::Mailbox;
use serde::Serialize;

use super::{
    Exit, VerbResult,
    args::WaitArgs,
    escape::{Show, escaped},
    payload::{DataArg, check_output, copied},
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
                      to COMMAND's process group (it leads one of its own); a job ended that way \
                      goes back uncounted. A job that runs for its timeout (its own, 'post \
                      --job-timeout', else --job-timeout) or is cancelled ('fsync msg cancel') \
                      gets TERM with all it started, KILL after --grace: timed out, it counts as \
                      a failed attempt; cancelled, it is never tried again. With --retries N, \
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
                      even if COMMAND had succeeded: nobody was left to remove it). COMMAND's \
                      output, which fsync passes on and keeps in the mailbox (--output), then \
                      has no reader: COMMAND gets SIGPIPE at its next write of it (--output \
                      inherit if it must run on).",
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
                      'wait-empty' sees it. Jobs lead process groups of their own (a terminal's \
                      ^C reaches fsync alone), and are stopped on their timeout or cancel as \
                      'recv -- COMMAND' describes. Each job's standard output and error are kept in \
                      the mailbox ('fsync msg log BOX ID'; see --output); on a terminal a status \
                      line on stderr says how many jobs are done, failed, running and queued, \
                      how fast and until when. Each job has FSYNC_MSG_ID and FSYNC_MSG_ATTEMPT in \
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
                      'recv --retries' allows) back in the queue, their failed attempts, \
                      those lost with a killed receiver and their history forgotten: those numbered ID, or all of them. They keep their place, \
                      before the messages queued after them. Says on stderr, with -v, which \
                      were put back; an ID that is not a dead letter is not an error.",
        after_long_help = "Examples:\n  fsync msg list /shared/jobs        # dead letters are marked \"dead\"\n  \
            fsync msg retry /shared/jobs 42 57\n  fsync msg retry /shared/jobs        # all of them"
    )]
    Retry(RetryArgs),
    #[command(
        about = "Show where jobs are: queued, delayed, running, finished or dead",
        long_about = "Show where each job (message) ID is now, one line each: queued (since \
                      when), delayed until a time (or failed and waiting for its next attempt), \
                      running (host, process, attempt, since when), succeeded (when, how long \
                      the last attempt took, on which host), cancelled, or dead (how its last \
                      attempt ended). A finished job is known for as long as its record is \
                      kept ('work --keep', a day by default). Looks only where each ID can be, \
                      never at the whole queue. Exit 0; 66 if BOX is no mailbox or an ID is \
                      unknown (told on stderr, after the others are printed).",
        after_long_help = "Examples:\n  id=$(fsync msg post /shared/jobs --data 'rebuild index')\n  \
            fsync msg status /shared/jobs \"$id\"\n  \
            fsync msg status --json /shared/jobs 41 42 | jq -r .state"
    )]
    Status(jobs::StatusArgs),
    #[command(
        about = "Wait until jobs have finished, and tell how",
        long_about = "Wait until each job ID has finished (succeeded, cancelled, or dead after \
                      its retries), then print its status as 'status' does. Exit 0 if all \
                      succeeded; else the status of the first that did not: a dead job's last \
                      exit status (128+N if signal N killed it; 1 if its worker was lost), 1 \
                      for a cancelled one. 75 if --timeout passed first (their statuses then \
                      printed as they are), 66 if an ID is unknown. A job that finishes wakes it \
                      at once on a local file system.",
        after_long_help = "Examples:\n  id=$(fsync msg post /shared/jobs --data 'rebuild index')\n  \
            fsync msg wait -t 10m /shared/jobs \"$id\" && echo rebuilt"
    )]
    Wait(jobs::WaitArgsIds),
    #[command(
        about = "Cancel jobs: remove queued ones, stop running ones",
        long_about = "Cancel each job ID: a queued or delayed one is removed and never runs; a \
                      running one's worker, on whichever host, is asked to stop it (TERM to the \
                      job's process group, KILL after its grace period) and does, within its \
                      poll interval on a network file system; 'cancel' waits for that (up to \
                      --timeout). Either way it is recorded as cancelled and not tried again. \
                      Prints each job's status then. Exit 0; 75 if a running job was not \
                      stopped before --timeout; 66 if an ID is unknown.",
        after_long_help = "Examples:\n  fsync msg cancel /shared/jobs 42\n  \
            fsync msg cancel -t 30s /shared/jobs 42 43 44"
    )]
    Cancel(jobs::WaitArgsIds),
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
    #[command(
        about = "Print a job's output, kept in the mailbox",
        long_about = "Print what job ID wrote to its standard output and error (combined, in \
                      the order written), its latest attempt's, as 'msg work' and 'msg recv -- \
                      COMMAND' keep it in the mailbox (see their --output and --output-limit): \
                      byte for byte on standard output; a note on stderr if its start was not \
                      kept. With --follow, go on printing while the job is queued or running, \
                      and stop once it is neither. Nothing for a job that has no output yet; \
                      exit 66 for a job the mailbox does not know.",
        after_long_help = "Examples:\n  id=$(fsync msg post /shared/jobs --data 'make all')\n  \
            fsync msg log --follow /shared/jobs \"$id\"\n\n  \
            # the end of what a failed job said\n  fsync msg log /shared/jobs 42 | tail -20"
    )]
    Log(log::LogArgs),
    #[command(
        about = "Show what a mailbox is doing: queued, running jobs, rate, until a signal",
        long_about = "Show what the mailbox is doing until --timeout (then exit 0) or until \
                      interrupted by signal N (INT, TERM, HUP, QUIT; then exits 128+N): how many \
                      jobs are queued, running, delayed and dead, how fast jobs leave it (done \
                      or dead, per second since the watch began) and when it will be empty at \
                      that pace, and each running job: its id, the host and pid of the worker \
                      that runs it, its attempt, since when. A line (and one per running job) \
                      each time that changes, looked at once a second, or sooner after a change \
                      on this host; with --json, one object per look. Exit 66 if BOX is no \
                      mailbox.",
        after_long_help = "Examples:\n  fsync msg watch /shared/jobs\n  \
            fsync msg watch --json /shared/jobs | jq -c '{queued, running: (.running | length)}'"
    )]
    Watch(watch::WatchCmd),
}

/// A key for `post --key`: refused at parsing, as a usage error.
fn parse_key(s: &str) -> Result<String, String> {
    fsync::msg::check_key(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
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
    /// Print nothing on standard output (by default the message's id, once it is queued)
    #[arg(short, long)]
    quiet: bool,
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
    /// Priority level, 0 (the default) to 3: receivers take a message of a higher level before
    /// any of a lower one, and those of one level in the order they were posted
    #[arg(short, long, value_name = "N", default_value = "0",
          value_parser = clap::value_parser!(u8).range(0..=i64::from(fsync::msg::MAX_PRIORITY)))]
    priority: u8,
    /// Stop the job once it has run for DUR, whatever the worker's --job-timeout (TERM to its
    /// process group, KILL after the worker's --grace), a failed attempt
    #[arg(long, value_name = "DUR", value_parser = kill::parse_job_timeout)]
    job_timeout: Option<std::time::Duration>,
    #[command(flatten)]
    batch: batch::BatchArgs,
    #[command(flatten)]
    lock_wait: super::args::LockWaitArgs,
    /// Say what became of the message: its id, or the pending message with the same key
    #[arg(short, long)]
    verbose: bool,
    /// Print nothing on standard output (by default the message's id: with --key, the id of
    /// the pending message when it was not queued)
    #[arg(short, long)]
    quiet: bool,
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
    #[command(flatten)]
    job: kill::JobArgs,
    /// With COMMAND: keep the record of a finished job ('status', 'wait') this long; 0: none
    #[arg(long, value_name = "DUR", requires = "command", value_parser = super::duration::parse_duration, default_value = "1d")]
    keep: std::time::Duration,
    #[command(flatten)]
    output: log::OutputArgs,
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
    #[command(flatten)]
    job: kill::JobArgs,
    /// Keep the record of a finished job ('status', 'wait') this long; 0: none
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_duration, default_value = "1d")]
    keep: std::time::Duration,
    /// Re-check interval where other hosts cannot wake us (network file systems)
    #[arg(long, value_name = "DUR", value_parser = super::duration::parse_poll, default_value = "50ms")]
    poll: std::time::Duration,
    /// Say on stderr when each job starts and how it ended
    #[arg(short, long)]
    verbose: bool,
    #[command(flatten)]
    output: log::OutputArgs,
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
    /// One JSON object: {"path", "messages": [{"id", "name", "size", "since", "sync", "priority",
    /// "failed", "lost"}], "running" (messages being received, each with the "host", "pid",
    /// "attempt" and "taken" time of its worker), "delayed" (messages, each with its "due"
    /// time), "dead" (dead letters, as messages), "count", "claimed" (being received),
    /// "skipped": [{"name", "reason"}] (entries receivers pass over)}
    #[arg(long)]
    json: bool,
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

impl AttemptJson {
    /// "exited with status 3 on HOST pid 12 at T", for people.
    fn how(&self) -> String {
        let how = match (self.ended, self.status, self.signal) {
            (_, Some(n), _) => format!("exited with status {n}"),
            (_, _, Some(n)) => format!("was killed by signal {n}"),
            ("lost", ..) => "lost its worker".to_string(),
            ("timeout", ..) => "timed out".to_string(),
            _ => "failed".to_string(),
        };
        let (host, pid, at) = (escaped(&self.host), self.pid, &self.at);
        format!("{how} on {host} pid {pid} at {at}")
    }
}

impl From<fsync::msg::Attempt> for AttemptJson {
    fn from(a: fsync::msg::Attempt) -> AttemptJson {
        use fsync::msg::Ended;
        let (ended, status, signal) = match a.ended {
            Ended::Exited(n) => ("exit", Some(n), None),
            Ended::Signalled(n) => ("signal", None, Some(n)),
            Ended::Lost => ("lost", None, None),
            Ended::TimedOut => ("timeout", None, None),
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

pub(super) fn run(cmd: MsgCommand) -> VerbResult {
    match cmd.verb {
        Verb::Post(a) => a.lock_wait.ended(post(&a)),
        Verb::Send(a) => {
            let mailbox = Mailbox::new(&a.mailbox.mailbox)
                .poll_interval(a.wait.poll)
                .payload_mode(a.mode.mode);
            let place = a.mailbox.mailbox.shown();
            let what = format!("a receiver to take the message in {place}");
            let mut progress = Progress::new(&a.wait, what);
            let mut printed = Ok(());
            let outcome = mailbox.send_with_id(
                &mut a.data.reader(),
                a.wait.timeout(),
                |id| printed = print_id(a.quiet, id),
                |_| progress.waiting(),
            )?;
            printed?;
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
            let place = a.mailbox.mailbox.shown();
            let mut progress = Progress::new(&a.wait, format!("a message in {place}"));
            let queue = a.mailbox.mailbox.join("q");
            let outcome =
                mailbox.recv_with(a.wait.timeout(), Receiving::new(&mut progress, queue))?;
            let mut msg =
                progress.settle(outcome, |_| format!("received a message from {place}"))?;
            copied(msg.copy_to(&mut std::io::stdout().lock()))?;
            msg.finish()?;
            Ok(Exit::OK)
        }
        Verb::WaitEmpty(a) => {
            let mailbox = Mailbox::new(&a.mailbox.mailbox).poll_interval(a.wait.poll);
            let place = a.mailbox.mailbox.shown();
            let mut progress =
                Progress::new(&a.wait, format!("{place} to have nothing left to do"));
            let outcome = mailbox.wait_empty_with(a.wait.timeout(), |_| progress.waiting())?;
            progress.settle(outcome, |()| format!("{place} has nothing left to do"))?;
            Ok(Exit::OK)
        }
        Verb::Retry(a) => {
            let back = Mailbox::new(&a.mailbox.mailbox).retry(&a.ids)?;
            let place = a.mailbox.mailbox.shown();
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
        Verb::List(a) => list::list(&a),
        Verb::Status(a) => jobs::status(&a),
        Verb::Wait(a) => jobs::wait(&a),
        Verb::Cancel(a) => jobs::cancel(&a),
        Verb::Log(a) => log::log(&a),
        Verb::Watch(a) => watch::watch(&a),
    }
}

/// `msg post`: the message's id on standard output (unless `-q`), as scripts want it for
/// `status`, `wait`, `log` and `cancel`.
fn post(a: &PostArgs) -> VerbResult {
    let mut mailbox = Mailbox::new(&a.mailbox.mailbox)
        .payload_mode(a.mode.mode)
        .priority(a.priority);
    if let Some(delay) = a.delay {
        mailbox = mailbox.delay(delay);
    }
    if let Some(timeout) = a.job_timeout {
        mailbox = mailbox.job_timeout(timeout);
    }
    if let Some(timeout) = a.lock_wait.timeout() {
        mailbox = mailbox.lock_timeout(timeout);
    }
    if let Some(separator) = a.batch.separator() {
        return batch::post(&mailbox, &a.data, separator, a.quiet, a.verbose);
    }
    let place = a.mailbox.mailbox.shown();
    let id = |name: &str| name.split('.').next().map_or(0, |s| s.parse().unwrap_or(0));
    let reader = &mut a.data.reader();
    let (id, pending) = match &a.key {
        Some(key) => match mailbox.post_keyed(reader, key)? {
            fsync::msg::Keyed::Queued(name) => (id(&name), false),
            fsync::msg::Keyed::Pending(name) => (id(&name), true),
            _ => return Ok(Exit::OK),
        },
        None => (mailbox.post(reader)?, false),
    };
    print_id(a.quiet, id)?;
    report::say(a.verbose, || match (pending, &a.key) {
        (true, Some(key)) => {
            let key = escaped(key);
            format!("not queued: message {id} with key {key} is still pending in {place}")
        }
        _ => format!("queued message {id} in {place}"),
    });
    Ok(Exit::OK)
}

/// A message's id on standard output, one line, unless `quiet`.
fn print_id(quiet: bool, id: u64) -> Result<(), super::Failure> {
    if quiet {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{id}")
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// A failure to write a report to standard output.
fn stdout_error(e: std::io::Error) -> super::Failure {
    super::Failure::Lib(fsync::Error::io(
        std::path::Path::new("standard output"),
        "cannot write",
        e,
    ))
}

/// `msg recv BOX -- COMMAND`: the oldest message as a job, removed only if COMMAND succeeds.
fn recv_job(a: &RecvArgs) -> VerbResult {
    let mailbox = job_mailbox(&a.mailbox.mailbox, a.wait.poll, a.retries, a.job.backoff)
        .keep(a.keep)
        .job_output(a.output.job_output(log::OutputMode::Tee));
    let place = a.mailbox.mailbox.shown();
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
    let (exit, _) = run_job(msg, &a.command, &a.mailbox.mailbox, true, &a.job, |line| {
        progress.say(|| line);
    })?;
    Ok(exit)
}

/// The mailbox at `path` as jobs take it: `--poll`, `--retries`, `--backoff`.
fn job_mailbox(
    path: &std::path::Path,
    poll: std::time::Duration,
    retries: Option<u32>,
    backoff: Option<fsync::msg::Backoff>,
) -> Mailbox {
    let mut mailbox = Mailbox::new(path).poll_interval(poll);
    if let Some(retries) = retries {
        mailbox = mailbox.retries(retries);
    }
    mailbox.backoff_with(backoff.unwrap_or(DEFAULT_BACKOFF))
}

/// How long a failed job is held back after its first failure, unless `--backoff` says: then
/// twice as long after each failure, up to [`fsync::msg::MAX_BACKOFF`].
const DEFAULT_BACKOFF: fsync::msg::Backoff =
    fsync::msg::Backoff::doubling(std::time::Duration::from_secs(1), fsync::msg::MAX_BACKOFF);

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
    limits: &kill::JobArgs,
    mut say: impl FnMut(String),
) -> Result<(Exit, bool), super::Failure> {
    let (id, attempt) = (msg.id(), msg.attempt());
    let place = mailbox.shown();
    let job = super::child::Job {
        argv,
        env: vec![
            ("FSYNC_MSG_ID".to_string(), id.to_string()),
            ("FSYNC_MSG_ATTEMPT".to_string(), attempt.to_string()),
        ],
    };
    // The job holds the claim as we do: killed alone, we leave it to the job (module docs).
    let (exit, stopped) = kill::run_watched(&mut msg, &job, argv, forwarded, limits, mailbox)?;
    if stopped == Some(kill::Stopped::Lost) {
        // No longer ours, perhaps: what becomes of it is the next receiver's to say.
        drop(msg);
        say(format!(
            "message {id} of {place}: the claim on it was lost, the job stopped; the next \
             receiver takes it"
        ));
        return Ok((exit, false));
    }
    // Asked to be cancelled: not retried, even if it failed of something else meanwhile.
    if stopped == Some(kill::Stopped::Cancelled) || (exit != Exit::OK && msg.cancel_requested()) {
        msg.cancelled()?;
        say(format!("message {id} of {place}: cancelled"));
        return Ok((exit, false));
    }
    let cancelled = fsync::wait::last_received().is_some() && (forwarded || exit.signal.is_some());
    if let Some(kill::Stopped::TimedOut(after)) = stopped {
        let (became, dead) = failed_as(msg, fsync::msg::Ended::TimedOut)?;
        let timed_out = kill::timed_out(after);
        say(format!(
            "message {id} of {place}: {timed_out} (attempt {attempt}), {became}"
        ));
        return Ok((exit, dead));
    }
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
        let became;
        (became, dead) = failed_as(msg, ended)?;
        say(format!(
            "message {id} of {place}: failed with status {} (attempt {attempt}), {became}",
            exit.code
        ));
    }
    Ok((exit, dead))
}

/// Fail `msg` as `ended` says: what became of it, and whether it went to the dead letters.
fn failed_as(
    msg: fsync::msg::Received,
    ended: fsync::msg::Ended,
) -> Result<(&'static str, bool), super::Failure> {
    Ok(match msg.fail_as(ended)? {
        fsync::msg::Failed::Delayed => ("held back before its next attempt", false),
        fsync::msg::Failed::Dead => ("moved to the dead letters", true),
        _ => ("back to the queue", false),
    })
}
