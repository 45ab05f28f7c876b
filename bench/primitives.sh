#!/usr/bin/env bash
# Latency figures of the other primitives through the CLI (see BENCHMARKS.md):
#   group empty / members with M live members; event signal -> waiter exit; msg post -> recv;
#   sem slot hand-over. Each measured with bash's $EPOCHREALTIME around real processes.
#   bench/primitives.sh [MEMBERS]     (default 1000; needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
M=${1:-1000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-prim.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 0.2; rm -rf "$dir"' EXIT
cd "$dir"
now() { echo "${EPOCHREALTIME/./}"; }          # microseconds
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
p99() { sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; print a[i]}'; }
report() { local name=$1 file=$2; printf '%-44s p50 %8s us   p99 %8s us   (n=%s)\n' "$name" "$(median <"$file")" "$(p99 <"$file")" "$(wc -l <"$file")"; }

# group: M members (each an fsync plus a sleeping command)
for _ in $(seq "$M"); do "$F" group join G -- sleep 600 & done
until [ "$("$F" group members --json G | sed 's/.*"count":\([0-9]*\).*/\1/')" -ge "$M" ]; do sleep 0.2; done
for _ in $(seq 200); do t0=$(now); "$F" group empty G || true; echo $(( $(now) - t0 )); done > empty.txt
for _ in $(seq 20); do t0=$(now); "$F" group members G >/dev/null; echo $(( $(now) - t0 )); done > members.txt
for _ in $(seq 100); do t0=$(now); "$F" group join G -- true; echo $(( $(now) - t0 )); done > join.txt
report "group empty, $M members (whole command)" empty.txt
report "group members, $M members (whole command)" members.txt
report "group join -- true, $M members" join.txt
kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true

# The woken side stamps the time itself (bash's `wait` adds ~10 ms here, so it is not used to
# time anything). blocked PID: until PID's fsync child sleeps waiting for a change (in ppoll,
# woken by dnotify's signal; or in read(2) on inotify, where the kernel lacks dnotify).
blocked() {
    local c
    until c=$(pgrep -P "$1") && grep -q -E 'poll|inotify' "/proc/$c/wchan" 2>/dev/null; do :; done
}

# event: a --reset waiter blocked waiting for a change; signal start and signal return -> waiter woke
for _ in $(seq 200); do
    bash -c '"$0" event wait --reset E; echo ${EPOCHREALTIME/./} > woke' "$F" & w=$!
    blocked "$w"
    t0=$(now); "$F" event signal E; t1=$(now); wait "$w"
    echo $(( $(cat woke) - t0 )) >> event_start.txt
    d=$(( $(cat woke) - t1 )); echo $(( d < 0 ? 0 : d )) >> event_return.txt
done
report "event signal start -> waiter woke" event_start.txt
report "event signal return -> waiter woke (0: before)" event_return.txt

# msg: durable post, then a receiver already waiting gets it
for _ in $(seq 100); do
    bash -c '"$0" msg recv B >/dev/null; echo ${EPOCHREALTIME/./} > got' "$F" & r=$!
    blocked "$r"
    t0=$(now); "$F" msg post B --data x; t1=$(now); wait "$r"
    echo $(( t1 - t0 )) >> post.txt
    d=$(( $(cat got) - t1 )); echo $(( d < 0 ? 0 : d )) >> recv.txt
done
report "msg post (durable, whole command)" post.txt
report "msg post return -> receiver has it (0: before)" recv.txt

# sem: slot hand-over with a waiter present: the holder's command ends -> the next command starts
for _ in $(seq 100); do
    "$F" sem run S --slots 1 -- bash -c 'sleep 0.1; echo ${EPOCHREALTIME/./} > released' & h=$!
    until ! "$F" sem status S >/dev/null; do :; done
    "$F" sem run S --slots 1 -- bash -c 'echo ${EPOCHREALTIME/./} > got' & w=$!
    wait "$h" "$w"
    echo $(( $(cat got) - $(cat released) ))
done > sem.txt
report "sem hand-over (command end -> next command)" sem.txt

# msg durable throughput: 200 posts from one sender, then 4 senders x 50 at once
t0=$(now); for i in $(seq 200); do "$F" msg post T1 --data "m$i"; done; t1=$(now)
echo "msg post throughput, 1 sender:   $(( 200 * 1000000 / (t1 - t0) )) messages/s"
t0=$(now)
for k in 1 2 3 4; do (for i in $(seq 50); do "$F" msg post T4 --data "s$k-$i"; done) & done; wait
t1=$(now)
echo "msg post throughput, 4 senders:  $(( 200 * 1000000 / (t1 - t0) )) messages/s"
