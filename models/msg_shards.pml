/* The queue at any depth (src/msg.rs, "Shards and the head"): messages numbered 0..M-1 live in
   shards of S consecutive numbers; `head` names the oldest shard that may hold a message; `handed`
   counts the numbers handed out. Both are read together under a shared lock on `seq` and
   written under the exclusive one, which a post holds while it numbers a message and renames it
   into its shard. A receiver looks from the head's shard to the one posts go to, claims the
   oldest message of the first shard that has one (one rename wins), and moves the head past the
   head's shard if it found no message there and it is not the shard posts go to, and past each
   shard after it without a message up to the first with one or the one posts go to (checking
   each again under the exclusive lock). Receiver 1 may crash after a claim, or return a message it
   claimed (as a receiver does when its delivery fails); its claims go back to their shard under
   the exclusive lock, lowering the head to it first if it lies behind. Receiver 0 never crashes
   and runs until everything was delivered: a message left behind the head is never found, and
   receiver 0 then sleeps for ever (spin: invalid end state).
   -DBROKEN: a returned message does not lower the head (lost once the head moved past it).
   -DBROKEN_ADVANCE: the head moves past a shard found empty even if posts still go to it
   (a message posted there after the look is lost). */
#define M 4
#define S 2
#define R 2
#define SHARD(m) ((m) / S)
#define NONE 0
#define QUEUED 1
#define CLAIMED 2
#define DONE 3

byte loc[M];
byte owner[M];
bool alive[R];
byte delivered[M];
byte crashed_after_output = 0;
byte head = 0;
byte handed = 0;            /* numbers handed out: the next post's number */
byte next_post = 0;         /* the poster's progress */
byte lock_x = 0;            /* exclusive holder + 1, or 0 */

#define NEWEST (handed / S)         /* the shard posts go to */
#define ALL_DONE (loc[0] == DONE && loc[1] == DONE && loc[2] == DONE && loc[3] == DONE)
#define REACHABLE(m) (loc[m] == QUEUED && SHARD(m) >= head)
#define SOMETHING (REACHABLE(0) || REACHABLE(1) || REACHABLE(2) || REACHABLE(3))
#define DEAD(m) (loc[m] == CLAIMED && !alive[owner[m]])
#define DEAD_CLAIM (DEAD(0) || DEAD(1) || DEAD(2) || DEAD(3))

inline lock(me) { atomic { lock_x == 0 -> lock_x = me + 1 } }
inline unlock() { lock_x = 0 }

/* Return claimed message k to its shard, under the exclusive lock. */
inline requeue(me, k) {
    lock(me);
#ifndef BROKEN
    if :: head > SHARD(k) -> head = SHARD(k) :: else -> skip fi;
#endif
    loc[k] = QUEUED;
    unlock()
}

proctype Poster() {
    do
    :: next_post < M ->
       lock(R);
       handed = next_post + 1;        /* write n + 1 to seq */
       loc[next_post] = QUEUED;       /* rename into its shard */
       next_post++;
       unlock()
    :: next_post == M -> break
    od
}

proctype Receiver(byte me) {
    byte h, v, s, m, k;
    bool found, any;
    alive[me] = 1;
    do
    :: /* recover: dead receivers' claims go back */
       k = 0;
       do
       :: k < M && DEAD(k) -> requeue(me, k); k++
       :: k < M && !DEAD(k) -> k++
       :: k == M -> break
       od;
       atomic { lock_x == 0 -> h = head; v = handed };   /* the ends, under a shared lock */
       found = 0;
       s = h;
       do
       :: s > v / S || found -> break
       :: else ->
          any = 0;
          atomic {                      /* list the shard, claim its oldest */
              m = s * S;
              do
              :: m < (s + 1) * S && m < M && loc[m] == QUEUED ->
                 any = 1; loc[m] = CLAIMED; owner[m] = me; found = 1; break
              :: m < (s + 1) * S && m < M && loc[m] != QUEUED -> m++
              :: m == (s + 1) * S || m == M -> break
              od
          };
#ifndef BROKEN_ADVANCE
          if
          :: !any && s == h && s < v / S ->
             lock(me);                  /* again, under the exclusive lock */
             if
             :: head == s ->
                do
                :: head < NEWEST && !(loc[head*S] == QUEUED || (head*S+1 < M && loc[head*S+1] == QUEUED)) ->
                   head++
                :: else -> break
                od
             :: else -> skip
             fi;
             unlock()
          :: else -> skip
          fi;
#else
          if
          :: !any && s == h ->
             lock(me);
             if :: head == s -> head = s + 1 :: else -> skip fi;
             unlock()
          :: else -> skip
          fi;
#endif
          s++
       od;
       if
       :: !found -> if
                    :: ALL_DONE && next_post == M -> break
                    :: else -> (SOMETHING || DEAD_CLAIM || (ALL_DONE && next_post == M))
                    fi
       :: found ->
          if
          :: me == 1 -> alive[me] = 0; goto dead                    /* crash after claim */
          :: me == 1 -> requeue(me, m)                              /* delivery failed: return it */
          :: skip ->
             delivered[m]++;                                        /* written out */
             if :: me == 1 -> atomic { alive[me] = 0; crashed_after_output++ }; goto dead :: skip fi;
             loc[m] = DONE                                          /* unlinked */
          fi
       fi
    od;
dead:
    skip
}

init {
    atomic { run Poster(); run Receiver(0); run Receiver(1) };
    (_nr_pr == 1);      /* receiver 0 delivered everything */
    byte k = 0;
    do
    :: k < M -> assert(delivered[k] >= 1); assert(delivered[k] <= 1 + crashed_after_output); k++
    :: k == M -> break
    od
}
