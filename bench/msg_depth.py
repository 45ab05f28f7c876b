#!/usr/bin/env python3
"""What a receive costs at any depth of a mailbox's queue, or with any number of messages
delayed. See BENCHMARKS.md.

    bench/msg_depth.py [DEPTH...]             # default: 100 10000 1000000
    bench/msg_depth.py --delayed [COUNT...]   # default: 0 10000 100000

For each DEPTH: a mailbox with DEPTH messages queued (written straight into the layout the
`msg` module's docs describe: `seq`, `head`, `q/SHARD/NAME`, so that a million take a minute,
not the hours a million `fsync msg post` would), then PAIRS rounds of `fsync msg recv -n BOX`
and `fsync msg post BOX` (the queue stays DEPTH deep; each receive takes the oldest), timed
by the wall clock around each round, in ROUNDS blocks that alternate between the depths.
The median block's CPU time per round (user and system, of the fsync processes) is printed
beside it: it moves less than the wall clock on a machine shared with other work. Then `fsync
msg list BOX` at each depth, its peak memory (ru_maxrss) and time.

With --delayed: for each COUNT, a mailbox with QUEUED (10) messages queued and COUNT delayed,
due in an hour and 3 ms apart, as `fsync msg post --delay 1h` in a loop posts them: in their
buckets (`delayed/BUCKET/DUE.NAME`), or with DELAYED_LAYOUT=flat as fsync before buckets wrote
them (`delayed/DUE.NAME`; a version with buckets moves them into theirs at its first receive).
One round that is not timed, then the rounds as above (none of the delayed ones comes due).

Knobs (environment): PAIRS (100 per block), ROUNDS (3), QUEUED (10, with --delayed),
DELAYED_LAYOUT (buckets), FSYNC (default target/release/fsync, built if missing), BENCH_DIR
(default /tmp), KEEP=1 (keep the mailboxes).
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SHARD = 100
SPAN = 60_000_000  # microseconds of due time in a bucket of delayed messages
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill(box, depth):
    """A mailbox with messages 1..=depth queued, the head at the first shard."""
    for sub in ("tmp", "q", "claimed", "recv", "senders"):
        os.makedirs(os.path.join(box, sub), exist_ok=True)
    made = None
    for seq in range(1, depth + 1):
        first = seq // SHARD * SHARD
        shard = os.path.join(box, "q", f"{first:020}")
        if made != shard:
            os.makedirs(shard, exist_ok=True)
            made = shard
        name = f"{seq:020}.bench-1-{seq:016x}.-.msg"
        with open(os.path.join(shard, name), "wb") as f:
            f.write(b"job %d\n" % seq)
    with open(os.path.join(box, "seq"), "w") as f:
        f.write(f"{depth}\n")
    with open(os.path.join(box, "head"), "w") as f:
        f.write(f"{0:020}\n")


def fill_delayed(box, queued, count):
    """A mailbox with messages 1..=queued queued and `count` more delayed."""
    fill(box, queued)
    delayed = os.path.join(box, "delayed")
    os.makedirs(delayed, exist_ok=True)
    flat = os.environ.get("DELAYED_LAYOUT") == "flat"
    first = (time.time_ns() // 1000) + 3600 * 1_000_000
    made = None
    for i in range(count):
        seq = queued + 1 + i
        due = first + i * 3000
        name = f"{due:020}.{seq:020}.bench-1-{seq:016x}.-.msg"
        bucket = delayed if flat else os.path.join(delayed, f"{due // SPAN * SPAN:020}")
        if made != bucket:
            os.makedirs(bucket, exist_ok=True)
            made = bucket
        with open(os.path.join(bucket, name), "wb") as f:
            f.write(b"later %d\n" % seq)
    with open(os.path.join(box, "seq"), "w") as f:
        f.write(f"{queued + count}\n")


def cpu():
    """Seconds of CPU (user and system) the children waited for so far have used."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pairs(fsync, box, n):
    """Seconds per recv + post round over n rounds: wall clock, and the CPU fsync used (which
    a busy machine disturbs less)."""
    start, used = time.perf_counter(), cpu()
    for _ in range(n):
        got = subprocess.run([fsync, "msg", "recv", "-n", box], stdout=subprocess.PIPE, check=True)
        subprocess.run([fsync, "msg", "post", box], input=got.stdout, check=True)
    return (time.perf_counter() - start) / n, (cpu() - used) / n


def listing(fsync, box):
    """Seconds and peak KiB of one `msg list` (in a child of its own, so ru_maxrss is its)."""
    code = (
        "import resource,subprocess,sys,time;t=time.perf_counter();"
        "subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,check=True);"
        "print(time.perf_counter()-t,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, fsync, "msg", "list", box],
        stdout=subprocess.PIPE, check=True, text=True,
    ).stdout.split()
    return float(out[0]), int(out[1])


def main():
    args = sys.argv[1:]
    delayed = args[:1] == ["--delayed"]
    if delayed:
        args = args[1:]
    default = [0, 10_000, 100_000] if delayed else [100, 10_000, 1_000_000]
    depths = [int(d) for d in args] or default
    queued = int(os.environ.get("QUEUED", "10"))
    n = int(os.environ.get("PAIRS", "100"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    fsync = os.environ.get("FSYNC") or os.path.join(ROOT, "target/release/fsync")
    if not os.environ.get("FSYNC"):
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    base = tempfile.mkdtemp(prefix="fsync-depth-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    boxes = {}
    try:
        for depth in depths:
            box = os.path.join(base, f"box{depth}")
            t = time.perf_counter()
            if delayed:
                fill_delayed(box, queued, depth)
                pairs(fsync, box, 1)  # not timed
            else:
                fill(box, depth)
            boxes[depth] = box
            os.sync()  # not the write-back of what was just written, in the rounds
            what = "delayed" if delayed else "queued"
            print(f"filled {depth} messages {what} in {time.perf_counter() - t:.1f} s", flush=True)
        per = {d: [] for d in depths}
        for r in range(rounds):
            order = depths if r % 2 == 0 else list(reversed(depths))
            for depth in order:
                per[depth].append(pairs(fsync, boxes[depth], n))
        print(f"\nrecv + post round, ms ({rounds} blocks of {n}, alternating):")
        print(f"{'delayed' if delayed else 'depth':>10} {'median':>8} {'min':>8} {'max':>8}"
              f" {'cpu':>6}  blocks")
        first = first_cpu = None
        for depth in depths:
            v = sorted(wall for wall, _ in per[depth])
            med = v[len(v) // 2] * 1e3
            c = sorted(used for _, used in per[depth])
            med_cpu = c[len(c) // 2] * 1e3
            first, first_cpu = first or med, first_cpu or med_cpu
            blocks = " ".join(f"{wall * 1e3:.2f}" for wall, _ in per[depth])
            print(f"{depth:>10} {med:8.2f} {v[0] * 1e3:8.2f} {v[-1] * 1e3:8.2f} {med_cpu:6.2f}"
                  f"  {blocks}  ({med / first:.2f}x the first, cpu {med_cpu / first_cpu:.2f}x)")
        print("\nmsg list:")
        for depth in depths:
            secs, kib = listing(fsync, boxes[depth])
            what = "delayed" if delayed else "messages"
            print(f"{depth:>10} {what}: {secs:.2f} s, peak {kib / 1024:.1f} MiB")
    finally:
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")


if __name__ == "__main__":
    main()
