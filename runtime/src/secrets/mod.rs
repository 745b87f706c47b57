//! Secrets: a chain of stores, the user's own first — the caller's store (the SDK), the environment (`NAME`,
//! `LOOM_NAME`, and the upper-cased `-`/`.` → `_` forms), the engine's directory of secret files (`LOOM_SECRETS_DIR`,
//! [`dir`]), the OS keychain, the user secrets file
//! (`$XDG_CONFIG_HOME/loom/secrets.toml`, else `~/.config/loom/secrets.toml`), and last the project's `.loom-secrets`
//! next to the manifest. The first hit wins, so a file inside a project (which a repository or the agent can write)
//! never overrides a value the user set. A `.loom-secrets` in the working directory (when it is not the manifest's
//! directory) is never read: [`SecretChain::notices`] says so. A secrets file is read only when it is a regular file
//! of at most [`MAX_SECRETS_FILE_BYTES`](file::MAX_SECRETS_FILE_BYTES) (a FIFO, a device or a socket is refused without blocking; the project file
//! may not be a symbolic link). A [`Secret`] never prints its value (`Debug` and `Display` are redacted), so it
//! cannot reach a log, an update or an error by accident.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod dir;
mod file;
mod keychain;

pub use file::SecretsFileError;
pub use loom_protocol::Secret;

use file::{parse_dotfile, parse_toml_file, read_secrets_file};

/// The name of the project secrets file, next to the manifest.
pub const PROJECT_SECRETS_FILE: &str = ".loom-secrets";

impl loom_protocol::SecretLookup for SecretChain {
    fn lookup(&self, name: &str) -> Option<Secret> {
        self.get(name).map(|(value, _)| value)
    }

    fn missing_hint(&self, names: &[String]) -> String {
        SecretChain::missing_hint(self, names)
    }
}

/// Where a secret was found (for diagnostics; never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The caller's store.
    Caller,
    /// The user secrets file or the project's `.loom-secrets`.
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
    env: BTreeMap<String, String>,
    /// The engine's directory of secret files (`LOOM_SECRETS_DIR`), asked after the environment: where it is and
    /// what it holds.
    dir: Option<(PathBuf, BTreeMap<String, Secret>)>,
    /// The OS keychain (feature `keychain`), asked after the environment and the engine's directory and before the
    /// files.
    keychain: Option<keychain::Keychain>,
    /// Where the user secrets file is (`None`: neither `XDG_CONFIG_HOME` nor `HOME` is an absolute path).
    user_path: Option<PathBuf>,
    /// The user secrets file, when it exists.
    user: Option<(PathBuf, BTreeMap<String, Secret>)>,
    /// The project's `.loom-secrets` next to the manifest, when it exists.
    project: Option<(PathBuf, BTreeMap<String, Secret>)>,
    /// A `.loom-secrets` in the working directory that was not read.
    ignored: Option<PathBuf>,
}

/// The name variants looked up in the environment for `name` (the kernel's rule: each of them carries the secret).
pub fn env_names(name: &str) -> Vec<String> {
    loom_kernel::secret_env_names(name)
}

/// The user secrets file: `$XDG_CONFIG_HOME/loom/secrets.toml` when `XDG_CONFIG_HOME` is absolute, else
/// `$HOME/.config/loom/secrets.toml`; `None` when neither is an absolute path.
pub fn user_secrets_path(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    env.get("XDG_CONFIG_HOME")
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| {
            env.get("HOME")
                .filter(|h| h.starts_with('/'))
                .map(|h| Path::new(h).join(".config"))
        })
        .map(|d| d.join("loom/secrets.toml"))
}

/// Every secrets file the chain of a manifest in `manifest_dir` reads, existing or not, in the chain's order: the
/// engine's directory of secret files (`LOOM_SECRETS_DIR`, when set), the
/// user secrets file (when `env` locates it) and the project's `.loom-secrets` next to the manifest. These files hold
/// secret values: keep them out of every grant the agent has. (A `.loom-secrets` in the working directory is never
/// read, so it is not listed.)
pub fn secret_store_paths(manifest_dir: &Path, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    // the engine's directory of secret files (as named: its links resolve inside it)
    let dir = dir::secrets_dir(env).ok().flatten();
    dir.into_iter()
        .chain(user_secrets_path(env))
        .chain(std::iter::once(manifest_dir.join(PROJECT_SECRETS_FILE)))
        .collect()
}

impl SecretChain {
    /// The standard chain for a manifest in `manifest_dir` run from `cwd`, with `caller`'s secrets first and `env`
    /// as the process environment. `cwd` is only looked at to notice a `.loom-secrets` there, which is never read.
    pub fn standard(
        caller: BTreeMap<String, Secret>,
        manifest_dir: &Path,
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<SecretChain, SecretsFileError> {
        let user_path = user_secrets_path(env);
        let mut user = None;
        if let Some(p) = &user_path {
            // the user's own file may be a link (a dotfiles checkout); it must still end at a regular file
            if let Some(text) = read_secrets_file(p, true)? {
                user = Some((p.clone(), parse_toml_file(p, &text)?));
            }
        }
        let dir = match dir::secrets_dir(env)? {
            Some(d) => Some((d.clone(), dir::read_secrets_dir(&d)?)),
            None => None,
        };
        let project_path = manifest_dir.join(PROJECT_SECRETS_FILE);
        let mut project = None;
        if let Some(text) = read_secrets_file(&project_path, false)? {
            project = Some((project_path.clone(), parse_dotfile(&project_path, &text)?));
        }
        let cwd_file = cwd.join(PROJECT_SECRETS_FILE);
        let ignored = (!same_dir(cwd, manifest_dir)
            && std::fs::symlink_metadata(&cwd_file).is_ok())
        .then_some(cwd_file);
        Ok(SecretChain {
            caller,
            env: env.clone(),
            dir,
            keychain: cfg!(feature = "keychain")
                .then(|| keychain::Keychain::on_path(env.get("PATH").map(String::as_str))),
            user_path,
            user,
            project,
            ignored,
        })
    }

    /// What the user should know about the chain: a `.loom-secrets` in the working directory that was not read.
    pub fn notices(&self) -> Vec<String> {
        let user = self.user_path.as_ref().map_or_else(
            || "$XDG_CONFIG_HOME/loom/secrets.toml".to_string(),
            |p| p.display().to_string(),
        );
        self.ignored
            .iter()
            .map(|p| {
                format!(
                    "{} was ignored: loom reads no secrets from the working directory (a repository or the agent \
                     can write it); move what you need from it to your user secrets file {user} (TOML, \
                     `NAME = \"value\"`) or to the environment",
                    p.display()
                )
            })
            .collect()
    }

    /// Looks `name` up, the user's stores first.
    pub fn get(&self, name: &str) -> Option<(Secret, SecretSource)> {
        if let Some(s) = self.caller.get(name) {
            return Some((s.clone(), SecretSource::Caller));
        }
        for n in env_names(name) {
            if let Some(v) = self.env.get(&n).filter(|v| !v.is_empty()) {
                return Some((Secret::new(v.clone()), SecretSource::Env(n)));
            }
        }
        if let Some((d, m)) = &self.dir {
            if let Some(s) = m.get(name) {
                return Some((s.clone(), SecretSource::File(d.join(name))));
            }
        }
        // an unavailable keychain is not a miss: the reason is kept and named if the secret is found nowhere
        if let Some(Ok(Some(s))) = self.keychain.as_ref().map(|k| k.lookup(name)) {
            return Some((s, SecretSource::Keychain));
        }
        [&self.user, &self.project]
            .into_iter()
            .flatten()
            .find_map(|(p, m)| {
                m.get(name)
                    .map(|s| (s.clone(), SecretSource::File(p.clone())))
            })
    }

    /// How to provide the secrets `names` (none: any secret): the environment, the user secrets file by its absolute
    /// path and format, and the keychain with whether it can be asked. Never points inside the project.
    pub fn where_to_put(&self, names: &[String]) -> String {
        let (it, vars) = match names {
            [] => ("it".to_string(), "NAME or LOOM_NAME".to_string()),
            [n] => ("it".to_string(), format!("{n} or LOOM_{n}")),
            _ => (
                "them".to_string(),
                names
                    .iter()
                    .map(|n| format!("{n} or LOOM_{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        };
        let example = names.first().map_or("NAME", String::as_str);
        let file = match &self.user_path {
            Some(p) => format!(
                "add {it} to your user secrets file {} (TOML, one `{example} = \"value\"` line per secret; keep it \
                 mode 0600 and outside the project)",
                p.display()
            ),
            None => format!(
                "add {it} to your user secrets file $XDG_CONFIG_HOME/loom/secrets.toml (TOML, one \
                 `{example} = \"value\"` line per secret; neither XDG_CONFIG_HOME nor HOME is an absolute path here, \
                 so set one of them)"
            ),
        };
        let keychain = match &self.keychain {
            None => Err("this build of loom has no OS keychain support".to_string()),
            Some(k) => match k.unavailable().or_else(|| k.not_installed()) {
                Some(why) => Err(format!("the OS keychain cannot be asked: {why}")),
                None => Ok(format!(
                    "store {it} in the OS keychain (secret-tool store --label \"loom {example}\" service loom \
                     account {example})"
                )),
            },
        };
        match keychain {
            Ok(store) => format!("export {it} ({vars}), {file}, or {store}"),
            Err(why) => format!("export {it} ({vars}) or {file}; {why}"),
        }
    }

    /// [`SecretChain::where_to_put`] for secrets found in no store, plus the working directory's `.loom-secrets`
    /// that was not read, if there is one (so a user who put the secret there learns why it was not found).
    pub fn missing_hint(&self, names: &[String]) -> String {
        let ignored = self
            .ignored
            .as_ref()
            .map(|p| {
                format!(
                    "; {} was not read: loom reads no secrets from the working directory",
                    p.display()
                )
            })
            .unwrap_or_default();
        format!("{}{ignored}", self.where_to_put(names))
    }

    /// Every name a store of the chain holds other than the environment (the caller's store and the files), in
    /// order, without duplicates.
    pub fn stored_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let stores = std::iter::once(&self.caller)
            .chain(self.dir.iter().map(|(_, m)| m))
            .chain(self.user.iter().map(|(_, m)| m))
            .chain(self.project.iter().map(|(_, m)| m));
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
    pub fn resolve(&self, names: &[String]) -> Result<BTreeMap<String, Secret>, MissingSecrets> {
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
        Err(self.missing(&missing))
    }

    /// The error for secrets found in no store: their names and where to put them (never a value).
    fn missing(&self, names: &[String]) -> MissingSecrets {
        MissingSecrets {
            names: names.to_vec(),
            hint: self.missing_hint(names),
        }
    }
}

/// Secrets found in no store: their names and where to put them. Never holds a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "secret{} {} not set: {hint}",
    if .names.len() > 1 { "s" } else { "" },
    .names.join(", ")
)]
pub struct MissingSecrets {
    /// The names.
    pub names: Vec<String>,
    /// Where each could be put (the stores the chain reads, in order).
    pub hint: String,
}

/// Whether two directories are the same (canonical paths compared; the raw paths when one cannot be resolved).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::file::MAX_SECRETS_FILE_BYTES;
    use super::*;

    fn user_file(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir.join("loom")).unwrap();
        std::fs::write(dir.join("loom/secrets.toml"), text).unwrap();
    }

    #[test]
    fn the_users_stores_win_and_the_project_file_comes_last() {
        let m = tempfile::tempdir().unwrap();
        let x = tempfile::tempdir().unwrap();
        std::fs::write(
            m.path().join(".loom-secrets"),
            "# comment\nexport A=project\nB=project\nC=project\nP=project\n",
        )
        .unwrap();
        user_file(x.path(), "B = \"user\"\nU = \"user\"\n");
        let env = BTreeMap::from([
            ("LOOM_A".to_string(), "env".to_string()),
            ("MY_KEY".to_string(), "dashed".to_string()),
            ("PATH".to_string(), "/nonexistent".to_string()),
            (
                "XDG_CONFIG_HOME".to_string(),
                x.path().display().to_string(),
            ),
        ]);
        let caller = BTreeMap::from([
            ("Z".to_string(), Secret::new("caller")),
            ("C".to_string(), Secret::new("caller")),
        ]);
        let chain = SecretChain::standard(caller, m.path(), m.path(), &env).unwrap();
        let v = |n: &str| chain.get(n).map(|(s, _)| s.expose().to_string());
        // the environment beats the project file; the user file beats it too; the caller beats everything
        assert_eq!(v("A").as_deref(), Some("env"));
        assert_eq!(v("B").as_deref(), Some("user"));
        assert_eq!(v("C").as_deref(), Some("caller"));
        assert_eq!(v("P").as_deref(), Some("project"));
        assert_eq!(v("U").as_deref(), Some("user"));
        assert_eq!(v("my-key").as_deref(), Some("dashed"));
        assert_eq!(v("Z").as_deref(), Some("caller"));
        assert_eq!(
            chain.get("B").unwrap().1,
            SecretSource::File(x.path().join("loom/secrets.toml"))
        );
        let (s, _) = chain.get("A").unwrap();
        assert_eq!(format!("{s} {s:?}"), "<redacted> Secret(<redacted>)");
        assert!(chain.notices().is_empty(), "{:?}", chain.notices());
    }

    #[test]
    fn a_missing_secret_names_the_user_file_and_never_the_project_file() {
        let m = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([
            ("HOME".to_string(), "/home/someone".to_string()),
            ("PATH".to_string(), "/nonexistent".to_string()),
        ]);
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap();
        let err = chain.resolve(&["NOPE".into()]).unwrap_err();
        assert_eq!(err.names, ["NOPE"]);
        let err = err.to_string();
        assert!(
            err.contains("NOPE")
                && err.contains("LOOM_NOPE")
                && err.contains("/home/someone/.config/loom/secrets.toml")
                && err.contains("NOPE = \"value\"")
                && !err.contains(".loom-secrets"),
            "{err}"
        );
        if cfg!(feature = "keychain") {
            assert!(err.contains("keychain cannot be asked"), "{err}");
        }
    }

    #[test]
    fn the_working_directorys_file_is_never_read_and_is_noticed() {
        let m = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        std::fs::write(m.path().join(".loom-secrets"), "A=manifest\n").unwrap();
        std::fs::write(c.path().join(".loom-secrets"), "A=cwd\nB=cwd\n").unwrap();
        let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), c.path(), &env).unwrap();
        assert_eq!(chain.get("A").unwrap().0.expose(), "manifest");
        assert!(chain.get("B").is_none());
        assert!(!chain.stored_names().contains(&"B".to_string()));
        let notices = chain.notices();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].contains(&c.path().join(".loom-secrets").display().to_string())
                && notices[0].contains("ignored")
                && !notices[0].contains("cwd\n"),
            "{notices:?}"
        );
        // even a FIFO there is only noticed, never opened
        let c2 = tempfile::tempdir().unwrap();
        mkfifo(&c2.path().join(".loom-secrets"));
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), c2.path(), &env).unwrap();
        assert_eq!(chain.notices().len(), 1);
    }

    fn mkfifo(p: &Path) {
        use rustix::fs::{mknodat, FileType, Mode, CWD};
        mknodat(CWD, p, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    }

    #[test]
    fn fifos_devices_links_and_huge_files_are_refused_by_name() {
        let env = BTreeMap::new();
        let m = tempfile::tempdir().unwrap();
        let p = m.path().join(".loom-secrets");
        mkfifo(&p);
        let err = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap_err();
        assert_eq!(err.path, p.display().to_string());
        assert!(err.reason.contains("FIFO"), "{err}");

        let m = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", m.path().join(".loom-secrets")).unwrap();
        let err = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap_err();
        assert!(err.reason.contains("symbolic link"), "{err}");

        let m = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(m.path().join(".loom-secrets")).unwrap();
        f.set_len(MAX_SECRETS_FILE_BYTES + 1).unwrap();
        let err = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap_err();
        assert!(err.reason.contains("at most"), "{err}");

        // the user's file may be a link, but it must end at a regular file
        let x = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(x.path().join("loom")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", x.path().join("loom/secrets.toml")).unwrap();
        let env = BTreeMap::from([(
            "XDG_CONFIG_HOME".to_string(),
            x.path().display().to_string(),
        )]);
        let m = tempfile::tempdir().unwrap();
        let err = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap_err();
        assert!(err.reason.contains("a device"), "{err}");
        let y = tempfile::tempdir().unwrap();
        user_file(y.path(), "K = \"v\"\n");
        std::fs::remove_file(x.path().join("loom/secrets.toml")).unwrap();
        std::os::unix::fs::symlink(
            y.path().join("loom/secrets.toml"),
            x.path().join("loom/secrets.toml"),
        )
        .unwrap();
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap();
        assert_eq!(chain.get("K").unwrap().0.expose(), "v");
    }

    #[test]
    fn the_store_paths_are_the_user_file_then_the_project_file() {
        let env = BTreeMap::from([("HOME".to_string(), "/h".to_string())]);
        assert_eq!(
            secret_store_paths(Path::new("/p"), &env),
            vec![
                PathBuf::from("/h/.config/loom/secrets.toml"),
                PathBuf::from("/p/.loom-secrets")
            ]
        );
        let env = BTreeMap::from([
            ("HOME".to_string(), "/h".to_string()),
            ("XDG_CONFIG_HOME".to_string(), "/x".to_string()),
        ]);
        assert_eq!(
            secret_store_paths(Path::new("/p"), &env)[0],
            PathBuf::from("/x/loom/secrets.toml")
        );
        assert_eq!(
            secret_store_paths(Path::new("/p"), &BTreeMap::new()),
            vec![PathBuf::from("/p/.loom-secrets")]
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
    fn the_keychain_comes_after_the_environment_and_before_the_files() {
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
        let err = chain.resolve(&["NOWHERE".into()]).unwrap_err().to_string();
        assert!(
            !err.contains("keychain cannot be asked")
                && err.contains(
                    "secret-tool store --label \"loom NOWHERE\" service loom account NOWHERE"
                ),
            "{err}"
        );

        // no secret-tool on PATH: the chain still ends at the XDG file, and a missing secret says why the keychain
        // was not asked
        let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
        let chain = SecretChain::standard(BTreeMap::new(), m.path(), m.path(), &env).unwrap();
        let err = chain.resolve(&["NOWHERE".into()]).unwrap_err().to_string();
        assert!(
            err.contains("the OS keychain cannot be asked")
                && err.contains("`secret-tool` is not installed"),
            "{err}"
        );
    }
}
