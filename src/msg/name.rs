//! Message names: `SEQ.UNIQ.FROM.KIND` (the protocol in [`super`]'s docs), what a name says of
//! its message (sequence number, sender, failed and lost deliveries, options), and the `UNIQ`
//! part.
//!
//! `KIND` is `sync`, or `msg[+N][-L][,pP][,tMS]`: the counts, then the job's options as
//! comma-separated suffixes in this order, each at most once: `pP` its priority level `P`
//! (1 to [`MAX_PRIORITY`]; absent: 0), `tMS` its timeout in milliseconds (absent: none). Numbers
//! are decimal, no leading zero, not zero. Anything else is not a message.

use super::*;

/// A message's file name in the queue (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageName {
    pub(crate) seq: u64,
    pub(crate) uniq: String,
    pub(crate) from: Option<String>,
    pub(crate) sync: bool,
    /// Deliveries of it that failed so far (`KIND` `msg+N`).
    pub(crate) failed: u32,
    /// Deliveries of it whose receiver was lost (killed with its job, or its job ended while
    /// nobody was left to record how): `KIND` `msg-L`, or `msg+N-L` with failures.
    pub(crate) lost: u32,
    /// Its priority level (`KIND` option `,pP`): 0 (absent) to [`MAX_PRIORITY`].
    pub(crate) priority: u8,
    /// Its job's timeout in milliseconds (`KIND` option `,tMS`).
    pub(crate) timeout_ms: Option<u64>,
}

/// The highest priority level: a message of level `P` is taken before any of a level below.
pub const MAX_PRIORITY: u8 = 3;

/// A count in a message's `KIND` (`+N`, `-L`): decimal, no leading zero, not zero.
fn parse_count<N: std::str::FromStr>(n: &str) -> Option<N> {
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The options after the counts in a `KIND` (`,pP`, then `,tMS`; `opts` is what follows the
/// first comma): the priority level and the timeout.
fn parse_options(opts: &str) -> Option<(u8, Option<u64>)> {
    let mut parts = opts.split(',').peekable();
    let priority = match parts.next_if(|p| p.starts_with('p')) {
        Some(p) => parse_count(&p[1..]).filter(|&p| p <= MAX_PRIORITY)?,
        None => 0,
    };
    let timeout_ms = match parts.next_if(|t| t.starts_with('t')) {
        Some(t) => Some(parse_count(&t[1..])?),
        None => None,
    };
    // Nothing else, and not nothing: `msg,` is no name fsync writes.
    (parts.next().is_none() && (priority > 0 || timeout_ms.is_some()))
        .then_some((priority, timeout_ms))
}

impl MessageName {
    /// `SEQ.UNIQ.FROM.KIND`: `SEQ`, `UNIQ` and `KIND` hold no dot, so `FROM` (a bus name,
    /// which may) is all between the second dot and the last.
    pub(crate) fn parse(name: &str) -> Option<MessageName> {
        let (seq, rest) = name.split_once('.')?;
        if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let seq = seq.parse().ok()?;
        let (uniq, rest) = rest.split_once('.')?;
        if uniq.is_empty() {
            return None;
        }
        let (from, kind) = rest.rsplit_once('.')?;
        let from = match from {
            "-" => None,
            "" => return None,
            f => Some(f.to_string()),
        };
        let (kind, options) = match kind.split_once(',') {
            Some((kind, opts)) => (kind, parse_options(opts)?),
            None => (kind, (0, None)),
        };
        let (sync, failed, lost) = match kind {
            "sync" if options == (0, None) => (true, 0, 0),
            "sync" => return None,
            _ => {
                let counts = kind.strip_prefix("msg")?;
                let (failed, lost) = match counts.split_once('-') {
                    Some((failed, lost)) => (failed, Some(parse_count(lost)?)),
                    None => (counts, None),
                };
                let failed = match failed {
                    "" => 0,
                    f => parse_count(f.strip_prefix('+')?)?,
                };
                (false, failed, lost.unwrap_or(0))
            }
        };
        Some(MessageName {
            seq,
            uniq: uniq.to_string(),
            from,
            sync,
            failed,
            lost,
            priority: options.0,
            timeout_ms: options.1,
        })
    }

    pub(crate) fn stem(&self) -> String {
        format!(
            "{:020}.{}.{}",
            self.seq,
            self.uniq,
            self.from.as_deref().unwrap_or("-")
        )
    }

    pub(crate) fn render(&self) -> String {
        if self.sync {
            return format!("{}.sync", self.stem());
        }
        let failed = match self.failed {
            0 => String::new(),
            n => format!("+{n}"),
        };
        let lost = match self.lost {
            0 => String::new(),
            n => format!("-{n}"),
        };
        let priority = match self.priority {
            0 => String::new(),
            p => format!(",p{p}"),
        };
        let timeout = match self.timeout_ms {
            None => String::new(),
            Some(ms) => format!(",t{ms}"),
        };
        format!("{}.msg{failed}{lost}{priority}{timeout}", self.stem())
    }

    /// The same message with `failed` failed deliveries.
    pub(crate) fn failed(&self, failed: u32) -> MessageName {
        MessageName {
            failed,
            ..self.clone()
        }
    }

    /// The same message with one more delivery lost with its receiver.
    pub(crate) fn one_more_lost(&self) -> MessageName {
        MessageName {
            lost: self.lost.saturating_add(1),
            ..self.clone()
        }
    }

    /// Whether a receiver allowing `retries` failed deliveries gives up on it: failed more
    /// often than that, or lost with its receivers more than [`LOST_BEYOND_RETRIES`] times
    /// more (a job that kills its worker every time must end somewhere too).
    pub(crate) fn dead_under(&self, retries: Option<u32>) -> bool {
        retries
            .is_some_and(|r| self.failed > r || self.lost > r.saturating_add(LOST_BEYOND_RETRIES))
    }
}

/// How many more deliveries than `retries` failures may be lost with their receivers before a
/// message goes to the dead letters: a receiver killed with its job (an OOM kill, a power cut)
/// says nothing about the job, but one that kills its receiver every time must end too.
pub const LOST_BEYOND_RETRIES: u32 = 2;

/// A unique `HOST-PID-RANDOM` (host made safe for file names, and cut to its first
/// [`UNIQ_HOST_BYTES`]): at most 57 bytes, which the bound on bus participant names counts on
/// ([`crate::bus::MAX_NAME_BYTES`]).
pub(super) fn uniq() -> String {
    let host = uniq_host(&procinfo::hostname());
    let mut random = [0u8; 8];
    let _ = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random));
    format!(
        "{host}-{}-{:016x}",
        std::process::id(),
        u64::from_ne_bytes(random) ^ procinfo::now_micros()
    )
}

/// The host part of a `UNIQ`: letters, digits and `-` kept, anything else `_`, at most
/// [`UNIQ_HOST_BYTES`] of them.
pub(super) fn uniq_host(host: &str) -> String {
    host.chars()
        .take(UNIQ_HOST_BYTES)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// How much of the host name a `UNIQ` keeps (a host name may have 64 bytes): the random part
/// makes it unique, the host is there for people.
const UNIQ_HOST_BYTES: usize = 32;
