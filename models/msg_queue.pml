/* Queued messages (src/msg.rs, and each bus participant's mailbox): M messages posted; R
   receivers claim the smallest queued name by rename (q -> claimed/NAME~RID; one rename wins),
   write it out, unlink it. Receiver 1 may crash at any step; its claims return to the queue
   through recovery by any receiver (its registration lock is gone). Receiver 0 never crashes,
   so everything must be delivered in the end. Properties: no message lost; a message delivered
   twice only if a receiver crashed after writing it out. -DBROKEN: no recovery of claims:
   a message claimed by the crashed receiver is lost (spin: invalid end state / assertion). */
#define M 2
#define R 2
mtype = { queued, claimed, done };
mtype state[M];
byte owner[M];
bool alive[R];
byte delivered[M];
byte crashed_after_output = 0;

#define ALL_DONE (state[0] == done && state[M-1] == done)
#define QUEUED (state[0] == queued || state[M-1] == queued)
#define DEAD_CLAIM ((state[0] == claimed && !alive[owner[0]]) || (state[M-1] == claimed && !alive[owner[M-1]]))
#ifndef BROKEN
#define SOMETHING_TO_DO (QUEUED || DEAD_CLAIM)
#else
#define SOMETHING_TO_DO QUEUED
#endif

inline recover() {
#ifndef BROKEN
    atomic {
        byte k = 0;
        do
        :: k < M -> if :: state[k] == claimed && !alive[owner[k]] -> state[k] = queued :: else -> skip fi; k++
        :: k == M -> break
        od
    }
#else
    skip
#endif
}

proctype Receiver(byte me) {
    byte m;
    alive[me] = 1;
    do
    :: recover();
       atomic {                       /* claim the smallest queued name, if any */
           m = 0;
           do
           :: m < M && state[m] != queued -> m++
           :: m < M && state[m] == queued -> state[m] = claimed; owner[m] = me; break
           :: m == M -> break
           od
       };
       if
       :: m == M -> if
                    :: ALL_DONE -> break
                    :: else -> (ALL_DONE || SOMETHING_TO_DO)    /* sleep until a change wakes us */
                    fi
       :: else ->
          if :: me == 1 -> alive[me] = 0; goto dead :: skip fi;                     /* crash after claim */
          delivered[m]++;                                                           /* written out */
          if :: me == 1 -> atomic { alive[me] = 0; crashed_after_output++ }; goto dead :: skip fi;
          state[m] = done                                                           /* unlinked */
       fi
    od;
dead:
    skip
}

init {
    atomic {
        byte i = 0;
        do :: i < M -> state[i] = queued; i++ :: i == M -> break od;
        run Receiver(0); run Receiver(1)
    };
    /* the end: receiver 0 delivered everything */
    (_nr_pr == 1);
    byte k = 0;
    do
    :: k < M -> assert(delivered[k] >= 1); assert(delivered[k] <= 1 + crashed_after_output); k++
    :: k == M -> break
    od
}
