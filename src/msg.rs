/*!
Mailboxes: durable queued messages (`post`), synchronous messages that are never delivered once
their sender died or gave up (`send`: the `SendMessage` of Primoz Gabrijelcic's *Let's
Cooperate: File system-based synchronisation primitives*), and exactly-once receipt.

*/
// The rest of the module docs, the protocol on disk, is kept beside: src/msg/PROTOCOL.md.
#![doc = include_str!("msg/PROTOCOL.md")]

use std::{
    io::{self, Read},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use crate::{
    error::{Error, ErrorKind, Result},
    holder::Registration,
    platform::{dir::Dir, fs as pfs, notify::DirWatch},
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
mod prune;
mod pump;
pub use name::LOST_BEYOND_RETRIES;
pub(crate) use name::MessageName;
use name::{uniq, uniq_host};
use post::{MAX_SEQ, Place, durable_home, flush, post, posted};
mod queue;
mod received;
mod status;
use claim::{
    Names, Next, SendState, held, queued_names, send_state, sort_entries, try_claim, withdraw,
};
pub use list::Entry;
use queue::{SHARD, shard_name, shard_of};
pub use received::{CopyError, Failed, Received};
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
    /// How long a post waits for the lock that numbers messages (`None`: for ever).
    lock_timeout: Option<Duration>,
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
            lock_timeout: None,
        }
    }

    /// Posts wait at most `timeout` for the lock that numbers messages (`B/seq`), which
    /// every post takes for a moment; by default they wait as long as another process holds
    /// it, which another user who may write a shared mailbox can make for ever. A post that
    /// gives up queues nothing and fails with [`ErrorKind::TimedOut`] (so do
    /// [`post_keyed`](Self::post_keyed), [`post_batch`](Self::post_batch) and
    /// [`post_records`](Self::post_records)). [`send`](Self::send) and its kind bound that
    /// wait by their own timeout.
    pub fn lock_timeout(mut self, timeout: Duration) -> Mailbox {
        self.lock_timeout = Some(timeout);
        self
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
    /// while reading the payload gives an error of kind [`ErrorKind::Interrupted`] and queues
    /// nothing. Errors:
    /// [`ErrorKind::NotFound`] or [`ErrorKind::PermissionDenied`] if the mailbox cannot be
    /// created or written, [`ErrorKind::Io`] if the file system is full,
    /// [`ErrorKind::Corrupt`] if its sequence file holds what fsync never writes.
    pub fn post(&self, mut payload: impl Read) -> Result<u64> {
        let name = self.post_from(&mut payload, None)?;
        Ok(MessageName::parse(&name).map_or(0, |n| n.seq))
    }

    /// Queue a message recording who sent it (the bus); returns its name.
    pub(crate) fn post_from(&self, payload: &mut dyn Read, from: Option<&str>) -> Result<String> {
        let placed = posted(self.path(), self.post_placed(payload, from, None)?)?;
        Ok(match placed {
            Keyed::Queued(name) | Keyed::Pending(name) => name,
        })
    }

    /// The deadline of a post's wait for the numbering lock ([`lock_timeout`](Self::lock_timeout)).
    fn lock_deadline(&self) -> Deadline {
        Deadline::after(self.lock_timeout)
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
            self.lock_deadline(),
            &place,
        )
    }

    /// Send synchronously: `Ok(true)` once a receiver has taken the message; on timeout the
    /// message is withdrawn and never delivered (`Ok(false)`). If this process dies while it
    /// waits, no receiver ever gets the message either.
    ///
    /// The thread sleeps until the mailbox changes (on a network file system it also re-checks
    /// every [`poll_interval`](Self::poll_interval)). Errors as [`post`](Self::post).
    pub fn send(&self, mut payload: impl Read, timeout: Option<Duration>) -> Result<bool> {
        Ok(self
            .send_inner(&mut payload, timeout, None, &mut |_| {})?
            .acquired()
            .is_some())
    }

    /// Like [`send`](Self::send), telling a timeout from a cancellation (either way the
    /// message is withdrawn), and calling `progress` with the time waited when the wait for a
    /// receiver starts blocking and about once a second after.
    pub fn send_with(
        &self,
        mut payload: impl Read,
        timeout: Option<Duration>,
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.send_inner(&mut payload, timeout, Some(&mut progress), &mut |_| {})
    }

    /// Like [`send_with`](Self::send_with), telling `posted` the message's id (as
    /// [`Received::id`] gives it to its receiver) once it is queued, before the wait.
    pub fn send_with_id(
        &self,
        mut payload: impl Read,
        timeout: Option<Duration>,
        mut posted: impl FnMut(u64),
        mut progress: impl FnMut(Duration),
    ) -> Result<Outcome<()>> {
        self.send_inner(&mut payload, timeout, Some(&mut progress), &mut posted)
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
        let mut rid = uniq();
        let me = Registration::create_spared(&l.recv, &rid, l.registration_mode())?;
        // When the registration was last known to be ours: a job's lease runs from there.
        let mut locked = std::time::Instant::now();
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
                // On a network file system the registration's lock can be lost while we wait
                // (a partition, a client frozen past the server's timeout), and a reaper may
                // have removed it since: another receiver would take what we claim under it
                // for a dead receiver's, and run it too. So a look that may claim first
                // confirms it, once the last confirmation is older than a second (far less
                // than any server's timeout: it cannot have been given away since), and
                // registers anew where it is not ours any more.
                if network && locked.elapsed() > CONFIRM_AFTER {
                    let asked = std::time::Instant::now();
                    if !me.as_ref().is_some_and(Registration::confirm) {
                        rid = uniq();
                        let mode = l.registration_mode();
                        me = Some(Registration::create_spared(&l.recv, &rid, mode)?);
                    }
                    locked = asked;
                }
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
                            locked,
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

/// How old a receiver's last confirmation of its registration may be when it looks for a
/// message to claim on a network file system (`Mailbox::recv_inner`).
const CONFIRM_AFTER: Duration = Duration::from_secs(1);

/// A skipped entry with the reason an error gives (its text after the path).
fn skip(name: &str, e: &Error) -> Skipped {
    Skipped {
        name: name.to_string(),
        reason: e.message().to_string(),
    }
}

#[cfg(test)]
mod tests;
