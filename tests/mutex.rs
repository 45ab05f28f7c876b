/*!
`fsync mutex`, end to end: each test against real processes.

Counters (seed 002's lost update) prove mutual exclusion by an exact count; holders prove
exclusion by a contender's exit status while the holder has said `acquired`; interop runs
flock(1), Perl and Python on the same files. Nothing waits on a sleep: a sleep appears only as
work a command does, and the one timing assertion (timeout accuracy) has generous bounds.
*/

use std::{
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt, symlink},
    time::{Duration, SystemTime},
};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{
    Cmd, Daemon, HOLD, TestDir, dead, eventually, fsync_bin, is_root, require, require_root,
};

/// Seed 002's read-increment-write of a counter file, with no lock of its own.
fn increment(file: &str) -> String {
    format!("read n < {file}; n=$((n+1)); echo $n > {file}")
}

/// A shell loop running `body` `times` times, stopping at the first failure.
fn repeat(times: u32, body: &str) -> String {
    format!("i=0; while [ $i -lt {times} ]; do {body} || exit 1; i=$((i+1)); done")
}

/// Run these shell scripts side by side; each must succeed.
#[track_caller]
fn side_by_side(t: &TestDir, scripts: &[String]) {
    let running: Vec<_> = scripts.iter().map(|s| t.sh(s).start()).collect();
    for worker in running {
        worker.finish().code(0);
    }
}

/// The counter's final value.
#[track_caller]
fn count(t: &TestDir, file: &str) -> u64 {
    let text = t.read(file);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{file} holds {text:?}: {e}"))
}

/// `fsync mutex run -n LOCK -- echo ran`: 75 (and nothing run) while someone holds LOCK.
#[track_caller]
fn assert_held(t: &TestDir, lock: &str) {
    t.fsync(["mutex", "run", "-n", lock, "--", "echo", "ran"])
        .run()
        .code(75)
        .stdout("")
        .stderr("");
}

#[track_caller]
fn assert_free(t: &TestDir, lock: &str) {
    t.fsync(["mutex", "run", "-n", lock, "--", "echo", "ran"])
        .run()
        .code(0)
        .stdout("ran\n");
}

/// `fsync ARGS...` as the unprivileged user `nobody`.
fn as_nobody<const N: usize>(t: &TestDir, args: [&str; N]) -> Cmd {
    t.cmd("runuser")
        .args(["-u", "nobody", "--"])
        .arg(fsync_bin())
        .args(args)
}

/// What a root-only test needs: root (it is `#[ignore]`d for that) and `runuser`.
#[track_caller]
fn root_and_runuser() {
    require_root();
    require("runuser", "util-linux");
}

fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

// ---- mutual exclusion --------------------------------------------------------------------

#[test]
fn seed_002_counter_is_exact_with_8_processes_x_100() {
    let t = TestDir::new();
    t.write("counter", "0\n");
    let body = format!(
        r#""$FSYNC" mutex run counter.lck -- sh -c '{}'"#,
        increment("counter")
    );
    side_by_side(&t, &vec![repeat(100, &body); 8]);
    assert_eq!(count(&t, "counter"), 800);
}

#[test]
fn delete_race_keeps_the_count_exact_and_removes_the_lock() {
    let t = TestDir::new();
    t.write("counter", "0\n");
    let body = format!(
        r#""$FSYNC" mutex run --delete counter.lck -- sh -c '{}'"#,
        increment("counter")
    );
    side_by_side(&t, &vec![repeat(50, &body); 4]);
    assert_eq!(count(&t, "counter"), 200);
    assert!(!t.join("counter.lck").exists(), "--delete left the lock");
    assert!(
        !t.join(".counter.lck.fsync").exists(),
        "--delete left the record"
    );
}

// ---- interoperation with flock(1), Perl and Python -----------------------------------------

#[test]
fn flock1_holder_excludes_fsync() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let flock = t.cmd("flock").args(["-x", "L", "sh", "-c", HOLD]).hold();
    assert_held(&t, "L");
    t.fsync(["mutex", "status", "L"])
        .run()
        .code(1)
        .stdout_has(&format!("pid {}", flock.pid()));
    flock.finish().code(0);
    assert_free(&t, "L");
}

#[test]
fn fsync_holder_excludes_flock1() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let holder = t.hold("L");
    t.cmd("flock")
        .args(["-n", "L", "echo", "ran"])
        .run()
        .code(1)
        .stdout("");
    holder.finish().code(0);
    t.cmd("flock")
        .args(["-n", "L", "echo", "ran"])
        .run()
        .code(0)
        .stdout("ran\n");
}

#[test]
fn counter_shared_by_fsync_and_flock1_is_exact() {
    require("flock", "util-linux");
    let t = TestDir::new();
    t.write("counter", "0\n");
    let inc = increment("counter");
    let fsync = repeat(50, &format!(r#""$FSYNC" mutex run c.lck -- sh -c '{inc}'"#));
    let flock = repeat(50, &format!("flock c.lck sh -c '{inc}'"));
    side_by_side(&t, &[fsync.clone(), flock.clone(), fsync, flock]);
    assert_eq!(count(&t, "counter"), 200);
}

#[test]
fn seed_002_perl_program_beside_fsync_on_the_same_semaphore_file_is_exact() {
    require("perl", "perl");
    let t = TestDir::new();
    t.write("counter.dat", "0\n");
    let program = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/seed_002_counter.pl"
    );
    let perl = repeat(50, &format!("perl {program} >/dev/null"));
    let fsync = repeat(
        50,
        &format!(
            r#""$FSYNC" mutex run counter.sem -- sh -c '{}'"#,
            increment("counter.dat")
        ),
    );
    side_by_side(&t, &[perl.clone(), fsync.clone(), perl, fsync]);
    assert_eq!(count(&t, "counter.dat"), 200);
}

#[test]
fn perl_flock_and_fsync_exclude_each_other() {
    require("perl", "perl");
    let t = TestDir::new();
    let try_lock = r#"open SEM, ">counter.sem" or die; flock(SEM, LOCK_EX|LOCK_NB) or exit 3"#;
    let holder = t.hold("counter.sem");
    t.cmd("perl")
        .args(["-MFcntl=:flock", "-e", try_lock])
        .run()
        .code(3);
    holder.finish().code(0);
    let hold =
        r#"open SEM, ">counter.sem" or die; flock SEM, LOCK_EX; $|=1; print "acquired\n"; <STDIN>"#;
    let perl = t.cmd("perl").args(["-MFcntl=:flock", "-e", hold]).hold();
    assert_held(&t, "counter.sem");
    perl.finish().code(0);
    t.cmd("perl")
        .args(["-MFcntl=:flock", "-e", try_lock])
        .run()
        .code(0);
}

const PYTHON_TRY_LOCK: &str = "
import fcntl, sys
f = open('L', 'a')
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)
";

const PYTHON_HOLD: &str = "
import fcntl, sys
f = open('L', 'a')
fcntl.flock(f, fcntl.LOCK_EX)
print('acquired', flush=True)
sys.stdin.readline()
";

/// Seed 002's counter in Python: lock the semaphore file, read, increment, write, close.
const PYTHON_COUNTER: &str = "
import fcntl, sys
for _ in range(int(sys.argv[1])):
    with open('L', 'a') as sem:
        fcntl.flock(sem, fcntl.LOCK_EX)
        with open('counter') as f:
            n = int(f.read())
        with open('counter', 'w') as f:
            f.write(f'{n + 1}\\n')
";

#[test]
fn python_flock_and_fsync_exclude_each_other() {
    require("python3", "python3");
    let t = TestDir::new();
    let holder = t.hold("L");
    t.cmd("python3").args(["-c", PYTHON_TRY_LOCK]).run().code(3);
    holder.finish().code(0);
    let python = t.cmd("python3").args(["-c", PYTHON_HOLD]).hold();
    assert_held(&t, "L");
    python.finish().code(0);
    t.cmd("python3").args(["-c", PYTHON_TRY_LOCK]).run().code(0);
}

#[test]
fn counter_shared_by_fsync_and_python_is_exact() {
    require("python3", "python3");
    let t = TestDir::new();
    t.write("counter", "0\n");
    let python = t
        .sh(r#"python3 -c "$COUNTER" 100"#)
        .env("COUNTER", PYTHON_COUNTER);
    let fsync = repeat(
        100,
        &format!(
            r#""$FSYNC" mutex run L -- sh -c '{}'"#,
            increment("counter")
        ),
    );
    let workers = [python.start(), t.sh(&fsync).start(), t.sh(&fsync).start()];
    for worker in workers {
        worker.finish().code(0);
    }
    assert_eq!(count(&t, "counter"), 300);
}

// ---- exit codes and waiting ------------------------------------------------------------

#[test]
fn child_exit_status_passes_through() {
    let t = TestDir::new();
    for code in [0, 3, 42] {
        t.fsync([
            "mutex",
            "run",
            "L",
            "--",
            "sh",
            "-c",
            &format!("exit {code}"),
        ])
        .run()
        .code(code)
        .stderr("");
    }
}

/// A command that dies of signal N makes fsync die of N too, after releasing the lock, so that
/// the shell sees 128+N and knows a signal ended the job.
#[test]
fn child_killed_by_signal_dies_of_it_and_shell_sees_128_plus_n() {
    let t = TestDir::new();
    for (sig, signal, code) in [
        ("TERM", Signal::SIGTERM, 143),
        ("KILL", Signal::SIGKILL, 137),
        ("INT", Signal::SIGINT, 130),
        ("SEGV", Signal::SIGSEGV, 139),
    ] {
        let script = format!("kill -{sig} $$");
        t.fsync(["mutex", "run", "L", "--", "sh", "-c", &script])
            .run()
            .killed_by(signal)
            .stderr("");
        let shell = format!(
            "{} mutex run L -- sh -c 'kill -{sig} $$'; echo $?",
            fsync_bin().display()
        );
        t.sh(&shell).run().code(0).stdout(&format!("{code}\n"));
        t.fsync(["mutex", "status", "L"]).run().code(0);
    }
    // No core file of ours is left behind for the command's crash.
    assert!(!t.join("core").exists());
}

#[test]
fn command_not_found_gives_127() {
    let t = TestDir::new();
    t.fsync(["mutex", "run", "L", "--", "no-such-command-4711"])
        .run()
        .code(127)
        .stdout("")
        .error_naming("no-such-command-4711");
}

/// The shell searches on past a PATH directory it may not search, and reports 127 when the
/// command is nowhere: `sh -c no-such-command` as nobody with such a PATH exits 127.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn command_not_found_gives_127_past_an_unsearchable_path_directory() {
    root_and_runuser();
    let t = TestDir::new();
    t.open_to_others();
    fs::create_dir(t.join("private")).unwrap();
    fs::set_permissions(t.join("private"), fs::Permissions::from_mode(0o700)).unwrap();
    t.write("L", "");
    fs::set_permissions(t.join("L"), fs::Permissions::from_mode(0o666)).unwrap();
    let path = format!("PATH={}:/usr/bin:/bin", t.arg("private"));
    let as_nobody_with_path = |command: &str| {
        t.cmd("runuser")
            .args(["-u", "nobody", "--", "env", &path])
            .arg(fsync_bin())
            .args(["mutex", "run", &t.arg("L"), "--", command])
            .run()
    };
    as_nobody_with_path("true").code(0);
    as_nobody_with_path("no-such-command-4711")
        .code(127)
        .error_naming("no-such-command-4711");
}

#[test]
fn command_not_executable_gives_126() {
    let t = TestDir::new();
    t.write("script", "#!/bin/sh\necho ran\n");
    fs::set_permissions(t.join("script"), fs::Permissions::from_mode(0o644)).unwrap();
    t.fsync(["mutex", "run", "L", "--", "./script"])
        .run()
        .code(126)
        .stdout("")
        .error_naming("./script");
    t.fsync(["mutex", "run", "L", "--", "/"])
        .run()
        .code(126)
        .error_naming("/");
}

#[test]
fn no_wait_gives_75_or_the_conflict_exit_code() {
    let t = TestDir::new();
    let holder = t.hold("L");
    assert_held(&t, "L");
    for flags in [
        &["--no-wait"][..],
        &["--nonblock"],
        &["--nonb"],
        &["-t", "0"],
        &["--timeout", "0"],
    ] {
        t.fsync(["mutex", "run"])
            .args(flags)
            .args(["L", "--", "echo", "ran"])
            .run()
            .code(75)
            .stdout("");
    }
    t.fsync(["mutex", "run", "-n", "-E", "9", "L", "--", "echo", "ran"])
        .run()
        .code(9)
        .stdout("");
    t.fsync([
        "mutex",
        "run",
        "--conflict-exit-code",
        "99",
        "-t",
        "10ms",
        "L",
        "--",
        "true",
    ])
    .run()
    .code(99);
    holder.finish().code(0);
    t.fsync(["mutex", "run", "--nonb", "L", "--", "echo", "ran"])
        .run()
        .code(0)
        .stdout("ran\n");
}

#[test]
fn timeout_gives_up_after_the_duration() {
    let t = TestDir::new();
    let holder = t.hold("L");
    for (timeout, code) in [("300ms", None), ("0.3", Some("9"))] {
        let mut cmd = t.fsync(["mutex", "run", "-t", timeout]);
        if let Some(c) = code {
            cmd = cmd.args(["-E", c]);
        }
        let out = cmd.args(["L", "--", "echo", "ran"]).run();
        out.code(code.map_or(75, |c| c.parse().unwrap())).stdout("");
        assert!(
            out.elapsed >= Duration::from_millis(300) && out.elapsed < Duration::from_secs(3),
            "-t {timeout} gave up after {:?}",
            out.elapsed
        );
    }
    holder.finish().code(0);
}

#[test]
fn a_waiter_gets_the_lock_when_the_holder_releases() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let mut waiter = t
        .fsync(["mutex", "run", "-v", "-t", "30s", "L", "--", "echo", "ran"])
        .start();
    let waiting = waiter.stderr_line();
    assert!(
        waiting.starts_with("fsync: waiting for L") && waiting.contains(HOLD),
        "-v should say what it waits for and who holds it: {waiting}"
    );
    holder.finish().code(0);
    waiter.finish().code(0).stdout("ran\n");
}

/// The lock is the name: a waiter whose lock's directory is moved away (and made again) while it
/// waits does not keep the moved file once its holder lets go, but locks what the name names now.
#[test]
fn a_waiter_whose_directory_is_moved_away_locks_the_file_the_name_names_now() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("d")).unwrap();
    let holder = t.hold("d/L");
    let mut waiter = t
        .fsync(["mutex", "run", "-v", "-t", "30s", "d/L", "--"])
        .args(["sh", "-c", "echo acquired; read x"])
        .start();
    let waiting = waiter.stderr_line();
    assert!(waiting.starts_with("fsync: waiting for d/L"), "{waiting}");
    std::fs::rename(t.join("d"), t.join("moved")).unwrap();
    std::fs::create_dir(t.join("d")).unwrap();
    holder.finish().code(0);
    waiter.expect("acquired");
    assert_held(&t, "d/L");
    assert_free(&t, "moved/L");
    waiter.send("done");
    waiter.finish().code(0);
}

// ---- signals --------------------------------------------------------------------------

#[test]
fn signals_to_fsync_reach_the_command_and_the_lock_outlives_it() {
    let t = TestDir::new();
    for (sig, name) in [
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGINT, "INT"),
        (Signal::SIGHUP, "HUP"),
        (Signal::SIGQUIT, "QUIT"),
    ] {
        // The handler waits for our word: the lock must stay held until the command exits.
        let script = format!(
            "trap 'echo got-{name}; read x; exit 7' {name}; echo acquired; \
             while :; do sleep 0.05; done"
        );
        let mut holder = t
            .fsync(["mutex", "run", "L", "--", "sh", "-c", &script])
            .hold();
        holder.signal(sig);
        holder.expect(&format!("got-{name}"));
        assert_held(&t, "L");
        holder.send("go");
        holder.finish().code(7).stdout("");
        t.fsync(["mutex", "status", "L"]).run().code(0);
    }
}

#[test]
fn signal_while_waiting_dies_of_it_and_runs_nothing() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let mut waiter = t
        .fsync(["mutex", "run", "-v", "L", "--", "echo", "ran"])
        .start();
    let waiting = waiter.stderr_line();
    assert!(waiting.starts_with("fsync: waiting for"), "{waiting}");
    waiter.signal(Signal::SIGTERM);
    waiter.finish().killed_by(Signal::SIGTERM).stdout("");
    assert_held(&t, "L");
    holder.finish().code(0);
}

#[test]
fn sigkill_of_fsync_leaves_the_lock_with_the_command() {
    let t = TestDir::new();
    let script = "echo acquired; read x; echo done > marker";
    let mut holder = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c", script])
        .hold();
    holder.signal(Signal::SIGKILL);
    holder.wait_exit();
    // fsync is gone; its command still runs and still holds the lock.
    assert_held(&t, "L");
    t.fsync(["mutex", "status", "L"]).run().code(1);
    // A waiter gets it only once the command has finished its work: never two holders.
    let waiter = t
        .fsync(["mutex", "run", "-t", "30s", "L", "--", "cat", "marker"])
        .start();
    holder.send("go");
    waiter.finish().code(0).stdout("done\n");
    holder.finish().killed_by(Signal::SIGKILL);
}

#[test]
fn close_does_not_pass_the_lock_down() {
    let t = TestDir::new();
    let mut holder = t
        .fsync(["mutex", "run", "--close", "L", "--", "sh", "-c", HOLD])
        .hold();
    holder.signal(Signal::SIGKILL);
    holder.wait_exit();
    // The command still runs, but without the lock (flock -o).
    assert_free(&t, "L");
    holder.finish().killed_by(Signal::SIGKILL);
}

// ---- nesting --------------------------------------------------------------------------

#[test]
fn nested_run_on_the_same_lock_runs_at_once() {
    let t = TestDir::new();
    let inner = [
        fsync_bin().to_str().unwrap(),
        "mutex",
        "run",
        "-t",
        "5s",
        "L",
        "--",
        "echo",
        "inner",
    ];
    t.fsync(["mutex", "run", "L", "--"])
        .args(inner)
        .run()
        .code(0)
        .stdout("inner\n")
        .stderr("");
    // Anywhere in the process tree, and through another name of the same file.
    let deep = r#"sh -c '"$FSYNC" mutex run -t 5s "$PWD/L" -- echo deep'"#;
    t.fsync(["mutex", "run", "L", "--", "sh", "-c", deep])
        .run()
        .code(0)
        .stdout("deep\n");
}

#[test]
fn nested_run_does_not_release_the_outer_lock() {
    let t = TestDir::new();
    let script = format!(r#""$FSYNC" mutex run -t 5s L -- true || exit 9; {HOLD}"#);
    let holder = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c", &script])
        .hold();
    assert_held(&t, "L");
    holder.finish().code(0);
}

#[test]
fn nested_run_under_close_fails_at_once() {
    let t = TestDir::new();
    let lock = t.arg("L");
    let bin = fsync_bin().to_str().unwrap();
    // -t 5s on the inner run: waiting instead of failing would give 75, not 69.
    t.fsync(["mutex", "run", "--close", &lock, "--"])
        .args([
            bin, "mutex", "run", "-t", "5s", &lock, "--", "echo", "inner",
        ])
        .run()
        .code(69)
        .stdout("")
        .error_naming(&lock);
}

/// A nested run whose command closed the inherited descriptor (the number in
/// `FSYNC_MUTEX_HELD` no longer holds the lock) does not count as the holder: the outer run
/// still holds the lock, so the inner one fails at once (69), plain and with `--when`, and
/// runs nothing. (Mutant answered: `fd_holds` returning true without looking at the
/// descriptor ran the inner command while the outer holder held the lock, two holders.)
#[test]
fn nested_run_whose_inherited_descriptor_was_closed_fails_at_once() {
    let t = TestDir::new();
    let script = r#"fd=$(echo "$FSYNC_MUTEX_HELD" | cut -d: -f3)
        eval "exec $fd<&-"
        "$FSYNC" mutex run -t 5s L -- echo inner; echo "plain $?"
        "$FSYNC" mutex run -t 5s L --when true -- echo inner; echo "when $?""#;
    let out = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c", script])
        .run();
    out.code(0).stdout("plain 69\nwhen 69\n");
    assert_eq!(
        out.stderr.matches("held by an ancestor process").count(),
        2,
        "{}",
        out.stderr
    );
}

/// A run under another lock's run passes both locks down: `FSYNC_MUTEX_HELD` names the outer
/// lock's entry, then the inner one's (`DEV:INO:FD:PID` each, `;` between them); a run given
/// the variable empty passes its own entry alone. (Mutants answered: the guard on an ancestor's
/// entry made `true`, which passed down `;A;B`, and `false`, which passed down `B` alone.)
#[test]
fn runs_of_two_locks_one_inside_the_other_pass_both_down_in_order() {
    let t = TestDir::new();
    t.write("A", "");
    t.write("B", "");
    let ino = |name: &str| fs::metadata(t.join(name)).unwrap().ino().to_string();
    let bin = fsync_bin().to_str().unwrap();
    let out = t
        .fsync(["mutex", "run", "A", "--", bin, "mutex", "run", "B", "--"])
        .args(["sh", "-c", r#"echo "$FSYNC_MUTEX_HELD""#])
        .env("FSYNC_MUTEX_HELD", "")
        .run();
    let out = out.code(0).stdout.trim().to_string();
    let entries: Vec<Vec<&str>> = out.split(';').map(|e| e.split(':').collect()).collect();
    let inodes: Vec<&str> = entries
        .iter()
        .map(|e| e.get(1).copied().unwrap_or(""))
        .collect();
    assert_eq!(inodes, [ino("A"), ino("B")], "{out}");
    assert!(entries.iter().all(|e| e.len() == 4), "{out}");
}

/// A shared run passes its lock down as `flock -s` does: the command has the lock file open
/// (and so holds the lock for as long as it, or a process it leaves behind, runs). (Mutant
/// answered: the plain guard's `pass_down` made a no-op.)
#[test]
fn a_shared_run_passes_its_lock_down_to_the_command() {
    let t = TestDir::new();
    let out = t
        .fsync([
            "mutex",
            "run",
            "-s",
            "L",
            "--",
            "sh",
            "-c",
            "ls -l /proc/$$/fd",
        ])
        .run();
    let lock = fs::canonicalize(t.join("L")).unwrap();
    let listed = out.code(0).stdout.clone();
    assert!(
        listed.contains(&format!("-> {}\n", lock.display())),
        "{listed}"
    );
}

// ---- other users, symbolic links, bad input ---------------------------------------------

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn read_only_lock_file_in_read_only_directory_works_for_other_users() {
    root_and_runuser();
    let t = TestDir::new();
    t.open_to_others();
    fs::create_dir(t.join("ro")).unwrap();
    fs::set_permissions(t.join("ro"), fs::Permissions::from_mode(0o755)).unwrap();
    t.write("ro/lock", "");
    fs::set_permissions(t.join("ro/lock"), fs::Permissions::from_mode(0o444)).unwrap();
    let lock = t.arg("ro/lock");

    as_nobody(&t, ["mutex", "run", &lock, "--", "echo", "ran"])
        .run()
        .code(0)
        .stdout("ran\n")
        .stderr("");
    let holder = as_nobody(&t, ["mutex", "run", &lock, "--", "sh", "-c", HOLD]).hold();
    as_nobody(&t, ["mutex", "run", "-n", &lock, "--", "echo", "ran"])
        .run()
        .code(75)
        .stdout("");
    assert_held(&t, &lock);
    holder.finish().code(0);
    let names: Vec<_> = fs::read_dir(t.join("ro"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["lock"],
        "nobody's runs created files in the read-only directory"
    );
    let root = t.hold(&lock);
    as_nobody(&t, ["mutex", "run", "-n", &lock, "--", "true"])
        .run()
        .code(75);
    root.finish().code(0);

    // The administrator's file is as it was.
    let meta = fs::metadata(t.join("ro/lock")).unwrap();
    assert_eq!(
        (meta.mode() & 0o7777, meta.uid(), meta.len()),
        (0o444, 0, 0)
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn permission_denied_gives_77() {
    root_and_runuser();
    let t = TestDir::new();
    t.open_to_others();
    fs::create_dir(t.join("d")).unwrap();
    fs::set_permissions(t.join("d"), fs::Permissions::from_mode(0o755)).unwrap();
    t.write("d/private", "");
    fs::set_permissions(t.join("d/private"), fs::Permissions::from_mode(0o600)).unwrap();
    // A lock file nobody may open at all, and one nobody may not create.
    for name in ["d/private", "d/new"] {
        let lock = t.arg(name);
        as_nobody(&t, ["mutex", "run", &lock, "--", "echo", "ran"])
            .run()
            .code(77)
            .stdout("")
            .error_naming(&lock);
    }
    assert!(!t.join("d/new").exists());
}

#[test]
fn symlinked_lock_path_leaves_its_target_untouched() {
    let t = TestDir::new();
    t.write("target", "precious data\n");
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    fs::File::options()
        .write(true)
        .open(t.join("target"))
        .and_then(|f| f.set_modified(past))
        .unwrap();
    symlink("target", t.join("link")).unwrap();
    let before = fs::metadata(t.join("target")).unwrap();

    t.fsync(["mutex", "run", "link", "--", "echo", "ran"])
        .run()
        .code(0)
        .stdout("ran\n");
    let holder = t.hold("link");
    assert_held(&t, "target"); // the link and its target are one lock
    holder.finish().code(0);

    let after = fs::metadata(t.join("target")).unwrap();
    assert_eq!(t.read("target"), "precious data\n");
    assert_eq!(
        after.modified().unwrap(),
        past,
        "the target's mtime changed"
    );
    assert_eq!((after.ino(), after.mode()), (before.ino(), before.mode()));
    assert!(
        fs::symlink_metadata(t.join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn dangling_symlink_is_refused_and_its_target_not_created() {
    let t = TestDir::new();
    symlink("nowhere", t.join("link")).unwrap();
    t.fsync(["mutex", "run", "link", "--", "echo", "ran"])
        .run()
        .operational_error("link")
        .stdout("");
    assert!(
        !t.join("nowhere").exists(),
        "created the dangling link's target"
    );
}

#[test]
fn holder_record_is_never_written_through_a_symlink_or_into_a_foreign_file() {
    let t = TestDir::new();
    t.write("victim", "keep\n");
    symlink("victim", t.join(".L.fsync")).unwrap();
    t.fsync(["mutex", "run", "L", "--", "true"]).run().code(0);
    assert_eq!(t.read("victim"), "keep\n");
    t.write(".M.fsync", "someone else's file\n");
    t.fsync(["mutex", "run", "M", "--", "true"]).run().code(0);
    assert_eq!(t.read(".M.fsync"), "someone else's file\n");
}

#[test]
fn missing_parent_directory_is_an_error_naming_it() {
    let t = TestDir::new();
    t.fsync(["mutex", "run", "no-such-dir/L", "--", "echo", "ran"])
        .run()
        .code(66)
        .stdout("")
        .error_naming("no-such-dir/L");
    for verb in [&["status"][..], &["watch", "-t", "0"]] {
        t.fsync(["mutex"])
            .args(verb)
            .arg("no-such-dir/L")
            .run()
            .code(66)
            .stdout("")
            .error_naming("no-such-dir/L");
    }
    assert!(!t.join("no-such-dir").exists());
}

/// A directory can be a whole-file lock (tests/flock_compat.rs), not a byte-range one.
#[test]
fn a_directory_as_a_byte_range_lock_is_an_error() {
    let t = TestDir::new();
    fs::create_dir(t.join("dir")).unwrap();
    for lock in [&["--range", "0"][..], &["--fcntl"]] {
        t.fsync(["mutex", "run"])
            .args(lock)
            .args(["dir", "--", "echo", "ran"])
            .run()
            .code(66)
            .stdout("")
            .error_naming("dir");
    }
}

#[test]
fn bad_duration_and_missing_command_are_usage_errors() {
    let t = TestDir::new();
    t.fsync(["mutex", "run", "-t", "soon", "L", "--", "echo", "ran"])
        .run()
        .code(2)
        .stdout("")
        .stderr_has("soon");
    for args in [&["mutex", "run", "L"][..], &["mutex", "run", "L", "--"]] {
        t.fsync(args).run().code(2).stdout("");
    }
    assert!(!t.join("L").exists());
}

// ---- status, watch, fencing --------------------------------------------------------------

/// `fsync mutex run LOCK [OPTIONS] -- sh -c 'sleep 1000 & echo $!'`: fsync and the shell have
/// exited, the background `sleep` they left holds the lock through the descriptor it
/// inherited. Returns it with what fsync said on stderr.
#[track_caller]
fn leave_daemon_holding(t: &TestDir, lock: &str, options: &[&str]) -> (Daemon, String) {
    let mut args = vec!["mutex", "run", lock];
    args.extend(options);
    args.extend([
        "--",
        "sh",
        "-c",
        "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
    ]);
    let out = t.fsync(args).run();
    let pid = out.code(0).stdout.trim().parse().expect("the daemon's pid");
    (Daemon(pid), out.stderr)
}

#[test]
fn status_names_the_live_process_holding_an_inherited_lock() {
    let t = TestDir::new();
    let (daemon, _) = leave_daemon_holding(&t, "L", &[]);
    let out = t.fsync(["mutex", "status", "--json", "L"]).run();
    let v = json(out.code(1).stdout.trim());
    assert_eq!(v["state"], "held", "{v}");
    assert_eq!(v["holder"]["pid"], daemon.0, "{v}");
    assert_eq!(v["holder"]["command"], "sleep 1000", "{v}");
    t.fsync(["mutex", "status", "L"])
        .run()
        .code(1)
        .stdout_has(&format!("{}", daemon.0))
        .stdout_has("sleep 1000");
    drop(daemon);
}

/// fsync killed (SIGKILL) while its command runs on, holding the lock through the descriptor
/// it inherited: status names the holder from the record, fsync's pid, the command's pid, its
/// command line and since when, and trusts the record (the kernel lists the command's pid,
/// which the record names). (Mutant answered: a status that distrusted the record named the
/// command as the holder, with no command pid and no time.)
#[test]
fn status_after_fsync_was_killed_names_it_and_the_command_that_holds_on() {
    let t = TestDir::new();
    let mut holder = t
        .fsync([
            "mutex",
            "run",
            "L",
            "--",
            "sh",
            "-c",
            "echo $$; exec sleep 1000",
        ])
        .start();
    let child: u32 = holder.line().trim().parse().expect("the command's pid");
    let _reaped = Daemon(child);
    let fsync = holder.pid();
    let status = || {
        json(
            t.fsync(["mutex", "status", "--json", "L"])
                .run()
                .code(1)
                .stdout
                .trim(),
        )
    };
    eventually("the record names the command's pid", || {
        status()["holder"]["child_pid"] == child
    });
    holder.signal(Signal::SIGKILL);
    holder.wait_exit();
    let v = status();
    assert_eq!(v["state"], "held", "{v}");
    assert_eq!(v["holder"]["pid"], fsync, "{v}");
    assert_eq!(v["holder"]["child_pid"], child, "{v}");
    assert_eq!(
        v["holder"]["command"], "sh -c echo $$; exec sleep 1000",
        "{v}"
    );
    assert!(
        v["holder"]["since"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z')),
        "{v}"
    );
    assert_eq!(v["record_trusted"], true, "{v}");
    assert_eq!(v["untrusted_record"], Value::Null, "{v}");
}

/// `--delete` leaves LOCK in place while a process the command left still holds the lock
/// through the descriptor it inherited: deleting it would let the next `fsync mutex run` create
/// a new LOCK and hold a second lock beside the first.
#[test]
fn delete_keeps_a_lock_file_a_process_left_by_the_command_still_holds() {
    let t = TestDir::new();
    let (daemon, stderr) = leave_daemon_holding(&t, "L", &["--delete", "-v"]);
    assert!(t.join("L").exists(), "L was deleted while held");
    assert!(
        stderr.contains("not deleting L: another process still holds the lock"),
        "{stderr}"
    );
    t.fsync(["mutex", "run", "-n", "L", "--", "echo", "ran"])
        .run()
        .code(75)
        .stdout("");
    let pid = daemon.0;
    drop(daemon);
    eventually("the daemon died", || dead(pid));
    // Nobody else holds it now: --delete deletes.
    t.fsync(["mutex", "run", "--delete", "L", "--", "true"])
        .run()
        .code(0)
        .stderr("");
    assert!(!t.join("L").exists(), "L was kept when free");
}

/// A `--delete` that fails (the directory became read-only) is a warning: fsync still exits
/// with the command's status. A lock file already gone is no failure at all.
#[test]
fn a_failed_delete_warns_and_keeps_the_commands_exit_status() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("d")).unwrap();
    let args = [
        "mutex",
        "run",
        "--delete",
        "d/L",
        "--",
        "sh",
        "-c",
        "chmod a-w d; exit 3",
    ];
    // Root may delete from a read-only directory: be `nobody` there.
    let cmd = if is_root() {
        require("runuser", "util-linux");
        t.open_to_others();
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        std::os::unix::fs::chown(t.join("d"), Some(nobody.uid.as_raw()), None).unwrap();
        as_nobody(&t, args)
    } else {
        t.fsync(args)
    };
    let out = cmd.run();
    std::fs::set_permissions(t.join("d"), std::fs::Permissions::from_mode(0o755)).unwrap();
    out.code(3)
        .stdout("")
        .error_naming("d/L: cannot delete lock file");
    assert!(t.join("d/L").exists());

    t.fsync([
        "mutex",
        "run",
        "--delete",
        "L",
        "--",
        "sh",
        "-c",
        "rm L; exit 4",
    ])
    .run()
    .code(4)
    .stderr("");
}

#[test]
fn status_of_a_missing_lock_is_free_and_creates_nothing() {
    let t = TestDir::new();
    t.fsync(["mutex", "status", "L"])
        .run()
        .code(0)
        .stdout("L: free\n");
    let out = t.fsync(["mutex", "status", "--json", "L"]).run();
    let v = json(out.code(0).stdout.trim());
    assert_eq!(
        (&v["state"], &v["holder"]),
        (&Value::from("free"), &Value::Null)
    );
    assert_eq!(
        fs::read_dir(t.path()).unwrap().count(),
        0,
        "status created files"
    );
}

#[test]
fn status_names_the_holder() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let pid = holder.pid();
    t.fsync(["mutex", "status", "L"])
        .run()
        .code(1)
        .stdout_has(&format!("pid {pid}"))
        .stdout_has(HOLD);
    let out = t.fsync(["mutex", "status", "--json", "L"]).run();
    let v = json(out.code(1).stdout.trim());
    assert_eq!(v["state"], "held", "{v}");
    assert_eq!(v["path"], "L", "{v}");
    assert_eq!(v["holder"]["pid"], pid, "{v}");
    assert!(
        v["holder"]["command"].as_str().unwrap_or("").contains(HOLD),
        "{v}"
    );
    assert!(v["holder"]["since"].is_string(), "{v}");
    holder.finish().code(0);
    let out = t.fsync(["mutex", "status", "--json", "L"]).run();
    assert_eq!(json(out.code(0).stdout.trim())["state"], "free");
}

#[test]
fn fence_strictly_increases() {
    let t = TestDir::new();
    let fence = |delete: bool| -> u64 {
        let mut cmd = t.fsync(["mutex", "run"]);
        if delete {
            cmd = cmd.arg("--delete");
        }
        let out = cmd.args(["L", "--", "sh", "-c", "echo $FSYNC_FENCE"]).run();
        out.code(0)
            .stdout
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("FSYNC_FENCE {:?}: {e}", out.stdout))
    };
    // Including across --delete, which removes the record that remembers the last token.
    let fences: Vec<u64> = [false, false, false, true, false, false]
        .into_iter()
        .map(fence)
        .collect();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences must strictly increase: {fences:?}"
    );
}

#[test]
fn watch_prints_acquired_then_released() {
    let t = TestDir::new();
    let mut watch = t
        .fsync(["mutex", "watch", "--json", "-t", "4s", "L"])
        .start();
    // First the state the watch started in.
    let free = json(&watch.line());
    assert_eq!(free["event"], "free", "{free}");
    assert_eq!(free["holder"], Value::Null, "{free}");
    assert_eq!(free["path"], "L", "{free}");
    let holder = t.hold("L");
    let pid = holder.pid();
    let acquired = json(&watch.line());
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    assert_eq!(acquired["holder"]["pid"], pid, "{acquired}");
    assert_eq!(acquired["path"], "L", "{acquired}");
    assert!(acquired["time"].is_string(), "{acquired}");
    holder.finish().code(0);
    let released = json(&watch.line());
    assert_eq!(released["event"], "released", "{released}");
    // Nothing else happened before the timeout ended the watch.
    watch.finish().code(0).stdout("");
}

/// Interrupted, a watch dies of the signal (the shell shows 128+N, as its help says).
#[test]
fn watch_interrupted_dies_of_the_signal() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let mut watch = t.fsync(["mutex", "watch", "L"]).start();
    assert!(watch.line().contains(" held "));
    watch.signal(Signal::SIGTERM);
    watch
        .finish()
        .killed_by(Signal::SIGTERM)
        .stdout("")
        .stderr("");
    holder.finish().code(0);
}

/// A watch that starts while the lock is held says so first, `held` and who holds it, then
/// the changes; one that starts while it is free says `free` first. Text and JSON alike.
#[test]
fn watch_starts_with_the_current_state() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let pid = holder.pid();
    let mut watch = t.fsync(["mutex", "watch", "--json", "L"]).start();
    let held = json(&watch.line());
    assert_eq!(held["event"], "held", "{held}");
    assert_eq!(held["holder"]["pid"], pid, "{held}");
    assert_eq!(held["path"], "L", "{held}");
    assert!(held["time"].is_string(), "{held}");
    holder.finish().code(0);
    let released = json(&watch.line());
    assert_eq!(released["event"], "released", "{released}");
    assert_eq!(released["holder"]["pid"], pid, "{released}");
    watch.signal(Signal::SIGTERM);
    assert_eq!(watch.finish().stdout, "", "more than held, released");

    let holder = t.hold("L");
    let pid = holder.pid();
    let mut watch = t.fsync(["mutex", "watch", "L"]).start();
    let line = watch.line();
    assert!(
        line.contains(&format!(" held pid {pid} ")) && line.contains(HOLD),
        "the first line names the holder: {line:?}"
    );
    holder.finish().code(0);
    let line = watch.line();
    assert!(line.contains(&format!(" released pid {pid} ")), "{line:?}");
    let holder = t.hold("L");
    let line = watch.line();
    assert!(
        line.contains(&format!(" acquired pid {} ", holder.pid())),
        "{line:?}"
    );
    holder.finish().code(0);
    assert!(watch.line().contains(" released "));
    watch.signal(Signal::SIGTERM);
    assert_eq!(watch.finish().stdout, "");

    let out = t.fsync(["mutex", "watch", "-t", "100ms", "L"]).run();
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.len() == 1 && lines[0].ends_with(" free"),
        "a watch of a free lock: {:?}",
        out.stdout
    );
}

// ---- lock --fd ------------------------------------------------------------------------

#[test]
fn lock_fd_holds_the_lock_for_the_calling_shell_until_unlock() {
    let t = TestDir::new();
    let script = r#"exec 9>>L; "$FSYNC" mutex lock --fd 9 || exit 9; echo acquired; read x;
        "$FSYNC" mutex unlock --fd 9 || exit 9; echo unlocked; read x || true"#;
    let mut shell = t.sh(script).hold();
    assert_held(&t, "L");
    t.sh(r#"exec 9>>L; "$FSYNC" mutex lock -n --fd 9"#)
        .run()
        .code(75);
    shell.send("unlock");
    shell.expect("unlocked");
    // The shell still has the file open: only the unlock can have freed it.
    assert_free(&t, "L");
    shell.finish().code(0);
}

#[test]
fn lock_fd_shared_locks_coexist_and_exclude_writers() {
    let t = TestDir::new();
    let script = r#"exec 9>>L; "$FSYNC" mutex lock --shared --fd 9 || exit 9; echo acquired; read x || true"#;
    let reader = t.sh(script).hold();
    t.sh(r#"exec 8<L; "$FSYNC" mutex lock -n --shared --fd 8"#)
        .run()
        .code(0);
    assert_held(&t, "L");
    reader.finish().code(0);
}

/// A regular file, a directory or a character device (/dev/null, as flock(1) takes it) is a
/// lock; a pipe or a socket is refused by lock and unlock alike, naming the descriptor and what
/// it is.
#[test]
fn lock_fd_refuses_pipes_and_sockets() {
    let t = TestDir::new();
    for verb in ["lock", "unlock"] {
        let args = if verb == "lock" { "lock -n" } else { "unlock" };
        let cases = [(
            format!(r#"echo x | "$FSYNC" mutex {args} --fd 0"#),
            "fd 0 (pipe:",
            "is a pipe",
        )];
        for (script, name, kind) in cases {
            t.sh(&script)
                .run()
                .code(66)
                .error_naming(name)
                .stderr_has(&format!("{kind}, not a lock file"));
        }
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let out = std::process::Command::new(fsync_bin())
            .arg("mutex")
            .args(args.split(' '))
            .args(["--fd", "0"])
            .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
                theirs,
            )))
            .output()
            .unwrap();
        drop(ours);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(66), "{stderr}");
        assert!(
            stderr.starts_with("fsync: fd 0 (socket:")
                && stderr.contains("is a socket, not a lock file"),
            "{stderr}"
        );
    }
    // A directory and a character device are locks, as for flock(1).
    t.sh(r#"exec 9</dev/null; "$FSYNC" mutex lock -n --fd 9 && "$FSYNC" mutex unlock --fd 9"#)
        .run()
        .code(0);
    std::fs::create_dir(t.join("d")).unwrap();
    t.sh(r#"exec 9<d; "$FSYNC" mutex lock -n --fd 9 && "$FSYNC" mutex unlock --fd 9"#)
        .run()
        .code(0);
}

#[test]
fn lock_fd_on_a_closed_descriptor_is_an_error() {
    let t = TestDir::new();
    for verb in ["lock", "unlock"] {
        t.fsync(["mutex", verb, "--fd", "99"])
            .run()
            .operational_error("99");
    }
}

/// With standard output closed, the lock file fsync opens must not become the command's
/// standard output: what the command writes never lands in LOCK.
#[test]
fn a_closed_stdout_never_becomes_the_lock_file() {
    let t = TestDir::new();
    t.sh(r#""$FSYNC" mutex run L -- sh -c 'echo into-the-lock; exit 0' >&-"#)
        .run()
        .code(0);
    assert!(!t.read("L").contains("into-the-lock"), "{}", t.read("L"));
}

/// `fsync mutex run L` holding, having printed `acquired` and then its `FSYNC_FENCE`.
fn hold_with_fence(t: &TestDir) -> (crate::harness::Holder, u64) {
    let mut h = t
        .fsync([
            "mutex",
            "run",
            "L",
            "--",
            "sh",
            "-c",
            "echo acquired; echo $FSYNC_FENCE; read x || true",
        ])
        .hold();
    let fence = h.line().parse().expect("FSYNC_FENCE is a number");
    (h, fence)
}

#[test]
fn a_lock_deleted_while_held_leaves_no_record_and_tokens_keep_growing() {
    let t = TestDir::new();
    let (h, first) = hold_with_fence(&t);
    assert!(t.join(".L.fsync").exists(), "the holder keeps a record");
    std::fs::remove_file(t.join("L")).unwrap();
    h.finish().code(0);
    assert!(
        !t.join(".L.fsync").exists(),
        "the record of a deleted lock was left behind"
    );
    assert!(!t.join("L").exists(), "the release recreated the lock file");
    let (h, next) = hold_with_fence(&t);
    assert!(next > first, "token {next} after {first}");
    h.finish().code(0);
}

#[test]
fn a_holder_of_a_deleted_lock_leaves_the_new_holders_record_alone() {
    let t = TestDir::new();
    let (old, first) = hold_with_fence(&t);
    std::fs::remove_file(t.join("L")).unwrap();
    // A new L, and a new holder of it, while the old holder still runs.
    let (new, second) = hold_with_fence(&t);
    assert!(second > first, "token {second} after {first}");
    old.finish().code(0);
    // The old holder's release wrote nothing: the record still names the new holder.
    let out = t.fsync(["mutex", "status", "--json", "L"]).run();
    let status = json(out.code(1).stdout.trim());
    assert_eq!(status["state"], "held");
    assert_eq!(status["fence"], second, "{status}");
    assert_eq!(status["holder"]["pid"], new.pid(), "{status}");
    new.finish().code(0);
    let (last, third) = hold_with_fence(&t);
    assert!(third > second, "token {third} after {second}");
    last.finish().code(0);
    assert!(
        t.join(".L.fsync").exists(),
        "the record of a live lock stays"
    );
}

/// A token that ran ahead of the clock (here a record that says so, as a host whose clock is
/// ahead would leave it) is followed by greater ones after `--delete` removed the record, even
/// where the directory's fence file cannot keep it: a file with a second link (the user's own
/// data) is neither believed nor written, and the caller's private mark keeps the token.
#[test]
fn tokens_outgrow_a_token_ahead_of_the_clock_when_the_fence_file_cannot_keep_it() {
    let t = TestDir::new();
    t.write("data", "9223372036854775806\n");
    fs::hard_link(t.join("data"), t.join(".fsync.fence")).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let ahead = now + 1_000_000_000_000; // eleven days
    t.write(
        ".L.fsync",
        &format!("fsync-holder 1\nfence {ahead}\nstate released\nend\n"),
    );
    let tokens: Vec<u64> = (0..3)
        .map(|_| {
            let out = t
                .fsync(["mutex", "run", "--delete", "L", "--", "sh", "-c"])
                .arg("echo $FSYNC_FENCE")
                .run();
            out.code(0).stdout.trim().parse().unwrap()
        })
        .collect();
    assert_eq!(tokens[0], ahead + 1, "{tokens:?}");
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must strictly grow: {tokens:?}"
    );
    assert_eq!(
        t.read("data"),
        "9223372036854775806\n",
        "the data was written"
    );
    assert!(!t.join(".L.fsync").exists() && !t.join("L").exists());
}
