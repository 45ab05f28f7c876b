//! Before maintenance: wait until every process of an application has left its group (each
//! joined it as it started: `fsync group join app.grp -- server`, or `Group::join`).
//!
//! ```text
//! cargo run --example group_wait -- GROUP [SECONDS]
//! ```
//!
//! Exit status: 0 the group is empty, 1 members are still in after SECONDS (default 60).

use std::{process::ExitCode, time::Duration};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(group) = args.next() else {
        eprintln!("usage: group_wait GROUP [SECONDS]");
        return ExitCode::from(2);
    };
    let Ok(seconds) = args.next().map_or(Ok(60), |s| s.parse::<u64>()) else {
        eprintln!("group_wait: SECONDS must be a whole number");
        return ExitCode::from(2);
    };
    let timeout = Some(Duration::from_secs(seconds));
    match fsync::group::members(std::path::Path::new(&group)) {
        Ok(members) => println!(
            "waiting for {} member(s) of {group} to leave",
            members.len()
        ),
        Err(e) => {
            eprintln!("group_wait: {e}");
            return ExitCode::from(2);
        }
    }
    match fsync::group::wait_empty(
        std::path::Path::new(&group),
        timeout,
        fsync::wait::DEFAULT_POLL,
    ) {
        Ok(true) => {
            println!("{group} is empty");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("{group} still has members after {seconds} s");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("group_wait: {e}");
            ExitCode::from(2)
        }
    }
}
