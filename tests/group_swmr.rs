//! `fsync group` and `fsync swmr`: membership, emptiness and its waits, crashes of members;
//! the reader/writer lock under stress, its writer that readers cannot starve, flock interop.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{dead, eventually, json_of, require, Holder, TestDir};

/// A member that says `acquired`, then `first=0|1`, and stays until its stdin closes.
fn member(t: &TestDir, group: &str, extra: &[&str]) -> (Holder, String) {
    let mut args = vec!["group", "join", group];
    args.extend_from_slice(extra);
    args.extend([
        "--",
        "sh",
        "-c",
        "echo acquired; echo first=$FSYNC_GROUP_FIRST; read x || true",
    ]);
    let mut h = t.fsync(args).hold();
    let first = h.line();
    (h, first)
}

fn members_json(t: &TestDir, group: &str) -> serde_json::Value {
    let out = t.fsync(["group", "members", "--json", group]).run();
    json_of(&out.code(0).stdout)
}

/// The pids of the commands that are members.
fn member_children(t: &TestDir, group: &str) -> Vec<u64> {
    let v = members_json(t, group);
    let mut pids: Vec<u64> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["child_pid"].as_u64().unwrap())
        .collect();
    pids.sort();
    pids
}

fn kill_member(h: &mut Holder, child: u64) {
    h.signal(Signal::SIGKILL);
    h.wait_exit();
    let _ = kill(Pid::from_raw(child as i32), Signal::SIGKILL);
    eventually("the member's command died", || dead(child as u32));
}

#[test]
fn group_join_empty_members_and_first() {
    let t = TestDir::new();
    t.fsync(["group", "empty", "G"]).run().code(0);
    let (a, first_a) = member(&t, "G", &[]);
    assert_eq!(first_a, "first=1");
    t.fsync(["group", "empty", "G"]).run().code(1);
    let (b, first_b) = member(&t, "G", &["-v"]);
    assert_eq!(first_b, "first=0");
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 2, "{v}");
    let pids: Vec<u64> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.contains(&(a.pid() as u64)) && pids.contains(&(b.pid() as u64)),
        "{v}"
    );
    assert!(
        v["members"][0]["command"]
            .as_str()
            .unwrap()
            .contains("FSYNC_GROUP_FIRST"),
        "{v}"
    );
    a.finish().code(0);
    t.fsync(["group", "empty", "G"]).run().code(1);
    let out = b.finish();
    out.code(0).stderr_has("last member");
    t.fsync(["group", "empty", "G"]).run().code(0);
    t.fsync(["group", "members", "G"])
        .run()
        .code(0)
        .stdout("0 members\n");
}

#[test]
fn group_killed_members_have_left_at_once_and_counts_stay_exact() {
    let t = TestDir::new();
    let mut holders: Vec<Holder> = (0..8).map(|_| member(&t, "G", &[]).0).collect();
    let children = member_children(&t, "G");
    assert_eq!(children.len(), 8);
    // Map each holder (fsync pid) to its command's pid through the JSON.
    let v = members_json(&t, "G");
    let child_of = |pid: u32| {
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["pid"] == pid)
            .unwrap()["child_pid"]
            .as_u64()
            .unwrap()
    };
    let mut killed = Vec::new();
    for i in [1, 4, 6] {
        let child = child_of(holders[i].pid());
        kill_member(&mut holders[i], child);
        killed.push(child);
    }
    let now = member_children(&t, "G");
    assert_eq!(now.len(), 5, "{now:?}");
    assert!(killed.iter().all(|k| !now.contains(k)));
    let registrations = std::fs::read_dir(t.join("G/members")).unwrap().count();
    assert_eq!(
        registrations, 5,
        "dead members' registrations were not reaped"
    );
    // Kill the rest: the group is empty at once, with nobody having left cleanly.
    for (i, h) in holders.iter_mut().enumerate() {
        if ![1, 4, 6].contains(&i) {
            let child = child_of(h.pid());
            kill_member(h, child);
        }
    }
    t.fsync(["group", "empty", "G"]).run().code(0);
    assert_eq!(members_json(&t, "G")["count"], 0);
}

#[test]
fn group_wait_empty_returns_when_the_last_member_leaves() {
    let t = TestDir::new();
    t.fsync(["group", "wait-empty", "missing"]).run().code(0);
    let (a, _) = member(&t, "G", &[]);
    let (b, _) = member(&t, "G", &[]);
    t.fsync(["group", "wait-empty", "-t", "300ms", "G"])
        .run()
        .code(75);
    let mut waiter = t.fsync(["group", "wait-empty", "G"]).start();
    a.finish().code(0);
    t.fsync(["group", "empty", "G"]).run().code(1);
    assert!(
        waiter.running(),
        "wait-empty returned while a member was still in"
    );
    b.finish().code(0);
    waiter.finish().code(0);
}

#[test]
fn group_watch_reports_changes() {
    let t = TestDir::new();
    let mut watch = t
        .fsync(["group", "watch", "--json", "-t", "30s", "G"])
        .start();
    assert_eq!(json_of(&watch.line())["event"], "empty");
    let (m, _) = member(&t, "G", &[]);
    assert_eq!(json_of(&watch.line())["event"], "not-empty");
    m.finish().code(0);
    assert_eq!(json_of(&watch.line())["event"], "empty");
    watch.signal(Signal::SIGTERM);
    watch.wait_exit();
}

#[test]
fn group_delete_removes_the_group_and_survives_racing_joiners() {
    let t = TestDir::new();
    t.fsync(["group", "join", "--delete", "G", "--", "true"])
        .run()
        .code(0);
    assert!(!t.join("G").exists());
    let script = "for i in $(seq 20); do \"$FSYNC\" group join --delete G -- true || exit 1; done";
    let racers: Vec<Holder> = (0..4).map(|_| t.sh(script).start()).collect();
    for r in racers {
        r.finish().code(0).stderr("");
    }
    assert!(!t.join("G").exists(), "the last leaver left files behind");
}

#[test]
fn group_bad_input() {
    let t = TestDir::new();
    t.fsync(["group", "join", "no/such/G", "--", "true"])
        .run()
        .operational_error("no/such/G");
    t.write("file", "");
    t.fsync(["group", "join", "file", "--", "true"])
        .run()
        .operational_error("file");
    t.fsync(["group", "empty", "file"])
        .run()
        .operational_error("file");
}

/// Replay an O_APPEND log of `R+ pid`, `R- pid`, `W+ pid`, `W- pid` marks: a writer must be
/// alone. Returns (reader pairs, writer pairs, the most readers inside at once).
fn check_rw_log(log: &str) -> (usize, usize, usize) {
    let (mut readers, mut writers, mut max_readers) = (0usize, 0usize, 0);
    let (mut r_pairs, mut w_pairs) = (0, 0);
    for line in log.lines() {
        match line.split_whitespace().next() {
            Some("R+") => {
                readers += 1;
                max_readers = max_readers.max(readers);
                assert_eq!(
                    writers, 0,
                    "a reader entered while a writer was inside:\n{log}"
                );
            }
            Some("R-") => {
                readers -= 1;
                r_pairs += 1;
            }
            Some("W+") => {
                writers += 1;
                assert!(
                    writers == 1 && readers == 0,
                    "a writer was not alone:\n{log}"
                );
            }
            Some("W-") => {
                writers -= 1;
                w_pairs += 1;
            }
            _ => {}
        }
    }
    (r_pairs, w_pairs, max_readers)
}

#[test]
fn swmr_stress_writer_never_with_anyone() {
    let t = TestDir::new();
    let reader = "for i in $(seq 50); do \"$FSYNC\" swmr read L -- sh -c 'echo \"R+ $$\" >> log; echo \"R- $$\" >> log' || exit 1; done";
    let writer = "for i in $(seq 30); do \"$FSYNC\" swmr write L -- sh -c 'echo \"W+ $$\" >> log; echo \"W- $$\" >> log' || exit 1; done";
    let procs: Vec<Holder> = [reader, reader, reader, writer, writer]
        .iter()
        .map(|s| t.sh(s).start())
        .collect();
    for p in procs {
        p.finish().code(0);
    }
    let (r, w, _) = check_rw_log(&t.read("log"));
    assert_eq!((r, w), (150, 60));
}

#[test]
fn swmr_waiting_writer_is_not_starved_by_a_reader_stream() {
    let t = TestDir::new();
    // Overlapping readers for ~3 s: each holds 200 ms, a new one every 50 ms.
    let stream = "for i in $(seq 60); do \"$FSYNC\" swmr read L -- sh -c 'echo \"R+ $$\" >> log; sleep 0.2; echo \"R- $$\" >> log' & sleep 0.05; done; wait";
    let readers = t.sh(stream).start();
    eventually("a reader is inside", || {
        std::fs::read_to_string(t.join("log")).is_ok_and(|l| l.contains("R+"))
    });
    let writer = t
        .sh("\"$FSYNC\" swmr write L -- sh -c 'echo \"W+ $$\" >> log; echo \"W- $$\" >> log'")
        .start();
    writer.finish().code(0);
    readers.finish().code(0);
    let log = t.read("log");
    check_rw_log(&log);
    // The writer got in while the stream went on: readers entered after it left.
    let after: usize = log
        .lines()
        .skip_while(|l| !l.starts_with("W-"))
        .filter(|l| l.starts_with("R+"))
        .count();
    assert!(
        after > 10,
        "the writer waited for the whole stream ({after} readers after it):\n{log}"
    );
}

#[test]
fn swmr_interoperates_with_flock() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let shared = t
        .cmd("flock")
        .args(["-s", "L", "sh", "-c", "echo acquired; read x || true"])
        .hold();
    t.fsync(["swmr", "read", "-n", "L", "--", "true"])
        .run()
        .code(0);
    t.fsync(["swmr", "write", "-n", "L", "--", "true"])
        .run()
        .code(75);
    shared.finish().code(0);
    let exclusive = t
        .cmd("flock")
        .args(["-x", "L", "sh", "-c", "echo acquired; read x || true"])
        .hold();
    t.fsync(["swmr", "read", "-n", "L", "--", "true"])
        .run()
        .code(75);
    exclusive.finish().code(0);
    let writer = t
        .fsync([
            "swmr",
            "write",
            "L",
            "--",
            "sh",
            "-c",
            "echo acquired; read x || true",
        ])
        .hold();
    t.cmd("flock").args(["-n", "-s", "L", "true"]).run().code(1);
    writer.finish().code(0);
}

#[test]
fn swmr_killed_holders_release_and_status_counts() {
    let t = TestDir::new();
    let hold = "echo acquired; read x || true";
    let r1 = t
        .fsync(["swmr", "read", "L", "--", "sh", "-c", hold])
        .hold();
    let r2 = t
        .fsync(["swmr", "read", "L", "--", "sh", "-c", hold])
        .hold();
    let mut w = t
        .fsync(["swmr", "write", "-v", "L", "--", "sh", "-c", hold])
        .start();
    assert!(
        w.stderr_line().contains("waiting for"),
        "the writer does not wait"
    );
    let v = json_of(
        &t.fsync(["swmr", "status", "--json", "L"])
            .run()
            .code(1)
            .stdout,
    );
    assert_eq!(
        (v["readers"].as_u64(), v["waiting_writers"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    // Kill both readers (fsync and command): the writer gets in.
    for r in [r1, r2] {
        kill_with_command(r);
    }
    w.expect("acquired");
    let v = json_of(
        &t.fsync(["swmr", "status", "--json", "L"])
            .run()
            .code(1)
            .stdout,
    );
    assert!(v["writer"].is_object() || v["writer"] == true, "{v}");
    kill_with_command(w);
    t.fsync(["swmr", "status", "L"]).run().code(0);
    t.fsync(["swmr", "write", "-n", "L", "--", "true"])
        .run()
        .code(0);
}

/// SIGKILL an `fsync` and the command it runs (which holds the lock passed down to it), and
/// return once both are dead.
fn kill_with_command(mut h: Holder) {
    let commands = children_of(h.pid());
    assert!(!commands.is_empty(), "no command under fsync {}", h.pid());
    h.signal(Signal::SIGKILL);
    h.wait_exit();
    for p in commands {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        eventually("the command died", || dead(p));
    }
}

/// Pids whose parent was `ppid` (for commands of an `fsync` we killed: re-parented after).
fn children_of(ppid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rfind(')')
                        .map(|i| s[i + 2..].split_whitespace().nth(1).map(str::to_string))
                })
                .flatten()
                .is_some_and(|p| p == ppid.to_string())
        })
        .collect()
}
