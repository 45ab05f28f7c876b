//! `fsync msg post --priority N`: receivers take the highest level first and each level in the
//! order it was posted, under concurrent posters and receivers too; a waiting receiver wakes
//! for the first post at a level never used; a failed, delayed, dead, retried or lost message
//! keeps its level; `wait-empty` and `list` see every level.

use std::collections::HashMap;

use crate::harness::{TestDir, eventually, json_of};

#[track_caller]
fn post(t: &TestDir, level: u8, data: &str) {
    t.fsync([
        "msg",
        "post",
        "B",
        "--priority",
        &level.to_string(),
        "--data",
        data,
    ])
    .run()
    .code(0);
}

#[track_caller]
fn recv(t: &TestDir) -> String {
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout
        .clone()
}

#[track_caller]
fn list(t: &TestDir) -> serde_json::Value {
    json_of(&t.fsync(["msg", "list", "--json", "B"]).run().code(0).stdout)
}

/// The priorities of the messages of a listing's array `key`.
fn levels_of(l: &serde_json::Value, key: &str) -> Vec<u64> {
    (l[key].as_array().unwrap().iter())
        .map(|m| m["priority"].as_u64().unwrap())
        .collect()
}

/// Highest level first, and each level in the order it was posted, in `list` as in receives;
/// a level past 3 is a usage error that queues nothing.
#[test]
fn the_highest_level_comes_first_and_each_level_in_order() {
    let t = TestDir::new();
    let posts = [
        (0, "a0"),
        (2, "a2"),
        (0, "b0"),
        (1, "a1"),
        (3, "a3"),
        (2, "b2"),
        (1, "b1"),
        (2, "c2"),
    ];
    for (level, data) in posts {
        post(&t, level, data);
    }
    t.fsync(["msg", "post", "B", "--priority", "4", "--data", "x"])
        .run()
        .code(2)
        .stderr_has("4 is not in 0..=3");
    let l = list(&t);
    assert_eq!(levels_of(&l, "messages"), [3, 2, 2, 2, 1, 1, 0, 0], "{l}");
    let text = t.fsync(["msg", "list", "B"]).run().code(0).stdout.clone();
    assert!(
        text.lines().next().unwrap().contains("priority 3"),
        "{text}"
    );
    let got: Vec<String> = (0..posts.len()).map(|_| recv(&t)).collect();
    assert_eq!(got, ["a3", "a2", "b2", "c2", "a1", "b1", "a0", "b0"]);
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
}

/// A receiver asleep on a mailbox that never had a message of level 2 wakes for the first one
/// (the level's directory is made then: the queue's directory is watched for it), and again
/// for the next post at a level that exists by then. Woken by the kernel, not by the report
/// `-v` makes once a second (after which it would look again and find it all the same): it
/// says it waited less than that second. (Without the watch on the queue's directory: 1.0 s.)
#[test]
fn a_waiting_receiver_wakes_for_the_first_post_at_a_new_level() {
    let t = TestDir::new();
    post(&t, 0, "zero");
    assert_eq!(recv(&t), "zero");
    for (level, data) in [(2, "first at 2"), (2, "second at 2"), (3, "first at 3")] {
        let mut waiting = t.fsync(["msg", "recv", "-v", "B"]).start();
        waiting.stderr_until("waiting for a message");
        post(&t, level, data);
        let out = waiting.finish();
        out.code(0).stdout(&format!("{data}\n"));
        let said = out.stderr.lines().last().unwrap_or_default();
        let waited: f64 = (said.strip_prefix("fsync: received a message from B after "))
            .and_then(|s| s.strip_suffix('s')?.parse().ok())
            .unwrap_or_else(|| panic!("-v said {said:?}"));
        assert!(waited < 1.0, "woken by the report, not the post: {said:?}");
    }
}

/// Posters at every level and receivers all at once: every message is received exactly once,
/// and no receive takes a message of a lower level than one posted before that receive began,
/// unless a receive that began before it ended took that one (so that it may have been claimed
/// first). The log's lines are appended in the order things happened: a post's line after it
/// returned, a receive's `begin` before its process started and `took` after it ended.
#[test]
fn concurrent_posters_and_receivers_keep_the_levels() {
    const POSTERS: u32 = 4;
    const EACH: u32 = 12;
    const RECEIVERS: u32 = 3;
    let t = TestDir::new();
    post(&t, 0, "warm-up");
    assert_eq!(recv(&t), "warm-up");
    let receiver = |me: u32| {
        format!(
            "while :; do echo \"begin {me}\" >> log; \
             m=$(\"$FSYNC\" msg recv -t 60s B) || exit 1; \
             echo \"took {me} $m\" >> log; \
             [ \"$m\" = stop ] && exit 0; done"
        )
    };
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|me| t.sh(&receiver(me)).start())
        .collect();
    // Poster `p` posts at level `(p + i) % 4` its `i`th message, `LEVEL-p-i`.
    let poster = |p: u32| {
        format!(
            "i=0; while [ $i -lt {EACH} ]; do l=$(( ({p} + i) % 4 )); \
             \"$FSYNC\" msg post B --priority $l --data \"$l-{p}-$i\" || exit 1; \
             echo \"posted $l-{p}-$i\" >> log; i=$((i + 1)); done"
        )
    };
    let posters: Vec<_> = (0..POSTERS).map(|p| t.sh(&poster(p)).start()).collect();
    for p in posters {
        p.finish().code(0);
    }
    // Level 0, after everything else: each receiver stops on one, once all else is taken.
    for _ in 0..RECEIVERS {
        post(&t, 0, "stop");
    }
    for r in receivers {
        r.finish().code(0);
    }
    let log = t.read("log");
    let level = |m: &str| m.split('-').next().unwrap().parse::<u8>().unwrap_or(0);
    // Per message: the line it was posted at; the line of the receive that took it, and the
    // line that receive began at.
    let mut posted: HashMap<&str, usize> = HashMap::new();
    let mut taken: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut began: HashMap<&str, usize> = HashMap::new();
    let lines: Vec<&str> = log.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["posted", m] => assert!(posted.insert(m, at).is_none(), "{m} posted twice"),
            ["begin", r] => _ = began.insert(r, at),
            ["took", _, "stop"] => {}
            ["took", r, m] => {
                assert!(
                    taken.insert(m, (began[r], at)).is_none(),
                    "{m} taken twice:\n{log}"
                );
            }
            _ => panic!("line {at} of the log: {line}"),
        }
    }
    assert_eq!(posted.len(), (POSTERS * EACH) as usize);
    let mut keys: Vec<_> = posted.keys().collect();
    keys.sort();
    let mut got: Vec<_> = taken.keys().collect();
    got.sort();
    assert_eq!(keys, got, "every message exactly once");
    for (x, &(begin, took)) in &taken {
        for (m, &at) in &posted {
            if level(m) > level(x) && at < begin {
                // `m` was queued when the receive that took `x` began: another receive must
                // have taken it, one that began before this one ended.
                let (other_began, _) = taken[m];
                assert!(
                    other_began < took,
                    "{x} (line {took}) was taken while {m} (posted at line {at}) waited:\n{log}"
                );
            }
        }
    }
}

/// A failed job held back for its backoff, a lost one, a dead letter and one put back with
/// `retry` all keep their level: each comes back before a level-0 message posted before it.
#[test]
fn failures_backoffs_dead_letters_and_retries_keep_the_level() {
    let t = TestDir::new();
    post(&t, 0, "zero");
    post(&t, 2, "two");
    // Held back for its backoff, then promoted by a look that takes nothing (wait-empty).
    t.fsync(["msg", "recv", "-n", "--backoff", "1ms", "B", "--", "false"])
        .run()
        .code(1);
    assert_eq!(levels_of(&list(&t), "delayed"), [2]);
    eventually("the failed job is queued again after its backoff", || {
        let _ = t.fsync(["msg", "wait-empty", "-n", "B"]).run();
        list(&t)["delayed"].as_array().unwrap().is_empty()
    });
    assert_eq!(levels_of(&list(&t), "messages"), [2, 0]);
    // To the dead letters (one failure allowed), and back with `retry`.
    t.fsync(["msg", "recv", "-n", "--retries", "1", "B", "--", "false"])
        .run()
        .code(1);
    let l = list(&t);
    assert_eq!(
        (levels_of(&l, "dead"), levels_of(&l, "messages")),
        (vec![2], vec![0])
    );
    t.fsync(["msg", "retry", "B"]).run().code(0);
    assert_eq!(levels_of(&list(&t), "messages"), [2, 0]);
    // Lost with its worker (killed with its job): back at its level, before "zero".
    let mut worker = t
        .fsync(["msg", "recv", "B", "--", "sh", "-c"])
        .arg("cat >/dev/null; echo acquired; exec sleep 1000")
        .own_process_group()
        .hold();
    worker.kill_process_group();
    let _ = t.fsync(["msg", "wait-empty", "-n", "B"]).run(); // recovers the claim
    let l = list(&t);
    assert_eq!(levels_of(&l, "messages"), [2, 0], "{l}");
    assert_eq!(l["messages"][0]["lost"], 1, "{l}");
    assert_eq!(recv(&t), "two");
    assert_eq!(recv(&t), "zero");
}

/// `wait-empty` counts a message of any level, and a waiter wakes when the last one, of level
/// 3, is taken; a worker draining with `--until-empty` takes every level.
#[test]
fn wait_empty_and_until_empty_see_every_level() {
    let t = TestDir::new();
    post(&t, 3, "three");
    t.fsync(["msg", "wait-empty", "-n", "B"]).run().code(75);
    let mut waiter = t.fsync(["msg", "wait-empty", "-v", "B"]).start();
    waiter.stderr_until("to have nothing left to do");
    assert_eq!(recv(&t), "three");
    waiter.finish().code(0);
    post(&t, 1, "one");
    post(&t, 0, "zero");
    post(&t, 2, "two");
    t.fsync([
        "msg",
        "work",
        "--until-empty",
        "--output",
        "inherit",
        "B",
        "--",
        "sh",
        "-c",
        "cat; echo",
    ])
    .run()
    .code(0)
    .stdout("two\none\nzero\n");
}
