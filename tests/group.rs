/*!
`fsync group`, end to end: membership and `FSYNC_GROUP_FIRST`, `empty`, `members`,
`wait-empty`, `watch`, `--delete`, members killed by SIGKILL (alone and at random among
others), and bad input; the last member's clean-up (`--last`), and a group directory
an administrator prepared read-only.

Every member runs in a process group of its own, so a SIGKILL reaches both the `fsync` and the
command it runs (which inherits the member's locks): a crash test kills both, as a crash of
the whole job would. The tests synchronise on what processes print and on processes being
reaped, never on sleeps.
*/

use std::{collections::BTreeSet, os::unix::fs::PermissionsExt, time::Duration};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{
    Cmd, Daemon, Holder, Rng, TestDir, dead, eventually, fsync_bin, json_of, require, require_root,
};

/// A member's command: says `acquired`, then its own pid and `FSYNC_GROUP_FIRST`, and stays
/// a member until its stdin is closed.
const MEMBER: &str = "echo acquired; echo \"$$ $FSYNC_GROUP_FIRST\"; read x || true";

/// A member that is in the group.
struct Member {
    holder: Holder,
    /// The pid of the command (`sh`) that `fsync group join` runs.
    child: u32,
    /// What the command saw in `FSYNC_GROUP_FIRST`.
    first: String,
}

impl Member {
    /// The pid of the `fsync group join` process.
    fn pid(&self) -> u32 {
        self.holder.pid()
    }
}

/// `fsync group join [OPTIONS] GROUP -- sh -c MEMBER`, in a process group of its own.
fn join_cmd(t: &TestDir, group: &str, options: &[&str]) -> Cmd {
    t.fsync(["group", "join"])
        .args(options)
        .args([group, "--", "sh", "-c", MEMBER])
        .own_process_group()
}

/// Wait until a started member says it is in, and read what its command saw.
#[track_caller]
fn admitted(mut holder: Holder) -> Member {
    holder.expect("acquired");
    let line = holder.line();
    let (child, first) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("unexpected line from a member: {line:?}"));
    Member {
        child: child.parse().expect("the command's pid"),
        first: first.to_string(),
        holder,
    }
}

/// A member of `group`, once it is in.
#[track_caller]
fn join(t: &TestDir, group: &str, options: &[&str]) -> Member {
    admitted(join_cmd(t, group, options).start())
}

/// `members --json GROUP`, once every member it lists shows its command's pid.
///
/// `fsync group join` registers before it starts the command and records the command's pid
/// (`child_pid`, with the command line) only once the command has started, so a listing taken
/// just as a member's command starts can show `"child_pid": null` and fsync's own command line
/// for that member. That window is waited out here (observing, not sleeping); everything else
/// is checked on the first listing that has no such member.
#[track_caller]
fn members_json(t: &TestDir, group: &str) -> Value {
    let mut v = Value::Null;
    eventually("members lists the pid of every member's command", || {
        let out = t.fsync(["group", "members", "--json", group]).run();
        v = json_of(&out.code(0).stdout);
        v["members"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| !m["child_pid"].is_null()))
    });
    assert_eq!(
        v["count"].as_u64(),
        v["members"].as_array().map(|m| m.len() as u64),
        "count and the list disagree: {v}"
    );
    v
}

/// The (fsync pid, command pid) of every member `members --json` lists, sorted.
#[track_caller]
fn listed(v: &Value) -> Vec<(u32, u32)> {
    let pid = |m: &Value, key: &str| {
        m[key]
            .as_u64()
            .unwrap_or_else(|| panic!("member without a numeric {key:?}: {v}")) as u32
    };
    let mut out: Vec<(u32, u32)> = v["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no member list: {v}"))
        .iter()
        .map(|m| (pid(m, "pid"), pid(m, "child_pid")))
        .collect();
    out.sort_unstable();
    out
}

/// The (fsync pid, command pid) of these members, sorted.
fn pids_of<'a>(members: impl IntoIterator<Item = &'a Member>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = members.into_iter().map(|m| (m.pid(), m.child)).collect();
    out.sort_unstable();
    out
}

/// The registration files in `GROUP/members` (names not starting with a dot).
fn registrations(t: &TestDir, group: &str) -> BTreeSet<String> {
    std::fs::read_dir(t.join(group).join("members"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

#[track_caller]
fn empty(t: &TestDir, group: &str, want: i32) {
    t.fsync(["group", "empty", group]).run().code(want);
}

#[test]
fn group_join_empty_members_first_and_last() {
    let t = TestDir::new();
    empty(&t, "G", 0); // a group that does not exist yet is empty

    let a = join(&t, "G", &["-v"]);
    assert_eq!(
        a.first, "1",
        "the first member saw FSYNC_GROUP_FIRST={}",
        a.first
    );
    empty(&t, "G", 1);
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(
        listed(&v),
        pids_of([&a]),
        "pid is fsync's, child_pid the command's: {v}"
    );
    let m = &v["members"][0];
    let command = m["command"].as_str().unwrap_or_default();
    assert!(
        command.starts_with("sh") && command.contains(MEMBER),
        "members shows the wrong command: {v}"
    );
    let host = nix::unistd::gethostname().expect("hostname");
    assert_eq!(m["host"], host.to_string_lossy().as_ref(), "{v}");
    assert!(
        m["since"].as_str().is_some_and(|s| !s.is_empty()),
        "no `since`: {v}"
    );

    let b = join(&t, "G", &["-v"]);
    assert_eq!(
        b.first, "0",
        "a second concurrent member saw FSYNC_GROUP_FIRST={}",
        b.first
    );
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of([&a, &b]), "{v}");

    // The first to leave is not the last: it says it was first, not last.
    let out = a.holder.finish();
    out.code(0).stderr_has("first member");
    assert!(
        !out.stderr.contains("last member"),
        "a member that left while another was in said it was the last:\n{}",
        out.stderr
    );
    empty(&t, "G", 1);
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of([&b]), "{v}");

    let out = b.holder.finish();
    out.code(0).stderr_has("last member");
    assert!(
        !out.stderr.contains("first member"),
        "the second member said it was first:\n{}",
        out.stderr
    );
    empty(&t, "G", 0);
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 0, "{v}");

    // Whoever joins an empty group again is first.
    assert_eq!(join(&t, "G", &[]).first, "1");
}

#[test]
fn group_sigkilled_member_has_left_at_once() {
    let t = TestDir::new();
    let mut m = join(&t, "G", &[]);
    let before = registrations(&t, "G");
    assert_eq!(before.len(), 1, "one member, registrations {before:?}");

    let killed = m.holder.kill_process_group();
    assert!(
        killed.contains(&m.child),
        "the member's command {} was not in its process group {killed:?}",
        m.child
    );
    // Both are dead: the group is empty now, with no cleanup by anyone. Observers only read:
    // the dead member's registration stays for the next joiner.
    empty(&t, "G", 0);
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 0, "a dead member is listed: {v}");
    assert_eq!(
        registrations(&t, "G"),
        before,
        "`empty` or `members` removed the dead member's registration"
    );
    // The next member is the first again, and removes it.
    let next = join(&t, "G", &[]);
    assert_eq!(next.first, "1", "the dead member still counted as in");
    let after = registrations(&t, "G");
    assert!(
        before.is_disjoint(&after),
        "the dead member's registration {before:?} is still there after a join: {after:?}"
    );
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of([&next]), "{v}");
}

/// Regression: the membership was not passed down to the command, so killing `fsync group join`
/// alone (not its command) emptied the group while the member's command, a server say, still
/// ran: what `fsync group empty` exists to tell an admin script. Like the mutex's lock, the
/// membership lives as long as the command.
#[test]
fn group_sigkill_of_fsync_alone_leaves_the_membership_with_its_command() {
    let t = TestDir::new();
    let mut m = join(&t, "G", &[]);
    m.holder.signal(Signal::SIGKILL);
    m.holder.wait_exit();
    // fsync is gone; its command still runs and is still the member.
    empty(&t, "G", 1);
    t.fsync(["group", "wait-empty", "-n", "G"]).run().code(75);
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of([&m]), "{v}");
    // A newcomer is not the first, and its leaving is not the last.
    let b = join(&t, "G", &["-v"]);
    assert_eq!(
        b.first, "0",
        "the command of a killed fsync did not count as in"
    );
    let out = b.holder.finish();
    out.code(0);
    assert!(
        !out.stderr.contains("last member"),
        "a member left as the last while the killed fsync's command was in:\n{}",
        out.stderr
    );
    empty(&t, "G", 1);
    // The command's end is the member's: the group is empty, and the next joiner, the first,
    // removes its registration.
    let dead_one = registrations(&t, "G");
    m.holder.finish().killed_by(Signal::SIGKILL);
    eventually("the member's command died", || dead(m.child));
    empty(&t, "G", 0);
    assert_eq!(members_json(&t, "G")["count"], 0);
    assert_eq!(join(&t, "G", &[]).first, "1");
    assert!(
        registrations(&t, "G").is_disjoint(&dead_one),
        "{:?}",
        registrations(&t, "G")
    );
}

/// `--close` keeps the membership from the command (flock -o): killing fsync ends it.
#[test]
fn group_close_does_not_pass_the_membership_down() {
    let t = TestDir::new();
    let mut m = join(&t, "G", &["--close"]);
    empty(&t, "G", 1);
    m.holder.signal(Signal::SIGKILL);
    m.holder.wait_exit();
    // The command still runs, but not as a member.
    empty(&t, "G", 0);
    assert!(!dead(m.child), "the command died with fsync");
    assert_eq!(members_json(&t, "G")["count"], 0);
    m.holder.finish().killed_by(Signal::SIGKILL);
}

/// A process the command left running, with the membership inherited (a daemon), is a member
/// after `fsync group join` has left: the group is not empty, nobody was the last to leave
/// (so `--delete` deletes nothing), and `members` names the live process. It leaves when it
/// exits.
#[test]
fn group_a_process_the_command_left_running_stays_a_member() {
    let t = TestDir::new();
    let daemon_script = "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!";
    let out = t
        .fsync(["group", "join", "-v", "--delete", "G", "--", "sh", "-c"])
        .arg(daemon_script)
        .run();
    out.code(0);
    let daemon = Daemon(out.stdout.trim().parse().expect("the daemon's pid"));
    assert!(
        !out.stderr.contains("last member") && out.stderr.contains("still a member"),
        "fsync left as if nobody held its membership:\n{}",
        out.stderr
    );
    assert!(
        t.join("G/gate").exists(),
        "--delete removed a group with a member in"
    );
    empty(&t, "G", 1);
    t.fsync(["group", "wait-empty", "-n", "G"]).run().code(75);
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["members"][0]["child_pid"], daemon.0, "{v}");
    assert_eq!(v["members"][0]["command"], "sleep 1000", "{v}");
    // A newcomer is not the first.
    let b = join(&t, "G", &[]);
    assert_eq!(b.first, "0", "the daemon did not count as in");
    b.holder.finish().code(0);
    let pid = daemon.0;
    drop(daemon);
    eventually("the daemon died", || dead(pid));
    empty(&t, "G", 0);
    assert_eq!(members_json(&t, "G")["count"], 0);
    // The next member removes the daemon's registration; leaving, the group's files.
    let c = join(&t, "G", &["--delete"]);
    assert_eq!(c.first, "1");
    assert_eq!(registrations(&t, "G").len(), 1);
    c.holder.finish().code(0);
    assert!(
        !t.join("G").exists(),
        "the last member did not delete the group"
    );
}

#[test]
fn group_counts_stay_exact_while_members_are_killed_at_random() {
    const N: usize = 12;
    const KILLED: usize = 5;
    let t = TestDir::new();
    let mut rng = Rng::from_env();
    let seed = rng.seed();

    let started: Vec<Holder> = (0..N).map(|_| join_cmd(&t, "G", &[]).start()).collect();
    let mut members: Vec<Member> = started.into_iter().map(admitted).collect();
    let firsts = members.iter().filter(|m| m.first == "1").count();
    assert_eq!(
        firsts, 1,
        "{firsts} of {N} concurrent joiners saw FSYNC_GROUP_FIRST=1"
    );
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of(&members), "{v}");

    let victims = rng.subset(N, KILLED);
    for &i in &victims {
        members[i].holder.kill_process_group();
    }
    let survivors: Vec<Member> = members
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !victims.contains(i))
        .map(|(_, m)| m)
        .collect();

    let v = members_json(&t, "G");
    assert_eq!(
        v["count"],
        N - KILLED,
        "killed {victims:?} (FSYNC_TEST_SEED={seed}): {v}"
    );
    assert_eq!(
        listed(&v),
        pids_of(&survivors),
        "killed {victims:?} (FSYNC_TEST_SEED={seed}): members must list exactly the survivors"
    );
    assert_eq!(
        registrations(&t, "G").len(),
        N,
        "`members` removed dead members' registrations (FSYNC_TEST_SEED={seed})"
    );
    empty(&t, "G", 1);

    for m in survivors {
        m.holder.finish().code(0);
    }
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 0, "{v}");
    empty(&t, "G", 0);
    assert!(
        registrations(&t, "G").is_empty(),
        "the last leaver left dead members' registrations (FSYNC_TEST_SEED={seed})"
    );
}

#[test]
fn group_wait_empty_returns_when_the_last_member_leaves() {
    let t = TestDir::new();
    // A group that does not exist is empty: no wait.
    let out = t.fsync(["group", "wait-empty", "missing"]).run();
    out.code(0);
    assert!(
        out.elapsed < Duration::from_secs(10),
        "wait-empty on a missing group took {:?}",
        out.elapsed
    );

    let a = join(&t, "G", &[]);
    let b = join(&t, "G", &[]);
    t.fsync(["group", "wait-empty", "-t", "300ms", "G"])
        .run()
        .code(75);

    let mut waiter = t.fsync(["group", "wait-empty", "-v", "G"]).start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "wait-empty -v said {said:?}");
    a.holder.finish().code(0);
    empty(&t, "G", 1);
    assert!(
        waiter.running(),
        "wait-empty returned while a member was still in"
    );
    b.holder.finish().code(0);
    waiter.finish().code(0);
    empty(&t, "G", 0);
}

#[test]
fn group_watch_reports_each_change() {
    let t = TestDir::new();
    // With --timeout and no change: one line for the current state, then exit 0.
    let out = t.fsync(["group", "watch", "-t", "300ms", "G0"]).run();
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.len() == 1 && lines[0].ends_with(" empty"),
        "watch printed {:?}",
        out.stdout
    );

    let mut watch = t
        .fsync(["group", "watch", "--json", "-t", "50s", "G"])
        .start();
    let mut next_event = |want: &str| {
        let line = watch.line();
        let v = json_of(&line);
        assert_eq!(v["event"], want, "{line}");
        assert_eq!(v["path"], "G", "{line}");
        assert!(v["time"].as_str().is_some_and(|s| !s.is_empty()), "{line}");
    };
    next_event("empty");
    let m = join(&t, "G", &[]);
    next_event("not-empty");
    m.holder.finish().code(0);
    next_event("empty");
    // Interrupted: dies of SIGINT (128+2 to the shell), and nothing more than the changes.
    watch.signal(Signal::SIGINT);
    let out = watch.finish();
    out.killed_by(Signal::SIGINT);
    assert_eq!(out.stdout, "", "watch printed more than the changes");
    assert_eq!(out.stderr, "", "watch complained");
}

/// An observer creates nothing: `group watch` on a group that does not exist reports it empty,
/// leaves it missing, and sees it appear when a member joins. A missing parent is an error.
#[test]
fn watch_creates_nothing_and_sees_the_group_appear() {
    let t = TestDir::new();
    let out = t.fsync(["group", "watch", "-t", "100ms", "G"]).run();
    out.code(0);
    assert!(out.stdout.ends_with(" empty\n"), "{}", out.stdout);
    assert!(!t.join("G").exists(), "group watch created the group");

    let mut watch = t.fsync(["group", "watch", "G"]).start();
    assert!(watch.line().ends_with(" empty"));
    let m = join(&t, "G", &[]);
    assert!(watch.line().ends_with(" not-empty"));
    m.holder.finish().code(0);
    assert!(watch.line().ends_with(" empty"));
    watch.signal(Signal::SIGTERM);
    watch
        .finish()
        .killed_by(Signal::SIGTERM)
        .stdout("")
        .stderr("");

    t.fsync(["group", "watch", "-t", "100ms", "no/dir/G"])
        .run()
        .operational_error("no/dir/G")
        .stderr_has("parent directory");
}

#[test]
fn group_delete_removes_the_group_and_survives_racing_joiners() {
    let t = TestDir::new();
    let m = join(&t, "G", &["--delete"]);
    assert!(t.join("G").is_dir());
    m.holder.finish().code(0).stderr("");
    assert!(
        !t.join("G").exists(),
        "the last member left with --delete, the group is still there"
    );

    // A member that is not the last leaves the group in place.
    let a = join(&t, "G", &["--delete"]);
    let b = join(&t, "G", &["--delete"]);
    a.holder.finish().code(0);
    assert!(
        t.join("G").is_dir(),
        "--delete removed a group with a member in"
    );
    let v = members_json(&t, "G");
    assert_eq!(listed(&v), pids_of([&b]), "{v}");
    b.holder.finish().code(0);
    assert!(!t.join("G").exists());

    // 4 processes x 20 joins, each leaving with --delete while others join.
    let script = "i=0; while [ $i -lt 20 ]; do i=$((i+1)); \
                  \"$FSYNC\" group join --delete G -- true \
                  || { echo \"join $i exited $?\" >&2; exit 1; }; done";
    let racers: Vec<Holder> = (0..4).map(|_| t.sh(script).start()).collect();
    for r in racers {
        r.finish().code(0).stdout("").stderr("");
    }
    assert!(
        !t.join("G").exists(),
        "the last leaver with --delete left the group behind"
    );
}

#[test]
fn group_bad_input() {
    let t = TestDir::new();
    // A missing parent directory: EX_NOINPUT, one line naming the path; the command never runs.
    t.fsync(["group", "join", "no/such/G", "--", "sh", "-c", "echo ran"])
        .run()
        .code(66)
        .stdout("")
        .error_naming("no/such/G");
    for verb in ["empty", "members", "wait-empty"] {
        t.fsync(["group", verb, "no/such/G"])
            .run()
            .code(66)
            .error_naming("no/such/G");
    }
    assert!(!t.join("no").exists());

    // GROUP is a regular file: an operational error, and the file is left alone.
    t.write("file", "data\n");
    t.fsync(["group", "join", "file", "--", "sh", "-c", "echo ran"])
        .run()
        .stdout("")
        .operational_error("file");
    for verb in ["empty", "members", "wait-empty"] {
        t.fsync(["group", verb, "file"])
            .run()
            .operational_error("file");
    }
    t.fsync(["group", "watch", "-t", "1s", "file"])
        .run()
        .operational_error("file");
    assert_eq!(t.read("file"), "data\n");
}

// ---------------------------------------------------------------------------------------------
// --last: the last member's clean-up.

/// The clean-up of `--last` in the tests below: says it started, then waits for a line on the
/// stdin it shares with the member's command, then says it is done.
const CLEANUP: &str = "echo cleaning; read x || true; echo cleaned";

/// The last member runs CMDSTRING before anyone can join again: a joiner waits for it (and is
/// then first), and until it is over the group is not empty to observers, who see the clean-up
/// as the member's command.
#[test]
fn group_last_runs_before_anyone_can_join_again() {
    let t = TestDir::new();
    let mut a = admitted(join_cmd(&t, "G", &["-v", "--last", CLEANUP]).start());
    assert_eq!(a.first, "1");
    a.holder.send(""); // the member's command ends
    a.holder.expect("cleaning");
    let said = a.holder.stderr_line();
    assert!(said.contains("first member"), "{said}");
    let said = a.holder.stderr_line();
    assert!(
        said.contains("as its last member; running the --last command"),
        "-v said {said:?}"
    );

    // A joiner waits for the clean-up.
    let mut b = join_cmd(&t, "G", &["-v"]).start();
    let said = b.stderr_line();
    assert!(
        said.starts_with("fsync: waiting for G to let us join"),
        "the joiner said {said:?}"
    );
    // Observers count the leaver in while it cleans up.
    empty(&t, "G", 1);
    t.fsync(["group", "wait-empty", "-n", "G"]).run().code(75);
    let mut waiter = t.fsync(["group", "wait-empty", "-v", "G"]).start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "wait-empty -v said {said:?}");
    let v = members_json(&t, "G");
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["members"][0]["pid"], a.pid(), "{v}");
    assert_eq!(
        v["members"][0]["command"],
        format!("sh -c {CLEANUP}"),
        "members does not show the clean-up: {v}"
    );
    assert!(b.running(), "the joiner got in during the clean-up");
    assert!(waiter.running(), "wait-empty returned during the clean-up");

    let out = a.holder.finish(); // the clean-up reads EOF and ends
    out.code(0).stdout("cleaned\n");
    assert!(
        out.stderr.ends_with("fsync: left G as its last member\n"),
        "{}",
        out.stderr
    );
    let b = admitted(b);
    assert_eq!(b.first, "1", "the joiner after the clean-up was not first");
    b.holder.finish().code(0);
    waiter.finish().code(0);
    empty(&t, "G", 0);
}

/// Only the last member runs it, with the environment its command had; a member that leaves
/// while others are in runs nothing.
#[test]
fn group_last_is_run_by_the_last_member_only() {
    let t = TestDir::new();
    let cleanup = "echo \"cleaned by $$, first=$FSYNC_GROUP_FIRST\"";
    let a = join(&t, "G", &["--last", cleanup]);
    let b = join(&t, "G", &["--last", cleanup]);
    assert_eq!((a.first.as_str(), b.first.as_str()), ("1", "0"));
    a.holder.finish().code(0).stdout("").stderr("");
    let out = b.holder.finish();
    out.code(0).stderr("");
    assert!(
        out.stdout.starts_with("cleaned by ") && out.stdout.ends_with(", first=0\n"),
        "{}",
        out.stdout
    );
    empty(&t, "G", 0);
}

/// fsync exits with its command's status; a failed clean-up only warns, naming the group.
#[test]
fn group_last_failure_warns_and_the_command_decides_the_exit_status() {
    let t = TestDir::new();
    let join = |last: &str, command: &str| {
        t.fsync([
            "group", "join", "--last", last, "G", "--", "sh", "-c", command,
        ])
        .run()
    };
    join("exit 4", "true")
        .code(0)
        .stdout("")
        .stderr("fsync: G: --last command exited 4\n");
    join("exit 4", "exit 3")
        .code(3)
        .stderr("fsync: G: --last command exited 4\n");
    join("echo cleaned", "exit 3")
        .code(3)
        .stdout("cleaned\n")
        .stderr("");
    join("kill -TERM $$", "true")
        .code(0)
        .stderr("fsync: G: --last command died of SIGTERM\n");
    // A command that cannot be run still ends a membership: the last member cleans up.
    t.fsync(["group", "join", "--last", "echo cleaned", "G", "--"])
        .arg("no-such-command-4711")
        .run()
        .code(127)
        .stdout("cleaned\n")
        .stderr_has("no-such-command-4711");
    empty(&t, "G", 0);
}

/// A process the command left running with the membership keeps it: fsync is not the last,
/// so it runs no clean-up (nor does anyone when that process exits).
#[test]
fn group_last_is_not_run_while_a_process_the_command_left_running_is_a_member() {
    let t = TestDir::new();
    let out = t
        .fsync(["group", "join", "-v", "--last", "echo cleaned", "G", "--"])
        .args([
            "sh",
            "-c",
            "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
        ])
        .run();
    out.code(0);
    let daemon = Daemon(out.stdout.trim().parse().expect("only the daemon's pid"));
    assert!(out.stderr.contains("still a member"), "{}", out.stderr);
    empty(&t, "G", 1);
    let pid = daemon.0;
    drop(daemon);
    eventually("the daemon died", || dead(pid));
    empty(&t, "G", 0);
}

/// The clean-up inherits what keeps joiners out: fsync killed while it runs, joiners still
/// wait until it has exited.
#[test]
fn group_last_keeps_joiners_out_after_fsync_is_killed() {
    joiner_waits_for_the_clean_up_of_a_killed_leaver(CLEANUP);
}

/// A killed leaver's clean-up ends with its holds released one after the other, in an order
/// the kernel chooses (a recent Linux drops the last-opened first): the join lock may go
/// before the registration and the gate. A joiner let in then waits for the rest, and is
/// first. Here the clean-up closes its descriptor of the join lock itself, then waits: the
/// joiner must wait for it, not join as a second member. (Before the fix, the joiner came in
/// at once with FSYNC_GROUP_FIRST=0 and never said it was waiting; in CI this showed as one
/// failure of the test above in some hundred runs.)
#[test]
fn group_joiner_waits_for_a_killed_leavers_clean_up_whatever_order_its_locks_go_in() {
    // bash, for multi-digit descriptors in `exec N>&-`.
    joiner_waits_for_the_clean_up_of_a_killed_leaver(
        "exec bash -c 'for f in /proc/$$/fd/*; do \
         case $(readlink $f) in */join.lock) eval \"exec ${f##*/}>&-\";; esac; \
         done; echo cleaning; read x || true; echo cleaned'",
    );
}

/// fsync runs `cleanup` (which says "cleaning", then reads a line and says "cleaned") as the
/// last member and is killed while it runs; a joiner waits, the group is not empty, and once
/// the clean-up has read EOF and exited the joiner gets in, first.
fn joiner_waits_for_the_clean_up_of_a_killed_leaver(cleanup: &str) {
    let t = TestDir::new();
    let mut a = t
        .fsync(["group", "join", "--last", cleanup, "G", "--", "true"])
        .start();
    a.expect("cleaning");
    a.signal(Signal::SIGKILL);
    a.wait_exit();
    let mut b = join_cmd(&t, "G", &["-v"]).start();
    let said = b.stderr_line();
    assert!(said.starts_with("fsync: waiting for G"), "{said}");
    empty(&t, "G", 1);
    a.finish().killed_by(Signal::SIGKILL).stdout("cleaned\n");
    let b = admitted(b);
    assert_eq!(b.first, "1");
    b.holder.finish().code(0);
}

/// Members joining and leaving at random, each with a clean-up: no member's command runs while
/// a clean-up does, a clean-up starts only once every member's command has ended, and the
/// group's periods (from its first member to its clean-up) do not overlap: each has exactly one
/// first member and ends with one clean-up. Every process appends to one log. (The commands of
/// one period log in any order: a later joiner's may log before the first member's.)
#[test]
fn group_last_never_overlaps_a_member() {
    let t = TestDir::new();
    // The clean-up does some work between its two lines, so that a joiner let in too early
    // would show between them.
    let cleanup = "echo start >> log; i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; \
                   echo end >> log";
    let script = format!(
        "i=0; while [ $i -lt 15 ]; do i=$((i+1)); \
         \"$FSYNC\" group join --last '{cleanup}' G -- sh -c 'echo \"in $FSYNC_GROUP_FIRST\" >> log; \
         echo out >> log' || {{ echo \"join $i exited $?\" >&2; exit 1; }}; done"
    );
    let racers: Vec<Holder> = (0..4).map(|_| t.sh(&script).start()).collect();
    for r in racers {
        r.finish().code(0).stdout("").stderr("");
    }
    let log = t.read("log");
    let periods: Vec<&str> = log.split_inclusive("end\n").collect();
    let (ins, _) = log
        .lines()
        .partition::<Vec<&str>, _>(|l| l.starts_with("in "));
    assert_eq!(ins.len(), 60, "not every join ran its command:\n{log}");
    for (n, period) in periods.iter().enumerate() {
        let lines: Vec<&str> = period.lines().collect();
        let at = || format!("period {} of the log:\n{period}\nwhole log:\n{log}", n + 1);
        assert!(
            lines.ends_with(&["start", "end"]),
            "the period does not end with its clean-up, or something ran during it: {}",
            at()
        );
        let firsts = lines.iter().filter(|&&l| l == "in 1").count();
        assert_eq!(
            firsts,
            1,
            "a period with other than one first member: {}",
            at()
        );
        let mut inside = 0;
        for line in &lines[..lines.len() - 2] {
            match *line {
                "in 0" | "in 1" => inside += 1,
                "out" => inside -= 1,
                _ => panic!("unexpected line {line:?} in {}", at()),
            }
        }
        assert_eq!(inside, 0, "a clean-up started with members in: {}", at());
    }
    empty(&t, "G", 0);
}

// ---------------------------------------------------------------------------------------------
// A group directory an administrator prepared.

/// `fsync ARGS...` as the unprivileged user `nobody`.
fn as_nobody(t: &TestDir, args: &[&str]) -> Cmd {
    t.cmd("runuser")
        .args(["-u", "nobody", "--"])
        .arg(fsync_bin())
        .args(args)
}

/// The names in a directory, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Create (as root) the directory `name` with `mode`.
fn dir_with_mode(t: &TestDir, name: &str, mode: u32) {
    std::fs::create_dir(t.join(name)).unwrap();
    std::fs::set_permissions(t.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Members only lock `gate` and `join.lock` and create their registrations in `members/`: in a
/// group directory root prepared (read-only to members but for a sticky `members/`), users who
/// may not write it join, leave, clean up and delete nothing; where they may not register, the
/// error says what must be writable.
#[test]
#[ignore = "needs root: a root-owned group directory that a second user (runuser -u nobody) joins; .ci/run runs it with --ignored"]
fn group_join_in_a_directory_prepared_read_only() {
    require_root();
    require("runuser", "util-linux");
    let t = TestDir::new();
    t.open_to_others(); // root-owned, 0755
    dir_with_mode(&t, "G", 0o755);
    for file in ["G/gate", "G/join.lock"] {
        std::fs::write(t.join(file), "").unwrap();
        std::fs::set_permissions(t.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    dir_with_mode(&t, "G/members", 0o1777);
    let prepared = names_in(&t.join("G"));
    let group = t.arg("G");
    let member = |options: &[&str]| {
        as_nobody(&t, &["group", "join"])
            .args(options)
            .args([group.as_str(), "--", "sh", "-c", MEMBER])
            .start()
    };

    let a = admitted(member(&[]));
    let b = admitted(member(&["--delete"]));
    assert_eq!((a.first.as_str(), b.first.as_str()), ("1", "0"));
    empty(&t, &group, 1);
    let v = members_json(&t, &group);
    let children: BTreeSet<u64> = (v["members"].as_array().unwrap().iter())
        .filter_map(|m| m["child_pid"].as_u64())
        .collect();
    assert_eq!(
        children,
        BTreeSet::from([u64::from(a.child), u64::from(b.child)]),
        "{v}"
    );
    a.holder.finish().code(0).stderr("");
    // The last member leaves with --delete: a prepared directory stays as it was made.
    b.holder.finish().code(0).stderr("");
    empty(&t, &group, 0);
    assert_eq!(names_in(&t.join("G")), prepared);
    assert!(registrations(&t, "G").is_empty());
    // The clean-up of the last member runs there too.
    as_nobody(
        &t,
        &[
            "group",
            "join",
            "--last",
            "echo cleaned",
            &group,
            "--",
            "true",
        ],
    )
    .run()
    .code(0)
    .stdout("cleaned\n")
    .stderr("");

    // Where members may not register: status 77, and the error says what must be writable.
    std::fs::set_permissions(t.join("G/members"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let members = t.arg("G/members");
    as_nobody(&t, &["group", "join", &group, "--", "echo", "ran"])
        .run()
        .code(77)
        .stdout("")
        .error_naming(&members)
        .stderr_has("cannot register as a member: permission denied; every member must be able to create its registration here");
    // A directory nothing was prepared in: it says what it must hold.
    dir_with_mode(&t, "H", 0o755);
    let bare = t.arg("H");
    as_nobody(&t, &["group", "join", &bare, "--", "echo", "ran"])
        .run()
        .code(77)
        .stdout("")
        .error_naming(&bare)
        .stderr_has("the empty files gate and join.lock in it, and a directory members");
    assert!(names_in(&t.join("H")).is_empty());
}
