//! The members' registrations of a group (`members/NAME`, see the module docs of
//! [`crate::group`]): what each says, telling the living from the dead, and removing the dead.

use super::*;

pub(super) fn render_holder(holder: &Holder) -> String {
    holder::render(&Record {
        fence: 0,
        holder: Some(holder.clone()),
    })
}

/// A registration's record: the holder's, with [`CLEANUP_MARK`] while its clean-up runs.
pub(super) fn render_member(holder: &Holder, cleaning: bool) -> String {
    let text = render_holder(holder);
    match (cleaning, text.strip_suffix("end\n")) {
        (true, Some(head)) => format!("{head}{CLEANUP_MARK}\nend\n"),
        _ => text,
    }
}

/// [`reap`] the group's `members/`, if it has one.
pub(super) fn reap_in(top: &Dir) {
    if let Ok(Some(members)) = top.open_sub("members") {
        reap(&members);
    }
}

/// Registrations nobody holds belong to dead members: remove them (best effort, as any reader
/// may). Temporary names are left for a minute, since their member may be between create and lock.
/// Only regular files are registrations: anything else someone put there stays.
pub(super) fn reap(members: &Dir) {
    let Ok(entries) = members.entries() else {
        return;
    };
    for (name, _) in entries {
        if let Found::Dead = Registration::find(members, &name) {
            let stale_tmp = name.starts_with(".tmp-")
                && members.stat(&name).is_ok_and(|st| {
                    let now = procinfo::now_micros() as i64 / 1_000_000;
                    now - st.st_mtime > 60
                });
            if stale_tmp || !name.starts_with('.') {
                let _ = members.unlink_file(&name);
            }
        }
    }
}

/// A registration in `members` that some member holds, with its name (dead ones' are skipped,
/// and removed with `reap`; so is `own`, the caller's).
pub(super) fn held_registration(
    members: &Dir,
    own: Option<&str>,
    reap: bool,
) -> Option<(String, File)> {
    let entries = members.entries().ok()?;
    entries.into_iter().find_map(|(name, _)| {
        if name.starts_with('.') || Some(name.as_str()) == own {
            return None;
        }
        match Registration::find(members, &name) {
            Found::Alive(file) => Some((name, file)),
            Found::Dead if reap => {
                let _ = members.unlink_file(&name);
                None
            }
            _ => None,
        }
    })
}

/// The line a last leaver adds to its registration while its clean-up runs (holder records
/// ignore keys they do not know).
pub(super) const CLEANUP_MARK: &str = "cleanup 1";

/// Whether a registration (open for reading) is marked as a clean-up's.
pub(super) fn is_cleanup(file: &File) -> bool {
    use std::io::Read;
    let mut text = String::new();
    let _ = file.take(64 * 1024).read_to_string(&mut text);
    text.lines()
        .take_while(|&l| l != "end")
        .any(|l| l == CLEANUP_MARK)
}
