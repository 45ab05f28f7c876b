/*!
Cancellation by INT, TERM and HUP at every blocking step of every verb.

A signal that reaches `fsync` while it waits (for a lock, a slot, an event, a message, a
receiver, its standard input, a full standard output) cancels the verb and leaves nothing
half-done: no message posted or delivered, no command run, no message lost, no phantom waiter.
`fsync` then exits with 128+N, or dies of signal N (the CONTRACT's additions: re-raised after
cleaning up); never 0. `mutex run` with its command running forwards the signal instead.

Each test is one row of the matrix (a verb at one blocking step) and sends each of the three
signals in turn. A process is signalled only once it is observably blocked in the wait the test
is about: sleeping in the same system call on two samples of `/proc/PID/stat` and
`/proc/PID/syscall` ([`blocked_in`]), that call being the wait's own (a read on its standard
input, a write to a full pipe, a lock request the kernel lists as blocked, a read of its
inotify descriptor, a `ppoll` for the wake signal); a verb that says when it starts waiting
(`-v`: `fsync: waiting for ...`) has said so first ([`waiting`]).
*/

use std::{
    os::{
        fd::AsRawFd,
        unix::{fs::PermissionsExt, process::ExitStatusExt},
    },
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

use nix::{libc, sys::signal::Signal, unistd::Pid};

use crate::harness::{HOLD, Holder, TestDir, eventually, flocks_on, fsync_bin, json_of, require};

/// The signals that cancel a wait.
const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// How long a signalled process may take to end. Cancelling is immediate; this only bounds
/// how long a test waits for a process that ignores the signal (the harness allows 60 s).
const EXIT_DEADLINE: Duration = Duration::from_secs(5);

// ---- helpers ----------------------------------------------------------------------------

/// Cancelled by `sig`: exit status 128+N, or death by N (fsync re-raises after cleaning up).
#[track_caller]
fn assert_cancelled_by(status: ExitStatus, sig: Signal) {
    let n = sig as i32;
    assert!(
        status.code() == Some(128 + n) || status.signal() == Some(n),
        "after {sig}: expected exit status {} or death by {sig}, got {status:?}{}",
        128 + n,
        if status.success() {
            " (success, though the action was cancelled)"
        } else {
            ""
        }
    );
}

/// The system call process `pid` sleeps in, as `/proc/PID/syscall` gives it (number, then its
/// arguments), or `None` when it is not sleeping in one.
fn sleeping_syscall(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 2..].chars().next()?;
    if state != 'S' {
        return None;
    }
    // "0 0x0 0x7ffd4b2c 0x2000 ...": the number, six arguments, stack and program counters;
    // "running" or "-1 ..." when not in a system call.
    let line = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut fields = line.split_whitespace();
    let nr: u64 = fields.next()?.parse().ok()?;
    let mut call = vec![nr];
    call.extend(fields.map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).unwrap_or(0)));
    Some(call)
}

/// Wait until process `pid` is blocked: sleeping, in the same system call on two consecutive
/// samples. Returns that call (number, then arguments).
#[track_caller]
fn blocked_in(pid: u32) -> Vec<u64> {
    let mut last: Option<Vec<u64>> = None;
    let mut call = Vec::new();
    eventually(&format!("process {pid} blocks in a system call"), || {
        let now = sleeping_syscall(pid);
        let blocked = match (&last, &now) {
            (Some(a), Some(b)) => a[0] == b[0],
            _ => false,
        };
        if blocked {
            call = now.clone().expect("sampled");
        }
        last = now;
        blocked
    });
    call
}

/// Wait until process `pid` is blocked reading its standard input.
#[track_caller]
fn blocked_reading_stdin(pid: u32) {
    eventually(
        &format!("process {pid} blocks in read(2) on its standard input"),
        || {
            let call = blocked_in(pid);
            call[0] == libc::SYS_read as u64 && call.get(1) == Some(&0)
        },
    );
}

/// Wait until process `pid` is blocked in a `flock` request on `path` (the kernel lists it).
#[track_caller]
fn blocked_on_flock(path: &Path, pid: u32) {
    eventually(
        &format!("process {pid} waits for a lock on {}", path.display()),
        || flocks_on(path).iter().any(|l| l.pid == pid && l.waiting),
    );
    blocked_in(pid);
}

/// What a verb blocks in while it waits.
enum Wait<'a> {
    /// A `flock` request on this file, listed by the kernel as blocked.
    Flock(&'a Path),
    /// A read of its inotify descriptor (a semaphore's slots).
    Inotify,
    /// `ppoll` for the signal that wakes it (a change reported by dnotify, or its timer).
    WakeSignal,
}

/// Wait until `p`, a verb started with `-v`, has said that it waits (`fsync: waiting for ...`)
/// and is blocked in that wait (`wait`), not in some step before it.
#[track_caller]
fn waiting(p: &mut Holder, wait: Wait) {
    p.stderr_until("fsync: waiting for ");
    let pid = p.pid();
    match wait {
        Wait::Flock(path) => blocked_on_flock(path, pid),
        Wait::Inotify => eventually(
            &format!("process {pid} blocks reading its inotify descriptor"),
            || {
                let call = blocked_in(pid);
                call[0] == libc::SYS_read as u64
                    && std::fs::read_link(format!("/proc/{pid}/fd/{}", call[1]))
                        .is_ok_and(|l| l.as_os_str() == "anon_inode:inotify")
            },
        ),
        Wait::WakeSignal => eventually(
            &format!("process {pid} blocks in ppoll(2) for its wake signal"),
            || blocked_in(pid)[0] == libc::SYS_ppoll as u64,
        ),
    }
}

/// Poll `exited` until it reports an exit status, for at most [`EXIT_DEADLINE`] after `sig`.
#[track_caller]
fn status_after(
    what: &str,
    sig: Signal,
    mut exited: impl FnMut() -> Option<ExitStatus>,
) -> ExitStatus {
    let deadline = Instant::now() + EXIT_DEADLINE;
    loop {
        if let Some(status) = exited() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "`{what}` still runs {EXIT_DEADLINE:?} after {sig}: the signal did not cancel it"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// Signal a blocked holder and return its exit status (bounded by [`EXIT_DEADLINE`]).
#[track_caller]
fn signal_and_wait(p: &mut Holder, what: &str, sig: Signal) -> ExitStatus {
    p.signal(sig);
    status_after(what, sig, || (!p.running()).then(|| p.wait_exit()))
}

/// Signal a blocked `fsync` and assert that the signal cancelled it.
#[track_caller]
fn cancel(p: &mut Holder, what: &str, sig: Signal) {
    let status = signal_and_wait(p, what, sig);
    assert_cancelled_by(status, sig);
}

// ---- msg helpers --------------------------------------------------------------------------

#[track_caller]
fn post(t: &TestDir, mailbox: &str, data: &str) {
    t.fsync(["msg", "post", mailbox, "--data", data])
        .run()
        .code(0);
}

/// `fsync msg recv -n BOX`: the payload, or `None` on 75.
#[track_caller]
fn recv_now(t: &TestDir, mailbox: &str) -> Option<Vec<u8>> {
    let out = t.fsync(["msg", "recv", "-n", mailbox]).run();
    if let Some(75) = out.status.code() {
        None
    } else {
        out.code(0);
        Some(out.stdout_bytes)
    }
}

/// `fsync msg list --json BOX`'s `count`.
#[track_caller]
fn queued(t: &TestDir, mailbox: &str) -> u64 {
    let out = t.fsync(["msg", "list", "--json", mailbox]).run();
    out.code(0);
    let v = json_of(&out.stdout);
    v["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count: {v}"))
}

/// The entries of a directory of the mailbox (`tmp`, `claimed`), or none if it is missing.
fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Err(_) => Vec::new(),
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
    }
}

/// Create mailbox `BOX` (all its directories) by posting and receiving one message.
#[track_caller]
fn make_box(t: &TestDir) {
    post(t, "BOX", "setup");
    assert_eq!(recv_now(t, "BOX").as_deref(), Some(&b"setup"[..]));
}

/// Nothing queued, nothing to receive, nothing half-written in `BOX/tmp`.
#[track_caller]
fn assert_nothing_posted(t: &TestDir, when: &str) {
    assert_eq!(
        entries(&t.join("BOX/tmp")),
        Vec::<String>::new(),
        "{when}: a half-written message was left in BOX/tmp"
    );
    assert_eq!(queued(t, "BOX"), 0, "{when}: msg list shows a message");
    let got = recv_now(t, "BOX");
    assert!(
        got.is_none(),
        "{when}: a cancelled message was received: {:?}",
        got.map(|p| String::from_utf8_lossy(&p).into_owned())
    );
}

// ---- msg ----------------------------------------------------------------------------------

#[test]
fn msg_post_reading_stdin_is_cancelled_and_posts_nothing() {
    let t = TestDir::new();
    make_box(&t);
    for sig in SIGNALS {
        let mut p = t.fsync(["msg", "post", "BOX"]).start();
        p.send("partial"); // and stdin stays open
        blocked_reading_stdin(p.pid());
        cancel(&mut p, "msg post BOX < pipe", sig);
        assert_nothing_posted(&t, &format!("after {sig}"));
    }
}

#[test]
fn msg_send_reading_stdin_is_cancelled_and_delivers_nothing() {
    let t = TestDir::new();
    make_box(&t);
    for sig in SIGNALS {
        let mut p = t.fsync(["msg", "send", "BOX"]).start();
        p.send("partial");
        blocked_reading_stdin(p.pid());
        cancel(&mut p, "msg send BOX < pipe", sig);
        assert_nothing_posted(&t, &format!("after {sig}"));
    }
}

#[test]
fn msg_send_waiting_for_a_receiver_is_cancelled_and_withdrawn() {
    let t = TestDir::new();
    for sig in SIGNALS {
        let mut p = t.fsync(["msg", "send", "-v", "BOX", "--data", "x"]).start();
        eventually("the synchronous message is queued", || {
            t.join("BOX/q").is_dir() && queued(&t, "BOX") == 1
        });
        waiting(&mut p, Wait::WakeSignal);
        cancel(&mut p, "msg send BOX --data x", sig);
        assert_eq!(
            queued(&t, "BOX"),
            0,
            "after {sig}: the cancelled send was not withdrawn"
        );
        assert_nothing_posted(&t, &format!("after {sig}"));
    }
}

#[test]
fn msg_recv_waiting_for_a_message_is_cancelled_and_the_box_still_works() {
    let t = TestDir::new();
    make_box(&t);
    for sig in SIGNALS {
        let mut r = t.fsync(["msg", "recv", "-v", "BOX"]).start();
        waiting(&mut r, Wait::WakeSignal);
        cancel(&mut r, "msg recv BOX", sig);
        let data = format!("after-{sig}");
        post(&t, "BOX", &data);
        assert_eq!(
            recv_now(&t, "BOX"),
            Some(data.into_bytes()),
            "after {sig}: a message posted after the cancelled recv did not come out"
        );
        assert_eq!(entries(&t.join("BOX/claimed")), Vec::<String>::new());
    }
}

/// A `Child` whose stdout is a pipe nobody reads.
struct Stuck {
    child: Child,
    stdout: std::process::ChildStdout,
}

impl Drop for Stuck {
    /// A test that failed half-way: do not leave the process behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bytes waiting in a pipe, and its capacity.
fn pipe_fill(pipe: &impl AsRawFd) -> (usize, usize) {
    let fd = pipe.as_raw_fd();
    let mut waiting: libc::c_int = 0;
    // SAFETY: FIONREAD stores an int through the pointer; F_GETPIPE_SZ takes no argument.
    let (r, size) = unsafe {
        (
            libc::ioctl(fd, libc::FIONREAD, &mut waiting),
            libc::fcntl(fd, libc::F_GETPIPE_SZ),
        )
    };
    assert!(r == 0 && size > 0, "cannot inspect the stdout pipe");
    (waiting as usize, size as usize)
}

#[test]
fn msg_recv_blocked_on_a_full_stdout_is_cancelled_and_the_message_stays_queued() {
    let t = TestDir::new();
    let payload: Vec<u8> = (0..1usize << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(t.join("payload"), &payload).unwrap();
    t.sh("exec \"$FSYNC\" msg post BOX < payload").run().code(0);
    for sig in SIGNALS {
        let mut child = Command::new(fsync_bin())
            .args(["msg", "recv", "BOX"])
            .current_dir(t.path())
            .env_remove("FSYNC_MUTEX_HELD")
            .env_remove("FSYNC_FENCE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start fsync msg recv");
        let mut stuck = Stuck {
            stdout: child.stdout.take().expect("piped"),
            child,
        };
        let pid = stuck.child.id();
        eventually("msg recv filled its stdout pipe", || {
            let (waiting, size) = pipe_fill(&stuck.stdout);
            waiting >= size
        });
        eventually(
            &format!("process {pid} blocks in write(2) on its standard output"),
            || {
                let call = blocked_in(pid);
                call[0] == libc::SYS_write as u64 && call.get(1) == Some(&1)
            },
        );
        nix::sys::signal::kill(Pid::from_raw(pid as i32), sig).unwrap();
        let status = status_after("msg recv BOX > full pipe", sig, || {
            stuck.child.try_wait().expect("try_wait")
        });
        drop(stuck);
        assert_cancelled_by(status, sig);
        assert_eq!(
            queued(&t, "BOX"),
            1,
            "after {sig}: the message whose delivery was cancelled is not queued"
        );
    }
    let got = recv_now(&t, "BOX").expect("the message is gone");
    assert!(
        got == payload,
        "the message changed after cancelled deliveries: {} bytes back of {}",
        got.len(),
        payload.len()
    );
    assert_eq!(recv_now(&t, "BOX"), None, "a second copy of the message");
}

#[test]
fn msg_post_blocked_on_the_sequence_lock_is_cancelled_and_posts_nothing() {
    require("flock", "util-linux");
    let t = TestDir::new();
    make_box(&t);
    let seq = t.join("BOX/seq");
    let holder = t.cmd("flock").args(["BOX/seq", "-c", HOLD]).hold();
    for sig in SIGNALS {
        let mut p = t.fsync(["msg", "post", "BOX", "--data", "x"]).start();
        blocked_on_flock(&seq, p.pid());
        cancel(&mut p, "msg post BOX --data x", sig);
        assert_eq!(
            entries(&t.join("BOX/tmp")),
            Vec::<String>::new(),
            "after {sig}: a half-posted message was left in BOX/tmp"
        );
        assert_eq!(
            crate::harness::queued_files(t.join("BOX")),
            Vec::<String>::new()
        );
    }
    holder.finish().code(0);
    assert_nothing_posted(&t, "after the sequence lock was released");
}

// ---- waiting for a lock, a slot, a group, an event ----------------------------------------

/// The blocked verb did not run its command (`touch ran`).
#[track_caller]
fn assert_not_ran(t: &TestDir, sig: Signal) {
    assert!(
        !t.join("ran").exists(),
        "after {sig}: the command of a cancelled wait ran"
    );
}

#[test]
fn mutex_run_waiting_for_the_lock_is_cancelled_and_runs_nothing() {
    let t = TestDir::new();
    let holder = t.hold("L");
    for sig in SIGNALS {
        let mut w = t
            .fsync(["mutex", "run", "-v", "L", "--", "touch", "ran"])
            .start();
        waiting(&mut w, Wait::Flock(&t.join("L")));
        cancel(&mut w, "mutex run L -- touch ran", sig);
        assert_not_ran(&t, sig);
        t.fsync(["mutex", "status", "L"]).run().code(1);
    }
    holder.finish().code(0);
    t.fsync(["mutex", "status", "L"]).run().code(0);
    t.fsync(["mutex", "run", "-n", "L", "--", "true"])
        .run()
        .code(0);
}

#[test]
fn sem_run_waiting_for_a_slot_is_cancelled_and_runs_nothing() {
    let t = TestDir::new();
    let holder = t
        .fsync(["sem", "run", "S", "--slots", "1", "--", "sh", "-c", HOLD])
        .hold();
    for sig in SIGNALS {
        let mut w = t
            .fsync([
                "sem", "run", "-v", "S", "--slots", "1", "--", "touch", "ran",
            ])
            .start();
        waiting(&mut w, Wait::Inotify);
        cancel(&mut w, "sem run S --slots 1 -- touch ran", sig);
        assert_not_ran(&t, sig);
        let v = json_of(
            &t.fsync(["sem", "status", "--json", "S"])
                .run()
                .code(1)
                .stdout,
        );
        assert_eq!(
            v["waiting"], 0,
            "after {sig}: a cancelled waiter still counts: {v}"
        );
    }
    holder.finish().code(0);
    t.fsync(["sem", "run", "-n", "S", "--slots", "1", "--", "true"])
        .run()
        .code(0);
}

#[test]
fn group_wait_empty_is_cancelled() {
    let t = TestDir::new();
    let member = t
        .fsync(["group", "join", "G", "--", "sh", "-c", HOLD])
        .hold();
    for sig in SIGNALS {
        let mut w = t.fsync(["group", "wait-empty", "-v", "G"]).start();
        waiting(&mut w, Wait::Flock(&t.join("G/gate")));
        cancel(&mut w, "group wait-empty G", sig);
        t.fsync(["group", "empty", "G"]).run().code(1);
    }
    member.finish().code(0);
    t.fsync(["group", "wait-empty", "-n", "G"]).run().code(0);
}

#[test]
fn event_wait_is_cancelled() {
    let t = TestDir::new();
    for sig in SIGNALS {
        let mut w = t.fsync(["event", "wait", "-v", "E"]).start();
        waiting(&mut w, Wait::WakeSignal);
        cancel(&mut w, "event wait E", sig);
        t.fsync(["event", "status", "E"]).run().code(1);
    }
}

#[test]
fn event_wait_reset_is_cancelled_and_consumes_nothing() {
    let t = TestDir::new();
    for sig in SIGNALS {
        let mut w = t.fsync(["event", "wait", "-v", "--reset", "E"]).start();
        waiting(&mut w, Wait::WakeSignal);
        cancel(&mut w, "event wait --reset E", sig);
        t.fsync(["event", "signal", "E"]).run().code(0);
        t.fsync(["event", "wait", "-n", "--reset", "E"])
            .run()
            .code(0);
        t.fsync(["event", "wait", "-n", "--reset", "E"])
            .run()
            .code(75);
    }
}

#[test]
fn swmr_write_waiting_for_a_reader_is_cancelled_and_leaves_no_waiting_writer() {
    let t = TestDir::new();
    let reader = t
        .fsync(["swmr", "read", "L", "--", "sh", "-c", HOLD])
        .hold();
    for sig in SIGNALS {
        let mut w = t
            .fsync(["swmr", "write", "-v", "L", "--", "touch", "ran"])
            .start();
        waiting(&mut w, Wait::Flock(&t.join("L")));
        cancel(&mut w, "swmr write L -- touch ran", sig);
        assert_not_ran(&t, sig);
        // No phantom waiting writer keeps new readers out.
        t.fsync(["swmr", "read", "-n", "L", "--", "true"])
            .run()
            .code(0);
    }
    reader.finish().code(0);
    t.fsync(["swmr", "write", "-n", "L", "--", "true"])
        .run()
        .code(0);
}

#[test]
fn grouplock_run_waiting_for_another_group_is_cancelled_and_leaves_no_waiting_group() {
    let t = TestDir::new();
    let inside = t
        .fsync([
            "grouplock",
            "run",
            "L",
            "--group",
            "a",
            "--",
            "sh",
            "-c",
            HOLD,
        ])
        .hold();
    for sig in SIGNALS {
        let mut w = t
            .fsync([
                "grouplock",
                "run",
                "-v",
                "L",
                "--group",
                "b",
                "--",
                "touch",
                "ran",
            ])
            .start();
        // Group b waits for group a's members to leave: for their lock on `group.a`.
        waiting(&mut w, Wait::Flock(&t.join("L/group.a")));
        cancel(&mut w, "grouplock run L --group b -- touch ran", sig);
        assert_not_ran(&t, sig);
        // No phantom waiting group b keeps newcomers of group a out.
        t.fsync(["grouplock", "run", "-n", "L", "--group", "a", "--", "true"])
            .run()
            .code(0);
    }
    inside.finish().code(0);
    t.fsync(["grouplock", "run", "-n", "L", "--group", "b", "--", "true"])
        .run()
        .code(0);
}

#[test]
fn bus_recv_waiting_for_a_message_is_cancelled_and_the_bus_still_works() {
    let t = TestDir::new();
    for name in ["a", "b"] {
        t.fsync(["bus", "connect", "BUS", name]).run().code(0);
    }
    for sig in SIGNALS {
        let mut r = t.fsync(["bus", "recv", "-v", "BUS", "b"]).start();
        waiting(&mut r, Wait::WakeSignal);
        cancel(&mut r, "bus recv BUS b", sig);
        let data = format!("after-{sig}");
        t.fsync([
            "bus", "send", "BUS", "--from", "a", "--to", "b", "--data", &data,
        ])
        .run()
        .code(0);
        t.fsync(["bus", "recv", "-n", "BUS", "b"])
            .run()
            .code(0)
            .stdout(&data);
    }
}

// ---- the command runs: forwarded ------------------------------------------------------------

#[test]
fn mutex_run_forwards_the_signal_to_its_command_and_exits_with_its_status() {
    let t = TestDir::new();
    for (sig, name) in [
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGHUP, "HUP"),
        (Signal::SIGINT, "INT"),
    ] {
        let script =
            format!("trap 'echo got; exit 7' {name}; echo acquired; while :; do sleep 0.1; done");
        let mut h = t
            .fsync(["mutex", "run", "L", "--", "sh", "-c", &script])
            .hold();
        h.signal(sig);
        h.expect("got");
        let out = h.finish();
        out.code(7).stdout("");
        t.fsync(["mutex", "status", "L"]).run().code(0);
    }
}

/// dnotify reports a change with the wake signal, a real-time one; when that cannot be queued
/// (the user's pending-signal queue is full, RLIMIT_SIGPENDING), the kernel sends SIGIO
/// instead, whose default action kills. A waiter must survive it, and see the change. Run as a
/// user of its own, so that the queue holds this process's signals alone: with room for one
/// (the timer's, allocated when the wait starts), the change's signal overflows.
#[test]
#[ignore = "needs root: runs the waiter as a user of its own (setpriv); .ci/run runs it with --ignored"]
fn a_change_reported_by_sigio_instead_of_the_wake_signal_does_not_kill_the_waiter() {
    crate::harness::require_root();
    require("setpriv", "util-linux");
    require("bash", "bash");
    let t = TestDir::new();
    t.open_to_others();
    std::fs::create_dir(t.join("d")).unwrap();
    std::fs::set_permissions(t.join("d"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut waiter = t
        .cmd("setpriv")
        .args([
            "--reuid=61234",
            "--regid=61234",
            "--clear-groups",
            "bash",
            "-c",
        ])
        .arg(r#"ulimit -i 1 && exec "$FSYNC" event wait -v -t 60 d/E"#)
        .start();
    waiting(&mut waiter, Wait::WakeSignal); // setpriv and bash exec it: the same process
    t.fsync(["event", "signal", "d/E"]).run().code(0);
    let out = waiter.finish();
    assert_eq!(
        out.status.signal(),
        None,
        "the waiter died of a signal (SIGIO is {})\n{}",
        libc::SIGIO,
        out.stderr
    );
    out.code(0);
}
