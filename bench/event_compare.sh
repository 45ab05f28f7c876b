#!/usr/bin/env bash
# Event wake-up (issues 4 and 6): from the signal to the waiting process having exited, for
#   - `fsync event signal E` -> `fsync event wait --reset E` (the CLI at both ends: target 4),
#     and `touch E` as the signaller (what starting any command to signal costs),
#   - the event file appearing (created by the harness) -> the waiter's exit, for
#     `fsync event wait --reset`, the seeds' loop (`until rm E; do sleep 0.1; done`) and an
#     `inotifywait` loop (`until rm E; do inotifywait -e create .; done`).
# A python3 harness starts each waiter, lets it block, stamps CLOCK_MONOTONIC, signals, and
# stamps again when waitpid returns (the signal comes at a random phase, so a polling loop
# shows its average); tools alternate round by round. Installs inotify-tools if
# missing.
#   bench/event_compare.sh [ROUNDS]   (needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
ROUNDS=${1:-60}
command -v inotifywait >/dev/null || apt-get install -y -qq inotify-tools >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-ev.XXXXXX")
trap 'rm -rf "$dir"' EXIT
python3 - "$F" "$ROUNDS" "$dir" <<'PY'
import os, random, subprocess, sys, time
fsync, rounds, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
E = os.path.join(d, "E")
waiters = {
    "fsync signal -> fsync event wait --reset": ([fsync, "event", "wait", "--reset", "E"], "cli"),
    "touch E -> fsync event wait --reset": ([fsync, "event", "wait", "--reset", "E"], "touch"),
    "file appears -> fsync event wait --reset": ([fsync, "event", "wait", "--reset", "E"], "file"),
    "file appears -> seed loop (sleep 0.1)": (["sh", "-c", "until rm E 2>/dev/null; do sleep 0.1; done"], "file"),
    "file appears -> inotifywait loop": (["sh", "-c", "until rm E 2>/dev/null; do inotifywait -qq -t 5 -e create .; done"], "file"),
}
lat = {k: [] for k in waiters}
for r in range(rounds):
    for name, (argv, how) in waiters.items():
        try: os.unlink(E)
        except FileNotFoundError: pass
        w = subprocess.Popen(argv, cwd=d)
        # Let it block (a benchmark, not a test); a random phase, or a polling loop's
        # schedule would line up with ours.
        time.sleep(0.1 + random.random() * 0.1)
        t0 = time.monotonic()
        if how == "cli":
            s = subprocess.Popen([fsync, "event", "signal", "E"], cwd=d)
        elif how == "touch":  # the floor for any signalling command: coreutils' touch
            s = subprocess.Popen(["touch", "E"], cwd=d)
        else:
            os.close(os.open(E, os.O_CREAT | os.O_WRONLY, 0o644)); s = None
        w.wait()
        lat[name].append((time.monotonic() - t0) * 1e3)
        if s: s.wait()
        assert not os.path.exists(E), name + ": the event was not consumed"
def q(v, p): v = sorted(v); return v[min(len(v) - 1, int(len(v) * p))]
print("%-44s %9s %9s" % ("signal -> waiter exited (%d rounds)" % rounds, "p50 ms", "p90 ms"))
for k, v in lat.items():
    print("%-44s %9.2f %9.2f" % (k, q(v, .5), q(v, .9)))
PY
