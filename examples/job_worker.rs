//! A job worker: take each message from a durable queue, do the job, and acknowledge it only
//! once it succeeded. A job that fails goes back to the queue (and to the dead letters after
//! the mailbox's retries); one whose worker dies, however it dies, is delivered again.
//!
//! ```text
//! fsync msg post jobs --data 'hello'          # or Mailbox::post from a program
//! cargo run --example job_worker -- jobs
//! ```
//!
//! The job here upper-cases its text; an empty payload stands for a job that fails. The worker
//! stops when the queue is empty.

use std::{io::Read, process::ExitCode, time::Duration};

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: job_worker MAILBOX");
        return ExitCode::from(2);
    };
    // A job that failed twice more goes to the dead letters (`fsync msg list --dead`).
    let mailbox = fsync::Mailbox::new(&path).retries(2);
    match work(&mailbox) {
        Ok(done) => {
            println!("queue empty after {done} jobs");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("job_worker: {e}");
            ExitCode::FAILURE
        }
    }
}

fn work(mailbox: &fsync::Mailbox) -> fsync::Result<usize> {
    let mut done = 0;
    // A zero timeout: take what is queued now, never wait for more.
    while let Some(mut job) = mailbox.recv(Some(Duration::ZERO))? {
        let mut text = String::new();
        let read = job.read_to_string(&mut text);
        match read {
            Ok(_) if !text.is_empty() => {
                println!(
                    "job {} (attempt {}): {}",
                    job.id(),
                    job.attempt(),
                    text.to_uppercase()
                );
                job.finish()?; // acknowledged: gone for good
                done += 1;
            }
            _ => {
                let id = job.id();
                let became = job.fail()?; // back to the queue, or to the dead letters
                println!("job {id} failed: {became:?}");
            }
        }
    }
    Ok(done)
}
