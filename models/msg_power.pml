/* Power cuts in the queue (src/msg.rs: each step flushed before it is reported;
   tests/crash_states.rs checks the real file-system operations of each). A poster posts M
   jobs one after another; a receiver takes them, runs each, and removes (acknowledges) it or,
   for a failed run, puts it back counted; the kernel writes anything back to disk whenever it
   likes; a power cut may come at any instant, after which each job's place and `seq` are what
   was last on disk. Checked at the cut: no id a post returned is handed out again (`seq` on
   disk is not below it); no job whose post returned is lost; no job whose success was
   reported comes back; no failure that was reported is undone (its count on disk).
   -DBROKEN: `seq` not flushed before the rename (an id handed out again).
   -DBROKEN_ACK: the claim's removal not flushed before the success is reported (a job back).
   -DBROKEN_FAIL: the requeue of a failed job not flushed before it is reported. */
#define M 2
mtype = { none, queued, claimed, done };
mtype place[M];      /* what a look at the directory finds now */
mtype on_disk[M];    /* what a power cut leaves */
byte failed[M];      /* the failures counted in the job's name now */
byte failed_on_disk[M];
byte seq = 0;
byte seq_on_disk = 0;
bool returned[M];    /* its post returned */
bool succeeded[M];   /* its success was reported */
byte reported_failures[M];
bool cut = false;

/* One step, unless the power is cut first: then the process stops where it is. */
/* A flush (or the kernel's write-back) makes a job's place and name, as they are now, durable. */
#define FLUSH(j) on_disk[j] = place[j]; failed_on_disk[j] = failed[j]
#define STEP(x) if :: atomic { !cut -> x } :: cut -> goto halt fi

proctype Poster() {
    byte id;
    do
    :: atomic { !cut && seq < M -> seq++; id = seq - 1 }          /* write seq */
#ifndef BROKEN
       STEP(seq_on_disk = seq);                                  /* fdatasync seq */
#endif
       STEP(place[id] = queued);                                 /* rename into its shard */
       STEP(FLUSH(id); returned[id] = true)                      /* fsync the shard; return */
    :: atomic { cut || seq == M -> break }
    od;
halt:
    skip
}

proctype Receiver() {
    byte m;
end_idle:                            /* waiting for a job, or for the cut: a valid end */
    do
    :: atomic {                                     /* claim the first queued job */
           !cut && (place[0] == queued || place[M-1] == queued) ->
           if :: place[0] == queued -> m = 0 :: else -> m = M - 1 fi;
           place[m] = claimed
       };
       if
       :: STEP(place[m] = done);                         /* it succeeded: unlink the claim */
#ifndef BROKEN_ACK
          STEP(FLUSH(m));                                /* fsync claimed */
#endif
          STEP(succeeded[m] = true)
       :: atomic { !cut && failed[m] < 2 -> failed[m]++; place[m] = queued }  /* failed: back */
#ifndef BROKEN_FAIL
          STEP(FLUSH(m));                                /* fsync the shard */
#endif
          STEP(reported_failures[m] = failed[m])
       :: cut -> goto halt
       fi
    :: atomic { cut -> break }
    od;
halt:
    skip
}

/* The kernel writes back what it likes, when it likes: a job's place (with its name), `seq`. */
proctype Writeback() {
end_idle:
    do
    :: atomic { !cut -> FLUSH(0) }
    :: atomic { !cut -> FLUSH(M-1) }
    :: atomic { !cut -> seq_on_disk = seq }
    :: atomic { cut -> break }
    od
}

proctype Power() {
    atomic {
        cut = true;
        byte k = 0;
        do
        :: k < M ->
           assert(!returned[k] || seq_on_disk > k);            /* no id handed out again */
           assert(!returned[k] || on_disk[k] != none);         /* no job lost */
           assert(!succeeded[k] || on_disk[k] == done);        /* none back after success */
           assert(on_disk[k] == done || failed_on_disk[k] >= reported_failures[k]);
           k++
        :: k == M -> break
        od
    }
}

init {
    atomic {
        byte i = 0;
        do :: i < M -> place[i] = none; on_disk[i] = none; i++ :: i == M -> break od;
        run Poster(); run Receiver(); run Writeback();
        if :: run Power() :: skip fi   /* a cut, or none */
    }
}
