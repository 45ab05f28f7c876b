/* sem (src/sem.rs): holders hold one of N slot locks; waiters line up on the queue lock; the
   head waiter tries every slot (the code first tries once without a watch, and takes a free
   slot at once; only the look that precedes a sleep matters here), then with its inotify watch
   set up first tries every slot again and otherwise sleeps until a slot file is closed (a
   release or a holder's death). Safety: never more than N holders.
   No lost wake-up: no state where a slot is free, the head waits asleep and nobody will close
   a file (spin's invalid-end-state check finds such a deadlock). -DBROKEN: the head checks the
   slots before setting up its watch, so a release in between is missed. */
#define N 2
#define P 4
bool slot[N];
byte holders = 0;
bool queue = 0;
byte closes = 0;     /* close events not yet read by the head waiter's watch */
bool watching = 0;

active [P] proctype Proc() {
    byte i; bool got;
    atomic { !queue -> queue = 1 };              /* in line */
#ifndef BROKEN
    watching = 1; closes = 0;                    /* watch first ... */
#endif
    do
    :: got = 0; i = 0;
       do                                        /* ... then look at every slot */
       :: i < N -> atomic { if :: !slot[i] -> slot[i] = 1; got = 1 :: else -> skip fi }; if :: got -> break :: else -> i++ fi
       :: i == N -> break
       od;
       if
       :: got -> break
       :: else ->
#ifdef BROKEN
          watching = 1; closes = 0;              /* too late: a close before this is lost */
#endif
          atomic { closes > 0 -> closes-- }     /* sleep until a slot file is closed */
       fi
    od;
    watching = 0; queue = 0;
    holders++;
    assert(holders <= N);
    holders--;
    atomic { slot[i] = 0; if :: watching -> closes++ :: else -> skip fi }   /* release = close */
}
