/*!
Crash consistency of the mailbox, checked the way ALICE and CrashMonkey check applications: each
scenario runs real `fsync msg` commands under `strace`, replays the file-system operations they
made on a model (`crash_model.rs`), and builds every state a power cut could leave after each
prefix of them (per-directory durability, metadata in order, everything done), as a real
directory. On each state it runs fsync (`msg list`, `msg recv` until nothing is left, `msg post`)
and checks:

1. no id is reused: a post after the crash gets an id above every id seen before it;
2. no acknowledged post is lost and 3. no job is lost: every message of a command that returned
   is still queued, being received, delayed or a dead letter;
4. no job runs again once its success is recorded: a message whose receive returned is gone;
5. a message holds what was posted (a returned post's, or one of a batch being posted);
6. what a returned command did stays done: a failure stays counted, a delay stays a delay, a
   dead letter stays dead until `msg retry` (whose return puts it back for good);
7. a key stays held while its message is pending (`--key`);
8. a job whose cancellation was reported is known as such: `msg status` says "cancelled"; one
   whose success was reported says "succeeded", or "unknown" (the record of a success is not
   flushed on its own: a file system that commits metadata in order keeps it with the claim's
   removal, and this model does not), never anything else.
9. a batch (`msg post --lines`) is all or nothing: while it is being posted, the state holds
   every message of it (queued, or in its committed directory `B/batches/`) or none.

Expected: the place of each message (queued or claimed, delayed, dead) when the last command
before the crash returned, or any place the operations after it gave it.
*/

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    path::Path,
    sync::Mutex,
};

use crate::{
    crash_model::{Model, Tree, View},
    harness::{TestDir, fsync_bin, require},
};

/// Where a message is, for the properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Class {
    /// In a shard of `q`, or in `claimed` (a dead receiver's claim goes back).
    Pending,
    Delayed,
    Dead,
}

/// Each message's place and failed deliveries, by id.
type Places = BTreeMap<u64, (Class, u32)>;

/// A message name's id and failures (`SEQ.UNIQ.FROM.msg+N-L`).
fn parse_name(name: &str) -> Option<(u64, u32)> {
    let seq = name.get(..20)?.parse().ok()?;
    let kind = name.rsplit('.').next()?;
    let kind = kind.split('~').next()?;
    let failed = kind.strip_prefix("msg+").map_or(0, |n| {
        n.split(['-', ','])
            .next()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0)
    });
    Some((seq, failed))
}

/// The messages of mailbox `B` in `tree`.
fn places(tree: &Tree) -> Places {
    (messages(tree).into_iter())
        .map(|(seq, class, failed, _)| (seq, (class, failed)))
        .collect()
}

/// The payload of each message of mailbox `B` in `tree`, by id.
fn contents(tree: &Tree) -> BTreeMap<u64, Vec<u8>> {
    (messages(tree).into_iter())
        .map(|(seq, _, _, path)| {
            (
                seq,
                tree.read(&path).map(|d| d.to_vec()).unwrap_or_default(),
            )
        })
        .collect()
}

/// Each message of mailbox `B` in `tree`: its id, place, failures and path.
fn messages(tree: &Tree) -> Vec<(u64, Class, u32, String)> {
    let mut out = Vec::new();
    let mut put = |dir: &str, entry: &str, name: &str, class| {
        if let Some((seq, failed)) = parse_name(name) {
            out.push((seq, class, failed, format!("{dir}/{entry}")));
        }
    };
    // Level 0's shards, and those of the levels' directories `q/pP` (whose head is no shard).
    for shard in tree.list("B/q") {
        let level = shard.starts_with('p').then(|| format!("B/q/{shard}"));
        let shards = match &level {
            Some(level) => tree
                .list(level)
                .into_iter()
                .filter(|s| s != "head")
                .collect(),
            None => vec![shard.clone()],
        };
        for s in shards {
            let dir = format!("{}/{s}", level.as_deref().unwrap_or("B/q"));
            for name in tree.list(&dir) {
                put(&dir, &name, &name, Class::Pending);
            }
        }
    }
    for name in tree.list("B/claimed") {
        put("B/claimed", &name, &name, Class::Pending);
    }
    for bucket in tree.list("B/delayed") {
        let dir = format!("B/delayed/{bucket}");
        for entry in tree.list(&dir) {
            put(&dir, &entry, entry.get(21..).unwrap_or(""), Class::Delayed);
        }
    }
    for name in tree.list("B/dead") {
        put("B/dead", &name, &name, Class::Dead);
    }
    // A committed batch not yet moved into the queue: the next receiver moves it.
    for batch in tree.list("B/batches") {
        let Some((first, _)) = parse_name(&batch) else {
            continue;
        };
        let dir = format!("B/batches/{batch}");
        for file in tree.list(&dir) {
            if let Ok(i) = file.parse::<u64>() {
                out.push((first + i, Class::Pending, 0, format!("{dir}/{file}")));
            }
        }
    }
    out
}

/// What a crash state must satisfy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Expect {
    /// Every id seen before the crash: a new post's id is above it.
    max_seen: u64,
    /// Messages that must be there: the places allowed, the fewest failures.
    present: BTreeMap<u64, (BTreeSet<Class>, bool, u32)>,
    /// Messages whose success was recorded: must be gone.
    finished: BTreeSet<u64>,
    /// A key whose message is pending.
    key: Option<String>,
    /// What `msg status` says of the finished ones.
    finished_as: &'static str,
    /// The ids of a batch being posted: all of them there, or none.
    batch: BTreeSet<u64>,
    /// What the messages of returned posts (and of the batch being posted) hold.
    payloads: BTreeMap<u64, Vec<u8>>,
}

/// A scenario: the commands run one after another on mailbox `B` (`fsync msg ARGS`), and the
/// key its posts use, if any.
struct Scenario {
    name: &'static str,
    steps: &'static [&'static [&'static str]],
    key: Option<&'static str>,
    /// What `msg status` says of its finished jobs.
    finished_as: &'static str,
}

/// 100 lines: a batch that spans two shards, after one message.
const HUNDRED_LINES: &str = "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n\
    0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n\
    0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n\
    0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n";

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "post",
        // The receive finds nothing, and makes the shard the next post goes to (to watch it).
        steps: &[
            &["recv", "B", "--timeout", "0"],
            &["post", "B", "--data", "a"],
            &["post", "B", "--data", "b"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "delay",
        steps: &[
            &["post", "B", "--data", "a", "--delay", "1h"],
            &["post", "B", "--data", "b"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "receive and acknowledge",
        steps: &[
            &["post", "B", "--data", "a"],
            &["post", "B", "--data", "b"],
            &["recv", "B", "--timeout", "0"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "fail, back off, dead letter, retry, run",
        steps: &[
            &["post", "B", "--data", "a"],
            &[
                "recv",
                "B",
                "--timeout",
                "0",
                "--backoff",
                "0",
                "--",
                "false",
            ],
            &[
                "recv",
                "B",
                "--timeout",
                "0",
                "--backoff",
                "1h",
                "--",
                "false",
            ],
            &["post", "B", "--data", "b"],
            &[
                "recv",
                "B",
                "--timeout",
                "0",
                "--retries",
                "0",
                "--",
                "false",
            ],
            &["retry", "B"],
            &["recv", "B", "--timeout", "0", "--", "true"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "key",
        steps: &[
            &["post", "B", "--data", "a", "--key", "k"],
            &["post", "B", "--data", "b", "--key", "k"],
            &["recv", "B", "--timeout", "0", "--", "true"],
            &["post", "B", "--data", "c", "--key", "k"],
        ],
        key: Some("k"),
        finished_as: "succeeded",
    },
    Scenario {
        name: "priority",
        // The post that makes a level's directory, one into it, a receive that takes from it,
        // and a failed job put back at its level.
        steps: &[
            &["post", "B", "--data", "a"],
            &["post", "B", "--data", "b", "--priority", "2"],
            &["post", "B", "--data", "c", "--priority", "2"],
            &["recv", "B", "--timeout", "0"],
            &[
                "recv",
                "B",
                "--timeout",
                "0",
                "--backoff",
                "0",
                "--",
                "false",
            ],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "batch",
        steps: &[
            &["recv", "B", "--timeout", "0"],
            &["post", "B", "--data", "a"],
            &["post", "B", "--lines", "--data", HUNDRED_LINES],
            &["recv", "B", "--timeout", "0"],
            &["post", "B", "--lines", "--data", "e\nf\n"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "lost delivery",
        steps: &[
            &["post", "B", "--data", "a"],
            &[
                "recv",
                "B",
                "--timeout",
                "0",
                "--",
                "sh",
                "-c",
                "kill -KILL $PPID",
            ],
            &["recv", "B", "--timeout", "0", "--", "true"],
        ],
        key: None,
        finished_as: "succeeded",
    },
    Scenario {
        name: "cancel",
        steps: &[
            &["post", "B", "--data", "a"],
            &["post", "B", "--data", "b", "--delay", "1h"],
            &["post", "B", "--data", "c"],
            &["cancel", "B", "1"],
            &["cancel", "B", "2"],
        ],
        key: None,
        finished_as: "cancelled",
    },
];

/// The system calls recorded: every one that changes a file or directory or makes it durable.
const TRACED: &str = "trace=open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,rename,\
                      renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,\
                      ftruncate,truncate,fallocate,copy_file_range,fsync,fdatasync,syncfs";

/// Run the scenario's commands under strace in a fresh directory: the model of what they did,
/// and where each command's operations end.
fn record(td: &TestDir, s: &Scenario) -> (Model, Vec<usize>) {
    let world = td.join("world");
    std::fs::create_dir(&world).unwrap();
    let root = world.canonicalize().unwrap();
    let root = root.to_str().unwrap();
    let mut model = Model::new();
    let mut ends = Vec::new();
    for (i, step) in s.steps.iter().enumerate() {
        let trace = td.join(&format!("trace.{i}"));
        let out = td
            .cmd("strace")
            .args(["-f", "-y", "-xx", "-s", "65536", "-e", TRACED, "-o"])
            .arg(&trace)
            .arg(fsync_bin())
            .arg("msg")
            .args(step.iter())
            .current_dir(&world)
            .run();
        let killed = step.contains(&"kill -KILL $PPID");
        let code = out.status.code();
        assert!(
            killed || matches!(code, Some(0 | 1 | 75)),
            "{}: step {step:?} failed: {code:?}\n{}",
            s.name,
            out.stderr
        );
        let text = std::fs::read_to_string(&trace).unwrap();
        model.replay(&text, root, root);
        ends.push(model.ops.len());
    }
    (model, ends)
}

/// What a crash after the first `k` operations must keep.
fn expect(s: &Scenario, applied: &[Tree], ends: &[usize], k: usize) -> Expect {
    let done = ends.iter().filter(|&&e| e <= k).count();
    let start = if done == 0 { 0 } else { ends[done - 1] };
    let at_return = places(&applied[start]);
    let window: Vec<Places> = (start..=k).map(|i| places(&applied[i])).collect();
    let max_seen = (0..=k)
        .flat_map(|i| places(&applied[i]).into_keys())
        .max()
        .unwrap_or(0);
    let mut present = BTreeMap::new();
    for (&seq, &(class, failed)) in &at_return {
        let mut allowed: BTreeSet<Class> = BTreeSet::from([class]);
        let (mut gone, mut fewest) = (false, failed);
        for w in &window {
            match w.get(&seq) {
                Some(&(c, f)) => {
                    allowed.insert(c);
                    fewest = fewest.min(f); // `msg retry` forgets failures
                }
                None => gone = true,
            }
        }
        present.insert(seq, (allowed, gone, fewest));
    }
    let finished = ends[..done]
        .iter()
        .flat_map(|&e| places(&applied[e]).into_keys())
        .filter(|seq| window.iter().all(|w| !w.contains_key(seq)))
        .collect();
    // The key is held if the message it names was pending when the last command returned and
    // nothing since touched it.
    let key = s.key.filter(|k| {
        let named = applied[start].read(&format!("B/keys/{k}"));
        let seq = named.and_then(|d| String::from_utf8_lossy(&d).get(..20)?.parse().ok());
        seq.is_some_and(|seq: u64| {
            at_return.contains_key(&seq)
                && window.iter().all(|w| w.get(&seq) == at_return.get(&seq))
        })
    });
    // A batch being posted (the step running at the crash): the ids it queues in the end.
    let running = s.steps.get(done);
    let batch =
        match running.is_some_and(|step| step.contains(&"--lines") || step.contains(&"--null")) {
            true => {
                let before: BTreeSet<u64> = places(&applied[start]).into_keys().collect();
                (places(&applied[ends[done]]).into_keys())
                    .filter(|seq| !before.contains(seq))
                    .collect()
            }
            false => BTreeSet::new(),
        };
    let mut payloads = contents(&applied[start]);
    if !batch.is_empty() {
        let posted = contents(&applied[ends[done]]);
        payloads.extend(posted.into_iter().filter(|(seq, _)| batch.contains(seq)));
    }
    Expect {
        max_seen,
        present,
        finished,
        key: key.map(str::to_string),
        finished_as: s.finished_as,
        batch,
        payloads,
    }
}

/// The ids of the messages in the shards of queue directory `q`.
fn on_disk(q: &Path) -> Vec<u64> {
    let mut ids = Vec::new();
    for shard in std::fs::read_dir(q).into_iter().flatten().flatten() {
        for entry in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Some((seq, _)) = parse_name(&entry.file_name().to_string_lossy()) {
                ids.push(seq);
            }
        }
    }
    ids
}

/// Check crash state `tree` (made under `dir`) against `want`: the violations found.
fn check(td: &TestDir, tree: &Tree, dir: &Path, want: &Expect) -> Vec<String> {
    let mut bad = Vec::new();
    let found = places(tree);
    for (seq, (allowed, gone, failed)) in &want.present {
        match found.get(seq) {
            None if *gone => {}
            None => bad.push(format!("message {seq} lost")),
            Some((class, _)) if !allowed.contains(class) => {
                bad.push(format!(
                    "message {seq} {class:?}, expected one of {allowed:?}"
                ));
            }
            Some((_, f)) if f < failed => {
                bad.push(format!(
                    "message {seq} failed {f} times, had failed {failed}"
                ));
            }
            Some(_) => {}
        }
    }
    let of_batch = want
        .batch
        .iter()
        .filter(|seq| found.contains_key(seq))
        .count();
    if of_batch != 0 && of_batch != want.batch.len() {
        bad.push(format!(
            "{of_batch} of the {} messages of batch {:?} are there",
            want.batch.len(),
            want.batch.first()..=want.batch.last()
        ));
    }
    for (seq, held) in contents(tree) {
        if want
            .payloads
            .get(&seq)
            .is_some_and(|posted| *posted != held)
        {
            bad.push(format!("message {seq} holds {held:?}, not what was posted"));
        }
    }
    for seq in &want.finished {
        if found.contains_key(seq) {
            bad.push(format!(
                "message {seq} is back after its success was recorded"
            ));
        }
    }
    // What fsync sees: the delayed and dead letters it lists, every pending message received
    // once, and the next id.
    let mailbox = dir.join("B");
    let fsync = |args: &[&str]| {
        let out = td.fsync(["msg"]).args(args).run();
        (out.status.code(), out.stdout, out.stderr)
    };
    let b = mailbox.to_str().unwrap();
    let want_of = |class| -> BTreeSet<u64> {
        found
            .iter()
            .filter(|(_, (c, _))| *c == class)
            .map(|(s, _)| *s)
            .collect()
    };
    for seq in &want.finished {
        let (_, out, err) = fsync(&["status", b, "--json", &seq.to_string()]);
        let state = serde_json::from_str::<serde_json::Value>(&out)
            .ok()
            .and_then(|v| Some(v["state"].as_str()?.to_string()));
        let lost_success = want.finished_as == "succeeded" && state.as_deref() == Some("unknown");
        if state.as_deref() != Some(want.finished_as) && !lost_success {
            bad.push(format!(
                "message {seq} finished, and msg status says {state:?}: {err}"
            ));
        }
    }
    if let Some(key) = &want.key {
        let (_, _, err) = fsync(&["post", b, "--data", "p", "--key", key, "-v"]);
        if !err.contains("still pending") {
            bad.push(format!(
                "a post with key {key} was queued while its message is pending: {err}"
            ));
        }
    }
    // A mailbox made up to its queue's directory is one (before it, `msg list` says it is not).
    if mailbox.join("q").exists() {
        let (code, out, err) = fsync(&["list", b, "--json"]);
        if code == Some(0) {
            let json: serde_json::Value = serde_json::from_str(&out).unwrap();
            for (field, class) in [("delayed", Class::Delayed), ("dead", Class::Dead)] {
                let listed: BTreeSet<u64> = json[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|m| parse_name(m["name"].as_str()?).map(|(s, _)| s))
                    .collect();
                if listed != want_of(class) {
                    bad.push(format!(
                        "msg list shows {field} {listed:?}, the state holds {:?}",
                        want_of(class)
                    ));
                }
            }
        } else {
            bad.push(format!("msg list failed: {err}"));
        }
        let mut received = Vec::new();
        let many = want_of(Class::Pending).len() > 20; // a batch's
        loop {
            let (code, out, err) = fsync(&[
                "recv",
                b,
                "--timeout",
                "0",
                "--",
                "printenv",
                "FSYNC_MSG_ID",
            ]);
            match code {
                Some(0) => received.push(out.trim().parse::<u64>().unwrap()),
                Some(75) => break,
                _ => {
                    bad.push(format!("msg recv failed: {err}"));
                    break;
                }
            }
            if received.len() > 20 && !many {
                bad.push("msg recv goes on and on".to_string());
                break;
            }
            if received.len() == 3 && many {
                // The rest are counted where the receives left them: in their shards.
                received.extend(on_disk(&mailbox.join("q")));
                break;
            }
        }
        let once: BTreeSet<u64> = received.iter().copied().collect();
        if once.len() != received.len() || once != want_of(Class::Pending) {
            bad.push(format!(
                "received {received:?}, the state holds {:?}",
                want_of(Class::Pending)
            ));
        }
    }
    let (_, _, err) = fsync(&["post", b, "--data", "p", "-v"]);
    let id = err
        .split_once("queued message ")
        .and_then(|(_, rest)| rest.split(' ').next()?.parse::<u64>().ok());
    match id {
        Some(id) if id > want.max_seen => {}
        _ => bad.push(format!(
            "id reused: a post after the crash says {err:?}; ids up to {} were seen",
            want.max_seen
        )),
    }
    bad
}

/// The states checked and the violations found in one scenario: (prefixes, states, violations).
fn check_scenario(td: &TestDir, s: &Scenario) -> (usize, usize, Vec<String>) {
    let (model, ends) = record(td, s);
    let n = model.ops.len();
    let applied: Vec<Tree> = (0..=n).map(|k| model.crash(k, View::Applied)).collect();
    let mut seen = HashSet::new();
    let mut states = Vec::new();
    for k in 0..=n {
        let want = expect(s, &applied, &ends, k);
        for view in [View::PerDirectory, View::Ordered, View::Applied] {
            let tree = model.crash(k, view);
            // What is in `B/tmp` is garbage to any state (fsync never reads it but to remove
            // a batch staged there): states differing only there are one.
            let walk = tree.walk(&model.nodes);
            let walk: Vec<_> = (walk.iter())
                .filter(|(p, _)| !p.starts_with("/B/tmp/"))
                .collect();
            let key = format!("{walk:?}{want:?}");
            if seen.insert(key) {
                states.push((k, view, tree, want.clone()));
            }
        }
    }
    let count = states.len();
    let violations = Mutex::new(Vec::new());
    let next = Mutex::new(states.into_iter().enumerate());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let Some((i, (k, view, tree, want))) = next.lock().unwrap().next() else {
                        break;
                    };
                    let dir = td.join(&format!("state.{i}"));
                    std::fs::create_dir(&dir).unwrap();
                    tree.materialise(&model.nodes, &dir);
                    for v in check(td, &tree, &dir, &want) {
                        let ctx = format!("{}: crash after op {k} of {n} ({view:?}): {v}", s.name);
                        violations.lock().unwrap().push(ctx);
                    }
                    let _ = std::fs::remove_dir_all(&dir);
                }
            });
        }
    });
    (n + 1, count, violations.into_inner().unwrap())
}

#[test]
fn every_crash_state_of_every_mailbox_step_keeps_ids_posts_and_jobs() {
    require("strace", "strace");
    let mut all = Vec::new();
    let (mut prefixes, mut states) = (0, 0);
    // `FSYNC_CRASH_SCENARIO=batch` checks that scenario alone (while working on it).
    let only = std::env::var("FSYNC_CRASH_SCENARIO").ok();
    for s in SCENARIOS
        .iter()
        .filter(|s| only.as_ref().is_none_or(|o| o == s.name))
    {
        let td = TestDir::new();
        let (p, c, v) = check_scenario(&td, s);
        eprintln!(
            "crash states: {}: {p} prefixes, {c} states, {} violations",
            s.name,
            v.len()
        );
        prefixes += p;
        states += c;
        all.extend(v);
    }
    eprintln!(
        "crash states: {} scenarios, {prefixes} prefixes, {states} states checked, {} violations",
        SCENARIOS.len(),
        all.len()
    );
    assert!(
        all.is_empty(),
        "{} violations:\n{}",
        all.len(),
        all.join("\n")
    );
}
