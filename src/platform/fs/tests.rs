//! Unit tests of [`super`].

use super::*;

/// The identity a name leads to is the one `stat` gives, through a link too, and relative
/// to a directory's descriptor as to the current directory.
#[test]
fn identity_at_follows_names_as_stat_does() {
    use std::os::{fd::AsFd, unix::fs::MetadataExt};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "").unwrap();
    std::os::unix::fs::symlink("f", dir.path().join("link")).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    let want = (meta.dev(), meta.ino());
    assert_eq!(identity_at(None, &file).unwrap(), want);
    assert_eq!(identity_at(None, &dir.path().join("link")).unwrap(), want);
    let d = File::open(dir.path()).unwrap();
    assert_eq!(
        identity_at(Some(d.as_fd()), Path::new("link")).unwrap(),
        want
    );
    let other = std::fs::metadata(dir.path()).unwrap();
    assert_ne!(identity_at(Some(d.as_fd()), Path::new(".")).unwrap(), want);
    assert_eq!(
        identity_at(Some(d.as_fd()), Path::new(".")).unwrap(),
        (other.dev(), other.ino())
    );
    let gone = identity_at(None, &dir.path().join("missing")).unwrap_err();
    assert_eq!(gone.kind(), io::ErrorKind::NotFound);
}

/// Internal lock files: created with no more than the directory's writers allow, an
/// owner's wider one tightened, and access kept for others where they may write.
#[test]
fn internal_lock_files_take_their_mode_from_the_directorys_writers() {
    assert_eq!(internal_lock_mode(0o755), 0o600);
    assert_eq!(internal_lock_mode(0o2775), 0o660);
    assert_eq!(internal_lock_mode(0o1777), 0o666);
    assert_eq!(internal_lock_mode(0o1733), 0o666);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let chmod = |p: &Path, m| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let lock = dir.path().join("lock");
    open_internal_lock(&lock).unwrap();
    assert_eq!(mode(&lock), 0o600);
    chmod(&lock, 0o644);
    open_internal_lock(&lock).unwrap();
    assert_eq!(mode(&lock), 0o600);
    // A subdirectory others write (a prepared group's members): theirs to lock too.
    std::fs::create_dir(dir.path().join("members")).unwrap();
    chmod(&dir.path().join("members"), 0o1777);
    chmod(&lock, 0o644);
    open_internal_lock(&lock).unwrap();
    assert_eq!(mode(&lock), 0o666);
    // Shared after the fact: widened to the rule, never past it; the owner's x kept.
    std::fs::remove_dir(dir.path().join("members")).unwrap();
    for (dir_mode, before, after) in [(0o775, 0o600, 0o660), (0o777, 0o620, 0o666)] {
        chmod(dir.path(), dir_mode);
        chmod(&lock, before);
        open_internal_lock(&lock).unwrap();
        assert_eq!(mode(&lock), after, "{dir_mode:o} {before:o}");
    }
    chmod(&lock, 0o744);
    open_internal_lock(&lock).unwrap();
    assert_eq!(mode(&lock), 0o766);
}

/// Fitting lists the directory only where its mode alone would change the file, and
/// touches no file of another user's, nor one another name reaches; widening never takes
/// access away.
#[test]
fn fitting_asks_what_it_needs_and_widening_only_adds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = File::create(&path).unwrap();
    let mode = || std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    let me = nix::unistd::geteuid().as_raw();
    let unlisted = || -> u32 { panic!("listed the directory") };
    let unasked = || -> bool { panic!("asked for other names") };
    fit(&file, (0o600, me), || 0o755, unlisted, unasked);
    fit(&file, (0o666, me), || 0o1777, unlisted, unasked);
    fit(&file, (0o600, me + 1), unlisted, unlisted, unasked);
    fit(&file, (0o600, me), || 0o777, || 0o777, || false);
    widen(&file, (0o600, me), || 0o777, || false);
    assert_eq!(mode(), 0o644, "changed a file another name reaches");
    fit(&file, (0o644, me), || 0o703, || 0o777, || true);
    assert_eq!(mode(), 0o666);
    widen(&file, (0o644, me), || 0o755, unasked);
    assert_eq!(mode(), 0o666, "widened for a private directory");
    widen(&file, (0o604, me), || 0o775, || true);
    assert_eq!(mode(), 0o664);
    widen(&file, (0o600, me + 1), unlisted, unasked);
    assert_eq!(mode(), 0o664);
}

/// A file is its name's alone with one link, opened by that name: not through a symbolic
/// link, nor a hard link.
#[test]
fn a_file_reached_through_a_link_is_not_its_names_alone() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let at = |name| dir.path().join(name);
    let (path, hard, soft) = (at("f"), at("h"), at("s"));
    let file = File::create(&path).unwrap();
    let nlink = || file.metadata().unwrap().nlink();
    assert!(sole_link_at(&path, &file, nlink()));
    assert!(!sole_link_at(&path, &file, 2));
    assert!(!sole_link_at(&at("other"), &file, nlink()));
    std::os::unix::fs::symlink(&path, &soft).unwrap();
    let through = File::open(&soft).unwrap();
    assert!(!sole_link_at(&soft, &through, nlink()));
    std::fs::hard_link(&path, &hard).unwrap();
    assert!(!sole_link_at(&path, &file, nlink()));
}

/// The error of a user kept out of a file made before the directory was shared: only where
/// they may write the directory and its mode gives them access the file lacks.
#[test]
fn a_file_from_before_the_sharing_is_named_with_its_remedy() {
    let path = Path::new("/x/box/seq");
    let said = |st, dir, w| unshared(path, OPEN, st, dir, w).map(|e| e.to_string());
    let want = |mode, who| {
        format!(
            "/x/box/seq: cannot open lock file: permission denied (its mode {mode} is from \
             before its directory was shared: the next use by its owner, uid 0, widens it, \
             or they can run: chmod {who}+rw /x/box/seq)"
        )
    };
    assert_eq!(
        said((0o100_600, 0), 0o40_777, true),
        Some(want("0600", "go"))
    );
    assert_eq!(said((0o620, 0), 0o2775, true), Some(want("0620", "g")));
    assert_eq!(said((0o600, 0), 0o753, true), Some(want("0600", "o")));
    assert_eq!(said((0o600, 0), 0o777, false), None);
    assert_eq!(said((0o600, 0), 0o755, true), None);
    assert_eq!(said((0o666, 0), 0o777, true), None);
    let e = unshared(path, "cannot write", (0o600, 0), 0o777, true).unwrap();
    assert!(
        e.to_string()
            .starts_with("/x/box/seq: cannot write: permission denied (")
    );
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::PermissionDenied, Some(libc::EACCES))
    );
    let words = ["a/b-c.d", "-x/seq", "it's here", ""].map(shell_word);
    assert_eq!(words, ["a/b-c.d", "./-x/seq", r"'it'\''s here'", "''"]);
}

#[test]
fn network_magics_are_network() {
    assert!(classify(0x6969).network);
    assert!(classify(0x6573_5546).network);
    assert!(!classify(0x0102_1994).network);
}

#[test]
fn open_never_truncates_and_refuses_dangling_links() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("data");
    std::fs::write(&p, b"keep me").unwrap();
    let (_f, access) = open_lock_file(&p, Purpose::Fcntl).unwrap();
    assert_eq!(access, Access::ReadWrite);
    assert_eq!(std::fs::read(&p).unwrap(), b"keep me");

    let link = dir.path().join("link");
    let target = dir.path().join("nowhere");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = open_lock_file(&link, Purpose::Flock).unwrap_err();
    assert!(err.to_string().contains("dangling"), "{err}");
    assert!(!target.exists());

    let missing = dir.path().join("no/such/dir/l");
    let err = open_lock_file(&missing, Purpose::Flock).unwrap_err();
    assert!(err.to_string().contains("parent directory"), "{err}");
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

/// A flock lock file is opened read-only on a local file system (created if missing), and
/// may be a directory; a byte-range lock file may not.
#[test]
fn flock_lock_files_open_read_only_and_may_be_directories() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new.lck");
    let (f, access) = open_lock_file(&p, Purpose::Flock).unwrap();
    assert_eq!(access, Access::ReadOnly);
    assert!(p.is_file());
    let flags = nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
    assert_eq!(flags & libc::O_ACCMODE, libc::O_RDONLY);

    let (d, _) = open_lock_file(dir.path(), Purpose::Flock).unwrap();
    assert!(d.metadata().unwrap().is_dir());
    let err = open_lock_file(dir.path(), Purpose::Fcntl).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
}
