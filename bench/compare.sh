#!/usr/bin/env bash
# fsync vs util-linux flock(1), on the same work, alternating. See BENCHMARKS.md.
#
#   bench/compare.sh            # as root on Debian: installs hyperfine if missing
#
# 1. Uncontended: `fsync mutex run L -- true` and `fsync flock L true` vs `flock L true`, wall
#    time per run. With hyperfine: BLOCKS blocks of RUNS runs each, rotating which tool goes
#    first; always also a plain bash loop that rotates run by run (timed with $EPOCHREALTIME,
#    no fork).
# 2. Contended counter: 4 processes x N increments of a counter file, each increment one
#    `fsync mutex run L -- sh -c 'read n <c; echo $((n+1)) >c'` (or the same under flock),
#    TRIALS trials per tool, alternating; the final count must be exact.
#
# Knobs (environment): RUNS (200), BLOCKS (10), LOOP_RUNS (1000), PROCS (4), N (250),
# TRIALS (6), BENCH_DIR (temp dir base, default $TMPDIR or /tmp), NO_INSTALL=1 (never run
# apt-get), TIMER=loop (skip hyperfine), KEEP=1 (keep the raw data), FSYNC (binary to test;
# default: build target/release/fsync), STATIC=1 (build and test a statically linked fsync).
set -euo pipefail
cd "$(dirname "$0")/.."
# The measured commands run in the caller's locale, on purpose: flock(1) loads the locale at
# start-up (about 0.15 ms here with LANG=C.UTF-8) and fsync does not, so the ratio depends on it.
# Run `LC_ALL=C bench/compare.sh` for the cron-like case. Our own number crunching uses C.
awk() { LC_ALL=C command awk "$@"; }
sort() { LC_ALL=C command sort "$@"; }

RUNS=${RUNS:-200}
BLOCKS=${BLOCKS:-10}
LOOP_RUNS=${LOOP_RUNS:-1000}
PROCS=${PROCS:-4}
N=${N:-250}
TRIALS=${TRIALS:-6}
TIMER=${TIMER:-hyperfine}

say() { printf '%s\n' "$*" >&2; }
die() { say "compare.sh: $*"; exit 1; }

# --- what we need -----------------------------------------------------------------------------
missing=()
command -v flock >/dev/null 2>&1 || missing+=(util-linux)
if [[ $TIMER == hyperfine ]] && ! command -v hyperfine >/dev/null 2>&1; then
    missing+=(hyperfine)
fi
if ((${#missing[@]})) && [[ ${NO_INSTALL:-} != 1 ]]; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "compare.sh: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null 2>&1 || true
        for p in "${missing[@]}"; do
            apt-get install -y -qq "$p" >/dev/null 2>&1 || say "compare.sh: could not install $p"
        done
    else
        say "compare.sh: not root or no apt-get; cannot install ${missing[*]}"
    fi
fi
command -v flock >/dev/null 2>&1 || die "flock(1) (util-linux) is needed"
if [[ $TIMER == hyperfine ]] && ! hyperfine -N --runs 1 --style none true >/dev/null 2>&1; then
    say "compare.sh: no usable hyperfine (>= 1.13, for -N); using the bash timing loop only"
    TIMER=loop
fi
((BASH_VERSINFO[0] >= 5)) || die "bash 5 is needed (\$EPOCHREALTIME)"

if [[ -z ${FSYNC:-} ]]; then
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build fsync (see README.md)"
    if [[ ${STATIC:-} == 1 ]]; then
        # glibc linked statically: no dynamic loader, no libgcc_s at start-up. --target is what
        # keeps the flag off build scripts and proc-macros (rust-lang/rust#78210).
        host=$(rustc -vV | sed -n 's/^host: //p')
        say "compare.sh: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target $host"
        RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target "$host" >&2
        FSYNC=$PWD/target/$host/release/fsync
    else
        say "compare.sh: cargo build --release"
        cargo build --release >&2
        FSYNC=$PWD/target/release/fsync
    fi
fi
[[ -x $FSYNC ]] || die "$FSYNC is not executable"
FLOCK=$(command -v flock)
TRUE=$(command -v true)

DIR=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/fsync-compare.XXXXXX")
if [[ ${KEEP:-} == 1 ]]; then
    say "compare.sh: raw data kept in $DIR"
else
    trap 'rm -rf "$DIR"' EXIT
fi
L=$DIR/run.lck

# --- helpers ----------------------------------------------------------------------------------
# microseconds between two $EPOCHREALTIME readings (taken directly: no fork in the interval)
us() { local a=${1//[!0-9]/} b=${2//[!0-9]/}; echo $((10#$b - 10#$a)); }

# median of the numbers in a file, one a line
median() {
    sort -g "$1" | awk '{ a[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# percentile P (nearest rank) of a file of numbers
pct() {
    sort -g "$1" | awk -v p="$2" '{ a[NR] = $1 } END {
        r = int((NR * p + 99) / 100); if (r < 1) r = 1; print a[r] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
fmt() { awk -v x="$1" -v s="$2" 'BEGIN { printf "%.3f", x * s }'; }

# hyperfine's JSON export: the "times" array, seconds, one a line
times_of() {
    awk '/"times": *\[/ { f = 1; next } f && /\]/ { f = 0 } f { gsub(/[ ,]/, ""); if ($0 != "") print }' "$1"
}

# --- machine ----------------------------------------------------------------------------------
fs_type=$(findmnt -n -o FSTYPE -T "$DIR" 2>/dev/null || stat -f -c %T "$DIR")
say ""
say "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), Linux $(uname -r), $DIR on $fs_type"
say "tools:   $("$FSYNC" --version) ($(ldd "$FSYNC" 2>&1 | grep -q -E "statically linked|not a dynamic" && echo "statically linked" || echo "dynamically linked")), $(flock --version | head -1)$([[ $TIMER == hyperfine ]] && echo ", $(hyperfine --version)")"
say "locale:  LANG=${LANG:-} LC_ALL=${LC_ALL:-} (flock(1) loads it, fsync does not)"
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"

# --- 1. uncontended run -- true ---------------------------------------------------------------
"$FSYNC" mutex run "$L" -- "$TRUE" || die "fsync mutex run failed"
"$FSYNC" flock "$L" "$TRUE" || die "fsync flock failed"
"$FLOCK" "$L" "$TRUE" || die "flock failed"

# One run of a tool: fsync (mutex run), fsflock (fsync flock) or flock.
run_tool() {
    case $1 in
    fsync) "$FSYNC" mutex run "$L" -- "$TRUE" ;;
    fsflock) "$FSYNC" flock "$L" "$TRUE" ;;
    flock) "$FLOCK" "$L" "$TRUE" ;;
    esac
}
TOOLS=(fsync fsflock flock)
# The tools in the order of round $1: each goes first, second and third in turn.
rotated() { local k=$(($1 % 3)); echo "${TOOLS[@]:k} ${TOOLS[@]:0:k}"; }

if [[ $TIMER == hyperfine ]]; then
    say "1. uncontended, hyperfine: $BLOCKS blocks x $RUNS runs per tool, rotating"
    for tool in "${TOOLS[@]}"; do : >"$DIR/hf-$tool.txt"; done
    for ((b = 0; b < BLOCKS; b++)); do
        for tool in $(rotated "$b"); do
            # hyperfine -N splits the command line as a shell would: quote the paths
            case $tool in
            fsync) cmd="'$FSYNC' mutex run '$L' -- '$TRUE'" ;;
            fsflock) cmd="'$FSYNC' flock '$L' '$TRUE'" ;;
            flock) cmd="'$FLOCK' '$L' '$TRUE'" ;;
            esac
            hyperfine -N --style none --warmup 10 --runs "$RUNS" \
                --export-json "$DIR/hf.json" "$cmd" >/dev/null 2>>"$DIR/hyperfine.log"
            times_of "$DIR/hf.json" >>"$DIR/hf-$tool.txt"
        done
    done
fi

say "1. uncontended, bash loop: $LOOP_RUNS runs per tool, rotating run by run"
for tool in "${TOOLS[@]}"; do : >"$DIR/loop-$tool.txt"; done
for ((i = 0; i < LOOP_RUNS + 20; i++)); do
    for tool in $(rotated "$i"); do
        t0=$EPOCHREALTIME; run_tool "$tool"; t1=$EPOCHREALTIME
        ((i < 20)) || us "$t0" "$t1" >>"$DIR/loop-$tool.txt" # after a warm-up
    done
done

# --- 2. contended counter ---------------------------------------------------------------------
C=$DIR/counter
CL=$DIR/counter.lck
# shellcheck disable=SC2016 # expanded by the inner sh
INC='read n < "$1"; echo $((n + 1)) > "$1"'

worker() {
    local i
    if [[ $1 == fsync ]]; then
        for ((i = 0; i < N; i++)); do "$FSYNC" mutex run "$CL" -- sh -c "$INC" sh "$C"; done
    else
        for ((i = 0; i < N; i++)); do "$FLOCK" "$CL" sh -c "$INC" sh "$C"; done
    fi
}

say "2. contended counter: $PROCS processes x $N increments, $TRIALS trials per tool, alternating"
: >"$DIR/counter-fsync.txt"
: >"$DIR/counter-flock.txt"
for ((t = 0; t < 2 * TRIALS; t++)); do
    case $((t % 4)) in 0 | 3) tool=fsync ;; *) tool=flock ;; esac
    echo 0 >"$C"
    t0=$EPOCHREALTIME
    pids=()
    for ((p = 0; p < PROCS; p++)); do
        worker "$tool" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || die "a $tool worker failed"; done
    t1=$EPOCHREALTIME
    read -r got <"$C"
    ((got == PROCS * N)) || die "$tool counter: got $got, expected $((PROCS * N)) (lost updates!)"
    awk -v n=$((PROCS * N)) -v us="$(us "$t0" "$t1")" 'BEGIN { printf "%.1f\n", n / (us / 1e6) }' \
        >>"$DIR/counter-$tool.txt"
done

# --- report -----------------------------------------------------------------------------------
row() { printf '%-44s %12s %12s %12s  %s\n' "$@"; }
echo
row "figure" "fsync" "flock(1)" "fsync/flock" "target"
row "--------------------------------------------" "------------" "------------" "------------" "------"
if [[ $TIMER == hyperfine ]]; then
    a=$(median "$DIR/hf-fsync.txt") b=$(median "$DIR/hf-flock.txt")
    row "run -- true, median ms (hyperfine, n=$((BLOCKS * RUNS)))" "$(fmt "$a" 1000)" "$(fmt "$b" 1000)" "$(ratio "$a" "$b")" "<= 1.05"
    a=$(pct "$DIR/hf-fsync.txt" 90) b=$(pct "$DIR/hf-flock.txt" 90)
    row "run -- true, p90 ms (hyperfine)" "$(fmt "$a" 1000)" "$(fmt "$b" 1000)" "$(ratio "$a" "$b")" ""
    a=$(median "$DIR/hf-fsflock.txt") b=$(median "$DIR/hf-flock.txt")
    row "fsync flock L true, median ms (hyperfine)" "$(fmt "$a" 1000)" "$(fmt "$b" 1000)" "$(ratio "$a" "$b")" "<= 1.05"
fi
a=$(median "$DIR/loop-fsync.txt") b=$(median "$DIR/loop-flock.txt")
row "run -- true, median ms (bash loop, n=$LOOP_RUNS)" "$(fmt "$a" 0.001)" "$(fmt "$b" 0.001)" "$(ratio "$a" "$b")" "<= 1.05"
a=$(median "$DIR/loop-fsflock.txt") b=$(median "$DIR/loop-flock.txt")
row "fsync flock L true, median ms (bash loop)" "$(fmt "$a" 0.001)" "$(fmt "$b" 0.001)" "$(ratio "$a" "$b")" "<= 1.05"
a=$(median "$DIR/counter-fsync.txt") b=$(median "$DIR/counter-flock.txt")
row "counter ${PROCS}x$N, median increments/s" "$a" "$b" "$(ratio "$a" "$b")" ">= 1.00"
row "counter final counts" "exact" "exact" "" "($TRIALS trials each)"
echo
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at end"
