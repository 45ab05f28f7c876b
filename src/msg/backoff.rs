//! How long a failed job is held back before its next attempt: a growth from a base to a most,
//! doubling with each failure, optionally jittered so that many jobs that failed together (a
//! database down for a minute) do not all come back at the same instant.

use std::time::Duration;

use crate::platform::procinfo;

/// The longest a failed job is held back under [`Mailbox::backoff`](crate::Mailbox::backoff), however often it failed.
pub const MAX_BACKOFF: Duration = Duration::from_mins(5);

/// How much a jittered wait may differ from the doubling one: up to this many percent less or
/// more (never more than the most, [`Backoff::max`]).
pub const JITTER_PERCENT: u32 = 20;

/// A failed job's backoff ([`Mailbox::backoff_with`](crate::Mailbox::backoff_with)): held back `base` after its first failure,
/// twice as long after each one after, `max` at most (never less than `base`); jittered, each
/// wait is drawn at random between [`JITTER_PERCENT`] below and above that (still `max` at
/// most).
///
/// ```
/// use std::time::Duration;
/// let b = fsync::msg::Backoff::doubling(Duration::from_secs(1), Duration::from_mins(5));
/// assert_eq!(b.after(3), Duration::from_secs(4));
/// let j = b.jittered();
/// assert!((Duration::from_millis(3200)..=Duration::from_millis(4800)).contains(&j.after(3)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: bool,
}

impl Backoff {
    /// `base` after the first failure, doubling with each one after, `max` at most (a `max`
    /// below `base` counts as `base`). No jitter unless [`jittered`](Self::jittered).
    pub const fn doubling(base: Duration, max: Duration) -> Backoff {
        let max = if max.as_nanos() < base.as_nanos() {
            base
        } else {
            max
        };
        Backoff {
            base,
            max,
            jitter: false,
        }
    }

    /// The same, each wait drawn at random within [`JITTER_PERCENT`] of it.
    #[must_use]
    pub fn jittered(self) -> Backoff {
        Backoff {
            jitter: true,
            ..self
        }
    }

    /// The wait after the first failure.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest wait.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Whether waits are jittered.
    pub fn is_jittered(&self) -> bool {
        self.jitter
    }

    /// Whether it holds nothing back (a base of zero).
    pub fn is_zero(&self) -> bool {
        self.base.is_zero()
    }

    /// How long a job that failed `failed` times (1 or more) is held back, with fresh
    /// randomness if jittered.
    pub fn after(&self, failed: u32) -> Duration {
        self.after_drawn(failed, random_unit())
    }

    /// [`after`](Self::after) with the random draw given: `draw` in `0..=u32::MAX` picks the
    /// wait from the lowest (0) to the highest (`u32::MAX`) the jitter allows.
    pub(super) fn after_drawn(&self, failed: u32, draw: u32) -> Duration {
        let wait = doubled(self.base, self.max, failed);
        if !self.jitter {
            return wait;
        }
        // From (100 - J)% to (100 + J)% of the wait, in steps of 1/2^32 of the span.
        let nanos = wait.as_nanos();
        let low = nanos * u128::from(100 - JITTER_PERCENT) / 100;
        let span = nanos * u128::from(2 * JITTER_PERCENT) / 100;
        let drawn = low + span * u128::from(draw) / u128::from(u32::MAX);
        let drawn = Duration::from_nanos(u64::try_from(drawn).unwrap_or(u64::MAX));
        drawn.min(self.max)
    }
}

/// `base` after the first failure, doubling with each one after, `max` at most, `base` at least.
fn doubled(base: Duration, max: Duration, failed: u32) -> Duration {
    let doublings = failed.saturating_sub(1).min(31);
    base.saturating_mul(1u32 << doublings).min(max).max(base)
}

/// A random number for the jitter (not for secrets: a hash of a fresh random state and the
/// time).
fn random_unit() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(procinfo::now_micros());
    h.finish() as u32
}

/// How long a message that failed `failed` times (1 or more) is held back under a backoff of
/// `base` ([`Mailbox::backoff`](crate::Mailbox::backoff)): `base` after the first failure, doubling with each one after,
/// [`MAX_BACKOFF`] at most (never less than `base`).
#[cfg(test)]
pub(super) fn backoff_after(base: Duration, failed: u32) -> Duration {
    Backoff::doubling(base, MAX_BACKOFF).after(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_doubles_from_its_base_up_to_its_most() {
        let b = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(20));
        let waits: Vec<u64> = (1..=7).map(|n| b.after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 20, 20]);
        assert_eq!(b.after(0), Duration::from_secs(1));
        assert_eq!(b.after(u32::MAX), Duration::from_secs(20));
        // A most below the base: the base.
        let b = Backoff::doubling(Duration::from_secs(9), Duration::from_secs(1));
        assert_eq!(
            (b.after(1), b.after(5)),
            (Duration::from_secs(9), Duration::from_secs(9))
        );
        assert_eq!(b.max(), Duration::from_secs(9));
        // What it was made of, and whether it holds anything back. (Mutants answered: the
        // accessors made constants.)
        assert_eq!(b.base(), Duration::from_secs(9));
        assert!(!b.is_zero());
        assert!(Backoff::doubling(Duration::ZERO, Duration::from_secs(1)).is_zero());
    }

    #[test]
    fn jitter_stays_within_a_fifth_either_way_and_under_the_most() {
        let b = Backoff::doubling(Duration::from_secs(10), Duration::from_mins(1)).jittered();
        assert_eq!(b.after_drawn(1, 0), Duration::from_secs(8));
        assert_eq!(b.after_drawn(1, u32::MAX), Duration::from_secs(12));
        assert_eq!(
            b.after_drawn(1, u32::MAX / 2),
            Duration::from_nanos(9_999_999_999)
        );
        assert_eq!(b.after_drawn(2, 0), Duration::from_secs(16));
        // At the most, never above it.
        assert_eq!(b.after_drawn(4, u32::MAX), Duration::from_mins(1));
        assert_eq!(b.after_drawn(4, 0), Duration::from_secs(48));
        for failed in 1..=6 {
            let plain = doubled(b.base, b.max, failed);
            for _ in 0..200 {
                let w = b.after(failed);
                assert!(
                    w >= plain * 4 / 5 && w <= (plain * 6 / 5).min(b.max),
                    "{w:?}"
                );
            }
        }
        // Random draws differ (200 equal ones would be a broken source).
        let draws: std::collections::HashSet<_> = (0..200).map(|_| b.after(1)).collect();
        assert!(draws.len() > 100, "{}", draws.len());
        // Without jitter, always the same.
        let plain = Backoff::doubling(b.base, b.max);
        assert!(b.is_jittered() && !plain.is_jittered());
        assert_eq!(plain.after_drawn(1, 0), Duration::from_secs(10));
        assert_eq!(plain.after_drawn(1, u32::MAX), Duration::from_secs(10));
    }
}
