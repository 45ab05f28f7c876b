//! An async job worker under tokio: receive jobs without blocking a runtime thread, and stop
//! cleanly on ^C (`tokio::signal`, which the library leaves alone). The receive that was
//! waiting is dropped: it takes nothing, so no job is lost.
//!
//! ```text
//! cargo run --example async_worker -- MAILBOX
//! ```

use std::{io::Read, process::ExitCode};

#[tokio::main]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: async_worker MAILBOX");
        return ExitCode::from(2);
    };
    let mailbox = fsync::Mailbox::new(&path);
    loop {
        println!("waiting for a job");
        tokio::select! {
            got = mailbox.recv_async(None) => match got {
                Ok(Some(mut job)) => {
                    let mut text = String::new();
                    if let Err(e) = job.read_to_string(&mut text) {
                        eprintln!("async_worker: {e}");
                        continue; // dropped unfinished: back to the queue
                    }
                    // ... the job, which may .await ...
                    println!("job {}: {text}", job.id());
                    if let Err(e) = job.finish() {
                        eprintln!("async_worker: {e}");
                        return ExitCode::FAILURE;
                    }
                }
                Ok(None) => unreachable!("no timeout"),
                Err(e) => {
                    eprintln!("async_worker: {e}");
                    return ExitCode::FAILURE;
                }
            },
            _ = tokio::signal::ctrl_c() => {
                println!("stopped: nothing taken");
                return ExitCode::SUCCESS;
            }
        }
    }
}
