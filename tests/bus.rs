//! `fsync bus`: broadcast fan-out (one copy to every other connected member, none to the
//! sender), direct sends, membership (`connect`, `disconnect` hiding as `.NAME`, `members`),
//! errors for a receiver that is not connected, non-UTF-8 payloads as `data_b64`, and names
//! that could escape the bus directory. Held names (`connect --hold`): connected exactly while
//! the command runs, refused to others, kept by the command when fsync alone is killed, stale
//! when both are, taken over (by exactly one of many) with their messages; and owner files that
//! are links or FIFOs.

use std::{collections::BTreeSet, time::Duration};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{Cmd, Daemon, Holder, TestDir, dead, eventually, fsync_bin, json_of};

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
    if let Some(75) = out.status.code() {
        out.stdout("");
        None
    } else {
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
    names.iter().map(std::string::ToString::to_string).collect()
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
    let too_long = "я".repeat(51); // 102 bytes
    let bad_names = [
        "../x",
        ".x",
        "a/b",
        "",
        "x y",
        "..",
        ".",
        "x.",
        "a\nb",
        "a\x01b",
        "\x1b[31m",
        "fsync.lock",
        "FSYNC.x",
        &too_long,
    ];
    for bad in bad_names {
        let refused = |cmd: Cmd| {
            let out = cmd.run();
            out.code(2);
            // One line naming the bus and the name, escaped: no control character.
            assert_eq!(out.stderr.lines().count(), 1, "{bad:?}: {}", out.stderr);
            assert!(
                out.stderr
                    .starts_with("fsync: BUS: invalid participant name '"),
                "{bad:?}: {}",
                out.stderr
            );
            assert!(
                !out.stderr.trim_end().chars().any(char::is_control),
                "{bad:?}: {:?}",
                out.stderr
            );
        };
        refused(t.fsync(["bus", "connect", "BUS", bad]));
        refused(t.fsync(["bus", "connect", "--hold", "BUS", bad, "--", "touch", "ran"]));
        refused(t.fsync(["bus", "disconnect", "BUS", bad]));
        refused(t.fsync(["bus", "recv", "-n", "BUS", bad]));
        refused(t.fsync([
            "bus", "send", "BUS", "--from", "a", "--to", bad, "--data", "x",
        ]));
        refused(t.fsync(["bus", "broadcast", "BUS", "--from", bad, "--data", "x"]));
    }
    let out = t.fsync(["bus", "connect", "BUS", "a\nb"]).run();
    assert!(out.stderr.contains("'a\\nb'"), "escaped: {}", out.stderr);
    let out = t.fsync(["bus", "connect", "BUS", "x."]).run();
    assert!(
        out.stderr.contains("may not come first or last"),
        "{}",
        out.stderr
    );
    let out = t.fsync(["bus", "connect", "BUS", "fsync.lock"]).run();
    assert!(out.stderr.contains("fsync's own"), "{}", out.stderr);
    let out = t.fsync(["bus", "connect", "BUS", &too_long]).run();
    assert!(
        out.stderr.contains("102 bytes long, at most 100"),
        "{}",
        out.stderr
    );
    assert!(!t.join("x").exists(), "../x escaped the bus directory");
    assert!(
        !t.join("ran").exists(),
        "--hold ran its command for a bad name"
    );
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

/// Names with dots and letters of any alphabet, up to 100 bytes: connected, listed (text and
/// JSON), sent to, received from (`from` whole, dots and all), broadcast to, held, and hidden
/// as `.NAME` on disconnect.
#[test]
fn names_with_dots_and_any_letters_connect_send_and_receive() {
    let t = TestDir::new();
    let longest = "я".repeat(50); // 100 bytes of UTF-8: the longest name
    let (dotted, cyrillic) = ("build-3.example", "сервер-1");
    for name in [dotted, cyrillic, &longest] {
        connect(&t, name);
    }
    assert_eq!(members(&t), set(&[dotted, cyrillic, &longest]));
    let out = t.fsync(["bus", "members", "BUS"]).run();
    out.code(0)
        .stdout(&format!("{dotted}\n{cyrillic}\n{longest}\n"));

    t.fsync([
        "bus",
        "send",
        "BUS",
        "--from",
        dotted,
        "--to",
        cyrillic,
        "--data",
        "привет",
    ])
    .run()
    .code(0);
    t.fsync([
        "bus", "send", "BUS", "--from", &longest, "--to", dotted, "--data", "long",
    ])
    .run()
    .code(0);
    let v = recv_json(&t, cyrillic).expect("сервер-1 got nothing");
    assert_eq!(from_data(&v), (dotted, "привет"));
    // The longest name's message goes through every state of a mailbox, its file name longest.
    let v = recv_json(&t, dotted).expect("build-3.example got nothing");
    assert_eq!(from_data(&v), (longest.as_str(), "long"));
    let out = t.fsync(["bus", "recv", "-n", "-v", "BUS", dotted]).run();
    out.code(75);

    t.fsync([
        "bus",
        "broadcast",
        "BUS",
        "--from",
        cyrillic,
        "--data",
        "всем",
    ])
    .run()
    .code(0);
    for name in [dotted, longest.as_str()] {
        let out = t.fsync(["bus", "recv", "-n", "BUS", name]).run();
        out.code(0).stdout("всем");
    }
    assert_eq!(
        recv_json(&t, cyrillic),
        None,
        "the sender got its own broadcast"
    );

    // Held, with a dot in the name: listed as held, under its name.
    let h = held(hold_cmd(&t, "svc.v2"));
    let m = member_json(&t, "svc.v2");
    assert_eq!(
        (&m["state"], &m["holder"]["child_pid"]),
        (&"held".into(), &h.child.into())
    );
    assert!(member_line(&t, "svc.v2").starts_with("svc.v2 held by pid "));
    t.fsync([
        "bus", "send", "BUS", "--from", cyrillic, "--to", "svc.v2", "--data", "job",
    ])
    .run()
    .code(0);
    assert_eq!(pending(&t, "svc.v2"), 1);
    h.holder.finish().code(0);

    t.fsync(["bus", "disconnect", "BUS", dotted]).run().code(0);
    assert!(
        t.join("BUS/.build-3.example").is_dir(),
        "not hidden as .NAME"
    );
    assert_eq!(members(&t), set(&[cyrillic, &longest]));
    let out = t
        .fsync([
            "bus", "send", "BUS", "--from", cyrillic, "--to", dotted, "--data", "x",
        ])
        .run();
    out.code(69);
    assert!(
        out.stderr
            .starts_with("fsync: BUS: receiver 'build-3.example' is not connected"),
        "{}",
        out.stderr
    );
}

/// A held name disconnects through the bus directory it opened when it connected, never by
/// the path again: the path lookup is what hung on a network file system whose server had
/// gone. Here the command renames the bus's parent away and puts another bus at the old path;
/// the name is hidden in the bus it connected to, and the other is left alone.
#[test]
fn a_held_name_disconnects_in_the_bus_it_connected_to_even_when_moved() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("p")).unwrap();
    t.fsync([
        "bus",
        "connect",
        "--hold",
        "-v",
        "p/BUS",
        "n.1",
        "-c",
        "mv p q && mkdir p && \"$FSYNC\" bus connect p/BUS n.1",
    ])
    .run()
    .code(0)
    .stderr_has("fsync: disconnected n.1 from p/BUS");
    assert!(
        t.join("q/BUS/.n.1").is_dir(),
        "not hidden where it was connected"
    );
    assert!(!t.join("q/BUS/n.1").exists());
    assert!(
        t.join("p/BUS/n.1").is_dir(),
        "the other bus lost its participant"
    );
    assert!(!t.join("p/BUS/.n.1").exists());
}

// ---- held names ---------------------------------------------------------------------------

/// What a holder's command does: say it is in, and its pid, then hold until stdin is closed.
const SERVE: &str = "echo acquired; echo $$; read x || true";

/// `fsync bus connect --hold BUS NAME -- sh -c SERVE`.
fn hold_cmd(t: &TestDir, name: &str) -> Cmd {
    t.fsync([
        "bus", "connect", "--hold", "BUS", name, "--", "sh", "-c", SERVE,
    ])
}

/// A holder of a name whose command runs, with the command's pid.
struct Held {
    holder: Holder,
    child: u32,
}

/// Start `cmd` (a [`hold_cmd`]) and return once its command runs, holding the name.
#[track_caller]
fn held(cmd: Cmd) -> Held {
    let mut holder = cmd.start();
    holder.expect("acquired");
    let child = holder.line().parse().expect("the command's pid");
    Held { holder, child }
}

/// The entry of `name` in `members --json`. A held one is returned once its record names its
/// command's pid, which fsync writes just after starting the command (observed, not slept on).
#[track_caller]
fn member_json(t: &TestDir, name: &str) -> Value {
    let mut found = Value::Null;
    eventually(
        "members lists the participant (with its command's pid if held)",
        || {
            let out = t.fsync(["bus", "members", "--json", "BUS"]).run();
            let v = json_of(&out.code(0).stdout);
            let entry = (v["members"].as_array().unwrap().iter()).find(|m| m["name"] == name);
            found = entry.cloned().unwrap_or(Value::Null);
            entry.is_some_and(|m| {
                m["state"] != "held" || m["holder"].is_null() || !m["holder"]["child_pid"].is_null()
            })
        },
    );
    found
}

/// The line of `name` in the text of `members`.
#[track_caller]
fn member_line(t: &TestDir, name: &str) -> String {
    let out = t.fsync(["bus", "members", "BUS"]).run();
    out.code(0);
    (out.stdout.lines())
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("{name} not listed:\n{}", out.stdout))
        .to_string()
}

#[track_caller]
fn pending(t: &TestDir, name: &str) -> u64 {
    member_json(t, name)["pending"].as_u64().expect("pending")
}

/// Make `name` stale: its holder is killed (by its own command), and the command exits.
#[track_caller]
fn make_stale(t: &TestDir, name: &str, then: &str) {
    let script = format!("{then}kill -9 $PPID");
    t.fsync(["bus", "connect", "--hold", "BUS", name, "-c", &script])
        .run()
        .killed_by(Signal::SIGKILL);
    assert_eq!(member_json(t, name)["state"], "stale");
}

#[test]
fn hold_connects_while_the_command_runs_and_disconnects_when_it_exits() {
    let t = TestDir::new();
    connect(&t, "a");
    let svc = held(hold_cmd(&t, "svc"));
    let m = member_json(&t, "svc");
    assert_eq!(m["state"], "held", "{m}");
    assert_eq!(m["holder"]["pid"], svc.holder.pid(), "{m}");
    assert_eq!(m["holder"]["child_pid"], svc.child, "{m}");
    assert_eq!(m["holder"]["command"], format!("sh -c {SERVE}"), "{m}");
    let line = member_line(&t, "svc");
    assert!(
        line.starts_with(&format!("svc held by pid {} ", svc.holder.pid())),
        "{line}"
    );
    assert_eq!(member_line(&t, "a"), "a");
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "svc", "--data", "x",
    ])
    .run()
    .code(0);
    svc.holder.finish().code(0).stdout("");
    assert_eq!(
        members(&t),
        set(&["a"]),
        "still connected after its command exited"
    );
    assert!(t.join("BUS/.svc").is_dir(), "not disconnected as .svc");

    // The command's exit status; everything after NAME is the command's; -c; 127.
    t.fsync(["bus", "connect", "--hold", "BUS", "x", "-c", "exit 7"])
        .run()
        .code(7);
    t.fsync([
        "bus", "connect", "--hold", "BUS", "x", "echo", "-v", "--hold",
    ])
    .run()
    .code(0)
    .stdout("-v --hold\n");
    t.fsync([
        "bus",
        "connect",
        "--hold",
        "BUS",
        "x",
        "no-such-command-fsync-test",
    ])
    .run()
    .code(127);
    let out = t
        .fsync(["bus", "connect", "--hold", "-v", "BUS", "x", "true"])
        .run();
    out.code(0)
        .stderr_has("connected x to BUS, held while the command runs")
        .stderr_has("disconnected x from BUS");
    assert_eq!(members(&t), set(&["a"]));
    // --hold needs a command; a command needs --hold.
    t.fsync(["bus", "connect", "--hold", "BUS", "x"])
        .run()
        .code(2);
    t.fsync(["bus", "connect", "BUS", "x", "true"])
        .run()
        .code(2);
    assert_eq!(members(&t), set(&["a"]));
}

#[test]
fn a_held_name_is_refused_to_others_naming_its_holder() {
    let t = TestDir::new();
    connect(&t, "a");
    let svc = held(hold_cmd(&t, "svc"));
    member_json(&t, "svc");
    let by = format!(
        "already connected by pid {} (sh -c {SERVE})",
        svc.holder.pid()
    );
    for args in [
        &["bus", "connect", "BUS", "svc"][..],
        &["bus", "connect", "--hold", "BUS", "svc", "-c", "echo ran"],
        &["bus", "disconnect", "BUS", "svc"],
    ] {
        let out = t.fsync(args).run();
        out.code(69)
            .operational_error("BUS/svc")
            .stderr_has(&by)
            .stdout("");
    }
    assert_eq!(member_json(&t, "svc")["state"], "held");
    svc.holder.finish().code(0);

    // A plain connection: --hold refuses it, a plain connect says it is there already.
    let out = t.fsync(["bus", "connect", "-v", "BUS", "svc"]).run();
    out.code(0).stderr("fsync: connected svc to BUS\n");
    let out = t
        .fsync(["bus", "connect", "--hold", "BUS", "svc", "-c", "echo ran"])
        .run();
    out.code(69)
        .operational_error("BUS/svc")
        .stderr_has("disconnect it first")
        .stdout("");
    let out = t.fsync(["bus", "connect", "-v", "BUS", "svc"]).run();
    out.code(0).stderr_has("svc was connected to BUS already");
    t.fsync(["bus", "connect", "BUS", "svc"])
        .run()
        .code(0)
        .stderr("");
    assert_eq!(member_json(&t, "svc")["state"], "connected");
}

#[test]
fn killing_fsync_alone_keeps_the_name_held_while_the_command_runs() {
    let t = TestDir::new();
    connect(&t, "a");
    let mut svc = held(hold_cmd(&t, "svc"));
    member_json(&t, "svc");
    svc.holder.signal(Signal::SIGKILL);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&svc.holder.wait_exit()),
        Some(Signal::SIGKILL as i32)
    );
    // The command still holds it (it inherited the lock), and is named as the one that lives.
    let m = member_json(&t, "svc");
    assert_eq!(m["state"], "held", "{m}");
    assert_eq!(m["holder"]["child_pid"], svc.child, "{m}");
    t.fsync(["bus", "connect", "BUS", "svc"])
        .run()
        .operational_error("BUS/svc")
        .stderr_has(&format!("already connected by pid {} ", svc.child));
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "svc", "--data", "x",
    ])
    .run()
    .code(0);
    // The command exits: nobody disconnects the name, whose holder is now dead.
    svc.holder.finish();
    let line = member_line(&t, "svc");
    assert!(line.starts_with("svc stale: its holder died ("), "{line}");
    assert_eq!(pending(&t, "svc"), 1);
}

/// A process the command left running with the hold inherited keeps the name held after fsync
/// and the command have exited; the name is stale once it exits.
#[test]
fn a_process_the_command_left_running_keeps_the_name_held() {
    let t = TestDir::new();
    nix::unistd::mkfifo(
        &t.join("go"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let out = t
        .fsync(["bus", "connect", "--hold", "-v", "BUS", "svc", "-c"])
        .arg("(read x < go) >/dev/null 2>&1 & echo $!")
        .run();
    out.code(0)
        .stderr_has("svc stays connected to BUS: a process the command left running");
    let left: u32 = out
        .stdout
        .trim()
        .parse()
        .expect("the pid of what was left running");
    let _daemon = Daemon(left);
    let m = member_json(&t, "svc");
    assert_eq!(m["state"], "held", "{m}");
    assert_eq!(m["holder"]["child_pid"], left, "{m}");
    t.fsync(["bus", "connect", "BUS", "svc"])
        .run()
        .operational_error("BUS/svc")
        .stderr_has(&format!("already connected by pid {left} "));
    std::fs::write(t.join("go"), "go\n").unwrap();
    eventually("what the command left running exits", || dead(left));
    assert_eq!(member_json(&t, "svc")["state"], "stale");
}

#[test]
fn a_stale_name_is_refused_by_send_skipped_by_broadcast_and_taken_over_with_its_messages() {
    let t = TestDir::new();
    connect(&t, "a");
    connect(&t, "b");
    let mut svc = held(hold_cmd(&t, "svc").own_process_group());
    member_json(&t, "svc");
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "svc", "--data", "backlog",
    ])
    .run()
    .code(0);
    svc.holder.kill_process_group();

    let line = member_line(&t, "svc");
    let died = format!("svc stale: its holder died (pid {} ", svc.holder.pid());
    assert!(line.starts_with(&died), "{line}");
    let m = member_json(&t, "svc");
    assert_eq!(
        (&m["state"], &m["pending"]),
        (&"stale".into(), &1.into()),
        "{m}"
    );
    assert_eq!(m["holder"]["pid"], svc.holder.pid(), "{m}");
    assert_eq!(m["holder"]["child_pid"], svc.child, "{m}");
    assert_eq!(
        members(&t),
        set(&["a", "b", "svc"]),
        "a stale name is still connected"
    );

    let out = t
        .fsync([
            "bus", "send", "BUS", "--from", "a", "--to", "svc", "--data", "lost",
        ])
        .run();
    out.code(69)
        .operational_error("BUS")
        .stderr_has("receiver 'svc' is not connected any more: its holder died");
    t.fsync(["bus", "broadcast", "BUS", "--from", "a", "--data", "all"])
        .run()
        .code(0);
    assert_eq!(pending(&t, "svc"), 1, "sent to a stale participant");
    assert_eq!(
        pending(&t, "b"),
        1,
        "the broadcast skipped a live participant"
    );

    // A new holder takes it over and gets the backlog.
    let out = t
        .fsync(["bus", "connect", "--hold", "-v", "BUS", "svc", "--"])
        .arg(fsync_bin())
        .args(["bus", "recv", "-n", "BUS", "svc"])
        .run();
    out.code(0)
        .stdout("backlog")
        .stderr_has("took over svc on BUS from its holder that died (pid ");
    assert_eq!(
        members(&t),
        set(&["a", "b"]),
        "not disconnected after the takeover"
    );

    // A plain connect takes a stale name over too, keeping its messages.
    make_stale(
        &t,
        "svc",
        "\"$FSYNC\" bus send BUS --from a --to svc --data kept; ",
    );
    let out = t.fsync(["bus", "connect", "-v", "BUS", "svc"]).run();
    out.code(0).stderr_has("took over svc on BUS");
    assert_eq!(member_json(&t, "svc")["state"], "connected");
    t.fsync(["bus", "recv", "-n", "BUS", "svc"])
        .run()
        .code(0)
        .stdout("kept");
    // A stale name can be disconnected.
    make_stale(&t, "gone", "");
    t.fsync(["bus", "disconnect", "BUS", "gone"]).run().code(0);
    assert_eq!(members(&t), set(&["a", "b", "svc"]));
}

/// Many processes take over one stale name at once, round after round: exactly one wins each
/// time, and the others are refused naming it.
#[test]
fn of_many_concurrent_takers_of_a_stale_name_exactly_one_wins() {
    const ROUNDS: usize = 12;
    const TAKERS: usize = 6;
    let t = TestDir::new();
    let taker = "\"$FSYNC\" bus connect --hold BUS svc -c 'echo acquired; read x || true'; \
                 echo \"exit $?\"";
    for round in 0..ROUNDS {
        make_stale(&t, "svc", "");
        let mut takers: Vec<Holder> = (0..TAKERS).map(|_| t.sh(taker).start()).collect();
        let firsts: Vec<String> = takers.iter_mut().map(|h| h.line()).collect();
        let won: Vec<usize> = (0..TAKERS).filter(|&i| firsts[i] == "acquired").collect();
        assert_eq!(won.len(), 1, "round {round}: {firsts:?}");
        for (i, first) in firsts.iter().enumerate() {
            assert!(
                i == won[0] || first == "exit 69",
                "round {round}: a taker neither won nor was refused: {firsts:?}"
            );
        }
        assert_eq!(member_json(&t, "svc")["state"], "held", "round {round}");
        let winner = takers.remove(won[0]);
        for loser in takers {
            loser
                .finish()
                .code(0)
                .stdout("")
                .stderr_has("already connected by pid");
        }
        winner.finish().code(0).stdout("exit 0\n");
        assert!(
            members(&t).is_empty(),
            "round {round}: the winner did not disconnect"
        );
    }
}

/// Whoever may write a participant's directory could put a link or a FIFO where its owner file
/// belongs: never followed, never waited on, and never taken for a dead holder's.
#[test]
fn a_link_or_fifo_planted_as_the_owner_file_is_neither_followed_nor_waited_on() {
    const NO_HANG: Duration = Duration::from_secs(10);
    let t = TestDir::new();
    for n in ["a", "l", "f"] {
        connect(&t, n);
    }
    t.write("victim", "precious");
    std::os::unix::fs::symlink(t.join("victim"), t.join("BUS/l/owner")).unwrap();
    nix::unistd::mkfifo(
        &t.join("BUS/f/owner"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    for name in ["l", "f"] {
        for args in [
            &["bus", "connect", "BUS", name][..],
            &["bus", "connect", "--hold", "BUS", name, "-c", "echo ran"],
            &["bus", "disconnect", "BUS", name],
        ] {
            let out = t.fsync(args).deadline(NO_HANG).run();
            out.operational_error(&format!("BUS/{name}/owner"))
                .stdout("");
        }
        // In doubt it counts as held: a message is still sent.
        t.fsync([
            "bus", "send", "BUS", "--from", "a", "--to", name, "--data", "x",
        ])
        .deadline(NO_HANG)
        .run()
        .code(0);
        let m = member_json(&t, name);
        assert_eq!(
            (&m["state"], &m["holder"]),
            (&"held".into(), &Value::Null),
            "{m}"
        );
    }
    t.fsync(["bus", "members", "BUS"])
        .deadline(NO_HANG)
        .run()
        .code(0);
    assert_eq!(t.read("victim"), "precious");
    assert!(t.join("BUS/l/owner").is_symlink());
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &std::fs::symlink_metadata(t.join("BUS/f/owner"))
            .unwrap()
            .file_type()
    ));

    // A link where a taker makes its new owner file is removed, not written through.
    make_stale(&t, "svc", "");
    std::os::unix::fs::symlink(t.join("victim"), t.join("BUS/svc/.owner.new")).unwrap();
    t.fsync(["bus", "connect", "--hold", "BUS", "svc", "-c", "echo ran"])
        .run()
        .code(0)
        .stdout("ran\n");
    assert_eq!(t.read("victim"), "precious");
    assert!(t.join("victim").exists());
}

/// The verbs whose -t limits a wait on a lock others take for a moment (`msg post`, and the
/// bus's `connect`, `disconnect`, `send`) end with -E's status when they give up,
/// as every wait does, saying on what; without -E, 75. Nothing is changed.
#[test]
fn short_waits_give_up_with_the_conflict_exit_code() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    for name in ["a", "b"] {
        t.fsync(["bus", "connect", "Bus", name]).run().code(0);
    }
    let flock = |file: &str| {
        (t.cmd("flock")
            .args(["-x", &t.arg(file), "sh", "-c", crate::harness::HOLD]))
        .hold()
    };
    let cases: &[(&str, &[&str])] = &[
        ("B/seq", &["msg", "post", "-n", "B", "--data", "y"]),
        (
            "B/seq",
            &["msg", "post", "-t", "0.2", "--key", "k", "B", "--data", "y"],
        ),
        ("Bus/.fsync.lock", &["bus", "connect", "-n", "Bus", "c"]),
        (
            "Bus/.fsync.lock",
            &["bus", "disconnect", "-t", "200ms", "Bus", "a"],
        ),
        (
            "Bus/b/seq",
            &[
                "bus", "send", "-n", "Bus", "--from", "a", "--to", "b", "--data", "y",
            ],
        ),
    ];
    for (held, args) in cases {
        let holder = flock(held);
        for (extra, code) in [(&[][..], 75), (&["-E", "9"][..], 9)] {
            let out = t.fsync(args.iter().chain(extra)).run();
            out.code(code)
                .stdout("")
                .stderr_has(&format!("{held}: gave up waiting"));
        }
        holder.finish().code(0);
    }
    let members = t.fsync(["bus", "members", "Bus"]).run();
    members.code(0).stdout("a\nb\n");
    let listed = json_of(&t.fsync(["msg", "list", "--json", "B"]).run().code(0).stdout);
    assert_eq!(listed["count"], 1, "{listed}");
}
