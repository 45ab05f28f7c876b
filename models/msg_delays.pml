/* Delayed messages (src/msg/delayed.rs, "On disk"): a message held back until `due` waits in the
   bucket of its span of due time (bucket b holds due times b*SPAN .. b*SPAN+SPAN-1). A poster
   makes the bucket if missing, opens it, and renames the message in; a rename into a bucket
   removed since it was opened fails, and the poster makes it again. A receiver's look lists the
   buckets in order: it opens each whose span has begun (b*SPAN <= now), moves the messages due
   to the queue, notes the earliest due time left, and removes the bucket if it is empty (rmdir,
   which fails on one that is not); it stops at the first bucket whose span has not begun, whose
   start is then the latest time to wake. It sleeps until that time or a change in what it
   watches: `delayed` (buckets made and removed) and every bucket it opened that is still there,
   armed before the look that precedes the sleep (it arms and looks again while the buckets to
   watch differ from those watched).
   The clock runs on by itself. The property (checked in every state by a monitor): the receiver
   never sleeps while a message is due and waits in a bucket, unless its wake-up time has come or
   a change it watches has come (either ends the sleep).
   -DBROKEN: the receiver watches `delayed` only, not the buckets whose span has begun: a message
   put into one, due before the time it sleeps until, is slept past.
   -DBROKEN_START: the receiver also opens the buckets whose span has not begun, and sleeps until
   the earliest due time in them (watching only those that have begun, as the code does): a
   message put into a later one, due before that, is slept past. (Sleeping until a bucket's start, not its earliest message, is what
   makes watching the later buckets needless.) */
#define T 5                 /* the clock runs 0..T */
#define SPAN 2
#define NB 3                /* buckets 0..NB-1 hold due times 0..NB*SPAN-1 */
#define N 2                 /* messages posted */
#define NEVER 255
#define NONE 0
#define HELD 1
#define QUEUED 2
#define TAKEN 3

byte now = 0;
bool exists[NB];
byte loc[N];
byte due[N];
byte where[N];
bool watch_delayed = 0;
bool watched[NB];           /* a watch on the bucket's directory (one removed never fires) */
bool pending = 0;           /* a change the watch saw since it was armed or last woke us */
bool asleep = 0;
byte wake = NEVER;

#define DUE_HELD(k) (loc[k] == HELD && due[k] <= now)
#define SLEPT_PAST (asleep && !pending && now < wake && (DUE_HELD(0) || DUE_HELD(1)))
#define HOLDS(b) ((loc[0] == HELD && where[0] == b) || (loc[1] == HELD && where[1] == b))

#ifndef BROKEN_START
#define OPENS(b) (b * SPAN <= t)      /* its span has begun */
#else
#define OPENS(b) 1
#endif

/* A change in bucket b (a message in or out): seen if its directory is watched. */
inline touch(b) { if :: watched[b] -> pending = 1 :: else -> skip fi }

active proctype Clock() {
    do
    :: now < T -> now++
    :: now == T -> break
    od
}

active proctype Monitor() {
    assert(!SLEPT_PAST)
}

active proctype Poster() {
    byte k = 0, d, b;
    bool done, opened;
    do
    :: k == N -> break
    :: k < N ->
       /* due no sooner than now, as a delay from now */
       d = now;
       do
       :: d < NB * SPAN - 1 -> d++
       :: break
       od;
       b = d / SPAN;
       done = 0;
       do
       :: done -> break
       :: !done ->
          atomic {                              /* mkdir (EEXIST is fine) */
              if
              :: !exists[b] -> exists[b] = 1; if :: watch_delayed -> pending = 1 :: else -> skip fi
              :: else -> skip
              fi
          };
          opened = exists[b];                   /* open */
          atomic {                              /* rename into it: ENOENT if it went */
              if
              :: opened && exists[b] ->
                 due[k] = d; where[k] = b; loc[k] = HELD; touch(b); done = 1
              :: else -> skip
              fi
          }
       od;
       k++
    od
}

active proctype Receiver() {
    byte t, b, k, bound, begun, armed;
    bool first = 1;
    do
    :: /* the look */
       t = now;
       bound = NEVER;
       begun = 0;
       b = 0;
       do
       :: b == NB -> break
       :: b < NB && !exists[b] -> b++
#ifndef BROKEN_START
       :: b < NB && exists[b] && b * SPAN > t ->
          if :: b * SPAN < bound -> bound = b * SPAN :: else -> skip fi;
          break
#endif
       :: b < NB && exists[b] && OPENS(b) ->
          atomic {                              /* list the bucket, move what is due */
              k = 0;
              do
              :: k == N -> break
              :: k < N && loc[k] == HELD && where[k] == b && due[k] <= t ->
                 loc[k] = QUEUED; touch(b); k++
              :: k < N && loc[k] == HELD && where[k] == b && due[k] > t ->
                 if :: due[k] < bound -> bound = due[k] :: else -> skip fi; k++
              :: k < N && !(loc[k] == HELD && where[k] == b) -> k++
              od
          };
          atomic {                              /* rmdir: fails unless empty */
              if
              :: !HOLDS(b) ->
                 exists[b] = 0; watched[b] = 0; if :: watch_delayed -> pending = 1 :: else -> skip fi
              :: else -> if :: b * SPAN <= t -> begun = begun | (1 << b) :: else -> skip fi
              fi
          };
          b++
       od;
       atomic {                                 /* receive what is queued */
           k = 0;
           do
           :: k == N -> break
           :: k < N && loc[k] == QUEUED -> loc[k] = TAKEN; k++
           :: k < N && loc[k] != QUEUED -> k++
           od
       };
       if
       :: !first && begun == armed ->           /* watched since before the look: sleep */
          atomic { wake = bound; asleep = 1 };
end:      atomic { (pending || now >= wake) -> asleep = 0; pending = 0 }
       :: else ->                               /* watch them, then look again */
          atomic {
              first = 0;
              armed = begun;
              watch_delayed = 1;
              pending = 0;
              b = 0;
              do
              :: b == NB -> break
              :: b < NB ->
#ifndef BROKEN
                 watched[b] = (begun & (1 << b)) && exists[b];
#endif
                 b++
              od
          }
       fi
    od
}
