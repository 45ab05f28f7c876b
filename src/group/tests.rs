//! Unit tests of [`super`].

use super::*;

/// The group's directory with `members`, as a joiner makes them.
fn open_dirs(p: &Paths) -> Result<Dir> {
    let top = Dir::create_top(&p.dir, "cannot create group directory")?;
    top.create_sub("members")?;
    Ok(top)
}

#[test]
fn first_and_last_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let group = Group::new(&path).delete_when_empty(true);
    let a = group.join(None).unwrap().unwrap();
    let b = group.join(None).unwrap().unwrap();
    assert!(a.first() && !b.first());
    assert_eq!(members(&path).unwrap().len(), 2);
    assert_eq!(a.leave().unwrap(), Left::NotLast);
    assert!(!is_empty(&path).unwrap());
    assert_eq!(b.leave().unwrap(), Left::Last);
    assert!(is_empty(&path).unwrap());
    assert!(!path.exists(), "deleted with the last member");
}

/// A clean-up's registration carries the mark, which holder records read past.
#[test]
fn a_clean_ups_registration_is_marked_and_still_a_holder_record() {
    let holder = Holder::this_process(5, "tear down\nend".into());
    let marked = render_member(&holder, true);
    let plain = render_member(&holder, false);
    assert_eq!(plain, render_holder(&holder));
    assert!(marked.ends_with("\ncleanup 1\nend\n"), "{marked}");
    let back = holder::parse(&marked).unwrap().holder.unwrap();
    assert_eq!(back.command, "tear down end");
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [(&marked, true), (&plain, false)] {
        std::fs::write(dir.path().join("r"), text).unwrap();
        assert_eq!(is_cleanup(&File::open(dir.path().join("r")).unwrap()), want);
    }
    // The longest command a record keeps (16 KiB) leaves the mark within what is read.
    let long = Holder::this_process(5, "x".repeat(20_000));
    std::fs::write(dir.path().join("r"), render_member(&long, true)).unwrap();
    assert!(is_cleanup(&File::open(dir.path().join("r")).unwrap()));
    // After `end` (padding of a record rewritten shorter), the line means nothing.
    std::fs::write(dir.path().join("r"), format!("{plain}cleanup 1\n")).unwrap();
    assert!(!is_cleanup(&File::open(dir.path().join("r")).unwrap()));
}

/// A shared lock on `gate` with no registration held, as an exiting member leaves it for a
/// moment: the joiner waits for it (saying so), and is first once it goes.
#[test]
fn a_joiner_waits_for_a_lone_gate_lock_going_and_is_then_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    open_dirs(&paths(&path)).unwrap();
    let going = File::create(path.join("gate")).unwrap();
    assert!(lock::flock(&going, Mode::Shared, false).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let joiner = std::thread::spawn({
        let path = path.clone();
        move || {
            let got = Group::new(&path).join_with(None, |_| {
                let _ = tx.send(());
            });
            got.unwrap().acquired().unwrap().first()
        }
    });
    rx.recv().expect("the joiner says it waits");
    drop(going);
    assert!(joiner.join().unwrap(), "first once the lock has gone");
}

/// A stranger's shared lock on `gate` that stays: the joiner waits a moment, then joins,
/// not first.
#[test]
fn a_lone_gate_lock_that_stays_makes_a_joiner_not_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    open_dirs(&paths(&path)).unwrap();
    let stays = File::create(path.join("gate")).unwrap();
    assert!(lock::flock(&stays, Mode::Shared, false).unwrap());
    // (Bounded: a joiner that waited for it again and again, or until the join's own
    // deadline, fails here instead of hanging.)
    let member = Group::new(&path)
        .join(Some(Duration::from_secs(20)))
        .unwrap();
    let member = member.expect("joined after a moment, well before the join's deadline");
    assert!(!member.first());
}

/// Trying to join never waits for another process's join or leave step.
#[test]
fn try_join_is_refused_while_another_joins_and_succeeds_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let group = Group::new(&path);
    open_dirs(&paths(&path)).unwrap();
    // Another process's join step holds join.lock (its own open file description).
    let (busy, _) = pfs::open_internal_lock(&path.join("join.lock")).unwrap();
    assert!(lock::flock(&busy, Mode::Exclusive, false).unwrap());
    assert!(group.try_join().unwrap().is_none());
    drop(busy);
    let member = group.try_join().unwrap().expect("free now");
    assert!(member.first());
    assert!(!is_empty(&path).unwrap());
}

/// The clean-up runs for the last member only, with the join lock held: another thread
/// cannot join meanwhile (this one is refused at once), observers count the leaver in, and
/// the next joiner is first.
#[test]
fn leave_then_cleans_up_as_the_last_member_before_anyone_joins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let group = Group::new(&path);
    let a = group.join(None).unwrap().unwrap();
    let b = group.join(None).unwrap().unwrap();
    let (left, ran) = a.leave_then(|_| unreachable!("a is not last")).unwrap();
    assert_eq!((left, ran), (Left::NotLast, None::<()>));
    let (left, ran) = b
        .leave_then(|cleanup| {
            cleanup.set_child(Some(4242), "tear down");
            assert!(!is_empty(&path).unwrap(), "empty while the clean-up runs");
            let listed = members(&path).unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(
                (listed[0].child, listed[0].command.as_str()),
                (Some(4242), "tear down")
            );
            let refused = group.try_join().unwrap_err();
            assert_eq!(refused.kind(), ErrorKind::WouldDeadlock, "{refused}");
            let other = {
                let group = group.clone();
                std::thread::spawn(move || group.try_join().unwrap().is_none())
            };
            assert!(
                other.join().unwrap(),
                "another thread joined during the clean-up"
            );
            7
        })
        .unwrap();
    assert_eq!((left, ran), (Left::Last, Some(7)));
    assert!(is_empty(&path).unwrap());
    let c = group.try_join().unwrap().expect("free again");
    assert!(c.first(), "the joiner after a clean-up is first");
}

#[test]
fn leave_then_with_delete_removes_the_group_after_the_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let group = Group::new(&path).delete_when_empty(true);
    let a = group.join(None).unwrap().unwrap();
    let (left, ran) = a.leave_then(|_| path.join("gate").exists()).unwrap();
    assert_eq!((left, ran), (Left::Last, Some(true)));
    assert!(!path.exists(), "deleted with the last member");
}

/// Observers only read: a dead member's registration is passed over and left in place; the
/// next joiner (first: every registration left is dead) removes it, and so does the last
/// leaver. (Mutants answered: `members` or `is_empty` removing it again; a first joiner or a
/// last leaver leaving it.)
#[test]
fn observers_leave_dead_registrations_to_joiners_and_leavers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    open_dirs(&paths(&path)).unwrap();
    let ghost = |name: &str| {
        let at = path.join("members").join(name);
        std::fs::write(&at, holder::render(&Record::default())).unwrap();
        at
    };
    let first = ghost("ghost.1.1");
    std::fs::write(path.join("gate"), "").unwrap();
    assert!(members(&path).unwrap().is_empty());
    assert!(is_empty(&path).unwrap());
    assert!(wait_empty(&path, Some(Duration::ZERO), crate::wait::DEFAULT_POLL).unwrap());
    assert!(first.exists(), "an observer removed a registration");

    let member = Group::new(&path).join(None).unwrap().unwrap();
    assert!(member.first());
    assert!(!first.exists(), "the first joiner left a dead registration");
    let second = ghost("ghost.2.2");
    assert_eq!(members(&path).unwrap().len(), 1);
    assert!(second.exists(), "an observer removed a registration");
    assert_eq!(member.leave().unwrap(), Left::Last);
    assert!(!second.exists(), "the last leaver left a dead registration");
}

/// An observer waits for a first member and for the last to leave, woken by the joining and
/// the leaving (each wait says it blocks first), and a look with no time to wait answers at
/// once. (Mutants answered: any of the four waits answering a constant.)
#[test]
fn observers_wait_for_a_member_and_for_the_group_to_empty() {
    // A build that waited for ever would fail here after this long, not hang.
    const BOUND: Duration = Duration::from_secs(20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let poll = crate::wait::DEFAULT_POLL;
    assert!(
        !wait_joined(&path, Some(Duration::ZERO), poll).unwrap(),
        "nobody yet"
    );
    assert!(
        wait_empty(&path, Some(Duration::ZERO), poll).unwrap(),
        "a missing group"
    );

    // Waits on threads of their own, each saying when it blocks.
    let observe = |want_member: bool| {
        let (blocked_tx, blocked) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let path = path.clone();
        std::thread::spawn(move || {
            let said = |_| {
                let _ = blocked_tx.send(());
            };
            let got = match want_member {
                true => wait_joined_with(&path, None, poll, said),
                false => wait_empty_with(&path, None, poll, said),
            };
            let _ = done_tx.send(got.map(|o| o.acquired().is_some()));
        });
        blocked.recv_timeout(BOUND).expect("the observer blocks");
        done
    };

    let joined = observe(true);
    let member = Group::new(&path).join(None).unwrap().unwrap();
    assert!(
        joined
            .recv_timeout(BOUND)
            .expect("woken by the join")
            .unwrap()
    );
    assert!(wait_joined(&path, Some(Duration::ZERO), poll).unwrap());
    assert!(!wait_empty(&path, Some(Duration::ZERO), poll).unwrap());

    let emptied = observe(false);
    assert_eq!(member.leave().unwrap(), Left::Last);
    assert!(
        emptied
            .recv_timeout(BOUND)
            .expect("woken by the leaving")
            .unwrap()
    );
    assert!(wait_empty(&path, Some(Duration::ZERO), poll).unwrap());
    assert!(!wait_joined(&path, Some(Duration::ZERO), poll).unwrap());
}
