/*!
Mailboxes: durable queued messages (`post`), synchronous messages that are never delivered once
their sender died or gave up (`send`: the `SendMessage` of Primoz Gabrijelcic's *Let's
Cooperate: File system-based synchronisation primitives*), and exactly-once receipt.

# Protocol on disk

A mailbox `B` is a directory (created if missing) whose subdirectories are the states of a
message in the (Russian) article on a message bus for BlackBox processes over a shared network
directory (see [`crate::bus`]), each step between them one `rename(2)`:

| state | place | the article's suffix |
| --- | --- | --- |
| being written | `B/tmp/.UNIQ` | `w` |
| queued (done) | `B/q/SHARD/NAME` | `d` |
| being received | `B/claimed/NAME~RID` | `r` |

`NAME` is `SEQ.UNIQ.FROM.KIND`: `SEQ` a 20-digit sequence number, `UNIQ` `HOST-PID-RANDOM`
(no dot; `HOST` cut to 32 bytes), `FROM` the bus sender (which may hold dots: it is all between
the second dot and the last) or `-`, `KIND` `msg` (queued) or `sync` (a synchronous send). A
message whose deliveries failed `N` times has `KIND` `msg+N`; one whose deliveries were lost
`L` times with their receiver (killed with its job) `msg-L`, or `msg+N-L` with failures too
(`N`, `L` decimal, no leading zero); options follow, `msg[+N][-L][,pP][,tMS]` (a priority
level, a job's timeout: `src/msg/name.rs`). Receivers
take the smallest `NAME` of the highest level, so messages come out in enqueue order. A name with a control character
in it is not a message (fsync never makes one): receivers and listings pass it over and report it.

**Shards and the head.** A message numbered `SEQ` is queued in the shard directory
`q/SHARD`, `SHARD` being `SEQ` rounded down to a multiple of 100, in 20 digits
(`q/00000000000000000100/` holds 100 to 199): a receiver lists one shard, never the whole
queue, so it costs the same at any depth. The file `B/head` (`SHARD\n`) names the oldest shard
that may hold a message; it and `seq` are read together under a shared `flock` on `B/seq`, and
written only under the exclusive one, which posts hold. Receivers look from the head's shard to
the one posts go to (`seq + 1`'s); one that finds the head's shard without a message, and not
the shard posts go to, moves the head on under the exclusive lock, past it and each shard after
it without a message, to the first with one or the one posts go to (checking each again: every
number of it was handed out, and posts finish under the lock, so none can come; the numbers of
delayed messages leave such shards), and removes the empty directories. A message returned to the queue (its receiver died, or let it go) goes back to
its shard under the exclusive lock, and lowers the head to it first, durably (`fsync`), if it
lies behind: the head is never past a message. A head that is missing, is not one fsync wrote,
or lies past the shard posts go to is rebuilt under the exclusive lock from the directory: the
oldest shard there. Both are checked against the directory too: a receive (or `wait_empty`)
whose walk finds nothing lists `q` once, and a shard before the head, or past the one posts go
to, that holds a message (a head or `seq` rewritten: fsync never leaves one there, a crash
included) makes it rebuild them (`seq` raised to the newest message of such shards, so that
posts are numbered after them), and `wait_empty` count the mailbox busy. The head need not be durable otherwise: one that a crash set back only costs
a look at empty shards. A mailbox of the layout before shards (messages in `q/` itself, no
`head`) is rebuilt the same way: its messages move into their shards, names and order kept;
messages an older fsync posts into `q/` itself later are moved when a receiver finds the queue
empty.

**Levels**: a message of priority level `P` (1 to 3; 0 is the queue above) is queued in a
queue of its own, `q/pP/SHARD/NAME` with its head in `q/pP/head`, which shares `seq` (ids are
the mailbox's), `claimed`, `delayed` and `dead` with level 0. A receiver reads every level's head
under one shared lock on `seq` and walks the levels that exist, highest first, as above: it lists
one shard of each, and a level never used costs it one failed `openat`. The steps, the
wake-ups and what moves a message back to its level are in the docs of `src/msg/levels.rs`.

**post**: write the payload to `tmp/.UNIQ` (mode 0640 unless asked, less the umask), `fsync` it; take an exclusive `flock`
on `B/seq`, read `n`, write `n + 1` and `fsync` it (a number a power cut took back would be
handed out again), rename the file to `q/SHARD/NAME` with `SEQ = n + 1`
(creating the shard's directory if missing; `fsync` of `q` first if it made the shard or
found it empty, since a shard a receiver made to watch it need not be durable yet), release
`seq`; `fsync` the shard's directory. The post that hands out number 1 also flushes the mailbox's
directory and its parent (the entries of `seq` and of the mailbox). A crash at any instant
leaves no message or the whole one, and takes back no number handed out.
Whoever may open `seq` may hold its lock for ever: a send waits for it only until its deadline
(a post, which has none, until a cancellation signal), and `seq` gets the mode of the platform
layer's rule (`src/platform/fs.rs`, *Who may lock an internal lock file*): only those who may
write the mailbox can open it.

**batches** (`post_batch`, `msg post --lines`): payloads staged in `tmp/.batch-UNIQ/`, flushed
at once, committed by one rename into `batches/` under the lock, then moved into their shards:
all or none after a crash; the steps and the recovery are in the docs of `src/msg/batch.rs`.

**Walks.** Receivers, `wait_empty` and listings walk the shards from the head to the one posts
go to by number; after 4 missing shards in a row they list `q` once and go on at the next shard
there is, so that a walk visits no more shards than there are (plus a few), however far apart
the head and `seq` lie. Every wait for the lock on `seq` inside a verb ends at the verb's
deadline and on a cancellation signal: whoever may open `seq` may hold its lock for ever.

**receive**: register as receiver `RID` = `HOST.PID.RANDOM`: create `recv/.tmp-RID` with mode
0600, lock it exclusively, give it the mode of the rule for internal lock files (less the
umask: only those who may write the mailbox may open it, and so lock it, which would make a
dead receiver look alive), rename it to `recv/RID` (so a visible registration is locked while
its receiver lives). Where it can, it takes a spare instead of a new file (which a full file
system cannot make: `ENOSPC`, `EDQUOT`): `recv/.spare-K` (`K` 0 to 3), one of the receiver's own
(its owner, one link) that nobody holds, locked exclusively, given the mode and emptied, then
renamed to `recv/RID`. A receiver
letting its registration go renames it, still locked, to the first `.spare-K` that does not
exist (`renameat2` with `RENAME_NOREPLACE`; a link and an unlink where the file system has no
such rename), or unlinks it if all four do; the post that makes a mailbox's first shard makes `head` and `.spare-0`. So receiving,
running and acknowledging need no new inode or block: a full file system can be drained.
Then remove the registrations of dead receivers (a receiver killed by SIGKILL leaves
its own): each `recv/R` that a non-blocking exclusive lock gets (nobody holds it), if `recv/R`
still names the file locked, one link, and in a sticky `recv` the caller's or the directory
owner's; `.tmp-*` entries are left alone. Then (1) *recover*: every `claimed/NAME~R` whose `recv/R` is missing or unlocked belongs
to a dead receiver and is returned to its shard (above), with one more lost delivery in its
`KIND` (not a failed one: a receiver killed with its job says nothing of the job); (2) *claim* the smallest `NAME` of the
first shard from the head that holds one, by renaming it to `claimed/NAME~RID`: of competing
receivers exactly one rename succeeds, the others try the next name; (3) for `KIND` `sync`, check the sender (below): dead, discard the message; alive,
rename it to the `msg` kind (from now on it is taken, whatever happens to the sender); (4) copy the
payload out (a snapshot of it, if others may write it: *Payloads*), then unlink it and the
registration, and `fsync` `claimed` before reporting the delivery (else a power cut could bring
it back). A receiver that dies before (4) finishes leaves
a claim that goes back to the queue: delivery is exactly once, except at least once for a
receiver that crashes after writing the payload out and before unlinking it.

**Payloads**: a payload another user owns, or that the group or others may write, is not read in
place: its poster may still write it (an owner may always give itself write access, or kept a
descriptor from posting) and change or grow it under the receiver or its job. Once it is
claimed, the receiver copies it, up to the size it has then, into an anonymous file in memory
sealed against every change (`memfd_create`, `F_SEAL_WRITE`, `GROW`, `SHRINK`, `SEAL`), and the
receiver and its job read that copy: what they read is what it held when claimed (before that,
its poster could as well have withdrawn it and posted another). One whose size or times moved
while it was copied, or that ended early, is no state its poster left it in: it goes to the
dead letters, reported as passed over, never back to the queue. A receiver's own payloads,
which it alone may write, are read in place, uncopied.

**jobs**: a receiver that runs a command on the message ([`Received::spawn`]) leaves its
registration's descriptor open in the command (in that command alone: its close-on-exec flag is
cleared between fork and exec), so the command holds the registration's lock too: the claim
lives while the receiver or the command (or anything the command left running with that
descriptor) lives. A receiver killed alone leaves the message with its job; the job's end
releases the lock, and the claim goes back as a lost delivery (and so runs again, even if the
job succeeded: nobody was left to unlink it). The job leads a process group of its own: one
that runs past its timeout, or is asked to be cancelled (`B/cancel/SEQ`), is stopped with all it
started (`src/msg/cancel_worker.rs`). A job that succeeded is removed (4), its file renamed to
its record where it can be (*Jobs by id*); one that
failed (or timed out) goes back with one more failed delivery in its `KIND`, or to `delayed` for
its backoff (`src/msg/backoff.rs`: the base after the first failure, twice as long after each
one after, 5 minutes or the most given at most, perhaps jittered), or to
`dead/` once it failed more than the receiver's retries allow, or was lost more than 2 times
beyond them; each move is flushed (the directory it went to, and its parent for a directory
made or found empty) before the failure is reported, as is a dead letter put back (`retry`)
and a key (`B/keys/KEY`: its data, then `keys`), so that a power cut undoes no step a command
reported. `tests/crash_states.rs` checks every crash state of each step.

**Output**: a job started with its output kept ([`Mailbox::job_output`]) writes to a pipe that
a thread of its receiver copies, bounded, to `B/output/SHARD/SEQ`, finished before the message
moves on; read by [`Mailbox::output`] and [`Mailbox::follow_output`] (`src/msg/output.rs`).

**History**: each delivery that ends without success (a job's status or signal, a receiver
lost with its job) adds a line to `B/attempts/SEQ`, before the message moves on; a success
removes it, a dead letter keeps it (`src/msg/history.rs`).

**Jobs by id** (`src/msg/status.rs`): a success or a cancellation leaves a record,
`B/done/SHARD/SEQ` (a success's, where it can be, the claimed file itself, renamed there and
its payload replaced by the line; else a new file written before the claim is removed), kept
for the receiver's
[`keep`](Mailbox::keep); a cancel request is a file `B/cancel/SEQ`, which the job's worker, or
the next receiver to claim the message, acts on. A lookup by id reads the one shard the id
belongs to, `claimed`, the delayed buckets, the dead letters and the record, never the queue.

**send** (synchronous): the sender creates and locks `senders/.tmp-UNIQ`, renames it to
`senders/UNIQ`, posts the message as `STEM.sync` (`STEM` is `NAME` without `KIND`), and waits
(change notification on `q` and `claimed`) until neither `q/SHARD/STEM.sync` nor `claimed/STEM.sync~*` exists:
then a receiver converted it, and it is taken. To give up (timeout, signal), it unlinks
`q/SHARD/STEM.sync`: if that succeeds the message is withdrawn, and no receiver can ever see it again;
if a receiver claimed it first, the sender waits for the conversion (or for that receiver's death,
when it renames the claim back and withdraws it). A sender that dies holds no lock any more, so
the receiver that claims its message discards it: a message whose sender died is never received.

**Delays**: a message posted with a delay, or a failed job held back before its next attempt,
waits as `B/delayed/BUCKET/DUE.NAME` (`DUE` when it is due, in microseconds since the epoch;
`BUCKET` that rounded down to the minute; both in 20 digits) until a receiver, before its look
at the queue, moves it to its shard as a returned message goes, keeping `NAME`: once due, it
comes before the messages queued after it. Receivers list the names of the buckets and open
only those whose minute has begun, so a receive costs the same however many messages wait;
the steps, the wake-ups and the layout before buckets (`delayed/DUE.NAME`) are in the docs of
`src/msg/delayed.rs`.

Receivers sleep until the kernel reports a change in `q`, in the shard posts go to, in
`claimed`, in `delayed` or in a bucket of it whose minute has begun, until the first delayed
message may be due, and while claims of living receivers exist, the last close of a
registration in `recv` (inotify's `IN_CLOSE_WRITE`: its owner exited, however it died; the
kernel reports the close a moment before it releases the lock, which the waiter gives up to
100 ms to go) (local file systems), re-checking every `poll` interval where other hosts' posts
cannot be seen (network file systems).

**wait_empty** (nothing queued, delayed or being received): after returning dead receivers'
claims and promoting due delayed messages, it looks, under a shared lock on `seq`, at the shards
from the head, then at `claimed`, then at `delayed`: under that lock messages only move forwards
(from a shard to `claimed`, from there to `delayed`, `dead` or away; back only under the
exclusive lock), so a message that exists all along is seen in one of them.
*/

use std::{
    fs::File,
    io::{self, Read, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::{Found, Registration},
    platform::{
        dir::{Dir, Kind},
        fs as pfs,
        lock::{self, Mode},
        notify::DirWatch,
        procinfo,
    },
    wait::{self, DEFAULT_POLL, Deadline, Outcome, Wait},
};

mod census;
pub use census::{Census, RunningJob};
mod batch;
mod claim;
mod dead;
mod delayed;
mod empty;
mod history;
pub use history::{Attempt, Ended};
mod backoff;
pub use backoff::{Backoff, JITTER_PERCENT, MAX_BACKOFF};
mod cancel_worker;
pub use cancel_worker::Watched;
mod keys;
pub use keys::{Keyed, check_key};
mod levels;
pub use levels::MAX_PRIORITY;
mod list;
mod name;
mod output;
pub use output::{DEFAULT_OUTPUT_LIMIT, JobOutput, Output, Piece};
mod payload;
mod post;
mod pump;
pub use name::LOST_BEYOND_RETRIES;
pub(crate) use name::MessageName;
use name::{uniq, uniq_host};
use post::{MAX_SEQ, Place, durable_home, flush, post};
mod queue;
mod received;
mod status;
use claim::{
    Names, Next, SendState, held, queued_names, send_state, sort_entries, try_claim, withdraw,
};
pub use list::Entry;
use queue::{SHARD, shard_name, shard_of};
pub use received::{Failed, Received};
pub use status::{Cancel, DEFAULT_KEEP, Finish, Finished, Status};

/// A mailbox directory: a queue of messages (arbitrary bytes) that any number of processes
/// post to and receive from. Posting is durable (flushed before it returns); receiving takes
/// the oldest message, exactly once among competing receivers; a receiver that dies before it
/// [`finish`](Received::finish)es returns the message to the queue.
/// [`send`](Mailbox::send) waits until a receiver has taken the message, and withdraws it if
/// none did in time.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("jobs");
/// let jobs = fsync::Mailbox::new(&path);
/// jobs.post(&mut &b"first"[..])?;
/// jobs.post(&mut &b"second"[..])?;
/// let mut msg = jobs.recv(None)?.expect("queued");
/// let mut text = Vec::new();
/// msg.copy_to(&mut text).unwrap();
/// msg.finish()?;
/// assert_eq!(text, b"first");
/// # Ok::<(), fsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Mailbox {
    dir: PathBuf,
    /// The directory already opened by whoever found it (a bus member's).
    opened: Option<Arc<Dir>>,
    poll: Duration,
    create: bool,
    mode: u32,
    retries: Option<u32>,
    /// Posts are delivered no sooner than this after they are made.
    delay: Option<Duration>,
    /// A failed job waits this long before its next attempt.
    backoff: Option<Backoff>,
    /// Posts carry this job timeout in their names.
    job_timeout: Option<Duration>,
    /// How long the records of finished jobs are kept.
    keep: Duration,
    /// What becomes of a job's output.
    output: JobOutput,
    /// The priority level of posts (`src/msg/levels.rs`).
    priority: u8,
}

/// Payloads are readable by their owner and group only, unless asked otherwise.
pub const DEFAULT_PAYLOAD_MODE: u32 = 0o640;

/// The mailbox's directories, each opened once and reached without following links (see
/// [`crate::platform::dir`]): another user may have made the mailbox.
#[derive(Debug, Clone)]
struct Layout {
    top: Arc<Dir>,
    tmp: Arc<Dir>,
    q: Arc<Dir>,
    claimed: Arc<Dir>,
    recv: Arc<Dir>,
    senders: Arc<Dir>,
    delayed: Arc<Dir>,
    /// The level `q` and the head are of ([`Layout::at`]): 0 for `B/q` and `B/head`.
    level: u8,
    /// The directory that holds the head of `q`'s level: the mailbox's, or the level's.
    head_in: Arc<Dir>,
    /// The queue's levels (`src/msg/levels.rs`).
    levels: Arc<levels::Levels>,
    /// The deadline of the verb that opened it, which every internal wait (for the lock on
    /// `seq`, which whoever may open it may hold for ever) ends at too.
    deadline: Deadline,
    /// How long the records of finished jobs are kept ([`Mailbox::keep`]).
    keep: Duration,
}

impl Layout {
    /// The mode of a receiver's or sender's registration: the rule for internal lock files
    /// (`platform::fs`), by the mailbox's directories: only those who may write the mailbox
    /// may open one (and lock it, which would make a dead receiver look alive).
    fn registration_mode(&self) -> u32 {
        let mode = |d: &Dir| d.status().map_or(0o777, |st| st.st_mode);
        pfs::internal_lock_mode(mode(&self.top) | mode(&self.recv) | mode(&self.senders))
    }
}

impl Layout {
    /// The error for a failed write of the internal file `name` (`seq`, `head`): one made
    /// before the mailbox was shared, opened read-only, says so and what its owner can do.
    fn unwritable(&self, name: &str, e: io::Error) -> Error {
        let read_only = e.raw_os_error() == Some(nix::libc::EBADF);
        let unshared = read_only.then(|| self.top.unshared(name, "cannot write"));
        (unshared.flatten()).unwrap_or_else(|| Error::io(&self.top.join(name), "cannot write", e))
    }
}

/// A queued message, as [`Mailbox::list`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its file name in the queue, `SEQ.UNIQ.FROM.KIND` (module docs).
    pub name: String,
    /// The payload's size in bytes.
    pub size: u64,
    /// How long it has been queued (by the file's modification time).
    pub age: Duration,
    /// The bus participant that sent it, if it came over a [`Bus`](crate::Bus).
    pub from: Option<String>,
    /// A synchronous message whose sender waits for it.
    pub sync: bool,
}

/// An entry of the queue that receivers pass over: not a message fsync made (a link, a FIFO,
/// a directory someone put there), or a message this user may not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The entry's path in the queue's directory `q`: `NAME`, or `SHARD/NAME` in a shard.
    pub name: String,
    /// Why, in words: "is a FIFO, not a message", "cannot read: permission denied".
    pub reason: String,
}

/// What a receiver tells while it waits ([`Mailbox::recv_with`], [`Bus::recv_with`](crate::Bus::recv_with)):
/// the time waited, and the entries of the queue it passes over. Any `FnMut(Duration)` is one
/// that hears of the time waited only.
///
/// ```
/// use std::time::Duration;
/// use fsync::msg::{Report, Skipped};
///
/// struct Tell;
/// impl Report for Tell {
///     fn waiting(&mut self, waited: Duration) {
///         eprintln!("waiting for a message ({waited:?})");
///     }
///     fn skipped(&mut self, entry: &Skipped) {
///         eprintln!("passing over {}: {}", entry.name, entry.reason);
///     }
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// let inbox = fsync::Mailbox::new(dir.path().join("inbox"));
/// let got = inbox.recv_with(Some(Duration::ZERO), Tell)?;
/// assert!(matches!(got, fsync::Outcome::TimedOut)); // nothing queued
/// # Ok::<(), fsync::Error>(())
/// ```
pub trait Report {
    /// The wait has started blocking, or goes on: called then and about once a second after.
    fn waiting(&mut self, waited: Duration);

    /// The receiver passes over `entry` (see [`Skipped`]) instead of letting it block the
    /// mailbox: called once for each such entry.
    fn skipped(&mut self, entry: &Skipped) {
        let _ = entry;
    }

    /// Whether it wants [`waiting`](Self::waiting) called: a report of skipped entries only
    /// says no, and the wait then sleeps until something happens, with no wake-up once a
    /// second to report it.
    fn reports_waiting(&self) -> bool {
        true
    }
}

impl<F: FnMut(Duration)> Report for F {
    fn waiting(&mut self, waited: Duration) {
        self(waited);
    }
}

impl Queued {
    /// Its id in its mailbox: the sequence number its name begins with ([`Received::id`]).
    pub fn id(&self) -> u64 {
        MessageName::parse(&self.name).map_or(0, |n| n.seq)
    }

    /// How many of its deliveries failed so far (0 for a message never delivered, or whose
    /// deliveries were only ever cancelled).
    pub fn failed(&self) -> u32 {
        MessageName::parse(&self.name).map_or(0, |n| n.failed)
    }

    /// How many of its deliveries were lost with their receiver (killed while it had the
    /// message): counted apart from failures, since they say nothing of the job.
    pub fn lost(&self) -> u32 {
        MessageName::parse(&self.name).map_or(0, |n| n.lost)
    }
}

/// What [`Mailbox::list`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The messages a receiver would take, oldest first.
    pub queued: Vec<Queued>,
    /// Messages being received right now, or left by a receiver that died (the next
    /// receiver returns those to the queue).
    pub claimed: usize,
    /// Entries receivers pass over.
    pub skipped: Vec<Skipped>,
}

impl Mailbox {
    /// A mailbox that is created (with its parent directory required) on first use.
    pub fn new(path: impl AsRef<Path>) -> Mailbox {
        Mailbox {
            dir: path.as_ref().to_path_buf(),
            opened: None,
            poll: DEFAULT_POLL,
            create: true,
            mode: DEFAULT_PAYLOAD_MODE,
            retries: None,
            delay: None,
            backoff: None,
            job_timeout: None,
            keep: DEFAULT_KEEP,
            output: JobOutput::Inherit,
            priority: 0,
        }
    }

    /// Messages posted through this mailbox are delivered no sooner than `delay` after the
    /// post (they wait in `B/delayed/`; once due, they come before the messages queued after
    /// them).
    pub fn delay(mut self, delay: Duration) -> Mailbox {
        self.delay = Some(delay);
        self
    }

    /// A message whose delivery [`fail`](Received::fail)s waits before it is delivered again:
    /// `backoff` after its first failure, twice as long after each one after, up to
    /// [`MAX_BACKOFF`] (`Duration::ZERO`: not at all, as without this).
    pub fn backoff(self, backoff: Duration) -> Mailbox {
        self.backoff_with(Backoff::doubling(backoff, MAX_BACKOFF))
    }

    /// A message whose delivery [`fail`](Received::fail)s waits as `backoff` says before it is
    /// delivered again (a growth from a base to a most, perhaps jittered).
    pub fn backoff_with(mut self, backoff: Backoff) -> Mailbox {
        self.backoff = Some(backoff);
        self
    }

    /// Messages posted through this mailbox carry `timeout` as their job's own timeout (in
    /// their names: module docs of `name.rs`, to the millisecond, 1 ms at least): a worker
    /// stops such a job once it has run that long ([`Received::job_timeout`]).
    pub fn job_timeout(mut self, timeout: Duration) -> Mailbox {
        self.job_timeout = Some(timeout);
        self
    }

    /// Give up on a message after `retries` + 1 failed deliveries: [`Received::fail`] then
    /// moves it to the mailbox's dead letters (`B/dead/`) instead of the queue, and so does a
    /// receive that finds one whose deliveries failed that often already (its receivers were
    /// killed). [`retry`](Self::retry) puts dead letters back. Without this, a message is
    /// delivered again however often it failed.
    pub fn retries(mut self, retries: u32) -> Mailbox {
        self.retries = Some(retries);
        self
    }

    /// Permissions of the payload files this mailbox creates (less the umask); 0640 unless set,
    /// so that other users cannot read messages unless asked to (`payload_mode(0o644)`).
    pub fn payload_mode(mut self, mode: u32) -> Mailbox {
        self.mode = mode & 0o777;
        self
    }

    /// A mailbox that must already exist (a bus member's): posting to a missing one fails.
    pub fn existing(path: impl AsRef<Path>) -> Mailbox {
        Mailbox {
            create: false,
            ..Mailbox::new(path)
        }
    }

    /// The mailbox in a directory already opened (a bus member's).
    pub(crate) fn in_dir(dir: Dir) -> Mailbox {
        Mailbox {
            opened: Some(Arc::new(dir)),
            ..Mailbox::existing(PathBuf::new())
        }
    }

    /// How often a wait re-checks on a network file system, where change notification cannot
    /// see other hosts' posts ([`wait::DEFAULT_POLL`] unless set).
    pub fn poll_interval(mut self, every: Duration) -> Mailbox {
        self.poll = every;
        self
    }

    /// The mailbox's directory.
    pub fn path(&self) -> &Path {
        match &self.opened {
            Some(d) => d.path(),
            None => &self.dir,
        }
    }

    fn top(&self, create: bool) -> Result<Option<Arc<Dir>>> {
        if let Some(d) = &self.opened {
            return Ok(Some(d.clone()));
        }
        let what = match create {
            true => "cannot create mailbox directory",
            false => "cannot open mailbox directory",
        };
        Ok(Dir::top(&self.dir, create, what)?.map(Arc::new))
    }

    /// The layout of a mailbox that must exist already, whatever [`Mailbox::new`] said: the
    /// verbs that only look at one or wait on it (`wait_empty`, `scan`, `retry`), for which a
    /// mistyped path must be an error, not an empty mailbox made on the spot.
    fn existing_layout(&self) -> Result<Layout> {
        let top = self.existing_top()?;
        Mailbox {
            opened: Some(top),
            ..self.clone()
        }
        .layout()
    }

    /// The mailbox's directory, which must exist and hold a queue (`q`).
    fn existing_top(&self) -> Result<Arc<Dir>> {
        let Some(top) = self.top(false)? else {
            return Err(Error::new(
                &self.dir,
                ErrorKind::NotFound,
                "no such mailbox",
            ));
        };
        // A bus member's directory is its mailbox whether or not anything came yet.
        if self.opened.is_none() && top.open_sub("q")?.is_none() {
            return Err(Error::new(
                top.path(),
                ErrorKind::NotFound,
                "not a mailbox: it has no queue directory 'q' (a mailbox gets one when a \
                 message is first posted or received)",
            ));
        }
        Ok(top)
    }

    fn layout(&self) -> Result<Layout> {
        let Some(top) = self.top(self.create)? else {
            return Err(Error::new(
                &self.dir,
                ErrorKind::NotFound,
                "no such mailbox",
            ));
        };
        let sub = |name: &str| -> Result<Arc<Dir>> { Ok(Arc::new(top.create_sub(name)?)) };
        let q = sub("q")?;
        Ok(Layout {
            tmp: sub("tmp")?,
            levels: Arc::new(levels::Levels::new(q.clone())),
            q,
            claimed: sub("claimed")?,
            recv: sub("recv")?,
            senders: sub("senders")?,
            delayed: sub("delayed")?,
            level: 0,
            head_in: top.clone(),
            top,
            deadline: Deadline::never(),
            keep: self.keep,
        })
    }

    /// Queue a message durably (see the module docs): `payload` is read to its end and written
    /// to the mailbox, flushed, then made visible to receivers in one rename; returns its id
    /// (the [`Received::id`] its receiver sees, what [`status`](Self::status),
    /// [`wait_finished`](Self::wait_finished) and [`cancel`](Self::cancel) take).
    /// Waits only for the short lock that numbers messages; a cancellation signal (once the
    /// program has called [`install_cancel_handlers`](crate::wait::install_cancel_handlers))
    /// while reading the payload gives [`Outcome::Interrupted`] and queues nothing. Errors:
    /// [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the mailbox cannot be
    /// created or written, [`ErrorKind::Io`] if the file system is full,
    /// [`ErrorKind::Corrupt`] if its sequence file holds what fsync never writes.
    pub fn post(&self, payload: &mut dyn Read) -> Result<Outcome<u64>> {
        let posted = self.post_from(payload, None)?;
        Ok(posted.map(|name| MessageName::parse(&name).map_or(0, |n| n.seq)))
    }

    /// Queue a message recording who sent it (the bus).
    pub(crate) fn post_from(
        &self,
        payload: &mut dyn Read,
        from: Option<&str>,
    ) -> Result<Outcome<String>> {
        Ok(self
            .post_placed(payload, from, None)?
            .map(|placed| match placed {
                Keyed::Queued(name) | Keyed::Pending(name) => name,
            }))
    }

    /// Post from `from` (a bus member), with `key` (de-duplication).
    fn post_placed(
        &self,
        payload: &mut dyn Read,
        from: Option<&str>,
        key: Option<&str>,
    ) -> Result<Outcome<Keyed>> {
        self.check_priority()?;
        let l = self.layout()?;
        let name = MessageName {
            priority: self.priority,
            timeout_ms: (self.job_timeout)
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)),
            ..MessageName::new_message(uniq(), from.map(str::to_string), false)
        };
        let place = Place {
            due: self.delay.map(delayed::due_after),
            key,
        };
        post(
            &l,
            payload,
            name,
            self.mode,
            self.poll,
            Deadline::never(),
            &place,
        )
    }

    /// Send synchronously: `Ok(true)` once a receiver has taken the message; on timeout the
    /// message is withdrawn and never delivered (`Ok(false)`). If this process dies while it
    /// waits, no receiver ever gets the message either.
    ///
    /// The thread sleeps until the mailbox changes (on a network file system it also re-checks
    /// every [`poll_interval`](Self::poll_interval)). Errors as [`post`](Self::post).
    pub fn send(&self, payload: &mut dyn Read, timeout: Option<Duration>) -> Result<bool> {
        Ok(self
            .send_inner(payload, timeout, None, &mut |_| {})?
            .acquired()
            .is_some())
    }

    /// Like [`send`](Self::send), telling a timeout from a cancellation (either way the
    /// message is withdrawn), and calling `progress` with the time waited when the wait for a
    /// receiver starts blocking and about once a second after.
    pub fn send_with(
        &self,
        payload: &mut dyn Read,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.send_inner(payload, timeout, Some(&mut progress), &mut |_| {})
    }

    /// Like [`send_with`](Self::send_with), telling `posted` the message's id (as
    /// [`Received::id`] gives it to its receiver) once it is queued, before the wait.
    pub fn send_with_id(
        &self,
        payload: &mut dyn Read,
        timeout: Option<Duration>,
        mut posted: impl FnMut(u64),
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.send_inner(payload, timeout, Some(&mut progress), &mut posted)
    }

    fn send_inner(
        &self,
        payload: &mut dyn Read,
        timeout: Option<Duration>,
        progress: Option<&mut dyn FnMut(Duration)>,
        posted: &mut dyn FnMut(u64),
    ) -> Result<Outcome<()>> {
        let deadline = Deadline::after(timeout);
        let l = self.layout()?;
        let name = MessageName::new_message(uniq(), None, true);
        let sender = Registration::create(&l.senders, &name.uniq, b"", l.registration_mode())?;
        // A receiver takes the message by renaming it into `claimed`, and converts it there.
        let watch = DirWatch::new(&l.claimed.pinned())
            .map_err(|e| Error::io(l.claimed.path(), "cannot watch", e))?;
        let place = Place::default();
        let placed = post(&l, payload, name, self.mode, self.poll, deadline, &place)?;
        let (Keyed::Queued(name) | Keyed::Pending(name)) = wait::acquired!(placed);
        let parsed = MessageName::parse(&name).expect("we made it");
        posted(parsed.seq);
        let stem = parsed.stem();
        let network = pfs::fs_kind_of_path(&l.q.pinned()).network;
        let poll = network.then_some(self.poll);
        let outcome = wait::watch_until(deadline, poll, &watch, l.q.path(), progress, || {
            Ok(matches!(send_state(&l, &name, &stem)?, SendState::Taken).then_some(()))
        })?;
        let result = match outcome {
            Outcome::Acquired(()) => Outcome::Acquired(()),
            gave_up => match withdraw(&l, &name, &stem, &watch, self.poll)? {
                true => gave_up,
                false => Outcome::Acquired(()), // taken at the last moment
            },
        };
        drop(sender);
        Ok(result)
    }

    /// Take the oldest message, waiting up to `timeout` (`None`: for ever; zero: look once) for
    /// one; `Ok(None)` if none came. Read it, then [`finish`](Received::finish) it; dropped
    /// unfinished, it goes back to the queue. Entries of the queue that are not messages fsync
    /// made, or that this user may not read, are passed over (see [`Report::skipped`]).
    ///
    /// The thread sleeps until the queue changes: on a local file system a post wakes it at
    /// once; on a network file system it also re-checks every
    /// [`poll_interval`](Self::poll_interval). Errors: [`ErrorKind::NotFound`] or
    /// [`ErrorKind::PermissionDenied`] if the mailbox cannot be created or opened.
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Option<Received>> {
        Ok(self.recv_inner(timeout, None, false)?.acquired().flatten())
    }

    /// Like [`recv`](Self::recv), telling a timeout from a cancellation, and telling
    /// `progress` the time waited when the wait starts blocking and about once a second
    /// after (a closure), and also each entry of the queue it passes over (a [`Report`]).
    pub fn recv_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl Report,
    ) -> Result<Outcome<Received>> {
        let got = self.recv_inner(timeout, Some(&mut progress), false)?;
        Ok(got.map(|m| m.expect("a receive that waits for a message ends with one")))
    }

    /// Like [`recv_with`](Self::recv_with), but ending with `Acquired(None)` instead of waiting
    /// once the mailbox has nothing left to do: nothing queued, delayed or being received
    /// ([`wait_empty`](Self::wait_empty)'s condition). A worker that drains a queue (`fsync msg
    /// work --until-empty`) stops there, while a job another worker runs may still fail and
    /// come back for it.
    pub fn recv_or_empty_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl Report,
    ) -> Result<Outcome<Option<Received>>> {
        self.recv_inner(timeout, Some(&mut progress), true)
    }

    fn recv_inner(
        &self,
        timeout: Option<Duration>,
        report: Option<&mut dyn Report>,
        until_empty: bool,
    ) -> Result<Outcome<Option<Received>>> {
        // The wait core calls the two one at a time: never a second borrow.
        let report = std::cell::RefCell::new(report);
        let mut waiting = |waited| {
            if let Some(r) = report.borrow_mut().as_mut() {
                r.waiting(waited);
            }
        };
        let progress = report
            .borrow()
            .as_ref()
            .is_some_and(|r| r.reports_waiting())
            .then_some(&mut waiting as &mut dyn FnMut(Duration));
        let deadline = Deadline::after(timeout);
        let l = Layout {
            deadline,
            ..self.layout()?
        };
        let rid = uniq();
        let me = Registration::create_spared(&l.recv, &rid, l.registration_mode())?;
        // Receivers killed (SIGKILL) leave their registrations: clear them away now.
        Registration::reap_dead(&l.recv);
        let network = pfs::fs_kind_of_path(&l.q.pinned()).network;
        let mut me = Some(me);
        let mut passed: Vec<String> = Vec::new();
        let waker = std::cell::RefCell::new(queue::Waker::default());
        let mut next = Next::default();
        let spec = Wait {
            deadline,
            poll: network.then_some(self.poll),
            progress: progress.is_some().then_some(wait::PROGRESS_EVERY),
        };
        let mut progress = progress;
        let waiting = |waited| {
            if let Some(p) = progress.as_mut() {
                p(waited);
            }
        };
        let outcome = wait::wait_for(spec, waiting, |block| -> Result<_, wait::Failed> {
            if block {
                waker.borrow().sleep(&l, next.due)?;
                return Ok(None);
            }
            let mut report = |s: Skipped| {
                if !passed.contains(&s.name) {
                    if let Some(r) = report.borrow_mut().as_mut() {
                        r.skipped(&s);
                    }
                    passed.push(s.name);
                }
            };
            // Found nothing with the right directories watched since before the look (the look
            // changes no watch): wait. Else watch them and look again (a post between the look
            // and the watch wakes nobody).
            loop {
                match try_claim(&l, &rid, self.poll, self.retries, &mut report, &mut next)? {
                    Outcome::Acquired(Some((file, claimed, name))) => {
                        return Ok(Some(Some(Received {
                            file,
                            claimed,
                            from: name.from.clone(),
                            name,
                            // What it does with the message later waits as it must.
                            layout: Layout {
                                deadline: Deadline::never(),
                                ..l.clone()
                            },
                            poll: self.poll,
                            retries: self.retries,
                            backoff: self.backoff,
                            since: SystemTime::now(),
                            output: (self.output, self.mode),
                            done: false,
                            me: me.take().expect("once"),
                        })));
                    }
                    Outcome::Acquired(None)
                        if waker.borrow().armed_for().as_ref() == Some(&next.watched()) =>
                    {
                        // Nothing to take, and the watch armed: before sleeping, whether
                        // anything is left to wait for (another receiver's job, a delay).
                        if until_empty && let Outcome::Acquired((false, _)) = l.busy(self.poll)? {
                            return Ok(Some(None));
                        }
                        return Ok(None);
                    }
                    Outcome::Acquired(None) => waker.borrow_mut().arm(&l, next.watched())?,
                    // A cancellation signal ended a wait for the `seq` lock: the wait core
                    // sees it (it stays set) and ends the receive.
                    Outcome::TimedOut | Outcome::Interrupted(_) => return Ok(None),
                }
            }
        });
        outcome.map_err(|f| f.naming(l.q.path(), "cannot wait"))
    }
}

/// A skipped entry with the reason an error gives (its text after the path).
fn skip(name: &str, e: &Error) -> Skipped {
    let text = e.to_string();
    let path = e.path().display().to_string();
    let reason = text
        .strip_prefix(&path)
        .map(|r| r.trim_start_matches(": ").to_string())
        .unwrap_or(text);
    Skipped {
        name: name.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests;
