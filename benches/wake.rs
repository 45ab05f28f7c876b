//! Wake-up latency through the library, in one process (`cargo bench --bench wake`; see
//! BENCHMARKS.md): how long from the moment one thread makes the change to the moment the
//! waiting thread's call returns, with no process start-up in between. Separates fsync's own
//! path (inotify, close events) from the cost of starting and waking whole processes.
//!
//! - event: a thread blocked in `Event::wait(.., reset = true)`; the other signals.
//! - sem: a thread waiting for the only slot of a `Semaphore`; the holder drops its guard.
//! - msg: a thread blocked in `Mailbox::recv`; the other posts (durable, so it includes fsync).
//!
//! `FSYNC_BENCH_WAKES=N` rounds per figure (default 500; 20 under `cargo test --benches`).

use std::{
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use fsync::{Event, Mailbox, Semaphore};

fn stats(name: &str, mut us: Vec<f64>) {
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| us[((us.len() as f64 * q) as usize).min(us.len() - 1)];
    println!(
        "{name:34} n={:5}  p50 {:8.1} us  p90 {:8.1} us  p99 {:8.1} us",
        us.len(),
        at(0.5),
        at(0.9),
        at(0.99)
    );
}

/// Give the waiter time to block (a benchmark, not a test: we measure the wake, not the start).
fn settle() {
    thread::sleep(Duration::from_millis(2));
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let rounds: usize = std::env::var("FSYNC_BENCH_WAKES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if smoke { 20 } else { 500 });
    let dir = tempfile::tempdir().unwrap();

    // Each round waits for the waiter's acknowledgement, so a signal never lands on one that
    // is still set (which would be one signal, not two).
    let path = dir.path().join("E");
    let (tx, rx) = mpsc::channel::<Instant>();
    let (ack_tx, ack_rx) = mpsc::channel::<()>();
    let waiter = thread::spawn(move || {
        let e = Event::new(&path).auto_reset(true);
        (0..rounds)
            .map(|_| {
                e.wait(None).unwrap();
                let woke = Instant::now();
                let lat = woke.duration_since(rx.recv().unwrap()).as_secs_f64() * 1e6;
                ack_tx.send(()).unwrap();
                lat
            })
            .collect::<Vec<_>>()
    });
    let e = Event::new(dir.path().join("E"));
    for _ in 0..rounds {
        settle();
        let t = Instant::now();
        e.signal().unwrap();
        tx.send(t).unwrap();
        ack_rx.recv().unwrap();
    }
    stats("event signal -> --reset waiter", waiter.join().unwrap());

    let sem_path = dir.path().join("S");
    let mut lat = Vec::new();
    for _ in 0..rounds {
        let held = Semaphore::new(&sem_path, 1).acquire(None).unwrap().unwrap();
        let (tx, rx) = mpsc::channel::<Instant>();
        let p = sem_path.clone();
        let waiter = thread::spawn(move || {
            let _g = Semaphore::new(&p, 1).acquire(None).unwrap().unwrap();
            Instant::now()
                .duration_since(rx.recv().unwrap())
                .as_secs_f64()
                * 1e6
        });
        settle();
        let t = Instant::now();
        drop(held);
        tx.send(t).unwrap();
        lat.push(waiter.join().unwrap());
    }
    stats("sem slot release -> next holder", lat);

    let box_path = dir.path().join("B");
    let (tx, rx) = mpsc::channel::<Instant>();
    let (ack_tx, ack_rx) = mpsc::channel::<()>();
    let p = box_path.clone();
    let receiver = thread::spawn(move || {
        let b = Mailbox::new(&p);
        (0..rounds)
            .map(|_| {
                let m = b.recv(None).unwrap().unwrap();
                let got = Instant::now();
                m.finish().unwrap();
                let lat = got.duration_since(rx.recv().unwrap()).as_secs_f64() * 1e6;
                ack_tx.send(()).unwrap();
                lat
            })
            .collect::<Vec<_>>()
    });
    let b = Mailbox::new(&box_path);
    for _ in 0..rounds {
        settle();
        let t = Instant::now();
        let _ = b.post(&mut &b"x"[..]).unwrap();
        tx.send(t).unwrap();
        ack_rx.recv().unwrap();
    }
    stats(
        "msg post start -> receiver has it",
        receiver.join().unwrap(),
    );
}
