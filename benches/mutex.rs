//! Mutex benchmarks (`cargo bench --bench mutex`; see BENCHMARKS.md).
//!
//! Two parts, in one binary:
//!
//! 1. **uncontended** (criterion): acquire + release of a free lock through the library,
//!    beside raw `flock(2)` doing the same (open + lock + close, as `flock(1)` does, and
//!    lock + unlock on a descriptor kept open).
//! 2. **handoff** (our own harness: criterion cannot time across processes): two processes
//!    alternately hold one lock. The holder waits until the other process is *blocked* in the
//!    kernel on that lock (its waiter line ` -> FLOCK` for the inode shows in `/proc/locks`),
//!    takes a `CLOCK_MONOTONIC` timestamp, stores it in a shared `mmap`ed page, and releases;
//!    the waiter takes the clock again as soon as its acquire returns. Each side measures the
//!    handoffs towards it; we report p50, p90, p99 and max over both. The same protocol runs
//!    through `fsync::Mutex` and through raw `flock(2)`, the kernel's own baseline.
//!
//! Selecting parts: `cargo bench --bench mutex -- handoff` (or `FSYNC_BENCH_PART=handoff`) runs
//! only the handoff part, `-- uncontended` (or `FSYNC_BENCH_PART=uncontended`) only criterion.
//! `FSYNC_BENCH_HANDOFFS=N` sets the number of handoffs per variant (default 5000),
//! `FSYNC_BENCH_DIR` the directory the lock files live in (default: the temp dir), and
//! `FSYNC_BENCH_PIN` where the two processes run: `spread` (two CPUs), `same` (one CPU), `none`
//! (unpinned); by default both pinned placements are measured, because a wake-up on an idle CPU
//! and one on the CPU the releaser is leaving cost very different amounts.
//! Under `cargo test --benches` every part runs once, briefly, as a smoke test.

mod common;
use common::bench_dir;

use std::{
    fs::{File, OpenOptions},
    hint::black_box,
    io::{BufRead, BufReader, Read, Write},
    os::{
        fd::{AsRawFd, RawFd},
        unix::fs::{MetadataExt, OpenOptionsExt},
    },
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use criterion::Criterion;
use nix::libc;

/// Marks a re-executed copy of this binary as the other side of a handoff run.
const ROLE_ENV: &str = "FSYNC_BENCH_HANDOFF_CHILD";
/// Handoffs measured per variant in a real run (half in each direction).
const DEFAULT_HANDOFFS: usize = 5000;
/// Handoffs at the start of a run that are not counted (page faults, first opens).
const WARMUP: usize = 50;
/// Acknowledgement on the pipes: "I hold the lock now".
const ACK: u8 = b'A';

fn main() {
    if let Ok(spec) = std::env::var(ROLE_ENV) {
        child_main(&spec);
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // As criterion does: `cargo bench` passes --bench; `cargo test --benches` does not.
    let smoke = !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test");
    let filter = positional_filter(&args);
    let part = std::env::var("FSYNC_BENCH_PART").unwrap_or_default();
    let chosen = |name: &str| part.is_empty() || part == "all" || part == name;
    // A filter naming the handoff part selects it alone; any other filter goes to criterion,
    // which applies it to its own benchmark names.
    let handoff_filter = filter.as_deref().is_some_and(|f| f.starts_with("handoff"));
    if chosen("uncontended") && !handoff_filter {
        uncontended(smoke);
    }
    if chosen("handoff") && (filter.is_none() || handoff_filter) {
        handoff(smoke);
    }
}

/// The first positional argument (criterion's FILTER), skipping the values of options.
fn positional_filter(args: &[String]) -> Option<String> {
    const WITH_VALUE: &[&str] = &[
        "--save-baseline",
        "-s",
        "--baseline",
        "-b",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--profile-time",
        "--format",
        "--color",
        "-c",
        "--output-format",
        "--plotting-backend",
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            return Some(a.clone());
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Part 1: uncontended acquire + release (criterion)

fn uncontended(smoke: bool) {
    let dir = bench_dir();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut g = c.benchmark_group("uncontended");

    let path = dir.path().join("fsync.lck");
    let m = fsync::Mutex::new(&path);
    g.bench_function("fsync_acquire_release", |b| {
        b.iter(|| drop(black_box(m.acquire(None).unwrap().unwrap())));
    });
    g.bench_function("fsync_try_acquire_release", |b| {
        b.iter(|| drop(black_box(m.try_acquire().unwrap().unwrap())));
    });

    let path = dir.path().join("flock.lck");
    g.bench_function("flock_open_lock_close", |b| {
        b.iter(|| {
            let f = open_lock(&path);
            flock(&f, libc::LOCK_EX);
            drop(f);
        });
    });
    let f = open_lock(&path);
    g.bench_function("flock_lock_unlock", |b| {
        b.iter(|| {
            flock(&f, libc::LOCK_EX);
            flock(&f, libc::LOCK_UN);
        });
    });
    g.finish();
    drop(c);
    if smoke {
        eprintln!("uncontended: smoke run done");
    }
}

fn open_lock(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .expect("cannot open lock file")
}

/// `flock(2)`, retried on EINTR; panics on any other failure.
fn flock(f: &impl AsRawFd, op: libc::c_int) {
    loop {
        // SAFETY: flock on a descriptor the caller keeps open.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "flock: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Part 2: two-process handoff latency

/// The ways of taking the lock that the handoff compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `fsync::Mutex::acquire(None)`, guard dropped to release.
    Fsync,
    /// Raw `flock(fd, LOCK_EX)` / `flock(fd, LOCK_UN)` on a descriptor kept open.
    Flock,
    /// Raw open + `flock(LOCK_EX)` / close, per acquisition (what `flock(1)` does per run).
    FlockOpen,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Fsync, Variant::Flock, Variant::FlockOpen];

    fn name(self) -> &'static str {
        match self {
            Variant::Fsync => "fsync",
            Variant::Flock => "flock",
            Variant::FlockOpen => "flock-open",
        }
    }

    fn parse(s: &str) -> Variant {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .unwrap_or_else(|| panic!("unknown variant {s}"))
    }

    fn describe(self) -> &'static str {
        match self {
            Variant::Fsync => "fsync::Mutex acquire(None) / drop",
            Variant::Flock => "flock(2) LOCK_EX / LOCK_UN, fd kept open",
            Variant::FlockOpen => "open + flock(2) LOCK_EX / close",
        }
    }
}

/// One side's way to take the lock; dropping the returned value releases it.
enum Locker {
    Fsync(fsync::Mutex),
    Flock(File),
    FlockOpen(PathBuf),
}

#[allow(clippy::large_enum_variant)] // one per iteration, moved once
enum Held {
    Fsync(#[allow(dead_code)] fsync::MutexGuard),
    /// The descriptor of the `Locker`, which outlives this.
    Flock(RawFd),
    FlockOpen(#[allow(dead_code)] File),
}

impl Locker {
    fn new(v: Variant, path: &Path) -> Locker {
        match v {
            Variant::Fsync => Locker::Fsync(fsync::Mutex::new(path)),
            Variant::Flock => Locker::Flock(open_lock(path)),
            Variant::FlockOpen => Locker::FlockOpen(path.to_path_buf()),
        }
    }

    fn acquire(&self) -> Held {
        match self {
            Locker::Fsync(m) => Held::Fsync(
                m.acquire(None)
                    .expect("acquire failed")
                    .expect("acquire(None) gave up"),
            ),
            Locker::Flock(f) => {
                flock(f, libc::LOCK_EX);
                Held::Flock(f.as_raw_fd())
            }
            Locker::FlockOpen(p) => {
                let f = open_lock(p);
                flock(&f, libc::LOCK_EX);
                Held::FlockOpen(f)
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The other variants release by closing their descriptor; this one keeps it open and
        // unlocks explicitly.
        if let Held::Flock(fd) = *self {
            flock(&fd, libc::LOCK_UN);
        }
    }
}

/// A page both sides map: the release timestamp and the round it belongs to.
struct Shared {
    ptr: *mut AtomicU64,
}

impl Shared {
    fn map(path: &Path) -> Shared {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("cannot open the shared page");
        f.set_len(4096).expect("cannot size the shared page");
        // SAFETY: a fresh shared mapping of a 4096-byte file we keep for the process lifetime.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap failed");
        Shared { ptr: ptr.cast() }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i < 2);
        // SAFETY: the mapping is 4096 bytes, page-aligned, and lives as long as the process;
        // both processes access it only through atomics.
        unsafe { &*self.ptr.add(i) }
    }

    fn publish(&self, round: u64, t_ns: u64) {
        self.slot(0).store(t_ns, Ordering::Relaxed);
        self.slot(1).store(round, Ordering::Release);
    }

    fn take(&self, round: u64) -> u64 {
        assert_eq!(
            self.slot(1).load(Ordering::Acquire),
            round,
            "handoff out of step"
        );
        self.slot(0).load(Ordering::Relaxed)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the same clock in every process of the machine).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One side of a handoff run: `rounds` handoffs, alternating; the holder of round `r` is the
/// side whose `parity` equals `r % 2`. Returns the latencies (ns) of the handoffs to this side.
fn run_side(
    locker: &Locker,
    mut held: Option<Held>,
    ino: u64,
    shared: &Shared,
    rounds: usize,
    rx: &mut impl Read,
    tx: &mut impl Write,
) -> (Vec<u64>, usize) {
    let mut lat = Vec::with_capacity(rounds / 2 + 1);
    let mut misses = 0;
    let mut byte = [0u8; 1];
    for round in 0..rounds as u64 {
        if let Some(guard) = held.take() {
            if !common::wait_blocked(ino) {
                misses += 1;
            }
            shared.publish(round, now_ns());
            drop(guard);
            // Wait until the other side holds it before queueing up again ourselves,
            // so that we never take it back before the waiter got it.
            rx.read_exact(&mut byte).expect("peer went away");
            assert_eq!(byte[0], ACK);
        } else {
            let guard = locker.acquire();
            let t1 = now_ns();
            let t0 = shared.take(round);
            if round as usize >= WARMUP {
                lat.push(t1.saturating_sub(t0));
            }
            tx.write_all(&[ACK]).expect("peer went away");
            tx.flush().expect("peer went away");
            held = Some(guard);
        }
    }
    drop(held);
    (lat, misses)
}

/// The re-executed side: `VARIANT DIR ROUNDS CPU`; talks over stdin/stdout; prints its latencies.
fn child_main(spec: &str) {
    let mut parts = spec.split('\t');
    let (v, dir, rounds) = (
        Variant::parse(parts.next().unwrap()),
        PathBuf::from(parts.next().unwrap()),
        parts.next().unwrap().parse::<usize>().unwrap(),
    );
    if let Some(cpu) = parts.next().and_then(|c| c.parse().ok()) {
        pin_to(Some(cpu), &[]);
    }
    let lock = dir.join("handoff.lck");
    let shared = Shared::map(&dir.join("handoff.shm"));
    let ino = std::fs::metadata(&lock)
        .expect("parent creates the lock")
        .ino();
    let locker = Locker::new(v, &lock);
    let mut rx = std::io::stdin().lock();
    let mut tx = std::io::stdout().lock();
    let (lat, misses) = run_side(&locker, None, ino, &shared, rounds, &mut rx, &mut tx);
    let mut out = format!("misses {misses}\n");
    for l in lat {
        out.push_str(&format!("{l}\n"));
    }
    out.push_str("end\n");
    tx.write_all(out.as_bytes()).unwrap();
    tx.flush().unwrap();
}

/// Where the two sides run. Waking a process on an idle CPU costs an inter-processor interrupt
/// (and, in a virtual machine, the hypervisor resuming a halted vCPU); waking it on the CPU the
/// waker is about to leave costs a context switch. Both are measured, pinned, so that the figures
/// do not depend on where the scheduler happened to put the two processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// The two sides on two different CPUs.
    Spread(usize, usize),
    /// Both sides on one CPU.
    Same(usize),
    /// Wherever the scheduler puts them.
    Free,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Spread(..) => "2 CPUs",
            Placement::Same(_) => "1 CPU",
            Placement::Free => "unpinned",
        }
    }

    fn cpus(self) -> (Option<usize>, Option<usize>) {
        match self {
            Placement::Spread(a, b) => (Some(a), Some(b)),
            Placement::Same(a) => (Some(a), Some(a)),
            Placement::Free => (None, None),
        }
    }

    /// The placements to measure: `FSYNC_BENCH_PIN` = `spread`, `same`, `none`, or both pinned
    /// ones (the default) where the process may run on two CPUs.
    fn chosen() -> Vec<Placement> {
        let allowed = allowed_cpus();
        let pin = std::env::var("FSYNC_BENCH_PIN").unwrap_or_default();
        let spread = match allowed[..] {
            [a, b, ..] => Some(Placement::Spread(a, b)),
            _ => None,
        };
        let same = allowed.first().map(|&a| Placement::Same(a));
        let list = match pin.as_str() {
            "none" => vec![Some(Placement::Free)],
            "spread" => vec![spread],
            "same" => vec![same],
            _ => vec![spread, same],
        };
        let list: Vec<Placement> = list.into_iter().flatten().collect();
        if list.is_empty() {
            vec![Placement::Free]
        } else {
            list
        }
    }
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most size_of(set) bytes into the set we own.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &raw mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads the set we own, within its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pin this process to one CPU (`None`: to the CPUs it was allowed at the start).
fn pin_to(cpu: Option<usize>, all: &[usize]) {
    // SAFETY: building a cpu_set_t we own and passing it to sched_setaffinity for ourselves.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(c, &mut set),
            None => all.iter().for_each(|&c| libc::CPU_SET(c, &mut set)),
        }
        let rc = libc::sched_setaffinity(0, std::mem::size_of_val(&set), &raw const set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Run `rounds` handoffs of one variant between this process and a re-executed copy.
fn handoff_run(v: Variant, placement: Placement, rounds: usize) -> (Vec<u64>, usize) {
    let all = allowed_cpus();
    let (mine, theirs) = placement.cpus();
    if mine.is_some() {
        pin_to(mine, &all);
    }
    let dir = bench_dir();
    let lock = dir.path().join("handoff.lck");
    let shared = Shared::map(&dir.path().join("handoff.shm"));
    let locker = Locker::new(v, &lock);
    // We hold it first; the child queues up behind us.
    let held = locker.acquire();
    let ino = std::fs::metadata(&lock).unwrap().ino();
    let exe = std::env::current_exe().expect("current_exe");
    let cpu = theirs.map(|c| c.to_string()).unwrap_or_default();
    let mut child = Command::new(exe)
        .env(
            ROLE_ENV,
            format!("{}\t{}\t{rounds}\t{cpu}", v.name(), dir.path().display()),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot start the other side");
    let mut tx = child.stdin.take().unwrap();
    let mut rx = BufReader::new(child.stdout.take().unwrap());
    let (mut lat, mut misses) =
        run_side(&locker, Some(held), ino, &shared, rounds, &mut rx, &mut tx);
    drop(tx);
    let mut ended = false;
    for line in rx.lines() {
        let line = line.expect("reading the other side's results");
        if let Some(m) = line.strip_prefix("misses ") {
            misses += m.parse::<usize>().unwrap();
        } else if line == "end" {
            ended = true;
        } else {
            lat.push(line.parse().unwrap());
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success() && ended, "the other side failed: {status}");
    if mine.is_some() {
        pin_to(None, &all);
    }
    (lat, misses)
}

struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

fn stats(mut ns: Vec<u64>) -> Stats {
    ns.sort_unstable();
    let n = ns.len();
    let us = |x: u64| x as f64 / 1000.0;
    // Nearest-rank percentile.
    let pct = |p: usize| us(ns[((n * p).div_ceil(100)).max(1) - 1]);
    Stats {
        n,
        p50: pct(50),
        p90: pct(90),
        p99: pct(99),
        max: us(ns[n - 1]),
        mean: ns.iter().sum::<u64>() as f64 / n as f64 / 1000.0,
    }
}

fn handoff(smoke: bool) {
    let handoffs = if smoke {
        2 * WARMUP + 20
    } else {
        std::env::var("FSYNC_BENCH_HANDOFFS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_HANDOFFS)
            .max(1000)
            + WARMUP
    };
    println!();
    println!(
        "handoff latency: release -> the other process (blocked in acquire) holds it; \
         {} handoffs per variant after {WARMUP} warm-up, dir {}",
        handoffs - WARMUP,
        std::env::var_os("FSYNC_BENCH_DIR")
            .map_or_else(std::env::temp_dir, PathBuf::from)
            .display()
    );
    println!(
        "{:<20} {:<9} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}  how",
        "variant", "placement", "n", "p50 us", "p90 us", "p99 us", "max us", "mean us"
    );
    for placement in Placement::chosen() {
        for v in Variant::ALL {
            let (lat, misses) = handoff_run(v, placement, handoffs);
            let s = stats(lat);
            println!(
                "{:<20} {:<9} {:>6} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}  {}",
                format!("handoff/{}", v.name()),
                placement.name(),
                s.n,
                s.p50,
                s.p90,
                s.p99,
                s.max,
                s.mean,
                v.describe()
            );
            if misses > 0 {
                println!(
                    "  ({misses} handoffs where /proc/locks never showed the waiter; \
                     slept 2 ms instead)"
                );
            }
        }
    }
}
