//! The pump: what keeps a job's output while it runs (the *Writing* of [`super::output`]'s
//! docs): the pipes the job writes to, the thread that reads them, and the bounded file it
//! writes, made at the first byte and replaced by its tail past the limit.

use std::{
    fs::File,
    io::{self, Read, Write},
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::FileExt as _,
    },
    time::Duration,
};

use crate::{
    error::{Error, Result},
    platform::{dir::Dir, fs as pfs},
};

use super::{
    Layout,
    output::{JobOutput, file_name, header, read_at_most},
    uniq,
};

/// A job's output about to be kept: the ends of the pipes its standard output and error get,
/// and where the pump is to write (the file is made at the first byte: a job that writes
/// nothing costs no file, and no flush of one).
pub(super) struct Capture {
    /// The job's standard output and error (one pipe's write end twice, or two pipes').
    ends: [OwnedFd; 2],
    /// The read ends, each with where else its bytes go.
    sources: Vec<(File, Pass)>,
    sink: Sink,
}

/// Where the pump also writes what it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Nowhere,
    Stdout,
    Stderr,
}

impl Capture {
    /// Make the pipes and the file for message `seq`'s delivery `attempt`, as `mode` says;
    /// `None` for [`JobOutput::Inherit`].
    pub(super) fn prepare(
        l: &Layout,
        seq: u64,
        attempt: u32,
        output: JobOutput,
        file_mode: u32,
    ) -> Result<Option<Capture>> {
        let (limit, tee) = match output {
            JobOutput::Keep { limit } => (limit, false),
            JobOutput::Tee { limit } => (limit, true),
            _ => return Ok(None),
        };
        let shard = l.create_output_shard(seq)?;
        let name = file_name(seq);
        // An earlier attempt's output: this one's replaces it, even if it writes nothing.
        let _ = shard.unlink_file(&name);
        let pipe = || {
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| Error::io(&shard.join(&name), "cannot make a pipe", e.into()))
        };
        let (out_r, out_w) = pipe()?;
        let (ends, sources) = match tee {
            false => {
                let err_w = out_w
                    .try_clone()
                    .map_err(|e| Error::io(&shard.join(&name), "cannot make a pipe", e))?;
                ([out_w, err_w], vec![(File::from(out_r), Pass::Nowhere)])
            }
            true => {
                let (err_r, err_w) = pipe()?;
                (
                    [out_w, err_w],
                    vec![
                        (File::from(out_r), Pass::Stdout),
                        (File::from(err_r), Pass::Stderr),
                    ],
                )
            }
        };
        let network = pfs::fs_kind_of_path(&shard.pinned()).network;
        Ok(Some(Capture {
            ends,
            sources,
            sink: Sink {
                name,
                dir: shard,
                file: None,
                broken: false,
                start: 0,
                written: 0,
                from: 0,
                limit,
                attempt,
                mode: file_mode,
                network,
                synced: std::time::Instant::now(),
            },
        }))
    }

    /// The descriptors the job's standard output and error are to be.
    pub(super) fn ends(&self) -> [std::os::fd::BorrowedFd<'_>; 2] {
        [self.ends[0].as_fd(), self.ends[1].as_fd()]
    }

    /// The job has started: put the file in place and start the pump; what ends it, once the
    /// job has exited (and waits until it has kept everything).
    pub(super) fn start(self) -> Box<dyn FnOnce() + Send + Sync> {
        let Capture {
            ends,
            sources,
            sink,
        } = self;
        drop(ends); // the job's, now: the pipes end when it (and its children) close them
        let Ok((stop_r, stop_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
            // No pump can be stopped: read until every writer has gone.
            let pump = std::thread::spawn(move || pump(sources, None, sink));
            return Box::new(move || {
                let _ = pump.join();
            });
        };
        let pump = std::thread::spawn(move || pump(sources, Some(stop_r), sink));
        Box::new(move || {
            drop(stop_w);
            let _ = pump.join();
        })
    }
}

/// Copy the job's output from `sources` into `sink` (and where each also goes) until every
/// writer has closed its end, or `stop` says the job has exited: then take what the pipes
/// still hold, and end. (The pipes' read ends, as [`File`]s; tests give readers of their own.)
fn pump<S: Read + AsFd>(mut sources: Vec<(S, Pass)>, stop: Option<OwnedFd>, mut sink: Sink) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut buf = vec![0u8; 64 * 1024];
    let mut stopping = false;
    while !sources.is_empty() {
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = (sources.iter())
                .map(|(f, _)| PollFd::new(f.as_fd(), PollFlags::POLLIN))
                .collect();
            if let Some(stop) = stop.as_ref().filter(|_| !stopping) {
                fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
            }
            let timeout = match stopping {
                true => PollTimeout::ZERO,
                false => PollTimeout::NONE,
            };
            match poll(&mut fds, timeout) {
                Ok(0) => break, // stopping, and nothing left in the pipes
                Ok(_) => fds.iter().map(|f| f.any().unwrap_or(true)).collect(),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            }
        };
        if ready.len() > sources.len() && ready[sources.len()] {
            stopping = true;
        }
        let mut ended = Vec::new();
        for (i, (source, pass)) in sources.iter_mut().enumerate() {
            if !ready[i] {
                continue;
            }
            match source.read(&mut buf) {
                Ok(0) => ended.push(i),
                Ok(n) => {
                    sink.write(&buf[..n]);
                    if !pass_on(*pass, &buf[..n]) {
                        *pass = Pass::Nowhere;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => ended.push(i),
            }
        }
        for i in ended.into_iter().rev() {
            sources.remove(i);
        }
    }
    sink.finish();
}

/// Write `bytes` where `pass` says; whether it could.
fn pass_on(pass: Pass, bytes: &[u8]) -> bool {
    let written = match pass {
        Pass::Nowhere => return true,
        Pass::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        Pass::Stderr => io::stderr().lock().write_all(bytes),
    };
    written.is_ok()
}

/// The output file as the pump writes it (module docs).
struct Sink {
    dir: Dir,
    name: String,
    /// `None` until the job writes its first byte.
    file: Option<File>,
    /// It could not be written: the output is then read and dropped.
    broken: bool,
    /// The length of its first line.
    start: u64,
    /// The bytes after it.
    written: u64,
    /// The offset of the first of them in the job's output.
    from: u64,
    limit: u64,
    attempt: u32,
    mode: u32,
    /// On a network file system, flushed about once a second, for other hosts' readers.
    network: bool,
    synced: std::time::Instant,
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) {
        if self.broken || self.limit == 0 {
            return;
        }
        let n = bytes.len() as u64;
        let put = match &self.file {
            Some(file) if self.written + n <= self.limit => {
                match file.write_all_at(bytes, self.start + self.written) {
                    Ok(()) => {
                        self.written += n;
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            }
            _ => self.compact(bytes).map(Some),
        };
        match put {
            Ok(Some(file)) => self.file = Some(file),
            Ok(None) => {}
            Err(_) => {
                self.broken = true;
                self.file = None;
            }
        }
        if self.network && self.synced.elapsed() >= Duration::from_secs(1) {
            self.synced = std::time::Instant::now();
            if let Some(f) = &self.file {
                sync(f);
            }
        }
    }

    /// A new file, put in place, with what is kept so far and `bytes`: all of it while that
    /// fits the limit (the first bytes), else the last `limit / 2` bytes.
    fn compact(&mut self, bytes: &[u8]) -> io::Result<File> {
        let n = bytes.len() as u64;
        let keep = match self.written + n <= self.limit {
            true => self.written + n,
            false => (self.limit / 2).max(1),
        };
        let from_new = n.min(keep);
        let from_old = (keep - from_new).min(self.written);
        let mut tail = vec![0u8; from_old as usize];
        if let Some(old) = &self.file {
            let got = read_at_most(old, &mut tail, self.start + self.written - from_old)?;
            tail.truncate(got);
        }
        tail.extend_from_slice(&bytes[(n - from_new) as usize..]);
        let total = self.from + self.written + n;
        let from = total - tail.len() as u64;
        let first = header(self.attempt, from);
        let temp = format!(".tmp-{}", uniq());
        let file = self.dir.create_new(&temp, self.mode)?;
        let put = (&file)
            .write_all(first.as_bytes())
            .and_then(|()| (&file).write_all(&tail))
            .and_then(|()| match self.network {
                // Other hosts may see the name before bytes still in this client's cache.
                true => file.sync_data(),
                false => Ok(()),
            })
            .and_then(|()| self.dir.rename(&temp, &self.dir, &self.name));
        if let Err(e) = put {
            let _ = self.dir.unlink_any(&temp);
            return Err(e);
        }
        self.start = first.len() as u64;
        self.written = tail.len() as u64;
        self.from = from;
        Ok(file)
    }

    fn finish(self) {
        if self.network
            && let Some(f) = &self.file
        {
            sync(f);
        }
    }
}

/// Flush the output's data, for readers on other hosts (best effort: the job goes on).
fn sync(file: &File) {
    #[cfg(test)]
    tests::SYNCS.set(tests::SYNCS.get() + 1);
    let _ = file.sync_data();
}

#[cfg(test)]
mod tests {
    use super::{super::output::parse_header, *};

    use crate::test_support::{listing, within};
    use nix::{fcntl::OFlag, unistd::pipe2};
    use std::os::{fd::AsRawFd as _, unix::fs::MetadataExt as _};

    const NAME: &str = "00000000000000000001";

    thread_local! {
        /// The output files this thread flushed with [`sync`](super::sync).
        pub(super) static SYNCS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// On a network file system the output is flushed at most about once a second as it is
    /// written, and once at the end, for readers on other hosts; on a local one never (a
    /// reader there sees what is written at once). Here the last flush was two seconds ago.
    /// (Mutants answered: the flush on a local file system too, the interval's test turned
    /// round, the flush at the end left out.)
    #[test]
    fn output_on_a_network_file_system_is_flushed_once_a_second_and_at_the_end() {
        for network in [false, true] {
            let (_t, mut sink) = new_sink(100);
            sink.network = network;
            sink.synced = std::time::Instant::now()
                .checked_sub(Duration::from_secs(2))
                .unwrap();
            SYNCS.set(0);
            sink.write(b"a");
            sink.write(b"b");
            assert_eq!(
                SYNCS.get(),
                u32::from(network),
                "network {network}: written"
            );
            sink.finish();
            assert_eq!(
                SYNCS.get(),
                2 * u32::from(network),
                "network {network}: finished"
            );
        }
    }

    /// A sink writing `NAME` in a new directory, kept at most `limit` bytes.
    fn new_sink(limit: u64) -> (tempfile::TempDir, Sink) {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::top(t.path(), false, "x").unwrap().unwrap();
        let sink = Sink {
            dir,
            name: NAME.to_string(),
            file: None,
            broken: false,
            start: 0,
            written: 0,
            from: 0,
            limit,
            attempt: 1,
            mode: 0o600,
            network: false,
            synced: std::time::Instant::now(),
        };
        (t, sink)
    }

    /// The bytes of the job's output `t`'s sink kept (after the first line).
    fn kept(t: &tempfile::TempDir) -> Vec<u8> {
        let kept = std::fs::read(t.path().join(NAME)).unwrap();
        let (_, _, start) = parse_header(&kept).unwrap();
        kept[start as usize..].to_vec()
    }

    /// Run the pump on a thread; fail if it has not ended within ten seconds.
    fn pump_ends<S: Read + AsFd + Send + 'static>(
        sources: Vec<(S, Pass)>,
        stop: Option<OwnedFd>,
        sink: Sink,
    ) {
        let ended = within(Duration::from_secs(10), move || pump(sources, stop, sink));
        assert!(ended.is_some(), "the pump has not ended (or it panicked)");
    }

    /// Once the job has exited, the pump takes everything its pipes still hold (more than one
    /// read's worth here) and ends, though a child of the job keeps a pipe open.
    #[test]
    fn a_pump_ends_with_its_job_having_kept_all_though_a_child_keeps_the_pipe() {
        let (t, sink) = new_sink(1 << 20);
        let (r, w) = pipe2(OFlag::O_CLOEXEC).unwrap();
        nix::fcntl::fcntl(r.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 18)).unwrap();
        let all: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let child = File::from(w);
        (&child).write_all(&all).unwrap();
        let (stop_r, stop_w) = pipe2(OFlag::O_CLOEXEC).unwrap();
        drop(stop_w); // the job has exited
        pump_ends(vec![(File::from(r), Pass::Nowhere)], Some(stop_r), sink);
        drop(child);
        assert!(kept(&t) == all, "not all of the output was kept");
    }

    /// A read interrupted by a signal is made again; a source that fails otherwise is left out,
    /// and the others go on.
    #[test]
    fn an_interrupted_read_goes_on_and_a_failing_source_ends() {
        struct Interrupted(File, bool);
        impl Read for Interrupted {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                match std::mem::replace(&mut self.1, false) {
                    true => Err(io::ErrorKind::Interrupted.into()),
                    false => self.0.read(buf),
                }
            }
        }
        impl AsFd for Interrupted {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.0.as_fd()
            }
        }
        let written = |bytes: &[u8]| {
            let (r, w) = pipe2(OFlag::O_CLOEXEC).unwrap();
            File::from(w).write_all(bytes).unwrap();
            File::from(r)
        };
        let (t, sink) = new_sink(100);
        let source = Interrupted(written(b"after EINTR"), true);
        pump_ends(vec![(source, Pass::Nowhere)], None, sink);
        assert_eq!(kept(&t), b"after EINTR");

        // A directory reads as EISDIR, every time it is polled.
        let (t, sink) = new_sink(100);
        let failing = File::open(t.path()).unwrap();
        let sources = vec![
            (failing, Pass::Nowhere),
            (written(b"the other"), Pass::Nowhere),
        ];
        pump_ends(sources, None, sink);
        assert_eq!(kept(&t), b"the other");
    }

    /// Writes that keep within the limit go into the file in place (a reader that opened it,
    /// as `msg log --follow` does, reads them there); the first past it puts a new file, the
    /// tail, in its place.
    #[test]
    fn writes_within_the_limit_go_into_the_file_in_place() {
        let (t, mut sink) = new_sink(100);
        sink.write(b"a");
        let reader = File::open(t.path().join(NAME)).unwrap();
        let in_place = || reader.metadata().unwrap().nlink() == 1;
        sink.write(&[b'b'; 98]);
        sink.write(b"c");
        assert!(in_place(), "a write within the limit made a new file");
        assert_eq!(kept(&t), [&b"a"[..], &[b'b'; 98], b"c"].concat());
        sink.write(b"d");
        assert!(!in_place(), "a write past the limit went in place");
        assert_eq!(kept(&t), [&[b'b'; 48][..], b"cd"].concat());
    }

    /// A sink with a limit of 0, or one that could not be written, makes no file.
    #[test]
    fn a_sink_with_no_room_or_broken_writes_nothing() {
        for (limit, broken) in [(0, false), (100, true)] {
            let (t, mut sink) = new_sink(limit);
            sink.broken = broken;
            sink.write(b"output");
            assert_eq!(listing(t.path()), Vec::<String>::new(), "limit {limit}");
        }
    }

    /// Output past the limit keeps the tail: at least half the limit, never more than it, and
    /// `FROM` says how much went before.
    #[test]
    fn a_sink_keeps_the_tail_within_its_limit() {
        let (t, mut sink) = new_sink(100);
        let mut all = Vec::new();
        for i in 0..97u32 {
            let chunk = format!("{i:03}-").repeat(1 + i as usize % 7);
            sink.write(chunk.as_bytes());
            all.extend_from_slice(chunk.as_bytes());
            let kept = std::fs::read(t.path().join(NAME)).unwrap();
            let (attempt, from, start) = parse_header(&kept).unwrap();
            let body = &kept[start as usize..];
            assert_eq!(attempt, 1);
            assert!(body.len() <= 100, "{} kept", body.len());
            assert!(body.len() >= 50.min(all.len()), "{} kept", body.len());
            assert_eq!(body, &all[from as usize..], "after chunk {i}");
        }
    }
}
