/*!
How holders, states and waits are shown: the text lines people read, the JSON objects scripts
read (one object per line), and the `-v` progress line on stderr.
*/

use std::{
    io::{IsTerminal, Write},
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use fsync::holder::Holder;
use serde_json::{json, Value};

/// An RFC 3339 UTC timestamp with microseconds.
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

fn since_time(h: &Holder) -> Option<SystemTime> {
    (h.since_us > 0).then(|| UNIX_EPOCH + Duration::from_micros(h.since_us))
}

/// "pid 1234 on host (sleep 10), for 12s"
pub fn holder_text(h: &Holder) -> String {
    let mut s = format!("pid {}", h.pid);
    if let Some(c) = h.child {
        s += &format!(" (command pid {c})");
    }
    if !h.host.is_empty() {
        s += &format!(" on {}", h.host);
    }
    if !h.command.is_empty() {
        s += &format!(": {}", h.command);
    }
    if let Some(t) = since_time(h) {
        let age = SystemTime::now().duration_since(t).unwrap_or_default();
        s += &format!(", since {} ({} ago)", timestamp(t), short_duration(age));
    }
    s
}

/// "pid 1234 on host: sleep 10", for the `-v` line that already says how long.
pub fn holder_brief(h: &Holder) -> String {
    let mut s = format!("pid {}", h.child.unwrap_or(h.pid));
    if !h.host.is_empty() {
        s += &format!(" on {}", h.host);
    }
    if !h.command.is_empty() {
        s += &format!(": {}", h.command);
    }
    s
}

pub fn holder_json(h: &Holder) -> Value {
    json!({
        "pid": h.pid,
        "child_pid": h.child,
        "host": h.host,
        "command": h.command,
        "since": since_time(h).map(timestamp),
    })
}

/// 12s, 3m04s, 2h05m: for people, not scripts.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{:.1}s", d.as_secs_f64()),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub fn path_text(p: &Path) -> String {
    p.display().to_string()
}

/// The `-v` reporter: a line when the wait starts, and on a terminal a line that keeps
/// saying how long, rewritten in place.
pub struct Progress {
    enabled: bool,
    tty: bool,
    printed: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            tty: std::io::stderr().is_terminal(),
            printed: false,
        }
    }

    /// Called by the wait core when it starts blocking and about once a second after.
    pub fn waiting(&mut self, waited: Duration, what: impl FnOnce() -> String) {
        if !self.enabled || (self.printed && !self.tty) {
            return;
        }
        let line = format!("fsync: waiting for {}", what());
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K{line} ({})", short_duration(waited));
        } else {
            let _ = writeln!(err, "{line}");
        }
        self.printed = true;
    }

    /// The wait ended; finish the in-place line and say how.
    pub fn done(&mut self, message: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty && self.printed {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "fsync: {}", message());
    }
}

/// A warning: one `fsync: ` line on stderr for something passed over (the command goes on).
pub fn warn(path: &Path, what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "fsync: {}: {what}", path.display());
}
