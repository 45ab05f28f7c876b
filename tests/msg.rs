//! `fsync msg`: exactly-once delivery among competing receivers, FIFO order, binary and empty
//! payloads, synchronous sends (returned only after pickup; withdrawn on timeout; discarded when
//! the sender is killed), recovery of a message whose receiver was killed mid-delivery, and
//! `list`.
//!
//! The tests look into the mailbox directory only where the documented protocol (src/msg.rs)
//! names a state: `q/` (queued) and `claimed/` (being received).

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Read,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{Cmd, TestDir, eventually, first_shard, fsync_bin, json_of, queued_files};

#[track_caller]
fn post(t: &TestDir, mailbox: &str, data: &str) {
    t.fsync(["msg", "post", "-q", mailbox, "--data", data])
        .run()
        .code(0)
        .stdout("");
}

/// `fsync msg recv -n BOX`: the payload, or `None` on 75.
#[track_caller]
fn recv_now(t: &TestDir, mailbox: &str) -> Option<Vec<u8>> {
    let out = t.fsync(["msg", "recv", "-n", mailbox]).run();
    match out.status.code() {
        Some(0) => Some(out.stdout_bytes),
        Some(75) => None,
        _ => {
            out.code(0);
            unreachable!()
        }
    }
}

/// Receive with `-n` until the mailbox is empty: the payloads in the order received.
#[track_caller]
fn drain(t: &TestDir, mailbox: &str) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| recv_now(t, mailbox)).collect()
}

#[track_caller]
fn drain_text(t: &TestDir, mailbox: &str) -> Vec<String> {
    drain(t, mailbox)
        .into_iter()
        .map(|p| String::from_utf8(p).expect("a UTF-8 payload came back as something else"))
        .collect()
}

#[track_caller]
fn list(t: &TestDir, mailbox: &str) -> Value {
    let out = t.fsync(["msg", "list", "--json", mailbox]).run();
    out.code(0);
    assert_eq!(
        out.stdout.lines().count(),
        1,
        "not one line: {}",
        out.stdout
    );
    json_of(&out.stdout)
}

/// The count `msg list --json` gives, or `None` while the mailbox does not exist yet (66).
#[track_caller]
fn listed_count(t: &TestDir, mailbox: &str) -> Option<u64> {
    let out = t.fsync(["msg", "list", "--json", mailbox]).run();
    if out.status.code() == Some(66) {
        // Missing, or made but for its queue directory, which comes a moment later.
        out.stdout("").stderr_has(&format!("fsync: {mailbox}: n"));
        return None;
    }
    json_of(&out.code(0).stdout)["count"].as_u64()
}

/// The entries of a state directory of the mailbox (`q`, `claimed`), or none if it is missing.
fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Err(_) => Vec::new(),
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
    }
}

/// `n` pseudo-random bytes (xorshift, seeded from the clock; the seed is in failure messages)
/// with at least one NUL.
fn random_bytes(n: usize) -> (u64, Vec<u8>) {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut x = seed;
    let mut bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    bytes[n / 2] = 0;
    bytes[n - 1] = 0;
    bytes[0] = 0xff;
    (seed, bytes)
}

/// `fsync msg VERB BOX < FILE` (a binary payload on standard input).
fn from_file(t: &TestDir, verb: &str, mailbox: &str, file: &str) -> Cmd {
    t.sh("exec \"$FSYNC\" msg \"$1\" \"$2\" < \"$3\"")
        .args(["sh", verb, mailbox, file])
}

#[test]
fn each_of_60_messages_goes_to_exactly_one_of_3_competing_receivers() {
    let t = TestDir::new();
    let sent: BTreeSet<String> = (0..60).map(|i| format!("m{i:02}")).collect();
    for m in &sent {
        post(&t, "B", m);
    }
    let got: Vec<Vec<String>> = std::thread::scope(|s| {
        let receivers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let out = t.fsync(["msg", "recv", "-t", "2s", "B"]).run();
                        if let Some(0) = out.status.code() {
                            mine.push(out.stdout.clone());
                        } else {
                            out.code(75).stdout("");
                            return mine;
                        }
                    }
                })
            })
            .collect();
        receivers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let all: Vec<&String> = got.iter().flatten().collect();
    let unique: BTreeSet<String> = all.iter().map(|s| (*s).clone()).collect();
    assert_eq!(
        all.len(),
        unique.len(),
        "a message was received twice: {got:?}"
    );
    assert_eq!(unique, sent, "received other than the 60 messages: {got:?}");
    // Each receiver's share came out in queue order.
    for mine in &got {
        let mut sorted = mine.clone();
        sorted.sort();
        assert_eq!(mine, &sorted, "a receiver got messages out of order");
    }
    assert_eq!(list(&t, "B")["count"], 0);
    assert_eq!(recv_now(&t, "B"), None);
}

#[test]
fn messages_come_out_in_the_order_posted() {
    let t = TestDir::new();
    let sent: Vec<String> = (1..=20).map(|i| format!("m{i}")).collect();
    for m in &sent {
        post(&t, "B", m);
    }
    // m10 sorts before m2 by name: the order must be the queue's, not the payloads'.
    assert_eq!(drain_text(&t, "B"), sent);
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(75)
        .stdout("");
}

#[test]
fn binary_and_empty_payloads_arrive_byte_for_byte() {
    let t = TestDir::new();
    let (seed, binary) = random_bytes(100_000);
    std::fs::write(t.join("binary"), &binary).unwrap();
    std::fs::write(t.join("empty"), b"").unwrap();

    // post: binary and empty from stdin, empty from --data.
    from_file(&t, "post", "B", "binary").run().code(0);
    from_file(&t, "post", "B", "empty").run().code(0);
    t.fsync(["msg", "post", "B", "--data", ""]).run().code(0);
    let l = list(&t, "B");
    let sizes: Vec<u64> = (l["messages"].as_array().unwrap().iter())
        .map(|m| m["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [100_000, 0, 0], "{l}");
    let got = drain(&t, "B");
    assert_eq!(got.len(), 3, "not three messages back");
    assert!(
        got[0] == binary,
        "the 100 kB binary payload changed through post/recv (seed {seed}): got {} bytes",
        got[0].len()
    );
    assert!(
        got[1].is_empty(),
        "the empty payload came back as {:?}",
        got[1]
    );
    assert!(
        got[2].is_empty(),
        "the empty payload came back as {:?}",
        got[2]
    );

    // send: each blocks until a (blocking) receiver takes it.
    for (file, want) in [("binary", &binary), ("empty", &Vec::new())] {
        let sender = from_file(&t, "send", "B", file).start();
        let out = t.fsync(["msg", "recv", "B"]).run();
        out.code(0);
        assert!(
            out.stdout_bytes == *want,
            "the {file} payload changed through send/recv (seed {seed}): got {} bytes",
            out.stdout_bytes.len()
        );
        sender.finish().code(0);
    }
    let sender = t.fsync(["msg", "send", "B", "--data", ""]).start();
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("");
    sender.finish().code(0);
    assert_eq!(recv_now(&t, "B"), None);
}

#[test]
fn send_returns_only_after_a_receiver_took_the_message() {
    let t = TestDir::new();
    let mut sender = t.fsync(["msg", "send", "B", "--data", "X"]).start();
    eventually("the synchronous message is listed", || {
        listed_count(&t, "B") == Some(1)
    });
    let l = list(&t, "B");
    assert_eq!(l["messages"][0]["sync"], true, "{l}");
    assert_eq!(l["messages"][0]["size"], 1, "{l}");
    assert!(
        sender.running(),
        "send returned while its message was still queued"
    );
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("X");
    // The id, printed once the message was queued.
    sender.finish().code(0).stdout("1\n");
    assert_eq!(list(&t, "B")["count"], 0);
    assert_eq!(recv_now(&t, "B"), None, "the sent message came twice");
}

#[test]
fn a_timed_out_send_is_never_delivered() {
    let t = TestDir::new();
    let out = t
        .fsync(["msg", "send", "-q", "-t", "300ms", "B", "--data", "late"])
        .run();
    out.code(75).stdout("");
    assert!(
        out.elapsed.as_millis() >= 250,
        "send -t 300ms gave up after {:?}",
        out.elapsed
    );
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(75)
        .stdout("");
    assert_eq!(list(&t, "B")["count"], 0, "the withdrawn message is listed");
    assert_eq!(queued_files(t.join("B")), Vec::<String>::new());
    assert_eq!(entries(&t.join("B/claimed")), Vec::<String>::new());
    // -E applies to send too.
    t.fsync(["msg", "send", "-n", "-E", "9", "B", "--data", "late"])
        .run()
        .code(9);
    post(&t, "B", "later");
    assert_eq!(
        drain_text(&t, "B"),
        ["later"],
        "a withdrawn message came back"
    );
}

/// A send that times out while a receiver that died holds its claim on the message (killed
/// between taking it and converting it) takes the message back and gives up: exit 75, and
/// nobody ever receives it. The receiver runs under strace, which holds it after the rename
/// that claims the message until the test kills it. (Mutant answered: a withdrawal that took
/// the dead receiver's claim for a living one's waited for it for ever, deaf to signals.)
#[test]
fn a_send_timing_out_while_a_dead_receiver_holds_its_claim_withdraws_the_message() {
    crate::harness::require("strace", "strace");
    let t = TestDir::new();
    let mut sender = t
        .fsync(["msg", "send", "-t", "3s", "B", "--data", "orphan"])
        .start();
    eventually("the synchronous message is listed", || {
        listed_count(&t, "B") == Some(1)
    });
    // The second rename of a receive is its claim (the first places its registration).
    let mut receiver = t
        .cmd("strace")
        .args(["-o", "/dev/null", "-e", "trace=renameat,renameat2"])
        .args(["-e", "inject=renameat,renameat2:delay_exit=60000000:when=2"])
        .arg(fsync_bin())
        .args(["msg", "recv", "B"])
        .start();
    let mut claim = String::new();
    eventually("the receiver claims the message", || {
        match entries(&t.join("B/claimed"))
            .into_iter()
            .find(|e| e.contains(".sync~"))
        {
            Some(e) => {
                claim = e;
                true
            }
            None => false,
        }
    });
    // The claim names the receiver: ...sync~HOST-PID-UNIQUE.
    let pid: i32 = claim
        .rsplit('-')
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    // strace itself would sit out the delay it injected.
    receiver.signal(Signal::SIGKILL);
    receiver.wait_exit();
    let status = sender.wait_exit_within(std::time::Duration::from_secs(30));
    assert_eq!(status.code(), Some(75), "the send did not give up");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(75)
        .stdout("");
    assert_eq!(list(&t, "B")["count"], 0, "the withdrawn message is listed");
    assert_eq!(entries(&t.join("B/claimed")), Vec::<String>::new());
}

/// A receive whose standard output cannot take the message (a full disk) fails, naming it,
/// and leaves the message queued for the next receiver. (Mutant answered: a copy that took the
/// write error for an interruption retried it for ever.)
#[test]
fn recv_to_a_full_standard_output_fails_and_keeps_the_message() {
    let t = TestDir::new();
    post(&t, "B", "kept");
    let out = t.sh(r#""$FSYNC" msg recv B > /dev/full"#).run();
    out.code(74)
        .stderr("fsync: standard output: cannot write message: no space left on device\n");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("kept");
}

#[test]
fn a_killed_senders_message_is_never_received() {
    let t = TestDir::new();
    let mut sender = t.fsync(["msg", "send", "B", "--data", "dead"]).start();
    eventually("the synchronous message is listed", || {
        listed_count(&t, "B") == Some(1)
    });
    assert_eq!(list(&t, "B")["messages"][0]["sync"], true);
    sender.signal(Signal::SIGKILL);
    assert_eq!(sender.wait_exit().code(), None, "the sender was not killed");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(75)
        .stdout("");
    assert_eq!(
        list(&t, "B")["count"],
        0,
        "the dead sender's message is listed"
    );
    post(&t, "B", "alive");
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("alive");
    assert_eq!(recv_now(&t, "B"), None);
}

/// A child killed (and reaped) when dropped, so a failing test leaves none behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_receiver_killed_mid_delivery_loses_nothing() {
    let t = TestDir::new();
    let (seed, big) = random_bytes(1 << 20); // far more than a pipe holds
    std::fs::write(t.join("big"), &big).unwrap();
    from_file(&t, "post", "B", "big").run().code(0);

    // A receiver whose stdout we read a little of and then leave: it blocks in write(2)
    // mid-payload, after its claim.
    let mut stuck = Reaped(
        Command::new(fsync_bin())
            .args(["msg", "recv", "B"])
            .current_dir(t.path())
            .env_remove("FSYNC_MUTEX_HELD")
            .env_remove("FSYNC_FENCE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start fsync msg recv"),
    );
    let mut pipe = stuck.0.stdout.take().unwrap();
    let mut head = vec![0u8; 4096];
    pipe.read_exact(&mut head)
        .expect("the receiver wrote nothing");
    assert!(
        head == big[..4096],
        "the payload starts wrong (seed {seed})"
    );
    assert_eq!(
        queued_files(t.join("B")),
        Vec::<String>::new(),
        "the message is still queued while being delivered"
    );
    assert_eq!(
        entries(&t.join("B/claimed")).len(),
        1,
        "the message being delivered is not in claimed/"
    );
    assert!(
        stuck.0.try_wait().unwrap().is_none(),
        "the receiver exited with 1 MiB unread"
    );
    stuck.0.kill().unwrap(); // SIGKILL, mid-payload
    stuck.0.wait().unwrap();
    drop(pipe);

    let out = t.fsync(["msg", "recv", "-n", "B"]).run();
    out.code(0);
    assert!(
        out.stdout_bytes == big,
        "the recovered payload differs (seed {seed}): {} bytes instead of {}",
        out.stdout_bytes.len(),
        big.len()
    );
    assert_eq!(recv_now(&t, "B").map(|p| p.len()), None, "delivered twice");
    assert_eq!(entries(&t.join("B/claimed")), Vec::<String>::new());
}

#[test]
fn four_concurrent_posters_each_message_once_in_per_sender_order() {
    let t = TestDir::new();
    std::thread::scope(|s| {
        for k in 0..4 {
            let t = &t;
            s.spawn(move || {
                for i in 0..25 {
                    post(t, "B", &format!("sender{k}-{i}"));
                }
            });
        }
    });
    assert_eq!(list(&t, "B")["count"], 100);
    let got = drain_text(&t, "B");
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(got.len(), 100, "not 100 messages: {got:?}");
    assert_eq!(unique.len(), 100, "duplicates: {got:?}");
    let mut per_sender: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for m in &got {
        let (k, i) = m
            .strip_prefix("sender")
            .and_then(|r| r.split_once('-'))
            .unwrap_or_else(|| panic!("a payload not sent: {m:?}"));
        per_sender
            .entry(k.parse().unwrap())
            .or_default()
            .push(i.parse().unwrap());
    }
    for k in 0..4 {
        assert_eq!(
            per_sender.get(&k),
            Some(&(0..25).collect::<Vec<_>>()),
            "sender {k}'s messages lost, doubled or out of order: {got:?}"
        );
    }
}

/// `claimed` counts the messages being received: none while all are queued, one while a job
/// runs. (Mutant answered: a directory listing that kept "." and ".." counted two claimed
/// messages in an idle mailbox.)
#[test]
fn list_counts_the_messages_being_received() {
    let t = TestDir::new();
    post(&t, "B", "one");
    post(&t, "B", "two");
    assert_eq!(list(&t, "B")["claimed"], 0);
    let job = t
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
    let l = list(&t, "B");
    assert_eq!(
        (l["claimed"].clone(), l["count"].clone()),
        (1.into(), 1.into()),
        "{l}"
    );
    job.signal(Signal::SIGTERM);
    drop(job);
}

#[test]
fn list_counts_and_sizes_and_a_missing_parent_is_an_error() {
    let t = TestDir::new();
    // A path that is no mailbox is an error, not an empty one, and makes nothing.
    t.fsync(["msg", "list", "--json", "B"])
        .run()
        .code(66)
        .stdout("")
        .stderr("fsync: B: no such mailbox\n");
    assert!(!t.path().join("B").exists());
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    let l = list(&t, "B");
    assert_eq!(l["count"], 0, "{l}");
    assert_eq!(l["messages"], serde_json::json!([]), "{l}");

    post(&t, "B", "");
    post(&t, "B", "hello");
    post(&t, "B", &"x".repeat(1000));
    let l = list(&t, "B");
    assert_eq!(l["count"], 3, "{l}");
    let msgs = l["messages"].as_array().unwrap();
    let sizes: Vec<u64> = msgs.iter().map(|m| m["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [0, 5, 1000], "{l}");
    for m in msgs {
        assert_eq!(m["sync"], false, "{l}");
        assert!(m["since"].is_string(), "{l}");
        assert!(m["name"].is_string(), "{l}");
    }
    let text = t.fsync(["msg", "list", "B"]).run();
    text.code(0).stdout_has("3 message");
    // list does not take anything.
    assert_eq!(drain(&t, "B").len(), 3);
    assert_eq!(list(&t, "B")["count"], 0);

    let missing = t.arg("no/such/B");
    t.fsync(["msg", "post", &missing, "--data", "x"])
        .run()
        .code(66)
        .error_naming(&missing);
    for verb in [
        &["msg", "send", "-n", &missing, "--data", "x"][..],
        &["msg", "recv", "-n", &missing],
        &["msg", "list", &missing],
    ] {
        t.fsync(verb).run().operational_error(&missing);
    }
    assert!(!t.join("no").exists(), "a missing parent was created");
}

/// Payloads are not readable by other users unless asked (`--mode`), whatever the umask.
#[test]
fn msg_payload_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestDir::new();
    let mode_of_queued = |t: &TestDir| {
        let entry = std::fs::read_dir(first_shard(t.join("B")))
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        entry.metadata().unwrap().permissions().mode() & 0o777
    };
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    assert_eq!(mode_of_queued(&t) & 0o007, 0, "others can read a payload");
    t.fsync(["msg", "recv", "-n", "B"]).run().code(0);
    t.fsync(["msg", "post", "B", "--mode", "0600", "--data", "x"])
        .run()
        .code(0);
    assert_eq!(mode_of_queued(&t), 0o600);
    t.fsync(["msg", "post", "B", "--mode", "999", "--data", "x"])
        .run()
        .code(2);
}

/// With standard output closed, the files fsync opens must not take its place: the payload
/// would go into one of them. `recv` fails (it cannot write) and the message stays queued.
#[test]
fn recv_with_stdout_closed_fails_and_keeps_the_message() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "b", "--data", "hello"])
        .run()
        .code(0);
    let out = t.sh(r#""$FSYNC" msg recv -n b >&-"#).run();
    out.operational_error("standard output");
    t.fsync(["msg", "recv", "-n", "b"])
        .run()
        .code(0)
        .stdout("hello");
    // Closed stdin and stderr are harmless too.
    t.fsync(["msg", "post", "b", "--data", "again"])
        .run()
        .code(0);
    t.sh(r#""$FSYNC" msg recv -n b <&- 2>&-"#)
        .run()
        .code(0)
        .stdout("again");
}

/// The registrations (`recv/RID`) of receivers killed while they wait: SIGKILL leaves them, the
/// next receiver removes them, and never a living receiver's.
#[test]
fn a_receiver_reaps_killed_receivers_registrations_and_no_living_one() {
    let t = TestDir::new();
    let registrations = || {
        let mut names: Vec<String> = std::fs::read_dir(t.join("B/recv"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| !name.starts_with(".spare-")) // kept for a full file system
            .collect();
        names.sort();
        names
    };
    let mut living = t.fsync(["msg", "recv", "-v", "B"]).start();
    assert!(living.stderr_line().contains("waiting"));
    let alive = registrations();
    assert_eq!(alive.len(), 1, "{alive:?}");
    for _ in 0..3 {
        let mut r = t.fsync(["msg", "recv", "-v", "B"]).start();
        assert!(r.stderr_line().contains("waiting"));
        r.signal(Signal::SIGKILL);
        r.wait_exit();
    }
    // Each receiver reaped those killed before it; the last one's is left.
    let left = registrations();
    assert!(left.len() >= 2 && left.contains(&alive[0]), "{left:?}");
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    assert_eq!(
        registrations(),
        alive,
        "dead ones left, or the living one taken"
    );
    // The living receiver is still one.
    t.fsync(["msg", "post", "B", "--data", "y"]).run().code(0);
    living.finish().code(0).stdout("y\n");
    assert_eq!(registrations(), Vec::<String>::new());
}

/// `msg recv BOX -- COMMAND`: COMMAND gets the payload on stdin and the message's id and
/// attempt in its environment; fsync exits with its status.
#[test]
fn a_job_runs_with_the_payload_on_stdin_and_is_removed_only_when_it_succeeds() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "build docs"])
        .run()
        .code(0);
    t.fsync(["msg", "post", "B", "--data", "second"])
        .run()
        .code(0);
    let job = "printf '%s|%s|' \"$FSYNC_MSG_ID\" \"$FSYNC_MSG_ATTEMPT\"; cat; exit \"$1\"";
    // A job that fails: its status passes through, the message goes back counted, first.
    let no_backoff = ["msg", "recv", "--backoff", "0", "B"];
    t.fsync(no_backoff)
        .args(["--", "sh", "-c", job, "sh", "3"])
        .run()
        .code(3)
        .stdout("1|1|build docs");
    assert_eq!(list(&t, "B")["messages"][0]["failed"], 1);
    t.fsync(["msg", "recv", "B", "--", "sh", "-c", job, "sh", "0"])
        .run()
        .code(0)
        .stdout("1|2|build docs");
    t.fsync(["msg", "recv", "B", "--", "sh", "-c", job, "sh", "0"])
        .run()
        .code(0)
        .stdout("2|1|second");
    assert_eq!(list(&t, "B")["count"], 0);
    // A command that cannot be started is no failed attempt.
    t.fsync(["msg", "post", "B", "--data", "third"])
        .run()
        .code(0);
    t.fsync(["msg", "recv", "B", "--", "./no-such-command"])
        .run()
        .code(127);
    let v = list(&t, "B");
    assert_eq!(
        (v["count"].clone(), v["messages"][0]["failed"].clone()),
        (1.into(), 0.into()),
        "{v}"
    );
}

/// `--retries N`: the N+1-th failure moves the message to the dead letters, which `list`
/// shows and `retry` puts back with its failures forgotten.
#[test]
fn a_poison_job_reaches_the_dead_letters_after_exactly_retries_plus_one_attempts() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "poison"])
        .run()
        .code(0);
    for attempt in 1..=3 {
        let out = t
            .fsync([
                "msg",
                "recv",
                "-v",
                "-n",
                "--retries",
                "2",
                "--backoff",
                "0",
                "B",
                "--",
                "sh",
                "-c",
                "echo $FSYNC_MSG_ATTEMPT; exit 1",
            ])
            .run();
        out.code(1).stdout(&format!("{attempt}\n"));
        if attempt == 3 {
            out.stderr_has("moved to the dead letters");
        }
    }
    t.fsync(["msg", "recv", "-n", "--retries", "2", "B", "--", "true"])
        .run()
        .code(75);
    let v = list(&t, "B");
    assert_eq!(v["count"], 0, "{v}");
    assert_eq!(v["dead"][0]["failed"], 3, "{v}");
    let text = t.fsync(["msg", "list", "B"]).run();
    text.code(0)
        .stdout_has("dead after 3 failed attempts")
        .stdout_has("1 dead letter");
    t.fsync(["msg", "retry", "-v", "B", "1"])
        .run()
        .code(0)
        .stderr_has("put message 1 back");
    t.fsync([
        "msg",
        "recv",
        "B",
        "--",
        "sh",
        "-c",
        "echo $FSYNC_MSG_ATTEMPT; cat",
    ])
    .run()
    .code(0)
    .stdout("1\npoison");
    assert_eq!(list(&t, "B")["dead"], Value::Array(Vec::new()));
}

/// A worker killed with its command (SIGKILL to both) loses no job: the message comes again,
/// its attempt counted. A job cancelled by a signal fsync passes on goes back uncounted.
#[test]
fn a_job_survives_its_worker_being_killed_and_a_cancelled_job_is_not_counted() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "long job"])
        .run()
        .code(0);
    let mut worker = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            "echo started; exec sleep 60",
        ])
        .own_process_group()
        .start();
    worker.expect("started");
    worker.kill_process_group();
    let mut worker = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            "echo $FSYNC_MSG_ATTEMPT; exec sleep 60",
        ])
        .start();
    worker.expect("2");
    worker.signal(Signal::SIGTERM);
    let status = worker.wait_exit();
    assert!(!status.success(), "{status:?}");
    t.fsync([
        "msg",
        "recv",
        "B",
        "--",
        "sh",
        "-c",
        "echo $FSYNC_MSG_ATTEMPT; cat",
    ])
    .run()
    .code(0)
    .stdout("2\nlong job");
}

/// `msg wait-empty` does not return while a job runs: only once it is done.
#[test]
fn wait_empty_returns_only_once_the_running_job_is_done() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "job"]).run().code(0);
    let gate = t.hold("gate.lck");
    let mut worker = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            "echo started; flock gate.lck true",
        ])
        .start();
    worker.expect("started");
    t.fsync(["msg", "wait-empty", "-n", "B"]).run().code(75);
    let mut waiter = t.fsync(["msg", "wait-empty", "-v", "B"]).start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    assert!(waiter.running(), "wait-empty returned while the job ran");
    drop(gate); // the job ends, and with it the work
    assert!(worker.wait_exit().success());
    assert!(waiter.wait_exit().success());
    assert_eq!(list(&t, "B")["count"], 0);
}

/// A delayed message goes to exactly one of the receivers waiting for it, once it is due.
#[test]
fn a_delayed_message_goes_to_one_waiting_receiver_once_due() {
    let t = TestDir::new();
    let start = Instant::now();
    t.fsync(["msg", "post", "B", "--delay", "400ms", "--data", "late"])
        .run()
        .code(0);
    let receivers: Vec<_> = (0..3)
        .map(|_| t.fsync(["msg", "recv", "-t", "3s", "B"]).start())
        .collect();
    let outs: Vec<_> = receivers.into_iter().map(|r| r.finish()).collect();
    let got: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
    let statuses: Vec<_> = outs.iter().map(|o| o.status).collect();
    assert_eq!(got.len(), 1, "one receiver gets it: {statuses:?}");
    got[0].stdout_has("late");
    assert!(start.elapsed() >= Duration::from_millis(400));
    for o in &outs {
        assert!(
            o.status.success() || o.status.code() == Some(75),
            "{:?}: {}",
            o.status,
            o.stderr
        );
    }
}

/// Microseconds since the epoch, as delayed messages count their due time.
fn now_micros() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_micros()).unwrap()
}

/// A minute of due time: the span of a bucket of delayed messages (src/msg/delayed.rs).
const MINUTE: u64 = 60_000_000;

/// A message delayed into a bucket that already holds one due later in the same minute wakes
/// the receiver that waits for that later one, at its own due time: receivers watch the
/// buckets whose minute has begun. (Were it woken only by the later one, it would take that one
/// first: it was posted first.)
#[test]
fn a_delay_into_a_begun_bucket_wakes_a_waiting_receiver_at_its_due_time() {
    let t = TestDir::new();
    // Both must come due in this minute: at least 12 s of it left.
    let into_minute = now_micros() % MINUTE;
    if into_minute > MINUTE - 12_000_000 {
        std::thread::sleep(Duration::from_micros(MINUTE - into_minute));
    }
    let late = (MINUTE - now_micros() % MINUTE - 3_000_000) / 1000;
    t.fsync([
        "msg",
        "post",
        "B",
        "--delay",
        &format!("{late}ms"),
        "--data",
        "late",
    ])
    .run()
    .code(0);
    assert_eq!(entries(&t.join("B/delayed")).len(), 1, "one bucket");
    let mut waiter = t.fsync(["msg", "recv", "-v", "-t", "50s", "B"]).start();
    waiter.stderr_until("waiting for a message in B");
    let posted = Instant::now();
    t.fsync(["msg", "post", "B", "--delay", "300ms", "--data", "soon"])
        .run()
        .code(0);
    let out = waiter.finish();
    out.code(0).stdout_has("soon");
    let waited = posted.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "{waited:?}: before it was due"
    );
    assert!(
        waited < Duration::from_millis(late - 2000),
        "{waited:?}: woken only when the later one came due"
    );
}

/// Delayed messages as fsync wrote them before buckets (`B/delayed/DUE.NAME`) are still
/// listed and delivered: a receive takes the one due, and moves the other into its bucket.
#[test]
fn delayed_messages_of_the_layout_before_buckets_are_listed_and_delivered() {
    let t = TestDir::new();
    assert_eq!(recv_now(&t, "B"), None); // made
    let now = now_micros();
    let name = |seq: u64| format!("{seq:020}.old-1-{seq:016x}.-.msg");
    let due = format!("{:020}.{}", now - 1, name(1));
    let later_due = now + 3_600_000_000;
    let later = format!("{later_due:020}.{}", name(2));
    t.write(&format!("B/delayed/{due}"), "due");
    t.write(&format!("B/delayed/{later}"), "later");
    t.write("B/seq", "2\n");
    let v = list(&t, "B");
    let delayed: Vec<&str> = (v["delayed"].as_array().unwrap().iter())
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(delayed, [name(1), name(2)], "{v}");
    assert_eq!(recv_now(&t, "B").as_deref(), Some(&b"due"[..]));
    assert_eq!(recv_now(&t, "B"), None);
    let bucket = format!("{:020}", later_due / MINUTE * MINUTE);
    assert_eq!(entries(&t.join("B/delayed")), std::slice::from_ref(&bucket));
    assert_eq!(t.read(&format!("B/delayed/{bucket}/{later}")), "later");
    assert_eq!(list(&t, "B")["delayed"][0]["name"], name(2));
}

/// 100,000 delayed messages over 84 minutes, written in no order: `msg list` shows every one,
/// soonest first, and a receive meanwhile takes the queued message.
#[test]
fn list_shows_100000_delayed_messages_soonest_first() {
    let t = TestDir::new();
    post(&t, "B", "queued");
    let first = now_micros() + 3_600_000_000;
    let count: u64 = 100_000;
    // Due 50 ms apart, in the order of a permutation of the sequence numbers.
    let due = |seq: u64| first + (seq * 7919 % count) * 50_000;
    let mut made = BTreeSet::new();
    for seq in 2..=count + 1 {
        let due = due(seq);
        let bucket = t.join(&format!("B/delayed/{:020}", due / MINUTE * MINUTE));
        if made.insert(bucket.clone()) {
            std::fs::create_dir_all(&bucket).unwrap();
        }
        let name = format!("{due:020}.{seq:020}.many-1-{seq:016x}.-.msg");
        std::fs::write(bucket.join(name), b"later").unwrap();
    }
    assert!((84..=85).contains(&made.len()), "{} buckets", made.len());
    t.write("B/seq", &format!("{}\n", count + 1));
    let v = list(&t, "B");
    let delayed = v["delayed"].as_array().unwrap();
    assert_eq!(delayed.len(), 100_000);
    let mut want: Vec<u64> = (2..=count + 1).collect();
    want.sort_by_key(|&seq| due(seq));
    let got: Vec<u64> = (delayed.iter())
        .map(|m| m["name"].as_str().unwrap()[..20].parse().unwrap())
        .collect();
    assert!(got == want, "not soonest first");
    assert_eq!(recv_now(&t, "B").as_deref(), Some(&b"queued"[..]));
    assert_eq!(recv_now(&t, "B"), None);
}

/// `msg post --key`: a second post with the key is not queued while the first is pending;
/// exit 0 all the same, and -v says which message holds the key.
#[test]
fn a_keyed_post_is_not_queued_twice() {
    let t = TestDir::new();
    let post = |data: &str| {
        t.fsync(["msg", "post", "-v", "--key", "reindex", "B", "--data", data])
            .run()
    };
    post("first").code(0).stderr_has("queued message 1 in B");
    post("second")
        .code(0)
        .stderr_has("not queued: message 1 with key reindex is still pending");
    assert_eq!(list(&t, "B")["count"], 1);
    t.fsync(["msg", "recv", "B", "--", "cat"])
        .run()
        .code(0)
        .stdout("first");
    post("third").code(0).stderr_has("queued message 3 in B");
    t.fsync(["msg", "post", "--key", "a/b", "B", "--data", "x"])
        .run()
        .code(2)
        .stderr_has("invalid key \"a/b\"");
    assert_eq!(list(&t, "B")["count"], 1, "a refused key queued something");
}

/// `msg work -j 3`: three jobs run at once, never a fourth (each job waits for an event the
/// test signals only once three have started, seen in `-v`'s lines); every job runs exactly
/// once, a poison one `--retries` + 1 times before the dead letters, and `--until-empty` ends
/// the workers once nothing is left, with the status of the failed job.
#[test]
fn work_runs_n_jobs_at_once_each_once_and_stops_when_empty() {
    let t = TestDir::new();
    for n in 1..=7 {
        t.fsync(["msg", "post", "B", "--data", &format!("job{n}")])
            .run()
            .code(0);
    }
    let job = format!(
        "echo start $FSYNC_MSG_ID >> {log}; \"$FSYNC\" event wait {e}; \
         echo end $FSYNC_MSG_ID >> {log}; [ $FSYNC_MSG_ID != 5 ] || exit 3",
        log = t.arg("log"),
        e = t.arg("E")
    );
    let mut workers = t
        .fsync([
            "msg",
            "work",
            "-j",
            "3",
            "--until-empty",
            "--retries",
            "1",
            "-v",
        ])
        .args(["B", "--", "sh", "-c", &job])
        .start();
    let mut running = 0;
    while running < 3 {
        running += usize::from(workers.stderr_line().contains(": running (attempt"));
    }
    // Said before each job starts (and makes the pipe that keeps its output): wait for them.
    eventually("three jobs started", || {
        std::fs::read_to_string(t.join("log")).is_ok_and(|l| l.lines().count() == 3)
    });
    t.fsync(["event", "signal", "E"]).run().code(0);
    let out = workers.finish();
    out.code(3);
    let log = t.read("log");
    let (mut now, mut most) = (0i32, 0);
    let mut ran = std::collections::BTreeMap::<u32, u32>::new();
    for line in log.lines() {
        let (what, id) = line.split_once(' ').unwrap();
        match what {
            "start" => now += 1,
            _ => {
                now -= 1;
                *ran.entry(id.parse().unwrap()).or_default() += 1;
            }
        }
        most = most.max(now);
    }
    assert_eq!(most, 3, "jobs running at once:\n{log}");
    let want: std::collections::BTreeMap<u32, u32> =
        (1..=7).map(|n| (n, if n == 5 { 2 } else { 1 })).collect();
    assert_eq!(ran, want, "{log}");
    let v = list(&t, "B");
    assert_eq!(v["count"], 0, "{v}");
    assert_eq!(v["claimed"], 0, "{v}");
    assert_eq!(v["dead"][0]["failed"], 2, "{v}");
}

/// A signal ends the wait of every idle worker at once, whichever thread it lands on, and is
/// not passed to a running job: the job finishes and is removed, then fsync dies of the signal.
#[test]
fn work_stops_every_idle_worker_at_a_signal_and_lets_the_running_job_finish() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let job = format!(
        "echo acquired; \"$FSYNC\" event wait {}; echo finished > {}",
        t.arg("E"),
        t.arg("done")
    );
    // Its output passed on as it is written (`acquired`), with no thread to keep it.
    let workers = t
        .fsync([
            "msg", "work", "-j", "4", "--output", "inherit", "B", "--", "sh", "-c",
        ])
        .arg(&job)
        .hold();
    // fsync's threads: its main one and a worker each.
    let threads =
        || std::fs::read_dir(format!("/proc/{}/task", workers.pid())).map_or(0, Iterator::count);
    // (The first job may start before the last worker's thread does: under load it did.)
    eventually("a thread for each worker and the main one", || {
        threads() == 5
    });
    workers.signal(Signal::SIGTERM);
    // The three idle workers stop waiting (nothing else wakes them: no message comes, and the
    // job has not ended); the job runs on until it is let finish.
    eventually("the idle workers stopped", || threads() == 2);
    t.fsync(["msg", "list", "B"])
        .run()
        .code(0)
        .stdout_has("1 being received");
    t.fsync(["event", "signal", "E"]).run().code(0);
    let out = workers.finish();
    out.killed_by(Signal::SIGTERM);
    assert_eq!(t.read("done"), "finished\n");
    let v = list(&t, "B");
    assert_eq!(
        (v["count"].clone(), v["claimed"].clone()),
        (0.into(), 0.into()),
        "{v}"
    );
}

/// A command that cannot be started stops every worker (127, the shell's status): the message
/// goes back with no failed attempt counted.
#[test]
fn work_stops_when_the_command_cannot_be_started() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let out = t
        .fsync(["msg", "work", "-j", "3", "B", "--", "./no-such-command"])
        .run();
    out.code(127).stderr_has("no-such-command");
    let v = list(&t, "B");
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["messages"][0]["failed"], 0, "{v}");
}

/// The head and `seq` checked against the queue's directory: a head rewritten past the shards
/// that hold messages (by hand, or by another user where the mailbox's mode lets them) hides
/// none of them from `recv`, `wait-empty` or `work --until-empty`.
#[test]
fn a_head_rewritten_past_older_shards_hides_none_of_their_messages() {
    let t = TestDir::new();
    for mailbox in ["B", "W"] {
        post(&t, mailbox, "a");
        post(&t, mailbox, "b");
        // The head past both, still before the shard posts go to (a `seq` of 299: shard 300).
        t.write(&format!("{mailbox}/seq"), "299\n");
        t.write(&format!("{mailbox}/head"), "00000000000000000300\n");
    }
    t.fsync(["msg", "wait-empty", "-n", "B"]).run().code(75);
    assert_eq!(drain_text(&t, "B"), ["a", "b"]);
    t.fsync(["msg", "wait-empty", "-n", "B"]).run().code(0);
    let out = t
        .fsync(["msg", "work", "--until-empty", "W", "--", "sh", "-c"])
        .arg(format!("cat >> {}", t.arg("ran")))
        .run();
    out.code(0);
    assert_eq!(t.read("ran"), "ab");
    t.fsync(["msg", "wait-empty", "-n", "W"]).run().code(0);
}

/// A `seq` rewritten back behind queued messages: a receive still finds them (past the shard
/// posts would go to), and the next post is numbered after them, not among them.
#[test]
fn a_seq_rewritten_back_behind_queued_messages_hides_none_and_renumbers_nothing() {
    let t = TestDir::new();
    post(&t, "B", "a");
    t.write("B/seq", "199\n");
    post(&t, "B", "c"); // number 200, in shard 200
    t.write("B/seq", "5\n");
    t.write("B/head", "00000000000000000000\n"); // a head as good as any: the walk's
    assert_eq!(recv_now(&t, "B").as_deref(), Some(&b"a"[..]));
    t.fsync(["msg", "wait-empty", "-n", "B"]).run().code(75);
    assert_eq!(recv_now(&t, "B").as_deref(), Some(&b"c"[..]));
    post(&t, "B", "d");
    let queued = list(&t, "B");
    let name = queued["messages"][0]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("00000000000000000201."), "{queued}");
    assert_eq!(drain_text(&t, "B"), ["d"]);
    // Rewritten back within the shard posts go to, with a head to rebuild: raised all the same.
    post(&t, "B", "e"); // number 202
    t.write("B/seq", "200\n");
    std::fs::remove_file(t.join("B/head")).unwrap();
    assert_eq!(recv_now(&t, "B").as_deref(), Some(&b"e"[..]));
    post(&t, "B", "f");
    let queued = list(&t, "B");
    let name = queued["messages"][0]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("00000000000000000203."), "{queued}");
}
