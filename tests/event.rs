//! `fsync event`: one signal wakes exactly one `--reset` waiter (and every plain waiter), exit
//! codes, a signal outlives its signaller, waiting needs only read access, and `signal` and
//! `reset` tell exactly one of racing processes that it changed the event (`--json`).
//!
//! Waiters run with `-v` and the tests read their `waiting for` line before signalling, so every
//! waiter really is blocked (and competing) when the signal comes. Which waiters woke is read from
//! their exits (`try_wait` under the harness deadline), never from sleeps.

use nix::sys::signal::Signal;

use crate::harness::{Cmd, Holder, TestDir, eventually, fsync_bin, json_of, require, require_root};

/// Start `fsync event wait -v ARGS... EVENT` and return once it says it is waiting.
#[track_caller]
fn waiter(cmd: Cmd) -> Holder {
    let mut w = cmd.start();
    let line = w.stderr_line();
    assert!(
        line.starts_with("fsync: waiting for event"),
        "a waiter said {line:?} instead of `fsync: waiting for event ...`"
    );
    w
}

/// How many of `waiters` have exited (they are reaped as they go).
fn exited(waiters: &mut [Holder]) -> usize {
    waiters
        .iter_mut()
        .map(|w| !w.running())
        .filter(|&gone| gone)
        .count()
}

#[track_caller]
fn status(t: &TestDir, event: &str) -> i32 {
    let out = t.fsync(["event", "status", event]).run();
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "`fsync event status {event}` gave {code:?} (stderr: {})",
        out.stderr
    );
    code.unwrap()
}

#[test]
fn one_signal_wakes_exactly_one_resetting_waiter() {
    let t = TestDir::new();
    let mut waiters: Vec<Holder> = (0..4)
        .map(|_| waiter(t.fsync(["event", "wait", "--reset", "-v", "E"])))
        .collect();
    assert_eq!(exited(&mut waiters), 0, "a waiter left an unset event");

    t.fsync(["event", "signal", "E"]).run().code(0).stdout("");
    eventually("a --reset waiter woke after the first signal", || {
        exited(&mut waiters) >= 1
    });
    assert_eq!(status(&t, "E"), 1, "the waiter that woke did not consume E");
    assert!(!t.join("E").exists(), "E exists after it was consumed");
    assert_eq!(
        exited(&mut waiters),
        1,
        "one signal woke more than one --reset waiter"
    );
    let first: Vec<usize> = (0..4).filter(|&i| !waiters[i].running()).collect();
    assert_eq!(
        waiters[first[0]].wait_exit().code(),
        Some(0),
        "the woken waiter did not exit 0"
    );

    t.fsync(["event", "signal", "E"]).run().code(0).stdout("");
    eventually(
        "a second --reset waiter woke after the second signal",
        || exited(&mut waiters) >= 2,
    );
    assert_eq!(status(&t, "E"), 1, "the second signal was not consumed");
    // Give an extra wake-up the chance to show: a 300 ms wait that must time out (a payload,
    // not a synchronisation), then count again.
    t.fsync(["event", "wait", "-t", "300ms", "E"])
        .run()
        .code(75);
    assert_eq!(
        exited(&mut waiters),
        2,
        "two signals woke other than exactly two --reset waiters"
    );
    let mut still_waiting = 0;
    for w in &mut waiters {
        if w.running() {
            still_waiting += 1;
            w.signal(Signal::SIGKILL);
            w.wait_exit();
        } else {
            assert_eq!(
                w.wait_exit().code(),
                Some(0),
                "a woken waiter did not exit 0"
            );
        }
    }
    assert_eq!(still_waiting, 2);
    assert_eq!(status(&t, "E"), 1);
}

#[test]
fn plain_wait_wakes_every_waiter_and_leaves_the_event_set() {
    let t = TestDir::new();
    let waiters: Vec<Holder> = (0..3)
        .map(|_| waiter(t.fsync(["event", "wait", "-v", "E"])))
        .collect();
    t.fsync(["event", "signal", "E"]).run().code(0);
    for w in waiters {
        w.finish().code(0).stdout("");
    }
    assert_eq!(status(&t, "E"), 0, "a plain wait consumed the event");
    // And it stays set for later waiters.
    t.fsync(["event", "wait", "-n", "E"]).run().code(0);
    assert_eq!(status(&t, "E"), 0);
}

#[test]
fn exit_codes_of_signal_wait_reset_and_status() {
    let t = TestDir::new();
    assert_eq!(status(&t, "E"), 1, "a never-signalled event is set");
    let out = t.fsync(["event", "wait", "-t", "300ms", "E"]).run();
    out.code(75).stdout("");
    assert!(
        out.elapsed.as_millis() >= 250,
        "`wait -t 300ms` gave up after only {:?}",
        out.elapsed
    );
    t.fsync(["event", "wait", "-n", "E"]).run().code(75);
    t.fsync(["event", "wait", "-t", "300ms", "-E", "9", "E"])
        .run()
        .code(9);
    t.fsync(["event", "wait", "--reset", "-n", "-E", "9", "E"])
        .run()
        .code(9);
    assert!(!t.join("E").exists(), "a wait created the event");

    t.fsync(["event", "signal", "E"]).run().code(0).stderr("");
    t.fsync(["event", "signal", "E"]).run().code(0).stderr(""); // already set: still 0
    assert_eq!(status(&t, "E"), 0);
    // Already set: returns at once, even with -n, and leaves it set.
    let out = t.fsync(["event", "wait", "E"]).run();
    out.code(0);
    assert!(
        out.elapsed.as_secs() < 10,
        "waiting on a set event took {:?}",
        out.elapsed
    );
    t.fsync(["event", "wait", "-n", "E"]).run().code(0);
    assert_eq!(status(&t, "E"), 0);
    // --reset on a set event: 0 at once, and consumed.
    t.fsync(["event", "wait", "--reset", "-n", "E"])
        .run()
        .code(0);
    assert_eq!(status(&t, "E"), 1);
    t.fsync(["event", "wait", "--reset", "-n", "E"])
        .run()
        .code(75);

    t.fsync(["event", "signal", "E"]).run().code(0);
    t.fsync(["event", "reset", "E"]).run().code(0).stderr("");
    assert_eq!(status(&t, "E"), 1);
    t.fsync(["event", "reset", "E"]).run().code(0).stderr(""); // already clear: still 0
    assert_eq!(status(&t, "E"), 1);

    // A missing parent directory is an operational error naming the path.
    let missing = t.arg("no/such/E");
    t.fsync(["event", "signal", &missing])
        .run()
        .operational_error(&missing);
}

#[test]
fn a_signal_survives_the_sigkill_of_its_signaller() {
    let t = TestDir::new();
    let mut signaller = t
        .sh("\"$FSYNC\" event signal E && echo acquired && read x")
        .hold();
    signaller.signal(Signal::SIGKILL);
    assert_eq!(signaller.wait_exit().code(), None, "not killed");
    assert!(t.join("E").is_file(), "the event file is gone");
    assert_eq!(status(&t, "E"), 0);
    t.fsync(["event", "wait", "-n", "E"]).run().code(0);
    t.fsync(["event", "wait", "--reset", "-n", "E"])
        .run()
        .code(0);
    assert_eq!(status(&t, "E"), 1);
}

/// `fsync event ARGS...` as the unprivileged user `nobody`.
fn as_nobody<const N: usize>(t: &TestDir, args: [&str; N]) -> Cmd {
    t.cmd("runuser")
        .args(["-u", "nobody", "--"])
        .arg(fsync_bin())
        .args(args)
}

#[test]
#[ignore = "needs root: a root-owned directory that a second user (runuser -u nobody) may only read; .ci/run runs it with --ignored"]
fn waiting_needs_only_read_access() {
    require_root();
    require("runuser", "util-linux");
    let t = TestDir::new();
    t.open_to_others(); // root-owned, 0755: nobody may read it, not write it
    let event = t.arg("E");

    // The set-up is what we mean: nobody cannot change the directory.
    as_nobody(&t, ["event", "signal", &event])
        .run()
        .operational_error(&event);
    assert!(!t.join("E").exists());

    let mut w = waiter(as_nobody(&t, ["event", "wait", "-v", &event]));
    assert!(w.running());
    t.fsync(["event", "signal", &event]).run().code(0);
    w.finish().code(0);
    assert_eq!(status(&t, &event), 0, "nobody's wait changed the event");

    // Already set: at once, as nobody too.
    as_nobody(&t, ["event", "wait", "-n", &event]).run().code(0);
    as_nobody(&t, ["event", "status", &event]).run().code(0);
    t.fsync(["event", "reset", &event]).run().code(0);
    as_nobody(&t, ["event", "wait", "-t", "300ms", &event])
        .run()
        .code(75);
}

/// `fsync event VERB --json E` in `n` processes started together (each waits for a line on its
/// stdin, all of which are sent at once): what each said about `was_set`.
fn racing(t: &TestDir, verb: &str, n: usize) -> Vec<bool> {
    let script = format!("read x; exec \"$FSYNC\" event {verb} --json E");
    let mut racers: Vec<Holder> = (0..n).map(|_| t.sh(&script).start()).collect();
    for r in &mut racers {
        r.send("go");
    }
    racers
        .into_iter()
        .map(|r| {
            let out = r.finish();
            out.code(0).stderr("");
            let v = json_of(&out.stdout);
            v["was_set"]
                .as_bool()
                .unwrap_or_else(|| panic!("no was_set: {v}"))
        })
        .collect()
}

/// Whether it was set is the answer of the operation itself: of processes signalling an unset
/// event at once exactly one is told it was not set; of processes resetting a set one exactly
/// one is told it was.
#[test]
fn signal_and_reset_tell_exactly_one_racer_that_they_changed_the_event() {
    let t = TestDir::new();
    for round in 0..5 {
        let said = racing(&t, "signal", 6);
        let setters = said.iter().filter(|&&was_set| !was_set).count();
        assert_eq!(setters, 1, "round {round}: signals said {said:?}");
        assert_eq!(status(&t, "E"), 0);
        let said = racing(&t, "reset", 6);
        let clearers = said.iter().filter(|&&was_set| was_set).count();
        assert_eq!(clearers, 1, "round {round}: resets said {said:?}");
        assert_eq!(status(&t, "E"), 1);
    }
}

/// A reset and `--reset` waiters compete for one signal: exactly one of them gets it, and only
/// the reset that got it says it was set.
#[test]
fn reset_and_resetting_waiters_share_one_signal_between_them() {
    let t = TestDir::new();
    let mut waiters: Vec<Holder> = (0..2)
        .map(|_| waiter(t.fsync(["event", "wait", "--reset", "-v", "E"])))
        .collect();
    let mut resetter = t.sh("read x; exec \"$FSYNC\" event reset --json E").start();
    t.fsync(["event", "signal", "E"]).run().code(0);
    resetter.send("go");
    let out = resetter.finish();
    let reset_got_it = json_of(&out.code(0).stdout)["was_set"] == true;
    // Whoever got it has consumed it; a waiter that did exits.
    eventually("the signal was consumed", || status(&t, "E") == 1);
    let want_woken = usize::from(!reset_got_it);
    eventually("the waiter that got the signal exited", || {
        exited(&mut waiters) == want_woken
    });
    // Give a second wake-up the chance to show (a payload, not a synchronisation): a wait that
    // must time out, then count again.
    t.fsync(["event", "wait", "-t", "300ms", "E"])
        .run()
        .code(75);
    assert_eq!(
        exited(&mut waiters),
        want_woken,
        "one signal woke a waiter and a reset said it was set: {}",
        out.stdout
    );
    for w in &mut waiters {
        if w.running() {
            w.signal(Signal::SIGKILL);
        }
        w.wait_exit();
    }
}

/// Without --json nothing is printed; with it, one line, whatever the answer.
#[test]
fn signal_and_reset_print_only_with_json() {
    let t = TestDir::new();
    t.fsync(["event", "signal", "E"]).run().code(0).stdout("");
    t.fsync(["event", "reset", "E"]).run().code(0).stdout("");
    t.fsync(["event", "signal", "--json", "E"])
        .run()
        .code(0)
        .stdout("{\"path\":\"E\",\"was_set\":false}\n");
    t.fsync(["event", "reset", "--json", "E"])
        .run()
        .code(0)
        .stdout("{\"path\":\"E\",\"was_set\":true}\n");
    // An error prints no JSON.
    t.fsync(["event", "signal", "--json", "no/such/E"])
        .run()
        .stdout("")
        .operational_error("no/such/E");
}
