//! The environment a tool's command sees, and which secrets reach it.
//!
//! Two decisions, both pure. [`EnvPolicy`] is a bash row's `env` grant (two-tier inheritance). [`env_var_passes`]
//! adds per-tool secret filtering: a variable that carries a secret loom knows (by name, under any of the names the
//! secrets chain looks it up by, or by value — the runtime gathers that fact) reaches a command only when the secret is
//! granted to it. A secret is granted only when the agent declares it in `[agent] secrets` (the allowlist of secrets
//! its tools may be handed) **and** the grant names it: a row's `env` lists the secret's exact name (a `PREFIX_*`
//! pattern, `env = "*"` or the tier-2 default never does), or the whole grant is `"*"`. Keys that a harness or a tool
//! takes for itself (`ANTHROPIC_API_KEY`, `BRAVE_SEARCH_API_KEY`, …) therefore never reach a command unless the agent
//! lists them in `[agent] secrets` too.

use std::collections::BTreeSet;

use crate::{Grant, Row, Value, ValueError, ENV_TIER1, ENV_TIER2};

/// Which variables of the parent's environment reach a command, before secrets are considered.
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
    pub fn from_value(v: Option<&Value>) -> Result<EnvPolicy, ValueError> {
        let patterns: Vec<String> = match v {
            None => ENV_TIER2.iter().map(|s| s.to_string()).collect(),
            Some(Value::Star) => return Ok(EnvPolicy::All),
            Some(other) => other
                .elements()
                .unwrap_or_default()
                .into_iter()
                .map(|e| match e {
                    Value::Str(s) if !s.is_empty() => Ok(s.clone()),
                    other => Err(ValueError::Shape {
                        verb: "holds",
                        value: other.to_toml(),
                        fix: "write a list of variable names or PREFIX_* patterns such as [\"AWS_*\"], or \"*\"",
                    }),
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

    /// True when a variable named `name` passes (secrets aside: see [`env_var_passes`]).
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

    /// True when the grant lists `name` exactly (not through tier 1, a pattern or `"*"`).
    pub fn names_exactly(&self, name: &str) -> bool {
        match self {
            EnvPolicy::All => false,
            EnvPolicy::Allow { names, .. } => names.iter().any(|n| n == name),
        }
    }
}

/// The names the secrets chain looks `name` up by in the environment: `NAME`, `LOOM_NAME`, and the upper-cased
/// forms with `-` and `.` turned into `_`. Each of them carries the secret.
pub fn secret_env_names(name: &str) -> Vec<String> {
    let upper: String = name
        .chars()
        .map(|c| {
            if c == '-' || c == '.' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect();
    let mut out = Vec::with_capacity(4);
    for n in [
        name.to_string(),
        format!("LOOM_{name}"),
        upper.clone(),
        format!("LOOM_{upper}"),
    ] {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The secrets a row's env policy grants: the names in `shareable` (`[agent] secrets`) that it lists exactly.
pub fn row_secrets(policy: &EnvPolicy, shareable: &[String]) -> Vec<String> {
    shareable
        .iter()
        .filter(|s| policy.names_exactly(s))
        .cloned()
        .collect()
}

/// The secrets any command run under `grant` may be handed (what `loom audit` shows for a bash tool): all of
/// `shareable` for the grant `"*"`, else the union of [`row_secrets`] over the rows. A row whose `env` is malformed
/// grants none.
pub fn grant_secrets(grant: &Grant, shareable: &[String]) -> Vec<String> {
    let rows: &[Row] = match grant {
        Grant::Unrestricted => return shareable.to_vec(),
        Grant::Set(rows) => rows,
    };
    let mut out = BTreeSet::new();
    for row in rows {
        if let Ok(p) = EnvPolicy::from_value(row.get("env")) {
            out.extend(row_secrets(&p, shareable));
        }
    }
    out.into_iter().collect()
}

/// Whether the variable `var` reaches a command whose env grant is `policy` and which is granted the secrets
/// `granted`. `carries` is the secret the variable holds, if any (a fact the caller gathers: `var` is one of the
/// [`secret_env_names`] of a secret, or its value is a secret's value). A variable carrying a secret passes only
/// when that secret is granted and the policy lists `var` exactly; any other variable passes when the policy allows
/// it.
pub fn env_var_passes(
    policy: &EnvPolicy,
    var: &str,
    carries: Option<&str>,
    granted: &[String],
) -> bool {
    match carries {
        None => policy.allows(var),
        Some(secret) => granted.iter().any(|g| g == secret) && policy.names_exactly(var),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> Grant {
        let t: toml::Table = toml::from_str(&format!("g = {text}")).unwrap();
        Grant::from_toml(&t["g"]).unwrap()
    }

    fn policy(v: Option<Value>) -> EnvPolicy {
        EnvPolicy::from_value(v.as_ref()).unwrap()
    }

    #[test]
    fn the_two_tiers() {
        let absent = policy(None);
        assert!(absent.allows("HOME") && absent.allows("PATH") && !absent.allows("AWS_KEY"));
        let empty = policy(Some(Value::List(vec![])));
        assert!(empty.allows("LANG") && !empty.allows("PATH"));
        let aws = policy(Some(Value::strs(["AWS_*"])));
        assert!(aws.allows("AWS_KEY") && !aws.allows("PATH") && !aws.names_exactly("AWS_KEY"));
        assert!(policy(Some(Value::Star)).allows("ANYTHING"));
        assert!(EnvPolicy::from_value(Some(&Value::Int(3))).is_err());
    }

    #[test]
    fn a_secret_passes_only_when_declared_and_named_exactly() {
        let shareable = vec!["GH_TOKEN".to_string()];
        let exact = policy(Some(Value::strs(["GH_TOKEN", "AWS_*"])));
        let granted = row_secrets(&exact, &shareable);
        assert_eq!(granted, ["GH_TOKEN"]);
        assert!(env_var_passes(
            &exact,
            "GH_TOKEN",
            Some("GH_TOKEN"),
            &granted
        ));
        // the same row does not pass a secret it was not granted, even through its pattern
        assert!(!env_var_passes(
            &exact,
            "AWS_SECRET",
            Some("AWS_SECRET"),
            &granted
        ));
        assert!(env_var_passes(&exact, "AWS_REGION", None, &granted));
        // a variable that merely holds a granted secret's value under another name stays out
        assert!(!env_var_passes(
            &exact,
            "AWS_COPY",
            Some("GH_TOKEN"),
            &granted
        ));
        // "*" and patterns never grant a secret
        for p in [
            policy(Some(Value::Star)),
            policy(Some(Value::strs(["GH_*"]))),
            policy(None),
        ] {
            let g = row_secrets(&p, &shareable);
            assert!(g.is_empty(), "{p:?}");
            assert!(
                !env_var_passes(&p, "GH_TOKEN", Some("GH_TOKEN"), &g),
                "{p:?}"
            );
        }
        // named exactly but not declared in [agent] secrets: not granted (a harness key, say)
        let key = policy(Some(Value::strs(["ANTHROPIC_API_KEY"])));
        let g = row_secrets(&key, &shareable);
        assert!(!env_var_passes(
            &key,
            "ANTHROPIC_API_KEY",
            Some("ANTHROPIC_API_KEY"),
            &g
        ));
        assert!(env_var_passes(&key, "ANTHROPIC_API_KEY", None, &g));
    }

    #[test]
    fn what_a_grant_hands_out() {
        let shareable = vec!["GH_TOKEN".to_string(), "GCAL".to_string()];
        assert_eq!(grant_secrets(&Grant::Unrestricted, &shareable), shareable);
        let g = grant(
            r#"[{ commands = "*", env = "*" }, { commands = ["gcalcli"], env = ["GCAL", "OTHER"] }]"#,
        );
        assert_eq!(grant_secrets(&g, &shareable), ["GCAL"]);
        assert!(grant_secrets(&grant(r#"{ commands = "*" }"#), &shareable).is_empty());
    }

    #[test]
    fn lookup_names() {
        assert_eq!(
            secret_env_names("my-key"),
            ["my-key", "LOOM_my-key", "MY_KEY", "LOOM_MY_KEY"]
        );
        assert_eq!(secret_env_names("A"), ["A", "LOOM_A"]);
    }
}
