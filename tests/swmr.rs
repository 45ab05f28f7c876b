/*!
`fsync swmr`, end to end: readers and writers checked by an independent witness (an
O_APPEND log of enter/leave marks), a writer that a stream of overlapping readers cannot
starve, interop with flock(1), holders killed by SIGKILL, `status`, and `--delete` (the same
witness while files come and go, what stays while others use them, and what is never removed).

Waiting is observed, not slept on: holders say `acquired`, and that a writer is queued is read
from the kernel's lock table (`/proc/locks`), which `fsync` does not write. Sleeps appear only
as the work a reader does while it holds the lock.
*/

use std::{
    collections::HashMap,
    fs::OpenOptions,
    io::Write,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
};

use serde_json::Value;

use crate::harness::{
    Cmd, Daemon, HOLD, Holder, TestDir, eventually, flocks_on, json_of, require, require_root,
};

/// `fsync swmr read|write [OPTIONS] L -- sh -c HOLD`, in a process group of its own.
fn holder_cmd(t: &TestDir, verb: &str, options: &[&str]) -> Cmd {
    t.fsync(["swmr", verb])
        .args(options)
        .args(["L", "--", "sh", "-c", HOLD])
        .own_process_group()
}

/// A reader or the writer of `L`, once it is inside.
#[track_caller]
fn hold(t: &TestDir, verb: &str) -> Holder {
    holder_cmd(t, verb, &[]).hold()
}

#[track_caller]
fn status_json(t: &TestDir, want_code: i32) -> Value {
    json_of(
        &t.fsync(["swmr", "status", "--json", "L"])
            .run()
            .code(want_code)
            .stdout,
    )
}

/// Whether process `pid` is blocked in an exclusive `flock` on `L` (a writer that waits).
fn waits_to_write(t: &TestDir, pid: u32) -> bool {
    flocks_on(&t.join("L"))
        .iter()
        .any(|l| l.pid == pid && l.exclusive && l.waiting)
}

/// Append a line to the log, as the marks are (O_APPEND).
fn append(path: &Path, line: &str) {
    let mut log = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .expect("open log");
    log.write_all(format!("{line}\n").as_bytes())
        .expect("append to log");
}

/// One line of a witness log: `R+ ID`, `R- ID`, `W+ ID`, `W- ID` (or another mark).
struct Mark<'a> {
    kind: &'a str,
    id: &'a str,
}

fn marks(log: &str) -> Vec<Mark<'_>> {
    log.lines()
        .map(|line| {
            let (kind, id) = line.split_once(' ').unwrap_or((line, ""));
            Mark { kind, id }
        })
        .collect()
}

/// Check the enter/leave marks of a log (other lines are ignored): every holder enters once and
/// then leaves once, no enter/leave mark of anyone else comes between a writer's `W+` and its
/// `W-`, and no reader is inside while a writer is. Returns (reader turns, writer turns).
#[track_caller]
fn check_exclusion(log: &str) -> (usize, usize) {
    let turns: Vec<(usize, Mark)> = marks(log)
        .into_iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.kind, "R+" | "R-" | "W+" | "W-"))
        .collect();
    let mut open: HashMap<&str, (&str, usize)> = HashMap::new(); // id -> (kind, index in turns)
    let (mut readers, mut writers) = (0, 0);
    for (i, (line, m)) in turns.iter().enumerate() {
        let line = line + 1;
        match m.kind {
            "R+" | "W+" => {
                assert!(
                    open.insert(m.id, (m.kind, i)).is_none(),
                    "line {line}: {} entered twice:\n{log}",
                    m.id
                );
            }
            _ => {
                let want = if m.kind == "R-" { "R+" } else { "W+" };
                let Some((kind, start)) = open.remove(m.id).filter(|(k, _)| *k == want) else {
                    panic!("line {line}: {} left without entering:\n{log}", m.id)
                };
                if kind == "W+" {
                    writers += 1;
                    assert_eq!(
                        start + 1,
                        i,
                        "line {line}: others entered or left during writer {}'s turn:\n{log}",
                        m.id
                    );
                } else {
                    readers += 1;
                }
            }
        }
        // A writer inside with anyone else: the mark that made it so is the overlap.
        let writer_in = open.values().any(|(k, _)| *k == "W+");
        assert!(
            !writer_in || open.len() == 1,
            "line {line}: a writer is not alone ({:?}):\n{log}",
            open.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        open.is_empty(),
        "never left: {:?}\n{log}",
        open.keys().collect::<Vec<_>>()
    );
    (readers, writers)
}

#[test]
fn swmr_stress_a_writer_is_never_inside_with_anyone() {
    let t = TestDir::new();
    // Each holder marks its turn with a unique id ("r2.17": reader process 2, turn 17; unlike
    // `$$`, never reused) and works 10 ms in between, so that turns have room to overlap:
    // readers do share (typically ~100 of the 150 reader turns find another reader inside),
    // and a writer let in beside anyone would show.
    let turn = |verb: &str, mark: &str, who: &str, times: u32| {
        format!(
            "i=0; while [ $i -lt {times} ]; do i=$((i+1)); \
             \"$FSYNC\" swmr {verb} L -- sh -c \
             'echo \"{mark}+ $1\" >> log; sleep 0.01; echo \"{mark}- $1\" >> log' sh \"{who}.$i\" \
             || {{ echo \"turn $i exited $?\" >&2; exit 1; }}; done"
        )
    };
    let scripts = [
        turn("read", "R", "r1", 50),
        turn("read", "R", "r2", 50),
        turn("read", "R", "r3", 50),
        turn("write", "W", "w1", 30),
        turn("write", "W", "w2", 30),
    ];
    let running: Vec<Holder> = scripts.iter().map(|s| t.sh(s).start()).collect();
    for p in running {
        p.finish().code(0).stderr("");
    }
    let log = t.read("log");
    assert_eq!(
        check_exclusion(&log),
        (150, 60),
        "(reader turns, writer turns)"
    );
}

/// A stream of overlapping readers (each inside for 200 ms, a new one every 50 ms, for about
/// 3 s) and a writer that arrives while readers are inside. With util-linux `flock -s` readers
/// and a `flock -x` writer (or Python fasteners) the writer would wait for the whole stream to
/// end, since Linux grants new shared locks while an exclusive request waits. Here a reader that
/// arrives after the writer queued must wait for the writer's turn to end, and the writer gets
/// in once the readers already inside have left.
#[test]
fn swmr_a_stream_of_readers_does_not_starve_a_waiting_writer() {
    const STREAM: u32 = 60;
    let t = TestDir::new();
    let log = t.join("log");
    // A reader already inside, which keeps the writer waiting until we have seen it queue.
    let first = t
        .fsync([
            "swmr",
            "read",
            "L",
            "--",
            "sh",
            "-c",
            "echo 'R+ r0' >> log; echo acquired; read x || true; echo 'R- r0' >> log",
        ])
        .hold();
    // `S n` is logged before reader n starts, so a reader whose `S` follows the writer's
    // arrival in the log arrived after it.
    let stream = t
        .sh(&format!(
            "pids=; i=0; while [ $i -lt {STREAM} ]; do i=$((i+1)); echo \"S r$i\" >> log; \
             \"$FSYNC\" swmr read L -- sh -c \
             'echo \"R+ $1\" >> log; sleep 0.2; echo \"R- $1\" >> log' sh \"r$i\" & \
             pids=\"$pids $!\"; sleep 0.05; done; \
             for p in $pids; do wait $p || {{ echo \"a reader exited $?\" >&2; exit 1; }}; done"
        ))
        .start();
    eventually("stream readers are inside", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("R+ r2\n"))
    });

    let writer = t
        .fsync([
            "swmr",
            "write",
            "L",
            "--",
            "sh",
            "-c",
            "echo 'W+ w' >> log; echo 'W- w' >> log",
        ])
        .start();
    let writer_pid = writer.pid();
    eventually("the writer waits for L", || waits_to_write(&t, writer_pid));
    append(&log, "WQ"); // from here on, the writer is queued
    eventually("3 readers arrived after the writer", || {
        std::fs::read_to_string(&log).is_ok_and(|l| {
            l.split_once("WQ\n")
                .is_some_and(|(_, after)| after.matches("S r").count() >= 3)
        })
    });
    first.finish().code(0);
    writer.finish().code(0).stderr("");
    stream.finish().code(0).stderr("");

    let text = t.read("log");
    check_exclusion(&text);
    let marks = marks(&text);
    let at = |kind: &str, id: &str| {
        marks
            .iter()
            .position(|m| m.kind == kind && m.id == id)
            .unwrap_or_else(|| panic!("no `{kind} {id}` in the log:\n{text}"))
    };
    let (queued, w_in, w_out) = (at("WQ", ""), at("W+", "w"), at("W-", "w"));
    // The readers inside when the writer queued all left before it entered...
    let inside: Vec<&str> = marks[..queued]
        .iter()
        .filter(|m| {
            m.kind == "R+"
                && !marks[..queued]
                    .iter()
                    .any(|n| n.kind == "R-" && n.id == m.id)
        })
        .map(|m| m.id)
        .collect();
    assert!(inside.contains(&"r0"), "{text}");
    for id in &inside {
        assert!(
            at("R-", id) < w_in,
            "reader {id} was inside when the writer queued and still inside when it entered:\n{text}"
        );
    }
    // ...and every reader that arrived after it queued entered only after its turn: the
    // writer got in while the stream went on, not after it.
    let later: Vec<&str> = marks[queued..]
        .iter()
        .filter(|m| m.kind == "S")
        .map(|m| m.id)
        .collect();
    assert!(later.len() >= 3, "{text}");
    for id in &later {
        assert!(
            at("R+", id) > w_out,
            "reader {id} arrived after the writer queued but entered before the writer left:\n{text}"
        );
    }
    let last_reader = marks.iter().rposition(|m| m.kind == "R+").unwrap();
    assert!(
        w_out < last_reader,
        "the writer waited for the whole stream:\n{text}"
    );
}

#[test]
fn swmr_interoperates_with_flock() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let flock_hold = |mode: &str| t.cmd("flock").args([mode, "L", "sh", "-c", HOLD]).hold();
    let try_swmr = |verb: &str, want: i32| {
        t.fsync(["swmr", verb, "-n", "L", "--", "true"])
            .run()
            .code(want);
    };
    let try_flock = |mode: &str, want: i32| {
        t.cmd("flock")
            .args(["-n", mode, "L", "true"])
            .run()
            .code(want);
    };

    // A `flock -s` reader: fsync readers share with it, the fsync writer cannot get in.
    let shared = flock_hold("-s");
    try_swmr("read", 0);
    try_swmr("write", 75);
    shared.finish().code(0);

    // A `flock -x` writer excludes fsync readers (and writers).
    let exclusive = flock_hold("-x");
    try_swmr("read", 75);
    try_swmr("write", 75);
    exclusive.finish().code(0);

    // An fsync writer excludes `flock -s` and `flock -x`.
    let writer = hold(&t, "write");
    try_flock("-s", 1);
    try_flock("-x", 1);
    writer.finish().code(0);

    // An fsync reader shares with `flock -s` and excludes `flock -x`.
    let reader = hold(&t, "read");
    try_flock("-s", 0);
    try_flock("-x", 1);
    reader.finish().code(0);

    try_flock("-x", 0);
}

#[test]
fn swmr_sigkilled_readers_and_writers_hold_nothing() {
    let t = TestDir::new();
    let free = |t: &TestDir| {
        t.fsync(["swmr", "status", "L"]).run().code(0);
        t.fsync(["swmr", "write", "-n", "L", "--", "true"])
            .run()
            .code(0);
    };

    // A reader killed while inside.
    let mut reader = hold(&t, "read");
    t.fsync(["swmr", "write", "-n", "L", "--", "true"])
        .run()
        .code(75);
    reader.kill_process_group();
    free(&t);

    // A writer killed while inside.
    let mut writer = hold(&t, "write");
    t.fsync(["swmr", "read", "-n", "L", "--", "true"])
        .run()
        .code(75);
    writer.kill_process_group();
    free(&t);

    // A writer killed while it waits behind a reader (queued: new readers wait for it).
    let reader = hold(&t, "read");
    let mut waiting = holder_cmd(&t, "write", &[]).start();
    let pid = waiting.pid();
    eventually("the writer waits for L", || waits_to_write(&t, pid));
    waiting.kill_process_group();
    assert_eq!(
        status_json(&t, 1)["waiting"],
        0,
        "a killed writer still counts as waiting"
    );
    t.fsync(["swmr", "read", "-n", "L", "--", "true"])
        .run()
        .code(0);
    reader.finish().code(0);
    free(&t);
}

#[test]
fn swmr_status_counts_readers_the_writer_and_waiting_writers() {
    let t = TestDir::new();
    let v = status_json(&t, 0);
    assert_eq!(
        (&v["state"], &v["readers"], &v["writer"], &v["waiting"]),
        (&"free".into(), &0.into(), &Value::Null, &0.into()),
        "{v}"
    );

    let r1 = hold(&t, "read");
    let r2 = hold(&t, "read");
    let v = status_json(&t, 1);
    assert_eq!(v["path"], "L", "{v}");
    assert_eq!(v["state"], "read", "{v}");
    assert_eq!(v["readers"], 2, "{v}");
    assert_eq!(v["writer"], Value::Null, "{v}");
    assert_eq!(v["waiting"], 0, "{v}");

    let mut writer = holder_cmd(&t, "write", &[]).start();
    let pid = writer.pid();
    eventually("the writer waits for L", || waits_to_write(&t, pid));
    let v = status_json(&t, 1);
    assert_eq!(v["readers"], 2, "{v}");
    assert_eq!(v["waiting"], 1, "{v}");
    assert_eq!(v["state"], "read", "a waiting writer shows as inside: {v}");
    assert_eq!(
        v["writer"],
        Value::Null,
        "a waiting writer shows as inside: {v}"
    );

    r1.finish().code(0);
    r2.finish().code(0);
    writer.expect("acquired");
    let v = status_json(&t, 1);
    assert_eq!(v["readers"], 0, "{v}");
    assert_eq!(v["waiting"], 0, "{v}");
    assert_eq!(v["state"], "write", "{v}");
    assert_eq!(v["writer"]["pid"], pid, "the writer inside: {v}");

    writer.finish().code(0);
    let v = status_json(&t, 0);
    assert_eq!(
        (&v["state"], &v["readers"], &v["writer"], &v["waiting"]),
        (&"free".into(), &0.into(), &Value::Null, &0.into()),
        "{v}"
    );
}

/// Regression (found by the chaos suite at scale): the lock was not passed down to the
/// command, so killing a reader's `fsync` let a writer in while the reader's command still ran.
#[test]
fn swmr_lock_stays_held_by_the_command_when_fsync_is_killed() {
    let t = TestDir::new();
    for role in ["read", "write"] {
        let mut holder = t.fsync(["swmr", role, "L", "--", "sh", "-c", HOLD]).hold();
        holder.signal(nix::sys::signal::Signal::SIGKILL);
        holder.wait_exit();
        // The command (sh, reading its stdin) lives on and must still hold the lock.
        t.fsync(["swmr", "write", "-n", "L", "--", "true"])
            .run()
            .code(75);
        holder.finish(); // closes its stdin: the command ends
        t.fsync(["swmr", "write", "-n", "L", "--", "true"])
            .run()
            .code(0);
    }
}

/// The lock is passed down for byte ranges too; `--close` (flock -o) keeps it from the
/// command, so that killing fsync frees it at once although the command still runs.
#[test]
fn swmr_close_does_not_pass_the_lock_down() {
    use nix::sys::signal::Signal;
    let t = TestDir::new();
    for role in ["read", "write"] {
        for range in [&[][..], &["--range", "5"][..]] {
            for close in [false, true] {
                let mut args = vec!["swmr", role];
                args.extend(range);
                if close {
                    args.push("--close");
                }
                let mut holder = t.fsync(&args).args(["L", "--", "sh", "-c", HOLD]).hold();
                let writer = |wait: &str| {
                    let mut args = vec!["swmr", "write", "-t", wait];
                    args.extend(range);
                    t.fsync(args).args(["L", "--", "echo", "in"]).run()
                };
                writer("0").code(75);
                holder.signal(Signal::SIGKILL);
                holder.wait_exit();
                // Held by the command that still runs, unless --close kept it from it.
                match close {
                    false => writer("0").code(75).stdout(""),
                    true => writer("0").code(0).stdout("in\n"),
                };
                holder.finish().killed_by(Signal::SIGKILL);
                writer("30s").code(0);
            }
        }
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the test directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Readers and writers with `--delete` taking turns for ever, so that the lock's files are
/// removed and made again all the time, while some runs give up (`-t 20ms`) and some `fsync`
/// processes are SIGKILLed at any step (a killed one's command runs on, holding the lock, and
/// marks its turn). The witness sees no writer with anyone, every run ends as it may (done,
/// gave up, killed) without a word on stderr, and once all have left no file is left: the
/// kills stop halfway, each loop then waits for the commands its killed runs left running (a
/// command inside when the last run leaves keeps the files, as it must), and the last leaver
/// of the last turns removes everything.
#[test]
fn swmr_delete_stress_with_kills_keeps_writers_alone_and_leaves_no_file() {
    require("timeout", "coreutils");
    require("pgrep", "procps");
    let t = TestDir::new();
    // Run i of each loop: every 4th gives up after 20 ms if it has to wait; in the first half,
    // every 5th (at an offset per loop) is SIGKILLed 10, 20 or 30 ms after it started, if it
    // still runs (timeout(1) kills fsync alone, never its command, and only its own child).
    // Once past its first half, a loop waits until the commands its killed runs left running
    // have ended (no process is left whose command line ends with one of its run names and
    // this directory): the last turns are then the only ones inside, whatever the load.
    let turn = |verb: &str, mark: &str, who: &str, times: u32, offset: u32| {
        format!(
            "i=0; while [ $i -lt {times} ]; do i=$((i+1)); \
             t=; [ $((i % 4)) = 0 ] && t='-t 20ms'; \
             k=; [ $((i * 2)) -le {times} ] && [ $((i % 5)) = {offset} ] && \
               k=\"timeout --foreground -s KILL 0.0$((i % 3 + 1))\"; \
             if [ $((i * 2)) = $(({times} + 2)) ]; then n=0; \
               while pgrep -f -- \" {who}\\.[0-9]+ $PWD\\$\" >/dev/null; do \
                 n=$((n+1)); [ $n -lt 3000 ] || {{ echo \"{who}: left running\" >&2; exit 1; }}; \
                 sleep 0.01; done; fi; \
             $k \"$FSYNC\" swmr {verb} --delete $t L -- sh -c \
             'echo \"{mark}+ $1\" >> log; sleep 0.01; echo \"{mark}- $1\" >> log' \
               sh \"{who}.$i\" \"$PWD\"; \
             s=$?; \
             case $s in 0|75) ;; 124|137) echo killed;; *) echo \"run $i exited $s\" >&2; exit 1;; esac; \
             done"
        )
    };
    let scripts = [
        turn("read", "R", "r1", 50, 0),
        turn("read", "R", "r2", 50, 1),
        turn("read", "R", "r3", 50, 2),
        turn("write", "W", "w1", 30, 3),
        turn("write", "W", "w2", 30, 4),
    ];
    let running: Vec<Holder> = scripts.iter().map(|s| t.sh(s).start()).collect();
    let mut kills = 0;
    for p in running {
        let out = p.finish();
        out.code(0).stderr("");
        kills += out.stdout.lines().filter(|l| *l == "killed").count();
    }
    assert!(kills >= 5, "only {kills} runs were killed");
    let (readers, writers) = check_exclusion(&t.read("log"));
    assert!(
        readers > 50 && writers > 20,
        "{readers} reader and {writers} writer turns"
    );
    let log = t.read("log");
    let tail: Vec<&str> = log.lines().rev().take(12).collect();
    assert_eq!(
        listing(t.path()),
        ["log"],
        "files left behind; the log's last lines, last first: {tail:?}"
    );
}

/// The race `--delete` must survive, made to happen: a reader or a writer opens the lock's
/// files and waits on the first of them (the turnstile, `.writers`) while a deletion holds it;
/// the deletion removes all three and lets go. The waiter then holds a file that is gone: it
/// must notice (verify after lock) and take new ones, so that it excludes newcomers, who make
/// and lock the new files.
#[test]
fn swmr_a_waiter_on_removed_files_takes_the_new_ones() {
    require("flock", "util-linux");
    let t = TestDir::new();
    for (verb, first) in [("read", ".L.turnstile"), ("write", ".L.writers")] {
        t.write("L", "");
        let deletion = t.cmd("flock").args(["-x", first, "sh", "-c", HOLD]).hold();
        let mut waiter = holder_cmd(&t, verb, &[]).start();
        let pid = waiter.pid();
        eventually("the waiter waits on the file being removed", || {
            flocks_on(&t.join(first))
                .iter()
                .any(|l| l.pid == pid && l.waiting)
        });
        for name in ["L", ".L.turnstile", ".L.writers"] {
            let _ = std::fs::remove_file(t.join(name));
        }
        deletion.finish().code(0);
        waiter.expect("acquired");
        assert!(
            flocks_on(&t.join("L"))
                .iter()
                .any(|l| l.pid == pid && !l.waiting),
            "the {verb} holds a removed L, not the new one"
        );
        t.fsync(["swmr", "write", "-n", "L", "--", "true"])
            .run()
            .code(75);
        waiter.finish().code(0).stderr("");
    }
}

/// `--delete` while others use the lock leaves the files to them: to a reader inside, to a
/// writer queued behind it (the turnstile and `.writers` are its), to the writer inside, and to
/// a process the command left running with the lock. The last to leave with `--delete` removes
/// them; leaving without it removes nothing.
#[test]
fn swmr_delete_keeps_the_files_while_others_use_them() {
    let t = TestDir::new();
    let all = [".L.turnstile", ".L.writers", "L"];
    let reader = hold(&t, "read");
    t.fsync(["swmr", "read", "--delete", "-v", "L", "--", "true"])
        .run()
        .code(0)
        .stderr_has("not deleting L: others are inside or waiting");
    assert_eq!(listing(t.path()), [".L.turnstile", "L"]);

    let mut writer = holder_cmd(&t, "write", &[]).start();
    let pid = writer.pid();
    eventually("the writer waits for L", || waits_to_write(&t, pid));
    // A reader that gives up (it queues behind the writer) leaves, and keeps the files too.
    t.fsync(["swmr", "read", "--delete", "-n", "L", "--", "true"])
        .run()
        .code(75)
        .stderr("");
    assert_eq!(listing(t.path()), all);
    assert!(waits_to_write(&t, pid), "the waiting writer lost its place");

    reader.finish().code(0);
    writer.expect("acquired");
    t.fsync(["swmr", "write", "--delete", "-n", "L", "--", "true"])
        .run()
        .code(75);
    assert_eq!(listing(t.path()), all);
    writer.finish().code(0).stderr("");
    assert_eq!(
        listing(t.path()),
        all,
        "left without --delete: nothing removed"
    );

    t.fsync(["swmr", "write", "--delete", "L", "--", "true"])
        .run()
        .code(0)
        .stderr("");
    assert!(listing(t.path()).is_empty(), "{:?}", listing(t.path()));

    // The command left a process running with the lock inherited: it is still inside.
    let out = t
        .fsync(["swmr", "write", "--delete", "-v", "L", "--", "sh", "-c"])
        .arg("sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
        .run();
    out.code(0)
        .stderr_has("not deleting L: another process still holds the lock");
    let daemon = Daemon(out.stdout.trim().parse().expect("the daemon's pid"));
    assert_eq!(listing(t.path()), all);
    t.fsync(["swmr", "read", "-n", "L", "--", "true"])
        .run()
        .code(75);
    drop(daemon);
    eventually("the daemon's lock is gone", || {
        flocks_on(&t.join("L")).is_empty()
    });
    t.fsync(["swmr", "read", "--delete", "L", "--", "true"])
        .run()
        .code(0)
        .stderr("");
    assert!(listing(t.path()).is_empty(), "{:?}", listing(t.path()));
}

/// `--delete` removes regular files only: a symbolic link where a companion file or LOCK
/// itself belongs stays, and so does what it points to. Nothing of the three goes then, and
/// fsync says why (one line, exit status COMMAND's).
#[test]
fn swmr_delete_never_removes_a_link() {
    let t = TestDir::new();
    t.write("target", "precious");
    std::os::unix::fs::symlink("target", t.join(".L.turnstile")).unwrap();
    t.fsync(["swmr", "write", "--delete", "L", "--", "true"])
        .run()
        .code(0)
        .error_naming(".L.turnstile")
        .stderr_has("is a symbolic link");
    assert_eq!(
        listing(t.path()),
        [".L.turnstile", ".L.writers", "L", "target"]
    );
    assert_eq!(t.read("target"), "precious");

    // LOCK itself a link (the user's own, which fsync follows to lock): kept, with its target.
    std::os::unix::fs::symlink("target", t.join("M")).unwrap();
    t.fsync(["swmr", "read", "--delete", "M", "--", "true"])
        .run()
        .code(0)
        .error_naming("M")
        .stderr_has("is a symbolic link");
    assert!(
        t.join("M")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(t.read("target"), "precious");
}

/// In a sticky directory, `--delete` keeps another user's companion file, and with it the
/// other two; fsync says why (one line, exit status COMMAND's).
#[test]
#[ignore = "needs root: makes files of a second user (nobody); .ci/run runs it with --ignored"]
fn swmr_delete_never_removes_another_users_file_in_a_sticky_directory() {
    require_root();
    let t = TestDir::new();
    // root in `nobody`'s sticky directory, where `nobody` made `.L.writers`: the kernel lets
    // root remove it, but fsync applies the sticky rule (only the file's owner or the
    // directory's) to root too, and keeps it, and with it the other two.
    std::fs::create_dir(t.join("shared")).unwrap();
    std::fs::set_permissions(t.join("shared"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::chown(t.join("shared"), Some(65534), Some(65534)).unwrap();
    let foreign = t.join("shared/.L.writers");
    std::fs::write(&foreign, "").unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    t.fsync(["swmr", "write", "--delete", "shared/L", "--", "true"])
        .run()
        .code(0)
        .error_naming(".L.writers")
        .stderr_has("belongs to another user (uid 65534) in a sticky directory");
    assert_eq!(
        listing(&t.join("shared")),
        [".L.turnstile", ".L.writers", "L"]
    );
    assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), 65534);
}
