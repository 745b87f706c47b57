//! Installed providers: the lock file `loom install` writes (`.loom/lock.toml` next to the manifest), when a provider
//! handle may be resolved from its install directory, and which grants would let the agent rewrite the code it runs.
//!
//! Resolution never reads a provider from anywhere but `.loom/providers/<handle>`, and only when the lock pins that
//! handle's source and the tree hash the runtime computed over that directory equals the pinned one. Everything here
//! is pure: the runtime reads the lock's text and hashes the tree, and passes both in.

use std::collections::BTreeMap;

use crate::lattice::grant::Grant;
use crate::lattice::path::{path_within, PathCtx};
use crate::lattice::value::{toml_key, toml_string, Value};
use crate::manifest::Source;
use crate::ToolGrant;

/// The lock file, relative to the manifest's directory.
pub const LOCK_FILE: &str = ".loom/lock.toml";
/// Where installed providers live, relative to the manifest's directory: one directory per handle.
pub const INSTALL_DIR: &str = ".loom/providers";
/// The lock format this build reads and writes.
pub const LOCK_VERSION: i64 = 1;

/// One pinned provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// The manifest's source, as [`Source::describe`] writes it (`path ./x`, `npm @a/b@1`, `git URL#rev`).
    pub source: String,
    /// What it resolved to: the absolute source directory, the npm `name@version`, or the git commit.
    pub resolved: String,
    /// The tree hash of the installed directory (lower-case hex sha256; see `PROVIDERS.md`, "The tree hash").
    pub sha256: String,
}

/// The whole lock: every pinned handle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lock {
    /// Pinned providers by handle.
    pub providers: BTreeMap<String, LockEntry>,
}

/// Why a lock file cannot be read. Each message names the file and the key, and says to run `loom install`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Not TOML.
    #[error("{file}: not valid TOML ({why}); run `loom install` to rewrite it")]
    NotToml {
        /// The file.
        file: String,
        /// The parser's message.
        why: String,
    },
    /// A lock version this build does not read (`None`: missing).
    #[error(
        "{file}: version: {}; run `loom install` to rewrite it",
        match .found {
            Some(v) => format!("this build of loom reads lock version {LOCK_VERSION}, not {v}"),
            None => "missing".to_string(),
        }
    )]
    Version {
        /// The file.
        file: String,
        /// The version found.
        found: Option<i64>,
    },
    /// A key of the wrong shape.
    #[error("{file}: {key}: {why}; run `loom install` to rewrite it")]
    Key {
        /// The file.
        file: String,
        /// The key path (`providers.fs.sha256`).
        key: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl Lock {
    /// Parses a lock's text. `file` names it in errors, which say which key is wrong and how to fix it.
    pub fn parse(text: &str, file: &str) -> Result<Lock, LockError> {
        let key_err = |key: String, why| LockError::Key {
            file: file.to_string(),
            key,
            why,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| LockError::NotToml {
            file: file.to_string(),
            why: e.message().to_string(),
        })?;
        match table.get("version").and_then(toml::Value::as_integer) {
            Some(LOCK_VERSION) => {}
            found => {
                return Err(LockError::Version {
                    file: file.to_string(),
                    found,
                })
            }
        }
        let mut providers = BTreeMap::new();
        let empty = toml::Table::new();
        let list = match table.get("providers") {
            None => &empty,
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(key_err("providers".into(), "must be a table")),
        };
        for (handle, v) in list {
            let field = |key: &str| -> Result<String, LockError> {
                v.get(key)
                    .and_then(toml::Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        key_err(
                            format!("providers.{handle}.{key}"),
                            "missing or not a string",
                        )
                    })
            };
            let sha256 = field("sha256")?;
            if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(key_err(
                    format!("providers.{handle}.sha256"),
                    "not a sha256 in hex",
                ));
            }
            providers.insert(
                handle.clone(),
                LockEntry {
                    source: field("source")?,
                    resolved: field("resolved")?,
                    sha256: sha256.to_ascii_lowercase(),
                },
            );
        }
        Ok(Lock { providers })
    }

    /// The lock's text, stable (handles sorted) so it diffs well under version control.
    pub fn render(&self) -> String {
        let mut out = format!(
            "# Written by `loom install`: the provider sources of this agent, pinned. Do not edit; commit it.\nversion = {LOCK_VERSION}\n"
        );
        for (handle, e) in &self.providers {
            out.push_str(&format!(
                "\n[providers.{}]\nsource = {}\nresolved = {}\nsha256 = {}\n",
                toml_key(handle),
                toml_string(&e.source),
                toml_string(&e.resolved),
                toml_string(&e.sha256)
            ));
        }
        out
    }
}

/// What every shipped key contains and no root `[providers]` handle that is installed may: `--`.
pub const SHIPPED_KEY_MARK: &str = "--";

/// True when `key` has the shape of a shipped key (it contains [`SHIPPED_KEY_MARK`]), for messages that name it.
pub fn is_shipped_key(key: &str) -> bool {
    key.contains(SHIPPED_KEY_MARK)
}

/// Why `handle` cannot name an install directory (`.loom/providers/<handle>`), if it cannot: only ASCII letters,
/// digits, `_` and `-`, not starting with `-`, at most 64 characters — never a path.
pub fn install_handle_problem(handle: &str) -> Option<String> {
    let ok = !handle.is_empty()
        && handle.len() <= 64
        && !handle.starts_with('-')
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (!ok).then(|| {
        format!(
            "the handle {handle:?} names the install directory {INSTALL_DIR}/<handle>, so it may hold only ASCII \
             letters, digits, `_` and `-` (not first); rename [providers].{handle:?}"
        )
    })
}

/// Whether a provider handle may be resolved from its install directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Pinned, and the installed tree is exactly the pinned one: resolve it.
    Installed,
    /// Not installed or not pinned; why.
    Missing(String),
    /// Installed, but something changed since (the manifest's source, or the installed files); why.
    Drifted(String),
}

impl LockState {
    /// A one-word label (`installed`, `missing`, `drifted`).
    pub fn label(&self) -> &'static str {
        match self {
            LockState::Installed => "installed",
            LockState::Missing(_) => "missing",
            LockState::Drifted(_) => "drifted",
        }
    }

    /// Why the handle cannot be resolved, or `None` when it can.
    pub fn problem(&self) -> Option<&str> {
        match self {
            LockState::Installed => None,
            LockState::Missing(w) | LockState::Drifted(w) => Some(w),
        }
    }
}

/// Decides whether `[providers].<handle>` (source `source`) may run from its install directory, given the lock (if
/// one could be read) and the tree hash of `.loom/providers/<handle>` (if that directory exists and could be hashed).
pub fn lock_state(
    handle: &str,
    source: &Source,
    lock: Option<&Lock>,
    installed_hash: Option<&str>,
) -> LockState {
    if let Some(why) = install_handle_problem(handle) {
        return LockState::Missing(why);
    }
    let Some(lock) = lock else {
        return LockState::Missing(format!("there is no {LOCK_FILE}"));
    };
    let Some(entry) = lock.providers.get(handle) else {
        return LockState::Missing(format!("{LOCK_FILE} does not pin {}", subject(handle)));
    };
    let want = source.describe();
    if entry.source != want {
        return LockState::Drifted(format!(
            "the manifest's source is `{want}` but {LOCK_FILE} pins `{}`",
            entry.source
        ));
    }
    match installed_hash {
        None => LockState::Missing(format!("{INSTALL_DIR}/{handle} is not installed")),
        Some(h) if h.eq_ignore_ascii_case(&entry.sha256) => LockState::Installed,
        Some(h) => LockState::Drifted(format!(
            "the files in {INSTALL_DIR}/{handle} changed since install (tree sha256 {h}, {LOCK_FILE} pins {})",
            entry.sha256
        )),
    }
}

/// A path source that changed after `loom install`: the tree the source directory would materialise to now (`now`: its
/// tree hash, or why it could not be hashed) against the tree the lock pins for `handle`. Boot runs the installed copy,
/// never the source, so an edited source would otherwise go on running the old code unnoticed. `None` when the source
/// is not a path, when the trees agree, or when the lock does not pin the handle ([`lock_state`] says so).
pub fn path_source_drift(
    handle: &str,
    source: &Source,
    lock: Option<&Lock>,
    now: Result<&str, &str>,
) -> Option<String> {
    let Source::Path(path) = source else {
        return None;
    };
    let entry = lock?.providers.get(handle)?;
    match now {
        Ok(h) if h.eq_ignore_ascii_case(&entry.sha256) => None,
        Ok(h) => Some(format!(
            "the source directory `{path}` changed since install (its tree sha256 is now {h}, {LOCK_FILE} pins {})",
            entry.sha256
        )),
        Err(why) => Some(format!(
            "the source directory `{path}` cannot be read ({why}), so loom cannot tell whether the install is current"
        )),
    }
}

/// What `loom install --frozen` refuses: every difference between the lock and what the manifest's sources
/// materialise to now (`fresh`: handle -> (source description, tree hash)). Empty = nothing drifted.
pub fn frozen_drift(
    lock: Option<&Lock>,
    fresh: &BTreeMap<String, (String, String)>,
) -> Vec<String> {
    let Some(lock) = lock else {
        return vec![format!(
            "there is no {LOCK_FILE} (run `loom install` without --frozen, and commit it)"
        )];
    };
    let mut out = Vec::new();
    for (handle, (source, hash)) in fresh {
        match lock.providers.get(handle) {
            None => out.push(format!("{} is not pinned in {LOCK_FILE}", subject(handle))),
            Some(e) if &e.source != source => out.push(format!(
                "{}: the manifest's source is `{source}`, {LOCK_FILE} pins `{}`",
                subject(handle),
                e.source
            )),
            Some(e) if !e.sha256.eq_ignore_ascii_case(hash) => out.push(format!(
                "{}: `{source}` now materialises to tree sha256 {hash}, {LOCK_FILE} pins {}",
                subject(handle),
                e.sha256
            )),
            Some(_) => {}
        }
    }
    for handle in lock.providers.keys() {
        if !fresh.contains_key(handle) {
            out.push(if is_shipped_key(handle) {
                format!(
                    "{LOCK_FILE} pins {}, which no accepted contributed group ships any more",
                    subject(handle)
                )
            } else {
                format!(
                    "{LOCK_FILE} pins [providers].{handle}, which the manifest no longer has as a source"
                )
            });
        }
    }
    out
}

/// How messages name the lock key `handle`: `[providers].<handle>`, or the shipped provider `<key>`.
fn subject(handle: &str) -> String {
    if is_shipped_key(handle) {
        format!("the shipped provider `{handle}`")
    } else {
        format!("[providers].{handle}")
    }
}

/// Whether built-in `underlying` may write where its `paths` grant reaches (a `read_paths` row kind is read-only): a
/// file tool that writes, or a command tool.
fn writes(underlying: &str) -> bool {
    crate::FILE_WRITERS.contains(&underlying) || crate::COMMAND_TOOLS.contains(&underlying)
}

/// One grant that would let the agent rewrite installed provider code or the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritableInstall {
    /// The tool instance.
    pub instance: String,
    /// The protected path it reaches.
    pub path: String,
    /// The whole finding, with the fix.
    pub message: String,
}

/// Which of `tools` (built-in writers: [`crate::FILE_WRITERS`] and [`crate::COMMAND_TOOLS`]) may write at or below one of `protected` (the
/// absolute install directory and lock file), or write to a directory containing one: a grant of `"*"`, a root above
/// it, or a path inside it. Paths compare lexically after normalisation against `ctx`.
pub fn install_writable(
    tools: &[ToolGrant],
    ctx: &PathCtx,
    protected: &[String],
) -> Vec<WritableInstall> {
    let mut out = Vec::new();
    for t in tools {
        if !matches!(t.provider, crate::ProviderRef::Builtin) || !writes(&t.underlying) {
            continue;
        }
        let rows = match &t.grant {
            Grant::Unrestricted => {
                for p in protected {
                    out.push(finding(&t.instance, p, "\"*\""));
                }
                continue;
            }
            g => g.rows().unwrap_or_default(),
        };
        for p in protected {
            let p = ctx.normalize(p);
            let hit = rows.iter().find_map(|row| match row.get("paths") {
                Some(Value::Star) => Some("paths = \"*\"".to_string()),
                Some(v) => v.as_set().and_then(|set| {
                    set.iter().find_map(|x| match x {
                        Value::Str(raw) => {
                            let g = ctx.normalize(raw);
                            (path_within(&g, &p) || path_within(&p, &g))
                                .then(|| format!("paths {raw:?}"))
                        }
                        _ => None,
                    })
                }),
                None => None,
            });
            if let Some(why) = hit {
                out.push(finding(&t.instance, &p, &why));
            }
        }
    }
    out
}

fn finding(instance: &str, path: &str, why: &str) -> WritableInstall {
    WritableInstall {
        instance: instance.to_string(),
        path: path.to_string(),
        message: format!(
            "its grant ({why}) lets the agent write {path}, so it could rewrite the provider code loom runs or its \
             lock; narrow [capabilities].{instance} to exclude the manifest's .loom directory"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_manifest, tool_grants};

    fn src() -> Source {
        Source::Path("./notes".into())
    }

    fn lock_with(source: &str, sha: &str) -> Lock {
        let mut l = Lock::default();
        l.providers.insert(
            "notes".into(),
            LockEntry {
                source: source.into(),
                resolved: "/m/notes".into(),
                sha256: sha.into(),
            },
        );
        l
    }

    const H: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const H2: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn the_lock_round_trips_and_malformed_locks_name_the_key() {
        let l = lock_with("path ./notes", H);
        assert_eq!(Lock::parse(&l.render(), "lock.toml"), Ok(l));
        let e = Lock::parse(
            "version = 1\n[providers.n]\nsource = \"x\"\nresolved = \"y\"\n",
            "L",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "L: providers.n.sha256: missing or not a string; run `loom install` to rewrite it"
        );
        let e = Lock::parse("version = 9\n", "L").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("L: version: this build of loom reads lock version {LOCK_VERSION}, not 9; run `loom install` to rewrite it")
        );
        let e = Lock::parse("[providers.n]\n", "L").unwrap_err();
        assert_eq!(
            e,
            LockError::Version {
                file: "L".into(),
                found: None
            }
        );
        assert_eq!(
            e.to_string(),
            "L: version: missing; run `loom install` to rewrite it"
        );
        assert!(Lock::parse(
            "version = 1\n[providers.n]\nsource = \"x\"\nresolved = \"y\"\nsha256 = \"zz\"\n",
            "L"
        )
        .is_err());
    }

    #[test]
    fn only_a_pinned_matching_tree_resolves() {
        let l = lock_with("path ./notes", H);
        assert_eq!(
            lock_state("notes", &src(), Some(&l), Some(H)),
            LockState::Installed
        );
        assert_eq!(
            lock_state("notes", &src(), None, Some(H)).label(),
            "missing"
        );
        assert_eq!(
            lock_state("other", &src(), Some(&l), Some(H)).label(),
            "missing"
        );
        assert_eq!(
            lock_state("notes", &src(), Some(&l), None).label(),
            "missing"
        );
        let tampered = lock_state("notes", &src(), Some(&l), Some(H2));
        assert_eq!(tampered.label(), "drifted");
        assert!(tampered
            .problem()
            .is_some_and(|p| p.contains("changed since install")));
        let moved = lock_state(
            "notes",
            &Source::Path("./elsewhere".into()),
            Some(&l),
            Some(H),
        );
        assert_eq!(moved.label(), "drifted");
    }

    #[test]
    fn an_edited_path_source_is_drift() {
        let l = lock_with("path ./notes", H);
        assert_eq!(path_source_drift("notes", &src(), Some(&l), Ok(H)), None);
        let edited = path_source_drift("notes", &src(), Some(&l), Ok(H2)).unwrap();
        assert!(
            edited.contains("`./notes` changed since install"),
            "{edited}"
        );
        let gone = path_source_drift("notes", &src(), Some(&l), Err("no such directory")).unwrap();
        assert!(
            gone.contains("cannot be read (no such directory)"),
            "{gone}"
        );
        // not pinned: lock_state reports it; not a path: nothing to compare
        assert_eq!(path_source_drift("other", &src(), Some(&l), Ok(H2)), None);
        assert_eq!(path_source_drift("notes", &src(), None, Ok(H2)), None);
        let npm = Source::Npm {
            name: "@a/b".into(),
            version: None,
        };
        assert_eq!(path_source_drift("notes", &npm, Some(&l), Ok(H2)), None);
    }

    #[test]
    fn frozen_names_every_drift() {
        let l = lock_with("path ./notes", H);
        let fresh = |s: &str, h: &str| {
            BTreeMap::from([("notes".to_string(), (s.to_string(), h.to_string()))])
        };
        assert!(frozen_drift(Some(&l), &fresh("path ./notes", H)).is_empty());
        assert_eq!(frozen_drift(None, &fresh("path ./notes", H)).len(), 1);
        assert!(frozen_drift(Some(&l), &fresh("path ./notes", H2))[0].contains("materialises"));
        assert!(frozen_drift(Some(&l), &fresh("path ./x", H))[0].contains("pins `path ./notes`"));
        let gone = frozen_drift(Some(&l), &BTreeMap::new());
        assert!(gone[0].contains("no longer"), "{gone:?}");
        // a shipped key is named as what it is, not as a [providers] handle
        let key = crate::shipped_key("skill s", "./p");
        let shipped = BTreeMap::from([(key.clone(), ("path ./p".to_string(), H.to_string()))]);
        let d = frozen_drift(Some(&Lock::default()), &shipped);
        assert_eq!(
            d,
            [format!(
                "the shipped provider `{key}` is not pinned in {LOCK_FILE}"
            )]
        );
        let mut pinned = Lock::default();
        pinned.providers.insert(
            key.clone(),
            LockEntry {
                source: "path ./p".into(),
                resolved: "/s/p".into(),
                sha256: H.into(),
            },
        );
        let d = frozen_drift(Some(&pinned), &BTreeMap::new());
        assert!(
            d[0].contains("which no accepted contributed group ships any more"),
            "{d:?}"
        );
    }

    #[test]
    fn grants_that_reach_the_install_dir_are_found() {
        let m = |caps: &str| {
            parse_manifest(
                &format!("[agent]\nname = \"a\"\n[tools]\nwrite_file = \"builtin\"\nbash = \"builtin\"\nread_file = \"builtin\"\napply_patch = \"builtin\"\nundo = \"builtin\"\n[capabilities]\n{caps}"),
                "agent.toml",
                &BTreeMap::new(),
            )
            .unwrap()
        };
        let ctx = PathCtx::new("/m", None);
        let protected = vec![
            "/m/.loom/providers".to_string(),
            "/m/.loom/lock.toml".to_string(),
        ];
        let check = |caps: &str| {
            let man = m(caps);
            let grants = tool_grants(&man, &man.effective_ceiling(&ctx));
            install_writable(&grants, &ctx, &protected)
        };
        // the cwd (= the manifest's directory) contains .loom
        let w = check("write_file = { paths = [\"./\"] }");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].message.contains("[capabilities].write_file"));
        assert_eq!(
            check("bash = { commands = \"*\", paths = [\"./.loom/providers/notes\"] }").len(),
            1
        );
        assert_eq!(check("bash = { commands = \"*\", paths = \"*\" }").len(), 2);
        // every file tool that writes counts, not only write_file
        assert_eq!(check("apply_patch = { paths = [\"./\"] }").len(), 2);
        assert_eq!(check("undo = { paths = [\"./.loom\"] }").len(), 2);
        // elsewhere, and reading, is fine
        assert!(check("write_file = { paths = [\"./src\"] }").is_empty());
        assert!(check("read_file = { paths = [\"./\"] }").is_empty());
        assert!(
            check("bash = { commands = \"*\", paths = [\"./src\"], read_paths = [\"./\"] }")
                .is_empty()
        );
    }
}
