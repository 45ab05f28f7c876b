#!/usr/bin/env bash
# Test bed: a MooseFS 3 cluster on one machine, a second real distributed file
# system beside the GlusterFS bed (tests/beds/glusterfs). One server "host" runs the
# master (metadata, locks) and a chunkserver (data); two client "hosts" each run
# mfsmount. Each host is a network namespace, joined by a bridge. The FUSE
# mounts live in the normal (root) mount namespace, so any process can use them.
#
#   fsbed2-srv  (10.78.0.1)  mfsmaster + mfschunkserver   (br-fsbed2)
#   fsbed2-a    (10.78.0.2)  mfsmount  -> $FSBED2_MNT/a
#   fsbed2-b    (10.78.0.3)  mfsmount  -> $FSBED2_MNT/b
#   (and fsbed2-c, -d, ... at 10.78.0.4, .5, ... for each host FSBED2_HOSTS names)
#
# Idempotent: re-running only does what is missing (a dead client is remounted,
# a link left down is brought up). Prints the two mount points as the last two
# lines of stdout: "A=<path>" / "B=<path>".
# Env knobs:
#   FSBED2_STATE        state dir: configs, pid files, logs, metadata, chunks
#                       default /tmp/fsbed2-state
#   FSBED2_MNT          parent of the mount points        default /mnt/fsbed2
#   FSBED2_HOSTS        the client hosts, a letter each   default "a b"
#   FSBED2_CLIENT_OPTS  mfsmount -o options (coherence), default below;
#                       "" gives MooseFS's defaults
#   FSBED2_SUSTAIN      master SESSION_SUSTAIN_TIME (s): how long the master
#                       keeps a silent client's session - and its locks; 60 is
#                       MooseFS's minimum (default 86400)          default 60
set -euo pipefail

STATE=${FSBED2_STATE:-/tmp/fsbed2-state}
MNT=${FSBED2_MNT:-/mnt/fsbed2}
NET=10.78.0
SRV_IP=$NET.1
NS=fsbed2
HOSTS=${FSBED2_HOSTS:-a b}
# Kernel and client caches off, so that what one "host" writes is seen at once
# by the other (the same intent as the GlusterFS bed's options). MooseFS's own
# defaults keep attributes 1 s and directory entries 1 s.
CLIENT_OPTS=${FSBED2_CLIENT_OPTS-mfscachemode=DIRECT,mfsattrcacheto=0,mfsentrycacheto=0,mfsdirentrycacheto=0,mfsnegentrycacheto=0}
SUSTAIN=${FSBED2_SUSTAIN:-60}

log() { echo "[fsbed2 $(date +%T)] $*" >&2; }
mkdir -p "$STATE"

# ---- 1. packages ---------------------------------------------------------
if ! command -v mfsmaster >/dev/null || ! command -v mfschunkserver >/dev/null || \
   ! command -v mfsmount >/dev/null; then
  log "installing moosefs-master moosefs-chunkserver moosefs-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends moosefs-master moosefs-chunkserver \
      moosefs-client iproute2 util-linux >&2
fi
id mfs >/dev/null 2>&1 || { log "user mfs missing (moosefs-common creates it)"; exit 1; }

# process in pid file $1 is running (a zombie awaiting its reaper does not count)
alive() {
  local p; p=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$p" ] && [ -r "/proc/$p/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$p/stat" 2>/dev/null
}
mounted() { grep -q " $1 fuse" /proc/mounts; }
# Whether mount $1 answers a stat within $2 s (default 3). A stat on a client that cannot
# reach its master blocks in the kernel, and not even SIGKILL ends it until mfsmount answers
# (after ~2 min: EIO), so `timeout stat` is no bound: leave a stuck stat behind instead.
answers() {
  local p i
  stat -t "$1" >/dev/null 2>&1 & p=$!
  for i in $(seq 1 $((${2:-3} * 20))); do
    if ! kill -0 "$p" 2>/dev/null; then wait "$p"; return; fi
    sleep 0.05
  done
  return 1
}

for h in $HOSTS; do   # a mount whose client process died answers ENOTCONN: drop it
  if mounted "$MNT/$h"; then
    alive "$STATE/client-$h.pid" || umount -l "$MNT/$h" || true
  fi
  mounted "$MNT/$h" || mkdir -p "$MNT/$h"
done

# ---- 2. network namespaces ----------------------------------------------
inns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }
{
  mkns() { ip netns list | grep -qw "^$1" || ip netns add "$1"; ip -n "$1" link set lo up; }
  mkns $NS-srv; for h in $HOSTS; do mkns "$NS-$h"; done
  if ! ip -n $NS-srv link show br-$NS >/dev/null 2>&1; then
    ip -n $NS-srv link add br-$NS type bridge
    ip -n $NS-srv addr add $SRV_IP/24 dev br-$NS
    ip -n $NS-srv link set br-$NS up
  fi
  for h in $HOSTS; do
    n=$(( $(printf %d "'$h") - 95 ))   # a: .2, b: .3, ... whichever hosts this run names
    if ! ip -n $NS-$h link show eth0 >/dev/null 2>&1; then
      ip link add "fsb2-$h" netns $NS-srv type veth peer name eth0 netns "$NS-$h"
      ip -n $NS-srv link set "fsb2-$h" master br-$NS up
      ip -n "$NS-$h" addr add "$NET.$n/24" dev eth0
      ip -n "$NS-$h" link set eth0 up
    fi
    ip -n "$NS-$h" link set eth0 up     # in case a test left it down
    ip -n $NS-srv link set "fsb2-$h" master br-$NS up   # or cut it off the bridge
  done
}

# ---- 3. configuration (rewritten each run; daemons read it at start) ------
mkdir -p "$STATE/master" "$STATE/cs" "$STATE/chunks"
chown mfs:mfs "$STATE/master" "$STATE/cs" "$STATE/chunks"
cat > "$STATE/mfsmaster.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
SYSLOG_IDENT = fsbed2-mfsmaster
NICE_LEVEL = 0
DATA_PATH = $STATE/master
EXPORTS_FILENAME = $STATE/mfsexports.cfg
TOPOLOGY_FILENAME = $STATE/mfstopology.cfg
BACK_LOGS = 5
MATOML_LISTEN_HOST = $SRV_IP
MATOCS_LISTEN_HOST = $SRV_IP
MATOCL_LISTEN_HOST = $SRV_IP
SESSION_SUSTAIN_TIME = $SUSTAIN
EOF
cat > "$STATE/mfsexports.cfg" <<EOF
$NET.0/24 / rw,alldirs,admin,maproot=0:0
EOF
: > "$STATE/mfstopology.cfg"
cat > "$STATE/mfschunkserver.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
SYSLOG_IDENT = fsbed2-mfschunkserver
NICE_LEVEL = 0
DATA_PATH = $STATE/cs
HDD_CONF_FILENAME = $STATE/mfshdd.cfg
HDD_LEAVE_SPACE_DEFAULT = 2GiB
MASTER_HOST = $SRV_IP
MASTER_RECONNECTION_DELAY = 1
BIND_HOST = $SRV_IP
CSSERV_LISTEN_HOST = $SRV_IP
EOF
echo "$STATE/chunks" > "$STATE/mfshdd.cfg"
: > "$STATE/mfsmount.cfg"      # so that /etc/mfs/mfsmount.cfg, if any, is not read

# ---- 4. master + chunkserver ------------------------------------------------
listening() { inns $NS-srv ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
# start CMD... in netns $NS-srv, detached, pid in $STATE/$name.pid
start_daemon() {
  local name=$1; shift
  setsid nsenter --net=/run/netns/$NS-srv "$@" </dev/null >>"$STATE/$name.log" 2>&1 &
  echo $! > "$STATE/$name.pid"
}
if ! alive "$STATE/master.pid"; then
  if [ ! -e "$STATE/master/metadata.mfs" ] && [ ! -e "$STATE/master/metadata.mfs.back" ]; then
    log "new file system (empty metadata)"
    install -o mfs -g mfs -m 640 /var/lib/mfs/metadata.mfs.empty "$STATE/master/metadata.mfs"
  fi
  log "starting mfsmaster"
  # -a: after an unclean stop, rebuild metadata from the change logs
  start_daemon master /usr/sbin/mfsmaster -f -a -c "$STATE/mfsmaster.cfg" start
fi
up=0
for i in $(seq 1 150); do
  if listening 9421 && listening 9420; then up=1; break; fi
  alive "$STATE/master.pid" || break
  sleep 0.1
done
[ $up = 1 ] || { log "mfsmaster not listening; see $STATE/master.log"; exit 1; }

if ! alive "$STATE/chunkserver.pid"; then
  log "starting mfschunkserver"
  start_daemon chunkserver /usr/sbin/mfschunkserver -f -c "$STATE/mfschunkserver.cfg" start
fi
# registered with the master = an established connection to the master's :9420
cs_registered() { inns $NS-srv ss -Htn state established "dport = :9420" 2>/dev/null | grep -q .; }
up=0
for i in $(seq 1 200); do
  if cs_registered && listening 9422; then up=1; break; fi
  alive "$STATE/chunkserver.pid" || break
  sleep 0.1
done
[ $up = 1 ] || { log "mfschunkserver not connected; see $STATE/chunkserver.log"; exit 1; }

# ---- 5. client mounts (one mfsmount process per "host") ---------------------
for h in $HOSTS; do
  mp="$MNT/$h"
  if mounted "$mp" && alive "$STATE/client-$h.pid"; then
    # up, or reconnecting by itself after a cut / master restart
    for i in $(seq 1 10); do answers "$mp" && break; done
    answers "$mp" && continue
    log "client $h not answering; remounting"
    kill "$(cat "$STATE/client-$h.pid")" 2>/dev/null || true
    for i in $(seq 1 30); do alive "$STATE/client-$h.pid" || break; sleep 0.1; done
    alive "$STATE/client-$h.pid" && kill -9 "$(cat "$STATE/client-$h.pid")" 2>/dev/null
  fi
  if mounted "$mp"; then umount -l "$mp" || true; fi   # stale
  log "mounting $mp via netns $NS-$h"
  setsid nsenter --net="/run/netns/$NS-$h" /usr/bin/mfsmount -f \
      -o "mfsmaster=$SRV_IP,mfsport=9421,mfscfgfile=$STATE/mfsmount.cfg,mfsnice=0${CLIENT_OPTS:+,$CLIENT_OPTS}" \
      "$mp" </dev/null >>"$STATE/client-$h.log" 2>&1 &
  echo $! > "$STATE/client-$h.pid"
  for i in $(seq 1 100); do
    mounted "$mp" && answers "$mp" && break
    alive "$STATE/client-$h.pid" || break
    sleep 0.1
  done
  mounted "$mp" || { log "mount $mp failed; see $STATE/client-$h.log"; exit 1; }
done

# the chunkserver reports its space once its first scan is done (~2 s after a
# clean start); until then the file system shows 0 bytes. Asked through a host just set
# up: another (host a, when the nemesis mounts another host again) may be frozen or cut
# off, and each look would wait out its timeout.
first=${HOSTS%% *}
for i in $(seq 1 100); do
  [ "$(timeout 3 stat -f -c %b "$MNT/$first" 2>/dev/null || echo 0)" != 0 ] && break
  sleep 0.1
done

# one copy of each chunk is all a single chunkserver can hold (default goal: 2)
if [ ! -e "$STATE/goal-set" ]; then
  # (tools reach the master through the mount's local proxy, in host a's netns)
  inns $NS-a mfssetgoal -r 1 "$MNT/a" >/dev/null 2>&1 && touch "$STATE/goal-set" || true
fi

echo "A=$MNT/a"
echo "B=$MNT/b"
