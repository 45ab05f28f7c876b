/* Conditional critical regions (src/mutex.rs, "Conditional regions"): lock -> read the token F
   -> evaluate the condition -> if it holds, enter (record a new token), work, leave; otherwise
   release (recording nothing) and sleep until the recorded token exceeds F -> lock again.
   A bounded queue of CAP items between one producer, which enters when the queue is not full and
   adds an item, and two consumers, which enter when it is not empty and take one: ROUNDS items
   in all. Only holders that entered change the queue. The sleep is the state check `fence > F`,
   as change notification followed by a look at the record makes it.
   No lost wake-up: a waiter asleep while its condition holds wakes (LTL, weak fairness; a
   deadlock is an infinite stutter, so it violates it too). Mutual exclusion by assertion.
   -DBROKEN: the token is read after the release (a waiter that looks before it has registered):
   a producer that enters and leaves in between is missed, and the consumer sleeps for ever with
   an item in the queue. */
#define CAP 1
#define C 2          /* consumers */
#define ROUNDS 4     /* items produced; ROUNDS / C taken by each consumer */

bool locked = 0;     /* the flock of L */
byte fence = 0;      /* the token in the record (and .fsync.fence) */
byte items = 0;      /* what the conditions look at */
byte inside = 0;
bool asleep[C + 1];  /* process me sleeps in step 4 */

inline region(me, cond, change) {
    do
    :: atomic { !locked -> locked = 1 };           /* 1. lock */
#ifndef BROKEN
       f = fence;                                  /* 2. F, while holding */
#endif
       if
       :: cond ->                                  /* 3. it holds: enter with a new token */
          fence++;
          inside++;
          assert(inside == 1);
          items = items + change;                  /*    work: add or take an item */
          inside--;
          locked = 0;                              /*    leave */
          break
       :: else ->
          locked = 0;                              /* 4. release, recording nothing */
#ifdef BROKEN
          f = fence;                               /*    too late */
#endif
          asleep[me] = 1;
          atomic { fence > f -> asleep[me] = 0 }   /*    until a holder entered after us */
       fi                                          /* 5. lock again, evaluate again */
    od
}

proctype Producer(byte me) {
    byte f, n = 0;
    do
    :: n < ROUNDS -> region(me, items < CAP, 1); n++
    :: else -> break
    od
}

proctype Consumer(byte me) {
    byte f, n = 0;
    do
    :: n < ROUNDS / C -> region(me, items > 0, -1); n++
    :: else -> break
    od
}

init {
    atomic { run Producer(0); run Consumer(1); run Consumer(2) }
}

/* A waiter whose condition holds is not left asleep. */
ltl no_lost_wakeup {
    [] ((asleep[0] && items < CAP) -> <> !asleep[0]) &&
    [] ((asleep[1] && items > 0) -> <> !asleep[1]) &&
    [] ((asleep[2] && items > 0) -> <> !asleep[2])
}
