/* group (src/group.rs): join: lock join.lock -> first = nobody holds the gate shared -> take the
   gate shared -> release join.lock; leave: lock join.lock -> drop the gate -> last = nobody holds
   it -> release join.lock. Members may crash at any time (their gate lock goes at once; a crash
   while holding join.lock releases it). Properties: at most one member is told "first" per
   non-empty period of the group and one told "last" per period (a crashed member tells
   nobody); emptiness is exactly "no shared holder of the gate". The membership is passed down to
   the command: a member (fsync) killed while its command runs leaves when the command exits,
   telling nobody, which is the crash branch taken later; a member whose command left a process
   running with the membership inherited leaves under join.lock while that process still holds
   the gate (so it is never "last"), and the process leaves later, telling nobody.
   -DBROKEN: no join.lock. */
#define P 3
byte members = 0;      /* shared holders of the gate */
bool join_lock = 0;
byte firsts = 0;       /* "first" answers since the group was last empty */
byte lasts = 0;

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

active [P] proctype Member() {
    bool first, last;
    do
    :: lock_join();
       first = (members == 0);
       atomic { members++; if :: first -> firsts++ :: else -> skip fi; assert(firsts <= 1) };
       unlock_join();
       if
       :: atomic { members--; if :: members == 0 -> firsts = 0; lasts = 0 :: else -> skip fi }; break   /* crash */
       :: lock_join();
          atomic { members--; last = (members == 0); if :: last -> lasts++; assert(lasts <= 1) :: else -> skip fi };
          atomic { if :: members == 0 -> firsts = 0; lasts = 0 :: else -> skip fi };
          unlock_join()
       :: lock_join();   /* leave while a process the command left running holds the gate */
          last = (members == 0);
          assert(!last);
          unlock_join();
          atomic { members--; if :: members == 0 -> firsts = 0; lasts = 0 :: else -> skip fi }
       fi
    od
}
