#!/usr/bin/env bash
# Undo setup.sh: unmount both clients, stop the Ceph daemons this test bed
# started (by pid file only), remove the network namespaces and the cluster's
# data (monitor store, the OSD's BlueStore file, keyrings). Keeps the logs in
# $FSBED3_STATE/log. Safe to run repeatedly. Does not uninstall packages.
set -uo pipefail
STATE=${FSBED3_STATE:-/tmp/fsbed3-state}
MNT=${FSBED3_MNT:-/mnt/fsbed3}
NS=fsbed3
log() { echo "[fsbed3-teardown $(date +%T.%N | cut -c1-12)] $*" >&2; }

# running = exists and is not a zombie waiting for its reaper
running() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
killpid() {  # killpid PIDFILE [SECS] -- TERM, wait up to SECS (5), then KILL
  local f=$1 secs=${2:-5} p
  [ -s "$f" ] || return 0
  p=$(cat "$f")
  if [ -n "$p" ] && running "$p"; then
    kill "$p" 2>/dev/null
    for _ in $(seq 1 $((secs * 10))); do running "$p" || break; sleep 0.1; done
    running "$p" && { log "$(basename "$f" .pid) did not stop; SIGKILL"; kill -9 "$p" 2>/dev/null; }
  fi
  rm -f "$f"
}

# 1. clients: links up first, so that a client cut off by a test can say goodbye
for h in a b c d e f g h; do
  [ -e /run/netns/$NS-$h ] && ip -n $NS-$h link set eth0 up 2>/dev/null
  [ -e /run/netns/$NS-srv ] && ip -n $NS-srv link set fsb3-$h master br-$NS up 2>/dev/null
done
for h in a b c d e f g h; do
  mp="$MNT/$h"
  if grep -q " $mp fuse" /proc/mounts; then
    # a plain umount can block on a client that cannot reach its MDS
    timeout 10 umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || log "could not unmount $mp"
  fi
  killpid "$STATE/client-$h.pid"
done
log "clients unmounted"

# 2. daemons, clients of the others first
killpid "$STATE/mds.a.pid" 10   # it says goodbye to the monitor first (~4 s)
killpid "$STATE/osd.0.pid" 10
killpid "$STATE/mgr.a.pid"
killpid "$STATE/mon.a.pid" 10
log "ceph-mds, ceph-osd, ceph-mgr, ceph-mon stopped"

# 3. network namespaces
for ns in $NS-a $NS-b $NS-c $NS-d $NS-e $NS-f $NS-g $NS-h $NS-srv; do
  ip netns list 2>/dev/null | grep -qw "^$ns" && ip netns del "$ns"
done

# 4. the cluster's data (a new cluster, with a new fsid, is made by the next setup)
rm -rf "$STATE/mon" "$STATE/mgr" "$STATE/osd" "$STATE/mds" "$STATE/run" "$STATE/crash" \
    "$STATE"/*.keyring "$STATE/monmap" "$STATE/fsid" "$STATE/ceph.conf"
for h in a b c d e f g h; do rmdir "$MNT/$h" 2>/dev/null; done
rmdir "$MNT" 2>/dev/null
log "done"
