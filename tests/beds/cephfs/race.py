#!/usr/bin/env python3
"""How long the same namespace operation takes when both hosts do it at the same instant.

    race.py excl|mkdir|link ROUNDS

Two worker processes, one per mount (/mnt/fsbed3/a/bench, /mnt/fsbed3/b/bench), create the
same new name at the same moment (O_EXCL create, mkdir, or link() of a file of their own);
prints the slower side's time per round. On CephFS the loser of a link() race waits for the
MDS's next tick (mds_tick_interval), when the winner's update is journaled.
"""
import os, time, sys, statistics, multiprocessing as mp
os.makedirs("/mnt/fsbed3/a/bench", exist_ok=True)
A, B = "/mnt/fsbed3/a/bench", "/mnt/fsbed3/b/bench"
op = sys.argv[1]; N=int(sys.argv[2])
def worker(d, q, r):
    while True:
        m = q.get()
        if m is None: return
        tt, name = m
        while time.monotonic() < tt: pass
        t0=time.monotonic()
        try:
            if op=="excl": os.close(os.open(os.path.join(d,name), os.O_CREAT|os.O_EXCL|os.O_WRONLY))
            elif op=="mkdir": os.mkdir(os.path.join(d,name))
            elif op=="link": os.link(os.path.join(d,name+".src"+("a" if "/a/" in d else "b")), os.path.join(d,name))
            res="ok"
        except OSError as e: res=e.errno
        r.put((res, (time.monotonic()-t0)*1000))
qa,qb,ra,rb = mp.Queue(),mp.Queue(),mp.Queue(),mp.Queue()
pa=mp.Process(target=worker,args=(A,qa,ra)); pb=mp.Process(target=worker,args=(B,qb,rb)); pa.start(); pb.start()
lat=[]
t00=time.monotonic()
for i in range(N):
    name="r%d.%d"%(os.getpid(),i)
    if op=="link":
        open(os.path.join(A,name+".srca"),"w").close(); open(os.path.join(B,name+".srcb"),"w").close()
    tt=time.monotonic()+0.01
    qa.put((tt,name)); qb.put((tt,name))
    x=ra.get(); y=rb.get(); lat.append(max(x[1],y[1]))
qa.put(None); qb.put(None)
lat.sort()
print(op, "rounds", N, "total %.1fs"%(time.monotonic()-t00), "slowest side per round: med %.1f p90 %.1f max %.1f ms" % (statistics.median(lat), lat[int(N*.9)], lat[-1]))
