//! The LOCKTEST of Asche's "Compound Win32 Synchronization Objects" (MSDN, 1994), on fsync's
//! locks (`cargo bench --bench locktest`; see BENCHMARKS.md).
//!
//! Two groups of 3 workers each loop `LOOPS` times: think (random), claim, hold (random),
//! release. A claim first tries without waiting (an "ace" if that succeeds), then waits. Every
//! worker appends `+ GROUP id` / `- GROUP id` to one O_APPEND log while inside; the sanity
//! check replays it and counts "goofups": states the lock forbids (members of two groups inside
//! at once; for the mutex two workers at once; for --max 2 three of one group; for the
//! reader/writer locks a writer with anyone). Reported per group: claims, aces, average / min /
//! max wait, and turnaround (the average time of one loop), and per variant the total time.
//!
//! Besides fsync's own locks, the article's CCCR: its group lock built from a conditional
//! critical region, here on [`Mutex::acquire_when`] (see [`CcrMember`]), and the reader/writer
//! lock the article says it adapts to (group A reads, group B writes).
//!
//! Two settings:
//! - default: processes, think and hold 0-10 ms, for the mutex, the group lock, the group lock
//!   with --max 2, the reader/writer lock (group A reads, group B writes) and the two CCR locks;
//! - `cargo bench --bench locktest -- --article`: the article's own settings (think and hold
//!   0-100 ms, 200 loops), with threads of one process and with processes, and the article's
//!   unsafe baseline (no lock at all), which must show goofups: proof that the check can fail.
//!
//! `FSYNC_LOCKTEST_LOOPS` sets the loops per worker (default 200, as the article's; 20 under
//! `cargo test --benches`); `FSYNC_LOCKTEST_ONLY=mutex,swmr` runs only those variants (keys:
//! unsafe, mutex, grouplock, grouplock2, swmr, ccr, ccrrw).

use std::{
    collections::HashMap,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use fsync::{GroupLock, Mode, Mutex, Swmr};

const ROLE: &str = "FSYNC_LOCKTEST_WORKER";

#[derive(Clone, Copy, Debug)]
enum Variant {
    /// The article's CUnsafe: claim and release do nothing.
    Unsafe,
    Mutex,
    GroupLock,
    GroupLockMax2,
    Swmr,
    /// The article's CCCR: the group lock as a conditional critical region.
    Ccr,
    /// The CCR adapted to a reader/writer lock: group A reads, group B writes.
    CcrRw,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Unsafe => "unsafe (no lock)",
            Variant::Mutex => "mutex",
            Variant::GroupLock => "grouplock",
            Variant::GroupLockMax2 => "grouplock --max 2",
            Variant::Swmr => "swmr (A reads, B writes)",
            Variant::Ccr => "ccr (group lock)",
            Variant::CcrRw => "ccr rw (A reads, B writes)",
        }
    }

    fn parse(s: &str) -> Variant {
        match s {
            "unsafe" => Variant::Unsafe,
            "mutex" => Variant::Mutex,
            "grouplock" => Variant::GroupLock,
            "grouplock2" => Variant::GroupLockMax2,
            "ccr" => Variant::Ccr,
            "ccrrw" => Variant::CcrRw,
            _ => Variant::Swmr,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Variant::Unsafe => "unsafe",
            Variant::Mutex => "mutex",
            Variant::GroupLock => "grouplock",
            Variant::GroupLockMax2 => "grouplock2",
            Variant::Swmr => "swmr",
            Variant::Ccr => "ccr",
            Variant::CcrRw => "ccrrw",
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

/// How long workers think and hold: each a random time from 0 to `max_ms`.
#[derive(Clone, Copy)]
struct Setting {
    loops: usize,
    max_ms: u64,
}

/// One worker's figures: claims, aces, and waits and loop time in microseconds.
#[derive(Clone, Copy)]
struct Stats {
    claims: usize,
    aces: usize,
    wait_us: u128,
    min_us: u128,
    max_us: u128,
    loop_us: u128,
}

impl Stats {
    fn line(&self) -> String {
        let s = self;
        let (c, a, w, lo, hi, l) = (s.claims, s.aces, s.wait_us, s.min_us, s.max_us, s.loop_us);
        format!("{c} {a} {w} {lo} {hi} {l}")
    }

    fn parse(line: &str) -> Stats {
        let f: Vec<u128> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        Stats {
            claims: f[0] as usize,
            aces: f[1] as usize,
            wait_us: f[2],
            min_us: f[3],
            max_us: f[4],
            loop_us: f[5],
        }
    }

    fn add(&mut self, o: &Stats) {
        self.claims += o.claims;
        self.aces += o.aces;
        self.wait_us += o.wait_us;
        self.min_us = self.min_us.min(o.min_us);
        self.max_us = self.max_us.max(o.max_us);
        self.loop_us += o.loop_us;
    }
}

/// A member inside the article's CCCR lock ([`Variant::Ccr`], [`Variant::CcrRw`]): Asche's
/// group lock built from a conditional critical region, on fsync's [`Mutex::acquire_when`].
///
/// The lock is a directory holding the region's mutex, `mutex`, and `counts`: how many members
/// of group A and of group B are inside ("A B"; no file: none), read and written only inside
/// the region. Claim as the article's `ClaimGroupLock`: enter the region once no member of the
/// other group is inside (in the reader/writer lock, a writer once nobody is inside), count
/// yourself in, leave the region. Until the condition holds, `acquire_when` sleeps until
/// another holder has been in the region (a claim or a release) and then evaluates it again,
/// where the article's CCCR polls its events under a critical section. Release as its
/// `ReleaseGroupLock`, a region with the condition TRUE (a plain `acquire`): count yourself
/// out. A member inside the group lock holds no lock at all: the counts are the group lock, and
/// a member that died inside would stay counted (so this is a bench's lock, not a library's).
struct CcrMember {
    mutex: Mutex,
    counts: PathBuf,
    /// 0 for group A, 1 for group B.
    group: usize,
}

impl CcrMember {
    fn claim(lock: &Path, group: &str, rw: bool, t: Option<Duration>) -> Option<CcrMember> {
        std::fs::create_dir_all(lock).unwrap();
        let counts = lock.join("counts");
        let mutex = Mutex::new(lock.join("mutex"));
        let g = usize::from(group == "B");
        // The article's condition: "events of all other groups set", i.e. none of them inside.
        let may_enter = |c: [u64; 2]| {
            if rw && g == 1 {
                c == [0, 0]
            } else {
                c[1 - g] == 0
            }
        };
        let region = mutex
            .acquire_when(|| may_enter(ccr_counts(&counts)), t)
            .unwrap()?;
        let mut c = ccr_counts(&counts);
        c[g] += 1;
        ccr_write(&counts, c);
        drop(region);
        Some(CcrMember {
            mutex,
            counts,
            group: g,
        })
    }
}

impl Drop for CcrMember {
    fn drop(&mut self) {
        let region = self
            .mutex
            .acquire(None)
            .unwrap()
            .expect("a wait without timeout ends with the lock");
        let mut c = ccr_counts(&self.counts);
        c[self.group] -= 1;
        ccr_write(&self.counts, c);
        drop(region);
    }
}

/// The CCR's counts of members inside, group A and group B.
fn ccr_counts(path: &Path) -> [u64; 2] {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let c: Vec<u64> = text
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            [c[0], c[1]]
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => [0, 0],
        Err(e) => panic!("cannot read {}: {e}", path.display()),
    }
}

fn ccr_write(path: &Path, c: [u64; 2]) {
    std::fs::write(path, format!("{} {}\n", c[0], c[1])).unwrap();
}

/// Claim the lock for `group`, waiting up to `t`.
fn claim(
    variant: Variant,
    lock: &Path,
    group: &str,
    t: Option<Duration>,
) -> Option<Box<dyn std::any::Any>> {
    match variant {
        Variant::Unsafe => Some(Box::new(())),
        Variant::Mutex => Mutex::new(lock)
            .acquire(t)
            .unwrap()
            .map(|g| Box::new(g) as _),
        Variant::GroupLock => GroupLock::new(lock)
            .enter(group, t)
            .unwrap()
            .map(|g| Box::new(g) as _),
        Variant::GroupLockMax2 => GroupLock::new(lock)
            .max(2)
            .enter(group, t)
            .unwrap()
            .map(|g| Box::new(g) as _),
        Variant::Swmr => {
            let mode = if group == "A" {
                Mode::Shared
            } else {
                Mode::Exclusive
            };
            match Swmr::new(lock).acquire_with(mode, t, |_| {}).unwrap() {
                fsync::Outcome::Acquired(g) => Some(Box::new(g) as _),
                _ => None,
            }
        }
        Variant::Ccr => CcrMember::claim(lock, group, false, t).map(|m| Box::new(m) as _),
        Variant::CcrRw => CcrMember::claim(lock, group, true, t).map(|m| Box::new(m) as _),
    }
}

/// One worker: loops as the article's threads do; `id` names it in the log.
fn worker(
    variant: Variant,
    group: &str,
    dir: &Path,
    setting: Setting,
    seed: u64,
    id: &str,
) -> Stats {
    let log = dir.join("log");
    let lock = dir.join("lock");
    let mut rng = Rng(seed);
    let mut stats = Stats {
        claims: 0,
        aces: 0,
        wait_us: 0,
        min_us: u128::MAX,
        max_us: 0,
        loop_us: 0,
    };
    let begin = Instant::now();
    for _ in 0..setting.loops {
        std::thread::sleep(rng.ms(setting.max_ms));
        let start = Instant::now();
        let guard = match claim(variant, &lock, group, Some(Duration::ZERO)) {
            Some(g) => {
                stats.aces += 1;
                g
            }
            None => claim(variant, &lock, group, None)
                .expect("a wait without timeout ends with the lock"),
        };
        let waited = start.elapsed().as_micros();
        stats.claims += 1;
        stats.wait_us += waited;
        stats.min_us = stats.min_us.min(waited);
        stats.max_us = stats.max_us.max(waited);
        mark(&log, &format!("+ {group} {id}\n"));
        std::thread::sleep(rng.ms(setting.max_ms));
        mark(&log, &format!("- {group} {id}\n"));
        drop(guard);
    }
    stats.loop_us = begin.elapsed().as_micros() / setting.loops.max(1) as u128;
    stats
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
            Variant::Unsafe | Variant::Mutex => inside.len() <= 1,
            Variant::GroupLock | Variant::Ccr => a == 0 || b == 0,
            Variant::GroupLockMax2 => (a == 0 || b == 0) && a <= 2 && b <= 2,
            Variant::Swmr | Variant::CcrRw => b == 0 || (b == 1 && a == 0),
        };
        if !ok {
            bad += 1;
        }
    }
    bad
}

/// A started worker: waiting for it gives its figures.
type Job = Box<dyn FnOnce() -> Stats + Send>;

/// Workers as processes (`threads == false`) or as threads of this one; returns per-group
/// figures, the goofups and the total time.
fn run(
    variant: Variant,
    setting: Setting,
    threads: bool,
) -> (HashMap<&'static str, Stats>, usize, Duration) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("log"), "").unwrap();
    let exe = std::env::current_exe().unwrap();
    let begin = Instant::now();
    let workers: Vec<(&'static str, Job)> = (0..6)
        .map(|i| {
            let group: &'static str = if i < 3 { "A" } else { "B" };
            let seed = 0x9e37_79b9 + i as u64 * 7919;
            let path = dir.path().to_path_buf();
            let job: Job = if threads {
                let handle = std::thread::spawn(move || {
                    worker(variant, group, &path, setting, seed, &format!("t{i}"))
                });
                Box::new(move || handle.join().expect("worker thread"))
            } else {
                let spec = format!(
                    "{},{group},{},{},{},{seed}",
                    variant.key(),
                    path.display(),
                    setting.loops,
                    setting.max_ms
                );
                let child = Command::new(&exe)
                    .env(ROLE, spec)
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                Box::new(move || {
                    let out = child.wait_with_output().unwrap();
                    assert!(out.status.success(), "worker failed");
                    Stats::parse(&String::from_utf8(out.stdout).unwrap())
                })
            };
            (group, job)
        })
        .collect();
    let mut per_group: HashMap<&'static str, Stats> = HashMap::new();
    for (group, job) in workers {
        let stats = job();
        per_group
            .entry(group)
            .and_modify(|s| s.add(&stats))
            .or_insert(stats);
    }
    let total = begin.elapsed();
    if matches!(variant, Variant::Ccr | Variant::CcrRw) {
        // Every member counted itself out again.
        let counts = ccr_counts(&dir.path().join("lock").join("counts"));
        assert_eq!(counts, [0, 0], "members left counted in {}", variant.name());
    }
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    (per_group, goofups(&log, variant), total)
}

fn main() {
    if let Ok(spec) = std::env::var(ROLE) {
        let parts: Vec<&str> = spec.split(',').collect();
        let setting = Setting {
            loops: parts[3].parse().unwrap(),
            max_ms: parts[4].parse().unwrap(),
        };
        let id = format!("p{}", std::process::id());
        let stats = worker(
            Variant::parse(parts[0]),
            parts[1],
            Path::new(parts[2]),
            setting,
            parts[5].parse().unwrap(),
            &id,
        );
        println!("{}", stats.line());
        return;
    }
    let smoke = !std::env::args().any(|a| a == "--bench");
    let article = std::env::args().any(|a| a == "--article");
    let loops: usize = std::env::var("FSYNC_LOCKTEST_LOOPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if smoke { 20 } else { 200 });
    let setting = Setting {
        loops,
        max_ms: if article { 100 } else { 10 },
    };
    let variants: &[Variant] = if article {
        &[
            Variant::Unsafe,
            Variant::Mutex,
            Variant::GroupLock,
            Variant::GroupLockMax2,
            Variant::Swmr,
            Variant::Ccr,
            Variant::CcrRw,
        ]
    } else {
        &[
            Variant::Mutex,
            Variant::GroupLock,
            Variant::GroupLockMax2,
            Variant::Swmr,
            Variant::Ccr,
            Variant::CcrRw,
        ]
    };
    // `FSYNC_LOCKTEST_ONLY=mutex,swmr`: only those variants (by their keys).
    let only = std::env::var("FSYNC_LOCKTEST_ONLY").ok();
    let variants: Vec<Variant> = variants
        .iter()
        .copied()
        .filter(|v| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|k| k == v.key()))
        })
        .collect();
    let placements: &[bool] = if article { &[true, false] } else { &[false] };
    println!(
        "LOCKTEST: 2 groups x 3 workers x {loops} loops, think and hold 0-{} ms each",
        setting.max_ms
    );
    println!(
        "{:26} {:9} {:5} {:>6} {:>5} {:>8} {:>7} {:>7} {:>10} {:>8} {:>8}",
        "variant",
        "workers",
        "group",
        "claims",
        "aces",
        "avg ms",
        "min ms",
        "max ms",
        "turnaround",
        "total s",
        "goofups"
    );
    for &threads in placements {
        for &variant in &variants {
            let (per_group, bad, total) = run(variant, setting, threads);
            for group in ["A", "B"] {
                let s = per_group[group];
                println!(
                    "{:26} {:9} {:5} {:>6} {:>5} {:>8.2} {:>7.2} {:>7.2} {:>10.1} {:>8.1} {:>8}",
                    variant.name(),
                    if threads { "threads" } else { "processes" },
                    group,
                    s.claims,
                    s.aces,
                    s.wait_us as f64 / s.claims as f64 / 1000.0,
                    s.min_us as f64 / 1000.0,
                    s.max_us as f64 / 1000.0,
                    s.loop_us as f64 / 3.0 / 1000.0,
                    total.as_secs_f64(),
                    bad
                );
            }
            match variant {
                // The check must be able to fail: without a lock, workers overlap.
                Variant::Unsafe => assert!(bad > 0, "the unsafe baseline showed no goofups"),
                _ => assert_eq!(bad, 0, "goofups in {}", variant.name()),
            }
        }
    }
}
