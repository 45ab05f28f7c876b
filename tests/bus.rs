//! `fsync bus`: broadcast fan-out (one copy to every other connected member, none to the
//! sender), direct sends, membership (`connect`, `disconnect` hiding as `.NAME`, `members`),
//! errors for a receiver that is not connected, non-UTF-8 payloads as `data_b64`, and names
//! that could escape the bus directory.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::harness::{json_of, TestDir};

#[track_caller]
fn connect(t: &TestDir, name: &str) {
    t.fsync(["bus", "connect", "BUS", name])
        .run()
        .code(0)
        .stdout("");
}

/// `fsync bus recv -n --json BUS NAME`: the object, or `None` on 75.
#[track_caller]
fn recv_json(t: &TestDir, name: &str) -> Option<Value> {
    let out = t.fsync(["bus", "recv", "-n", "--json", "BUS", name]).run();
    match out.status.code() {
        Some(75) => {
            out.stdout("");
            None
        }
        _ => {
            out.code(0);
            assert_eq!(
                out.stdout.lines().count(),
                1,
                "not one line: {}",
                out.stdout
            );
            Some(json_of(&out.stdout))
        }
    }
}

/// `(from, data)` of a `--json` message with a UTF-8 payload.
#[track_caller]
fn from_data(v: &Value) -> (&str, &str) {
    assert!(
        v.get("data_b64").is_none(),
        "a UTF-8 payload as data_b64: {v}"
    );
    (
        v["from"].as_str().unwrap_or_else(|| panic!("no from: {v}")),
        v["data"].as_str().unwrap_or_else(|| panic!("no data: {v}")),
    )
}

/// The names `members --json` lists, checking `count` agrees.
#[track_caller]
fn members(t: &TestDir) -> BTreeSet<String> {
    let out = t.fsync(["bus", "members", "--json", "BUS"]).run();
    out.code(0);
    let v = json_of(&out.stdout);
    let names: BTreeSet<String> = (v["members"].as_array())
        .unwrap_or_else(|| panic!("no members array: {v}"))
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(v["count"], names.len(), "{v}");
    names
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Standard base64 (RFC 4648, with padding).
#[track_caller]
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    assert!(
        text.len().is_multiple_of(4),
        "base64 of a length not a multiple of 4: {text:?}"
    );
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        let mut n: u32 = 0;
        for &c in &chunk[..4 - pad] {
            let d = ALPHABET.iter().position(|&a| a == c);
            n = n << 6 | d.unwrap_or_else(|| panic!("not base64: {text:?}")) as u32;
        }
        n <<= 6 * pad as u32;
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    out
}

#[test]
fn broadcast_gives_every_other_member_one_copy_and_the_sender_none() {
    let t = TestDir::new();
    for n in ["a", "b", "c"] {
        connect(&t, n);
    }
    t.fsync(["bus", "broadcast", "BUS", "--from", "a", "--data", "hello"])
        .run()
        .code(0)
        .stdout("");
    for n in ["b", "c"] {
        let v = recv_json(&t, n).unwrap_or_else(|| panic!("{n} got no copy"));
        assert_eq!(from_data(&v), ("a", "hello"), "{n} got {v}");
        assert_eq!(recv_json(&t, n), None, "{n} got more than one copy");
    }
    assert_eq!(recv_json(&t, "a"), None, "the sender got its own broadcast");

    // A disconnected member gets no copy, and is not reconnected by the broadcast.
    t.fsync(["bus", "disconnect", "BUS", "c"]).run().code(0);
    t.fsync(["bus", "broadcast", "BUS", "--from", "b", "--data", "bye"])
        .run()
        .code(0);
    assert_eq!(members(&t), set(&["a", "b"]));
    assert_eq!(
        from_data(&recv_json(&t, "a").expect("a got no copy")),
        ("b", "bye")
    );
    assert_eq!(recv_json(&t, "a"), None);
    assert_eq!(recv_json(&t, "b"), None, "the sender got its own broadcast");
    connect(&t, "c");
    assert_eq!(
        recv_json(&t, "c"),
        None,
        "a member disconnected during a broadcast got it"
    );
}

#[test]
fn send_delivers_to_one_member_in_order_with_its_sender() {
    let t = TestDir::new();
    for n in ["a", "b", "c"] {
        connect(&t, n);
    }
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "b", "--data", "one",
    ])
    .run()
    .code(0)
    .stdout("");
    t.fsync([
        "bus", "send", "BUS", "--from", "c", "--to", "b", "--data", "two",
    ])
    .run()
    .code(0);
    t.fsync(["bus", "broadcast", "BUS", "--from", "a", "--data", "three"])
        .run()
        .code(0);
    assert_eq!(
        from_data(&recv_json(&t, "b").expect("b got nothing")),
        ("a", "one")
    );
    // Without --json: the raw payload.
    t.fsync(["bus", "recv", "-n", "BUS", "b"])
        .run()
        .code(0)
        .stdout("two");
    assert_eq!(
        from_data(&recv_json(&t, "b").expect("b missed the broadcast")),
        ("a", "three")
    );
    assert_eq!(recv_json(&t, "b"), None);
    assert_eq!(
        from_data(&recv_json(&t, "c").expect("c missed the broadcast")),
        ("a", "three")
    );
    assert_eq!(recv_json(&t, "c"), None, "c got b's message");
    assert_eq!(recv_json(&t, "a"), None, "a got a message");

    // A blocking recv is woken by a later send.
    let waiter = t.fsync(["bus", "recv", "--json", "BUS", "c"]).start();
    t.fsync([
        "bus", "send", "BUS", "--from", "b", "--to", "c", "--data", "wake",
    ])
    .run()
    .code(0);
    let out = waiter.finish();
    out.code(0);
    assert_eq!(from_data(&json_of(&out.stdout)), ("b", "wake"));
}

#[test]
fn send_to_a_member_not_connected_fails() {
    let t = TestDir::new();
    for n in ["a", "b"] {
        connect(&t, n);
    }
    t.fsync(["bus", "disconnect", "BUS", "b"])
        .run()
        .code(0)
        .stdout("");
    for to in ["b", "never"] {
        let out = t
            .fsync([
                "bus", "send", "BUS", "--from", "a", "--to", to, "--data", "x",
            ])
            .run();
        out.operational_error("BUS").stderr_has("not connected");
    }
    assert!(
        !t.join("BUS/b").exists() && !t.join("BUS/never").exists(),
        "a failed send connected its receiver"
    );
    assert_eq!(members(&t), set(&["a"]));
    connect(&t, "b");
    assert_eq!(recv_json(&t, "b"), None, "the failed send was delivered");
}

#[test]
fn disconnect_hides_connect_unhides_members_lists_the_connected() {
    let t = TestDir::new();
    for n in ["a", "b", "c"] {
        connect(&t, n);
    }
    assert_eq!(members(&t), set(&["a", "b", "c"]));
    t.fsync(["bus", "disconnect", "BUS", "c"]).run().code(0);
    assert!(t.join("BUS/.c").is_dir(), "disconnect did not hide c as .c");
    assert!(!t.join("BUS/c").exists(), "c's directory is still there");
    assert_eq!(members(&t), set(&["a", "b"]));
    connect(&t, "c");
    assert!(t.join("BUS/c").is_dir());
    assert!(
        !t.join("BUS/.c").exists(),
        "connect did not remove the hidden .c"
    );
    assert_eq!(members(&t), set(&["a", "b", "c"]));
    // Connecting twice is fine and changes nothing.
    connect(&t, "c");
    assert_eq!(members(&t), set(&["a", "b", "c"]));
    // Disconnect twice: the second hides a fresh directory over the old hidden one.
    t.fsync(["bus", "disconnect", "BUS", "a"]).run().code(0);
    connect(&t, "a");
    t.fsync(["bus", "disconnect", "BUS", "a"]).run().code(0);
    assert!(t.join("BUS/.a").is_dir());
    assert_eq!(members(&t), set(&["b", "c"]));
    let plain = t.fsync(["bus", "members", "BUS"]).run();
    plain.code(0);
    for n in ["b", "c"] {
        plain.stdout_has(n);
    }
}

#[test]
fn a_non_utf8_payload_comes_as_data_b64() {
    let t = TestDir::new();
    for n in ["a", "b"] {
        connect(&t, n);
    }
    let payload: Vec<u8> = vec![0xff, 0xfe, 0x00, b'A', 0x80, b'\n', 0x00];
    std::fs::write(t.join("payload"), &payload).unwrap();
    t.sh("exec \"$FSYNC\" bus send BUS --from a --to b < payload")
        .run()
        .code(0);
    t.sh("exec \"$FSYNC\" bus broadcast BUS --from a < payload")
        .run()
        .code(0);
    let v = recv_json(&t, "b").expect("b got nothing");
    assert_eq!(v["from"], "a", "{v}");
    assert!(v.get("data").is_none(), "a non-UTF-8 payload as data: {v}");
    let b64 = v["data_b64"]
        .as_str()
        .unwrap_or_else(|| panic!("no data_b64: {v}"));
    assert_eq!(base64_decode(b64), payload, "{v}");
    // Without --json: the bytes themselves.
    let raw = t.fsync(["bus", "recv", "-n", "BUS", "b"]).run();
    raw.code(0);
    assert_eq!(raw.stdout_bytes, payload);
    assert_eq!(recv_json(&t, "b"), None);
    // UTF-8 beyond ASCII is still `data`.
    t.fsync([
        "bus",
        "send",
        "BUS",
        "--from",
        "b",
        "--to",
        "a",
        "--data",
        "grüße\t✓",
    ])
    .run()
    .code(0);
    assert_eq!(
        from_data(&recv_json(&t, "a").expect("a got nothing")),
        ("b", "grüße\t✓")
    );
}

#[test]
fn names_that_are_not_plain_are_usage_errors() {
    let t = TestDir::new();
    connect(&t, "a");
    for bad in ["../x", ".x", "a/b", "", "x y", ".."] {
        t.fsync(["bus", "connect", "BUS", bad]).run().code(2);
        t.fsync(["bus", "disconnect", "BUS", bad]).run().code(2);
        t.fsync(["bus", "recv", "-n", "BUS", bad]).run().code(2);
        t.fsync([
            "bus", "send", "BUS", "--from", "a", "--to", bad, "--data", "x",
        ])
        .run()
        .code(2);
        t.fsync(["bus", "broadcast", "BUS", "--from", bad, "--data", "x"])
            .run()
            .code(2);
    }
    assert!(!t.join("x").exists(), "../x escaped the bus directory");
    assert_eq!(members(&t), set(&["a"]));
    let names: BTreeSet<String> = std::fs::read_dir(t.join("BUS"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        set(&["a", ".fsync.lock"]),
        "invalid names left files in the bus (beside the bus lock)"
    );
}
