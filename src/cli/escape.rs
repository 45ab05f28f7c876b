/*!
Text another user wrote, made safe to print: names in a queue, command lines and host names in
holder records, the paths in error lines. Printed raw, a name holding a newline forges a line
of `msg list`, and a command line holding ESC or BEL sends control sequences to the terminal of
whoever runs `mutex status` (root's, in a shared `/tmp`). So every text output shows such text
through [`escaped`], as `ls -b` and systemd show file names:

- printable UTF-8 is kept as it is;
- a backslash becomes `\\`;
- `\a`, `\b`, `\t`, `\n`, `\v`, `\f`, `\r` and `\e` (ESC) name those control characters; every
  other control character (C0, DEL, C1), and the invisible characters that reorder or break a
  line (bidirectional controls, U+2028 and U+2029), become `\xHH` for each of their UTF-8 bytes;
- a byte that is not part of valid UTF-8 becomes `\xHH`.

The result is one line of printable text, and decodes back to the bytes it was made from.
JSON output needs none of this (serde escapes strings), and keeps values raw.

A path is shown through [`Shown`] (`path.shown()`), which escapes its bytes as they are: one
that is not UTF-8 shows `\xHH` for each byte that is not, where `Path::display` would print a
replacement character, and raw control characters too. `Path::display` has no place in the
command's text output (`tests/architecture.rs` keeps it out of `src/cli/`).

This file uses nothing but `std`: the library's property tests (`src/proptests.rs`) include it.
*/

use std::{borrow::Cow, ffi::OsStr, fmt, os::unix::ffi::OsStrExt, path::Path};

/// `text` as it may be printed (module docs); borrowed when nothing needed escaping.
pub(super) fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || hidden(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    text.chars().for_each(|c| push_char(&mut out, c));
    Cow::Owned(out)
}

/// `bytes`, which need not be UTF-8, as they may be printed (module docs).
pub(super) fn escaped_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        chunk.valid().chars().for_each(|c| push_char(&mut out, c));
        chunk.invalid().iter().for_each(|&b| push_hex(&mut out, b));
    }
    out
}

/// A path or file name as it may be printed: `{}` of it writes its bytes escaped (module docs).
pub(super) struct Shown<'a>(&'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped_bytes(self.0))
    }
}

/// `.shown()`: what a path or a file name looks like in text output ([`Shown`]).
pub(super) trait Show {
    fn shown(&self) -> Shown<'_>;
}

impl Show for Path {
    fn shown(&self) -> Shown<'_> {
        Shown(self.as_os_str().as_bytes())
    }
}

impl Show for OsStr {
    fn shown(&self) -> Shown<'_> {
        Shown(self.as_bytes())
    }
}

/// Whether `c` must not reach a terminal as it is: a control character, or one that changes
/// how the rest of a line is shown.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

fn push_char(out: &mut String, c: char) {
    let named = match c {
        '\\' => "\\\\",
        '\x07' => "\\a",
        '\x08' => "\\b",
        '\t' => "\\t",
        '\n' => "\\n",
        '\x0b' => "\\v",
        '\x0c' => "\\f",
        '\r' => "\\r",
        '\x1b' => "\\e",
        c if hidden(c) => {
            let mut utf8 = [0; 4];
            c.encode_utf8(&mut utf8)
                .bytes()
                .for_each(|b| push_hex(out, b));
            return;
        }
        c => {
            out.push(c);
            return;
        }
    };
    out.push_str(named);
}

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 15)]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        assert!(matches!(escaped("make -j4 'a b'"), Cow::Borrowed(_)));
        assert_eq!(escaped("été ∞ 日本"), "été ∞ 日本");
        assert_eq!(escaped("a\\b"), "a\\\\b");
        assert_eq!(
            escaped("x\n2 messages\x1b]0;pwned\x07\t\r"),
            "x\\n2 messages\\e]0;pwned\\a\\t\\r"
        );
        assert_eq!(
            escaped("\0\x7f\u{9b}\u{202e}"),
            "\\x00\\x7f\\xc2\\x9b\\xe2\\x80\\xae"
        );
        assert_eq!(escaped_bytes(b"ok\xff\xc3"), "ok\\xff\\xc3");
    }

    #[test]
    fn paths_are_shown_escaped_byte_for_byte() {
        let path = Path::new(OsStr::from_bytes(b"/tmp/a\x1b]0;x\x07\n\xff.lck"));
        assert_eq!(path.shown().to_string(), "/tmp/a\\e]0;x\\a\\n\\xff.lck");
        assert_eq!(OsStr::new("plain").shown().to_string(), "plain");
    }
}
