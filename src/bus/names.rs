//! Participant names: which are valid, and why one is not (the module docs, *Names on disk*,
//! say how they map to files).

/// The longest participant name, in bytes of UTF-8 (a Cyrillic letter takes two): the
/// longest file name derived from it, a message it sent being received
/// (`claimed/SEQ.UNIQ.NAME.sync~RID`, module docs), stays within the 255 bytes file systems
/// allow.
pub const MAX_NAME_BYTES: usize = 100;

/// A valid participant name, or the reason it is not: 1 to [`MAX_NAME_BYTES`] bytes of
/// letters (any alphabet), digits, `_`, `-` and `.`, neither beginning nor ending with `.`,
/// and not beginning with `fsync.` in any case (fsync's own files in the bus directory are
/// named `.fsync.*`). So a name is never `.`, `..`, a path, a hidden participant (`.NAME`) or
/// one of fsync's files, and holds no control character (module docs, *Names on disk*).
pub fn check_name(name: &str) -> std::result::Result<(), crate::error::InvalidName> {
    let invalid = |why: &str| {
        Err(crate::error::InvalidName(format!(
            "invalid participant name '{name}': {why}"
        )))
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return invalid("use letters, digits, '_', '-' and '.'");
    }
    if name.starts_with('.') || name.ends_with('.') {
        return invalid("'.' may not come first or last");
    }
    if name.len() > MAX_NAME_BYTES {
        return invalid(&format!(
            "{} bytes long, at most {MAX_NAME_BYTES} (in UTF-8)",
            name.len()
        ));
    }
    if name
        .get(..RESERVED.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED))
    {
        return invalid("names beginning with 'fsync.' are fsync's own");
    }
    Ok(())
}

/// The beginning of the names fsync keeps for its own files in a bus (the hidden `.fsync.lock`
/// is the hidden name of a participant `fsync.lock`).
const RESERVED: &str = "fsync.";
