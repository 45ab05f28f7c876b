//! The `fsync` command: parse, dispatch, turn the result into an exit status (all in `cli`).
//!
//! `main` is the C entry point rather than Rust's (`no_main`): Rust's start-up reads
//! `/proc/self/maps` to place a stack guard and installs a stack-overflow handler, which for a
//! program that usually runs for a millisecond (a lock around a short command) was a seventh of
//! its instructions. What of it we want is done here: SIGPIPE ignored (a closed pipe is an
//! error we report, see `Failure::BrokenPipe`), and `exit` flushes standard output.
#![cfg_attr(not(test), no_main)]

mod cli;

#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    run()
}

/// In unit-test builds the test harness supplies `main` (and replaces this one).
#[cfg(test)]
fn main() {
    run()
}

fn run() -> ! {
    // SAFETY: setting a disposition to SIG_IGN installs no handler code.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    std::process::exit(cli::main().into())
}
