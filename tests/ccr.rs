/*!
`fsync mutex run --when`: conditional critical regions, end to end.

A consumer is shown waiting through its `-v` line before the producer comes, so the wake-up
tested is a real one; the 1,000-round queue between two processes would hang (and fail at the
harness deadline) on a single lost wake-up, and counts every item. Nothing waits on a sleep.
*/

use std::os::unix::fs::PermissionsExt;

use nix::sys::signal::Signal;

use crate::harness::{Cmd, Holder, TestDir, eventually, is_root, require};

/// Start `CMD` (an `fsync mutex run -v ... --when ...`) and return once it says it is waiting:
/// it has evaluated its condition, found it false and released the lock.
#[track_caller]
fn waiting(cmd: Cmd, lock: &str, condition: &str) -> Holder {
    let mut w = cmd.start();
    let line = w.stderr_line();
    let want = format!("fsync: waiting for {lock} when '{condition}'");
    assert!(line.starts_with(&want), "said {line:?}, not {want:?}...");
    w
}

#[test]
fn a_consumer_is_woken_by_a_producer() {
    let t = TestDir::new();
    t.write("queue", "");
    let consumer = t.fsync([
        "mutex",
        "run",
        "-v",
        "L",
        "--when",
        "test -s queue",
        "--",
        "sh",
        "-c",
        "cat queue; : > queue",
    ]);
    let consumer = waiting(consumer, "L", "test -s queue");
    t.fsync(["mutex", "run", "L", "--", "sh", "-c", "echo x >> queue"])
        .run()
        .code(0)
        .stdout("");
    let out = consumer.finish();
    out.code(0)
        .stdout("x\n")
        .stderr_has("fsync: acquired L when 'test -s queue' (fence ");
    assert_eq!(t.read("queue"), "", "the consumer took the item");
}

/// A bounded queue of one item between a producer and a consumer, each a shell loop of 1,000
/// `fsync mutex run --when`: a single lost wake-up leaves both asleep for ever, which the
/// harness tells from a slow machine by the items standing still.
#[test]
fn a_thousand_rounds_of_producer_and_consumer_lose_no_wake_up_and_no_item() {
    const ROUNDS: u32 = 1000;
    let t = TestDir::new();
    t.write("queue", "");
    t.write("consumed", "");
    let produce = format!(
        r#"i=0; while [ $i -lt {ROUNDS} ]; do
               "$FSYNC" mutex run L --when '! test -s queue' -- sh -c "echo $i > queue" || exit 1
               i=$((i+1))
           done"#
    );
    let consume = format!(
        r#"i=0; while [ $i -lt {ROUNDS} ]; do
               "$FSYNC" mutex run L --when 'test -s queue' -- sh -c 'cat queue >> consumed; : > queue' || exit 1
               i=$((i+1))
           done"#
    );
    let mut producer = t.sh(&produce).start();
    let mut consumer = t.sh(&consume).start();
    // However slow the machine, a lost wake-up stops the items for good.
    let items = || t.read("consumed").len();
    producer.wait_exit_while(items);
    consumer.wait_exit_while(items);
    producer.finish().code(0).stderr("");
    consumer.finish().code(0).stderr("");
    let want: String = (0..ROUNDS).map(|i| format!("{i}\n")).collect();
    assert!(
        t.read("consumed") == want,
        "items lost, repeated or reordered"
    );
    assert_eq!(t.read("queue"), "");
}

/// Two waiters whose conditions stay false sleep until a holder enters: their own evaluations
/// wake nobody (they record nothing), so they do not keep each other busy.
#[test]
fn waiters_whose_condition_is_false_do_not_wake_each_other() {
    let t = TestDir::new();
    let condition = "echo x >> evaluations; test -e go";
    let waiter = || {
        let cmd = t.fsync(["mutex", "run", "-v", "L", "--when", condition, "--", "true"]);
        waiting(cmd, "L", condition)
    };
    let (a, b) = (waiter(), waiter());
    let evaluations = || t.read("evaluations").lines().count();
    assert_eq!(evaluations(), 2);
    // An entry that changes nothing: each evaluates once more, and sleeps again.
    t.fsync(["mutex", "run", "L", "--", "true"]).run().code(0);
    eventually("both waiters evaluated again", || evaluations() == 4);
    // The entry that makes the condition true: each evaluates once more, and enters.
    t.fsync(["mutex", "run", "L", "--", "touch", "go"])
        .run()
        .code(0);
    a.finish().code(0);
    b.finish().code(0);
    assert_eq!(
        evaluations(),
        6,
        "a waiter evaluated without a holder entering"
    );
}

/// A holder that deletes the lock on release (`--delete`) wakes a waiter: it removes the record
/// the waiter opened, which the waiter watches for beside the fences. Here the directory's
/// fence file has a second link (someone's data), so neither believes it, and the holder's
/// token goes to its private mark, where the waiter cannot see it. The waiter is stopped
/// while the holder enters and leaves, so that it looks only once the record is gone: then
/// only the removal wakes it. (Mutant answered: a waiter that took the removed record for
/// still linked slept through this entry until its timeout.)
#[test]
fn a_holder_that_deletes_the_lock_wakes_a_waiter() {
    let t = TestDir::new();
    t.write("data", "");
    std::fs::hard_link(t.join("data"), t.join(".fsync.fence")).unwrap();
    let waiter = t.fsync([
        "mutex",
        "run",
        "-v",
        "-t",
        "20s",
        "L",
        "--when",
        "test -e go",
        "--",
        "echo",
        "entered",
    ]);
    let waiter = waiting(waiter, "L", "test -e go");
    waiter.signal(Signal::SIGSTOP);
    t.fsync(["mutex", "run", "--delete", "L", "--", "touch", "go"])
        .run()
        .code(0);
    assert!(!t.join(".L.fsync").exists(), "the record was not removed");
    waiter.signal(Signal::SIGCONT);
    waiter
        .finish()
        .code(0)
        .stdout("entered\n")
        .stderr_has("fsync: acquired L when 'test -e go'");
}

#[test]
fn the_condition_is_evaluated_under_the_lock() {
    let t = TestDir::new();
    // `mutex status` exits 1 while the lock is held.
    t.fsync([
        "mutex",
        "run",
        "-n",
        "L",
        "--when",
        r#""$FSYNC" mutex status L >/dev/null; test $? = 1"#,
        "--",
        "echo",
        "entered",
    ])
    .run()
    .code(0)
    .stdout("entered\n");
}

#[test]
fn a_false_condition_times_out_without_running_the_command() {
    let t = TestDir::new();
    let out = t
        .fsync([
            "mutex", "run", "-t", "300ms", "-v", "L", "--when", "false", "--", "echo", "ran",
        ])
        .run();
    out.code(75)
        .stdout("")
        .stderr_has("fsync: gave up waiting for L when 'false' after ");
    assert!(
        out.elapsed >= std::time::Duration::from_millis(300),
        "gave up early: {:?}",
        out.elapsed
    );
    // The conflict status is -E's.
    t.fsync([
        "mutex", "run", "-t", "0.1", "-E", "3", "L", "--when", "false", "--", "echo", "ran",
    ])
    .run()
    .code(3)
    .stdout("");
}

#[test]
fn no_wait_evaluates_once_and_gives_up_if_false_or_held() {
    let t = TestDir::new();
    let run = |condition: &str| {
        t.fsync([
            "mutex", "run", "-n", "L", "--when", condition, "--", "echo", "ran",
        ])
        .run()
    };
    run("echo evaluated; false")
        .code(75)
        .stdout("evaluated\n")
        .stderr("");
    run("true").code(0).stdout("ran\n");
    // Held: not even evaluated.
    let holder = t.hold("L");
    run("echo evaluated").code(75).stdout("").stderr("");
    holder.finish().code(0);
}

#[test]
fn a_condition_that_is_not_found_is_an_error_not_false() {
    let t = TestDir::new();
    let out = t
        .fsync([
            "mutex",
            "run",
            "L",
            "--when",
            "no-such-command-for-fsync",
            "--",
            "echo",
            "ran",
        ])
        .run();
    out.code(127)
        .stdout("")
        .stderr_has("fsync: --when 'no-such-command-for-fsync': not found (sh exited 127)");
    // No shell to run it with at all.
    t.fsync(["mutex", "run", "L", "--when", "true", "--", "echo", "ran"])
        .env("PATH", t.join("no-such-dir"))
        .run()
        .code(127)
        .stdout("")
        .stderr("fsync: --when 'true': cannot run sh: command not found\n");
    // Nothing is left held.
    t.fsync(["mutex", "run", "-n", "L", "--", "echo", "free"])
        .run()
        .code(0)
        .stdout("free\n");
}

#[test]
fn a_signal_cancels_the_wait() {
    let t = TestDir::new();
    let cmd = t.fsync([
        "mutex", "run", "-v", "L", "--when", "false", "--", "echo", "ran",
    ]);
    let w = waiting(cmd, "L", "false");
    w.signal(Signal::SIGTERM);
    w.finish().killed_by(Signal::SIGTERM).stdout("");
}

#[test]
fn when_needs_the_whole_file_lock() {
    let t = TestDir::new();
    for other in ["-s", "--fcntl", "--range=0"] {
        t.fsync(["mutex", "run", other, "L", "--when", "true", "--", "true"])
            .run()
            .code(2)
            .stderr_has("'--when <CONDITION>'")
            .stderr_has("cannot be used with");
    }
}

/// Where the waiter can keep no record (here another user's record, or a read-only directory),
/// holders that leave none either, such as flock(1), are seen by the `--poll` re-check.
#[test]
fn without_a_record_the_poll_sees_a_holder_that_leaves_none() {
    require("flock", "util-linux");
    let t = TestDir::new();
    std::fs::create_dir(t.join("locks")).unwrap();
    t.write("locks/L", "");
    t.write("queue", "");
    if is_root() {
        // Root writes anywhere: a record of `nobody`'s, which root does not write into.
        t.write("locks/.L.fsync", "");
        std::os::unix::fs::chown(t.join("locks/.L.fsync"), Some(65534), Some(65534)).unwrap();
    } else {
        let ro = std::fs::Permissions::from_mode(0o555);
        std::fs::set_permissions(t.join("locks"), ro).unwrap();
    }
    let cmd = t.fsync([
        "mutex",
        "run",
        "-v",
        "--poll",
        "20ms",
        "locks/L",
        "--when",
        "test -s queue",
        "--",
        "cat",
        "queue",
    ]);
    let consumer = waiting(cmd, "locks/L", "test -s queue");
    t.cmd("flock")
        .args(["locks/L", "sh", "-c", "echo x >> queue"])
        .run()
        .code(0);
    consumer.finish().code(0).stdout("x\n");
    let rw = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(t.join("locks"), rw).unwrap();
}
