//! Unit tests of [`super`].

use super::*;

/// Every kind of file has its own words in error messages, the planted kinds above all
/// (a device where a lock file belongs). (Mutant answered: a block device described as
/// something else.)
#[test]
fn each_kind_of_file_is_described_in_its_own_words() {
    let of = |kind: SFlag| {
        let mut st = stat::stat("/").expect("stat /");
        st.st_mode = kind.bits() | 0o644;
        describe(&st)
    };
    let kinds = [
        (SFlag::S_IFREG, "a regular file"),
        (SFlag::S_IFDIR, "a directory"),
        (SFlag::S_IFLNK, "a symbolic link"),
        (SFlag::S_IFIFO, "a FIFO"),
        (SFlag::S_IFSOCK, "a socket"),
        (SFlag::S_IFCHR, "a character device"),
        (SFlag::S_IFBLK, "a block device"),
        (SFlag::empty(), "of an unknown type"),
    ];
    for (kind, words) in kinds {
        assert_eq!(of(kind), words, "{kind:?}");
    }
}

/// The long way of [`Dir::top`]: the caller's own links are followed, to a directory only;
/// a dangling one is "missing" to a reader and an error to a creator (its target is never
/// made); a path without a last name (`x/..`) is opened as given.
#[test]
fn top_follows_the_callers_links_to_directories_only() {
    let t = tempfile::tempdir().unwrap();
    let (file, dir) = (t.path().join("file"), t.path().join("dir"));
    std::fs::write(&file, b"data").unwrap();
    std::fs::create_dir(&dir).unwrap();
    let link = |to: &Path, name: &str| {
        let at = t.path().join(name);
        std::os::unix::fs::symlink(to, &at).unwrap();
        at
    };
    let to_dir = link(&dir, "to-dir");
    let to_file = link(&file, "to-file");
    let dangling = link(&t.path().join("nowhere"), "dangling");
    assert!(Dir::top(&to_dir, false, "x").unwrap().is_some());
    assert!(Dir::top(&to_dir, true, "x").unwrap().is_some());
    for create in [false, true] {
        let e = Dir::top(&to_file, create, "x").unwrap_err();
        assert!(
            e.to_string().ends_with("exists and is not a directory"),
            "{e}"
        );
    }
    assert!(Dir::top(&dangling, false, "x").unwrap().is_none());
    let e = Dir::top(&dangling, true, "x").unwrap_err();
    assert!(
        e.to_string().ends_with("exists and is not a directory"),
        "{e}"
    );
    assert!(
        !t.path().join("nowhere").exists(),
        "a dangling link's target was made"
    );
    let up = t.path().join("missing/..");
    assert!(Dir::top(&up, false, "x").unwrap().is_none());
    assert!(Dir::top(&up, true, "x").is_err());
    assert!(Dir::top(&dir.join(".."), false, "x").unwrap().is_some());
}

#[test]
fn links_fifos_and_wrong_kinds_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let top = t.path().join("top");
    let d = Dir::top(&top, true, "cannot create").unwrap().unwrap();
    std::os::unix::fs::symlink(&victim, top.join("link")).unwrap();
    std::os::unix::fs::symlink(t.path(), top.join("dirlink")).unwrap();
    nix::unistd::mkfifo(&top.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    let e = d.open("link", true).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = d.open_or_create("link").unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = d.open("fifo", false).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
    let e = d.create_sub("dirlink").unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(d.unlink_file("fifo").is_err());
    assert!(top.join("fifo").exists());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(d.open("missing", false).unwrap().is_none());
    let sub = d.create_sub("q").unwrap();
    let f = sub.create_new("m", 0o600).unwrap();
    drop(f);
    sub.rename("m", &d, "m2").unwrap();
    assert_eq!(
        d.entries().unwrap().iter().filter(|e| e.0 == "m2").count(),
        1
    );
    assert!(
        Dir::top(&t.path().join("absent"), false, "x")
            .unwrap()
            .is_none()
    );
}

/// A hard link to a file with a name of its own, made and removed again in a loop (another
/// user's flip, where `fs.protected_hardlinks` is off), is never taken for a sole link, even
/// when our count and our look-up fall inside the unlink: the kernel drops the count before it
/// marks the entry deleted, so between the two both say "ours alone". Both forms, by directory
/// and by path. (Without `settle`, about 1 in 5,000 opens took the victim's file.)
#[test]
fn a_hard_link_flipped_in_and_out_is_never_a_sole_link() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    // Writable by others: the kernel must be asked (the owner's own directory is trusted).
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, b"").unwrap();
    let d = Dir::top(t.path(), false, "cannot open").unwrap().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flippers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, victim, at) = (stop.clone(), victim.clone(), t.path().join("rec"));
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::hard_link(&victim, &at);
                    let _ = std::fs::remove_file(&at);
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let at = t.path().join("rec");
    let (mut opened, mut taken) = (0u64, 0u64);
    let start = std::time::Instant::now();
    while opened < 200_000 && start.elapsed() < std::time::Duration::from_secs(3) {
        if let Ok(Some((f, st))) = d.open_stat("rec", true) {
            opened += 1;
            let by_path = crate::platform::fs::sole_link_at(&at, &f, st.st_nlink);
            if d.sole_link("rec", &f, Some(&st)).unwrap() || by_path {
                taken += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds: u64 = flippers.into_iter().map(|f| f.join().unwrap()).sum();
    assert!(
        opened > 0 && rounds > 0,
        "no race: {opened} opened, {rounds} flips"
    );
    assert_eq!(
        taken, 0,
        "a victim's file taken for ours {taken} times of {opened}"
    );
}

/// A private subdirectory is one the caller owns and nobody else may enter or write: made
/// 0700 if missing; an existing one open to its group or to others, or a link, is none.
/// (Mutants answered: the owner's or the mode's check dropped or inverted.)
#[test]
fn a_private_sub_is_the_callers_alone() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let d = Dir::top(t.path(), false, "x").unwrap().unwrap();
    let made = d.private_sub("p").expect("made");
    assert_eq!(made.status().unwrap().st_mode & 0o777, 0o700);
    assert!(d.private_sub("p").is_some(), "found again");
    let chmod = |mode| {
        let p = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(t.path().join("p"), p).unwrap();
    };
    for mode in [0o750, 0o705, 0o770, 0o701, 0o720, 0o702] {
        chmod(mode);
        assert!(d.private_sub("p").is_none(), "{mode:o}");
    }
    chmod(0o500);
    assert!(d.private_sub("p").is_some(), "0500");
    std::os::unix::fs::symlink(t.path().join("p"), t.path().join("l")).unwrap();
    assert!(d.private_sub("l").is_none(), "a link");
}

/// Entries come with their kind where the file system tells it (a regular file, a
/// directory), none for anything else; never `.` or `..`. (Mutants answered: the arms that
/// name a file or a directory deleted.)
#[test]
fn entries_name_files_and_directories_and_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f"), b"").unwrap();
    std::fs::create_dir(t.path().join("d")).unwrap();
    std::os::unix::fs::symlink("f", t.path().join("l")).unwrap();
    nix::unistd::mkfifo(&t.path().join("p"), Mode::from_bits_truncate(0o600)).unwrap();
    let d = Dir::top(t.path(), false, "x").unwrap().unwrap();
    let mut found = d.entries().unwrap();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let kinds: Vec<_> = found.iter().map(|(n, k)| (n.as_str(), *k)).collect();
    assert_eq!(
        kinds,
        [
            ("d", Some(Kind::Dir)),
            ("f", Some(Kind::File)),
            ("l", None),
            ("p", None)
        ]
    );
    assert!(d.any_entry(|n| n == "p").unwrap());
    assert!(!d.any_entry(|n| n == "." || n == "..").unwrap());
}

/// An internal lock file is made for whoever may write the directory or one of its
/// subdirectories (not through links), and no one else: a file's mode counts for nothing.
/// (Mutants answered: the union of the modes made a constant, an intersection, or taken
/// over files instead of directories.)
#[test]
fn a_lock_file_is_made_for_who_may_write_the_directory_or_a_subdirectory() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let chmod = |p: &Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(t.path(), 0o700);
    std::fs::write(t.path().join("file"), b"").unwrap();
    chmod(&t.path().join("file"), 0o777);
    std::os::unix::fs::symlink("/tmp", t.path().join("link")).unwrap();
    let d = Dir::top(t.path(), false, "x").unwrap().unwrap();
    let mode = |name: &str| {
        let f = d.open_or_create(name).unwrap();
        f.metadata().unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode("alone"), 0o600);
    std::fs::create_dir(t.path().join("group")).unwrap();
    chmod(&t.path().join("group"), 0o770);
    assert_eq!(mode("grouped"), 0o660);
    std::fs::create_dir(t.path().join("all")).unwrap();
    chmod(&t.path().join("all"), 0o777);
    assert_eq!(mode("shared"), 0o666);
}

/// What the opens say of each kind met at a name, in their own words: a link where a file
/// belongs is "a symbolic link", a file where a directory belongs "a regular file"; a name
/// under a file is neither missing nor a link. (Mutants answered: `open_stat`'s and
/// `open_sub`'s guards taking any error for the one they name.)
#[test]
fn each_open_names_what_it_met() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("f"), b"").unwrap();
    std::os::unix::fs::symlink("f", t.path().join("l")).unwrap();
    let d = Dir::top(t.path(), false, "x").unwrap().unwrap();
    let e = d.open("l", false).unwrap_err().to_string();
    assert!(
        e.ends_with("l: is a symbolic link, not a regular file fsync made; not using it"),
        "{e}"
    );
    let e = d.open("f/x", false).unwrap_err().to_string();
    assert!(
        e.ends_with("a component of the path is not a directory"),
        "{e}"
    );
    let e = d.open_sub("f").unwrap_err().to_string();
    assert!(
        e.ends_with("f: is a regular file, not a directory fsync made; not using it"),
        "{e}"
    );
    let e = d.open_sub("l").unwrap_err().to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    assert!(d.open_sub("missing").unwrap().is_none());
    assert!(d.open("missing", false).unwrap().is_none());
}
