/*!
Chaos: many real processes loop acquire -> work -> release on one primitive while a killer
SIGKILLs random holders, waiters, and `fsync` processes whose command still runs; an independent
witness (an `O_APPEND` log of enter/leave marks written by the commands themselves, replayed
here) counts violations: two mutex holders, more than N in a semaphore, a writer with anyone,
two groups inside. Messages: posters and receivers killed at random instants; every message whose
post returned 0 is received, none partial, duplicates only from killed receivers. Jobs (`msg recv
-- COMMAND`): workers killed with their command, or alone (`A pid`: the command runs on); every
job succeeds exactly once or reaches the dead letters, none is lost, none runs twice at once and
none runs after its success.

Scale: `FSYNC_CHAOS=N` critical sections per primitive, N/2 posts for messages (default 1000,
which CI runs in about 20 s; the full run is `FSYNC_CHAOS=10000 cargo test --release --test
integration chaos -- --test-threads 1`, about 2 minutes, plus `FSYNC_CHAOS=28000 ... chaos_messages`
for 10,000 delivered messages).

How a kill stays observable: the killer first stops the victim's whole process group (the
`fsync` process and its command) with SIGSTOP, waits until every member is stopped, writes
`K pid...` to the log, and only then sends SIGKILL. A stopped holder still holds its lock, so
the `K` mark always precedes the release its death causes, and the replay knows who left.
*/

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fs::OpenOptions,
    io::{Read, Write},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill, killpg},
    unistd::Pid,
};

use crate::harness::{OutputWithin, TestDir, fsync_bin};

fn scale() -> usize {
    std::env::var("FSYNC_CHAOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// A tiny deterministic generator (no dependency, reproducible per seed).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The process-group ids of the iterations running now.
pub(crate) type Running = Arc<Mutex<HashSet<i32>>>;

/// SIGKILL one of the worker process groups `running`, at random: the whole group, frozen first
/// (`K pids` in `log`), or its fsync process alone (`A pid`), its jobs running on in its group,
/// which is never a victim again (its K would not name the worker whose runs it ends).
/// `Some(true)` for a group, `Some(false)` for fsync alone, `None` if none was running.
pub(crate) fn kill_a_worker(running: &Running, log: &Path, rng: &mut Rng) -> Option<bool> {
    let victims: Vec<i32> = running.lock().unwrap().iter().copied().collect();
    if victims.is_empty() {
        return None;
    }
    let victim = victims[rng.below(victims.len())];
    if rng.below(2) == 0 {
        freeze_and_kill(victim, log);
        return Some(true);
    }
    running.lock().unwrap().remove(&victim);
    append(log, &format!("A {victim}\n"));
    let _ = kill(Pid::from_raw(victim), Signal::SIGKILL);
    Some(false)
}

/// Members of process group `pgid`, from /proc.
fn group_members(pgid: i32) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2].parse::<i32>() == Ok(pgid) {
            out.push((pid, fields[0].chars().next().unwrap_or('?')));
        }
    }
    out
}

/// Stop the group, wait until all of it is stopped, log `K pids`, then kill it.
pub(crate) fn freeze_and_kill(pgid: i32, log: &Path) {
    if killpg(Pid::from_raw(pgid), Signal::SIGSTOP).is_err() {
        return; // already gone
    }
    // Its jobs lead groups of their own: stopped and killed with it. (Found once it is
    // stopped: it starts no other meanwhile.)
    let jobs: Vec<i32> = (crate::harness::job_groups_of(pgid as u32).into_iter())
        .map(|g| g as i32)
        .collect();
    for &job in &jobs {
        let _ = killpg(Pid::from_raw(job), Signal::SIGSTOP);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let members = loop {
        let mut m = group_members(pgid);
        m.extend(jobs.iter().flat_map(|&g| group_members(g)));
        if m.iter().all(|&(pid, state)| {
            matches!(state, 'T' | 't' | 'Z' | 'X')
                // A parent in vfork (posix_spawn) waits for its stopped child to exec: it
                // cannot run until then, and it never stops itself (waiting for it stalled
                // every such kill for the whole deadline, the other workers with it).
                || (state == 'D'
                    && std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                        .is_ok_and(|w| w.contains("clone") || w.contains("vfork")))
        }) || Instant::now() > deadline
        {
            break m;
        }
        // Not yield_now: a scan of /proc is costly, and the processes need a CPU to stop.
        thread::sleep(Duration::from_millis(1));
    };
    let pids: Vec<String> = members.iter().map(|(p, _)| p.to_string()).collect();
    append(log, &format!("K {}\n", pids.join(" ")));
    for group in std::iter::once(pgid).chain(jobs) {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        let _ = killpg(Pid::from_raw(group), Signal::SIGCONT);
    }
}

pub(crate) fn append(log: &Path, line: &str) {
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .expect("open log");
    f.write_all(line.as_bytes()).expect("append log");
}

/// Counts the leave marks in the log, reading only what was appended since the last call: at
/// full scale the log grows to tens of thousands of lines, and re-reading it whole in the
/// killer's loop made the run quadratic (and kept a CPU busy that the workers needed).
#[derive(Default)]
struct LeaveCounter {
    offset: u64,
    count: usize,
    /// An incomplete last line, kept until its end arrives.
    tail: Vec<u8>,
}

impl LeaveCounter {
    fn count(&mut self, log: &std::path::Path) -> usize {
        use std::io::{Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(log) else {
            return self.count;
        };
        let mut new = std::mem::take(&mut self.tail);
        let before = new.len();
        if f.seek(SeekFrom::Start(self.offset)).is_ok() {
            let _ = f.read_to_end(&mut new);
        }
        self.offset += (new.len() - before) as u64;
        let complete = new.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.count += new[..complete]
            .split(|&b| b == b'\n')
            .filter(|l| l.first() == Some(&b'-'))
            .count();
        self.tail = new[complete..].to_vec();
        self.count
    }
}

/// One chaos run: `workers` threads start `fsync` iterations built by `command(i, rng)` until
/// `sections` leave marks are in the log; a killer acts after every few completions.
fn chaos(
    t: &TestDir,
    sections: usize,
    workers: usize,
    command: impl Fn(usize, &mut Rng) -> Vec<String> + Sync,
) -> String {
    let log = t.join("log");
    append(&log, "");
    let running: Running = Arc::default();
    let done = AtomicBool::new(false);
    let completed = AtomicUsize::new(0);
    let kills = AtomicUsize::new(0);
    let mut counter = LeaveCounter::default();
    let mut leaves = || counter.count(&log);
    thread::scope(|s| {
        for w in 0..workers {
            let (running, done, completed, command, log) =
                (&running, &done, &completed, &command, &log);
            s.spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1));
                let mut i = 0;
                while !done.load(Ordering::SeqCst) {
                    let args = command(w * 1_000_000 + i, &mut rng);
                    i += 1;
                    let mut cmd = Command::new(fsync_bin());
                    cmd.args(&args)
                        .current_dir(log.parent().unwrap())
                        .env("LOG", log)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .process_group(0);
                    let mut child = cmd.spawn().expect("spawn fsync");
                    let pgid = child.id() as i32;
                    running.lock().unwrap().insert(pgid);
                    let mut err = String::new();
                    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                    let status = child.wait().expect("wait");
                    running.lock().unwrap().remove(&pgid);
                    // Killed ones die by signal; everything else must have succeeded.
                    if status.code().is_some() {
                        assert!(status.success(), "fsync {args:?} failed: {status}: {err}");
                    }
                    completed.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // Whatever happens below (a failed assertion too), the workers stop.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let _stop = StopOnDrop(&done);
        // The killer: after every few completed iterations, one victim, chosen at random.
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // Fail only when nothing completes for a long while (a deadlock), however long the run.
        let mut last_progress = (0, Instant::now());
        let mut next_kill = 3;
        while leaves() < sections {
            let done_now = completed.load(Ordering::SeqCst);
            if done_now != last_progress.0 {
                last_progress = (done_now, Instant::now());
            }
            assert!(
                last_progress.1.elapsed() < Duration::from_mins(2),
                "chaos run made no progress for 2 minutes"
            );
            if done_now < next_kill {
                thread::sleep(Duration::from_millis(2)); // waiting for progress to observe
                continue;
            }
            next_kill += 2 + rng.below(4);
            let victims: Vec<i32> = running.lock().unwrap().iter().copied().collect();
            if victims.is_empty() {
                thread::sleep(Duration::from_millis(2));
                continue;
            }
            let pgid = victims[rng.below(victims.len())];
            if rng.below(3) == 0 {
                // Kill only fsync: its command keeps the lock and finishes on its own.
                let _ = kill(Pid::from_raw(pgid), Signal::SIGKILL);
            } else {
                freeze_and_kill(pgid, &log);
            }
            kills.fetch_add(1, Ordering::SeqCst);
        }
        done.store(true, Ordering::SeqCst);
    });
    // Stragglers (commands whose fsync was killed) finish their marks before we replay.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('+'))
        .count()
        > std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('+') && !l.is_empty())
            .count()
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "chaos: {} sections, {} kills",
        leaves(),
        kills.load(Ordering::SeqCst)
    );
    assert!(kills.load(Ordering::SeqCst) > 0, "the killer never struck");
    std::fs::read_to_string(&log).unwrap()
}

/// Replay the log; `ok(inside)` judges each state after an entry. Returns the violations.
fn replay(log: &str, ok: impl Fn(&HashMap<String, String>) -> bool) -> Vec<String> {
    let mut inside: HashMap<String, String> = HashMap::new();
    let mut violations = Vec::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"+") => {
                inside.insert(words[2].to_string(), words[1].to_string());
                if !ok(&inside) {
                    violations.push(format!("{line}  with inside: {inside:?}"));
                }
            }
            Some(&"-") => {
                inside.remove(words[2]);
            }
            Some(&"K") => {
                for p in &words[1..] {
                    inside.remove(*p);
                }
            }
            _ => {}
        }
    }
    violations
}

fn marks(role: &str) -> String {
    format!("echo \"+ {role} $$\" >> \"$LOG\"; echo \"- {role} $$\" >> \"$LOG\"")
}

fn args(parts: &[&str], script: String) -> Vec<String> {
    let mut v: Vec<String> = parts.iter().map(std::string::ToString::to_string).collect();
    v.extend(["--".to_string(), "sh".to_string(), "-c".to_string(), script]);
    v
}

#[test]
fn chaos_mutex_never_two_holders() {
    let t = TestDir::new();
    let log = chaos(&t, scale(), 4, |_, _| {
        args(&["mutex", "run", "L"], marks("M"))
    });
    let v = replay(&log, |inside| inside.len() <= 1);
    assert!(
        v.is_empty(),
        "{} violations, first: {:?}",
        v.len(),
        &v[..v.len().min(3)]
    );
}

#[test]
fn chaos_semaphore_never_more_than_n() {
    let t = TestDir::new();
    let log = chaos(&t, scale(), 5, |_, _| {
        args(&["sem", "run", "S", "--slots", "2"], marks("S"))
    });
    let v = replay(&log, |inside| inside.len() <= 2);
    assert!(
        v.is_empty(),
        "{} violations, first: {:?}",
        v.len(),
        &v[..v.len().min(3)]
    );
}

#[test]
fn chaos_swmr_writer_alone() {
    let t = TestDir::new();
    let log = chaos(&t, scale(), 4, |_, rng| match rng.below(3) {
        0 => args(&["swmr", "write", "L"], marks("W")),
        _ => args(&["swmr", "read", "L"], marks("R")),
    });
    let v = replay(&log, |inside| {
        !inside.values().any(|r| r == "W") || inside.len() == 1
    });
    assert!(
        v.is_empty(),
        "{} violations, first: {:?}",
        v.len(),
        &v[..v.len().min(3)]
    );
}

#[test]
fn chaos_grouplock_one_group_at_a_time() {
    let t = TestDir::new();
    let log = chaos(&t, scale(), 4, |_, rng| {
        let g = if rng.below(2) == 0 { "A" } else { "B" };
        args(&["grouplock", "run", "G", "--group", g], marks(g))
    });
    let v = replay(&log, |inside| {
        inside.values().collect::<HashSet<_>>().len() <= 1
    });
    assert!(
        v.is_empty(),
        "{} violations, first: {:?}",
        v.len(),
        &v[..v.len().min(3)]
    );
}

/// A payload that proves itself whole: its id, then filler, then the id again.
fn payload(id: usize) -> Vec<u8> {
    let mut p = format!("begin {id}\n").into_bytes();
    p.extend(std::iter::repeat_n(b'x', 1000 + (id * 7919) % 150_000));
    p.extend(format!("\nend {id}\n").into_bytes());
    p
}

fn parse_payload(p: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(p).ok()?;
    let id: usize = text
        .strip_prefix("begin ")?
        .split('\n')
        .next()?
        .parse()
        .ok()?;
    (p == payload(id).as_slice()).then_some(id)
}

#[test]
fn chaos_messages_survive_killed_posters_and_receivers() {
    let t = TestDir::new();
    let n = (scale() / 2).max(40);
    let mailbox: PathBuf = t.join("box");
    let posted: Mutex<BTreeMap<usize, bool>> = Mutex::default(); // id -> post returned 0
    let received: Mutex<Vec<Vec<u8>>> = Mutex::default();
    let killed_receivers = AtomicUsize::new(0);
    let posting_done = AtomicBool::new(false);
    let mut rng = Rng(77);
    thread::scope(|s| {
        // Receivers: two loops taking messages; a third of them are killed mid-transfer.
        for r in 0..2 {
            let (mailbox, received, killed, posting_done) =
                (&mailbox, &received, &killed_receivers, &posting_done);
            s.spawn(move || {
                let mut rng = Rng(1000 + r);
                loop {
                    let mut child = Command::new(fsync_bin())
                        .args(["msg", "recv", "-t", "1s"])
                        .arg(mailbox)
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("spawn recv");
                    let mut out = child.stdout.take().unwrap();
                    let kill_after = (rng.below(3) == 0).then(|| 1 + rng.below(40_000));
                    let mut data = Vec::new();
                    let mut buf = [0u8; 8192];
                    let mut was_killed = false;
                    loop {
                        let k = out.read(&mut buf).unwrap_or(0);
                        if k == 0 {
                            break;
                        }
                        data.extend_from_slice(&buf[..k]);
                        if !was_killed && kill_after.is_some_and(|at| data.len() >= at) {
                            let _ = child.kill(); // what it wrote before dying stays in the pipe
                            was_killed = true;
                        }
                    }
                    let status = child.wait().unwrap();
                    if was_killed {
                        killed.fetch_add(1, Ordering::SeqCst);
                        // Whole: it was delivered (and may come again); partial: it returns.
                        if parse_payload(&data).is_some() {
                            received.lock().unwrap().push(data);
                        }
                        continue;
                    }
                    match status.code() {
                        Some(0) => received.lock().unwrap().push(data),
                        Some(75) if posting_done.load(Ordering::SeqCst) => break,
                        Some(75) => {}
                        other => panic!("recv failed: {other:?}"),
                    }
                }
            });
        }
        // Posters: one process per message; some killed at a random instant of the post.
        for id in 0..n {
            let mut child = Command::new(fsync_bin())
                .args(["msg", "post"])
                .arg(&mailbox)
                .stdin(Stdio::piped())
                .spawn()
                .expect("spawn post");
            let data = payload(id);
            let mut stdin = child.stdin.take().unwrap();
            let cut = (rng.below(4) == 0).then(|| rng.below(data.len()));
            match cut {
                Some(at) => {
                    let _ = stdin.write_all(&data[..at]);
                    let _ = child.kill(); // dies mid-payload
                }
                None => {
                    stdin.write_all(&data).unwrap();
                }
            }
            drop(stdin);
            let status = child.wait().unwrap();
            posted.lock().unwrap().insert(id, status.success());
        }
        posting_done.store(true, Ordering::SeqCst);
    });
    // Whatever is left (claims of killed receivers return to the queue) is drained now.
    loop {
        let out = Command::new(fsync_bin())
            .args(["msg", "recv", "-n"])
            .arg(&mailbox)
            .output_within_deadline();
        match out.status.code() {
            Some(0) => received.lock().unwrap().push(out.stdout),
            Some(75) => break,
            other => panic!("drain failed: {other:?}"),
        }
    }
    let posted = posted.into_inner().unwrap();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for p in received.into_inner().unwrap() {
        let id = parse_payload(&p)
            .unwrap_or_else(|| panic!("a partial or foreign message of {} bytes", p.len()));
        *counts.entry(id).or_default() += 1;
    }
    for (id, ok) in &posted {
        if *ok {
            assert!(
                counts.contains_key(id),
                "message {id} was posted (exit 0) but never received"
            );
        }
    }
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    let killed = killed_receivers.load(Ordering::SeqCst);
    assert!(
        duplicates <= killed,
        "{duplicates} duplicates but only {killed} receivers were killed"
    );
    eprintln!(
        "messages: {} posted ok, {} received, {duplicates} duplicates, {killed} receivers killed",
        posted.values().filter(|&&ok| ok).count(),
        counts.len()
    );
}

/// Jobs (`msg recv --retries 3 BOX -- COMMAND`): 4 worker loops take the queued jobs while a
/// killer either freezes and SIGKILLs a random worker with its command (`K pids`) or SIGKILLs
/// the worker's fsync process alone (`A pid`), its command running on. The commands log
/// `S id w` when they start and `D id w` when they are done (`w` the worker's process group,
/// whose leader is the fsync process, their parent; each job leads a group of its own, frozen
/// and killed with its worker's). A job is acknowledged by its worker after `D`, so a run
/// may follow a `D` only if that worker was killed after it or before it (before it could
/// acknowledge); and no run may start while another run of the same job goes on (a worker
/// killed alone leaves its job holding the message). In the end every job succeeded exactly
/// once (a `D` whose worker lived on) or lies in the dead letters, having been lost 6 times
/// (or more: a worker killed as it buries one counts too); none is lost and none runs after
/// its success. (Mutant answered: a job that does not inherit its claim ran twice at once.)
#[test]
fn chaos_jobs_survive_killed_workers_and_run_once_after_success() {
    chaos_jobs(&["recv", "-n"], 4);
}

/// The same with `msg work -j 2 --until-empty`: 2 worker processes of two jobs each, a kill
/// taking both of a process's jobs with it.
#[test]
fn chaos_jobs_survive_killed_work_pools_and_run_once_after_success() {
    chaos_jobs(&["work", "-j", "2", "--until-empty"], 2);
}

/// Jobs taken by `processes` worker loops of `fsync msg VERB...` (see the first test above).
fn chaos_jobs(verb: &[&str], processes: usize) {
    let t = TestDir::new();
    let n = scale();
    let mailbox = t.join("jobs");
    let log = t.join("log");
    for id in 0..n {
        let out = Command::new(fsync_bin())
            .args(["msg", "post"])
            .arg(&mailbox)
            .args(["--data", &id.to_string()])
            .output_within_deadline();
        assert!(out.status.success(), "post {id}: {out:?}");
    }
    let job = format!(
        "id=$(cat); w=$W; echo \"S $id $w\" >> {log}; \
         sleep 0.00$((id % 4)); echo \"D $id $w\" >> {log}",
        log = log.display()
    );
    let running: Running = Arc::default();
    let done = AtomicBool::new(false);
    let killed = AtomicUsize::new(0);
    thread::scope(|s| {
        for _ in 0..processes {
            let (mailbox, job, running, done) = (&mailbox, &job, &running, &done);
            s.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    // The worker knows its pid: `W`, its shell's, which exec keeps (its jobs' `$PPID` is 1
                    // if it was killed before they started).
                    let child = Command::new("sh")
                        .args(["-c", "export W=$$; exec \"$@\"", "sh"])
                        .arg(fsync_bin())
                        .arg("msg")
                        .args(verb)
                        .args(["--retries", "3"])
                        .arg(mailbox)
                        .args(["--", "sh", "-c", job])
                        .process_group(0)
                        .spawn()
                        .expect("spawn worker");
                    let pgid = child.id() as i32;
                    running.lock().unwrap().insert(pgid);
                    let out = child.wait_with_output().unwrap();
                    running.lock().unwrap().remove(&pgid);
                    // `recv -n`: nothing queued (75); `work --until-empty`: nothing left (0).
                    let idle = if verb[0] == "work" { 0 } else { 75 };
                    if out.status.code() == Some(idle) {
                        // Done once nothing is queued or being received either.
                        let list = Command::new(fsync_bin())
                            .args(["msg", "list", "--json"])
                            .arg(mailbox)
                            .output_within_deadline();
                        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
                        if v["count"] == 0 && v["claimed"] == 0 {
                            done.store(true, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
        let (running, done, killed, log) = (&running, &done, &killed, &log);
        s.spawn(move || {
            let mut rng = Rng(4242);
            while !done.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(2 + rng.below(8) as u64));
                if kill_a_worker(running, log, &mut rng).is_some() {
                    killed.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    });
    let list = Command::new(fsync_bin())
        .args(["msg", "list", "--json"])
        .arg(&mailbox)
        .output_within_deadline();
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let dead: HashSet<u64> = v["dead"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap()[..20].parse().unwrap())
        .collect();
    // Replay the log: which runs were acknowledged, and that none ran after. A `D` whose
    // worker was killed after it may or may not have been acknowledged (the kill may land
    // between the acknowledgement and the worker's exit): a later run of the job says it was
    // not; no later run says it was (or the job went to the dead letters unrun).
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut acked: HashMap<usize, usize> = HashMap::new(); // id -> acknowledged runs
    let mut pending: HashMap<usize, (String, bool)> = HashMap::new(); // id -> (worker, killed)
    // Runs started and neither done nor killed with their worker's group: id -> worker. (A
    // worker killed alone, `A`, leaves its job running: its run stays open until `D`.)
    let mut open: HashMap<usize, String> = HashMap::new();
    // Workers killed alone: a run they started that ends later is acknowledged by nobody.
    let mut gone: HashSet<String> = HashSet::new();
    let mut violations = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[0] {
            "K" | "A" => {
                for (worker, killed) in pending.values_mut() {
                    *killed |= parts[1..].contains(&worker.as_str());
                }
                match parts[0] {
                    "K" => open.retain(|_, worker| !parts[1..].contains(&worker.as_str())),
                    _ => drop(gone.insert(parts[1].to_string())),
                }
            }
            "S" => {
                let id: usize = parts[1].parse().unwrap();
                if let Some((_, false)) = pending.remove(&id) {
                    *acked.entry(id).or_default() += 1;
                }
                if acked.get(&id).is_some_and(|&a| a > 0) {
                    violations.push(format!("job {id} ran again after it succeeded: {line}"));
                }
                if let Some(first) = open.insert(id, parts[2].to_string()) {
                    violations.push(format!(
                        "job {id} ran twice at once (its run under worker {first} goes on): {line}"
                    ));
                }
            }
            "D" => {
                let id = parts[1].parse().unwrap();
                open.remove(&id);
                let worker = parts[2].to_string();
                let unacknowledged = gone.contains(&worker);
                pending.insert(id, (worker, unacknowledged));
            }
            other => panic!("a foreign log line {other:?}"),
        }
    }
    for (id, (_, killed)) in pending {
        if !killed || !dead.contains(&(id as u64 + 1)) {
            *acked.entry(id).or_default() += 1;
        }
    }
    // Buried once 4 deliveries failed (no job fails here), or 6 were lost with their
    // workers: by the receiver that finds it so; one killed between taking it and burying it
    // counts once more (its claim looks like any other dead one).
    for m in v["dead"].as_array().unwrap() {
        assert!(
            m["failed"].as_u64().is_some_and(|f| f >= 4)
                || m["lost"].as_u64().is_some_and(|l| l >= 6),
            "a dead letter after fewer than 4 failures or 6 losses: {m}"
        );
    }
    for id in 0..n {
        let seq = id as u64 + 1; // posted in order: job id is sequence number - 1
        match (acked.get(&id).copied().unwrap_or(0), dead.contains(&seq)) {
            (1, false) | (0, true) => {}
            (runs, dead) => violations.push(format!(
                "job {id}: {runs} acknowledged runs, {} in the dead letters",
                if dead { "and" } else { "not" }
            )),
        }
    }
    assert_eq!(v["count"], 0, "jobs left queued: {v}");
    assert!(
        violations.is_empty(),
        "{} goofups:\n{}",
        violations.len(),
        violations.join("\n")
    );
    eprintln!(
        "jobs: {n}, {} workers killed, {} dead letters",
        killed.load(Ordering::SeqCst),
        dead.len()
    );
}
