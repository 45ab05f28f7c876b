/*!
`--range START[:LEN]` on `fsync mutex run` and `fsync swmr read|write`, end to end:
OFD byte-range locks, where disjoint ranges do not conflict and bytes past the end of the file
are locks too.

Every case has a holder that has said `acquired` and a contender with `-n`: 0 (it ran) for a
range that does not conflict, 75 (nothing ran) for one that does. `lslocks` (util-linux) and
`/proc/locks` witness what the kernel holds.
*/

use std::os::unix::fs::MetadataExt;

use serde_json::Value;

use crate::harness::{HOLD, Holder, TestDir, flocks_on, require};

/// `fsync VERB... [--range RANGE] LOCK -- sh -c HOLD`, once it holds the range.
#[track_caller]
fn hold(t: &TestDir, verb: &[&str], range: &str, lock: &str) -> Holder {
    let mut args = verb.to_vec();
    args.extend(["--range", range, lock, "--", "sh", "-c", HOLD]);
    t.fsync(args).hold()
}

const MUTEX: &[&str] = &["mutex", "run"];
const READ: &[&str] = &["swmr", "read"];
const WRITE: &[&str] = &["swmr", "write"];

/// `fsync VERB... -n --range RANGE LOCK -- echo ran`: `want` 0 (it ran) or 75 (it did not).
#[track_caller]
fn try_range(t: &TestDir, verb: &[&str], range: &str, lock: &str, want: i32) {
    let mut args = verb.to_vec();
    args.extend(["-n", "--range", range, lock, "--", "echo", "ran"]);
    let out = t.fsync(args).run();
    out.code(want);
    out.stdout(if want == 0 { "ran\n" } else { "" });
}

#[test]
fn disjoint_ranges_run_together_and_overlapping_ones_exclude() {
    let t = TestDir::new();
    t.write("L", "content");
    let h = hold(&t, MUTEX, "0:10", "L");
    try_range(&t, MUTEX, "10:10", "L", 0); // bytes 10..19: beside 0..9
    try_range(&t, MUTEX, "0x0a:0x0a", "L", 0);
    try_range(&t, MUTEX, "5:1", "L", 75);
    try_range(&t, MUTEX, "9", "L", 75); // LEN 1 when absent: byte 9
    try_range(&t, MUTEX, "0:10", "L", 75);
    try_range(&t, MUTEX, "9:2", "L", 75);
    try_range(&t, MUTEX, "10:0", "L", 0); // from 10 to the end
    try_range(&t, MUTEX, "9:0", "L", 75);
    // Two holders of disjoint ranges, both inside at once.
    let h2 = hold(&t, MUTEX, "10:10", "L");
    try_range(&t, MUTEX, "15", "L", 75);
    h.finish().code(0);
    try_range(&t, MUTEX, "5:1", "L", 0);
    h2.finish().code(0);
    try_range(&t, MUTEX, "0:0", "L", 0);
    assert_eq!(t.read("L"), "content", "a range lock changed the file");
}

#[test]
fn a_waiter_for_an_overlapping_range_runs_once_the_holder_releases() {
    let t = TestDir::new();
    let h = hold(&t, MUTEX, "0:10", "L");
    let mut waiter = t
        .fsync([
            "mutex", "run", "-v", "--range", "5:10", "L", "--", "echo", "ran",
        ])
        .start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    try_range(&t, MUTEX, "20", "L", 0); // a third, disjoint range does not wait
    h.finish().code(0);
    waiter.finish().code(0).stdout("ran\n");
}

#[test]
fn bytes_past_the_end_of_the_file_are_locks_and_the_file_never_changes() {
    let t = TestDir::new();
    t.write("L", "content");
    t.write("E", "");
    // The last byte there is, far past the end, while another range is held.
    let h = hold(&t, MUTEX, "0:10", "L");
    try_range(&t, MUTEX, "0x7fffffffffffffff", "L", 0);
    try_range(&t, MUTEX, "9223372036854775807:1", "L", 0);
    h.finish().code(0);
    // Past the end of an empty file: a real lock, exclusive on exactly those bytes.
    try_range(&t, MUTEX, "1000000:5", "E", 0);
    let far = hold(&t, MUTEX, "1000000:5", "E");
    try_range(&t, MUTEX, "1000004", "E", 75);
    try_range(&t, MUTEX, "999996:4", "E", 0);
    try_range(&t, MUTEX, "1000005:0", "E", 0);
    let last = hold(&t, MUTEX, "0x7fffffffffffffff", "L");
    try_range(&t, MUTEX, "0x7fffffffffffffff", "L", 75);
    try_range(&t, MUTEX, "0x7ffffffffffffffe", "L", 0);
    far.finish().code(0);
    last.finish().code(0);
    // A lock file that did not exist is created, empty.
    try_range(&t, MUTEX, "1000000:5", "N", 0);
    assert_eq!(t.read("L"), "content", "a range lock changed L");
    assert_eq!(std::fs::metadata(t.join("E")).unwrap().len(), 0, "E grew");
    assert_eq!(std::fs::metadata(t.join("N")).unwrap().len(), 0, "N grew");
}

#[test]
fn len_zero_reaches_to_the_end_of_all_offsets() {
    let t = TestDir::new();
    let h = hold(&t, MUTEX, "100:0", "L");
    for later in [
        "100",
        "101:5",
        "1000:1",
        "0x7ffffffffffffff0:0",
        "0x7fffffffffffffff",
        "0:0",
    ] {
        try_range(&t, MUTEX, later, "L", 75);
    }
    try_range(&t, MUTEX, "99", "L", 0);
    try_range(&t, MUTEX, "0:100", "L", 0);
    h.finish().code(0);
    try_range(&t, MUTEX, "0x7fffffffffffffff", "L", 0);
}

#[test]
fn swmr_readers_of_one_range_share_and_writers_exclude_only_their_range() {
    let t = TestDir::new();
    t.write("L", "content");
    let r1 = hold(&t, READ, "0:4", "L");
    let r2 = hold(&t, READ, "0:4", "L"); // inside while r1 is: shared
    try_range(&t, READ, "2", "L", 0);
    try_range(&t, WRITE, "0:4", "L", 75);
    try_range(&t, WRITE, "3:2", "L", 75);
    try_range(&t, MUTEX, "1", "L", 75); // a mutex range is exclusive too
    try_range(&t, WRITE, "4:4", "L", 0);
    r1.finish().code(0);
    try_range(&t, WRITE, "0:4", "L", 75); // r2 still reads
    r2.finish().code(0);
    try_range(&t, WRITE, "0:4", "L", 0);
    // A writer of a range: readers of that range wait, readers of others do not.
    let w = hold(&t, WRITE, "8:8", "L");
    try_range(&t, READ, "15", "L", 75);
    try_range(&t, WRITE, "8", "L", 75);
    try_range(&t, READ, "0:8", "L", 0);
    try_range(&t, WRITE, "16:0", "L", 0);
    w.finish().code(0);
    assert_eq!(t.read("L"), "content", "a range lock changed the file");
}

#[test]
fn invalid_ranges_are_usage_errors() {
    let t = TestDir::new();
    let bad = [
        "-1",
        "1:x",
        "x",
        "",
        ":",
        "1:",
        "0x",
        "1:-1",
        "0x7fffffffffffffff:2",
        "0x8000000000000000",
        "9223372036854775808",
        "9223372036854775800:9",
        "18446744073709551616",
    ];
    for verb in [MUTEX, READ, WRITE] {
        for range in bad {
            let mut args = verb.to_vec();
            let joined = format!("--range={range}");
            args.extend([joined.as_str(), "L", "--", "touch", "ran"]);
            t.fsync(args).run().code(2);
            let mut args = verb.to_vec();
            args.extend(["--range", range, "L", "--", "touch", "ran"]);
            t.fsync(args).run().code(2);
        }
    }
    assert!(!t.join("ran").exists(), "a command ran");
}

/// One lock as `lslocks` lists it.
#[derive(Debug)]
struct Listed {
    kind: String,
    mode: String,
    start: u64,
    end: u64,
}

/// A JSON field that `lslocks` prints as a number or (older versions) as a string.
fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// The locks `lslocks` lists on the file `path`, which it names by device and inode (it cannot
/// name the path of an OFD lock, which has no owning process, in every version).
#[track_caller]
fn lslocks_on(t: &TestDir, path: &std::path::Path) -> Vec<Listed> {
    let meta = std::fs::metadata(path).expect("stat the lock file");
    let (ino, dev) = (
        meta.ino(),
        format!(
            "{}:{}",
            nix::sys::stat::major(meta.dev()),
            nix::sys::stat::minor(meta.dev())
        ),
    );
    let columns = "TYPE,MODE,START,END,INODE,MAJ:MIN";
    let json = t.cmd("lslocks").args(["--json", "-o", columns]).run();
    if json.status.success() {
        if json.stdout.trim().is_empty() {
            return Vec::new(); // no locks at all on the system: lslocks prints nothing
        }
        let v: Value = serde_json::from_str(&json.stdout)
            .unwrap_or_else(|e| panic!("lslocks --json printed no JSON ({e}):\n{}", json.stdout));
        let locks = v["locks"].as_array().cloned().unwrap_or_default();
        return locks
            .iter()
            .filter(|l| number(&l["inode"]) == Some(ino) && l["maj:min"].as_str() == Some(&dev))
            .map(|l| Listed {
                kind: l["type"].as_str().unwrap_or_default().to_string(),
                mode: l["mode"].as_str().unwrap_or_default().to_string(),
                start: number(&l["start"]).expect("a START"),
                end: number(&l["end"]).expect("an END"),
            })
            .collect();
    }
    // An lslocks without --json: its plain, raw output.
    let raw = t
        .cmd("lslocks")
        .args(["--raw", "--noheadings", "-o", columns])
        .run();
    raw.code(0);
    raw.stdout
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [kind, mode, start, end, inode, majmin] = f[..] else {
                return None;
            };
            (inode.parse() == Ok(ino) && majmin == dev).then(|| Listed {
                kind: kind.to_string(),
                mode: mode.to_string(),
                start: start.parse().expect("a START"),
                end: end.parse().expect("an END"),
            })
        })
        .collect()
}

/// TYPE, MODE, START and END of each listed lock.
fn shown(listed: &[Listed]) -> Vec<(&str, &str, u64, u64)> {
    listed
        .iter()
        .map(|l| (l.kind.as_str(), l.mode.as_str(), l.start, l.end))
        .collect()
}

#[test]
fn lslocks_shows_ofd_locks_with_the_right_start_and_end() {
    require("lslocks", "util-linux");
    let t = TestDir::new();
    let lock = t.join("L");
    let h = hold(&t, MUTEX, "100:50", "L");
    let r = hold(&t, READ, "0x10:4", "L");
    // lslocks reads /proc/locks a page at a time, and the kernel gives no snapshot across
    // pages: while other processes take and drop locks, a read may skip or repeat a line. The
    // locks here are steady, so read until a listing is whole.
    let want = [("OFDLCK", "READ", 16, 19), ("OFDLCK", "WRITE", 100, 149)];
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = lslocks_on(&t, &lock);
        listed.sort_by_key(|l| l.start);
        if shown(&listed) == want {
            break;
        }
    }
    assert_eq!(
        shown(&listed),
        want,
        "lslocks lists for {}: {listed:?}",
        lock.display()
    );
    // Byte ranges only: never a whole-file flock on the same file.
    assert_eq!(flocks_on(&lock), [], "a flock on {}", lock.display());
    h.finish().code(0);
    r.finish().code(0);
    let left = (0..100).map(|_| lslocks_on(&t, &lock)).find(Vec::is_empty);
    assert!(
        left.is_some(),
        "locks left after release: {:?}",
        lslocks_on(&t, &lock)
    );
}

/// `fsync mutex status` sees a lock of any kind on any range: a byte range held by `fsync mutex
/// run --range`, and POSIX locks another program took with `fcntl` (Python's `lockf`).
#[test]
fn status_reports_byte_range_locks_as_held() {
    require("python3", "python3");
    let t = TestDir::new();
    for range in ["0:0", "7:1", "0x7ffffffffffffffe:1"] {
        let holder = hold(&t, MUTEX, range, "L");
        let out = t.fsync(["mutex", "status", "--json", "L"]).run();
        out.code(1);
        let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(v["state"], "held", "{range}: {v}");
        holder.finish().code(0);
        t.fsync(["mutex", "status", "L"]).run().code(0);
    }
    let posix = "import fcntl, sys\n\
                 f = open('L', 'a')\n\
                 fcntl.lockf(f, fcntl.LOCK_EX, 10, 100)\n\
                 print('acquired', flush=True)\n\
                 sys.stdin.readline()\n";
    let holder = t.cmd("python3").args(["-c", posix]).hold();
    t.fsync(["mutex", "status", "L"])
        .run()
        .code(1)
        .stdout_has("held");
    holder.finish().code(0);
    t.fsync(["mutex", "status", "L"]).run().code(0);
}

/// A shell that locks a range of `L` through its descriptor 9 (`exec 9>>L`, or `exec 9<L` for
/// a shared lock, which needs read access) with `fsync mutex lock --fd 9 RANGE [--shared]` and
/// says `acquired`; after a line on its stdin it unlocks with `fsync mutex unlock 9 RANGE`, says
/// `unlocked`, and waits for another line before it exits.
#[track_caller]
fn shell_holding(t: &TestDir, range: &str, shared: bool) -> crate::harness::Holder {
    let (open, mode) = match shared {
        true => ("9<L", "--shared"),
        false => ("9>>L", ""),
    };
    t.sh(&format!(
        "touch L; exec {open}; \"$FSYNC\" mutex lock --fd 9 {range} {mode} && echo acquired; \
         read x; \"$FSYNC\" mutex unlock 9 {range} && echo unlocked; read x"
    ))
    .hold()
}

/// Make a [`shell_holding`] shell unlock its range, once it says it has.
#[track_caller]
fn unlock(shell: &mut crate::harness::Holder) {
    shell.send("unlock");
    shell.expect("unlocked");
}

/// Let a [`shell_holding`] shell exit, and check that it did so with status 0.
#[track_caller]
fn exit(mut shell: crate::harness::Holder) {
    shell.send("exit");
    shell.finish().code(0);
}

#[test]
fn a_shell_holds_a_byte_range_through_its_descriptor_after_fsync_exits() {
    let t = TestDir::new();
    let mut shell = shell_holding(&t, "--range 7", false);
    // The lock belongs to the shell's open file: fsync has exited, the range is still held.
    try_range(&t, MUTEX, "7", "L", 75);
    try_range(&t, MUTEX, "0:7", "L", 0);
    try_range(&t, MUTEX, "8", "L", 0);
    unlock(&mut shell);
    try_range(&t, MUTEX, "7", "L", 0);
    exit(shell);
}

#[test]
fn fcntl_on_a_descriptor_is_the_whole_file_range_and_shared_ranges_share() {
    let t = TestDir::new();
    let mut shell = shell_holding(&t, "--fcntl", false);
    try_range(&t, MUTEX, "0x7ffffffffffffff0", "L", 75);
    try_range(&t, READ, "0:0", "L", 75);
    unlock(&mut shell);
    try_range(&t, MUTEX, "0:0", "L", 0);
    exit(shell);

    // Shared ranges through descriptors: two shells share, a writer is refused.
    let mut one = shell_holding(&t, "--range 0:10", true);
    let mut two = shell_holding(&t, "--range 5:10", true);
    try_range(&t, READ, "0:20", "L", 0);
    try_range(&t, WRITE, "9", "L", 75);
    try_range(&t, WRITE, "15", "L", 0);
    for shell in [&mut one, &mut two] {
        unlock(shell);
    }
    try_range(&t, WRITE, "9", "L", 0);
    for shell in [one, two] {
        exit(shell);
    }
}

#[test]
fn a_descriptor_range_waits_times_out_and_excludes_run_range() {
    let t = TestDir::new();
    let h = hold(&t, MUTEX, "0:10", "L");
    t.sh("exec 9>>L; \"$FSYNC\" mutex lock --fd 9 --range 5 -n")
        .run()
        .code(75);
    t.sh("exec 9>>L; \"$FSYNC\" mutex lock --fd 9 --range 5 -E 3 -t 10ms")
        .run()
        .code(3);
    let mut waiter = t
        .sh("exec 9>>L; \"$FSYNC\" mutex lock -v --fd 9 --range 5 && echo acquired")
        .start();
    let said = waiter.stderr_line();
    assert!(
        said.contains("waiting") && said.contains("bytes 5:1 of fd 9"),
        "-v said {said:?}"
    );
    h.finish().code(0);
    waiter.expect("acquired");
    waiter.finish().code(0);
}

#[test]
fn a_descriptor_range_on_the_wrong_kind_of_descriptor_says_why() {
    let t = TestDir::new();
    t.write("L", "");
    // An exclusive range needs the descriptor open for writing; a shared one does not.
    let out = t
        .sh("exec 9<L; \"$FSYNC\" mutex lock --fd 9 --range 5")
        .run();
    out.operational_error("L");
    out.stderr_has("open for writing");
    t.sh("exec 9<L; \"$FSYNC\" mutex lock --fd 9 --range 5 --shared")
        .run()
        .code(0);
    let out = t
        .sh("exec 9>>L; \"$FSYNC\" mutex lock --fd 9 --range 5 --shared")
        .run();
    out.operational_error("L");
    out.stderr_has("open for reading");
    // A directory has no bytes to lock; a pipe is no lock file.
    std::fs::create_dir(t.join("D")).unwrap();
    let out = t.sh("exec 9<D; \"$FSYNC\" mutex lock --fd 9 --fcntl").run();
    out.operational_error("D");
    out.stderr_has("byte range needs a regular file");
    let out = t.sh("echo | \"$FSYNC\" mutex lock --fd 0 --range 1").run();
    out.stderr_has("is a pipe");
    // --range and --fcntl are one choice.
    t.fsync(["mutex", "lock", "--fd", "0", "--range", "1", "--fcntl"])
        .run()
        .code(2);
}

/// How many blocked requests (`->` in `/proc/locks`) for OFD byte-range locks wait on the file
/// `path` names now: a witness of a waiter blocked in the kernel on that very file.
fn ofd_waiters_on(path: &std::path::Path) -> usize {
    let Ok(meta) = std::fs::metadata(path) else {
        return 0;
    };
    let (major, minor) = (
        nix::sys::stat::major(meta.dev()),
        nix::sys::stat::minor(meta.dev()),
    );
    let table = std::fs::read_to_string("/proc/locks").expect("cannot read /proc/locks");
    table
        .lines()
        .filter(|line| {
            // "2: -> OFDLCK ADVISORY  WRITE -1 fe:00:5678 0 9"
            let fields: Vec<&str> = line.split_whitespace().skip(1).collect();
            if fields.len() < 6 || fields[0] != "->" || fields[1] != "OFDLCK" {
                return false;
            }
            let id: Vec<&str> = fields[5].split(':').collect();
            id.len() == 3
                && u64::from_str_radix(id[0], 16) == Ok(major)
                && u64::from_str_radix(id[1], 16) == Ok(minor)
                && id[2].parse::<u64>() == Ok(meta.ino())
        })
        .count()
}

/// A waiter that opened the lock file before its holder deleted it and made a new one must not
/// lock the old file once the holder lets go: a third process holds the same range of the new
/// file by then, and two holders of one range would be inside at once. Each holder writes
/// `enter` and `leave` lines to a log; they must not interleave.
#[test]
fn a_waiter_locks_the_file_the_name_names_after_a_delete_and_recreate() {
    let t = TestDir::new();
    let run = |who: &str, script: &str| {
        t.fsync([
            "mutex", "run", "-v", "--range", "0:10", "F", "--", "sh", "-c",
        ])
        .arg(script.replace("WHO", who))
    };
    // A holds bytes 0:10 of F; its command replaces F by a new file while A holds the old one.
    let mut a = run(
        "A",
        "echo acquired; read x; rm F; : > F; echo swapped; read x",
    )
    .hold();
    // B opens F (the old file) and waits for A.
    let mut b = run("B", "echo enter WHO >> log; echo leave WHO >> log").start();
    let said = b.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    a.send("swap");
    a.expect("swapped");
    // C locks the same range of the new F at once, and stays inside.
    let c = run(
        "C",
        "echo enter WHO >> log; echo acquired; read x; echo leave WHO >> log",
    )
    .hold();
    a.send("exit");
    a.finish().code(0);
    // The old file is free now: B either ran beside C, or it waits in the kernel on the new F.
    let b_pid = b.pid();
    crate::harness::eventually("B runs, or waits for C's range of the new F", || {
        crate::harness::dead(b_pid) || ofd_waiters_on(&t.join("F")) > 0
    });
    c.finish().code(0);
    b.finish().code(0);
    assert_eq!(
        t.read("log"),
        "enter C\nleave C\nenter B\nleave B\n",
        "two holders of bytes 0:10 of F were inside at once"
    );
}

// ---- status --range -----------------------------------------------------------------------

/// `fsync mutex status [--json] --range RANGE L`: its exit status, checked, and its stdout.
#[track_caller]
fn range_status(t: &TestDir, range: &str, json: bool, want: i32) -> String {
    let mut args = vec!["mutex", "status", "--range", range, "L"];
    if json {
        args.insert(2, "--json");
    }
    let out = t.fsync(args).run();
    out.code(want);
    assert_eq!(out.stderr, "", "status said on stderr: {}", out.stderr);
    out.stdout.clone()
}

/// Held (1) where any byte of the range is locked, free (0) beside it; the lock found (its
/// bytes and mode) and its holder named, text and JSON; a missing file is free and stays
/// missing.
#[test]
fn status_of_a_range_says_held_or_free_and_names_the_lock_and_its_holder() {
    let t = TestDir::new();
    assert_eq!(range_status(&t, "7", false, 0), "L: bytes 7:1 free\n");
    assert!(!t.join("L").exists(), "status created the lock file");
    let h = hold(&t, MUTEX, "5:10", "L");
    let text = range_status(&t, "7", false, 1);
    let want = format!("L: bytes 7:1 held by pid {} on ", h.pid());
    assert!(text.starts_with(&want), "{text:?} is not {want:?}...");
    assert!(
        text.ends_with("(an exclusive lock on bytes 5:10)\n") && text.contains(HOLD),
        "{text:?}"
    );
    assert_eq!(range_status(&t, "15:0", false, 0), "L: bytes 15:0 free\n");
    assert_eq!(range_status(&t, "0:5", false, 0), "L: bytes 0:5 free\n");
    range_status(&t, "0:6", false, 1);
    range_status(&t, "14", false, 1);
    range_status(&t, "0:0", false, 1);

    let v: Value = serde_json::from_str(&range_status(&t, "0x0e:2", true, 1)).unwrap();
    assert_eq!(v["state"], "held");
    assert_eq!(v["holder"]["pid"], h.pid(), "{v}");
    assert_eq!(v["range"], serde_json::json!({"start": 14, "len": 2}));
    assert_eq!(v["lock"]["mode"], "exclusive");
    h.finish().code(0);
    assert_eq!(range_status(&t, "0:0", false, 0), "L: bytes 0:0 free\n");
    let v: Value = serde_json::from_str(&range_status(&t, "7", true, 0)).unwrap();
    assert_eq!(
        (&v["state"], &v["lock"]),
        (&"free".into(), &Value::Null),
        "{v}"
    );
}

/// Of two holders of disjoint ranges of one file, each range names its own.
#[test]
fn status_of_a_range_names_the_holder_of_those_bytes() {
    let t = TestDir::new();
    let low = hold(&t, MUTEX, "0:5", "L");
    let high = hold(&t, MUTEX, "10:10", "L");
    for (range, h) in [("2", &low), ("12", &high)] {
        let text = range_status(&t, range, false, 1);
        let want = format!("L: bytes {range}:1 held by pid {} ", h.pid());
        assert!(text.starts_with(&want), "{text:?} is not {want:?}...");
    }
    range_status(&t, "7", false, 0);
    low.finish().code(0);
    high.finish().code(0);
}

/// A shared range (swmr readers) is held too, and said to be shared; a whole-file flock is
/// no byte-range lock.
#[test]
fn status_of_a_range_held_shared_or_by_flock_alone() {
    let t = TestDir::new();
    let reader = hold(&t, READ, "100:0", "L");
    let text = range_status(&t, "0x7fffffffffffffff", false, 1);
    assert!(
        text.starts_with(&format!(
            "L: bytes 9223372036854775807:1 held by pid {} ",
            reader.pid()
        )) && text.ends_with("(a shared lock on bytes 100:0)\n"),
        "{text:?}"
    );
    reader.finish().code(0);
    let whole = t.hold("L");
    range_status(&t, "0:0", false, 0);
    whole.finish().code(0);
}

/// A lock of another program, POSIX `lockf` (Python's `fcntl.lockf`): held, its process named
/// (the kernel gives its pid).
#[test]
fn status_of_a_range_names_a_posix_lock_holder() {
    require("python3", "python3");
    let t = TestDir::new();
    t.write("L", "");
    let script = "import fcntl, os, sys; f = open('L', 'r+'); \
                  fcntl.lockf(f, fcntl.LOCK_EX, 4, 40); print('acquired', flush=True); \
                  sys.stdin.read()";
    let h = t.cmd("python3").args(["-c", script]).hold();
    let text = range_status(&t, "43", false, 1);
    assert!(
        text.starts_with(&format!("L: bytes 43:1 held by pid {} ", h.pid()))
            && text.ends_with("(an exclusive lock on bytes 40:4)\n"),
        "{text:?}"
    );
    range_status(&t, "44", false, 0);
    h.finish().code(0);
}

/// A directory, and a missing parent: one `fsync: ` line naming the path (exit 66).
#[test]
fn status_of_a_range_of_a_directory_or_under_a_missing_one_fails() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("d")).unwrap();
    let out = t.fsync(["mutex", "status", "--range", "1", "d"]).run();
    out.code(66).error_naming("d");
    assert!(out.stderr.contains("is a directory"), "{}", out.stderr);
    let out = t.fsync(["mutex", "status", "--range", "1", "no/L"]).run();
    out.code(66).error_naming("no/L");
}
