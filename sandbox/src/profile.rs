//! `Profile`: the plain-data description of one sandbox, built from a bash grant row by a pure function.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use loom_kernel::{PathCtx, Row, Value};

use crate::env::EnvPolicy;
use crate::sweep::Watched;

/// System directories exposed read-only in every sandbox (when the host has them).
pub const SYSTEM_DIRS: [&str; 10] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
];

pub use loom_kernel::PROTECTED_NAMES;

/// What stays read-only inside a `.git` directory that a grant names as a writable root of its own
/// (`paths = ["./", "./.git"]`, the opt-in that lets commands commit): the files through which git runs code or
/// finds another repository's configuration. One that does not exist yet cannot be held back (see SECURITY.md).
pub const GIT_AUTORUN: [&str; 6] = [
    "hooks",
    "config",
    "config.worktree",
    "commondir",
    "info",
    "modules",
];

/// How many entries of a writable root are looked at for a nested repository (`<root>/<dir>/.git`).
pub const NESTED_GIT_SCAN: usize = 4096;

/// Resource limits applied to the sandboxed process tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_NPROC` (processes of the user; not enforced by the kernel for uid 0).
    pub max_procs: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes.
    pub max_file_size: Option<u64>,
    /// Wall-clock limit; the whole tree is killed when it passes.
    pub timeout: Option<Duration>,
    /// What the manifest accepts the sandbox may lack (`[sandbox] accept`); tier B refuses any other gap.
    pub accept: Vec<loom_kernel::AcceptedGap>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_procs: Some(4096),
            max_file_size: Some(16 << 30),
            timeout: None,
            accept: Vec::new(),
        }
    }
}

/// A host system directory and, when it is a symlink (`/bin -> usr/bin`), its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemDir {
    /// Absolute path.
    pub path: PathBuf,
    /// The link text when the path is a symlink.
    pub symlink: Option<PathBuf>,
}

/// Everything a backend needs to confine one command. Plain data: building it touches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The grant row this profile was built from, as TOML (for messages).
    pub grant: String,
    /// Roots readable (and executable) but not writable, canonical and sorted.
    pub readable: Vec<PathBuf>,
    /// Roots readable and writable, canonical and sorted.
    pub writable: Vec<PathBuf>,
    /// Existing paths inside writable roots that stay read-only.
    pub protected: Vec<PathBuf>,
    /// Existing secret stores inside any root: hidden behind an empty read-only file (`/dev/null`).
    pub masked: Vec<PathBuf>,
    /// Protected paths inside writable roots that do not exist yet: the view cannot bind them read-only, so when the
    /// command has ended, whatever it created there is moved aside ([`crate::sweep_created`]).
    pub absent: Vec<Watched>,
    /// Directories between a writable root and a protected path (such as `.git`), bound onto themselves so they
    /// are mount points that cannot be renamed away (which would let a command plant a fresh `.git/hooks`).
    pub pinned: Vec<PathBuf>,
    /// Host system directories exposed read-only.
    pub system: Vec<SystemDir>,
    /// Whether the network is granted (`network = "*"`).
    pub network: bool,
    /// Which environment variables reach the command.
    pub env: EnvPolicy,
    /// Resource limits.
    pub limits: Limits,
    /// Working directory of the command (inside the view; `/` when no root holds the requested one).
    pub cwd: PathBuf,
    /// The home directory (masked by an empty private directory unless a root holds it).
    pub home: Option<PathBuf>,
}

impl Profile {
    /// All roots with their writability, sorted by path.
    pub fn roots(&self) -> Vec<(&Path, bool)> {
        let mut all: Vec<(&Path, bool)> = self
            .readable
            .iter()
            .map(|p| (p.as_path(), false))
            .chain(self.writable.iter().map(|p| (p.as_path(), true)))
            .collect();
        all.sort();
        all
    }

    /// True when `p` lies at or below some root.
    pub fn in_root(&self, p: &Path) -> bool {
        self.readable
            .iter()
            .chain(&self.writable)
            .any(|r| p.starts_with(r))
    }
}

/// What a path is on the host, as far as building a profile cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file (or anything else that is not a directory or a symlink).
    File,
    /// A symlink with its link text.
    Symlink(PathBuf),
}

/// At most this many entries are listed by [`Facts::list`].
pub const LIST_LIMIT: usize = NESTED_GIT_SCAN;

/// Facts about the host that building a profile needs. The host implementation reads the filesystem
/// ([`crate::HostFs`]); tests pass a table.
pub trait Facts {
    /// What `path` is, without following a final symlink; `None` when it does not exist.
    fn entry(&self, path: &Path) -> Option<Entry>;
    /// The canonical form of `path` (every symlink resolved); `None` when it does not exist.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
    /// The names of the directories directly inside `dir` (not following symlinks), at most `LIST_LIMIT`.
    fn subdirs(&self, dir: &Path) -> Vec<PathBuf>;
}

/// Why a profile could not be built. Each message names the grant and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// A kind the sandbox cannot enforce.
    #[error("grant {grant}: kind `{kind}` cannot be enforced by the sandbox; remove it (bash understands commands, paths, read_paths, network and env)")]
    UnknownKind {
        /// The grant row.
        grant: String,
        /// The kind.
        kind: String,
    },
    /// A kind with a value of the wrong shape.
    #[error("grant {grant}: `{kind}` {reason}")]
    BadValue {
        /// The grant row.
        grant: String,
        /// The kind.
        kind: String,
        /// Why, with the expected shape.
        reason: String,
    },
    /// A root that does not exist.
    #[error(
        "grant {grant}: {kind} root {path} does not exist; create it or remove it from the grant"
    )]
    MissingRoot {
        /// The grant row.
        grant: String,
        /// `paths` or `read_paths`.
        kind: String,
        /// The normalised root.
        path: PathBuf,
    },
    /// A root that is, or goes through, a symlink.
    #[error("grant {grant}: {kind} root {path} is or passes through a symlink (to {target}); a symlink could be re-pointed to widen the grant, so write the real path {target} instead")]
    SymlinkRoot {
        /// The grant row.
        grant: String,
        /// `paths` or `read_paths`.
        kind: String,
        /// The root as written (normalised).
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
    },
    /// A protected path inside a writable root that is a symlink.
    #[error("grant {grant}: {path} is a symlink inside writable root {root}; loom keeps it read-only but cannot protect what a symlink points at, so replace it with the real file or directory (or grant the root read-only with read_paths)")]
    SymlinkProtected {
        /// The grant row.
        grant: String,
        /// The writable root.
        root: PathBuf,
        /// The protected path.
        path: PathBuf,
    },
    /// A secret store inside a root that is not a regular file, so it cannot be masked.
    #[error("grant {grant}: {path} is a secret store inside a root of this grant but not a regular file, so loom cannot hide it from the command; make it a regular file or move it out of the grant")]
    UnmaskableSecret {
        /// The grant row.
        grant: String,
        /// The secret store.
        path: PathBuf,
    },
    /// A `~` path with no home directory to expand to.
    #[error("grant {grant}: {kind} root {raw} starts with ~ but HOME is not set; set HOME or write an absolute path")]
    NoHome {
        /// The grant row.
        grant: String,
        /// `paths` or `read_paths`.
        kind: String,
        /// The root as written.
        raw: String,
    },
}

/// The host facts about the environment the profile is built in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    /// The requested working directory, canonical.
    pub cwd: PathBuf,
    /// The home directory, if known.
    pub home: Option<PathBuf>,
    /// The agent's authority files, as the sandbox enforces them.
    pub authority: AuthorityPaths,
}

/// The agent's authority files (`loom_kernel::Authority`) as the sandbox enforces them, canonical paths.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorityPaths {
    /// Every authority file: each one inside a writable root stays read-only in the view.
    pub protect: Vec<PathBuf>,
    /// The secret stores: each one inside any root is masked, so a command reads nothing from it.
    pub mask: Vec<PathBuf>,
}

/// Builds the profile for one bash grant row. Relative roots resolve against `ctx.base`; `~` against `ctx.home`.
///
/// An absent `paths` grants no filesystem root (fail closed): only the system directories stay readable.
pub fn build_profile(
    row: &Row,
    ctx: &PathCtx,
    place: &Place,
    limits: Limits,
    facts: &dyn Facts,
) -> Result<Profile, ProfileError> {
    let grant = row.to_toml();
    // what the row alone rules out is the kernel's decision, the one audit and boot report too
    if let Some(r) = loom_kernel::sandbox_row_refusal(row) {
        return Err(if r.unknown {
            ProfileError::UnknownKind {
                grant,
                kind: r.kind,
            }
        } else {
            ProfileError::BadValue {
                grant,
                kind: r.kind,
                reason: r.reason,
            }
        });
    }
    let mut writable = roots(row, "paths", ctx, facts, &grant)?;
    let mut readable = roots(row, "read_paths", ctx, facts, &grant)?;
    // a writable root at or below an authority file (a skill root, `.loom`, loom's data directory) stays read-only:
    // the file tools refuse every write there, and the view agrees
    let (inside, kept): (Vec<PathBuf>, Vec<PathBuf>) = writable
        .into_iter()
        .partition(|w| place.authority.protect.iter().any(|p| w.starts_with(p)));
    writable = kept;
    readable.extend(inside);
    readable.sort();
    // A read root inside a writable root adds nothing.
    readable.retain(|r| !writable.iter().any(|w| r.starts_with(w)));
    let network = network(row.get("network"), &grant)?;
    let env = EnvPolicy::from_value(row.get("env")).map_err(|reason| ProfileError::BadValue {
        grant: grant.clone(),
        kind: "env".into(),
        reason: reason.to_string(),
    })?;
    let explicit_git = explicit_git_roots(row, "paths", ctx);
    let mut protected = BTreeSet::new();
    let mut pinned = BTreeSet::new();
    let mut masked = BTreeSet::new();
    let mut absent = BTreeSet::new();
    for root in &writable {
        let mut candidates: Vec<PathBuf> = Vec::new();
        let names_under = |base: &Path, out: &mut Vec<PathBuf>| {
            for n in PROTECTED_NAMES {
                let c = base.join(n);
                if n == ".git" && explicit_git.contains(&c) {
                    out.extend(GIT_AUTORUN.iter().map(|g| c.join(g)));
                } else {
                    out.push(c);
                }
            }
        };
        names_under(root, &mut candidates);
        if root.file_name().is_some_and(|n| n == ".git") {
            candidates.extend(GIT_AUTORUN.iter().map(|g| root.join(g)));
        }
        // a repository one level down (`<root>/<dir>/.git`), so renaming a nested repository away and planting a
        // fresh one with hooks fails the same way as at the top
        for sub in facts.subdirs(root) {
            let git = sub.join(".git");
            if explicit_git.contains(&git) {
                candidates.extend(GIT_AUTORUN.iter().map(|g| git.join(g)));
            } else {
                candidates.push(git);
            }
        }
        if let Some(home) = &place.home {
            if home.starts_with(root) && home != root {
                names_under(home, &mut candidates);
            }
        }
        candidates.extend(
            place
                .authority
                .protect
                .iter()
                .chain(&place.authority.mask)
                .filter(|p| p.starts_with(root))
                .cloned(),
        );
        for c in candidates {
            match facts.entry(&c) {
                None => {
                    if let Some(w) = watch_absent(root, &c, &writable, facts, &grant)? {
                        absent.insert(w);
                    }
                }
                Some(Entry::Symlink(_)) => {
                    return Err(ProfileError::SymlinkProtected {
                        grant,
                        root: root.clone(),
                        path: c,
                    })
                }
                Some(_) => {
                    let mut up = c.parent();
                    while let Some(a) = up.filter(|a| a.starts_with(root) && *a != root.as_path()) {
                        match facts.entry(a) {
                            Some(Entry::Dir) => {
                                pinned.insert(a.to_path_buf());
                            }
                            _ => {
                                return Err(ProfileError::SymlinkProtected {
                                    grant,
                                    root: root.clone(),
                                    path: a.to_path_buf(),
                                })
                            }
                        }
                        up = a.parent();
                    }
                    if !place.authority.mask.contains(&c) {
                        protected.insert(c);
                    }
                }
            }
        }
    }
    // secret stores inside any root, readable ones too, are masked
    for m in &place.authority.mask {
        if !writable.iter().chain(&readable).any(|r| m.starts_with(r)) {
            continue;
        }
        match facts.entry(m) {
            None => {}
            Some(Entry::File) => {
                masked.insert(m.clone());
            }
            Some(_) => {
                return Err(ProfileError::UnmaskableSecret {
                    grant,
                    path: m.clone(),
                })
            }
        }
    }
    // nothing protected may hide below a masked file, and a protected path inside a masked one is moot
    protected.retain(|p| !masked.iter().any(|m| p.starts_with(m)));
    // a protected directory is a read-only mount point already, which pins it too; binding it twice would hand bwrap
    // its descriptor twice, and bwrap closes a descriptor once it has used it
    pinned.retain(|p| !protected.contains(p));
    let system: Vec<SystemDir> = SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .filter_map(|p| match facts.entry(&p) {
            Some(Entry::Dir) => Some(SystemDir {
                path: p,
                symlink: None,
            }),
            Some(Entry::Symlink(t)) => Some(SystemDir {
                path: p,
                symlink: Some(t),
            }),
            _ => None,
        })
        .collect();
    let mut system: Vec<SystemDir> = system;
    if network {
        // systemd-resolved hosts link /etc/resolv.conf into /run, which the view replaces with a private tmpfs:
        // expose just the resolver's directory, read-only, so DNS works when the network is granted.
        let resolv = Path::new("/etc/resolv.conf");
        if let (Some(Entry::Symlink(_)), Some(target)) =
            (facts.entry(resolv), facts.canonical(resolv))
        {
            if let Some(dir) = target
                .parent()
                .filter(|d| d.starts_with("/run") && *d != Path::new("/run"))
            {
                system.push(SystemDir {
                    path: dir.to_path_buf(),
                    symlink: None,
                });
            }
        }
    }
    let mut profile = Profile {
        grant,
        readable,
        writable,
        protected: protected.into_iter().collect(),
        masked: masked.into_iter().collect(),
        absent: absent.into_iter().collect(),
        pinned: pinned.into_iter().collect(),
        system,
        network,
        env,
        limits,
        cwd: PathBuf::from("/"),
        home: place.home.clone(),
    };
    if profile.in_root(&place.cwd) {
        profile.cwd = place.cwd.clone();
    }
    Ok(profile)
}

/// A protected path `c` inside writable root `root` that does not exist: what the sweep after the command must look
/// at. The links on the way are the user's and are left alone then; one that leads back into a writable root is
/// refused now, since the command could create the protected path beneath it through its real name. `None` when `c`
/// is not below `root` as plain components.
fn watch_absent(
    root: &Path,
    c: &Path,
    writable: &[PathBuf],
    facts: &dyn Facts,
    grant: &str,
) -> Result<Option<Watched>, ProfileError> {
    let Ok(rel) = c.strip_prefix(root) else {
        return Ok(None);
    };
    if rel.as_os_str().is_empty() || rel.components().any(|p| !matches!(p, Component::Normal(_))) {
        return Ok(None);
    }
    let mut links = Vec::new();
    let mut here = root.to_path_buf();
    let mut prefix = PathBuf::new();
    let parts: Vec<_> = rel.components().collect();
    for part in &parts[..parts.len() - 1] {
        here.push(part);
        prefix.push(part);
        match facts.entry(&here) {
            Some(Entry::Dir) => continue,
            Some(Entry::Symlink(target)) => {
                let into_writable = facts
                    .canonical(&here)
                    .is_some_and(|t| writable.iter().any(|w| t.starts_with(w)));
                if into_writable {
                    return Err(ProfileError::SymlinkProtected {
                        grant: grant.to_string(),
                        root: root.to_path_buf(),
                        path: here,
                    });
                }
                links.push((prefix.clone(), target));
                break;
            }
            // missing, or a file: nothing stands below it now
            _ => break,
        }
    }
    Ok(Some(Watched {
        root: root.to_path_buf(),
        rel: rel.to_path_buf(),
        links,
    }))
}

fn roots(
    row: &Row,
    kind: &str,
    ctx: &PathCtx,
    facts: &dyn Facts,
    grant: &str,
) -> Result<Vec<PathBuf>, ProfileError> {
    let raws: Vec<String> = match row.get(kind) {
        None => return Ok(Vec::new()),
        Some(Value::Star) => vec!["/".into()],
        Some(v) => match v.elements() {
            Some(items) => items
                .into_iter()
                .map(|i| match i {
                    Value::Str(s) => Ok(s.clone()),
                    other => Err(ProfileError::BadValue {
                        grant: grant.into(),
                        kind: kind.into(),
                        reason: format!(
                            "holds {}; write a list of path strings such as [\"./\"] or \"*\"",
                            other.to_toml()
                        ),
                    }),
                })
                .collect::<Result<_, _>>()?,
            None => {
                return Err(ProfileError::BadValue {
                    grant: grant.into(),
                    kind: kind.into(),
                    reason: "must be a list of paths such as [\"./\"] or \"*\"".into(),
                })
            }
        },
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for raw in raws {
        let norm = ctx.normalize(&raw);
        if norm.starts_with('~') {
            return Err(ProfileError::NoHome {
                grant: grant.into(),
                kind: kind.into(),
                raw,
            });
        }
        let path = PathBuf::from(&norm);
        let Some(canon) = facts.canonical(&path) else {
            return Err(ProfileError::MissingRoot {
                grant: grant.into(),
                kind: kind.into(),
                path,
            });
        };
        if canon != path {
            return Err(ProfileError::SymlinkRoot {
                grant: grant.into(),
                kind: kind.into(),
                path,
                target: canon,
            });
        }
        out.push(path);
    }
    out.sort();
    out.dedup();
    // Drop roots nested inside another root of the same kind.
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    Ok(out)
}

/// The `.git` directories a row names as writable roots of their own (normalised): the opt-in that lets confined
/// commands write a repository's metadata (commit), with [`GIT_AUTORUN`] still read-only.
fn explicit_git_roots(row: &Row, kind: &str, ctx: &PathCtx) -> BTreeSet<PathBuf> {
    let Some(v) = row.get(kind) else {
        return BTreeSet::new();
    };
    v.elements()
        .unwrap_or_default()
        .into_iter()
        .filter_map(Value::as_str)
        .map(|raw| PathBuf::from(ctx.normalize(raw)))
        .filter(|p| p.file_name().is_some_and(|n| n == ".git"))
        .collect()
}

fn network(v: Option<&Value>, grant: &str) -> Result<bool, ProfileError> {
    loom_kernel::sandbox_network(v).map_err(|reason| ProfileError::BadValue {
        grant: grant.into(),
        kind: "network".into(),
        reason: reason.to_string(),
    })
}

/// The directories bwrap replaces with an empty private tmpfs (those no grant root holds).
pub fn private_dirs(profile: &Profile) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = vec!["/tmp".into(), "/run".into(), "/var/tmp".into()];
    if let Some(home) = &profile.home {
        dirs.push(home.clone());
    }
    dirs.retain(|d| !profile.in_root(d) && d != Path::new("/"));
    dirs.sort();
    dirs.dedup();
    dirs
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A fake filesystem: path -> entry. Every listed path is canonical unless it passes through a listed symlink.
    #[derive(Default)]
    pub(crate) struct FakeFs(pub BTreeMap<PathBuf, Entry>);

    impl FakeFs {
        pub(crate) fn with(items: &[(&str, Entry)]) -> FakeFs {
            FakeFs(
                items
                    .iter()
                    .map(|(p, e)| (PathBuf::from(p), e.clone()))
                    .collect(),
            )
        }
    }

    impl Facts for FakeFs {
        fn entry(&self, path: &Path) -> Option<Entry> {
            self.0.get(path).cloned()
        }
        fn canonical(&self, path: &Path) -> Option<PathBuf> {
            let mut cur = PathBuf::from("/");
            for c in path.components().skip(1) {
                cur.push(c);
                if let Some(Entry::Symlink(t)) = self.0.get(&cur) {
                    cur = if t.is_absolute() {
                        t.clone()
                    } else {
                        cur.parent().map(|p| p.join(t)).unwrap_or_default()
                    };
                }
            }
            (self.0.contains_key(&cur) || cur == Path::new("/")).then_some(cur)
        }
        fn subdirs(&self, dir: &Path) -> Vec<PathBuf> {
            self.0
                .iter()
                .filter(|(p, e)| p.parent() == Some(dir) && **e == Entry::Dir)
                .map(|(p, _)| p.clone())
                .collect()
        }
    }

    pub(crate) fn row(src: &str) -> Row {
        let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
        let g = loom_kernel::Grant::from_toml(&t["g"]).unwrap();
        g.rows().unwrap()[0].clone()
    }

    pub(crate) fn fs() -> FakeFs {
        FakeFs::with(&[
            ("/usr", Entry::Dir),
            ("/bin", Entry::Symlink("usr/bin".into())),
            ("/etc", Entry::Dir),
            ("/etc/ssl", Entry::Dir),
            ("/work", Entry::Dir),
            ("/work/proj", Entry::Dir),
            ("/work/proj/.git", Entry::Dir),
            ("/work/proj/.git/hooks", Entry::Dir),
            ("/work/proj/.git/config", Entry::File),
            ("/work/proj/.mcp.json", Entry::File),
            ("/work/docs", Entry::Dir),
            ("/work/link", Entry::Symlink("/etc".into())),
            ("/home", Entry::Dir),
            ("/home/u", Entry::Dir),
            ("/home/u/.bashrc", Entry::File),
        ])
    }

    pub(crate) fn place() -> Place {
        Place {
            cwd: "/work/proj".into(),
            home: Some("/home/u".into()),
            ..Place::default()
        }
    }

    pub(crate) fn ctx() -> PathCtx {
        PathCtx::new("/work/proj", Some("/home/u".into()))
    }

    pub(crate) fn build(src: &str) -> Result<Profile, ProfileError> {
        build_profile(&row(src), &ctx(), &place(), Limits::default(), &fs())
    }

    #[test]
    fn writable_root_protects_existing_subpaths() {
        let p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        assert_eq!(p.writable, vec![PathBuf::from("/work/proj")]);
        assert!(p.readable.is_empty());
        // the whole repository metadata is read-only; nothing needs pinning above a protected path at the root
        assert_eq!(
            p.protected,
            vec![
                PathBuf::from("/work/proj/.git"),
                PathBuf::from("/work/proj/.mcp.json"),
            ]
        );
        assert!(p.pinned.is_empty());
        assert!(p.masked.is_empty());
        assert!(!p.network);
        assert_eq!(p.cwd, PathBuf::from("/work/proj"));
        assert_eq!(
            p.system.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
            vec![PathBuf::from("/usr"), "/bin".into(), "/etc".into()]
        );
    }

    #[test]
    fn naming_git_as_a_root_opens_it_but_keeps_hooks_and_config_shut() {
        let p = build(r#"{ commands = "*", paths = ["./", "./.git"] }"#).unwrap();
        assert_eq!(p.writable, vec![PathBuf::from("/work/proj")]);
        assert_eq!(
            p.protected,
            vec![
                PathBuf::from("/work/proj/.git/config"),
                PathBuf::from("/work/proj/.git/hooks"),
                PathBuf::from("/work/proj/.mcp.json"),
            ]
        );
        assert_eq!(p.pinned, vec![PathBuf::from("/work/proj/.git")]);
        // `.git` alone as the root: its hooks and config stay read-only too
        let p = build(r#"{ commands = "*", paths = ["./.git"] }"#).unwrap();
        assert_eq!(
            p.protected,
            vec![
                PathBuf::from("/work/proj/.git/config"),
                PathBuf::from("/work/proj/.git/hooks"),
            ]
        );
    }

    fn with(extra: &[(&str, Entry)]) -> FakeFs {
        let mut f = fs();
        f.0.extend(extra.iter().map(|(p, e)| (PathBuf::from(p), e.clone())));
        f
    }

    #[test]
    fn a_nested_repository_is_read_only_and_its_parent_pinned() {
        let f = with(&[
            ("/work/proj/sub", Entry::Dir),
            ("/work/proj/sub/.git", Entry::Dir),
            ("/work/proj/plain", Entry::Dir),
        ]);
        let p = build_profile(
            &row(r#"{ commands = "*", paths = ["./"] }"#),
            &ctx(),
            &place(),
            Limits::default(),
            &f,
        )
        .unwrap();
        assert!(p.protected.contains(&PathBuf::from("/work/proj/sub/.git")));
        assert_eq!(p.pinned, vec![PathBuf::from("/work/proj/sub")]);
    }

    #[test]
    fn a_protected_directory_holding_another_is_bound_once_not_pinned_too() {
        // `.agents` and the skills root inside it are both protected: `.agents` lies between the root and a protected
        // path, but it is a read-only mount point already; listing it as pinned too gave bwrap its descriptor twice
        let f = with(&[
            ("/work/proj/.agents", Entry::Dir),
            ("/work/proj/.agents/skills", Entry::Dir),
        ]);
        let mut pl = place();
        pl.authority = AuthorityPaths {
            protect: vec![
                "/work/proj/.agents".into(),
                "/work/proj/.agents/skills".into(),
            ],
            mask: vec![],
        };
        let p = build_profile(
            &row(r#"{ commands = "*", paths = ["./"] }"#),
            &ctx(),
            &pl,
            Limits::default(),
            &f,
        )
        .unwrap();
        assert!(p.protected.contains(&PathBuf::from("/work/proj/.agents")));
        assert!(p
            .protected
            .contains(&PathBuf::from("/work/proj/.agents/skills")));
        assert!(
            !p.pinned.contains(&PathBuf::from("/work/proj/.agents")),
            "{:?}",
            p.pinned
        );
    }

    #[test]
    fn authority_files_are_protected_secret_stores_masked_and_roots_inside_them_read_only() {
        let f = with(&[
            ("/work/proj/hooks", Entry::Dir),
            ("/work/proj/hooks/check.sh", Entry::File),
            ("/work/proj/.loom-secrets", Entry::File),
            ("/work/docs/.loom-secrets", Entry::File),
            ("/work/proj/skills", Entry::Dir),
            ("/work/proj/skills/s1", Entry::Dir),
        ]);
        let mut pl = place();
        pl.authority = AuthorityPaths {
            protect: vec![
                "/work/proj/hooks/check.sh".into(),
                "/work/proj/missing.sh".into(),
                "/work/proj/skills".into(),
                "/elsewhere/agent.toml".into(),
            ],
            mask: vec![
                "/work/proj/.loom-secrets".into(),
                "/work/docs/.loom-secrets".into(),
                "/home/u/.config/loom/secrets.toml".into(),
            ],
        };
        let p = build_profile(
            &row(
                r#"{ commands = "*", paths = ["./", "./skills/s1"], read_paths = ["/work/docs"] }"#,
            ),
            &ctx(),
            &pl,
            Limits::default(),
            &f,
        )
        .unwrap();
        assert!(p
            .protected
            .contains(&PathBuf::from("/work/proj/hooks/check.sh")));
        assert!(p.protected.contains(&PathBuf::from("/work/proj/skills")));
        // what does not exist, or lies outside every root, is not in the view's list
        assert!(!p
            .protected
            .iter()
            .any(|x| x.ends_with("missing.sh") || x.starts_with("/elsewhere")));
        assert!(p.pinned.contains(&PathBuf::from("/work/proj/hooks")));
        // secret stores in writable and read-only roots alike are masked, not merely protected
        assert_eq!(
            p.masked,
            vec![
                PathBuf::from("/work/docs/.loom-secrets"),
                PathBuf::from("/work/proj/.loom-secrets"),
            ]
        );
        assert!(!p.protected.iter().any(|x| x.ends_with(".loom-secrets")));
        // a writable root inside an authority directory becomes read-only (the nested root folds into ./ here)
        let p = build_profile(
            &row(r#"{ commands = "*", paths = ["./skills/s1"] }"#),
            &ctx(),
            &pl,
            Limits::default(),
            &f,
        )
        .unwrap();
        assert!(p.writable.is_empty());
        assert_eq!(p.readable, vec![PathBuf::from("/work/proj/skills/s1")]);
        // a secret store that is not a regular file cannot be masked: refused
        let f = with(&[("/work/proj/.loom-secrets", Entry::Dir)]);
        let err = build_profile(
            &row(r#"{ commands = "*", paths = ["./"] }"#),
            &ctx(),
            &pl,
            Limits::default(),
            &f,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn absent_paths_grant_no_root_and_cwd_falls_back_to_slash() {
        let p = build(r#"{ commands = ["ls"] }"#).unwrap();
        assert!(p.writable.is_empty() && p.readable.is_empty());
        assert_eq!(p.cwd, PathBuf::from("/"));
    }

    #[test]
    fn read_paths_are_read_only_and_nested_roots_fold() {
        let p = build(
            r#"{ commands = "*", read_paths = ["/work", "/work/docs"], paths = ["/work/proj"] }"#,
        )
        .unwrap();
        assert_eq!(p.readable, vec![PathBuf::from("/work")]);
        assert_eq!(p.writable, vec![PathBuf::from("/work/proj")]);
    }

    #[test]
    fn star_paths_is_the_root_and_home_rc_files_stay_protected() {
        let p = build(r#"{ commands = "*", paths = "*", network = "*" }"#).unwrap();
        assert_eq!(p.writable, vec![PathBuf::from("/")]);
        assert!(p.protected.contains(&PathBuf::from("/home/u/.bashrc")));
        assert!(p.network);
    }

    #[track_caller]
    fn refused(src: &str, needle: &str) {
        let err = build(src).unwrap_err().to_string();
        assert!(err.contains(needle), "{src}: {err}");
        assert!(err.starts_with("grant {"), "{err}");
    }

    #[test]
    fn refusals_name_the_grant_and_the_fix() {
        refused(
            r#"{ commands = "*", paths = ["/nope"] }"#,
            "does not exist; create it",
        );
        refused(
            r#"{ commands = "*", paths = ["/work/link"] }"#,
            "write the real path /etc",
        );
        refused(
            r#"{ commands = "*", paths = ["/work/link/ssl"] }"#,
            "write the real path /etc/ssl",
        );
        refused(
            r#"{ commands = "*", network = ["example.com"] }"#,
            "cannot filter per host",
        );
        refused(
            r#"{ commands = "*", hosts = ["x"] }"#,
            "kind `hosts` cannot be enforced",
        );
        refused(r#"{ commands = "*", paths = [1] }"#, "list of path strings");
        refused(r#"{ commands = "*", env = 3 }"#, "env");
    }

    #[test]
    fn a_resolver_under_run_is_exposed_only_with_the_network() {
        let mut f = fs();
        f.0.insert(
            "/etc/resolv.conf".into(),
            Entry::Symlink("/run/systemd/resolve/stub-resolv.conf".into()),
        );
        f.0.insert("/run".into(), Entry::Dir);
        f.0.insert("/run/systemd".into(), Entry::Dir);
        f.0.insert("/run/systemd/resolve".into(), Entry::Dir);
        f.0.insert("/run/systemd/resolve/stub-resolv.conf".into(), Entry::File);
        let with = |src: &str| {
            build_profile(&row(src), &ctx(), &place(), Limits::default(), &f)
                .unwrap()
                .system
                .iter()
                .any(|s| s.path == Path::new("/run/systemd/resolve"))
        };
        assert!(with(r#"{ commands = "*", network = "*" }"#));
        assert!(!with(r#"{ commands = "*" }"#));
    }

    #[test]
    fn a_symlinked_protected_path_is_refused() {
        let mut f = fs();
        f.0.insert("/work/proj/.loom".into(), Entry::Symlink("/tmp/x".into()));
        let err = build_profile(
            &row(r#"{ commands = "*", paths = ["./"] }"#),
            &ctx(),
            &place(),
            Limits::default(),
            &f,
        )
        .unwrap_err();
        assert!(
            matches!(err, ProfileError::SymlinkProtected { .. }),
            "{err}"
        );
    }

    fn build_on(src: &str, f: &FakeFs) -> Result<Profile, ProfileError> {
        build_profile(&row(src), &ctx(), &place(), Limits::default(), f)
    }

    #[test]
    fn protected_names_that_do_not_exist_are_watched() {
        let p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        let watched: Vec<PathBuf> = p.absent.iter().map(Watched::path).collect();
        for name in [
            ".envrc",
            ".loom",
            ".config/fish",
            ".cargo/config.toml",
            ".vscode",
        ] {
            assert!(
                watched.contains(&Path::new("/work/proj").join(name)),
                "{name}: {watched:?}"
            );
        }
        // what exists is bound read-only instead
        assert!(!watched.contains(&PathBuf::from("/work/proj/.git")));
        assert!(!watched.contains(&PathBuf::from("/work/proj/.mcp.json")));
        assert!(p
            .absent
            .iter()
            .all(|w| w.root == Path::new("/work/proj") && w.links.is_empty()));
        // nothing is watched where nothing is writable
        let p = build(r#"{ commands = "*", read_paths = ["./"] }"#).unwrap();
        assert!(p.absent.is_empty());
        // `.git` one level down, in a directory that exists
        let f = with(&[("/work/proj/plain", Entry::Dir)]);
        let p = build_on(r#"{ commands = "*", paths = ["./"] }"#, &f).unwrap();
        assert!(p.absent.iter().any(|w| w.rel == Path::new("plain/.git")));
    }

    #[test]
    fn a_link_on_the_way_to_a_watched_name_is_the_users_unless_it_leads_into_a_writable_root() {
        let build_with = |target: &str| {
            let mut f = fs();
            f.0.insert("/work/proj/.config".into(), Entry::Symlink(target.into()));
            f.0.insert("/work/proj/conf".into(), Entry::Dir);
            build_on(r#"{ commands = "*", paths = ["./"] }"#, &f)
        };
        // to a directory the command cannot write: nothing can be created beneath it; the link is remembered
        let p = build_with("/etc").unwrap();
        let fish = p
            .absent
            .iter()
            .find(|w| w.rel == Path::new(".config/fish"))
            .unwrap();
        assert_eq!(
            fish.links,
            vec![(PathBuf::from(".config"), PathBuf::from("/etc"))]
        );
        // back into the writable root: the command could write `conf/fish` by its real name
        let err = build_with("conf").unwrap_err();
        assert!(
            matches!(&err, ProfileError::SymlinkProtected { path, .. } if path == Path::new("/work/proj/.config")),
            "{err}"
        );
    }
}
