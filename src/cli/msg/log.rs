//! A job's output: where `msg work` and `msg recv -- COMMAND` send it (`--output`,
//! `--output-limit`), and `fsync msg log BOX ID [--follow]`, which shows what the mailbox kept
//! (the on-disk format is in the library's `msg/output.rs`).

use std::io::Write;

use clap::{Args, ValueEnum};
use fsync::{
    Mailbox,
    msg::{DEFAULT_OUTPUT_LIMIT, JobOutput, Piece},
};

use super::{BoxArg, Exit, Show, VerbResult};

/// Where a job's standard output and error go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum OutputMode {
    /// Kept in the mailbox only, for 'fsync msg log' (the default of 'msg work')
    Keep,
    /// Kept in the mailbox, and written to fsync's own standard output and error too (the
    /// default of 'msg recv -- COMMAND')
    Tee,
    /// Not kept: the job writes to fsync's own standard output and error
    Inherit,
}

// `--output` and `--output-limit` of `msg work` and `msg recv -- COMMAND`. (No doc comment:
// clap would make it the `about` of the commands that flatten it.)
#[derive(Debug, Args)]
#[group(skip)]
pub(super) struct OutputArgs {
    /// Where each job's standard output and error go: kept in the mailbox (both in one file,
    /// in the order written: 'fsync msg log BOX ID' shows it, on any host), also passed on to
    /// fsync's own (tee), or only that (inherit) [default: keep for 'msg work', tee for 'msg
    /// recv']
    #[arg(long, value_enum, value_name = "WHERE")]
    pub output: Option<OutputMode>,

    /// Keep at most SIZE bytes of each job's output (512, 64k, 1M, 1G: powers of 1024): the
    /// last ones; once a job writes more, the older half of what is kept is dropped, so at
    /// least SIZE/2 of its last bytes are kept. 0: nothing [default: 1M]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub output_limit: Option<u64>,
}

impl OutputArgs {
    /// What the library is to do with the output, `default` unless `--output` says.
    pub(super) fn job_output(&self, default: OutputMode) -> JobOutput {
        let limit = self.output_limit.unwrap_or(DEFAULT_OUTPUT_LIMIT);
        match self.output.unwrap_or(default) {
            OutputMode::Keep => JobOutput::Keep { limit },
            OutputMode::Tee => JobOutput::Tee { limit },
            OutputMode::Inherit => JobOutput::Inherit,
        }
    }
}

/// A size in bytes: a number, with `k`, `M` or `G` (powers of 1024; `KiB`, `MB` and the like
/// too).
pub(super) fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid size '{s}': a number of bytes, with k, M or G (1024s) if wanted");
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(bad()),
    };
    n.checked_mul(1 << shift).ok_or_else(bad)
}

#[derive(Debug, Args)]
pub(super) struct LogArgs {
    #[command(flatten)]
    mailbox: BoxArg,
    /// The job (its message's id: FSYNC_MSG_ID, what 'post' printed)
    #[arg(value_name = "ID")]
    id: u64,
    /// Go on printing what the job writes while it is queued or running; stop once it is
    /// neither
    #[arg(short, long)]
    follow: bool,
    /// With --follow: re-check interval where other hosts cannot wake us (network file
    /// systems)
    #[arg(long, value_name = "DUR", value_parser = crate::cli::duration::parse_poll, default_value = "50ms")]
    poll: std::time::Duration,
}

/// `msg log`: the job's kept output on standard output, byte for byte; notes (output left out,
/// a new attempt) on stderr.
pub(super) fn log(a: &LogArgs) -> VerbResult {
    let mailbox = Mailbox::existing(&a.mailbox.mailbox).poll_interval(a.poll);
    let place = a.mailbox.mailbox.shown();
    let id = a.id;
    let left_out = |n: u64| {
        let _ = writeln!(
            std::io::stderr(),
            "fsync: {place}: job {id}: {n} bytes of its output before this were not kept \
             (--output-limit)"
        );
    };
    let mut out = std::io::stdout().lock();
    if !a.follow {
        let Some(mut kept) = mailbox.output(id)? else {
            return Ok(Exit::OK);
        };
        if kept.left_out() > 0 {
            left_out(kept.left_out());
        }
        std::io::copy(&mut kept, &mut out).map_err(crate::cli::stdout_failed)?;
        out.flush().map_err(crate::cli::stdout_failed)?;
        return Ok(Exit::OK);
    }
    let mut failed = None;
    let outcome = mailbox.follow_output(id, None, |piece| {
        let written = match piece {
            Piece::Bytes(bytes) => out.write_all(bytes).and_then(|()| out.flush()),
            Piece::LeftOut(n) => {
                left_out(n);
                Ok(())
            }
            Piece::Attempt(n) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "fsync: {place}: job {id}: attempt {n} started; its output follows"
                );
                Ok(())
            }
            _ => Ok(()),
        };
        match written {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(crate::cli::stdout_failed(e));
    }
    match outcome {
        fsync::Outcome::Interrupted(sig) => Ok(Exit::signal(sig)),
        _ => Ok(Exit::OK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bytes_or_powers_of_1024() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        for bad in ["", "k", "1.5M", "-1", "1T", "1 M", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
