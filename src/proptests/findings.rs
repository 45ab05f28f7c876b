//! Findings: minimal failing inputs, kept as regression tests.

use super::*;
use crate::test_support::within;

// ---------------------------------------------------------------------------------------------
// Findings: minimal failing inputs, ignored until the code is fixed
// ---------------------------------------------------------------------------------------------

/// A record file another user planted in a shared directory (it passes `RecordFile::check`:
/// a regular file with one link that starts with the magic line).
fn plant_record(lock: &Path, text: &str) {
    let path = holder::record_path(lock);
    write_file(&path, text.as_bytes());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
}

#[test]
fn finding_fence_u64_max_overflows() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("l");
    plant_record(
        &lock,
        "fsync-holder 1\nfence 18446744073709551615\nstate released\nend\n",
    );
    // Not believed (beyond MAX_FENCE): the token comes from the clock, and grows from there.
    let got = std::panic::catch_unwind(|| crate::Mutex::new(&lock).try_acquire());
    let first = got.expect("no panic").unwrap().unwrap().fence();
    assert!(first > 0 && first < holder::MAX_FENCE);
    // The largest believable fence is followed by a greater one.
    plant_record(
        &lock,
        &format!(
            "fsync-holder 1\nfence {}\nstate released\nend\n",
            holder::MAX_FENCE - 2
        ),
    );
    let g = crate::Mutex::new(&lock).try_acquire().unwrap().unwrap();
    assert_eq!(g.fence(), holder::MAX_FENCE - 1);
}

#[test]
fn finding_mailbox_seq_u64_max_overflows() {
    let dir = tempfile::tempdir().unwrap();
    let b = crate::Mailbox::new(dir.path().join("b"));
    let _ = b.post(&mut &b"first"[..]).unwrap();
    write_file(&dir.path().join("b/seq"), b"18446744073709551615\n");
    let posted = std::panic::catch_unwind(|| b.post(&mut &b"second"[..]));
    let posted = posted.expect("post panicked on a seq of u64::MAX");
    if posted.is_ok() {
        let sizes: Vec<u64> = b.list().unwrap().queued.iter().map(|q| q.size).collect();
        assert_eq!(sizes, [5, 6], "messages out of enqueue order");
    }
}

#[test]
fn finding_sem_status_with_huge_slots_never_returns() {
    let dir = tempfile::tempdir().unwrap();
    let sem_dir = dir.path().join("s");
    std::fs::create_dir(&sem_dir).unwrap();
    write_file(&sem_dir.join("slots"), b"18446744073709551615\n");
    let start = Instant::now();
    let done = within(Duration::from_secs(5), move || {
        sem::status(&sem_dir).is_ok()
    });
    assert!(
        done.is_some(),
        "sem::status still running after {:?}",
        start.elapsed()
    );
    drop(dir); // (the thread, if still running, only finds files missing)
}

#[test]
fn finding_recorded_slots_blocks_on_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let slots = dir.path().join("slots");
    nix::unistd::mkfifo(&slots, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let path = dir.path().to_path_buf();
    let done = within(Duration::from_secs(2), move || {
        sem::recorded_slots(&path).is_ok()
    });
    if done.is_none() {
        // Let the blocked reader go before failing.
        let _ = std::fs::OpenOptions::new().write(true).open(&slots);
        panic!("recorded_slots blocked on a FIFO");
    }
}

#[test]
fn finding_long_command_record_is_unreadable() {
    let rec = Record {
        fence: 5,
        holder: Some(Holder {
            pid: 1,
            child: None,
            host: "h".into(),
            since_us: 1,
            command: "x".repeat(70_000),
        }),
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".l.fsync");
    write_file(&path, holder::render(&rec).as_bytes());
    let got = holder::read_from(&std::fs::File::open(&path).unwrap());
    assert_eq!(got.map(|r| r.fence), Some(5));
}

#[test]
fn finding_non_utf8_stale_tail_hides_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".l.fsync");
    write_file(&path, b"fsync-holder 1\nfence 1\nstate released\nend\n\x80");
    let got = holder::read_from(&std::fs::File::open(&path).unwrap());
    assert_eq!(got.map(|r| r.fence), Some(1));
}

#[test]
fn finding_pid_zero_holder_is_trusted() {
    let rec = holder::parse("fsync-holder 1\nfence 1\nstate held\nend\n").unwrap();
    let pid = rec.holder.map(|h| h.pid);
    assert!(
        pid.is_none_or(|p| !procinfo::pid_alive(p)),
        "a held record without a pid names pid {pid:?}, which counts as alive"
    );
}

#[test]
fn finding_held_entry_accepts_trailing_fields() {
    assert!(HeldEntry::parse("1:2:3:4:junk").is_none());
}

#[test]
fn finding_proc_locks_pid_truncates() {
    let dev = nix::sys::stat::makedev(0, 0x2a);
    let got = procinfo::parse_proc_locks(
        "1: FLOCK  ADVISORY  WRITE 4294967297 00:2a:5678 0 EOF\n",
        dev,
        5678,
        &["FLOCK"],
    );
    assert_eq!(got.first().and_then(|l| l.pid), None);
}
