//! The `fsync` command: parse, dispatch, turn the result into an exit status (all in `cli`).
//!
//! On linux-gnu, `main` is the C entry point rather than Rust's (`no_main`): Rust's start-up
//! reads `/proc/self/maps` to place a stack guard and installs a stack-overflow handler, which
//! for a program that usually runs for a millisecond (a lock around a short command) was a
//! seventh of its instructions. std still fills `args_os()` there (glibc passes argc/argv to
//! initialisers, which std uses); other C libraries (musl) do not, so elsewhere `main` is Rust's.
//! What of the start-up we want is done in [`run`]: closed standard descriptors filled (see
//! [`fill_closed_standard_fds`]) and SIGPIPE ignored (a closed pipe is an error we report, see
//! `Failure::BrokenPipe`), neither for `flock`, which does as flock(1) does; and `exit` flushes
//! standard output.
#![cfg_attr(all(not(test), target_os = "linux", target_env = "gnu"), no_main)]
#![deny(unsafe_code)]

mod cli;

#[cfg(all(not(test), target_os = "linux", target_env = "gnu"))]
// The C entry point must have the unmangled name `main`, an attribute the compiler counts as
// unsafe code (the linker takes the first symbol of a name): the command's only such code.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    run()
}

/// Rust's entry point: in unit-test builds (where the test harness replaces it) and where std
/// would not see the arguments without its own start-up.
#[cfg(any(test, not(all(target_os = "linux", target_env = "gnu"))))]
fn main() {
    run()
}

fn run() -> ! {
    // flock(1) leaves closed standard descriptors closed (its lock file takes the first) and
    // SIGPIPE as its caller set it: so does `fsync flock`.
    match cli::is_flock() {
        true => drop(fsync::internal::note_sigpipe()),
        false => {
            fill_closed_standard_fds();
            fsync::internal::ignore_sigpipe();
        }
    }
    let exit = cli::main();
    if let Some(sig) = exit.signal {
        // Whatever standard output holds goes out first, as `exit` would have flushed it.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        fsync::internal::die_of(sig);
    }
    std::process::exit(exit.code.into())
}

/// Standard descriptors that are closed (`fsync msg recv B >&-`) get `/dev/null`, opened the
/// other way round (0 write-only, 1 and 2 read-only, close-on-exec): otherwise the next file
/// fsync opens would become standard output and receive the payload. This way a read of a
/// closed stdin and a write to a closed stdout or stderr fail (`EBADF`) as they would have, and
/// commands we run still find them closed.
fn fill_closed_standard_fds() {
    use nix::{
        fcntl::{FcntlArg, OFlag, fcntl, open},
        sys::stat::Mode,
    };
    for (fd, access) in [
        (0, OFlag::O_WRONLY),
        (1, OFlag::O_RDONLY),
        (2, OFlag::O_RDONLY),
    ] {
        if fcntl(fd, FcntlArg::F_GETFD) != Err(nix::errno::Errno::EBADF) {
            continue;
        }
        // The lowest free descriptor: `fd` itself, since those below it are open.
        if let Ok(null) = open("/dev/null", access | OFlag::O_CLOEXEC, Mode::empty())
            && null != fd
        {
            let _ = nix::unistd::dup3(null, fd, OFlag::O_CLOEXEC);
            let _ = nix::unistd::close(null);
        }
    }
}
