//! Text for a terminal: what the model, a tool, a hook or a provider wrote, with everything a terminal would act on
//! instead of showing made visible.
//!
//! A terminal obeys escape sequences wherever they appear in what it is given: `ESC [ 2 J` clears the screen,
//! `ESC [ 3 A` moves up three lines, `\r` returns to the start of the line, OSC 52 (`ESC ] 52 ; c ; … BEL`) sets the
//! clipboard, OSC 8 hides a link behind other text. Printed raw, a model's answer or a file a tool read could redraw
//! an approval question so that the user approves a different call than the one shown (security review 2, N4).
//! [`terminal_safe`] is the one function every writer of such text goes through (`loom run`, and `loom prompt
//! --format text|trace` when stdout is a terminal); loom's own styling is added after it, so it is the only
//! formatting that reaches the terminal.
//!
//! What is neutralised, shown as the escape a programmer would write so nothing disappears silently:
//! - every C0 control but `\n` and `\t` (ESC as `\x1b`, BEL as `\x07`, backspace as `\x08`, …) and DEL (`\x7f`);
//! - `\r`, unless it is the `\r` of a `\r\n` line end (then the line end is kept as `\n`): a lone `\r` would
//!   overwrite the line, and shows as `\r`;
//! - the C1 controls U+0080–U+009F (`\u{9b}` is the 8-bit CSI some terminals obey), as `\u{9b}`;
//! - the bidirectional embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, which reorder what is
//!   displayed (the "Trojan Source" trick), as `\u{202e}`.
//!
//! Kept as they are: every other character, including the bidirectional marks U+200E/U+200F/U+061C (they only
//! affect the neutral characters next to them and appear in ordinary right-to-left text), and backslashes (a
//! literal `\x1b` in the text is four harmless characters; a reader who needs the difference has `--format jsonl`).

use std::borrow::Cow;
use std::fmt::Write;

/// True for the characters [`terminal_safe`] rewrites.
fn unsafe_char(c: char) -> bool {
    matches!(c,
        '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'
        | '\u{80}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character and escape sequence a terminal would act on shown visibly instead (see the
/// module documentation for the table); `\n` and `\t` are kept. Borrowed when there is nothing to change. The
/// rewrite is per character, so text streamed in chunks may be passed chunk by chunk: a sequence split across two
/// chunks is neutralised in both halves (only a `\r\n` split between chunks shows its `\r`).
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\r"),
            c if c.is_ascii() && unsafe_char(c) => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_shown_not_obeyed() {
        let table: &[(&str, &str, &str)] = &[
            ("plain text", "plain text", "nothing to change"),
            ("a\n\tb", "a\n\tb", "newline and tab are kept"),
            (
                "one\r\ntwo\r\n",
                "one\ntwo\n",
                "a CRLF line end stays a line end",
            ),
            (
                "\x1b[2J\x1b[3A\x1b[J",
                "\\x1b[2J\\x1b[3A\\x1b[J",
                "CSI: clear screen, cursor up, erase below",
            ),
            (
                "\x1b]52;c;aGVsbG8=\x07",
                "\\x1b]52;c;aGVsbG8=\\x07",
                "OSC 52 clipboard write (BEL-terminated)",
            ),
            (
                "\x1b]52;c;aGVsbG8=\x1b\\",
                "\\x1b]52;c;aGVsbG8=\\x1b\\",
                "OSC 52 with the ST terminator",
            ),
            (
                "\x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\",
                "\\x1b]8;;https://evil.example\\x1b\\docs\\x1b]8;;\\x1b\\",
                "OSC 8 hyperlink",
            ),
            ("ding\x07", "ding\\x07", "BEL"),
            (
                "abc\x08\x08\x08xyz",
                "abc\\x08\\x08\\x08xyz",
                "backspace overwrite",
            ),
            (
                "git push evil #\r? bash git status",
                "git push evil #\\r? bash git status",
                "a lone CR (overwrite the line)",
            ),
            ("end\r", "end\\r", "a trailing CR"),
            ("\0\x0b\x0c\x7f", "\\x00\\x0b\\x0c\\x7f", "NUL, VT, FF, DEL"),
            ("\u{9b}2J", "\\u{9b}2J", "the 8-bit CSI (C1)"),
            (
                "\u{9d}52;c;x\u{9c}",
                "\\u{9d}52;c;x\\u{9c}",
                "8-bit OSC and ST",
            ),
            ("\u{80}\u{9f}", "\\u{80}\\u{9f}", "the C1 range's ends"),
            (
                "a\u{202e}cba\u{202c}",
                "a\\u{202e}cba\\u{202c}",
                "right-to-left override and pop",
            ),
            (
                "\u{202a}\u{202b}\u{202d}",
                "\\u{202a}\\u{202b}\\u{202d}",
                "embeddings and LTR override",
            ),
            (
                "\u{2066}x\u{2067}y\u{2068}z\u{2069}",
                "\\u{2066}x\\u{2067}y\\u{2068}z\\u{2069}",
                "isolates",
            ),
            (
                "\u{200f}שלום \u{a0}é ⏺ 日本",
                "\u{200f}שלום \u{a0}é ⏺ 日本",
                "marks, RTL text, NBSP and other non-ASCII are kept",
            ),
            (
                "\\x1b",
                "\\x1b",
                "a literal backslash sequence is left as it is",
            ),
        ];
        for (input, want, what) in table {
            let got = terminal_safe(input);
            assert_eq!(got, *want, "{what}");
            // nothing a terminal acts on survives, except the line end and the tab
            assert!(
                !got.chars().any(|c| unsafe_char(c) || c == '\r'),
                "{what}: {got:?}"
            );
            assert_eq!(
                matches!(got, Cow::Borrowed(_)),
                input == want,
                "{what}: borrowed exactly when unchanged"
            );
        }
    }

    #[test]
    fn every_control_character_is_covered() {
        for n in (0u32..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(n).unwrap();
            if c == '\n' || c == '\t' {
                assert_eq!(terminal_safe(&c.to_string()), c.to_string());
                continue;
            }
            let got = terminal_safe(&c.to_string()).into_owned();
            assert!(got.starts_with('\\') && got.len() >= 2, "{n:#x}: {got:?}");
        }
    }

    #[test]
    fn a_sequence_split_across_chunks_is_neutralised_in_both_halves() {
        let whole = "before\x1b[2Jafter\x1b]52;c;eA==\x07";
        for at in 0..=whole.len() {
            let joined = format!(
                "{}{}",
                terminal_safe(&whole[..at]),
                terminal_safe(&whole[at..])
            );
            assert_eq!(joined, terminal_safe(whole), "split at {at}");
        }
    }
}
