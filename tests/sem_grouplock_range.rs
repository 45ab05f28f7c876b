//! `fsync sem`, `fsync grouplock`, and `--range`: counting with a witness log, slots of killed
//! holders coming back, group exclusion without starvation, byte-range independence.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{dead, eventually, json_of, require, Holder, TestDir};

/// Replay `+ TAG pid` / `- TAG pid` marks; returns the most inside at once and, per state, the
/// set of tags inside (checked by `ok`).
fn replay(log: &str, ok: impl Fn(&HashMap<String, String>) -> bool) -> usize {
    let mut inside = HashMap::new();
    let mut most = 0;
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first() {
            Some(&"+") => {
                inside.insert(w[2].to_string(), w[1].to_string());
                most = most.max(inside.len());
                assert!(ok(&inside), "violation at `{line}`: {inside:?}\n{log}");
            }
            Some(&"-") => {
                inside.remove(w[2]);
            }
            _ => {}
        }
    }
    most
}

const MARK: &str = "echo \"+ $TAG $$\" >> log; sleep 0.05; echo \"- $TAG $$\" >> log";

#[test]
fn sem_at_most_n_inside_and_slots_are_distinct() {
    let t = TestDir::new();
    let script = "for i in 1 2 3; do \"$FSYNC\" sem run S --slots 3 -- sh -c \
                  'TAG=$FSYNC_SLOT; echo \"+ $TAG $$\" >> log; sleep 0.05; echo \"- $TAG $$\" >> log' || exit 1; done";
    let procs: Vec<Holder> = (0..8).map(|_| t.sh(script).start()).collect();
    for p in procs {
        p.finish().code(0);
    }
    let log = t.read("log");
    let most = replay(&log, |inside| {
        let slots: HashSet<&String> = inside.values().collect();
        inside.len() <= 3
            && slots.len() == inside.len()
            && slots.iter().all(|s| ["0", "1", "2"].contains(&s.as_str()))
    });
    assert!(most >= 2, "never two inside at once:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with('+')).count(), 24);
    assert_eq!(log.lines().filter(|l| l.starts_with('-')).count(), 24);
}

fn holder(t: &TestDir, slots: &str) -> Holder {
    t.fsync([
        "sem",
        "run",
        "S",
        "--slots",
        slots,
        "--",
        "sh",
        "-c",
        "echo acquired; read x || true",
    ])
    .hold()
}

/// The command `fsync` runs (its only child).
fn command_of(fsync_pid: u32) -> u32 {
    let children =
        std::fs::read_to_string(format!("/proc/{fsync_pid}/task/{fsync_pid}/children")).unwrap();
    children
        .split_whitespace()
        .next()
        .expect("a command")
        .parse()
        .unwrap()
}

#[test]
fn sem_slots_of_killed_holders_come_back() {
    let t = TestDir::new();
    let mut a = holder(&t, "2");
    let b = holder(&t, "2");
    t.fsync(["sem", "run", "-n", "S", "--slots", "2", "--", "true"])
        .run()
        .code(75);
    // Only fsync dies: its command keeps the slot.
    let a_cmd = command_of(a.pid());
    a.signal(Signal::SIGKILL);
    a.wait_exit();
    t.fsync(["sem", "run", "-n", "S", "--slots", "2", "--", "true"])
        .run()
        .code(75);
    // The command dies too: the slot is free at once.
    kill(Pid::from_raw(a_cmd as i32), Signal::SIGKILL).unwrap();
    eventually("the command died", || dead(a_cmd));
    t.fsync(["sem", "run", "-n", "S", "--slots", "2", "--", "true"])
        .run()
        .code(0);
    b.finish().code(0);
    let both = "\"$FSYNC\" sem run -n S --slots 2 -- \"$FSYNC\" sem run -n S --slots 2 -- true";
    t.sh(both).run().code(0);
}

#[test]
fn sem_status_waiters_and_bad_slot_counts() {
    let t = TestDir::new();
    t.fsync(["sem", "status", "S"]).run().code(0);
    let h = holder(&t, "1");
    let mut waiter = t
        .fsync(["sem", "run", "-v", "S", "--slots", "1", "--", "echo", "in"])
        .start();
    assert!(waiter.stderr_line().contains("waiting for"));
    let v = json_of(
        &t.fsync(["sem", "status", "--json", "S"])
            .run()
            .code(1)
            .stdout,
    );
    assert_eq!(v["slots"], 1, "{v}");
    assert_eq!(v["held"][0]["holder"]["pid"], h.pid(), "{v}");
    assert_eq!(v["waiters"], 1, "{v}");
    h.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    assert!(out.stdout.contains("in"));
    t.fsync(["sem", "status", "S"]).run().code(0);
    let out = t
        .fsync(["sem", "run", "S", "--slots", "4", "--", "true"])
        .run();
    out.code(2).stderr_has("--slots 1");
    for bad in ["0", "-1", "x"] {
        t.fsync(["sem", "run", "S", "--slots", bad, "--", "true"])
            .run()
            .code(2);
    }
}

#[test]
fn grouplock_never_two_groups_and_groups_share() {
    let t = TestDir::new();
    let procs: Vec<Holder> = ["gA", "gA", "gA", "gB", "gB", "gB"]
        .iter()
        .map(|g| {
            t.sh(&format!(
                "for i in 1 2 3 4 5; do TAG={g} \"$FSYNC\" grouplock run L --group {g} -- sh -c '{MARK}' || exit 1; done"
            ))
            .start()
        })
        .collect();
    for p in procs {
        p.finish().code(0);
    }
    let log = t.read("log");
    let most = replay(&log, |inside| {
        inside.values().collect::<HashSet<_>>().len() <= 1
    });
    assert!(most >= 2, "members of one group never shared:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with('-')).count(), 30);
}

#[test]
fn grouplock_max_limits_a_group() {
    let t = TestDir::new();
    let script = "TAG=$FSYNC_SLOT; echo \"+ $TAG $$\" >> log; sleep 0.1; echo \"- $TAG $$\" >> log";
    let procs: Vec<Holder> = (0..5)
        .map(|_| {
            t.fsync([
                "grouplock",
                "run",
                "L",
                "--group",
                "up",
                "--max",
                "2",
                "--",
                "sh",
                "-c",
                script,
            ])
            .start()
        })
        .collect();
    for p in procs {
        p.finish().code(0);
    }
    let log = t.read("log");
    replay(&log, |inside| {
        inside.len() <= 2 && inside.values().all(|s| s == "0" || s == "1")
    });
}

#[test]
fn grouplock_waiting_group_is_not_starved() {
    let t = TestDir::new();
    let stream = "for i in $(seq 40); do TAG=gA \"$FSYNC\" grouplock run L --group gA -- sh -c \
                  'echo \"+ gA $$\" >> log; sleep 0.2; echo \"- gA $$\" >> log' & sleep 0.05; done; wait";
    let a = t.sh(stream).start();
    eventually("gA is inside", || {
        std::fs::read_to_string(t.join("log")).is_ok_and(|l| l.contains("+ gA"))
    });
    let b = t
        .fsync([
            "grouplock",
            "run",
            "L",
            "--group",
            "gB",
            "--",
            "sh",
            "-c",
            "echo \"+ gB $$\" >> log; echo \"- gB $$\" >> log",
        ])
        .start();
    b.finish().code(0);
    a.finish().code(0);
    let log = t.read("log");
    replay(&log, |inside| {
        inside.values().collect::<HashSet<_>>().len() <= 1
    });
    let after = log
        .lines()
        .skip_while(|l| !l.starts_with("- gB"))
        .filter(|l| l.starts_with("+ gA"))
        .count();
    assert!(after > 5, "gB waited for the whole gA stream:\n{log}");
    let v = json_of(
        &t.fsync(["grouplock", "status", "--json", "L"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(v["inside"], serde_json::json!([]), "{v}");
    t.fsync(["grouplock", "run", "L", "--group", "a/b", "--", "true"])
        .run()
        .code(2);
}

fn range_holder(t: &TestDir, args: &[&str]) -> Holder {
    let mut v = args.to_vec();
    v.extend(["--", "sh", "-c", "echo acquired; read x || true"]);
    t.fsync(v).hold()
}

#[test]
fn ranges_disjoint_overlapping_shared_and_past_eof() {
    let t = TestDir::new();
    t.write("L", "content");
    let h = range_holder(&t, &["mutex", "run", "--range", "0:10", "L"]);
    t.fsync(["mutex", "run", "-n", "--range", "10:10", "L", "--", "true"])
        .run()
        .code(0);
    t.fsync(["mutex", "run", "-n", "--range", "5", "L", "--", "true"])
        .run()
        .code(75);
    t.fsync([
        "mutex",
        "run",
        "-n",
        "--range",
        "0x7fffffffffffffff",
        "L",
        "--",
        "true",
    ])
    .run()
    .code(0);
    t.fsync([
        "mutex",
        "run",
        "-n",
        "--range",
        "1000000:5",
        "L",
        "--",
        "true",
    ])
    .run()
    .code(0);
    h.finish().code(0);
    let to_end = range_holder(&t, &["mutex", "run", "--range", "100:0", "L"]);
    t.fsync([
        "mutex",
        "run",
        "-n",
        "--range",
        "0x7ffffffffffffff0",
        "L",
        "--",
        "true",
    ])
    .run()
    .code(75);
    t.fsync(["mutex", "run", "-n", "--range", "0:100", "L", "--", "true"])
        .run()
        .code(0);
    to_end.finish().code(0);
    let r1 = range_holder(&t, &["swmr", "read", "--range", "0:4", "L"]);
    let r2 = range_holder(&t, &["swmr", "read", "--range", "0:4", "L"]);
    t.fsync(["swmr", "write", "-n", "--range", "2:1", "L", "--", "true"])
        .run()
        .code(75);
    t.fsync(["swmr", "write", "-n", "--range", "4:4", "L", "--", "true"])
        .run()
        .code(0);
    r1.finish().code(0);
    r2.finish().code(0);
    assert_eq!(t.read("L"), "content", "a range lock changed the file");
    for bad in ["-1", "1:x", "0x7fffffffffffffff:2"] {
        t.fsync(["mutex", "run", "--range", bad, "L", "--", "true"])
            .run()
            .code(2);
    }
}

#[test]
fn ranges_show_in_lslocks() {
    require("lslocks", "util-linux");
    let t = TestDir::new();
    let h = range_holder(&t, &["mutex", "run", "--range", "100:50", "L"]);
    let out = t
        .cmd("lslocks")
        .args(["--noheadings", "--raw", "-o", "TYPE,START,END,PATH"])
        .run();
    let path = t.arg("L");
    let line = out
        .stdout
        .lines()
        .find(|l| l.ends_with(&path) || l.contains(" 100 149"))
        .map(str::to_string);
    let line = line.unwrap_or_else(|| panic!("no lock listed:\n{}", out.stdout));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&fields[..3], ["OFDLCK", "100", "149"], "{line}");
    h.finish().code(0);
}
