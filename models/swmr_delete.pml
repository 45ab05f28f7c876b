/* swmr with --delete (src/swmr.rs, "Protocol on disk" and "Deleting"). The lock is three
   files: NAME, the turnstile T and .writers W. Every lock taken is verified: the name must still
   name the file locked, else release everything and start again.
   Reader: r2 lock T (exclusive), verify -> r3 open NAME -> r4 lock NAME (shared), verify ->
   r5 release T. Writer: w2 lock W (shared), verify -> w3 lock T, verify -> w4 open NAME ->
   w5 lock NAME (exclusive), verify -> w6 release T and W. (r1/w1, opening NAME first to report
   errors early, change nothing: r3/w4 open it again when the name has moved on.)
   Leaving, and giving up a wait (a timeout), release everything, then attempt the deletion:
   d1 lock T (created if missing) exclusively without waiting: busy -> d5; verify (else d1);
   d2 NAME likewise: busy -> release, stop (someone is inside, and leaves after us);
   d3 W likewise: busy -> d5; verify (else d1); d4 unlink NAME, T, W (only what we hold), release;
   d5 release all but the busy file, wait until it is free (-> d1) or NAME is held (-> stop);
   the implementation also stops after a second, which is not modelled.
   A file is modelled by what each process has open of a name: the current file, a stale one
   (unlinked since it was opened), or none. A lock on a stale file is granted at once (more
   behaviours than the kernel's, which would make it wait for the deleter to let go).
   Two users read or write at will, give up while holding the turnstile (readers) or while
   waiting for it or for NAME (writers), and crash inside or half-way through d4 (a crash
   releases their locks and leaves their files); the steady writer only writes, never gives up.
   Safety: a writer alone, a reader never with a writer, and whoever is inside holds the NAME the
   name points to (so the verify of NAME after r3/w4 never fails). Tidiness: once everyone has
   left and the last to leave did not crash, no file is left. Liveness: once the steady writer
   holds the live turnstile it gets in (weak fairness), however the others come and go, delete,
   give up and crash.
   -DBROKEN: no verify (NAME opened first and kept): two writers, or a reader with a writer.
   -DBROKEN_WAIT: d5 stops instead of waiting: when the holder of the turnstile was a waiter
   that gives up, both leave and the files stay behind. */
#define P 3               /* processes: two users, the steady writer */
#define K_N 0
#define K_T 1
#define K_W 2
#define NONE 0
#define CUR 1             /* the file the name points to */
#define STALE 2           /* unlinked since it was opened */

bool exists[3];
byte hnd[3 * P];          /* what process q has open of name k: NONE, CUR, STALE */
byte hold[3 * P];         /* its lock on it: 0, 1 shared, 2 exclusive */
#define X(k, q) ((k) * P + (q))
#define HELD(k, q) (hnd[X(k, q)] == CUR && hold[X(k, q)] > 0)
#define EXCL(k, q) (hnd[X(k, q)] == CUR && hold[X(k, q)] == 2)
#define ANY_HELD(k) (HELD(k, 0) || HELD(k, 1) || HELD(k, 2))
#define ANY_EXCL(k) (EXCL(k, 0) || EXCL(k, 1) || EXCL(k, 2))
/* Whether process me may have name k exclusively / shared now (a stale file: at once). */
#define CAN_EX(k) (hnd[X(k, me)] == STALE || !ANY_HELD(k))
#define CAN_SH(k) (hnd[X(k, me)] == STALE || !ANY_EXCL(k))
#define LIVE(k) (hnd[X(k, me)] == CUR)

byte readers_in = 0, writers_in = 0;
bool w_ts = 0, w_in = 0;  /* the steady writer holds the live turnstile / is inside */
byte busy = 0;            /* processes between arriving and having left */
bool last_crashed = 0;    /* the last to leave crashed */

inline open(k, create) {
    d_step {
        if :: !exists[k] && create -> exists[k] = 1 :: else -> skip fi;
        if :: exists[k] -> hnd[X(k, me)] = CUR :: else -> hnd[X(k, me)] = NONE fi
    }
}
inline drop() {
    hold[X(K_N, me)] = 0; hold[X(K_T, me)] = 0; hold[X(K_W, me)] = 0;
    hnd[X(K_N, me)] = NONE; hnd[X(K_T, me)] = NONE; hnd[X(K_W, me)] = NONE
}
inline unlink(k) {
    d_step {
        if
        :: LIVE(k) ->
            exists[k] = 0;
            q = 0;
            do
            :: q < P -> if :: hnd[X(k, q)] == CUR -> hnd[X(k, q)] = STALE :: else -> skip fi; q++
            :: q == P -> q = 0; break
            od
        :: else -> skip
        fi
    }
}
inline crash() {
    d_step { drop(); busy--; last_crashed = 1 }; goto gone
}
/* Give up waiting (a timeout): release everything, then attempt the deletion. */
inline give_up() {
    d_step { mortal -> drop(); last_crashed = 0 }; goto leave
}

/* The deletion attempt, after leaving or giving up (holding nothing). bk: the busy name. */
inline attempt() {
    skip;
d1: skip;
    open(K_T, 1);
    d_step {
        if
        :: CAN_EX(K_T) -> hold[X(K_T, me)] = 2
        :: else -> bk = K_T + 1
        fi
    };
    if :: bk != 0 -> goto d5 :: else -> skip fi;
    if :: !LIVE(K_T) -> d_step { drop() }; goto d1 :: else -> skip fi;
    /* d2: NAME, opened while holding the live turnstile */
    open(K_N, 0);
    d_step {
        if
        :: hnd[X(K_N, me)] == NONE -> skip
        :: hnd[X(K_N, me)] != NONE && CAN_EX(K_N) -> hold[X(K_N, me)] = 2
        :: else -> drop(); bk = 9
        fi
    };
    if :: bk == 9 -> goto d_end :: else -> skip fi;
    assert(hnd[X(K_N, me)] != STALE);
    /* d3: .writers */
    open(K_W, 0);
    d_step {
        if
        :: hnd[X(K_W, me)] == NONE -> skip
        :: hnd[X(K_W, me)] != NONE && CAN_EX(K_W) -> hold[X(K_W, me)] = 2
        :: else -> bk = K_W + 1
        fi
    };
    if :: bk != 0 -> goto d5 :: else -> skip fi;
    if :: hnd[X(K_W, me)] == STALE -> d_step { drop() }; goto d1 :: else -> skip fi;
    /* d4 */
    unlink(K_N);
    if :: mortal -> crash() :: else -> skip fi;
    unlink(K_T);
    if :: mortal -> crash() :: else -> skip fi;
    unlink(K_W);
    d_step { drop() };
    goto d_end;
d5: /* release all but the busy file; wait until it is free, or until NAME is held */
    skip;
    d_step {
        if :: bk == K_T + 1 -> hold[X(K_W, me)] = 0; hnd[X(K_W, me)] = NONE; hold[X(K_N, me)] = 0; hnd[X(K_N, me)] = NONE
        :: else -> hold[X(K_T, me)] = 0; hnd[X(K_T, me)] = NONE; hold[X(K_N, me)] = 0; hnd[X(K_N, me)] = NONE
        fi
    };
#ifndef BROKEN_WAIT
    d_step {
        (bk == K_T + 1 && CAN_EX(K_T)) || (bk == K_W + 1 && CAN_EX(K_W)) || ANY_HELD(K_N) ->
        bk = 0;
        if :: ANY_HELD(K_N) -> bk = 9 :: else -> skip fi;
        drop()
    };
    if :: bk == 9 -> goto d_end :: else -> goto d1 fi;
#else
    d_step { drop() };
#endif
d_end:
    skip;
    d_step {
        bk = 0;
        busy--;
        assert(busy > 0 || last_crashed || !(exists[K_N] || exists[K_T] || exists[K_W]))
    };
gone:
    skip
}

/* A user: each round it reads or writes (the steady writer only writes, never gives up and
   never crashes), then leaves and attempts the deletion. */
proctype User(byte me; bool steady) {
    byte bk, q;
    bool mortal = !steady;
    do
    :: !steady -> d_step { busy++ };
read:
        skip;
#ifdef BROKEN
        open(K_N, 1);                  /* opened first and never looked at again */
#endif
        open(K_T, 1);
        d_step { CAN_EX(K_T) -> hold[X(K_T, me)] = 2 };
#ifndef BROKEN
        if :: !LIVE(K_T) -> d_step { drop() }; goto read :: else -> skip fi;
        open(K_N, 1);
#endif
        if
        :: d_step { CAN_SH(K_N) -> hold[X(K_N, me)] = 1 }
        :: give_up()                   /* while holding the turnstile */
        fi;
#ifndef BROKEN
        assert(LIVE(K_N));             /* never stale: opened under the live turnstile */
#endif
        d_step {
            hold[X(K_T, me)] = 0; hnd[X(K_T, me)] = NONE;
            readers_in++; assert(writers_in == 0)
        };
        if
        :: d_step { readers_in--; drop(); busy--; last_crashed = 1 }; goto gone
        :: d_step { readers_in--; drop(); last_crashed = 0 }
        fi;
        goto leave
    :: d_step { busy++ };
write:
        skip;
#ifdef BROKEN
        open(K_N, 1);
#endif
        open(K_W, 1);
        d_step { CAN_SH(K_W) -> hold[X(K_W, me)] = 1 };   /* only a deleter holds it exclusively */
#ifndef BROKEN
        if :: !LIVE(K_W) -> d_step { drop() }; goto write :: else -> skip fi;
#endif
        open(K_T, 1);
        if
        :: d_step { CAN_EX(K_T) -> hold[X(K_T, me)] = 2 }
        :: mortal -> give_up()
        fi;
#ifndef BROKEN
        if :: !LIVE(K_T) -> d_step { drop() }; goto write :: else -> skip fi;
        open(K_N, 1);
#endif
        w_ts = steady;
        if
        :: d_step { CAN_EX(K_N) -> hold[X(K_N, me)] = 2 }
        :: mortal -> give_up()
        fi;
#ifndef BROKEN
        assert(LIVE(K_N));
#endif
        d_step {
            hold[X(K_T, me)] = 0; hnd[X(K_T, me)] = NONE;
            hold[X(K_W, me)] = 0; hnd[X(K_W, me)] = NONE;
            writers_in++; w_ts = 0; w_in = steady;
            assert(writers_in == 1 && readers_in == 0)
        };
        if
        :: mortal -> d_step { writers_in--; drop(); busy--; last_crashed = 1 }; goto gone
        :: d_step { writers_in--; w_in = 0; drop(); last_crashed = 0 }
        fi;
leave:
        attempt()
    od
}

init {
    atomic { run User(0, 0); run User(1, 0); run User(2, 1) }
}

ltl no_writer_starvation { [] (w_ts -> <> w_in) }
