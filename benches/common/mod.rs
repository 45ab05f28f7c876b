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
