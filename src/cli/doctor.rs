/*!
`fsync doctor PATH`: what the file system under PATH can do, and how fsync will wait there.
*/

use crate::cli::OrStdout;
use std::{io::Write, path::PathBuf};

use clap::Args;
use fsync::doctor::{self, Check};
use serde::Serialize;

use super::{
    Exit, VerbResult,
    escape::{Show, escaped},
    report,
};

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str =
    "Check what PATH's file system supports and how fsync will wait there";

/// The description of `fsync doctor --help`.
pub(super) const LONG: &str = "\
Check the file system of the directory PATH (or of the file PATH's directory): its type, whether \
whole-file flock(2) locks and OFD byte-range locks exclude each other, whether rename is atomic \
and link refuses an existing name, whether change notification (dnotify/inotify) reports \
changes, and the resulting mode: kernel wake-ups on local file systems, polling where other hosts \
cannot wake us. It creates scratch files named .fsync-doctor.RANDOM in the directory, each under a \
new name nobody can guess (never a name that exists: nothing another user put there is opened, \
locked or removed), and removes them before it exits, interrupted or not. Exit 0 if every check \
passed, 1 if one failed.";

/// The examples after `fsync doctor --help`.
pub(super) const EXAMPLES: &str = "\
Examples:
  # Before putting locks on a shared directory
  fsync doctor /mnt/shared/locks
  fsync doctor --json /mnt/shared/locks | jq .mode";

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The directory (or a file in it) to examine
    #[arg(value_name = "PATH")]
    path: PathBuf,

    /// One JSON object with every check and the mode: {"path", "fs_type", "mount_type",
    /// "network", "flock", "byte_range", "flock_and_byte_range_collide", "rename", "link",
    /// "notify", "notify_interface", "mode", "lease", "warnings"}
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: DoctorArgs) -> VerbResult {
    let r = doctor::examine(&a.path)?;
    // INT, TERM, HUP or QUIT while it looked: its scratch files are gone; end as the signal would.
    if let Some(sig) = fsync::wait::cancelled() {
        return Err(Exit::signal(sig).into());
    }
    let notify_label = format!("change notification ({})", r.notify_interface);
    let checks = [
        ("whole-file locks (flock)", &r.flock),
        ("byte-range locks (OFD)", &r.byte_range),
        ("atomic rename", &r.rename),
        ("exclusive link", &r.link),
        (notify_label.as_str(), &r.notify),
    ];
    let lease = doctor::default_lease(&r.dir);
    let mut out = std::io::stdout().lock();
    if a.json {
        let line = DoctorJson {
            path: report::path_text(&r.dir),
            fs_type: r.fs_type,
            mount_type: r.mount_type.as_deref(),
            network: r.network,
            flock: CheckJson::from(&r.flock),
            byte_range: CheckJson::from(&r.byte_range),
            flock_and_byte_range_collide: r.kinds_collide,
            rename: CheckJson::from(&r.rename),
            link: CheckJson::from(&r.link),
            notify: CheckJson::from(&r.notify),
            notify_interface: r.notify_interface,
            mode: mode(&r),
            lease: lease.as_ref().map(|l| LeaseJson {
                file_system: l.file_system.name,
                seconds: l.lease.as_secs(),
                server_timeout: server_timeout_text(l),
                source: match &l.source {
                    doctor::LeaseSource::Mount { .. } => "mount",
                    _ => "guess",
                },
                read_from: match &l.source {
                    doctor::LeaseSource::Mount { file, .. } => Some(report::path_text(file)),
                    _ => None,
                },
            }),
            warnings: &r.warnings,
        };
        report::print_json(&mut out, &line).or_stdout()?;
    } else {
        let kind = if r.network { "network" } else { "local" };
        let mount = r
            .mount_type
            .as_deref()
            .map(|m| format!(", mounted as {m}"))
            .unwrap_or_default();
        writeln!(
            out,
            "{}: {}{mount} ({kind} file system)",
            r.dir.shown(),
            r.fs_type
        )
        .or_stdout()?;
        for (name, c) in checks {
            match c {
                Check::Works => writeln!(out, "  {name:32} works").or_stdout()?,
                Check::Fails(why) => {
                    writeln!(out, "  {name:32} FAILS: {}", escaped(why)).or_stdout()?;
                }
            }
        }
        let collide = match (r.kinds_collide, r.network) {
            (true, true) => "yes between hosts: never mix them on one file",
            (true, false) => "yes: never mix them on one file",
            (false, _) => "no",
        };
        writeln!(out, "  {:32} {collide}", "flock and byte ranges collide").or_stdout()?;
        writeln!(out, "  mode: {}", mode(&r)).or_stdout()?;
        if let Some(l) = &lease {
            let source = match &l.source {
                doctor::LeaseSource::Mount { file, .. } => {
                    format!("read from the mount: {}", file.shown())
                }
                _ => format!(
                    "a guess for {}: the mount does not show its server's timeout; give \
                     --lease if the server's is shorter",
                    l.file_system.name
                ),
            };
            writeln!(
                out,
                "  lease: {} ({}: its server gives a silent host's locks away after {}; {source}); \
                 a run verb stops its command when the lock is not confirmed within it (--lease)",
                humantime::format_duration(l.lease),
                l.file_system.name,
                server_timeout_text(l),
            )
            .or_stdout()?;
        }
        for w in &r.warnings {
            writeln!(out, "  warning: {}", escaped(w)).or_stdout()?;
        }
        if r.network {
            writeln!(
                out,
                "  note: change notification only sees this host's changes on a shared file system"
            )
            .or_stdout()?;
        }
    }
    Ok(if checks.iter().all(|(_, c)| c.works()) {
        Exit::OK
    } else {
        Exit::NO
    })
}

/// `fsync doctor --json` (docs/json.md, `doctor`).
#[derive(Serialize)]
struct DoctorJson<'a> {
    path: String,
    fs_type: &'a str,
    mount_type: Option<&'a str>,
    network: bool,
    flock: CheckJson<'a>,
    byte_range: CheckJson<'a>,
    flock_and_byte_range_collide: bool,
    rename: CheckJson<'a>,
    link: CheckJson<'a>,
    notify: CheckJson<'a>,
    notify_interface: &'a str,
    mode: &'a str,
    lease: Option<LeaseJson>,
    warnings: &'a [String],
}

/// A check: `true` if it works, else why not (a string).
/// The default lease in `fsync doctor --json` (docs/json.md, `lease`).
#[derive(Serialize)]
struct LeaseJson {
    file_system: &'static str,
    seconds: u64,
    server_timeout: String,
    source: &'static str,
    read_from: Option<String>,
}

/// After how long the server gives a silent host's locks away: read from the mount ("10 s
/// (network.ping-timeout)"), or the table's words for the file system.
fn server_timeout_text(l: &doctor::DefaultLease) -> String {
    match &l.source {
        doctor::LeaseSource::Mount { server_timeout, .. } => {
            format!("{} s (its ping-timeout)", server_timeout.as_secs())
        }
        _ => l.file_system.server_timeout.to_string(),
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum CheckJson<'a> {
    Works(bool),
    Fails(&'a str),
}

impl<'a> From<&'a Check> for CheckJson<'a> {
    fn from(c: &'a Check) -> CheckJson<'a> {
        match c {
            Check::Works => CheckJson::Works(true),
            Check::Fails(why) => CheckJson::Fails(why),
        }
    }
}

/// How fsync waits on a file system like that of `r`, in the words of its options (`--poll`).
fn mode(r: &doctor::Report) -> &'static str {
    match r.network {
        true => {
            "blocking lock calls woken by the file server, re-checked every --poll interval; \
             change notification cannot see other hosts, so event and message waits poll"
        }
        false => "kernel wake-ups: blocking locks and change notification, no polling",
    }
}
