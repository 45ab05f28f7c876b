//! Uncontended cost of each primitive through the library (`cargo bench --bench primitives`;
//! see BENCHMARKS.md): one acquire + release (or signal + wait, post + receive) with nobody else
//! about, as criterion measures it. Group joins, leaves and `is_empty` also with 100 and 1000
//! other members present (memberships this process holds: each is its own locked file, as
//! another process's would be).
//!
//! `FSYNC_BENCH_DIR` sets the directory (default: the temp dir). Under `cargo test --benches`
//! each benchmark runs once, as a smoke test.

mod common;
use common::bench_dir;

use std::{hint::black_box, time::Duration};

use criterion::Criterion;

fn main() {
    let dir = bench_dir();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let path = |name: &str| dir.path().join(name);

    let mut g = c.benchmark_group("uncontended");
    let m = fsync::Mutex::new(path("m.lck"));
    g.bench_function("mutex", |b| {
        b.iter(|| drop(black_box(m.acquire(None).unwrap().unwrap())));
    });
    let rw = fsync::Swmr::new(path("rw.lck"));
    g.bench_function("swmr_read", |b| {
        b.iter(|| drop(black_box(rw.read(None).unwrap().unwrap())));
    });
    g.bench_function("swmr_write", |b| {
        b.iter(|| drop(black_box(rw.write(None).unwrap().unwrap())));
    });
    let sem = fsync::Semaphore::new(path("sem"), 4);
    g.bench_function("sem_4_slots", |b| {
        b.iter(|| drop(black_box(sem.acquire(None).unwrap().unwrap())));
    });
    let gl = fsync::GroupLock::new(path("gl.lck"));
    g.bench_function("grouplock", |b| {
        b.iter(|| drop(black_box(gl.enter("a", None).unwrap().unwrap())));
    });
    let ev = fsync::Event::new(path("ev")).auto_reset(true);
    g.bench_function("event_signal_wait_reset", |b| {
        b.iter(|| {
            ev.signal().unwrap();
            assert!(ev.wait(None).unwrap());
        });
    });
    g.finish();

    // Durable posts (file and directory fsync): fewer, longer samples.
    let mut g = c.benchmark_group("durable");
    g.sample_size(20);
    let mb = fsync::Mailbox::new(path("box"));
    g.bench_function("msg_post_recv_finish", |b| {
        b.iter(|| {
            let _ = mb.post(&mut &b"payload"[..]).unwrap();
            mb.recv(None).unwrap().unwrap().finish().unwrap();
        });
    });
    g.finish();

    let mut g = c.benchmark_group("group");
    for others in [0usize, 100, 1000] {
        let gp = path(&format!("group{others}"));
        let group = fsync::Group::new(&gp);
        let _members: Vec<_> = (0..others)
            .map(|_| group.join(None).unwrap().unwrap())
            .collect();
        g.bench_function(format!("join_leave_{others}_others"), |b| {
            b.iter(|| drop(black_box(group.join(None).unwrap().unwrap())));
        });
        g.bench_function(format!("is_empty_{others}_members"), |b| {
            b.iter(|| black_box(fsync::group::is_empty(&gp).unwrap()));
        });
    }
    g.finish();
}
