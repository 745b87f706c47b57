//! From text to a TOML table: the size limit, the nesting pre-scan, and syntax errors with line and column.

use super::error::{Ctx, ManifestError};

/// The largest manifest (or tool group) text accepted: 1 MiB.
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;

/// The deepest nesting of arrays, tables and dotted keys accepted.
pub const MAX_NESTING: usize = 64;

/// Parses `text` as a TOML document after the size and nesting checks.
pub(crate) fn parse_toml(ctx: Ctx<'_>, text: &str) -> Result<toml::Table, ManifestError> {
    check_size(ctx, text)?;
    check_nesting(ctx, text)?;
    toml::from_str::<toml::Table>(text).map_err(|e| syntax_error(ctx, text, &e))
}

fn check_size(ctx: Ctx<'_>, text: &str) -> Result<(), ManifestError> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(ctx.err(
            "",
            format!("manifest is {} bytes; the limit is 1 MiB", text.len()),
        ));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scan {
    Normal,
    Comment,
    Basic,
    Literal,
    MultiBasic,
    MultiLiteral,
}

/// Refuses nesting deeper than [`MAX_NESTING`] outside strings and comments. Brackets, braces and the dots of dotted
/// keys (`a.b.c = 1`, `[a.b.c]`) each open a level. Cheap and conservative: it runs before the TOML parser so that no
/// recursive code (the parser's, ours, or a destructor's) ever sees a pathologically deep document.
fn check_nesting(ctx: Ctx<'_>, text: &str) -> Result<(), ManifestError> {
    let bytes = text.as_bytes();
    let mut state = Scan::Normal;
    let mut opened: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut dots = 0usize;
    let mut line = 1usize;
    let mut i = 0usize;
    let starts = |i: usize, pat: &[u8]| bytes.get(i..i + pat.len()) == Some(pat);
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line += 1;
        }
        match state {
            Scan::Normal => match b {
                b'#' => state = Scan::Comment,
                b'"' if starts(i, b"\"\"\"") => {
                    state = Scan::MultiBasic;
                    i += 2;
                }
                b'"' => state = Scan::Basic,
                b'\'' if starts(i, b"'''") => {
                    state = Scan::MultiLiteral;
                    i += 2;
                }
                b'\'' => state = Scan::Literal,
                b'[' | b'{' => {
                    let levels = dots + 1;
                    dots = 0;
                    opened.push(levels);
                    depth += levels;
                }
                b']' | b'}' => {
                    depth -= opened.pop().unwrap_or(0);
                    dots = 0;
                }
                b'.' => dots += 1,
                b',' | b'\n' => dots = 0,
                _ => {}
            },
            Scan::Comment => {
                if b == b'\n' {
                    state = Scan::Normal;
                }
            }
            Scan::Basic => match b {
                b'\\' => i += 1,
                b'"' | b'\n' => state = Scan::Normal,
                _ => {}
            },
            Scan::Literal => {
                if b == b'\'' || b == b'\n' {
                    state = Scan::Normal;
                }
            }
            Scan::MultiBasic => {
                if b == b'\\' {
                    i += 1;
                    if bytes.get(i) == Some(&b'\n') {
                        line += 1;
                    }
                } else if starts(i, b"\"\"\"") {
                    state = Scan::Normal;
                    i += 2;
                }
            }
            Scan::MultiLiteral => {
                if starts(i, b"'''") {
                    state = Scan::Normal;
                    i += 2;
                }
            }
        }
        if depth + dots > MAX_NESTING {
            return Err(ctx
                .err(
                    "",
                    format!("nesting deeper than {MAX_NESTING} levels at line {line}"),
                )
                .with_hint("flatten the nested arrays, tables or dotted keys"));
        }
        i += 1;
    }
    Ok(())
}

/// A TOML syntax error as one line: `invalid TOML at line L, column C: <parser message>`.
fn syntax_error(ctx: Ctx<'_>, text: &str, e: &toml::de::Error) -> ManifestError {
    // the parser's lines ("invalid array", "expected `]`") read as one sentence: "invalid array: expected `]`"
    let message = e
        .message()
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(": ");
    match e.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            ctx.err(
                "",
                format!("invalid TOML at line {line}, column {column}: {message}"),
            )
        }
        None => ctx.err("", format!("invalid TOML: {message}")),
    }
}

/// One-based line and column (in characters) of byte offset `at`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let mut cut = at;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<toml::Table, ManifestError> {
        parse_toml(Ctx::new("agent.toml"), text)
    }

    #[track_caller]
    fn fails(text: &str, want: &str) {
        match parse(text) {
            Ok(t) => panic!("expected failure containing {want:?}, parsed {t:?}"),
            Err(e) => assert!(
                e.to_string().contains(want),
                "{e} does not contain {want:?}"
            ),
        }
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        fails(
            "[agent]\nname = \n",
            "agent.toml: invalid TOML at line 2, column 8",
        );
        fails("a = 1\na = 2\n", "invalid TOML at line 2");
        fails("[agent\n", "invalid TOML at line 1");
        // the parser's two lines read as one sentence
        fails(
            "a = [1, 2\n",
            "invalid TOML at line 2, column 1: invalid array: expected `]`",
        );
    }

    #[test]
    fn size_limit() {
        let big = format!("a = \"{}\"", "x".repeat(MAX_MANIFEST_BYTES));
        fails(
            &big,
            &format!("manifest is {} bytes; the limit is 1 MiB", big.len()),
        );
        let fits = format!("a = \"{}\"", "x".repeat(MAX_MANIFEST_BYTES - 10));
        assert!(parse(&fits).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let n = 10_000;
        fails(
            &format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
            "nesting deeper than 64 levels at line 1",
        );
        fails(
            &format!("a = {}1{}", "{b=".repeat(n), "}".repeat(n)),
            "nesting deeper than 64 levels",
        );
        fails(
            &format!("a{} = 1", ".b".repeat(n)),
            "nesting deeper than 64",
        );
        fails(&format!("[a{}]", ".b".repeat(n)), "nesting deeper than 64");
        fails(&"[".repeat(n), "nesting deeper than 64");
    }

    #[test]
    fn nesting_ignores_strings_comments_and_floats() {
        let n = 1000;
        let ok = [
            format!("a = \"{}\"", "[".repeat(n)),
            format!("a = '{}'", "{".repeat(n)),
            format!("a = \"\"\"\n{}\n\"\"\"", "[".repeat(n)),
            format!("a = '''{}'''", ".".repeat(n)),
            format!("# {}\na = 1", "[".repeat(n)),
            format!("a = [{}]", vec!["1.5"; n].join(", ")),
            format!("a = \"\\\"{}\"", "[".repeat(n)),
            "a = [[[[1]]]]\nb = { c = { d = [1.5] } }".to_string(),
        ];
        for text in ok {
            assert!(parse(&text).is_ok(), "{text:.60}");
        }
        let at_limit = format!("a = {}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(parse(&at_limit).is_ok());
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncé d", 7), (2, 4));
        assert_eq!(line_column("", 5), (1, 1));
    }
}
