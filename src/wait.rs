/*!
The wait core: every primitive that waits (for a lock, a slot, an event, a message) waits here.

One loop owns the three things every wait needs: a deadline, cancellation by a signal (INT,
TERM, HUP, QUIT, once the CLI has called [`install_cancel_handlers`]), and an [`Outcome`] that
says which of them ended the wait. The primitive supplies one *attempt* function:

- `attempt(false)` must not block: it checks once (a non-blocking lock, a directory scan);
- `attempt(true)` may block in the kernel (a blocking `flock`, a sleep until change notification)
  until the thing happens (`Some`) or may have happened (`None`: the core re-checks with
  `attempt(false)`), so on a local file system a release wakes the waiter at once.

A blocking call is ended by a signal: a per-thread POSIX timer sends [`wake_signal`] to the
waiting thread at the deadline (and on network file systems every `poll` interval, because a
release on another host may not wake a blocked call); its handler does nothing and is installed
without `SA_RESTART`, so the call returns `EINTR` and the loop re-checks. The timer keeps firing
every few milliseconds after it first expires, which closes the window in which a signal arrives
just before the thread enters the blocking call. Cancellation handlers fire that same timer.
The handlers and the timer are platform machinery, in [`crate::platform::signal`]; the functions
a program needs of it are re-exported here.
*/

use std::{
    io,
    time::{Duration, Instant},
};

use crate::platform::signal::{self, WakeTimer};
pub use crate::platform::signal::{
    cancelled, die_of, install_cancel_handlers, set_child, wake_signal, CANCEL_SIGNALS,
};

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome<T> {
    /// The thing waited for was had.
    Acquired(T),
    /// The deadline passed first.
    TimedOut,
    /// A cancellation signal (its number) arrived first.
    Interrupted(i32),
}

/// The parameters of one wait.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wait {
    /// Give up after this long; `None` waits forever, zero tries once.
    pub timeout: Option<Duration>,
    /// Re-check at least this often even if nothing wakes us (network file systems).
    pub poll: Option<Duration>,
    /// Call the progress callback when the wait starts blocking and then this often (`-v`).
    pub progress: Option<Duration>,
}

/// Wait until `attempt` succeeds, the deadline passes, or a cancellation signal arrives.
pub fn wait_for<T>(
    spec: Wait,
    mut progress: impl FnMut(Duration),
    mut attempt: impl FnMut(bool) -> io::Result<Option<T>>,
) -> io::Result<Outcome<T>> {
    let start = Instant::now();
    if let Some(sig) = cancelled() {
        return Ok(Outcome::Interrupted(sig));
    }
    if let Some(v) = attempt(false)? {
        return Ok(Outcome::Acquired(v));
    }
    // A timeout too large to represent is no timeout at all.
    let deadline = spec.timeout.and_then(|t| start.checked_add(t));
    if spec.timeout == Some(Duration::ZERO) {
        return Ok(Outcome::TimedOut);
    }
    let timer = WakeTimer::new()?;
    if spec.progress.is_some() {
        progress(start.elapsed()); // say at once what we wait for
    }
    let mut next_progress = spec.progress.map(|p| start + p);
    loop {
        if let Some(sig) = cancelled() {
            return Ok(Outcome::Interrupted(sig));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            return Ok(Outcome::TimedOut);
        }
        if let Some(p) = next_progress.filter(|&p| p <= now) {
            progress(now - start);
            next_progress = spec.progress.map(|step| p.max(now) + step);
        }
        let next = [deadline, spec.poll.map(|p| now + p), next_progress]
            .into_iter()
            .flatten()
            .min();
        timer.arm(next.map(|t| t.saturating_duration_since(now)))?;
        match attempt(true) {
            Ok(Some(v)) => return Ok(Outcome::Acquired(v)),
            // Something may have changed, or a poll tick, the deadline or a cancellation
            // interrupted the call: re-check without blocking (polling sees other hosts so).
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if cancelled().is_none() {
            if let Some(v) = attempt(false)? {
                return Ok(Outcome::Acquired(v));
            }
        }
    }
}

/// Wait until `check` finds what we wait for, blocking in `watch` (change notification) between
/// checks: the common shape of the waits on files appearing and disappearing (events, messages,
/// lock holders). `poll` re-checks where notification cannot see other hosts. Errors of `check`
/// come back as they are; errors of waiting itself name `what`.
pub fn watch_until<T>(
    timeout: Option<Duration>,
    poll: Option<Duration>,
    watch: &crate::platform::notify::DirWatch,
    what: &std::path::Path,
    check: impl FnMut() -> crate::Result<Option<T>>,
) -> crate::Result<Outcome<T>> {
    watch_until_reporting(timeout, poll, watch, what, None, check)
}

/// Like [`watch_until`], calling `progress` (if given) with the time waited when the wait
/// starts blocking and about once a second after, as [`wait_for`] does: for `-v`.
pub fn watch_until_reporting<T>(
    timeout: Option<Duration>,
    poll: Option<Duration>,
    watch: &crate::platform::notify::DirWatch,
    what: &std::path::Path,
    mut progress: Option<&mut dyn FnMut(Duration)>,
    mut check: impl FnMut() -> crate::Result<Option<T>>,
) -> crate::Result<Outcome<T>> {
    let mut error = None;
    let spec = Wait {
        timeout,
        poll,
        progress: progress.is_some().then_some(Duration::from_secs(1)),
    };
    let outcome = wait_for(
        spec,
        |waited| {
            if let Some(p) = progress.as_mut() {
                p(waited);
            }
        },
        |block| {
            if block {
                watch.wait()?;
                return Ok(None);
            }
            check().map_err(|e| {
                error = Some(e);
                io::Error::other("check failed")
            })
        },
    );
    outcome.map_err(|e| error.unwrap_or_else(|| crate::Error::io(what, "cannot wait", e)))
}

/// Sleep up to `d`, ending early (with `Interrupted`) on a cancellation signal. For verbs that
/// must re-check on a schedule (watching a lock held by tools that do not notify us).
pub fn sleep(d: Duration) -> Outcome<()> {
    match wait_for(
        Wait {
            timeout: Some(d),
            ..Wait::default()
        },
        |_| {},
        |block| {
            if block {
                signal::pause();
                Err(io::Error::from(io::ErrorKind::Interrupted))
            } else {
                Ok(None::<()>)
            }
        },
    ) {
        Ok(Outcome::Interrupted(s)) => Outcome::Interrupted(s),
        _ => Outcome::Acquired(()),
    }
}

/// Copy `from` to `to` until the end, or until a cancellation signal arrives: a read or write
/// that a signal interrupted is retried only if it was not a cancellation (the std copy retries
/// every `EINTR`, so a `^C` at a terminal or a TERM during a blocked write would go unheeded).
/// A cancellation gives an error of kind `Interrupted`; [`cancelled`] names the signal.
pub fn copy_cancellable(from: &mut dyn io::Read, to: &mut dyn io::Write) -> io::Result<u64> {
    let interrupted = || io::Error::new(io::ErrorKind::Interrupted, "cancelled by a signal");
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        if cancelled().is_some() {
            return Err(interrupted());
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut done = 0;
        while done < n {
            match to.write(&buf[done..n]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if cancelled().is_some() {
                        return Err(interrupted());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
    loop {
        match to.flush() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted && cancelled().is_none() => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(interrupted()),
            other => return other.map(|()| total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_timeout_tries_once() {
        let mut calls = 0;
        let out = wait_for(
            Wait {
                timeout: Some(Duration::ZERO),
                ..Wait::default()
            },
            |_| {},
            |b| {
                assert!(!b);
                calls += 1;
                Ok(None::<()>)
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::TimedOut);
        assert_eq!(calls, 1);
    }

    #[test]
    fn deadline_interrupts_a_blocking_attempt() {
        let out = wait_for(
            Wait {
                timeout: Some(Duration::from_millis(30)),
                ..Wait::default()
            },
            |_| {},
            |b| {
                if b {
                    signal::pause();
                    return Err(io::Error::from(io::ErrorKind::Interrupted));
                }
                Ok(None::<()>)
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::TimedOut);
    }

    #[test]
    fn polling_rechecks_until_success() {
        let mut checks = 0;
        let out = wait_for(
            Wait {
                poll: Some(Duration::from_millis(1)),
                ..Wait::default()
            },
            |_| {},
            |b| {
                if b {
                    signal::pause();
                    return Err(io::Error::from(io::ErrorKind::Interrupted));
                }
                checks += 1;
                Ok((checks == 3).then_some(checks))
            },
        )
        .unwrap();
        assert_eq!(out, Outcome::Acquired(3));
    }
}
