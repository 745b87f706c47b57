//! The environment a sandboxed command sees: bash's two-tier inheritance.

use std::ffi::OsString;

use loom_kernel::{Value, ENV_TIER1, ENV_TIER2};

/// Which variables of the parent's environment reach the command.
///
/// - `env` absent: tier 1 + tier 2; `env = []`: tier 1 only; `env = ["NAME", "AWS_*"]`: tier 1 + those names and
///   prefixes; `env = "*"`: everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvPolicy {
    /// `env = "*"`: the whole environment.
    All,
    /// Tier 1 plus these exact names and `PREFIX_*` prefixes.
    Allow {
        /// Exact names (beyond tier 1).
        names: Vec<String>,
        /// Prefixes (from `PREFIX_*` patterns).
        prefixes: Vec<String>,
    },
}

impl EnvPolicy {
    /// Reads a row's `env` value.
    pub fn from_value(v: Option<&Value>) -> Result<EnvPolicy, String> {
        let patterns: Vec<String> = match v {
            None => ENV_TIER2.iter().map(|s| s.to_string()).collect(),
            Some(Value::Star) => return Ok(EnvPolicy::All),
            Some(other) => other
                .elements()
                .unwrap_or_default()
                .into_iter()
                .map(|e| match e {
                    Value::Str(s) if !s.is_empty() => Ok(s.clone()),
                    other => Err(format!(
                        "holds {}; write a list of variable names or PREFIX_* patterns such as [\"AWS_*\"], or \"*\"",
                        other.to_toml()
                    )),
                })
                .collect::<Result<_, _>>()?,
        };
        let mut names = Vec::new();
        let mut prefixes = Vec::new();
        for p in patterns {
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_string()),
                None => names.push(p),
            }
        }
        Ok(EnvPolicy::Allow { names, prefixes })
    }

    /// True when a variable named `name` passes.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            EnvPolicy::All => true,
            EnvPolicy::Allow { names, prefixes } => {
                ENV_TIER1.contains(&name)
                    || names.iter().any(|n| n == name)
                    || prefixes.iter().any(|p| name.starts_with(p.as_str()))
            }
        }
    }
}

/// Filters `parent` (the parent's environment) through `policy`, keeping order.
pub fn build_env<I>(policy: &EnvPolicy, parent: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    parent
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(|k| policy.allows(k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("HOME", "/h"),
            ("LANG", "C"),
            ("PATH", "/usr/bin"),
            ("SECRET_TOKEN", "s"),
            ("AWS_KEY", "k"),
            ("AWS_REGION", "r"),
            ("EDITOR", "vi"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
    }

    fn names(v: Option<Value>) -> Vec<String> {
        let p = EnvPolicy::from_value(v.as_ref()).unwrap();
        build_env(&p, parent())
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect()
    }

    #[test]
    fn the_two_tiers() {
        assert_eq!(names(None), ["HOME", "LANG", "PATH", "EDITOR"]);
        assert_eq!(names(Some(Value::List(vec![]))), ["HOME", "LANG"]);
        assert_eq!(
            names(Some(Value::strs(["AWS_*"]))),
            ["HOME", "LANG", "AWS_KEY", "AWS_REGION"]
        );
        assert_eq!(names(Some(Value::strs(["PATH"]))), ["HOME", "LANG", "PATH"]);
        assert_eq!(names(Some(Value::Star)).len(), 7);
    }

    #[test]
    fn non_names_are_refused() {
        assert!(EnvPolicy::from_value(Some(&Value::Int(3))).is_err());
    }
}
