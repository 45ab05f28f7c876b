/*!
Where message payloads come from (`--data TEXT` or standard input, binary-safe) and go to
(standard output, byte for byte).
*/

use std::{ffi::OsString, io::Read, os::unix::ffi::OsStrExt};

use clap::Args;

#[derive(Debug, Args)]
pub struct DataArg {
    /// The payload; without it, standard input is read to its end (binary-safe, any size)
    #[arg(long, value_name = "TEXT")]
    pub data: Option<OsString>,
}

impl DataArg {
    pub fn reader(&self) -> Box<dyn Read + '_> {
        match &self.data {
            Some(text) => Box::new(text.as_bytes()),
            None => Box::new(std::io::stdin().lock()),
        }
    }
}

/// A failure to write a received payload out: the message was not delivered (it goes back to
/// the queue), so this is an error even for a closed pipe.
pub fn output_error(e: std::io::Error) -> super::Failure {
    super::Failure::Lib(fsync::Error::io(
        std::path::Path::new("standard output"),
        "cannot write message",
        e,
    ))
}
