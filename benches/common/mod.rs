//! What the benchmark binaries share.

use std::path::PathBuf;

/// A fresh directory for the benchmark's files, under `FSYNC_BENCH_DIR` (default: the temp dir).
pub(crate) fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("FSYNC_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    tempfile::Builder::new()
        .prefix("fsync-bench-")
        .tempdir_in(base)
        .expect("cannot create the benchmark directory")
}

/// Wait until `/proc/locks` shows a blocked `flock` waiter on inode `ino`. Returns false if
/// none showed within a second (no `/proc/locks`?); a short sleep stands in then.
// The handoff benchmarks' (not every benchmark binary that includes this module uses it).
#[allow(dead_code)]
pub(crate) fn wait_blocked(ino: u64) -> bool {
    use std::{
        fs::File,
        io::Read,
        time::{Duration, Instant},
    };
    let suffix = format!(":{ino}");
    let start = Instant::now();
    let mut text = String::new();
    while start.elapsed() < Duration::from_secs(1) {
        text.clear();
        if File::open("/proc/locks")
            .and_then(|mut f| f.read_to_string(&mut text))
            .is_err()
        {
            break;
        }
        let blocked = text.lines().any(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.len() >= 7 && t[1] == "->" && t[2] == "FLOCK" && t[6].ends_with(&suffix)
        });
        if blocked {
            return true;
        }
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(2));
    false
}
