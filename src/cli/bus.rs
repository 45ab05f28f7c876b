/*!
`fsync bus`: named participants exchanging messages on a shared directory. The
protocol is in the library's `bus` module; each participant is a mailbox.
*/

use std::{io::Write, path::PathBuf};

use clap::{Args, Subcommand};
use fsync::Bus;
use serde::Serialize;

use super::{
    args::WaitArgs,
    payload::{check_output, output_error, DataArg},
    report::{self, Progress},
    Exit, VerbResult,
};

/// The one-line description, for `fsync --help`.
pub const ABOUT: &str = "Message bus: named participants on a shared directory";

/// The description of `fsync bus --help`.
pub const LONG: &str = "\
A bus is a directory on which named participants connect, send each other messages and \
broadcast to all (a bus for processes on machines sharing a network directory). Each \
participant has a mailbox: messages to it are received exactly once, in the order sent, and a \
message is never visible half-written. Participant names are letters, digits, '_' and '-'.";

#[derive(Debug, Args)]
pub struct BusCommand {
    #[command(subcommand)]
    verb: Verb,
}

fn parse_name(s: &str) -> Result<String, String> {
    fsync::bus::check_name(s).map(|()| s.to_string())
}

#[derive(Debug, Args)]
struct Member {
    /// The bus directory: created by 'connect' if missing
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The participant
    #[arg(value_name = "NAME", value_parser = parse_name)]
    name: String,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Verb {
    #[command(
        about = "Connect NAME to BUS (removing what an earlier disconnect left)",
        after_long_help = "Examples:\n  fsync bus connect /shared/bus builder-1"
    )]
    Connect(Member),
    #[command(
        about = "Disconnect NAME from BUS (its directory is hidden as .NAME)",
        after_long_help = "Examples:\n  fsync bus disconnect /shared/bus builder-1"
    )]
    Disconnect(Member),
    #[command(
        about = "List the connected participants",
        after_long_help = "Examples:\n  fsync bus members /shared/bus\n  fsync bus members --json /shared/bus"
    )]
    Members(MembersArgs),
    #[command(
        about = "Send a message to one participant (an error if it is not connected)",
        after_long_help = "Examples:\n  fsync bus send /shared/bus --from ci --to builder-1 --data 'build 42'"
    )]
    Send(SendArgs),
    #[command(
        about = "Send one copy to every other connected participant",
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

#[derive(Debug, Args)]
struct MembersArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// One JSON object: {"path", "count", "members": [{"name", "pending"}]}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SendArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The sending participant (must be connected)
    #[arg(long, value_name = "NAME", value_parser = parse_name)]
    from: String,
    /// The receiving participant (must be connected)
    #[arg(long, value_name = "NAME", value_parser = parse_name)]
    to: String,
    #[command(flatten)]
    data: DataArg,
}

#[derive(Debug, Args)]
struct BroadcastArgs {
    #[arg(value_name = "BUS")]
    bus: PathBuf,
    /// The sending participant (must be connected; gets no copy)
    #[arg(long, value_name = "NAME", value_parser = parse_name)]
    from: String,
    #[command(flatten)]
    data: DataArg,
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
    /// Messages queued for it; `None` where its mailbox cannot be read.
    pending: Option<usize>,
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

pub fn run(cmd: BusCommand) -> VerbResult {
    match cmd.verb {
        Verb::Connect(m) => Bus::new(&m.bus)
            .connect(&m.name)
            .map(|()| Exit::OK)
            .map_err(Into::into),
        Verb::Disconnect(m) => Bus::new(&m.bus)
            .disconnect(&m.name)
            .map(|()| Exit::OK)
            .map_err(Into::into),
        Verb::Members(a) => {
            let bus = Bus::new(&a.bus);
            let names = bus.members()?;
            let mut out = std::io::stdout().lock();
            if a.json {
                let members = (names.iter())
                    .map(|name| MemberJson {
                        name,
                        pending: bus.pending(name).ok(),
                    })
                    .collect();
                let line = MembersJson {
                    path: report::path_text(&a.bus),
                    count: names.len(),
                    members,
                };
                report::print_json(&mut out, &line)?;
            } else {
                for n in &names {
                    writeln!(out, "{n}")?;
                }
            }
            Ok(Exit::OK)
        }
        Verb::Send(a) => {
            let outcome = Bus::new(&a.bus).send(&a.from, &a.to, &mut a.data.reader())?;
            Exit::unless_acquired(outcome, Exit::OK)?;
            Ok(Exit::OK)
        }
        Verb::Broadcast(a) => {
            let outcome = Bus::new(&a.bus).broadcast(&a.from, &mut a.data.reader())?;
            Exit::unless_acquired(outcome, Exit::OK)?;
            Ok(Exit::OK)
        }
        Verb::Recv(a) => {
            check_output()?;
            let bus = Bus::new(&a.member.bus).poll_interval(a.wait.poll);
            let skipped = |s: &fsync::msg::Skipped| {
                let path = a.member.bus.join(&a.member.name).join("q").join(&s.name);
                report::warn(&path, &format!("{}; skipped", s.reason));
            };
            let what = format!(
                "a message for {} on {}",
                a.member.name,
                a.member.bus.display()
            );
            let mut progress = Progress::new(&a.wait, what.clone());
            let outcome = bus.recv_reporting(&a.member.name, a.wait.timeout(), skipped, |_| {
                progress.waiting()
            })?;
            let from = |m: &fsync::Received| match &m.from {
                Some(sender) => format!("received {what} from {sender}"),
                None => format!("received {what}"),
            };
            let mut msg = progress.settle(outcome, from)?;
            let mut out = std::io::stdout().lock();
            if a.json {
                let data = msg.read_all().map_err(output_error)?;
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
            } else if let Err(e) = msg.copy_to(&mut out) {
                return match fsync::wait::cancelled() {
                    Some(s) => Ok(Exit::signal(s)), // dropped: back to the queue
                    None => Err(output_error(e)),
                };
            }
            msg.finish()?;
            Ok(Exit::OK)
        }
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
