/* swmr (src/swmr.rs): readers: turnstile (exclusive) -> LOCK shared -> release turnstile;
   writer: turnstile (exclusive) -> LOCK exclusive -> release turnstile. flock semantics: a
   shared request is granted whenever no exclusive holder exists (no writer preference).
   Safety: a writer is never inside with anyone. Liveness (no writer starvation): once the
   writer holds the turnstile it gets in, although readers arrive for ever (weak fairness).
   -DBROKEN: readers skip the turnstile (plain flock -s): the liveness property fails. */
byte readers = 0;   /* shared holders of LOCK */
bool writer = 0;    /* exclusive holder of LOCK */
bool ts = 0;        /* turnstile holder */
bool w_ts = 0;      /* the writer holds the turnstile */
bool w_in = 0;

active [2] proctype Reader() {
    do
    ::
#ifndef BROKEN
        atomic { !ts -> ts = 1 };
#endif
        atomic { !writer -> readers++ };
#ifndef BROKEN
        ts = 0;
#endif
        assert(!writer);
        readers--;
        if :: skip :: atomic { readers = readers } fi   /* think */
    od
}

active proctype Writer() {
    do
    ::  atomic { !ts -> ts = 1; w_ts = 1 };
        atomic { !writer && readers == 0 -> writer = 1; w_in = 1 };
        ts = 0; w_ts = 0;
        assert(readers == 0);
        w_in = 0;
        writer = 0
    od
}

ltl no_writer_starvation { [] (w_ts -> <> w_in) }
