#!/usr/bin/env bash
# Instructions executed on the hot paths, counted by callgrind and compared with the recorded
# baseline (bench/instructions.baseline): a count does not move with the machine's load, as a
# time does, so a rise is a commit's doing. .ci/run runs it.
#
#   bench/instructions.sh            check: fails if a count rose more than 3 % over its baseline
#   bench/instructions.sh --update   write the counts as the new baseline (say why in the commit)
#
# What is counted (release build; each in a fresh directory, after a first, untimed run that
# makes the files, so that every count sees the same state):
#   run        `fsync mutex run L -- true` (the parent: the child execs `true` natively)
#   mutex      1000 acquires and releases through the library (benches/instructions.rs)
#   msg        200 posts, then 200 receives each finished, through the library
#   post-recv  `fsync msg post B --data x`, then `fsync msg recv B`
# Needs valgrind (installed with apt-get where missing, as root on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=3   # percent
repo=$PWD
baseline=$repo/bench/instructions.baseline

if ! command -v valgrind >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
    else
        echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2
        exit 1
    fi
fi

cargo build --locked --release --quiet --bin fsync
bench=$(cargo build --locked --release --quiet --bench instructions --message-format=json |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "instructions" and m.get("executable"):
        print(m["executable"])')
fsync=$PWD/target/release/fsync

# The instructions callgrind counted running "$@".
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p'
}

# Each count runs in a fresh directory whose path has the same length each time, with copies
# of the two programs in it, from there: the counts must not depend on where the checkout is
# (the holder record names the command, and the program's path is part of it).
work=$(mktemp -d /tmp/fsync-insn.XXXXXXXX)
trap 'rm -rf "$work"' EXIT
fresh() {
    rm -rf "$work/d"; mkdir "$work/d"
    cp "$fsync" "$work/d/fsync"; cp "$bench" "$work/d/insn"
    cd "$work/d"
}

declare -A got
fresh; ./fsync mutex run L -- true; got[run]=$(count ./fsync mutex run L -- true)
fresh; got[mutex]=$(count ./insn mutex . 1000)
fresh; got[msg]=$(count ./insn msg . 200)
fresh; ./fsync msg post B --data x >/dev/null; ./fsync msg recv B >/dev/null
p=$(count ./fsync msg post B --data x); r=$(count ./fsync msg recv B)
got[post-recv]=$((p + r))
cd "$repo"

names=(run mutex msg post-recv)
for n in "${names[@]}"; do
    [ -n "${got[$n]}" ] || { echo "instructions.sh: callgrind counted nothing for $n" >&2; exit 1; }
done

if [ "${1:-}" = --update ]; then
    {
        echo "# Instructions counted by bench/instructions.sh (callgrind, release build); rewritten"
        echo "# by bench/instructions.sh --update: the commit that does it says why."
        for n in "${names[@]}"; do echo "$n ${got[$n]}"; done
    } > "$baseline"
    cat "$baseline"
    exit 0
fi

[ -f "$baseline" ] || { echo "instructions.sh: no $baseline (run with --update)" >&2; exit 1; }
fail=0
printf '%-10s %12s %12s %8s\n' what baseline now change
for n in "${names[@]}"; do
    base=$(awk -v n="$n" '$1 == n { print $2 }' "$baseline")
    [ -n "$base" ] || { echo "instructions.sh: $baseline has no count for $n" >&2; exit 1; }
    now=${got[$n]}
    change=$(awk -v a="$now" -v b="$base" 'BEGIN { printf "%+.2f%%", (a - b) * 100 / b }')
    printf '%-10s %12d %12d %8s\n' "$n" "$base" "$now" "$change"
    if awk -v a="$now" -v b="$base" -v l="$LIMIT" 'BEGIN { exit !(a > b * (1 + l / 100)) }'; then
        echo "instructions.sh: $n executes ${change} more instructions than its baseline (more than $LIMIT %):" \
             "remove the work, or, if it is needed, run bench/instructions.sh --update and say why in the commit" >&2
        fail=1
    fi
done
exit $fail
