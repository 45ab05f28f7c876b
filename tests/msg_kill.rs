//! Stopping running jobs: a job past its timeout (its own, posted with it, or the worker's
//! default) and a job asked to be cancelled (`B/cancel/SEQ`) are stopped with everything they
//! started (TERM to their process group, KILL after the grace period); a timed-out attempt is a
//! failed one (history `timeout`, retried, then dead), a cancelled job is never retried. Each
//! job says it started by writing its pids to files, and the tests wait for those.

use std::time::{Duration, Instant};

use crate::harness::{TestDir, dead, eventually, json_of};

/// A job that writes its pid (`pid`) and its grandchild's (`gc`), a `sleep` in the background,
/// then says it started (`started`) and waits for ever.
const WAITS_WITH_A_GRANDCHILD: &str =
    "sleep 1000 & echo $! >> gc; echo $$ >> pid; echo started >> started; wait";

/// The pids a job wrote to `name`, one a line.
fn pids(t: &TestDir, name: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(t.join(name)).unwrap_or_default();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

#[track_caller]
fn list(t: &TestDir) -> serde_json::Value {
    json_of(&t.fsync(["msg", "list", "--json", "B"]).run().code(0).stdout)
}

/// Every process a job wrote to `pid` and `gc` is gone (`n` of each).
#[track_caller]
fn all_gone(t: &TestDir, n: usize) {
    let (jobs, grandchildren) = (pids(t, "pid"), pids(t, "gc"));
    assert_eq!((jobs.len(), grandchildren.len()), (n, n));
    for pid in jobs.into_iter().chain(grandchildren) {
        eventually(&format!("process {pid} of a stopped job is gone"), || {
            dead(pid)
        });
    }
}

/// A job's own timeout (posted with it, kept in its name as `,tMS`) beats the worker's longer
/// default; each attempt is stopped with its grandchild, recorded as `timeout`, retried as
/// `--retries` says, and the message goes to the dead letters after.
#[test]
fn a_job_past_its_own_timeout_is_stopped_with_its_group_retried_then_dead() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--job-timeout", "300ms", "--data", "x"])
        .run()
        .code(0);
    let l = list(&t);
    let name = l["messages"][0]["name"].as_str().unwrap();
    assert!(name.ends_with(".msg,t300"), "{name}");
    let start = Instant::now();
    let out = t
        .fsync(["msg", "work", "-v", "--until-empty", "--retries", "1"])
        .args([
            "--backoff",
            "0",
            "--job-timeout",
            "1h",
            "--grace",
            "5s",
            "B",
        ])
        .args(["--", "sh", "-c", WAITS_WITH_A_GRANDCHILD])
        .run();
    // The status of the job that went to the dead letters: it died of TERM.
    out.code(143);
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("timed out after 300ms").count(),
        2,
        "{}",
        out.stderr
    );
    out.stderr_has("moved to the dead letters");
    all_gone(&t, 2);
    let l = list(&t);
    let dead = &l["dead"][0];
    assert!(
        dead["name"].as_str().unwrap().ends_with(".msg+2,t300"),
        "{l}"
    );
    let ended: Vec<_> = (dead["attempts"].as_array().unwrap().iter())
        .map(|a| (a["attempt"].as_u64().unwrap(), a["ended"].as_str().unwrap()))
        .collect();
    assert_eq!(ended, [(1, "timeout"), (2, "timeout")], "{l}");
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
    // Put back from the dead letters, it keeps its own timeout.
    t.fsync(["msg", "retry", "B", "1"]).run().code(0);
    let l = list(&t);
    let name = l["messages"][0]["name"].as_str().unwrap();
    assert!(name.ends_with(".msg,t300"), "{l}");
}

/// The worker's `--job-timeout` for a job posted without its own; a job that ignores TERM (and
/// whose children do too) gets KILL once the grace period has passed, and goes back to the
/// queue held back, one failed attempt counted.
#[test]
fn a_job_that_ignores_term_is_killed_after_the_grace_period() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let job = format!("trap '' TERM; {WAITS_WITH_A_GRANDCHILD}");
    let start = Instant::now();
    let out = t
        .fsync([
            "msg",
            "recv",
            "-v",
            "--job-timeout",
            "200ms",
            "--grace",
            "400ms",
        ])
        .args(["--backoff", "1h", "B", "--", "sh", "-c", &job])
        .run();
    let took = start.elapsed();
    out.killed_by(nix::sys::signal::Signal::SIGKILL);
    assert!(took >= Duration::from_millis(600), "stopped after {took:?}");
    out.stderr_has("timed out after 200ms (attempt 1), held back before its next attempt");
    all_gone(&t, 1);
    let l = list(&t);
    let delayed = &l["delayed"][0];
    assert_eq!(delayed["failed"], 1, "{l}");
    assert_eq!(delayed["attempts"][0]["ended"], "timeout", "{l}");
}

/// A job that ends before its timeout is not touched: its status counts as always.
#[test]
fn a_job_within_its_timeout_ends_as_it_would() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--job-timeout", "1h", "--data", "x"])
        .run()
        .code(0);
    let out = t
        .fsync(["msg", "recv", "--job-timeout", "1h", "B", "--", "sh", "-c"])
        .arg("cat; exit 0")
        .run();
    out.code(0).stdout("x");
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
}

/// `fsync msg cancel` of a running job (a request `B/cancel/SEQ`): the worker stops it with its
/// grandchild at once (change notification, no timeout involved), records it cancelled (not
/// retried, not dead), and removes the request; `cancel` waits for that.
#[test]
fn a_cancel_request_stops_a_running_job_which_is_not_retried() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let mut worker = t
        .fsync(["msg", "work", "-v", "--until-empty", "--retries", "3"])
        .args(["B", "--", "sh", "-c", WAITS_WITH_A_GRANDCHILD])
        .start();
    eventually("the job started", || t.join("started").exists());
    assert_eq!(list(&t)["claimed"], 1);
    // `cancel` returns once the worker has stopped it and recorded it.
    let out = t.fsync(["msg", "cancel", "B", "1"]).run();
    out.code(0).stdout_has("1 cancelled at ");
    let request = t.join("B/cancel/00000000000000000001");
    worker.stderr_until("message 1 of B: cancelled");
    let out = worker.finish();
    out.code(0);
    all_gone(&t, 1);
    assert!(!request.exists(), "the request was left behind");
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
    assert_eq!(l["dead"].as_array().unwrap().len(), 0, "{l}");
    assert_eq!(l["delayed"].as_array().unwrap().len(), 0, "{l}");
}

/// A job that fails while a cancel request for it exists is cancelled, not retried (the request
/// may have come as it failed): here the job makes the request itself, then fails.
#[test]
fn a_job_failing_under_a_cancel_request_is_cancelled_not_retried() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let job = "mkdir -p B/cancel && : > B/cancel/$(printf %020d $FSYNC_MSG_ID); exit 3";
    let out = t
        .fsync([
            "msg",
            "recv",
            "-v",
            "--backoff",
            "0",
            "B",
            "--",
            "sh",
            "-c",
            job,
        ])
        .run();
    out.stderr_has("message 1 of B: cancelled");
    assert!(!t.join("B/cancel/00000000000000000001").exists());
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
}

/// `--backoff BASE..MAX` holds a failed job back about BASE (jittered within 20%) at first; a
/// MAX below BASE, or a half range, is a usage error.
#[test]
fn a_backoff_range_holds_a_failed_job_back_about_its_base() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let before = std::time::SystemTime::now();
    t.fsync(["msg", "recv", "--backoff", "1h..1d", "B", "--", "false"])
        .run()
        .code(1);
    let after = std::time::SystemTime::now();
    let l = list(&t);
    let due = l["delayed"][0]["due"].as_str().unwrap().to_string();
    let due = humantime::parse_rfc3339(&due).unwrap();
    let hour = Duration::from_hours(1);
    assert!(
        due >= before + hour * 4 / 5 && due <= after + hour * 6 / 5,
        "{l}"
    );
    for bad in ["1d..1h", "1s..", "..1s"] {
        t.fsync(["msg", "recv", "--backoff", bad, "B", "--", "true"])
            .run()
            .code(2);
    }
}

/// A job leads a process group of its own, so a signal the terminal sends reaches `recv --`
/// alone; it passes INT, TERM and HUP on to the whole group (the job's grandchild too), and the
/// job, ended by it, goes back to the queue uncounted.
#[test]
fn recv_passes_a_signal_on_to_its_jobs_whole_group() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let recv = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            WAITS_WITH_A_GRANDCHILD,
        ])
        .start();
    eventually("the job started", || t.join("started").exists());
    let job = pids(&t, "pid")[0];
    let group = std::fs::read_to_string(format!("/proc/{job}/stat")).unwrap();
    let fields: Vec<&str> = group[group.rfind(')').unwrap() + 2..].split(' ').collect();
    assert_eq!(fields[2], job.to_string(), "the job leads its group");
    assert_ne!(job, recv.pid());
    recv.signal(nix::sys::signal::Signal::SIGHUP);
    recv.finish().killed_by(nix::sys::signal::Signal::SIGHUP);
    all_gone(&t, 1);
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&1.into(), &0.into()), "{l}");
    assert_eq!(l["messages"][0]["failed"], 0, "{l}");
}
