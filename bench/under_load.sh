#!/usr/bin/env bash
# The suite without the beds, N times in a row (default 10), with two CPU-bound processes
# beside it: a test that fails under load is broken. Each round runs the library's, the
# command's and the integration tests (`cargo test --locked --lib --bins --test integration`)
# and, as root, the root-only ones (`-- --ignored --skip netfs_`, with util-linux flock 2.42
# when `.ci/flock-2.42` can fetch it). The documentation examples, which wait for nobody, run
# once in `.ci/run`. Stops at the first failing round and prints its log; TESTING.md records the
# runs.
#
#   bench/under_load.sh [N]
set -uo pipefail
cd "$(dirname "$0")/.."
# Started in the background by a shell without job control (or by nohup), this script, and so
# every test, would start with SIGINT and SIGQUIT (or SIGHUP) ignored, which fsync keeps
# ignored as it must: the tests of cancellation by signal would fail. Start again with every
# disposition at its default.
# (What a child inherits: bash itself ignores SIGQUIT while it runs a command substitution.)
if (( 0x$(awk '/^SigIgn/ {print $2}' /proc/self/status) != 0 )) && [[ -z ${UNDER_LOAD_RESET:-} ]]; then
    UNDER_LOAD_RESET=1 exec python3 -c 'import os, signal, sys
for s in range(1, signal.NSIG):
    try: signal.signal(s, signal.SIG_DFL)
    except (OSError, ValueError): pass
os.execv(sys.argv[1], sys.argv[1:])' "$0" "$@"
fi
if (( 0x$(awk '/^SigIgn/ {print $2}' /proc/self/status) != 0 )); then
    echo "under_load: the tests would start with signals ignored; run it from a shell that ignores none" >&2
    exit 1
fi
rounds=${1:-10}
log=$(mktemp -d)
cargo test --locked --lib --bins --test integration --no-run -q 2>/dev/null || exit 1
cargo build --locked --examples -q || exit 1 # tests/examples.rs runs them
if [[ $(id -u) == 0 ]] && [[ -z ${FSYNC_FLOCK_2_42:-} ]]; then
    FSYNC_FLOCK_2_42=$(.ci/flock-2.42 2>/dev/null) && export FSYNC_FLOCK_2_42
fi
yes >/dev/null &
hog1=$!
yes >/dev/null &
hog2=$!
trap 'kill $hog1 $hog2 2>/dev/null' EXIT
for round in $(seq 1 "$rounds"); do
    start=$SECONDS
    if ! cargo test --locked --lib --bins --test integration >"$log/$round.txt" 2>&1; then
        grep -E "panicked|FAILED|^----" "$log/$round.txt" | head -40
        echo "under_load: round $round of $rounds FAILED ($log/$round.txt)"
        exit 1
    fi
    if [[ $(id -u) == 0 ]] &&
        ! cargo test --locked --test integration -- --ignored --skip netfs_ >>"$log/$round.txt" 2>&1; then
        grep -E "panicked|FAILED|^----" "$log/$round.txt" | head -40
        echo "under_load: round $round of $rounds FAILED, root-only tests ($log/$round.txt)"
        exit 1
    fi
    passed=$(grep -o "[0-9]* passed" "$log/$round.txt" | awk '{s += $1} END {print s}')
    echo "under_load: round $round of $rounds: $passed passed, none failed ($((SECONDS - start)) s)"
done
echo "under_load: $rounds rounds in a row, all passed, beside two CPU hogs"
