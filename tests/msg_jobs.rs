//! `fsync msg` jobs against what kills them and what stalls them: a worker killed with its job
//! gives the message back to a waiting receiver at once (nothing else touching the mailbox); a
//! worker killed alone leaves the message with its job until the job ends; another process
//! holding the lock on `seq` or a `seq` planted far ahead never keeps a verb past its
//! `--timeout`; registrations cannot be opened by others; and the worker recipes of the README
//! run verbatim and go on past a failed job.

use std::os::unix::fs::PermissionsExt;

use nix::sys::signal::Signal;

use crate::harness::{TestDir, eventually, flocks_on, fsync_bin, json_of};

#[track_caller]
fn post(t: &TestDir, data: &str) {
    t.fsync(["msg", "post", "B", "--data", data]).run().code(0);
}

#[track_caller]
fn list(t: &TestDir) -> serde_json::Value {
    json_of(&t.fsync(["msg", "list", "--json", "B"]).run().code(0).stdout)
}

/// A worker that took the message `job` and runs it, with its job, as a process group of its
/// own (to be killed together).
#[track_caller]
fn worker_in_its_own_group(t: &TestDir) -> crate::harness::Holder {
    t.fsync(["msg", "recv", "B", "--", "sh", "-c"])
        .arg("echo acquired; exec sleep 1000")
        .own_process_group()
        .hold()
}

/// Nobody posts, receives or lists: the only change is the death of the worker (its fsync and
/// its job, one process group, SIGKILLed), and the receiver waiting meanwhile takes the message
/// at once, as its second attempt, counted as lost. (Without the watch on registrations' last
/// close the waiting receiver slept on until the test's deadline.)
#[test]
fn a_worker_killed_with_its_job_gives_the_message_to_a_waiting_receiver_at_once() {
    let t = TestDir::new();
    post(&t, "job");
    let mut worker = worker_in_its_own_group(&t);
    let attempt = "echo \"$FSYNC_MSG_ATTEMPT $(cat)\"";
    let mut waiting = t
        .fsync([
            "msg",
            "recv",
            "-v",
            "--retries",
            "0",
            "B",
            "--",
            "sh",
            "-c",
            attempt,
        ])
        .start();
    waiting.stderr_until("waiting for a message");
    worker.kill_process_group();
    waiting.finish().code(0).stdout("2 job\n");
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
}

/// `msg wait-empty` waiting on a job whose worker is killed with it: the message is back in
/// the queue, so it is not empty, and the waiter goes on waiting until a receiver finishes it.
#[test]
fn wait_empty_sees_a_killed_workers_message_come_back_and_waits_for_it() {
    let t = TestDir::new();
    post(&t, "job");
    let mut worker = worker_in_its_own_group(&t);
    let mut empty = t.fsync(["msg", "wait-empty", "-v", "B"]).start();
    empty.stderr_until("to have nothing left to do");
    worker.kill_process_group();
    eventually("the killed worker's message is queued again", || {
        list(&t)["count"] == 1
    });
    assert!(empty.running(), "wait-empty ended with a message queued");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("job");
    empty.finish().code(0);
}

/// fsync killed alone (`kill -9 PID`, the OOM killer, systemd's KillMode=process) while its
/// job runs: the job holds the message, so no other receiver takes it while the job goes on;
/// once the job has exited, a waiting receiver gets it (nobody was left to remove it).
/// (Mutant answered: a job that does not inherit the claim let `recv -n` run it twice at once.)
#[test]
fn a_worker_killed_alone_leaves_the_message_with_its_job_until_the_job_ends() {
    let t = TestDir::new();
    post(&t, "job");
    let job = format!(
        "echo acquired; \"$FSYNC\" event wait {}; echo finished",
        t.arg("E")
    );
    // Its output passed on as it is written, not through fsync (which dies first).
    let mut worker = t
        .fsync([
            "msg", "recv", "--output", "inherit", "B", "--", "sh", "-c", &job,
        ])
        .hold();
    worker.signal(Signal::SIGKILL);
    worker.wait_exit();
    // The job runs on: the message is neither queued nor free to take.
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    let l = list(&t);
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &1.into()), "{l}");
    let attempt = "echo \"$FSYNC_MSG_ATTEMPT $(cat)\"";
    let mut waiting = t
        .fsync(["msg", "recv", "-v", "B", "--", "sh", "-c", attempt])
        .start();
    waiting.stderr_until("waiting for a message");
    t.fsync(["event", "signal", "E"]).run().code(0);
    assert_eq!(worker.line(), "finished");
    waiting.finish().code(0).stdout("2 job\n");
}

/// Another process that may open `seq` holds its lock for ever: a receive with a timeout, a
/// receive that does not wait and a `wait-empty` with a timeout all end at their timeout (75),
/// not when the holder lets go. (They waited for the lock with no deadline before.)
#[test]
fn a_lock_held_on_seq_never_keeps_a_verb_past_its_timeout() {
    let t = TestDir::new();
    post(&t, "job");
    let _holder = t
        .cmd("flock")
        .args([&t.arg("B/seq"), "-c", "echo acquired; exec sleep 1000"])
        .hold();
    t.fsync(["msg", "recv", "-t", "300ms", "B"]).run().code(75);
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    t.fsync(["msg", "wait-empty", "-t", "300ms", "B"])
        .run()
        .code(75);
}

/// A look at the whole mailbox (`wait-empty`) holds `seq`'s lock shared while it looks at the
/// queue, then `claimed`, then the delays: a message moved from a delay to `claimed` meanwhile
/// would be seen nowhere, and the mailbox reported empty while its cancel goes on. So a cancel
/// takes `seq`'s lock exclusively to move a delayed message: here a shared holder plays the
/// look, and the message stays delayed until it lets go; then the cancel ends, recorded.
#[test]
fn cancelling_a_delayed_job_waits_for_a_look_under_way() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "--delay", "1h", "B", "--data", "later"])
        .run()
        .code(0);
    let seq = t.join("B/seq");
    let mut look = t
        .cmd("flock")
        .args(["-s", &t.arg("B/seq"), "-c", "echo acquired; read x"])
        .hold();
    let mut cancel = t.fsync(["msg", "cancel", "B", "1"]).start();
    let pid = cancel.pid();
    eventually("the cancel waits for the lock, or ends", || {
        flocks_on(&seq).iter().any(|l| l.pid == pid && l.waiting) || !cancel.running()
    });
    assert_eq!(list(&t)["delayed"].as_array().map(Vec::len), Some(1));
    assert!(
        cancel.running(),
        "the cancel went on while a look was under way"
    );
    look.send("");
    look.finish().code(0);
    cancel.finish().code(0);
    let status = t.fsync(["msg", "status", "--json", "B", "1"]).run();
    assert_eq!(
        json_of(&status.stdout)["state"],
        "cancelled",
        "{}",
        status.stdout
    );
}

/// A `seq` planted far ahead of the queue (the largest fsync believes, less a little): the
/// walks from the head to where posts go skip the gap (listing the queue's directory) instead
/// of visiting 4.6e16 shards at full CPU; the queued message is still received, and posts go
/// on from the planted number.
#[test]
fn a_seq_planted_far_ahead_does_not_send_walks_across_the_gap() {
    let t = TestDir::new();
    post(&t, "first");
    std::fs::write(t.join("B/seq"), "4611686018427387000\n").unwrap();
    t.fsync(["msg", "wait-empty", "-t", "0", "B"])
        .run()
        .code(75);
    assert_eq!(list(&t)["count"], 1);
    t.fsync(["msg", "recv", "-t", "1s", "B"])
        .run()
        .code(0)
        .stdout("first");
    t.fsync(["msg", "wait-empty", "-t", "0", "B"]).run().code(0);
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    post(&t, "second");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("second");
}

/// A receiver's registration in a mailbox only its owner may write is its owner's alone from
/// its creation on: nobody else can open it to lock it (which would make a dead receiver look
/// alive, or make registering fail).
#[test]
fn a_receivers_registration_is_private_to_those_who_may_write_the_mailbox() {
    let t = TestDir::new();
    post(&t, "job");
    std::fs::set_permissions(t.join("B"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _worker = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            "echo acquired; exec sleep 1000",
        ])
        .hold();
    let registrations: Vec<u32> = std::fs::read_dir(t.join("B/recv"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_name().to_string_lossy().starts_with(".spare-"))
        .map(|e| e.metadata().unwrap().permissions().mode() & 0o777)
        .collect();
    assert_eq!(registrations, [0o600]);
}

/// `msg wait-empty`, `list` and `retry` on a path that is no mailbox: one line naming it, 66,
/// and nothing made.
#[test]
fn looking_at_a_path_that_is_no_mailbox_is_an_error_and_makes_nothing() {
    let t = TestDir::new();
    for args in [
        &["wait-empty", "-t", "0", "Typo"][..],
        &["list", "Typo"],
        &["retry", "Typo", "1"],
    ] {
        t.fsync(["msg"])
            .args(args)
            .run()
            .code(66)
            .stdout("")
            .stderr("fsync: Typo: no such mailbox\n");
    }
    assert!(!t.join("Typo").exists());
    std::fs::create_dir(t.join("Plain")).unwrap();
    t.fsync(["msg", "list", "Plain"])
        .run()
        .code(66)
        .stderr_has("fsync: Plain: not a mailbox");
    assert_eq!(std::fs::read_dir(t.join("Plain")).unwrap().count(), 0);
}

/// The README's worker recipe line that contains `part`, with the mailbox it names replaced by
/// `B` and its comment cut.
fn readme_recipe(part: &str) -> String {
    let readme = include_str!("../README.md");
    let line = (readme.lines())
        .find(|l| l.contains(part))
        .unwrap_or_else(|| panic!("README has no recipe with {part:?}"));
    let line = line.split("   #").next().unwrap().trim();
    line.replace("/shared/jobs", "B")
}

/// A `./run-job` that records each job and fails the one named `bad`.
fn run_job(t: &TestDir) {
    t.write(
        "run-job",
        "#!/bin/sh\njob=$(cat)\necho \"$job\" >> done.log\n[ \"$job\" != bad ]\n",
    );
    let script = t.join("run-job");
    std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn path_with_fsync() -> String {
    let dir = fsync_bin().parent().unwrap().display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// The README's worker loop for `msg recv -- ./run-job`, run verbatim: a failed job does not
/// stop it; the bad job reaches the dead letters after 3 attempts (held back 1s, then 2s),
/// and the jobs after it are done meanwhile.
#[test]
fn the_readme_worker_loop_goes_on_past_a_failed_job() {
    let t = TestDir::new();
    run_job(&t);
    for job in ["bad", "one", "two"] {
        post(&t, job);
    }
    let recipe = readme_recipe("while :; do fsync msg recv");
    let mut workers = t
        .sh(&recipe)
        .env("PATH", path_with_fsync())
        .own_process_group()
        .start();
    eventually("the bad job is a dead letter", || {
        list(&t)["dead"].as_array().is_some_and(|d| d.len() == 1)
    });
    workers.kill_process_group();
    let mut done: Vec<String> = t.read("done.log").lines().map(str::to_string).collect();
    done.sort();
    assert_eq!(done, ["bad", "bad", "bad", "one", "two"]);
    assert_eq!(list(&t)["count"], 0);
}

/// The README's drain recipe with `msg work`, run verbatim: it ends once nothing is left, the
/// bad job dead after 3 attempts, with that job's status (1).
#[test]
fn the_readme_drain_recipe_ends_with_the_status_of_the_dead_job() {
    let t = TestDir::new();
    run_job(&t);
    for job in ["bad", "one", "two"] {
        post(&t, job);
    }
    let recipe = readme_recipe("fsync msg work -j 2 --until-empty");
    let out = t.sh(&recipe).env("PATH", path_with_fsync()).run();
    out.code(1).stderr_has("moved to the dead letters");
    let mut done: Vec<String> = t.read("done.log").lines().map(str::to_string).collect();
    done.sort();
    assert_eq!(done, ["bad", "bad", "bad", "one", "two"]);
    // Every job succeeding in the end, a failure on the way included: 0.
    t.write("once", "");
    t.write(
        "run-job",
        "#!/bin/sh\nif [ -e once ]; then rm once; exit 4; fi\ncat > /dev/null\n",
    );
    post(&t, "flaky");
    t.sh(&recipe).env("PATH", path_with_fsync()).run().code(0);
}

/// A dead letter says how each of its attempts ended, where and when: the first lost with its
/// worker (killed with its job), the second exited 3, the third killed by SIGKILL; each with
/// the worker's pid, the three on this host. `msg list` names the last; a job that succeeds in
/// the end leaves no history behind.
#[test]
fn a_dead_letter_keeps_how_each_attempt_ended_and_where() {
    let t = TestDir::new();
    post(&t, "job");
    let mut worker = worker_in_its_own_group(&t);
    let lost_pid = worker.pid();
    worker.kill_process_group();
    let recv = |job: &str| {
        t.fsync(["msg", "recv", "--retries", "1", "--backoff", "0", "B", "--"])
            .args(["sh", "-c", &format!("echo $PPID; {job}")])
            .run()
    };
    let exited = recv("exit 3").code(3).stdout.trim().to_string();
    let killed = recv("kill -9 $$")
        .killed_by(Signal::SIGKILL)
        .stdout
        .trim()
        .to_string();
    let l = list(&t);
    let dead = &l["dead"][0];
    assert_eq!(
        (&dead["failed"], &dead["lost"]),
        (&2.into(), &1.into()),
        "{l}"
    );
    let attempts = dead["attempts"].as_array().expect("attempts");
    let seen: Vec<_> = attempts
        .iter()
        .map(|a| {
            let number = |k: &str| a[k].as_i64().map(|n| n.to_string());
            (
                a["ended"].as_str().unwrap().to_string(),
                number("status").or(number("signal")),
                a["pid"].to_string(),
            )
        })
        .collect();
    let s = |v: &str| v.to_string();
    assert_eq!(
        seen,
        [
            (s("lost"), None, lost_pid.to_string()),
            (s("exit"), Some(s("3")), exited),
            (s("signal"), Some(s("9")), killed.clone()),
        ],
        "{l}"
    );
    let host = &attempts[0]["host"];
    assert!(host.as_str().is_some_and(|h| !h.is_empty()), "{l}");
    assert!(attempts.iter().all(|a| &a["host"] == host), "{l}");
    let text = t.fsync(["msg", "list", "B"]).run().code(0).stdout.clone();
    assert!(
        text.contains(&format!("dead after 2 failed attempts, 1 lost; the last was killed by signal 9 on {} pid {killed} at ", host.as_str().unwrap())),
        "{text}"
    );
    // Back from the dead letters, it succeeds: its history goes with it.
    t.fsync(["msg", "retry", "B"]).run().code(0);
    recv("exit 0").code(0);
    assert!(
        !t.path()
            .join("B/attempts")
            .read_dir()
            .unwrap()
            .any(|_| true)
    );
}

/// A file system mounted for one test, unmounted when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Posts until the file system has no inode left, then a file takes every block left: a full
/// file system. Receiving, running and acknowledging need nothing new there (the head and a
/// spare registration were made by the first post; the claim is a rename, the job's failure
/// goes back to the queue when its backoff's directory cannot be made, the acknowledgement is
/// an unlink), so the workers drain it: every job runs, once, after one failed; workers of a
/// pool that find no spare leave it to those that did.
/// (Before, every receive failed for want of an inode for its registration.)
#[test]
#[ignore = "needs root: mounts a small tmpfs; .ci/run runs it with --ignored"]
fn a_full_file_system_is_drained() {
    let t = TestDir::new();
    let mnt = t.path().join("full");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,nr_inodes=48", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount tmpfs on {}", mnt.display());
    let _mounted = Mounted(mnt.clone());
    let fill = mnt.join("fill");
    std::fs::File::create(&fill).unwrap();
    std::fs::File::create(mnt.join("fill-2")).unwrap(); // its inode for the link below
    let b = mnt.join("B");
    let mut posted = 0;
    loop {
        let out = t
            .fsync(["msg", "post"])
            .arg(&b)
            .args(["--data", &format!("job {posted}")])
            .run();
        if out.status.code() != Some(0) {
            assert!(out.stderr.contains("no space left"), "{}", out.stderr);
            break;
        }
        posted += 1;
        assert!(posted < 100, "tmpfs took more than 48 inodes");
    }
    assert!(posted > 10, "{posted} posted");
    // A second name for the first post's spare registration (the inode of `fill-2`).
    std::fs::remove_file(mnt.join("fill-2")).unwrap();
    let second = b.join("recv/.spare-1");
    std::fs::hard_link(b.join("recv/.spare-0"), &second).unwrap();
    // Every block left goes to `fill`.
    let zeros = vec![0u8; 4096];
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&fill)
        .unwrap();
    while std::io::Write::write_all(&mut f, &zeros).is_ok() {}
    let st = nix::sys::statvfs::statvfs(&mnt).unwrap();
    assert_eq!((st.blocks_available(), st.files_available()), (0, 0));
    // A spare is taken only if no other name reaches it (another user's link to a file of
    // theirs); then, with no spare, `recv` and a pool's last worker say why (74).
    let no_room = |out: &crate::harness::Output| {
        out.code(74);
        assert!(out.stderr.contains("no space left"), "{}", out.stderr);
    };
    no_room(&t.fsync(["msg", "recv", "-n"]).arg(&b).run());
    let work = |j: &str| {
        t.fsync(["msg", "work", "-j", j, "--until-empty"])
            .arg(&b)
            .args(["--", "true"])
            .run()
    };
    no_room(&work("1"));
    no_room(&work("2"));
    // The second name goes, and a file takes the room it left.
    std::fs::remove_file(&second).unwrap();
    std::fs::File::create(mnt.join("fill-2")).unwrap();
    let st = nix::sys::statvfs::statvfs(&mnt).unwrap();
    assert_eq!((st.blocks_available(), st.files_available()), (0, 0));
    let out = t.path().join("ran");
    // One write of the whole line: jobs run at once append to the same file.
    let log = format!("echo \"$(cat)\" >> {}", t.arg("ran"));
    // The first job fails: back to the queue (its backoff's directory cannot be made).
    t.fsync(["msg", "recv", "--retries", "1"])
        .arg(&b)
        .args(["--", "sh", "-c", &format!("{log}; exit 1")])
        .run()
        .code(1);
    // Three workers, one spare registration: those without one leave the others to it.
    t.fsync(["msg", "work", "-j", "3", "--until-empty", "--retries", "1"])
        .arg(&b)
        .args(["--", "sh", "-c", &log])
        .run()
        .code(0);
    let ran = std::fs::read_to_string(out).unwrap();
    let mut ran: Vec<&str> = ran.lines().collect();
    ran.sort_unstable();
    let mut want: Vec<String> = (0..posted).map(|n| format!("job {n}")).collect();
    want.push("job 0".to_string()); // its failed attempt
    want.sort_unstable();
    assert_eq!(ran, want);
    let l = json_of(
        &t.fsync(["msg", "list", "--json"])
            .arg(&b)
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!((&l["count"], &l["claimed"]), (&0.into(), &0.into()), "{l}");
}
