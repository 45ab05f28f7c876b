#!/usr/bin/env bash
# Cross-host figures on the GlusterFS bed: run tests/beds/glusterfs/setup.sh first.
#   bench/netfs.sh [TRIALS]   (needs a release build; root)
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP=$PWD/tests/beds/glusterfs/setup.sh
F=${FSYNC:-$PWD/target/release/fsync}
TRIALS=${1:-20}
A=/mnt/fsbed/a/bench.$$ B=/mnt/fsbed/b/bench.$$
mkdir -p "$A"; until [ -d "$B" ]; do sleep 0.05; done
cd "$(mktemp -d)"
now() { echo "${EPOCHREALTIME/./}"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: > handoff; : > event; : > msg
for _ in $(seq "$TRIALS"); do
    # mutex: holder on a ends its command -> the waiter on b runs its command
    "$F" mutex run "$A/L" -- bash -c 'sleep 0.3; echo ${EPOCHREALTIME/./} > rel' & h=$!
    sleep 0.1
    "$F" mutex run "$B/L" -- bash -c 'echo ${EPOCHREALTIME/./} > got'
    wait "$h"; echo $(( $(cat got) - $(cat rel) )) >> handoff
    # event: signal on a -> waiter on b woke (polls every 50 ms there)
    bash -c '"$0" event wait --reset "$1"; echo ${EPOCHREALTIME/./} > woke' "$F" "$B/E" & w=$!
    sleep 0.2; t0=$(now); "$F" event signal "$A/E"; wait "$w"; echo $(( $(cat woke) - t0 )) >> event
    # msg: post on a -> receiver on b has it
    bash -c '"$0" msg recv "$1" > /dev/null; echo ${EPOCHREALTIME/./} > got' "$F" "$B/M" & r=$!
    sleep 0.2; t0=$(now); "$F" msg post "$A/M" --data x; wait "$r"; echo $(( $(cat got) - t0 )) >> msg
done
printf 'cross-host mutex hand-over (command end -> next command), p50 %s us\n' "$(median < handoff)"
printf 'cross-host event signal start -> waiter woke, p50 %s us\n' "$(median < event)"
printf 'cross-host msg post start -> receiver has it, p50 %s us\n' "$(median < msg)"

# partition: host a holds, its link goes down; time until b holds, and until a's fsync stops (76)
"$F" mutex run "$A/P" -- sleep 300 & h=$!
sleep 0.5
t0=$(now); ip -n fsbed-a link set eth0 down
"$F" mutex run -t 120s "$B/P" -- true; t1=$(now)
set +e; wait "$h"; rc=$?; set -e; t2=$(now)
ip -n fsbed-a link set eth0 up
printf 'partition: the other host holds after %s ms; the cut-off command stopped after %s ms (exit %s)\n' \
    $(( (t1 - t0) / 1000 )) $(( (t2 - t0) / 1000 )) "$rc"
"$SETUP" >/dev/null            # re-mount host a after the cut
# client crash: host a's GlusterFS client dies while a holds; time until b holds
mkdir -p "$A" 2>/dev/null || true
"$F" mutex run "$A/C" -- sleep 300 & h=$!
sleep 0.5
t0=$(now); kill -9 "$(cat /tmp/fsbed-state/client-a.pid)"
"$F" mutex run -t 120s "$B/C" -- true; t1=$(now)
kill "$h" 2>/dev/null || true; wait "$h" 2>/dev/null || true
printf 'client crash: the other host holds after %s ms\n' $(( (t1 - t0) / 1000 ))
"$SETUP" >/dev/null
