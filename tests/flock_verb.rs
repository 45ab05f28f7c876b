/*!
`fsync flock` beside util-linux flock(1): each idiom scripts use is run twice, once with the
installed flock first on PATH and once with a link named `flock` to fsync, and the two runs
must print the same standard output and error and end with the same status.

A script holds a lock with the installed flock (`hold`, which returns once the holder has the
lock: it writes to a FIFO the script reads) where contention is needed, so both runs meet the
same holder. Measured times are the only thing normalised ("took N seconds"). Options that only
newer flock versions have (`--fcntl`, `--start`, `--length`) are checked against fsync alone at
the end.
*/

use std::{os::unix::fs::symlink, path::Path};

use crate::harness::{TestDir, fsync_bin, require};

/// Run before every case: `hold ARGS...` holds a lock with the installed flock until
/// `release`; `elapsed_ms` since `start_clock`.
const PRELUDE: &str = r#"
hold() {
    rm -f ready go; mkfifo ready go
    "$REAL_FLOCK" "$@" sh -c 'echo >ready; read _ <go' &
    HOLDER=$!
    read _ <ready
}
release() { echo >go; wait "$HOLDER"; }
start_clock() { T0=$(date +%s%N); }
elapsed_ms() { echo $(( ($(date +%s%N) - T0) / 1000000 )); }
"#;

/// (what the case shows, the script). `flock` is the implementation under test.
const CASES: &[(&str, &str)] = &[
    ("a command under the lock", "flock L echo hi; echo rc=$?"),
    (
        "the subshell form with descriptor 200",
        "( flock -x 200; echo in ) 200>F; echo rc=$?
         hold F; ( flock -xn 200 || { echo busy $?; exit 3; }; echo in ) 200>F; echo rc=$?; release",
    ),
    (
        "-xn -w: no wait",
        "hold L; start_clock; flock -xn -w 10 L echo in; echo rc=$?; \
         [ $(elapsed_ms) -lt 5000 ] && echo at-once; release",
    ),
    (
        "busy is 1, unless -E",
        "hold L; flock -n L echo in; echo rc=$?; flock -n -E 42 L echo in; echo rc=$?; \
         flock --nb -E 0 L echo in; echo rc=$?; release",
    ),
    (
        "-w 0.3 times out after 0.3 s",
        "hold L; start_clock; flock -w 0.3 L echo in; rc=$?; ms=$(elapsed_ms); \
         [ $ms -ge 300 ] && [ $ms -lt 5000 ] && echo waited; echo rc=$rc; \
         flock --timeout=0.2 -E 9 L true; echo rc=$?; release",
    ),
    (
        "a wait ends when the holder releases",
        "hold L; ( flock -w 20 L echo got-it; echo rc=$? ) & w=$!; release; wait $w",
    ),
    (
        "-s shares with -s and excludes -x; the last of -s and -x wins",
        "hold -s L; flock -s -n L echo shared; echo rc=$?; flock -n L echo x; echo rc=$?; \
         flock -s -x -n L echo x; echo rc=$?; flock -x -s -n L echo s; echo rc=$?; \
         flock -e -n L echo e; echo rc=$?; release",
    ),
    (
        "-u releases a descriptor's lock",
        "exec 9>L; flock 9; echo locked $?; \"$REAL_FLOCK\" -n L echo other; echo rc=$?; \
         flock -u 9; echo unlocked $?; \"$REAL_FLOCK\" -n L echo other; echo rc=$?; exec 9>&-",
    ),
    (
        "the lock is passed down to what the command leaves running, unless -o",
        "flock L sh -c 'sleep 60 >/dev/null 2>&1 & echo $! >bg'; echo rc=$?; \
         \"$REAL_FLOCK\" -n L echo free; echo rc=$?; kill $(cat bg); \
         flock -o L sh -c 'sleep 60 >/dev/null 2>&1 & echo $! >bg'; echo rc=$?; \
         \"$REAL_FLOCK\" -n L echo free; echo rc=$?; kill $(cat bg)",
    ),
    (
        "-F runs the command in flock's place",
        "flock -F L sh -c 'echo $$ >pid; \"$REAL_FLOCK\" -n L true; echo inner=$?' & p=$!; \
         wait $p; echo rc=$?; [ \"$(cat pid)\" = \"$p\" ] && echo same-process",
    ),
    (
        "a directory as the lock",
        "mkdir D; flock D echo in-dir; echo rc=$?; hold D; flock -n D true; echo rc=$?; release",
    ),
    (
        "/dev/null as the lock",
        "flock /dev/null echo devnull; echo rc=$?; flock -s -n /dev/null echo shared; echo rc=$?",
    ),
    (
        "options after the file belong to the command",
        "flock L -n echo x; echo rc=$?; flock L echo -n x; echo; echo rc=$?",
    ),
    (
        "the FLOCKER idiom of flock(1)'s manual",
        r#"cat >script.sh <<'EOF'
#!/bin/sh
[ "${FLOCKER}" != "$0" ] && exec env FLOCKER="$0" flock -en "$0" "$0" "$@" || :
echo "running $*"
EOF
         chmod +x script.sh; ./script.sh a; echo rc=$?; hold script.sh; ./script.sh b; echo rc=$?;
         release; ls -A | grep -v -e ready -e go"#,
    ),
    (
        "a command that cannot be run",
        "printf 'echo x\\n' >plain; flock L nosuchcmd; echo rc=$?; flock L ./plain; echo rc=$?; \
         flock L /; echo rc=$?; flock -F L nosuchcmd; echo rc=$?",
    ),
    (
        "-c runs $SHELL -c, else /bin/sh",
        "SHELL=/bin/bash flock L -c 'echo ${BASH_VERSION:+bash} \"$0\"'; echo rc=$?; \
         (unset SHELL; flock L -c 'echo \"$0\"'); SHELL= flock L --command 'echo \"$0\"'; \
         flock L -c 'exit 5'; echo rc=$?",
    ),
    (
        "the command's status, and 128+N for a signal",
        "flock L sh -c 'exit 7'; echo rc=$?; flock L sh -c 'kill -TERM $$'; echo rc=$?; \
         flock L sh -c 'kill -KILL $$'; echo rc=$?",
    ),
    (
        "usage errors",
        "flock; echo rc=$?; flock -z L true; echo rc=$?; flock --n L true; echo rc=$?; \
         flock --foo=1 L true; echo rc=$?; flock -w abc L true; echo rc=$?; flock L -c; echo rc=$?; \
         flock L -c a b; echo rc=$?; flock -o -F L true; echo rc=$?; flock -E 300 L true; \
         echo rc=$?; flock -E x L true; echo rc=$?; flock L; echo rc=$?; flock -n; echo rc=$?; \
         flock -w; echo rc=$?; flock --timeout; echo rc=$?; flock --shared=1 L true; echo rc=$?; \
         flock -w -1 L true; echo rc=$?",
    ),
    (
        "--verbose",
        "flock --verbose L echo hi >out; echo rc=$?; cat out; hold L; flock --verbose -n L true; \
         echo rc=$?; flock --verbose -w 0.1 L true; echo rc=$?; release",
    ),
    (
        "a descriptor that is not open, a file that cannot be opened",
        "flock 9; echo rc=$?; flock -n 7 7</dev/null; echo rc=$?; flock nodir/L true; echo rc=$?",
    ),
    (
        "a caller that ignores SIGCHLD still gets the command's status",
        "env --ignore-signal=CHLD flock L sh -c 'exit 7'; echo rc=$?; \
         env --ignore-signal=CHLD flock L true; echo rc=$?; \
         env --ignore-signal=CHLD flock L sh -c 'kill -TERM $$'; echo rc=$?",
    ),
    (
        "output that cannot be written: a full disk is a write error, a reader gone SIGPIPE",
        "flock --verbose L true >/dev/full; echo rc=$?; flock --verbose 9 9>L >/dev/full; \
         echo rc=$?; flock --help >/dev/full; echo rc=$?; flock --version >/dev/full; echo rc=$?; \
         mkfifo gone; { read _ <gone; flock --verbose L true; echo rc=$? >&2; } | \
         { exec 0<&-; echo >gone; }",
    ),
    (
        "the lock file is created 0666 less the umask, and never truncated",
        "umask 022; flock new.lck true; stat -c %a new.lck; echo data >old.lck; \
         flock old.lck true; cat old.lck; umask 0; flock any.lck true; stat -c %a any.lck",
    ),
];

/// What a run printed and how it ended.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

/// Run `script` in a fresh directory with `flock` (first on PATH) being `implementation`.
fn run(script: &str, implementation: &Path, real: &Path) -> Seen {
    let t = TestDir::new();
    let bin = t.join("bin");
    std::fs::create_dir(&bin).unwrap();
    symlink(implementation, bin.join("flock")).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = t
        .cmd("bash")
        .args(["-c", &format!("{PRELUDE}\n{script}")])
        .env("PATH", path)
        .env("REAL_FLOCK", real)
        .run();
    Seen {
        stdout: normalise(&out.stdout),
        stderr: normalise(&out.stderr),
        code: out.status.code(),
    }
}

/// Replace measured times ("took 0.000012 seconds") by "took T seconds".
fn normalise(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("took ") {
            Some(i) => {
                let rest = &line[i + 5..];
                let end = rest.find(' ').unwrap_or(rest.len());
                format!("{}took T{}", &line[..i], &rest[end..])
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The installed flock(1), and its version line.
fn installed_flock() -> (std::path::PathBuf, String) {
    require("flock", "util-linux");
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("flock"))
        .find(|p| p.is_file())
        .expect("flock on PATH");
    let real = std::fs::canonicalize(found).unwrap();
    assert_ne!(real, std::fs::canonicalize(fsync_bin()).unwrap());
    let version = std::process::Command::new(&real)
        .arg("--version")
        .output()
        .unwrap();
    (
        real,
        String::from_utf8_lossy(&version.stdout).trim().to_string(),
    )
}

#[test]
fn fsync_flock_does_what_the_installed_flock_does() {
    require("bash", "bash");
    let (real, version) = installed_flock();
    println!("comparing with {version} ({})", real.display());
    let mut differ = Vec::new();
    for (what, script) in CASES {
        let theirs = run(script, &real, &real);
        let ours = run(script, fsync_bin(), &real);
        if ours != theirs {
            differ.push(format!(
                "{what}:\n  flock(1): {theirs:?}\n  fsync:    {ours:?}\n  script: {script}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} cases differ from {version}:\n{}",
        differ.len(),
        CASES.len(),
        differ.join("\n")
    );
}

/// The options flock 2.41 added: an OFD lock (the one `mutex run --fcntl` and `--range` take),
/// on the whole file or on bytes START to START+LENGTH-1.
#[test]
fn fsync_flock_takes_fcntl_locks_on_byte_ranges() {
    let t = TestDir::new();
    let mut whole = t
        .fsync(["flock", "--fcntl", "L", "sh", "-c", crate::harness::HOLD])
        .hold();
    t.fsync(["mutex", "run", "--fcntl", "-n", "L", "true"])
        .run()
        .code(75);
    t.fsync([
        "mutex",
        "run",
        "-n",
        "L",
        "echo",
        "flock(2) is another kind",
    ])
    .run()
    .code(0);
    whole.send("");
    whole.finish().code(0);
    let mut bytes = t
        .fsync([
            "flock",
            "--start",
            "10",
            "--length",
            "5",
            "L",
            "sh",
            "-c",
            crate::harness::HOLD,
        ])
        .hold();
    t.fsync(["mutex", "run", "--range", "14", "-n", "L", "true"])
        .run()
        .code(75);
    t.fsync(["mutex", "run", "--range", "15", "-n", "L", "echo", "free"])
        .run()
        .code(0)
        .stdout("free\n");
    t.fsync(["flock", "-n", "--start", "9", "--length", "2", "L", "true"])
        .run()
        .code(1);
    bytes.send("");
    bytes.finish().code(0);
}

/// As `fsync flock`, messages start with `fsync: ` and point to `fsync flock --help`.
#[test]
fn fsync_flock_speaks_as_fsync_when_called_so() {
    let t = TestDir::new();
    t.fsync(["flock", "-z", "L", "true"])
        .run()
        .code(64)
        .stderr("fsync: invalid option -- 'z'\nTry 'fsync flock --help' for more information.\n");
    t.fsync(["flock", "nodir/L", "true"])
        .run()
        .code(66)
        .stderr("fsync: cannot open lock file nodir/L: No such file or directory\n");
    t.fsync(["flock", "--help"])
        .run()
        .code(0)
        .stdout_has("Usage: fsync flock [OPTIONS] <FILE|DIR> <COMMAND>");
}

/// Better than flock, and no script can tell: a TERM sent to fsync while its command runs
/// reaches the command (flock would die and leave it running with the lock), and fsync then
/// dies of it, as flock would have.
#[test]
fn fsync_flock_forwards_a_signal_to_its_command() {
    let t = TestDir::new();
    let mut holder = t
        .fsync([
            "flock",
            "L",
            "sh",
            "-c",
            "trap 'echo got TERM; exit 143' TERM; echo acquired; while :; do sleep 0.05; done",
        ])
        .hold();
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    holder.expect("got TERM");
    holder.finish().killed_by(nix::sys::signal::Signal::SIGTERM);
    t.fsync(["flock", "-n", "L", "echo", "free"])
        .run()
        .code(0)
        .stdout("free\n");
}
