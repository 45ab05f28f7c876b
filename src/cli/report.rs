/*!
How holders, states and waits are shown: the text lines people read, the JSON objects scripts
read (one object per line), and the `-v` lines on stderr, which every verb that waits shares.

Every `--json` output is a `Serialize` type of the verb's module, built from the pieces here
(a holder is [`HolderJson`] wherever it appears) and printed by [`print_json`]. Their schemas
are documented in docs/json.md, and the integration tests check every output against that
document: a field renamed, added or retyped here must be changed there too.
*/

use std::{
    io::{IsTerminal, Write},
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use fsync::{Outcome, holder::Holder};
use serde::Serialize;

use super::{
    Exit,
    args::WaitArgs,
    escape::{Show, escaped},
};

/// An RFC 3339 UTC timestamp with microseconds.
pub(super) fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

fn since_time(h: &Holder) -> Option<SystemTime> {
    (h.since_us > 0).then(|| UNIX_EPOCH + Duration::from_micros(h.since_us))
}

/// "pid 1234 (command pid 1235) on host: sleep 10, since ... (12s ago)", with the host and
/// command escaped (a record or registration may be another user's).
pub(super) fn holder_text(h: &Holder) -> String {
    let mut s = format!("pid {}", h.pid);
    if let Some(c) = h.child {
        s += &format!(" (command pid {c})");
    }
    if !h.host.is_empty() {
        s += &format!(" on {}", escaped(&h.host));
    }
    if !h.command.is_empty() {
        s += &format!(": {}", escaped(&h.command));
    }
    if let Some(t) = since_time(h) {
        let age = SystemTime::now().duration_since(t).unwrap_or_default();
        s += &format!(", since {} ({} ago)", timestamp(t), short_duration(age));
    }
    s
}

/// "pid 1234 on host: sleep 10", for the `-v` line that already says how long (escaped as
/// [`holder_text`] is).
pub(super) fn holder_brief(h: &Holder) -> String {
    let mut s = format!("pid {}", h.child.unwrap_or(h.pid));
    if !h.host.is_empty() {
        s += &format!(" on {}", escaped(&h.host));
    }
    if !h.command.is_empty() {
        s += &format!(": {}", escaped(&h.command));
    }
    s
}

/// "untrusted (names pid 4242 on host evil; the kernel says pid 12 holds the lock)": a holder
/// record the kernel's lock table contradicts, and the holder it names instead, of `what` ("the
/// lock", "the slot").
pub(super) fn untrusted_text(claimed: &Holder, kernel: Option<&Holder>, what: &str) -> String {
    let mut text = format!("untrusted (names pid {}", claimed.pid);
    if !claimed.host.is_empty() {
        text += &format!(" on host {}", escaped(&claimed.host));
    }
    match kernel {
        Some(h) => text += &format!("; the kernel says pid {} holds {what})", h.pid),
        None => text += "; the kernel names another holder)",
    }
    text
}

/// A holder in every `--json` output (docs/json.md, `holder`): a lock's holder, a slot's, a
/// group's member.
#[derive(Debug, Serialize)]
pub(super) struct HolderJson<'a> {
    /// The fsync process (or the process the kernel names as holding the lock).
    pub pid: u32,
    /// The command fsync runs, once it has started; `null` before, or where not recorded.
    pub child_pid: Option<u32>,
    /// Empty where not known.
    pub host: &'a str,
    /// Empty where not known.
    pub command: &'a str,
    /// RFC 3339; `null` where not known.
    pub since: Option<String>,
}

impl<'a> From<&'a Holder> for HolderJson<'a> {
    fn from(h: &'a Holder) -> HolderJson<'a> {
        HolderJson {
            pid: h.pid,
            child_pid: h.child,
            host: &h.host,
            command: &h.command,
            since: since_time(h).map(timestamp),
        }
    }
}

/// `holder` as it appears in JSON, `null` for none.
pub(super) fn holder_json(holder: Option<&Holder>) -> Option<HolderJson<'_>> {
    holder.map(HolderJson::from)
}

/// Write `report` as one line of JSON (the form of every `--json` output).
pub(super) fn print_json(out: &mut impl Write, report: &impl Serialize) -> std::io::Result<()> {
    // Our reports have string keys and no maps, so only writing can fail.
    serde_json::to_writer(&mut *out, report)?;
    writeln!(out)
}

/// One line of a `watch` verb, written and flushed at once (a script reads it as it comes):
/// with `--json` the object `json` makes of the time, else the time, then `text`.
pub(super) fn watch_line<J: Serialize>(
    json: bool,
    to_json: impl FnOnce(String) -> J,
    text: impl FnOnce() -> String,
) -> std::io::Result<()> {
    let now = timestamp(SystemTime::now());
    let mut out = std::io::stdout().lock();
    match json {
        true => print_json(&mut out, &to_json(now))?,
        false => writeln!(out, "{now} {}", text())?,
    }
    out.flush()
}

/// 12s, 3m04s, 2h05m: for people, not scripts.
pub(super) fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{:.1}s", d.as_secs_f64()),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A path as a JSON string: serde escapes what JSON must, and bytes that are not UTF-8 become
/// U+FFFD (docs/json.md). Text output shows paths with [`Show::shown`] instead.
pub(super) fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A library error as text output shows it: `PATH: cause`, the path escaped byte for byte and
/// the cause escaped (either may name entries another user made).
pub(super) fn error_text(e: &fsync::Error) -> String {
    match e.path().as_os_str().is_empty() {
        true => escaped(e.message()).into_owned(),
        false => format!("{}: {}", e.path().shown(), escaped(e.message())),
    }
}

/// How long a wait took, for the `-v` lines: 0.80s, 12.35s, 3m04s.
pub(super) fn waited_text(d: Duration) -> String {
    match d.as_secs() {
        0..=59 => format!("{:.2}s", d.as_secs_f64()),
        _ => short_duration(d),
    }
}

/// The `-v` reporter of one wait, the same for every verb that waits. When the wait starts
/// blocking: `fsync: waiting for WHAT (WHO)`, WHO being who holds it and since when, as far as
/// that can be known; on a terminal that line is rewritten in place about once a second with
/// the time waited so far. When the wait ends, one line says how, and after how long, whether
/// or not it blocked (as `flock -v` does): `fsync: acquired WHAT after 0.80s`, `fsync: gave up
/// waiting for WHAT after 5.00s (WHO)`, `fsync: interrupted by SIGTERM after waiting 1.20s for
/// WHAT`.
pub(super) struct Progress<'a> {
    enabled: bool,
    tty: bool,
    start: Instant,
    what: String,
    holder: Box<dyn Fn() -> Option<String> + 'a>,
    /// Said after WHO on the waiting line only (how we wait on a network file system).
    note: String,
    /// The waiting line was printed (on a terminal: is on the screen, to be replaced).
    shown: bool,
    conflict: Exit,
}

impl<'a> Progress<'a> {
    /// A reporter (silent without `-v`) for a wait for `what` that starts now.
    pub(super) fn new(wait: &WaitArgs, what: impl Into<String>) -> Progress<'a> {
        Progress {
            enabled: wait.verbose,
            tty: wait.verbose && std::io::stderr().is_terminal(),
            start: Instant::now(),
            what: what.into(),
            holder: Box::new(|| None),
            note: String::new(),
            shown: false,
            conflict: Exit::code(wait.conflict_exit_code),
        }
    }

    /// Who holds what we wait for ("held by pid 12 on host: cmd, since ..."), asked only with
    /// `-v`, when the wait blocks and when it gives up; `None` where nobody can be named.
    pub(super) fn holder(mut self, who: impl Fn() -> Option<String> + 'a) -> Progress<'a> {
        self.holder = Box::new(who);
        self
    }

    /// Something to add to the waiting line after the holder (in brackets).
    pub(super) fn note(mut self, note: String) -> Progress<'a> {
        self.note = note;
        self
    }

    /// Called by the wait core when it starts blocking, and about once a second after (which
    /// rewrites the line on a terminal).
    pub(super) fn waiting(&mut self) {
        if !self.enabled || (self.shown && !self.tty) {
            return;
        }
        let mut line = match self.tty {
            true => format!(
                "fsync: waiting {} for {}",
                waited_text(self.start.elapsed()),
                self.what
            ),
            false => format!("fsync: waiting for {}", self.what),
        };
        if let Some(who) = (self.holder)() {
            line += &format!(" ({who})");
        }
        if !self.note.is_empty() {
            line += &format!(" [{}]", self.note);
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K{}", fit_terminal(&line));
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.shown = true;
    }

    /// The wait ended: say how, and after how long. The thing waited for, if it came (with
    /// `done` naming it: "acquired slot 1 of S"), or the exit status for a wait that gave up or
    /// was interrupted.
    pub(super) fn settle<T>(
        &mut self,
        outcome: Outcome<T>,
        done: impl FnOnce(&T) -> String,
    ) -> Result<T, Exit> {
        if self.enabled {
            let waited = waited_text(self.start.elapsed());
            let line = match &outcome {
                Outcome::Acquired(v) => format!("{} after {waited}", done(v)),
                Outcome::TimedOut => {
                    let mut line = format!("gave up waiting for {} after {waited}", self.what);
                    if let Some(who) = (self.holder)() {
                        line += &format!(" ({who})");
                    }
                    line
                }
                Outcome::Interrupted(sig) => {
                    let name = nix::sys::signal::Signal::try_from(*sig)
                        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string());
                    format!(
                        "interrupted by {name} after waiting {waited} for {}",
                        self.what
                    )
                }
            };
            self.say(|| line);
        }
        Exit::unless_acquired(outcome, self.conflict)
    }

    /// Another `-v` line about the same thing (after the wait: "left G as its last member").
    pub(super) fn say(&mut self, message: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty && self.shown {
            let _ = write!(err, "\r\x1b[K");
            self.shown = false;
        }
        let _ = writeln!(err, "fsync: {}", message());
    }
}

/// `line` cut to the width of the terminal on stderr, so that rewriting it in place never
/// leaves wrapped rows behind.
pub(super) fn fit_terminal(line: &str) -> String {
    fit(line, terminal_width().unwrap_or(80))
}

/// `line` in fewer than `width` columns (the last one would wrap on some terminals), cut
/// with an ellipsis if it is longer.
fn fit(line: &str, width: usize) -> String {
    let width = width.max(10);
    if line.chars().count() < width {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(width - 2).collect();
    cut.push('…');
    cut
}

fn terminal_width() -> Option<usize> {
    terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| usize::from(w.0))
}

/// "held by pid 12 (command pid 13) on host: cmd, since ... (3.1s ago)", for `-v`.
pub(super) fn held_by(h: &Holder) -> String {
    format!("held by {}", holder_text(h))
}

/// Say it (with -v) when the semaphore or group at `path` belongs to another user who can
/// break it ([`fsync::doctor::foreign_owner`]): `what` says how.
pub(super) fn warn_foreign(path: &Path, what: &str) {
    if let Some(uid) = fsync::doctor::foreign_owner(path) {
        warn(
            path,
            &format!(
                "warning: belongs to another user (uid {uid}) in a world-writable sticky \
                 directory, who can {what} at any moment"
            ),
        );
    }
}

/// Why `--delete` of a semaphore or group lock kept its files, for `-v` (`None`: deleted, or
/// not asked to); `inside` is what the others do there ("hold a slot", "are inside").
pub(super) fn not_deleted(released: fsync::sem::Released, inside: &str) -> Option<String> {
    use fsync::sem::Released;
    match released {
        Released::KeptInUse => Some(format!(
            "others {inside} or wait; the last of them to leave with --delete removes it"
        )),
        Released::KeptStillHeld => Some(
            "another process still holds it (one the command left running, through a \
             descriptor it inherited)"
                .to_string(),
        ),
        _ => None,
    }
}

/// A warning: one `fsync: ` line on stderr for something passed over (the command goes on).
/// The path may end in a name another user chose (a queue entry), so the line is escaped.
pub(super) fn warn(path: &Path, what: &str) {
    let _ = write!(std::io::stderr(), "{}", warning(path, what));
}

/// The line [`warn`] writes, newline included.
pub(super) fn warning(path: &Path, what: &str) -> String {
    format!("fsync: {}: {}\n", path.shown(), escaped(what))
}

/// [`warn`], of text already escaped: built of shown paths and escaped pieces.
pub(super) fn warn_escaped(path: &Path, what: &str) {
    let _ = writeln!(std::io::stderr(), "fsync: {}: {what}", path.shown());
}

/// A `-v` line on stderr, for verbs that do not wait.
pub(super) fn say(verbose: bool, line: impl FnOnce() -> String) {
    if verbose {
        let _ = writeln!(std::io::stderr(), "fsync: {}", line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_told_in_hundredths_then_minutes() {
        assert_eq!(waited_text(Duration::ZERO), "0.00s");
        assert_eq!(waited_text(Duration::from_millis(804)), "0.80s");
        assert_eq!(waited_text(Duration::from_millis(59_994)), "59.99s");
        assert_eq!(waited_text(Duration::from_secs(184)), "3m04s");
        assert_eq!(waited_text(Duration::from_mins(125)), "2h05m");
    }

    #[test]
    fn lines_rewritten_in_place_fit_the_terminal() {
        assert_eq!(fit("fsync: waiting", 80), "fsync: waiting");
        let long = "fsync: waiting 1.00s for L (held by pid 12 on host: a long command)";
        let cut = fit(long, 20);
        assert_eq!(cut.chars().count(), 19);
        assert!(
            cut.starts_with("fsync: waiting 1.0") && cut.ends_with('…'),
            "{cut}"
        );
        assert_eq!(fit(long, 0).chars().count(), 9, "a width too small to use");
    }
}
