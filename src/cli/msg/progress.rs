//! The live status line of `msg work` on a terminal (`fsync: BOX: 12 done, 1 failed, 4
//! running, 873 queued, 3.2/s, ETA 4m33s`), as cargo and pueue show one: redrawn in place four
//! times a second on stderr, erased when the workers stop, and never shown when stderr is not
//! a terminal (a log gets the `-v` lines only) or when jobs write to the terminal themselves
//! (`--output tee` or `inherit`). Every other line the workers write to stderr (`-v`, warnings)
//! goes through [`StatusLine::say`], which erases the line, writes, and draws it again, under
//! one lock: lines never land in the middle of it.
//!
//! The queued count is a census of the mailbox ([`fsync::Mailbox::census`]: names only, no
//! lock), taken at most once a second, and less often when it is slow (ten times as long
//! apart as it took: a queue so deep that a census takes 100 ms is counted every second, one
//! that takes 500 ms every five), so that counting never costs the workers more than a tenth of
//! a core. Done, failed and running are this process's own counts.

use std::{
    io::{IsTerminal, Write},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use crate::cli::report;

/// How often the line is redrawn.
const REDRAW: Duration = Duration::from_millis(250);

/// The line on stderr, if shown.
pub(super) struct StatusLine {
    /// Whether it is drawn at all (stderr is a terminal, and asked for).
    tty: bool,
    /// The text drawn now.
    shown: Mutex<Option<String>>,
}

impl StatusLine {
    /// A status line, drawn only if `wanted` and stderr is a terminal.
    pub(super) fn new(wanted: bool) -> StatusLine {
        StatusLine {
            tty: wanted && std::io::stderr().is_terminal(),
            shown: Mutex::new(None),
        }
    }

    pub(super) fn drawn(&self) -> bool {
        self.tty
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Draw `text` in place of the line shown.
    fn show(&self, text: String) {
        if !self.tty {
            return;
        }
        let mut shown = self.lock();
        let line = report::fit_terminal(&text);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{line}");
        let _ = err.flush();
        *shown = Some(line);
    }

    /// Erase the line for good.
    fn clear(&self) {
        let mut shown = self.lock();
        if shown.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }

    /// Write `text` (whole lines) to stderr above the line.
    fn above(&self, text: &str) {
        let shown = self.lock();
        let mut err = std::io::stderr().lock();
        if shown.is_some() {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = err.write_all(text.as_bytes());
        if let Some(line) = shown.as_ref() {
            let _ = write!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// A `-v` line (`report::say`'s), above the status line.
    pub(super) fn say(&self, verbose: bool, line: impl FnOnce() -> String) {
        if verbose {
            self.above(&format!("fsync: {}\n", line()));
        }
    }

    /// A warning (`report::warn`'s), above the status line.
    pub(super) fn warn(&self, path: &std::path::Path, what: &str) {
        if !self.tty {
            return report::warn(path, what);
        }
        self.above(&report::warning(path, what));
    }
}

/// What the workers of this process did so far.
#[derive(Default)]
pub(super) struct Tally {
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub running: AtomicU64,
}

impl Tally {
    fn get(n: &AtomicU64) -> u64 {
        n.load(Ordering::Relaxed)
    }
}

/// The text of the line: `BOX: D done, F failed, R running, Q queued[ (N delayed)], RATE/s,
/// ETA T`.
fn text(place: &str, tally: &Tally, census: Option<&fsync::msg::Census>, rate: f64) -> String {
    let (done, failed, running) = (
        Tally::get(&tally.done),
        Tally::get(&tally.failed),
        Tally::get(&tally.running),
    );
    let mut line = format!("fsync: {place}: {done} done, {failed} failed, {running} running");
    if let Some(c) = census {
        line += &format!(", {} queued", c.queued);
        if c.delayed > 0 {
            line += &format!(" ({} delayed)", c.delayed);
        }
    }
    if rate > 0.0 {
        line += &format!(", {rate:.1}/s");
        if let Some(c) = census {
            let left = c.queued + c.delayed + c.running.len() as u64;
            if left > 0 {
                let eta = Duration::from_secs_f64(left as f64 / rate);
                line += &format!(", ETA {}", report::short_duration(eta));
            }
        }
    }
    line
}

/// Draw the line until `stop` says (or its sender goes), then erase it.
pub(super) fn run(
    status: &StatusLine,
    tally: &Tally,
    mailbox: &fsync::Mailbox,
    place: &str,
    stop: &mpsc::Receiver<()>,
) {
    if !status.drawn() {
        return;
    }
    let start = Instant::now();
    let mut census = None;
    let mut next_census = start;
    loop {
        let now = Instant::now();
        if now >= next_census {
            census = mailbox.census().ok();
            let took = now.elapsed();
            next_census = Instant::now() + (took * 10).max(Duration::from_secs(1));
        }
        let finished = Tally::get(&tally.done) + Tally::get(&tally.failed);
        let secs = start.elapsed().as_secs_f64();
        let rate = if secs > 0.5 {
            finished as f64 / secs
        } else {
            0.0
        };
        status.show(text(place, tally, census.as_ref(), rate));
        match stop.recv_timeout(REDRAW) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
    }
    status.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_counts_then_rate_and_eta_once_known() {
        let tally = Tally::default();
        tally.done.store(12, Ordering::Relaxed);
        tally.failed.store(1, Ordering::Relaxed);
        tally.running.store(4, Ordering::Relaxed);
        assert_eq!(
            text("B", &tally, None, 0.0),
            "fsync: B: 12 done, 1 failed, 4 running"
        );
        let mut census = fsync::msg::Census::default();
        (census.queued, census.delayed) = (96, 2);
        assert_eq!(
            text("B", &tally, Some(&census), 2.0),
            "fsync: B: 12 done, 1 failed, 4 running, 96 queued (2 delayed), 2.0/s, ETA 49.0s"
        );
    }
}
