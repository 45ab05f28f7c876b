//! Primitives shared after the fact: root makes and uses a primitive in its own directory
//! (0755, so its internal lock files are 0600), then shares it with `chmod` of its directories
//! (0777, or group-writable for `nobody`'s group with `chmod -R g+w`). Until root uses it
//! again, `nobody` is refused with one line that names the file and its owner's remedy; root's
//! next use widens the file (`fchmod` of its descriptor), and then `nobody` takes part.

use std::os::unix::fs::MetadataExt;

use crate::harness::{Cmd, TestDir, fsync_bin, require, require_root};

/// How root shares its primitive's directory.
#[derive(Debug, Clone, Copy)]
enum Share {
    /// `chmod 0777` of every directory (not the files).
    Dirs0777,
    /// `chgrp -R nogroup` and `chmod -R g+w`: the files become 0620.
    GroupWritable,
}

struct Shared {
    t: TestDir,
}

impl Shared {
    /// Acting as two users needs root: fails without it.
    #[track_caller]
    fn new() -> Shared {
        require_root();
        require("runuser", "util-linux");
        let t = TestDir::new();
        t.open_to_others();
        std::fs::create_dir(t.join("own")).unwrap();
        std::fs::set_permissions(
            t.join("own"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        Shared { t }
    }

    /// `fsync ARGS` as `nobody`, in the test directory.
    fn nobody(&self, args: &[&str]) -> Cmd {
        (self.t.cmd("runuser").args(["-u", "nobody", "--"]))
            .arg(fsync_bin())
            .args(args)
    }

    #[track_caller]
    fn share(&self, how: Share) {
        let script = match how {
            Share::Dirs0777 => "find own -type d -exec chmod 0777 {} +",
            Share::GroupWritable => "chgrp -R nogroup own && chmod -R g+w own",
        };
        self.t.cmd("sh").args(["-c", script]).run().code(0);
    }

    /// The permission bits of `file`.
    fn mode(&self, file: &str) -> u32 {
        std::fs::metadata(self.t.join(file)).unwrap().mode() & 0o777
    }
}

/// `nobody`'s refusal naming `file`, shared per `how`; and the mode root's next use gives it.
fn refusal(how: Share, file: &str) -> (String, u32) {
    let (mode, who, widened) = match how {
        Share::Dirs0777 => ("0600", "go", 0o666),
        Share::GroupWritable => ("0620", "g", 0o660),
    };
    let line = format!(
        "fsync: {file}: cannot open lock file: permission denied (its mode {mode} is from before \
         its directory was shared: the next use by its owner, uid 0, widens it, or they can \
         run: chmod {who}+rw {file})\n"
    );
    (line, widened)
}

const HOW: [Share; 2] = [Share::Dirs0777, Share::GroupWritable];

/// Root runs `make` and each of `uses`, and shares per `how`; `nobody` running `theirs` is
/// refused naming `file`; root runs `uses` again, which widens it; then `theirs` succeeds.
#[track_caller]
fn shared_after_the_fact(how: Share, make: &[&str], uses: &[&[&str]], theirs: &[&str], file: &str) {
    let s = Shared::new();
    std::fs::create_dir(s.t.join("own/W")).unwrap();
    s.t.fsync(make).run().code(0);
    for args in uses {
        s.t.fsync(*args).run().code(0);
    }
    assert_eq!(s.mode(file), 0o600, "{file} as root left it");
    s.share(how);
    let (refused, widened) = refusal(how, file);
    s.nobody(theirs).run().code(77).stderr(&refused);
    for args in uses {
        s.t.fsync(*args).run().code(0);
    }
    assert_eq!(s.mode(file), widened, "{file} after root's use ({how:?})");
    s.nobody(theirs).run().code(0);
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_mailbox_shared_after_the_fact_is_usable_once_its_owner_used_it() {
    for how in HOW {
        let s = Shared::new();
        let post = |data| ["msg", "post", "own/B", "--data", data];
        s.t.fsync(post("1")).run().code(0);
        s.t.fsync(["msg", "recv", "own/B"])
            .run()
            .code(0)
            .stdout("1");
        for file in ["own/B/seq", "own/B/head"] {
            assert_eq!(s.mode(file), 0o600, "{file} as root made it");
        }
        s.share(how);
        let (refused, widened) = refusal(how, "own/B/seq");
        s.nobody(&post("2")).run().code(77).stderr(&refused);
        s.t.fsync(post("3")).run().code(0);
        s.t.fsync(["msg", "recv", "own/B"])
            .run()
            .code(0)
            .stdout("3");
        for file in ["own/B/seq", "own/B/head"] {
            assert_eq!(s.mode(file), widened, "{file} after root's use ({how:?})");
        }
        s.nobody(&post("4")).run().code(0);
        s.nobody(&["msg", "recv", "own/B"])
            .run()
            .code(0)
            .stdout("4");
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_semaphore_shared_after_the_fact_is_usable_once_its_owner_used_it() {
    let run: &[&str] = &["sem", "run", "own/S", "--slots", "2", "--", "true"];
    for how in HOW {
        shared_after_the_fact(how, run, &[run], run, "own/S/queue");
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_group_shared_after_the_fact_is_usable_once_its_owner_used_it() {
    let join: &[&str] = &["group", "join", "own/G", "--", "true"];
    for how in HOW {
        shared_after_the_fact(how, join, &[join], join, "own/G/join.lock");
    }
}

#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_group_lock_and_a_bus_shared_after_the_fact_are_usable_once_their_owner_used_them() {
    let run: &[&str] = &["grouplock", "run", "own/L", "--group", "a", "--", "true"];
    let connect: &[&str] = &["bus", "connect", "own/U", "root"];
    let members: &[&str] = &["bus", "connect", "own/U", "root2"];
    let theirs: &[&str] = &["bus", "connect", "own/U", "nobody"];
    for how in HOW {
        shared_after_the_fact(how, run, &[run], run, "own/L/turnstile");
        shared_after_the_fact(how, connect, &[members], theirs, "own/U/.fsync.lock");
    }
}

/// A reader/writer lock's turnstile, left 0600 by a deletion that found the lock in use (the
/// reader around it): widened by root's next reader.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_reader_writer_lock_shared_after_the_fact_is_usable_once_its_owner_used_it() {
    let fsync = fsync_bin().to_str().unwrap().to_string();
    let nested = format!("{fsync} swmr read --delete own/W/L -- true");
    let make: &[&str] = &["swmr", "read", "own/W/L", "--", "sh", "-c", &nested];
    let read: &[&str] = &["swmr", "read", "own/W/L", "--", "true"];
    let write: &[&str] = &["swmr", "write", "own/W/L", "--", "true"];
    for how in HOW {
        shared_after_the_fact(how, make, &[read], write, "own/W/.L.turnstile");
    }
}

/// Fitting a file's mode never reaches a file of root's through a link another user planted at
/// an internal file's name in a directory of theirs: a hard link at a mailbox's `seq` or a
/// group's `join.lock`, a symbolic link at a reader/writer lock's turnstile (which opening
/// follows). Root's file keeps its mode 0600 (widening would give it to everyone).
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn fitting_never_reaches_roots_file_through_a_planted_link() {
    let s = Shared::new();
    s.t.write("own/precious", "precious");
    let chmod = |p: &str, m| {
        let perm = std::os::unix::fs::PermissionsExt::from_mode(m);
        std::fs::set_permissions(s.t.join(p), perm).unwrap();
    };
    chmod("own/precious", 0o600);
    std::fs::create_dir(s.t.join("shared")).unwrap();
    chmod("shared", 0o1777);
    let _unprotected = crate::security::HardlinksUnprotected::new();
    let precious = s.t.arg("own/precious");
    let plant = format!(
        "mkdir -m 0777 shared/B shared/G && ln {precious} shared/B/seq && \
         ln {precious} shared/G/join.lock && ln -s {precious} shared/.L.turnstile"
    );
    (s.t.cmd("runuser")
        .args(["-u", "nobody", "--", "sh", "-c", &plant]))
    .run()
    .code(0);
    s.t.fsync(["msg", "post", "shared/B", "--data", "x"])
        .run()
        .error_naming("shared/B/seq");
    let _ = s.t.fsync(["group", "join", "shared/G", "--", "true"]).run();
    let _ = s.t.fsync(["swmr", "read", "shared/L", "--", "true"]).run();
    assert_eq!(s.mode("own/precious"), 0o600, "root's file's mode changed");
    assert_eq!(s.t.read("own/precious"), "precious");
}

/// A mailbox's `seq` others may read but not write (`chmod -R a+rX`, then its directories
/// 0777): opened read-only, a post cannot write the next number, and says why.
#[test]
#[ignore = "needs root: acts as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn a_mailbox_whose_seq_others_may_only_read_says_so_until_its_owner_uses_it() {
    let s = Shared::new();
    let post = |data| ["msg", "post", "own/B", "--data", data];
    s.t.fsync(post("1")).run().code(0);
    let script = "chmod -R a+rX own && find own -type d -exec chmod 0777 {} +";
    s.t.cmd("sh").args(["-c", script]).run().code(0);
    assert_eq!(s.mode("own/B/seq"), 0o644);
    s.nobody(&post("2")).run().code(77).stderr(
        "fsync: own/B/seq: cannot write: permission denied (its mode 0644 is from before its \
         directory was shared: the next use by its owner, uid 0, widens it, or they can run: \
         chmod go+rw own/B/seq)\n",
    );
    s.t.fsync(post("3")).run().code(0);
    assert_eq!(s.mode("own/B/seq"), 0o666);
    s.nobody(&post("4")).run().code(0);
}
