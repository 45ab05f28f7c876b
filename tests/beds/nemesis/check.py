#!/usr/bin/env python3
"""The nemesis run's checker: reads what the clients logged and what the nemesis did, and
reports, per fault kind, every broken promise.

    check.py LOGDIR [--json FILE]      the table for a run of run.py (exit 1 on a broken promise)
    check.py --self-test               the checker against made-up histories (exit 1 if it errs)

What the clients log (one line per step, in files of their own on a local disk the nemesis
never touches; every host shares the machine's clock, so times compare exactly):

    mutex-H.log, sem-H.log   S|W|E KIND HOST PID TOKEN NS   a critical section's start, each
                             write to the resource, its end (TOKEN: FSYNC_FENCE; NS: the
                             real-time clock in nanoseconds)
    jobs-H.log               S|W|E job HOST PID ID NS       a job's start, its writes, its end
    posted.log               P ID NS                        a job posted (its id, once queued)
    status.json              {ID: "succeeded" | ...}        each posted job's status at the end
    faults.log               {"kind", "host", "start", "end"} one JSON object a line
    event-H.log              K HOST NS                      a `wait --reset` that consumed the event
    signal-H.log             G HOST NS, then R HOST NS SET  a signal's call begun at NS, then what
                                                            it said: SET 1 if the event was set
                                                            already (a signal with no R may have
                                                            set it)

A critical section runs from its S to its last line (a command stopped when its lock was lost
writes no E): that is what a resource it writes to sees. The checks:

- mutex: no two critical sections overlap; tokens grow with each start (never repeat, never
  go back); a resource that keeps the largest token it has seen and refuses smaller ones
  (fencing) never accepts a write of a holder whose lock was given to another;
- sem (2 slots): never more than 2 at once;
- events: never more wakes of `wait --reset` than signals begun before them that may have set
  the event (each signal wakes exactly one waiter);
- jobs: none lost (posted, never finished with success), none run twice at once, none started
  again after a run that ended with success (allowed where a fault could take the worker away
  between the job's end and the record of it: delivery is at least once for a lost receiver).

A violation is put down to every fault under way within SETTLE before it (a host's
lock is given away by the server only after its timeout, and a lease runs out after it); one
with none under way is put down to "none". What fsync promises under each kind is PROMISES'.
"""
import argparse
import collections
import json
import os
import statistics
import sys

# ns: twice the server's timeout (bed.json, which run.py writes; else GlusterFS's 10 s): the
# timeout, a lease, and room.
SETTLE = 20e9

# What fsync promises under each fault kind: "none" (no overlap of critical sections, no job
# run twice at once), or "fenced" (a critical section may overlap a later one, but the later
# holder's token is larger, so a resource that checks tokens refuses the stale writes).
PROMISES = {
    "none": "none",
    "partition": "none",       # link down: the lease stops the command before the server frees the lock
    "blackhole": "none",       # cut off the bridge, link up: the same, the packets vanish
    # SIGSTOP of fsync: its lock stays held, but its lease is watched by nobody meanwhile: cut
    # off then, the command runs on past the server's timeout.
    "pause-fsync": "fenced",
    "pause-command": "none",   # SIGSTOP of the command: the lock stays held meanwhile
    "freeze-host": "fenced",   # the whole host frozen past the server's timeout: a paused holder
    # SIGKILL of fsync: the command holds the lock it inherited, unwatched from then on (the
    # same as a paused fsync, for good).
    "kill-holder": "fenced",
    "kill-host": "none",       # SIGKILL of every process of the host: their locks go with them
    "restart-client": "fenced",  # the FUSE client killed: the server frees its locks at once
    "restart-mds": "none",     # CephFS: the MDS restarted; its clients reclaim their locks
}


def read_lines(path):
    try:
        with open(path) as fh:
            return [line.split() for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def sections(lines):
    """The critical sections of `lines` (S/W/E KIND HOST PID TOKEN NS): a dict per section."""
    open_ = {}
    done = []
    for step, kind, host, pid, token, ns in lines:
        key = (host, pid, token)
        ns, token = int(ns), int(token)
        if step == "S":
            if key in open_:
                done.append(open_.pop(key))
            open_[key] = {"kind": kind, "host": host, "pid": pid, "token": token,
                          "start": ns, "end": ns, "writes": [], "ended": False}
        elif key in open_:
            s = open_[key]
            s["end"] = max(s["end"], ns)
            if step == "W":
                s["writes"].append(ns)
            else:
                s["ended"] = True
                done.append(open_.pop(key))
    done.extend(open_.values())
    return sorted(done, key=lambda s: s["start"])


def overlaps(secs):
    """Each pair of sections that overlap: (earlier, later), by start."""
    out = []
    active = []
    for s in secs:
        active = [a for a in active if a["end"] >= s["start"]]
        out.extend((a, s) for a in active)
        active.append(s)
    return out


def most_at_once(secs):
    """The largest number of sections under way at one instant, and the instants it was over 2."""
    events = sorted([(s["start"], 1) for s in secs] + [(s["end"], -1) for s in secs],
                    key=lambda e: (e[0], -e[1]))
    n = peak = 0
    over = []
    for t, d in events:
        n += d
        peak = max(peak, n)
        if d == 1 and n > 2:
            over.append(t)
    return peak, over


def token_faults(secs):
    """Starts whose token is not larger than the one before it: (section, previous)."""
    out = []
    for prev, s in zip(secs, secs[1:]):
        if s["token"] <= prev["token"]:
            out.append((s, prev))
    return out


def fenced_accepts(secs):
    """Writes a token-checking resource would accept from a holder whose lock a later holder
    (a larger token) had already written with: must be none."""
    writes = sorted((t, s["token"], id(s)) for s in secs for t in [s["start"]] + s["writes"])
    top = None
    bad = []
    for t, token, who in writes:
        if top is not None and token < top[0]:
            continue  # refused: a stale holder, fenced off
        if top is not None and token == top[0] and who != top[1]:
            bad.append(t)  # the same token from another holder: the fence cannot tell
        top = (token, who)
    return bad


def jobs(logdir, hosts):
    """Each job's runs (its lines are a section's: S/W/E job HOST PID ID NS), the ids posted,
    and each one's status at the end."""
    runs = collections.defaultdict(list)
    for h in hosts:
        for r in sections(read_lines(os.path.join(logdir, "jobs-%s.log" % h))):
            runs[str(r["token"])].append(r)
    posted = [line[1] for line in read_lines(os.path.join(logdir, "posted.log"))]
    try:
        with open(os.path.join(logdir, "status.json")) as fh:
            status = json.load(fh)
    except FileNotFoundError:
        status = {}
    return runs, posted, status


def event_faults(logdir, hosts):
    """Wakes of a consuming waiter beyond the signals begun before them that may have set the
    event (a signal that said the event was set already did not): the times of the extra
    wakes, and the counts of signals and wakes."""
    maybe_set, wakes, signals = [], [], 0
    for h in hosts:
        said = {}
        lines = read_lines(os.path.join(logdir, "signal-%s.log" % h))
        for line in lines:
            if line[0] == "R" and len(line) == 4:
                said[line[2]] = line[3]
        for line in lines:
            if line[0] == "G":
                signals += 1
                if said.get(line[2]) != "1":
                    maybe_set.append(int(line[2]))
        wakes.extend(int(line[2]) for line in read_lines(os.path.join(logdir, "event-%s.log" % h))
                     if line[0] == "K")
    maybe_set.sort()
    extra, i = [], 0
    for n, t in enumerate(sorted(wakes), 1):
        while i < len(maybe_set) and maybe_set[i] <= t:
            i += 1
        if n > i:
            extra.append(t)
    return extra, signals, len(wakes)


def faults(logdir):
    out = []
    try:
        with open(os.path.join(logdir, "faults.log")) as fh:
            for line in fh:
                if line.strip():
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def blame(t, fs, settle=SETTLE):
    """The kinds of the faults under way within `settle` before `t`."""
    kinds = sorted({f["kind"] for f in fs if f["start"] <= t <= f["end"] + settle})
    return kinds or ["none"]


# The faults that can take a worker away between its job's end and the record of its success:
# the job is then run again (at least once, for a receiver lost after its job's end).
LOSE_A_WORKER = {"kill-holder", "kill-host", "restart-client", "partition", "blackhole", "freeze-host"}


def allowed(what, kinds):
    """Whether a finding of sort `what` is allowed where faults of `kinds` were under way."""
    if what in ("overlap", "sem-over"):
        return any(PROMISES.get(k) == "fenced" for k in kinds)
    if what == "again":
        return any(k in LOSE_A_WORKER for k in kinds)
    return False


def check(logdir, hosts):
    """Every finding of the run in `logdir`: a list of dicts (what, time, kinds, allowed,
    detail), and the counts the report shows."""
    fs = faults(logdir)
    found = []
    try:
        with open(os.path.join(logdir, "bed.json")) as fh:
            settle = 2e9 * json.load(fh)["timeout"]
    except FileNotFoundError:
        settle = SETTLE

    def add(what, t, detail):
        kinds = blame(t, fs, settle)
        found.append({"what": what, "time": t, "kinds": kinds, "allowed": allowed(what, kinds),
                      "detail": detail})

    lines = {k: [l for h in hosts for l in read_lines(os.path.join(logdir, "%s-%s.log" % (k, h)))]
             for k in ("mutex", "sem")}
    mutex = sections(lines["mutex"])
    for a, b in overlaps(mutex):
        add("overlap", b["start"], "%s/%s (token %d) and %s/%s (token %d) overlap by %.3f s" % (
            a["host"], a["pid"], a["token"], b["host"], b["pid"], b["token"],
            (min(a["end"], b["end"]) - b["start"]) / 1e9))
    for s, prev in token_faults(mutex):
        add("token", s["start"], "token %d after %d" % (s["token"], prev["token"]))
    for t in fenced_accepts(mutex):
        add("fence", t, "a stale write a token-checking resource would accept")
    sem = sections(lines["sem"])
    peak, over = most_at_once(sem)
    for t in over:
        add("sem-over", t, "more than 2 holders of a 2-slot semaphore")
    extra, signals, wakes = event_faults(logdir, hosts)
    for t in extra:
        add("event-twice", t, "a consuming wait woke with no signal left to wake it")
    runs, posted, status = jobs(logdir, hosts)
    for jid in posted:
        if status.get(jid) != "succeeded":
            add("lost", 0, "job %s: %s" % (jid, status.get(jid, "no status")))
    for jid, rs in runs.items():
        rs.sort(key=lambda r: r["start"])
        for a, b in overlaps(rs):
            add("twice", b["start"], "job %s on %s and %s at once" % (jid, a["host"], b["host"]))
        for a, b in zip(rs, rs[1:]):
            if a["ended"] and b["start"] > a["end"]:
                add("again", b["start"], "job %s ran again on %s after it ended on %s" % (
                    jid, b["host"], a["host"]))
    try:
        with open(os.path.join(logdir, "wedged.json")) as fh:
            wedged = json.load(fh)
    except FileNotFoundError:
        wedged = []
    counts = {
        "critical sections": len(mutex),
        "semaphore holdings": len(sem),
        "semaphore peak": peak,
        "jobs posted": len(posted),
        "job runs": sum(len(r) for r in runs.values()),
        "event signals": signals,
        "event wakes": wakes,
        "clients wedged at the end": len(wedged),
    }
    return found, counts, fs


def recovery(logdir, hosts, fs):
    """Per fault kind, the seconds from each fault's end to the faulted host's next start of a
    critical section (of either kind)."""
    starts = collections.defaultdict(list)
    for k in ("mutex", "sem"):
        for h in hosts:
            for line in read_lines(os.path.join(logdir, "%s-%s.log" % (k, h))):
                if line[0] == "S":
                    starts[line[2]].append(int(line[5]))
    out = collections.defaultdict(list)
    for f in fs:
        later = [t for t in starts.get(f["host"], []) if t >= f["end"]]
        if later:
            out[f["kind"]].append((min(later) - f["end"]) / 1e9)
    return out


def report(logdir, hosts, out=sys.stdout):
    found, counts, fs = check(logdir, hosts)
    rec = recovery(logdir, hosts, fs)
    by_kind = collections.Counter(f["kind"] for f in fs)
    kinds = sorted(set(by_kind) | {k for f in found for k in f["kinds"]})
    print(", ".join("%s: %d" % kv for kv in counts.items()), file=out)
    print("| fault | injected | promise | violations (allowed by the promise) | recovery p50 / max |", file=out)
    print("| --- | --- | --- | --- | --- |", file=out)
    rows = []
    for k in kinds:
        mine = [f for f in found if k in f["kinds"]]
        broken = collections.Counter(f["what"] for f in mine if not f["allowed"])
        ok = collections.Counter(f["what"] for f in mine if f["allowed"])
        text = ", ".join("%s %d" % kv for kv in sorted(broken.items())) or "0"
        if ok:
            text += " (%s)" % ", ".join("%s %d" % kv for kv in sorted(ok.items()))
        r = rec.get(k, [])
        rt = "%.1f s / %.1f s" % (statistics.median(r), max(r)) if r else "-"
        print("| %s | %d | %s | %s | %s |" % (k, by_kind.get(k, 0), PROMISES.get(k, "none"), text, rt),
              file=out)
        rows.append({"fault": k, "injected": by_kind.get(k, 0), "promise": PROMISES.get(k, "none"),
                     "violations": dict(broken), "allowed": dict(ok), "recovery": r})
    for f in found[:40]:
        flag = "allowed" if f["allowed"] else "BROKEN"
        print("%s %s at %.3f (%s): %s" % (flag, f["what"], f["time"] / 1e9, ",".join(f["kinds"]),
                                          f["detail"]), file=out)
    if len(found) > 40:
        print("... and %d more (report.json has them all)" % (len(found) - 40), file=out)
    broken = [f for f in found if not f["allowed"]]
    return broken, {"counts": counts, "rows": rows, "findings": found}


def self_test():
    """The checker against made-up histories, each with the findings it must report."""
    import tempfile
    S = 10**9

    def history(files):
        d = tempfile.mkdtemp(prefix="nemesis-check-")
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        return d

    def cs(host, pid, token, start, end, kind="mutex"):
        return "".join("%s %s %s %d %d %d\n" % (step, kind, host, pid, token, t) for step, t in
                       [("S", start), ("W", (start + end) // 2), ("E", end)])

    fault = lambda kind, host, a, b: json.dumps({"kind": kind, "host": host, "start": a, "end": b}) + "\n"
    cases = [
        ("clean", {"mutex-a.log": cs("a", 1, 1, 0, S), "mutex-b.log": cs("b", 2, 2, 2 * S, 3 * S)}, []),
        ("overlap", {"mutex-a.log": cs("a", 1, 1, 0, 3 * S), "mutex-b.log": cs("b", 2, 2, 2 * S, 4 * S)},
         [("overlap", False)]),
        ("token back", {"mutex-a.log": cs("a", 1, 5, 0, S), "mutex-b.log": cs("b", 2, 4, 2 * S, 3 * S)},
         [("token", False)]),
        ("paused holder, fenced", {
            "mutex-a.log": cs("a", 1, 1, 0, 30 * S), "mutex-b.log": cs("b", 2, 2, 12 * S, 13 * S),
            "faults.log": fault("freeze-host", "a", S, 14 * S)}, [("overlap", True)]),
        ("same token twice", {"mutex-a.log": cs("a", 1, 1, 0, 3 * S), "mutex-b.log": cs("b", 2, 1, 2 * S, 4 * S)},
         [("overlap", False), ("token", False), ("fence", False)]),
        ("partition overlap", {
            "mutex-a.log": cs("a", 1, 1, 0, 30 * S), "mutex-b.log": cs("b", 2, 2, 12 * S, 13 * S),
            "faults.log": fault("partition", "a", S, 14 * S)}, [("overlap", False)]),
        ("three in a 2-slot semaphore", {
            "sem-a.log": cs("a", 1, 0, 0, 3 * S, "sem"), "sem-b.log": cs("b", 2, 0, S, 3 * S, "sem"),
            "sem-c.log": cs("c", 3, 0, 2 * S, 4 * S, "sem")}, [("sem-over", False)]),
        ("jobs", {
            "posted.log": "P 1 0\nP 2 0\nP 3 0\n",
            "status.json": json.dumps({"1": "succeeded", "2": "succeeded", "3": "queued"}),
            "jobs-a.log": "S job a 10 1 0\nE job a 10 1 %d\nS job a 11 2 %d\nW job a 11 2 %d\n" % (
                S, 2 * S, 3.5 * S),
            "jobs-b.log": "S job b 20 1 %d\nE job b 20 1 %d\nS job b 21 2 %d\nE job b 21 2 %d\n" % (
                5 * S, 6 * S, 3 * S, 4 * S)}, [("again", False), ("lost", False), ("twice", False)]),
        ("one signal, two wakes", {
            "signal-a.log": "G a %d\nR a %d 0\nG a %d\nR a %d 1\n" % (S, S, 3 * S, 3 * S),
            "event-b.log": "K b %d\n" % (2 * S), "event-c.log": "K c %d\n" % (4 * S)},
         [("event-twice", False)]),
        ("a signal whose answer was lost", {
            "signal-a.log": "G a %d\nR a %d 0\nG a %d\n" % (S, S, 3 * S),
            "event-b.log": "K b %d\n" % (2 * S), "event-c.log": "K c %d\n" % (4 * S)}, []),
    ]
    failed = 0
    for name, files, want in cases:
        found, _, _ = check(history(files), ["a", "b", "c"])
        got = sorted((f["what"], f["allowed"]) for f in found)
        if got != sorted(want):
            print("self-test %s: found %s, want %s" % (name, got, sorted(want)), file=sys.stderr)
            failed += 1
    print("self-test: %d of %d cases right" % (len(cases) - failed, len(cases)))
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", nargs="?")
    ap.add_argument("--hosts", default="a,b,c,d,e")
    ap.add_argument("--json")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(0 if self_test() else 1)
    if not a.logdir:
        ap.error("LOGDIR is needed")
    broken, data = report(a.logdir, a.hosts.split(","))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(data, fh, indent=1)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
