//! A mutex handed over to a waiter that `.await`s it, beside one that blocks (`cargo bench
//! --bench async_handoff`; see BENCHMARKS.md).
//!
//! Two threads of one process take turns: the holder waits until the other is blocked in the
//! kernel on the lock (its ` -> FLOCK` waiter line shows in `/proc/locks`), takes the clock,
//! releases, and the other takes the clock again once its acquire returns. The blocking waiter
//! calls `Mutex::acquire`; the async one awaits `Mutex::acquire_async` (a helper thread blocks
//! for it, and wakes the waiting task) under `fsync::future::block_on`. We report p50, p90 and
//! p99 of each. The difference is what a future costs: a thread started per wait, and the
//! wake-up of the task by the helper.
//!
//! `FSYNC_BENCH_HANDOFFS=N` sets the number of handoffs per variant (default 2000). Under
//! `cargo test --benches` each variant runs a few handoffs, as a smoke test.

mod common;

use std::{
    os::unix::fs::MetadataExt,
    sync::{
        Arc, Barrier,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use fsync::{Mutex, future::block_on};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !args.iter().any(|a| a == "--bench");
    let rounds = match smoke {
        true => 20,
        false => std::env::var("FSYNC_BENCH_HANDOFFS").map_or(2000, |n| n.parse().unwrap()),
    };
    let dir = common::bench_dir();
    println!(
        "async_handoff: {rounds} handoffs per variant, in {}",
        dir.path().display()
    );
    for asynchronous in [false, true] {
        let path = dir.path().join(if asynchronous {
            "async.lck"
        } else {
            "blocking.lck"
        });
        let mut lat = handoffs(&path, rounds, asynchronous);
        lat.sort_unstable();
        let at = |p: usize| Duration::from_nanos(lat[(lat.len() * p / 100).min(lat.len() - 1)]);
        println!(
            "{:<9} p50 {:>9.1?}  p90 {:>9.1?}  p99 {:>9.1?}",
            if asynchronous { "async" } else { "blocking" },
            at(50),
            at(90),
            at(99)
        );
    }
}

/// `rounds` handoffs from this thread's holder to a waiter thread; the waiter's latencies (ns).
fn handoffs(path: &std::path::Path, rounds: usize, asynchronous: bool) -> Vec<u64> {
    let mutex = Mutex::new(path);
    drop(mutex.try_acquire().unwrap()); // create the file
    let ino = std::fs::metadata(path).unwrap().ino();
    let released_at = Arc::new(AtomicU64::new(0));
    let turn = Arc::new(Barrier::new(2));
    let waiter = {
        let (mutex, released_at, turn) = (mutex.clone(), released_at.clone(), turn.clone());
        std::thread::spawn(move || {
            let mut lat = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                turn.wait(); // the holder holds
                let got = match asynchronous {
                    true => block_on(mutex.acquire_async(None))
                        .unwrap()
                        .map(fsync::Unbound::bind),
                    false => mutex.acquire(None).unwrap(),
                };
                let now = now_ns();
                lat.push(now.saturating_sub(released_at.load(Ordering::SeqCst)));
                drop(got);
                turn.wait(); // released: the holder may take it again
            }
            lat
        })
    };
    for _ in 0..rounds {
        let held = mutex.acquire(None).unwrap();
        turn.wait();
        common::wait_blocked(ino);
        released_at.store(now_ns(), Ordering::SeqCst);
        drop(held);
        turn.wait();
    }
    waiter.join().unwrap()
}

fn now_ns() -> u64 {
    // One clock for both threads: the monotonic clock since a fixed start.
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
