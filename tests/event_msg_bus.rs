//! `fsync event`, `fsync msg`, `fsync bus`: exactly-once wake-ups and deliveries, FIFO,
//! binary payloads, synchronous sends that are withdrawn or discarded, crash recovery.

use std::collections::BTreeSet;

use nix::sys::signal::Signal;

use crate::harness::{eventually, json_of, Holder, TestDir};

#[test]
fn event_one_signal_wakes_exactly_one_resetting_waiter() {
    let t = TestDir::new();
    let mut waiters: Vec<Holder> = (0..4)
        .map(|_| t.fsync(["event", "wait", "--reset", "E"]).start())
        .collect();
    let exited = |waiters: &mut Vec<Holder>| {
        waiters
            .iter_mut()
            .map(|w| !w.running())
            .filter(|&gone| gone)
            .count()
    };
    t.fsync(["event", "signal", "E"]).run().code(0);
    eventually("one waiter woke", || exited(&mut waiters) >= 1);
    t.fsync(["event", "status", "E"]).run().code(1); // consumed
    assert_eq!(exited(&mut waiters), 1);
    t.fsync(["event", "signal", "E"]).run().code(0);
    eventually("a second waiter woke", || exited(&mut waiters) >= 2);
    t.fsync(["event", "status", "E"]).run().code(1);
    assert_eq!(
        exited(&mut waiters),
        2,
        "two signals woke more than two waiters"
    );
    for mut w in waiters {
        if w.running() {
            w.signal(Signal::SIGTERM);
            assert_eq!(w.wait_exit().code(), Some(143));
        } else {
            assert_eq!(w.wait_exit().code(), Some(0));
        }
    }
}

#[test]
fn event_plain_wait_wakes_everyone_and_leaves_it_set() {
    let t = TestDir::new();
    let waiters: Vec<Holder> = (0..3)
        .map(|_| t.fsync(["event", "wait", "E"]).start())
        .collect();
    t.fsync(["event", "signal", "E"]).run().code(0);
    for w in waiters {
        w.finish().code(0);
    }
    t.fsync(["event", "status", "E"]).run().code(0);
    t.fsync(["event", "wait", "E"]).run().code(0); // already set: at once
    t.fsync(["event", "reset", "E"]).run().code(0);
    t.fsync(["event", "reset", "E"]).run().code(0);
    t.fsync(["event", "status", "E"]).run().code(1);
    t.fsync(["event", "wait", "-t", "300ms", "E"])
        .run()
        .code(75);
    t.fsync(["event", "wait", "-t", "0", "-E", "9", "E"])
        .run()
        .code(9);
    t.fsync(["event", "signal", "no/such/E"])
        .run()
        .operational_error("no/such/E");
}

/// Receive everything `BOX` has with `-n`, payloads in order.
fn drain(t: &TestDir, mailbox: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let o = t.fsync(["msg", "recv", "-n", mailbox]).run();
        match o.status.code() {
            Some(0) => out.push(o.stdout_bytes.clone()),
            Some(75) => return out,
            other => panic!("recv failed: {other:?} {}", o.stderr),
        }
    }
}

#[test]
fn msg_each_message_exactly_once_among_competing_receivers() {
    let t = TestDir::new();
    for i in 0..60 {
        t.fsync(["msg", "post", "B", "--data", &format!("m{i}")])
            .run()
            .code(0);
    }
    let script = "while \"$FSYNC\" msg recv -t 2s B; do echo; done; true";
    let receivers: Vec<Holder> = (0..3).map(|_| t.sh(script).start()).collect();
    let mut all = Vec::new();
    for r in receivers {
        let out = r.finish();
        all.extend(
            out.stdout
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(all.len(), 60, "duplicates or losses: {all:?}");
    assert_eq!(unique.len(), 60);
}

#[test]
fn msg_fifo_binary_and_empty_payloads() {
    let t = TestDir::new();
    for i in 0..20 {
        t.fsync(["msg", "post", "B", "--data", &format!("m{i}")])
            .run()
            .code(0);
    }
    let got: Vec<String> = drain(&t, "B")
        .into_iter()
        .map(|p| String::from_utf8(p).unwrap())
        .collect();
    assert_eq!(got, (0..20).map(|i| format!("m{i}")).collect::<Vec<_>>());
    let binary: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(t.join("payload"), &binary).unwrap();
    t.sh("\"$FSYNC\" msg post B < payload").run().code(0);
    t.fsync(["msg", "post", "B", "--data", ""]).run().code(0);
    let got = drain(&t, "B");
    assert_eq!(got.len(), 2);
    assert!(got[0] == binary, "binary payload changed");
    assert!(got[1].is_empty());
    // Through a synchronous send too.
    let sender = t.sh("\"$FSYNC\" msg send B < payload").start();
    eventually("the sync message is queued", || list(&t, "B")["count"] == 1);
    assert_eq!(drain(&t, "B"), vec![binary]);
    sender.finish().code(0);
}

fn list(t: &TestDir, mailbox: &str) -> serde_json::Value {
    json_of(
        &t.fsync(["msg", "list", "--json", mailbox])
            .run()
            .code(0)
            .stdout,
    )
}

#[test]
fn msg_send_returns_only_after_pickup() {
    let t = TestDir::new();
    let mut sender = t.fsync(["msg", "send", "B", "--data", "X"]).start();
    eventually("the message is queued", || {
        list(&t, "B")["messages"][0]["sync"] == true
    });
    assert!(
        sender.running(),
        "send returned before anyone took the message"
    );
    let out = t.fsync(["msg", "recv", "B"]).run();
    out.code(0).stdout("X");
    sender.finish().code(0);
}

#[test]
fn msg_timed_out_send_is_never_delivered() {
    let t = TestDir::new();
    t.fsync(["msg", "send", "-t", "300ms", "B", "--data", "late"])
        .run()
        .code(75);
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    assert_eq!(list(&t, "B")["count"], 0);
}

#[test]
fn msg_killed_senders_message_is_never_received() {
    let t = TestDir::new();
    let mut sender = t.fsync(["msg", "send", "B", "--data", "dead"]).start();
    eventually("the message is queued", || {
        std::fs::read_dir(t.join("B/q")).is_ok_and(|d| d.count() == 1)
    });
    sender.signal(Signal::SIGKILL);
    sender.wait_exit();
    assert_eq!(
        list(&t, "B")["count"],
        0,
        "a dead sender's message is listed"
    );
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
    t.fsync(["msg", "post", "B", "--data", "alive"])
        .run()
        .code(0);
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("alive");
}

#[test]
fn msg_receiver_killed_mid_delivery_loses_nothing() {
    let t = TestDir::new();
    let big: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(t.join("payload"), &big).unwrap();
    t.sh("\"$FSYNC\" msg post B < payload").run().code(0);
    // A receiver whose stdout pipe nobody reads blocks mid-payload, holding its claim.
    let mut stuck = std::process::Command::new(crate::harness::fsync_bin())
        .args(["msg", "recv"])
        .arg(t.join("B"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the message is claimed", || {
        std::fs::read_dir(t.join("B/claimed")).is_ok_and(|d| d.count() == 1)
    });
    stuck.kill().unwrap(); // SIGKILL, mid-payload
    stuck.wait().unwrap();
    let got = drain(&t, "B");
    assert_eq!(
        got.len(),
        1,
        "the claimed message did not return to the queue"
    );
    assert!(got[0] == big, "the payload changed");
}

#[test]
fn msg_many_senders_keep_their_order() {
    let t = TestDir::new();
    let posters: Vec<Holder> = (0..4)
        .map(|k| {
            t.sh(&format!(
                "for i in $(seq 25); do \"$FSYNC\" msg post B --data s{k}-$i || exit 1; done"
            ))
            .start()
        })
        .collect();
    for p in posters {
        p.finish().code(0);
    }
    let got: Vec<String> = drain(&t, "B")
        .into_iter()
        .map(|p| String::from_utf8(p).unwrap())
        .collect();
    assert_eq!(got.len(), 100);
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 100);
    for k in 0..4 {
        let mine: Vec<u32> = got
            .iter()
            .filter_map(|m| m.strip_prefix(&format!("s{k}-")))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(
            mine,
            (1..=25).collect::<Vec<_>>(),
            "sender {k} out of order"
        );
    }
    t.fsync(["msg", "post", "no/such/B", "--data", "x"])
        .run()
        .operational_error("no/such/B");
}

#[test]
fn bus_broadcast_send_and_membership() {
    let t = TestDir::new();
    for n in ["a", "b", "c"] {
        t.fsync(["bus", "connect", "BUS", n]).run().code(0);
    }
    t.fsync(["bus", "broadcast", "BUS", "--from", "a", "--data", "hello"])
        .run()
        .code(0);
    for n in ["b", "c"] {
        let v = json_of(
            &t.fsync(["bus", "recv", "--json", "-n", "BUS", n])
                .run()
                .code(0)
                .stdout,
        );
        assert_eq!(
            (v["from"].as_str(), v["data"].as_str()),
            (Some("a"), Some("hello")),
            "{v}"
        );
        t.fsync(["bus", "recv", "-n", "BUS", n]).run().code(75); // exactly one copy
    }
    t.fsync(["bus", "recv", "-n", "BUS", "a"]).run().code(75); // the sender gets none
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "b", "--data", "direct",
    ])
    .run()
    .code(0);
    t.fsync(["bus", "recv", "BUS", "b"])
        .run()
        .code(0)
        .stdout("direct");
    t.fsync(["bus", "disconnect", "BUS", "c"]).run().code(0);
    assert!(t.join("BUS/.c").is_dir());
    let out = t
        .fsync([
            "bus", "send", "BUS", "--from", "a", "--to", "c", "--data", "x",
        ])
        .run();
    assert!(![0, 1, 75].contains(&out.status.code().unwrap()));
    out.stderr_has("not connected");
    let v = json_of(
        &t.fsync(["bus", "members", "--json", "BUS"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(v["count"], 2, "{v}");
    t.fsync(["bus", "connect", "BUS", "c"]).run().code(0);
    assert!(
        !t.join("BUS/.c").exists(),
        "connect did not remove the hidden directory"
    );
    std::fs::write(t.join("bin"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    t.sh("\"$FSYNC\" bus send BUS --from a --to c < bin")
        .run()
        .code(0);
    let v = json_of(
        &t.fsync(["bus", "recv", "--json", "BUS", "c"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(v["data_b64"], "//4AQQ==", "{v}");
    t.fsync(["bus", "connect", "BUS", "../x"]).run().code(2);
}
