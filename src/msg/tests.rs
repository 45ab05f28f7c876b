//! Unit tests of [`super`].

use super::*;

fn text(r: Received) -> String {
    let mut r = r;
    let mut out = Vec::new();
    r.copy_to(&mut out).unwrap();
    r.finish().unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn names_round_trip() {
    let n = MessageName {
        seq: 7,
        uniq: "h-1-ff".into(),
        from: Some("alice".into()),
        sync: true,
    };
    assert_eq!(MessageName::parse(&n.render()), Some(n));
    assert!(MessageName::parse("junk").is_none());
    // A bus sender may hold dots: it is all between the second dot and the last.
    for from in ["build-3.example", "a.b.c", "сервер-1.ru"] {
        let n = MessageName {
            seq: 9,
            uniq: "h-1-ff".into(),
            from: Some(from.into()),
            sync: false,
        };
        assert_eq!(
            n.render(),
            format!("00000000000000000009.h-1-ff.{from}.msg")
        );
        assert_eq!(MessageName::parse(&n.render()), Some(n));
    }
    for bad in [
        "1.u..msg",
        "1.u.x.txt",
        "1.u.msg",
        ".u.x.msg",
        "1..x.msg",
        "x.u.y.msg",
        "+1.u.x.msg",
    ] {
        assert!(MessageName::parse(bad).is_none(), "{bad}");
    }
}

#[test]
fn a_uniq_keeps_32_bytes_of_the_host_and_no_dot() {
    let u = uniq();
    assert!(!u.contains('.'), "{u}");
    assert!(u.len() <= 32 + 1 + 10 + 1 + 16, "{u}");
    assert!(
        u.starts_with(&format!(
            "{}-{}-",
            uniq_host(&procinfo::hostname()),
            std::process::id()
        )),
        "{u}"
    );
    assert_ne!(uniq(), uniq(), "two UNIQs alike");
    assert_eq!(uniq_host("build-3.example.org"), "build-3_example_org");
    assert_eq!(uniq_host("сервер"), "______");
    assert_eq!(uniq_host(&"h".repeat(64)), "h".repeat(32));
}

#[test]
fn fifo_and_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("b"));
    for i in 0..5 {
        let _ = b.post(&mut format!("m{i}").as_bytes()).unwrap();
    }
    assert_eq!(b.list().unwrap().queued.len(), 5);
    for i in 0..5 {
        assert_eq!(
            text(b.recv(Some(Duration::ZERO)).unwrap().unwrap()),
            format!("m{i}")
        );
    }
    assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
}

#[test]
fn an_unfinished_message_returns_to_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("b"));
    let _ = b.post(&mut &b"x"[..]).unwrap();
    drop(b.recv(Some(Duration::ZERO)).unwrap().unwrap()); // a receiver that "crashed"
    assert_eq!(text(b.recv(Some(Duration::ZERO)).unwrap().unwrap()), "x");
}

#[test]
fn a_timed_out_send_is_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    let b = Mailbox::new(dir.path().join("b"));
    let sent = b
        .send(&mut &b"late"[..], Some(Duration::from_millis(20)))
        .unwrap();
    assert!(!sent, "nobody took it in time");
    let out = b
        .send_with(&mut &b"later"[..], Some(Duration::ZERO), |_| {})
        .unwrap();
    assert_eq!(out, Outcome::TimedOut);
    assert!(b.recv(Some(Duration::ZERO)).unwrap().is_none());
    assert!(b.list().unwrap().queued.is_empty());
}
