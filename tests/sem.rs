/*!
`fsync sem`, end to end: a counting semaphore that survives crashes.

Exclusion is proved by a witness log: every command appends `+ SLOT PID` when it starts and
`- SLOT PID` when it ends (`>>`, so `O_APPEND`: one write per mark, never torn), and the test
replays the log. A mark is written inside the slot, so a log interval lies within the real
holding interval: overlaps in the log are real, and the real limit bounds the log. Everything
else synchronises on what the processes say (`acquired`, `-v`'s `waiting`), never on sleeps.
*/

use std::collections::HashMap;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{HOLD, Holder, TestDir, json_of, racing_rounds};

/// What a command under a slot appends to `log`: its slot and pid on entry and on exit.
const MARKED: &str =
    "echo \"+ $FSYNC_SLOT $$\" >> log; sleep 0.05; echo \"- $FSYNC_SLOT $$\" >> log";

/// `fsync sem run [extra...] SEM --slots N -- sh -c SCRIPT`.
fn sem_run(
    t: &TestDir,
    sem: &str,
    slots: &str,
    extra: &[&str],
    script: &str,
) -> crate::harness::Cmd {
    let mut args = vec!["sem", "run"];
    args.extend_from_slice(extra);
    args.extend([sem, "--slots", slots, "--", "sh", "-c", script]);
    t.fsync(args)
}

/// A holder of one slot of `sem`, once its command has said `acquired`.
#[track_caller]
fn slot_holder(t: &TestDir, sem: &str, slots: &str, extra: &[&str]) -> Holder {
    sem_run(t, sem, slots, extra, HOLD).hold()
}

/// `fsync sem run -n`: 75 and nothing run (all slots held).
#[track_caller]
fn assert_full(t: &TestDir, sem: &str, slots: &str) {
    sem_run(t, sem, slots, &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
}

/// Replay the `+ SLOT PID` / `- SLOT PID` marks of `log`, checking at every step that at most
/// `slots` are inside, each with a slot in `0..slots` that no other process inside holds.
/// Returns the most inside at once and the number of runs completed.
#[track_caller]
fn replay(log: &str, slots: usize) -> (usize, usize) {
    let mut inside: HashMap<&str, usize> = HashMap::new(); // pid -> slot
    let (mut most, mut done) = (0, 0);
    for (n, line) in log.lines().enumerate() {
        let at = || format!("at line {} `{line}` of the log:\n{log}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [mark, slot, pid] = fields[..] else {
            panic!("a malformed mark (FSYNC_SLOT unset?) {}", at());
        };
        let slot: usize = slot
            .parse()
            .unwrap_or_else(|_| panic!("FSYNC_SLOT is not a number {}", at()));
        assert!(slot < slots, "FSYNC_SLOT out of 0..{slots} {}", at());
        match mark {
            "+" => {
                assert!(
                    !inside.values().any(|&s| s == slot),
                    "slot {slot} used by two processes at once {}",
                    at()
                );
                assert!(inside.insert(pid, slot).is_none(), "entered twice {}", at());
                assert!(inside.len() <= slots, "more than {slots} inside {}", at());
                most = most.max(inside.len());
            }
            "-" => {
                assert_eq!(inside.remove(pid), Some(slot), "left unentered {}", at());
                done += 1;
            }
            _ => panic!("a malformed mark {}", at()),
        }
    }
    assert!(inside.is_empty(), "runs never ended: {inside:?}\n{log}");
    (most, done)
}

#[test]
fn eight_processes_share_three_slots_with_distinct_slot_numbers() {
    let t = TestDir::new();
    let one = format!(
        "\"$FSYNC\" sem run S --slots 3 -- sh -c '{}'",
        MARKED.replace('\'', r"'\''")
    );
    let script = format!("for i in 1 2 3; do {one} || exit 1; done");
    let workers: Vec<Holder> = (0..8).map(|_| t.sh(&script).start()).collect();
    for w in workers {
        w.finish().code(0);
    }
    let log = t.read("log");
    let (most, done) = replay(&log, 3);
    assert_eq!(done, 24, "not all 24 runs completed:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with('+')).count(), 24);
    assert!(most >= 2, "never two inside at once with 3 slots:\n{log}");
}

#[test]
fn slots_of_sigkilled_holders_come_back_at_once() {
    let t = TestDir::new();
    let mut a = sem_run(&t, "S", "2", &[], HOLD).own_process_group().hold();
    let mut b = sem_run(&t, "S", "2", &[], HOLD).own_process_group().hold();
    assert_full(&t, "S", "2");
    // fsync and its command (which the slot was passed down to) die.
    let killed = a.kill_process_group();
    assert!(killed.len() >= 2, "fsync and its command: {killed:?}");
    b.kill_process_group();
    // Both slots are free again: two holders inside together, a third finds none.
    let c = slot_holder(&t, "S", "2", &["-n"]);
    let d = slot_holder(&t, "S", "2", &["-n"]);
    assert_full(&t, "S", "2");
    c.finish().code(0);
    d.finish().code(0);
}

#[test]
fn sigkill_of_fsync_alone_leaves_the_slot_with_its_command() {
    let t = TestDir::new();
    let script = "echo acquired; read x; echo \"done $FSYNC_SLOT\" > marker";
    let mut holder = sem_run(&t, "S", "1", &[], script).hold();
    holder.signal(Signal::SIGKILL);
    holder.wait_exit();
    // fsync is gone; its command still runs and still holds the only slot.
    assert_full(&t, "S", "1");
    t.fsync(["sem", "status", "S"]).run().code(1);
    // A waiter gets the slot only once the command has finished: never two holders.
    let mut waiter = t
        .fsync([
            "sem", "run", "-v", "S", "--slots", "1", "--", "cat", "marker",
        ])
        .start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    holder.send("go");
    waiter.finish().code(0).stdout("done 0\n");
    holder.finish().killed_by(Signal::SIGKILL);
}

/// `--close` keeps the slot from the command (flock -o): killing fsync frees it at once,
/// although the command still runs.
#[test]
fn close_does_not_pass_the_slot_down() {
    let t = TestDir::new();
    let mut holder = slot_holder(&t, "S", "1", &["--close"]);
    assert_full(&t, "S", "1");
    holder.signal(Signal::SIGKILL);
    holder.wait_exit();
    sem_run(&t, "S", "1", &["-n"], "echo ran")
        .run()
        .code(0)
        .stdout("ran\n");
    holder.finish().killed_by(Signal::SIGKILL);
}

/// Another `--slots` is taken once nobody holds a slot; while anyone does, it is a clear
/// error (exit 2) that names both counts and says the semaphore is in use.
#[test]
fn a_different_slot_count_is_taken_when_free_and_refused_while_held() {
    let t = TestDir::new();
    let sem = t.arg("S");
    sem_run(&t, &sem, "3", &[], "true").run().code(0);
    // Nobody inside: 4 is taken, and is the count from now on.
    sem_run(&t, &sem, "4", &[], "echo \"ran in $FSYNC_SLOT\"")
        .run()
        .code(0)
        .stdout_has("ran in ");
    assert_eq!(status_json(&t, &sem, 0)["slots"], 4);
    // Someone inside under 4: 2 is refused, and runs nothing.
    let h = slot_holder(&t, &sem, "4", &[]);
    let out = sem_run(&t, &sem, "2", &[], "touch ran").run();
    out.code(2).error_naming(&sem);
    assert!(!t.join("ran").exists(), "the command ran: {}", out.stderr);
    // Both numbers are named, after the path (which may hold digits of its own).
    let after = &out.stderr[out.stderr.find(&sem).unwrap() + sem.len()..];
    let numbers: Vec<&str> = after
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .collect();
    assert!(
        numbers.contains(&"4") && numbers.contains(&"2"),
        "the error does not name both 4 and 2: {}",
        out.stderr
    );
    out.stderr_has("--slots 4").stderr_has("in use");
    // Also with -n, and with a wait: refused at once, not after the holder.
    sem_run(&t, &sem, "2", &["-n"], "touch ran").run().code(2);
    sem_run(&t, &sem, "3", &["-t", "1h"], "touch ran")
        .run()
        .code(2);
    assert_eq!(status_json(&t, &sem, 0)["slots"], 4);
    sem_run(&t, &sem, "4", &["-n"], "true").run().code(0);
    h.finish().code(0);
    assert!(!t.join("ran").exists());
    // Free again: 2 is taken, and a third holder finds none.
    let a = slot_holder(&t, &sem, "2", &[]);
    let b = slot_holder(&t, &sem, "2", &[]);
    assert_full(&t, &sem, "2");
    a.finish().code(0);
    b.finish().code(0);
}

/// Runs with different counts starting together never share the semaphore: everyone inside
/// at any moment came in under the same count, and no more than it are inside. The losers of
/// a race are refused (exit 2). In rounds that start six runs at once on an empty semaphore,
/// so that the first in line of each round sets the count; which count is started first turns
/// from round to round, so that each count wins some rounds.
#[test]
fn racing_slot_counts_are_never_inside_together() {
    let t = TestDir::new();
    let script = racing_rounds(21, |n| {
        format!(
            "\"$FSYNC\" sem run S --slots {n} -- sh -c \
             'echo \"+ $FSYNC_SLOT $$ {n}\" >> log; sleep 0.02; echo \"- $FSYNC_SLOT $$ {n}\" >> log'"
        )
    });
    // Which run gets in first is the scheduler's choice: batches of rounds until more than one
    // count has won and some run was refused (at most five; one has always been enough but
    // once in CI, where one count won all 21 rounds).
    let mut counts = std::collections::HashSet::new();
    let mut refused = 0;
    for _batch in 0..5 {
        std::fs::write(t.path().join("log"), "").unwrap();
        let out = t.sh(&script).run();
        out.code(0);
        refused += out.stdout.lines().filter(|l| *l == "refused").count();
        assert!(
            out.stdout.lines().all(|l| l == "in" || l == "refused"),
            "{}",
            out.stdout
        );
        let log = t.read("log");
        let mut inside: HashMap<&str, (&str, usize)> = HashMap::new(); // pid -> (slot, count)
        for line in log.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [mark, slot, pid, n] = f[..] else {
                panic!("a malformed mark `{line}`:\n{log}");
            };
            let n: usize = n.parse().unwrap();
            match mark {
                "+" => {
                    assert!(
                        inside.values().all(|&(_, m)| m == n),
                        "`{line}` entered beside runs under another count {inside:?}:\n{log}"
                    );
                    assert!(
                        slot.parse::<usize>().is_ok_and(|s| s < n),
                        "`{line}`:\n{log}"
                    );
                    assert!(
                        !inside.values().any(|&(s, _)| s == slot),
                        "`{line}`:\n{log}"
                    );
                    inside.insert(pid, (slot, n));
                    assert!(
                        inside.len() <= n,
                        "more than {n} inside at `{line}`:\n{log}"
                    );
                    counts.insert(n);
                }
                _ => assert_eq!(inside.remove(pid), Some((slot, n)), "`{line}`:\n{log}"),
            }
        }
        assert!(inside.is_empty(), "runs never ended: {inside:?}\n{log}");
        if counts.len() >= 2 && refused > 0 {
            break;
        }
    }
    assert!(
        counts.len() >= 2,
        "one count always won ({counts:?}) in five batches: nothing was raced"
    );
    assert!(refused > 0, "no run was refused: nothing was raced");
}

#[test]
fn invalid_slot_counts_are_usage_errors() {
    let t = TestDir::new();
    for bad in ["0", "-1", "x", ""] {
        t.fsync(["sem", "run", "S", "--slots", bad, "--", "touch", "ran"])
            .run()
            .code(2);
        t.fsync([
            "sem",
            "run",
            "S",
            &format!("--slots={bad}"),
            "--",
            "touch",
            "ran",
        ])
        .run()
        .code(2);
    }
    t.fsync(["sem", "run", "S", "--", "touch", "ran"])
        .run()
        .code(2);
    assert!(!t.join("ran").exists(), "a command ran");
}

/// `fsync sem status --json SEM` with the expected exit status.
#[track_caller]
fn status_json(t: &TestDir, sem: &str, code: i32) -> Value {
    json_of(
        &t.fsync(["sem", "status", "--json", sem])
            .run()
            .code(code)
            .stdout,
    )
}

#[test]
fn a_waiter_is_woken_by_the_release_and_status_shows_holders_and_waiters() {
    let t = TestDir::new();
    t.fsync(["sem", "status", "S"]).run().code(0); // not created yet: free
    let h = slot_holder(&t, "S", "1", &[]);
    let v = status_json(&t, "S", 1);
    assert_eq!(v["slots"], 1, "{v}");
    assert_eq!(v["waiting"], 0, "{v}");
    // `--poll 1h`: on a local file system the waiter must not depend on a poll interval; the
    // release itself (a close the waiter watches for) lets it in. (How soon is not asserted.)
    let mut waiter = t
        .fsync([
            "sem",
            "run",
            "-v",
            "--poll",
            "1h",
            "S",
            "--slots",
            "1",
            "--",
            "sh",
            "-c",
            "echo \"in $FSYNC_SLOT\"",
        ])
        .start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    let v = status_json(&t, "S", 1);
    assert_eq!(v["slots"], 1, "{v}");
    assert_eq!(v["waiting"], 1, "{v}");
    let held = v["held"].as_array().expect("held is a list");
    assert_eq!(held.len(), 1, "{v}");
    assert_eq!(held[0]["slot"], 0, "{v}");
    assert_eq!(held[0]["holder"]["pid"], h.pid(), "{v}");
    let command = held[0]["holder"]["command"].as_str().unwrap_or_default();
    assert!(command.contains("echo acquired"), "{v}");
    // The plain form says the same.
    let text = t.fsync(["sem", "status", "S"]).run().code(1).stdout.clone();
    assert!(
        text.contains(&h.pid().to_string()) && text.contains("1 waiting"),
        "{text}"
    );
    h.finish().code(0);
    waiter.finish().code(0).stdout("in 0\n");
    let v = status_json(&t, "S", 0);
    assert_eq!(v["held"], serde_json::json!([]), "{v}");
    assert_eq!(v["waiting"], 0, "{v}");
}

/// The names in `dir`, sorted.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `--delete`: the last holder to leave removes SEM; one leaving while another holds a slot
/// keeps it (and `-v` says why); leaving without `--delete` removes nothing.
#[test]
fn delete_removes_the_semaphore_after_the_last_holder_only() {
    let t = TestDir::new();
    let a = slot_holder(&t, "S", "2", &["--delete"]);
    sem_run(&t, "S", "2", &["--delete", "-v"], "true")
        .run()
        .code(0)
        .stderr_has("not deleting")
        .stderr_has("others hold a slot or wait");
    assert!(
        t.join("S/slots").exists(),
        "deleted while a holder was inside"
    );
    assert_full_after_one_more(&t);
    a.finish().code(0);
    assert_eq!(
        listing(t.path()),
        Vec::<String>::new(),
        "the last holder kept S"
    );

    // Without --delete nothing goes; the next --delete that leaves last removes it all.
    sem_run(&t, "S", "2", &[], "true").run().code(0);
    assert!(t.join("S/slots").exists());
    sem_run(&t, "S", "2", &["--delete"], "true")
        .run()
        .code(0)
        .stderr("");
    assert_eq!(listing(t.path()), Vec::<String>::new());
    // A run whose wait gives up leaves too: with the holder gone, it removes S.
    let h = slot_holder(&t, "S", "1", &[]);
    sem_run(&t, "S", "1", &["--delete", "-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    assert!(t.join("S").exists(), "deleted under a holder");
    h.finish().code(0);
    sem_run(&t, "S", "1", &["--delete"], "true").run().code(0);
    assert!(!t.join("S").exists());
}

/// With one holder inside under 2 slots, one more gets in and a third finds none.
#[track_caller]
fn assert_full_after_one_more(t: &TestDir) {
    let b = slot_holder(t, "S", "2", &["--delete"]);
    assert_full(t, "S", "2");
    b.finish().code(0);
}

/// `--delete` keeps SEM while a process the command left running still holds the slot through
/// the descriptor it inherited: removing it would let a new SEM hold a slot beside it.
#[test]
fn delete_keeps_a_slot_a_process_left_by_the_command_still_holds() {
    use crate::harness::{Daemon, dead, eventually};
    let t = TestDir::new();
    let out = t
        .fsync(["sem", "run", "--delete", "-v", "S", "--slots", "1", "--"])
        .args([
            "sh",
            "-c",
            "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
        ])
        .run();
    out.code(0)
        .stderr_has("not deleting")
        .stderr_has("another process still holds it");
    let daemon = Daemon(out.stdout.trim().parse().expect("the daemon's pid"));
    assert!(t.join("S/slot.0").exists(), "S was deleted while held");
    assert_full(&t, "S", "1");
    let pid = daemon.0;
    drop(daemon);
    eventually("the daemon died", || dead(pid));
    sem_run(&t, "S", "1", &["--delete"], "true").run().code(0);
    assert!(!t.join("S").exists(), "S was kept when free");
}

/// Many processes with `--delete` taking turns, so that the semaphore is removed and made
/// again all the time, some giving up (`-t 20ms`): never more than N inside, each on its own
/// slot, no word on stderr, and nothing left once all have left.
#[test]
fn delete_stress_never_lets_more_than_n_in_and_leaves_nothing() {
    let t = TestDir::new();
    let one = format!(
        "t=; [ $((i % 4)) = 0 ] && t='-t 20ms'; \
         \"$FSYNC\" sem run --delete $t S --slots 2 -- sh -c '{}'; \
         s=$?; case $s in 0|75) ;; *) echo \"run $i exited $s\" >&2; exit 1;; esac",
        MARKED.replace("0.05", "0.01").replace('\'', r"'\''")
    );
    let workers: Vec<Holder> = (0..6)
        .map(|_| {
            t.sh(&format!(
                "i=0; while [ $i -lt 15 ]; do i=$((i+1)); {one}; done"
            ))
            .start()
        })
        .collect();
    for w in workers {
        w.finish().code(0).stderr("");
    }
    let log = t.read("log");
    let (most, done) = replay(&log, 2);
    assert!(done >= 60, "only {done} runs got in:\n{log}");
    assert!(most == 2, "never two inside at once:\n{log}");
    assert_eq!(listing(t.path()), ["log"], "files left behind");
}
