//! An async job worker under tokio: receive jobs without blocking a runtime thread, and stop
//! cleanly on ^C (`tokio::signal`, which the library leaves alone). The receive that was
//! waiting is dropped: it takes nothing, so no job is lost.
//!
//! ```text
//! cargo run --example async_worker -- MAILBOX
//! ```

use std::{io::Read, process::ExitCode};

use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: async_worker MAILBOX");
        return ExitCode::from(2);
    };
    let mailbox = fsync::Mailbox::new(&path);
    // Listening from here on: a ^C that comes while a job runs is kept for the select below
    // (`tokio::signal::ctrl_c()` made anew in the loop would miss one between two of them).
    let mut interrupt = match signal(SignalKind::interrupt()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("async_worker: cannot listen for ^C: {e}");
            return ExitCode::FAILURE;
        }
    };
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
            _ = interrupt.recv() => {
                println!("stopped: nothing taken");
                return ExitCode::SUCCESS;
            }
        }
    }
}
