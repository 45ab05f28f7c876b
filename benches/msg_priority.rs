//! What priority levels cost a receive (`cargo bench --bench msg_priority`; see BENCHMARKS.md):
//! a queue of N messages written straight into the layout the `msg` module's docs describe,
//! drained by one receiver (`recv` + `finish` in a loop until empty), timed, in three mailboxes:
//!
//! - `none`: level 0 only, no level directory (a mailbox that never used priorities);
//! - `unused`: level 0 only, the directories of levels 1 to 3 there but empty (used once);
//! - `mixed`: the messages dealt out over the four levels in turn.
//!
//! `FSYNC_DRAIN=N` sets the queue length (default 10000), `ROUNDS` the drains of each (default
//! 3, the median shown), `KINDS=none,...` the mailboxes (`none` alone runs on an fsync before
//! levels too, to compare); `FSYNC_BENCH_DIR` the directory. Under `cargo test --benches` it drains
//! 200 messages once, as a smoke test.

mod common;
use common::bench_dir;

use std::{
    path::Path,
    time::{Duration, Instant},
};

/// The level of each message of a mailbox (`None`: no level directory at all).
type Levels = Option<fn(u64) -> u8>;

/// A mailbox with messages 1..=n queued, message `seq` at level `level_of(seq)` (`None`: no
/// level directory at all), each level's head at its first shard.
fn fill(box_dir: &Path, n: u64, level_of: Levels) {
    for sub in ["tmp", "q", "claimed", "recv", "senders", "delayed"] {
        std::fs::create_dir_all(box_dir.join(sub)).unwrap();
    }
    if level_of.is_some() {
        for p in 1..=3 {
            let level = box_dir.join("q").join(format!("p{p}"));
            std::fs::create_dir_all(&level).unwrap();
            std::fs::write(level.join("head"), format!("{:020}\n", 0)).unwrap();
        }
    }
    for seq in 1..=n {
        let p = level_of.map_or(0, |f| f(seq));
        let (dir, kind) = match p {
            0 => (box_dir.join("q"), "msg".to_string()),
            p => (box_dir.join("q").join(format!("p{p}")), format!("msg,p{p}")),
        };
        let shard = dir.join(format!("{:020}", seq / 100 * 100));
        std::fs::create_dir_all(&shard).unwrap();
        let name = format!("{seq:020}.bench-1-{seq:016x}.-.{kind}");
        std::fs::write(shard.join(name), format!("job {seq}\n")).unwrap();
    }
    std::fs::write(box_dir.join("seq"), format!("{n}\n")).unwrap();
    std::fs::write(box_dir.join("head"), format!("{:020}\n", 0)).unwrap();
}

fn drain(box_dir: &Path) -> (Duration, usize) {
    let mailbox = fsync::Mailbox::new(box_dir);
    let start = Instant::now();
    let mut taken = 0;
    while let Some(msg) = mailbox.recv(Some(Duration::ZERO)).unwrap() {
        msg.finish().unwrap();
        taken += 1;
    }
    (start.elapsed(), taken)
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--test" || a == "--bench") && cfg!(debug_assertions);
    let n: u64 = match std::env::var("FSYNC_DRAIN") {
        Ok(n) => n.trim().parse().unwrap(),
        Err(_) if smoke => 200,
        Err(_) => 10_000,
    };
    let rounds: usize = match std::env::var("ROUNDS") {
        Ok(r) => r.trim().parse().unwrap(),
        Err(_) if smoke => 1,
        Err(_) => 3,
    };
    let dir = bench_dir();
    println!(
        "priority: one receiver takes a queue of {n} messages (recv + finish), median of {rounds}"
    );
    println!("{:>8} {:>12} {:>12}", "mailbox", "seconds", "us/message");
    let kinds: [(&str, Levels); 3] = [
        ("none", None),
        ("unused", Some(|_| 0)),
        ("mixed", Some(|seq| (seq % 4) as u8)),
    ];
    let wanted = std::env::var("KINDS").unwrap_or_else(|_| "none,unused,mixed".to_string());
    for (name, level_of) in kinds {
        if !wanted.split(',').any(|k| k == name) {
            continue;
        }
        let mut times = Vec::new();
        for round in 0..rounds {
            let box_dir = dir.path().join(format!("box-{name}-{round}"));
            fill(&box_dir, n, level_of);
            // The fill's writes flushed first: their write-back would be timed with the drain.
            let _ = std::process::Command::new("sync").status();
            let (took, taken) = drain(&box_dir);
            assert_eq!(taken as u64, n, "messages lost or doubled");
            times.push(took);
            std::fs::remove_dir_all(&box_dir).unwrap();
        }
        times.sort();
        let took = times[times.len() / 2];
        println!(
            "{name:>8} {:>12.2} {:>12.1}",
            took.as_secs_f64(),
            took.as_secs_f64() * 1e6 / n as f64
        );
    }
}
