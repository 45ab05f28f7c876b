//! Shared world-writable sticky directories (`/tmp`): another user plants symbolic links where
//! fsync will create or write its files; fsync (here as root, the worst case) must never write,
//! truncate or create through them. The kernel's `fs.protected_symlinks` would stop some of
//! this, but it is off on many machines (it is here), so fsync must not rely on it.

use std::{
    os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    path::Path,
    time::Duration,
};

use crate::harness::{Cmd, HOLD, Output, TestDir, fsync_bin, json_of, require, require_root};

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn another_users_symlinks_in_a_sticky_directory_are_not_followed_to_write() {
    require_root();
    require("runuser", "util-linux");
    let t = TestDir::new();
    t.open_to_others();
    let shared = t.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim_dir = t.join("victim");
    std::fs::create_dir(&victim_dir).unwrap();
    t.write("victim/precious", "precious");
    let plant = |target: &str, link: &str| {
        let out = t
            .cmd("runuser")
            .args([
                "-u",
                "nobody",
                "--",
                "ln",
                "-s",
                target,
                &format!("{}/{link}", shared.display()),
            ])
            .run();
        out.code(0);
    };
    // A mailbox directory that is really a link to the victim's directory.
    plant(victim_dir.to_str().unwrap(), "box");
    let out = t
        .fsync([
            "msg",
            "post",
            &format!("{}/box", shared.display()),
            "--data",
            "x",
        ])
        .run();
    out.code(77)
        .stderr_has("symbolic link owned by another user");
    assert_eq!(
        std::fs::read_dir(&victim_dir).unwrap().count(),
        1,
        "fsync wrote into the victim's directory"
    );
    // A holder record that is really a link to the victim's file.
    plant(&format!("{}/precious", victim_dir.display()), ".L.fsync");
    t.fsync([
        "mutex",
        "run",
        &format!("{}/L", shared.display()),
        "--",
        "true",
    ])
    .run()
    .code(0);
    assert_eq!(
        t.read("victim/precious"),
        "precious",
        "the holder record was written through a link"
    );
    // A lock file that is a dangling link: its target is never created.
    plant(&format!("{}/created", victim_dir.display()), "M");
    let out = t
        .fsync([
            "mutex",
            "run",
            &format!("{}/M", shared.display()),
            "--",
            "true",
        ])
        .run();
    out.operational_error("M");
    assert!(
        !victim_dir.join("created").exists(),
        "a dangling link's target was created"
    );
    // The same through `fsync flock`, in flock(1)'s words and status.
    t.fsync(["flock", &format!("{}/M", shared.display()), "true"])
        .run()
        .code(66)
        .stderr_has("cannot open lock file");
    assert!(
        !victim_dir.join("created").exists(),
        "fsync flock created a dangling link's target"
    );
    // A group directory that is a link elsewhere.
    plant(victim_dir.to_str().unwrap(), "G");
    t.fsync([
        "group",
        "join",
        &format!("{}/G", shared.display()),
        "--",
        "true",
    ])
    .run()
    .code(77);
    assert_eq!(std::fs::read_dir(&victim_dir).unwrap().count(), 1);
}

// The hostile shared directory: `shared/` (mode 1777) where `nobody` plants entries in the
// positions each primitive's protocol uses, before root runs fsync there. The victim is a
// root-only directory outside it. Every fsync run must finish, leave the victim byte for byte
// as it was, create nothing beside it, and either fail with an operational error naming the
// planted entry or skip that entry harmlessly (each test says which).

/// What a run meeting a planted FIFO may take before the test calls it a hang.
const NO_HANG: Duration = Duration::from_secs(10);

/// The victim's secret: `victim/precious`, mode 0600, root's.
const PRECIOUS: &str = "precious";

/// A message name that sorts before every real one (sequence number 0).
/// The first shard of a mailbox's queue, where messages numbered below 100 are queued.
const SHARD0: &str = "00000000000000000000";

fn planted_message(n: u32) -> String {
    format!("00000000000000000000.h-{n}-0.-.msg")
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A file of the victim's directory as it was, to compare with afterwards.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    name: String,
    content: Vec<u8>,
    uid: u32,
    mode: u32,
    nlink: u64,
    mtime: (i64, i64),
}

fn snapshot(dir: &Path) -> Vec<Snapshot> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let meta = std::fs::symlink_metadata(&path).unwrap();
            Snapshot {
                content: std::fs::read(&path).unwrap_or_default(),
                uid: meta.uid(),
                mode: meta.mode(),
                nlink: meta.nlink(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                name,
            }
        })
        .collect()
}

/// A test directory with `shared/` (1777) and the victim (`victim/precious`, and
/// `victim/count` holding `1`, both root's and 0600, in a root-owned 0755 directory).
struct Hostile {
    t: TestDir,
    before: Vec<Snapshot>,
}

impl Hostile {
    /// Acting as two users needs root: fails without it.
    #[track_caller]
    fn new() -> Hostile {
        require_root();
        require("runuser", "util-linux");
        let t = TestDir::new();
        t.open_to_others();
        std::fs::create_dir(t.join("shared")).unwrap();
        chmod(&t.join("shared"), 0o1777);
        std::fs::create_dir(t.join("victim")).unwrap();
        chmod(&t.join("victim"), 0o755);
        t.write("victim/precious", PRECIOUS);
        chmod(&t.join("victim/precious"), 0o600);
        t.write("victim/count", "1\n");
        chmod(&t.join("victim/count"), 0o600);
        let before = snapshot(&t.join("victim"));
        Hostile { t, before }
    }

    /// The victim file's absolute path (a link target).
    fn victim(&self) -> String {
        self.t.arg("victim/precious")
    }

    /// The victim's directory's absolute path (a link target).
    fn victim_dir(&self) -> String {
        self.t.arg("victim")
    }

    /// `fsync ARGS` as root (paths relative to the test directory).
    fn fsync<const N: usize>(&self, args: [&str; N]) -> Cmd {
        self.t.fsync(args)
    }

    /// `ARGS` as `nobody`, in the test directory.
    fn nobody<const N: usize>(&self, args: [&str; N]) -> Cmd {
        self.t
            .cmd("runuser")
            .args(["-u", "nobody", "--"])
            .args(args)
    }

    /// `fsync ARGS` as `nobody`.
    fn fsync_as_nobody<const N: usize>(&self, args: [&str; N]) -> Cmd {
        self.nobody([fsync_bin().to_str().unwrap()]).args(args)
    }

    #[track_caller]
    fn as_nobody<const N: usize>(&self, args: [&str; N]) {
        self.nobody(args).run().code(0);
    }

    /// `nobody` makes `at` a symbolic link to `target`.
    #[track_caller]
    fn link(&self, target: &str, at: &str) {
        self.as_nobody(["ln", "-s", target, at]);
    }

    #[track_caller]
    fn fifo(&self, at: &str) {
        self.as_nobody(["mkfifo", at]);
    }

    #[track_caller]
    fn mkdir(&self, at: &str) {
        self.as_nobody(["mkdir", at]);
    }

    /// `nobody` creates the regular file `at` holding `content`.
    #[track_caller]
    fn file(&self, at: &str, content: &str) {
        self.as_nobody(["sh", "-c", "printf '%s' \"$1\" > \"$2\"", "sh", content, at]);
    }

    /// The victim's directory holds what it held, byte for byte, and nothing more.
    #[track_caller]
    fn assert_victim_untouched(&self) {
        let now = snapshot(&self.t.join("victim"));
        assert_eq!(
            now, self.before,
            "the victim's directory changed (written, truncated, created in or removed from)"
        );
    }

    /// What kind of file `at` is now (not following a link), if it exists.
    fn kind(&self, at: &str) -> Option<&'static str> {
        let t = std::fs::symlink_metadata(self.t.join(at)).ok()?.file_type();
        Some(match () {
            () if t.is_symlink() => "symlink",
            () if t.is_fifo() => "fifo",
            () if t.is_dir() => "directory",
            () if t.is_char_device() => "char device",
            () if t.is_file() => "file",
            () => "other",
        })
    }

    #[track_caller]
    fn assert_kind(&self, at: &str, want: &str) {
        assert_eq!(
            self.kind(at),
            Some(want),
            "{at} was removed or replaced by root's fsync"
        );
    }
}

/// Running root's fsync in the hostile directory: the victim is checked first, so that a
/// working attack is what a failure reports.
trait RunIn {
    fn run_in(self, h: &Hostile) -> Output;
}

impl RunIn for Cmd {
    #[track_caller]
    fn run_in(self, h: &Hostile) -> Output {
        let out = self.run();
        let now = snapshot(&h.t.join("victim"));
        assert_eq!(
            now, h.before,
            "the victim's directory changed (written, truncated, created in or removed from)\n\
             status: {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status, out.stdout, out.stderr
        );
        out
    }
}

/// Exit 0, and every stderr line in the CONTRACT's `fsync: ` form; at least `min` of them.
#[track_caller]
fn success_with_notes(out: &Output, min: usize) {
    out.code(0);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines.len() >= min && lines.iter().all(|l| l.starts_with("fsync: ")),
        "expected at least {min} stderr line(s), each starting `fsync: `, got:\n{}",
        out.stderr
    );
}

// The racing neighbour: `nobody` changes names in a loop while root's fsync works
// (tests/fixtures/racer.py): a primitive's directory swapped with a link to root's private one,
// a hard link to root's file flipped in and out at a name fsync writes. Each case runs the
// race for a bounded time and asserts that root's files were never touched.

/// How long each race runs.
const RACE: &str = "3";

impl Hostile {
    /// `racer.py MODE RACE ARGS` as `nobody`, once it has started racing.
    #[track_caller]
    fn race<const N: usize>(&self, mode: &str, args: [&str; N]) -> crate::harness::Holder {
        require("python3", "python3");
        let racer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/racer.py");
        let mut r = self
            .nobody(["python3", racer.to_str().unwrap(), mode, RACE])
            .args(args)
            .start();
        r.expect("racing");
        r
    }

    /// A private directory of root's (0700) outside the shared one: `private/NAME`.
    fn private(&self) -> String {
        let dir = self.t.join("private");
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
            chmod(&dir, 0o700);
        }
        self.t.arg("private")
    }
}

/// Run `round` until the racer is done; at least `min` rounds.
#[track_caller]
fn while_racing(mut racer: crate::harness::Holder, min: usize, mut round: impl FnMut()) {
    let mut rounds = 0;
    while racer.running() || rounds < min {
        round();
        rounds += 1;
    }
    let out = racer.finish();
    assert!(
        out.stdout.contains("rounds "),
        "the racer failed:\n{}{}",
        out.stdout,
        out.stderr
    );
}

/// `nobody` links `shared/link` to root's `private` and swaps it with `shared/NAME` in a loop.
#[track_caller]
fn swapping(h: &Hostile, name: &str, private: &str) -> crate::harness::Holder {
    h.as_nobody(["ln", "-s", private, "shared/link"]);
    h.race("swap", [&format!("shared/{name}"), "shared/link"])
}

/// A run during a swap: done (it met a directory), or refused naming what it met (66, 77).
#[track_caller]
fn done_or_refused(out: &Output) {
    assert!(
        matches!(out.status.code(), Some(0 | 66 | 77)),
        "{:?}\n{}",
        out.status,
        out.stderr
    );
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, std::iter::Iterator::count)
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_mailbox_swapped_with_a_link_to_roots_private_one_is_never_used() {
    let h = Hostile::new();
    let private = format!("{}/box", h.private());
    for n in 0..20 {
        h.fsync(["msg", "post", &private, "--data", &format!("secret {n}")])
            .run()
            .code(0);
    }
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "nobody's"])
        .run()
        .code(0);
    let racer = swapping(&h, "box", &private);
    let mut got = String::new();
    while_racing(racer, 20, || {
        let out = h.fsync(["msg", "recv", "-n", "shared/box"]).run();
        got.push_str(&out.stdout);
        let out = h
            .fsync(["msg", "post", "shared/box", "--data", "root's"])
            .run();
        done_or_refused(&out);
    });
    assert!(
        !got.contains("secret"),
        "root received from its private mailbox: {got}"
    );
    assert_eq!(
        crate::harness::queued_files(Path::new(&private)).len(),
        20,
        "root's private mailbox changed"
    );
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_semaphore_swapped_with_a_link_to_roots_private_directory_is_never_used() {
    let h = Hostile::new();
    let private = h.private();
    h.fsync_as_nobody(["sem", "run", "shared/s.sem", "--slots", "2", "--", "true"])
        .run()
        .code(0);
    let racer = swapping(&h, "s.sem", &private);
    while_racing(racer, 20, || {
        let out = h
            .fsync(["sem", "run", "shared/s.sem", "--slots", "2", "--", "true"])
            .run();
        done_or_refused(&out);
    });
    assert_eq!(
        entries(Path::new(&private)),
        0,
        "root created files in its private directory"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_group_swapped_with_a_link_to_roots_private_group_is_never_used() {
    let h = Hostile::new();
    let private = format!("{}/G", h.private());
    h.fsync(["group", "join", &private, "--", "true"])
        .run()
        .code(0);
    let join_lock = Path::new(&private).join("join.lock");
    let before = std::fs::metadata(&join_lock).unwrap().ino();
    h.fsync_as_nobody(["group", "join", "shared/G", "--", "true"])
        .run()
        .code(0);
    h.file("shared/G/keep", "so that --delete leaves the directory"); // and the race goes on
    let racer = swapping(&h, "G", &private);
    while_racing(racer, 20, || {
        let out = h
            .fsync(["group", "join", "--delete", "shared/G", "--", "true"])
            .run();
        done_or_refused(&out);
    });
    let after = std::fs::metadata(&join_lock).map(|m| m.ino()).ok();
    assert_eq!(
        after,
        Some(before),
        "root's private join.lock was deleted or replaced"
    );
}

/// Resetting an event removes its file: in the directory opened once, never through a name
/// that now leads to root's private directory (where an empty file of the same name waits).
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn an_event_directory_swapped_with_a_link_to_roots_private_one_loses_nothing_of_roots() {
    let h = Hostile::new();
    let private = h.private();
    let roots = Path::new(&private).join("E");
    std::fs::write(&roots, "").unwrap();
    h.as_nobody(["mkdir", "shared/d"]);
    let racer = swapping(&h, "d", &private);
    while_racing(racer, 20, || {
        let out = h.fsync(["event", "reset", "shared/d/E"]).run();
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 66 | 77)),
            "{:?}\n{}",
            out.status,
            out.stderr
        );
    });
    assert!(
        roots.exists(),
        "root's private file was removed through the link"
    );
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_group_lock_swapped_with_a_link_to_roots_private_one_is_never_used() {
    let h = Hostile::new();
    let private = format!("{}/GL", h.private());
    h.fsync(["grouplock", "run", "--group", "a", &private, "--", "true"])
        .run()
        .code(0);
    let before = snapshot(Path::new(&private));
    h.fsync_as_nobody([
        "grouplock",
        "run",
        "--group",
        "a",
        "shared/GL",
        "--",
        "true",
    ])
    .run()
    .code(0);
    let racer = swapping(&h, "GL", &private);
    while_racing(racer, 20, || {
        let out = h
            .fsync([
                "grouplock",
                "run",
                "--group",
                "b",
                "--max",
                "1",
                "shared/GL",
                "--",
                "true",
            ])
            .run();
        done_or_refused(&out);
    });
    assert_eq!(
        snapshot(Path::new(&private)),
        before,
        "root's private group lock changed"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_bus_swapped_with_a_link_to_roots_private_one_gets_no_delivery() {
    let h = Hostile::new();
    let private = format!("{}/BUS", h.private());
    h.fsync(["bus", "connect", &private, "alice"]).run().code(0);
    h.fsync(["bus", "connect", &private, "root"]).run().code(0);
    let inbox = Path::new(&private).join("alice");
    let before = snapshot(&inbox);
    h.fsync_as_nobody(["bus", "connect", "shared/BUS", "alice"])
        .run()
        .code(0);
    h.fsync_as_nobody(["bus", "connect", "shared/BUS", "root"])
        .run()
        .code(0);
    let racer = swapping(&h, "BUS", &private);
    while_racing(racer, 20, || {
        h.fsync([
            "bus",
            "send",
            "--from",
            "root",
            "--to",
            "alice",
            "shared/BUS",
            "--data",
            "forged",
        ])
        .run();
    });
    assert_eq!(
        snapshot(&inbox),
        before,
        "root's private bus got a delivery"
    );
}

/// `fs.protected_hardlinks` off while any of these lives, in any test process, so that `nobody`
/// can link root's files; the setting is put back when the last is dropped. Test processes run
/// at once (nextest runs each test in a process of its own), so who uses it is counted with
/// `flock` on a file beside the saved setting: each user holds a shared lock on it while it
/// lives (a killed one lets go with its death), and whoever, letting go, can then have it
/// exclusively was the last, and puts the setting back.
pub(crate) struct HardlinksUnprotected(Option<nix::fcntl::Flock<std::fs::File>>);

const PROTECTED_HARDLINKS: &str = "/proc/sys/fs/protected_hardlinks";
const UNPROTECTED_USERS: &str = "/tmp/fsync-tests-hardlinks-unprotected";
const SAVED_SETTING: &str = "/tmp/fsync-tests-hardlinks-saved";

impl HardlinksUnprotected {
    pub(crate) fn new() -> HardlinksUnprotected {
        use nix::fcntl::{Flock, FlockArg};
        let users = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(UNPROTECTED_USERS)
            .expect("open the users' lock");
        let setup = Flock::lock(users, FlockArg::LockExclusive).expect("lock the users' lock");
        if !Path::new(SAVED_SETTING).exists() {
            let setting = std::fs::read_to_string(PROTECTED_HARDLINKS).expect("read the setting");
            std::fs::write(SAVED_SETTING, setting.trim()).expect("save the setting");
        }
        std::fs::write(PROTECTED_HARDLINKS, "0").expect("root turns the setting off");
        let users = setup.unlock().expect("let go of the users' lock");
        let shared = Flock::lock(users, FlockArg::LockShared).expect("share the users' lock");
        HardlinksUnprotected(Some(shared))
    }
}

impl Drop for HardlinksUnprotected {
    fn drop(&mut self) {
        use nix::fcntl::{Flock, FlockArg};
        let Some(Ok(users)) = self.0.take().map(Flock::unlock) else {
            return;
        };
        if let Ok(_last) = Flock::lock(users, FlockArg::LockExclusiveNonblock)
            && let Ok(saved) = std::fs::read_to_string(SAVED_SETTING)
        {
            let _ = std::fs::write(PROTECTED_HARDLINKS, saved.trim());
            let _ = std::fs::remove_file(SAVED_SETTING);
        }
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_post_never_writes_a_hard_link_to_roots_file_flipped_in_at_seq() {
    let h = Hostile::new();
    let _unprotected = HardlinksUnprotected::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "x"])
        .run()
        .code(0);
    h.as_nobody(["rm", "shared/box/seq"]);
    let count = h.t.arg("victim/count");
    let racer = h.race("flip", [&count, "shared/box/seq"]);
    while_racing(racer, 20, || {
        let out = h
            .fsync(["msg", "post", "shared/box", "--data", "root's"])
            .run();
        assert!(
            matches!(out.status.code(), Some(0 | 66)),
            "{:?}\n{}",
            out.status,
            out.stderr
        );
    });
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_recv_never_hands_on_a_hard_link_to_roots_file_flipped_into_the_queue() {
    let h = Hostile::new();
    let _unprotected = HardlinksUnprotected::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "x"])
        .run()
        .code(0);
    let at = format!("shared/box/q/{SHARD0}/{}", planted_message(1));
    let racer = h.race("flip", [&h.victim(), &at]);
    let mut got = String::new();
    while_racing(racer, 20, || {
        let out = h.fsync(["msg", "recv", "-n", "shared/box"]).run();
        got.push_str(&out.stdout);
    });
    assert!(!got.contains(PRECIOUS), "root's file was received: {got}");
    h.assert_victim_untouched();
}

/// Root's mutex in `dir` while `nobody` flips a hard link to root's empty file in and out at
/// its record: the file stays empty.
fn mutex_record_flip_in(h: &Hostile, dir: &str) {
    let _unprotected = HardlinksUnprotected::new();
    let empty = h.t.join("private-empty");
    std::fs::write(&empty, "").unwrap();
    chmod(&empty, 0o600);
    let (record, lock) = (format!("{dir}/.L.fsync"), format!("{dir}/L"));
    let racer = h.race("flip", [empty.to_str().unwrap(), &record]);
    while_racing(racer, 20, || {
        h.fsync(["mutex", "run", &lock, "--", "true"]).run().code(0);
    });
    assert_eq!(
        std::fs::read(&empty).unwrap(),
        b"",
        "root's empty file got a record"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_never_writes_its_record_into_a_hard_link_to_roots_file_flipped_in() {
    let h = Hostile::new();
    h.mkdir("shared/nobodys"); // where nobody may unlink root's record too
    mutex_record_flip_in(&h, "shared/nobodys");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_never_writes_its_record_into_a_link_flipped_in_a_directory_root_shares_with_a_group() {
    let h = Hostile::new();
    // Root's own directory, writable by nobody's group: root's, but not root's alone.
    let dir = h.t.join("team");
    std::fs::create_dir(&dir).unwrap();
    let group = nix::unistd::Group::from_name("nogroup")
        .unwrap()
        .expect("group nogroup");
    nix::unistd::chown(&dir, None, Some(group.gid)).unwrap();
    chmod(&dir, 0o775);
    mutex_record_flip_in(&h, "team");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_run_delete_never_writes_its_fence_into_a_hard_link_to_roots_file_flipped_in() {
    let h = Hostile::new();
    let _unprotected = HardlinksUnprotected::new();
    h.mkdir("shared/nobodys"); // where nobody may unlink root's fence file too
    let count = h.t.arg("victim/count");
    let racer = h.race("flip", [&count, "shared/nobodys/.fsync.fence"]);
    while_racing(racer, 20, || {
        (h.fsync(["mutex", "run", "--delete", "shared/nobodys/L", "--", "true"]))
            .run()
            .code(0);
    });
    h.assert_victim_untouched();
}

/// `group join --delete` removes the emptied group's directory by the sticky rule the kernel
/// applies to everyone but root, applied to root too: in a sticky directory only the caller's
/// or the sticky directory owner's.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_delete_removes_another_users_group_directory_only_where_the_sticky_rule_allows() {
    let h = Hostile::new();
    // Group directories nobody made, which root's members fill and empty: in nobody's sticky
    // directory root leaves nobody's (emptied) directory there ...
    h.mkdir("shared/theirs");
    h.as_nobody(["chmod", "1777", "shared/theirs"]);
    h.mkdir("shared/theirs/G");
    h.fsync(["group", "join", "--delete", "shared/theirs/G", "--", "true"])
        .run_in(&h)
        .code(0);
    h.assert_kind("shared/theirs/G", "directory");
    assert_eq!(
        entries(&h.t.join("shared/theirs/G")),
        0,
        "root left its files"
    );
    // ... and removes its own there, and nobody's in its own sticky `shared`.
    h.fsync(["group", "join", "--delete", "shared/theirs/R", "--", "true"])
        .run_in(&h)
        .code(0);
    assert_eq!(h.kind("shared/theirs/R"), None, "root's own group was left");
    h.mkdir("shared/N");
    h.fsync(["group", "join", "--delete", "shared/N", "--", "true"])
        .run_in(&h)
        .code(0);
    assert_eq!(
        h.kind("shared/N"),
        None,
        "the sticky directory's owner may remove it"
    );
    // Without the sticky bit the rule does not apply: nobody's group in nobody's own directory.
    h.mkdir("shared/plain");
    h.mkdir("shared/plain/G");
    h.fsync(["group", "join", "--delete", "shared/plain/G", "--", "true"])
        .run_in(&h)
        .code(0);
    assert_eq!(
        h.kind("shared/plain/G"),
        None,
        "no sticky bit, no sticky rule"
    );
}

// Primitives another user made first in a sticky world-writable directory: they can remove
// their files at any moment. Lock files are refused; semaphores and groups are used with a
// warning.

/// Another user's symbolic link at a lock's path is never followed to a file of root's, in
/// any directory: one of theirs (sticky or not, where the kernel's `fs.protected_symlinks`
/// lets root follow the directory owner's links) or root's own that their group may write
/// (where it does not apply). `fsync flock` follows it, as util-linux flock does.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn another_users_link_at_a_lock_path_is_refused_in_any_directory() {
    let h = Hostile::new();
    h.mkdir("shared/plain");
    h.mkdir("shared/sticky");
    h.as_nobody(["chmod", "1777", "shared/sticky"]);
    let team = h.t.join("team");
    std::fs::create_dir(&team).unwrap();
    let group = nix::unistd::Group::from_name("nogroup")
        .unwrap()
        .expect("group nogroup");
    nix::unistd::chown(&team, None, Some(group.gid)).unwrap();
    chmod(&team, 0o775);
    for dir in ["shared/plain", "shared/sticky", "team"] {
        let lock = format!("{dir}/L");
        h.link(&h.victim(), &lock);
        for args in [
            &["mutex", "run", &lock, "--", "true"][..],
            &["mutex", "run", "--range", "0:1", &lock, "--", "true"],
            &["swmr", "read", &lock, "--", "true"],
            &["swmr", "write", &lock, "--", "true"],
        ] {
            h.fsync([])
                .args(args)
                .run_in(&h)
                .code(77)
                .stdout("")
                .stderr_has("is a symbolic link owned by another user (uid");
        }
        h.assert_kind(&lock, "symlink");
        h.fsync(["flock", &lock, "true"]).run_in(&h).code(0);
    }
    // Root's own link, in the same places, is followed.
    for dir in ["shared/plain", "team"] {
        let own = format!("{dir}/own");
        std::os::unix::fs::symlink(h.t.join("victim/count"), h.t.join(&own)).unwrap();
        h.fsync(["mutex", "run", &own, "--", "true"])
            .run_in(&h)
            .code(0);
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_lock_file_another_user_made_in_a_sticky_directory_is_refused() {
    let h = Hostile::new();
    h.file("shared/L", "");
    for args in [
        ["mutex", "run", "shared/L", "--", "true"],
        ["swmr", "read", "shared/L", "--", "true"],
        ["swmr", "write", "shared/L", "--", "true"],
    ] {
        h.fsync(args)
            .run_in(&h)
            .code(77)
            .stderr_has("belongs to another user (uid");
    }
    h.assert_kind("shared/L", "file");
    // Outside a world-writable sticky directory the rule does not apply: a lock file of
    // nobody's that root keeps in its own directory, or that nobody keeps in theirs.
    h.t.write("own.lck", "");
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("user nobody");
    nix::unistd::chown(&h.t.join("own.lck"), Some(nobody.uid), None).unwrap();
    h.mkdir("shared/nobodys");
    h.file("shared/nobodys/L", "");
    for lock in ["own.lck", "shared/nobodys/L"] {
        h.fsync(["mutex", "run", lock, "--", "true"])
            .run_in(&h)
            .code(0);
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn another_user_churning_a_lock_file_never_lets_two_holders_in() {
    let h = Hostile::new();
    let racer = h.race("churn", ["shared/L"]);
    // Two of root's loops contend for the lock while nobody makes and removes the file.
    let inside = "if mkdir in.d 2>/dev/null; then rmdir in.d; else echo GOOFUP; fi";
    let worker = |_| {
        h.t.sh(&format!(
            "end=$(($(date +%s) + {RACE})); while [ $(date +%s) -lt $end ]; do \
             \"$FSYNC\" mutex run shared/L -- sh -c '{inside}; {inside}'; done; echo done"
        ))
        .env("FSYNC", fsync_bin())
        .start()
    };
    let workers: Vec<_> = (0..2).map(worker).collect();
    let outs: Vec<_> = workers.into_iter().map(|w| w.finish()).collect();
    racer.finish();
    for out in outs {
        assert!(out.stdout.contains("done"), "{}{}", out.stdout, out.stderr);
        assert!(
            !out.stdout.contains("GOOFUP"),
            "two holders at once:\n{}",
            out.stdout
        );
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_semaphore_or_group_another_user_made_in_a_sticky_directory_is_used_with_a_warning_under_v() {
    let h = Hostile::new();
    h.fsync_as_nobody(["sem", "run", "shared/s.sem", "--slots", "1", "--", "true"])
        .run()
        .code(0);
    h.fsync([
        "sem",
        "run",
        "-v",
        "shared/s.sem",
        "--slots",
        "1",
        "--",
        "true",
    ])
    .run_in(&h)
    .code(0)
    .stderr_has("shared/s.sem: warning: belongs to another user (uid");
    h.fsync_as_nobody(["group", "join", "shared/G", "--", "true"])
        .run()
        .code(0);
    h.fsync(["group", "join", "-v", "shared/G", "--", "true"])
        .run_in(&h)
        .code(0)
        .stderr_has("make it look empty while members are in");
    h.fsync(["group", "wait-empty", "-v", "shared/G"])
        .run_in(&h)
        .code(0)
        .stderr_has("shared/G: warning: belongs to another user");
    h.fsync_as_nobody([
        "grouplock",
        "run",
        "--group",
        "a",
        "shared/GL",
        "--",
        "true",
    ])
    .run()
    .code(0);
    h.fsync([
        "grouplock",
        "run",
        "-v",
        "--group",
        "a",
        "shared/GL",
        "--",
        "true",
    ])
    .run_in(&h)
    .code(0)
    .stderr_has("let two groups in at once");
    // Root's own, in the same directory: no word.
    let out = (h.fsync([
        "sem",
        "run",
        "-v",
        "shared/mine.sem",
        "--slots",
        "1",
        "--",
        "true",
    ]))
    .run_in(&h);
    out.code(0);
    assert!(!out.stderr.contains("another user"), "{}", out.stderr);
    h.fsync(["doctor", "shared/s.sem"])
        .run_in(&h)
        .stdout_has("belongs to another user");
}

// msg: `B/seq` (a lock file and counter), `B/tmp`, `B/q`, `B/claimed`, `B/recv`, `B/senders`.

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_post_does_not_write_through_a_seq_link() {
    let h = Hostile::new();
    h.mkdir("shared/jobs");
    h.link(&h.victim(), "shared/jobs/seq");
    h.fsync(["msg", "post", "shared/jobs", "--data", "x"])
        .run_in(&h)
        .operational_error("jobs/seq");
    h.assert_victim_untouched();
    h.assert_kind("shared/jobs/seq", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_send_does_not_write_through_a_seq_link() {
    let h = Hostile::new();
    h.mkdir("shared/jobs");
    h.link(&h.victim(), "shared/jobs/seq");
    h.fsync(["msg", "send", "shared/jobs", "-t", "1s", "--data", "x"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("jobs/seq");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_post_does_not_hang_on_a_seq_fifo() {
    let h = Hostile::new();
    h.mkdir("shared/jobs");
    h.fifo("shared/jobs/seq");
    h.fsync(["msg", "post", "shared/jobs", "--data", "x"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("jobs/seq");
    h.assert_kind("shared/jobs/seq", "fifo");
    h.assert_victim_untouched();
}

/// `nobody` plants its mailbox's head as a link to the victim's file: a post does not need
/// the head, and a receive, which would rebuild it, refuses to write through the link and names
/// it.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_never_writes_a_head_linked_elsewhere() {
    let h = Hostile::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    h.as_nobody(["rm", "shared/box/head"]); // the first post made one
    h.link(&h.victim(), "shared/box/head");
    h.fsync(["msg", "post", "shared/box", "--data", "root's"])
        .deadline(NO_HANG)
        .run_in(&h)
        .code(0);
    h.fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("box/head");
    h.assert_kind("shared/box/head", "symlink");
    h.assert_victim_untouched();
}

/// `nobody` plants a shard of its mailbox as a link to root's private mailbox's first shard,
/// and moves its sequence number there: root's receives pass over the link (with a warning)
/// and never take root's private messages through it; root's post refuses to queue into it.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_never_uses_a_shard_linked_to_another_mailbox() {
    let h = Hostile::new();
    let private = format!("{}/box", h.private());
    for n in 0..3 {
        h.fsync(["msg", "post", &private, "--data", &format!("secret {n}")])
            .run()
            .code(0);
    }
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    h.link(
        &format!("{private}/q/{SHARD0}"),
        "shared/box/q/00000000000000000100",
    );
    h.file("shared/box/seq", "150\n");
    let out = h
        .fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    out.code(0).stdout("first");
    let out = h
        .fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    assert!(
        !out.stdout.contains("secret"),
        "received through the link: {}",
        out.stdout
    );
    out.code(75);
    out.stderr_has("q/00000000000000000100");
    h.fsync(["msg", "post", "shared/box", "--data", "root's"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("q/00000000000000000100");
    assert_eq!(
        crate::harness::queued_files(Path::new(&private)).len(),
        3,
        "root's private mailbox changed"
    );
    h.assert_kind("shared/box/q/00000000000000000100", "symlink");
    h.assert_victim_untouched();
}

/// `nobody` plants a key of its mailbox, its dead letters and a delayed message as links to
/// the victim's file: root's posts with that key, root's retries and root's receives never
/// write, read or move the victim.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_keys_dead_letters_and_delays_never_follow_planted_links() {
    let h = Hostile::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    h.mkdir("shared/box/keys");
    h.mkdir("shared/box/dead");
    h.link(&h.victim(), "shared/box/keys/job");
    h.link(
        &h.victim(),
        &format!("shared/box/dead/{}", planted_message(7)),
    );
    let due = format!("{:020}", 1);
    h.link(
        &h.victim(),
        &format!("shared/box/delayed/{due}.{}", planted_message(8)),
    );
    h.fsync([
        "msg",
        "post",
        "--key",
        "job",
        "shared/box",
        "--data",
        "root's",
    ])
    .deadline(NO_HANG)
    .run_in(&h)
    .code(0);
    h.assert_kind("shared/box/keys/job", "file"); // the link replaced, not written through
    h.fsync(["msg", "retry", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    for _ in 0..2 {
        let out = h
            .fsync(["msg", "recv", "-n", "shared/box"])
            .deadline(NO_HANG)
            .run_in(&h);
        assert!(
            !out.stdout.contains(PRECIOUS),
            "received the victim: {}",
            out.stdout
        );
    }
    h.assert_kind(
        &format!("shared/box/delayed/{due}.{}", planted_message(8)),
        "symlink",
    );
    h.assert_victim_untouched();
}

/// `nobody` plants buckets of delayed messages: the bucket of the last minute as a link to the
/// victim's directory, the bucket of the minute before holding a link to the victim's file named
/// as a message due, and the buckets an hour's delay posts into as links too. Root's receives
/// never read or move the victim, and root's delayed post puts nothing in its directory.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_delays_never_follow_planted_buckets_or_links_in_them() {
    let h = Hostile::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    const MINUTE: u64 = 60_000_000;
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap();
    let bucket = |due: u64| format!("shared/box/delayed/{:020}", due / MINUTE * MINUTE);
    let linked = bucket(now - MINUTE);
    h.link(&h.victim_dir(), &linked);
    let holding = bucket(now - 2 * MINUTE);
    h.mkdir(&holding);
    let planted = format!("{holding}/{:020}.{}", now - 1, planted_message(8));
    h.link(&h.victim(), &planted);
    let later: Vec<String> = (0..3)
        .map(|m| bucket(now + 3_600_000_000 + m * MINUTE))
        .collect();
    for at in &later {
        h.link(&h.victim_dir(), at);
    }
    let out = h
        .fsync(["msg", "post", "--delay", "1h", "shared/box", "--data", "x"])
        .deadline(NO_HANG)
        .run_in(&h);
    assert_ne!(out.status.code(), Some(0), "posted into a linked bucket");
    for _ in 0..2 {
        let out = h
            .fsync(["msg", "recv", "-n", "shared/box"])
            .deadline(NO_HANG)
            .run_in(&h);
        assert!(
            !out.stdout.contains(PRECIOUS),
            "received the victim: {}",
            out.stdout
        );
    }
    h.assert_kind(&linked, "symlink");
    h.assert_kind(&planted, "symlink");
    for at in &later {
        h.assert_kind(at, "symlink");
    }
    h.assert_victim_untouched();
}

/// `nobody` links the mailbox's state directory `sub` to the victim's directory: neither
/// posting nor receiving may create anything there.
fn mailbox_directory_linked_elsewhere(sub: &str) {
    let h = Hostile::new();
    h.mkdir("shared/jobs");
    let planted = format!("shared/jobs/{sub}");
    h.link(&h.victim_dir(), &planted);
    let named = format!("jobs/{sub}");
    h.fsync(["msg", "post", "shared/jobs", "--data", "x"])
        .run_in(&h)
        .operational_error(&named);
    h.fsync(["msg", "recv", "-n", "shared/jobs"])
        .run_in(&h)
        .operational_error(&named);
    h.assert_victim_untouched();
    h.assert_kind(&planted, "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_does_not_use_a_tmp_directory_linked_elsewhere() {
    mailbox_directory_linked_elsewhere("tmp");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_does_not_use_a_queue_directory_linked_elsewhere() {
    mailbox_directory_linked_elsewhere("q");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_does_not_use_a_claimed_directory_linked_elsewhere() {
    mailbox_directory_linked_elsewhere("claimed");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_does_not_use_a_recv_directory_linked_elsewhere() {
    mailbox_directory_linked_elsewhere("recv");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_does_not_use_a_senders_directory_linked_elsewhere() {
    mailbox_directory_linked_elsewhere("senders");
}

/// `nobody`'s mailbox `shared/box` with one real message, `first`, and three entries named
/// like messages that sort before it: a link to the victim, a FIFO and a directory. Returns
/// their paths and kinds.
fn mailbox_with_planted_messages(h: &Hostile) -> Vec<(String, &'static str)> {
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    let planted = [
        (
            format!("shared/box/q/{SHARD0}/{}", planted_message(1)),
            "symlink",
        ),
        (
            format!("shared/box/q/{SHARD0}/{}", planted_message(2)),
            "fifo",
        ),
        (
            format!("shared/box/q/{SHARD0}/{}", planted_message(3)),
            "directory",
        ),
    ];
    h.link(&h.victim(), &planted[0].0);
    h.fifo(&planted[1].0);
    h.mkdir(&planted[2].0);
    planted.to_vec()
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_recv_skips_planted_links_fifos_and_directories_in_the_queue() {
    let h = Hostile::new();
    let planted = mailbox_with_planted_messages(&h);
    let out = h
        .fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    assert!(
        !out.stdout.contains(PRECIOUS),
        "root's recv printed the victim's content: {:?}",
        out.stdout
    );
    success_with_notes(&out, 1);
    out.stdout("first");
    for (path, kind) in &planted {
        let name = Path::new(path).file_name().unwrap().to_str().unwrap();
        out.stderr_has(name);
        h.assert_kind(path, kind);
    }
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_list_reports_planted_queue_entries_as_skipped() {
    let h = Hostile::new();
    let planted = mailbox_with_planted_messages(&h);
    let out = h
        .fsync(["msg", "list", "shared/box", "--json"])
        .deadline(NO_HANG)
        .run_in(&h);
    out.code(0);
    let v = json_of(&out.stdout);
    assert_eq!(v["count"], 1, "only the real message counts\n{v}");
    let messages = v["messages"].as_array().expect("messages: an array");
    assert_eq!(messages.len(), 1, "{v}");
    assert!(
        messages
            .iter()
            .all(|m| m["size"] != PRECIOUS.len() && m["size"] == "first".len()),
        "the victim's size (or another entry's) is reported\n{v}"
    );
    let skipped = v["skipped"].as_array().expect("skipped: an array");
    let mut names: Vec<&str> = skipped
        .iter()
        .map(|s| {
            assert!(
                s["reason"].as_str().is_some_and(|r| !r.is_empty()),
                "a skipped entry without a reason\n{v}"
            );
            s["name"].as_str().expect("skipped[].name: a string")
        })
        .collect();
    names.sort_unstable();
    // Named by their path in the queue's directory.
    let mut want: Vec<String> = (1..=3)
        .map(|n| format!("{SHARD0}/{}", planted_message(n)))
        .collect();
    want.sort();
    assert_eq!(names, want, "{v}");
    for (path, kind) in &planted {
        h.assert_kind(path, kind);
    }
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_recv_does_not_read_through_a_planted_claim() {
    let h = Hostile::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    // A claim of a receiver that is not registered: recovery would return it to the queue.
    let claim = format!("{}~h.1.0", planted_message(1));
    h.link(&h.victim(), &format!("shared/box/claimed/{claim}"));
    let out = h
        .fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    assert!(
        !out.stdout.contains(PRECIOUS),
        "root's recv printed the victim's content: {:?}",
        out.stdout
    );
    success_with_notes(&out, 0);
    out.stdout("first");
    // Recovery returns it to the queue with the lost delivery counted (`msg-1`): the link
    // itself moves, and is never read through.
    let kept = [
        format!("shared/box/claimed/{claim}"),
        format!("shared/box/q/{SHARD0}/{}-1", planted_message(1)),
    ];
    assert!(
        kept.iter().any(|k| h.kind(k) == Some("symlink")),
        "nobody's planted claim was removed"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_recv_skips_a_message_it_may_not_read() {
    let h = Hostile::new();
    // nobody's mailbox, its files all nobody's: a message posted and taken.
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "dummy"])
        .run()
        .code(0);
    h.fsync_as_nobody(["msg", "recv", "-n", "shared/box"])
        .run()
        .code(0)
        .stdout("dummy");
    h.fsync([
        "msg",
        "post",
        "shared/box",
        "--mode",
        "0600",
        "--data",
        "root-only",
    ])
    .run_in(&h)
    .code(0);
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "second"])
        .run()
        .code(0);
    let out = h
        .fsync_as_nobody(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run();
    out.code(0).stdout("second");
    assert!(
        out.stderr.lines().count() == 1 && out.stderr.starts_with("fsync: "),
        "expected one `fsync: ` line about the unreadable message\n{}",
        out.stderr
    );
    h.fsync(["msg", "recv", "-n", "shared/box"])
        .run_in(&h)
        .code(0)
        .stdout("root-only");
}

// bus: `B/NAME` is participant NAME's mailbox directory.

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_send_to_a_member_linked_elsewhere_fails() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    h.link(&h.victim_dir(), "shared/BUS/admin");
    h.fsync(["bus", "connect", "shared/BUS", "root1"])
        .run_in(&h)
        .code(0);
    h.fsync([
        "bus",
        "send",
        "shared/BUS",
        "--from",
        "root1",
        "--to",
        "admin",
        "--data",
        "x",
    ])
    .run_in(&h)
    .operational_error("BUS/admin");
    h.assert_victim_untouched();
    h.assert_kind("shared/BUS/admin", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_recv_as_a_member_linked_elsewhere_fails() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    h.link(&h.victim_dir(), "shared/BUS/admin");
    h.fsync(["bus", "recv", "-n", "shared/BUS", "admin"])
        .run_in(&h)
        .operational_error("BUS/admin");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_connect_over_a_member_linked_elsewhere_fails() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    h.link(&h.victim_dir(), "shared/BUS/admin");
    h.fsync(["bus", "connect", "shared/BUS", "admin"])
        .run_in(&h)
        .operational_error("BUS/admin");
    h.assert_victim_untouched();
    h.assert_kind("shared/BUS/admin", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_members_does_not_list_a_member_linked_elsewhere() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    h.link(&h.victim_dir(), "shared/BUS/admin");
    h.fsync(["bus", "connect", "shared/BUS", "root1"])
        .run_in(&h)
        .code(0);
    let out = h
        .fsync(["bus", "members", "shared/BUS", "--json"])
        .run_in(&h);
    out.code(0);
    let v = json_of(&out.stdout);
    let names: Vec<&str> = (v["members"].as_array().expect("members: an array").iter())
        .map(|m| m["name"].as_str().expect("members[].name"))
        .collect();
    assert_eq!(names, ["root1"], "{v}");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_connect_does_not_remove_through_a_hidden_link() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    // `.admin`: where a disconnected `admin` is kept, removed by the next connect.
    h.link(&h.victim_dir(), "shared/BUS/.admin");
    h.fsync(["bus", "connect", "shared/BUS", "admin"])
        .run_in(&h)
        .operational_error("BUS/.admin");
    h.assert_kind("shared/BUS/.admin", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn bus_connect_over_a_planted_file_fails() {
    let h = Hostile::new();
    h.mkdir("shared/BUS");
    h.file("shared/BUS/foo", "not a mailbox");
    h.fsync(["bus", "connect", "shared/BUS", "foo"])
        .run_in(&h)
        .operational_error("BUS/foo");
    h.assert_kind("shared/BUS/foo", "file");
    h.assert_victim_untouched();
}

// sem: `S/slots`, `S/slot.I`, `S/.slot.I.fsync`, `S/queue`.

/// `nobody`'s semaphore `shared/heavy.sem` of one slot (its `slots` file only).
fn nobodys_semaphore(h: &Hostile) {
    h.mkdir("shared/heavy.sem");
    h.file("shared/heavy.sem/slots", "1\n");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_run_gives_the_command_no_descriptor_on_a_slot_link() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    h.link(&h.victim(), "shared/heavy.sem/slot.0");
    let out = h
        .fsync([
            "sem",
            "run",
            "shared/heavy.sem",
            "--slots",
            "1",
            "--",
            "sh",
            "-c",
            "ls -l /proc/self/fd",
        ])
        .run_in(&h);
    // A slot file is one fsync makes: a link there is never followed, whoever made it.
    out.code(66)
        .stdout("")
        .error_naming("heavy.sem/slot.0")
        .stderr_has("is a symbolic link, not a regular file fsync made");
    h.assert_victim_untouched();
    h.assert_kind("shared/heavy.sem/slot.0", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_run_does_not_hang_on_a_slot_fifo() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    h.fifo("shared/heavy.sem/slot.0");
    h.fsync([
        "sem",
        "run",
        "shared/heavy.sem",
        "--slots",
        "1",
        "--",
        "true",
    ])
    .deadline(NO_HANG)
    .run_in(&h)
    .operational_error("heavy.sem/slot.0");
    h.fsync(["sem", "status", "shared/heavy.sem"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("heavy.sem/slot.0");
    h.assert_kind("shared/heavy.sem/slot.0", "fifo");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_run_does_not_lock_a_queue_link() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    h.link(&h.victim(), "shared/heavy.sem/queue");
    h.fsync([
        "sem",
        "run",
        "shared/heavy.sem",
        "--slots",
        "1",
        "--",
        "true",
    ])
    .run_in(&h)
    .operational_error("heavy.sem/queue");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_does_not_read_slots_through_a_link_to_a_root_only_file() {
    let h = Hostile::new();
    h.mkdir("shared/x.sem");
    h.link(&h.t.arg("victim/count"), "shared/x.sem/slots");
    h.fsync(["sem", "status", "shared/x.sem"])
        .run_in(&h)
        .operational_error("x.sem/slots");
    h.fsync(["sem", "run", "shared/x.sem", "--slots", "1", "--", "true"])
        .run_in(&h)
        .operational_error("x.sem/slots");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_does_not_hang_on_a_slots_fifo() {
    let h = Hostile::new();
    h.mkdir("shared/x.sem");
    h.fifo("shared/x.sem/slots");
    h.fsync(["sem", "status", "shared/x.sem"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("x.sem/slots");
    h.fsync(["sem", "run", "shared/x.sem", "--slots", "1", "--", "true"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("x.sem/slots");
    h.assert_kind("shared/x.sem/slots", "fifo");
    h.assert_victim_untouched();
}

/// `sem run --delete` and `grouplock run --delete` remove only regular files they hold (or
/// that have no lock of their own, as a semaphore's `slots` and records): a link planted at a
/// record's name, or at a cap's `queue`, keeps everything (one line on stderr naming it, exit
/// status the command's), and the victim is untouched.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_and_grouplock_delete_never_remove_a_planted_link() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    h.link(&h.victim(), "shared/heavy.sem/.slot.0.fsync");
    h.fsync([
        "sem",
        "run",
        "--delete",
        "shared/heavy.sem",
        "--slots",
        "1",
        "--",
        "true",
    ])
    .run_in(&h)
    .code(0)
    .error_naming("heavy.sem/.slot.0.fsync")
    .stderr_has("is a symbolic link");
    h.assert_kind("shared/heavy.sem/.slot.0.fsync", "symlink");
    h.assert_kind("shared/heavy.sem/slots", "file");
    h.assert_kind("shared/heavy.sem/queue", "file");

    h.mkdir("shared/g.glock");
    h.mkdir("shared/g.glock/max.gB");
    h.link(&h.victim(), "shared/g.glock/max.gB/queue");
    h.fsync([
        "grouplock",
        "run",
        "--delete",
        "shared/g.glock",
        "--group",
        "gA",
        "--",
        "true",
    ])
    .run_in(&h)
    .code(0)
    .error_naming("g.glock/max.gB/queue")
    .stderr_has("is a symbolic link");
    h.assert_kind("shared/g.glock/max.gB/queue", "symlink");
    h.assert_kind("shared/g.glock/turnstile", "file");
    h.assert_kind("shared/g.glock/group.gA", "file");
    h.assert_victim_untouched();
}

// Holder records (`DIR/.NAME.fsync`, src/holder.rs): root never writes into another user's
// record and never believes it.

/// A record claiming that pid 1 holds the lock, with fencing token `fence`.
fn forged_record(fence: u64) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    format!(
        "fsync-holder 1\nfence {fence}\nstate held\npid 1\nhost {}\nsince 1\ncommand forged\nend\n",
        host.trim()
    )
}

/// The parent of `pid`, from `/proc`.
fn parent_of(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The holder pid a status reports must be the fsync we started or its command.
#[track_caller]
fn assert_real_holder(holder: &serde_json::Value, fsync_pid: u32, context: &serde_json::Value) {
    let pid = holder["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no holder pid reported\n{context}"));
    assert!(
        pid != 1 && (pid == u64::from(fsync_pid) || parent_of(pid) == Some(u64::from(fsync_pid))),
        "the reported holder is pid {pid}, not our fsync ({fsync_pid}) or its command\n{context}"
    );
}

/// Another user's link where the lock file belongs, in a world-writable sticky directory: the
/// kernel refuses to open it with O_CREAT (whatever `fs.protected_*` say), and fsync then opens
/// the name without following it, so the command never runs.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_run_gives_the_command_no_descriptor_on_a_lock_link() {
    let h = Hostile::new();
    h.link(&h.victim(), "shared/M");
    let out = h
        .fsync([
            "mutex",
            "run",
            "shared/M",
            "--",
            "sh",
            "-c",
            "ls -l /proc/self/fd",
        ])
        .run_in(&h);
    out.code(66)
        .stdout("")
        .error_naming("shared/M")
        .stderr_has("cannot open lock file");
    h.assert_kind("shared/M", "symlink");
}

/// The caller's own link there is the caller's choice: followed, and the lock on its target is
/// passed on to the command (as flock(1) does), which changes nothing in the file.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_run_follows_the_callers_own_lock_link() {
    let h = Hostile::new();
    std::os::unix::fs::symlink(h.victim(), h.t.join("shared/M")).unwrap();
    let out = h
        .fsync([
            "mutex",
            "run",
            "shared/M",
            "--",
            "sh",
            "-c",
            "ls -l /proc/self/fd",
        ])
        .run_in(&h);
    out.code(0).stderr("").stdout_has(&h.victim());
    h.assert_victim_untouched();
    h.assert_kind("shared/M", "symlink");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_skips_a_record_fifo() {
    let h = Hostile::new();
    h.fifo("shared/.L.fsync");
    h.fsync(["mutex", "run", "shared/L", "--", "true"])
        .deadline(NO_HANG)
        .run_in(&h)
        .code(0);
    let out = h
        .fsync(["mutex", "status", "shared/L", "--json"])
        .deadline(NO_HANG)
        .run_in(&h);
    out.code(0);
    h.assert_kind("shared/.L.fsync", "fifo");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_run_neither_writes_nor_trusts_a_planted_record() {
    let h = Hostile::new();
    let forged = forged_record(u64::MAX);
    h.file("shared/.L.fsync", &forged);
    let out = h
        .fsync([
            "mutex",
            "run",
            "shared/L",
            "--",
            "sh",
            "-c",
            "echo $FSYNC_FENCE",
        ])
        .run_in(&h);
    out.code(0);
    let fence: u64 = out.stdout.trim().parse().unwrap_or_else(|_| {
        panic!("FSYNC_FENCE is not a u64: {:?}", out.stdout);
    });
    assert!(
        fence > 0 && fence < u64::MAX,
        "the fencing token {fence} was taken from the planted record"
    );
    assert_eq!(
        std::fs::read_to_string(h.t.join("shared/.L.fsync")).unwrap(),
        forged,
        "root wrote into nobody's record"
    );
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_status_does_not_report_a_planted_holder() {
    let h = Hostile::new();
    h.file("shared/.L.fsync", &forged_record(17));
    let holder = h
        .fsync(["mutex", "run", "shared/L", "--", "sh", "-c", HOLD])
        .hold();
    let out = h
        .fsync(["mutex", "status", "shared/L", "--json"])
        .run_in(&h);
    out.code(1);
    let v = json_of(&out.stdout);
    assert_real_holder(&v["holder"], holder.pid(), &v);
    // Naming a process of this host that nobody does not run (init), nothing of it is
    // believed, not even as a record the kernel contradicts. (Mutants answered: the check
    // that the record's owner runs the process it names inverted, and its check of the
    // command's process made to count where there is none.)
    assert!(v["untrusted_record"].is_null(), "{v}");
    holder.finish().code(0);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_status_does_not_report_a_planted_slot_holder() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    let forged = forged_record(0);
    h.file("shared/heavy.sem/.slot.0.fsync", &forged);
    let holder = h
        .fsync([
            "sem",
            "run",
            "shared/heavy.sem",
            "--slots",
            "1",
            "--",
            "sh",
            "-c",
            HOLD,
        ])
        .hold();
    let out = h
        .fsync(["sem", "status", "shared/heavy.sem", "--json"])
        .run_in(&h);
    out.code(1); // its one slot is held
    let v = json_of(&out.stdout);
    let held = v["held"].as_array().expect("held: an array");
    assert_eq!(held.len(), 1, "{v}");
    assert_real_holder(&held[0]["holder"], holder.pid(), &v);
    holder.finish().code(0);
    assert_eq!(
        std::fs::read_to_string(h.t.join("shared/heavy.sem/.slot.0.fsync")).unwrap(),
        forged,
        "root wrote into nobody's slot record"
    );
}

// event: `E` exists = signalled; reset unlinks it. Only an empty regular file (or nothing)
// is an event: a device, a FIFO, a file with data, or another user's link is not ours to
// remove.

/// `reset` and `wait --reset` on `at` fail naming it, and leave it there.
#[track_caller]
fn event_reset_refused(h: &Hostile, at: &str, kind: &str) {
    h.fsync(["event", "reset", at])
        .deadline(NO_HANG)
        .run_in(h)
        .operational_error(at);
    h.assert_kind(at, kind);
    h.fsync(["event", "wait", "-n", "--reset", at])
        .deadline(NO_HANG)
        .run_in(h)
        .operational_error(at);
    h.assert_kind(at, kind);
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn event_reset_does_not_remove_a_character_device() {
    let h = Hostile::new();
    h.t.cmd("mknod")
        .args(["shared/ev", "c", "1", "3"])
        .run()
        .code(0);
    event_reset_refused(&h, "shared/ev", "char device");
    let rdev = std::fs::symlink_metadata(h.t.join("shared/ev"))
        .unwrap()
        .rdev();
    assert_eq!(
        (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev)),
        (1, 3)
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn event_reset_does_not_remove_a_fifo() {
    let h = Hostile::new();
    h.t.cmd("mkfifo").arg("shared/fifo").run().code(0);
    event_reset_refused(&h, "shared/fifo", "fifo");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn event_reset_does_not_remove_a_file_with_data() {
    let h = Hostile::new();
    h.t.write("shared/data", "keep");
    event_reset_refused(&h, "shared/data", "file");
    assert_eq!(h.t.read("shared/data"), "keep");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn event_reset_does_not_remove_another_users_link() {
    let h = Hostile::new();
    h.link(&h.victim(), "shared/E");
    event_reset_refused(&h, "shared/E", "symlink");
}

// group: `G/gate`, `G/join.lock` (a mutex, with its record `G/.join.lock.fsync`),
// `G/members/`.

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_join_does_not_lock_a_gate_link() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.link(&h.victim(), "shared/G/gate");
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .run_in(&h)
        .operational_error("G/gate");
    h.assert_kind("shared/G/gate", "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_empty_does_not_consult_a_gate_link() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.mkdir("shared/G/members");
    h.link(&h.victim(), "shared/G/gate");
    h.fsync(["group", "empty", "shared/G"])
        .run_in(&h)
        .operational_error("G/gate");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_members_ignores_a_gate_link() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.mkdir("shared/G/members");
    h.link(&h.victim(), "shared/G/gate");
    let out = h
        .fsync(["group", "members", "shared/G", "--json"])
        .run_in(&h);
    out.code(0);
    assert_eq!(json_of(&out.stdout)["count"], 0, "{}", out.stdout);
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_join_does_not_hang_on_a_gate_fifo() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.fifo("shared/G/gate");
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .deadline(NO_HANG)
        .run_in(&h)
        .operational_error("G/gate");
    h.assert_kind("shared/G/gate", "fifo");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_join_does_not_lock_a_join_lock_link() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.link(&h.victim(), "shared/G/join.lock");
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .run_in(&h)
        .operational_error("G/join.lock");
    h.assert_kind("shared/G/join.lock", "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_join_skips_a_join_lock_record_link() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.link(&h.victim(), "shared/G/.join.lock.fsync");
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .run_in(&h)
        .code(0);
    h.assert_kind("shared/G/.join.lock.fsync", "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_observers_skip_planted_registrations() {
    let h = Hostile::new();
    h.mkdir("shared/G");
    h.mkdir("shared/G/members");
    let planted = [
        ("shared/G/members/h.1.1", "fifo"),
        ("shared/G/members/h.2.2", "symlink"),
    ];
    h.fifo(planted[0].0);
    h.link(&h.victim(), planted[1].0);
    let out = h
        .fsync(["group", "members", "shared/G", "--json"])
        .deadline(NO_HANG)
        .run_in(&h);
    out.code(0);
    assert_eq!(json_of(&out.stdout)["count"], 0, "{}", out.stdout);
    h.fsync(["group", "empty", "shared/G"])
        .deadline(NO_HANG)
        .run_in(&h)
        .code(0);
    for (path, kind) in planted {
        h.assert_kind(path, kind);
    }
}

/// `nobody`'s group `shared/G` whose `members` is a link to the victim's directory.
fn group_with_members_linked_elsewhere(h: &Hostile) {
    h.mkdir("shared/G");
    h.link(&h.victim_dir(), "shared/G/members");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_join_does_not_register_in_a_members_link() {
    let h = Hostile::new();
    group_with_members_linked_elsewhere(&h);
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .run_in(&h)
        .operational_error("G/members");
    h.assert_kind("shared/G/members", "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_members_does_not_reap_through_a_members_link() {
    let h = Hostile::new();
    group_with_members_linked_elsewhere(&h);
    h.fsync(["group", "members", "shared/G"])
        .run_in(&h)
        .operational_error("G/members");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_empty_does_not_look_through_a_members_link() {
    let h = Hostile::new();
    group_with_members_linked_elsewhere(&h);
    // Without a gate nobody can be a member: empty, without looking further.
    h.fsync(["group", "empty", "shared/G"]).run_in(&h).code(0);
    h.file("shared/G/gate", "");
    h.fsync(["group", "empty", "shared/G"])
        .run_in(&h)
        .operational_error("G/members");
    h.assert_victim_untouched();
}

// swmr: the lock `DIR/NAME` and its side files
// `DIR/.NAME.turnstile` and `DIR/.NAME.writers`.

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn swmr_does_not_lock_a_turnstile_link() {
    let h = Hostile::new();
    h.t.write("shared/L", ""); // root's: another user's lock file there is refused
    h.link(&h.victim(), "shared/.L.turnstile");
    for verb in ["read", "write"] {
        h.fsync(["swmr", verb, "shared/L", "--", "true"])
            .run_in(&h)
            .operational_error(".L.turnstile");
    }
    h.assert_kind("shared/.L.turnstile", "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn swmr_write_does_not_lock_a_writers_link() {
    let h = Hostile::new();
    h.t.write("shared/L", ""); // root's: another user's lock file there is refused
    h.link(&h.victim(), "shared/.L.writers");
    h.fsync(["swmr", "write", "shared/L", "--", "true"])
        .run_in(&h)
        .operational_error(".L.writers");
    // Readers never use `.writers`: for them the link is harmless.
    h.fsync(["swmr", "read", "shared/L", "--", "true"])
        .run_in(&h)
        .code(0);
    h.assert_kind("shared/.L.writers", "symlink");
    h.assert_victim_untouched();
}

// grouplock: `L/turnstile`, `L/group.NAME`, `L/max.NAME/` (a semaphore).

/// `nobody`'s group lock `shared/GL` with `entry` linked to `target`; root's
/// `grouplock run shared/GL --group a [EXTRA] -- true` fails naming the entry.
fn grouplock_refuses(entry: &str, to_dir: bool, extra: &[&str]) {
    let h = Hostile::new();
    h.mkdir("shared/GL");
    let target = if to_dir { h.victim_dir() } else { h.victim() };
    let planted = format!("shared/GL/{entry}");
    h.link(&target, &planted);
    h.t.fsync(["grouplock", "run", "shared/GL", "--group", "a"])
        .args(extra)
        .args(["--", "true"])
        .run_in(&h)
        .operational_error(&format!("GL/{entry}"));
    h.assert_kind(&planted, "symlink");
    h.assert_victim_untouched();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn grouplock_does_not_lock_a_turnstile_link() {
    grouplock_refuses("turnstile", false, &[]);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn grouplock_does_not_lock_its_own_group_file_link() {
    grouplock_refuses("group.a", false, &[]);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn grouplock_does_not_lock_another_groups_file_link() {
    grouplock_refuses("group.b", false, &[]);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn grouplock_does_not_use_a_max_directory_linked_elsewhere() {
    grouplock_refuses("max.a", true, &["--max", "1"]);
    // A member without --max reads the cap in force there: not through a link either.
    grouplock_refuses("max.a", true, &[]);
}

/// The cap in force (`max.NAME/slots`), which members without `--max` read too, is read
/// neither through a link nor from a FIFO (without hanging).
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn grouplock_does_not_read_a_cap_through_a_link_or_from_a_fifo() {
    for fifo in [false, true] {
        let h = Hostile::new();
        h.mkdir("shared/GL");
        h.mkdir("shared/GL/max.a");
        match fifo {
            true => h.fifo("shared/GL/max.a/slots"),
            false => h.link(&h.t.arg("victim/count"), "shared/GL/max.a/slots"),
        }
        for extra in [&[][..], &["--max", "1"][..]] {
            h.t.fsync(["grouplock", "run", "shared/GL", "--group", "a"])
                .args(extra)
                .args(["--", "touch", "ran"])
                .deadline(NO_HANG)
                .run_in(&h)
                .operational_error("GL/max.a/slots");
        }
        assert!(!h.t.join("ran").exists(), "the command ran");
        h.assert_victim_untouched();
    }
}

// The umask: what fsync creates has no more permission than the creator's umask allows.

/// `path`'s permission bits (less the file type).
fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_record_honours_the_umask() {
    let h = Hostile::new();
    h.t.sh(r#"umask 077; exec "$FSYNC" mutex run shared/U -- true"#)
        .run()
        .code(0);
    for file in ["shared/U", "shared/.U.fsync"] {
        let mode = mode_of(&h.t.join(file));
        assert_eq!(mode & 0o077, 0, "{file} has mode {mode:o} under umask 077");
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_files_and_registrations_honour_the_umask() {
    let h = Hostile::new();
    // The member lists the group's files (its own registration among them) while it is in.
    let out =
        h.t.sh(r#"umask 077; exec "$FSYNC" group join shared/GG -- find shared/GG -print"#)
            .run();
    out.code(0);
    let files: Vec<&str> = out.stdout.lines().collect();
    assert!(
        files.iter().any(|f| f.starts_with("shared/GG/members/")),
        "no registration listed\n{}",
        out.stdout
    );
    // Those that outlive the member are checked now; the registration, from its listing.
    let mut checked = 0;
    for file in &files {
        let Ok(meta) = std::fs::symlink_metadata(h.t.join(file)) else {
            continue; // the registration, gone with its member
        };
        let mode = meta.mode() & 0o7777;
        assert_eq!(mode & 0o077, 0, "{file} has mode {mode:o} under umask 077");
        checked += 1;
    }
    assert!(checked >= 3, "{}", out.stdout);
    let out = h
        .t
        .sh(r#"umask 077; exec "$FSYNC" group join shared/GG -- sh -c 'stat -c "%a %n" shared/GG/members/*'"#)
        .run();
    out.code(0);
    for line in out.stdout.lines() {
        let (mode, file) = line.split_once(' ').unwrap();
        let mode = u32::from_str_radix(mode, 8).unwrap();
        assert_eq!(mode & 0o077, 0, "{file} has mode {mode:o} under umask 077");
    }
    assert!(!out.stdout.is_empty(), "no registration listed");
}

// Output that cannot be forged: names, command lines and hosts another user wrote, and paths
// whose names they chose, are printed escaped (`\n`, `\e`, `\a`, `\xHH`, `\\`), so none reaches root's terminal as a control
// sequence or makes a line of its own; and the kernel's lock table is believed over a holder
// record that contradicts it.

/// What a command line of `nobody`'s carries to root's terminal: an xterm title change (ESC ]
/// ... BEL), then a line of its own.
const TERMINAL_ATTACK: &str = "\x1b]0;pwned\x07\nforged line";

/// The escape sequence, as the escaped text shows it. (A holder record keeps a command line
/// on one line: the newline is a space there.)
const TERMINAL_ATTACK_SHOWN: &str = "\\e]0;pwned\\a";

/// No raw ESC, BEL or CR anywhere in `text`, and no line of it begins with `forged`.
#[track_caller]
fn assert_unforged(text: &str, what: &str) {
    assert!(
        !text.contains(['\x1b', '\x07', '\r']),
        "{what} carries raw control characters: {text:?}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("forged")),
        "{what} has a line forged by a name: {text:?}"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_list_and_recv_show_a_queue_name_with_a_newline_escaped() {
    let h = Hostile::new();
    h.fsync_as_nobody(["msg", "post", "shared/box", "--data", "first"])
        .run()
        .code(0);
    // Named like a message (SEQ.UNIQ.FROM.KIND) whose UNIQ holds a listing line of its own.
    let name = "00000000000000000000.h\nforged  999 bytes  1m00s old\n.-.msg";
    h.file(&format!("shared/box/q/{SHARD0}/{name}"), "planted");
    let out = h
        .fsync(["msg", "list", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    out.code(0);
    assert_unforged(&out.stdout, "msg list");
    out.stdout_has("00000000000000000000.h\\nforged  999 bytes  1m00s old\\n.-.msg  skipped: ");
    assert!(
        out.stdout.lines().any(|l| l == "1 message"),
        "the planted entry counts as a message\n{}",
        out.stdout
    );
    let v = json_of(
        &h.fsync(["msg", "list", "shared/box", "--json"])
            .deadline(NO_HANG)
            .run_in(&h)
            .stdout,
    );
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["skipped"][0]["name"], format!("{SHARD0}/{name}"), "{v}");
    let out = h
        .fsync(["msg", "recv", "-n", "shared/box"])
        .deadline(NO_HANG)
        .run_in(&h);
    success_with_notes(&out, 1);
    out.stdout("first");
    assert_unforged(&out.stderr, "msg recv's note");
    out.stderr_has("h\\nforged  999 bytes  1m00s old\\n.-.msg: has control characters");
    h.assert_kind(&format!("shared/box/q/{SHARD0}/{name}"), "file");
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_status_shows_another_users_command_line_escaped() {
    let h = Hostile::new();
    // In a directory of nobody's, where root may use nobody's lock file (in `shared` itself
    // it refuses to, see `a_lock_file_another_user_made_in_a_sticky_directory_is_refused`).
    h.mkdir("shared/nobodys");
    let holder = h
        .fsync_as_nobody([
            "mutex",
            "run",
            "shared/nobodys/L",
            "--",
            "sh",
            "-c",
            HOLD,
            TERMINAL_ATTACK,
        ])
        .hold();
    let out = h.fsync(["mutex", "status", "shared/nobodys/L"]).run_in(&h);
    out.code(1);
    assert_unforged(&out.stdout, "mutex status");
    out.stdout_has(TERMINAL_ATTACK_SHOWN);
    let json = h
        .fsync(["mutex", "status", "shared/nobodys/L", "--json"])
        .run_in(&h);
    json.code(1);
    assert_unforged(&json.stdout, "mutex status --json");
    let command = json_of(&json.stdout)["holder"]["command"].clone();
    assert!(
        command
            .as_str()
            .is_some_and(|c| c.contains("\x1b]0;pwned\x07")),
        "JSON keeps the command line as it is (serde escapes it): {command}"
    );
    // The same holder on a `-v` line, on stderr.
    let out = h
        .fsync(["mutex", "run", "-v", "-n", "shared/nobodys/L", "--", "true"])
        .run_in(&h);
    out.code(75);
    assert_unforged(&out.stderr, "mutex run -v");
    out.stderr_has(TERMINAL_ATTACK_SHOWN);
    holder.finish().code(0);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn group_members_shows_another_users_command_line_escaped() {
    let h = Hostile::new();
    let holder = h
        .fsync_as_nobody([
            "group",
            "join",
            "shared/G",
            "--",
            "sh",
            "-c",
            HOLD,
            TERMINAL_ATTACK,
        ])
        .hold();
    let out = h.fsync(["group", "members", "shared/G"]).run_in(&h);
    out.code(0);
    assert_unforged(&out.stdout, "group members");
    out.stdout_has(TERMINAL_ATTACK_SHOWN);
    out.stdout_has("1 member");
    holder.finish().code(0);
}

/// A name another user gave an entry of a shared directory, which root then names on a
/// command line (`fsync mutex status /tmp/*.lck`, a cron job's loop): an xterm title change,
/// then a line of its own.
const HOSTILE_NAME: &str = "n\x1b]0;pwned\x07\nforged line";

/// [`HOSTILE_NAME`] as every text output shows it.
const HOSTILE_NAME_SHOWN: &str = "n\\e]0;pwned\\a\\nforged line";

/// Every text output and `-v` line that names a path shows it escaped, as error lines do: the
/// `-v` lines of every verb that waits, every status, `doctor`. Who made the name does not
/// change how it is printed, so the test makes the names itself (no second user, no root).
#[test]
fn paths_are_shown_escaped_in_every_text_output_and_v_line() {
    let t = TestDir::new();
    let name = |primitive: &str| format!("{primitive}-{HOSTILE_NAME}");
    let (m, w, s, gl, g, e, b, bus, dir) = (
        name("mutex"),
        name("swmr"),
        name("sem"),
        name("grouplock"),
        name("group"),
        name("event"),
        name("box"),
        name("bus"),
        name("dir"),
    );
    std::fs::create_dir(t.join(&dir)).unwrap();
    let mut wrong = Vec::new();
    // `out` of `what` ended with `code` and names the path escaped on stdout (`on_stdout`) or
    // stderr, and nowhere raw.
    let mut check = |what: &str, out: Output, code: i32, on_stdout: bool| {
        let (shows, other) = match on_stdout {
            true => (&out.stdout, &out.stderr),
            false => (&out.stderr, &out.stdout),
        };
        let raw = |text: &str| {
            text.contains(['\x1b', '\x07', '\r']) || text.lines().any(|l| l.starts_with("forged"))
        };
        if out.status.code() != Some(code)
            || !shows.contains(HOSTILE_NAME_SHOWN)
            || raw(shows)
            || raw(other)
        {
            wrong.push(format!(
                "{what}: exit {:?} (want {code}); stdout {:?}; stderr {:?}",
                out.status, out.stdout, out.stderr
            ));
        }
    };
    let run = |args: &[&str]| t.fsync(args).run();
    check(
        "mutex run -v",
        run(&["mutex", "run", "-v", &m, "--", "true"]),
        0,
        false,
    );
    check(
        "mutex run -v --when",
        run(&[
            "mutex",
            "run",
            "-v",
            "--when",
            "true # \x07",
            &m,
            "--",
            "true",
        ]),
        0,
        false,
    );
    check(
        "mutex run -v --range",
        run(&["mutex", "run", "-v", "--range", "0:1", &m, "--", "true"]),
        0,
        false,
    );
    check(
        "mutex run -v -s",
        run(&["mutex", "run", "-v", "-s", &m, "--", "true"]),
        0,
        false,
    );
    let by_fd = t
        .sh("exec 9>>\"$1\"; exec \"$FSYNC\" mutex lock -v 9")
        .args(["sh", &m])
        .run();
    check("mutex lock -v", by_fd, 0, false);
    check("mutex status", run(&["mutex", "status", &m]), 0, true);
    check(
        "mutex status --range",
        run(&["mutex", "status", "--range", "0:1", &m]),
        0,
        true,
    );
    let holder = t.hold(&m);
    check(
        "mutex status (held)",
        run(&["mutex", "status", &m]),
        1,
        true,
    );
    check(
        "mutex run -v -n (held)",
        run(&["mutex", "run", "-v", "-n", &m, "--", "true"]),
        75,
        false,
    );
    holder.finish().code(0);
    check(
        "swmr read -v",
        run(&["swmr", "read", "-v", &w, "--", "true"]),
        0,
        false,
    );
    check(
        "swmr write -v",
        run(&["swmr", "write", "-v", &w, "--", "true"]),
        0,
        false,
    );
    check("swmr status", run(&["swmr", "status", &w]), 0, true);
    check(
        "sem status (not made)",
        run(&["sem", "status", &s]),
        0,
        true,
    );
    let sem_run = run(&["sem", "run", "-v", &s, "--slots", "1", "--", "true"]);
    check("sem run -v", sem_run, 0, false);
    check("sem status", run(&["sem", "status", &s]), 0, true);
    let grouplock_run = run(&["grouplock", "run", "-v", &gl, "--group", "a", "--", "true"]);
    check("grouplock run -v", grouplock_run, 0, false);
    check(
        "grouplock status",
        run(&["grouplock", "status", &gl]),
        0,
        true,
    );
    check(
        "group join -v",
        run(&["group", "join", "-v", &g, "--", "true"]),
        0,
        false,
    );
    check(
        "group wait-empty -v",
        run(&["group", "wait-empty", "-v", &g]),
        0,
        false,
    );
    run(&["event", "signal", &e]).code(0);
    check("event wait -v", run(&["event", "wait", "-v", &e]), 0, false);
    check(
        "msg post -v",
        run(&["msg", "post", "-v", &b, "--data", "x"]),
        0,
        false,
    );
    check("msg recv -v", run(&["msg", "recv", "-v", &b]), 0, false);
    check(
        "msg wait-empty -v",
        run(&["msg", "wait-empty", "-v", &b]),
        0,
        false,
    );
    check("msg watch", run(&["msg", "watch", "-t", "0", &b]), 0, true);
    run(&["msg", "post", &b, "--data", "x"]).code(0);
    check(
        "msg work -v",
        run(&["msg", "work", "-v", "--until-empty", &b, "--", "cat"]),
        0,
        false,
    );
    check(
        "bus connect -v",
        run(&["bus", "connect", "-v", &bus, "a"]),
        0,
        false,
    );
    check("doctor", run(&["doctor", &dir]), 0, true);
    assert!(wrong.is_empty(), "paths shown raw:\n{}", wrong.join("\n"));
}

/// A record of `nobody`'s naming a process of another host as the holder.
const EVIL_RECORD: &str =
    "fsync-holder 1\nfence 17\nstate held\npid 4242\nhost evil\nsince 1\ncommand evil\nend\n";

/// One `mutex status --json` of a lock root holds while `nobody` rewrites its record: the
/// holder is root's fsync (or its command), never the record's pid 4242; a record read whole
/// is marked untrusted. Returns whether it was.
#[track_caller]
fn assert_kernel_holder(h: &Hostile, holder: u32) -> bool {
    let out = h.fsync(["mutex", "status", "shared/L", "--json"]).run_in(h);
    out.code(1);
    let v = json_of(&out.stdout);
    assert_real_holder(&v["holder"], holder, &v);
    match v["record_trusted"].as_bool() {
        Some(false) => {
            assert_eq!(v["untrusted_record"]["pid"], 4242, "{v}");
            assert_eq!(v["untrusted_record"]["host"], "evil", "{v}");
            true
        }
        // Caught half-rewritten: a torn record is no record.
        Some(true) => {
            assert!(v["untrusted_record"].is_null(), "{v}");
            false
        }
        None => panic!("no record_trusted\n{v}"),
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_status_believes_the_kernel_over_a_planted_record() {
    let h = Hostile::new();
    h.file("shared/.L.fsync", EVIL_RECORD);
    let holder = h
        .fsync(["mutex", "run", "shared/L", "--", "sh", "-c", HOLD])
        .hold();
    let fsync = holder.pid();
    // nobody rewrites the record over and over while root asks who holds the lock.
    let rewriting = h
        .nobody([
            "sh",
            "-c",
            r#"echo started; while [ ! -e stop ]; do printf '%s' "$1" > shared/.L.fsync; done"#,
            "sh",
            EVIL_RECORD,
        ])
        .start();
    let mut rewriting = rewriting;
    rewriting.expect("started");
    let start = std::time::Instant::now();
    for i in 0.. {
        if i >= 40 || start.elapsed() > Duration::from_secs(2) {
            break;
        }
        assert_kernel_holder(&h, fsync);
        let out = h.fsync(["mutex", "status", "shared/L"]).run_in(&h);
        out.code(1);
        assert!(
            !out.stdout.contains("held by pid 4242"),
            "the planted record is reported as the holder\n{}",
            out.stdout
        );
    }
    h.t.write("stop", "");
    rewriting.finish().code(0);
    // The record whole now: untrusted, and said so.
    assert!(
        assert_kernel_holder(&h, fsync),
        "the record is not marked untrusted"
    );
    let out = h.fsync(["mutex", "status", "shared/L"]).run_in(&h);
    out.code(1);
    out.stdout_has("record: untrusted (names pid 4242 on host evil; the kernel says pid ");
    let first = out.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        first.contains(&format!("held by pid {fsync}")),
        "the kernel's holder (pid {fsync}) is not shown\n{}",
        out.stdout
    );
    holder.finish().code(0);
}

/// `nobody`'s record of a lock root holds says `fence 99` and names a holder on another host:
/// root's `mutex status` shows no token from it (JSON: `fence` null, and why; text: no 99), and
/// neither once the lock is free. A record of `nobody`'s own holding, which the kernel bears
/// out, names its holder, but its token is not believed either.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_status_shows_no_fence_from_another_users_record() {
    let h = Hostile::new();
    h.file(
        "shared/.L.fsync",
        &EVIL_RECORD.replace("fence 17", "fence 99"),
    );
    let holder = h
        .fsync(["mutex", "run", "shared/L", "--", "sh", "-c", HOLD])
        .hold();
    let status = |lock: &str, code: i32| {
        let out = h.fsync(["mutex", "status", lock, "--json"]).run_in(&h);
        out.code(code);
        json_of(&out.stdout)
    };
    let v = status("shared/L", 1);
    assert_real_holder(&v["holder"], holder.pid(), &v);
    assert_eq!(v["record_trusted"], false, "{v}");
    assert!(
        v["fence"].is_null(),
        "a token of nobody's record is shown\n{v}"
    );
    assert_eq!(v["fence_withheld"], "another-user", "{v}");
    let out = h.fsync(["mutex", "status", "shared/L"]).run_in(&h);
    out.code(1);
    assert!(
        !out.stdout
            .split(|c: char| !c.is_ascii_digit())
            .any(|n| n == "99"),
        "the planted token is shown\n{}",
        out.stdout
    );
    holder.finish().code(0);
    let v = status("shared/L", 0);
    assert!(v["fence"].is_null(), "{v}");
    assert_eq!(v["fence_withheld"], "another-user", "{v}");
    let theirs = h
        .fsync_as_nobody(["mutex", "run", "shared/N", "--", "sh", "-c", HOLD])
        .hold();
    let v = status("shared/N", 1);
    assert_eq!(v["record_trusted"], true, "{v}");
    assert!(v["fence"].is_null(), "{v}");
    assert_eq!(v["fence_withheld"], "another-user", "{v}");
    theirs.finish().code(0);
}

/// This host's name, as fsync records it.
fn this_host() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    host.trim().to_string()
}

/// `sem status` of `shared/heavy.sem` (its one slot held), in JSON and in text: slot 0's
/// holder is the process `pid` the kernel lists, on this host, with its command line from
/// /proc (containing `command`), never the planted record's; the record is reported untrusted.
#[track_caller]
fn assert_kernels_slot_holder(h: &Hostile, pid: u32, command: &str) {
    let out = h
        .fsync(["sem", "status", "shared/heavy.sem", "--json"])
        .run_in(h);
    out.code(1);
    let v = json_of(&out.stdout);
    let slot = &v["held"][0];
    assert_eq!(slot["holder"]["pid"], pid, "{v}");
    assert_eq!(slot["holder"]["host"], this_host(), "{v}");
    let shown = slot["holder"]["command"].as_str().unwrap_or_default();
    assert!(shown.contains(command), "{v}");
    assert_eq!(slot["record_trusted"], false, "{v}");
    assert_eq!(slot["untrusted_record"]["host"], "evil", "{v}");
    let out = h.fsync(["sem", "status", "shared/heavy.sem"]).run_in(h);
    out.code(1);
    let line = out.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        line.starts_with(&format!("  slot 0: pid {pid} on {}", this_host())),
        "the kernel's holder is not shown\n{}",
        out.stdout
    );
    out.stdout_has(&format!(
        "record: untrusted (names pid {pid} on host evil; the kernel says pid {pid} holds the slot)"
    ));
}

/// A slot record of `nobody`'s naming, on another host, the very pid the kernel lists as the
/// slot's holder (root's fsync, then `nobody`'s own `flock`): `sem status` shows the kernel's
/// holder and says the record is untrusted, as `mutex status` does.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn sem_status_believes_the_kernel_over_a_planted_slot_record() {
    let h = Hostile::new();
    nobodys_semaphore(&h);
    let record = "shared/heavy.sem/.slot.0.fsync";
    let evil = |pid: u32| EVIL_RECORD.replace("pid 4242", &format!("pid {pid}"));
    let holder = h
        .fsync([
            "sem",
            "run",
            "shared/heavy.sem",
            "--slots",
            "1",
            "--",
            "sh",
            "-c",
            HOLD,
        ])
        .hold();
    // Root made the record; the directory is nobody's, who replaces it.
    h.as_nobody(["rm", "-f", record]);
    h.file(record, &evil(holder.pid()));
    assert_kernels_slot_holder(&h, holder.pid(), "sem run shared/heavy.sem");
    holder.finish().code(0);
    // Root's slot file is root's alone (0600): nobody makes their own and holds it.
    h.as_nobody(["rm", "-f", "shared/heavy.sem/slot.0"]);
    let theirs = nobody_flocks(&h, "shared/heavy.sem/slot.0", true);
    let locks = crate::harness::flocks_on(&h.t.join("shared/heavy.sem/slot.0"));
    let [lock] = locks[..] else {
        panic!("not one flock on the slot: {locks:?}")
    };
    h.file(record, &evil(lock.pid));
    assert_kernels_slot_holder(&h, lock.pid, "flock -x shared/heavy.sem/slot.0");
    theirs.finish().code(0);
}

// Timeouts nobody else can stall: a lock file fsync keeps inside a primitive's directory (a
// mailbox's `seq`, a group's `gate`) can be locked by anyone who can open it (read access is
// enough for `flock`). Where another user shares the primitive, holding it for ever costs a
// waiter no more than its -t; where they do not (the owner's own directory), they cannot open
// it at all.

/// How much later than its -t a verb may return: what is asked is that it gives up, instead of
/// waiting for as long as the holder holds (for ever), and not at some default of its own. The
/// margin is wide enough for a loaded machine (`runuser`, start-up, six tests at once on two
/// CPUs took 4.2 s for a 1 s -t in a mutation sweep) and far below any default wait.
const MARGIN: Duration = Duration::from_secs(10);

/// `nobody` holds a `flock -s` (`-x` with `exclusive`) of `file` until released (the
/// holder's stdin closed): returned once it holds it.
fn nobody_flocks(h: &Hostile, file: &str, exclusive: bool) -> crate::harness::Holder {
    let mode = if exclusive { "-x" } else { "-s" };
    h.nobody(["flock", mode, file, "sh", "-c", crate::harness::HOLD])
        .hold()
}

#[track_caller]
fn gives_up_in_time(out: &Output, timeout: Duration) {
    out.code(75);
    assert!(
        out.elapsed < timeout + MARGIN,
        "gave up after {:?}, asked {timeout:?}\n{}",
        out.elapsed,
        out.stderr
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_lock_on_a_shared_mailboxs_seq_costs_a_sender_or_poster_only_its_timeout() {
    let h = Hostile::new();
    // nobody made the mailbox (and its seq), as the threat model allows.
    h.fsync_as_nobody(["msg", "post", "shared/B", "--data", "theirs"])
        .run()
        .code(0);
    let holder = nobody_flocks(&h, "shared/B/seq", false);
    let t2 = Duration::from_secs(2);
    let out = h
        .fsync(["msg", "send", "-t", "2", "shared/B", "--data", "mine"])
        .deadline(t2 + MARGIN * 2)
        .run_in(&h);
    gives_up_in_time(&out, t2);
    let out = h
        .fsync(["msg", "send", "-n", "shared/B", "--data", "mine"])
        .deadline(MARGIN * 2)
        .run_in(&h);
    gives_up_in_time(&out, Duration::ZERO);
    // A post, one at a time, keyed or in a batch, likewise with -t or -n.
    for args in [
        &["msg", "post", "-t", "1", "shared/B", "--data", "mine"][..],
        &["msg", "post", "-n", "shared/B", "--data", "mine"],
        &[
            "msg", "post", "-t", "1", "--key", "k", "shared/B", "--data", "mine",
        ],
        &[
            "msg", "post", "-t", "1", "--lines", "shared/B", "--data", "a\nb",
        ],
    ] {
        let timeout = match args[2] {
            "-n" => Duration::ZERO,
            _ => Duration::from_secs(1),
        };
        let out = h
            .fsync([])
            .args(args)
            .deadline(timeout + MARGIN * 2)
            .run_in(&h);
        gives_up_in_time(&out, timeout);
        out.stdout("").stderr_has("shared/B/seq");
    }
    holder.finish().code(0);
    // Nothing of root's was left queued: only nobody's message.
    let out = h.fsync(["msg", "list", "--json", "shared/B"]).run();
    out.code(0);
    assert_eq!(json_of(&out.stdout)["count"], 1, "{}", out.stdout);
}

/// On a bus others share, nobody holding the bus lock, or a receiver's numbering lock, for ever
/// costs each of root's verbs its `-t` (`-n`: nothing), with nothing changed.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_lock_held_on_a_shared_bus_costs_each_verb_only_its_timeout() {
    let h = Hostile::new();
    for name in ["theirs", "other"] {
        h.fsync_as_nobody(["bus", "connect", "shared/Bus", name])
            .run()
            .code(0);
    }
    h.fsync(["bus", "connect", "shared/Bus", "mine"])
        .run()
        .code(0);
    let timeout = Duration::from_secs(1);
    let holder = nobody_flocks(&h, "shared/Bus/.fsync.lock", true);
    for args in [
        &["bus", "connect", "-t", "1", "shared/Bus", "new"][..],
        &["bus", "disconnect", "-t", "1", "shared/Bus", "mine"],
        &["bus", "connect", "-n", "shared/Bus", "new"],
    ] {
        let limit = if args.contains(&"-n") {
            Duration::ZERO
        } else {
            timeout
        };
        let out = h
            .fsync([])
            .args(args)
            .deadline(limit + MARGIN * 2)
            .run_in(&h);
        gives_up_in_time(&out, limit);
        out.stderr_has("shared/Bus/.fsync.lock: gave up waiting for the bus lock");
    }
    holder.finish().code(0);
    let members = h.fsync(["bus", "members", "shared/Bus"]).run();
    assert_eq!(members.code(0).stdout, "mine\nother\ntheirs\n");
    // A receiver's numbering lock held: a send gives up; a broadcast reaches the others.
    let holder = nobody_flocks(&h, "shared/Bus/theirs/seq", false);
    let out = h
        .fsync([
            "bus",
            "send",
            "-t",
            "1",
            "shared/Bus",
            "--from",
            "mine",
            "--to",
            "theirs",
            "--data",
            "x",
        ])
        .deadline(timeout + MARGIN * 2)
        .run_in(&h);
    gives_up_in_time(&out, timeout);
    out.stderr_has("shared/Bus/theirs/seq: gave up waiting for the lock that numbers messages");
    h.fsync([
        "bus",
        "broadcast",
        "-t",
        "1",
        "shared/Bus",
        "--from",
        "mine",
        "--data",
        "all",
    ])
    .deadline(timeout + MARGIN * 2)
    .run_in(&h)
    .code(0);
    holder.finish().code(0);
    h.fsync(["bus", "recv", "-n", "shared/Bus", "other"])
        .run()
        .code(0)
        .stdout("all");
    h.fsync(["bus", "recv", "-n", "shared/Bus", "theirs"])
        .run()
        .code(75);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_lock_on_a_shared_groups_gate_costs_a_joiner_only_its_timeout() {
    let h = Hostile::new();
    h.fsync_as_nobody(["group", "join", "shared/G", "--", "true"])
        .run()
        .code(0);
    let holder = nobody_flocks(&h, "shared/G/gate", true);
    let t2 = Duration::from_secs(2);
    let out = h
        .fsync(["group", "join", "-t", "2", "shared/G", "--", "touch", "ran"])
        .deadline(t2 + MARGIN * 2)
        .run_in(&h);
    gives_up_in_time(&out, t2);
    let out = h
        .fsync(["group", "join", "-n", "shared/G", "--", "touch", "ran"])
        .deadline(MARGIN * 2)
        .run_in(&h);
    gives_up_in_time(&out, Duration::ZERO);
    assert!(!h.t.join("ran").exists(), "the command ran");
    holder.finish().code(0);
    h.fsync(["group", "empty", "shared/G"]).run().code(0);
}

/// A member of a group others share leaves in its `-t` (at least a second) when nobody holds
/// the join lock for ever, with its command's status: no longer a member, its `--last` not run
/// and nothing deleted, which it says.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_lock_on_a_shared_groups_join_lock_costs_a_leaving_member_only_its_timeout() {
    let h = Hostile::new();
    h.fsync_as_nobody(["group", "join", "shared/G", "--", "true"])
        .run()
        .code(0);
    let member = h
        .fsync([
            "group",
            "join",
            "-t",
            "1",
            "--delete",
            "--last",
            "touch cleaned",
            "shared/G",
            "--",
            "sh",
            "-c",
            "echo acquired; while [ ! -e go ]; do sleep 0.01; done; exit 3",
        ])
        .hold();
    let holder = nobody_flocks(&h, "shared/G/join.lock", true);
    h.t.write("go", "");
    let out = member.finish();
    out.code(3).stderr_has(
        "shared/G/join.lock: gave up waiting for the join lock to leave, which another process \
         holds",
    );
    assert!(
        out.elapsed < Duration::from_secs(1) + MARGIN,
        "left after {:?}",
        out.elapsed
    );
    assert!(!h.t.join("cleaned").exists(), "--last ran without the lock");
    h.assert_kind("shared/G", "directory");
    holder.finish().code(0);
    h.fsync(["group", "empty", "shared/G"]).run().code(0);
}

/// In the owner's own directory (root's, 0755) the internal lock files are root's alone: made
/// 0600, and an older fsync's 0644 ones tightened on use; nobody cannot open them, so cannot
/// stall root's `msg post` or `group join` (even without -t).
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn internal_lock_files_in_the_owners_own_directory_cannot_be_opened_by_others() {
    let h = Hostile::new();
    std::fs::create_dir(h.t.join("own")).unwrap();
    chmod(&h.t.join("own"), 0o755);
    h.fsync(["msg", "post", "own/B", "--data", "1"])
        .run()
        .code(0);
    h.fsync(["group", "join", "own/G", "--", "true"])
        .run()
        .code(0);
    let files = ["own/B/seq", "own/G/gate", "own/G/join.lock"];
    for file in files {
        assert_eq!(
            mode_of(&h.t.join(file)) & 0o077,
            0,
            "{file} made for others"
        );
        chmod(&h.t.join(file), 0o644); // as an older fsync made them
    }
    h.fsync(["msg", "post", "own/B", "--data", "2"])
        .run()
        .code(0);
    h.fsync(["group", "join", "own/G", "--", "true"])
        .run()
        .code(0);
    for file in files {
        let mode = mode_of(&h.t.join(file));
        assert_eq!(mode, 0o600, "{file} not tightened: {mode:o}");
        let out = h.nobody(["flock", "-s", "-n", file, "true"]).run();
        assert_ne!(out.status.code(), Some(0), "nobody locked {file}");
        assert!(
            out.stderr.contains("Permission denied"),
            "{file}: {}",
            out.stderr
        );
    }
    h.fsync(["msg", "post", "own/B", "--data", "3"])
        .deadline(MARGIN * 2)
        .run()
        .code(0);
    let out = h.fsync(["msg", "list", "--json", "own/B"]).run();
    assert_eq!(json_of(&out.stdout)["count"], 3, "{}", out.stdout);
}

// Fencing tokens against a neighbour who races: `.fsync.fence` is believed and written only
// when it is a file of the caller or root with one link; tokens strictly grow, below 2^63.

/// 2^63-2: the largest fence a file may say, less one.
const NEAR_LIMIT: &str = "9223372036854775806";

/// Root's `mutex run --delete shared/L` printing its token, `n` times.
#[track_caller]
fn delete_tokens(h: &Hostile, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let out = h
                .fsync([
                    "mutex",
                    "run",
                    "--delete",
                    "shared/L",
                    "--",
                    "sh",
                    "-c",
                    "echo $FSYNC_FENCE",
                ])
                .run();
            out.code(0);
            out.stdout.trim().parse().unwrap_or_else(|_| {
                panic!("FSYNC_FENCE is not a u64: {:?}", out.stdout);
            })
        })
        .collect()
}

#[track_caller]
fn assert_growing_below_the_limit(tokens: &[u64]) {
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]) && tokens.iter().all(|&f| f < 1 << 63),
        "tokens must strictly grow and stay below 2^63: {tokens:?}"
    );
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_tokens_grow_and_root_never_writes_a_planted_or_linked_fence_file() {
    let h = Hostile::new();
    // nobody plants 2^63-2, then rewrites it as fast as a shell can with values around the
    // limit and below the clock, until told to stop; then leaves 2^63-2 there.
    let script = format!(
        "f=shared/.fsync.fence; printf '%s\\n' {NEAR_LIMIT} > $f; echo planted; \
         while [ ! -e shared/stop ]; do \
           for v in {NEAR_LIMIT} 9223372036854775807 9223372036854775808 4000000000000000000 1; do \
             printf '%s\\n' $v > $f; \
           done; \
         done; printf '%s\\n' {NEAR_LIMIT} > $f; echo stopped; read x"
    );
    let mut rewriter = h.nobody(["sh", "-c", &script]).start();
    rewriter.expect("planted");
    let mut tokens = delete_tokens(&h, 15);
    h.t.write("shared/stop", "");
    rewriter.expect("stopped");
    // nobody's file as it now stands: root must not write it.
    let fence = h.t.join("shared/.fsync.fence");
    let planted = std::fs::metadata(&fence).unwrap();
    tokens.extend(delete_tokens(&h, 5));
    let now = std::fs::metadata(&fence).unwrap();
    assert_eq!(
        std::fs::read_to_string(&fence).unwrap(),
        format!("{NEAR_LIMIT}\n"),
        "root wrote into nobody's fence file"
    );
    assert_eq!(
        (now.uid(), now.mtime(), now.mtime_nsec()),
        (planted.uid(), planted.mtime(), planted.mtime_nsec()),
        "root wrote into nobody's fence file"
    );
    rewriter.send("exit");
    rewriter.finish().code(0);
    assert_growing_below_the_limit(&tokens);
    h.assert_victim_untouched();

    // A hard link to root's file flipped in and out at `.fsync.fence`.
    let _unprotected = HardlinksUnprotected::new();
    h.as_nobody(["rm", "shared/.fsync.fence"]);
    std::fs::remove_file(h.t.join("shared/stop")).unwrap();
    let victim = h.victim();
    let script = format!(
        "ln '{victim}' shared/.fsync.fence && echo linked; \
         while [ ! -e shared/stop ]; do \
           rm -f shared/.fsync.fence 2>/dev/null; ln '{victim}' shared/.fsync.fence 2>/dev/null; \
         done; echo stopped"
    );
    let mut flipper = h.nobody(["sh", "-c", &script]).start();
    flipper.expect("linked");
    tokens.extend(delete_tokens(&h, 10));
    h.t.write("shared/stop", "");
    flipper.expect("stopped");
    flipper.finish().code(0);
    assert_growing_below_the_limit(&tokens);
    // The link goes (root may remove it: nobody may not), and the victim is as it was.
    let _ = std::fs::remove_file(&fence);
    h.assert_victim_untouched();
}

/// `mutex run --when` evaluates its condition again only when a holder has entered: another
/// user rewriting `.fsync.fence` (with ever greater values) wakes the waiter, but is no entry.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn mutex_when_does_not_evaluate_for_a_fence_file_another_user_rewrites() {
    let h = Hostile::new();
    let cond = "echo x >> count; test -e go";
    let mut waiter = h
        .fsync([
            "mutex", "run", "-v", "shared/L", "--when", cond, "--", "echo", "entered",
        ])
        .start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    // nobody rewrites the fence file, each time with a greater value, 20,000 times.
    h.nobody([
        "sh",
        "-c",
        "i=0; while [ $i -lt 20000 ]; do \
           printf '%s\\n' $((9000000000000000000 + i)) > shared/.fsync.fence; i=$((i + 1)); \
         done",
    ])
    .run()
    .code(0);
    // A real entry wakes it, and the condition now holds.
    h.t.write("go", "");
    h.fsync(["mutex", "run", "shared/L", "--", "true"])
        .run()
        .code(0);
    let out = waiter.finish();
    out.code(0).stdout("entered\n");
    let evaluations = h.t.read("count").lines().count();
    assert!(
        evaluations <= 3,
        "the condition was evaluated {evaluations} times: woken by nobody's fence file"
    );
    h.assert_victim_untouched();
}

// Registrations another user cannot lock first: a receiver's `recv/.tmp-RID` and a group
// member's `members/.tmp-NAME` exist, unlocked, for the moment between their creation and
// their owner's lock. Another user who could open one then (its final mode lets them read it)
// would take a shared lock, and its owner's exclusive one would fail (exit 71). The race is
// made to go the attacker's way every time, not by chance: both run on one CPU, root's fsync
// at idle priority, so that the attacker, woken by inotify as the file is made, runs at once.

/// How many times root registers while `nobody` grabs at each new registration.
const REGISTRATIONS: usize = 200;

/// The first CPU this process may run on.
fn a_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = (status.lines())
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split([',', '-']).next().unwrap().to_string()
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn another_user_locking_each_new_registration_never_makes_a_receiver_or_member_fail() {
    let h = Hostile::new();
    require("python3", "python3");
    require("chrt", "util-linux");
    // nobody made the mailbox, open to all (its registrations are then readable by all); root
    // makes the group, whose registrations are 0644.
    h.nobody(["sh", "-c", "umask 0; exec \"$0\" msg recv -n shared/B"])
        .arg(fsync_bin())
        .run()
        .code(75);
    h.fsync(["group", "join", "shared/G", "--", "true"])
        .run()
        .code(0);
    let cpu = a_cpu();
    let racer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/racer.py");
    let (stop, recv, members) = (
        h.t.arg("stop"),
        h.t.arg("shared/B/recv"),
        h.t.arg("shared/G/members"),
    );
    let mut grabbing = h
        .nobody(["taskset", "-c", &cpu, "python3", racer.to_str().unwrap()])
        .args(["grab", "600", &stop, &recv, &members])
        .start();
    grabbing.expect("racing");
    // root's fsync, preempted by the attacker whenever it is woken.
    let root = |args: &[&str]| {
        h.t.cmd("taskset")
            .args(["-c", &cpu, "chrt", "--idle", "0"])
            .arg(fsync_bin())
            .args(args)
            .run_in(&h)
    };
    let mut failed = Vec::new();
    for n in 0..REGISTRATIONS {
        // A receiver takes a spare of its own (`.spare-K`, locked before it is renamed into
        // sight) where it finds one: root's go, so that each receive makes its registration
        // anew, the race this test runs.
        for k in 0..4 {
            let spare = h.t.join(&format!("shared/B/recv/.spare-{k}"));
            if std::fs::symlink_metadata(&spare).is_ok_and(|m| m.uid() == 0) {
                std::fs::remove_file(&spare).unwrap();
            }
        }
        let out = root(&["msg", "recv", "-n", "shared/B"]);
        if out.status.code() != Some(75) {
            failed.push(format!("recv {n}: {:?} {}", out.status, out.stderr));
        }
        let out = root(&["group", "join", "shared/G", "--", "true"]);
        if out.status.code() != Some(0) {
            failed.push(format!("join {n}: {:?} {}", out.status, out.stderr));
        }
    }
    h.t.write("stop", "");
    let out = grabbing.finish();
    assert!(
        out.stdout.contains("rounds "),
        "the racer failed:\n{}{}",
        out.stdout,
        out.stderr
    );
    let said = out.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        failed.is_empty(),
        "{} of {} registrations failed while nobody grabbed them (the racer: {said}):\n{}",
        failed.len(),
        2 * REGISTRATIONS,
        failed.join("\n")
    );
    // The attacker saw every registration being made: the race was run.
    assert!(
        said.starts_with(&format!("seen {}", 2 * REGISTRATIONS)),
        "the racer: {said}"
    );
}

/// Spare registrations another user put in a mailbox open to all (their own files, one of them
/// a hard link to a file of root's) are never taken by root's receiver, nor changed: it makes
/// its own, and one of its own spares that someone holds locked is passed over too.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn another_users_spare_registrations_are_never_taken_or_changed() {
    let h = Hostile::new();
    h.nobody(["sh", "-c", "umask 0; exec \"$0\" msg recv -n shared/B"])
        .arg(fsync_bin())
        .run()
        .code(75);
    let recv = h.t.join("shared/B/recv");
    // root's own spare, held locked by another process, then nobody's files as spares.
    h.fsync(["msg", "recv", "-n", "shared/B"]).run().code(75);
    let mine = (0..4)
        .map(|k| recv.join(format!(".spare-{k}")))
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == 0))
        .expect("root's receiver kept a spare");
    let mut holder =
        h.t.cmd("flock")
            .arg(&mine)
            .args(["sh", "-c", "echo locked; sleep 30"])
            .own_process_group()
            .start();
    holder.expect("locked");
    for k in 0..4 {
        let spare = recv.join(format!(".spare-{k}"));
        if spare != mine && !spare.exists() {
            h.nobody(["sh", "-c", "umask 0; : > \"$0\""])
                .arg(&spare)
                .run()
                .code(0);
        }
    }
    let before: Vec<_> = (0..4)
        .map(|k| {
            std::fs::symlink_metadata(recv.join(format!(".spare-{k}")))
                .map(|m| (m.ino(), m.uid(), m.mode()))
                .ok()
        })
        .collect();
    for _ in 0..3 {
        h.fsync(["msg", "recv", "-n", "shared/B"]).run().code(75);
    }
    let after: Vec<_> = (0..4)
        .map(|k| {
            std::fs::symlink_metadata(recv.join(format!(".spare-{k}")))
                .map(|m| (m.ino(), m.uid(), m.mode()))
                .ok()
        })
        .collect();
    assert_eq!(
        before, after,
        "a spare another user put there, or one held, was taken"
    );
    holder.kill_process_group();
}

/// Another user who may write a mailbox's directory (they made it, open to all) replaces its
/// `head` and `seq` with their own, past root's messages: root's receives still take them, in
/// order, and `wait-empty` does not call the mailbox empty meanwhile.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_head_another_user_rewrote_past_roots_messages_hides_none_of_them() {
    let h = Hostile::new();
    h.nobody(["sh", "-c", "umask 0; exec \"$0\" msg recv -n shared/B"])
        .arg(fsync_bin())
        .run()
        .code(75);
    for data in ["a", "b"] {
        h.fsync(["msg", "post", "shared/B", "--data", data])
            .run_in(&h)
            .code(0);
    }
    h.as_nobody([
        "sh",
        "-c",
        "cd shared/B && printf '299\\n' > s && mv s seq && \
         printf '00000000000000000300\\n' > h && mv h head",
    ]);
    h.fsync(["msg", "wait-empty", "-n", "shared/B"])
        .run_in(&h)
        .code(75);
    for data in ["a", "b"] {
        h.fsync(["msg", "recv", "-n", "shared/B"])
            .run_in(&h)
            .code(0)
            .stdout(data);
    }
    h.fsync(["msg", "wait-empty", "-n", "shared/B"])
        .run_in(&h)
        .code(0);
}

// Payloads their poster cannot change once claimed: another user's message file stays theirs
// (they may write it, or kept a descriptor from posting). What root's receiver and its job
// read is what it held when claimed, whatever they write to it, or how far they grow it,
// after that.

/// A mailbox `nobody` made, open to all, holding one message of theirs: `payload`.
fn nobodys_message(h: &Hostile, payload: &str) {
    h.t.write("payload", payload);
    chmod(&h.t.join("payload"), 0o644);
    h.nobody([
        "sh",
        "-c",
        "umask 0; exec \"$0\" msg post shared/B < payload",
    ])
    .arg(fsync_bin())
    .run()
    .code(0);
}

/// `nobody` runs `sh -c SCRIPT` on each claimed message file of `shared/B` (`$1`).
#[track_caller]
fn nobody_on_claimed(h: &Hostile, script: &str) {
    let each = format!(
        "for f in shared/B/claimed/*; do [ -f \"$f\" ] || exit 9; set -- \"$f\"; {script}; done"
    );
    h.as_nobody(["sh", "-c", &each]);
}

/// Root's job on `shared/B`'s message: it says `started`, waits for a line on the FIFO
/// `go`, then runs `then` on its standard input (the payload).
fn roots_job(h: &Hostile, then: &str) -> crate::harness::Holder {
    let go = h.t.arg("go");
    let status = std::process::Command::new("mkfifo")
        .arg(&go)
        .status()
        .unwrap();
    assert!(status.success());
    let job = format!("echo started; read line < {go}; {then}");
    let mut job = h
        .fsync(["msg", "recv", "shared/B", "--", "sh", "-c", &job])
        .start();
    job.expect("started");
    job
}

/// Let root's job go on (the FIFO's reader is waiting for it).
fn go(h: &Hostile) {
    std::fs::write(h.t.join("go"), "go\n").unwrap();
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_payload_its_poster_rewrites_while_the_job_runs_reaches_the_job_as_posted() {
    let h = Hostile::new();
    nobodys_message(&h, "posted");
    let job = roots_job(&h, "cat");
    nobody_on_claimed(&h, "printf 'REWRITTEN, and longer than it was' > \"$1\"");
    go(&h);
    let out = job.finish();
    out.code(0);
    assert_eq!(
        out.stdout, "posted\n",
        "the job read what nobody wrote after the post"
    );
    assert_eq!(entries(&h.t.join("shared/B/claimed")), 0);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_payload_its_poster_grows_while_the_job_runs_reaches_the_job_at_its_size() {
    let h = Hostile::new();
    nobodys_message(&h, "x");
    let job = roots_job(&h, "wc -c");
    nobody_on_claimed(&h, "truncate -s 200M \"$1\"");
    go(&h);
    let out = job.finish();
    out.code(0);
    assert_eq!(out.stdout.split_whitespace().collect::<Vec<_>>(), ["1"]);
    assert_eq!(entries(&h.t.join("shared/B/claimed")), 0);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_payload_its_poster_grows_while_it_is_written_out_is_written_out_as_posted() {
    use std::io::{BufRead, Read};
    let h = Hostile::new();
    // Far more than a pipe holds: with its first line read, the receiver has written out at
    // most a pipe's worth more, and is still at it (the claim is there).
    let payload: String = (0..100_000).map(|n| format!("line {n:06}\n")).collect();
    nobodys_message(&h, &payload);
    let out = h.t.arg("out");
    let status = std::process::Command::new("mkfifo")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let recv = h.t.sh("exec \"$FSYNC\" msg recv shared/B > out").start();
    let mut reading = std::io::BufReader::new(std::fs::File::open(&out).unwrap());
    let mut got = String::new();
    reading.read_line(&mut got).unwrap();
    assert_eq!(got, "line 000000\n");
    nobody_on_claimed(&h, "truncate -s 20M \"$1\"");
    reading.read_to_string(&mut got).unwrap();
    recv.finish().code(0);
    assert_eq!(got.len(), payload.len(), "not the payload posted");
    assert!(got == payload, "not the payload posted");
    assert_eq!(entries(&h.t.join("shared/B/claimed")), 0);
}

/// Jobs by id in a mailbox another user may read but not write: `nobody` sees root's job's
/// status and cannot cancel it (77, the job still queued). In a mailbox `nobody` made, records
/// and cancel requests planted as links to the victim are never written through, read or
/// removed: root's job runs, its record is lost (said as an error naming the link when asked),
/// and a cancel request that is a link is only a request.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_status_and_cancel_of_another_users_job_and_planted_records_and_requests() {
    let h = Hostile::new();
    h.fsync(["msg", "post", "-q", "rootbox", "--data", "root's"])
        .run_in(&h)
        .code(0);
    h.fsync_as_nobody(["msg", "status", "rootbox", "1"])
        .run_in(&h)
        .code(0)
        .stdout_has("1 queued since ");
    h.fsync_as_nobody(["msg", "cancel", "rootbox", "1"])
        .deadline(NO_HANG)
        .run_in(&h)
        .code(77)
        .stderr_has("rootbox");
    h.fsync(["msg", "status", "rootbox", "1"])
        .run_in(&h)
        .code(0)
        .stdout_has("1 queued since ");

    h.fsync_as_nobody(["msg", "post", "-q", "shared/box", "--data", "first"])
        .run()
        .code(0);
    h.fsync_as_nobody(["msg", "post", "-q", "shared/box", "--data", "second"])
        .run()
        .code(0);
    h.mkdir("shared/box/done");
    h.mkdir("shared/box/done/00000000000000000000");
    h.mkdir("shared/box/cancel");
    h.link(
        &h.victim(),
        "shared/box/done/00000000000000000000/00000000000000000001",
    );
    h.link(&h.victim(), "shared/box/cancel/00000000000000000002");
    h.fsync(["msg", "recv", "shared/box", "--", "true"])
        .deadline(NO_HANG)
        .run_in(&h)
        .code(0);
    h.assert_kind(
        "shared/box/done/00000000000000000000/00000000000000000001",
        "symlink",
    );
    let out = h
        .fsync(["msg", "status", "shared/box", "1"])
        .deadline(NO_HANG)
        .run_in(&h);
    assert!(!out.stdout.contains(PRECIOUS) && !out.stderr.contains(PRECIOUS));
    out.operational_error("shared/box/done/00000000000000000000/00000000000000000001");
    // Job 2 has a request (a link): taken, it is recorded cancelled and never run.
    h.fsync([
        "msg",
        "recv",
        "-n",
        "shared/box",
        "--",
        "sh",
        "-c",
        "cat > ran",
    ])
    .deadline(NO_HANG)
    .run_in(&h)
    .code(75);
    assert!(!h.t.join("ran").exists(), "a cancelled job ran");
    h.fsync(["msg", "status", "shared/box", "2"])
        .run_in(&h)
        .code(0)
        .stdout_has("2 cancelled at ");
    h.assert_kind("shared/box/cancel/00000000000000000002", "symlink");
    h.assert_victim_untouched();
}

/// A job's output in another user's mailbox: a link that user planted at the output's name is
/// replaced, never written through (root's victim untouched), and the output root's job wrote
/// is root's, unreadable to the other user (the payload mode, 0640); `msg log` of a job whose
/// output name is such a link refuses it and prints nothing of its target.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn msg_output_never_follows_a_planted_link_and_is_kept_from_others() {
    let h = Hostile::new();
    for data in ["one", "two"] {
        h.fsync_as_nobody(["msg", "post", "shared/box", "--data", data])
            .run()
            .code(0);
    }
    let shard = format!("shared/box/output/{SHARD0}");
    h.as_nobody(["mkdir", "-p", &shard]);
    for id in [1, 2] {
        h.link(&h.victim(), &format!("{shard}/{id:020}"));
    }
    // One job (the first): root's recv, its output kept and passed on.
    h.fsync(["msg", "recv", "shared/box", "--", "echo", "secret"])
        .run_in(&h)
        .code(0)
        .stdout("secret\n");
    let kept = format!("{shard}/{:020}", 1);
    h.assert_kind(&kept, "file");
    let meta = std::fs::metadata(h.t.join(&kept)).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o007),
        (0, 0),
        "{:o}",
        meta.mode()
    );
    h.fsync(["msg", "log", "shared/box", "1"])
        .run_in(&h)
        .code(0)
        .stdout("secret\n");
    let out = h.fsync(["msg", "log", "shared/box", "2"]).run_in(&h);
    out.code(66).stdout("").stderr_has("symbolic link");
    h.nobody(["cat", &kept]).run().code(1);
}

// doctor: its scratch files in a shared directory.

/// An entry as [`entries_as_they_are`] sees it: name, inode, mode, links, change time and,
/// for a regular file, its content.
type Entry = (String, u64, u32, u64, i64, Option<Vec<u8>>);

/// Every entry of `dir`, not following links and never opening a FIFO.
fn entries_as_they_are(dir: &Path) -> Vec<Entry> {
    let mut seen: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let content = m.is_file().then(|| std::fs::read(e.path()).unwrap());
            let name = e.file_name().into_string().unwrap();
            (name, m.ino(), m.mode(), m.nlink(), m.ctime_nsec(), content)
        })
        .collect();
    seen.sort();
    seen
}

/// `nobody` plants, at the names `fsync doctor` gave its scratch files in earlier versions
/// (`.fsync-doctor.PID.a` to `.d`, for the very pid root's doctor gets), files they hold
/// locked, a link to root's file and a FIFO: root's doctor reports a healthy file system (its
/// flock check is not fooled) and leaves every planted entry as it was, and nothing of its own.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn doctor_never_uses_entries_planted_at_its_scratch_names() {
    let h = Hostile::new();
    // The shell's pid is the doctor's: it execs fsync once the names are planted.
    let mut doctor =
        h.t.sh("echo ready; read go; exec \"$FSYNC\" doctor --json shared")
            .start();
    doctor.expect("ready");
    let pid = doctor.pid();
    let old = |s: &str| format!("shared/.fsync-doctor.{pid}.{s}");
    let a = nobody_flocks(&h, &old("a"), true);
    h.link(&h.victim(), &old("b"));
    h.fifo(&old("c"));
    let d = nobody_flocks(&h, &old("d"), true);
    let before = entries_as_they_are(&h.t.join("shared"));
    assert_eq!(before.len(), 4);
    doctor.send("go");
    let out = doctor.finish();
    h.assert_victim_untouched();
    out.code(0);
    let v = json_of(&out.stdout);
    for check in ["flock", "byte_range", "rename", "link", "notify"] {
        assert_eq!(v[check], true, "{check}\n{v}");
    }
    assert_eq!(
        entries_as_they_are(&h.t.join("shared")),
        before,
        "a planted entry was used, or a scratch file left"
    );
    for (held, name) in [(a, "a"), (d, "d")] {
        let locks = crate::harness::flocks_on(&h.t.join(&old(name)));
        assert_eq!(locks.len(), 1, "{name}: {locks:?}");
        held.finish().code(0);
    }
}

/// SECURITY.md's table names, for every row, the tests that show it; each named test exists
/// (a `fn` of that name in the tests or the library's unit tests), so a renamed or removed
/// test cannot leave a promise unshown.
#[test]
fn every_row_of_security_md_names_tests_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("SECURITY.md")).unwrap();
    let mut sources = String::new();
    let mut stack = vec![root.join("tests"), root.join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let table = doc
        .split("| they put there | fsync | shown by |")
        .nth(1)
        .expect("SECURITY.md's table, with its `shown by` column");
    let rows: Vec<&str> = table
        .lines()
        .skip(2) // the rest of the header and the separator
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(rows.len() > 20, "the table has {} rows", rows.len());
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
        let named: Vec<&str> = cells[cells.len() - 1]
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        assert!(!named.is_empty(), "a row names no test: {row}");
        for test in named {
            let name = test.rsplit("::").next().unwrap();
            assert!(
                sources.contains(&format!("fn {name}(")),
                "SECURITY.md names `{test}`, which no test is called"
            );
        }
    }
}

/// The verbs that need a mailbox to exist (`msg wait-empty`, `msg status`, `msg log`,
/// `msg retry`) open its name once, check that the directory is a mailbox, and use that
/// directory: a name swapped between the check and the use cannot point them at another
/// directory, nor make a mailbox where none was. strace counts the opens of the name.
/// (Mutant answered: the directory checked forgotten, and the name opened again.)
#[test]
fn a_verb_on_an_existing_mailbox_opens_its_name_once() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    t.fsync(["msg", "recv", "B"]).run().code(0);
    let trace = t.join("trace");
    for args in [
        &["msg", "wait-empty", "-t", "0", "B"][..],
        &["msg", "status", "B", "1"],
        &["msg", "retry", "B"],
    ] {
        t.cmd("strace")
            .args(["-f", "-qq", "-e", "trace=open,openat,mkdir,mkdirat", "-o"])
            .arg(&trace)
            .arg(fsync_bin())
            .args(args)
            .run()
            .code(0);
        let calls = std::fs::read_to_string(&trace).unwrap();
        let opens: Vec<&str> = calls.lines().filter(|l| l.contains("\"B\"")).collect();
        assert_eq!(opens.len(), 1, "{args:?}: {opens:#?}");
    }
}

/// A write to `seq` that fails (here the disk is full: strace answers ENOSPC) says so, in a
/// mailbox shared with a group whose `seq` is another user's with a mode from before the
/// sharing: only an internal file opened read-only (EBADF) is explained as one made before
/// the mailbox was shared, as the head is. (Mutants answered: that explanation given for
/// every other error, or not for the head.)
#[test]
#[ignore = "needs root: makes a file another user's (chown nobody); .ci/run runs it with --ignored"]
fn a_failed_write_of_seq_or_the_head_is_explained_as_it_happened() {
    require_root();
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    t.sh("chmod 0770 B && chown nobody B/seq && chmod 0600 B/seq")
        .run()
        .code(0);
    let out = t.fsync_under_strace(
        "B/seq",
        "pwrite64",
        "inject=pwrite64:error=ENOSPC",
        &["msg", "post", "B", "--data", "y"],
    );
    out.code(74)
        .stderr_has("B/seq: cannot write: no space left on device");
    // The head, opened read-only (strace answers EBADF to its write, which a receive makes
    // moving it past an emptied shard): explained, with what its owner can do.
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("x");
    t.sh("echo 150 > B/seq && chown nobody B/head && chmod 0600 B/head")
        .run()
        .code(0);
    t.fsync(["msg", "post", "B", "--data", "z"]).run().code(0);
    let out = t.fsync_under_strace(
        "B/head",
        "pwrite64",
        "inject=pwrite64:error=EBADF",
        &["msg", "recv", "B"],
    );
    out.code(77)
        .stderr_has("B/head: cannot write: permission denied (its mode 0600 is from before");
}
