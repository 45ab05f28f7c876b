//! Message names: `SEQ.UNIQ.FROM.KIND` (the protocol in [`super`]'s docs), what a name says of
//! its message (sequence number, sender, failed and lost deliveries, per-job options), and the
//! `UNIQ` part.
//!
//! # KIND options
//!
//! A queued message's `KIND` is `msg[+N][-L][,pP][,tMS]`: after the counts, comma-separated
//! options of its job, in this order, each at most once: `,pP` its priority level `P` (`1` to
//! `3`; absent: 0, the lowest), `,tMS` its job timeout in milliseconds (decimal, no leading zero,
//! not zero; absent: none, or the worker's default). Every rename that keeps a message's name
//! (back to the queue, held back, to the dead letters, put back from them, recovered from a dead
//! receiver) keeps them. An older fsync passes such names over as "not a message".

use crate::platform::procinfo;

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
    /// Its priority level, 0 (the lowest, no option) to [`MAX_PRIORITY`]: `KIND` option `,pP`.
    pub(crate) priority: u8,
    /// Its job's own timeout in milliseconds: `KIND` option `,tMS`.
    pub(crate) timeout_ms: Option<u64>,
}

/// The highest priority level a message name holds (`,p3`).
pub const MAX_PRIORITY: u8 = 3;

/// A number in a `KIND` option: decimal, no leading zero, not zero.
fn parse_option_number(n: &str) -> Option<u64> {
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The options after a `KIND`'s counts (`,pP` then `,tMS`, each at most once, that order):
/// `(priority, timeout_ms)`.
fn parse_options(options: &str) -> Option<(u8, Option<u64>)> {
    let (mut priority, mut timeout_ms) = (0, None);
    if options.is_empty() {
        return Some((priority, timeout_ms));
    }
    let mut rest = options.strip_prefix(',')?.split(',').peekable();
    if let Some(p) = rest.peek().and_then(|o| o.strip_prefix('p')) {
        priority = u8::try_from(parse_option_number(p)?).ok()?;
        if priority > MAX_PRIORITY {
            return None;
        }
        rest.next();
    }
    if let Some(t) = rest.peek().and_then(|o| o.strip_prefix('t')) {
        timeout_ms = Some(parse_option_number(t)?);
        rest.next();
    }
    match rest.next() {
        None => Some((priority, timeout_ms)),
        Some(_) => None,
    }
}

/// A count in a message's `KIND` (`+N`, `-L`): decimal, no leading zero, not zero.
fn parse_count(n: &str) -> Option<u32> {
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
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
        let (sync, failed, lost, (priority, timeout_ms)) = match kind {
            "sync" => (true, 0, 0, (0, None)),
            _ => {
                let kind = kind.strip_prefix("msg")?;
                let (counts, options) = kind.split_at(kind.find(',').unwrap_or(kind.len()));
                let options = parse_options(options)?;
                let (failed, lost) = match counts.split_once('-') {
                    Some((failed, lost)) => (failed, Some(parse_count(lost)?)),
                    None => (counts, None),
                };
                let failed = match failed {
                    "" => 0,
                    f => parse_count(f.strip_prefix('+')?)?,
                };
                (false, failed, lost.unwrap_or(0), options)
            }
        };
        Some(MessageName {
            seq,
            uniq: uniq.to_string(),
            from,
            sync,
            failed,
            lost,
            priority,
            timeout_ms,
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

    /// A new message's name (sequence number 0 until posted), without options.
    pub(crate) fn new_message(uniq: String, from: Option<String>, sync: bool) -> MessageName {
        MessageName {
            seq: 0,
            uniq,
            from,
            sync,
            failed: 0,
            lost: 0,
            priority: 0,
            timeout_ms: None,
        }
    }

    /// The same message with `failed` failed deliveries.
    pub(crate) fn failed(&self, failed: u32) -> MessageName {
        MessageName {
            failed,
            ..self.clone()
        }
    }

    /// The same message as it was posted: no delivery failed or lost (a dead letter put back).
    pub(crate) fn forgotten(&self) -> MessageName {
        MessageName {
            failed: 0,
            lost: 0,
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
    format!(
        "{host}-{}-{:016x}",
        std::process::id(),
        procinfo::random_u64() ^ procinfo::now_micros()
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
