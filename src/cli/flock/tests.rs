//! Unit tests of [`super`].

use super::*;

fn words(line: &str) -> Vec<OsString> {
    line.split_whitespace().map(OsString::from).collect()
}

fn request(line: &str) -> Request {
    match parse(&words(line)) {
        Ok(Parsed::Run(r)) => r,
        other => panic!("{line}: {other:?}"),
    }
}

fn refused(line: &str) -> Usage {
    match parse(&words(line)) {
        Err(u) => u,
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn options_stop_at_the_file() {
    let r = request("-n L -s cmd -x");
    assert_eq!(r.op, Op::Exclusive);
    assert_eq!(r.wait, Wait::No);
    assert_eq!(
        r.target,
        Target::File {
            path: "L".into(),
            argv: words("-s cmd -x")
        }
    );
    assert_eq!(
        request("-- -L cmd").target,
        Target::File {
            path: "-L".into(),
            argv: words("cmd")
        }
    );
}

#[test]
fn the_last_mode_wins_and_no_wait_beats_a_timeout() {
    assert_eq!(request("-s -x L c").op, Op::Exclusive);
    assert_eq!(request("-x -s L c").op, Op::Shared);
    assert_eq!(request("-su L c").op, Op::Unlock);
    assert_eq!(request("-en L c").op, Op::Exclusive);
    assert_eq!(request("-n -w 10 L c").wait, Wait::No);
    assert_eq!(request("-w 10 -n L c").wait, Wait::No);
    assert_eq!(request("-w 0 L c").wait, Wait::No);
    assert_eq!(request("-w 0.0000001 L c").wait, Wait::No);
    assert_eq!(
        request("-nw3 L c").wait,
        Wait::No,
        "-n in a cluster with -w3"
    );
    assert_eq!(request("-w3 L c").wait, Wait::For(Duration::from_secs(3)));
    assert_eq!(
        request("--wait=0.25 L c").wait,
        Wait::For(Duration::from_millis(250))
    );
    assert_eq!(
        request("--time 0x2 L c").wait,
        Wait::For(Duration::from_secs(2))
    );
    assert_eq!(request("-E 0 L c").conflict, 0);
    assert_eq!(request("L c").conflict, 1);
}

#[test]
fn long_options_may_be_abbreviated_unless_ambiguous() {
    assert_eq!(request("--non L c").wait, Wait::No);
    assert_eq!(request("--nb L c").wait, Wait::No);
    assert_eq!(request("--sh L c").op, Op::Shared);
    assert_eq!(
        refused("--n L c").message,
        "option '--n' is ambiguous; possibilities: '--nonblocking' '--no-fork'"
    );
    // Ambiguous in util-linux 2.41, `--shared` in the flock before it: that meaning stands.
    assert_eq!(request("--s L c").op, Op::Shared);
    assert_eq!(
        request("--f L c").range,
        Some(ByteRange { start: 0, len: 0 })
    );
    assert_eq!(
        refused("--sha=1 L c").message,
        "option '--shared' doesn't allow an argument"
    );
    assert_eq!(
        refused("--foo=3 L c").message,
        "unrecognized option '--foo=3'"
    );
    assert_eq!(
        refused("--timeout").message,
        "option '--timeout' requires an argument"
    );
    assert_eq!(refused("-w").message, "option requires an argument -- 'w'");
    assert_eq!(refused("-z L c").message, "invalid option -- 'z'");
    assert!(refused("-z L c").try_help);
}

#[test]
fn values_are_read_as_flock_reads_them() {
    assert_eq!(refused("-w abc L c").message, "invalid timeout: 'abc'");
    assert_eq!(refused("-w -1 L c").code, EX_OSERR);
    assert_eq!(
        refused("-E 256 L c").message,
        "exit code out of range (expected 0 to 255)"
    );
    assert_eq!(refused("-E x L c").message, "invalid exit code: 'x'");
    assert_eq!(
        refused("-E 99999999999 L c").message,
        "invalid exit code: '99999999999': Numerical result out of range"
    );
    assert_eq!(refused("L").message, "bad file descriptor: 'L'");
    assert_eq!(request("9").target, Target::Fd(9));
    assert_eq!(
        request("--start 1K --length 0x10 L c").range,
        Some(ByteRange {
            start: 1024,
            len: 16
        })
    );
    assert_eq!(
        request("--fcntl L c").range,
        Some(ByteRange { start: 0, len: 0 })
    );
    assert_eq!(parse_size("2KB", "x").unwrap(), 2000);
    assert_eq!(parse_size("3MiB", "x").unwrap(), 3 << 20);
    assert!(parse_size("3Q", "x").is_err());
}

#[test]
fn command_strings_and_usage_errors() {
    // $SHELL (or /bin/sh without one: tests/flock_verb.rs) -c CMD.
    match request("L -c cmd").target {
        Target::File { path, argv } => {
            assert_eq!(path, PathBuf::from("L"));
            assert_eq!(argv[1..], words("-c cmd")[..]);
        }
        other @ Target::Fd(_) => panic!("{other:?}"),
    }
    assert_eq!(
        refused("L -c").message,
        "-c requires exactly one command argument"
    );
    assert_eq!(
        refused("L --command a b").message,
        "--command requires exactly one command argument"
    );
    assert_eq!(
        refused("-o -F L c").message,
        "the --no-fork and --close options are incompatible"
    );
    assert_eq!(
        refused("-n").message,
        "requires file descriptor, file or directory"
    );
    assert_eq!(parse(&[]).unwrap_err().message, "not enough arguments");
    assert_eq!(parse(&words("-h L")), Ok(Parsed::Help));
    assert_eq!(parse(&words("-V")), Ok(Parsed::Version));
    assert_eq!(refused("-? L").message, "");
}

#[test]
fn invoked_as_flock_or_as_a_verb() {
    let (name, rest) = invocation(&words("/usr/lib/fsync/bin/flock -n L c")).unwrap();
    assert_eq!(
        (name.as_str(), rest),
        ("/usr/lib/fsync/bin/flock", words("-n L c"))
    );
    let (name, rest) = invocation(&words("fsync flock L c")).unwrap();
    assert_eq!((name.as_str(), rest), ("fsync", words("L c")));
    assert!(invocation(&words("fsync mutex run L c")).is_none());
}
