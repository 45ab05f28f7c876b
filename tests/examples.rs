//! The programs in `examples/`, built by `cargo test`, run as a user would run them: each does
//! what its header says.

use nix::sys::signal::Signal;

use crate::harness::{TestDir, fsync_bin};

/// The example program `name`, built beside the `fsync` executable.
fn example(name: &str) -> std::path::PathBuf {
    let path = fsync_bin().parent().unwrap().join("examples").join(name);
    assert!(
        path.exists(),
        "{} was not built (cargo test builds examples)",
        path.display()
    );
    path
}

#[test]
fn mutex_timeout_takes_a_free_lock_and_gives_up_on_a_held_one() {
    let t = TestDir::new();
    let out = t.cmd(example("mutex_timeout")).arg(t.join("L")).run();
    out.code(0);
    assert!(
        out.stdout
            .starts_with(&format!("acquired {} with fencing token ", t.arg("L")))
    );
    let _holder = t.hold("L");
    let out = t
        .cmd(example("mutex_timeout"))
        .arg(t.join("L"))
        .arg("0")
        .run();
    out.code(1);
    assert_eq!(out.stdout, format!("{} still busy after 0 s\n", t.arg("L")));
}

#[test]
fn job_worker_acknowledges_good_jobs_and_sends_a_failing_one_to_the_dead_letters() {
    let t = TestDir::new();
    for data in ["hello", "", "world"] {
        t.fsync(["msg", "post", "-q", &t.arg("jobs"), "--data", data])
            .run()
            .code(0);
    }
    let out = t.cmd(example("job_worker")).arg(t.join("jobs")).run();
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "job 1 (attempt 1): HELLO",
            "job 2 failed: Queued",
            "job 2 failed: Queued",
            "job 2 failed: Dead",
            "job 3 (attempt 1): WORLD",
            "queue empty after 2 jobs",
        ],
        "{}",
        out.stdout
    );
    let dead: Vec<_> = std::fs::read_dir(t.join("jobs/dead")).unwrap().collect();
    assert_eq!(dead.len(), 1, "one dead letter: job 2");
}

#[test]
fn semaphore_lets_at_most_two_in_at_once() {
    let t = TestDir::new();
    let out = t.cmd(example("semaphore")).arg(t.join("S")).run();
    out.code(0);
    let slots: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("worker"))
        .collect();
    assert_eq!(slots.len(), 8, "{}", out.stdout);
    assert!(
        slots
            .iter()
            .all(|l| l.ends_with("slot 0") || l.ends_with("slot 1"))
    );
    let most = out.stdout.lines().last().unwrap();
    assert!(
        matches!(most, "at most 1 at once" | "at most 2 at once"),
        "{most}"
    );
}

#[test]
fn group_wait_returns_when_the_last_member_leaves() {
    let t = TestDir::new();
    let mut member = t
        .fsync([
            "group",
            "join",
            &t.arg("app.grp"),
            "--",
            "sh",
            "-c",
            "echo in; read x",
        ])
        .start();
    member.expect("in");
    let busy = t
        .cmd(example("group_wait"))
        .arg(t.join("app.grp"))
        .arg("0")
        .run();
    busy.code(1);
    let mut waiter = t.cmd(example("group_wait")).arg(t.join("app.grp")).start();
    waiter.expect(&format!(
        "waiting for 1 member(s) of {} to leave",
        t.arg("app.grp")
    ));
    assert!(waiter.running());
    member.send("leave");
    member.finish().code(0);
    waiter.expect(&format!("{} is empty", t.arg("app.grp")));
    assert!(waiter.wait_exit().success());
}

/// Under tokio, ^C (tokio::signal) stops the worker while its receive waits: the receive is
/// dropped and takes nothing, so a job posted just after is still there.
#[test]
fn async_worker_takes_jobs_without_blocking_and_stops_on_ctrl_c_losing_none() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "-q", &t.arg("jobs"), "--data", "first"])
        .run()
        .code(0);
    let mut worker = t.cmd(example("async_worker")).arg(t.join("jobs")).start();
    worker.expect("waiting for a job");
    worker.expect("job 1: first");
    worker.expect("waiting for a job");
    t.fsync(["msg", "post", "-q", &t.arg("jobs"), "--data", "second"])
        .run()
        .code(0);
    worker.expect("job 2: second");
    worker.expect("waiting for a job");
    worker.signal(Signal::SIGINT);
    worker.expect("stopped: nothing taken");
    assert!(worker.wait_exit().success());
    t.fsync(["msg", "post", "-q", &t.arg("jobs"), "--data", "third"])
        .run()
        .code(0);
    let left = t.fsync(["msg", "recv", &t.arg("jobs"), "-t", "0"]).run();
    left.code(0);
    assert_eq!(left.stdout, "third");
}
