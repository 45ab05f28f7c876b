/*!
`fsync flock`: util-linux flock(1)'s command line and observable behaviour, so that a script
written for flock runs unchanged under fsync (a link named `flock` to fsync, first on PATH, is
`fsync flock`).

Its parsing is flock's own, not clap's: getopt_long with flock's option string (`+sexnoFuw:E:hV?`:
options stop at the first word that is not one, long options may be abbreviated, `-nw 3` and
`-w3` are one option each, the last of `-s`/`-x`/`-u` wins, `-n` beats `-w`), its messages
(`NAME: ...`, with the name it was invoked under) and its exit statuses: 1 when the lock is
busy or the wait timed out (unless `-E`), 64 for usage, 66 when the lock file cannot be opened,
65 when it cannot be locked, 69 when the command cannot be run, the command's own status
otherwise (128+N when it died of signal N). The clap definition below only documents it (help,
man page, completions).

Running, it is flock's own sequence too: open FILE (never following a link to create its
target), lock that descriptor (waiting in the kernel; SIGALRM caught for a `-w` wait, as flock's
timer catches it), run the command as a child with the descriptor and the signal dispositions
and mask it found, and exit with the command's status. No signal handler, no second look at the
name: what a signal, a closed descriptor or a file removed while waiting does is what it does to
flock. Nothing is written beside the lock: no holder record, no fencing token. What fsync does
better and a script could notice (forwarding signals, re-checking the name, leases on network
file systems) is `mutex run`'s.
*/

use std::{
    ffi::{OsStr, OsString},
    io::Write as _,
    os::{
        fd::{AsFd, BorrowedFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::Args;
use fsync::{ByteRange, Mode, Outcome, command::SpawnError};

use super::{
    Exit,
    escape::{Show, escaped},
};

mod run;

/// The util-linux release whose flock(1) this is, as `--version` says.
const UTIL_LINUX: &str = "2.42";

/// The one-line description, for `fsync --help`.
pub(super) const ABOUT: &str =
    "util-linux flock(1), exactly: run a command under a lock, as flock runs it";

/// The description of `fsync flock --help`.
pub(super) const LONG: &str = "\
Manage file locks from shell scripts: util-linux flock(1)'s command line and behaviour, so that \
scripts written for flock run unchanged. Invoked under the name 'flock' (a link to fsync), fsync \
is 'fsync flock'.

'fsync flock FILE COMMAND' takes an exclusive lock on FILE (created if missing, never truncated), \
runs COMMAND, and exits with its status; 'fsync flock FILE -c CMDSTRING' runs CMDSTRING with \
$SHELL -c (/bin/sh if SHELL is unset); 'fsync flock N' locks descriptor N the shell has open, \
as in '( flock -n 9 || exit 1; ... ) 9>/var/lock/mylock'. FILE may be a directory, a device \
(/dev/null, a disk) or a named pipe.

Options are flock's and are taken only before FILE (or N): what follows FILE is the command. \
Long options may be abbreviated; of -s, -x and -u the last wins; -n makes -w pointless. Exit \
status: 1 when the lock was busy (-n) or the wait timed out (-w), unless -E says otherwise; 64 \
for a usage error; 66 when FILE cannot be opened; 65 when the lock cannot be taken; 69 when \
COMMAND cannot be run; otherwise COMMAND's (128+N if it died of signal N). Messages start \
with the name fsync was invoked under, as flock's do.

Unlike 'fsync mutex run', nothing is written beside the lock (no holder record, no fencing \
token), so that a script may lock itself inside a bin directory; and signals act on it as on \
flock: a TERM ends it at once and leaves COMMAND running with the lock ('fsync mutex run' \
forwards it to COMMAND instead). It follows util-linux flock 2.42 and accepts what 2.38 \
accepted ('--s' is --shared). Differences that remain are listed in docs/flock-compat.md: a \
pipe or socket descriptor is not locked (exit 65), a dangling link is not followed to create \
its target, and -u with a FILE runs COMMAND without opening FILE.";

pub(super) const EXAMPLES: &str = "\
Examples:
  # A cron job that must not overlap with itself: skip this run if the last is still busy
  fsync flock -n /var/lock/backup.lock /usr/local/bin/backup

  # The subshell form: lock descriptor 200 for the rest of the block
  ( fsync flock -x -w 10 200 || exit 1; critical-work ) 200>/var/lock/mylock

  # flock(1)'s FLOCKER idiom: a script that runs one copy of itself at a time
  [ \"${FLOCKER}\" != \"$0\" ] && exec env FLOCKER=\"$0\" flock -en \"$0\" \"$0\" \"$@\" || :

  # Make every 'flock' of one cron job fsync's (no script edited)
  mkdir -p ~/.local/lib/fsync/bin && ln -sf \"$(command -v fsync)\" ~/.local/lib/fsync/bin/flock
  PATH=$HOME/.local/lib/fsync/bin:$PATH ./nightly.sh";

// The options as flock(1) documents them. Only for help, the man page and completions: the
// command line is parsed by `parse`, flock's way. (No doc comment: clap would make it the
// command's about, clap-rs/clap#3127.)
#[derive(Debug, Args)]
#[command(
    disable_help_flag = true,
    disable_version_flag = true,
    override_usage = "fsync flock [OPTIONS] <FILE|DIR> <COMMAND> [ARGUMENT]...\n       \
                      fsync flock [OPTIONS] <FILE|DIR> -c <CMDSTRING>\n       \
                      fsync flock [OPTIONS] <NUMBER>"
)]
pub(crate) struct FlockArgs {
    /// Get a shared lock
    #[arg(short = 's', long)]
    shared: bool,

    /// Get an exclusive lock (the default)
    #[arg(short = 'x', short_alias = 'e', long)]
    exclusive: bool,

    /// Remove a lock (with NUMBER: release the lock held through descriptor N)
    #[arg(short = 'u', long)]
    unlock: bool,

    /// Fail (exit 1, or -E's status) rather than wait
    #[arg(short = 'n', long = "nonblocking", visible_alias = "nb")]
    nonblock: bool,

    /// Wait at most SECS seconds (fractions allowed; 0 is -n)
    #[arg(
        short = 'w',
        long = "timeout",
        visible_alias = "wait",
        value_name = "SECS"
    )]
    timeout: Option<String>,

    /// Exit status when the lock is busy or the wait timed out [default: 1]
    #[arg(short = 'E', long, value_name = "NUMBER")]
    conflict_exit_code: Option<u8>,

    /// Close the lock's descriptor before running COMMAND: COMMAND and what it leaves
    /// running do not hold the lock
    #[arg(short = 'o', long)]
    close: bool,

    /// Run CMDSTRING with $SHELL -c (/bin/sh if SHELL is unset); given after FILE
    #[arg(short = 'c', long = "command", value_name = "CMDSTRING")]
    command_string: Option<OsString>,

    /// Run COMMAND in place of fsync (exec) instead of as a child
    #[arg(short = 'F', long)]
    no_fork: bool,

    /// Use an fcntl (OFD) lock rather than flock(2)
    #[arg(long)]
    fcntl: bool,

    /// The first byte of an fcntl lock (implies --fcntl)
    #[arg(long, value_name = "OFFSET")]
    start: Option<String>,

    /// How many bytes an fcntl lock covers, 0 to the end of all offsets (implies --fcntl)
    #[arg(long, value_name = "NUMBER")]
    length: Option<String>,

    /// Say on standard output how long getting the lock took, and what is executed
    #[arg(long)]
    verbose: bool,

    /// Print help
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    help: Option<bool>,

    /// Print version
    #[arg(short = 'V', long, action = clap::ArgAction::Version)]
    version: Option<bool>,

    /// The lock: a file (created if missing), a directory, or a descriptor NUMBER
    #[arg(value_name = "FILE|DIR|NUMBER")]
    target: OsString,

    /// The command to run, and its arguments
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    argv: Vec<OsString>,
}

/// `fsync flock ARGS` (or `flock ARGS` through a link): `args` are the words after the name,
/// `name` what messages start with.
pub(super) fn main(invoked: &str, args: Vec<OsString>) -> Exit {
    // Messages name the program as flock's do: its own by its short name, getopt's by the
    // name as called (`/usr/bin/flock: invalid option -- 'z'`).
    let name = std::path::Path::new(invoked)
        .file_name()
        .map_or(invoked.into(), |n| n.to_string_lossy());
    let name = name.as_ref();
    // SIGPIPE is as our caller left it (see main.rs): a write to a pipe nobody reads kills us,
    // as it kills flock, unless it is ignored.
    let pipe_ignored = fsync::internal::note_sigpipe();
    let say = Say {
        name,
        pipe_ignored,
        stderr_failed: std::cell::Cell::new(false),
    };
    let exit = parsed_and_run(&say, invoked, &args);
    // flock's exit handler: a message that could not be written makes the status 1.
    match say.stderr_failed.get() {
        true => Exit::code(1),
        false => exit,
    }
}

fn parsed_and_run(say: &Say, invoked: &str, args: &[OsString]) -> Exit {
    let name = say.name;
    let request = match parse(args) {
        Ok(Parsed::Run(r)) => r,
        Ok(Parsed::Help) => return say.after_output(help(), Exit::OK),
        Ok(Parsed::Version) => {
            let mut out = std::io::stdout().lock();
            let written = writeln!(
                out,
                "{name} from util-linux {UTIL_LINUX} (fsync {})",
                env!("CARGO_PKG_VERSION")
            )
            .and_then(|()| out.flush());
            return say.after_output(written, Exit::OK);
        }
        Err(usage) => {
            if !usage.try_help {
                say.line(&usage.message);
                return Exit::code(usage.code);
            }
            let command = match name {
                "fsync" => "fsync flock",
                other => other,
            };
            say.raw(&format!(
                "{invoked}: {}\nTry '{command} --help' for more information.",
                escaped(&usage.message)
            ));
            return Exit::code(usage.code);
        }
    };
    request.run(say)
}

/// Messages as flock writes them: the invoked name, then the text.
struct Say<'a> {
    name: &'a str,
    /// SIGPIPE was ignored by our caller (flock then sees EPIPE instead of dying).
    pipe_ignored: bool,
    /// A message could not be written (flock's exit handler then exits 1).
    stderr_failed: std::cell::Cell<bool>,
}

impl Say<'_> {
    /// How fsync ends, `exit` meant, once what it wrote to standard output went (`written`),
    /// as flock ends at its exit: a reader gone kills it with SIGPIPE unless that is ignored;
    /// a closed descriptor (EBADF) is let pass, as flock's exit handler lets it; any other
    /// error (a full disk) says "write error" and exits 1.
    fn after_output(&self, written: std::io::Result<()>, exit: Exit) -> Exit {
        match written.map_err(|e| e.raw_os_error()) {
            Ok(()) | Err(Some(nix::libc::EBADF)) => exit,
            Err(Some(nix::libc::EPIPE)) if self.pipe_ignored => exit,
            Err(Some(nix::libc::EPIPE)) => Exit::signal(nix::libc::SIGPIPE),
            Err(errno) => {
                let cause = errno.map_or_else(|| "Input/output error".to_string(), run::strerror);
                self.line(&format!("write error: {cause}"));
                Exit::code(1)
            }
        }
    }

    /// `NAME: TEXT` on standard error, TEXT escaped; nothing for no text (flock's `-?`).
    fn line(&self, text: &str) {
        self.shown_line(&escaped(text));
    }

    /// [`line`](Self::line) of text already escaped (built of shown paths and escaped parts).
    fn shown_line(&self, text: &str) {
        if !text.is_empty() {
            self.raw(&format!("{}: {text}", self.name));
        }
    }

    /// `TEXT` and a newline on standard error, as flock's unbuffered standard error writes
    /// it: where that fails, SIGPIPE ends fsync (a reader gone, unless the signal is
    /// ignored) or the exit status becomes 1.
    fn raw(&self, text: &str) {
        // write(2) itself: the standard library's stderr takes a closed descriptor (EBADF)
        // for a sink, where flock's exit handler sees the error.
        let mut rest = format!("{text}\n").into_bytes();
        while !rest.is_empty() {
            match nix::unistd::write(std::io::stderr(), &rest) {
                Ok(n) => drop(rest.drain(..n)),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    if e == nix::errno::Errno::EPIPE && !self.pipe_ignored {
                        fsync::internal::die_of(nix::libc::SIGPIPE);
                    }
                    self.stderr_failed.set(true);
                    return;
                }
            }
        }
    }
}

fn help() -> std::io::Result<()> {
    use clap::CommandFactory as _;
    let mut root = super::Cli::command();
    root.build();
    let text = root
        .find_subcommand_mut("flock")
        .map(|c| c.render_long_help().to_string())
        .unwrap_or_default();
    let mut out = std::io::stdout().lock();
    write!(out, "{text}").and_then(|()| out.flush())
}

// ---- parsing, as getopt_long(3) with flock's option string does it ----------------------

/// A command line flock refuses: its message, its status, and whether "Try ... --help"
/// follows (getopt's errors).
#[derive(Debug, PartialEq, Eq)]
struct Usage {
    message: String,
    code: u8,
    try_help: bool,
}

/// The EXIT STATUS of the manual page: flock(1)'s statuses, (code, meaning).
pub(super) const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "the command's own",
        "with FILE and COMMAND, COMMAND's exit status; 128+N if it died of signal N. A signal \
         that ends fsync itself (TERM, HUP...) ends it at once, as it ends flock, and leaves \
         COMMAND running",
    ),
    (
        "0",
        "with a descriptor NUMBER: it is locked (or unlocked, -u)",
    ),
    (
        "1",
        "the lock was busy (-n, -w 0) or the wait timed out (-w); change it with -E",
    ),
    (
        "64",
        "usage error: unknown option, bad number, a missing FILE or CMDSTRING",
    ),
    (
        "65",
        "the lock could not be taken: a descriptor that is not open, or is a pipe or a socket",
    ),
    (
        "66",
        "FILE could not be opened or created (missing directory, permission denied)",
    ),
    ("69", "COMMAND could not be executed or was not found"),
    (
        "71",
        "an operating-system error: no memory, no locks left (ENOLCK), a timer -w cannot set",
    ),
    (
        "73",
        "FILE could not be created: a read-only or full file system",
    ),
    (
        "128+N",
        "fsync died of signal N while waiting or while COMMAND ran, as flock would have",
    ),
];

/// flock's EX_USAGE.
const EX_USAGE: u8 = 64;
/// flock's EX_DATAERR: the lock could not be taken.
const EX_DATAERR: u8 = 65;
/// flock's EX_NOINPUT: the lock file could not be opened.
const EX_NOINPUT: u8 = 66;
/// flock's EX_UNAVAILABLE: the command could not be run.
const EX_UNAVAILABLE: u8 = 69;
/// flock's EX_OSERR.
const EX_OSERR: u8 = 71;
/// flock's EX_CANTCREAT: a read-only or full file system.
const EX_CANTCREAT: u8 = 73;

fn usage(message: impl Into<String>) -> Usage {
    Usage {
        message: message.into(),
        code: EX_USAGE,
        try_help: false,
    }
}

fn getopt_error(message: impl Into<String>) -> Usage {
    Usage {
        try_help: true,
        ..usage(message)
    }
}

#[derive(Debug, PartialEq)]
enum Parsed {
    Run(Request),
    Help,
    Version,
}

/// What to lock, and what to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Shared,
    Exclusive,
    Unlock,
}

#[derive(Debug, PartialEq)]
enum Target {
    /// FILE (or DIR) and the command to run.
    File { path: PathBuf, argv: Vec<OsString> },
    /// A descriptor the caller has open.
    Fd(i32),
}

/// How long to wait: flock's `-n` and `-w`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    Forever,
    No,
    For(Duration),
}

#[derive(Debug, PartialEq)]
struct Request {
    op: Op,
    wait: Wait,
    conflict: u8,
    close: bool,
    no_fork: bool,
    verbose: bool,
    /// `--fcntl` (or `--start`, `--length`): an OFD lock on these bytes.
    range: Option<ByteRange>,
    target: Target,
}

/// One of flock's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Shared,
    Exclusive,
    Unlock,
    NonBlock,
    Timeout,
    ConflictExitCode,
    Close,
    NoFork,
    Verbose,
    Fcntl,
    Start,
    Length,
    Help,
    Version,
}

impl Opt {
    fn takes_value(self) -> bool {
        matches!(
            self,
            Opt::Timeout | Opt::ConflictExitCode | Opt::Start | Opt::Length
        )
    }
}

/// flock 2.41's long options, in its order (which decides how an ambiguity is reported).
const LONG_OPTIONS: &[(&str, Opt)] = &[
    ("shared", Opt::Shared),
    ("exclusive", Opt::Exclusive),
    ("unlock", Opt::Unlock),
    ("nonblocking", Opt::NonBlock),
    ("nb", Opt::NonBlock),
    ("timeout", Opt::Timeout),
    ("wait", Opt::Timeout),
    ("conflict-exit-code", Opt::ConflictExitCode),
    ("close", Opt::Close),
    ("no-fork", Opt::NoFork),
    ("verbose", Opt::Verbose),
    ("fcntl", Opt::Fcntl),
    ("start", Opt::Start),
    ("length", Opt::Length),
    ("help", Opt::Help),
    ("version", Opt::Version),
];

fn short_option(c: u8) -> Option<Opt> {
    Some(match c {
        b's' => Opt::Shared,
        b'e' | b'x' => Opt::Exclusive,
        b'n' => Opt::NonBlock,
        b'o' => Opt::Close,
        b'F' => Opt::NoFork,
        b'u' => Opt::Unlock,
        b'w' => Opt::Timeout,
        b'E' => Opt::ConflictExitCode,
        b'h' => Opt::Help,
        b'V' => Opt::Version,
        _ => return None,
    })
}

/// The long option `name` (possibly abbreviated) stands for, and its full name, as getopt_long
/// finds it: an exact name, or a prefix of names that all mean one option.
fn long_option(name: &str, whole: &str) -> Result<(&'static str, Opt), Usage> {
    if let Some(exact) = LONG_OPTIONS.iter().find(|(n, _)| *n == name) {
        return Ok(*exact);
    }
    let mut found: Vec<(&'static str, Opt)> = Vec::new();
    for (n, opt) in LONG_OPTIONS.iter().filter(|(n, _)| n.starts_with(name)) {
        if !found.iter().any(|(_, o)| o == opt) {
            found.push((n, *opt));
        }
    }
    // Where util-linux 2.41 added an option that makes an abbreviation ambiguous (`--s`:
    // `--shared` or `--start`), the meaning it had before stands, so that scripts written for
    // the older flock keep working.
    let older: Vec<_> = (found.iter())
        .filter(|(_, o)| !matches!(o, Opt::Fcntl | Opt::Start | Opt::Length))
        .collect();
    if let ([_, _, ..], [one]) = (found.as_slice(), older.as_slice()) {
        return Ok(**one);
    }
    match found.as_slice() {
        [] => Err(getopt_error(format!("unrecognized option '{whole}'"))),
        [one] => Ok(*one),
        many => {
            let names: Vec<String> = many.iter().map(|(n, _)| format!("'--{n}'")).collect();
            Err(getopt_error(format!(
                "option '--{name}' is ambiguous; possibilities: {}",
                names.join(" ")
            )))
        }
    }
}

/// The settings the options make, as flock's `main` keeps them while it reads them.
struct Settings {
    op: Op,
    nonblock: bool,
    timeout: Option<Duration>,
    conflict: u8,
    close: bool,
    no_fork: bool,
    verbose: bool,
    fcntl: bool,
    start: u64,
    length: u64,
}

impl Settings {
    /// Take option `opt` with its `value`; `Ok(Some(_))` for help and version, which end
    /// the parsing where they stand.
    fn take(&mut self, opt: Opt, value: Option<&OsStr>) -> Result<Option<Parsed>, Usage> {
        let value = || {
            value
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        match opt {
            Opt::Shared => self.op = Op::Shared,
            Opt::Exclusive => self.op = Op::Exclusive,
            Opt::Unlock => self.op = Op::Unlock,
            Opt::NonBlock => self.nonblock = true,
            Opt::Close => self.close = true,
            Opt::NoFork => self.no_fork = true,
            Opt::Verbose => self.verbose = true,
            Opt::Fcntl => self.fcntl = true,
            Opt::Timeout => self.timeout = Some(parse_timeout(&value())?),
            Opt::ConflictExitCode => self.conflict = parse_exit_code(&value())?,
            Opt::Start => {
                self.start = parse_size(&value(), "invalid as start offset")?;
                self.fcntl = true;
            }
            Opt::Length => {
                self.length = parse_size(&value(), "invalid as length of lock range")?;
                self.fcntl = true;
            }
            Opt::Help => return Ok(Some(Parsed::Help)),
            Opt::Version => return Ok(Some(Parsed::Version)),
        }
        Ok(None)
    }
}

/// flock's command line: options up to the first word that is not one (or `--`), then FILE and
/// the command, or a descriptor number.
fn parse(args: &[OsString]) -> Result<Parsed, Usage> {
    if args.is_empty() {
        return Err(getopt_error("not enough arguments"));
    }
    let mut s = Settings {
        op: Op::Exclusive,
        nonblock: false,
        timeout: None,
        conflict: 1,
        close: false,
        no_fork: false,
        verbose: false,
        fcntl: false,
        start: 0,
        length: 0,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        if arg == b"--" {
            i += 1;
            break;
        }
        if arg.len() < 2 || arg[0] != b'-' {
            break; // the first word that is not an option: FILE or N
        }
        i += 1;
        if let Some(long) = arg.strip_prefix(b"--") {
            let whole = String::from_utf8_lossy(arg).into_owned();
            let (name, inline) = match long.iter().position(|&b| b == b'=') {
                Some(eq) => (&long[..eq], Some(OsStr::from_bytes(&long[eq + 1..]))),
                None => (long, None),
            };
            let name = String::from_utf8_lossy(name);
            // getopt names the option in its messages by the full name it matched.
            let (full, opt) = long_option(&name, &whole)?;
            let value = match (opt.takes_value(), inline) {
                (false, Some(_)) => {
                    return Err(getopt_error(format!(
                        "option '--{full}' doesn't allow an argument"
                    )));
                }
                (false, None) => None,
                (true, Some(v)) => Some(v),
                (true, None) => {
                    let Some(v) = args.get(i) else {
                        return Err(getopt_error(format!(
                            "option '--{full}' requires an argument"
                        )));
                    };
                    i += 1;
                    Some(v.as_os_str())
                }
            };
            if let Some(end) = s.take(opt, value)? {
                return Ok(end);
            }
            continue;
        }
        // A cluster of short options: -xn, -nw3, -w 3.
        let mut j = 1;
        while j < arg.len() {
            let c = arg[j];
            j += 1;
            let Some(opt) = short_option(c) else {
                // `?` is in flock's option string: getopt returns it, and flock says only
                // "Try ...".
                if c == b'?' {
                    return Err(getopt_error(String::new()));
                }
                return Err(getopt_error(format!(
                    "invalid option -- '{}'",
                    String::from_utf8_lossy(&[c])
                )));
            };
            let value = match opt.takes_value() {
                false => None,
                true if j < arg.len() => {
                    let v = OsStr::from_bytes(&arg[j..]);
                    j = arg.len();
                    Some(v)
                }
                true => {
                    let Some(v) = args.get(i) else {
                        return Err(getopt_error(format!(
                            "option requires an argument -- '{}'",
                            c as char
                        )));
                    };
                    i += 1;
                    Some(v.as_os_str())
                }
            };
            if let Some(end) = s.take(opt, value)? {
                return Ok(end);
            }
        }
    }
    if s.no_fork && s.close {
        return Err(usage("the --no-fork and --close options are incompatible"));
    }
    let rest = &args[i..];
    let target = match rest {
        [] => return Err(usage("requires file descriptor, file or directory")),
        [number] => Target::Fd(parse_fd(number)?),
        [file, flag, cmd @ ..] if flag == "-c" || flag == "--command" => {
            let [cmd] = cmd else {
                return Err(usage(format!(
                    "{} requires exactly one command argument",
                    flag.to_string_lossy()
                )));
            };
            let shell = std::env::var_os("SHELL")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".into());
            Target::File {
                path: PathBuf::from(file),
                argv: vec![shell, "-c".into(), cmd.clone()],
            }
        }
        [file, argv @ ..] => Target::File {
            path: PathBuf::from(file),
            argv: argv.to_vec(),
        },
    };
    let wait = match (s.nonblock, s.timeout) {
        (true, _) => Wait::No,
        (false, None) => Wait::Forever,
        (false, Some(d)) if d.is_zero() => Wait::No,
        (false, Some(d)) => Wait::For(d),
    };
    Ok(Parsed::Run(Request {
        op: s.op,
        wait,
        conflict: s.conflict,
        close: s.close,
        no_fork: s.no_fork,
        verbose: s.verbose,
        range: s.fcntl.then_some(ByteRange {
            start: s.start,
            len: s.length,
        }),
        target,
    }))
}

/// `-w SECS` as flock reads it (strtold, then a timeval): fractions and hex allowed, below a
/// microsecond is 0 (-n). A value a timer cannot take (negative, infinite) is refused as
/// flock's timer refuses it.
fn parse_timeout(text: &str) -> Result<Duration, Usage> {
    let invalid = || usage(format!("invalid timeout: '{text}'"));
    let trimmed = text.trim_start();
    let (negative, digits) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let secs = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(hex, 16).map_err(|_| invalid())? as f64
    } else {
        if digits.is_empty() || digits.starts_with(['+', '-']) {
            return Err(invalid());
        }
        digits.parse::<f64>().map_err(|_| invalid())?
    };
    let secs = if negative { -secs } else { secs };
    // A timeval's seconds and microseconds, truncated as flock truncates them.
    let whole = secs.trunc();
    let micros = ((secs - whole) * 1_000_000.0).trunc();
    if !secs.is_finite() || secs < 0.0 || whole > 1e15 {
        return Err(Usage {
            message: "cannot set up timer: Invalid argument".into(),
            code: EX_OSERR,
            try_help: false,
        });
    }
    Ok(Duration::from_secs(whole as u64) + Duration::from_micros(micros as u64))
}

/// `-E NUMBER`: a decimal 32-bit number, then 0 to 255.
fn parse_exit_code(text: &str) -> Result<u8, Usage> {
    let n = parse_i32(text, "invalid exit code")?;
    u8::try_from(n).map_err(|_| usage("exit code out of range (expected 0 to 255)"))
}

/// A descriptor number, as flock reads it.
fn parse_fd(word: &OsStr) -> Result<i32, Usage> {
    parse_i32(&word.to_string_lossy(), "bad file descriptor")
}

/// strtos32_or_err: decimal, leading blanks and a sign allowed, nothing after.
fn parse_i32(text: &str, what: &str) -> Result<i32, Usage> {
    let body = text.trim_start();
    let digits = body.strip_prefix(['+', '-']).unwrap_or(body);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(usage(format!("{what}: '{text}'")));
    }
    body.parse::<i32>()
        .map_err(|_| usage(format!("{what}: '{text}': Numerical result out of range")))
}

/// `--start`, `--length`: a size as util-linux reads one: a number (decimal, 0x hex or 0
/// octal) with an optional binary suffix (K, M, G, T, P, E, optionally followed by iB) or a
/// decimal one (KB, MB, ...).
fn parse_size(text: &str, what: &str) -> Result<u64, Usage> {
    // util-linux's strtosize_or_err: the cause in the C library's words.
    let invalid = || usage(format!("{what}: '{text}': Invalid argument"));
    let too_big = || usage(format!("{what}: '{text}': Numerical result out of range"));
    let body = text.trim_start();
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (16, h)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let (number, suffix) = digits.split_at(end);
    if number.is_empty() && radix != 8 {
        return Err(invalid());
    }
    let n = match number {
        "" => 0,
        _ => u64::from_str_radix(number, radix).map_err(|_| too_big())?,
    };
    let power = |unit: char| {
        "KMGTPE"
            .find(unit.to_ascii_uppercase())
            .map(|p| p as u32 + 1)
    };
    let multiplier: u64 = match suffix.as_bytes() {
        [] => 1,
        [u] | [u, b'i', b'B' | b'b'] => 1024u64.pow(power(*u as char).ok_or_else(invalid)?),
        [u, b'B' | b'b'] => 1000u64.pow(power(*u as char).ok_or_else(invalid)?),
        _ => return Err(invalid()),
    };
    n.checked_mul(multiplier).ok_or_else(too_big)
}

/// Whether the process was invoked as flock (`flock ...`, through a link) or as `fsync flock
/// ...`: the name messages use and the words after it.
pub(super) fn invocation(args: &[OsString]) -> Option<(String, Vec<OsString>)> {
    let argv0 = std::path::Path::new(args.first()?);
    if argv0.file_name()? == "flock" {
        return Some((argv0.to_string_lossy().into_owned(), args[1..].to_vec()));
    }
    match args.get(1) {
        Some(word) if word == "flock" => Some(("fsync".to_string(), args[2..].to_vec())),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
