/*!
`fsync bus`: named participants exchanging messages on a shared directory. The
protocol is in the library's `bus` module; each participant is a mailbox.
*/

use crate::cli::OrStdout;
use std::{ffi::OsString, io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::{
    Bus,
    bus::{Connected, Disconnected, Participant, ParticipantState},
};
use serde::Serialize;

use super::{
    Exit, Failure, VerbResult,
    args::{CommandArgs, LockWaitArgs, WaitArgs},
    child::LossArgs,
    escape::{Show, escaped},
    payload::{DataArg, check_output, copied, output_error},
    report::{self, Progress, say},
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str = "Message bus: named participants on a shared directory";

/// The description of `fsync bus --help`.
pub(super) const LONG: &str = "\
A bus is a directory on which named participants connect, send each other messages and \
broadcast to all (a bus for processes on machines sharing a network directory). Each \
participant has a mailbox: messages to it are received exactly once, in the order sent, and a \
message is never visible half-written. Participant names are letters (of any alphabet), \
digits, '_', '-' and '.', up to 100 bytes in UTF-8; '.' neither first nor last, and names \
beginning with 'fsync.' are fsync's own (build-3.example and сервер-1 are names; .x, x. and \
../x are not).

A name connected with 'connect --hold BUS NAME -- COMMAND' is held: it stays connected exactly \
as long as COMMAND runs, and nobody else can connect or disconnect it meanwhile. If the holder \
dies without disconnecting (fsync and COMMAND killed), the name is stale: 'members' says so, \
'send' refuses it, 'broadcast' skips it, and the next 'connect' takes it over with the messages \
queued for it.";

#[derive(Debug, Args)]
pub(crate) struct BusCommand {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Args)]
struct Member {
    /// The bus directory: created by 'connect' if missing
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The participant (a name the library checks: a bad one is refused naming BUS, with the
    /// name escaped, exit status 2)
    #[arg(value_name = "NAME")]
    name: String,
}

#[derive(Debug, Args)]
struct DisconnectArgs {
    #[command(flatten)]
    member: Member,
    #[command(flatten)]
    lock_wait: LockWaitArgs,
}

/// The bus at `path`, its short waits limited as asked.
fn bus_at(path: &std::path::Path, lock_wait: &LockWaitArgs) -> Bus {
    let bus = Bus::new(path);
    match lock_wait.timeout() {
        Some(timeout) => bus.lock_timeout(timeout),
        None => bus,
    }
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Connect NAME to BUS, or hold it while COMMAND runs (--hold)",
        long_about = CONNECT_LONG,
        after_long_help = CONNECT_EXAMPLES,
        override_usage = "fsync bus connect [OPTIONS] <BUS> <NAME>\n       \
                          fsync bus connect --hold [OPTIONS] <BUS> <NAME> <COMMAND>...\n       \
                          fsync bus connect --hold [OPTIONS] <BUS> <NAME> -c <CMDSTRING>"
    )]
    Connect(ConnectArgs),
    #[command(
        about = "Disconnect NAME from BUS (its directory is hidden as .NAME)",
        long_about = "Disconnect NAME from BUS: its directory is hidden as .NAME, nobody can send \
                      to it any more, and the messages queued for it are discarded when the name \
                      connects again. A held name (connect --hold) cannot be disconnected by \
                      others: it disconnects itself when its COMMAND exits (exit status 69 \
                      meanwhile). A stale one can.",
        after_long_help = "Examples:\n  fsync bus disconnect /shared/bus builder-1"
    )]
    Disconnect(DisconnectArgs),
    #[command(
        about = "List the connected participants, held and stale ones marked",
        long_about = "List the connected participants, one a line, sorted by name: NAME alone for \
                      a plain connection, 'NAME held by pid P ...' for one a living holder has \
                      (connect --hold: pid, command pid, host, command, since), 'NAME stale: its \
                      holder died (...)' for one whose holder died without disconnecting. The \
                      first word of each line is the name.",
        after_long_help = "Examples:\n  fsync bus members /shared/bus\n  \
            fsync bus members --json /shared/bus | jq -r '.members[] | select(.state == \"stale\") | .name'"
    )]
    Members(MembersArgs),
    #[command(
        about = "Send a message to one participant (an error if it is not connected, or stale)",
        after_long_help = "Examples:\n  fsync bus send /shared/bus --from ci --to builder-1 --data 'build 42'"
    )]
    Send(SendArgs),
    #[command(
        about = "Send one copy to every other connected participant (stale ones skipped)",
        after_long_help = "Examples:\n  fsync bus broadcast /shared/bus --from ci --data 'shutting down at 18:00'"
    )]
    Broadcast(BroadcastArgs),
    #[command(
        about = "Take the oldest message for NAME; payload to standard output",
        long_about = "Take the oldest message for NAME and write its payload to standard output, \
                      or with --json one object {\"from\", \"data\"} (\"data_b64\", base64, when \
                      the payload is not UTF-8). Exit 75 if none came before --timeout.",
        after_long_help = "Examples:\n  fsync bus recv -t 1m /shared/bus builder-1\n  \
            fsync bus recv --json /shared/bus builder-1 | jq -r .from"
    )]
    Recv(RecvArgs),
}

const CONNECT_LONG: &str = "\
Connect NAME to BUS (created if missing): from now on others can send to NAME, and NAME can \
receive. A plain connection lasts until 'fsync bus disconnect'. Connecting a name that is \
connected already changes nothing and exits 0 (-v says so); a name a living holder has is \
refused.

With --hold, NAME is connected exactly as long as COMMAND runs, and fsync exits with COMMAND's \
exit status: it connects NAME, runs COMMAND, and disconnects NAME when COMMAND exits. \
Meanwhile nobody else can connect or disconnect NAME: they fail with exit status 69 and \
'fsync: BUS/NAME: already connected by pid P (COMMAND)'. Everything from the first word after \
NAME on is COMMAND's; options go before it. -c CMDSTRING runs 'sh -c CMDSTRING' instead. \
Signals are forwarded to COMMAND as with 'fsync mutex run'.

The hold is a lock on BUS/NAME/owner, which also records who holds it; it is passed down to \
COMMAND as 'fsync mutex run' passes its lock, so NAME stays held while COMMAND, or anything it \
left running with the lock inherited, runs, even if fsync itself is killed (once they have \
exited, nobody disconnects it: it is stale). --close does not pass it down: NAME is held only while fsync \
lives.

A holder that dies without disconnecting (fsync and COMMAND killed) leaves NAME stale: still \
connected, with its messages, but 'send' to it fails and 'broadcast' skips it. The next \
'connect' of NAME, plain or --hold, takes it over and keeps the queued messages, so a \
restarted service gets its backlog; of several at once, exactly one does. --hold refuses a name \
connected without a holder (disconnect it first).";

const CONNECT_EXAMPLES: &str = "\
Examples:
  # A participant that stays connected until 'fsync bus disconnect'
  fsync bus connect /shared/bus builder-1

  # A service that owns its name while it runs; a second copy is refused, and after a crash
  # the restarted service takes the name over with the messages that came meanwhile
  fsync bus connect --hold /shared/bus indexer -- ./indexer --bus /shared/bus

  # A receiver loop that owns its name, as a command string
  fsync bus connect --hold /srv/bus log -c 'while fsync bus recv /srv/bus log; do :; done'";

#[derive(Debug, Args)]
#[command(
    group(clap::ArgGroup::new("to_run").args(["command", "command_string"])),
    mut_arg("on_lost", |arg| arg.requires("hold")),
    mut_arg("lease", |arg| arg.requires("hold")),
    mut_arg("command", |arg| {
        arg.required(false).requires("hold").help(
            "With --hold: the command to run while NAME is held, and its arguments; everything \
             from the first word after NAME on belongs to COMMAND ('--' before it is accepted too)",
        )
    })
)]
struct ConnectArgs {
    #[command(flatten)]
    member: Member,

    /// Hold NAME while COMMAND runs: nobody else can connect or disconnect it meanwhile, and it
    /// is disconnected when COMMAND exits
    #[arg(long, requires = "to_run")]
    hold: bool,

    /// Do not pass the hold down to COMMAND's processes (flock -o): NAME is held only while
    /// fsync lives
    #[arg(short = 'o', long, requires = "hold")]
    close: bool,

    /// Run CMDSTRING with 'sh -c' instead of COMMAND (with --hold)
    #[arg(
        short = 'c',
        long = "command",
        value_name = "CMDSTRING",
        conflicts_with = "command",
        requires = "hold"
    )]
    command_string: Option<OsString>,

    /// Say on stderr what happened: connected, connected already, taken over from a holder
    /// that died; with --hold, also the disconnection
    #[arg(short, long)]
    verbose: bool,

    #[command(flatten)]
    loss: LossArgs,

    #[command(flatten)]
    lock_wait: LockWaitArgs,

    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
struct MembersArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// One JSON object: {"path", "count", "members": [{"name", "state", "holder", "pending"}]}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SendArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The sending participant (must be connected)
    #[arg(long, value_name = "NAME")]
    from: String,
    /// The receiving participant (must be connected)
    #[arg(long, value_name = "NAME")]
    to: String,
    #[command(flatten)]
    data: DataArg,
    #[command(flatten)]
    lock_wait: LockWaitArgs,
}

// A broadcast never gives up as a whole: its -t skips a receiver whose lock is held.
#[derive(Debug, Args)]
#[command(
    mut_arg("conflict_exit_code", |arg| arg.hide(true)),
    mut_arg("timeout", |arg| arg.help(
        "Skip a receiver whose lock another process holds for longer than DUR (in a directory \
         others may write, they can hold it for ever) [default: wait for ever]"
    )),
    mut_arg("no_wait", |arg| arg.help("Same as --timeout 0")),
)]
struct BroadcastArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The sending participant (must be connected; gets no copy)
    #[arg(long, value_name = "NAME")]
    from: String,
    #[command(flatten)]
    data: DataArg,
    #[command(flatten)]
    lock_wait: LockWaitArgs,
}

#[derive(Debug, Args)]
struct RecvArgs {
    #[command(flatten)]
    member: Member,
    /// One JSON object {"from", "data"} (or "data_b64") instead of the raw payload
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    wait: WaitArgs,
}

/// `fsync bus members --json` (docs/json.md, `bus-members`).
#[derive(Serialize)]
struct MembersJson<'a> {
    path: String,
    count: usize,
    members: Vec<MemberJson<'a>>,
}

#[derive(Serialize)]
struct MemberJson<'a> {
    name: &'a str,
    state: StateJson,
    /// Who holds it (held) or held it (stale); `None` for a plain connection or where unknown.
    holder: Option<report::HolderJson<'a>>,
    /// Messages queued for it; `None` where its mailbox cannot be read.
    pending: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum StateJson {
    Connected,
    Held,
    Stale,
}

impl From<ParticipantState> for StateJson {
    fn from(s: ParticipantState) -> StateJson {
        match s {
            ParticipantState::Connected => StateJson::Connected,
            ParticipantState::Held => StateJson::Held,
            ParticipantState::Stale => StateJson::Stale,
            // A state a later library names: shown as what holds nothing.
            _ => StateJson::Connected,
        }
    }
}

/// `fsync bus recv --json` (docs/json.md, `bus-recv`).
#[derive(Serialize)]
struct ReceivedJson<'a> {
    /// The sender, where the message names one.
    from: Option<&'a str>,
    #[serde(flatten)]
    payload: Payload,
}

/// The payload as text (`data`) if it is UTF-8, else in base64 (`data_b64`).
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Payload {
    Data(String),
    DataB64(String),
}

pub(super) fn run(cmd: BusCommand) -> VerbResult {
    match cmd.verb {
        Verb::Connect(a) => {
            let lock_wait = a.lock_wait.clone();
            lock_wait.ended(connect(a))
        }
        Verb::Disconnect(a) => {
            let m = &a.member;
            let left = unless_cancelled(bus_at(&m.bus, &a.lock_wait).disconnect(&m.name));
            a.lock_wait.ended(left.map(|()| Exit::OK))
        }
        Verb::Members(a) => members(a),
        Verb::Send(a) => {
            let sent = bus_at(&a.bus, &a.lock_wait).send(&a.from, &a.to, a.data.reader());
            a.lock_wait
                .ended(sent.map(|()| Exit::OK).map_err(Failure::from))
        }
        Verb::Broadcast(a) => {
            bus_at(&a.bus, &a.lock_wait).broadcast(&a.from, a.data.reader())?;
            Ok(Exit::OK)
        }
        Verb::Recv(a) => {
            check_output()?;
            let bus = Bus::new(&a.member.bus).poll_interval(a.wait.poll);
            let what = format!(
                "a message for {} on {}",
                escaped(&a.member.name),
                a.member.bus.shown()
            );
            let mut progress = Progress::new(&a.wait, what.clone());
            let queue = a.member.bus.join(&a.member.name).join("q");
            let receiving = super::msg::Receiving::new(&mut progress, queue);
            let outcome = bus.recv_with(&a.member.name, a.wait.timeout(), receiving)?;
            let from = |m: &fsync::Received| match &m.from {
                Some(sender) => format!("received {what} from {}", escaped(sender)),
                None => format!("received {what}"),
            };
            let mut msg = progress.settle(outcome, from)?;
            let mut out = std::io::stdout().lock();
            if a.json {
                let mut data = Vec::new();
                copied(msg.copy_to(&mut data))?;
                let payload = match String::from_utf8(data) {
                    Ok(text) => Payload::Data(text),
                    Err(e) => Payload::DataB64(base64(e.as_bytes())),
                };
                let line = ReceivedJson {
                    from: msg.from.as_deref(),
                    payload,
                };
                report::print_json(&mut out, &line)
                    .and_then(|()| out.flush())
                    .map_err(output_error)?;
            } else {
                copied(msg.copy_to(&mut out))?;
            }
            msg.finish()?;
            Ok(Exit::OK)
        }
    }
}

/// A library error, or the death by its signal of a wait for the bus lock that a cancellation
/// signal ended (the library says so with an error; [`fsync::wait::cancelled`] names it).
fn unless_cancelled<T>(result: fsync::Result<T>) -> Result<T, Failure> {
    result.map_err(|e| match fsync::wait::cancelled() {
        Some(sig) => Failure::Ended(Exit::signal(sig)),
        None => e.into(),
    })
}

/// ", from its holder that died (pid 12 on host: cmd, since ...)"
fn took_over_from(holder: Option<&fsync::holder::Holder>) -> String {
    match holder {
        Some(h) => format!(" from its holder that died ({})", report::holder_text(h)),
        None => " from its holder that died".to_string(),
    }
}

fn connect(mut a: ConnectArgs) -> VerbResult {
    let bus = bus_at(&a.member.bus, &a.lock_wait);
    let name = &a.member.name;
    let (who, shown) = (escaped(name), a.member.bus.shown());
    if !a.hold {
        let how = unless_cancelled(bus.connect(name))?;
        say(a.verbose, || match how {
            Connected::New => format!("connected {who} to {shown}"),
            Connected::Already => {
                format!(
                    "{who} was connected to {shown} already (without a holder): nothing changed"
                )
            }
            Connected::TookOver { holder } => format!(
                "took over {who} on {shown}{}, with the messages queued for it",
                took_over_from(holder.as_ref())
            ),
            _ => format!("connected {who} to {shown}"),
        });
        return Ok(Exit::OK);
    }
    if let Some(cmdstring) = a.command_string.take() {
        a.command.argv = vec!["sh".into(), "-c".into(), cmdstring];
    }
    let job = a.command.job(Vec::new());
    let mut connection = unless_cancelled(bus.connect_held(name))?;
    say(a.verbose, || match connection.how() {
        Connected::TookOver { holder } => format!(
            "took over {who} on {shown}{}, with the messages queued for it; held while the \
             command runs",
            took_over_from(holder.as_ref())
        ),
        _ => format!("connected {who} to {shown}, held while the command runs"),
    });
    // A COMMAND that cannot be started ends the connection as any other does; its error is
    // said after.
    let exit = job.run_under(&mut connection, a.close, &a.loss, &a.member.bus, a.verbose);
    match unless_cancelled(connection.disconnect()) {
        Ok(Disconnected::Yes) => say(a.verbose, || format!("disconnected {who} from {shown}")),
        Ok(Disconnected::StillHeld) => say(a.verbose, || {
            format!(
                "{who} stays connected to {shown}: a process the command left running still \
                 holds it (it inherited the hold)"
            )
        }),
        Ok(Disconnected::NotOurs) => say(a.verbose, || {
            format!("{who} on {shown} was removed or replaced meanwhile: left as it is")
        }),
        Ok(_) => say(a.verbose, || format!("disconnected {who} from {shown}")),
        // The command's status is what the caller asked for: a failed disconnect only warns.
        Err(Failure::Ended(_)) => {}
        Err(failure) => super::warn(failure),
    }
    exit
}

fn members(a: MembersArgs) -> VerbResult {
    let bus = Bus::new(&a.bus);
    let listed = bus.participants()?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let members = (listed.iter())
            .map(|p| MemberJson {
                name: &p.name,
                state: p.state.into(),
                holder: report::holder_json(p.holder.as_ref()),
                pending: bus.pending(&p.name).ok(),
            })
            .collect();
        let line = MembersJson {
            path: report::path_text(&a.bus),
            count: listed.len(),
            members,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        for p in &listed {
            writeln!(out, "{}", member_text(p)).or_stdout()?;
        }
    }
    Ok(Exit::OK)
}

/// A line of `fsync bus members`: the name first.
fn member_text(p: &Participant) -> String {
    let name = escaped(&p.name);
    match (p.state, &p.holder) {
        (ParticipantState::Connected, _) => name.into_owned(),
        (ParticipantState::Held, Some(h)) => format!("{name} {}", report::held_by(h)),
        (ParticipantState::Held, None) => format!("{name} held by a process that cannot be named"),
        (ParticipantState::Stale, Some(h)) => {
            format!("{name} stale: its holder died ({})", report::holder_text(h))
        }
        (ParticipantState::Stale, None) => format!("{name} stale: its holder died"),
        _ => name.into_owned(),
    }
}

/// Standard base64 with padding (RFC 4648), for non-UTF-8 payloads in JSON.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc_4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), want);
        }
    }
}
