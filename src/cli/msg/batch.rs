/*!
`fsync msg post --lines` / `--null`: many messages from one input, one per record, queued as
one batch (all or none after a crash: the library's `Mailbox::post_records`), their ids printed
one a line in input order.
*/

use crate::cli::OrStdout;
use std::io::{BufReader, BufWriter, Write};

use clap::Args;
use fsync::Mailbox;

use super::super::{Exit, VerbResult, escape::Show, payload::DataArg, report};

// How `post` splits its input into messages (no doc comment: it would become the verb's about).
#[derive(Debug, Args)]
pub(super) struct BatchArgs {
    /// Post one message per line of the input (the newline not included; a last line without
    /// one counts; an empty line is an empty message), all or none of them queued
    #[arg(long, conflicts_with_all = ["null", "delay", "key", "priority"])]
    lines: bool,
    /// Post one message per NUL-terminated record of the input (as `find -print0` writes),
    /// all or none of them queued
    #[arg(long, conflicts_with_all = ["delay", "key", "priority"])]
    null: bool,
}

impl BatchArgs {
    /// The byte that ends each message, if the input is split into many.
    pub(super) fn separator(&self) -> Option<u8> {
        match (self.lines, self.null) {
            (true, _) => Some(b'\n'),
            (_, true) => Some(0),
            _ => None,
        }
    }
}

/// Post each record of the payload (`--data` or standard input), ended by `separator`, as one
/// batch; print the ids (unless `quiet`).
pub(super) fn post(
    mailbox: &Mailbox,
    data: &DataArg,
    separator: u8,
    quiet: bool,
    verbose: bool,
) -> VerbResult {
    let mut input = BufReader::with_capacity(64 * 1024, data.reader());
    let ids = Exit::unless_acquired(mailbox.post_records(&mut input, separator)?, Exit::OK)?;
    let place = mailbox.path().shown();
    report::say(verbose, || match ids.clone().count() {
        0 => format!("no message to queue in {place}: the input is empty"),
        1 => format!("queued message {} in {place}", ids.start),
        n => format!(
            "queued {n} messages in {place}: ids {} to {}",
            ids.start,
            ids.end - 1
        ),
    });
    if !quiet {
        let mut out = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        for id in ids {
            writeln!(out, "{id}").or_stdout()?;
        }
        out.flush().or_stdout()?;
    }
    Ok(Exit::OK)
}
