//! Shared world-writable sticky directories (`/tmp`): another user plants symbolic links where
//! fsync will create or write its files; fsync (here as root, the worst case) must never write,
//! truncate or create through them. The kernel's `fs.protected_symlinks` would stop some of
//! this, but it is off on many machines (it is here), so fsync must not rely on it.

use std::os::unix::fs::PermissionsExt;

use crate::harness::{is_root, require, TestDir};

#[test]
fn another_users_symlinks_in_a_sticky_directory_are_not_followed_to_write() {
    if !is_root() {
        eprintln!("skipped: needs root to act as two users");
        return;
    }
    require("runuser", "util-linux");
    let t = TestDir::new();
    t.open_to_others();
    let shared = t.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim_dir = t.join("victim");
    std::fs::create_dir(&victim_dir).unwrap();
    t.write("victim/precious", "precious");
    let plant = |target: &str, link: &str| {
        let out = t
            .cmd("runuser")
            .args([
                "-u",
                "nobody",
                "--",
                "ln",
                "-s",
                target,
                &format!("{}/{link}", shared.display()),
            ])
            .run();
        out.code(0);
    };
    // A mailbox directory that is really a link to the victim's directory.
    plant(victim_dir.to_str().unwrap(), "box");
    let out = t
        .fsync([
            "msg",
            "post",
            &format!("{}/box", shared.display()),
            "--data",
            "x",
        ])
        .run();
    out.code(77)
        .stderr_has("symbolic link owned by another user");
    assert_eq!(
        std::fs::read_dir(&victim_dir).unwrap().count(),
        1,
        "fsync wrote into the victim's directory"
    );
    // A holder record that is really a link to the victim's file.
    plant(&format!("{}/precious", victim_dir.display()), ".L.fsync");
    t.fsync([
        "mutex",
        "run",
        &format!("{}/L", shared.display()),
        "--",
        "true",
    ])
    .run()
    .code(0);
    assert_eq!(
        t.read("victim/precious"),
        "precious",
        "the holder record was written through a link"
    );
    // A lock file that is a dangling link: its target is never created.
    plant(&format!("{}/created", victim_dir.display()), "M");
    let out = t
        .fsync([
            "mutex",
            "run",
            &format!("{}/M", shared.display()),
            "--",
            "true",
        ])
        .run();
    out.operational_error("M");
    assert!(
        !victim_dir.join("created").exists(),
        "a dangling link's target was created"
    );
    // A group directory that is a link elsewhere.
    plant(victim_dir.to_str().unwrap(), "G");
    t.fsync([
        "group",
        "join",
        &format!("{}/G", shared.display()),
        "--",
        "true",
    ])
    .run()
    .code(77);
    assert_eq!(std::fs::read_dir(&victim_dir).unwrap().count(), 1);
}
