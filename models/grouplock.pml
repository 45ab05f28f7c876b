/* grouplock (src/grouplock.rs): enter as G: turnstile (exclusive) -> for the other group H,
   an exclusive lock on group.H (granted once H has no shared holders) released at once ->
   shared lock on group.G -> release turnstile. Members of A and B loop for ever; any may crash
   (all its locks released). Safety: never both groups inside. Liveness: a process of B that
   holds the turnstile gets in (weak fairness), however A's members keep coming.
   -DBROKEN: no turnstile: B can starve. */
byte in_a = 0, in_b = 0;   /* shared holders of group.A / group.B */
bool ts = 0;
bool b_ts = 0, b_in = 0;

inline enter(mine, other, flag_ts, flag_in) {
#ifndef BROKEN
    atomic { !ts -> ts = 1; flag_ts = 1 };
#else
    flag_ts = 1;                                    /* committed: waiting for the other to drain */
#endif
    atomic { other == 0 -> mine++; flag_in = 1 };   /* drain check + own shared lock */
    ts = 0; flag_ts = 0;
}

active [2] proctype A() {
    bool t, i;
    do
    :: enter(in_a, in_b, t, i);
       assert(in_b == 0);
       if :: atomic { in_a--; i = 0 } :: atomic { in_a--; i = 0 } fi
    od
}

active proctype B() {
    do
    :: enter(in_b, in_a, b_ts, b_in);
       assert(in_a == 0);
       atomic { in_b--; b_in = 0 }
    od
}

ltl no_group_starvation { [] (b_ts -> <> b_in) }
