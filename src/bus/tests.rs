//! Unit tests of [`super`].

use super::*;
use crate::test_support::listing;

#[test]
fn broadcast_skips_the_sender_and_disconnected_members() {
    let dir = tempfile::tempdir().unwrap();
    let bus = Bus::new(dir.path().join("bus"));
    for n in ["a", "b", "c"] {
        bus.connect(n).unwrap();
    }
    bus.disconnect("c").unwrap();
    assert_eq!(bus.members().unwrap(), ["a", "b"]);
    assert_eq!(
        bus.broadcast("a", &mut &b"x"[..]).unwrap(),
        vec!["b".to_string()]
    );
    assert_eq!(bus.pending("a").unwrap(), 0);
    let err = bus.send("a", "c", &mut &b"x"[..]).unwrap_err();
    assert!(err.to_string().contains("not connected"), "{err}");
    assert!(bus.connect("../x").is_err());
}

/// A held connection disconnects through the bus directory it opened, never by its path
/// again: with the bus renamed away meanwhile (and another bus, with a participant of the
/// same name, put at its path) the name is hidden where it was connected, and the other
/// bus is left alone. (The path lookup is what hung on a network file system whose server
/// had gone.)
#[test]
fn a_held_connection_disconnects_through_the_directory_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let (old, moved) = (dir.path().join("p"), dir.path().join("q"));
    std::fs::create_dir(&old).unwrap();
    let bus = Bus::new(old.join("bus"));
    let held = bus.connect_held("a.b").unwrap();
    std::fs::rename(&old, &moved).unwrap();
    std::fs::create_dir(&old).unwrap();
    let other = Bus::new(old.join("bus"));
    other.connect("a.b").unwrap();
    assert_eq!(held.disconnect().unwrap(), Disconnected::Yes);
    assert!(moved.join("bus/.a.b").is_dir(), "hidden where it was");
    assert!(!moved.join("bus/a.b").exists());
    assert_eq!(
        other.members().unwrap(),
        ["a.b"],
        "the other bus was touched"
    );
    assert!(!old.join("bus/.a.b").exists());
}

#[test]
fn names_with_dots_and_any_letters_and_the_ones_refused() {
    for good in [
        "a",
        "build-3.example",
        "сервер-1",
        "a.new",
        "fsync",
        "x.fsync.y",
        "Ω_1",
    ] {
        assert_eq!(check_name(good), Ok(()), "{good}");
    }
    let longest = "я".repeat(MAX_NAME_BYTES / 2);
    assert_eq!(check_name(&longest), Ok(()));
    for (bad, why) in [
        ("", "empty"),
        (".", "first or last"),
        ("..", "first or last"),
        (".x", "first or last"),
        ("x.", "first or last"),
        ("a/b", "use letters"),
        ("../x", "use letters"),
        ("a\nb", "use letters"),
        ("a\u{1b}b", "use letters"),
        ("a\u{202e}b", "use letters"),
        ("a b", "use letters"),
        ("fsync.lock", "fsync's own"),
        ("FSync.x", "fsync's own"),
    ] {
        let e = check_name(bad).unwrap_err();
        assert!(e.to_string().contains(why), "{bad:?}: {e}");
    }
    let e = check_name(&format!("{longest}я")).unwrap_err();
    assert!(e.to_string().contains("102 bytes long, at most 100"), "{e}");
    assert!(check_name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
    assert!(check_name(&"x".repeat(MAX_NAME_BYTES + 1)).is_err());
}

/// The entries of a bus stay apart with dots in names: `x` made held beside a hidden
/// `x.new`, a participant `x.new` beside the staging of `x`, and the bus lock.
#[test]
fn dotted_names_never_share_an_entry_of_the_bus() {
    let dir = tempfile::tempdir().unwrap();
    let bus = Bus::new(dir.path().join("bus"));
    bus.connect("x.new").unwrap();
    bus.connect("x").unwrap();
    bus.send("x", "x.new", &mut &b"kept"[..]).unwrap();
    bus.disconnect("x.new").unwrap(); // hidden as .x.new
    bus.disconnect("x").unwrap();
    let held = bus.connect_held("x").unwrap(); // made as ..x.new
    assert!(
        dir.path().join("bus/.x.new/q").is_dir(),
        "x's connection removed .x.new"
    );
    bus.connect("x.new").unwrap();
    assert_eq!(bus.members().unwrap(), ["x", "x.new"]);
    bus.send("x.new", "x", &mut &b"hi"[..]).unwrap();
    let mut msg = bus.recv("x", None).unwrap().expect("a message");
    assert_eq!(msg.from.as_deref(), Some("x.new"));
    assert_eq!(
        {
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut msg, &mut data).unwrap();
            data
        },
        b"hi"
    );
    msg.finish().unwrap();
    drop(held);
    assert_eq!(
        listing(&dir.path().join("bus")),
        [".fsync.lock", ".x", "x.new"]
    );
}

/// A held name: refused to others, then stale once its owner file is unlocked (its holder
/// "died"), skipped by broadcast, refused by send, and taken over with its messages.
#[test]
fn held_stale_and_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let bus = Bus::new(dir.path().join("bus"));
    bus.connect("a").unwrap();
    let mut held = bus.connect_held("b").unwrap();
    assert_eq!(held.how(), &Connected::New);
    crate::Guard::set_child(&held, Some(4242), "serve");
    let e = bus.connect("b").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    let absent = bus.recv("c", Some(std::time::Duration::ZERO)).unwrap_err();
    assert_eq!(absent.kind(), ErrorKind::NotConnected, "{absent}");
    assert!(e.to_string().contains("already connected by pid"), "{e}");
    assert!(e.to_string().contains("(serve)"), "{e}");
    assert_eq!(
        bus.disconnect("b").unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    assert_eq!(
        bus.connect_held("a").unwrap_err().kind(),
        ErrorKind::Unavailable,
        "held over a plain connection"
    );
    bus.send("a", "b", &mut &b"backlog"[..]).unwrap();
    // The holder dies: its lock goes, its directory stays.
    let file = held.file.take().unwrap();
    drop(held);
    drop(file);
    let listed = bus.participants().unwrap();
    assert_eq!(listed[1].state, ParticipantState::Stale, "{listed:?}");
    assert_eq!(listed[1].holder.as_ref().unwrap().command, "serve");
    assert_eq!(listed[0].state, ParticipantState::Connected);
    let e = bus.send("a", "b", &mut &b"x"[..]).unwrap_err();
    assert!(e.to_string().contains("holder died"), "{e}");
    assert_eq!(
        bus.broadcast("a", &mut &b"x"[..]).unwrap(),
        Vec::<String>::new()
    );
    let again = bus.connect_held("b").unwrap();
    assert!(matches!(again.how(), Connected::TookOver { holder: Some(h) } if h.command == "serve"));
    assert_eq!(bus.pending("b").unwrap(), 1, "the backlog was lost");
    assert_eq!(again.disconnect().unwrap(), Disconnected::Yes);
    assert_eq!(bus.members().unwrap(), ["a"]);
}
