#!/usr/bin/env bash
# Test bed: a one-machine Ceph cluster with a CephFS file system, a third real
# distributed file system beside the GlusterFS and MooseFS beds. One server
# "host" runs a monitor, a manager, one OSD (BlueStore on a sparse file) and one
# MDS (metadata, caps and all file locks); two client "hosts" each run
# ceph-fuse under their own cephx name (client.a, client.b). Each host is a
# network namespace, joined by a bridge. The FUSE mounts live in the normal
# (root) mount namespace, so any process can use them.
#
#   fsbed3-srv  (10.79.0.1)  ceph-mon, ceph-mgr, ceph-osd, ceph-mds  (br-fsbed3)
#   fsbed3-a    (10.79.0.2)  ceph-fuse --id a  -> $FSBED3_MNT/a
#   fsbed3-b    (10.79.0.3)  ceph-fuse --id b  -> $FSBED3_MNT/b
#   (and fsbed3-c, -d, ... at 10.79.0.4, .5, ... for each host FSBED3_HOSTS names)
#
# Idempotent: re-running only does what is missing (a dead, evicted or
# unanswering client is remounted, a link left down is brought up, a dead
# daemon is restarted, the file system's timeouts are set back). Prints the two
# mount points as the last two lines of stdout: "A=<path>" / "B=<path>".
# Env knobs:
#   FSBED3_STATE     state dir: config, keyrings, pid files, logs, admin
#                    sockets, the daemons' data      default /tmp/fsbed3-state
#   FSBED3_MNT       parent of the mount points      default /mnt/fsbed3
#   FSBED3_HOSTS     the client hosts, a letter each default "a b"
#   FSBED3_SESSION_TIMEOUT    the file system's session_timeout (s): a client
#                    that has not renewed its caps for this long goes stale
#                    (30 is the least Ceph accepts; default 60)   default 30
#   FSBED3_SESSION_AUTOCLOSE  the file system's session_autoclose (s): the MDS
#                    evicts a client silent for this long, and so frees its
#                    locks (30 is the least; default 300)          default 30
set -euo pipefail

STATE=${FSBED3_STATE:-/tmp/fsbed3-state}
MNT=${FSBED3_MNT:-/mnt/fsbed3}
NET=10.79.0
SRV_IP=$NET.1
NS=fsbed3
FS=fsbed3
HOSTS=${FSBED3_HOSTS:-a b}
SESSION_TIMEOUT=${FSBED3_SESSION_TIMEOUT:-30}
SESSION_AUTOCLOSE=${FSBED3_SESSION_AUTOCLOSE:-30}
CONF=$STATE/ceph.conf

log() { echo "[fsbed3 $(date +%T)] $*" >&2; }
mkdir -p "$STATE/run" "$STATE/log"

# ---- 1. packages ---------------------------------------------------------
if ! command -v ceph-mon >/dev/null || ! command -v ceph-mgr >/dev/null || \
   ! command -v ceph-osd >/dev/null || ! command -v ceph-mds >/dev/null || \
   ! command -v ceph-fuse >/dev/null || ! command -v ceph >/dev/null; then
  log "installing ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds \
      ceph-fuse ceph-common iproute2 util-linux uuid-runtime >&2
fi

# process in pid file $1 is running (a zombie awaiting its reaper does not count)
alive() {
  local p; p=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$p" ] && [ -r "/proc/$p/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$p/stat" 2>/dev/null
}
mounted() { grep -q " $1 fuse" /proc/mounts; }
# Whether mount $1 answers a stat within $2 s (default 3). A call on a client that
# cannot reach its MDS may block in the kernel until ceph-fuse answers, and no signal
# ends it: `timeout stat` is no bound, so leave a stuck stat behind instead.
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
  # A port taken off the bridge (a test's silent cut) must hear nothing and say nothing: without
  # these the server's netns answers ARP for 10.79.0.1 on that port and accepts what comes in
  # through it (weak host model), so a cut-off client's requests and cap renewals still reach
  # the MDS (about 50 s after the cut, once its neighbour entry has expired) while no answer
  # reaches the client, and the MDS keeps its session alive.
  inns $NS-srv sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.rp_filter=1
  for h in $HOSTS; do
    n=$(( $(printf %d "'$h") - 95 ))   # a: .2, b: .3, ... whichever hosts this run names
    if ! ip -n $NS-$h link show eth0 >/dev/null 2>&1; then
      ip link add "fsb3-$h" netns $NS-srv type veth peer name eth0 netns "$NS-$h"
      ip -n $NS-srv link set "fsb3-$h" master br-$NS up
      ip -n "$NS-$h" addr add "$NET.$n/24" dev eth0
      ip -n "$NS-$h" link set eth0 up
    fi
    ip -n "$NS-$h" link set eth0 up     # in case a test left it down
    ip -n $NS-srv link set "fsb3-$h" master br-$NS up   # or cut it off the bridge
  done
}

# ---- 3. configuration (rewritten each run; daemons read it at start) ------
[ -s "$STATE/fsid" ] || uuidgen > "$STATE/fsid"
FSID=$(cat "$STATE/fsid")
cat > "$CONF" <<EOF
[global]
fsid = $FSID
mon_host = [v2:$SRV_IP:3300,v1:$SRV_IP:6789]
public_network = $NET.0/24
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = $STATE/run
crash_dir = $STATE/crash
# one OSD: one copy of everything, few placement groups, no health nagging about it
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_allow_pool_delete = true
mon_data_avail_warn = 5
auth_allow_insecure_global_id_reclaim = false
# the CLI (client.admin) keeps no admin socket and no log
admin_socket =
log_file =

[mon]
mon_data = $STATE/mon/ceph-\$id
keyring = $STATE/mon/ceph-\$id/keyring
log_file = $STATE/log/\$name.log
admin_socket = \$run_dir/\$cluster-\$name.asok
mon_memory_target = 536870912

[mgr]
mgr_data = $STATE/mgr/ceph-\$id
keyring = $STATE/mgr/ceph-\$id/keyring
log_file = $STATE/log/\$name.log
admin_socket = \$run_dir/\$cluster-\$name.asok

[osd]
osd_data = $STATE/osd/ceph-\$id
keyring = $STATE/osd/ceph-\$id/keyring
log_file = $STATE/log/\$name.log
admin_socket = \$run_dir/\$cluster-\$name.asok
osd_objectstore = bluestore
# BlueStore on a sparse file of 8 GiB in the data directory (created by --mkfs)
bluestore_block_create = true
bluestore_block_size = 8589934592
bluestore_block_db_create = false
bluestore_block_wal_create = false
osd_memory_target = 939524096
osd_memory_target_autotune = false

[mds]
mds_data = $STATE/mds/ceph-\$id
keyring = $STATE/mds/ceph-\$id/keyring
log_file = $STATE/log/\$name.log
admin_socket = \$run_dir/\$cluster-\$name.asok
mds_cache_memory_limit = 268435456
# look for silent clients every second, not every 5 s (the session_timeout and
# session_autoclose checks run on this tick)
mds_tick_interval = 0.2
# (Ceph's defaults, spelled out: a client evicted for silence is blocklisted,
# so that it cannot write or lock again with its old session when it comes back)
mds_session_blocklist_on_timeout = true
mds_session_blocklist_on_evict = true

[client]
client_mount_timeout = 30
fuse_disable_pagecache = true

[client.admin]
keyring = $STATE/admin.keyring
EOF
for h in a b c d e f g h; do   # every host a run may name (FSBED3_HOSTS)
  cat >> "$CONF" <<EOF

[client.$h]
keyring = $STATE/client.$h.keyring
admin_socket = \$run_dir/\$cluster-\$name.asok
log_file = $STATE/log/\$name.log
EOF
done

# the CLI as client.admin, run on the server "host"
C() {
  inns $NS-srv timeout 60 ceph -c "$CONF" -n client.admin -k "$STATE/admin.keyring" \
      --connect-timeout 30 "$@"
}
# start CMD... in netns $NS-srv, detached, pid in $STATE/$name.pid
start_daemon() {
  local name=$1; shift
  setsid nsenter --net=/run/netns/$NS-srv "$@" </dev/null >>"$STATE/log/$name.out" 2>&1 &
  echo $! > "$STATE/$name.pid"
}

# ---- 4. monitor ---------------------------------------------------------------
if [ ! -e "$STATE/mon/ceph-a/done" ]; then
  log "new cluster $FSID: creating monitor a"
  rm -rf "$STATE/mon/ceph-a"
  mkdir -p "$STATE/mon/ceph-a"
  ceph-authtool --create-keyring "$STATE/mon.keyring" --gen-key -n mon. \
      --cap mon 'allow *' >/dev/null
  ceph-authtool --create-keyring "$STATE/admin.keyring" --gen-key -n client.admin \
      --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$STATE/mon.keyring" --import-keyring "$STATE/admin.keyring" >/dev/null
  monmaptool --create --addv a "[v2:$SRV_IP:3300,v1:$SRV_IP:6789]" --fsid "$FSID" \
      --clobber "$STATE/monmap" >/dev/null
  inns $NS-srv ceph-mon -c "$CONF" --mkfs -i a --monmap "$STATE/monmap" --keyring "$STATE/mon.keyring" \
      >>"$STATE/log/mon.a.out" 2>&1
  touch "$STATE/mon/ceph-a/done"
fi
if ! alive "$STATE/mon.a.pid"; then
  log "starting ceph-mon"
  start_daemon mon.a /usr/bin/ceph-mon -c "$CONF" -f -i a
fi
up=0
for i in $(seq 1 100); do
  if C mon stat >/dev/null 2>&1; then up=1; break; fi
  alive "$STATE/mon.a.pid" || break
  sleep 0.2
done
[ $up = 1 ] || { log "ceph-mon not answering; see $STATE/log/mon.a.log"; exit 1; }

# ---- 5. manager -----------------------------------------------------------------
if ! alive "$STATE/mgr.a.pid"; then
  if [ ! -s "$STATE/mgr/ceph-a/keyring" ]; then
    mkdir -p "$STATE/mgr/ceph-a"
    C auth get-or-create mgr.a mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
        -o "$STATE/mgr/ceph-a/keyring"
  fi
  log "starting ceph-mgr"
  start_daemon mgr.a /usr/bin/ceph-mgr -c "$CONF" -f -i a
fi

# ---- 6. OSD (BlueStore on a file) -------------------------------------------------
if [ ! -e "$STATE/osd/ceph-0/done" ]; then
  log "creating osd.0 (BlueStore on a sparse 8 GiB file)"
  rm -rf "$STATE/osd/ceph-0"
  mkdir -p "$STATE/osd/ceph-0"
  uuid=$(uuidgen)
  secret=$(ceph-authtool --gen-print-key)
  id=$(echo "{\"cephx_secret\": \"$secret\"}" | C osd new "$uuid" 0 -i -)
  [ "$id" = 0 ] || { log "ceph osd new gave id '$id', not 0"; exit 1; }
  ceph-authtool --create-keyring "$STATE/osd/ceph-0/keyring" --name osd.0 \
      --add-key "$secret" >/dev/null
  inns $NS-srv ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$uuid" >>"$STATE/log/osd.0.out" 2>&1
  touch "$STATE/osd/ceph-0/done"
fi
if ! alive "$STATE/osd.0.pid"; then
  log "starting ceph-osd"
  start_daemon osd.0 /usr/bin/ceph-osd -c "$CONF" -f -i 0
fi
up=0
for i in $(seq 1 150); do
  if C osd dump 2>/dev/null | grep -q '^osd\.0 up '; then up=1; break; fi
  alive "$STATE/osd.0.pid" || break
  sleep 0.2
done
[ $up = 1 ] || { log "osd.0 not up; see $STATE/log/osd.0.log"; exit 1; }

# ---- 7. file system -------------------------------------------------------------
if ! C fs get $FS >/dev/null 2>&1; then
  log "creating file system $FS"
  C osd pool create ${FS}_meta 8 8 >/dev/null 2>&1 || true
  C osd pool create ${FS}_data 8 8 >/dev/null 2>&1 || true
  C fs new $FS ${FS}_meta ${FS}_data >/dev/null
fi
# the timeouts after which the MDS gives a silent client's caps and locks away
fsmap=$(C fs get $FS --format json)
want() {  # want KEY VALUE: set the file system's KEY unless it already is VALUE
  echo "$fsmap" | grep -q "\"$1\": *$2[,}]" || C fs set $FS "$1" "$2"
}
want session_timeout "$SESSION_TIMEOUT"
want session_autoclose "$SESSION_AUTOCLOSE"

# ---- 8. MDS -----------------------------------------------------------------------
if ! alive "$STATE/mds.a.pid"; then
  if [ ! -s "$STATE/mds/ceph-a/keyring" ]; then
    mkdir -p "$STATE/mds/ceph-a"
    C auth get-or-create mds.a mon 'allow profile mds' osd 'allow rwx' mds 'allow' \
        mgr 'allow profile mds' -o "$STATE/mds/ceph-a/keyring"
  fi
  log "starting ceph-mds"
  start_daemon mds.a /usr/bin/ceph-mds -c "$CONF" -f -i a
fi
up=0
for i in $(seq 1 150); do
  if C mds stat 2>/dev/null | grep -q 'up:active'; then up=1; break; fi
  alive "$STATE/mds.a.pid" || break
  sleep 0.2
done
[ $up = 1 ] || { log "mds.a not active; see $STATE/log/mds.a.log"; exit 1; }

# ---- 9. client mounts (one ceph-fuse per "host", each its own cephx name) ---------
for h in $HOSTS; do
  if [ ! -s "$STATE/client.$h.keyring" ]; then
    (umask 077; C fs authorize $FS client.$h / rw > "$STATE/client.$h.keyring")
  fi
done
# A client the MDS evicted (silent past session_autoclose) is blocklisted: its mount
# answers nothing useful again (EIO, ENOTCONN) and has to be mounted anew.
client_ok() {
  local h=$1 st
  answers "$MNT/$h" || return 1
  st=$(timeout 10 ceph -c "$CONF" --admin-daemon "$STATE/run/ceph-client.$h.asok" status 2>/dev/null) \
      || return 1
  echo "$st" | grep -q '"blocklisted": false'
}
for h in $HOSTS; do
  mp="$MNT/$h"
  if mounted "$mp" && alive "$STATE/client-$h.pid"; then
    # up, or reconnecting by itself after a cut
    for i in $(seq 1 5); do client_ok $h && break; sleep 0.5; done
    client_ok $h && continue
    log "client $h not answering or evicted; remounting"
    kill "$(cat "$STATE/client-$h.pid")" 2>/dev/null || true
    for i in $(seq 1 30); do alive "$STATE/client-$h.pid" || break; sleep 0.1; done
    alive "$STATE/client-$h.pid" && kill -9 "$(cat "$STATE/client-$h.pid")" 2>/dev/null
  fi
  if mounted "$mp"; then umount -l "$mp" || true; fi   # stale
  log "mounting $mp via netns $NS-$h as client.$h"
  setsid nsenter --net="/run/netns/$NS-$h" /usr/bin/ceph-fuse -f -c "$CONF" --id $h \
      --client_fs $FS "$mp" </dev/null >>"$STATE/log/client-$h.out" 2>&1 &
  echo $! > "$STATE/client-$h.pid"
  for i in $(seq 1 300); do
    mounted "$mp" && answers "$mp" && break
    alive "$STATE/client-$h.pid" || break
    sleep 0.1
  done
  mounted "$mp" || { log "mount $mp failed; see $STATE/log/client-$h.out, client.$h.log"; exit 1; }
done

echo "A=$MNT/a"
echo "B=$MNT/b"
