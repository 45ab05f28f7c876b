/*!
Starting again when the directory was deleted under us. The semaphore, the group lock and the
group let their last user delete their directory (`--delete`); whoever enters meanwhile may
find, at any step until it holds the live waiting line (a semaphore's `queue`, a group lock's
`turnstile`, a group's `join.lock`), that what it opened was removed, and must start again on
the directory made anew. This is the one loop that does so, for the three.

It is no wait of its own (each attempt waits in the wait core, under the caller's deadline), so
it is not in [`crate::wait`]; and it serves the group, whose deletion is not
[`crate::teardown`]'s, so it is not there either.

A neighbour who deletes the directory in a loop could send an acquirer back for ever. So the
loop ends: at the caller's deadline, at a cancellation signal, and after [`MAX_RESTARTS`] in a
row with an error of kind [`ErrorKind::Unavailable`] naming the path; never with a panic, which
the release build (`panic = "abort"`) would turn into the death of the whole program.
*/

use std::path::Path;

use crate::{
    error::{Error, ErrorKind, Result},
    platform::dir::Dir,
    wait::{self, Deadline, Outcome},
};

/// How many times in a row an acquisition starts again after a deletion before it gives up.
/// Each needs a whole deletion by another process between our open of the directory and our
/// lock of its waiting line, which a last user leaving with `--delete` does once per use: this
/// many in a row is someone deleting the directory in a loop.
pub(crate) const MAX_RESTARTS: u32 = 100;

/// Open the primitive's directory at `path` with `open`, then make one `attempt` in it; start
/// again while the attempt finds that a deletion removed what it opened: it answers
/// `Acquired(None)` (the waiting line it locked is no longer the live one), or fails while the
/// directory it was given has been removed. Returns the directory of the last attempt with
/// its outcome.
///
/// Starting again takes no time of its own, but it stops at a cancellation signal
/// (`Interrupted`) and, from the second time on, once `deadline` has passed (`TimedOut`: a try
/// without waiting still gets one more attempt, since the deletion that sent it back is over).
/// After [`MAX_RESTARTS`] in a row: an error naming `path`.
pub(crate) fn after_deletion<T>(
    path: &Path,
    deadline: Deadline,
    mut open: impl FnMut() -> Result<Dir>,
    mut attempt: impl FnMut(&Dir) -> Result<Outcome<Option<T>>>,
) -> Result<(Dir, Outcome<T>)> {
    let mut restarts = 0;
    loop {
        let top = open()?;
        match attempt(&top) {
            Ok(Outcome::Acquired(Some(v))) => return Ok((top, Outcome::Acquired(v))),
            Ok(Outcome::TimedOut) => return Ok((top, Outcome::TimedOut)),
            Ok(Outcome::Interrupted(sig)) => return Ok((top, Outcome::Interrupted(sig))),
            Ok(Outcome::Acquired(None)) => {}
            Err(_) if removed(&top) => {}
            Err(e) => return Err(e),
        }
        restarts += 1;
        if let Some(sig) = wait::cancelled() {
            return Ok((top, Outcome::Interrupted(sig)));
        }
        if restarts > 1 && deadline.passed() {
            return Ok((top, Outcome::TimedOut));
        }
        if restarts > MAX_RESTARTS {
            return Err(Error::new(
                path,
                ErrorKind::Unavailable,
                format!(
                    "deleted under us {MAX_RESTARTS} times in a row while we tried to enter: \
                     another process keeps deleting it"
                ),
            ));
        }
    }
}

/// Whether the directory `dir` was removed since we opened it (no name has it any more).
pub(crate) fn removed(dir: &Dir) -> bool {
    dir.status().is_ok_and(|st| st.st_nlink == 0)
}

#[cfg(test)]
mod tests;
