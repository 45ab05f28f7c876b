//! The work whose instruction count `.ci/run` checks (`bench/instructions.sh`, under
//! callgrind): a count of executed instructions does not move with the machine's load, as a
//! time does, so a rise of a few percent is a commit's doing.
//!
//! ```text
//! instructions mutex DIR N    N acquires and releases of DIR/L through the library
//! instructions msg DIR N      N posts to DIR/B, then N receives each finished
//! ```
//!
//! Each part first does its work once, so that the rounds after it find the files made (a
//! first acquire creates the lock file; a first post, the mailbox). That first round is
//! counted too (callgrind cannot leave it out of a release build, which has no symbols to
//! toggle on), the same every run. Run with no arguments (as `cargo test --benches` does),
//! both parts run a few rounds in a temporary directory.

use std::{path::Path, process::ExitCode, time::Duration};

fn mutex(dir: &Path, n: u32) {
    let m = fsync::Mutex::new(dir.join("L"));
    drop(m.acquire(None).expect("acquire"));
    for _ in 0..n {
        let guard = m.acquire(None).expect("acquire").expect("no timeout");
        std::hint::black_box(guard.fence());
        drop(guard);
    }
}

fn msg(dir: &Path, n: u32) {
    let b = fsync::Mailbox::new(dir.join("B"));
    b.post(&b"warm"[..]).expect("post");
    b.recv(Some(Duration::ZERO))
        .expect("recv")
        .expect("posted")
        .finish()
        .expect("finish");
    for i in 0..n {
        b.post(format!("{i}").as_bytes()).expect("post");
    }
    for _ in 0..n {
        let r = b.recv(Some(Duration::ZERO)).expect("recv").expect("posted");
        r.finish().expect("finish");
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [part, dir, n] => {
            let Ok(n) = n.parse() else {
                eprintln!("instructions: N must be a whole number");
                return ExitCode::from(2);
            };
            match part.as_str() {
                "mutex" => mutex(Path::new(dir), n),
                "msg" => msg(Path::new(dir), n),
                _ => {
                    eprintln!("instructions: the parts are mutex and msg");
                    return ExitCode::from(2);
                }
            }
        }
        _ => {
            // A smoke test (`cargo test --benches`, `cargo bench`): both parts, briefly.
            let t = tempfile::tempdir().expect("temp dir");
            mutex(t.path(), 3);
            msg(t.path(), 3);
        }
    }
    ExitCode::SUCCESS
}
