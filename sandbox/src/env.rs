//! The environment a sandboxed command sees: bash's two-tier inheritance ([`EnvPolicy`], decided in the kernel)
//! and per-tool secret filtering ([`SecretFacts`]: the secrets loom knows, and which of them the agent shares).

use std::ffi::{OsStr, OsString};

pub use loom_kernel::EnvPolicy;
use loom_kernel::{env_var_passes, grant_secrets, row_secrets, secret_env_names, Grant};

/// The secrets loom resolved for an agent (names and values) and the names its tools may be handed
/// (`[agent] secrets`). `Debug` never prints a value.
#[derive(Clone, Default)]
pub struct SecretFacts {
    /// Each known secret: its name, the environment names it is looked up by, and its value.
    known: Vec<(String, Vec<String>, OsString)>,
    /// `[agent] secrets`.
    shareable: Vec<String>,
}

impl std::fmt::Debug for SecretFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretFacts")
            .field(
                "known",
                &self.known.iter().map(|(n, _, _)| n).collect::<Vec<_>>(),
            )
            .field("shareable", &self.shareable)
            .finish()
    }
}

impl SecretFacts {
    /// Facts for an agent that shares `shareable` with its tools.
    pub fn new(shareable: Vec<String>) -> SecretFacts {
        SecretFacts {
            known: Vec::new(),
            shareable,
        }
    }

    /// Records a secret loom knows. `value` is `None` when the chain does not hold it: its names are still screened.
    pub fn add(&mut self, name: &str, value: Option<&str>) {
        if self.known.iter().any(|(n, _, _)| n == name) {
            return;
        }
        self.known.push((
            name.to_string(),
            secret_env_names(name),
            value.map(OsString::from).unwrap_or_default(),
        ));
    }

    /// The environment names every known secret is looked up by (names only, never a value).
    pub fn env_names(&self) -> Vec<String> {
        self.known
            .iter()
            .flat_map(|(_, names, _)| names.iter().cloned())
            .collect()
    }

    /// `[agent] secrets`: the names the agent's tools may be handed.
    pub fn shareable(&self) -> &[String] {
        &self.shareable
    }

    /// True when no secret is known (nothing to screen).
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// The secret a variable carries: by name (any lookup form), else by value.
    fn carried_by(&self, var: &str, value: &OsStr) -> Option<&str> {
        self.known
            .iter()
            .find(|(_, names, _)| names.iter().any(|n| n == var))
            .or_else(|| {
                self.known
                    .iter()
                    .find(|(_, _, v)| !v.is_empty() && v.as_os_str() == value)
            })
            .map(|(n, _, _)| n.as_str())
    }

    fn value_of(&self, name: &str) -> Option<&OsString> {
        self.known
            .iter()
            .find(|(n, _, v)| n == name && !v.is_empty())
            .map(|(_, _, v)| v)
    }
}

/// Filters `parent` (the parent's environment) through a row's `policy` and the kernel's secret decision, keeping
/// order, then sets each secret the row is granted to the chain's value under its own name.
pub fn build_env<I>(
    policy: &EnvPolicy,
    parent: I,
    secrets: &SecretFacts,
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let granted = row_secrets(policy, &secrets.shareable);
    screen(policy, parent, secrets, &granted)
}

/// The environment of a command that runs unconfined (the grant `"*"`): the whole parent environment minus every
/// secret, plus the secrets the agent shares (`[agent] secrets`).
pub fn unconfined_env<I>(parent: I, secrets: &SecretFacts) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let granted = grant_secrets(&Grant::Unrestricted, &secrets.shareable);
    screen(&EnvPolicy::All, parent, secrets, &granted)
}

fn screen<I>(
    policy: &EnvPolicy,
    parent: I,
    secrets: &SecretFacts,
    granted: &[String],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut out: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, v)| {
            k.to_str()
                .is_some_and(|k| env_var_passes(policy, k, secrets.carried_by(k, v), granted))
        })
        .collect();
    for name in granted {
        let Some(value) = secrets.value_of(name) else {
            continue;
        };
        match out.iter_mut().find(|(k, _)| k == name.as_str()) {
            Some((_, v)) => *v = value.clone(),
            None => out.push((OsString::from(name), value.clone())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_kernel::Value;

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
        build_env(&p, parent(), &SecretFacts::default())
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

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn pairs(env: Vec<(OsString, OsString)>) -> Vec<(String, String)> {
        env.into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    }

    #[test]
    fn secrets_are_screened_and_granted_ones_set_from_the_chain() {
        let host = env_of(&[
            ("HOME", "/h"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("LOOM_GH_TOKEN", "gh-env"),
            ("COPY", "sk-ant"),
            ("AWS_REGION", "r"),
        ]);
        let mut facts = SecretFacts::new(vec!["GH_TOKEN".into()]);
        facts.add("ANTHROPIC_API_KEY", Some("sk-ant"));
        facts.add("GH_TOKEN", Some("gh-file"));
        assert!(!format!("{facts:?}").contains("gh-file"));
        // env = "*": everything but the secrets
        let all = pairs(build_env(&EnvPolicy::All, host.clone(), &facts));
        assert_eq!(
            all,
            [
                ("HOME".into(), "/h".into()),
                ("AWS_REGION".into(), "r".into())
            ]
        );
        // the row names the shared secret: it gets the chain's value, under its own name
        let p = EnvPolicy::from_value(Some(&Value::strs([
            "GH_TOKEN",
            "COPY",
            "ANTHROPIC_API_KEY",
        ])))
        .unwrap();
        let got = pairs(build_env(&p, host.clone(), &facts));
        assert_eq!(
            got,
            [
                ("HOME".into(), "/h".into()),
                ("GH_TOKEN".into(), "gh-file".into())
            ]
        );
        // unconfined: every secret stripped, the shared one set
        let un = pairs(unconfined_env(host, &facts));
        assert_eq!(
            un,
            [
                ("HOME".into(), "/h".into()),
                ("AWS_REGION".into(), "r".into()),
                ("GH_TOKEN".into(), "gh-file".into())
            ]
        );
    }
}
