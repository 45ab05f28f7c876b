/*!
`-v` on every verb that waits: when the wait blocks, one line naming what it waits for and who
holds it since when (where that can be known); when it ends, one line saying how long it waited:
`acquired ... after 0.80s`, `gave up waiting for ... after 5.00s`, or `interrupted by SIGTERM
after waiting ...`. Off a terminal each is one line; on a terminal the waiting line is rewritten
in place, then replaced by the last line.

Each blocked waiter is read up to its `waiting for` line before the holder lets go: the holders
say `acquired`, so nothing here sleeps.
*/

use std::os::unix::process::ExitStatusExt;

use nix::sys::signal::Signal;

use crate::harness::{Cmd, HOLD, Holder, Output, TestDir, require};

/// The seconds of `after 1.23s` in a `-v` line.
#[track_caller]
fn seconds_after(line: &str) -> f64 {
    let at = line
        .find(" after ")
        .unwrap_or_else(|| panic!("no `after` in {line:?}"));
    let rest = &line[at + " after ".len()..];
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    assert!(
        rest[number.len()..].starts_with('s'),
        "no seconds after `after` in {line:?}"
    );
    number
        .parse()
        .unwrap_or_else(|_| panic!("no number after `after` in {line:?}"))
}

/// The last line of a finished `-v` run's stderr.
#[track_caller]
fn last_line(out: &Output) -> String {
    out.stderr
        .lines()
        .last()
        .unwrap_or_else(|| panic!("nothing on stderr"))
        .to_string()
}

/// Start `waiter` (a `-v` run) and return it with its first stderr line, which must say that
/// it waits for `what` and, if given, name `holder` in the parentheses after it.
#[track_caller]
fn blocked(waiter: Cmd, what: &str, holder: Option<&str>) -> (Holder, String) {
    let mut w = waiter.start();
    let line = w.stderr_line();
    let want = format!("fsync: waiting for {what}");
    assert!(
        line.starts_with(&want),
        "a blocked -v run said {line:?}, not {want:?}..."
    );
    if let Some(holder) = holder {
        let rest = &line[want.len()..];
        assert!(
            rest.starts_with(" (") && rest.contains(holder),
            "the waiting line does not name the holder ({holder}): {line:?}"
        );
    }
    (w, line)
}

/// The blocked waiter got what it waited for: its last line says so, and how long it waited.
#[track_caller]
fn got_it(out: &Output, prefix: &str) -> String {
    let line = last_line(out);
    assert!(
        line.starts_with(&format!("fsync: {prefix}")),
        "the last -v line is {line:?}, not `fsync: {prefix}...`\n{}",
        out.stderr
    );
    let waited = seconds_after(&line);
    assert!((0.0..60.0).contains(&waited), "{line:?}");
    line
}

/// `cmd` (with `-v -t 300ms`) gave up: 75, and the last line says for what and after how long.
#[track_caller]
fn gives_up(cmd: Cmd, what: &str, holder: Option<&str>) -> String {
    let out = cmd.run();
    out.code(75);
    let line = last_line(&out);
    let want = format!("fsync: gave up waiting for {what} after ");
    assert!(
        line.starts_with(&want),
        "the last -v line is {line:?}, not {want:?}...\n{}",
        out.stderr
    );
    let waited = seconds_after(&line);
    assert!(
        (0.29..30.0).contains(&waited),
        "-t 300ms: gave up after {waited}s? {line:?}"
    );
    if let Some(holder) = holder {
        assert!(line.contains(holder), "{line:?} does not name {holder}");
    }
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("fsync: waiting for {what}")),
        "it blocked, so it first said what it waits for: {}",
        out.stderr
    );
    line
}

fn holder_pid(h: &Holder) -> String {
    format!("held by pid {} ", h.pid())
}

// ---- mutex -----------------------------------------------------------------------------

#[test]
fn mutex_run_names_the_holder_since_when_and_how_long_it_waited() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let who = holder_pid(&holder);
    let (waiter, line) = blocked(
        t.fsync(["mutex", "run", "-v", "L", "--", "echo", "ran"]),
        "L",
        Some(&who),
    );
    assert!(
        line.contains(HOLD) && line.contains(", since "),
        "the holder's command and since when: {line:?}"
    );
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0).stdout("ran\n");
    let done = got_it(&out, "acquired L (fence ");
    // After the waiting line (read above), only the one that says how it ended.
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(!done.contains("gave up"), "{done}");

    let holder = t.hold("L");
    let who = holder_pid(&holder);
    gives_up(
        t.fsync(["mutex", "run", "-v", "-t", "300ms", "L", "--", "true"]),
        "L",
        Some(&who),
    );
    holder.finish().code(0);
}

/// A wait that never blocks says how long it took all the same (as `flock -v` does), and no
/// `waiting` line; `-n` on a held lock gives up at once, naming the holder.
#[test]
fn a_wait_that_never_blocks_still_says_how_long() {
    let t = TestDir::new();
    let out = t.fsync(["mutex", "run", "-v", "L", "--", "true"]).run();
    out.code(0);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let line = got_it(&out, "acquired L (fence ");
    assert!(seconds_after(&line) < 5.0, "{line}");

    let holder = t.hold("L");
    let out = t
        .fsync(["mutex", "run", "-v", "-n", "L", "--", "true"])
        .run();
    out.code(75);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let line = last_line(&out);
    assert!(
        line.starts_with("fsync: gave up waiting for L after 0.")
            && line.contains(&holder_pid(&holder)),
        "{line:?}"
    );
    holder.finish().code(0);
}

#[test]
fn an_interrupted_wait_says_so_and_how_long_it_waited() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let (waiter, _) = blocked(
        t.fsync(["mutex", "run", "-v", "L", "--", "touch", "ran"]),
        "L",
        Some(&holder_pid(&holder)),
    );
    waiter.signal(Signal::SIGTERM);
    let out = waiter.finish();
    assert!(
        out.status.code() == Some(143) || out.status.signal() == Some(Signal::SIGTERM as i32),
        "{:?}",
        out.status
    );
    let line = last_line(&out);
    assert!(
        line.starts_with("fsync: interrupted by SIGTERM after waiting ")
            && line.ends_with(" for L"),
        "{line:?}"
    );
    assert!(!t.join("ran").exists());
    holder.finish().code(0);
}

#[test]
fn mutex_lock_fd_says_what_it_waits_for_and_how_long() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let who = holder_pid(&holder);
    let path = t.join("L").canonicalize().unwrap();
    let what = format!("fd 9 ({})", path.display());
    let (waiter, _) = blocked(
        t.sh(r#"exec 9>>L; exec "$FSYNC" mutex lock -v --fd 9"#),
        &what,
        Some(&who),
    );
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, &format!("acquired {what} after "));

    let holder = t.hold("L");
    gives_up(
        t.sh(r#"exec 9>>L; exec "$FSYNC" mutex lock -v -t 300ms --fd 9"#),
        &what,
        Some(&holder_pid(&holder)),
    );
    holder.finish().code(0);
}

/// A range has no holder record: the kernel and /proc name the holder (the `fsync mutex run
/// --range` that took it, not the command it passed it down to), as for the whole file.
#[test]
fn mutex_run_range_names_the_holder_and_says_how_long() {
    let t = TestDir::new();
    let hold = || {
        t.fsync([
            "mutex", "run", "--range", "5:10", "L", "--", "sh", "-c", HOLD,
        ])
        .hold()
    };
    let holder = hold();
    let (waiter, line) = blocked(
        t.fsync(["mutex", "run", "-v", "--range", "7", "L", "--", "true"]),
        "bytes 7:1 of L",
        Some(&holder_pid(&holder)),
    );
    assert!(line.contains(HOLD), "the holder's command: {line:?}");
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, "acquired bytes 7:1 of L after ");

    let holder = hold();
    gives_up(
        t.fsync([
            "mutex", "run", "-v", "-t", "300ms", "--range", "7", "L", "--", "true",
        ]),
        "bytes 7:1 of L",
        Some(&holder_pid(&holder)),
    );
    holder.finish().code(0);
}

#[test]
fn mutex_lock_fd_range_names_the_holder_and_says_how_long() {
    let t = TestDir::new();
    let hold = || {
        t.fsync([
            "mutex", "run", "--range", "5:10", "L", "--", "sh", "-c", HOLD,
        ])
        .hold()
    };
    let holder = hold();
    let path = t.join("L").canonicalize().unwrap();
    let what = format!("bytes 9:1 of fd 9 ({})", path.display());
    let (waiter, _) = blocked(
        t.sh(r#"exec 9>>L; exec "$FSYNC" mutex lock -v --fd 9 --range 9"#),
        &what,
        Some(&holder_pid(&holder)),
    );
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, &format!("acquired {what} after "));

    let holder = hold();
    gives_up(
        t.sh(r#"exec 9>>L; exec "$FSYNC" mutex lock -v -t 300ms --fd 9 --range 9"#),
        &what,
        Some(&holder_pid(&holder)),
    );
    holder.finish().code(0);
}

// ---- group -----------------------------------------------------------------------------

#[test]
fn group_join_names_who_holds_the_join_step() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("G")).unwrap();
    let holder = t.hold("G/join.lock");
    let who = holder_pid(&holder);
    let (waiter, _) = blocked(
        t.fsync(["group", "join", "-v", "G", "--", "true"]),
        "G to let us join",
        Some(&who),
    );
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    assert!(
        out.stderr
            .contains("fsync: joined G as its first member after "),
        "{}",
        out.stderr
    );

    let holder = t.hold("G/join.lock");
    gives_up(
        t.fsync(["group", "join", "-v", "-t", "300ms", "G", "--", "true"]),
        "G to let us join",
        Some(&holder_pid(&holder)),
    );
    holder.finish().code(0);
}

#[test]
fn group_wait_empty_names_the_members() {
    let t = TestDir::new();
    let join = || {
        t.fsync(["group", "join", "G", "--", "sh", "-c", HOLD])
            .hold()
    };
    let member = join();
    let who = format!("pid {} ", member.pid());
    let (waiter, line) = blocked(
        t.fsync(["group", "wait-empty", "-v", "G"]),
        "G to be empty",
        Some(&who),
    );
    assert!(line.contains(", since "), "{line:?}");
    member.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, "G is empty after ");

    let member = join();
    gives_up(
        t.fsync(["group", "wait-empty", "-v", "-t", "300ms", "G"]),
        "G to be empty",
        Some(&format!("pid {} ", member.pid())),
    );
    member.finish().code(0);
}

// ---- event, msg, bus -------------------------------------------------------------------

#[test]
fn event_wait_says_how_long_it_waited() {
    let t = TestDir::new();
    let (waiter, line) = blocked(t.fsync(["event", "wait", "-v", "E"]), "event E", None);
    assert_eq!(line, "fsync: waiting for event E");
    t.fsync(["event", "signal", "E"]).run().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, "event E is set after ");

    t.fsync(["event", "reset", "E"]).run().code(0);
    gives_up(
        t.fsync(["event", "wait", "-v", "-t", "300ms", "E"]),
        "event E",
        None,
    );
}

#[test]
fn msg_recv_says_what_it_waits_for_and_how_long() {
    let t = TestDir::new();
    let (waiter, _) = blocked(
        t.fsync(["msg", "recv", "-v", "BOX"]),
        "a message in BOX",
        None,
    );
    t.fsync(["msg", "post", "BOX", "--data", "hello"])
        .run()
        .code(0);
    let out = waiter.finish();
    out.code(0).stdout("hello\n"); // (as lines: the payload has no newline)
    got_it(&out, "received a message from BOX after ");

    gives_up(
        t.fsync(["msg", "recv", "-v", "-t", "300ms", "BOX"]),
        "a message in BOX",
        None,
    );
}

#[test]
fn msg_send_says_what_it_waits_for_and_how_long() {
    let t = TestDir::new();
    let (sender, _) = blocked(
        t.fsync(["msg", "send", "-v", "BOX", "--data", "hello"]),
        "a receiver to take the message in BOX",
        None,
    );
    t.fsync(["msg", "recv", "BOX"])
        .run()
        .code(0)
        .stdout("hello");
    let out = sender.finish();
    out.code(0);
    got_it(&out, "a receiver took the message in BOX after ");

    let out = t
        .fsync(["msg", "send", "-v", "-t", "300ms", "BOX", "--data", "late"])
        .run();
    out.code(75);
    let lines: Vec<&str> = out.stderr.lines().collect();
    let gave_up = lines
        .iter()
        .find(|l| {
            l.starts_with("fsync: gave up waiting for a receiver to take the message in BOX after ")
        })
        .unwrap_or_else(|| panic!("no `gave up` line: {}", out.stderr));
    assert!(seconds_after(gave_up) >= 0.29, "{gave_up}");
    assert!(out.stderr.contains("withdrawn"), "{}", out.stderr);
}

#[test]
fn bus_recv_says_what_it_waits_for_and_how_long() {
    let t = TestDir::new();
    for name in ["a", "b"] {
        t.fsync(["bus", "connect", "BUS", name]).run().code(0);
    }
    let (waiter, _) = blocked(
        t.fsync(["bus", "recv", "-v", "BUS", "b"]),
        "a message for b on BUS",
        None,
    );
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "b", "--data", "hi",
    ])
    .run()
    .code(0);
    let out = waiter.finish();
    out.code(0).stdout("hi\n"); // (as lines: the payload has no newline)
    got_it(&out, "received a message for b on BUS from a after ");

    gives_up(
        t.fsync(["bus", "recv", "-v", "-t", "300ms", "BUS", "b"]),
        "a message for b on BUS",
        None,
    );
}

// ---- swmr, sem, grouplock --------------------------------------------------------------

#[test]
fn swmr_names_the_writer_and_counts_the_readers() {
    let t = TestDir::new();
    let hold = |verb: &str| t.fsync(["swmr", verb, "L", "--", "sh", "-c", HOLD]).hold();
    let writer = hold("write");
    let who = format!("held by the writer pid {} ", writer.pid());
    let (reader, _) = blocked(
        t.fsync(["swmr", "read", "-v", "L", "--", "true"]),
        "L as a reader",
        Some(&who),
    );
    writer.finish().code(0);
    let out = reader.finish();
    out.code(0);
    got_it(&out, "acquired L as a reader after ");

    let reader = hold("read");
    let (writer, _) = blocked(
        t.fsync(["swmr", "write", "-v", "L", "--", "true"]),
        "L as the writer",
        Some("held by 1 reader"),
    );
    reader.finish().code(0);
    let out = writer.finish();
    out.code(0);
    got_it(&out, "acquired L as the writer after ");

    let writer = hold("write");
    let who = format!("held by the writer pid {} ", writer.pid());
    gives_up(
        t.fsync(["swmr", "read", "-v", "-t", "300ms", "L", "--", "true"]),
        "L as a reader",
        Some(&who),
    );
    writer.finish().code(0);
}

#[test]
fn sem_run_names_the_slot_holders() {
    let t = TestDir::new();
    let hold = || {
        t.fsync(["sem", "run", "S", "--slots", "1", "--", "sh", "-c", HOLD])
            .hold()
    };
    let holder = hold();
    let who = format!("slot 0 held by pid {} ", holder.pid());
    let (waiter, line) = blocked(
        t.fsync(["sem", "run", "-v", "S", "--slots", "1", "--", "true"]),
        "a slot of S",
        Some(&who),
    );
    assert!(line.contains(", since ") && line.contains(HOLD), "{line:?}");
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, "acquired slot 0 of S after ");

    let holder = hold();
    let who = format!("slot 0 held by pid {} ", holder.pid());
    gives_up(
        t.fsync([
            "sem", "run", "-v", "-t", "300ms", "S", "--slots", "1", "--", "true",
        ]),
        "a slot of S",
        Some(&who),
    );
    holder.finish().code(0);
}

#[test]
fn grouplock_run_names_the_group_inside() {
    let t = TestDir::new();
    let hold = || {
        t.fsync([
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
        .hold()
    };
    let holder = hold();
    let (waiter, _) = blocked(
        t.fsync(["grouplock", "run", "-v", "L", "--group", "b", "--", "true"]),
        "L as group b",
        Some("held by group a (1 inside)"),
    );
    holder.finish().code(0);
    let out = waiter.finish();
    out.code(0);
    got_it(&out, "entered L as group b after ");

    let holder = hold();
    gives_up(
        t.fsync([
            "grouplock",
            "run",
            "-v",
            "-t",
            "300ms",
            "L",
            "--group",
            "b",
            "--",
            "true",
        ]),
        "L as group b",
        Some("held by group a (1 inside)"),
    );
    holder.finish().code(0);
}

// ---- on a terminal ---------------------------------------------------------------------

/// On a terminal the waiting line is rewritten in place while the wait lasts, then replaced
/// by the line that says how it ended.
#[test]
fn on_a_terminal_the_waiting_line_is_rewritten_in_place() {
    require("script", "util-linux");
    let t = TestDir::new();
    let holder = t.hold("L");
    let out = t
        .cmd("script")
        .args([
            "-qec",
            r#""$FSYNC" mutex run -v -t 1500ms L -- true"#,
            "/dev/null",
        ])
        .run();
    let text = out.stdout.replace("\r\n", "\n");
    let redraws = text.matches("\r\x1b[Kfsync: waiting ").count();
    assert!(redraws >= 2, "the waiting line was not rewritten: {text:?}");
    let last = text.rsplit("\r\x1b[K").next().unwrap_or_default();
    assert!(
        last.starts_with("fsync: gave up waiting for L after 1.")
            && last.trim_end().ends_with(')')
            && last.lines().count() == 1,
        "the last line: {last:?} (all: {text:?})"
    );
    holder.finish().code(0);
}
