//! `fsync msg post --lines` / `--null`: one message per record, ids printed in input order, a
//! receiver draining while batches come, and all or nothing when the poster is killed (before
//! its batch is committed, and in the middle of moving it into the queue). Power cuts at every
//! step are `crash_states.rs`'s "batch" scenario.

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use nix::sys::signal::Signal;

use crate::harness::{TestDir, eventually, json_of, queued_files};

#[track_caller]
fn count(t: &TestDir) -> u64 {
    let out = t.fsync(["msg", "list", "--json", "B"]).run();
    json_of(&out.code(0).stdout)["count"].as_u64().unwrap()
}

/// `n` numbered lines, `job 0` to `job N-1`, into file `name` of the test's directory.
fn jobs(t: &TestDir, name: &str, n: usize) {
    let text: String = (0..n).map(|i| format!("job {i}\n")).collect();
    t.write(name, &text);
}

/// The staging directories of batches in mailbox `B` (`B/tmp/.batch-*`).
fn staged(t: &TestDir) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(t.join("B/tmp")).into_iter().flatten();
    (entries.flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".batch-")
        })
        .collect()
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, Iterator::count)
}

#[test]
fn post_lines_queues_one_message_per_line_and_prints_their_ids_in_input_order() {
    let t = TestDir::new();
    t.write("jobs", "first\n\nthird");
    t.sh("\"$FSYNC\" msg post B --lines < jobs")
        .run()
        .code(0)
        .stdout("1\n2\n3\n");
    // A last newline ends the last message; it makes no empty one.
    t.fsync(["msg", "post", "B", "--lines", "--data", "fourth\nfifth\n"])
        .run()
        .code(0)
        .stdout("4\n5\n");
    for want in ["first", "", "third", "fourth", "fifth"] {
        t.fsync(["msg", "recv", "-n", "B"])
            .run()
            .code(0)
            .stdout(want);
    }
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
}

#[test]
fn post_null_splits_at_nul_only_and_quiet_prints_no_id() {
    let t = TestDir::new();
    t.sh("printf 'a b\\0c\\nd\\0' | \"$FSYNC\" msg post B --null")
        .run()
        .code(0)
        .stdout("1\n2\n");
    t.sh("printf 'e\\0' | \"$FSYNC\" msg post -q B --null")
        .run()
        .code(0)
        .stdout("");
    for want in ["a b", "c\nd", "e"] {
        t.fsync(["msg", "recv", "-n", "B"])
            .run()
            .code(0)
            .stdout(want);
    }
}

#[test]
fn an_empty_input_posts_nothing_and_a_batch_takes_no_delay_or_key() {
    let t = TestDir::new();
    t.sh("\"$FSYNC\" msg post B --lines -v < /dev/null")
        .run()
        .code(0)
        .stdout("")
        .stderr_has("the input is empty");
    assert!(!t.join("B").exists(), "an empty batch made the mailbox");
    for extra in [["--delay", "1s"], ["--key", "k"]] {
        t.fsync(["msg", "post", "B", "--lines", "--data", "a"])
            .args(extra)
            .run()
            .code(2)
            .stderr_has("cannot be used with");
    }
    t.fsync(["msg", "post", "B", "--lines", "--null", "--data", "a"])
        .run()
        .code(2);
}

/// A worker drains while two batches come: every message runs once, in id order, and each id
/// printed by the post is the id its job saw.
#[test]
fn a_worker_draining_while_batches_come_runs_every_message_once_in_order() {
    let t = TestDir::new();
    jobs(&t, "one", 300);
    jobs(&t, "two", 300);
    let job = "echo \"$FSYNC_MSG_ID $(cat)\" >> log";
    let mut worker = t
        .fsync(["msg", "work", "-j", "1", "B", "--", "sh", "-c", job])
        .start();
    let first = t.sh("\"$FSYNC\" msg post B --lines < one").run();
    first.code(0);
    eventually("the worker runs jobs of the first batch", || {
        t.join("log").exists()
    });
    let second = t.sh("\"$FSYNC\" msg post B --lines < two").run();
    second.code(0);
    t.fsync(["msg", "wait-empty", "B"]).run().code(0);
    worker.signal(Signal::SIGTERM);
    worker.wait_exit();
    let ids: Vec<String> = (first.stdout.lines().chain(second.stdout.lines()))
        .map(str::to_string)
        .collect();
    let want: Vec<String> = (ids.iter().enumerate())
        .map(|(i, id)| format!("{id} job {}", i % 300))
        .collect();
    let ran: Vec<String> = t.read("log").lines().map(str::to_string).collect();
    assert_eq!(ids.len(), 600);
    assert_eq!(ran, want, "the jobs run, in order");
}

/// The poster killed once every payload is staged, while another process holds `seq`: nothing
/// of the batch is queued, no id is spent, and the staged payloads are garbage nobody reads,
/// which the next batch poster removes once a minute has passed.
#[test]
fn a_batch_killed_before_its_commit_queues_none_of_it() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "first"])
        .run()
        .code(0);
    jobs(&t, "jobs", 2000);
    let seq = File::open(t.join("B/seq")).unwrap();
    rustix::fs::flock(&seq, rustix::fs::FlockOperation::LockShared).unwrap();
    let mut poster = t.sh("exec \"$FSYNC\" msg post B --lines < jobs").start();
    eventually("every payload is staged", || {
        staged(&t).first().is_some_and(|d| entries(d) == 2000)
    });
    poster.signal(Signal::SIGKILL);
    poster.wait_exit();
    drop(seq);
    assert_eq!(count(&t), 1, "only the message posted before");
    t.fsync(["msg", "wait-empty", "-t", "0", "B"])
        .run()
        .code(75);
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("first");
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    assert_eq!(staged(&t).len(), 1, "the garbage stays until it is old");
    t.fsync(["msg", "post", "B", "--lines", "--data", "next"])
        .run()
        .code(0)
        .stdout("2\n");
    assert_eq!(staged(&t).len(), 1, "a minute has not passed");
    // Left alone for two minutes: the next batch poster removes it.
    let garbage = staged(&t).remove(0);
    t.cmd("touch")
        .args(["-d", "2 minutes ago"])
        .arg(&garbage)
        .run()
        .code(0);
    t.fsync(["msg", "post", "B", "--lines", "--data", "last"])
        .run()
        .code(0)
        .stdout("3\n");
    assert!(
        staged(&t).is_empty(),
        "the dead poster's staged batch was removed"
    );
}

/// The poster killed in the middle of moving a committed batch into the queue: listings count
/// the whole batch, `wait-empty` does not say empty (and queues the rest), nor does the next
/// receiver take a message before it has queued the rest
/// before it takes the oldest: every message once, with its id.
#[test]
fn a_batch_killed_while_it_is_queued_is_finished_by_the_next_receiver() {
    let t = TestDir::new();
    let k = 5000;
    jobs(&t, "jobs", k);
    let mut poster = t.sh("exec \"$FSYNC\" msg post B --lines < jobs").start();
    let batches = t.join("B/batches");
    eventually("the batch is committed", || entries(&batches) > 0);
    poster.signal(Signal::SIGKILL);
    poster.wait_exit();
    let left = std::fs::read_dir(&batches)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let queued = queued_files(t.join("B")).len();
    assert!(
        entries(&left.path()) > 0 && queued < k,
        "killed before the batch was queued ({queued} of {k} in the queue)"
    );
    let listed = json_of(&t.fsync(["msg", "list", "--json", "B"]).run().code(0).stdout);
    let mut ids: Vec<u64> = (listed["messages"].as_array().unwrap().iter())
        .map(|m| m["name"].as_str().unwrap()[..20].parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (1..=k as u64).collect::<Vec<_>>(),
        "the listing shows the whole batch"
    );
    // A copy of the state left, for `wait-empty` to finish: it does not say empty.
    t.cmd("cp").args(["-a", "B", "W"]).run().code(0);
    t.fsync(["msg", "wait-empty", "-t", "0", "W"])
        .run()
        .code(75);
    assert_eq!(
        entries(&t.join("W/batches")),
        0,
        "wait-empty finished the batch"
    );
    assert_eq!(queued_files(t.join("W")).len(), k);
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("job 0");
    assert_eq!(entries(&batches), 0, "the batch was finished");
    let ids: Vec<u64> = (queued_files(t.join("B")).iter())
        .map(|name| name[..20].parse().unwrap())
        .collect();
    assert_eq!(ids, (2..=k as u64).collect::<Vec<_>>());
    t.fsync(["msg", "post", "B", "--data", "after"])
        .run()
        .code(0);
    assert_eq!(count(&t), k as u64);
}
