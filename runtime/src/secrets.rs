//! Secrets: a chain of stores, most local first — the caller's store, `.loom-secrets` next to the manifest,
//! `.loom-secrets` in the working directory, the environment (`NAME`, `LOOM_NAME`, and the upper-cased `-`/`.` → `_`
//! forms), then `$XDG_CONFIG_HOME/loom/secrets.toml`. The first hit wins. A [`Secret`] never prints its value
//! (`Debug` and `Display` are redacted), so it cannot reach a log, an update or an error by accident.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A secret value. Read it with [`Secret::expose`] only where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(v: impl Into<String>) -> Secret {
        Secret(v.into())
    }

    /// The value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where a secret was found (for diagnostics; never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The caller's store.
    Caller,
    /// A `.loom-secrets` file or the XDG file.
    File(PathBuf),
    /// An environment variable (its name).
    Env(String),
    /// The OS keychain (`service = loom`, `account = NAME`).
    Keychain,
}

/// The chain.
#[derive(Debug, Clone, Default)]
pub struct SecretChain {
    caller: BTreeMap<String, Secret>,
    files: Vec<(PathBuf, BTreeMap<String, Secret>)>,
    env: BTreeMap<String, String>,
    xdg: Option<(PathBuf, BTreeMap<String, Secret>)>,
    /// The OS keychain (feature `keychain`), asked after the environment and before the XDG file.
    keychain: Option<crate::keychain::Keychain>,
}

/// Why a secrets file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct SecretsFileError {
    /// The file.
    pub path: String,
    /// What was wrong (never a value).
    pub reason: String,
}

/// The name variants looked up in the environment for `name` (the kernel's rule: each of them carries the secret).
pub fn env_names(name: &str) -> Vec<String> {
    loom_kernel::secret_env_names(name)
}

impl SecretChain {
    /// The standard chain for a manifest in `manifest_dir` run from `cwd`, with `caller`'s secrets first and `env`
    /// as the process environment.
    pub fn standard(
        caller: BTreeMap<String, Secret>,
        manifest_dir: &Path,
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<SecretChain, SecretsFileError> {
        let mut files = Vec::new();
        let mut dirs = vec![manifest_dir.to_path_buf()];
        if cwd != manifest_dir {
            dirs.push(cwd.to_path_buf());
        }
        for d in dirs {
            let p = d.join(".loom-secrets");
            if let Some(text) = read_optional(&p)? {
                files.push((p.clone(), parse_dotfile(&p, &text)?));
            }
        }
        let xdg_dir = env
            .get("XDG_CONFIG_HOME")
            .filter(|d| d.starts_with('/'))
            .map(PathBuf::from)
            .or_else(|| {
                env.get("HOME")
                    .filter(|h| h.starts_with('/'))
                    .map(|h| Path::new(h).join(".config"))
            });
        let mut xdg = None;
        if let Some(dir) = xdg_dir {
            let p = dir.join("loom/secrets.toml");
            if let Some(text) = read_optional(&p)? {
                xdg = Some((p.clone(), parse_toml_file(&p, &text)?));
            }
        }
        Ok(SecretChain {
            caller,
            files,
            env: env.clone(),
            xdg,
            keychain: cfg!(feature = "keychain")
                .then(|| crate::keychain::Keychain::on_path(env.get("PATH").map(String::as_str))),
        })
    }

    /// Looks `name` up, most local store first.
    pub fn get(&self, name: &str) -> Option<(Secret, SecretSource)> {
        if let Some(s) = self.caller.get(name) {
            return Some((s.clone(), SecretSource::Caller));
        }
        for (p, m) in &self.files {
            if let Some(s) = m.get(name) {
                return Some((s.clone(), SecretSource::File(p.clone())));
            }
        }
        for n in env_names(name) {
            if let Some(v) = self.env.get(&n).filter(|v| !v.is_empty()) {
                return Some((Secret::new(v.clone()), SecretSource::Env(n)));
            }
        }
        // an unavailable keychain is not a miss: the reason is kept and named if the secret is found nowhere
        if let Some(Ok(Some(s))) = self.keychain.as_ref().map(|k| k.lookup(name)) {
            return Some((s, SecretSource::Keychain));
        }
        let (p, m) = self.xdg.as_ref()?;
        m.get(name)
            .map(|s| (s.clone(), SecretSource::File(p.clone())))
    }

    /// Every name a store of the chain holds other than the environment (the caller's store and the files), in
    /// order, without duplicates.
    pub fn stored_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let stores = std::iter::once(&self.caller)
            .chain(self.files.iter().map(|(_, m)| m))
            .chain(self.xdg.iter().map(|(_, m)| m));
        for m in stores {
            for k in m.keys() {
                if !out.contains(k) {
                    out.push(k.clone());
                }
            }
        }
        out
    }

    /// The facts the sandbox screens tool environments with: every secret the chain's stores hold, the keys of
    /// loom's own secret slots (`slots`), and `[agent] secrets` (`shared`, the ones tools may be handed), each with
    /// the chain's value when it has one.
    pub fn facts(&self, slots: &[&str], shared: &[String]) -> loom_sandbox::SecretFacts {
        let mut facts = loom_sandbox::SecretFacts::new(shared.to_vec());
        let names = self
            .stored_names()
            .into_iter()
            .chain(slots.iter().map(|s| s.to_string()))
            .chain(shared.iter().cloned());
        for name in names {
            let value = self.get(&name).map(|(s, _)| s);
            facts.add(&name, value.as_ref().map(Secret::expose));
        }
        facts
    }

    /// Resolves every name in `names`; the error lists the missing names and where to put them (never a value).
    pub fn resolve(&self, names: &[String]) -> Result<BTreeMap<String, Secret>, String> {
        let mut out = BTreeMap::new();
        let mut missing = Vec::new();
        for n in names {
            match self.get(n) {
                Some((s, _)) => {
                    out.insert(n.clone(), s);
                }
                None => missing.push(n.clone()),
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let keychain = self
            .keychain
            .as_ref()
            .and_then(crate::keychain::Keychain::unavailable)
            .map(|why| format!("; the OS keychain could not be asked: {why}"))
            .unwrap_or_default();
        Err(format!(
            "secret{} {} not set; add {} to .loom-secrets next to the manifest (KEY=value lines), export {}, or put \
             it in $XDG_CONFIG_HOME/loom/secrets.toml{keychain}",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            if missing.len() > 1 { "them" } else { "it" },
            missing.iter().map(|m| format!("LOOM_{m}")).collect::<Vec<_>>().join(" / ")
        ))
    }
}

fn read_optional(p: &Path) -> Result<Option<String>, SecretsFileError> {
    match std::fs::read_to_string(p) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SecretsFileError {
            path: p.display().to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Parses a `.loom-secrets` file: `KEY=value` lines (`#` comments, optional `export `, optional quotes) or a JSON
/// object of strings.
fn parse_dotfile(p: &Path, text: &str) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let err = |reason: String| SecretsFileError {
        path: p.display().to_string(),
        reason,
    };
    if text.trim_start().starts_with('{') {
        let v: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|_| err("not a JSON object of strings".into()))?;
        return v
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, Secret::new(s))),
                _ => Err(err(format!("{k}: the value must be a string"))),
            })
            .collect();
    }
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            // the line may hold a value: never echo it
            return Err(err(format!("line {}: expected KEY=value", i + 1)));
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(v);
        out.insert(k.trim().to_string(), Secret::new(v));
    }
    Ok(out)
}

fn parse_toml_file(p: &Path, text: &str) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let err = |reason: String| SecretsFileError {
        path: p.display().to_string(),
        reason,
    };
    let t: toml::Table =
        toml::from_str(text).map_err(|_| err("not valid TOML (KEY = \"value\" lines)".into()))?;
    t.into_iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => Ok((k, Secret::new(s))),
            _ => Err(err(format!("{k}: the value must be a string"))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_local_wins_and_values_never_print() {
        let m = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        let x = tempfile::tempdir().unwrap();
        std::fs::write(
            m.path().join(".loom-secrets"),
            "# comment\nexport A=manifest\n",
        )
        .unwrap();
        std::fs::write(
            c.path().join(".loom-secrets"),
            r#"{"A": "cwd", "B": "cwd"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(x.path().join("loom")).unwrap();
        std::fs::write(
            x.path().join("loom/secrets.toml"),
            "D = \"xdg\"\nC = \"xdg\"\n",
        )
        .unwrap();
        let env = BTreeMap::from([
            ("LOOM_C".to_string(), "env".to_string()),
            ("MY_KEY".to_string(), "dashed".to_string()),
            (
                "XDG_CONFIG_HOME".to_string(),
                x.path().display().to_string(),
            ),
        ]);
        let caller = BTreeMap::from([("Z".to_string(), Secret::new("caller"))]);
        let chain = SecretChain::standard(caller, m.path(), c.path(), &env).unwrap();
        let v = |n: &str| chain.get(n).map(|(s, _)| s.expose().to_string());
        assert_eq!(v("A").as_deref(), Some("manifest"));
        assert_eq!(v("B").as_deref(), Some("cwd"));
        assert_eq!(v("C").as_deref(), Some("env"));
        assert_eq!(v("my-key").as_deref(), Some("dashed"));
        assert_eq!(v("D").as_deref(), Some("xdg"));
        assert_eq!(v("Z").as_deref(), Some("caller"));
        let (s, _) = chain.get("A").unwrap();
        assert_eq!(format!("{s} {s:?}"), "<redacted> Secret(<redacted>)");
        let err = chain.resolve(&["NOPE".into()]).unwrap_err();
        assert!(
            err.contains("NOPE") && err.contains(".loom-secrets"),
            "{err}"
        );
    }

    #[test]
    fn a_malformed_line_is_reported_without_its_value() {
        let m = tempfile::tempdir().unwrap();
        std::fs::write(m.path().join(".loom-secrets"), "sk-live-abcdef\n").unwrap();
        let err = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &BTreeMap::new())
            .unwrap_err();
        assert!(!err.to_string().contains("sk-live"), "{err}");
    }
}

#[cfg(test)]
mod keychain_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_keychain_comes_after_the_environment_and_before_the_xdg_file() {
        let bin = tempfile::tempdir().unwrap();
        let tool = bin.path().join("secret-tool");
        std::fs::write(
            &tool,
            "#!/bin/sh\n[ \"$5\" = KC ] && printf from-keychain && exit 0\n[ \"$5\" = BOTH ] && printf keychain && exit 0\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let x = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(x.path().join("loom")).unwrap();
        std::fs::write(
            x.path().join("loom/secrets.toml"),
            "BOTH = \"xdg\"\nXDG_ONLY = \"xdg\"\n",
        )
        .unwrap();
        let m = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([
            ("PATH".to_string(), bin.path().display().to_string()),
            (
                "XDG_CONFIG_HOME".to_string(),
                x.path().display().to_string(),
            ),
            ("KC".to_string(), "from-env".to_string()),
        ]);
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap();
        let v = |n: &str| chain.get(n).map(|(s, src)| (s.expose().to_string(), src));
        assert_eq!(
            v("KC"),
            Some(("from-env".into(), SecretSource::Env("KC".into())))
        );
        assert_eq!(v("BOTH"), Some(("keychain".into(), SecretSource::Keychain)));
        assert_eq!(v("XDG_ONLY").unwrap().0, "xdg");
        assert!(v("NOWHERE").is_none());
        let err = chain.resolve(&["NOWHERE".into()]).unwrap_err();
        assert!(!err.contains("keychain could not"), "{err}");

        // no secret-tool on PATH: the chain still ends at the XDG file, and a missing secret says why the keychain
        // was not asked
        let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap();
        let err = chain.resolve(&["NOWHERE".into()]).unwrap_err();
        assert!(
            err.contains("the OS keychain could not be asked")
                && err.contains("`secret-tool` is not installed"),
            "{err}"
        );
    }
}
