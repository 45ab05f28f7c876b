//! A job's output kept in its mailbox: `msg work` and `msg recv -- COMMAND` keep what the job
//! writes (both streams, in the order written), bounded by `--output-limit` (the tail kept);
//! `msg log` shows it, `--follow` while the job runs; a name planted as a link is never
//! followed; ids the mailbox does not know exit 66.
//!
//! The tests look into the mailbox only where the library's docs (src/msg/output.rs) name a
//! file: `B/output/SHARD/SEQ`.

use std::path::PathBuf;

use crate::harness::TestDir;

#[track_caller]
fn post(t: &TestDir, data: &str) {
    t.fsync(["msg", "post", "B", "--data", data]).run().code(0);
}

/// The kept output file of job `id` (in the first shard).
fn output_file(t: &TestDir, id: u64) -> PathBuf {
    t.join("B/output/00000000000000000000")
        .join(format!("{id:020}"))
}

/// Both streams, in the order the job wrote them, one file per job; its stdout went nowhere
/// else (`msg work` keeps by default); `msg log` prints it byte for byte.
#[test]
fn work_keeps_each_jobs_output_and_log_shows_it() {
    let t = TestDir::new();
    post(&t, "one");
    post(&t, "two");
    let job = "echo \"out $FSYNC_MSG_ID $(cat)\"; echo err >&2; printf 'no newline'";
    let out = t
        .fsync(["msg", "work", "--until-empty", "B", "--", "sh", "-c", job])
        .run();
    out.code(0).stdout("");
    t.fsync(["msg", "log", "B", "1"])
        .run()
        .code(0)
        .stdout("out 1 one\nerr\nno newline")
        .stderr("");
    t.fsync(["msg", "log", "B", "2"])
        .run()
        .code(0)
        .stdout("out 2 two\nerr\nno newline");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(output_file(&t, 1)).unwrap().permissions(),
    );
    assert_eq!(mode & 0o007, 0, "output readable by others: {mode:o}");
}

/// `msg recv -- COMMAND` passes the job's streams on as before (each to its own) and keeps
/// them too; `--output inherit` keeps nothing.
#[test]
fn recv_passes_output_on_and_keeps_it_and_inherit_keeps_nothing() {
    let t = TestDir::new();
    post(&t, "a");
    post(&t, "b");
    let job = "echo to-out; echo to-err >&2";
    t.fsync(["msg", "recv", "B", "--", "sh", "-c", job])
        .run()
        .code(0)
        .stdout("to-out\n")
        .stderr("to-err\n");
    // Two pipes, merged as read: both lines, in either order.
    let kept = t
        .fsync(["msg", "log", "B", "1"])
        .run()
        .code(0)
        .stdout
        .clone();
    let mut lines: Vec<&str> = kept.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["to-err", "to-out"], "{kept:?}");
    t.fsync([
        "msg", "recv", "--output", "inherit", "B", "--", "sh", "-c", job,
    ])
    .run()
    .code(0)
    .stdout("to-out\n")
    .stderr("to-err\n");
    assert!(!output_file(&t, 2).exists());
}

/// A job writing ten times the limit: at most the limit is kept on disk, at least half of it,
/// its last bytes; `msg log` says how much was left out.
#[test]
fn output_is_bounded_and_the_tail_is_kept() {
    let t = TestDir::new();
    post(&t, "x");
    t.fsync([
        "msg",
        "work",
        "--until-empty",
        "--output-limit",
        "4k",
        "B",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 4096 ]; do echo line-$i; i=$((i+1)); done", // ~40k
    ])
    .run()
    .code(0);
    let on_disk = std::fs::metadata(output_file(&t, 1)).unwrap().len();
    assert!(on_disk <= 4096 + 64, "{on_disk} bytes kept on disk");
    let out = t.fsync(["msg", "log", "B", "1"]).run();
    out.code(0)
        .stderr_has("bytes of its output before this were not kept");
    let kept = out.stdout.len();
    assert!((2048..=4096).contains(&kept), "{kept} bytes shown");
    assert!(
        out.stdout.ends_with("line-4094\nline-4095\n"),
        "{}",
        out.stdout
    );
    let total: usize = (0..4096).map(|i| format!("line-{i}\n").len()).sum();
    let said = format!("{} bytes", total - kept);
    out.stderr_has(&said);
}

/// `--follow` prints what the job writes while it runs: the job prints a line, then waits for
/// an event the test sets only once that line came through the follower; then it prints
/// another and exits, and the follower ends by itself.
#[test]
fn follow_streams_output_while_the_job_runs_and_ends_with_it() {
    let t = TestDir::new();
    post(&t, "x");
    let mut follower = t.fsync(["msg", "log", "--follow", "B", "1"]).start();
    let job = "echo first; \"$FSYNC\" event wait go; echo second >&2";
    let worker = t
        .fsync(["msg", "work", "--until-empty", "B", "--", "sh", "-c", job])
        .start();
    follower.expect("first");
    t.fsync(["event", "signal", "go"]).run().code(0);
    follower.expect("second");
    follower.finish().code(0).stderr("");
    worker.finish().code(0);
}

/// Another user's link planted at the output's name is replaced, never followed: the file it
/// points to is left as it was, and the output is kept. A link planted for a job that has not
/// run is refused by `msg log`, which prints nothing of its target.
#[test]
fn a_link_planted_at_the_outputs_name_is_never_followed() {
    let t = TestDir::new();
    post(&t, "x");
    post(&t, "y");
    t.write("victim", "precious\n");
    std::fs::create_dir_all(t.join("B/output/00000000000000000000")).unwrap();
    for id in [1, 2] {
        std::os::unix::fs::symlink(t.join("victim"), output_file(&t, id)).unwrap();
    }
    t.fsync(["msg", "recv", "B", "--", "echo", "overwritten?"])
        .run()
        .code(0);
    assert_eq!(t.read("victim"), "precious\n");
    t.fsync(["msg", "log", "B", "1"])
        .run()
        .code(0)
        .stdout("overwritten?\n");
    let out = t.fsync(["msg", "log", "B", "2"]).run();
    out.code(66).stdout("").stderr_has("symbolic link");
}

/// Ids the mailbox does not know, and paths that are no mailbox: exit 66, nothing made.
#[test]
fn unknown_ids_and_mailboxes_exit_66() {
    let t = TestDir::new();
    post(&t, "x");
    for args in [
        vec!["msg", "log", "B", "99"],
        vec!["msg", "log", "--follow", "B", "99"],
    ] {
        t.fsync(&args)
            .run()
            .code(66)
            .stdout("")
            .stderr("fsync: B: no job 99\n");
    }
    t.fsync(["msg", "log", "nothing", "1"])
        .run()
        .code(66)
        .stdout("");
    assert!(!t.join("nothing").exists());
    assert!(
        !t.join("B/output").exists(),
        "a reader made the output directory"
    );
    // Queued, so known: nothing kept yet.
    t.fsync(["msg", "log", "B", "1"]).run().code(0).stdout("");
}

/// Run `fsync ARGS...` on a pseudo-terminal (its stdin, stdout and stderr), signalling the
/// event `E` once the terminal has shown `seen`; what the terminal showed, to its end.
fn on_a_terminal(t: &TestDir, args: &[&str], seen: &str) -> Vec<u8> {
    crate::harness::require("python3", "python3");
    let driver = r#"
import os, pty, subprocess, sys, time
seen, argv = sys.argv[1].encode(), sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out, signalled, deadline = b"", False, time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    if not signalled and seen in out:
        subprocess.run([argv[0], "event", "signal", "E"], check=True)
        signalled = True
os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(0 if signalled else 1)
"#;
    let out = t
        .cmd("python3")
        .args(["-c", driver, seen])
        .arg(crate::harness::fsync_bin())
        .args(args)
        .run();
    out.code(0);
    out.stdout_bytes.clone()
}

/// On a terminal, `msg work` shows one status line, redrawn in place, with `-v` lines written
/// above it (each from the start of a line), and erases it as it ends; with stderr a pipe it
/// shows nothing of it.
#[test]
fn the_status_line_is_shown_on_a_terminal_and_never_in_a_pipe() {
    let t = TestDir::new();
    post(&t, "x");
    post(&t, "y");
    let job = format!("\"$FSYNC\" event wait {}", t.arg("E"));
    let args = [
        "msg",
        "work",
        "--until-empty",
        "-v",
        "B",
        "--",
        "sh",
        "-c",
        &job,
    ];
    let shown = on_a_terminal(&t, &args, "1 running, 1 queued");
    let text = String::from_utf8_lossy(&shown);
    assert!(
        text.contains("fsync: B: 0 done, 0 failed, 1 running, 1 queued"),
        "{text:?}"
    );
    assert!(
        text.ends_with("\r\x1b[K"),
        "the line was not erased at the end: {text:?}"
    );
    for (at, _) in text.match_indices("fsync: message") {
        let before = &text[..at];
        assert!(
            before.is_empty() || before.ends_with('\n') || before.ends_with("\r\x1b[K"),
            "a -v line written into the status line: {text:?}"
        );
    }
    // stderr a pipe: the -v lines only.
    post(&t, "z");
    let out = t
        .fsync(["msg", "work", "--until-empty", "-v", "B", "--", "true"])
        .run();
    out.code(0);
    assert!(
        !out.stderr.contains("running, ") && !out.stderr.contains('\r'),
        "{}",
        out.stderr
    );
    out.stderr_has("message 3 of B: done");
}

/// fsync killed alone while its job runs: the job keeps the message (no other receiver takes
/// it) until it next writes output, which has no reader now: SIGPIPE ends it there, and the
/// message goes back as a lost delivery, to a waiting receiver. What it wrote before is kept.
#[test]
fn a_job_whose_worker_was_killed_alone_ends_at_its_next_write() {
    let t = TestDir::new();
    post(&t, "job");
    let job = format!(
        "echo acquired; \"$FSYNC\" event wait {}; echo finished; touch {}",
        t.arg("E"),
        t.arg("survived")
    );
    let mut worker = t.fsync(["msg", "recv", "B", "--", "sh", "-c", &job]).hold();
    worker.signal(nix::sys::signal::Signal::SIGKILL);
    worker.wait_exit();
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    let attempt = "echo \"$FSYNC_MSG_ATTEMPT $(cat)\"";
    let mut waiting = t
        .fsync([
            "msg", "recv", "-v", "--output", "inherit", "B", "--", "sh", "-c", attempt,
        ])
        .start();
    waiting.stderr_until("waiting for a message");
    t.fsync(["event", "signal", "E"]).run().code(0);
    waiting.finish().code(0).stdout("2 job\n");
    assert!(
        !t.join("survived").exists(),
        "the job wrote to a pipe nobody reads, and went on"
    );
    t.fsync(["msg", "log", "B", "1"])
        .run()
        .code(0)
        .stdout("acquired\n");
}

/// `msg watch` in text: a line with the counts when it starts, then at each change; it ends
/// at its `--timeout` (0); a path that is no mailbox exits 66 and makes nothing.
#[test]
fn watch_prints_the_counts_and_ends_at_its_timeout() {
    let t = TestDir::new();
    post(&t, "x");
    let out = t.fsync(["msg", "watch", "-t", "300ms", "B"]).run();
    out.code(0);
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(first.ends_with(" B: 1 queued, 0 running"), "{}", out.stdout);
    t.fsync(["msg", "watch", "-t", "1s", "nothing"])
        .run()
        .code(66)
        .stdout("");
    assert!(!t.join("nothing").exists());
}
