#!/usr/bin/env bash
# How soon a waiting receiver takes the message of a worker killed with its job (SIGKILL to the
# worker's process group, nothing else touching the mailbox): N kills, p50 and max of the time
# from the kill to the waiting receiver's job starting. Usage: bench/stranded.sh [N] [FSYNC]
set -euo pipefail
n=${1:-50}
fsync=${2:-$(cd "$(dirname "$0")/.." && pwd)/target/release/fsync}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
times=()
for _ in $(seq "$n"); do
    rm -rf B started taken
    "$fsync" msg post B --data job
    setsid "$fsync" msg recv B -- sh -c 'echo > started; exec sleep 1000' &
    worker=$!
    while [ ! -e started ]; do sleep 0.01; done
    "$fsync" msg recv -v B -- sh -c 'date +%s%N > taken' 2> waiting &
    waiter=$!
    while ! grep -q waiting waiting 2>/dev/null; do sleep 0.01; done
    killed=$(date +%s%N)
    kill -KILL -- -"$worker"
    wait "$waiter"
    times+=($(( ($(cat taken) - killed) / 1000 )))
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$n" '
    { t[NR] = $1 } END { printf "kills: %d  p50: %.2f ms  max: %.2f ms\n", n, t[int((NR + 1) / 2)] / 1000, t[NR] / 1000 }'
