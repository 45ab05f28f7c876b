/* Synchronous send (src/msg.rs): the sender posts the message into q and waits; a receiver
   claims it by rename (q -> claimed), checks the sender's registration lock, and either
   discards it (sender dead) or converts it (taken) and then writes it out and unlinks it. The
   sender gives up by unlinking q/NAME: success = withdrawn, never delivered. Receivers may
   crash at any step (their claim returns to the queue by another receiver's recovery); the
   sender may crash at any step. Properties: a message whose sender died before the check, or
   that was withdrawn, is never delivered; delivered at most once, except once more per
   receiver that crashed after writing it out; a "taken" answer means it was converted.
   -DBROKEN: receivers skip the liveness check: spin finds a dead sender's message delivered. */
#define R 2
mtype = { none, queued, claimed, converted, gone };
mtype loc = none;
byte owner = 0;
bool sender_alive = 1;
bool withdrawn = 0;
bool taken = 0;          /* what the sender was told */
bool recv_alive[R];
byte delivered = 0;
byte crashed_after_output = 0;
bool converted_ever = 0;
bool converted_dead = 0;     /* converted although the sender was already dead */

active proctype Sender() {
    loc = queued;
    do
    :: loc == converted || loc == gone && !withdrawn -> taken = 1; break       /* it was taken */
    :: atomic { loc == queued -> loc = gone; withdrawn = 1 }; break            /* timeout: withdraw */
    :: atomic { loc == claimed && !recv_alive[owner] -> loc = queued }         /* recover the claim */
    :: sender_alive = 0; break                                                 /* sender crashes */
    od;
    assert(!taken || converted_ever)
}

proctype Receiver(byte me) {
    recv_alive[me] = 1;
    do
    :: atomic { (loc == claimed || loc == converted) && !recv_alive[owner] -> loc = queued }   /* recover */
    :: atomic { loc == queued -> loc = claimed; owner = me };
check:  if
        :: recv_alive[me] = 0; goto dead                                       /* crash */
        :: skip
        fi;
#ifndef BROKEN
        if
        :: atomic { !sender_alive -> loc = gone }; goto next                   /* discard */
        :: atomic { sender_alive -> loc = converted; converted_ever = 1; converted_dead = !sender_alive }
        fi;
#else
        atomic { loc = converted; converted_ever = 1; converted_dead = !sender_alive };
#endif
        if
        :: recv_alive[me] = 0; goto dead                                       /* crash before output */
        :: skip
        fi;
        atomic {
            delivered++;
            assert(!withdrawn);
            assert(!converted_dead);     /* a dead sender's message is never delivered */
        };
        if
        :: atomic { recv_alive[me] = 0; crashed_after_output++ }; goto dead    /* crash before unlink */
        :: skip
        fi;
        loc = gone;
next:   skip
    :: loc == gone || loc == none -> break
    od;
dead:
    assert(delivered <= 1 + crashed_after_output)
}

init { atomic { run Receiver(0); run Receiver(1) } }
