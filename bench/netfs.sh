#!/usr/bin/env bash
# Cross-host wake-ups on a network file system bed (tests/beds/): fsync beside flock(1) on the
# same work, between the bed's two client "hosts" (the hand-over: `mutex run`, util-linux
# flock(1) and `fsync flock`, in turn within each trial).
#   bench/netfs.sh [glusterfs|moosefs|cephfs] [TRIALS]   (needs a release build; root; the bed set up:
#                                                   tests/beds/BED/setup.sh)
# Prints p50 and p90 in microseconds, one line per figure.
set -euo pipefail
cd "$(dirname "$0")/.."
BED=${1:-glusterfs}
TRIALS=${2:-25}
case $BED in
    glusterfs) MNT=/mnt/fsbed ;;
    moosefs) MNT=/mnt/fsbed2 ;;
    cephfs) MNT=/mnt/fsbed3 ;;
    *) echo "bench/netfs.sh: no bed named $BED (glusterfs, moosefs, cephfs)" >&2; exit 2 ;;
esac
F=${FSYNC:-$PWD/target/release/fsync}
A=$MNT/a/bench.$$ B=$MNT/b/bench.$$
mkdir -p "$A"; until [ -d "$B" ]; do sleep 0.05; done
cd "$(mktemp -d)"
now() { echo "${EPOCHREALTIME/./}"; }
# A pause of 200 to 300 ms, so that a change falls at a random point of the waiter's polls.
pause() { sleep "0.$((200 + RANDOM % 100))"; }
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; print a[i]}'; }
: > fsync_handoff; : > flock_handoff; : > fsync_flock_handoff; : > event_start; : > event_done; : > msg_start; : > msg_done
for _ in $(seq "$TRIALS"); do
    # mutex: the holder's command on a ends -> the waiter's command on b starts
    "$F" mutex run "$A/L" -- bash -c 'sleep 0.3; echo ${EPOCHREALTIME/./} > rel' & h=$!
    sleep 0.1
    "$F" mutex run "$B/L" -- bash -c 'echo ${EPOCHREALTIME/./} > got'
    wait "$h"; echo $(( $(cat got) - $(cat rel) )) >> fsync_handoff
    # the same with util-linux flock(1): the file system's own wake-up, plus the same processes
    flock "$A/K" -c 'sleep 0.3; echo ${EPOCHREALTIME/./} > rel' & h=$!
    sleep 0.1
    flock "$B/K" -c 'echo ${EPOCHREALTIME/./} > got'
    wait "$h"; echo $(( $(cat got) - $(cat rel) )) >> flock_handoff
    # the same with `fsync flock` (flock(1)'s conventions, no holder record, no fencing token)
    "$F" flock "$A/J" -c 'sleep 0.3; echo ${EPOCHREALTIME/./} > rel' & h=$!
    sleep 0.1
    "$F" flock "$B/J" -c 'echo ${EPOCHREALTIME/./} > got'
    wait "$h"; echo $(( $(cat got) - $(cat rel) )) >> fsync_flock_handoff
    # event: signal on a -> the waiter on b woke (b re-checks every --poll, 50 ms)
    bash -c '"$0" event wait --reset "$1"; echo ${EPOCHREALTIME/./} > woke' "$F" "$B/E" & w=$!
    pause; t0=$(now); "$F" event signal "$A/E"; t1=$(now); wait "$w"
    echo $(( $(cat woke) - t0 )) >> event_start; echo $(( $(cat woke) - t1 )) >> event_done
    # msg: post on a -> the receiver on b has it (the post is durable: flushed before it returns)
    bash -c '"$0" msg recv "$1" > /dev/null; echo ${EPOCHREALTIME/./} > got' "$F" "$B/M" & r=$!
    pause; t0=$(now); "$F" msg post "$A/M" --data x; t1=$(now); wait "$r"
    echo $(( $(cat got) - t0 )) >> msg_start; echo $(( $(cat got) - t1 )) >> msg_done
done
row() { printf '%-62s p50 %6s us  p90 %6s us\n' "$1" "$(pct 50 < "$2")" "$(pct 90 < "$2")"; }
echo "$BED, $TRIALS trials"
row "mutex hand-over, fsync (a's command ends -> b's starts)" fsync_handoff
row "mutex hand-over, flock(1), same work" flock_handoff
row "mutex hand-over, fsync flock, same work" fsync_flock_handoff
row "event: signal on a starts -> waiter on b woke" event_start
row "event: signal on a returned -> waiter on b woke" event_done
row "msg: post on a starts -> receiver on b has it" msg_start
row "msg: post on a returned -> receiver on b has it" msg_done
rm -rf "$A"
