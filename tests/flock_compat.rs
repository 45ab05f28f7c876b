/*!
What a flock(1) user relies on without thinking: Unix process conventions (ignored signals stay
ignored, death by the signal that ended the job, execvp's rules) and flock's own habits (its
options, the FLOCKER idiom, a directory as the lock, options after the command word belonging to
the command). The terminal cases run bash on a real pseudo-terminal
(`tests/fixtures/pty_session.py`), as a person at a terminal would meet them.
*/

use std::{
    ffi::OsString,
    io::Write,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::Path,
};

use nix::sys::signal::Signal;

use crate::harness::{HOLD, TestDir, eventually, flocks_on, fsync_bin, is_root, require};

/// The signals the cancellation handlers take over when they are not ignored.
const HANDLED: [(Signal, &str); 4] = [
    (Signal::SIGHUP, "HUP"),
    (Signal::SIGINT, "INT"),
    (Signal::SIGQUIT, "QUIT"),
    (Signal::SIGTERM, "TERM"),
];

/// The ignored-signal mask a process prints with `grep SigIgn /proc/self/status`.
fn sig_ign(status_line: &str) -> u64 {
    let hex = status_line
        .trim()
        .strip_prefix("SigIgn:")
        .unwrap_or_else(|| panic!("not a SigIgn line: {status_line}"));
    u64::from_str_radix(hex.trim(), 16).expect("hex mask")
}

fn ignores(mask: u64, sig: Signal) -> bool {
    mask & (1 << (sig as i32 - 1)) != 0
}

/// A PATH on which `fsync` is found first.
fn path_with_fsync() -> OsString {
    let mut dirs = vec![fsync_bin().parent().unwrap().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// Run `fixtures/pty_session.py` with `steps` in `t`; fails with the terminal's transcript.
#[track_caller]
fn pty_session(t: &TestDir, steps: &[&str]) {
    require("python3", "python3");
    require("bash", "bash");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pty_session.py");
    t.cmd("python3")
        .arg(driver)
        .args(steps)
        .env("PATH", path_with_fsync())
        .run()
        .code(0);
}

// ---- ignored signals ----------------------------------------------------------------------

/// A signal ignored when fsync starts stays ignored: fsync neither dies of it nor forwards it,
/// and the command inherits it ignored, as under flock(1), nohup and `trap '' SIG`.
#[test]
fn ignored_signals_stay_ignored_for_fsync_and_the_command() {
    let t = TestDir::new();
    for (sig, name) in HANDLED {
        let script = format!(
            "trap '' {name}; exec \"$0\" mutex run L -- sh -c \
             'grep SigIgn /proc/self/status; echo acquired; read x; echo done'"
        );
        let mut run = t.cmd("sh").args(["-c", &script]).arg(fsync_bin()).start();
        let mask = sig_ign(&run.line());
        assert!(ignores(mask, sig), "the command does not ignore {name}");
        run.expect("acquired");
        // Sent to fsync, the signal is discarded: the command goes on and ends normally.
        run.signal(sig);
        run.send("go");
        let out = run.finish();
        out.code(0).stdout("done\n").stderr("");
    }
    // Signals that are not ignored are still taken over (and not passed on as ignored).
    let mut run = t
        .fsync(["mutex", "run", "L", "--", "sh", "-c"])
        .arg("grep SigIgn /proc/self/status")
        .start();
    let mask = sig_ign(&run.line());
    for (sig, name) in HANDLED {
        assert!(!ignores(mask, sig), "the command ignores {name}");
    }
    run.finish().code(0);
}

/// What the caller ignored, blocked or closed reaches the command as it would through flock(1):
/// SIGPIPE ignored (systemd starts services so: `yes | head` then ends with "Broken pipe"),
/// blocked signals blocked, and a closed standard input closed.
#[test]
fn the_callers_signal_mask_dispositions_and_closed_descriptors_reach_the_command() {
    let t = TestDir::new();
    let run = |script: &str| {
        t.cmd("bash")
            .args(["-c", script])
            .run()
            .code(0)
            .stdout
            .clone()
    };
    let out =
        run("env --ignore-signal=PIPE \"$FSYNC\" mutex run L -- grep SigIgn /proc/self/status");
    // Signals 32 and 33 aside: this test's own shell may have them ignored (it was started
    // by posix_spawn), and fsync passes that on as flock(1) does.
    let internal: u64 = 0b11 << 31;
    assert_eq!(
        sig_ign(&out) & !internal,
        1 << (Signal::SIGPIPE as i32 - 1),
        "{out}"
    );
    let out = run("\"$FSYNC\" mutex run L -- grep SigIgn /proc/self/status");
    assert_eq!(sig_ign(&out) & !internal, 0, "{out}");
    let out =
        run("env --block-signal=USR1,PIPE \"$FSYNC\" mutex run L -- grep SigBlk /proc/self/status");
    let blocked = (1u64 << (Signal::SIGUSR1 as i32 - 1)) | (1 << (Signal::SIGPIPE as i32 - 1));
    assert_eq!(out.trim(), format!("SigBlk:\t{blocked:016x}"), "{out}");
    let out = run(
        "env --ignore-signal=PIPE \"$FSYNC\" mutex run L -- yes 2>err | head -1; \
         echo \"${PIPESTATUS[0]}\"; cat err",
    );
    assert_eq!(out, "y\n1\nyes: standard output: Broken pipe\n");
    let out = run("\"$FSYNC\" mutex run L -- sh -c '[ -e /proc/self/fd/0 ] || echo closed' <&-");
    assert_eq!(out, "closed\n");
}

/// An ignored signal does not cancel a wait either: the waiter gets the lock and runs.
#[test]
fn an_ignored_signal_does_not_cancel_a_wait() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let mut waiter = t
        .cmd("sh")
        .args([
            "-c",
            "trap '' TERM HUP; exec \"$0\" mutex run -v L -- echo ran",
        ])
        .arg(fsync_bin())
        .start();
    let waiting = waiter.stderr_line();
    assert!(waiting.starts_with("fsync: waiting for"), "{waiting}");
    // The kernel discards a signal the process ignores as it is sent.
    waiter.signal(Signal::SIGTERM);
    waiter.signal(Signal::SIGHUP);
    holder.finish().code(0);
    waiter.finish().code(0).stdout("ran\n");
}

/// A non-interactive shell starts `&` jobs with INT and QUIT ignored; fsync keeps it so.
#[test]
fn background_jobs_of_a_script_keep_int_and_quit_ignored() {
    let t = TestDir::new();
    let out = t
        .cmd("sh")
        .args([
            "-c",
            "\"$0\" mutex run L -- sh -c 'grep SigIgn /proc/self/status' & wait",
        ])
        .arg(fsync_bin())
        .run();
    out.code(0);
    let mask = sig_ign(&out.stdout);
    assert!(ignores(mask, Signal::SIGINT), "{}", out.stdout);
    assert!(ignores(mask, Signal::SIGQUIT), "{}", out.stdout);
}

/// `nohup fsync mutex run L -- job &` in a terminal that then goes away: the hangup the shell
/// passes on to its jobs kills neither fsync nor the job, which finishes under the lock.
#[test]
fn nohup_survives_a_hangup_of_the_terminal() {
    let t = TestDir::new();
    nix::unistd::mkfifo(
        &t.join("go"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let job = "nohup sh -c 'fsync mutex run L -- sh -c \"echo started > started; \
               read x < go; echo finished > out\"; echo $? > rc' >/dev/null 2>&1 &";
    let cd = format!("cd {}", t.arg("."));
    pty_session(
        &t,
        &[
            &format!("send:{cd}"),
            &format!("send:{job}"),
            "file:started",
            "hangup",
        ],
    );
    // The shell is gone and has hung up its jobs; the job still holds the lock.
    assert!(
        !flocks_on(&t.join("L")).is_empty(),
        "the lock went with the hangup"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(t.join("go"))
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    eventually("the job reports its status", || {
        t.join("rc").exists() && t.read("rc").ends_with('\n')
    });
    assert_eq!(t.read("rc"), "0\n", "fsync did not exit 0 after the hangup");
    assert_eq!(t.read("out"), "finished\n");
}

// ---- death by the signal that ended the job ----------------------------------------------

/// ^C at a terminal stops a shell loop around `fsync mutex run`, whether the command runs
/// (it dies of SIGINT, and so does fsync) or fsync still waits for the lock.
#[test]
fn ctrl_c_stops_a_shell_loop_around_fsync() {
    let t = TestDir::new();
    let cd = format!("send:cd {}", t.arg("."));
    // While the command runs.
    // The command says it runs from the very process that then sleeps (a shell would fork
    // `sleep` after its echo, and a ^C in between would reach the shell but not `sleep`).
    require("perl", "perl");
    let loop_running = "send:while true; do fsync mutex run L -- perl -e \
                        'open my $f, \">>\", \"log\"; print $f \"started\\n\"; close $f; \
                        $| = 1; print \"RUN-\", 20 + 1, \"\\n\"; sleep 60'; done";
    pty_session(
        &t,
        &[
            &cd,
            loop_running,
            "expect:RUN-21",
            "intr",
            "send:echo after-$((40+2))",
            "expect:after-42",
        ],
    );
    assert_eq!(t.read("log"), "started\n", "the loop went on after ^C");

    // While fsync waits for the lock.
    let holder = t.hold("L");
    let loop_waiting = "send:while true; do fsync mutex run -v L -- echo RAN; done";
    pty_session(
        &t,
        &[
            &cd,
            loop_waiting,
            "expect:fsync: waiting",
            "intr",
            "send:echo after-$((40+3))",
            "expect:after-43",
        ],
    );
    holder.finish().code(0);
}

// ---- the FLOCKER idiom, and what flock opens read-only -------------------------------------

/// The boilerplate of flock(1)'s manual, with fsync in flock's place: a script that locks
/// itself. The lock file is the running script, which must not be opened for writing.
#[test]
fn the_flocker_idiom_locks_the_running_script() {
    let t = TestDir::new();
    let script = format!(
        "#!/bin/sh\n\
         [ \"${{FLOCKER}}\" != \"$0\" ] && exec env FLOCKER=\"$0\" {} mutex run -n -E 0 \"$0\" \"$0\" \"$@\" || :\n\
         echo \"locked $*\"\n",
        fsync_bin().display()
    );
    t.write("job.sh", &script);
    std::fs::set_permissions(t.join("job.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    t.cmd("./job.sh")
        .args(["a", "b"])
        .run()
        .code(0)
        .stdout("locked a b\n")
        .stderr("");
    // A second copy while the script's lock is held: skipped with status 0, as -E 0 asks.
    let holder = t.hold("job.sh");
    t.cmd("./job.sh").run().code(0).stdout("");
    holder.finish().code(0);
}

/// On a local file system the lock file is opened read-only: flock(2) needs nothing more.
#[test]
fn a_lock_file_is_opened_read_only() {
    let t = TestDir::new();
    let holder = t.hold("L");
    let fsync_pid = holder.pid();
    // fsync's own descriptor of L: opened for reading only.
    let fds = std::fs::read_dir(format!("/proc/{fsync_pid}/fd")).unwrap();
    let mut flags = Vec::new();
    for fd in fds.flatten() {
        if std::fs::read_link(fd.path()).is_ok_and(|p| p.ends_with("L")) {
            let info = std::fs::read_to_string(format!(
                "/proc/{fsync_pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .unwrap();
            let line = info.lines().find(|l| l.starts_with("flags:")).unwrap();
            let octal = u32::from_str_radix(line["flags:".len()..].trim(), 8).unwrap();
            flags.push(octal & 0o3);
        }
    }
    assert_eq!(
        flags,
        vec![0],
        "L is not open read-only (O_ACCMODE per descriptor)"
    );
    holder.finish().code(0);
}

// ---- execvp's rules -------------------------------------------------------------------------

/// An executable file without `#!` is a shell script, as execvp(3) and every shell run it.
#[test]
fn an_executable_without_a_shebang_runs_under_sh() {
    let t = TestDir::new();
    t.write("plain", "echo \"plain $# $1\"\n");
    std::fs::set_permissions(t.join("plain"), std::fs::Permissions::from_mode(0o755)).unwrap();
    t.fsync(["mutex", "run", "L", "./plain", "one", "two"])
        .run()
        .code(0)
        .stdout("plain 2 one\n")
        .stderr("");
    // Found on PATH too.
    t.cmd(fsync_bin())
        .args(["mutex", "run", "L", "plain", "x"])
        .env("PATH", format!("{}:/usr/bin:/bin", t.arg(".")))
        .run()
        .code(0)
        .stdout("plain 1 x\n");
    // A file that is not executable at all is still 126.
    t.write("data", "echo no\n");
    t.fsync(["mutex", "run", "L", "./data"]).run().code(126);
}

// ---- flock's options ------------------------------------------------------------------------

/// `-w SECS`, `--nb`, `--nonblocking` and `-n` give up as flock's do (status 75 here, or -E).
#[test]
fn flock_wait_options_are_accepted() {
    let t = TestDir::new();
    let holder = t.hold("L");
    for args in [
        &["-w", "0.05"][..],
        &["--wait", "0.05"],
        &["--timeout", "0.05"],
        &["--nb"],
        &["--nonblocking"],
        &["--nonblock"],
        &["-n"],
    ] {
        t.fsync(["mutex", "run"])
            .args(args)
            .args(["L", "echo", "ran"])
            .run()
            .code(75)
            .stdout("");
        t.fsync(["mutex", "run", "-E", "1"])
            .args(args)
            .args(["L", "echo", "ran"])
            .run()
            .code(1);
    }
    holder.finish().code(0);
}

/// `-c CMDSTRING` runs the string with `sh -c`; `-x`, `-e` and `--exclusive` are the default.
#[test]
fn flock_command_string_and_exclusive_options() {
    let t = TestDir::new();
    t.fsync([
        "mutex",
        "run",
        "L",
        "-c",
        "echo \"$0 ${FSYNC_FENCE:+fenced}\"; exit 3",
    ])
    .run()
    .code(3)
    .stdout("sh fenced\n");
    t.fsync(["mutex", "run", "--command", "echo long", "L"])
        .run()
        .code(0)
        .stdout("long\n");
    for flag in ["-x", "-e", "--exclusive"] {
        t.fsync(["mutex", "run", flag, "L", "echo", "ok"])
            .run()
            .code(0)
            .stdout("ok\n");
    }
    // A command string and a command are one too many.
    t.fsync(["mutex", "run", "L", "-c", "true", "echo"])
        .run()
        .code(2);
}

/// `-s` takes a shared flock, as `flock -s`: shared holders run together (with flock(1)'s
/// shared holders too), exclusive ones wait for them.
#[test]
fn shared_locks_exclude_only_exclusive_holders() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let shared = t
        .fsync(["mutex", "run", "-s", "L", "sh", "-c", HOLD])
        .hold();
    t.fsync(["mutex", "run", "-s", "-n", "L", "echo", "shared too"])
        .run()
        .code(0)
        .stdout("shared too\n");
    t.cmd("flock").args(["-s", "-n", "L", "true"]).run().code(0);
    t.fsync(["mutex", "run", "-n", "L", "echo", "no"])
        .run()
        .code(75);
    t.cmd("flock").args(["-x", "-n", "L", "true"]).run().code(1);
    shared.finish().code(0);
    // And the other way round: flock -s holds, fsync -s joins, fsync -x waits.
    let flock_shared = t.cmd("flock").args(["-s", "L", "sh", "-c", HOLD]).hold();
    t.fsync(["mutex", "run", "-s", "-n", "L", "true"])
        .run()
        .code(0);
    t.fsync(["mutex", "run", "-x", "-n", "L", "true"])
        .run()
        .code(75);
    flock_shared.finish().code(0);
    // No holder record is promised, and --delete makes no sense for a shared lock.
    t.fsync(["mutex", "run", "-s", "--delete", "L", "true"])
        .run()
        .code(2);
}

/// `--fcntl` locks the whole file with an fcntl lock, which excludes POSIX-lock users such as
/// Python's `fcntl.lockf` (and does not see flock(2) locks on a local file system).
#[test]
fn fcntl_locks_the_whole_file_with_an_fcntl_lock() {
    require("python3", "python3");
    let t = TestDir::new();
    t.write("L", "");
    let lockf = "import fcntl, sys\n\
                 f = open('L', 'r+')\n\
                 fcntl.lockf(f, fcntl.LOCK_EX)\n\
                 print('acquired', flush=True)\n\
                 sys.stdin.readline()\n";
    let holder = t.cmd("python3").args(["-c", lockf]).hold();
    t.fsync(["mutex", "run", "--fcntl", "-n", "L", "echo", "no"])
        .run()
        .code(75);
    // A flock(2) lock is another kind of lock locally: it does not see the POSIX lock.
    t.fsync(["mutex", "run", "-n", "L", "echo", "flock"])
        .run()
        .code(0)
        .stdout("flock\n");
    holder.finish().code(0);
    t.fsync(["mutex", "run", "--fcntl", "-n", "L", "echo", "yes"])
        .run()
        .code(0)
        .stdout("yes\n");
    // --fcntl is --range 0:0, so the two do not go together.
    t.fsync(["mutex", "run", "--fcntl", "--range", "1", "L", "true"])
        .run()
        .code(2);
}

/// `fsync mutex lock 9` is `fsync mutex lock --fd 9`, as `flock 9` is; unlock likewise.
#[test]
fn lock_takes_the_descriptor_as_flock_does() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let out = t
        .cmd("sh")
        .args([
            "-c",
            "exec 9>>L; \"$0\" mutex lock 9 || exit 9; flock -n L true; echo \"held $?\"; \
             \"$0\" mutex unlock 9; flock -n L true; echo \"free $?\"",
        ])
        .arg(fsync_bin())
        .run();
    out.code(0).stdout("held 1\nfree 0\n");
    t.fsync(["mutex", "lock", "--fd", "9", "9"]).run().code(2);
    t.fsync(["mutex", "lock"]).run().code(2);
}

/// flock's habits on fsync's own verbs: `-x`, `-e` and `--exclusive` (alone and in clusters)
/// on `mutex lock`; `-n` with `-w` means no wait; of `-s` and `-x` the last wins. Each is
/// checked against a holder, so that "accepted" also means "did the right thing".
#[test]
fn mutex_verbs_take_flocks_habits() {
    require("flock", "util-linux");
    let t = TestDir::new();
    let lock = |args: &str| {
        t.sh(&format!(
            "exec 9>>L; \"$FSYNC\" mutex lock {args} 9; echo $?"
        ))
        .run()
        .code(0)
        .stdout
        .clone()
    };
    for args in ["-x", "-e", "--exclusive", "-xn", "-en", "-nx -w 5", "-s -x"] {
        assert_eq!(lock(args), "0\n", "mutex lock {args} on a free lock");
    }
    let shared = t.cmd("flock").args(["-s", "L", "sh", "-c", HOLD]).hold();
    for (args, want) in [
        ("-xn -w 10", "75\n"),
        ("-n -w 10", "75\n"),
        ("-w 10 -n", "75\n"),
        ("-s -x -n", "75\n"),
        ("-x -s -n", "0\n"),
    ] {
        let started = std::time::Instant::now();
        assert_eq!(lock(args), want, "mutex lock {args} while flock -s holds");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{args} waited"
        );
    }
    for (args, want) in [("-n -w 10", 75), ("-s -x -n", 75), ("-x -s -n", 0)] {
        t.sh(&format!("\"$FSYNC\" mutex run {args} L true"))
            .run()
            .code(want);
    }
    shared.finish().code(0);
}

/// The descriptor form of flock given to the wrong verb says which verb to use.
#[test]
fn descriptor_form_mistakes_name_the_right_verb() {
    let t = TestDir::new();
    t.fsync(["mutex", "run", "-n", "9"])
        .run()
        .code(2)
        .stderr_has("to lock descriptor 9 as 'flock 9' does, use 'fsync mutex lock 9'");
    t.fsync(["mutex", "run", "L"]).run().code(2).stderr(
        "fsync: the following required arguments were not provided: <COMMAND>... \
                 (try 'fsync mutex run --help')\n",
    );
    t.sh("exec 9>>L; \"$FSYNC\" mutex lock -u 9")
        .run()
        .code(2)
        .stderr_has("use 'fsync mutex unlock 9'");
}

/// A character device is a lock as for flock(1): everyone who opens it locks the same one.
/// Nothing is written beside it, and --delete does not remove it. The device is a null device
/// of the test's own (made with mknod as root), never the system's /dev/null, which a broken
/// build must not be able to remove; without root, /dev/null itself, and no --delete.
#[test]
fn a_character_device_is_a_lock() {
    let t = TestDir::new();
    let device = match is_root() {
        true => {
            t.cmd("mknod")
                .args(["-m", "666", "null", "c", "1", "3"])
                .run()
                .code(0);
            t.arg("null")
        }
        false => "/dev/null".to_string(),
    };
    let beside = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().contains("fsync"))
            .collect();
        names.sort();
        names
    };
    let dir = Path::new(&device).parent().unwrap().to_path_buf();
    let before = beside(&dir);
    let holder = t.fsync(["mutex", "run", &device, "sh", "-c", HOLD]).hold();
    t.fsync(["mutex", "run", "-n", &device, "true"])
        .run()
        .code(75);
    t.sh(&format!("exec 9<'{device}'; \"$FSYNC\" mutex lock -n 9"))
        .run()
        .code(75);
    t.fsync(["flock", "-n", &device, "true"]).run().code(1);
    holder.finish().code(0);
    assert_eq!(
        beside(&dir),
        before,
        "something was written beside {device}"
    );
    if is_root() {
        t.fsync(["mutex", "run", "--delete", &device, "true"])
            .run()
            .code(66)
            .stderr_has("is a device");
        let kind = std::fs::metadata(&device).unwrap().file_type();
        assert!(kind.is_char_device(), "{device} was removed or replaced");
    }
}

/// `--mode OCTAL`: the permissions of a lock file fsync creates, less the umask; an existing
/// file keeps its own.
#[test]
fn mode_sets_the_permissions_of_a_new_lock_file() {
    let t = TestDir::new();
    // (umask, the options of `mutex run`, the lock file, the mode it has afterwards)
    for (umask, options, name, want) in [
        ("0", "--mode 0666", "burke.sem", 0o666),
        ("022", "--mode 0666", "masked", 0o644),
        ("0", "--mode 600 -s", "shared", 0o600),
        ("0", "--mode 640 --range 3", "range", 0o640),
        // An existing file keeps its mode.
        ("0", "--mode 0600", "burke.sem", 0o666),
    ] {
        t.sh(&format!(
            "umask {umask}; \"$FSYNC\" mutex run {options} {name} true"
        ))
        .run()
        .code(0);
        let mode = std::fs::metadata(t.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, want, "umask {umask}; mutex run {options} {name}");
    }
    t.fsync(["mutex", "run", "--mode", "0999", "x", "true"])
        .run()
        .code(2)
        .stderr_has("not a mode");
    assert!(!t.join("x").exists());
}

/// What flock takes and fsync has no use for is refused with what to use instead.
#[test]
fn flock_only_options_say_what_to_use_instead() {
    let t = TestDir::new();
    for (args, hint) in [
        (&["-u"][..], "fsync mutex unlock --fd N"),
        (&["--unlock"], "fsync mutex unlock --fd N"),
        (&["-F"], "--close"),
        (&["--no-fork"], "--close"),
    ] {
        t.fsync(["mutex", "run"])
            .args(args)
            .args(["L", "echo", "ran"])
            .run()
            .code(2)
            .stdout("")
            .stderr_has(hint);
    }
}

// ---- the command line after LOCK ----------------------------------------------------------

/// Everything from the first word after LOCK (or after the verb's operands) on is the
/// command's, options included, on every verb that runs a command; `--` is accepted too.
#[test]
fn options_after_the_command_word_are_the_commands() {
    let t = TestDir::new();
    let verbs: [&[&str]; 6] = [
        &["mutex", "run", "L"],
        &["group", "join", "G"],
        &["swmr", "read", "W"],
        &["swmr", "write", "W"],
        &["sem", "run", "--slots", "2", "S"],
        &["grouplock", "run", "--group", "a", "GL"],
    ];
    for verb in verbs {
        for tail in [
            &["echo", "-n", "x"][..],
            &["printf", "%s", "-v"],
            &["printf", "%s", "-t"],
            &["printf", "%s%s", "--", "--delete"],
            &["--", "echo", "-n", "x"],
        ] {
            let want = match tail[0] {
                "printf" => tail[2..].concat(),
                _ => "x".to_string(),
            };
            t.fsync(verb)
                .args(tail)
                .run()
                .code(0)
                .stdout(&want)
                .stderr("");
        }
        // Help for the command, not for fsync.
        t.fsync(verb)
            .args(["sh", "-c", "echo \"$1\"", "sh", "--help"])
            .run()
            .code(0)
            .stdout("--help\n");
    }
}

// ---- a directory as the lock --------------------------------------------------------------

/// A directory can be the lock, as with flock(1), and the two exclude each other on it.
#[test]
fn a_directory_can_be_the_lock() {
    require("flock", "util-linux");
    let t = TestDir::new();
    std::fs::create_dir(t.join("D")).unwrap();
    t.fsync(["mutex", "run", "D", "echo", "ok"])
        .run()
        .code(0)
        .stdout("ok\n")
        .stderr("");
    let flock_holder = t.cmd("flock").args(["D", "sh", "-c", HOLD]).hold();
    t.fsync(["mutex", "run", "-n", "D", "true"]).run().code(75);
    t.fsync(["mutex", "status", "D"]).run().code(1);
    flock_holder.finish().code(0);
    let holder = t.hold("D");
    t.cmd("flock").args(["-n", "D", "true"]).run().code(1);
    t.fsync(["mutex", "status", "D"])
        .run()
        .code(1)
        .stdout_has("held by pid");
    holder.finish().code(0);
    t.fsync(["mutex", "status", "D"]).run().code(0);
    // --delete removes lock files only: a directory is a path of the wrong kind for it (66,
    // as for a byte-range lock), refused before anything runs.
    t.fsync(["mutex", "run", "--delete", "D", "echo", "ran"])
        .run()
        .code(66)
        .stdout("")
        .error_naming("D")
        .stderr_has("is a directory");
    assert!(t.join("D").is_dir());
}

/// A caller that ignores SIGCHLD (`env --ignore-signal=CHLD`, some daemons) still gets the
/// command's status from `mutex run` and `msg recv --`, as from flock(1): the kernel would
/// otherwise reap the command itself and its status be lost.
#[test]
fn a_caller_ignoring_sigchld_still_gets_the_commands_status() {
    let t = TestDir::new();
    let ignoring = |args: &[&str]| {
        t.cmd("env")
            .arg("--ignore-signal=CHLD")
            .arg(fsync_bin())
            .args(args)
            .run()
    };
    ignoring(&["mutex", "run", "L", "--", "sh", "-c", "exit 7"]).code(7);
    ignoring(&["mutex", "run", "L", "--", "sh", "-c", "kill -TERM $$"]).killed_by(Signal::SIGTERM);
    t.fsync(["msg", "post", "-q", "B", "--data", "x"])
        .run()
        .code(0);
    ignoring(&["msg", "recv", "B", "--", "sh", "-c", "exit 0"]).code(0);
}
