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
//! - Closed substitution (contributed groups: a skill's `loom.toml` or frontmatter): the map is the whole set of
//!   names that may appear. Any other `${NAME}` is an error naming NAME, even with a default — a skill never reads
//!   the environment, and never learns whether a variable is set.
//! - Errors name variables, never values: substitution returns the env values it baked in ([`Baked`]), and the entry
//!   points rewrite any later error that would echo one of them (say, a bare-handle error on `provider = "${P}"`)
//!   to show `${NAME}` instead.

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
    /// `${NAME}` (with or without a default) where only the map's names may appear.
    NotAllowed(String),
}

/// Which names a substitution may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The map is (a view of) the environment: an undefined name may take its default.
    Open,
    /// The map holds the only names allowed: any other is an error, default or not.
    Closed,
}

/// Values shorter than this are too common to redact from messages without garbling them.
const MIN_REDACTED_CHARS: usize = 4;

/// The env values substitution baked into a table, by value, with the variable that supplied each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Baked(BTreeMap<String, String>);

impl Baked {
    /// Adds the values baked by another substitution.
    pub(crate) fn extend(&mut self, other: Baked) {
        self.0.extend(other.0);
    }

    /// Rewrites every baked value (of at least [`MIN_REDACTED_CHARS`] characters) in the error's message and hint to
    /// the `${NAME}` reference that supplied it, longest values first.
    pub(crate) fn redact(&self, mut e: ManifestError) -> ManifestError {
        let mut pairs: Vec<(&String, &String)> = self
            .0
            .iter()
            .filter(|(value, _)| value.chars().count() >= MIN_REDACTED_CHARS)
            .collect();
        pairs.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        for (value, name) in pairs {
            let reference = format!("${{{name}}}");
            e.message = e.message.replace(value.as_str(), &reference);
            if let Some(h) = &mut e.hint {
                *h = h.replace(value.as_str(), &reference);
            }
        }
        e
    }
}

/// Substitutes every `${...}` reference in `s`, recording each env value used (not defaults) in `baked`.
pub(crate) fn substitute_str(
    s: &str,
    env: &BTreeMap<String, String>,
    scope: Scope,
    baked: &mut Baked,
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
        if scope == Scope::Closed && value.is_none() {
            return Err(SubstError::NotAllowed(name.to_string()));
        }
        match (value, default) {
            (Some(v), None) => {
                out.push_str(v);
                baked.0.insert(v.to_string(), name.to_string());
            }
            (Some(v), Some(_)) if !v.is_empty() => {
                out.push_str(v);
                baked.0.insert(v.to_string(), name.to_string());
            }
            (_, Some(d)) => out.push_str(d),
            (None, None) => return Err(SubstError::Undefined(name.to_string())),
        }
        rest = &body[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Which names a closed substitution allows, as a clause: `only ${SKILL_DIR} is substituted here`.
fn allowed(vars: &BTreeMap<String, String>) -> String {
    let names: Vec<String> = vars.keys().map(|k| format!("${{{k}}}")).collect();
    match names.len() {
        0 => "no variable is substituted here".into(),
        1 => format!("only {} is substituted here", names[0]),
        _ => format!("only {} are substituted here", names.join(", ")),
    }
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
/// Returns the env values baked in, for [`Baked::redact`].
pub(crate) fn substitute_table(
    ctx: Ctx<'_>,
    table: &mut toml::Table,
    path: &str,
    env: &BTreeMap<String, String>,
) -> Result<Baked, ManifestError> {
    let mut baked = Baked::default();
    walk_table(ctx, table, path, (env, Scope::Open), 0, &mut baked)?;
    Ok(baked)
}

/// [`substitute_table`] with [`Scope::Closed`]: `vars` are the only names allowed (a contributed group's
/// `${SKILL_DIR}`); every other reference is an error naming it.
pub(crate) fn substitute_table_closed(
    ctx: Ctx<'_>,
    table: &mut toml::Table,
    path: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Baked, ManifestError> {
    let mut baked = Baked::default();
    walk_table(ctx, table, path, (vars, Scope::Closed), 0, &mut baked)?;
    Ok(baked)
}

/// The names a walk may read, and how.
type Vars<'a> = (&'a BTreeMap<String, String>, Scope);

fn walk_table(
    ctx: Ctx<'_>,
    table: &mut toml::Table,
    path: &str,
    env: Vars<'_>,
    depth: usize,
    baked: &mut Baked,
) -> Result<(), ManifestError> {
    for (key, v) in table.iter_mut() {
        walk(ctx, v, &join(path, key), env, depth + 1, baked)?;
    }
    Ok(())
}

fn walk(
    ctx: Ctx<'_>,
    value: &mut toml::Value,
    path: &str,
    env: Vars<'_>,
    depth: usize,
    baked: &mut Baked,
) -> Result<(), ManifestError> {
    if depth > MAX_NESTING {
        return Err(ctx.err(path, format!("nesting deeper than {MAX_NESTING} levels")));
    }
    match value {
        toml::Value::String(s) => {
            if s.contains("${") {
                *s = substitute_str(s, env.0, env.1, baked).map_err(|e| match e {
                    SubstError::Undefined(name) => ctx
                        .err(path, format!("undefined variable ${{{name}}}"))
                        .with_hint(format!(
                            "set {name} in the environment, or give a default: ${{{name}:-default}}"
                        )),
                    SubstError::NotAllowed(name) => ctx
                        .err(
                            path,
                            format!(
                                "${{{name}}}: a skill's declarations never read the environment; {}",
                                allowed(env.0)
                            ),
                        )
                        .with_hint(
                            "write the value itself (a path under ${SKILL_DIR} for the skill's own files); \
                             settings that depend on the user's machine belong in the manifest",
                        ),
                    SubstError::Malformed(why) => ctx
                        .err(path, format!("malformed variable reference: {why}"))
                        .with_hint("write ${NAME} or ${NAME:-default}"),
                })?;
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(ctx, item, &index(path, i), env, depth + 1, baked)?;
            }
        }
        toml::Value::Table(t) => walk_table(ctx, t, path, env, depth, baked)?,
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

    fn sub(input: &str) -> Result<String, SubstError> {
        substitute_str(input, &env(), Scope::Open, &mut Baked::default())
    }

    #[track_caller]
    fn ok(input: &str, want: &str) {
        assert_eq!(sub(input), Ok(want.to_string()), "{input:?}");
    }

    #[track_caller]
    fn bad(input: &str, want: SubstError) {
        assert_eq!(sub(input), Err(want), "{input:?}");
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
            matches!(sub("${VAULT"), Err(SubstError::Malformed(m)) if m.contains("no closing"))
        );
        assert!(matches!(sub("${}"), Err(SubstError::Malformed(_))));
        assert!(matches!(sub("${1X}"), Err(SubstError::Malformed(_))));
        assert!(matches!(sub("${A-B}"), Err(SubstError::Malformed(_))));
        assert!(matches!(sub("${A:=b}"), Err(SubstError::Malformed(_))));
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
    fn baked_values_are_redacted_longest_first() {
        let mut baked = Baked::default();
        let e: BTreeMap<String, String> =
            [("TOKEN", "sk-abcdef"), ("PART", "abcdef"), ("SHORT", "ab")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        substitute_str(
            "${TOKEN} ${PART} ${SHORT} ${NONE:-dflt}",
            &e,
            Scope::Open,
            &mut baked,
        )
        .unwrap();
        let err = ManifestError::new("f", "k", "\"sk-abcdef\" and abcdef and ab and dflt")
            .with_hint("not sk-abcdef");
        let err = baked.redact(err);
        assert_eq!(err.message, "\"${TOKEN}\" and ${PART} and ab and dflt");
        assert_eq!(err.hint.as_deref(), Some("not ${TOKEN}"));
    }

    #[test]
    fn keys_are_not_substituted() {
        let mut t: toml::Table = toml::from_str("\"${VAULT}\" = [\"${VAULT}\"]").unwrap();
        substitute_table(Ctx::new("f"), &mut t, "", &env()).unwrap();
        assert_eq!(t["${VAULT}"][0].as_str(), Some("/v"));
    }

    #[test]
    fn closed_substitution_reads_only_its_names_and_never_says_a_value() {
        let vars: BTreeMap<String, String> = [("SKILL_DIR".to_string(), "/s/x".to_string())].into();
        let closed =
            |input: &str| substitute_str(input, &vars, Scope::Closed, &mut Baked::default());
        assert_eq!(closed("${SKILL_DIR}/run.sh"), Ok("/s/x/run.sh".into()));
        assert_eq!(closed("${SKILL_DIR:-d}"), Ok("/s/x".into()));
        assert_eq!(closed("$HOME stays"), Ok("$HOME stays".into()));
        for (input, name) in [
            ("${HOME}", "HOME"),
            ("${GITHUB_TOKEN:-}", "GITHUB_TOKEN"),
            ("./${VAULT:-x}", "VAULT"),
            ("${SKILL_DIR}/${EMPTY}", "EMPTY"),
        ] {
            assert_eq!(
                closed(input),
                Err(SubstError::NotAllowed(name.into())),
                "{input}"
            );
        }
        // the walk says which variable, where, and never the environment's value
        let mut t: toml::Table = toml::from_str("[x]\nv = [\"${VAULT}\"]").unwrap();
        let e =
            substitute_table_closed(Ctx::new("s/loom.toml"), &mut t, "tools", &vars).unwrap_err();
        assert_eq!(
            e.to_string(),
            "s/loom.toml: tools.x.v[1]: ${VAULT}: a skill's declarations never read the environment; only \
             ${SKILL_DIR} is substituted here (hint: write the value itself (a path under ${SKILL_DIR} for the \
             skill's own files); settings that depend on the user's machine belong in the manifest)"
        );
        assert!(!e.to_string().contains("/v"));
    }
}
