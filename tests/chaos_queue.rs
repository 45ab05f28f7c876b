/*!
The job queue as it is run in production, under a killer: jobs (1 in 25 poison: it always
exits 1) posted up front, two `msg work -j 2 --until-empty --retries 3` processes (the default
backoff: 1 s, doubling) restarted whenever they end, and every 0.3 to 0.7 s a SIGKILL to either
a worker's whole process group (`K pids`, frozen first: see `chaos.rs`) or its fsync process
alone (`A pid`: its jobs run on, holding their messages). A `msg wait-empty` started with the
workers writes `E` to the log when it returns 0.

The jobs log `S id w` when they start, then `D id w` (done) or `F id w` (failed), `w` their
worker's process group. The replay counts goofups: a job run while another run of it goes on;
a job run again after a success its worker lived to acknowledge (a worker killed after its
job's `D` may not have removed the message: that run may come again, the documented window); a
healthy job not acknowledged exactly once, or dead; a poison job not in the dead letters, or
whose history there does not hold exactly 4 failed runs (exit status 1); any run started or
ended after `E`.

Scale: `FSYNC_CHAOS_JOBS=N` jobs (default 250, about 15 s); the full run, with its figures in
BENCHMARKS.md, is `FSYNC_CHAOS_JOBS=10000 cargo test --release --test integration
chaos_queue -- --nocapture`.
*/

use std::{
    collections::{HashMap, HashSet},
    os::unix::process::CommandExt,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use crate::{
    chaos::{Rng, Running, append, kill_a_worker},
    harness::{OutputWithin, TestDir, fsync_bin},
};

fn jobs() -> usize {
    std::env::var("FSYNC_CHAOS_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(250)
}

/// Poison: job ids 7, 32, 57... (1 in 25) always fail.
fn poison(id: usize) -> bool {
    id % 25 == 7
}

#[test]
fn chaos_queue_work_pools_with_poison_jobs_under_kills() {
    let t = TestDir::new();
    let n = jobs();
    let mailbox = t.join("jobs");
    let log = t.join("log");
    let begun = Instant::now();
    for id in 0..n {
        let out = Command::new(fsync_bin())
            .args(["msg", "post"])
            .arg(&mailbox)
            .args(["--data", &id.to_string()])
            .output_within_deadline();
        assert!(out.status.success(), "post {id}: {out:?}");
    }
    let posting = begun.elapsed();
    let job = format!(
        "id=$(cat); w=$W; echo \"S $id $w\" >> {log}; \
         sleep 0.00$((id % 4)); \
         if [ $((id % 25)) = 7 ]; then echo \"F $id $w\" >> {log}; exit 1; fi; \
         echo \"D $id $w\" >> {log}",
        log = log.display()
    );
    let running: Running = Arc::default();
    let done = AtomicBool::new(false);
    let (groups_killed, alone_killed) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let draining = Instant::now();
    let mut waiter = Command::new(fsync_bin())
        .args(["msg", "wait-empty"])
        .arg(&mailbox)
        .spawn()
        .unwrap();
    thread::scope(|s| {
        for _ in 0..2 {
            let (mailbox, job, running, done) = (&mailbox, &job, &running, &done);
            s.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    // The worker knows its pid: `W`, its shell's, which exec keeps (its jobs' `$PPID` is 1
                    // if it was killed before they started).
                    let child = Command::new("sh")
                        .args(["-c", "export W=$$; exec \"$@\"", "sh"])
                        .arg(fsync_bin())
                        .args(["msg", "work", "-j", "2", "--until-empty", "--retries", "3"])
                        .arg(mailbox)
                        .args(["--", "sh", "-c", job])
                        .process_group(0)
                        .spawn()
                        .expect("spawn worker");
                    let pgid = child.id() as i32;
                    running.lock().unwrap().insert(pgid);
                    let out = child.wait_with_output().unwrap();
                    running.lock().unwrap().remove(&pgid);
                    // It ended by itself (0, or 1: the status of a job that went dead): done
                    // once nothing is queued, delayed or being received.
                    if matches!(out.status.code(), Some(0 | 1)) {
                        let list = Command::new(fsync_bin())
                            .args(["msg", "list", "--json"])
                            .arg(mailbox)
                            .output_within_deadline();
                        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
                        let left = v["count"] != 0 || v["claimed"] != 0;
                        if !left && v["delayed"].as_array().is_some_and(Vec::is_empty) {
                            done.store(true, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
        let (running, done, log) = (&running, &done, &log);
        let (groups_killed, alone_killed) = (&groups_killed, &alone_killed);
        s.spawn(move || {
            let mut rng = Rng(4243);
            while !done.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(300 + rng.below(400) as u64));
                match kill_a_worker(running, log, &mut rng) {
                    Some(true) => groups_killed.fetch_add(1, Ordering::SeqCst),
                    Some(false) => alone_killed.fetch_add(1, Ordering::SeqCst),
                    None => 0,
                };
            }
        });
        s.spawn(move || {
            let status = waiter.wait().unwrap();
            assert!(status.success(), "wait-empty: {status:?}");
            append(log, "E\n");
        });
    });
    let drain = draining.elapsed();
    let list = Command::new(fsync_bin())
        .args(["msg", "list", "--json"])
        .arg(&mailbox)
        .output_within_deadline();
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!((&v["count"], &v["claimed"]), (&0.into(), &0.into()), "{v}");
    let text = std::fs::read_to_string(&log).unwrap();
    let (runs, goofups) = replay(&text, &v, n);
    let dead = v["dead"].as_array().unwrap().len();
    eprintln!(
        "jobs: {n} ({} poison), {runs} runs, posted in {:.1} s, drained in {:.1} s; killed: {} \
         worker groups, {} fsync processes alone; {dead} dead letters; {} goofups",
        (0..n).filter(|&id| poison(id)).count(),
        posting.as_secs_f64(),
        drain.as_secs_f64(),
        groups_killed.load(Ordering::SeqCst),
        alone_killed.load(Ordering::SeqCst),
        goofups.len()
    );
    assert!(
        goofups.is_empty(),
        "{} goofups:\n{}",
        goofups.len(),
        goofups.join("\n")
    );
}

/// The log's runs and goofups (module docs), with the final listing `v`.
fn replay(text: &str, v: &serde_json::Value, n: usize) -> (usize, Vec<String>) {
    let mut goofups = Vec::new();
    let mut runs = 0;
    let mut acked: HashMap<usize, usize> = HashMap::new();
    // A `D` not yet known to be acknowledged: id -> (worker, its worker was killed since).
    let mut pending: HashMap<usize, (String, bool)> = HashMap::new();
    // Runs going on: id -> worker. A worker killed alone leaves its run going until it ends.
    let mut open: HashMap<usize, String> = HashMap::new();
    // Workers killed alone: a `D` of theirs after that is acknowledged by nobody.
    let mut gone: HashSet<String> = HashSet::new();
    let mut empty = false;
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        if empty && matches!(parts[0], "S" | "D" | "F") {
            goofups.push(format!("wait-empty returned before this: {line}"));
        }
        match parts[0] {
            "E" => empty = true,
            "K" | "A" => {
                for (worker, killed) in pending.values_mut() {
                    *killed |= parts[1..].contains(&worker.as_str());
                }
                match parts[0] {
                    "K" => open.retain(|_, worker| !parts[1..].contains(&worker.as_str())),
                    _ => drop(gone.insert(parts[1].to_string())),
                }
            }
            "S" => {
                runs += 1;
                let id: usize = parts[1].parse().unwrap();
                if let Some((_, false)) = pending.remove(&id) {
                    *acked.entry(id).or_default() += 1;
                }
                if acked.get(&id).is_some_and(|&a| a > 0) {
                    goofups.push(format!("job {id} ran again after it succeeded: {line}"));
                }
                if let Some(first) = open.insert(id, parts[2].to_string()) {
                    goofups.push(format!(
                        "job {id} ran twice at once (its run under worker {first} goes on): {line}"
                    ));
                }
            }
            "D" | "F" => {
                let id = parts[1].parse().unwrap();
                open.remove(&id);
                if parts[0] == "D" {
                    let worker = parts[2].to_string();
                    let unacknowledged = gone.contains(&worker);
                    pending.insert(id, (worker, unacknowledged));
                }
            }
            other => panic!("a foreign log line {other:?}"),
        }
    }
    for (id, _) in pending {
        *acked.entry(id).or_default() += 1; // the last run of each: nothing came after it
    }
    let mut dead: HashMap<usize, &serde_json::Value> = HashMap::new();
    for m in v["dead"].as_array().unwrap() {
        let seq: usize = m["name"].as_str().unwrap()[..20].parse().unwrap();
        dead.insert(seq - 1, m); // posted in order: job id is sequence number - 1
    }
    for id in 0..n {
        let runs_acked = acked.get(&id).copied().unwrap_or(0);
        match (poison(id), dead.get(&id)) {
            (false, None) if runs_acked == 1 => {}
            (false, d) => goofups.push(format!(
                "healthy job {id}: {runs_acked} acknowledged runs, dead: {d:?}"
            )),
            (true, None) => goofups.push(format!("poison job {id} is not a dead letter")),
            (true, Some(m)) => {
                let attempts = m["attempts"].as_array().unwrap();
                let failed: Vec<_> = (attempts.iter()).filter(|a| a["ended"] != "lost").collect();
                let all_exit_1 = failed
                    .iter()
                    .all(|a| a["ended"] == "exit" && a["status"] == 1);
                if m["failed"] != 4 || failed.len() != 4 || !all_exit_1 {
                    goofups.push(format!("poison job {id} not dead after 4 failed runs: {m}"));
                }
            }
        }
    }
    (runs, goofups)
}
