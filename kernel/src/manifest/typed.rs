//! Typed reads of TOML values with errors that name the key path, and closed config schemas.

use super::error::{index, join, Ctx, ManifestError};
use super::suggest::unknown_key_message;
use crate::lattice::grant::type_name;

/// "expected X, found Y" at `path`.
pub(crate) fn wrong_type(
    ctx: Ctx<'_>,
    path: &str,
    expected: &str,
    v: &toml::Value,
) -> ManifestError {
    ctx.err(path, format!("expected {expected}, found {}", type_name(v)))
}

pub(crate) fn want_str<'v>(
    ctx: Ctx<'_>,
    path: &str,
    v: &'v toml::Value,
) -> Result<&'v str, ManifestError> {
    v.as_str()
        .ok_or_else(|| wrong_type(ctx, path, "a string", v))
}

/// A string that must not be empty.
pub(crate) fn want_name<'v>(
    ctx: Ctx<'_>,
    path: &str,
    v: &'v toml::Value,
) -> Result<&'v str, ManifestError> {
    let s = want_str(ctx, path, v)?;
    if s.trim().is_empty() {
        return Err(ctx.err(path, "must not be empty"));
    }
    Ok(s)
}

pub(crate) fn want_table<'v>(
    ctx: Ctx<'_>,
    path: &str,
    v: &'v toml::Value,
) -> Result<&'v toml::Table, ManifestError> {
    v.as_table()
        .ok_or_else(|| wrong_type(ctx, path, "a table", v))
}

pub(crate) fn want_str_list(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
) -> Result<Vec<String>, ManifestError> {
    let items = v
        .as_array()
        .ok_or_else(|| wrong_type(ctx, path, "an array of strings", v))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| want_str(ctx, &index(path, i), item).map(str::to_string))
        .collect()
}

/// Shapes a config value may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Str,
    Bool,
    /// A non-negative integer.
    Count,
    /// An integer or a float.
    Number,
    /// A number in (0, 1].
    Fraction,
    StrList,
    /// A table whose values are all strings.
    StrMap,
    Array,
}

/// Checks one value against a shape.
pub(crate) fn check_ty(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
    ty: Ty,
) -> Result<(), ManifestError> {
    match ty {
        Ty::Str => want_str(ctx, path, v).map(drop),
        Ty::Bool => v
            .as_bool()
            .map(drop)
            .ok_or_else(|| wrong_type(ctx, path, "a boolean", v)),
        Ty::Count => match v.as_integer() {
            Some(n) if n >= 0 => Ok(()),
            Some(_) => Err(ctx.err(path, "must not be negative")),
            None => Err(wrong_type(ctx, path, "an integer", v)),
        },
        Ty::Number => match v {
            toml::Value::Integer(_) | toml::Value::Float(_) => Ok(()),
            other => Err(wrong_type(ctx, path, "a number", other)),
        },
        Ty::Fraction => {
            let x = match v {
                toml::Value::Integer(i) => *i as f64,
                toml::Value::Float(f) => *f,
                other => return Err(wrong_type(ctx, path, "a number between 0 and 1", other)),
            };
            if x > 0.0 && x <= 1.0 {
                Ok(())
            } else {
                Err(ctx
                    .err(path, format!("{x} is not a fraction in (0, 1]"))
                    .with_hint("e.g. 0.75 compacts at three quarters of the context"))
            }
        }
        Ty::StrList => want_str_list(ctx, path, v).map(drop),
        Ty::StrMap => {
            let t = v
                .as_table()
                .ok_or_else(|| wrong_type(ctx, path, "a table of strings", v))?;
            for (k, item) in t {
                want_str(ctx, &join(path, k), item)?;
            }
            Ok(())
        }
        Ty::Array => v
            .as_array()
            .map(drop)
            .ok_or_else(|| wrong_type(ctx, path, "an array", v)),
    }
}

/// Checks a closed config table: every key must be in `schema`, with the right shape.
pub(crate) fn check_schema(
    ctx: Ctx<'_>,
    path: &str,
    config: &toml::Table,
    schema: &[(&str, Ty)],
) -> Result<(), ManifestError> {
    for (key, v) in config {
        let key_path = join(path, key);
        match schema.iter().find(|(k, _)| k == key) {
            Some((_, ty)) => check_ty(ctx, &key_path, v, *ty)?,
            None => {
                let valid: Vec<&str> = schema.iter().map(|(k, _)| *k).collect();
                return Err(ctx.err(&key_path, unknown_key_message(key, &valid)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_checks_keys_and_types() {
        let ctx = Ctx::new("agent.toml");
        let schema = [
            ("model", Ty::Str),
            ("maxTokens", Ty::Count),
            ("stream", Ty::Bool),
        ];
        let t: toml::Table =
            toml::from_str("model = \"m\"\nmaxTokens = 5\nstream = false").unwrap();
        check_schema(ctx, "harness", &t, &schema).unwrap();
        let t: toml::Table = toml::from_str("maxTokens = \"5\"").unwrap();
        let e = check_schema(ctx, "harness", &t, &schema).unwrap_err();
        assert_eq!(
            e.to_string(),
            "agent.toml: harness.maxTokens: expected an integer, found a string"
        );
        let t: toml::Table = toml::from_str("max_tokens = 5").unwrap();
        let e = check_schema(ctx, "harness", &t, &schema).unwrap_err();
        assert_eq!(
            e.to_string(),
            "agent.toml: harness.max_tokens: unknown key; did you mean maxTokens?"
        );
        let t: toml::Table = toml::from_str("maxTokens = -1").unwrap();
        assert!(check_schema(ctx, "harness", &t, &schema).is_err());
    }
}
