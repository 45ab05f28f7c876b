//! Draining a mailbox (`cargo bench --bench msg_drain`; see BENCHMARKS.md): a queue of N
//! messages, written straight into the layout the `msg` module's docs describe, then taken by
//! 1, 2 and 4 receivers (threads of this process, each `recv` + `finish` in a loop until the
//! queue is empty), timed. With a receive that costs the same at any depth, the time grows
//! linearly with N.
//!
//! `FSYNC_DRAIN=N,N...` sets the queue lengths (default 10000,100000); `FSYNC_BENCH_DIR` the
//! directory. Under `cargo test --benches` it drains 200 messages once, as a smoke test.

mod common;
use common::bench_dir;

use std::{
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

/// A mailbox with messages 1..=n queued, the head at the first shard.
fn fill(box_dir: &Path, n: u64) {
    for sub in ["tmp", "q", "claimed", "recv", "senders", "delayed"] {
        std::fs::create_dir_all(box_dir.join(sub)).unwrap();
    }
    for seq in 1..=n {
        let shard = box_dir.join("q").join(format!("{:020}", seq / 100 * 100));
        if seq == 1 || seq % 100 == 0 {
            std::fs::create_dir_all(&shard).unwrap();
        }
        let name = format!("{seq:020}.bench-1-{seq:016x}.-.msg");
        std::fs::write(shard.join(name), format!("job {seq}\n")).unwrap();
    }
    std::fs::write(box_dir.join("seq"), format!("{n}\n")).unwrap();
    std::fs::write(box_dir.join("head"), format!("{:020}\n", 0)).unwrap();
}

fn drain(box_dir: &Path, receivers: usize) -> (Duration, usize) {
    let taken = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..receivers {
            s.spawn(|| {
                let mailbox = fsync::Mailbox::new(box_dir);
                while let Some(msg) = mailbox.recv(Some(Duration::ZERO)).unwrap() {
                    msg.finish().unwrap();
                    taken.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    (start.elapsed(), taken.into_inner())
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--test" || a == "--bench") && cfg!(debug_assertions);
    let sizes: Vec<u64> = match std::env::var("FSYNC_DRAIN") {
        Ok(list) => list.split(',').map(|n| n.trim().parse().unwrap()).collect(),
        Err(_) if smoke => vec![200],
        Err(_) => vec![10_000, 100_000],
    };
    let dir = bench_dir();
    println!("drain: receivers take a queue of N messages (recv + finish), wall time");
    println!(
        "{:>8} {:>10} {:>10} {:>12}",
        "N", "receivers", "seconds", "us/message"
    );
    for &n in &sizes {
        for receivers in [1, 2, 4] {
            let box_dir = dir.path().join(format!("box-{n}-{receivers}"));
            fill(&box_dir, n);
            // The fill's writes flushed first: their write-back would be timed with the drain.
            let _ = std::process::Command::new("sync").status();
            let (took, taken) = drain(&box_dir, receivers);
            assert_eq!(taken as u64, n, "messages lost or doubled");
            println!(
                "{n:>8} {receivers:>10} {:>10.2} {:>12.1}",
                took.as_secs_f64(),
                took.as_secs_f64() * 1e6 / n as f64
            );
            std::fs::remove_dir_all(&box_dir).unwrap();
        }
    }
}
