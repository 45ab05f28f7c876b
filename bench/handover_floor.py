#!/usr/bin/env python3
"""The file-system calls a mutex hand-over cannot do without, timed one by one between the two
"hosts" of a network file system bed (tests/beds/), with no fsync in the way.

    bench/handover_floor.py [glusterfs|moosefs|cephfs] [TRIALS]   (root; the bed set up)
    bench/handover_floor.py --variants BED [TRIALS]   whole hand-overs, the record kept other ways

A holder on host a releases: it writes `state released` into the holder record beside the lock
(the record must not name a holder that has gone). The new holder on host b, once granted the
lock, must look its name up by the path (the lock is the name: a lock file deleted or moved
away while it waited is not the lock any more), read the record (the last fencing token) and
write its own (its token is kept before its command starts). Each call here is timed right
after the other host's write, as in a hand-over; their sum is the least that fsync can add to
flock(1)'s hand-over on that bed.

Then: the same four calls of the new holder made one after the other, and made at once on four
threads: whether the bed's client answers independent requests in parallel (if it did, the
new holder would wait for the slowest of them, not for their sum).
"""
import os
import shutil
import sys
import threading
import time

MOUNTS = {"glusterfs": "/mnt/fsbed", "moosefs": "/mnt/fsbed2", "cephfs": "/mnt/fsbed3"}


def main():
    bed = sys.argv[1] if len(sys.argv) > 1 else "glusterfs"
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 31
    if bed not in MOUNTS:
        sys.exit(f"handover_floor.py: no bed named {bed} ({', '.join(MOUNTS)})")
    mnt = MOUNTS[bed]
    name = f"floor.{os.getpid()}"
    a_dir, b_dir = f"{mnt}/a/{name}", f"{mnt}/b/{name}"
    os.makedirs(a_dir)
    try:
        run(bed, a_dir, b_dir, trials)
    finally:
        shutil.rmtree(a_dir, ignore_errors=True)


def p50(values):
    values = sorted(values)
    return values[len(values) // 2]


def timed(call, *args):
    start = time.perf_counter()
    call(*args)
    return (time.perf_counter() - start) * 1e6


def run(bed, a_dir, b_dir, trials):
    open(f"{a_dir}/L", "w").close()
    rec_a = os.open(f"{a_dir}/.L.fsync", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(rec_a, b"r" * 124, 0)
    time.sleep(1)  # b's client sees the new directory
    rec_b = os.open(f"{b_dir}/.L.fsync", os.O_RDWR)
    dir_b = os.open(b_dir, os.O_RDONLY | os.O_DIRECTORY)
    steps = {
        "a: the released write": [],
        "b: the path's lookups": [],
        "b: the record's status": [],
        "b: the record's contents": [],
        "b: the held write": [],
    }
    for _ in range(trials):
        time.sleep(0.2)
        steps["a: the released write"].append(timed(os.pwrite, rec_a, b"a" * 124, 0))
        steps["b: the path's lookups"].append(timed(os.stat, f"{b_dir}/L"))
        steps["b: the record's status"].append(timed(os.fstat, rec_b))
        steps["b: the record's contents"].append(timed(os.pread, rec_b, 1024, 0))
        steps["b: the held write"].append(timed(os.pwrite, rec_b, b"b" * 124, 0))
        time.sleep(0.2)
        os.pwrite(rec_a, b"c" * 124, 0)  # a holds it again
    print(f"{bed}, {trials} trials (p50)")
    for step, values in steps.items():
        print(f"  {step:<28} {p50(values):6.0f} us")
    print(f"  {'sum':<28} {sum(p50(v) for v in steps.values()):6.0f} us")

    calls = [
        lambda: os.stat("L", dir_fd=dir_b),
        lambda: os.stat(b_dir),
        lambda: os.fstat(rec_b),
        lambda: os.pread(rec_b, 1024, 0),
    ]

    def in_turn():
        for call in calls:
            call()

    def at_once():
        threads = [threading.Thread(target=call) for call in calls[1:]]
        for t in threads:
            t.start()
        calls[0]()
        for t in threads:
            t.join()

    for how, f in (("one after the other", in_turn), ("at once, four threads", at_once)):
        print(f"  b's four calls, {how:<22} {p50([timed(f) for _ in range(trials)]):6.0f} us")


def variants(bed, trials):
    """Whole hand-overs (a's release write, then b's look, status, read and write) with the
    record kept in other ways, to see which of the capability moves between the two clients
    each way avoids: the sum of the five calls, p50."""
    mnt = MOUNTS[bed]
    name = f"variants.{os.getpid()}"
    a_dir, b_dir = f"{mnt}/a/{name}", f"{mnt}/b/{name}"
    os.makedirs(a_dir)
    try:
        open(f"{a_dir}/L", "w").close()
        time.sleep(1)
        ways = {
            "as fsync keeps it (buffered writes)": (0, True, True),
            "written O_SYNC (no dirty data to recall)": (os.O_SYNC, True, True),
            "written O_DSYNC": (os.O_DSYNC, True, True),
            "no status call before the read": (0, False, True),
            "no released write (the record left saying held)": (0, True, False),
        }
        for i, (way, (flags, status, released)) in enumerate(ways.items()):
            rec = f".L{i}.fsync"
            rec_a = os.open(f"{a_dir}/{rec}", os.O_RDWR | os.O_CREAT | flags, 0o644)
            os.pwrite(rec_a, b"r" * 124, 0)
            time.sleep(1)
            rec_b = os.open(f"{b_dir}/{rec}", os.O_RDWR | flags)
            sums = []
            for _ in range(trials):
                time.sleep(0.2)
                start = time.perf_counter()
                if released:
                    os.pwrite(rec_a, b"a" * 124, 0)
                os.stat(f"{b_dir}/L")
                if status:
                    os.fstat(rec_b)
                os.pread(rec_b, 1024, 0)
                os.pwrite(rec_b, b"b" * 124, 0)
                sums.append((time.perf_counter() - start) * 1e6)
                time.sleep(0.2)
                os.pwrite(rec_a, b"c" * 124, 0)
            print(f"  {way:<48} {p50(sums):6.0f} us")
            os.close(rec_a)
            os.close(rec_b)
    finally:
        shutil.rmtree(a_dir, ignore_errors=True)


if __name__ == "__main__":
    if "--variants" in sys.argv:
        sys.argv.remove("--variants")
        variants(sys.argv[1] if len(sys.argv) > 1 else "glusterfs",
                 int(sys.argv[2]) if len(sys.argv) > 2 else 31)
    else:
        main()
