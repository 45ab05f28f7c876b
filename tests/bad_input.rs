//! Bad input, every verb: the table below is the record of what each gives (exit status, and a
//! part of the one `fsync: ` line that must name the path and the cause). Usage errors are
//! clap's, in the same one-line form (exit 2). Nothing panics (exit 70) and nothing hangs (the harness's
//! deadline).

use std::{ffi::OsStr, os::unix::ffi::OsStrExt};

use crate::harness::{TestDir, eventually};

/// (arguments, exit status, part of stderr)
const TABLE: &[(&[&str], i32, &str)] = &[
    // missing parent directory
    (
        &["mutex", "run", "no/dir/L", "--", "true"],
        66,
        "parent directory no/dir does not exist",
    ),
    (&["mutex", "status", "no/dir/L"], 66, "parent directory"),
    (
        &["mutex", "watch", "-t", "0", "no/dir/L"],
        66,
        "parent directory",
    ),
    (
        &["group", "join", "no/dir/G", "--", "true"],
        66,
        "parent directory",
    ),
    (&["group", "empty", "no/dir/G"], 66, "parent directory"),
    (&["event", "signal", "no/dir/E"], 66, "parent directory"),
    (
        &["event", "wait", "-t", "0", "no/dir/E"],
        66,
        "parent directory",
    ),
    (
        &["msg", "post", "no/dir/B", "--data", "x"],
        66,
        "parent directory",
    ),
    (&["msg", "recv", "-n", "no/dir/B"], 66, "parent directory"),
    (
        &["bus", "connect", "no/dir/BUS", "a"],
        66,
        "parent directory",
    ),
    (
        &["swmr", "read", "no/dir/L", "--", "true"],
        66,
        "parent directory",
    ),
    (
        &["sem", "run", "no/dir/S", "--slots", "2", "--", "true"],
        66,
        "parent directory",
    ),
    (
        &[
            "grouplock",
            "run",
            "no/dir/GL",
            "--group",
            "a",
            "--",
            "true",
        ],
        66,
        "parent directory",
    ),
    (&["doctor", "no/dir/x"], 66, "parent directory"),
    // a path of the wrong kind: a directory where a file is needed, and the reverse
    // (a directory can be a whole-file lock, as with flock(1), but not a byte-range one)
    (
        &["mutex", "run", "--range", "1", "dir", "--", "true"],
        66,
        "is a directory",
    ),
    (
        &["swmr", "write", "--range", "1", "dir", "--", "true"],
        66,
        "is a directory",
    ),
    (&["event", "status", "dir"], 66, "is a directory"),
    (
        &["group", "join", "file", "--", "true"],
        66,
        "not a directory",
    ),
    (
        &["msg", "post", "file", "--data", "x"],
        66,
        "not a directory",
    ),
    (
        &["sem", "run", "file", "--slots", "1", "--", "true"],
        66,
        "not a directory",
    ),
    (
        &["mutex", "run", "file/L", "--", "true"],
        66,
        "not a directory",
    ),
    // symbolic links: dangling, and a loop
    (
        &["mutex", "run", "dangling", "--", "true"],
        66,
        "dangling symbolic link",
    ),
    (&["mutex", "run", "loop", "--", "true"], 66, "loop"),
    // invalid values
    (
        &["mutex", "run", "-t", "soon", "L", "--", "true"],
        2,
        "invalid duration",
    ),
    (
        &["mutex", "run", "-t", "-1", "L", "--", "true"],
        2,
        "unexpected argument '-1'",
    ),
    (
        &["mutex", "run", "-t=-1", "L", "--", "true"],
        2,
        "invalid duration",
    ),
    (
        &[
            "mutex",
            "run",
            "-t",
            "18446744073709551615",
            "L",
            "--",
            "true",
        ],
        2,
        "invalid value '18446744073709551615' for '--timeout <DUR>': duration '18446744073709551615' is too large",
    ),
    (
        &[
            "mutex",
            "run",
            "--poll",
            "99999999999999999999s",
            "L",
            "--",
            "true",
        ],
        2,
        "--poll <DUR>': duration '99999999999999999999s' is too large",
    ),
    (
        &["mutex", "run", "--poll", "0", "L", "--", "true"],
        2,
        "poll",
    ),
    (
        &["group", "join", "--lease", "0", "G", "--", "true"],
        2,
        "invalid lease '0': must be at least 1s",
    ),
    (
        &["bus", "connect", "--lease", "5s", "BUS", "n"],
        2,
        "--hold",
    ),
    (&["mutex", "run", "-E", "256", "L", "--", "true"], 2, "256"),
    (
        &["mutex", "run", "-E", "x", "L", "--", "true"],
        2,
        "invalid",
    ),
    (
        &["mutex", "run", "--range", "1:x", "L", "--", "true"],
        2,
        "invalid range",
    ),
    (
        &[
            "mutex",
            "run",
            "--range",
            "0x8000000000000000",
            "L",
            "--",
            "true",
        ],
        2,
        "invalid range",
    ),
    (
        &["sem", "run", "S", "--slots", "0", "--", "true"],
        2,
        "slot count",
    ),
    (
        &["sem", "run", "S", "--slots", "99999", "--", "true"],
        2,
        "slot count",
    ),
    (
        &["grouplock", "run", "GL", "--group", "a b", "--", "true"],
        2,
        "invalid",
    ),
    (
        &[
            "grouplock",
            "run",
            "GL",
            "--group",
            "x",
            "--max",
            "0",
            "--",
            "true",
        ],
        2,
        "--max",
    ),
    (
        &["bus", "connect", "BUS", "../up"],
        2,
        "invalid participant name",
    ),
    (
        &["mutex", "lock", "--fd", "99"],
        66,
        "not an open file descriptor",
    ),
    (
        &["mutex", "unlock", "--fd=-5"],
        66,
        "not an open file descriptor",
    ),
    // commands
    (&["mutex", "run", "L"], 2, "COMMAND"),
    (
        &["mutex", "run", "L", "--", "no-such-command-4711"],
        127,
        "command not found",
    ),
    (
        &["mutex", "run", "L", "--", "./file"],
        126,
        "cannot execute",
    ),
    (&["mutex", "frobnicate", "L"], 2, "unrecognized subcommand"),
];

#[test]
fn bad_input_gives_the_contract_error_form() {
    let t = TestDir::new();
    std::fs::create_dir(t.join("dir")).unwrap();
    t.write("file", "");
    std::os::unix::fs::symlink(t.join("nowhere"), t.join("dangling")).unwrap();
    std::os::unix::fs::symlink(t.join("loop"), t.join("loop")).unwrap();
    let mut wrong = Vec::new();
    let mut doc = String::from(DOC_HEAD);
    for (args, want, part) in TABLE {
        let out = t.fsync(args.iter()).run();
        let code = out.status.code();
        let err = out.stderr.trim_end();
        let first = err.lines().next().unwrap_or("");
        doc.push_str(&format!(
            "| `fsync {}` | {} | `{}` |\n",
            args.join(" ").replace('|', "\\|"),
            code.map_or("signal".to_string(), |c| c.to_string()),
            first
                .replace(t.path().to_str().unwrap(), "DIR")
                .replace('|', "\\|")
        ));
        let form = err.lines().count() == 1 && err.starts_with("fsync: ");
        if code != Some(*want) || !form || !err.contains(part) {
            wrong.push(format!(
                "fsync {}: exit {code:?} (want {want}), stderr {err:?} (want {part:?})",
                args.join(" ")
            ));
        }
    }
    assert!(
        !t.join("nowhere").exists(),
        "a dangling link's target was created"
    );
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    check_doc(&doc);
}

const DOC: &str = "docs/bad-input.md";
const DOC_HEAD: &str = "# Bad input: what fsync answers

Generated by the test `bad_input_gives_the_contract_error_form` (tests/bad_input.rs) from its
table, run in an empty directory holding `dir/`, an empty `file`, a dangling link `dangling`
and a link loop `loop`; it fails when this file differs (`FSYNC_BLESS=1 cargo test bad_input`
rewrites it). Exit statuses: see fsync(1). Usage errors (exit 2) come from the argument parser.
Permission-denied (as `nobody`) and read-only-mount cases are further tests in
tests/bad_input.rs; injected system-call errors (ENOSPC, EIO, EROFS...) in tests/faults.rs.

A path need not be UTF-8: every verb takes one that is not, and shows it escaped byte for byte
(`\\xff`), as it shows ESC (`\\e`), BEL (`\\a`) and newlines (`\\n`) in a path, in error lines,
`-v` lines and text output alike. A group lock's `--group`, a bus participant and a message
`--key` are kept as text, and must be UTF-8: otherwise a usage error (exit 2), `fsync: invalid
UTF-8 was detected in one or more arguments (try 'fsync bus connect --help')`.

| command | exit | stderr (first line) |
| --- | ---: | --- |
";

/// The table in docs/ must be what the binary answers now.
fn check_doc(doc: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    if std::env::var_os("FSYNC_BLESS").is_some() {
        std::fs::write(&path, doc).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == doc,
        "{DOC} is out of date: run FSYNC_BLESS=1 cargo test bad_input"
    );
}

/// Usage errors take the one-line form too, and say where the help is; help and version do not
/// change.
#[test]
fn usage_errors_are_one_line_naming_the_help() {
    let t = TestDir::new();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["mutex", "run", "L"],
            "the following required arguments were not provided: <COMMAND>...",
            "fsync mutex run",
        ),
        (
            &["mutex", "run", "-t", "-1", "L", "--", "true"],
            "unexpected argument '-1' found; tip: to pass '-1' as a value, use '-- -1'",
            "fsync mutex run",
        ),
        (&["mutx"], "unrecognized subcommand 'mutx'", "fsync"),
        (
            &["mutex", "frobnicate", "L"],
            "unrecognized subcommand 'frobnicate'",
            "fsync mutex",
        ),
        (
            &["mutex", "run", "-E", "x", "L", "--", "true"],
            "invalid value 'x' for '--conflict-exit-code <N>'",
            "fsync mutex run",
        ),
    ];
    for (args, message, command) in cases {
        t.fsync(args.iter())
            .run()
            .code(2)
            .stdout("")
            .error_naming(message)
            .stderr_has(&format!(" (try '{command} --help')\n"));
    }
    t.fsync(["mutex", "run", "--help"])
        .run()
        .code(0)
        .stderr("")
        .stdout_has("Usage: fsync mutex run");
    t.fsync(["--version"])
        .run()
        .code(0)
        .stderr("")
        .stdout(&format!("fsync {}\n", env!("CARGO_PKG_VERSION")));
    assert!(!t.join("L").exists());
}

#[test]
fn odd_names_work() {
    let t = TestDir::new();
    for name in ["with space", "new\nline", "ünïcødé ✓", "-dash"] {
        let path = t.join(name);
        t.fsync([
            OsStr::new("mutex"),
            OsStr::new("run"),
            path.as_os_str(),
            OsStr::new("--"),
            OsStr::new("true"),
        ])
        .run()
        .code(0);
        t.fsync([
            OsStr::new("msg"),
            OsStr::new("post"),
            t.join(&format!("box {name}")).as_os_str(),
            OsStr::new(&format!("--data={name}")),
        ])
        .run()
        .code(0);
    }
    let invalid = t.path().join(OsStr::from_bytes(b"bad\xff\xfeutf8"));
    t.fsync([
        OsStr::new("mutex"),
        OsStr::new("run"),
        invalid.as_os_str(),
        OsStr::new("--"),
        OsStr::new("true"),
    ])
    .run()
    .code(0);
    t.fsync([
        OsStr::new("event"),
        OsStr::new("signal"),
        invalid.as_os_str(),
    ])
    .run()
    .code(0);
    t.fsync([
        OsStr::new("event"),
        OsStr::new("wait"),
        OsStr::new("-n"),
        invalid.as_os_str(),
    ])
    .run()
    .code(0);
    // An empty, a binary and a large payload through one mailbox
    t.fsync(["msg", "post", "P", "--data", ""]).run().code(0);
    t.fsync(["msg", "recv", "-n", "P"]).run().code(0).stdout("");
}

/// `args`, each `@` replaced by `path`.
fn with_path<'a>(args: &[&'a str], path: &'a OsStr) -> Vec<&'a OsStr> {
    let word = |a: &&'a str| if *a == "@" { path } else { OsStr::new(*a) };
    args.iter().map(word).collect()
}

/// A name that is not UTF-8 is a legal file name: every verb takes it, keeps its files beside
/// it (a lock's holder record, a reader/writer lock's turnstile) and removes them with
/// `--delete`, and names it escaped (`\xff`) in its text output and `-v` lines.
#[test]
fn names_that_are_not_utf8_work_with_every_verb() {
    let t = TestDir::new();
    let name = |primitive: &str| [primitive.as_bytes(), b"-\xff\xfe"].concat();
    let shown = "-\\xff\\xfe";
    let mut wrong = Vec::new();
    // `fsync ARGS` (`@` the name made for `primitive`) ended with `code` and, where `says` is
    // given, printed it (on stdout or stderr).
    let mut check = |primitive: &str, args: &[&str], code: i32, says: Option<&str>| {
        let path = name(primitive);
        let out = t.fsync(with_path(args, OsStr::from_bytes(&path))).run();
        let said = format!("{}{}", out.stdout, out.stderr);
        if out.status.code() != Some(code) || says.is_some_and(|s| !said.contains(s)) {
            wrong.push(format!(
                "fsync {}: exit {:?} (want {code}, saying {says:?}); stdout {:?}; stderr {:?}",
                args.join(" ").replace('@', &String::from_utf8_lossy(&path)),
                out.status,
                out.stdout,
                out.stderr
            ));
        }
    };
    let mutex_shown = format!("mutex{shown}");
    check(
        "mutex",
        &["mutex", "run", "-v", "@", "--", "true"],
        0,
        Some(&mutex_shown),
    );
    check(
        "mutex",
        &["mutex", "status", "@"],
        0,
        Some(&format!("{mutex_shown}: free")),
    );
    check("swmr", &["swmr", "read", "@", "--", "true"], 0, None);
    check(
        "swmr",
        &["swmr", "write", "-v", "@", "--", "true"],
        0,
        Some(&format!("swmr{shown}")),
    );
    check(
        "swmr",
        &["swmr", "status", "@"],
        0,
        Some(&format!("swmr{shown}: readers 0")),
    );
    check(
        "sem",
        &["sem", "run", "-v", "@", "--slots", "2", "--", "true"],
        0,
        Some(&format!("sem{shown}")),
    );
    check(
        "sem",
        &["sem", "status", "@"],
        0,
        Some(&format!("sem{shown}: 0 of 2 slots")),
    );
    check(
        "group",
        &["group", "join", "-v", "@", "--", "true"],
        0,
        Some(&format!("group{shown}")),
    );
    check("group", &["group", "members", "@"], 0, Some("0 members"));
    check("group", &["group", "empty", "@"], 0, None);
    check("group", &["group", "wait-empty", "@"], 0, None);
    check(
        "grouplock",
        &["grouplock", "run", "@", "--group", "a", "--", "true"],
        0,
        None,
    );
    check(
        "grouplock",
        &["grouplock", "status", "@"],
        0,
        Some(&format!("grouplock{shown}: free")),
    );
    check("event", &["event", "signal", "@"], 0, None);
    check("event", &["event", "status", "@"], 0, None);
    check(
        "event",
        &["event", "wait", "-v", "@"],
        0,
        Some(&format!("event{shown}")),
    );
    check("event", &["event", "reset", "@"], 0, None);
    check("event", &["event", "status", "@"], 1, None);
    check("box", &["msg", "post", "@", "--data", "hi"], 0, None);
    check("box", &["msg", "list", "@"], 0, Some("1 message"));
    check("box", &["msg", "recv", "-n", "@"], 0, Some("hi"));
    check("box", &["msg", "wait-empty", "@"], 0, None);
    check("bus", &["bus", "connect", "@", "a"], 0, None);
    check("bus", &["bus", "connect", "@", "b"], 0, None);
    check(
        "bus",
        &[
            "bus", "send", "@", "--from", "a", "--to", "b", "--data", "hi",
        ],
        0,
        None,
    );
    check("bus", &["bus", "recv", "-n", "@", "b"], 0, Some("hi"));
    check("bus", &["bus", "members", "@"], 0, Some("a\nb\n"));
    check("bus", &["bus", "disconnect", "@", "a"], 0, None);
    check("flock", &["flock", "@", "true"], 0, None);
    std::fs::create_dir(t.path().join(OsStr::from_bytes(&name("dir")))).unwrap();
    check("dir", &["doctor", "@"], 0, Some(&format!("dir{shown}: ")));
    // Deleted with the files kept beside them, and a lock's record kept while it is held.
    for (primitive, args) in [
        (
            "mutex",
            &["mutex", "run", "--delete", "@", "--", "true"][..],
        ),
        ("swmr", &["swmr", "write", "--delete", "@", "--", "true"]),
        (
            "sem",
            &["sem", "run", "--delete", "@", "--slots", "2", "--", "true"],
        ),
        (
            "grouplock",
            &[
                "grouplock",
                "run",
                "--delete",
                "@",
                "--group",
                "a",
                "--",
                "true",
            ],
        ),
        ("group", &["group", "join", "--delete", "@", "--", "true"]),
    ] {
        check(primitive, args, 0, None);
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    let left: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ["mutex", "swmr", "sem", "group"]
                .iter()
                .any(|p| n.contains(p))
        })
        .collect();
    assert!(left.is_empty(), "--delete left {left:?}");
}

/// A lock whose name is not UTF-8 keeps its holder record as any other does: `mutex status`
/// says since when, and the fencing token comes from the record.
#[test]
fn a_lock_named_in_bytes_that_are_not_utf8_keeps_its_holder_record() {
    let t = TestDir::new();
    let lock = OsStr::from_bytes(b"L\xff");
    let holder = t
        .fsync([
            OsStr::new("mutex"),
            OsStr::new("run"),
            lock,
            OsStr::new("--"),
            OsStr::new("sh"),
            OsStr::new("-c"),
            OsStr::new(crate::harness::HOLD),
        ])
        .hold();
    // The command's pid goes into the record once it has started, which its own "acquired"
    // can come before: the record is looked at until it says so.
    let status = || {
        let out = t
            .fsync([OsStr::new("mutex"), OsStr::new("status"), lock])
            .run();
        out.code(1)
            .stdout_has("L\\xff: held by pid ")
            .stdout_has(", since ");
        out.stdout.clone()
    };
    eventually("the record names the command's pid", || {
        status().contains("(command pid ")
    });
    holder.finish().code(0);
    assert!(
        t.path().join(OsStr::from_bytes(b".L\xff.fsync")).exists(),
        "no holder record beside the lock"
    );
}

/// Names that fsync keeps inside its files and reads back as text (a group lock's group, a bus
/// participant, a message key) must be UTF-8: a usage error (exit 2) in one line that says
/// so, and nothing made.
#[test]
fn names_kept_as_text_that_are_not_utf8_are_a_usage_error() {
    let t = TestDir::new();
    let bytes = OsStr::from_bytes(b"n\xff");
    for args in [
        &["grouplock", "run", "GL", "--group", "@", "--", "true"][..],
        &["bus", "connect", "BUS", "@"],
        &["msg", "post", "BOX", "--key", "@", "--data", "x"],
    ] {
        t.fsync(with_path(args, bytes))
            .run()
            .code(2)
            .stdout("")
            .error_naming("invalid UTF-8");
    }
    for made in ["GL", "BUS", "BOX"] {
        assert!(!t.join(made).exists(), "{made} was made");
    }
}
