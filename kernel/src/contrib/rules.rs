//! Project rules: `.loom/rules/*.md` in the agent's working directory. A rule without frontmatter, or whose
//! frontmatter has no `paths`, is general (in the system prompt each turn); one with `paths: [globs]` applies when a
//! tool touches a matching path (its text is added to that tool result). The frontmatter is the skill subset
//! (`skill::frontmatter`): nothing in it is evaluated.

use crate::contrib::skill::frontmatter::{split_frontmatter, FmValue};

/// Where project rules live, relative to the working directory.
pub const RULES_DIR: &str = ".loom/rules";

/// One parsed rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRule {
    /// The globs (relative to the working directory) of the paths it applies to; empty: a general rule.
    pub paths: Vec<String>,
    /// The rule's text (the file without its frontmatter), trimmed.
    pub body: String,
}

/// Parses a rule file's text. `Err` names the line and what is wrong (a frontmatter that does not parse, a `paths`
/// that is not a list of globs).
pub fn parse_rule(text: &str) -> Result<ProjectRule, String> {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !t.starts_with("---") {
        return Ok(ProjectRule {
            paths: Vec::new(),
            body: t.trim().to_string(),
        });
    }
    let (map, body) =
        split_frontmatter(t).map_err(|e| format!("line {}: {}", e.line, e.message))?;
    let paths = match map.get("paths") {
        None => Vec::new(),
        Some(v) => {
            list_of(v).ok_or("paths must be a list of globs such as [src/**/*.rs, tests/**]")?
        }
    };
    if let Some(bad) = paths
        .iter()
        .find(|p| p.is_empty() || p.starts_with('/') || p.split('/').any(|s| s == ".."))
    {
        return Err(format!(
            "paths: {bad:?} must be a glob relative to the working directory (no leading `/`, no `..`)"
        ));
    }
    Ok(ProjectRule {
        paths,
        body: body.trim().to_string(),
    })
}

/// A frontmatter list — `[a, b]`, a bare `a, b`, or a block sequence of scalars — as its items, each trimmed and
/// unquoted; `None` for a mapping or a nested list.
pub(crate) fn list_of(v: &FmValue) -> Option<Vec<String>> {
    match v {
        FmValue::Str(s) => Some(flow_items(s)),
        FmValue::List(items) => {
            let mut out = Vec::new();
            for i in items {
                match i {
                    FmValue::Str(s) if s.trim_start().starts_with('[') => out.extend(flow_items(s)),
                    FmValue::Str(s) => out.push(unquote(s.trim()).to_string()),
                    FmValue::Map(_) | FmValue::List(_) => return None,
                }
            }
            Some(out)
        }
        FmValue::Map(_) => None,
    }
}

/// The items of `[a, b]` (or of a bare `a, b`), each trimmed and unquoted.
fn flow_items(s: &str) -> Vec<String> {
    let s = s.trim();
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    inner
        .split(',')
        .map(|i| unquote(i.trim()).to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

pub(crate) fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_and_path_rules() {
        assert_eq!(
            parse_rule("Prefer small functions.\n").unwrap(),
            ProjectRule {
                paths: vec![],
                body: "Prefer small functions.".into()
            }
        );
        let r = parse_rule("---\npaths: [src/**/*.rs, \"tests/**/*.rs\"]\n---\nUse thiserror.\n")
            .unwrap();
        assert_eq!(r.paths, ["src/**/*.rs", "tests/**/*.rs"]);
        assert_eq!(r.body, "Use thiserror.");
        let r = parse_rule("---\npaths:\n  - web/**\n  - '*.ts'\n---\nNo any.\n").unwrap();
        assert_eq!(r.paths, ["web/**", "*.ts"]);
        let r = parse_rule("---\ndescription: x\n---\nGeneral.\n").unwrap();
        assert!(r.paths.is_empty());
        assert!(parse_rule("---\npaths: [/etc/**]\n---\nx")
            .unwrap_err()
            .contains("relative"));
        assert!(parse_rule("---\npaths: [../x]\n---\nx")
            .unwrap_err()
            .contains("no `..`"));
        assert!(parse_rule("---\npaths: [a\n")
            .unwrap_err()
            .starts_with("line "));
    }
}
