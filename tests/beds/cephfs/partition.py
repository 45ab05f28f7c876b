#!/usr/bin/env python3
"""What a lock holder on host a sees when a is cut off from the CephFS bed's server,
and when host b gets the lock.

    partition.py [--idle S] [--cut linkdown|silent] [--heal-after S] [--kind flock|ofd]

Host a's process takes an exclusive lock on a fresh file through /mnt/fsbed3/a, stays idle
S seconds (so that its client's last message to the MDS is up to S s old: ceph-fuse renews
its caps every session_timeout/3), then a is cut off (its link down, or its port off the
server's bridge: packets vanish silently). From the cut on, every second, a thread of host
a's process calls fstat() on the locked descriptor and re-takes its lock non-blocking, as a
holder checking its lock would; each call's outcome and duration is printed as it ends
(a call that does not end is reported as still blocked). Host b polls for the lock every
10 ms. The link comes back --heal-after seconds after the cut. Run setup.sh afterwards to
remount host a if it was evicted.
"""
import argparse
import errno
import fcntl
import os
import struct
import subprocess
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--idle", type=float, default=0)
ap.add_argument("--cut", choices=["linkdown", "silent"], default="linkdown")
ap.add_argument("--heal-after", type=float, default=45)
ap.add_argument("--kind", choices=["flock", "ofd"], default="flock")
ap.add_argument("--end", type=float, default=70, help="stop this many s after the cut")
o = ap.parse_args()

A, B = "/mnt/fsbed3/a/part", "/mnt/fsbed3/b/part"
os.makedirs(A, exist_ok=True)
name = "L.%d" % os.getpid()
mono = time.monotonic


def lock(fd, nb=True):
    if o.kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if nb else 0))
    else:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK if nb else fcntl.F_OFD_SETLKW,
                    struct.pack("hhxxxxqqixxxx", fcntl.F_WRLCK, 0, 0, 0, 0))


def cut(on):
    if o.cut == "linkdown":
        args = ["-n", "fsbed3-a", "link", "set", "eth0", "down" if on else "up"]
    else:
        args = ["-n", "fsbed3-srv", "link", "set", "fsb3-a"] + (["nomaster"] if on else ["master", "br-fsbed3"])
    subprocess.run(["ip"] + args, check=True)


fa = os.open(os.path.join(A, name), os.O_RDWR | os.O_CREAT, 0o644)
lock(fa)
fb = os.open(os.path.join(B, name), os.O_RDWR)
print("a holds the %s lock, b has the file open; idle %.0f s" % (o.kind, o.idle), flush=True)
time.sleep(o.idle)
t0 = mono()
cut(True)
print("t=0.0 cut (%s)" % o.cut, flush=True)


def say(msg):
    print("t=%.1f %s" % (mono() - t0, msg), flush=True)


def probe(what, f):
    s = mono()
    try:
        f()
        r = "ok"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    say("a: %s -> %s after %.2f s" % (what, r, mono() - s))


busy = {}


def prober():
    while mono() - t0 < o.end:
        for what, f in (("fstat", lambda: os.fstat(fa)), ("re-lock", lambda: lock(fa))):
            if busy.get(what):
                continue
            busy[what] = True

            def run(what=what, f=f):
                probe(what, f)
                busy[what] = False
            threading.Thread(target=run, daemon=True).start()
        time.sleep(1)


threading.Thread(target=prober, daemon=True).start()

healed = False
got = None
while mono() - t0 < o.end:
    if not healed and mono() - t0 >= o.heal_after:
        cut(False)
        healed = True
        say("link back")
    if got is None:
        try:
            lock(fb)
            got = mono() - t0
            say("b GOT the lock")
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                say("b: %s" % errno.errorcode.get(e.errno))
    time.sleep(0.01)
if not healed:
    cut(False)
for what, b in busy.items():
    if b:
        say("a: %s still blocked" % what)
print("b got the lock %s" % ("after %.1f s" % got if got is not None else "never"), flush=True)
os._exit(0)
