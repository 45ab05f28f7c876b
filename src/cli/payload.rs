/*!
Where message payloads come from (`--data TEXT` or standard input, binary-safe) and go to
(standard output, byte for byte).
*/

use std::{ffi::OsString, io::Read, os::unix::ffi::OsStrExt};

use clap::Args;

#[derive(Debug, Args)]
pub(super) struct DataArg {
    /// The payload; without it, standard input is read to its end (binary-safe, any size)
    #[arg(long, value_name = "TEXT")]
    pub data: Option<OsString>,
}

impl DataArg {
    pub(super) fn reader(&self) -> Box<dyn Read + '_> {
        match &self.data {
            Some(text) => Box::new(text.as_bytes()),
            None => Box::new(std::io::stdin().lock()),
        }
    }
}

/// A failure to write a received payload out: the message was not delivered (it goes back to
/// the queue), so this is an error even for a closed pipe.
pub(super) fn output_error(e: std::io::Error) -> super::Failure {
    super::Failure::Lib(fsync::Error::io(
        std::path::Path::new("standard output"),
        "cannot write message",
        e,
    ))
}

/// A message copied out to standard output: a payload that cannot be read names the message,
/// an output that fails standard output, and a cancellation ends fsync as its signal (the
/// message, dropped unfinished, goes back to the queue).
pub(super) fn copied(copy: Result<u64, fsync::msg::CopyError>) -> Result<(), super::Failure> {
    use fsync::msg::CopyError;
    match copy {
        Ok(_) => Ok(()),
        Err(CopyError::Read(e)) => Err(super::Failure::Lib(e)),
        Err(CopyError::Write(e)) => Err(output_error(e)),
        Err(CopyError::Interrupted(sig)) => {
            Err(super::Failure::Ended(super::exit_code::Exit::signal(sig)))
        }
        Err(other) => Err(super::Failure::Lib(fsync::Error::new(
            std::path::Path::new("standard output"),
            fsync::ErrorKind::Os,
            other.to_string(),
        ))),
    }
}

/// Before a message is taken: standard output must be open for writing. A closed one is
/// `/dev/null` opened read-only (see `main`), and Rust's standard output quietly discards the
/// writes that then fail, so without this check the message would be taken and lost.
pub(super) fn check_output() -> Result<(), super::Failure> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let writable = fcntl(1, FcntlArg::F_GETFL).is_ok_and(|flags| {
        let mode = OFlag::from_bits_truncate(flags) & OFlag::O_ACCMODE;
        mode == OFlag::O_WRONLY || mode == OFlag::O_RDWR
    });
    match writable {
        true => Ok(()),
        false => Err(super::Failure::Lib(fsync::Error::new(
            std::path::Path::new("standard output"),
            fsync::ErrorKind::Io,
            "is closed or not open for writing; the message stays queued",
        ))),
    }
}
