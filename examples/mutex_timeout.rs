//! One process at a time: take a lock, waiting at most a few seconds for it, and run a
//! critical section with the fencing token a shared resource can check.
//!
//! ```text
//! cargo run --example mutex_timeout -- LOCK [SECONDS]
//! ```
//!
//! Exit status: 0 done, 1 still busy after SECONDS (default 10), 2 an error.

use std::{process::ExitCode, time::Duration};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(lock) = args.next() else {
        eprintln!("usage: mutex_timeout LOCK [SECONDS]");
        return ExitCode::from(2);
    };
    let seconds = args.next().map_or(Ok(10), |s| s.parse::<u64>());
    let Ok(seconds) = seconds else {
        eprintln!("mutex_timeout: SECONDS must be a whole number");
        return ExitCode::from(2);
    };
    let mutex = fsync::Mutex::new(&lock);
    match mutex.acquire(Some(Duration::from_secs(seconds))) {
        Ok(Some(guard)) => {
            // The token grows with every holding: a resource that remembers the largest it
            // has seen refuses a late write from a holder that lost the lock.
            println!("acquired {lock} with fencing token {}", guard.fence());
            // ... the critical section ...
            drop(guard);
            println!("released {lock}");
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("{lock} still busy after {seconds} s");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("mutex_timeout: {e}");
            ExitCode::from(2)
        }
    }
}
