#!/usr/bin/env bash
# Model-check every protocol model with spin: each must pass, and each of its broken variants
# (-DBROKEN, and any others named after a second colon) must be rejected, so the checks are shown
# able to fail. A search cut short by the depth bound passes nothing. Installs spin and gcc if
# missing (Debian).
set -euo pipefail
cd "$(dirname "$0")"
for tool in spin gcc; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq spin gcc >/dev/null; break; }
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
status=0
# model  ltl-property-or-empty
run() { # $1 model, $2 extra define, $3 ltl name
    local out
    ( cd "$work" && spin -a $2 "$OLDPWD/$1" >/dev/null && gcc -O2 -DCOLLAPSE -DVECTORSZ=2048 -o pan pan.c 2>/dev/null &&
      if [ -n "$3" ]; then ./pan -a -f -m1000000 -N "$3"; else ./pan -m1000000; fi ) > "$work/out" 2>&1 || true
    out=$work/out
    local errors states
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
    # An incomplete search proves nothing: count it as an error (of a passing model).
    grep -q 'max search depth too small' "$out" && [ "${errors:-}" = 0 ] && errors=incomplete
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
    echo "${errors:-?} ${states:-?}"
}
printf '%-18s %-22s %10s %8s %s\n' model property states errors verdict
for spec in "mutex_delete.pml:" "swmr.pml:no_writer_starvation" \
            "swmr_delete.pml:no_writer_starvation:BROKEN,BROKEN_WAIT" "msg_send.pml:" \
            "grouplock.pml:no_group_starvation" "grouplock_cap.pml:" "event.pml:" "sem.pml:" \
            "group.pml::BROKEN,BROKEN_LAST,BROKEN_UNREGISTER" "msg_queue.pml:" "ccr.pml:no_lost_wakeup" \
            "msg_shards.pml::BROKEN,BROKEN_ADVANCE" "msg_delays.pml::BROKEN,BROKEN_START" \
            "msg_power.pml::BROKEN,BROKEN_ACK,BROKEN_FAIL"; do
    model=${spec%%:*}; rest=${spec#*:}; ltl=${rest%%:*}; variants=BROKEN
    [ "$rest" = "$ltl" ] || variants=${rest#*:}
    read -r e s <<<"$(run "$model" "" "$ltl")"
    verdict=ok; [ "$e" = 0 ] || { verdict="FAILS"; status=1; }
    printf '%-18s %-22s %10s %8s %s\n' "$model" "${ltl:-assertions}" "$s" "$e" "$verdict"
    for variant in ${variants//,/ }; do
        read -r e s <<<"$(run "$model" "-D$variant" "$ltl")"
        verdict="rejected (as it must be)"; [ "$e" != 0 ] && [ "$e" != "?" ] || { verdict="NOT REJECTED"; status=1; }
        printf '%-18s %-22s %10s %8s %s\n' "  -D$variant" "${ltl:-assertions}" "$s" "$e" "$verdict"
    done
done
exit $status
