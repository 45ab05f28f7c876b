//! Increment a counter file N times, each time under an `fsync::Mutex` (the library in a loop,
//! as a Rust program would use it). `bench/filelock_compare.sh` runs several of these at once
//! beside Python's `filelock` doing the same, and checks the final count.
//!
//! ```text
//! cargo run --release --example counter -- LOCK COUNTER N
//! ```

use std::{fs, process::ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [lock, counter, n] = args.as_slice() else {
        eprintln!("usage: counter LOCK COUNTER N");
        return ExitCode::from(2);
    };
    let Ok(n) = n.parse::<u64>() else {
        eprintln!("counter: N must be a number, not {n:?}");
        return ExitCode::from(2);
    };
    let mutex = fsync::Mutex::new(lock);
    for _ in 0..n {
        let guard = match mutex.acquire(None) {
            Ok(Some(g)) => g,
            Ok(None) => unreachable!("no timeout"),
            Err(e) => {
                eprintln!("counter: {e}");
                return ExitCode::FAILURE;
            }
        };
        let value: u64 = fs::read_to_string(counter)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if let Err(e) = fs::write(counter, format!("{}\n", value + 1)) {
            eprintln!("counter: {counter}: {e}");
            return ExitCode::FAILURE;
        }
        drop(guard);
    }
    ExitCode::SUCCESS
}
