#!/usr/bin/env bash
# fsync's job queue beside task-spooler and nq (issue 39): N `true` jobs posted while 2 workers
# run, timed from the first post to the last job's end (and the posting alone):
#   - fsync, one `msg post` per job, `msg work -j 2 -- true` running;
#   - fsync, every job in one `msg post --lines`, the same workers;
#   - task-spooler, `tsp -S 2` then one `tsp true` per job (its binary is `tsp` or `ts`);
#   - nq, one `nq true` per job (nq runs its jobs one at a time);
# then the drain rate of `fsync msg work -j 1/2/4 --until-empty -- true` over N queued jobs.
#   bench/queue_compare.sh [N [PARTS]]   (N = 10000; PARTS: some of one,lines,tsp,nq,drain,
#   comma-separated, all by default; needs a release build: cargo build --release)
# Installs task-spooler and nq if missing (apt-get). Each run in a fresh directory under
# ${TMPDIR:-/tmp}, which should be the disk under test.
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FSYNC:-$PWD/target/release/fsync}
N=${1:-10000}
PARTS=,${2:-one,lines,tsp,nq,drain},
want() { [[ $PARTS == *,$1,* ]]; }
command -v tsp >/dev/null || command -v ts >/dev/null || apt-get install -y -qq task-spooler >/dev/null
command -v nq >/dev/null || apt-get install -y -qq nq >/dev/null
TSP=$(command -v tsp || command -v ts)
dir=$(mktemp -d "${TMPDIR:-/tmp}/fsync-queue.XXXXXX")
cleanup() {
    [[ -n ${worker:-} ]] && kill "$worker" 2>/dev/null || true
    [[ -n ${TS_SOCKET:-} ]] && "$TSP" -K >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
yes true | head -n "$N" > jobs || true   # `yes` dies of SIGPIPE
now() { echo "${EPOCHREALTIME/./}"; }
ms() { echo $(( ($2 - $1) / 1000 )); }
report() { # $1: label, $2: start, $3: posted, $4: done
    printf '%-34s posting %7s ms (%5s us/job)   end to end %7s ms (%5s us/job)\n' "$1" \
        "$(ms "$2" "$3")" $(( ($3 - $2) / N )) "$(ms "$2" "$4")" $(( ($4 - $2) / N ))
}
echo "# $N jobs; $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
    "$(uname -r); $(df -T . | awk 'NR==2 {print $2}') at $dir; $("$F" --version)"

# fsync, one post per job, 2 workers running.
if want one; then
"$F" msg work -j 2 one -- true & worker=$!
t0=$(now)
for _ in $(seq "$N"); do "$F" msg post -q one --data true; done
t1=$(now)
"$F" msg wait-empty one
t2=$(now)
kill "$worker"; wait "$worker" 2>/dev/null || true; worker=
report "fsync msg post (one per job)" "$t0" "$t1" "$t2"
fi

# fsync, one batch, 2 workers running.
if want lines; then
"$F" msg work -j 2 lines -- true & worker=$!
t0=$(now)
"$F" msg post lines --lines < jobs >/dev/null
t1=$(now)
"$F" msg wait-empty lines
t2=$(now)
kill "$worker"; wait "$worker" 2>/dev/null || true; worker=
report "fsync msg post --lines" "$t0" "$t1" "$t2"
fi

# task-spooler with 2 slots: its own server, socket and output files here.
if want tsp; then
export TS_SOCKET=$dir/ts.sock TMPDIR=$dir
"$TSP" -S 2
t0=$(now)
for _ in $(seq "$N"); do "$TSP" true >/dev/null; done
t1=$(now)
# The last job starts after every other has; wait for it, then for any still running.
"$TSP" -w >/dev/null 2>&1 || true
while "$TSP" -l | awk 'NR > 1 && ($2 == "running" || $2 == "queued") {busy=1} END {exit !busy}'; do
    sleep 0.01
done
t2=$(now)
"$TSP" -K >/dev/null 2>&1 || true
unset TS_SOCKET
report "$(basename "$TSP") -S 2" "$t0" "$t1" "$t2"
fi

# nq: jobs run one after another, each waiting for those queued before it.
if want nq; then
export NQDIR=$dir/nq
t0=$(now)
for _ in $(seq "$N"); do nq true >/dev/null; done
t1=$(now)
nq -w >/dev/null 2>&1 || true
t2=$(now)
unset NQDIR
report "nq (serial)" "$t0" "$t1" "$t2"
fi

# The drain alone: N jobs queued first, then workers until the mailbox is empty.
want drain && for j in 1 2 4; do
    "$F" msg post -q "drain$j" --lines < jobs
    t0=$(now)
    "$F" msg work -j "$j" --until-empty "drain$j" -- true
    t1=$(now)
    printf '%-34s drain %7s ms (%5s us/job, %6s jobs/s)\n' "fsync msg work -j $j --until-empty" \
        "$(ms "$t0" "$t1")" $(( (t1 - t0) / N )) $(( N * 1000000 / (t1 - t0) ))
done
