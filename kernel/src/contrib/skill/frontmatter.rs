//! The YAML frontmatter of a `SKILL.md`, parsed by hand: the subset the Agent Skills spec uses (block mappings,
//! plain / quoted / block scalars, one nested mapping such as `metadata`, simple sequences). Lenient where the spec
//! allows it (unknown keys are kept and ignored, CRLF and a BOM are accepted), strict where a misread would change
//! meaning (tabs in indentation, duplicate keys, a line that is not `key: value`).

use std::collections::BTreeMap;

/// A frontmatter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FmValue {
    /// A scalar (plain, quoted, literal `|` or folded `>`), as text.
    Str(String),
    /// A nested block mapping.
    Map(BTreeMap<String, FmValue>),
    /// A block sequence (`- item`) or a flow collection kept as written.
    List(Vec<FmValue>),
}

/// A frontmatter syntax error: 1-based line number within SKILL.md and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FmError {
    /// 1-based line in the file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Splits `text` into (frontmatter mapping, body). `Err` when there is no frontmatter or it does not parse.
pub(crate) fn split_frontmatter(
    text: &str,
) -> Result<(BTreeMap<String, FmValue>, String), FmError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(FmError {
            line: 1,
            message: "no YAML frontmatter: SKILL.md must start with a line `---`, then `name:` and `description:`, \
                      then a closing `---`"
                .into(),
        });
    }
    let Some(end) = lines
        .iter()
        .skip(1)
        .position(|l| matches!(l.trim_end(), "---" | "..."))
    else {
        return Err(FmError {
            line: 1,
            message: "the frontmatter is never closed: add a line `---` after its last key".into(),
        });
    };
    let body_lines = &lines[end + 2..];
    let fm = Lines {
        lines: &lines[1..end + 1],
        first: 2,
    };
    let map = fm.mapping(0, fm.lines.len(), 0)?;
    Ok((map, body_lines.join("\n")))
}

struct Lines<'a> {
    lines: &'a [&'a str],
    /// Line number of `lines[0]` in the file.
    first: usize,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

impl Lines<'_> {
    fn err(&self, i: usize, message: impl Into<String>) -> FmError {
        FmError {
            line: self.first + i,
            message: message.into(),
        }
    }

    /// The first line at or after `i` (before `end`) that is neither blank nor a comment.
    fn next_content(&self, i: usize, end: usize) -> Option<(usize, &str)> {
        (i..end)
            .map(|k| (k, self.lines[k]))
            .find(|(_, l)| !is_blank_or_comment(l))
    }

    /// The end (exclusive) of the block of lines after `i` indented more than `indent` (blank lines included).
    fn block_end(&self, i: usize, end: usize, indent: usize) -> usize {
        let mut j = i + 1;
        let mut last = i + 1;
        while j < end {
            let l = self.lines[j];
            if l.trim().is_empty() {
                j += 1;
                continue;
            }
            if indent_of(l) <= indent {
                break;
            }
            j += 1;
            last = j;
        }
        last
    }

    /// Parses lines `[start, end)` as a block mapping whose keys sit at `indent`.
    fn mapping(
        &self,
        start: usize,
        end: usize,
        indent: usize,
    ) -> Result<BTreeMap<String, FmValue>, FmError> {
        let mut map = BTreeMap::new();
        let mut i = start;
        while let Some((k, line)) = self.next_content(i, end) {
            i = k;
            if line[..indent_of(line)].contains('\t') || line.starts_with('\t') {
                return Err(self.err(i, "a tab in the indentation; YAML indents with spaces only"));
            }
            let ind = indent_of(line);
            if ind != indent {
                return Err(self.err(
                    i,
                    format!("unexpected indentation ({ind} spaces where a key at {indent} was expected)"),
                ));
            }
            let content = &line[ind..];
            let Some((key, rest)) = split_key(content) else {
                return Err(self.err(
                    i,
                    format!("expected `key: value`, found {:?}", truncate(content)),
                ));
            };
            let key = unquote_key(key);
            let block = self.block_end(i, end, indent);
            let value = self.value(i, rest, block, indent)?;
            if map.insert(key.clone(), value).is_some() {
                return Err(self.err(i, format!("the key {key:?} appears twice")));
            }
            i = block;
        }
        Ok(map)
    }

    /// Parses the value of the key on line `i` (`rest` is what follows the colon); its continuation lines are
    /// `(i, block)`.
    fn value(&self, i: usize, rest: &str, block: usize, indent: usize) -> Result<FmValue, FmError> {
        let rest = strip_comment(rest).trim();
        let cont = &self.lines[i + 1..block];
        if rest.starts_with('|') || rest.starts_with('>') {
            return Ok(FmValue::Str(
                block_scalar(rest, cont).map_err(|m| self.err(i, m))?,
            ));
        }
        if rest.is_empty() {
            let Some(first) = cont.iter().position(|l| !is_blank_or_comment(l)) else {
                return Ok(FmValue::Str(String::new()));
            };
            let j = i + 1 + first;
            let inner = indent_of(self.lines[j]);
            let t = self.lines[j].trim_start();
            if t.starts_with("- ") || t == "-" {
                return self.sequence(j, block, inner);
            }
            if split_key(t).is_some() {
                return Ok(FmValue::Map(self.mapping(j, block, inner)?));
            }
            self.plain_continuation(i, cont, indent)?;
            return Ok(FmValue::Str(fold_plain("", cont)));
        }
        if let Some(q) = rest.strip_prefix('"') {
            return quoted(q, cont, '"')
                .map(FmValue::Str)
                .map_err(|m| self.err(i, m));
        }
        if let Some(q) = rest.strip_prefix('\'') {
            return quoted(q, cont, '\'')
                .map(FmValue::Str)
                .map_err(|m| self.err(i, m));
        }
        if rest.starts_with('[') || rest.starts_with('{') {
            let close = if rest.starts_with('[') { ']' } else { '}' };
            let all = std::iter::once(rest)
                .chain(cont.iter().map(|l| l.trim()))
                .collect::<Vec<_>>()
                .join(" ");
            if !all.trim_end().ends_with(close) {
                return Err(self.err(
                    i,
                    format!(
                        "a flow collection opened with {:?} is never closed",
                        &rest[..1]
                    ),
                ));
            }
            return Ok(FmValue::List(vec![FmValue::Str(all)]));
        }
        self.plain_continuation(i, cont, indent)?;
        Ok(FmValue::Str(fold_plain(rest, cont)))
    }

    /// Refuses a continuation line of a plain scalar that reads as a key: YAML does not allow it, and it is almost
    /// always a mis-indented key.
    fn plain_continuation(&self, i: usize, cont: &[&str], indent: usize) -> Result<(), FmError> {
        for (k, l) in cont.iter().enumerate() {
            if !is_blank_or_comment(l) && split_key(l.trim_start()).is_some() {
                return Err(self.err(
                    i + 1 + k,
                    format!(
                        "{:?} is indented under the previous value but reads as a key; put keys at {indent} spaces, \
                         or quote the value",
                        truncate(l.trim())
                    ),
                ));
            }
        }
        Ok(())
    }

    fn sequence(&self, start: usize, end: usize, indent: usize) -> Result<FmValue, FmError> {
        let mut items = Vec::new();
        let mut i = start;
        while let Some((k, line)) = self.next_content(i, end) {
            i = k;
            let t = line.trim_start();
            if indent_of(line) != indent || !(t.starts_with("- ") || t == "-") {
                return Err(self.err(
                    i,
                    format!("expected a list item `- ...`, found {:?}", truncate(t)),
                ));
            }
            let block = self.block_end(i, end, indent);
            let item = t[1..].trim();
            items.push(self.value(i, item, block, indent)?);
            i = block;
        }
        Ok(FmValue::List(items))
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Splits `key: rest` (a colon followed by a space or the end of the line), outside quotes.
fn split_key(content: &str) -> Option<(&str, &str)> {
    if content.starts_with('-') && (content.len() == 1 || content[1..].starts_with(' ')) {
        return None;
    }
    let bytes = content.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if (b == b'"' || b == b'\'') && i == 0 => quote = Some(b),
            None if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') => {
                let key = content[..i].trim_end();
                return (!key.is_empty()).then(|| (key, &content[i + 1..]));
            }
            None => {}
        }
    }
    None
}

fn unquote_key(key: &str) -> String {
    for q in ['"', '\''] {
        if key.len() >= 2 && key.starts_with(q) && key.ends_with(q) {
            return key[1..key.len() - 1].to_string();
        }
    }
    key.to_string()
}

/// Drops a ` # comment` from a plain value.
fn strip_comment(rest: &str) -> &str {
    let t = rest.trim_start();
    if t.starts_with('"') || t.starts_with('\'') {
        return rest;
    }
    match rest.find(" #") {
        Some(i) => &rest[..i],
        None if t.starts_with('#') => "",
        None => rest,
    }
}

/// A plain scalar spread over continuation lines: lines fold into one, separated by spaces; a blank line is a
/// newline.
fn fold_plain(first: &str, cont: &[&str]) -> String {
    let mut out = first.trim().to_string();
    let mut pending_newlines = 0;
    for l in cont {
        let t = l.trim();
        if t.is_empty() {
            pending_newlines += 1;
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        if out.is_empty() {
            out.push_str(t);
        } else if pending_newlines > 0 {
            out.push_str(&"\n".repeat(pending_newlines));
            out.push_str(t);
        } else {
            out.push(' ');
            out.push_str(t);
        }
        pending_newlines = 0;
    }
    out
}

/// A literal (`|`) or folded (`>`) block scalar with optional chomping (`-`, `+`) and indentation indicators.
fn block_scalar(header: &str, cont: &[&str]) -> Result<String, String> {
    let literal = header.starts_with('|');
    let mut chomp = 'c';
    let mut explicit: Option<usize> = None;
    for ch in header[1..].chars() {
        match ch {
            '-' | '+' => chomp = ch,
            '1'..='9' => explicit = Some(ch as usize - '0' as usize),
            ' ' => break,
            _ => {
                return Err(format!(
                    "{header:?} is not a block scalar header (use `|`, `|-`, `>` or `>-`)"
                ))
            }
        }
    }
    let indent = match explicit {
        Some(n) => cont
            .iter()
            .find(|l| !l.trim().is_empty())
            .map(|l| indent_of(l).min(n))
            .unwrap_or(n),
        None => cont
            .iter()
            .find(|l| !l.trim().is_empty())
            .map(|l| indent_of(l))
            .unwrap_or(0),
    };
    let mut lines: Vec<String> = Vec::new();
    for l in cont {
        if l.trim().is_empty() {
            lines.push(String::new());
        } else if indent_of(l) < indent {
            return Err("a block scalar line is indented less than its first line".into());
        } else {
            lines.push(l[indent..].to_string());
        }
    }
    let content_end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |p| p + 1);
    let trailing = lines.len() - content_end;
    lines.truncate(content_end);
    let mut out = if literal {
        lines.join("\n")
    } else {
        let mut s = String::new();
        let mut prev_blank = true;
        for l in &lines {
            if l.is_empty() {
                s.push('\n');
                prev_blank = true;
            } else {
                if !prev_blank && !l.starts_with(' ') {
                    s.push(' ');
                } else if !prev_blank {
                    s.push('\n');
                }
                s.push_str(l);
                prev_blank = false;
            }
        }
        s
    };
    match chomp {
        '-' => {}
        '+' => {
            out.push('\n');
            out.push_str(&"\n".repeat(trailing));
        }
        _ if !out.is_empty() => out.push('\n'),
        _ => {}
    }
    Ok(out)
}

/// A quoted scalar (possibly spanning lines); `q` is the text after the opening quote.
fn quoted(first: &str, cont: &[&str], quote: char) -> Result<String, String> {
    let joined = std::iter::once(first.to_string())
        .chain(cont.iter().map(|l| l.trim().to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::new();
    let mut chars = joined.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            if quote == '\'' {
                let mut peek = chars.clone();
                if peek.next() == Some('\'') {
                    out.push('\'');
                    chars = peek;
                    continue;
                }
            }
            let tail: String = chars.collect();
            let tail = strip_comment(&tail);
            if !tail.trim().is_empty() {
                return Err(format!(
                    "unexpected text after the closing quote: {:?}",
                    truncate(tail.trim())
                ));
            }
            return Ok(out);
        }
        if c == '\\' && quote == '"' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('/') => out.push('/'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let ch = u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| format!("\\u{hex} is not a valid escape"))?;
                    out.push(ch);
                }
                Some(other) => {
                    return Err(format!(
                        "\\{other} is not a valid escape in a double-quoted string"
                    ))
                }
                None => return Err("a double-quoted string ends with a lone backslash".into()),
            }
            continue;
        }
        out.push(c);
    }
    Err(format!("a {quote}-quoted value is never closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(text: &str) -> BTreeMap<String, FmValue> {
        split_frontmatter(text).unwrap().0
    }

    fn s(v: &str) -> FmValue {
        FmValue::Str(v.into())
    }

    #[test]
    fn the_seed_shapes_parse() {
        let m = fm("---\nname: dns-lookup\ndescription: Look up DNS records with dig. Use when the user asks\n  what a domain resolves to.\nmetadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"dig\"], network = \"*\" } }\n---\n\n# DNS lookup\n");
        assert_eq!(m["name"], s("dns-lookup"));
        assert_eq!(
            m["description"],
            s("Look up DNS records with dig. Use when the user asks what a domain resolves to.")
        );
        let FmValue::Map(meta) = &m["metadata"] else {
            panic!()
        };
        assert_eq!(
            meta["loom.tools"],
            s("bash = { capabilities = { commands = [\"dig\"], network = \"*\" } }\n")
        );
    }

    #[test]
    fn the_spec_example_with_every_optional_field() {
        let (m, body) = split_frontmatter(
            "\u{feff}---\r\nname: pdf-processing\r\ndescription: \"Extract text and tables from PDF files, fill forms.\"\r\nlicense: Apache-2.0\r\ncompatibility: 'Requires python3 and pdfplumber; it''s fine'\r\nmetadata:\r\n  author: example-org\r\n  version: \"1.0\"\r\nallowed-tools: Bash(git:*) Read\r\n---\r\nBody here\r\n",
        )
        .unwrap();
        assert_eq!(
            m["description"],
            s("Extract text and tables from PDF files, fill forms.")
        );
        assert_eq!(
            m["compatibility"],
            s("Requires python3 and pdfplumber; it's fine")
        );
        assert_eq!(m["license"], s("Apache-2.0"));
        assert_eq!(m["allowed-tools"], s("Bash(git:*) Read"));
        let FmValue::Map(meta) = &m["metadata"] else {
            panic!()
        };
        assert_eq!(meta["version"], s("1.0"));
        assert_eq!(body, "Body here\n");
    }

    #[test]
    fn block_scalars_and_lists() {
        let m = fm("---\na: >-\n  one\n  two\n\n  three\nb: |-\n  x\n  y\n\nc:\n  - p\n  - \"q\"\nd: plain # comment\ne: [x, y]\n---\n");
        assert_eq!(m["a"], s("one two\nthree"));
        assert_eq!(m["b"], s("x\ny"));
        assert_eq!(m["c"], FmValue::List(vec![s("p"), s("q")]));
        assert_eq!(m["d"], s("plain"));
    }

    #[test]
    fn broken_yaml_names_the_line() {
        let cases = [
            (
                "---\nname: x\nthis is not yaml\n---\n",
                3,
                "expected `key: value`",
            ),
            ("---\nname: x\nname: y\n---\n", 3, "appears twice"),
            ("---\n\tname: x\n---\n", 2, "tab"),
            ("---\nname: \"x\n---\n", 2, "never closed"),
            ("---\ndescription: [a, b\n---\n", 2, "never closed"),
            ("name: x\n", 1, "no YAML frontmatter"),
            ("---\nname: x\n", 1, "never closed"),
            ("---\nname: x\n  description: y\n---\n", 3, "reads as a key"),
        ];
        for (text, line, want) in cases {
            let e = split_frontmatter(text).unwrap_err();
            assert!(e.message.contains(want), "{text:?}: {e:?}");
            assert_eq!(e.line, line, "{text:?}: {e:?}");
        }
    }
}
