#!/usr/bin/env bash
# Event wake-up (issue 4): the time from the signal (the event file appearing) to the waiter
# having noticed, for `fsync event wait --reset`, the seeds' 100 ms polling loop, and an
# `inotifywait` shell loop. The woken side stamps its own time. Installs inotify-tools if missing.
#   bench/event_compare.sh [TRIALS]   (needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
TRIALS=${1:-40}
command -v inotifywait >/dev/null || apt-get install -y -qq inotify-tools >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-ev.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
now() { echo "${EPOCHREALTIME/./}"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() { # $1: waiter script (must remove E, then stamp)
    : > lat
    for _ in $(seq "$TRIALS"); do
        rm -f E woke
        bash -c "$1" & w=$!
        sleep 0.15                       # let it block (benchmark, not a test)
        t0=$(now); : > E; wait "$w"
        echo $(( $(cat woke) - t0 )) >> lat
    done
    median < lat
}
stamp='echo ${EPOCHREALTIME/./} > woke'
printf '%-34s %10s\n' "waiter" "p50 us"
printf '%-34s %10s\n' "fsync event wait --reset" "$(measure "'$F' event wait --reset E; $stamp")"
printf '%-34s %10s\n' "seed loop: test -e; sleep 0.1" "$(measure "until rm E 2>/dev/null; do sleep 0.1; done; $stamp")"
printf '%-34s %10s\n' "inotifywait loop" "$(measure "until rm E 2>/dev/null; do inotifywait -qq -t 5 -e create .; done; $stamp")"
