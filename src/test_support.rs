/*!
Helpers the library's unit tests share across primitives.
*/

use std::path::Path;

/// The names in `dir`, sorted: what a test compares with the files a protocol leaves.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// How much the calling thread's `counter` grows while `f` runs, less what reading it costs:
/// a line of `/proc/thread-self/FILE` (`syscr:` or `syscw:` in `io`, the calls it makes;
/// `voluntary_ctxt_switches:` in `status`, the times it goes to sleep). What a test counts
/// where a mutant changes only how much work a wait or a read does.
pub(crate) fn thread_count<T>(file: &str, counter: &str, f: impl FnOnce() -> T) -> (u64, T) {
    let count = || -> u64 {
        let text = std::fs::read_to_string(format!("/proc/thread-self/{file}")).unwrap();
        let line = text.lines().find(|l| l.starts_with(counter)).unwrap();
        line[counter.len()..].trim().parse().unwrap()
    };
    let (a, b) = (count(), count());
    let out = f();
    let c = count();
    ((c - b).saturating_sub(b - a), out)
}

/// Whether the thread `tid` of this process sleeps (blocked in a wait: its state in `/proc`).
pub(crate) fn sleeping(tid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"));
    stat.unwrap_or_default().rfind(") S ").is_some()
}

/// Wait until the thread `tid` of this process sleeps, or `done()`; a thread that has done
/// neither in 20 s fails the test.
pub(crate) fn until_asleep(tid: i32, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !sleeping(tid) && !done() {
        assert!(start.elapsed().as_secs() < 20, "never slept");
        std::thread::yield_now();
    }
}

/// Run `f` on a thread; `None` if it has not returned within `limit` (it is left running):
/// a wait that must end fails a test instead of hanging it.
pub(crate) fn within<T: Send + 'static>(
    limit: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// A receive's [`Report`](crate::msg::Report) that keeps the names of the entries it passes
/// over, and nothing else.
pub(crate) struct Passed<'a>(pub(crate) &'a mut Vec<String>);

impl crate::msg::Report for Passed<'_> {
    fn waiting(&mut self, _: std::time::Duration) {}
    fn skipped(&mut self, entry: &crate::msg::Skipped) {
        self.0.push(entry.name.clone());
    }
}

/// Run `f` on a thread while this thread holds a `flock` of `mode` on the file at `path`,
/// watching the kernel's lock table for a request waiting for it: with `until_asked`, the
/// lock goes once one waits (`f` must ask for it), else once `f` has returned. What `f`
/// returned, and whether a request was seen waiting.
pub(crate) fn while_locked<T: Send + 'static>(
    path: &std::path::Path,
    mode: crate::platform::lock::Mode,
    until_asked: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, bool) {
    use std::os::unix::fs::MetadataExt as _;
    let file = std::fs::File::open(path).unwrap();
    assert!(crate::platform::lock::flock(&file, mode, true).unwrap());
    let meta = file.metadata().unwrap();
    let waiting = || crate::platform::procinfo::flock_waiters(meta.dev(), meta.ino()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    let start = std::time::Instant::now();
    let mut asked = false;
    loop {
        asked = asked || waiting() > 0;
        if asked && until_asked {
            drop(file);
            let got = rx.recv_timeout(std::time::Duration::from_secs(20));
            return (got.expect("it never returned"), true);
        }
        if let Ok(got) = rx.try_recv() {
            assert!(!until_asked, "it returned without asking for the lock");
            return (got, asked);
        }
        assert!(start.elapsed().as_secs() < 20, "it never returned");
        std::thread::yield_now();
    }
}
