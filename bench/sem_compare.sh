#!/usr/bin/env bash
# Semaphore utilisation (issue 5): C contenders each run J jobs of 50 ms under a semaphore of
# N=4 slots; utilisation = busy slot-time / (wall time x N). fsync sem run against GNU
# parallel's `sem -j 4` (installs parallel if missing). Also counts the most jobs inside at once.
#   bench/sem_compare.sh [J]   (needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
J=${1:-5}
command -v sem >/dev/null || apt-get install -y -qq parallel >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-sem.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
job='echo + >> log; sleep 0.05; echo - >> log'
run() { # $1: label, $2: contenders, $3: command prefix
    : > log
    local t0=${EPOCHREALTIME/./}
    for _ in $(seq "$2"); do (for _ in $(seq "$J"); do
        if [[ $3 == sem* ]]; then $3 "$job"; else $3 sh -c "$job"; fi   # GNU sem takes a shell string
    done) & done; wait
    local t1=${EPOCHREALTIME/./}
    local most; most=$(awk '/\+/{n++; if(n>m)m=n} /-/{n--} END{print m}' log)
    local jobs=$(( $2 * J ))
    printf '%-26s %3s contenders %4s jobs  wall %6s ms  utilisation %3s %%  most inside %s\n' \
        "$1" "$2" "$jobs" $(( (t1 - t0) / 1000 )) $(( jobs * 50000 * 100 / ((t1 - t0) * 4) )) "$most"
}
export HOME=$dir                     # GNU sem keeps its state under ~/.parallel
for c in 4 16; do
    run "fsync sem run --slots 4" "$c" "$F sem run S$c --slots 4 --"
    run "GNU parallel sem -j 4" "$c" "sem --will-cite --fg --id s$c -j 4"
done
