#!/usr/bin/env python3
"""A Jepsen-style run across five client hosts of a bed, under a nemesis.

    run.py [--bed glusterfs|moosefs|cephfs] [--seconds N] [--broken] [--fsync PATH] [--out DIR]
           [--seed N] [--faults K,K,...]

Five client "hosts" of a bed (tests/beds/BED, its setup's HOSTS knob set to "a b c d e": each
its own network namespace and FUSE client) share one directory. On every host, in a freezer
cgroup of its own, loops run for the whole run:

- `fsync mutex run DIR/lock -- cs.sh`: a critical section that logs its start, its writes (three
  in 40 ms, or one in twenty: every half second for 1.2 times the server's timeout T) and its
  end, with its fencing token (FSYNC_FENCE), to a local file;
- `fsync sem run DIR/sem --slots 2 -- cs.sh`: the same, two at a time;
- `fsync msg work DIR/jobs -- job.sh`: jobs that log their start, a write and their end;
- `fsync msg post DIR/jobs` every 2.5 s, each id logged once queued.
- `fsync event wait --reset DIR/event` (each wake logged), and `fsync event signal` every 5 s.

The logs go to a local disk the nemesis never touches, and every host shares the machine's
clock. Meanwhile the nemesis injects, at random, one or two faults at a time on different
hosts (half of them on the host holding the mutex, where it hurts most), and heals them (the
kinds are check.py's PROMISES). T, after which the server gives a silent client's locks away,
is 10 s on GlusterFS, 30 s on CephFS (session_autoclose) and 60 s on MooseFS (the session's
sustain time).

    partition       the host's link down (1.1-1.6 T)
    blackhole       the host cut off the bridge, its link up: packets vanish (1.1-1.6 T)
    pause-fsync     SIGSTOP of the host's fsync processes (3-8 s), then SIGCONT
    pause-command   SIGSTOP of the host's critical sections and jobs (3-8 s)
    freeze-host     the host's cgroup frozen, its FUSE client with it (1.2-1.6 T: a paused
                    holder)
    kill-holder     SIGKILL of the host's fsync processes (holders, waiters, workers)
    kill-host       SIGKILL of every process of the host but its FUSE client; loops restarted
    restart-client  the host's FUSE client killed and mounted again
    restart-mds     (CephFS) the metadata server, which holds every lock, killed and started

After the time, every fault is healed, posting stops, a client left wedged is mounted again,
the workers empty the queue, every job's status is read, and check.py reports, per fault kind,
what was injected, what the docs promise, the violations and the recovery times. Exit status:
check.py's (1 on a broken promise).

--broken runs the holders with `--on-lost ignore`: a holder cut off runs on past its lease, and
the checker must find the overlaps (it can fail). Needs root (namespaces, FUSE, cgroups).
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FREEZER = "/sys/fs/cgroup/freezer"
KINDS = ["partition", "blackhole", "pause-fsync", "pause-command", "freeze-host",
         "kill-holder", "kill-host", "restart-client"]

# Each bed: its setup's prefix for environment knobs, its state directory, where it mounts,
# the prefix of its namespaces, veths and bridge, after how long (s) its server gives a silent
# client's locks away (a cut or a freeze lasts longer than that, and a long critical section
# too), and the faults only it has.
BEDS = {
    "glusterfs": {"env": "FSBED", "state": "/tmp/fsbed-state", "mnt": "/mnt/fsbed", "ns": "fsbed",
                  "port": "fsb", "timeout": 10, "extra": []},
    "moosefs": {"env": "FSBED2", "state": "/tmp/fsbed2-state", "mnt": "/mnt/fsbed2", "ns": "fsbed2",
                "port": "fsb2", "timeout": 60, "extra": []},
    "cephfs": {"env": "FSBED3", "state": "/tmp/fsbed3-state", "mnt": "/mnt/fsbed3", "ns": "fsbed3",
               "port": "fsb3", "timeout": 30, "extra": ["restart-mds"]},
}

CS = r"""#!/bin/sh
# cs.sh KIND HOST LOG LONG: one critical section: its start, its writes, its end, each stamped
# with the token and the real-time clock. Most write three times 20 ms apart; one in twenty
# writes every half second for LONG seconds, longer than the server's timeout, as a long job
# would.
line() { echo "$1 $2 $3 $$ ${FSYNC_FENCE:-0} $(date +%s%N)" >> "$4"; }
line S "$1" "$2" "$3"
n=3 gap=0.02
[ "$(od -An -N1 -tu1 /dev/urandom)" -lt 13 ] && n=$(($4 * 2)) gap=0.5
while [ "$n" -gt 0 ]; do sleep "$gap"; line W "$1" "$2" "$3"; n=$((n - 1)); done
line E "$1" "$2" "$3"
"""
JOB = r"""#!/bin/sh
# job.sh HOST LOG: one job: its start, a write, its end.
line() { echo "$1 job $2 $$ $FSYNC_MSG_ID $(date +%s%N)" >> "$3"; }
line S "$1" "$2"
sleep 0.05
line W "$1" "$2"
sleep 0.05
line E "$1" "$2"
"""


def log(*a):
    print("[nemesis %s]" % time.strftime("%T"), *a, file=sys.stderr, flush=True)


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


class Bed:
    """The GlusterFS bed with `hosts` clients, each in a freezer cgroup of its own."""

    def __init__(self, name, hosts):
        self.name, self.hosts = name, hosts
        self.c = BEDS[name]

    def setup(self, hosts=None):
        """Set the bed up, or mount `hosts` again (only theirs: another host may be frozen or
        cut off meanwhile, and a look at its mount would wait for it)."""
        hosts = hosts or self.hosts
        env = dict(os.environ, **{self.c["env"] + "_HOSTS": " ".join(hosts)})
        r = subprocess.run([os.path.join(HERE, "..", self.name, "setup.sh")], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("nemesis: the bed did not come up:\n" + r.stderr)
        for h in hosts:
            os.makedirs(self.cgroup(h), exist_ok=True)
            self.join(h, self.client(h))

    def cgroup(self, h):
        return os.path.join(FREEZER, "fsync-nemesis-" + h)

    def join(self, h, pid):
        try:
            with open(os.path.join(self.cgroup(h), "cgroup.procs"), "w") as fh:
                fh.write(str(pid))
        except (ProcessLookupError, OSError):
            pass

    def client(self, h):
        with open(os.path.join(self.c["state"], "client-%s.pid" % h)) as fh:
            return int(fh.read())

    def pids(self, h):
        try:
            with open(os.path.join(self.cgroup(h), "cgroup.procs")) as fh:
                return [int(p) for p in fh.read().split()]
        except FileNotFoundError:
            return []

    def freeze(self, h, frozen):
        with open(os.path.join(self.cgroup(h), "freezer.state"), "w") as fh:
            fh.write("FROZEN" if frozen else "THAWED")

    def link(self, h, up):
        sh("ip", "-n", "%s-%s" % (self.c["ns"], h), "link", "set", "eth0", "up" if up else "down")

    def bridge(self, h, on):
        ns = self.c["ns"]
        sh("ip", "-n", ns + "-srv", "link", "set", "%s-%s" % (self.c["port"], h),
           *(["master", "br-" + ns] if on else ["nomaster"]))

    def restart_mds(self):
        """CephFS: the metadata server killed (it holds every lock) and started again by the
        bed's setup; its clients reconnect and reclaim their locks."""
        state = self.c["state"]
        with open(os.path.join(state, "mds.a.pid")) as fh:
            pid = int(fh.read())
        kill_all([pid], signal.SIGKILL)
        while os.path.exists("/proc/%d/stat" % pid) and " Z " not in open("/proc/%d/stat" % pid).read():
            time.sleep(0.05)
        # As the bed's setup starts it (setup.sh, start_daemon).
        out = open(os.path.join(state, "log", "mds.a.out"), "a")
        mds = subprocess.Popen(["setsid", "nsenter", "--net=/run/netns/%s-srv" % self.c["ns"],
                                "/usr/bin/ceph-mds", "-c", os.path.join(state, "ceph.conf"), "-f", "-i", "a"],
                               stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        with open(os.path.join(state, "mds.a.pid"), "w") as fh:
            fh.write(str(mds.pid))

    def restart_client(self, h):
        try:
            os.kill(self.client(h), signal.SIGKILL)
        except ProcessLookupError:
            pass
        sh("umount", "-l", os.path.join(self.c["mnt"], h), check=False)
        self.setup([h])

    def answers(self, h):
        """Whether host `h`'s mount answers a stat within 5 s: a wedged client never does, and
        only a fatal signal ends the wait (subprocess's timeout sends SIGKILL)."""
        try:
            return subprocess.run(["stat", "-t", os.path.join(self.c["mnt"], h)], capture_output=True,
                                  timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def release(self):
        for h in self.hosts:
            try:
                self.freeze(h, False)
                self.link(h, True)
                self.bridge(h, True)
            except (OSError, subprocess.CalledProcessError):
                pass


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


class Run:
    def __init__(self, a):
        self.a = a
        self.hosts = a.hosts.split(",")
        self.bed = Bed(a.bed, self.hosts)
        self.out = a.out
        self.name = "nemesis-%d" % os.getpid()
        self.loops = {}
        self.faults = open(os.path.join(self.out, "faults.log"), "a")
        self.rng = random.Random(a.seed)
        self.kinds = a.faults.split(",") if a.faults else KINDS + self.bed.c["extra"]

    def dir(self, h):
        return os.path.join(self.bed.c["mnt"], h, self.name)

    def start_loops(self, h):
        f, d, o = self.a.fsync, self.dir(h), self.out
        longest = int(1.2 * self.bed.c["timeout"])  # a long section outlasts the server's timeout
        lost = "--on-lost ignore" if self.a.broken else ""
        # A failed try (a mount cut off answers ENOTCONN at once) waits a moment: no busy loop.
        loops = {
            "mutex": "while :; do %s mutex run %s -t 600s %s/lock -- sh %s/cs.sh mutex %s %s/mutex-%s.log %d "
                     "|| sleep 0.2; done" % (f, lost, d, o, h, o, h, longest),
            "sem": "while :; do %s sem run %s -t 600s --slots 2 %s/sem -- sh %s/cs.sh sem %s %s/sem-%s.log %d "
                   "|| sleep 0.2; done" % (f, lost, d, o, h, o, h, longest),
            "work": "while :; do %s msg work %s/jobs -- sh %s/job.sh %s %s/jobs-%s.log; sleep 0.2; done"
                    % (f, d, o, h, o, h),
        }
        # Every host posts, one job every 2.5 s: twice a second in all, whichever hosts are cut off.
        loops["post"] = ("while [ ! -e %s/stop-posting ]; do id=$(%s msg post %s/jobs --data x) && "
                         "echo \"P $id $(date +%%s%%N)\" >> %s/posted.log; sleep 2.5; done" % (o, f, d, o))
        # Events: every host waits to consume the event (`--reset`: one signal wakes exactly one
        # waiter) and signals it every 5 s, logging its intent before the call and what the call
        # said after it (was the event set already?), so that a signal whose answer a fault
        # took away still counts as one that may have set it.
        loops["event"] = ("while :; do %s event wait --reset -t 600s %s/event && echo \"K %s $(date +%%s%%N)\" "
                          ">> %s/event-%s.log || sleep 0.2; done" % (f, d, h, o, h))
        loops["signal"] = ("while [ ! -e %s/stop-posting ]; do t=$(date +%%s%%N); echo \"G %s $t\" >> %s/signal-%s.log; "
                           "r=$(%s event signal %s/event --json) && case $r in *true*) w=1;; *) w=0;; esac && "
                           "echo \"R %s $t $w\" >> %s/signal-%s.log; sleep 5; done" % (o, h, o, h, f, d, h, o, h))
        for k, script in loops.items():
            cg = os.path.join(self.bed.cgroup(h), "cgroup.procs")
            self.loops[(h, k)] = subprocess.Popen(
                ["sh", "-c", 'echo $$ > %s; exec sh -c "$0"' % cg, script],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(o, "loop-%s-%s.err" % (k, h)), "a"),
                start_new_session=True)

    def holder(self):
        """The host whose critical section of the mutex is under way, by its log, if one is."""
        for h in self.hosts:
            try:
                with open(os.path.join(self.out, "mutex-%s.log" % h), "rb") as fh:
                    fh.seek(max(0, os.fstat(fh.fileno()).st_size - 200))
                    last = fh.read().splitlines()[-1:]
            except OSError:
                continue
            if last and not last[0].startswith(b"E "):
                return h
        return None

    def fault(self, kind, h):
        """Inject `kind` on host `h`; return how to heal it and how long to wait first."""
        pids = self.bed.pids(h)
        client = self.bed.client(h)
        if kind == "partition":
            self.bed.link(h, False)
            return (lambda: self.bed.link(h, True)), self.rng.uniform(1.1, 1.6) * self.bed.c["timeout"]
        if kind == "blackhole":
            self.bed.bridge(h, False)
            return (lambda: self.bed.bridge(h, True)), self.rng.uniform(1.1, 1.6) * self.bed.c["timeout"]
        if kind == "pause-fsync":
            chosen = [p for p in pids if comm(p) == "fsync"]
        elif kind == "pause-command":
            chosen = [p for p in pids if "cs.sh" in cmdline(p) or "job.sh" in cmdline(p)]
            chosen += [p for p in pids if comm(p) == "sleep"]
        elif kind == "freeze-host":
            self.bed.freeze(h, True)
            return (lambda: self.bed.freeze(h, False)), self.rng.uniform(1.2, 1.6) * self.bed.c["timeout"]
        elif kind == "kill-holder":
            kill_all([p for p in pids if comm(p) == "fsync"], signal.SIGKILL)
            return None, 0
        elif kind == "kill-host":
            kill_all([p for p in pids if p != client], signal.SIGKILL)
            for (host, k), p in list(self.loops.items()):
                if host == h:
                    p.wait()
            self.start_loops(h)
            return None, 0
        elif kind == "restart-client":
            self.bed.restart_client(h)
            return None, 0
        elif kind == "restart-mds":
            self.bed.restart_mds()
            return None, 0
        kill_all(chosen, signal.SIGSTOP)
        return (lambda: kill_all(chosen, signal.SIGCONT)), self.rng.uniform(3, 8)

    def nemesis(self, until):
        active = []  # (heal, when, record)
        while time.time() < until or active:
            now = time.time()
            for item in [x for x in active if x[1] <= now]:
                heal, _, rec = item
                heal()
                rec["end"] = time.time_ns()
                self.faults.write(json.dumps(rec) + "\n")
                self.faults.flush()
                log("healed", rec["kind"], rec["host"])
                active.remove(item)
            busy = {rec["host"] for _, _, rec in active}
            if now < until and len(active) < 2 and self.rng.random() < 0.3:
                free = [x for x in self.hosts if x not in busy]
                h = self.rng.choice(free)
                holder = self.holder()
                if holder in free and self.rng.random() < 0.5:
                    h = holder  # a fault where it hurts most: on the lock's holder
                kind = self.rng.choice(self.kinds)
                rec = {"kind": kind, "host": h, "start": time.time_ns()}
                log("fault", kind, h)
                heal, wait = self.fault(kind, h)
                if heal is None:
                    rec["end"] = time.time_ns()
                    self.faults.write(json.dumps(rec) + "\n")
                    self.faults.flush()
                else:
                    active.append((heal, time.time() + wait, rec))
            time.sleep(1)

    def finish(self):
        """Stop posting, let the workers empty the queue, read every job's status, stop all."""
        open(os.path.join(self.out, "stop-posting"), "w").close()
        time.sleep(1)
        # A client that a fault left wedged (it answers nothing, not even a stat, and its
        # processes wait in the kernel for ever) is mounted again: a host that never recovers
        # by itself, which the report counts.
        wedged = [h for h in self.hosts if not self.bed.answers(h)]
        for h in wedged:
            log("client %s does not answer: mounted again" % h)
            self.bed.restart_client(h)
        with open(os.path.join(self.out, "wedged.json"), "w") as fh:
            json.dump(wedged, fh)
        a = next(h for h in self.hosts if self.bed.answers(h))
        try:
            r = sh(self.a.fsync, "msg", "wait-empty", "-t", "300s", self.dir(a) + "/jobs", check=False,
                   timeout=330)
            log("queue empty" if r.returncode == 0 else "queue NOT empty: %s" % r.stderr.strip())
        except subprocess.TimeoutExpired:
            log("queue NOT empty: the wait did not end")
        for p in self.loops.values():
            kill_all([p.pid], signal.SIGTERM)
        for h in self.hosts:
            # The loops' fsync processes finish their running section or job on TERM.
            kill_all([p for p in self.bed.pids(h) if comm(p) in ("sh", "fsync") and p != self.bed.client(h)],
                     signal.SIGTERM)
        time.sleep(3)
        for h in self.hosts:
            kill_all([p for p in self.bed.pids(h) if p != self.bed.client(h)], signal.SIGKILL)
        ids = [line.split()[1] for line in open(os.path.join(self.out, "posted.log")) if line.strip()]
        status = {}
        for i in range(0, len(ids), 200):
            r = sh(self.a.fsync, "msg", "status", self.dir(a) + "/jobs", *ids[i:i + 200], "--json", check=False,
                   timeout=120)
            for line in r.stdout.splitlines():
                v = json.loads(line)
                status[str(v["id"])] = v["state"]
        with open(os.path.join(self.out, "status.json"), "w") as fh:
            json.dump(status, fh)

    def go(self):
        for name, text in (("cs.sh", CS), ("job.sh", JOB)):
            with open(os.path.join(self.out, name), "w") as fh:
                fh.write(text)
        open(os.path.join(self.out, "posted.log"), "a").close()
        with open(os.path.join(self.out, "bed.json"), "w") as fh:
            json.dump({"bed": self.bed.name, "timeout": self.bed.c["timeout"]}, fh)
        self.bed.setup()
        os.makedirs(self.dir(self.hosts[0]))
        deadline = time.time() + 60
        while not all(os.path.isdir(self.dir(h)) for h in self.hosts):
            if time.time() > deadline:
                sys.exit("nemesis: a host does not see the shared directory")
            time.sleep(0.1)
        log("hosts %s, shared directory %s, logs in %s" % (",".join(self.hosts), self.name, self.out))
        for h in self.hosts:
            self.start_loops(h)
        try:
            self.nemesis(time.time() + self.a.seconds)
        finally:
            self.bed.release()
        self.finish()
        sys.path.insert(0, HERE)
        import check
        broken, data = check.report(self.out, self.hosts)
        with open(os.path.join(self.out, "report.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        return 1 if broken else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bed", choices=sorted(BEDS), default="glusterfs")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--hosts", default="a,b,c,d,e")
    ap.add_argument("--broken", action="store_true", help="holders run with --on-lost ignore")
    ap.add_argument("--fsync", default=os.path.join(ROOT, "target", "release", "fsync"))
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--faults", help="the kinds to inject (default: all)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("nemesis: needs root (network namespaces, FUSE mounts, cgroups)")
    a.fsync = os.path.abspath(a.fsync)
    if a.seed is None:
        a.seed = random.randrange(1 << 32)
    a.out = a.out or "/tmp/fsync-nemesis-%d" % int(time.time())
    os.makedirs(a.out, exist_ok=True)
    log("seed %d" % a.seed)
    sys.exit(Run(a).go())


if __name__ == "__main__":
    main()
