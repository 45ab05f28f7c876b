//! Across machines: every primitive with its participants split over two client "hosts" of a
//! real network file system (a bed under `tests/beds/`: GlusterFS's `/mnt/fsbed/a` and
//! `/mnt/fsbed/b`, MooseFS's `/mnt/fsbed2/a` and `/mnt/fsbed2/b`, or CephFS's `/mnt/fsbed3/a`
//! and `/mnt/fsbed3/b`, are one directory seen through two clients in their own network
//! namespaces), and lock-loss detection when one host is cut off.
//!
//! These are `#[ignore]`d: run them with `--ignored` and `FSYNC_NETFS=1` (`.ci/run` sets the bed
//! up, runs them, and tears it down); asked for without a bed, each fails. `FSYNC_NETFS_BED`
//! names the bed (`glusterfs`, the default, `moosefs` or `cephfs`); `FSYNC_NETFS_A` and
//! `FSYNC_NETFS_B` override its two mounts.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::harness::{Holder, TestDir, fsync_bin, json_of};

/// The two views of one fresh directory on the bed; fails without the bed.
fn bed(name: &str) -> (PathBuf, PathBuf, TestDir) {
    // Ignored unless asked for (--ignored): asked for without a bed, a failure, not a pass.
    assert_eq!(
        std::env::var("FSYNC_NETFS").as_deref(),
        Ok("1"),
        "the cross-host tests need a bed: run tests/beds/glusterfs/setup.sh (or moosefs) and set \
         FSYNC_NETFS=1 (FSYNC_NETFS_BED=moosefs for the other), as .ci/run does"
    );
    let dir = format!("{name}.{}", std::process::id());
    let mount = |var: &str, default: &str| {
        PathBuf::from(std::env::var_os(var).unwrap_or_else(|| default.into()))
    };
    let bed = Bed::current();
    let a = mount("FSYNC_NETFS_A", &format!("{}/a", bed.mounts)).join(&dir);
    std::fs::create_dir_all(&a).unwrap_or_else(|e| panic!("host a's mount: {}: {e}", a.display()));
    let b = mount("FSYNC_NETFS_B", &format!("{}/b", bed.mounts)).join(&dir);
    assert!(b.is_dir(), "host b does not see host a's directory");
    (a, b, TestDir::new())
}

/// What the tests need to know of a bed: where it mounts, how to reach host a's client, how
/// long its server takes to give a dead client's locks away.
struct Bed {
    /// Its directory under `tests/beds/`.
    name: &'static str,
    /// The two clients' mounts are `MOUNTS/a` and `MOUNTS/b`.
    mounts: &'static str,
    /// Host a's network namespace.
    netns_a: &'static str,
    /// The server's network namespace, its bridge, and host a's port on it.
    netns_srv: &'static str,
    bridge: &'static str,
    port_a: &'static str,
    /// The pid file of host a's client.
    client_a_pid: &'static str,
    /// A wait long enough for the server to free a dead or cut-off client's locks.
    server_timeout: &'static str,
    /// What becomes of a client frozen (its host paused whole) past the server's timeout.
    after_freeze: AfterFreeze,
}

/// What a bed's server does with a client frozen past its timeout.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterFreeze {
    /// Nothing: the connection stays up (the kernel answers for the frozen client), and so
    /// do its locks (GlusterFS).
    KeepsLocks,
    /// It drops the client's session, locks and all; thawed, the client comes back with a
    /// new session (MooseFS).
    NewSession,
    /// It evicts the client for good: the mount answers only errors until mounted again
    /// (CephFS).
    Evicted,
}

impl Bed {
    fn current() -> Bed {
        match std::env::var("FSYNC_NETFS_BED").as_deref() {
            Ok("moosefs") => Bed {
                name: "moosefs",
                mounts: "/mnt/fsbed2",
                netns_a: "fsbed2-a",
                netns_srv: "fsbed2-srv",
                bridge: "br-fsbed2",
                port_a: "fsb2-a",
                client_a_pid: "/tmp/fsbed2-state/client-a.pid",
                // The master keeps a lost client's session 60 s, sweeps every 10 s, and
                // notices a silent one ~10 s late.
                server_timeout: "150s",
                after_freeze: AfterFreeze::NewSession,
            },
            Ok("cephfs") => Bed {
                name: "cephfs",
                mounts: "/mnt/fsbed3",
                netns_a: "fsbed3-a",
                netns_srv: "fsbed3-srv",
                bridge: "br-fsbed3",
                port_a: "fsb3-a",
                client_a_pid: "/tmp/fsbed3-state/client-a.pid",
                // The MDS evicts a client (and frees its locks) once it has been silent for
                // the file system's session_autoclose (the bed sets it and session_timeout to
                // 30 s, the least Ceph allows): measured 25-31 s after the cut.
                server_timeout: "60s",
                after_freeze: AfterFreeze::Evicted,
            },
            Ok("glusterfs") | Err(_) => Bed {
                name: "glusterfs",
                mounts: "/mnt/fsbed",
                netns_a: "fsbed-a",
                netns_srv: "fsbed-srv",
                bridge: "br-fsbed",
                port_a: "fsb-a",
                client_a_pid: "/tmp/fsbed-state/client-a.pid",
                server_timeout: "60s",
                after_freeze: AfterFreeze::KeepsLocks,
            },
            Ok(other) => {
                panic!("FSYNC_NETFS_BED={other}: the beds are glusterfs, moosefs and cephfs")
            }
        }
    }
}

fn s(p: &std::path::Path, name: &str) -> String {
    p.join(name).to_string_lossy().into_owned()
}

#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_mutex_counter_is_exact_across_hosts() {
    let (a, b, t) = bed("mutex");
    std::fs::write(a.join("counter"), "0\n").unwrap();
    let procs: Vec<Holder> = [&a, &a, &b, &b]
        .iter()
        .map(|host| {
            let (lock, counter) = (s(host, "L"), s(host, "counter"));
            t.sh(&format!(
                "for i in $(seq 20); do \"$FSYNC\" mutex run {lock} -- sh -c 'n=$(cat {counter}); echo $((n+1)) > {counter}' || exit 1; done"
            ))
            .start()
        })
        .collect();
    for p in procs {
        p.finish().code(0);
    }
    assert_eq!(
        std::fs::read_to_string(b.join("counter")).unwrap().trim(),
        "80"
    );
}

/// The default lease comes from the mount where it shows its server's timeout (a GlusterFS
/// client's ping-timeout, in force: a volume option changed under a mounted client is followed),
/// and is called a guess, by `doctor` and by `-v`, where it does not (MooseFS, CephFS).
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_the_default_lease_follows_the_servers_timeout_or_says_it_is_a_guess() {
    let (a, _b, t) = bed("lease");
    let bed = Bed::current();
    let lease = || {
        let out = t.fsync(["doctor", "--json"]).arg(&a).run();
        let doc = json_of(&out.stdout);
        let lease = &doc["lease"];
        (
            lease["seconds"].as_u64().unwrap(),
            lease["source"].as_str().unwrap().to_string(),
        )
    };
    let verbose = || {
        t.fsync(["mutex", "run", "-v"])
            .arg(a.join("L"))
            .args(["--", "true"])
            .run()
            .code(0)
            .stderr
            .clone()
    };
    if bed.name == "moosefs" {
        assert_eq!(lease(), (30, "guess".to_string()));
        let said = verbose();
        assert!(said.contains("lease 30s on MooseFS is a guess"), "{said}");
        return;
    }
    if bed.name == "cephfs" {
        // A ceph-fuse client shows the file system's session_timeout only on its admin
        // socket (root's), not on the mount: the table's guess, safe for any session timeout
        // Ceph accepts (30 s at the least).
        assert_eq!(lease(), (14, "guess".to_string()));
        let said = verbose();
        assert!(said.contains("lease 14s on CephFS is a guess"), "{said}");
        return;
    }
    // The bed mounts with a ping-timeout of 10 s: half, less a second.
    assert_eq!(lease(), (4, "mount".to_string()));
    assert!(!verbose().contains("guess"));
    let set = |secs: u32| {
        let ok = std::process::Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", bed.netns_srv))
            .args(["gluster", "--mode=script", "volume", "set", "fsbed"])
            .args(["network.ping-timeout", &secs.to_string()])
            .stdout(std::process::Stdio::null())
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "could not set the ping-timeout"
        );
    };
    // A holder whose command runs meanwhile follows too (its checking thread reads the mount
    // again every few seconds), and -v says so.
    let mut holder = t
        .fsync(["mutex", "run", "-v"])
        .arg(a.join("H"))
        .args(["--", "sh", "-c", crate::harness::HOLD])
        .hold();
    set(6);
    crate::harness::eventually("the lease to follow a ping-timeout of 6 s", || {
        lease() == (2, "mount".to_string())
    });
    let said = holder.stderr_until("the lease is now");
    assert!(said.contains("the lease is now 2s"), "{said}");
    set(10);
    crate::harness::eventually("the lease to follow a ping-timeout of 10 s again", || {
        lease() == (4, "mount".to_string())
    });
    let said = holder.stderr_line();
    assert!(said.contains("the lease is now 4s"), "{said}");
    holder.send("");
    holder.finish().code(0);
}

#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_event_wakes_across_hosts_by_polling() {
    let (a, b, t) = bed("event");
    let mut waiter = t
        .fsync(["event", "wait", "-v", "--reset", "-t", "20s", &s(&b, "E")])
        .start();
    // Signalled once it waits, so that it must see the change by polling.
    waiter.stderr_until("fsync: waiting for ");
    t.fsync(["event", "signal", &s(&a, "E")]).run().code(0);
    waiter.finish().code(0);
    t.fsync(["event", "status", &s(&a, "E")]).run().code(1);
}

#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_messages_exactly_once_across_hosts() {
    let (a, b, t) = bed("msg");
    for i in 0..30 {
        let host = if i % 2 == 0 { &a } else { &b };
        t.fsync(["msg", "post", &s(host, "B"), "--data", &format!("m{i}")])
            .run()
            .code(0);
    }
    let receivers: Vec<Holder> = [&a, &b]
        .iter()
        .map(|host| {
            t.sh(&format!(
                "while \"$FSYNC\" msg recv -t 2s {}; do echo; done; true",
                s(host, "B")
            ))
            .start()
        })
        .collect();
    let mut all = Vec::new();
    for r in receivers {
        all.extend(
            r.finish()
                .stdout
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    assert_eq!(all.len(), 30, "{all:?}");
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 30);
    // Order: posts alternated hosts one after the other; one receiver's share stays in order.
    let sender = t
        .fsync(["msg", "send", "-t", "20s", &s(&a, "S"), "--data", "sync"])
        .start();
    t.fsync(["msg", "recv", "-t", "20s", &s(&b, "S")])
        .run()
        .code(0)
        .stdout("sync");
    sender.finish().code(0);
    // bus: participants on both hosts; a broadcast from a reaches b's participant once
    t.fsync(["bus", "connect", &s(&a, "BUS"), "left"])
        .run()
        .code(0);
    t.fsync(["bus", "connect", &s(&b, "BUS"), "right"])
        .run()
        .code(0);
    t.fsync([
        "bus",
        "broadcast",
        &s(&a, "BUS"),
        "--from",
        "left",
        "--data",
        "hi",
    ])
    .run()
    .code(0);
    let v = json_of(
        &t.fsync(["bus", "recv", "--json", "-t", "20s", &s(&b, "BUS"), "right"])
            .run()
            .code(0)
            .stdout,
    );
    assert_eq!(
        (v["from"].as_str(), v["data"].as_str()),
        (Some("left"), Some("hi")),
        "{v}"
    );
    t.fsync(["bus", "recv", "-n", &s(&b, "BUS"), "left"])
        .run()
        .code(75);
}

/// A job by its id, across hosts: posted on a, seen queued from b, running on b from a
/// (b's worker), waited for on a until b's worker finishes it, succeeded from both; a job
/// queued on a and cancelled from b never runs.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_a_jobs_status_wait_and_cancel_across_hosts() {
    let (a, b, t) = bed("jobs");
    let post = |host: &std::path::Path, data: &str| -> String {
        let out = t
            .fsync(["msg", "post", &s(host, "B"), "--data", data])
            .run();
        out.code(0);
        out.stdout.trim().to_string()
    };
    let state = |host: &std::path::Path, id: &str| -> serde_json::Value {
        json_of(
            &t.fsync(["msg", "status", "--json", &s(host, "B"), id])
                .run()
                .code(0)
                .stdout,
        )
    };
    let job = post(&a, "job");
    assert_eq!(state(&b, &job)["state"], "queued");
    let go = t.join("go");
    let script = format!(
        "echo acquired; while [ ! -e {} ]; do sleep 0.05; done",
        go.display()
    );
    let mut worker = t
        .fsync([
            "msg",
            "recv",
            "-t",
            "20s",
            &s(&b, "B"),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .hold();
    let running = state(&a, &job);
    assert_eq!(running["state"], "running", "{running}");
    assert_eq!(
        running["pid"].as_u64(),
        Some(u64::from(worker.pid())),
        "{running}"
    );
    let mut waiter = t
        .fsync(["msg", "wait", "-v", "-t", "60s", &s(&a, "B"), &job])
        .start();
    waiter.stderr_until("waiting");
    std::fs::write(&go, "").unwrap();
    worker.wait_exit();
    waiter
        .finish()
        .code(0)
        .stdout_has(&format!("{job} succeeded at "));
    assert_eq!(state(&b, &job)["state"], "succeeded");

    let doomed = post(&a, "doomed");
    t.fsync(["msg", "cancel", &s(&b, "B"), &doomed])
        .run()
        .code(0)
        .stdout_has(&format!("{doomed} cancelled at "));
    t.fsync(["msg", "recv", "-n", &s(&a, "B"), "--", "sh", "-c", "exit 9"])
        .run()
        .code(75);
    assert_eq!(state(&a, &doomed)["state"], "cancelled");
}

/// A job's output, kept by its worker on b, followed from a while it runs (b's writer flushes
/// it about once a second, a's reader polls), and read whole once it has ended.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_a_jobs_output_is_followed_from_the_other_host() {
    let (a, b, t) = bed("output");
    let out = t.fsync(["msg", "post", &s(&a, "B"), "--data", "x"]).run();
    out.code(0);
    let id = out.stdout.trim().to_string();
    let go = t.join("go");
    let script = format!(
        "echo first line; while [ ! -e {} ]; do sleep 0.05; done; echo last line",
        go.display()
    );
    let mut worker = t
        .fsync([
            "msg",
            "work",
            "-v",
            "--until-empty",
            &s(&b, "B"),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .start();
    worker.stderr_until("running (attempt");
    let mut follow = t
        .fsync([
            "msg",
            "log",
            "--follow",
            "--poll",
            "100ms",
            &s(&a, "B"),
            &id,
        ])
        .start();
    assert_eq!(follow.line(), "first line");
    std::fs::write(&go, "").unwrap();
    assert_eq!(follow.line(), "last line");
    follow.finish().code(0);
    worker.finish().code(0);
    t.fsync(["msg", "log", &s(&a, "B"), &id])
        .run()
        .code(0)
        .stdout("first line\nlast line\n");
}

#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_sem_group_swmr_grouplock_across_hosts() {
    let (a, b, t) = bed("prims");
    let hold = "echo acquired; read x || true";
    // sem: one slot each side, a third is refused
    let s1 = t
        .fsync([
            "sem",
            "run",
            &s(&a, "S"),
            "--slots",
            "2",
            "--",
            "sh",
            "-c",
            hold,
        ])
        .hold();
    let s2 = t
        .fsync([
            "sem",
            "run",
            &s(&b, "S"),
            "--slots",
            "2",
            "--",
            "sh",
            "-c",
            hold,
        ])
        .hold();
    t.fsync([
        "sem",
        "run",
        "-n",
        &s(&a, "S"),
        "--slots",
        "2",
        "--",
        "true",
    ])
    .run()
    .code(75);
    s1.finish().code(0);
    t.fsync([
        "sem",
        "run",
        "-n",
        &s(&b, "S"),
        "--slots",
        "2",
        "--",
        "true",
    ])
    .run()
    .code(0);
    s2.finish().code(0);
    // group: a member on a is seen on b
    let m = t
        .fsync(["group", "join", &s(&a, "G"), "--", "sh", "-c", hold])
        .hold();
    t.fsync(["group", "empty", &s(&b, "G")]).run().code(1);
    assert_eq!(
        json_of(
            &t.fsync(["group", "members", "--json", &s(&b, "G")])
                .run()
                .code(0)
                .stdout
        )["count"],
        1
    );
    m.finish().code(0);
    t.fsync(["group", "empty", &s(&b, "G")]).run().code(0);
    // swmr: a reader on a keeps a writer on b out
    let r = t
        .fsync(["swmr", "read", &s(&a, "W"), "--", "sh", "-c", hold])
        .hold();
    t.fsync(["swmr", "read", "-n", &s(&b, "W"), "--", "true"])
        .run()
        .code(0);
    t.fsync(["swmr", "write", "-n", &s(&b, "W"), "--", "true"])
        .run()
        .code(75);
    r.finish().code(0);
    // grouplock: group x on a keeps group y on b out
    let g = t
        .fsync([
            "grouplock",
            "run",
            &s(&a, "GL"),
            "--group",
            "x",
            "--",
            "sh",
            "-c",
            hold,
        ])
        .hold();
    t.fsync([
        "grouplock",
        "run",
        "-n",
        &s(&b, "GL"),
        "--group",
        "y",
        "--",
        "true",
    ])
    .run()
    .code(75);
    t.fsync([
        "grouplock",
        "run",
        "-n",
        &s(&b, "GL"),
        "--group",
        "x",
        "--",
        "true",
    ])
    .run()
    .code(0);
    g.finish().code(0);
}

/// Host a's file system client crashes while a holds a lock and a counter update is half-way:
/// host b gets the lock, and the counter written under the lock is whole.
/// Both hosts create the same new files at the same moment, many times: every primitive's
/// first use makes its files with `open(O_CREAT)`, which on a FUSE file system is a lookup then
/// a create, so the host that loses the race is told `EEXIST`. Every run must still succeed.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_both_hosts_creating_the_same_files_at_once_both_succeed() {
    let (a, b, _t) = bed("create");
    let rounds: usize = std::env::var("FSYNC_NETFS_CREATE_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let verbs: [&[&str]; 5] = [
        &["mutex", "run"],
        &["sem", "run", "--slots", "2"],
        &["group", "join"],
        &["swmr", "write"],
        // A mailbox's six subdirectories, each made by both at once.
        &["msg", "work", "--until-empty"],
    ];
    let mut failures = Vec::new();
    for i in 0..rounds {
        let verb = verbs[i % verbs.len()];
        let name = format!("N{i}");
        let start = |host: &std::path::Path| {
            std::process::Command::new(fsync_bin())
                .args(verb)
                .arg(host.join(&name))
                .args(["--", "true"])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (one, two) = (start(&a), start(&b));
        for child in [one, two] {
            let out = child.wait_with_output().unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "{} {name}: {:?} {}",
                    verb.join(" "),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} runs failed: {failures:#?}",
        failures.len()
    );
}

/// A waiter blocked on another host's lock makes its blocking call in a child process: fsync
/// itself never interrupts a call the file system must answer (a GlusterFS client has been
/// seen never to answer an interrupted lock request, holding the waiter past its timeout).
/// The waiter leaves at its timeout and on TERM, its child goes with it, and nothing it
/// waited for stays taken: the lock goes to the next at once when its holder lets go.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_a_blocked_waiter_leaves_at_its_timeout_or_a_signal_and_takes_nothing_with_it() {
    use crate::harness::{dead, eventually};
    let (a, b, t) = bed("blocked");
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    // The whole file (flock), and a byte range (fcntl).
    for lock in [&[][..], &["--range", "3:2"]] {
        let mut held = vec!["mutex", "run"];
        held.extend(lock);
        let on_a = s(&a, "L");
        held.extend([on_a.as_str(), "--", "sh", "-c", crate::harness::HOLD]);
        let holder = t.fsync(held).hold();
        for ending in ["timeout", "TERM"] {
            let timeout = if ending == "timeout" { "2s" } else { "60s" };
            let on_b = s(&b, "L");
            let mut args = vec!["mutex", "run", "-v", "-t", timeout];
            args.extend(lock);
            args.extend([on_b.as_str(), "--", "true"]);
            let mut waiter = t.fsync(args).start();
            let said = waiter.stderr_line();
            assert!(said.contains("waiting"), "{lock:?}: {said}");
            // The blocking call is a child's.
            let mut child = 0;
            eventually("the waiter's child waits in the lock call", || {
                child = children(waiter.pid()).first().copied().unwrap_or(0);
                child != 0
                    && std::fs::read_to_string(format!("/proc/{child}/wchan"))
                        .is_ok_and(|w| !w.is_empty() && w != "0")
            });
            let started = std::time::Instant::now();
            if ending == "TERM" {
                waiter.signal(nix::sys::signal::Signal::SIGTERM);
            }
            let status = waiter.wait_exit_within(std::time::Duration::from_secs(20));
            let took = started.elapsed();
            // Timed out: 75; a TERM ends the wait, and fsync dies of it.
            use std::os::unix::process::ExitStatusExt;
            match ending {
                "timeout" => assert_eq!(status.code(), Some(75), "{lock:?}: {status:?}"),
                _ => assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}"),
            }
            assert!(
                took < std::time::Duration::from_secs(5),
                "{lock:?} {ending}: left after {took:?}"
            );
            eventually("the waiter's child is gone", || dead(child));
        }
        // Nothing left taken: once the holder lets go, a try from b gets the lock at once.
        holder.finish().code(0);
        let on_b = s(&b, "L");
        let mut again = vec!["mutex", "run", "-n"];
        again.extend(lock);
        again.extend([on_b.as_str(), "--", "true"]);
        t.fsync(again).run().code(0);
    }
}

#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zy_client_crash_frees_the_lock_and_corrupts_nothing() {
    let (a, b, t) = bed("crash");
    std::fs::write(a.join("counter"), "41\n").unwrap();
    let counter = s(&a, "counter");
    let mut holder = t
        .fsync([
            "mutex",
            "run",
            &s(&a, "L"),
            "--",
            "sh",
            "-c",
            &format!("echo acquired; sleep 120; echo 0 > {counter}"),
        ])
        .hold();
    let children = format!("/proc/{0}/task/{0}/children", holder.pid());
    let command: i32 = std::fs::read_to_string(children)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid =
        std::fs::read_to_string(Bed::current().client_a_pid).expect("the bed's client pid file");
    let ok = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cannot kill host a's client");
    let bump = format!("n=$(cat {0}); echo $((n+1)) > {0}", s(&b, "counter"));
    t.fsync([
        "mutex",
        "run",
        "-t",
        Bed::current().server_timeout,
        &s(&b, "L"),
        "--",
        "sh",
        "-c",
        &bump,
    ])
    .deadline(std::time::Duration::from_mins(4))
    .run()
    .code(0);
    assert_eq!(
        std::fs::read_to_string(b.join("counter")).unwrap().trim(),
        "42"
    );
    holder.signal(nix::sys::signal::Signal::SIGKILL);
    holder.wait_exit();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(command),
        nix::sys::signal::Signal::SIGKILL,
    );
    heal();
}

/// How host a is cut off from the server.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// Its link goes down: its client sees the network go (GlusterFS fails calls at once).
    LinkDown,
    /// Its port leaves the server's bridge: packets vanish, nothing tells the client, and
    /// only the lease stops the command in time.
    Silent,
}

impl Cut {
    fn set(self, bed: &Bed, cut: bool) {
        let args = self.args(bed, cut);
        let ok = std::process::Command::new("ip")
            .args(&args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot run ip {}", args.join(" "));
    }

    /// The arguments of the `ip` command that makes or mends the cut.
    fn args(self, bed: &Bed, cut: bool) -> Vec<&'static str> {
        match (self, cut) {
            (Cut::LinkDown, true) => vec!["-n", bed.netns_a, "link", "set", "eth0", "down"],
            (Cut::LinkDown, false) => vec!["-n", bed.netns_a, "link", "set", "eth0", "up"],
            (Cut::Silent, true) => vec!["-n", bed.netns_srv, "link", "set", bed.port_a, "nomaster"],
            (Cut::Silent, false) => {
                vec![
                    "-n",
                    bed.netns_srv,
                    "link",
                    "set",
                    bed.port_a,
                    "master",
                    bed.bridge,
                ]
            }
        }
    }
}

/// Cut host a's link while it holds a lock, a group membership, a bus name and a job, each
/// with a command running under it: see [`cut_off_holders`]. Named to run last (tests run in name
/// order with one thread), since the cut unmounts host a.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zz_a_cut_off_holder_stops_its_command_before_the_other_host_gets_the_lock() {
    cut_off_holders(Cut::LinkDown);
}

/// The same with a silent cut: host a's client is told nothing.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zz_a_silently_cut_off_holder_stops_its_command_before_the_other_host_gets_the_lock() {
    cut_off_holders(Cut::Silent);
}

/// A holder whose record of its command waits on the server keeps its lock: the lease is
/// confirmed meanwhile, and the command runs to its end. fsync runs under strace, which holds
/// each write of the holder record after the first (the writes before the command starts,
/// the one that records its pid, the release) for five seconds, against a lease of two; the
/// command runs three. MooseFS does this by itself: a client that wrote a record just before
/// it was cut off keeps the record's chunk locked for up to two minutes, and the next holder's
/// writes wait for it. A lease that began its checks only once the command was recorded let
/// the lock run out meanwhile and killed the command (exit 76).
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_a_holder_whose_record_write_waits_keeps_its_lock_and_its_command() {
    crate::harness::require("strace", "strace");
    let (a, _b, t) = bed("slowrecord");
    let lock = s(&a, "L");
    let record = s(&a, ".L.fsync");
    let ran = t
        .cmd("strace")
        .args(["-o", "/dev/null", "-P", &record, "-e", "trace=pwrite64"])
        .args(["-e", "inject=pwrite64:delay_exit=5000000:when=2+"])
        .arg(fsync_bin())
        .args(["mutex", "run", "--lease", "2s", &lock, "--", "sh", "-c"])
        .arg("sleep 3; echo ran")
        .run();
    assert_eq!(
        (ran.status.code(), ran.stdout.trim()),
        (Some(0), "ran"),
        "the command did not run to its end under its lock: {}",
        ran.stderr
    );
}

/// Cut host a off just after it takes a lock, before its command starts: fsync runs under
/// strace, which holds each of its `fcntl` calls on the lock file after the first (passing the
/// lock down to the command) for six seconds, and the test cuts the link when fsync says it
/// has the lock (`-v`). The lease runs from the taking of the lock, not from the command's
/// start: on a bed whose lease is shorter than the hold-up, fsync asks the server before
/// starting the command and, getting no answer, starts none; elsewhere it starts it and stops
/// it in time. Either way host b's command starts after host a's stopped.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zz_a_holder_cut_off_as_it_takes_the_lock_stops_before_the_other_host_gets_it() {
    crate::harness::require("strace", "strace");
    let (a, b, t) = bed("taking");
    let healed = Healed;
    let lock = s(&a, "L");
    let mut holder = t
        .cmd("strace")
        .args(["-o", "/dev/null", "-P", &lock, "-e", "trace=fcntl"])
        .args(["-e", "inject=fcntl:delay_exit=6000000:when=2+"])
        .arg(fsync_bin())
        .args(["mutex", "run", "-v", &lock, "--", "sh", "-c"])
        .arg(ticking(&t.join("a.log")))
        .start();
    holder.stderr_until("acquired");
    cut_while_taking(holder, &b, &t);
    drop(healed);
}

/// What runs under host a's lock in the cut-off tests: one process (no other started) that
/// prints `acquired`, then appends the time to `log` every 50 ms until it is stopped. On FUSE
/// every process that inherited the lock's descriptor flushes it with the server when it exits,
/// which blocks while the server is unreachable: a shell loop of `date` commands would stall at
/// the cut by itself and hide when fsync stopped it.
fn ticking(log: &std::path::Path) -> String {
    format!(
        "exec perl -MTime::HiRes=time,sleep -e '$| = 1; print \"acquired\\n\"; \
         while (1) {{ open my $f, \">>\", $ARGV[0] or die; \
         printf $f \"%d\\n\", time * 1e9; close $f; sleep 0.05 }}' {}",
        log.display()
    )
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Host a was cut off holding `L`: host b takes it once the server gives up on host a, and
/// stamps `b.log`.
fn other_host_takes_the_lock(b: &std::path::Path, t: &TestDir) {
    let bed = Bed::current();
    let mut after = t
        .fsync([
            "mutex",
            "run",
            "-t",
            bed.server_timeout,
            &s(b, "L"),
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("date +%s%N > {}", t.join("b.log").display()))
        .start();
    let secs: u64 = bed.server_timeout.trim_end_matches('s').parse().unwrap();
    let status = after.wait_exit_within(std::time::Duration::from_secs(secs + 30));
    if status.code() != Some(0) {
        let said = after.finish();
        panic!("host b never got the lock: {status:?}: {}", said.stderr);
    }
}

/// Once host a's fsync has exited: host a's command, which wrote `a.log` ([`ticking`]), had
/// stopped (or never started) by the time host b's command started, with [`MARGIN`] to spare.
fn one_holder_at_a_time(t: &TestDir, cut_at: u128) {
    let bed = Bed::current();
    let b_first: u128 = std::fs::read_to_string(t.join("b.log"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let a_last = std::fs::read_to_string(t.join("a.log"))
        .ok()
        .and_then(|log| {
            log.lines()
                .filter_map(|l| l.trim().parse::<u128>().ok())
                .next_back()
        });
    let ms = |n: u128| (n as i128 - cut_at as i128) as f64 / 1e6;
    eprintln!(
        "{}: cut -> host a's command stopped: {}; cut -> host b's command started: {:.0} ms",
        bed.name,
        a_last.map_or("never started".to_string(), |l| format!("{:.0} ms", ms(l))),
        ms(b_first)
    );
    if let Some(a_last) = a_last {
        assert!(
            a_last + MARGIN.as_nanos() < b_first,
            "two holders, or nearly: host a's command ran until {:.0} ms after the cut, host b's \
             started at {:.0} ms",
            ms(a_last),
            ms(b_first)
        );
    }
}

/// How long before the server gives a cut-off host's lock away its command must have stopped
/// at the latest: fsync's default lease, with the grace after TERM, leaves a second of the
/// server's timeout free ([`fsync::doctor::default_lease`]); a command stopped at the same
/// moment as the server gives up is stopped by luck.
const MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Cut host a off just as its command starts, before its fsync has recorded the command or
/// started the lease's checks: fsync runs under strace, which holds its return from starting
/// the command (`clone3`, `delay_exit`) for two seconds while the command runs and the test
/// cuts the link. Everything fsync does after starting the command then meets a server that
/// does not answer; the lease, which runs from the taking of the lock and is watched from the
/// command's start, must stop the command before host b gets the lock.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zz_a_holder_cut_off_as_its_command_starts_stops_it_before_the_other_host_gets_the_lock() {
    crate::harness::require("strace", "strace");
    let (a, b, t) = bed("starting");
    let healed = Healed;
    let holder = t
        .cmd("strace")
        .args(["-o", "/dev/null", "-e", "trace=clone,clone3,fork,vfork"])
        .args(["-e", "inject=clone,clone3,fork,vfork:delay_exit=2000000"])
        .arg(fsync_bin())
        .args(["mutex", "run", &s(&a, "L"), "--", "sh", "-c"])
        .arg(ticking(&t.join("a.log")))
        .hold();
    cut_while_taking(holder, &b, &t);
    drop(healed);
}

/// Cut host a off now, while `holder` (host a's fsync, its command [`ticking`] into `a.log`)
/// is taking its lock or starting its command; mend the cut once host b has the lock: one
/// holder at a time, and host a's fsync reports the loss (76).
fn cut_while_taking(holder: Holder, b: &std::path::Path, t: &TestDir) {
    let bed = Bed::current();
    let cut_at = now_nanos();
    Cut::LinkDown.set(&bed, true);
    other_host_takes_the_lock(b, t);
    Cut::LinkDown.set(&bed, false);
    let out = holder.finish();
    one_holder_at_a_time(t, cut_at);
    assert_eq!(
        out.status.code(),
        Some(76),
        "host a did not report the loss: {}",
        out.stderr
    );
    assert!(out.stderr.contains("was lost"), "{}", out.stderr);
}

/// Re-mounts host a when dropped, after a test that cut it off, even one that failed: the
/// tests after it need host a's mount.
struct Healed;

impl Drop for Healed {
    fn drop(&mut self) {
        let bed = Bed::current();
        // Both ways back, whichever cut was made; the set-up says what went wrong.
        for cut in [Cut::LinkDown, Cut::Silent] {
            let _ = std::process::Command::new("ip")
                .args(cut.args(&bed, false))
                .status();
        }
        let healed = heal_status();
        if !std::thread::panicking() {
            assert!(healed, "could not re-mount the bed");
        }
    }
}

/// Cut host a off while it holds a lock, a group membership, a bus name and a job's claim on
/// its message, each with a command running under it: each command stops before the server
/// gives what it held to the other host (the lease), measured by the timestamps the commands on
/// both hosts write locally (host b's job is the same message, delivered again: never run
/// twice at once); once the link is back, each fsync on host a reports the loss (exit 76).
fn cut_off_holders(how: Cut) {
    let (a, b, t) = bed("loss");
    let bed = Bed::current();
    let healed = Healed;
    // What host a runs under each.
    let ticking = |log: &str| ticking(&t.join(log));
    // No --lease: the default must stop each command before the server gives its lock away.
    // A job's claim too: its message would be delivered again, and run twice at once.
    t.fsync(["msg", "post", &s(&a, "JOBS"), "--data", "x"])
        .run()
        .code(0);
    let mut holders = [
        ("mutex", vec!["mutex", "run"], s(&a, "L")),
        ("group", vec!["group", "join"], s(&a, "G")),
        ("bus", vec!["bus", "connect", "--hold"], s(&a, "BUS")),
        ("job", vec!["msg", "recv"], s(&a, "JOBS")),
    ]
    .map(|(what, verb, path)| {
        let mut args: Vec<String> = verb.iter().map(std::string::ToString::to_string).collect();
        args.push(path);
        if what == "bus" {
            args.push("n".into());
        }
        args.extend(["--", "sh", "-c"].map(String::from));
        args.push(ticking(&format!("a-{what}.log")));
        (what, t.fsync(args).hold())
    });
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    };
    let cut_at = now();
    how.set(&bed, true);
    // Host b gets each once the server has given up on host a: the lock, an empty group, the
    // name (a held name is refused, exit 69, not waited for: ask again).
    let stamp = |what: &str| {
        format!(
            "date +%s%N > {}",
            t.join(&format!("b-{what}.log")).display()
        )
    };
    let other_mutex = t
        .fsync(["mutex", "run", "-t", bed.server_timeout, &s(&b, "L")])
        .args(["--", "sh", "-c", &stamp("mutex")])
        .start();
    let other_job = t
        .fsync(["msg", "recv", "-t", bed.server_timeout, &s(&b, "JOBS")])
        .args(["--", "sh", "-c", &stamp("job")])
        .start();
    let other_group = t
        .sh(&format!(
            "\"$FSYNC\" group wait-empty -t {} {} && {}",
            bed.server_timeout,
            s(&b, "G"),
            stamp("group")
        ))
        .start();
    let secs: u64 = bed.server_timeout.trim_end_matches('s').parse().unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let got = std::process::Command::new(fsync_bin())
            .args(["bus", "connect", "--hold"])
            .arg(b.join("BUS"))
            .args(["n", "--", "sh", "-c", &stamp("bus")])
            .output()
            .unwrap();
        match got.status.code() {
            Some(0) => break,
            Some(69) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            _ => panic!(
                "host b never got the bus name: {}",
                String::from_utf8_lossy(&got.stderr)
            ),
        }
    }
    // Each waits at most the server's timeout itself (-t), and fails with 75 past it.
    let margin = std::time::Duration::from_secs(secs + 30);
    for (what, mut other) in [
        ("lock", other_mutex),
        ("empty group", other_group),
        ("job", other_job),
    ] {
        let status = other.wait_exit_within(margin);
        if status.code() != Some(0) {
            let said = other.finish();
            panic!("host b never got the {what}: {status:?}: {}", said.stderr);
        }
    }
    how.set(&bed, false);
    // fsync itself may wait for the file system to answer again before it can exit.
    for (what, holder) in &mut holders {
        let status = holder.wait_exit();
        assert_eq!(
            status.code(),
            Some(76),
            "host a's {what} did not report the loss"
        );
        let err = holder.stderr_line();
        assert!(err.contains("was lost"), "{what}: {err}");
    }
    // Every command of host a's has stopped by now: its last stamp is its last.
    let stamps = |log: &str| -> Vec<u128> {
        std::fs::read_to_string(t.join(log))
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let ms = |n: u128| (n as i128 - cut_at as i128) as f64 / 1e6;
    for (what, _) in &holders {
        let a_last = *stamps(&format!("a-{what}.log"))
            .last()
            .expect("host a's command ran");
        let b_first = stamps(&format!("b-{what}.log"))[0];
        eprintln!(
            "{} {}{what}: cut -> host a's command stopped: {:.0} ms; cut -> host b's command \
             started: {:.0} ms",
            bed.name,
            if how == Cut::Silent { "silent " } else { "" },
            ms(a_last),
            ms(b_first)
        );
        assert!(
            a_last + MARGIN.as_nanos() < b_first,
            "{what}: two holders, or nearly: host a's command ran until {:.0} ms after the cut, \
             host b's started at {:.0} ms",
            ms(a_last),
            ms(b_first)
        );
    }
    drop(healed);
}

/// Re-mount host a (its client gives up after the cut), as the bed's set-up does.
fn heal() {
    assert!(heal_status(), "could not re-mount the bed");
}

/// [`heal`], saying whether it could.
fn heal_status() -> bool {
    let setup = format!(
        "{}/tests/beds/{}/setup.sh",
        env!("CARGO_MANIFEST_DIR"),
        Bed::current().name
    );
    std::process::Command::new(&setup)
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A running job cancelled from the other host: its worker, which cannot be woken by the
/// other client's change, looks every `--poll` and stops it (its grandchild too), records it
/// cancelled, never retried; `cancel` on b returns once that is done.
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_a_running_job_is_cancelled_from_the_other_host() {
    let (a, b, t) = bed("cancel");
    t.fsync(["msg", "post", &s(&a, "B"), "--data", "x"])
        .run()
        .code(0);
    let job = format!(
        "sleep 1000 & echo $! > {gc}; echo $$ > {pid}; : > {started}; wait",
        gc = t.join("gc").display(),
        pid = t.join("pid").display(),
        started = t.join("started").display()
    );
    let mut worker = t
        .fsync(["msg", "work", "-v", "--until-empty", "--poll", "100ms"])
        .args([s(&a, "B").as_str(), "--", "sh", "-c", &job])
        .start();
    crate::harness::eventually("the job started", || t.join("started").exists());
    t.fsync(["msg", "cancel", "-t", "30s", &s(&b, "B"), "1"])
        .run()
        .code(0)
        .stdout_has("1 cancelled at ");
    worker.stderr_until("cancelled");
    worker.finish().code(0);
    for name in ["pid", "gc"] {
        let pid: u32 = t.read(name).trim().parse().unwrap();
        crate::harness::eventually("the cancelled job's processes are gone", || {
            crate::harness::dead(pid)
        });
    }
}

/// A receiver whose host was frozen (its client with it) while it waited, past the server's
/// timeout, so that its registration's lock went with the client's session: thawed, it
/// confirms its registration before it claims, and registers anew, so that the job it then
/// claims and runs is not taken for a dead receiver's by the other host, and run there too
/// (nor given up: the lease of a claim made under a lost registration runs out at once).
/// Where the server shuts the client out for good instead (CephFS), host a's receiver fails
/// and host b gets the message, once; where it keeps a frozen client's locks (GlusterFS),
/// host a's receiver takes the message as if nothing happened.
/// Host a's mutex shows when the server has given host a's locks away. Named to run after the
/// cut-offs (a thawed client may need the bed's re-mount).
#[test]
#[ignore = "needs a network file system bed: FSYNC_NETFS=1 and tests/beds/*/setup.sh (.ci/run runs them with --ignored)"]
fn netfs_zz_a_receiver_frozen_past_the_servers_timeout_claims_under_a_live_registration() {
    let (a, b, t) = bed("frozen");
    let bed = Bed::current();
    let healed = Healed;
    let stamp = |file: &str| format!("date +%s%N >> {}", t.join(file).display());
    let mut holder = t.hold(&s(&a, "L"));
    let job = format!("{}; sleep 8; {}", stamp("a-start"), stamp("a-end"));
    let mut receiver = t
        .fsync([
            "msg",
            "recv",
            "--poll",
            "100ms",
            &s(&a, "Q"),
            "--",
            "sh",
            "-c",
            &job,
        ])
        .start();
    // Looked at from host b: a look through a frozen host's mount waits until it thaws.
    let registered = || {
        std::fs::read_dir(b.join("Q/recv")).is_ok_and(|d| {
            d.flatten()
                .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
        })
    };
    crate::harness::eventually("host a's receiver registered", registered);
    let client: u32 = std::fs::read_to_string(bed.client_a_pid)
        .expect("the bed's client pid file")
        .trim()
        .parse()
        .unwrap();
    // fsync first: one frozen after its client could be in a call the client never answers,
    // which the freezer waits for.
    let frozen = [
        Frozen::new("fsync-test-frozen-a", &[holder.pid(), receiver.pid()]),
        Frozen::new("fsync-test-frozen-a-client", &[client]),
    ];
    let keeps = bed.after_freeze == AfterFreeze::KeepsLocks;
    // Host b gets the lock once the server has dropped host a's session, locks and all; where
    // the server keeps them, not within twice its timeout.
    let (wait, code) = if keeps {
        ("20s", 75)
    } else {
        (bed.server_timeout, 0)
    };
    t.fsync(["mutex", "run", "-t", wait, &s(&b, "L"), "--", "true"])
        .deadline(std::time::Duration::from_mins(4))
        .run()
        .code(code);
    // A receiver on host b finds host a's registration unlocked, and removes it as a dead
    // one's (where it is still locked, it stays).
    t.fsync(["msg", "recv", "-t", "1s", &s(&b, "Q")])
        .run()
        .code(75);
    assert_eq!(
        registered(),
        keeps,
        "host a's registration, once host b looked"
    );
    drop(frozen);
    t.fsync(["msg", "post", &s(&b, "Q"), "--data", "x"])
        .run()
        .code(0);
    let b_run = |timeout: &str| {
        t.fsync(["msg", "recv", "-t", timeout, &s(&b, "Q"), "--", "sh", "-c"])
            .arg(stamp("b-start"))
            .run()
    };
    if bed.after_freeze == AfterFreeze::Evicted {
        // Host a's client was shut out: its receiver fails (it cannot claim), and host b
        // gets the message, once.
        let status = receiver.wait_exit_within(std::time::Duration::from_mins(1));
        assert!(
            !status.success() && !t.join("a-start").exists(),
            "host a's receiver, shut out: {status:?}"
        );
        b_run("30s").code(0);
        assert_eq!(t.read("b-start").lines().count(), 1);
    } else {
        let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
        while !t.join("a-start").exists() {
            if crate::harness::dead(receiver.pid()) || std::time::Instant::now() > deadline {
                receiver.signal(nix::sys::signal::Signal::SIGKILL);
                let out = receiver.finish();
                panic!(
                    "host a's receiver never ran the job: {:?}: {}",
                    out.status, out.stderr
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The claim is a living receiver's: host b finds nothing to take.
        let other = b_run("4s");
        assert!(
            !t.join("b-start").exists(),
            "the job ran on both hosts at once: {}",
            other.stderr
        );
        other.code(75);
        assert_eq!(receiver.wait_exit().code(), Some(0), "host a's job");
        assert!(t.join("a-end").exists());
    }
    holder.signal(nix::sys::signal::Signal::SIGKILL);
    holder.wait_exit();
    drop(healed);
}

/// Processes frozen in a freezer cgroup of their own (cgroup v1) until dropped.
struct Frozen(PathBuf);

impl Frozen {
    fn new(name: &str, pids: &[u32]) -> Frozen {
        let dir = PathBuf::from("/sys/fs/cgroup/freezer").join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let frozen = Frozen(dir);
        for pid in pids {
            std::fs::write(frozen.0.join("cgroup.procs"), pid.to_string()).unwrap();
        }
        std::fs::write(frozen.0.join("freezer.state"), "FROZEN").unwrap();
        crate::harness::eventually("frozen", || {
            std::fs::read_to_string(frozen.0.join("freezer.state"))
                .unwrap()
                .trim()
                == "FROZEN"
        });
        frozen
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
        // Back to the root group, so that the group can go.
        let root = self.0.parent().unwrap().join("cgroup.procs");
        if let Ok(pids) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for pid in pids.lines() {
                let _ = std::fs::write(&root, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The checker of the many-host run under a nemesis (`tests/beds/nemesis/check.py`) finds,
/// in made-up histories, each violation it must (overlapping critical sections, tokens that
/// go back or repeat, a stale write a token-checking resource would accept, a third holder of
/// a 2-slot semaphore, a job lost, run twice at once, or run again) and nothing in a clean
/// one, and allows an overlap only under a fault whose promise is the fence: a checker that
/// cannot fail proves nothing. Runs without a bed.
#[test]
fn the_nemesis_checker_finds_each_violation_of_a_made_up_history() {
    crate::harness::require("python3", "python3");
    let check = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/beds/nemesis/check.py");
    let t = TestDir::new();
    let out = t.cmd("python3").args([check, "--self-test"]).run();
    out.code(0);
    assert_eq!(
        out.stdout, "self-test: 10 of 10 cases right\n",
        "{}",
        out.stderr
    );
}
