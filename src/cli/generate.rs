/*!
Man pages and shell completions, generated from the clap definition: at run time by
`fsync man [DIR]` and `fsync completions SHELL` (so an installed binary installs its own pages
and completions, as rg, fd and just do), and checked in under `man/` and `completions/`, so that
a packager needs neither a build script nor a run of the binary.

`generated_files_are_current` renders every file in memory and fails when a checked-in file
differs from it; `FSYNC_BLESS=1 cargo test generated` rewrites them.

Each command gets a page named like git's (`fsync-mutex-run.1`): clap_mangen's NAME, SYNOPSIS,
DESCRIPTION, OPTIONS and SUBCOMMANDS, then our ENVIRONMENT (from [`environment::TABLE`]), EXIT
STATUS (from [`exit_code::TABLE`]), EXAMPLES
(from the `Examples:` part of `after_long_help`, or gathered from the subcommands' where a
command has none), SEE ALSO and VERSION. Hidden arguments and subcommands, and clap's `help`
subcommand, have no place in them. Nothing depends on the date or the machine.
*/

use crate::cli::OrStdout;
use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use clap::{Arg, ArgAction, Command, CommandFactory};
use clap_complete::Shell;
use clap_mangen::{
    Man,
    roff::{Inline, Roff, bold, italic, roman},
};

use super::{Cli, Exit, VerbResult, environment, exit_code};

pub(super) const COMPLETIONS_ABOUT: &str = "Print the completion script for a shell";

pub(super) const COMPLETIONS_LONG: &str = "\
Print the completion script for SHELL on standard output, generated from the command line \
fsync itself parses, so it always matches this version. Install it where the shell looks for \
completions (see the examples), or load it in the shell's start-up file.";

pub(super) const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  # bash, for the current user (bash-completion 2.x)
  mkdir -p ~/.local/share/bash-completion/completions
  fsync completions bash > ~/.local/share/bash-completion/completions/fsync

  # zsh: a directory on $fpath
  fsync completions zsh > ~/.zfunc/_fsync

  # fish
  fsync completions fish > ~/.config/fish/completions/fsync.fish";

pub(super) const MAN_ABOUT: &str = "Write the manual pages, or print fsync(1)";

pub(super) const MAN_LONG: &str = "\
Without DIR, print the manual page fsync(1) on standard output (roff, for man -l -). With DIR, \
write every manual page, one per command (fsync-mutex-run.1 and so on), into DIR/man1, \
creating it if needed, replacing pages already there: DIR becomes a directory man(1) can search \
(man -M DIR, or MANPATH). The pages are generated from the command line fsync itself parses, \
so they always match this version.";

pub(super) const MAN_EXAMPLES: &str = "\
Examples:
  man -l - < <(fsync man)
  fsync man ~/.local/share/man && man fsync-mutex-run
  sudo fsync man /usr/local/share/man";

// The arguments of `fsync completions`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to print the completion script for
    #[arg(value_name = "SHELL", value_enum)]
    shell: Shell,
}

// The arguments of `fsync man`.
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Write every page into DIR/man1 instead of printing fsync(1)
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// `fsync completions SHELL`.
pub(super) fn completions(a: CompletionsArgs) -> VerbResult {
    std::io::stdout()
        .write_all(completion(a.shell).as_bytes())
        .or_stdout()?;
    Ok(Exit::OK)
}

/// `fsync man [DIR]`.
pub(super) fn man(a: ManArgs) -> VerbResult {
    let pages = man_pages(Cli::command());
    let Some(dir) = a.dir else {
        let (_, top) = pages.first().expect("the top page comes first");
        std::io::stdout().write_all(top.as_bytes()).or_stdout()?;
        return Ok(Exit::OK);
    };
    let man1 = dir.join("man1");
    fs::create_dir_all(&man1).map_err(|e| fsync::Error::io(&man1, "cannot create directory", e))?;
    for (name, page) in &pages {
        write_replacing(&man1.join(name), page.as_bytes())?;
    }
    Ok(Exit::OK)
}

/// Write `path` by writing a new file beside it and renaming it into place: a symbolic link
/// or another user's file at `path` is replaced, never written through, and a reader never sees
/// half a page.
fn write_replacing(path: &Path, contents: &[u8]) -> Result<(), fsync::Error> {
    let name = path.file_name().expect("a page name").to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut f| f.write_all(contents))
        .and_then(|()| fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = fs::remove_file(&temp);
        fsync::Error::io(path, "cannot write", e)
    })
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How many examples a page without examples of its own gathers from its subcommands.
const GATHERED_EXAMPLES: usize = 6;

/// Other pages every page refers to.
const SEE_ALSO_SYSTEM: &[(&str, &str)] = &[("flock", "1"), ("flock", "2")];

fn completion(shell: Shell) -> String {
    let mut cmd = with_whole_help_tree();
    let name = cmd.get_name().to_owned();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    String::from_utf8(out).expect("completions are UTF-8")
}

/// The command tree, built, as completions need it: its `help` subcommand has the whole tree
/// under it (`fsync help mutex run`). clap copies the tree under `help` when it builds the
/// root, before the deferred subcommands below it (see [`Cli`]) exist; so that copy is made from
/// a root whose subcommands were built beforehand (without their own `help`, which the copy
/// never had), and replaces the shallow one.
fn with_whole_help_tree() -> Command {
    let mut subcommands = Cli::command().mut_subcommands(|sub| sub.disable_help_subcommand(true));
    subcommands.build();
    let mut for_help = Cli::command().mut_subcommands(|sub| {
        (subcommands.find_subcommand(sub.get_name()))
            .expect("the same tree")
            .clone()
    });
    for_help.build();
    let help = for_help
        .find_subcommand("help")
        .expect("clap's help")
        .clone();
    let mut root = Cli::command();
    root.build();
    root.mut_subcommand("help", |_| help)
}

// ---------------------------------------------------------------------------------------------
// Man pages

/// (file name, page) for the top-level command and every visible subcommand at every level.
fn man_pages(cli: Command) -> Vec<(String, String)> {
    let mut root = cli.disable_help_subcommand(true);
    // Runs the deferred construction of every subcommand's arguments, and gives every
    // subcommand its display name (fsync-mutex-run) and bin name.
    root.build();
    let root = with_aliases_in_help(root);
    let mut pages = Vec::new();
    add_pages(&root, &mut Vec::new(), &mut pages);
    pages
}

/// `ancestors`: from the top-level command down to `cmd`'s parent.
fn add_pages<'a>(
    cmd: &'a Command,
    ancestors: &mut Vec<&'a Command>,
    pages: &mut Vec<(String, String)>,
) {
    pages.push((format!("{}.1", page_name(cmd)), man_page(cmd, ancestors)));
    ancestors.push(cmd);
    for sub in visible_subcommands(cmd) {
        add_pages(sub, ancestors, pages);
    }
    ancestors.pop();
}

fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set())
}

/// `fsync-mutex-run`, as clap's build sets it for subcommands.
fn page_name(cmd: &Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

/// clap_mangen does not show visible aliases (`--wait` for `--timeout`); add them to the help
/// text as `--help` does.
fn with_aliases_in_help(mut cmd: Command) -> Command {
    let annotated: Vec<(clap::Id, String)> = cmd
        .get_arguments()
        .filter_map(|arg| {
            let mut aliases: Vec<String> = Vec::new();
            aliases.extend(
                arg.get_visible_short_aliases()
                    .unwrap_or_default()
                    .iter()
                    .map(|c| format!("-{c}")),
            );
            aliases.extend(
                arg.get_visible_aliases()
                    .unwrap_or_default()
                    .iter()
                    .map(|l| format!("--{l}")),
            );
            if aliases.is_empty() {
                return None;
            }
            let label = if aliases.len() == 1 {
                "alias"
            } else {
                "aliases"
            };
            let note = format!("[{label}: {}]", aliases.join(", "));
            Some((arg.get_id().clone(), note))
        })
        .collect();
    for (id, note) in annotated {
        cmd = cmd.mut_arg(id, |arg| {
            let long = arg.get_long_help().map(|h| format!("{h}\n\n{note}"));
            let short = arg.get_help().map(|h| format!("{h} {note}"));
            let arg = match short {
                Some(h) => arg.help(h),
                None => arg.help(note.clone()),
            };
            match long {
                Some(h) => arg.long_help(h),
                None => arg,
            }
        });
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in subs {
        cmd = cmd.mut_subcommand(name, with_aliases_in_help);
    }
    cmd
}

fn man_page(cmd: &Command, ancestors: &[&Command]) -> String {
    let man = Man::new(cmd.clone());
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    let (notes, mut examples) = split_examples(&after);
    if examples.is_empty() {
        examples = gathered_examples(cmd);
    }

    let mut synopsis = Roff::new();
    synopsis_section(&mut synopsis, cmd);
    // The top page's notes are too long for --help, which points to this page instead.
    let notes = match ancestors.is_empty() {
        true => super::NOTES.to_owned(),
        false => notes,
    };
    let mut ours = Roff::new();
    environment_section(&mut ours, cmd);
    exit_status_section(&mut ours, cmd);
    if !notes.is_empty() {
        ours.control("SH", ["NOTES"]);
        paragraphs(&mut ours, &notes);
    }
    if !examples.is_empty() {
        examples_section(&mut ours, &examples);
    }
    see_also_section(&mut ours, cmd, ancestors);

    let mut page = Page::default();
    page.push_str(&title_line(cmd));
    page.push(|w| man.render_name_section(w));
    page.push(|w| synopsis.to_writer(w));
    page.push(|w| man.render_description_section(w));
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        page.push(|w| man.render_options_section(w));
    }
    if visible_subcommands(cmd).next().is_some() {
        page.push(|w| man.render_subcommands_section(w));
    }
    page.push(|w| ours.to_writer(w));
    if cmd.get_version().or(cmd.get_long_version()).is_some() {
        page.push(|w| man.render_version_section(w));
    }
    page.0
}

/// A page put together from separately rendered sections.
struct Page(String);

impl Default for Page {
    fn default() -> Page {
        Page(preamble())
    }
}

impl Page {
    fn push_str(&mut self, roff: &str) {
        self.0.push_str(roff);
    }

    /// Appends a rendered section, without the preamble every render starts with.
    fn push(&mut self, render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) {
        let mut buf = Vec::new();
        render(&mut buf).expect("rendering into memory cannot fail");
        let text = String::from_utf8(buf).expect("man pages are UTF-8");
        self.0
            .push_str(text.strip_prefix(&preamble()).unwrap_or(&text));
    }
}

/// The definitions (of the apostrophe) the roff crate starts every rendering with.
fn preamble() -> String {
    Roff::new().render()
}

/// Like clap's usage line, with every option spelled out: clap_mangen's own leaves out option
/// values, repetition and the `--` before a trailing command, and shows hidden positionals.
fn synopsis_section(roff: &mut Roff, cmd: &Command) {
    roff.control("SH", ["SYNOPSIS"]);
    let mut line = vec![bold(cmd.get_bin_name().unwrap_or_else(|| cmd.get_name()))];
    let mut options: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .collect();
    options.sort_by_key(|a| a.get_display_order()); // stable: declaration order otherwise
    for opt in options {
        let optional = !opt.is_required_set();
        line.push(roman(if optional { " [" } else { " " }));
        if let Some(short) = opt.get_short() {
            line.push(bold(format!("-{short}")));
        }
        if let Some(long) = opt.get_long() {
            if opt.get_short().is_some() {
                line.push(roman("|"));
            }
            line.push(bold(format!("--{long}")));
        }
        if opt.get_num_args().is_some_and(|n| n.takes_values()) {
            line.push(roman(" "));
            line.extend(value_placeholder(opt));
        }
        if matches!(opt.get_action(), ArgAction::Count | ArgAction::Append) {
            line.push(roman("..."));
        }
        if optional {
            line.push(roman("]"));
        }
    }
    for pos in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let optional = !pos.is_required_set();
        line.push(roman(if optional { " [" } else { " " }));
        if pos.is_last_set() {
            line.push(bold("--"));
            line.push(roman(" "));
        } else if pos.is_trailing_var_arg_set() {
            line.push(roman("["));
            line.push(bold("--"));
            line.push(roman("] "));
        }
        line.extend(value_placeholder(pos));
        if optional {
            line.push(roman("]"));
        }
    }
    if visible_subcommands(cmd).next().is_some() {
        let name = cmd.get_subcommand_value_name().unwrap_or("SUBCOMMAND");
        match cmd.is_subcommand_required_set() {
            true => line.push(roman(" ")),
            false => line.push(roman(" [")),
        }
        line.push(italic(name));
        if !cmd.is_subcommand_required_set() {
            line.push(roman("]"));
        }
    }
    roff.text(line);
}

/// `DUR`, or `COMMAND...` for an argument that takes several values.
fn value_placeholder(arg: &Arg) -> Vec<Inline> {
    let names: Vec<String> = match arg.get_value_names() {
        Some(names) => names.iter().map(std::string::ToString::to_string).collect(),
        None => vec![arg.get_id().as_str().to_uppercase()],
    };
    let many = arg
        .get_num_args()
        .is_some_and(|n| n.max_values() > names.len());
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(roman(" "));
        }
        out.push(italic(name.as_str()));
    }
    if many {
        out.push(roman("..."));
    }
    out
}

/// `.TH` with every argument quoted: clap_mangen writes an empty date as nothing at all, which
/// shifts the source into the date's place. No date, so that the page depends on the CLI only.
fn title_line(cmd: &Command) -> String {
    let title = page_name(cmd).to_uppercase().replace('-', "\\-");
    // No hyphenation (it would split option names), ragged right.
    format!(".TH \"{title}\" \"1\" \"\" \"fsync {VERSION}\" \"fsync Manual\"\n.nh\n.ad l\n")
}

/// The variables of [`environment::TABLE`] that concern this page or one below it.
fn environment_section(roff: &mut Roff, cmd: &Command) {
    let name = page_name(cmd);
    let vars: Vec<_> = environment::TABLE
        .iter()
        .filter(|(_, pages, _)| pages.iter().any(|p| p.starts_with(name)))
        .collect();
    if vars.is_empty() {
        return;
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (var, _, meaning) in vars {
        roff.control("TP", []);
        roff.text([bold(*var)]);
        roff.text([roman(*meaning)]);
    }
}

fn exit_status_section(roff: &mut Roff, cmd: &Command) {
    roff.control("SH", ["EXIT STATUS"]);
    // `fsync flock` keeps flock(1)'s statuses, not fsync's.
    let table = match page_name(cmd) {
        "fsync-flock" => super::flock::EXIT_STATUS,
        _ => exit_code::TABLE,
    };
    for (code, meaning) in table {
        roff.control("TP", []);
        let label = match code.starts_with(|c: char| c.is_ascii_digit()) {
            true => bold(*code),
            false => italic(*code),
        };
        roff.text([label]);
        roff.text([roman(*meaning)]);
    }
}

fn see_also_section(roff: &mut Roff, cmd: &Command, ancestors: &[&Command]) {
    let mut refs: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, section: &str| {
        let r = (name.to_owned(), section.to_owned());
        if name != page_name(cmd) && !refs.contains(&r) {
            refs.push(r);
        }
    };
    for up in ancestors {
        add(page_name(up), "1");
    }
    for sub in visible_subcommands(cmd) {
        add(page_name(sub), "1");
    }
    for (name, section) in SEE_ALSO_SYSTEM {
        add(name, section);
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut line = Vec::new();
    for (i, (name, section)) in refs.iter().enumerate() {
        line.push(bold(name.as_str()));
        let sep = if i + 1 < refs.len() { ", " } else { "" };
        line.push(roman(format!("({section}){sep}")));
    }
    roff.text(line);
}

/// Paragraphs of prose: blank lines separate them.
fn paragraphs(roff: &mut Roff, text: &str) {
    for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        roff.control("PP", []);
        roff.text([roman(para.split_whitespace().collect::<Vec<_>>().join(" "))]);
    }
}

// ---------------------------------------------------------------------------------------------
// Examples

/// One example: a few lines, `# comments` and commands, without their common indentation.
type Example = Vec<String>;

/// Splits `after_long_help` into the text before its `Examples:` line and the examples after
/// it, one per group of lines separated by blank lines.
fn split_examples(after: &str) -> (String, Vec<Example>) {
    let lines: Vec<&str> = after.lines().collect();
    let Some(at) = lines.iter().position(|l| l.trim() == "Examples:") else {
        return (after.trim().to_owned(), Vec::new());
    };
    let notes = lines[..at].join("\n").trim().to_owned();
    let body = &lines[at + 1..];
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut examples: Vec<Example> = Vec::new();
    let mut current: Example = Vec::new();
    for line in body {
        if line.trim().is_empty() {
            if !current.is_empty() {
                examples.push(std::mem::take(&mut current));
            }
        } else {
            current.push(line[indent..].trim_end().to_owned());
        }
    }
    if !current.is_empty() {
        examples.push(current);
    }
    (notes, examples)
}

/// For a command without examples of its own: the first examples of each subcommand, about
/// [`GATHERED_EXAMPLES`] in all but at least one from each.
fn gathered_examples(cmd: &Command) -> Vec<Example> {
    let subs: Vec<&Command> = visible_subcommands(cmd).collect();
    let each = (GATHERED_EXAMPLES / subs.len().max(1)).max(1);
    subs.into_iter()
        .flat_map(|sub| {
            let after = sub
                .get_after_long_help()
                .or_else(|| sub.get_after_help())
                .map(std::string::ToString::to_string)
                .unwrap_or_default();
            let (_, own) = split_examples(&after);
            let examples = if own.is_empty() {
                gathered_examples(sub)
            } else {
                own
            };
            // Out of its page, an example without a comment gets its command's summary.
            let about = sub.get_about().map(|a| format!("# {a}"));
            examples.into_iter().take(each).map(move |mut example| {
                if let (Some(about), false) = (&about, example[0].starts_with('#')) {
                    example.insert(0, about.clone());
                }
                example
            })
        })
        .collect()
}

/// Comments become prose, commands an indented literal block under them.
fn examples_section(roff: &mut Roff, examples: &[Example]) {
    roff.control("SH", ["EXAMPLES"]);
    for example in examples {
        roff.control("PP", []);
        let mut prose: Vec<&str> = Vec::new();
        let mut code: Vec<&str> = Vec::new();
        let mut started = false;
        let mut flush = |roff: &mut Roff, prose: &mut Vec<&str>, code: &mut Vec<&str>| {
            if !prose.is_empty() {
                if started {
                    roff.control("PP", []);
                }
                roff.text([roman(prose.join(" "))]);
                prose.clear();
                started = true;
            }
            if !code.is_empty() {
                roff.control("RS", ["4"]);
                roff.control("nf", []);
                for line in code.iter() {
                    roff.text([roman(*line)]);
                }
                roff.control("fi", []);
                roff.control("RE", []);
                code.clear();
                started = true;
            }
        };
        for line in example {
            match line.strip_prefix('#') {
                Some(comment) => {
                    if !code.is_empty() {
                        flush(roff, &mut prose, &mut code);
                    }
                    prose.push(comment.trim());
                }
                None => code.push(line),
            }
        }
        flush(roff, &mut prose, &mut code);
    }
}

// ---------------------------------------------------------------------------------------------
// The test

#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, fmt::Write as _};

    use crate::cli::escape::Show as _;

    use super::*;

    /// The environment variable that makes the test rewrite the files instead of comparing them.
    const BLESS: &str = "FSYNC_BLESS";

    /// Every generated file: path relative to the crate root -> contents.
    fn render_all() -> BTreeMap<PathBuf, String> {
        let mut files = BTreeMap::new();
        for (name, page) in man_pages(Cli::command()) {
            files.insert(Path::new("man/man1").join(name), page);
        }
        for (shell, name) in [
            (Shell::Bash, "fsync.bash"),
            (Shell::Zsh, "_fsync"),
            (Shell::Fish, "fsync.fish"),
        ] {
            files.insert(Path::new("completions").join(name), completion(shell));
        }
        files
    }

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// Checked-in man pages that no command renders any more.
    fn stale_man_pages(files: &BTreeMap<PathBuf, String>) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(root().join("man/man1")) else {
            return Vec::new();
        };
        let mut stale: Vec<PathBuf> = entries
            .filter_map(std::result::Result::ok)
            .map(|e| Path::new("man/man1").join(e.file_name()))
            .filter(|p| p.extension().is_some_and(|x| x == "1") && !files.contains_key(p))
            .collect();
        stale.sort();
        stale
    }

    /// Where `old` and `new` first differ, for the failure message.
    fn first_difference(old: &str, new: &str) -> String {
        let (mut old_lines, mut new_lines) = (old.lines(), new.lines());
        for n in 1.. {
            match (old_lines.next(), new_lines.next()) {
                (Some(a), Some(b)) if a == b => continue,
                (None, None) => break,
                (a, b) => {
                    return format!(
                        "line {n}: checked in {:?}, generated {:?}",
                        a.unwrap_or("<end>"),
                        b.unwrap_or("<end>")
                    );
                }
            }
        }
        "line endings differ".to_owned()
    }

    #[test]
    fn generated_files_are_current() {
        let files = render_all();
        let stale = stale_man_pages(&files);
        let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
        let mut drift = String::new();
        for (path, contents) in &files {
            let full = root().join(path);
            let old = fs::read_to_string(&full).ok();
            if old.as_deref() == Some(contents.as_str()) {
                continue;
            }
            if bless {
                fs::create_dir_all(full.parent().expect("files live in a directory")).unwrap();
                fs::write(&full, contents).unwrap_or_else(|e| panic!("{}: {e}", full.shown()));
                eprintln!("wrote {}", path.shown());
                continue;
            }
            let why = match old {
                None => "missing".to_owned(),
                Some(old) => first_difference(&old, contents),
            };
            writeln!(drift, "  {}: {why}", path.shown()).unwrap();
        }
        for path in &stale {
            if bless {
                fs::remove_file(root().join(path)).unwrap();
                eprintln!("removed {}", path.shown());
            } else {
                writeln!(drift, "  {}: no such command any more", path.shown()).unwrap();
            }
        }
        assert!(
            drift.is_empty(),
            "man pages or completions differ from the CLI definition:\n{drift}\
             run `{BLESS}=1 cargo test generated` to regenerate them, and check in the result"
        );
    }

    #[test]
    fn examples_split_into_comments_and_commands() {
        let (notes, examples) =
            split_examples("Note.\n\nExamples:\n  # one\n  a --b\n    c\n\n  d\n  .e\n");
        assert_eq!(notes, "Note.");
        assert_eq!(
            examples,
            vec![vec!["# one", "a --b", "  c"], vec!["d", ".e"]]
        );
        let mut roff = Roff::new();
        examples_section(&mut roff, &examples);
        let text = roff.render();
        assert!(
            text.contains("\n.PP\none\n.RS 4\n.nf\na \\-\\-b\n  c\n.fi\n.RE\n"),
            "{text}"
        );
        assert!(
            text.contains("\n\\&.e\n"),
            "a leading dot is escaped: {text}"
        );
    }

    #[test]
    fn every_page_has_the_sections_and_no_help_page() {
        let pages = man_pages(Cli::command());
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.contains(&"fsync.1") && names.contains(&"fsync-mutex-run.1"),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.ends_with("-help.1")), "{names:?}");
        for (name, page) in &pages {
            for section in [
                "NAME",
                "SYNOPSIS",
                "DESCRIPTION",
                "OPTIONS",
                "\"EXIT STATUS\"",
                "EXAMPLES",
                "\"SEE ALSO\"",
                "VERSION",
            ] {
                assert!(
                    page.contains(&format!("\n.SH {section}\n")),
                    "{name} has no {section} section (examples come from an `Examples:` block in the \
                     command's after_long_help)"
                );
            }
            assert!(!page.contains("\\-help("), "{name} refers to a help page");
        }
    }

    #[test]
    fn hidden_arguments_and_subcommands_have_no_place() {
        let cli = Command::new("t")
            .version("1")
            .arg(Arg::new("shown").long("shown").visible_alias("seen"))
            .arg(Arg::new("secret").long("secret").hide(true))
            .arg(Arg::new("SECRET_POS").hide(true))
            .subcommand(Command::new("open").after_long_help("Examples:\n  t open"))
            .subcommand(Command::new("closed").hide(true));
        let pages = man_pages(cli);
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["t.1", "t-open.1"]);
        let top = &pages[0].1;
        assert!(
            top.contains("\\-\\-shown") && top.contains("[alias: \\-\\-seen]"),
            "{top}"
        );
        for hidden in ["secret", "SECRET", "closed", "help("] {
            assert!(!top.contains(hidden), "{hidden} in {top}");
        }
        assert!(
            top.contains(".SH EXAMPLES\n.PP\n.RS 4\n.nf\nt open\n"),
            "gathered: {top}"
        );
    }
}
