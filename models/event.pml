/* event auto-reset (src/event.rs): signal = create the file (no-op if it exists); a --reset
   waiter wakes when the file exists and consumes it by unlink: exactly one unlink of a file
   succeeds. W waiters, S signals issued one after another. Safety: every consumption matches
   a signal that was pending (never two wake-ups for one signal). -DBROKEN: waiters check
   existence and then unlink as two steps, ignoring failure: two wake for one signal. */
#define W 3
#define S 2
bool exists = 0;
byte signals = 0, woken = 0;

active proctype Signaller() {
    do
    :: signals < S -> atomic { exists == 0 -> exists = 1; signals++ }   /* one pending at a time */
    :: signals == S -> break
    od
}

active [W] proctype Waiter() {
#ifndef BROKEN
end: atomic { exists -> exists = 0; woken++ };    /* unlink succeeded: ours (waiting at the end is fine) */
#else
end: exists;                                       /* saw it ... */
    exists = 0; woken++;                           /* ... and claims it without an atomic step */
#endif
    assert(woken <= signals)
}
