//! `fsync mutex status` and `fsync mutex watch`: what they print, in text and JSON.

use super::*;
use crate::cli::OrStdout;

/// `fsync mutex status --json` (docs/json.md, `mutex-status`).
#[derive(Serialize)]
struct StatusJson<'a> {
    path: String,
    state: State,
    holder: Option<report::HolderJson<'a>>,
    fence: Option<u64>,
    /// Why `fence` shows nothing of the holder record there is.
    fence_withheld: Option<&'static str>,
    /// False when the holder record names a holder the kernel's lock table contradicts.
    record_trusted: bool,
    /// That holder (never the one in `holder`).
    untrusted_record: Option<report::HolderJson<'a>>,
    /// With `--range`: the bytes asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    range: Option<RangeJson>,
    /// With `--range`: the lock found on them, `null` when free.
    #[serde(skip_serializing_if = "Option::is_none")]
    lock: Option<Option<RangeLockJson>>,
}

/// A byte range in JSON (docs/json.md, `range`).
#[derive(Serialize)]
struct RangeJson {
    start: u64,
    len: u64,
}

impl From<fsync::range::ByteRange> for RangeJson {
    fn from(r: fsync::range::ByteRange) -> RangeJson {
        RangeJson {
            start: r.start,
            len: r.len,
        }
    }
}

/// A byte-range lock in JSON (docs/json.md, `range-lock`).
#[derive(Serialize)]
struct RangeLockJson {
    start: u64,
    len: u64,
    mode: ModeJson,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum ModeJson {
    Shared,
    Exclusive,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum State {
    Free,
    Held,
}

/// A line of `fsync mutex watch --json` (docs/json.md, `mutex-watch`).
#[derive(Serialize)]
struct WatchJson<'a> {
    time: String,
    event: WatchEvent,
    path: String,
    holder: Option<report::HolderJson<'a>>,
}

/// What a line of `fsync mutex watch` says: the state it starts in, then each change.
#[derive(Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
enum WatchEvent {
    Held,
    Free,
    Acquired,
    Released,
}

impl WatchEvent {
    /// Its word in the text form (the same as in JSON).
    fn word(self) -> &'static str {
        match self {
            WatchEvent::Held => "held",
            WatchEvent::Free => "free",
            WatchEvent::Acquired => "acquired",
            WatchEvent::Released => "released",
        }
    }
}

pub(super) fn status(a: StatusArgs) -> VerbResult {
    if let Some(range) = a.range {
        return range_status(&a, range);
    }
    let st = mutex::status(&a.lock)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let line = StatusJson {
            path: report::path_text(&a.lock),
            state: if st.held { State::Held } else { State::Free },
            holder: report::holder_json(st.holder.as_ref()),
            fence: st.fence,
            fence_withheld: st.fence_withheld.map(withheld_word),
            record_trusted: st.untrusted_record.is_none(),
            untrusted_record: report::holder_json(st.untrusted_record.as_ref()),
            range: None,
            lock: None,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        match (&st.held, &st.holder) {
            (false, _) => writeln!(out, "{}: free", a.lock.shown()).or_stdout()?,
            (true, Some(h)) => writeln!(
                out,
                "{}: held by {}",
                a.lock.shown(),
                report::holder_text(h)
            )
            .or_stdout()?,
            (true, None) => {
                writeln!(out, "{}: held (holder unknown)", a.lock.shown()).or_stdout()?;
            }
        }
        if let Some(claimed) = &st.untrusted_record {
            writeln!(
                out,
                "  record: {}",
                report::untrusted_text(claimed, st.holder.as_ref(), "the lock")
            )
            .or_stdout()?;
        }
    }
    Ok(if st.held { Exit::NO } else { Exit::OK })
}

/// `status --range`: whether any byte of the range is locked, the lock found and its holder.
fn range_status(a: &StatusArgs, range: fsync::range::ByteRange) -> VerbResult {
    let st = fsync::range::status(&a.lock, range)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let line = StatusJson {
            path: report::path_text(&a.lock),
            state: if st.held() { State::Held } else { State::Free },
            holder: report::holder_json(st.holder.as_ref()),
            fence: None,
            fence_withheld: None,
            record_trusted: true,
            untrusted_record: None,
            range: Some(range.into()),
            lock: Some(st.lock.map(|l| RangeLockJson {
                start: l.range.start,
                len: l.range.len,
                mode: match l.mode {
                    Mode::Shared => ModeJson::Shared,
                    Mode::Exclusive => ModeJson::Exclusive,
                },
            })),
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        writeln!(out, "{}", range_status_text(&a.lock, &st)).or_stdout()?;
    }
    Ok(if st.held() { Exit::NO } else { Exit::OK })
}

/// "L: bytes 7:1 held by pid 12 on host: cmd (an exclusive lock on bytes 0:10)", or
/// "L: bytes 7:1 free".
fn range_status_text(lock: &std::path::Path, st: &fsync::range::RangeStatus) -> String {
    let head = format!("{}: bytes {}", lock.shown(), st.range);
    let Some(l) = &st.lock else {
        return format!("{head} free");
    };
    let what = match l.mode {
        Mode::Shared => format!("a shared lock on bytes {}", l.range),
        Mode::Exclusive => format!("an exclusive lock on bytes {}", l.range),
    };
    match &st.holder {
        Some(h) => format!("{head} {} ({what})", report::held_by(h)),
        None => format!("{head} held (holder unknown; {what})"),
    }
}

/// "held by pid 12 on host: cmd" for `-v` while waiting for a byte range, where the kernel
/// and /proc tell; "holder unknown" where they do not.
pub(super) fn range_holder(st: fsync::Result<fsync::range::RangeStatus>) -> Option<String> {
    let st = st.ok()?;
    match (st.held(), &st.holder) {
        (true, Some(h)) => Some(report::held_by(h)),
        (true, None) => Some("holder unknown".to_string()),
        (false, _) => None,
    }
}

/// Why `fence` is null although a holder record is there, in `--json`'s words.
fn withheld_word(why: mutex::FenceWithheld) -> &'static str {
    match why {
        mutex::FenceWithheld::AnotherUser(_) => "another-user",
        mutex::FenceWithheld::Links => "hard-links",
        // `Contradicted`, the one left.
        _ => "contradicted",
    }
}

pub(super) fn watch(a: WatchCmd) -> VerbResult {
    // First the state the watch starts in, then its changes.
    let mut watch = mutex::watch(&a.lock, a.watch.timeout, a.watch.poll)?;
    let start = watch.status().clone();
    let event = if start.held {
        WatchEvent::Held
    } else {
        WatchEvent::Free
    };
    print_event(&a, event, &start)?;
    for change in watch.by_ref() {
        match change? {
            mutex::Change::Acquired(st) => print_event(&a, WatchEvent::Acquired, &st)?,
            mutex::Change::Released(st) => print_event(&a, WatchEvent::Released, &st)?,
            _ => {} // a change a later library reports: not shown
        }
    }
    Ok(watch.interrupted().map_or(Exit::OK, Exit::signal))
}

fn print_event(a: &WatchCmd, event: WatchEvent, st: &Status) -> Result<(), Failure> {
    let json = |time| WatchJson {
        time,
        event,
        path: report::path_text(&a.lock),
        holder: report::holder_json(st.holder.as_ref()),
    };
    let text = || match &st.holder {
        Some(h) => format!("{} {}", event.word(), report::holder_text(h)),
        None => event.word().to_string(),
    };
    report::watch_line(a.json, json, text).or_stdout()
}
