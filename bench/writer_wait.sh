#!/usr/bin/env bash
# Writer wait under a continuous reader stream (issue 3): readers that each hold 200 ms start
# every 50 ms for ~3 s, so one is always inside; a writer arrives 0.5 s in. How long until it
# gets in, with `fsync swmr read/write` against `flock -s` / `flock -x` on the same work.
#   bench/writer_wait.sh [TRIALS]   (needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
TRIALS=${1:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-ww.XXXXXX")
trap 'rm -rf "$dir"' EXIT
now() { echo "${EPOCHREALTIME/./}"; }
trial() { # $1: read command prefix, $2: write command prefix
    local lock=$dir/L.$RANDOM
    (for _ in $(seq 60); do $1 "$lock" sleep 0.2 & sleep 0.05; done; wait) &
    local stream=$!
    sleep 0.5
    local t0; t0=$(now); $2 "$lock" true; local t1; t1=$(now)
    wait "$stream"
    echo $(( (t1 - t0) / 1000 ))
}
printf '%-28s %s\n' "tool" "writer wait ms per trial (stream lasts ~3000 ms)"
for _ in $(seq "$TRIALS"); do
    fs=$(trial "$F swmr read" "$F swmr write" ) ; fl=$(trial "flock -s" "flock -x")
    printf '%-28s %s\n' "fsync swmr" "$fs" "flock -s / flock -x" "$fl"
done
