/*!
The platform layer: the only place that talks to the operating system directly.

Everything above it (the wait core, the primitives) is written against these functions, so a port
to another Unix means reimplementing this folder with the same contract:

- [`binding`]: guards that stay on the thread that took them, and [`Unbound`](binding::Unbound)
  ones that may move (whose `Send` only this layer may promise).
- [`fs`]: opening lock files (create if missing, never truncate, close-on-exec, read-write where
  allowed and read-only otherwise, never creating through a symbolic link), what kind of file
  system a path is on (local, or network where other hosts cannot wake us).
- [`lock`]: whole-file locks with `flock(2)`, so that util-linux `flock(1)`, Perl and Python
  `flock` and `fsync` exclude each other on the same file; a blocking call can be interrupted by a
  signal (the wait core relies on `EINTR`).
- [`mounts`]: the mount table, which tells a descriptor's file system without a round trip to
  its server.
- [`notify`]: blocking until a directory changes (dnotify, inotify), local changes only.
- [`process`]: starting a command with the shell's rules (PATH, `/bin/sh` for scripts without
  `#!`), waiting for it without reaping it early, a pidfd for timed waits, signalling it.
- [`signal`]: the signal handlers and per-thread timers under the wait core (cancellation,
  forwarding to a child, death by a signal, wake-ups of blocking calls).
- [`procinfo`]: who we are (pid, host, command line), the clock, and which process holds a
  lock on a local file (from `/proc/locks` and `/proc/PID/fd`), for status reports and for
  `--delete` (which keeps a lock file another process still holds).
*/

pub(crate) mod binding;
pub(crate) mod dir;
pub(crate) mod fs;
pub(crate) mod lock;
pub(crate) mod mounts;
pub(crate) mod notify;
pub(crate) mod process;
pub(crate) mod procinfo;
pub(crate) mod signal;

/// Retry a call that a signal interrupted before it did anything (`EINTR`: the kernel performed
/// nothing). Calls that do not block rarely report it on local file systems; network ones may,
/// and fault injection does.
pub(crate) fn retrying<T>(mut call: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Run an open that creates the file if missing *without* `O_CREAT | O_EXCL` until it does not
/// fail with `EEXIST`, which it can only do on a FUSE network file system (GlusterFS, MooseFS):
/// there such an open is a lookup, then a create, and another host that creates the same name
/// in between makes the server answer `EEXIST`. The file exists now, so opening again finds it
/// (or, if a holder with `--delete` removed it meanwhile, creates it). Bounded, so that another
/// host creating and deleting the name in a loop cannot keep us here for ever.
pub(crate) fn creating<T>(mut call: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    const TRIES: u32 = 1000;
    let mut tries = 0;
    loop {
        match retrying(&mut call) {
            Err(e) if e.raw_os_error() == Some(nix::libc::EEXIST) && tries < TRIES => tries += 1,
            other => return other,
        }
    }
}

/// A C call's `-1` as the `errno` it set.
pub(crate) fn cvt(rc: nix::libc::c_int) -> std::io::Result<nix::libc::c_int> {
    if rc == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}
