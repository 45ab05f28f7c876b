#!/usr/bin/env bash
# Mutation testing of the core: every mutant cargo-mutants makes of the lock layer, the wait
# core, holder records, mailboxes, the mutex and the directory layer must fail a test. TESTING.md
# records each sweep's score and the mutants skipped as equivalent (with the reason).
#
#   bench/mutants.sh                 the whole core (hours on two cores)
#   bench/mutants.sh 3/12            one shard of twelve (cargo-mutants --shard)
#   bench/mutants.sh src/platform/dir.rs src/platform/lock.rs
#                                    the mutants of these files only (a sweep by layer)
#   bench/mutants.sh --in-diff D     the mutants of the lines a diff touches (a change's habit:
#                                    git diff main > D; bench/mutants.sh --in-diff D)
#   bench/mutants.sh --lib-first src/msg/queue.rs
#                                    in two passes: each mutant against the library's unit tests
#                                    (a few seconds), then only those they missed against all
#                                    the tests (cargo-mutants --iterate); the same outcome, for
#                                    a fraction of the time where the unit tests catch most
#
# Further arguments go to cargo-mutants. Run as root: the root-only tests (a second user, a
# sticky directory) catch mutants of the safe-open paths, and run here with --include-ignored;
# the cross-host tests need a bed and are left out. Results: mutants.out/ (outcomes.json,
# caught.txt, missed.txt, timeout.txt, unviable.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

version=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q " $version\$"; then
    echo "mutants: installing cargo-mutants $version"
    cargo install --locked --quiet cargo-mutants --version "$version"
fi
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "mutants: installing cargo-nextest"
    cargo install --locked --quiet cargo-nextest
fi

core=(
    src/platform/lock.rs    # the lock layer
    src/held.rs
    src/wait.rs             # the wait core
    src/holder.rs           # holder records
    src/msg.rs 'src/msg/*.rs'
    'src/mutex/*.rs'
    src/platform/dir.rs
)
lib_first=
if [[ ${1:-} == --lib-first ]]; then
    lib_first=1
    shift
fi
shard=()
if [[ ${1:-} =~ ^[0-9]+/[0-9]+$ ]]; then
    shard=(--shard "$1")
    shift
fi
chosen=()
while [[ ${1:-} == src/*.rs ]]; do
    chosen+=("$1")
    shift
done
((${#chosen[@]})) && core=("${chosen[@]}")
files=()
for f in "${core[@]}"; do files+=(--file "$f"); done
# Linking each mutant's four binaries is a good part of its build: mold, where installed, links
# them in a fraction of the time.
if command -v mold >/dev/null; then
    export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-fuse-ld=mold"
fi

# The tests run under cargo-nextest's `mutants` profile (.config/nextest.toml): each test in a
# process of its own, killed after 90 s (the crash states after 240 s; a whole run after
# 300 s), so that a mutant that makes one hang fails it (caught) instead of timing out the
# run; the run stops at the first failure, and the tests that most
# often fail first run first. The tests mostly wait on processes, so six run at once on two
# cores (about 70 s for all); the chaos tests run at 300 sections, which still kills holders in
# every one. Left out: the cross-host tests (they need a bed), and the four longest (the job
# queue's chaos runs, the 1,000 rounds of producer and consumer, the listing of 100,000 delayed
# messages: 35 to 90 s each, as long as all the others together). A mutant that only they
# would notice counts as missed: the score can only be lower for it.
# One sweep at a time: two on two CPUs slow the tests past nextest's 90 s and fail them for
# nothing, which counts as caught. Keep cargo-mutants' baseline run too (no --baseline skip):
# a test that fails on the unmutated tree would "catch" every mutant.
export FSYNC_CHAOS=${FSYNC_CHAOS:-300}
# The examples' tests run the examples' binaries, which `cargo test` builds and nextest does
# not: built once here, from the unmutated tree (a mutant they alone would notice is missed).
cargo build --quiet --examples
mutants=(cargo mutants "${files[@]}" --exclude 'src/*/tests.rs' "${shard[@]}"
    --test-tool nextest --timeout 300 --build-timeout 300 "$@")
if [[ $lib_first ]]; then
    # The first pass: a mutant they catch is caught (the baseline passed them too); the
    # second reads the first's results from the same output directory and runs the rest.
    # cargo-mutants exits 2 when a mutant was missed, 3 when one timed out: both are work
    # for the second pass.
    "${mutants[@]}" -- --profile mutants --lib || [[ $? == [23] ]]
    mutants+=(--iterate)
fi
exec "${mutants[@]}" \
    -- --profile mutants --lib --test integration --run-ignored all \
    -E 'not test(/netfs_/) and not test(/^chaos::chaos_jobs/) and not test(/^chaos_queue::/) and not test(/^ccr::a_thousand_rounds/) and not test(/list_shows_100000/)'
