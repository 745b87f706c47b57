//! A YAML writer for the documents `loom job plan` emits (Kubernetes objects built as JSON values).
//!
//! Why our own: the documents are JSON values (maps, sequences, strings, numbers, booleans) and only ever written,
//! never read; the usual Rust crate for YAML (serde_yaml) is archived and unmaintained. Every JSON document is a YAML
//! 1.2 document, so the one hard part — quoting a string — is done the JSON way: a string is written plain only when it
//! is a simple word no YAML version reads as anything else, and as a JSON string literal otherwise (YAML's double-quoted
//! style accepts JSON's escapes). Multi-line text whose lines are all plain printable characters is a literal block
//! (`|`), so a ConfigMap's file reads as the file. The tests read the output back with a YAML parser.

use serde_json::Value;

/// `docs` as a YAML stream: each document after `---`.
pub fn stream(docs: &[Value]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        node(&mut out, d, 0);
    }
    out
}

/// Writes `v` as a block node at `indent`, after a line break (the caller wrote the key or `- ` already, when any).
fn node(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                out.push_str(&" ".repeat(indent));
                out.push_str(&scalar_string(k));
                out.push(':');
                value_after_key(out, v, indent);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for v in a {
                out.push_str(&" ".repeat(indent));
                out.push('-');
                match v {
                    // a map in a sequence: its first key on the dash's line, the rest aligned under it
                    Value::Object(m) if !m.is_empty() => {
                        out.push(' ');
                        let mut first = true;
                        for (k, v) in m {
                            if !first {
                                out.push_str(&" ".repeat(indent + 2));
                            }
                            first = false;
                            out.push_str(&scalar_string(k));
                            out.push(':');
                            value_after_key(out, v, indent + 2);
                        }
                    }
                    _ => value_after_key(out, v, indent),
                }
            }
        }
        other => {
            out.push_str(&" ".repeat(indent));
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

/// After `key:` (or `-`): a nested block on the next lines, a literal block, or a scalar on the same line.
fn value_after_key(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            node(out, v, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            node(out, v, indent + 2);
        }
        Value::String(s) if literal_ok(s) => {
            out.push_str(" |");
            if !s.ends_with('\n') {
                out.push('-');
            }
            out.push('\n');
            for line in s.lines() {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str(line);
                out.push('\n');
            }
        }
        other => {
            out.push(' ');
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

/// A value on one line: empty collections as `{}` / `[]`, scalars as themselves.
fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => scalar_string(s),
        Value::Object(_) => "{}".to_string(),
        Value::Array(_) => "[]".to_string(),
        other => other.to_string(),
    }
}

/// Words YAML 1.1 parsers read as booleans or null.
const RESERVED: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];

/// `s` plain when it is a simple word (a letter, then letters, digits, `.`, `_`, `/`, `-`) that no YAML version reads
/// as a boolean, null or number; else a JSON string literal.
fn scalar_string(s: &str) -> String {
    let simple = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str());
    if simple {
        s.to_string()
    } else {
        serde_json::Value::String(s.to_string()).to_string()
    }
}

/// Multi-line text a literal block keeps exactly: more than one line, every line non-empty printable text without
/// leading or trailing blanks, at most one final newline.
fn literal_ok(s: &str) -> bool {
    let body = s.strip_suffix('\n').unwrap_or(s);
    body.contains('\n')
        && body.split('\n').all(|line| {
            !line.is_empty()
                && !line.starts_with([' ', '\t'])
                && !line.ends_with([' ', '\t'])
                && line.chars().all(|c| {
                    (c == ' ' || c.is_ascii_graphic() || (!c.is_ascii() && !c.is_control()))
                        && !matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}')
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_sequences_and_scalars() {
        let doc = json!({
            "apiVersion": "batch/v1",
            "spec": {"completions": 3, "suspend": false, "args": ["job", "$(X)", "yes"], "empty": {}, "none": []},
            "list": [{"name": "a", "value": "1"}, {"name": "b"}],
        });
        let y = stream(&[doc]);
        assert_eq!(
            y,
            "---\napiVersion: batch/v1\nspec:\n  completions: 3\n  suspend: false\n  args:\n    - job\n    - \"$(X)\"\n    \
             - \"yes\"\n  empty: {}\n  none: []\nlist:\n  - name: a\n    value: \"1\"\n  - name: b\n"
        );
    }

    #[test]
    fn strings_are_plain_only_when_nothing_else_can_read_them() {
        for (s, plain) in [
            ("Job", true),
            ("batch/v1", true),
            ("On", false),
            ("null", false),
            ("1.5", false),
            ("", false),
            ("a: b", false),
            ("-x", false),
            ("#c", false),
        ] {
            assert_eq!(scalar_string(s) == s, plain, "{s:?}");
        }
    }

    #[test]
    fn literal_blocks_only_for_text_they_keep_exactly() {
        assert!(literal_ok("{\"a\":1}\n{\"b\":2}\n"));
        assert!(literal_ok("one\ntwo"));
        assert!(!literal_ok("one line\n"));
        assert!(!literal_ok("a\n\nb\n"));
        assert!(!literal_ok(" a\nb\n"));
        assert!(!literal_ok("a\u{2028}\nb"));
        assert!(!literal_ok("a\nb\n\n"));
        let y = stream(&[json!({"data": {"f": "a\nb"}})]);
        assert_eq!(y, "---\ndata:\n  f: |-\n    a\n    b\n");
    }
}
