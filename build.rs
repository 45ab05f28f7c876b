//! Build script: link the unwinder statically where the C toolchain has it.
//!
//! Rust's standard library needs an unwinder (`_Unwind_*`, for backtraces and unwinding
//! panics). On GNU/Linux it links the shared `libgcc_s.so.1`, which every start of `fsync` then
//! loads and binds: about 6 % of a `fsync mutex run L -- true`, enough to decide issue 6's
//! target against flock(1) (BENCHMARKS.md, sections 2 and 14). When the C compiler can name its
//! static `libgcc_eh.a` (what `-static-pie` links), we link that first and the linker's
//! `--as-needed` drops libgcc_s. Anywhere else nothing changes.

use std::{path::PathBuf, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static");
    if !target.ends_with("-linux-gnu") || crt_static {
        return; // statically linked builds have it already; other targets have no libgcc_s
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let Ok(out) = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Without the file, the compiler echoes the bare name back.
    let Some(dir) = path
        .parent()
        .filter(|_| path.is_absolute() && path.is_file())
    else {
        return;
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=gcc_eh");
}
