//! Finding the oldest message and claiming it, recovering claims of receivers that died, and a synchronous sender's withdrawal (steps of the protocol in [`super`]'s docs).

use super::*;

/// Is the registration `dir/id` held by a living process? Missing means no; what cannot be
/// told means yes: never discard on doubt.
pub(super) fn held(dir: &Dir, id: &str) -> bool {
    !matches!(Registration::find(dir, id), Found::Nothing | Found::Dead)
}

/// Queue entries that are messages, with their parsed names.
type Names = Vec<(String, MessageName)>;

/// The names in `q` that are messages, oldest first, and the entries that are not.
pub(super) fn queued_names(q: &Dir) -> Result<(Names, Vec<Skipped>)> {
    let entries = q
        .entries()
        .map_err(|e| pfs::explain_open_error(q.path(), "cannot list queue", e))?;
    let mut names = Vec::new();
    let mut bad = Vec::new();
    for (name, kind) in entries {
        // fsync never makes such a name, and printed it could forge a line of a listing.
        if !name.starts_with('.') && name.chars().any(char::is_control) {
            bad.push(Skipped {
                name,
                reason: "has control characters in its name: not a message fsync made".to_string(),
            });
            continue;
        }
        let Some(parsed) = MessageName::parse(&name) else {
            if !name.starts_with('.') {
                bad.push(Skipped {
                    name,
                    reason: "is not named like a message".to_string(),
                });
            }
            continue;
        };
        if let Some(Kind::Dir) = kind {
            bad.push(skip(&name, &q.wrong_kind(&name, Kind::File)));
            continue;
        }
        names.push((name, parsed));
    }
    names.sort_by(|a, b| (a.1.seq, &a.0).cmp(&(b.1.seq, &b.0)));
    Ok((names, bad))
}

/// Return the claims of dead receivers to the queue.
pub(super) fn recover(l: &Layout) {
    let Ok(entries) = l.claimed.entries() else {
        return;
    };
    for (claimed, kind) in entries {
        if kind == Some(Kind::Dir) {
            continue;
        }
        let Some((name, rid)) = claimed.rsplit_once('~') else {
            continue;
        };
        if MessageName::parse(name).is_some() && !held(&l.recv, rid) {
            let _ = l.claimed.rename(&claimed, &l.q, name);
        }
    }
}

/// Claim the oldest message we can read; entries we cannot use are reported and passed over.
pub(super) fn try_claim(
    l: &Layout,
    rid: &str,
    skipped: &mut dyn FnMut(Skipped),
) -> Result<Option<(File, String, Option<String>)>> {
    recover(l);
    let (names, bad) = queued_names(&l.q)?;
    bad.into_iter().for_each(&mut *skipped);
    for (name, parsed) in names {
        // Open before claiming: a message we may not read, or that is not a file fsync made,
        // stays in the queue for whoever can use it.
        let (file, meta) = match l.q.open_stat(&name, false) {
            Ok(Some(f)) => f,
            Ok(None) => continue, // another receiver won
            Err(e) => {
                skipped(skip(&name, &e));
                continue;
            }
        };
        if !l.q.sole_link(&name, &file, Some(&meta)).unwrap_or(false) {
            if l.q.stat(&name).is_err() {
                continue; // claimed by another receiver since our open (or a link gone)
            }
            skipped(Skipped {
                name,
                reason: "has other hard links: not a message fsync made".to_string(),
            });
            continue;
        }
        let mut claimed = format!("{name}~{rid}");
        match l.q.rename(&name, &l.claimed, &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // another receiver won
            Err(e) => return Err(Error::io(&l.q.join(&name), "cannot claim message", e)),
        }
        // What we claimed must be what we opened (the owner of the mailbox could swap it).
        let same = l
            .claimed
            .stat(&claimed)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (meta.st_dev, meta.st_ino));
        if !same {
            let _ = l.claimed.rename(&claimed, &l.q, &name);
            skipped(Skipped {
                name,
                reason: "was replaced while being received".to_string(),
            });
            continue;
        }
        if parsed.sync {
            if !held(&l.senders, &parsed.uniq) {
                let _ = l.claimed.unlink_file(&claimed); // its sender died or gave up
                let _ = l.senders.unlink_file(&parsed.uniq);
                continue;
            }
            let taken = format!(
                "{}~{rid}",
                MessageName {
                    sync: false,
                    ..parsed.clone()
                }
                .render()
            );
            l.claimed
                .rename(&claimed, &l.claimed, &taken)
                .map_err(|e| Error::io(&l.claimed.join(&claimed), "cannot take message", e))?;
            claimed = taken;
        }
        return Ok(Some((file, claimed, parsed.from)));
    }
    Ok(None)
}

pub(super) enum SendState {
    Queued,
    Claiming(String),
    Taken,
}

pub(super) fn send_state(l: &Layout, name: &str, stem: &str) -> Result<SendState> {
    if l.q.stat(name).is_ok() {
        return Ok(SendState::Queued);
    }
    let prefix = format!("{stem}.sync~");
    let entries = l
        .claimed
        .entries()
        .map_err(|e| Error::io(l.claimed.path(), "cannot list", e))?;
    for (entry, _) in entries {
        if let Some(rid) = entry.strip_prefix(&prefix) {
            return Ok(SendState::Claiming(rid.to_string()));
        }
    }
    Ok(SendState::Taken)
}

/// Take a synchronous message back; `true` if withdrawn, `false` if a receiver took it first.
pub(super) fn withdraw(l: &Layout, name: &str, stem: &str, watch: &DirWatch) -> Result<bool> {
    loop {
        match l.q.unlink_any(name) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&l.q.join(name), "cannot withdraw message", e)),
        }
        match send_state(l, name, stem)? {
            SendState::Taken => return Ok(false),
            SendState::Queued => continue,
            SendState::Claiming(rid) => {
                if !held(&l.recv, &rid) {
                    let claimed = format!("{stem}.sync~{rid}");
                    let _ = l.claimed.rename(&claimed, &l.q, name);
                    continue;
                }
                // The receiver converts it in microseconds; its death shows in no event.
                watch
                    .wait_timeout(Duration::from_millis(10))
                    .map(drop)
                    .map_err(|e| Error::io(l.claimed.path(), "cannot wait", e))?;
            }
        }
    }
}
