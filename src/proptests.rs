//! Property-based fuzzing of the parsers of state that fsync reads back.
//!
//! fsync synchronises processes through files in shared directories (`/tmp`, a project
//! directory, a network share), so the files it parses are written not only by fsync but by any
//! other user who can write there: holder records (`.NAME.fsync`), mailbox queue names
//! (`q/SEQ.UNIQ.FROM.KIND`) and sequence numbers, a semaphore's `slots` file. Their content is
//! input from someone else, and a parser of it must never panic (a panic in a holder is a lock
//! that the kernel releases under a half-done critical section) and never produce wrong trust
//! (a holder that is not there, a fence nobody handed out, a message order nobody made). The
//! same holds, with less at stake, for the kernel's `/proc/locks` and for the inherited
//! `FSYNC_MUTEX_HELD` variable.
//!
//! What another user writes also reaches the terminal of whoever runs a report (`msg list`,
//! `mutex status`): the command's escaping of such text is tested here too (it never lets a
//! control character through, and loses nothing).
//!
//! The properties run [`CASES`] cases each by default; set `PROPTEST_CASES` to run more (or
//! fewer). Inputs include arbitrary strings, non-UTF-8 bytes made lossy, embedded NULs, CR/LF,
//! very long lines and numbers around the integer limits (2^64-1, 2^64, negative, `+1`).
//!
//! The `#[ignore]`d tests in [`findings`] are findings: minimal inputs on which the code panics or
//! gives a wrong answer, kept here (not fixed) until the code is fixed. Run them with
//! `cargo test --lib proptests -- --ignored`.

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    time::{Duration, Instant},
};

use proptest::{prelude::*, sample::Index};

use crate::{
    holder::{self, Holder, Record},
    msg::MessageName,
    mutex::HeldEntry,
    platform::procinfo::{self, KernelLock},
    sem,
};

mod findings;

/// Cases per property unless `PROPTEST_CASES` says otherwise: the module runs in seconds in a
/// debug build.
const CASES: u32 = 512;

fn config() -> ProptestConfig {
    // The `proptest!` macro applies `PROPTEST_CASES` (and the other `PROPTEST_*` variables)
    // over this.
    ProptestConfig {
        cases: CASES,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// Text where a number is expected: valid ones, the integer limits and just past them, signs,
/// blanks, other notations, long digit runs.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u128>().prop_map(|n| n.to_string()),
        Just(u64::MAX.to_string()),
        Just((u128::from(u64::MAX) + 1).to_string()),
        Just(u32::MAX.to_string()),
        Just((u64::from(u32::MAX) + 1).to_string()),
        Just(i32::MAX.to_string()),
        Just(i64::MIN.to_string()),
        prop::sample::select(vec![
            "", "0", "-0", "-1", "+1", " 1", "1 ", "0x10", "1e3", "1.5", "١"
        ])
        .prop_map(str::to_string),
        "[0-9]{1,60}",
    ]
}

/// Nasty text: anything, non-UTF-8 bytes made lossy, separators and control characters,
/// fragments of the formats, very long lines.
fn nasty_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        2 => number_text(),
        2 => prop::collection::vec(any::<u8>(), 0..256)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => prop::collection::vec(
            prop::sample::select(vec![
                "\0", "\r", "\n", "\r\n", " ", "\t", ".", ":", ";", "~", "-", "/", "end", "held",
                "fsync-holder 1", "é", "\u{2028}", "\u{feff}", "18446744073709551615",
            ]),
            0..12,
        )
        .prop_map(|v| v.concat()),
        1 => (any::<char>(), 1000usize..20_000).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
    ]
}

/// A command line around the longest a record keeps (16 KiB): a few ASCII bytes, then one
/// character repeated so that the limit falls before, on or inside one of them.
fn long_command() -> impl Strategy<Value = String> {
    (0usize..4, any::<char>(), -2isize..=2).prop_map(|(ascii, c, off)| {
        let n = (KEPT_COMMAND - ascii) / c.len_utf8();
        let n = n.saturating_add_signed(off);
        "x".repeat(ascii) + &std::iter::repeat_n(c, n).collect::<String>()
    })
}

/// A host or command: short, any characters, with newlines and carriage returns often.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9 .=-]{0,20}",
        "[a-z \\r\\n\\x00\t]{0,20}",
        prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

fn any_holder() -> impl Strategy<Value = Holder> {
    (
        1..=u32::MAX, // a holder without a pid is no holder
        any::<Option<u32>>(),
        field(),
        any::<u64>(),
        prop_oneof![4 => field(), 1 => long_command()],
    )
        .prop_map(|(pid, child, host, since_us, command)| Holder {
            pid,
            child,
            host,
            since_us,
            command,
        })
}

fn any_record() -> impl Strategy<Value = Record> {
    (
        // Fences from MAX_FENCE up are not believed (see the findings below).
        prop_oneof![0..holder::MAX_FENCE, Just(0), Just(holder::MAX_FENCE - 1)],
        prop::option::of(any_holder()),
    )
        .prop_map(|(fence, holder)| Record { fence, holder })
}

/// The longest command line, in bytes, that a record keeps (the rule stated again here, not
/// taken from `holder`, so that the properties check it).
const KEPT_COMMAND: usize = 16 * 1024;

/// The command line a record keeps: its longest prefix of whole characters within
/// [`KEPT_COMMAND`] bytes (counted character by character, unlike `holder::truncated`).
fn kept_command(command: &str) -> String {
    let mut bytes = 0;
    command
        .chars()
        .take_while(|c| {
            bytes += c.len_utf8();
            bytes <= KEPT_COMMAND
        })
        .collect()
}

/// What a record reads back as: `render` puts host and command on one line each, replacing
/// newlines and carriage returns by spaces, and keeps the command's first [`KEPT_COMMAND`]
/// bytes (whole characters).
fn normalised(rec: &Record) -> Record {
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    Record {
        fence: rec.fence,
        holder: rec.holder.as_ref().map(|h| Holder {
            host: one_line(&h.host),
            command: one_line(&kept_command(&h.command)),
            ..h.clone()
        }),
    }
}

/// One line of something like a holder record.
fn holder_line() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "fsync-holder",
        "fence",
        "state",
        "pid",
        "child",
        "host",
        "since",
        "command",
        "end",
        "",
        "FENCE",
        "fence\t",
    ]);
    let value = prop_oneof![
        number_text(),
        prop::sample::select(vec!["held", "released", "held ", "1"]).prop_map(str::to_string),
        nasty_text(),
    ];
    prop_oneof![
        4 => (key, value).prop_map(|(k, v)| format!("{k} {v}")),
        1 => prop::sample::select(vec!["end", "fsync-holder 1", "state held", "end ", " end"])
            .prop_map(str::to_string),
        1 => nasty_text(),
    ]
}

/// Text that looks more or less like a holder record (so that the parser gets past its first
/// line often), with any line endings.
fn holder_text() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "fsync-holder 1\n",
            "fsync-holder 1\r\n",
            "",
            "fsync-holder 2\n",
        ]),
        prop::collection::vec(
            (
                holder_line(),
                prop::sample::select(vec!["\n", "\n", "\n", "\r\n", "\r", "\0", ""]),
            ),
            0..12,
        ),
    )
        .prop_map(|(magic, lines)| {
            let mut text = magic.to_string();
            for (line, sep) in lines {
                text.push_str(&line);
                text.push_str(sep);
            }
            text
        })
}

/// A `UNIQ` part of a message name: no dot.
fn name_part() -> impl Strategy<Value = String> {
    prop_oneof!["[^.]{0,12}", "[a-zA-Z0-9_-]{1,12}"]
}

/// A `FROM` part of a message name: a bus name may hold dots.
fn from_part() -> impl Strategy<Value = String> {
    prop_oneof![
        name_part(),
        "[a-zA-Z0-9_-]{1,6}(\\.[a-zA-Z0-9_-]{1,6}){1,3}",
        "[^.]{0,6}(\\.[^.]{0,6}){0,3}",
    ]
}

/// A message name that `render` can write and `parse` must read back.
fn valid_name() -> impl Strategy<Value = MessageName> {
    (
        prop_oneof![any::<u64>(), Just(0), Just(u64::MAX)],
        name_part().prop_filter("a name has a UNIQ", |u| !u.is_empty()),
        prop::option::of(
            from_part().prop_filter("`-` means no sender", |f| f != "-" && !f.is_empty()),
        ),
        any::<bool>(),
        prop_oneof![Just(0u32), any::<u32>()],
        prop_oneof![Just(0u32), any::<u32>()],
        (
            0..=crate::msg::MAX_PRIORITY,
            prop::option::of(prop_oneof![1..=u64::MAX, Just(1), Just(u64::MAX)]),
        ),
    )
        .prop_map(
            |(seq, uniq, from, sync, failed, lost, (priority, timeout_ms))| MessageName {
                seq,
                uniq,
                from,
                sync,
                failed: if sync { 0 } else { failed },
                lost: if sync { 0 } else { lost },
                priority: if sync { 0 } else { priority },
                timeout_ms: if sync { None } else { timeout_ms },
            },
        )
}

/// One `/proc/locks` entry, as the kernel writes it.
#[derive(Debug, Clone)]
struct LockLine {
    class: &'static str,
    waiter: bool,
    write: bool,
    pid: i64,
    major: u64,
    minor: u64,
    ino: u64,
}

impl LockLine {
    fn render(&self, id: usize) -> String {
        // fs/locks.c: "%lld: ", "-> " for a waiter, "FLOCK  ADVISORY  ", "WRITE "/"READ  ",
        // "%d %02x:%02x:%lu ", then the range.
        let kind = if self.class == "FLOCK" {
            "ADVISORY "
        } else {
            "ACTIVE   "
        };
        format!(
            "{id}: {}{}  {kind} {} {} {:02x}:{:02x}:{} 0 EOF",
            if self.waiter { "-> " } else { "" },
            self.class,
            if self.write { "WRITE" } else { "READ " },
            self.pid,
            self.major,
            self.minor,
            self.ino,
        )
    }
}

/// A file as `(major, minor, inode)`, the kernel's device numbers being 12 and 20 bits.
fn file_id() -> impl Strategy<Value = (u64, u64, u64)> {
    (0u64..4096, 0u64..(1 << 20), any::<u64>())
}

fn lock_line(target: (u64, u64, u64)) -> impl Strategy<Value = LockLine> {
    (
        prop::sample::select(vec!["FLOCK", "FLOCK", "POSIX", "OFDLCK", "LEASE"]),
        prop::bool::weighted(0.2),
        any::<bool>(),
        prop_oneof![4 => 1i64..=i64::from(i32::MAX), 1 => Just(-1i64), 1 => Just(0i64)],
        prop_oneof![Just(target), file_id()],
    )
        .prop_map(
            |(class, waiter, write, pid, (major, minor, ino))| LockLine {
                class,
                waiter,
                write,
                pid,
                major,
                minor,
                ino,
            },
        )
}

fn proc_locks() -> impl Strategy<Value = ((u64, u64, u64), Vec<LockLine>)> {
    file_id().prop_flat_map(|target| {
        (
            Just(target),
            prop::collection::vec(lock_line(target), 0..12),
        )
    })
}

fn dev((major, minor, _): (u64, u64, u64)) -> u64 {
    nix::sys::stat::makedev(major, minor)
}

fn write_file(path: &Path, content: &[u8]) {
    std::fs::write(path, content).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Holder records
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn holder_parse_never_panics_on_any_text(text in nasty_text()) {
        let _ = holder::parse(&text);
        let _ = holder::parse(&format!("fsync-holder 1\n{text}\nend\n"));
    }

    #[test]
    fn holder_parse_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = holder::parse(&String::from_utf8_lossy(&bytes));
    }

    /// Whatever the text, a record is only ever what its lines say: the magic first, an `end`
    /// line, a holder only after `state held`, a fence or pid only from a line that names it.
    #[test]
    fn holder_parse_trusts_only_what_the_lines_say(text in holder_text()) {
        let Some(rec) = holder::parse(&text) else {
            return Ok(());
        };
        let mut lines = text.lines();
        prop_assert_eq!(lines.next(), Some("fsync-holder 1"));
        let rest: Vec<&str> = lines.collect();
        let Some(end) = rest.iter().position(|&l| l == "end") else {
            return Err(TestCaseError::fail("a record without an `end` line"));
        };
        let body = &rest[..end];
        let says = |key: &str, value: &dyn Fn(&str) -> bool| {
            body.iter()
                .any(|l| l.split_once(' ').is_some_and(|(k, v)| k == key && value(v)))
        };
        if rec.fence != 0 {
            prop_assert!(says("fence", &|v| v.parse() == Ok(rec.fence)));
        }
        if let Some(h) = &rec.holder {
            prop_assert!(body.contains(&"state held"));
            if h.pid != 0 {
                prop_assert!(says("pid", &|v| v.parse() == Ok(h.pid)));
            }
            if let Some(c) = h.child {
                prop_assert!(says("child", &|v| v.parse() == Ok(c)));
            }
        }
        // What was read renders to the same thing (on one line each).
        prop_assert_eq!(holder::parse(&holder::render(&rec)), Some(normalised(&rec)));
    }

    #[test]
    fn holder_records_round_trip(rec in any_record()) {
        let text = holder::render(&rec);
        prop_assert_eq!(holder::parse(&text), Some(normalised(&rec)));
        // With CR/LF line endings too (a record edited on another system).
        prop_assert_eq!(holder::parse(&text.replace('\n', "\r\n")), Some(normalised(&rec)));
    }

    /// A record with host and command on one line each, the command within the limit, reads
    /// back as it was.
    #[test]
    fn holder_records_without_newlines_round_trip_exactly(
        rec in any_record().prop_map(|mut r| {
            if let Some(h) = &mut r.holder {
                h.host.retain(|c| c != '\n' && c != '\r');
                h.command.retain(|c| c != '\n' && c != '\r');
                h.command = kept_command(&h.command);
            }
            r
        })
    ) {
        prop_assert_eq!(holder::parse(&holder::render(&rec)), Some(rec));
    }

    /// A torn read (any prefix that stops before the `end` line is complete) is no record.
    #[test]
    fn torn_holder_records_are_rejected(rec in any_record(), cut in any::<Index>()) {
        let text = holder::render(&rec);
        // `text` ends in "end\n": a prefix of up to len - 2 bytes has no whole `end` line.
        let mut at = cut.index(text.len() - 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        prop_assert_eq!(holder::parse(&text[..at]), None);
        let without_end = text.strip_suffix("end\n").unwrap();
        prop_assert_eq!(holder::parse(without_end), None);
    }

    /// A shorter record written over a longer one (before the truncation) reads as the shorter
    /// one, whatever the stale tail says.
    #[test]
    fn stale_tails_are_ignored(rec in any_record(), old in any_record(), tail in nasty_text()) {
        let new = holder::render(&rec);
        let mut bytes = holder::render(&old).into_bytes();
        if bytes.len() < new.len() {
            bytes.resize(new.len(), 0);
        }
        bytes[..new.len()].copy_from_slice(new.as_bytes());
        // (The tail may start inside a character: see the finding on non-UTF-8 tails.)
        let text = String::from_utf8_lossy(&bytes);
        prop_assert_eq!(holder::parse(&text), Some(normalised(&rec)));
        prop_assert_eq!(holder::parse(&(new + &tail)), Some(normalised(&rec)));
    }

    /// Reading a record file: no panic on any content, and a rendered record reads back.
    #[test]
    fn holder_read_from_any_file(bytes in prop::collection::vec(any::<u8>(), 0..4096), rec in any_record()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".l.fsync");
        write_file(&path, &bytes);
        let got = holder::read_from(&std::fs::File::open(&path).unwrap());
        let expected = String::from_utf8(bytes).ok().and_then(|t| holder::parse(&t));
        prop_assert_eq!(got, expected);
        write_file(&path, holder::render(&rec).as_bytes());
        prop_assert_eq!(
            holder::read_from(&std::fs::File::open(&path).unwrap()),
            Some(normalised(&rec))
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Message names
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn message_name_parse_never_panics(text in nasty_text()) {
        let _ = MessageName::parse(&text);
    }

    #[test]
    fn message_name_parse_never_panics_on_dotted_fragments(
        parts in prop::collection::vec(prop_oneof![number_text(), nasty_text(),
            prop::sample::select(vec!["msg", "sync", "-", "", "msg,p2", "msg+1,t5", "msg-2,p3,t90"]).prop_map(str::to_string)], 0..7)
    ) {
        let name = parts.join(".");
        if let Some(n) = MessageName::parse(&name) {
            // Whatever it accepted is a name it can write and read back.
            prop_assert_eq!(MessageName::parse(&n.render()), Some(n.clone()));
            prop_assert!(name.split('.').count() >= 4);
            prop_assert_eq!(n.from.as_deref().unwrap_or("-").split('.').count() + 3, name.split('.').count());
            prop_assert_eq!(n.sync, name.ends_with(".sync"));
        }
    }

    #[test]
    fn message_names_round_trip(n in valid_name()) {
        let text = n.render();
        prop_assert_eq!(MessageName::parse(&text), Some(n.clone()));
        let mut kind = match (n.sync, n.failed, n.lost) {
            (true, _, _) => "sync".to_string(),
            (false, 0, 0) => "msg".to_string(),
            (false, f, 0) => format!("msg+{f}"),
            (false, 0, l) => format!("msg-{l}"),
            (false, f, l) => format!("msg+{f}-{l}"),
        };
        // KIND options, in their fixed order: `,pP` then `,tMS`.
        if n.priority > 0 {
            kind += &format!(",p{}", n.priority);
        }
        if let Some(ms) = n.timeout_ms {
            kind += &format!(",t{ms}");
        }
        prop_assert_eq!(&text, &format!("{}.{kind}", n.stem()));
        prop_assert_eq!(text.split('.').next().unwrap().len(), 20, "SEQ is 20 digits");
    }

    /// Names sort in enqueue order: the 20-digit `SEQ` orders as the number does.
    #[test]
    fn message_names_sort_by_seq(a in valid_name(), b in valid_name()) {
        let (sa, sb) = (a.render(), b.render());
        prop_assert_eq!(a.seq.cmp(&b.seq), sa[..20].cmp(&sb[..20]));
    }

    /// Dots beyond the three separators: `SEQ`, `UNIQ` and `KIND` hold none, so a name with
    /// more is read with the extra dots in `FROM` (a bus name may hold dots) or not at all,
    /// and never as a name with a dotted `UNIQ`.
    #[test]
    fn message_names_with_extra_dots_go_to_from_or_are_rejected(n in valid_name(), extra in name_part(), at in any::<Index>()) {
        let appended = MessageName::parse(&format!("{}.{extra}", n.render()));
        match extra.as_str() {
            "msg" | "sync" => prop_assert!(appended.is_some_and(|a| a.from.is_some())),
            _ => prop_assert_eq!(appended, None),
        }
        let digits = !extra.is_empty() && extra.bytes().all(|b| b.is_ascii_digit());
        let prefixed = MessageName::parse(&format!("{extra}.{}", n.render()));
        if !digits {
            prop_assert_eq!(prefixed, None);
        }
        // A dot inside UNIQ: never read back as that UNIQ.
        let mut dotted = n.clone();
        let i = at.index(dotted.uniq.chars().count() + 1);
        let byte = dotted.uniq.char_indices().nth(i).map_or(dotted.uniq.len(), |(b, _)| b);
        dotted.uniq.insert(byte, '.');
        let parsed = MessageName::parse(&dotted.render());
        prop_assert!(parsed.as_ref().is_none_or(|p| !p.uniq.contains('.')), "{:?}", parsed);
        // A dot at the end of FROM stays in FROM.
        let mut dotted = n;
        dotted.from = Some(format!("{}.", dotted.from.unwrap_or_default()));
        prop_assert_eq!(MessageName::parse(&dotted.render()), Some(dotted));
    }

    #[test]
    fn message_names_with_a_bad_seq_are_rejected(
        n in valid_name(),
        big in (u128::from(u64::MAX) + 1)..=u128::MAX,
        negative in i64::MIN..0,
        junk in "[^0-9+.][^.]{0,8}",
    ) {
        let rest = n.render()[20..].to_string(); // ".UNIQ.FROM.KIND"
        prop_assert_eq!(MessageName::parse(&rest), None, "empty SEQ");
        prop_assert_eq!(MessageName::parse(&format!("{big}{rest}")), None, "SEQ over u64");
        prop_assert_eq!(MessageName::parse(&format!("{big:030}{rest}")), None);
        prop_assert_eq!(MessageName::parse(&format!("{negative}{rest}")), None);
        prop_assert_eq!(MessageName::parse(&format!("{junk}{rest}")), None);
        prop_assert_eq!(MessageName::parse(&format!("{}{rest}", u64::MAX)).map(|m| m.seq), Some(u64::MAX));
    }

    #[test]
    fn message_names_with_a_bad_kind_or_too_few_parts_are_rejected(n in valid_name(), kind in "[^.]{0,8}") {
        let stem = n.stem();
        if kind != "msg" && kind != "sync" {
            prop_assert_eq!(MessageName::parse(&format!("{stem}.{kind}")), None);
        }
        prop_assert_eq!(MessageName::parse(&stem), None);
        let (head, _) = stem.rsplit_once('.').unwrap();
        prop_assert_eq!(MessageName::parse(head), None);
    }
}

// ---------------------------------------------------------------------------------------------
// Escaping untrusted text for output
// ---------------------------------------------------------------------------------------------

// The command's escaping of what other users wrote (names, command lines, hosts), before it
// reaches a terminal. It lives in `src/cli/` and uses `std` only, so it is compiled in here too.
#[path = "cli/escape.rs"]
#[allow(dead_code)]
mod escape;

/// The inverse of the escaping, written independently of it from its documented rules: the
/// bytes `text` stands for, or `None` if `text` is not something the escaping produces (a
/// backslash that starts no escape, a raw control character).
fn unescape(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            if c.is_control() {
                return None;
            }
            out.extend_from_slice(c.to_string().as_bytes());
            continue;
        }
        let byte = match chars.next()? {
            '\\' => b'\\',
            'a' => 7,
            'b' => 8,
            't' => b'\t',
            'n' => b'\n',
            'v' => 11,
            'f' => 12,
            'r' => b'\r',
            'e' => 27,
            'x' => {
                let hex: String = [chars.next()?, chars.next()?].iter().collect();
                if !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                    return None;
                }
                u8::from_str_radix(&hex, 16).ok()?
            }
            _ => return None,
        };
        out.push(byte);
    }
    Some(out)
}

/// Bytes as other users write them: anything, control characters and escape sequences
/// often, backslashes, non-UTF-8, the invisible characters that reorder a line.
fn untrusted_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        any::<String>().prop_map(String::into_bytes),
        nasty_text().prop_map(String::into_bytes),
        prop::collection::vec(
            prop::sample::select(vec![
                "\x1b]0;pwned\x07",
                "\x1b[2J",
                "\n",
                "\r",
                "\t",
                "\\",
                "\\x41",
                "\\n",
                "x",
                "\u{9b}",
                "\u{202e}",
                "\u{2028}",
                "\u{7f}",
                "\0",
                "\u{10ffff}",
                "é",
            ]),
            0..16,
        )
        .prop_map(|v| v.concat().into_bytes()),
        (prop::collection::vec(any::<u8>(), 0..16), any::<String>()).prop_map(|(mut b, s)| {
            b.extend_from_slice(s.as_bytes());
            b
        }),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Nothing that moves the cursor, rings, starts an escape sequence or reorders the line
    /// survives, and the output is one line.
    #[test]
    fn escaped_text_has_no_control_characters(bytes in untrusted_bytes()) {
        let out = escape::escaped_bytes(&bytes);
        let bad = out.chars().find(|&c| {
            c.is_control() || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'
                | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        });
        prop_assert_eq!(bad, None, "{:?} escaped as {:?}", bytes, out);
    }

    /// The same input always gives the same output, by either entry point.
    #[test]
    fn escaping_is_deterministic(bytes in untrusted_bytes()) {
        let once = escape::escaped_bytes(&bytes);
        prop_assert_eq!(&once, &escape::escaped_bytes(&bytes));
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let text = escape::escaped(text);
            prop_assert_eq!(text.as_ref(), once.as_str());
        }
    }

    /// Ordinary names and command lines are shown as they are.
    #[test]
    fn printable_ascii_but_backslash_is_unchanged(text in "[ -\\[\\]-~]{0,64}") {
        prop_assert!(matches!(escape::escaped(&text), std::borrow::Cow::Borrowed(_)));
        prop_assert_eq!(escape::escaped_bytes(text.as_bytes()), text);
    }

    /// Nothing is lost or made ambiguous: the output decodes back to the input's bytes.
    #[test]
    fn escaping_round_trips(bytes in untrusted_bytes()) {
        let out = escape::escaped_bytes(&bytes);
        prop_assert_eq!(unescape(&out), Some(bytes), "escaped as {:?}", out);
    }
}

// ---------------------------------------------------------------------------------------------
// Semaphore `slots`
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn recorded_slots_of_any_content(bytes in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        nasty_text().prop_map(String::into_bytes),
        number_text().prop_map(|n| format!("{n}\n").into_bytes()),
    ]) {
        let dir = tempfile::tempdir().unwrap();
        write_file(&dir.path().join("slots"), &bytes);
        // A count where the trimmed text is one, an error otherwise (never a guess).
        let got = sem::recorded_slots(dir.path()).ok();
        // (1 to MAX_SLOTS, in a short file: anything else is not a count fsync wrote.)
        let expected = std::str::from_utf8(&bytes)
            .ok()
            .filter(|_| bytes.len() as u64 <= sem::SLOTS_TEXT)
            .and_then(|t| t.trim().parse::<usize>().ok())
            .filter(|n| (1..=sem::MAX_SLOTS).contains(n));
        prop_assert_eq!(got, expected.map(Some));
    }

    #[test]
    fn recorded_slots_round_trip(n in 1..=sem::MAX_SLOTS) {
        let dir = tempfile::tempdir().unwrap();
        write_file(&dir.path().join("slots"), format!("{n}\n").as_bytes());
        prop_assert_eq!(sem::recorded_slots(dir.path()).unwrap(), Some(n));
    }
}

// ---------------------------------------------------------------------------------------------
// /proc/locks
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn proc_locks_parse_never_panics(text in nasty_text(), dev in any::<u64>(), ino in any::<u64>()) {
        let _ = procinfo::parse_proc_locks(&text, dev, ino, &["FLOCK"]);
    }

    #[test]
    fn proc_locks_parse_never_panics_on_mangled_lines(
        (target, lines) in proc_locks(),
        cut in any::<Index>(),
        noise in nasty_text(),
    ) {
        let mut text: String = lines.iter().enumerate().map(|(i, l)| l.render(i + 1) + "\n").collect();
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, &noise);
        let _ = procinfo::parse_proc_locks(&text, dev(target), target.2, &["FLOCK"]);
    }

    /// Well-formed lines give back exactly the `flock` holders (not the waiters, not POSIX or
    /// OFD locks, not other files) of the file, with their pid and type.
    #[test]
    fn proc_locks_give_the_holders_of_the_file((target, lines) in proc_locks()) {
        let text: String = lines.iter().enumerate().map(|(i, l)| l.render(i + 1) + "\n").collect();
        let expected: Vec<KernelLock> = lines
            .iter()
            .filter(|l| l.class == "FLOCK" && !l.waiter && (l.major, l.minor, l.ino) == target)
            .map(|l| KernelLock {
                pid: (l.pid > 0).then(|| u32::try_from(l.pid).unwrap()),
                exclusive: l.write,
            })
            .collect();
        prop_assert_eq!(procinfo::parse_proc_locks(&text, dev(target), target.2, &["FLOCK"]), expected);
    }
}

// ---------------------------------------------------------------------------------------------
// FSYNC_MUTEX_HELD entries
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn held_entry_parse_never_panics(text in nasty_text()) {
        let _ = HeldEntry::parse(&text);
    }

    #[test]
    fn held_entry_parse_never_panics_on_colon_fragments(
        parts in prop::collection::vec(prop_oneof![number_text(), Just("-".to_string()), nasty_text()], 0..6)
    ) {
        let text = parts.join(":");
        if let Some(e) = HeldEntry::parse(&text) {
            // Only from four fields that say so.
            let f: Vec<&str> = text.split(':').collect();
            prop_assert!(f.len() >= 4);
            prop_assert_eq!(Ok(e.dev), f[0].parse());
            prop_assert_eq!(Ok(e.ino), f[1].parse());
            prop_assert_eq!(e.fd.is_none(), f[2] == "-");
            prop_assert_eq!(Ok(e.pid), f[3].parse());
        }
    }

    #[test]
    fn held_entries_round_trip(
        dev in any::<u64>(),
        ino in any::<u64>(),
        fd in prop::option::of(0..=i32::MAX),
        pid in any::<u32>(),
    ) {
        let fd_text = fd.map_or("-".to_string(), |f| f.to_string());
        let e = HeldEntry::parse(&format!("{dev}:{ino}:{fd_text}:{pid}")).unwrap();
        prop_assert_eq!((e.dev, e.ino, e.fd, e.pid), (dev, ino, fd, pid));
        // Fewer fields, or a number out of range, is no entry.
        let over = u128::from(u64::MAX) + 1;
        let bad = [
            format!("{dev}:{ino}:{fd_text}"),
            format!("{over}:{ino}:{fd_text}:{pid}"),
            format!("{dev}:{ino}:{fd_text}:{}", u64::from(pid) + (1 << 32)),
        ];
        for text in bad {
            prop_assert!(HeldEntry::parse(&text).is_none(), "accepted {}", text);
        }
    }
}
