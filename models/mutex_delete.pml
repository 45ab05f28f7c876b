/* mutex --delete (src/mutex.rs): open (create if missing) -> lock -> verify the path still
   names the locked inode and it is linked -> hold -> unlink while holding -> unlock.
   Safety: never two holders of "the" lock file. A holder may crash at any step (its lock is
   released, its files stay). -DBROKEN drops the verify step: spin finds two holders. */
#define N 3          /* processes */
#define ROUNDS 2     /* acquisitions each */
#define INODES 12

byte path = 0;              /* the inode the name points to; 0: no file */
byte next = 0;
bool linked[INODES];
bool locked[INODES];
byte inside = 0;

proctype P() {
    byte ino; byte round = 0;
    do
    :: round < ROUNDS ->
open:   atomic { if :: path == 0 -> next++; path = next; linked[path] = 1 :: else -> skip fi; ino = path }
lock:   atomic { !locked[ino] -> locked[ino] = 1 }
#ifndef BROKEN
verify: if
        :: !(path == ino && linked[ino]) -> locked[ino] = 0; goto open
        :: else -> skip
        fi;
#endif
        inside++;
        assert(inside == 1);
        if
        :: inside--; locked[ino] = 0; break           /* crash while holding: lock released, file stays */
        :: inside--;
delete:    atomic { if :: path == ino -> path = 0 :: else -> skip fi; linked[ino] = 0 }
unlock:    locked[ino] = 0
        fi;
        round++
    :: round == ROUNDS -> break
    od
}

init { atomic { byte i = 0; do :: i < N -> run P(); i++ :: i == N -> break od } }
