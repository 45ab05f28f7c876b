/*!
The layering ARCHITECTURE.md describes, checked on the sources: arrows run one way only, and
`unsafe` lives in the platform layer alone.

- `src/platform/` imports nothing of ours but itself and the error type;
- the library (everything under `src/` but `src/cli/` and `src/main.rs`) nothing of the CLI;
- `unsafe` appears in code only under `src/platform/` (clippy's `undocumented_unsafe_blocks`,
  denied in Cargo.toml, makes each block say why it is sound);
- the library's public functions borrow descriptors, never take a bare `RawFd`;
- the command shows paths through its one escaper (`cli/escape.rs`), never `Path::display`;
- no source file is longer than a reader can hold: 900 lines (split it by concern).
*/

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` without comments (`//...` and `/* ... */`, keeping their line breaks), naive about
/// strings, which is enough for the words looked for here.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (None, None) => {
                code.push_str(rest);
                rest = "";
            }
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                code.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, b) => {
                let b = b.expect("a block comment starts first");
                code.push_str(&rest[..b]);
                let end = rest[b..].find("*/").map_or(rest.len(), |e| b + e + 2);
                // Keep the lines, so that line numbers stay those of the file.
                code.extend(rest[b..end].matches('\n'));
                rest = &rest[end..];
            }
        }
    }
    code
}

/// Every source file under `src/`, relative to it, with its code.
fn tree() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(&src).unwrap().display().to_string();
            (name, code_of(&std::fs::read_to_string(&p).unwrap()))
        })
        .collect()
}

/// Whether the source file `name` (relative to `src/`) is module `layer` or inside it
/// (`platform.rs`, `platform/lock.rs`).
fn in_layer(name: &str, layer: &str) -> bool {
    name.strip_prefix(layer)
        .is_some_and(|rest| rest == ".rs" || rest.starts_with('/'))
}

#[test]
fn the_platform_layer_imports_nothing_above_it() {
    let mut wrong = Vec::new();
    for (name, code) in tree().iter().filter(|(n, _)| in_layer(n, "platform")) {
        for (i, line) in code.lines().enumerate() {
            let mut at = 0;
            while let Some(found) = line[at..].find("crate::") {
                let path = &line[at + found + "crate::".len()..];
                if !(path.starts_with("platform") || path.starts_with("error")) {
                    wrong.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
                }
                at += found + 1;
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

#[test]
fn the_library_imports_nothing_of_the_command_line() {
    let mut wrong = Vec::new();
    for (name, code) in tree()
        .iter()
        .filter(|(n, _)| !in_layer(n, "cli") && n != "main.rs")
    {
        for (i, line) in code.lines().enumerate() {
            if line.contains("cli::") || line.contains("clap") || line.contains("serde") {
                wrong.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the library reaches into the CLI:\n{}",
        wrong.join("\n")
    );
}

/// The compiler enforces it too (`#![deny(unsafe_code)]` at both crate roots, allowed on
/// `platform`): this catches an allowance added elsewhere. The one exception is the command's
/// C entry point, whose name must not be mangled.
#[test]
fn unsafe_code_lives_in_the_platform_layer_only() {
    let mut wrong = Vec::new();
    for (name, code) in tree().iter().filter(|(n, _)| !in_layer(n, "platform")) {
        for (i, line) in code.lines().enumerate() {
            let entry_point = name == "main.rs" && line.trim() == "#[unsafe(no_mangle)]";
            let words = line.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            let allowed_here =
                line.contains("allow(unsafe_code)") && !(name == "lib.rs" || name == "main.rs");
            if allowed_here || (!entry_point && words.into_iter().any(|w| w == "unsafe")) {
                wrong.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe outside src/platform/:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_platform_layer_is_private_and_the_api_borrows_descriptors() {
    let files = tree();
    let lib = &files.iter().find(|(n, _)| n == "lib.rs").unwrap().1;
    assert!(
        lib.lines().any(|l| l.trim() == "pub(crate) mod platform;"),
        "src/lib.rs must declare `pub(crate) mod platform;`: the platform layer is not API"
    );
    // A public function of the library takes a descriptor as `BorrowedFd` (or `impl AsFd`),
    // never as a bare number that may have been closed and reused. (`internal.rs` is not the
    // library's API: hidden, unversioned, for the command alone, which turns an inherited
    // number into a descriptor of its own there.)
    let mut wrong = Vec::new();
    for (name, code) in files.iter().filter(|(n, _)| {
        !in_layer(n, "platform") && !in_layer(n, "cli") && n != "main.rs" && n != "internal.rs"
    }) {
        for (i, line) in code.lines().enumerate() {
            let line = line.trim();
            if !line.starts_with("pub fn") {
                continue;
            }
            // The whole signature, however many lines rustfmt spread it over.
            let start = code.lines().take(i).map(|l| l.len() + 1).sum::<usize>();
            let rest = &code[start..];
            let signature = &rest[..rest.find(['{', ';']).unwrap_or(rest.len())];
            if signature.contains("RawFd") {
                wrong.push(format!("src/{name}:{}: {line}", i + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "public functions taking raw descriptors:\n{}",
        wrong.join("\n")
    );
}

/// A path printed with `Path::display` reaches the terminal raw: a name with ESC or a newline
/// in it sends a control sequence or forges a line, and one that is not UTF-8 loses its
/// bytes. The command shows paths with `.shown()` (`cli/escape.rs`), which escapes them as it
/// escapes every other text another user may have chosen.
#[test]
fn the_command_shows_paths_only_through_its_escaper() {
    let mut wrong = Vec::new();
    for (name, code) in tree()
        .iter()
        .filter(|(n, _)| (in_layer(n, "cli") || n == "main.rs") && n != "cli/escape.rs")
    {
        for (i, line) in code.lines().enumerate() {
            if line.contains(".display()") {
                wrong.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "paths printed raw (use `.shown()` from cli/escape.rs):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_source_file_is_over_900_lines() {
    const MOST: usize = 900;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p).unwrap().lines().count();
            (lines > MOST).then(|| format!("{}: {lines} lines", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "source files over {MOST} lines (split them by concern):\n{}",
        long.join("\n")
    );
}
