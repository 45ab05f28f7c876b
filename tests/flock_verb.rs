/*!
`fsync flock` beside util-linux flock(1): each case is run twice, once with a flock(1) first on
PATH and once with a link named `flock` to fsync, and the two runs must print the same standard
output and error and end with the same status. The flock(1) is the installed one and, in CI,
also util-linux 2.42, the release `fsync flock` follows (`.ci/flock-2.42` fetches it from
Debian): cases of what 2.41 changed run with the versions that show them.

A script holds a lock with that flock (`hold`, which returns once the holder has the lock: it
writes to a FIFO the script reads) where contention is needed, so both runs meet the same
holder, and waits for a waiter through the kernel's lock table (`until_waiting`), not a sleep.
Measured times are the only thing normalised ("took N seconds"); durations are bucketed by the
scripts themselves. The differences that remain on purpose are listed in docs/flock-compat.md.
*/

use std::{os::unix::fs::symlink, path::Path};

use crate::harness::{TestDir, fsync_bin, require};

/// Run before every case: descriptors above 2 that the test inherited (a build tool's jobserver
/// pipe) are closed, so that a lock file opened takes descriptor 3 as it would in a shell;
/// `hold ARGS...` holds a lock with the installed flock until `release`; `elapsed_ms` since
/// `start_clock`; `until_waiting FILE [N]` returns once N processes (1 by default) wait for a
/// lock on FILE (the kernel's `/proc/locks` shows them).
const PRELUDE: &str = r#"
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
done
hold() {
    rm -f ready go; mkfifo ready go
    "$REAL_FLOCK" "$@" sh -c 'echo >ready; read _ <go' &
    HOLDER=$!
    read _ <ready
}
release() { echo >go; wait "$HOLDER"; }
start_clock() { T0=$(date +%s%N); }
elapsed_ms() { echo $(( ($(date +%s%N) - T0) / 1000000 )); }
until_waiting() {
    ino=$(stat -c %i "$1")
    for _ in $(seq 3000); do
        [ "$(grep -c -- "-> .*:$ino " /proc/locks)" -ge "${2:-1}" ] && return
        sleep 0.01
    done
    echo "nobody waits on $1"
}
one_at_a_time() {
    awk '/start/ { if (open) bad = 1; open = 1 } /end/ { open = 0 }
         END { print (bad ? "overlap" : "one at a time") }' "$1"
}
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
        "a descriptor locked shared beside a shared holder, not exclusively",
        ": >L; exec 9<L; hold -s L; flock -s -n 9; echo shared rc=$?; flock -u 9; flock -n 9; \
         echo exclusive rc=$?; flock -x -n 9; echo x rc=$?; release; exec 9<&-",
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
        "flock /dev/null echo devnull; echo rc=$?; flock -s -w 20 /dev/null echo shared; echo rc=$?",
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
         flock --foo=1 L true; echo rc=$?; flock L -c; echo rc=$?; \
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
        "flock 9; echo rc=$?; : >F; flock -n 7 7<F; echo rc=$?; flock nodir/L true; echo rc=$?",
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
        "signals sent to flock while it waits: each ends it, as its default action does, but \
         INT (ignored in a background job) and ALRM during a -w wait",
        "hold L; { for sig in TERM HUP USR1 ALRM PIPE; do flock L echo got & p=$!; \
         until_waiting L; kill -$sig $p; wait $p; echo \"$sig rc=$?\"; done; } 2>/dev/null
         flock L echo got-INT >int.out & a=$!; flock -w 30 L echo got-ALRM >alrm.out & b=$!; \
         until_waiting L 2; kill -INT $a; kill -ALRM $b; release; wait $a; echo INT rc=$?; \
         wait $b; echo ALRM-w rc=$?; cat int.out alrm.out",
    ),
    (
        "a signal to flock while its command runs ends flock at once; the command keeps \
         running and holding the lock, and a signal to the group reaches it once",
        "mkfifo r; { flock L sh -c 'trap \"\" TERM; echo >r; sleep 1' & p=$!; read _ <r; \
         kill -TERM $p; wait $p; echo rc=$?; } 2>/dev/null; \"$REAL_FLOCK\" -n L echo free; \
         echo held-rc=$?; \"$REAL_FLOCK\" L echo after-the-command
         { setsid flock L sh -c 'trap \"echo got-term >>log\" TERM; echo >r; \
         for i in 1 2 3 4 5; do sleep 0.1; done' & p=$!; read _ <r; kill -TERM -$p; \
         wait $p; echo group-rc=$?; } 2>/dev/null; \"$REAL_FLOCK\" L cat log
         flock -w 5 L sh -c 'echo >r; sleep 0.5' & p=$!; read _ <r; kill -ALRM $p; wait $p; \
         echo alrm-while-running-rc=$?
         start_clock; timeout 0.5 flock L sh -c 'trap \"\" TERM; sleep 2'; rc=$?; \
         [ $(elapsed_ms) -lt 1500 ] && echo quick; echo rc=$rc; \"$REAL_FLOCK\" L echo done",
    ),
    (
        "ignored and blocked signals reach the command as they were, SIGCHLD at its default",
        "flock L grep -E 'SigBlk|SigIgn' /proc/self/status
         env --ignore-signal=PIPE,INT,TERM,HUP,QUIT,ALRM,USR1,CHLD flock L grep SigIgn \
         /proc/self/status
         env --ignore-signal=PIPE,ALRM flock -w 5 L grep SigIgn /proc/self/status
         env --block-signal=INT,TERM,PIPE,ALRM,USR1,CHLD flock L grep SigBlk /proc/self/status
         env --block-signal=ALRM flock -w 5 L grep SigBlk /proc/self/status
         env --ignore-signal=PIPE flock L yes | head -1; echo \"${PIPESTATUS[@]}\"
         env --ignore-signal=PIPE flock -F L yes | head -1; echo \"${PIPESTATUS[@]}\"",
    ),
    (
        "devices, named pipes, read-only files; the lock's descriptor is the lowest free",
        "b=$(find /dev -maxdepth 1 -type b | head -1)
         if [ -n \"$b\" ] && [ -r \"$b\" ]; then flock \"$b\" echo block; echo rc=$?; \
         hold \"$b\"; flock -n \"$b\" true; echo rc=$?; flock -s -w 0.1 \"$b\" true; echo rc=$?; \
         release; else echo no block device here; fi
         flock /dev/zero echo char; echo rc=$?
         mkfifo ff; timeout 10 sh -c 'echo through-the-fifo >ff' & \
         flock ff sh -c 'read x <&3; echo \"$x\"'; echo rc=$?
         echo ro >ro; chmod 444 ro; flock ro cat ro; flock -s ro true; echo rc=$?
         flock L sh -c 'basename \"$(readlink /proc/$$/fd/3)\"'",
    ),
    (
        "a closed standard descriptor: the lock file takes its place",
        "echo data >L; flock L cat <&-; echo rc=$?
         flock L sh -c 'basename \"$(readlink /proc/$$/fd/1)\" >&2' >&-; echo rc=$?
         flock --verbose L true >&-; echo rc=$?; cat L
         flock nodir/x true 2>&-; echo rc=$?; flock -z 2>&-; echo rc=$?
         flock -E 3 9 2>&-; echo rc=$?",
    ),
    (
        "messages to a standard error nobody reads: SIGPIPE, or 1 where it is ignored",
        "mkfifo gone; { read _ <gone; flock nodir/x true; echo rc=$? >out; } 2>&1 | \
         { exec 0<&-; echo >gone; }; cat out
         { read _ <gone; env --ignore-signal=PIPE flock nodir/x true; echo rc=$? >out; } 2>&1 | \
         { exec 0<&-; echo >gone; }; cat out
         { read _ <gone; env --ignore-signal=PIPE flock --verbose L true; echo rc=$? >out; } | \
         { exec 0<&-; echo >gone; }; cat out",
    ),
    (
        "the lock file removed, renamed or replaced while flock and fsync wait on it: both \
         get the file they opened, one at a time, and nothing is created",
        "CRIT='echo start >>log; sleep 0.2; echo end >>log'
         for change in 'rm L' 'mv L M' 'rm L; : >L'; do rm -f log M; : >L; hold L
         flock L sh -c \"$CRIT\" & a=$!; \"$REAL_FLOCK\" L sh -c \"$CRIT\" & b=$!; \
         until_waiting L 2; eval \"$change\"; release; wait $a; echo \"fsync-side rc=$?\"; \
         wait $b; echo \"flock-side rc=$?\"; one_at_a_time log
         [ -e L ] && echo L-exists; [ -e M ] && echo M-exists; done; true",
    ),
    (
        "long options abbreviated as far as they are unambiguous",
        "for o in --sh --e --ex --u --no --nb --non '--t 1' '--w 1' --wa=1 --cl '--conf 3' \
         '--co 3' --v --ve --verb --he --vers --n '--c x' --x; do \
         flock $o L true >/dev/null 2>&1 </dev/null; echo \"$o rc=$?\"; done
         flock --ex L true --s; echo rc=$?; flock --nonb -- L true; echo rc=$?",
    ),
    (
        "getopt names flock as it was called; flock's own messages by its short name",
        "x=$(command -v flock); \"$x\" -z L true 2>&1 | sed \"s#$x#FLOCK#\"; \
         \"$x\" --bogus L true 2>&1 | sed \"s#$x#FLOCK#\"; \"$x\" -w 2>&1 | sed \"s#$x#FLOCK#\"; \
         \"$x\" nodir/L true; echo rc=$?; : >L; flock L/x true; echo rc=$?; flock /proc/x true; \
         echo rc=$?",
    ),
    (
        "a lock refused as NFSv4 refuses flock(2) on a read-only descriptor (EBADF or EIO, \
         injected): the file is opened again for writing and the lock tried again",
        "i() { e=$1; w=$2; shift 2; strace -f -o /dev/null -e trace=flock \
         -e inject=flock:error=$e:when=$w \"$@\"; echo rc=$?; }
         i EBADF 1 flock L echo ok; i EIO 1 flock L echo ok; i EBADF 1 flock -s L echo shared
         i ENOLCK 1 flock L echo ok; i EBADF 1+ flock L echo ok; i EBADF 1 flock 9 9<L",
    ),
    (
        "the lock file's open failing (injected): each cause's status",
        "for e in EMFILE ENFILE ENOMEM EROFS ENOSPC EACCES ENOENT; do strace -f -o /dev/null -P L \
         -e trace=openat,open -e inject=openat,open:error=$e flock L echo in; echo \"$e rc=$?\"; \
         done",
    ),
    (
        "the lock file is created 0666 less the umask, and never truncated",
        "umask 022; flock new.lck true; stat -c %a new.lck; echo data >old.lck; \
         flock old.lck true; cat old.lck; umask 0; flock any.lck true; stat -c %a any.lck",
    ),
];

/// Cases of what util-linux 2.41 changed, as the flock before it behaves: `fsync flock` takes
/// what either accepts, so that a script written for the older flock keeps working.
const BEFORE_2_41: &[(&str, &str)] = &[(
    "--s is --shared (2.41 added --start)",
    "hold -s L; flock --s -n L echo shared; echo rc=$?; flock --s=1 L true; echo rc=$?; release",
)];

/// Cases of what only util-linux 2.41 and later have: OFD locks (`--fcntl`, `--start`,
/// `--length`), on files, directories and devices.
const SINCE_2_41: &[(&str, &str)] = &[
    (
        "--fcntl on a file, a directory and /dev/null",
        "flock --fcntl L echo whole; echo rc=$?; flock --fcntl -s L echo shared; echo rc=$?
         mkdir D; flock --fcntl -s D echo dir-shared; echo rc=$?; flock --fcntl D echo dir; \
         echo rc=$?; flock --fcntl -s . echo dot; echo rc=$?
         flock --fcntl /dev/null echo null; echo rc=$?; flock --fcntl -s /dev/null echo null-s; \
         echo rc=$?",
    ),
    (
        "byte ranges exclude where they overlap",
        "hold --start 10 --length 5 L; flock -n --start 14 --length 1 L echo in; echo rc=$?; \
         flock -n --start 15 L echo beside; echo rc=$?; flock -n --fcntl L echo whole; echo rc=$?; \
         flock -n L echo flock2-is-another-kind; echo rc=$?; release
         exec 9>L; flock --fcntl 9; echo fd rc=$?; flock --fcntl -u 9; echo unlock rc=$?",
    ),
    (
        "bad offsets and lengths; --f, --st and --le abbreviate",
        "flock --start x L true; echo rc=$?; flock --length -1 L true; echo rc=$?; \
         flock --start 1K --length 1M L echo sizes; echo rc=$?; flock --f L echo f; echo rc=$?; \
         flock --st 3 L echo st; echo rc=$?; flock --le 3 L echo le; echo rc=$?
         for v in 99999999999999999999999 1Q 16E 15E '' 0x 08 1KB 1KiB 1kb 1kib 010 0x1f; do \
         flock --start \"$v\" L true; echo \"[$v] rc=$?\"; done",
    ),
    (
        "a timeout that is no number (2.41 shortened the message)",
        "flock -w abc L true; echo rc=$?; flock -w 0x L true; echo rc=$?",
    ),
];

/// What a run printed and how it ended.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

/// Run `script` in a fresh directory with `flock` (first on PATH) being `implementation`, as
/// `user` (as root, through runuser) where given, in a directory that user may write.
fn run_as(user: Option<&str>, script: &str, implementation: &Path, real: &Path) -> Seen {
    let t = TestDir::new();
    let bin = t.join("bin");
    std::fs::create_dir(&bin).unwrap();
    symlink(implementation, bin.join("flock")).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let script = format!("{PRELUDE}\n{script}");
    let cmd = match user {
        None => t.cmd("bash"),
        Some(user) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
            t.cmd("runuser").args(["-u", user, "--", "bash"])
        }
    };
    let out = cmd
        .args(["-c", &script])
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

/// A flock(1) and its version line.
fn version_of(flock: &Path) -> String {
    let version = std::process::Command::new(flock)
        .arg("--version")
        .output()
        .unwrap();
    String::from_utf8_lossy(&version.stdout).trim().to_string()
}

/// The installed flock(1).
fn installed_flock() -> std::path::PathBuf {
    require("flock", "util-linux");
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("flock"))
        .find(|p| p.is_file())
        .expect("flock on PATH");
    let real = std::fs::canonicalize(found).unwrap();
    assert_ne!(real, std::fs::canonicalize(fsync_bin()).unwrap());
    real
}

/// Whether a flock(1) version line is of a release before 2.41.
fn before_2_41(version: &str) -> bool {
    let number = version.rsplit(' ').next().unwrap_or("");
    let mut parts = number.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) < (2, 41)
}

/// Run every case of `cases` with `real` and with `fsync flock`; assert they agree.
fn compare(real: &Path, cases: &[(&str, &str)]) {
    compare_as(None, real, cases);
}

/// [`compare`], the cases run by `user` where given.
fn compare_as(user: Option<&str>, real: &Path, cases: &[(&str, &str)]) {
    require("bash", "bash");
    let version = version_of(real);
    println!("comparing with {version} ({})", real.display());
    let mut differ = Vec::new();
    for (what, script) in cases {
        let theirs = run_as(user, script, real, real);
        let ours = run_as(user, script, fsync_bin(), real);
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
        cases.len(),
        differ.join("\n")
    );
}

/// The cases of this file that `real`'s version can show.
fn cases_for(real: &Path) -> Vec<(&'static str, &'static str)> {
    let newer = match before_2_41(&version_of(real)) {
        true => BEFORE_2_41,
        false => SINCE_2_41,
    };
    CASES.iter().chain(newer).copied().collect()
}

#[test]
fn fsync_flock_does_what_the_installed_flock_does() {
    require("strace", "strace");
    let real = installed_flock();
    compare(&real, &cases_for(&real));
}

/// The same against util-linux flock 2.42, the release `fsync flock` follows, which CI fetches
/// from Debian (`.ci/flock-2.42`) where the installed one is older.
#[test]
#[ignore = "needs util-linux flock 2.42: FSYNC_FLOCK_2_42=$(.ci/flock-2.42) (.ci/run runs it with --ignored)"]
fn fsync_flock_does_what_flock_2_42_does() {
    let real = std::env::var_os("FSYNC_FLOCK_2_42")
        .map(std::path::PathBuf::from)
        .expect("FSYNC_FLOCK_2_42 names util-linux flock 2.42 (.ci/flock-2.42 prints it)");
    let version = version_of(&real);
    assert!(
        version.contains("util-linux 2.42"),
        "{}: {version}",
        real.display()
    );
    compare(&real, &cases_for(&real));
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

/// Cases run as an unprivileged user (`nobody`), for whom permissions count: how a lock file is
/// opened shows in what that user may lock.
const AS_A_USER: &[(&str, &str)] = &[(
    "a file the user may only read, only write, or neither; a directory not theirs",
    ": >ro; chmod 400 ro; : >wo; chmod 200 wo; : >no; chmod 0 no
     for f in ro wo no /proc/x /root/x; do flock \"$f\" echo \"$f\"; echo rc=$?; \
     flock -s \"$f\" echo \"$f shared\"; echo rc=$?; done
     for f in ro rw; do : >rw; strace -f -o /dev/null -e trace=flock \
     -e inject=flock:error=EBADF:when=1 flock \"$f\" echo \"$f reopened\"; echo rc=$?; done",
)];

/// As a user, the cases of `--fcntl`, whose exclusive lock needs a descriptor open for writing.
const AS_A_USER_SINCE_2_41: &[(&str, &str)] = &[(
    "--fcntl on a file the user may only read or only write",
    ": >ro; chmod 400 ro; : >wo; chmod 200 wo; : >rw; chmod 600 rw
     for f in ro wo rw; do flock --fcntl \"$f\" echo \"$f\"; echo rc=$?; \
     flock --fcntl -s \"$f\" echo \"$f shared\"; echo rc=$?; done",
)];

/// What a user who may only read or only write a lock file gets, beside the installed flock
/// and (in CI) util-linux 2.42.
#[test]
#[ignore = "needs root: runs flock as a second user (runuser -u nobody); .ci/run runs it with --ignored"]
fn fsync_flock_opens_as_flock_opens_for_a_user_without_root() {
    crate::harness::require_root();
    require("runuser", "util-linux");
    let installed = installed_flock();
    let mut flocks = vec![installed];
    if let Some(newer) = std::env::var_os("FSYNC_FLOCK_2_42") {
        flocks.push(newer.into());
    }
    for real in flocks {
        let mut cases = AS_A_USER.to_vec();
        if !before_2_41(&version_of(&real)) {
            cases.extend(AS_A_USER_SINCE_2_41);
        }
        compare_as(Some("nobody"), &real, &cases);
    }
}

/// Cases run as root that mount file systems: a lock file that cannot be made on a read-only or
/// full one (flock's EX_CANTCREAT, 73), and one that exists there.
const MOUNTING: &[(&str, &str)] = &[(
    "a read-only and a full file system",
    "mkdir ro full; trap 'umount ro full' EXIT
     mount -t tmpfs -o size=1m tmpfs ro && : >ro/L && mount -o remount,ro ro
     mount -t tmpfs -o size=1m,nr_inodes=2 tmpfs full && : >full/L
     for f in ro/L ro/new full/L full/new; do flock \"$f\" echo \"$f\"; echo rc=$?; done",
)];

#[test]
#[ignore = "needs root: mounts small tmpfs file systems; .ci/run runs it with --ignored"]
fn fsync_flock_on_read_only_and_full_file_systems_as_flock() {
    crate::harness::require_root();
    compare(&installed_flock(), MOUNTING);
}
