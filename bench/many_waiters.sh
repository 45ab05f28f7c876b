#!/usr/bin/env bash
# Issue 6, target 6: W processes waiting on one mutex all get through, and what each waiting
# fsync costs in memory (VmRSS from /proc, measured while they all wait).
#   bench/many_waiters.sh [W]   (default 1000; needs a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
W=${1:-1000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-many.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
mkfifo release
"$F" mutex run L -- sh -c 'echo held; read x < release' > held &
holder=$!
until [ -s held ]; do sleep 0.01; done
pids=()
for _ in $(seq "$W"); do "$F" mutex run L -- sh -c 'echo x >> done' & pids+=($!); done
# all waiting: each has its lock file open and is blocked (state S)
until [ "$(grep -c ' -> FLOCK' /proc/locks)" -ge "$W" ]; do sleep 0.1; done
rss=$(for p in "${pids[@]}"; do awk '/VmRSS/{print $2}' "/proc/$p/status"; done | sort -n)
echo "$W waiters blocked; VmRSS per waiting fsync: min $(head -1 <<<"$rss") kB, median $(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' <<<"$rss") kB, max $(tail -1 <<<"$rss") kB"
t0=${EPOCHREALTIME/./}
echo go > release
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=$((fail+1)); done
wait "$holder"
t1=${EPOCHREALTIME/./}
echo "all through: $(wc -l < done) of $W ran their command, $fail failed, in $(( (t1 - t0) / 1000 )) ms"
