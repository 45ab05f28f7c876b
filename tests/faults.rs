//! Fault injection: `fsync` run under `strace -f -e inject=SYSCALL:error=ERRNO[:when=N]` (and
//! `-P PATH` to hit one file's calls only). Each row of the matrix says what must come out: the
//! exit status and that stderr is one `fsync: ` line, or success where the fault must be
//! retried (EINTR). After every row: no lock is left held, no partial message is visible, no
//! earlier message is lost. The matrix below is the record of what was checked.

use crate::harness::{TestDir, require};

/// (verb, strace filter, expected exit status)
const MATRIX: &[(&str, &str, i32)] = &[
    // mutex: the lock file cannot be opened, locked; signals during a lock call are retried
    (
        "mutex",
        "-P L -e trace=openat -e inject=openat:error=EACCES",
        77,
    ),
    (
        "mutex",
        "-P L -e trace=openat -e inject=openat:error=EROFS",
        77,
    ),
    ("mutex", "-e trace=flock -e inject=flock:error=ENOLCK", 69),
    ("mutex", "-e trace=flock -e inject=flock:error=EIO", 74),
    (
        "mutex",
        "-e trace=flock -e inject=flock:error=EINTR:when=1",
        0,
    ),
    (
        "mutex",
        "-e trace=flock -e inject=flock:error=EINTR:when=2",
        0,
    ),
    // msg post: payload write, flush, and the rename into the queue fail
    (
        "post",
        "-e trace=write -e inject=write:error=ENOSPC:when=1",
        74,
    ),
    (
        "post",
        "-e trace=write -e inject=write:error=EDQUOT:when=1",
        74,
    ),
    (
        "post",
        "-e trace=write -e inject=write:error=EIO:when=1",
        74,
    ),
    (
        "post",
        "-e trace=fsync -e inject=fsync:error=EIO:when=1",
        74,
    ),
    (
        "post",
        "-e trace=renameat -e inject=renameat:error=EDQUOT",
        74,
    ),
    (
        "post",
        "-e trace=renameat -e inject=renameat:error=ENOSPC",
        74,
    ),
    ("post", "-e trace=flock -e inject=flock:error=ENOLCK", 69),
    (
        "post",
        "-e trace=write -e inject=write:error=EINTR:when=1",
        0,
    ),
    (
        "post",
        "-e trace=renameat -e inject=renameat:error=EINTR:when=1",
        0,
    ),
    // msg recv: the claim (rename) fails: nothing is lost; interrupted renames are retried.
    // The first rename fails (the registration's); `-P` aims at the claim's itself, into
    // `B/claimed`, which must fail the receive too, not pass the message over.
    ("recv", "-e trace=renameat -e inject=renameat:error=EIO", 74),
    (
        "recv",
        "-P B/claimed -e trace=renameat -e inject=renameat:error=EIO",
        74,
    ),
    (
        "recv",
        "-e trace=renameat -e inject=renameat:error=EINTR:when=1",
        0,
    ),
    (
        "recv",
        "-e trace=renameat -e inject=renameat:error=EINTR:when=2",
        0,
    ),
    // msg send: at its timeout the message is withdrawn (unlinked from its shard); a receiver
    // that took it first (the name gone: ENOENT) is looked for, and another failure is an error
    (
        "send",
        "-P B/q/00000000000000000000 -e trace=unlinkat -e inject=unlinkat:error=ENOENT:when=1",
        75,
    ),
    (
        "send",
        "-P B/q/00000000000000000000 -e trace=unlinkat -e inject=unlinkat:error=EIO",
        74,
    ),
    // sem: a slot cannot be locked
    ("sem", "-e trace=flock -e inject=flock:error=ENOLCK", 69),
    // byte ranges (OFD locks by fcntl): refused, failing, interrupted (also when passing down:
    // on L's descriptor, the first call is the lock, the next two pass it down)
    ("range", "-e trace=fcntl -e inject=fcntl:error=ENOLCK", 69),
    ("range", "-e trace=fcntl -e inject=fcntl:error=EIO", 74),
    (
        "range",
        "-P L -e trace=fcntl -e inject=fcntl:error=EINTR:when=1",
        0,
    ),
    (
        "range",
        "-P L -e trace=fcntl -e inject=fcntl:error=EINTR:when=2",
        0,
    ),
    (
        "range",
        "-P L -e trace=fcntl -e inject=fcntl:error=EINTR:when=3",
        0,
    ),
    // event: the event file cannot be created
    (
        "signal",
        "-P E -e trace=openat -e inject=openat:error=ENOSPC",
        74,
    ),
];

#[test]
fn faults_give_clear_errors_and_leave_nothing_broken() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "first"])
        .run()
        .code(0);
    let mut failures = Vec::new();
    for (verb, filter, want) in MATRIX {
        let fsync_args: &[&str] = match *verb {
            "mutex" => &["mutex", "run", "L", "--", "true"],
            "post" => &["msg", "post", "B", "--data", "second"],
            "recv" => &["msg", "recv", "-n", "B"],
            "send" => &["msg", "send", "-t", "200ms", "B", "--data", "second"],
            "sem" => &["sem", "run", "S", "--slots", "2", "--", "true"],
            "range" => &["mutex", "run", "--range", "0:10", "L", "--", "true"],
            _ => &["event", "signal", "E"],
        };
        let mut cmd = t.cmd("strace").args(["-f", "-qq", "-o", "/dev/null"]);
        cmd = cmd
            .args(filter.split_whitespace())
            .arg(crate::harness::fsync_bin())
            .args(fsync_args);
        let out = cmd.run();
        let code = out.status.code();
        // strace says where a relative path given to -P leads: not ours to judge.
        let lines: Vec<&str> = (out.stderr.lines())
            .filter(|l| !l.starts_with("strace: Requested path"))
            .collect();
        // A timeout (75) is silent, as flock(1)'s.
        let clear = match *want {
            0 => true,
            75 => lines.is_empty(),
            _ => lines.len() == 1 && lines[0].starts_with("fsync: "),
        };
        if code != Some(*want) || !clear {
            failures.push(format!(
                "{verb} under `{filter}`: exit {code:?} (want {want}), stderr {:?}",
                out.stderr
            ));
        }
        // Nothing left behind: the lock is free, the queue holds exactly what succeeded.
        t.fsync(["mutex", "status", "L"]).run().code(0);
        if *verb == "recv" && *want == 0 {
            // It received the one queued message: queue it again.
            assert_eq!(out.stdout, "first", "recv under `{filter}`");
            t.fsync(["msg", "post", "B", "--data", "first"])
                .run()
                .code(0);
        }
        if *verb == "post" && *want == 0 {
            let got = t.fsync(["msg", "recv", "-n", "B"]).run();
            got.code(0);
            assert!(
                got.stdout == "first" || got.stdout == "second",
                "{}",
                got.stdout
            );
            if got.stdout == "first" {
                t.fsync(["msg", "recv", "-n", "B"])
                    .run()
                    .code(0)
                    .stdout("second");
                t.fsync(["msg", "post", "B", "--data", "first"])
                    .run()
                    .code(0);
            }
        }
        if *verb == "send" {
            // Withdrawn, or (the withdrawal failing) left for receivers to discard, its sender
            // gone: never received either way.
            t.fsync(["msg", "recv", "-n", "B"])
                .run()
                .code(0)
                .stdout("first");
            t.fsync(["msg", "recv", "-n", "B"]).run().code(75);
            t.fsync(["msg", "post", "B", "--data", "first"])
                .run()
                .code(0);
        }
        let tmp = std::fs::read_dir(t.join("B/tmp")).unwrap().count();
        assert_eq!(
            tmp, 0,
            "a failed post left a partial message in tmp/ ({verb} `{filter}`)"
        );
        let queued = crate::harness::queued_files(t.join("B")).len();
        assert_eq!(queued, 1, "the queue changed under `{filter}`");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    t.fsync(["msg", "recv", "-n", "B"])
        .run()
        .code(0)
        .stdout("first");
}

/// On a FUSE network file system (GlusterFS, MooseFS) an open that creates a file if missing is
/// a look-up, then a create, and another host that creates the same name in between makes the
/// server answer EEXIST: the open is then made again, and opens the file the other host made.
/// Here strace plays that host, answering EEXIST to a semaphore's first such open of its
/// `queue` (found in a trace of the same command without faults). (Mutant answered: the
/// create-or-open in `Dir::openat` not retried, its `!` deleted.)
#[test]
fn a_create_that_meets_a_racing_creator_opens_the_file_it_found() {
    require("strace", "strace");
    let t = TestDir::new();
    let sem = ["sem", "run", "S", "--slots", "2", "--", "true"];
    let trace = t.join("trace");
    let traced = |inject: Option<usize>| {
        let mut cmd = t
            .cmd("strace")
            .args(["-qq", "-e", "trace=openat", "-o"])
            .arg(&trace);
        if let Some(n) = inject {
            cmd = cmd.args(["-e", &format!("inject=openat:error=EEXIST:when={n}")]);
        }
        let out = cmd.arg(crate::harness::fsync_bin()).args(sem).run();
        let opens: Vec<String> = std::fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("openat("))
            .map(str::to_string)
            .collect();
        (out, opens)
    };
    let (out, opens) = traced(None);
    out.code(0);
    let creates = |l: &String| l.contains("O_CREAT") && !l.contains("O_EXCL");
    let n = 1 + opens
        .iter()
        .position(|l| creates(l) && l.contains("\"queue\""))
        .expect("queue");
    std::fs::remove_dir_all(t.join("S")).unwrap();

    let (out, opens) = traced(Some(n));
    out.code(0);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    assert!(
        opens[n - 1].contains("\"queue\"") && opens[n - 1].ends_with("(INJECTED)"),
        "the fault met another call: {}",
        opens[n - 1]
    );
    assert!(
        opens[n].contains("\"queue\"") && creates(&opens[n]),
        "then: {}",
        opens[n]
    );
    assert!(t.join("S/queue").is_file());
}

/// Receivers remove a bucket of delayed messages they emptied without a lock, so a delayed post
/// may find the bucket it opened gone when it renames the message in (`ENOENT`, which strace
/// plays here on the post's rename): it makes the bucket again and renames again, eight times
/// at most, then fails, naming the message, and leaves nothing behind. (Mutants answered: the
/// rename not tried again, and tried again for ever.)
#[test]
fn a_delayed_post_whose_bucket_went_makes_it_again() {
    require("strace", "strace");
    let t = TestDir::new();
    let trace = t.join("trace");
    let post = |inject: &str, data: &str| {
        let out = t
            .cmd("strace")
            .args(["-f", "-qq", "-e", "trace=renameat", "-e", inject, "-o"])
            .arg(&trace)
            .arg(crate::harness::fsync_bin())
            .args(["msg", "post", "--delay", "1h", "B", "--data", data])
            .run();
        let renames = std::fs::read_to_string(&trace).unwrap();
        let renames: Vec<String> = renames.lines().map(str::to_string).collect();
        (out, renames)
    };
    let (out, renames) = post("inject=renameat:error=ENOENT:when=1", "again");
    out.code(0);
    assert_eq!(renames.len(), 2, "{renames:?}");
    assert!(renames[0].ends_with("(INJECTED)"), "{renames:?}");
    let buckets: Vec<_> = std::fs::read_dir(t.join("B/delayed")).unwrap().collect();
    let [Ok(bucket)] = &buckets[..] else {
        panic!("{buckets:?}");
    };
    let held: Vec<_> = std::fs::read_dir(bucket.path()).unwrap().collect();
    let [Ok(message)] = &held[..] else {
        panic!("{held:?}");
    };
    assert_eq!(std::fs::read_to_string(message.path()).unwrap(), "again");

    let (out, renames) = post("inject=renameat:error=ENOENT", "never");
    out.code(66).stderr_has("cannot hold message back");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(renames.len(), 8, "{renames:?}");
    assert_eq!(std::fs::read_dir(t.join("B/tmp")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(bucket.path()).unwrap().count(), 1);
}

/// A bucket of delayed messages a delayed post made, removed before the post could open it (a
/// receiver found it empty), is made again: the post looks whether the name is gone, and tries
/// again while it is, eight times in all, then fails, naming the bucket, and leaves nothing
/// behind. strace plays the receiver: every open of the bucket after the first (`-P B/delayed`
/// matches the calls made relative to that directory) and every look at it answer ENOENT.
/// (Mutants answered: the count of tries made wrong, never tried again, or for ever.)
#[test]
fn a_delayed_post_whose_new_bucket_keeps_vanishing_gives_up_after_eight_tries() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "--delay", "1h", "B", "--data", "first"])
        .run()
        .code(0);
    let trace = t.join("trace");
    let out = t
        .cmd("strace")
        .args([
            "-f",
            "-qq",
            "-P",
            "B/delayed",
            "-e",
            "trace=openat,newfstatat",
        ])
        .args(["-e", "inject=openat:error=ENOENT:when=2+"])
        .args(["-e", "inject=newfstatat:error=ENOENT", "-o"])
        .arg(&trace)
        .arg(crate::harness::fsync_bin())
        .args(["msg", "post", "--delay", "3h", "B", "--data", "never"])
        .run();
    out.code(66).stderr_has("B/delayed/");
    let lines: Vec<&str> = (out.stderr.lines())
        .filter(|l| !l.starts_with("strace: Requested path"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    let looks = std::fs::read_to_string(&trace).unwrap();
    let looks = looks.lines().filter(|l| l.contains("newfstatat(")).count();
    assert_eq!(
        looks, 7,
        "looks whether the bucket is gone, one before each try again"
    );
    assert_eq!(std::fs::read_dir(t.join("B/tmp")).unwrap().count(), 0);
}

/// The directory layer's safe open of a primitive's directory (`Dir::top`'s long way), driven
/// through each of its branches the way they happen: strace plays the other process, answering
/// a given error at a given call on the name `S` (`-P S` matches both `S` and `openat(dir,
/// "S")`; a link it resolves, and then matches calls on its target too, where the row's count
/// of calls says so), and `S` is missing or one of our links to a directory. Each row says what must
/// come out: made again after another client's half-done `mkdir` (ENOENT once), given up
/// after a few tries when the name keeps vanishing (ENOENT always: exit 66, not a crash or a
/// hang), a link that vanishes between the open and the look (ENOENT from the status: tried
/// again, then "being replaced", 77), a status that fails otherwise (EIO: 74), and a link whose
/// target cannot be opened (EACCES: 77, not "not a directory"). (Mutants answered: the
/// ENOENT guards of `Dir::child_top`, the count of its waits made wrong, its last open's
/// ENOTDIR arm taking any error.)
#[test]
fn the_safe_open_of_a_directory_meets_each_error_at_each_step() {
    require("strace", "strace");
    let t = TestDir::new();
    std::fs::create_dir(t.join("real")).unwrap();
    let sem = ["sem", "run", "S", "--slots", "2", "--", "true"];
    // (S before: missing or a link to `real`; strace's arguments; exit; stderr has)
    let rows: &[(&str, &str, i32, &str)] = &[
        (
            "missing",
            "-e trace=openat -e inject=openat:error=ENOENT:when=2",
            0,
            "",
        ),
        (
            "missing",
            "-e trace=openat -e inject=openat:error=ENOENT",
            66,
            "fsync: S: cannot create semaphore: no such file or directory",
        ),
        (
            "link",
            "-e trace=newfstatat -e inject=newfstatat:error=ENOENT",
            77,
            "is being replaced while we open it",
        ),
        (
            "link",
            "-e trace=newfstatat -e inject=newfstatat:error=EIO",
            74,
            "fsync: S: cannot create semaphore: I/O error",
        ),
        (
            "link",
            "-e trace=openat -e inject=openat:error=EACCES:when=2",
            77,
            "fsync: S: cannot create semaphore: permission denied",
        ),
    ];
    let mut failures = Vec::new();
    for (before, filter, want, says) in rows {
        let _ = std::fs::remove_dir_all(t.join("S"));
        let _ = std::fs::remove_file(t.join("S"));
        if *before == "link" {
            std::os::unix::fs::symlink("real", t.join("S")).unwrap();
        }
        let out = (t
            .cmd("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-P", "S"]))
        .args(filter.split_whitespace())
        .arg(crate::harness::fsync_bin())
        .args(sem)
        .run();
        // strace says where a link named by -P leads: not ours to judge.
        let lines: Vec<&str> = (out.stderr.lines())
            .filter(|l| !l.starts_with("strace: Requested path"))
            .collect();
        let clear = match *want {
            0 => lines.is_empty(),
            _ => lines.len() == 1 && lines[0].contains(says),
        };
        if out.status.code() != Some(*want) || !clear {
            failures.push(format!(
                "S {before} under `{filter}`: {:?} (want {want}, saying {says:?}), stderr {:?}",
                out.status, out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An internal lock file is made for whoever may write the primitive's directory or one of its
/// subdirectories; a subdirectory whose status cannot be had counts as writable by everyone, so
/// that doubt never locks a participant out. Here strace fails the status of the one
/// subdirectory (EIO) while a semaphore makes its `queue`: made 0666, where 0600 is right for
/// the directories as they are. (Mutant answered: the doubtful one's mode taken away instead.)
#[test]
fn a_subdirectory_that_cannot_be_looked_at_counts_as_open_to_all() {
    use std::os::unix::fs::PermissionsExt;
    require("strace", "strace");
    let t = TestDir::new();
    let mode = |p: &str, m| {
        std::fs::set_permissions(t.join(p), std::fs::Permissions::from_mode(m)).unwrap();
    };
    let sem = ["sem", "run", "S", "--slots", "2", "--", "true"];
    for (inject, want) in [(false, 0o600), (true, 0o666)] {
        let _ = std::fs::remove_dir_all(t.join("S"));
        std::fs::create_dir_all(t.join("S/zz-sub")).unwrap();
        mode("S", 0o700);
        mode("S/zz-sub", 0o700);
        let mut cmd = t.cmd("strace").args(["-f", "-qq", "-o", "/dev/null"]);
        if inject {
            cmd = cmd.args(["-P", "zz-sub", "-e", "trace=newfstatat"]);
            cmd = cmd.args(["-e", "inject=newfstatat:error=EIO"]);
        }
        cmd.arg(crate::harness::fsync_bin()).args(sem).run().code(0);
        let got = std::fs::metadata(t.join("S/queue"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(got, want, "queue's mode, the status failing: {inject}");
    }
}

/// A receiver killed with its job leaves its claim; the next process to look (here
/// `wait-empty`) returns it to the queue as a lost delivery and says so in the message's
/// history, even when another receiver takes it the moment it is back. strace holds the
/// finder back on the returned name (its status waits 2 s) while a worker takes the message,
/// fails it and buries it: the dead letter's history must still hold both deliveries, the
/// lost one and the failed one. (Before, the line was written only if the name was still
/// queued after the return, so a fast receiver made the lost delivery vanish from the
/// history while the name's counts kept it: a history that disagreed with its counts.)
#[test]
fn a_lost_delivery_is_in_the_history_even_when_it_is_taken_again_at_once() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "job"]).run().code(0);
    let shard = crate::harness::first_shard(t.join("B"));
    let [name] = &crate::harness::queued_files(t.join("B"))[..] else {
        panic!("one message queued");
    };
    // Its receiver, `host` pid 1, is gone: no registration in `recv/`.
    let claim = format!("{name}~host-1-00000000deadbeef");
    std::fs::rename(shard.join(name), t.join("B/claimed").join(claim)).unwrap();
    let back = format!("{name}-1"); // one delivery lost, none failed
    let mut finder = t
        .cmd("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-P", &back])
        .args(["-e", "trace=newfstatat,statx"])
        .args(["-e", "inject=newfstatat,statx:delay_enter=2000000"])
        .arg(crate::harness::fsync_bin())
        .args(["msg", "wait-empty", "B", "-t", "0"])
        .start();
    crate::harness::eventually("the claim back in the queue", || shard.join(&back).exists());
    t.fsync([
        "msg",
        "work",
        "--retries",
        "0",
        "--until-empty",
        "B",
        "--",
        "false",
    ])
    .run()
    .code(1);
    finder.wait_exit();
    let list = t.fsync(["msg", "list", "--json", "B"]).run();
    let v = crate::harness::json_of(&list.stdout);
    let attempts: Vec<(u64, String)> = v["dead"][0]["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("one dead letter: {v}"))
        .iter()
        .map(|a| (a["attempt"].as_u64().unwrap(), a["ended"].to_string()))
        .collect();
    assert_eq!(
        attempts,
        [(1, "\"lost\"".to_string()), (2, "\"exit\"".to_string())],
        "{v}"
    );
    assert_eq!(
        (&v["dead"][0]["failed"], &v["dead"][0]["lost"]),
        (&1.into(), &1.into())
    );
}

/// Where `/proc` cannot say which name a descriptor has (no procfs mounted), the check that a
/// file in a directory others may write has no second name asks the directory instead: the
/// name must still lead to the file opened. strace plays the missing `/proc` (every
/// `readlink` fails) for a post to a mailbox open to all: its `seq` is fsync's own and is used
/// as before, not refused as another's. (Mutant answered: the fallback's comparison of the
/// name's file with the one opened inverted.)
#[test]
fn without_proc_a_file_fsync_made_is_still_its_own() {
    require("strace", "strace");
    let t = TestDir::new();
    let post = |strace: &str, data: &str| {
        t.sh(&format!(
            "umask 0; exec {strace} \"$0\" msg post B --data {data}"
        ))
        .arg(crate::harness::fsync_bin())
        .run()
    };
    post("", "first").code(0);
    let mode = std::fs::metadata(t.join("B")).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o777
    );
    let trace = t.arg("trace");
    let out = post(
        &format!(
            "strace -f -qq -o {trace} -e trace=readlink,readlinkat \
             -e inject=readlink,readlinkat:error=ENOENT"
        ),
        "second",
    );
    out.code(0);
    let calls = std::fs::read_to_string(t.join("trace")).unwrap();
    assert!(
        calls.contains("/proc/self/fd/"),
        "no name was asked of /proc: {calls}"
    );
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("first");
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("second");
}

/// A lock file someone else removed between the check that its name is still the file held and
/// the removal `--delete` makes is what was asked for: no error. strace plays that someone:
/// the removal of `L` finds no such file. (Mutant answered: the arm that takes "no such
/// file" for done made to report it.)
#[test]
fn a_lock_file_removed_just_before_delete_removes_it_is_no_error() {
    require("strace", "strace");
    let t = TestDir::new();
    // `L` not there yet: strace matches the name itself, which unlinkat is given.
    let trace = t.arg("trace");
    t.cmd("strace")
        .args([
            "-f",
            "-qq",
            "-o",
            &trace,
            "-P",
            "L",
            "-e",
            "trace=unlinkat,unlink",
        ])
        .args(["-e", "inject=unlinkat,unlink:error=ENOENT"])
        .arg(crate::harness::fsync_bin())
        .args(["mutex", "run", "--delete", "L", "--", "true"])
        .run()
        .code(0)
        .stderr("");
    let calls = std::fs::read_to_string(t.join("trace")).unwrap();
    assert!(
        calls.contains("ENOENT (No such file or directory) (INJECTED)"),
        "{calls}"
    );
}

/// Where the kernel's lock table cannot be read (strace fails its open), `mutex status` asks
/// the lock itself, with a non-blocking probe let go at once: a free lock is free, a held one
/// held. A file that takes no exclusive lock (EBADF: opened read-only, on NFS) is asked for a
/// shared one; any other failure of the probe is an error, not an answer. (Mutants answered:
/// the probe made to answer "held" or "free", the EBADF guard made a constant or `!=`.)
#[test]
fn without_the_lock_table_status_asks_the_lock_itself() {
    require("strace", "strace");
    let t = TestDir::new();
    // The first open matched is `L`'s; the opens of the table after it fail.
    let lock = t.join("L");
    let status = |flock: &str| {
        let mut cmd = t.cmd("strace").args(["-f", "-qq", "-o", "/dev/null"]);
        cmd = cmd.args(["-P", "/proc/locks", "-P"]).arg(&lock);
        cmd = cmd.args(["-e", "trace=openat,flock"]);
        cmd = cmd.args(["-e", "inject=openat:error=ENOENT:when=2+"]);
        if !flock.is_empty() {
            cmd = cmd.args(["-e", &format!("inject=flock:error={flock}:when=1")]);
        }
        cmd.arg(crate::harness::fsync_bin())
            .args(["mutex", "status", "L"])
            .run()
    };
    t.write("L", "");
    status("").code(0).stdout("L: free\n");
    status("EBADF").code(0).stdout("L: free\n");
    let failed = status("EIO");
    failed.code(74).stdout("").error_naming("L");
    assert!(
        failed.stderr.contains("cannot test lock: I/O error"),
        "{}",
        failed.stderr
    );
    let holder = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c", crate::harness::HOLD])
        .hold();
    let held = status("");
    assert!(
        held.code(1).stdout.starts_with("L: held by pid "),
        "{}",
        held.stdout
    );
    holder.finish().code(0);
}

/// A read of the holder record that a signal interrupts is made again; one that fails leaves
/// the record out, and the holder is the process the kernel names. (Mutants answered: an
/// interrupted read not made again; every failure retried, which spins: `timeout` kills it.)
#[test]
fn a_record_read_interrupted_is_made_again_and_one_failing_is_left_out() {
    require("strace", "strace");
    let t = TestDir::new();
    let holder = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c", crate::harness::HOLD])
        .hold();
    let record = t.join(".L.fsync");
    let status = |inject: &str| {
        t.cmd("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-P"])
            .arg(&record)
            .args(["-e", "trace=pread64", "-e", inject])
            .args(["timeout", "-s", "KILL", "20"])
            .arg(crate::harness::fsync_bin())
            .args(["mutex", "status", "L"])
            .run()
    };
    let again = status("inject=pread64:error=EINTR:when=1");
    let shown = again.code(1).stdout.clone();
    assert!(shown.contains(" (command pid "), "{shown}");
    let failed = status("inject=pread64:error=EIO");
    let shown = failed.code(1).stdout.clone();
    assert!(shown.starts_with("L: held by pid "), "{shown}");
    assert!(!shown.contains(" (command pid "), "{shown}");
    holder.finish().code(0);
}

/// A read of a job's kept output interrupted by a signal (strace answers EINTR to the first)
/// is made again, and `msg log` shows it all; one that fails (EIO) is an error naming the
/// file, not a loop. (Mutants answered: an interrupted read taken for a failure, every
/// failure taken for an interruption.)
#[test]
fn a_kept_output_read_interrupted_is_made_again_and_one_failing_is_an_error() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    t.fsync([
        "msg", "recv", "--output", "keep", "B", "--", "echo", "hello",
    ])
    .run()
    .code(0);
    let file = "B/output/00000000000000000000/00000000000000000001";
    let log =
        |inject: &str| t.fsync_under_strace(file, "pread64", inject, &["msg", "log", "B", "1"]);
    log("inject=pread64:error=EINTR:when=1")
        .code(0)
        .stdout("hello\n");
    let out = log("inject=pread64:error=EIO");
    out.code(74).stderr_has(&format!("{file}: cannot read"));
}

/// A dead letter that cannot be put back in the queue (strace fails the rename out of
/// `B/dead` with EIO) is an error naming it, and stays a dead letter. (Mutant answered: every
/// failure of that rename taken for another process's move.)
#[test]
fn a_dead_letter_that_cannot_be_put_back_is_an_error_and_stays() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    t.fsync(["msg", "recv", "--retries", "0", "B", "--", "false"])
        .run()
        .code(1);
    let retry = ["msg", "retry", "B"];
    let out = t.fsync_under_strace("B/dead", "renameat", "inject=renameat:error=EIO", &retry);
    out.code(74).stderr_has("cannot return message: I/O error");
    assert_eq!(std::fs::read_dir(t.join("B/dead")).unwrap().count(), 1);
}

/// A dead poster's batch whose payload cannot be queued (strace fails its rename into the
/// shard with EIO) makes the receive an error, and the batch stays whole for the next; one
/// another process queued first (ENOENT) is no error. (Mutants answered: every failure of
/// that rename passed over, so that the payload was set aside with the batch's directory,
/// or none.)
#[test]
fn a_dead_posters_batch_that_cannot_be_queued_stays_whole() {
    require("strace", "strace");
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "m0"]).run().code(0);
    t.fsync(["msg", "recv", "B"]).run().code(0).stdout("m0");
    // The poster died after its commit: number 2 handed out, its payload in `batches`.
    let batch = t.join("B/batches/00000000000000000002.h-1-0.-.msg");
    std::fs::create_dir_all(&batch).unwrap();
    std::fs::write(batch.join("0"), "batched").unwrap();
    std::fs::write(t.join("B/seq"), "2\n").unwrap();
    let recv = |inject: &str| {
        let shard = "B/q/00000000000000000000";
        t.fsync_under_strace(shard, "renameat", inject, &["msg", "recv", "-n", "B"])
    };
    recv("inject=renameat:error=EIO")
        .code(74)
        .stderr_has("cannot queue message");
    assert!(batch.join("0").is_file(), "the payload left its batch");
    // Taken for another process's move: no error, nothing queued by this receive.
    recv("inject=renameat:error=ENOENT").code(75);
}

/// `msg cancel` meets the two failures a cancel can: the take of a queued message into
/// `claimed` finding it gone (ENOENT: a receiver took it first, so it looks again, and here
/// takes it then) or failing (EIO: an error naming it); the request to a running job's
/// worker failing (EIO on `B/cancel`: an error, not "requested"). strace plays each.
/// (Mutants answered: a failed take taken for a moved message or the reverse; a failed
/// request taken for one made already.)
#[test]
fn a_cancel_whose_take_or_request_fails_says_so() {
    require("strace", "strace");
    let t = TestDir::new();
    let cancel = |path: &str, inject: &str, id: &str| {
        let calls = "renameat,openat";
        t.fsync_under_strace(path, calls, inject, &["msg", "cancel", "B", id])
    };
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    cancel("B/claimed", "inject=renameat:error=ENOENT:when=1", "1")
        .code(0)
        .stdout_has("1 cancelled");
    t.fsync(["msg", "post", "B", "--data", "y"]).run().code(0);
    cancel("B/claimed", "inject=renameat:error=EIO", "2")
        .code(74)
        .stderr_has("cannot cancel message: I/O error");
    let mut job = t
        .fsync([
            "msg",
            "recv",
            "B",
            "--",
            "sh",
            "-c",
            "echo running; exec sleep 60",
        ])
        .own_process_group()
        .start();
    job.expect("running");
    // strace finds the path it is to fail only if it exists when it starts: the worker makes
    // it as it begins to watch for requests, which can be after its job said "running".
    crate::harness::eventually("the worker watches for requests", || {
        t.join("B/cancel").is_dir()
    });
    cancel("B/cancel", "inject=openat:error=EIO", "2")
        .code(74)
        .stderr_has("cannot request cancel: I/O error");
    let _ = job.kill_process_group();
}
