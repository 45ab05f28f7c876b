/* grouplock --max (src/grouplock.rs): the cap of group G, members with and without --max.
   Enter: turnstile (exclusive) -> read the cap -> [a --max where no cap is in force: an
   exclusive lock on group.G, granted once the members inside have left] -> shared lock on
   group.G -> with a cap (in force or just given): record it, then take a slot of max.G ->
   release the turnstile -> run. Leave (or crash while running): release everything. Members
   loop for ever; two give --max 1, two do not. Safety: once the cap is recorded, at most M run
   at once. -DBROKEN: no wait for the members inside when the first cap is given. */
#define M 1
byte inside = 0;   /* shared holders of group.G */
byte slots = 0;    /* slots of max.G held */
byte running = 0;  /* members past the turnstile, running their command */
bool cap = 0;      /* max.G/slots recorded */
bool ts = 0;

inline enter(gives_cap, capped) {
    atomic { !ts -> ts = 1 };
    capped = cap || gives_cap;
#ifndef BROKEN
    if
    :: gives_cap && !cap -> atomic { inside == 0 }   /* exclusive lock on group.G */
    :: else -> skip
    fi;
#endif
    inside++;
    if
    :: capped -> cap = 1; atomic { slots < M -> slots++ }
    :: else -> skip
    fi;
    atomic { ts = 0; running++ }
}

inline leave(capped) {
    atomic { running--; inside--; if :: capped -> slots-- :: else -> skip fi }
}

active [2] proctype WithMax() {
    bool capped;
    do
    :: enter(1, capped); leave(capped)
    od
}

active [2] proctype WithoutMax() {
    bool capped;
    do
    :: enter(0, capped); leave(capped)
    od
}

active proctype Monitor() {
    atomic { cap && running > M -> assert(false) }
}
