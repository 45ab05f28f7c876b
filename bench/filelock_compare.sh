#!/usr/bin/env bash
# In-process mutex throughput: PROCS processes each increment a counter file N times, each
# increment under the lock, with
#   - fsync's library (examples/counter.rs: fsync::Mutex, blocking flock, holder record),
#   - Python's filelock (FileLock: non-blocking flock retried every poll_interval, 50 ms),
#   - the seeds' algorithm (try a non-blocking lock, sleep 100 ms, try again) in Python,
#   - raw flock(2) in Python (blocking fcntl.flock: the kernel's floor).
# Tools alternate trial by trial; every final count must be exact. Installs python3-filelock
# (Debian) if missing. See BENCHMARKS.md.
#   bench/filelock_compare.sh [TRIALS]    knobs: PROCS (4), N (200)
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-5}
PROCS=${PROCS:-4}
N=${N:-200}
python3 -c 'import filelock' 2>/dev/null || {
    apt-get install -y -qq python3-filelock >/dev/null 2>&1 || pip install -q filelock
}
cargo build --release --example counter >&2
COUNTER=$PWD/target/release/examples/counter
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-filelock.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat >"$dir/py.py" <<'PY'
import fcntl, os, sys, time
kind, lock, counter, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def bump():
    try:
        v = int(open(counter).read() or 0)
    except FileNotFoundError:
        v = 0
    with open(counter, "w") as f:
        f.write("%d\n" % (v + 1))
if kind == "filelock":
    from filelock import FileLock
    lk = FileLock(lock)
    for _ in range(n):
        with lk:
            bump()
else:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    for _ in range(n):
        if kind == "seed":
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.1)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
        bump()
        fcntl.flock(fd, fcntl.LOCK_UN)
PY
run() { # tool -> increments per second
    local tool=$1 t0 t1 pids=() p
    echo 0 >"$dir/c"
    t0=$EPOCHREALTIME
    for ((p = 0; p < PROCS; p++)); do
        case $tool in
            fsync) "$COUNTER" "$dir/l" "$dir/c" "$N" & ;;
            *) python3 "$dir/py.py" "$tool" "$dir/l" "$dir/c" "$N" & ;;
        esac
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    t1=$EPOCHREALTIME
    read -r got <"$dir/c"
    ((got == PROCS * N)) || { echo "$tool: count $got, expected $((PROCS * N))" >&2; exit 1; }
    awk -v n=$((PROCS * N)) -v a="${t0/./}" -v b="${t1/./}" 'BEGIN { printf "%.0f\n", n / ((b - a) / 1e6) }'
}
tools=(fsync filelock seed flock)
for t in "${tools[@]}"; do : >"$dir/$t.txt"; done
for ((i = 0; i < TRIALS; i++)); do
    for t in "${tools[@]}"; do run "$t" >>"$dir/$t.txt"; done
    tools=("${tools[@]:1}" "${tools[0]}") # rotate who goes first
done
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
f=$(median "$dir/fsync.txt")
printf '%-44s %14s %10s\n' "$PROCS processes x $N increments, $TRIALS trials" "increments/s" "fsync/x"
for t in fsync filelock seed flock; do
    m=$(median "$dir/$t.txt")
    case $t in
        fsync) name="fsync::Mutex (Rust library)" ;;
        filelock) name="Python filelock.FileLock (polls every 50 ms)" ;;
        seed) name="seed loop: try, sleep 100 ms (Python)" ;;
        flock) name="raw blocking flock(2) (Python)" ;;
    esac
    printf '%-44s %14s %10s\n' "$name" "$m" "$(awk -v a="$f" -v b="$m" 'BEGIN { printf "%.2f", a / b }')"
done
echo "(every final count exact)"
