#!/usr/bin/env bash
# A holder cut off from the file server, RUNS times: the cross-host suite's two partition tests
# (the link cut, and the packets silently dropped), each with a lock, a group membership and a
# bus name held on host a. Prints, per run and kind, when host a's command stopped and when
# host b got what a held, both counted from the cut by the commands' own timestamps.
#   bench/partition.sh [glusterfs|moosefs|cephfs] [RUNS]   (root; sets the bed up itself)
set -euo pipefail
cd "$(dirname "$0")/.."
BED=${1:-glusterfs}
RUNS=${2:-3}
for run in $(seq "$RUNS"); do
    "tests/beds/$BED/setup.sh" >/dev/null
    FSYNC_NETFS=1 FSYNC_NETFS_BED=$BED cargo test --quiet --test integration netfs_zz -- --ignored \
        --nocapture --test-threads 1 2>&1 |
        grep -o "$BED [a-z ]*: cut -> .*" | sed "s/^/run $run: /"
done
