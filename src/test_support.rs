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
