//! Seed 001's LOCKTEST, across processes (`cargo bench --bench locktest`; see BENCHMARKS.md).
//!
//! Two groups of 3 worker processes each loop `LOOPS` times: think (random 0-10 ms), claim,
//! hold (random 0-10 ms), release. A claim first tries without waiting (an "ace" if that
//! succeeds), then waits. Every worker appends `+ GROUP pid` / `- GROUP pid` to one O_APPEND log
//! while inside; the sanity check replays it and counts "goofups": members of two groups inside
//! at once (for the mutex: two processes at once; for --max 2: three of one group). Reported per
//! group: claims, aces, and average / min / max wait, for the mutex, the group lock, the group
//! lock with --max 2, and the reader/writer lock (group A reads, group B writes).
//!
//! `FSYNC_LOCKTEST_LOOPS` sets the loops per worker (default 200, as the article's; 20 under
//! `cargo test --benches`).

use std::{
    collections::HashMap,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use fsync::{GroupLock, Mode, Mutex, Swmr};

const ROLE: &str = "FSYNC_LOCKTEST_WORKER";

#[derive(Clone, Copy, Debug)]
enum Variant {
    Mutex,
    GroupLock,
    GroupLockMax2,
    Swmr,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Mutex => "mutex",
            Variant::GroupLock => "grouplock",
            Variant::GroupLockMax2 => "grouplock --max 2",
            Variant::Swmr => "swmr (A reads, B writes)",
        }
    }

    fn parse(s: &str) -> Variant {
        match s {
            "mutex" => Variant::Mutex,
            "grouplock" => Variant::GroupLock,
            "grouplock2" => Variant::GroupLockMax2,
            _ => Variant::Swmr,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Variant::Mutex => "mutex",
            Variant::GroupLock => "grouplock",
            Variant::GroupLockMax2 => "grouplock2",
            Variant::Swmr => "swmr",
        }
    }
}

/// xorshift, seeded per worker.
struct Rng(u64);

impl Rng {
    fn ms(&mut self, max: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_micros(self.0 % (max * 1000 + 1))
    }
}

fn mark(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(0)
        .open(log)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// One worker process: loops, and prints `claims aces total_us min_us max_us`.
fn worker(variant: Variant, group: &str, dir: &Path, loops: usize, seed: u64) {
    let log = dir.join("log");
    let lock = dir.join("lock");
    let mut rng = Rng(seed);
    let (mut aces, mut total, mut min, mut max) =
        (0usize, Duration::ZERO, Duration::MAX, Duration::ZERO);
    for _ in 0..loops {
        std::thread::sleep(rng.ms(10));
        let start = Instant::now();
        let claim = |t: Option<Duration>| -> Option<Box<dyn std::any::Any>> {
            match variant {
                Variant::Mutex => Mutex::new(&lock)
                    .acquire(t)
                    .unwrap()
                    .map(|g| Box::new(g) as _),
                Variant::GroupLock => GroupLock::new(&lock)
                    .enter(group, None, t)
                    .unwrap()
                    .map(|g| Box::new(g) as _),
                Variant::GroupLockMax2 => GroupLock::new(&lock)
                    .enter(group, Some(2), t)
                    .unwrap()
                    .map(|g| Box::new(g) as _),
                Variant::Swmr => {
                    let mode = if group == "A" {
                        Mode::Shared
                    } else {
                        Mode::Exclusive
                    };
                    let outcome = Swmr::new(&lock).acquire(mode, t, |_| {}).unwrap();
                    match outcome {
                        fsync::Outcome::Acquired(g) => Some(Box::new(g) as _),
                        _ => None,
                    }
                }
            }
        };
        let guard = match claim(Some(Duration::ZERO)) {
            Some(g) => {
                aces += 1;
                g
            }
            None => claim(None).expect("a wait without timeout ends with the lock"),
        };
        let waited = start.elapsed();
        total += waited;
        min = min.min(waited);
        max = max.max(waited);
        let pid = std::process::id();
        mark(&log, &format!("+ {group} {pid}\n"));
        std::thread::sleep(rng.ms(10));
        mark(&log, &format!("- {group} {pid}\n"));
        drop(guard);
    }
    println!(
        "{loops} {aces} {} {} {}",
        total.as_micros(),
        min.as_micros(),
        max.as_micros()
    );
}

/// Replay the log: goofups are states the variant forbids.
fn goofups(log: &str, variant: Variant) -> usize {
    let mut inside: HashMap<&str, &str> = HashMap::new();
    let mut bad = 0;
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() != 3 {
            continue;
        }
        if w[0] == "-" {
            inside.remove(w[2]);
            continue;
        }
        inside.insert(w[2], w[1]);
        let a = inside.values().filter(|g| **g == "A").count();
        let b = inside.len() - a;
        let ok = match variant {
            Variant::Mutex => inside.len() <= 1,
            Variant::GroupLock => a == 0 || b == 0,
            Variant::GroupLockMax2 => (a == 0 || b == 0) && a <= 2 && b <= 2,
            Variant::Swmr => b == 0 || (b == 1 && a == 0),
        };
        if !ok {
            bad += 1;
        }
    }
    bad
}

fn main() {
    if let Ok(spec) = std::env::var(ROLE) {
        let parts: Vec<&str> = spec.split(',').collect();
        worker(
            Variant::parse(parts[0]),
            parts[1],
            Path::new(parts[2]),
            parts[3].parse().unwrap(),
            parts[4].parse().unwrap(),
        );
        return;
    }
    let smoke = !std::env::args().any(|a| a == "--bench");
    let loops: usize = std::env::var("FSYNC_LOCKTEST_LOOPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if smoke { 20 } else { 200 });
    let exe = std::env::current_exe().unwrap();
    println!(
        "LOCKTEST across processes: 2 groups x 3 processes x {loops} loops, hold and think 0-10 ms"
    );
    println!(
        "{:26} {:5} {:>6} {:>5} {:>9} {:>8} {:>8} {:>8}",
        "variant", "group", "claims", "aces", "avg ms", "min ms", "max ms", "goofups"
    );
    for variant in [
        Variant::Mutex,
        Variant::GroupLock,
        Variant::GroupLockMax2,
        Variant::Swmr,
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log"), "").unwrap();
        let workers: Vec<(&str, std::process::Child)> = (0..6)
            .map(|i| {
                let group = if i < 3 { "A" } else { "B" };
                let spec = format!(
                    "{},{group},{},{loops},{}",
                    variant.key(),
                    dir.path().display(),
                    0x9e37_79b9 + i as u64 * 7919
                );
                let child = Command::new(&exe)
                    .env(ROLE, spec)
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                (group, child)
            })
            .collect();
        let mut per_group: HashMap<&str, (usize, usize, u128, u128, u128)> = HashMap::new();
        for (group, child) in workers {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "worker failed");
            let f: Vec<u128> = String::from_utf8(out.stdout)
                .unwrap()
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let e = per_group.entry(group).or_insert((0, 0, 0, u128::MAX, 0));
            e.0 += f[0] as usize;
            e.1 += f[1] as usize;
            e.2 += f[2];
            e.3 = e.3.min(f[3]);
            e.4 = e.4.max(f[4]);
        }
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
        let bad = goofups(&log, variant);
        for group in ["A", "B"] {
            let (claims, aces, total, min, max) = per_group[group];
            println!(
                "{:26} {:5} {:>6} {:>5} {:>9.2} {:>8.2} {:>8.2} {:>8}",
                variant.name(),
                group,
                claims,
                aces,
                total as f64 / claims as f64 / 1000.0,
                min as f64 / 1000.0,
                max as f64 / 1000.0,
                bad
            );
        }
        assert_eq!(bad, 0, "goofups in {}", variant.name());
    }
}
