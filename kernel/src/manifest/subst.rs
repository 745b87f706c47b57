//! `${VAR}` and `${VAR:-default}` substitution in string values, from an explicit env map.
//!
//! Specification:
//! - Only string VALUES are rewritten, never keys, and each string in one pass: a substituted value is not scanned
//!   again, so an env value containing `${X}` stays literal.
//! - Names are POSIX-shaped: `[A-Za-z_][A-Za-z0-9_]*`. Braces are required: a bare `$VAR` (or a lone `$`) stays literal.
//! - `${NAME}` takes the value from the map; undefined is an error naming the variable (never a value).
//! - `${NAME:-default}` takes the default when NAME is undefined or empty (POSIX). The default ends at the first `}`
//!   and may be empty.
//! - Anything else after `${` (an unclosed brace, an empty or non-POSIX name, another operator) is an error.

use std::collections::BTreeMap;

use super::error::{index, join, Ctx, ManifestError};
use super::text::MAX_NESTING;

/// Why one string could not be substituted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SubstError {
    /// `${NAME}` with NAME not in the map and no default.
    Undefined(String),
    /// A malformed `${...}` reference.
    Malformed(String),
}

/// Substitutes every `${...}` reference in `s`.
pub(crate) fn substitute_str(
    s: &str,
    env: &BTreeMap<String, String>,
) -> Result<String, SubstError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let body = &rest[at + 2..];
        let Some(close) = body.find('}') else {
            return Err(SubstError::Malformed(format!(
                "`{}` has no closing `}}`",
                shorten(&rest[at..])
            )));
        };
        let inner = &body[..close];
        let (name, default) = match inner.find(":-") {
            Some(p) => (&inner[..p], Some(&inner[p + 2..])),
            None => (inner, None),
        };
        if !is_posix_name(name) {
            return Err(SubstError::Malformed(format!(
                "`${{{}}}` is not a variable reference: names are letters, digits and underscores, not starting \
                 with a digit, optionally followed by :-default",
                shorten(inner)
            )));
        }
        let value = env.get(name).map(String::as_str);
        match (value, default) {
            (Some(v), None) => out.push_str(v),
            (Some(v), Some(_)) if !v.is_empty() => out.push_str(v),
            (_, Some(d)) => out.push_str(d),
            (None, None) => return Err(SubstError::Undefined(name.to_string())),
        }
        rest = &body[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn shorten(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

fn is_posix_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Substitutes in every string value of `table`, reporting errors at their key path under `path`. Refuses tables
/// nested deeper than [`MAX_NESTING`] (this is the depth guard for tables that did not come from our own text).
pub(crate) fn substitute_table(
    ctx: Ctx<'_>,
    table: &mut toml::Table,
    path: &str,
    env: &BTreeMap<String, String>,
) -> Result<(), ManifestError> {
    walk_table(ctx, table, path, env, 0)
}

fn walk_table(
    ctx: Ctx<'_>,
    table: &mut toml::Table,
    path: &str,
    env: &BTreeMap<String, String>,
    depth: usize,
) -> Result<(), ManifestError> {
    for (key, v) in table.iter_mut() {
        walk(ctx, v, &join(path, key), env, depth + 1)?;
    }
    Ok(())
}

fn walk(
    ctx: Ctx<'_>,
    value: &mut toml::Value,
    path: &str,
    env: &BTreeMap<String, String>,
    depth: usize,
) -> Result<(), ManifestError> {
    if depth > MAX_NESTING {
        return Err(ctx.err(path, format!("nesting deeper than {MAX_NESTING} levels")));
    }
    match value {
        toml::Value::String(s) => {
            if s.contains("${") {
                *s = substitute_str(s, env).map_err(|e| match e {
                    SubstError::Undefined(name) => ctx
                        .err(path, format!("undefined variable ${{{name}}}"))
                        .with_hint(format!(
                            "set {name} in the environment, or give a default: ${{{name}:-default}}"
                        )),
                    SubstError::Malformed(why) => ctx
                        .err(path, format!("malformed variable reference: {why}"))
                        .with_hint("write ${NAME} or ${NAME:-default}"),
                })?;
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(ctx, item, &index(path, i), env, depth + 1)?;
            }
        }
        toml::Value::Table(t) => walk_table(ctx, t, path, env, depth)?,
        toml::Value::Integer(_)
        | toml::Value::Float(_)
        | toml::Value::Boolean(_)
        | toml::Value::Datetime(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [
            ("VAULT", "/v"),
            ("EMPTY", ""),
            ("_X1", "x"),
            ("LOOP", "${VAULT}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[track_caller]
    fn ok(input: &str, want: &str) {
        assert_eq!(
            substitute_str(input, &env()),
            Ok(want.to_string()),
            "{input:?}"
        );
    }

    #[track_caller]
    fn bad(input: &str, want: SubstError) {
        assert_eq!(substitute_str(input, &env()), Err(want), "{input:?}");
    }

    #[test]
    fn must_substitute() {
        ok("plain", "plain");
        ok("${VAULT}", "/v");
        ok("a${VAULT}b${_X1}c", "a/vbxc");
        ok("${MISSING:-~/Dropbox/glass-vault}", "~/Dropbox/glass-vault");
        ok("${VAULT:-d}", "/v");
        ok("${EMPTY:-d}", "d");
        ok("${EMPTY}", "");
        ok("${MISSING:-}", "");
        ok("$VAULT stays", "$VAULT stays");
        ok("cost $5 and $", "cost $5 and $");
        ok("${LOOP}", "${VAULT}");
        ok("${MISSING:-a:-b}", "a:-b");
    }

    #[test]
    fn must_refuse() {
        bad("${MISSING}", SubstError::Undefined("MISSING".into()));
        assert!(
            matches!(substitute_str("${VAULT", &env()), Err(SubstError::Malformed(m)) if m.contains("no closing"))
        );
        assert!(matches!(
            substitute_str("${}", &env()),
            Err(SubstError::Malformed(_))
        ));
        assert!(matches!(
            substitute_str("${1X}", &env()),
            Err(SubstError::Malformed(_))
        ));
        assert!(matches!(
            substitute_str("${A-B}", &env()),
            Err(SubstError::Malformed(_))
        ));
        assert!(matches!(
            substitute_str("${A:=b}", &env()),
            Err(SubstError::Malformed(_))
        ));
    }

    #[test]
    fn table_errors_name_variable_and_path_never_values() {
        let mut t: toml::Table =
            toml::from_str("[harness]\nmodel = \"${MODEL_ID}\"\nkey = \"${VAULT}\"").unwrap();
        let e = substitute_table(Ctx::new("agent.toml"), &mut t, "", &env()).unwrap_err();
        assert_eq!(e.key_path, "harness.model");
        assert!(e.message.contains("undefined variable ${MODEL_ID}"), "{e}");
        assert!(!e.to_string().contains("/v"));
    }

    #[test]
    fn keys_are_not_substituted() {
        let mut t: toml::Table = toml::from_str("\"${VAULT}\" = [\"${VAULT}\"]").unwrap();
        substitute_table(Ctx::new("f"), &mut t, "", &env()).unwrap();
        assert_eq!(t["${VAULT}"][0].as_str(), Some("/v"));
    }
}
