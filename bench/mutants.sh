#!/usr/bin/env bash
# Mutation testing of the core: every mutant cargo-mutants makes of the lock layer, the wait
# core, holder records, mailboxes, the mutex and the directory layer must fail a test. TESTING.md
# records each sweep's score and the mutants skipped as equivalent (with the reason).
#
#   bench/mutants.sh                 the whole core (hours on two cores)
#   bench/mutants.sh 3/12            one shard of twelve (cargo-mutants --shard)
#   bench/mutants.sh --in-diff D     the mutants of the lines a diff touches (a change's habit:
#                                    git diff main > D; bench/mutants.sh --in-diff D)
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
files=()
for f in "${core[@]}"; do files+=(--file "$f"); done

shard=()
if [[ ${1:-} =~ ^[0-9]+/[0-9]+$ ]]; then
    shard=(--shard "$1")
    shift
fi

# The tests run under cargo-nextest's `mutants` profile (.config/nextest.toml): each test in a
# process of its own, killed after 90 s, so that a mutant that makes one hang fails it (caught)
# instead of timing out the run; the run stops at the first failure. The tests mostly wait on
# processes, so six run at once on two cores (about 45 s for all); the chaos tests run at 300
# sections, which still kills holders in every one.
export FSYNC_CHAOS=${FSYNC_CHAOS:-300}
exec cargo mutants "${files[@]}" --exclude 'src/*/tests.rs' "${shard[@]}" \
    --test-tool nextest --timeout 150 --build-timeout 300 "$@" \
    -- --profile mutants --lib --test integration --run-ignored all -E 'not test(/netfs_/)'
