/* group (src/group.rs): join: lock join.lock -> first = nobody holds the gate shared -> take the
   gate shared -> register -> release join.lock; leave: lock join.lock -> unregister -> drop the
   gate -> last = nobody in -> release join.lock. Members may crash at any time (their gate lock
   and registration go at once; a crash while holding join.lock releases it). Properties: at most
   one member is told "first" per non-empty period of the group and one told "last" per period
   (a crashed member tells nobody); emptiness is exactly "no shared holder of the gate and no
   held registration". The membership is passed down to the command: a member (fsync) killed
   while its command runs leaves when the command exits, telling nobody, which is the crash
   branch taken later; a member whose command left a process running with the membership
   inherited leaves under join.lock while that process still holds the gate and the
   registration (so it is never "last"), and the process leaves later, telling nobody.

   Leave with a clean-up (--last, Membership::leave_then): lock join.lock -> drop the gate,
   keeping the registration -> last = nobody else in (no shared holder of the gate, no held
   registration but ours) -> if last: take the gate shared again, run the clean-up, unregister,
   drop the gate; else unregister -> release join.lock. The whole job may crash while the
   clean-up runs (everything it holds goes at once, join.lock too: passed down to the clean-up's
   command, it goes when that command does). Properties: the clean-up runs only when nobody else
   is in; no member joins while it runs; an observer that asks whether the group is empty (held
   registrations, then shared holders of the gate: the passive check) never finds it empty while
   it runs.

   -DBROKEN: no join.lock. -DBROKEN_LAST: the clean-up path releases join.lock before it runs the
   clean-up (leave, then clean up: a joiner gets in). -DBROKEN_UNREGISTER: it unregisters before
   the clean-up (an observer finds the group empty while the clean-up runs). models/check.sh
   checks all three. */
#define P 3
byte members = 0;      /* shared holders of the gate */
byte regs = 0;         /* held registrations */
bool join_lock = 0;
byte firsts = 0;       /* "first" answers since the group was last empty */
byte lasts = 0;
bool cleaning = 0;     /* a clean-up runs */

inline lock_join() {
#ifndef BROKEN
    atomic { !join_lock -> join_lock = 1 }
#else
    skip
#endif
}
inline unlock_join() {
#ifndef BROKEN
    join_lock = 0
#else
    skip
#endif
}
/* The group is empty again: a new period begins. */
inline period_ends() {
    if :: members == 0 && regs == 0 -> firsts = 0; lasts = 0 :: else -> skip fi
}

active [P] proctype Member() {
    bool first, last;
    do
    :: lock_join();
       first = (members == 0);
       atomic {
           assert(!cleaning);   /* nobody joins while a clean-up runs */
           members++; regs++;
           if :: first -> firsts++ :: else -> skip fi; assert(firsts <= 1)
       };
       unlock_join();
       if
       :: atomic { members--; regs--; period_ends() }; break   /* crash */
       :: lock_join();   /* leave */
          regs--;
          atomic { members--; last = (members == 0 && regs == 0); if :: last -> lasts++; assert(lasts <= 1) :: else -> skip fi };
          atomic { period_ends() };
          unlock_join()
       :: lock_join();   /* leave while a process the command left running holds the gate */
          last = (members == 0);
          assert(!last);
          unlock_join();
          atomic { members--; regs--; period_ends() }
       :: lock_join();   /* leave with a clean-up */
#ifndef BROKEN_UNREGISTER
          members--;                                    /* drop the gate, keep the registration */
          atomic {
              last = (members == 0 && regs == 1);       /* nobody else: ours is the one */
#else
          regs--; members--;                            /* unregister first, as a plain leave */
          atomic {
              last = (members == 0 && regs == 0);
#endif
              if :: last -> lasts++; assert(lasts <= 1); cleaning = 1 :: else -> skip fi
          };
          if
          :: last ->
             members++;                                 /* take the gate again */
#ifdef BROKEN_LAST
             unlock_join();
#endif
             assert(members == 1);                      /* nobody else is in */
             if
             :: cleaning = 0                            /* the clean-up runs, and ends */
             :: atomic {                                /* the whole job crashes during it */
                    cleaning = 0; members--;
#ifndef BROKEN_UNREGISTER
                    regs--;
#endif
                    period_ends();
#ifndef BROKEN_LAST
                    join_lock = 0
#endif
                }; break
             fi;
#ifndef BROKEN_UNREGISTER
             regs--;
#endif
             atomic { members--; period_ends() };
#ifndef BROKEN_LAST
             unlock_join()
#endif
          :: else ->
#ifndef BROKEN_UNREGISTER
             regs--;
#endif
             atomic { period_ends() };
             unlock_join()
          fi
       fi
    od
}

/* Asks whether the group is empty, as `fsync group empty` does on a local file system: a held
   registration says someone is in; otherwise a shared holder of the gate does. */
active proctype Observer() {
end: do
    :: atomic { (regs == 0 && members == 0) -> assert(!cleaning) }
    od
}
