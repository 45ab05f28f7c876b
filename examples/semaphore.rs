//! At most N at once: eight workers (threads here; processes or hosts alike) share a
//! semaphore of two slots, and each says which slot it got.
//!
//! ```text
//! cargo run --example semaphore -- SEM
//! ```

use std::{
    process::ExitCode,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

static INSIDE: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: semaphore SEM");
        return ExitCode::from(2);
    };
    let sem = fsync::Semaphore::new(&path, 2);
    let workers: Vec<_> = (0..8)
        .map(|n| {
            let sem = sem.clone();
            std::thread::spawn(move || -> fsync::Result<()> {
                let slot = sem
                    .acquire(Some(Duration::from_secs(30)))?
                    .expect("a slot in time");
                let inside = INSIDE.fetch_add(1, Ordering::SeqCst) + 1;
                MOST.fetch_max(inside, Ordering::SeqCst);
                println!("worker {n} in slot {}", slot.slot());
                std::thread::yield_now(); // ... the work ...
                INSIDE.fetch_sub(1, Ordering::SeqCst);
                drop(slot);
                Ok(())
            })
        })
        .collect();
    for w in workers {
        if let Err(e) = w.join().expect("a worker panicked") {
            eprintln!("semaphore: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!("at most {} at once", MOST.load(Ordering::SeqCst));
    ExitCode::SUCCESS
}
