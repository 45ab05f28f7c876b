#!/usr/bin/env python3
"""Run tests/beds/checks.py unchanged against the CephFS bed, check f included.

    checks3.py [checks.py arguments...]      e.g. checks3.py /mnt/fsbed3/a /mnt/fsbed3/b --only f

checks.py's check f (client death, partition) is written for the GlusterFS bed: it reads
the client's pid from $FSBED_STATE, cuts links in netns fsbed-a and re-runs a setup.sh.
This wrapper loads checks.py as a module and points those three at this bed (fsbed3-a,
/tmp/fsbed3-state, ./setup.sh); every check itself runs as written.
"""
import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = os.environ.get("CHECKS_PY", os.path.join(HERE, "..", "checks.py"))
STATE = os.environ.get("FSBED3_STATE", "/tmp/fsbed3-state")

spec = importlib.util.spec_from_file_location("checks", CHECKS)
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
m.STATE = STATE


def _link(h, up):
    subprocess.run(["ip", "-n", "fsbed3-%s" % h, "link", "set", "eth0", "up" if up else "down"],
                   check=True)


def _setup():
    r = subprocess.run([os.path.join(HERE, "setup.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
    return r.returncode == 0


m._link = _link
m._setup = _setup
sys.exit(m.main())
