/*!
`fsync grouplock`, end to end: Asche's group lock across processes.

A witness log proves exclusion: every command appends `+ GROUP PID` when it starts and
`- GROUP PID` when it ends (`>>`, so `O_APPEND`), and the test replays it; a mark is written
inside the lock, so overlaps in the log are real. Waits end on what the processes say
(`acquired`, `-v`'s `waiting`) or on a mark in the log, never on a sleep.
*/

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::harness::{Cmd, HOLD, Holder, TestDir, eventually, json_of, racing_rounds};

/// `fsync grouplock run [extra...] LOCK --group GROUP -- sh -c SCRIPT`.
fn member(t: &TestDir, group: &str, extra: &[&str], script: &str) -> Cmd {
    let mut args = vec!["grouplock", "run"];
    args.extend_from_slice(extra);
    args.extend(["L", "--group", group, "--", "sh", "-c", script]);
    t.fsync(args)
}

/// `SCRIPT` quoted for a `sh -c '...'` inside another shell script.
fn quoted(script: &str) -> String {
    format!("'{}'", script.replace('\'', r"'\''"))
}

/// Marks `+ GROUP $$` / `- GROUP $$` around a hold of `secs`.
fn marked(group: &str, secs: &str) -> String {
    format!("echo \"+ {group} $$\" >> log; sleep {secs}; echo \"- {group} $$\" >> log")
}

/// What the replay of a log found.
#[derive(Debug, Default)]
struct Replay {
    /// Per group, the most of its members inside at once.
    most: HashMap<String, usize>,
    /// Runs completed (`-` marks).
    done: usize,
}

/// Replay the `+ GROUP PID` / `- GROUP PID` marks (other lines are ignored), failing at the
/// first goofup: members of two groups inside at once.
#[track_caller]
fn replay(log: &str) -> Replay {
    let mut inside: HashMap<&str, &str> = HashMap::new(); // pid -> group
    let mut r = Replay::default();
    for (n, line) in log.lines().enumerate() {
        let at = || format!("at line {} `{line}` of the log:\n{log}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            ["+", group, pid, ..] => {
                let others: Vec<&str> = inside.values().filter(|&&g| g != group).copied().collect();
                assert!(
                    others.is_empty(),
                    "goofup: {group} entered while {others:?} were inside {}",
                    at()
                );
                assert!(
                    inside.insert(pid, group).is_none(),
                    "entered twice {}",
                    at()
                );
                let count = inside.len();
                let most = r.most.entry(group.to_string()).or_default();
                *most = (*most).max(count);
            }
            ["-", group, pid, ..] => {
                assert_eq!(inside.remove(pid), Some(group), "left unentered {}", at());
                r.done += 1;
            }
            _ => {}
        }
    }
    assert!(inside.is_empty(), "runs never ended: {inside:?}\n{log}");
    r
}

#[test]
/// (That members of one group share the lock is shown without timing in
/// `status_names_the_group_inside_and_counts_members_and_waiters`, where two hold it at once.)
fn two_groups_never_inside_together() {
    let t = TestDir::new();
    let workers: Vec<Holder> = ["gA", "gB"]
        .iter()
        .flat_map(|g| [g; 3])
        .map(|g| {
            let one = format!(
                "\"$FSYNC\" grouplock run L --group {g} -- sh -c {}",
                quoted(&marked(g, "0.02"))
            );
            t.sh(&format!("for i in 1 2 3 4 5; do {one} || exit 1; done"))
                .start()
        })
        .collect();
    for w in workers {
        w.finish().code(0);
    }
    let log = t.read("log");
    let r = replay(&log);
    assert_eq!(r.done, 30, "not all 30 runs completed:\n{log}");
}

/// What a member under a cap appends to `log`: its slot and pid on entry and on exit.
const SLOT_MARKED: &str =
    "echo \"+ $FSYNC_SLOT $$\" >> log; sleep 0.05; echo \"- $FSYNC_SLOT $$\" >> log";

/// Replay the `+ SLOT PID` / `- SLOT PID` marks of `log`: at most `cap` inside at every step,
/// each on a slot of `0..cap` no other member inside holds. Returns the runs completed.
#[track_caller]
fn replay_slots(log: &str, cap: usize) -> usize {
    let mut inside: HashMap<&str, &str> = HashMap::new();
    let mut done = 0;
    for line in log.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            ["+", slot, pid] => {
                assert!(
                    slot.parse::<usize>().is_ok_and(|s| s < cap),
                    "FSYNC_SLOT {slot}:\n{log}"
                );
                assert!(
                    !inside.values().any(|&s| s == slot),
                    "slot {slot} twice:\n{log}"
                );
                inside.insert(pid, slot);
                assert!(
                    inside.len() <= cap,
                    "more than {cap} inside at `{line}`:\n{log}"
                );
            }
            ["-", slot, pid] => {
                assert_eq!(inside.remove(pid), Some(slot), "{line}:\n{log}");
                done += 1;
            }
            _ => panic!("a malformed mark `{line}` (FSYNC_SLOT unset?):\n{log}"),
        }
    }
    assert!(inside.is_empty(), "runs never ended: {inside:?}\n{log}");
    done
}

#[test]
fn max_limits_the_members_of_a_group_inside() {
    let t = TestDir::new();
    let workers: Vec<Holder> = (0..5)
        .map(|_| member(&t, "up", &["--max", "2"], SLOT_MARKED).start())
        .collect();
    for w in workers {
        w.finish().code(0);
    }
    // Replay with the slot in place of the group: at most 2 inside, on distinct slots 0 and 1.
    let log = t.read("log");
    assert_eq!(replay_slots(&log, 2), 5, "{log}");
    // While two are inside, a third finds no room; another group none either.
    let a = member(&t, "up", &["--max", "2"], HOLD).hold();
    let b = member(&t, "up", &["--max", "2"], HOLD).hold();
    member(&t, "up", &["--max", "2", "-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    member(&t, "down", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    a.finish().code(0);
    b.finish().code(0);
    member(&t, "up", &["--max", "0"], "echo ran")
        .run()
        .code(2)
        .stdout("");
}

#[test]
fn a_waiting_group_is_not_starved_by_newcomers_of_the_group_inside() {
    let t = TestDir::new();
    // A stream of gA members, each holding 200 ms, a new one every 50 ms for 2 s: gA would
    // never be empty unless newcomers queue behind a waiting gB. Member I marks its start
    // `s gA I` and its entry and exit `+ gA PID I` / `- gA PID I`.
    let run = "echo \"+ gA $$ $I\" >> log; sleep 0.2; echo \"- gA $$ $I\" >> log";
    let one = format!(
        "I=$i \"$FSYNC\" grouplock run L --group gA -- sh -c {}",
        quoted(run)
    );
    let stream = t
        .sh(&format!(
            "for i in $(seq 40); do echo \"s gA $i\" >> log; {one} & sleep 0.05; done; wait"
        ))
        .start();
    eventually("a gA member is inside", || {
        std::fs::read_to_string(t.join("log")).is_ok_and(|l| l.contains("+ gA"))
    });
    let mut b = member(&t, "gB", &["-v"], &marked("gB", "0")).start();
    let said = b.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    t.sh("echo 'gB waits' >> log").run().code(0);
    b.finish().code(0);
    stream.finish().code(0);
    let log = t.read("log");
    let r = replay(&log);
    assert_eq!(r.done, 41, "not all runs completed:\n{log}");
    let lines: Vec<&str> = log.lines().collect();
    let waits = lines
        .iter()
        .position(|&l| l == "gB waits")
        .expect("arrival mark");
    let b_left = (lines.iter().position(|l| l.starts_with("- gB"))).expect("gB's exit mark");
    let entered = |i: &str| {
        lines
            .iter()
            .position(|l| l.starts_with("+ gA ") && l.split_whitespace().nth(3) == Some(i))
            .unwrap_or_else(|| panic!("gA member {i} never entered:\n{log}"))
    };
    // gA members that started after gB was waiting; one of them must have got in only after
    // gB left, or gB waited for the whole stream.
    let later: Vec<&str> = lines[waits..]
        .iter()
        .filter_map(|l| l.strip_prefix("s gA "))
        .collect();
    assert!(
        !later.is_empty(),
        "the stream had ended before gB waited; nothing was tested:\n{log}"
    );
    assert!(
        later.iter().any(|i| entered(i) > b_left),
        "gB was starved: every gA member that started after gB waited got in before gB left:\n{log}"
    );
}

/// `fsync grouplock status --json L` with the expected exit status.
#[track_caller]
fn status_json(t: &TestDir, code: i32) -> Value {
    json_of(
        &t.fsync(["grouplock", "status", "--json", "L"])
            .run()
            .code(code)
            .stdout,
    )
}

#[test]
fn status_names_the_group_inside_and_counts_members_and_waiters() {
    let t = TestDir::new();
    let v = status_json(&t, 0);
    assert_eq!(v["inside"], json!([]), "{v}");
    let a1 = member(&t, "gA", &[], HOLD).hold();
    let a2 = member(&t, "gA", &[], HOLD).hold();
    let v = status_json(&t, 1);
    assert_eq!(v["inside"], json!([{"group": "gA", "count": 2}]), "{v}");
    assert_eq!(v["waiting"], 0, "{v}");
    let mut b = member(&t, "gB", &["-v"], "echo gB in").start();
    let said = b.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    let v = status_json(&t, 1);
    assert_eq!(v["inside"], json!([{"group": "gA", "count": 2}]), "{v}");
    assert_eq!(v["waiting"], 1, "{v}");
    let text = t
        .fsync(["grouplock", "status", "L"])
        .run()
        .code(1)
        .stdout
        .clone();
    assert!(text.contains("gA") && text.contains("1 waiting"), "{text}");
    a1.finish().code(0);
    a2.finish().code(0);
    b.finish().code(0).stdout("gB in\n");
    let v = status_json(&t, 0);
    assert_eq!(v["inside"], json!([]), "{v}");
    assert_eq!(v["waiting"], 0, "{v}");
}

#[test]
fn invalid_group_names_are_usage_errors() {
    let t = TestDir::new();
    for bad in ["a/b", "", ".", "..", "a b", "../x", "é"] {
        t.fsync([
            "grouplock",
            "run",
            "L",
            "--group",
            bad,
            "--",
            "touch",
            "ran",
        ])
        .run()
        .code(2);
    }
    assert!(!t.join("ran").exists(), "a command ran");
    assert!(!t.join("x").exists() && !t.path().parent().unwrap().join("x").exists());
}

/// Another `--max` is taken once no member of the group is inside; while one is, it is a
/// clear error (exit 2) in the words the user typed (`--max`), naming both caps and what to do.
#[test]
fn a_different_max_is_taken_when_the_group_is_empty_and_refused_while_inside() {
    let t = TestDir::new();
    let lock = t.arg("L");
    let run = |max: &str, extra: &[&str], script: &str| {
        let mut args = vec!["grouplock", "run"];
        args.extend_from_slice(extra);
        args.extend([
            lock.as_str(),
            "--group",
            "up",
            "--max",
            max,
            "--",
            "sh",
            "-c",
            script,
        ]);
        t.fsync(args)
    };
    run("2", &[], "true").run().code(0);
    // Nobody inside: 3 is taken, and is the cap from now on (for members without --max too).
    run("3", &[], "echo \"ran in $FSYNC_SLOT\"")
        .run()
        .code(0)
        .stdout_has("ran in ");
    let held: Vec<Holder> = (0..3).map(|_| run("3", &[], HOLD).hold()).collect();
    member(&t, "up", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    // Members inside under 3: 1 is refused at once, with a wait too, and runs nothing.
    for extra in [&[][..], &["-t", "1h"][..], &["-n"][..]] {
        let out = run("1", extra, "touch ran").run();
        out.code(2).error_naming(&lock);
        assert!(
            out.stderr.contains("--max") && !out.stderr.contains("--slots"),
            "the error speaks of an option the user did not give: {}",
            out.stderr
        );
        let after = &out.stderr[out.stderr.find(&lock).unwrap() + lock.len()..];
        assert!(
            after.contains("--max 3")
                && after.contains(" 1")
                && after.contains("in use")
                && after.contains("leave"),
            "the error does not name both caps, that the group is in use, and what to do: {}",
            out.stderr
        );
    }
    assert!(!t.join("ran").exists(), "the command ran");
    for h in held {
        h.finish().code(0);
    }
    // Empty again: 1 is taken, and holds.
    let one = run("1", &[], HOLD).hold();
    member(&t, "up", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    one.finish().code(0);
}

/// Members with different caps starting together never share the lock under different caps,
/// and never more than the cap they came in under are inside. In rounds that start six at once
/// on an empty lock: the losers of a round are refused (exit 2).
#[test]
fn racing_caps_are_never_inside_together() {
    let t = TestDir::new();
    let script = racing_rounds(15, |n| {
        format!(
            "\"$FSYNC\" grouplock run L --group up --max {n} -- sh -c \
             'echo \"+ up $$ {n}\" >> log; sleep 0.02; echo \"- up $$ {n}\" >> log'"
        )
    });
    let out = t.sh(&script).run();
    out.code(0);
    assert!(
        out.stdout.lines().all(|l| l == "in" || l == "refused"),
        "{}",
        out.stdout
    );
    let log = t.read("log");
    let mut inside: HashMap<&str, usize> = HashMap::new(); // pid -> cap
    for line in log.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [mark, _, pid, m] = f[..] else {
            panic!("a malformed mark `{line}`:\n{log}");
        };
        let m: usize = m.parse().unwrap();
        match mark {
            "+" => {
                assert!(
                    inside.values().all(|&c| c == m),
                    "`{line}` entered beside members under another cap {inside:?}:\n{log}"
                );
                inside.insert(pid, m);
                assert!(
                    inside.len() <= m,
                    "more than {m} inside at `{line}`:\n{log}"
                );
            }
            _ => assert_eq!(inside.remove(pid), Some(m), "`{line}`:\n{log}"),
        }
    }
    assert!(inside.is_empty(), "runs never ended: {inside:?}\n{log}");
    assert!(
        out.stdout.lines().any(|l| l == "refused"),
        "no run was refused: nothing was raced"
    );
}

/// Regression: a member that omitted `--max` went in beside members that ran under a cap of 2,
/// making three. The cap is the group's, as the slot count is a semaphore's: a member without
/// `--max` runs under the cap in force.
#[test]
fn a_member_without_max_runs_under_the_cap_in_force() {
    let t = TestDir::new();
    let a = member(&t, "up", &["--max", "2"], HOLD).hold();
    let b = member(&t, "up", &["--max", "2"], HOLD).hold();
    // Two are inside under a cap of 2: a third finds no room, with --max or without.
    member(&t, "up", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    // It waits for a slot, gets the one a member leaves, and learns it in FSYNC_SLOT.
    let mut c = member(&t, "up", &["-v"], "echo \"slot $FSYNC_SLOT\"").start();
    let said = c.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    a.finish().code(0);
    let out = c.finish();
    out.code(0);
    assert!(
        ["slot 0\n", "slot 1\n"].contains(&out.stdout.as_str()),
        "{}",
        out.stdout
    );
    b.finish().code(0);
    // Counted: members with and without --max, all at once, are never three inside.
    let workers: Vec<Holder> = (0..6)
        .map(|i| {
            let extra: &[&str] = if i % 2 == 0 { &["--max", "2"] } else { &[] };
            member(&t, "up", extra, SLOT_MARKED).start()
        })
        .collect();
    for w in workers {
        w.finish().code(0);
    }
    let log = t.read("log");
    assert_eq!(replay_slots(&log, 2), 6, "{log}");
}

/// The first member to give `--max` fixes the cap; members of the group already inside
/// without one are not counted by it, so it waits until they have left: the cap holds from the
/// moment it is in force.
#[test]
fn the_first_max_waits_for_members_inside_without_one() {
    let t = TestDir::new();
    let a = member(&t, "up", &[], HOLD).hold();
    let b = member(&t, "up", &[], HOLD).hold();
    let mut c = member(&t, "up", &["--max", "1", "-v"], HOLD).start();
    let said = c.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    a.finish().code(0);
    let v = status_json(&t, 1);
    assert_eq!(v["inside"], json!([{"group": "up", "count": 1}]), "{v}");
    b.finish().code(0);
    c.expect("acquired");
    // The cap of 1 is in force: nobody else of the group gets in, with --max or without.
    member(&t, "up", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    member(&t, "up", &["-n", "--max", "1"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    c.finish().code(0);
}

/// Killing `fsync grouplock run` alone leaves the lock (and its `--max` slot) with the command,
/// as the mutex does; `--close` (flock -o) keeps them from it.
#[test]
fn sigkill_of_fsync_alone_leaves_the_lock_with_its_command() {
    use nix::sys::signal::Signal;
    for close in [false, true] {
        for cap in [&[][..], &["--max", "1"][..]] {
            let t = TestDir::new();
            let mut extra = cap.to_vec();
            if close {
                extra.push("--close");
            }
            let mut a = member(&t, "gA", &extra, HOLD).hold();
            member(&t, "gB", &["-n"], "echo ran").run().code(75);
            a.signal(Signal::SIGKILL);
            a.wait_exit();
            let other_group = member(&t, "gB", &["-n"], "echo ran").run();
            let same_group = member(&t, "gA", &[cap, &["-n"]].concat(), "echo ran").run();
            if close {
                other_group.code(0).stdout("ran\n");
                same_group.code(0).stdout("ran\n");
            } else {
                other_group.code(75).stdout("");
                // Under a cap of 1 the slot went down to the command too.
                same_group.code(if cap.is_empty() { 0 } else { 75 });
                status_json(&t, 1);
            }
            a.finish().killed_by(Signal::SIGKILL);
            member(&t, "gB", &["-t", "30s"], "echo ran")
                .run()
                .code(0)
                .stdout("ran\n");
        }
    }
}

/// The names in the test directory, sorted.
fn listing(t: &TestDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `--delete`: the last member to leave removes LOCK with everything in it (a cap's
/// semaphore included); one leaving while another is inside keeps it (and `-v` says why);
/// leaving without `--delete` removes nothing; a run whose wait gives up leaves too.
#[test]
fn delete_removes_the_lock_after_the_last_member_only() {
    let t = TestDir::new();
    let a = member(&t, "gA", &["--delete", "--max", "2"], HOLD).hold();
    member(&t, "gA", &["--delete", "-v"], "true")
        .run()
        .code(0)
        .stderr_has("not deleting")
        .stderr_has("others are inside");
    assert!(t.join("L/max.gA/slots").exists(), "deleted under a member");
    a.finish().code(0);
    assert!(
        listing(&t).is_empty(),
        "the last member kept {:?}",
        listing(&t)
    );

    member(&t, "gA", &[], "true").run().code(0);
    member(&t, "gB", &[], "true").run().code(0);
    assert!(t.join("L/group.gB").exists(), "removed without --delete");
    let b = member(&t, "gB", &[], HOLD).hold();
    member(&t, "gA", &["--delete", "-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    assert!(t.join("L/group.gB").exists(), "deleted under a member");
    b.finish().code(0);
    member(&t, "gA", &["--delete"], "true")
        .run()
        .code(0)
        .stderr("");
    assert!(listing(&t).is_empty(), "{:?}", listing(&t));
}

/// `--delete` keeps LOCK while a process the command left running still holds the membership
/// through the descriptor it inherited.
#[test]
fn delete_keeps_a_lock_a_process_left_by_the_command_still_holds() {
    use crate::harness::{Daemon, dead, eventually};
    let t = TestDir::new();
    let out = member(
        &t,
        "gA",
        &["--delete", "-v"],
        "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
    )
    .run();
    out.code(0)
        .stderr_has("not deleting")
        .stderr_has("another process still holds it");
    let daemon = Daemon(out.stdout.trim().parse().expect("the daemon's pid"));
    assert!(t.join("L/group.gA").exists(), "L was deleted while held");
    member(&t, "gB", &["-n"], "echo ran")
        .run()
        .code(75)
        .stdout("");
    let pid = daemon.0;
    drop(daemon);
    eventually("the daemon died", || dead(pid));
    member(&t, "gB", &["--delete"], "true").run().code(0);
    assert!(listing(&t).is_empty(), "L was kept when free");
}

/// Two groups (one capped at 2) of processes with `--delete` taking turns, so that the lock is
/// removed and made again all the time, some giving up (`-t 20ms`): never two groups inside,
/// never more than 2 of the capped one, no word on stderr, and nothing left at the end.
#[test]
fn delete_stress_never_lets_two_groups_in_and_leaves_nothing() {
    let t = TestDir::new();
    let turn = |g: &str, extra: &str| {
        let one = format!(
            "t=; [ $((i % 4)) = 0 ] && t='-t 20ms'; \
             \"$FSYNC\" grouplock run --delete $t {extra} L --group {g} -- sh -c {}; \
             s=$?; case $s in 0|75) ;; *) echo \"run $i exited $s\" >&2; exit 1;; esac",
            quoted(&marked(g, "0.01"))
        );
        format!("i=0; while [ $i -lt 12 ]; do i=$((i+1)); {one}; done")
    };
    let workers: Vec<Holder> = [("gA", ""), ("gA", ""), ("gA", "")]
        .into_iter()
        .chain([("gB", "--max 2"); 3])
        .map(|(g, extra)| t.sh(&turn(g, extra)).start())
        .collect();
    for w in workers {
        w.finish().code(0).stderr("");
    }
    let log = t.read("log");
    let r = replay(&log);
    assert!(r.done >= 40, "only {} runs got in:\n{log}", r.done);
    assert!(
        r.most.get("gB").is_some_and(|&n| n <= 2),
        "{:?}:\n{log}",
        r.most
    );
    assert_eq!(listing(&t), ["log"], "files left behind");
}
