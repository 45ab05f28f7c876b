//! What an installed `fsync` gives a packager and a user: `fsync man [DIR]` and `fsync
//! completions SHELL` produce exactly the checked-in `man/` and `completions/` (which the unit
//! test `generated_files_are_current` keeps equal to the command line), man(1) finds the pages
//! where they were written, and the shells complete with the scripts.

use std::{fs, os::unix::fs::symlink, path::Path};

use crate::harness::{TestDir, require};

fn checked_in(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn checked_in_pages() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/man1");
    let mut pages: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".1"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn man_without_dir_prints_the_top_page() {
    let t = TestDir::new();
    t.fsync(["man"])
        .run()
        .code(0)
        .stdout(&checked_in("man/man1/fsync.1"));
}

#[test]
fn man_dir_writes_every_page_into_man1_where_man_finds_it() {
    let t = TestDir::new();
    let dir = t.arg("share/man");
    t.fsync(["man", &dir]).run().code(0).stdout("").stderr("");
    let mut written: Vec<String> = fs::read_dir(t.join("share/man/man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let pages = checked_in_pages();
    assert_eq!(written, pages, "no temporary files left, no page missing");
    assert!(pages.len() > 40, "{pages:?}");
    for page in &pages {
        assert_eq!(
            t.read(&format!("share/man/man1/{page}")),
            checked_in(&format!("man/man1/{page}")),
            "{page}"
        );
    }
    // Run again: pages already there are replaced.
    t.fsync(["man", &dir]).run().code(0);
    require("man", "man-db");
    let found = t
        .cmd("man")
        .args(["-M", &dir, "-w", "fsync-mutex-run"])
        .run();
    found.code(0);
    assert_eq!(
        found.stdout.trim(),
        t.join("share/man/man1/fsync-mutex-run.1")
            .display()
            .to_string()
    );
}

/// A link planted where a page goes is replaced, never written through.
#[test]
fn man_dir_replaces_a_planted_link_instead_of_writing_through_it() {
    let t = TestDir::new();
    t.write("victim", "precious\n");
    fs::create_dir_all(t.join("m/man1")).unwrap();
    symlink(t.join("victim"), t.join("m/man1/fsync.1")).unwrap();
    t.fsync(["man", &t.arg("m")]).run().code(0);
    assert_eq!(t.read("victim"), "precious\n");
    let page = fs::symlink_metadata(t.join("m/man1/fsync.1")).unwrap();
    assert!(page.is_file(), "the link became the page");
    assert_eq!(t.read("m/man1/fsync.1"), checked_in("man/man1/fsync.1"));
}

#[test]
fn man_into_a_dir_that_cannot_be_made_names_it() {
    let t = TestDir::new();
    t.write("file", "");
    t.fsync(["man", &t.arg("file")])
        .run()
        .operational_error(&t.arg("file/man1"))
        .stderr_has("cannot create directory");
}

#[test]
fn completions_are_the_checked_in_scripts() {
    let t = TestDir::new();
    for (shell, file) in [
        ("bash", "completions/fsync.bash"),
        ("zsh", "completions/_fsync"),
        ("fish", "completions/fsync.fish"),
    ] {
        t.fsync(["completions", shell])
            .run()
            .code(0)
            .stdout(&checked_in(file));
    }
    for shell in ["elvish", "powershell"] {
        t.fsync(["completions", shell])
            .run()
            .code(0)
            .stdout_has("mutex")
            .stdout_has("grouplock");
    }
    t.fsync(["completions", "tcsh"])
        .run()
        .code(2)
        .stderr_has("possible values: bash, elvish, fish, powershell, zsh");
}

/// The bash script completes subcommands and verbs as a user types them.
#[test]
fn bash_completes_subcommands_and_verbs() {
    let t = TestDir::new();
    let complete = |line: &str| {
        let script = format!(
            r#"source <("$FSYNC" completions bash)
               read -ra COMP_WORDS <<< "{line}"
               [[ "{line}" == *" " ]] && COMP_WORDS+=("")
               COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
               COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}
               _fsync fsync "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
               printf '%s\n' "${{COMPREPLY[@]}}""#
        );
        let out = t.cmd("bash").args(["-c", &script]).run();
        out.code(0);
        out.stdout.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(complete("fsync mu"), ["mutex"]);
    let verbs = complete("fsync mutex ");
    for verb in ["run", "lock", "unlock", "status", "watch"] {
        assert!(verbs.iter().any(|v| v == verb), "{verb} in {verbs:?}");
    }
    assert_eq!(complete("fsync completions z"), ["zsh"]);
}
