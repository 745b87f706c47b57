//! `loom install`: materialise every `[providers]` source into `.loom/providers/<handle>/` next to the manifest, and
//! every source an accepted contributed group ships into `.loom/providers/<key>/` (the kernel's `shipped_key`; a
//! path source resolves against the group's folder and must stay inside it), and pin them in `.loom/lock.toml`. Everything is staged first (in `.loom/.staging-<pid>/`); only when every source
//! materialised does loom swap the new trees in (rename) and write the lock (temp file + rename). A failure leaves the
//! previous install and lock as they were. `--frozen` materialises too, and refuses (writing nothing) when anything
//! differs from the lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use loom_kernel::{
    frozen_drift, root_handle_problem, shipped_path_problem, Lock, LockEntry, Manifest, Source,
    INSTALL_DIR, LOCK_FILE,
};
use serde_json::Value as Json;

use super::tree::{copy_tree, remove_tree, tree_hash};
use loom_kernel::ShippedSource;

use super::{read_lock, sources};

/// How `loom install` runs.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// Fail on any drift from the lock, writing nothing.
    pub frozen: bool,
    /// loom's environment (`HOME` for `~/` paths; `PATH` for npm and git).
    pub env: BTreeMap<String, String>,
    /// The sources accepted contributed groups ship ([`super::shipped_sources`]); installed beside the root
    /// handles. An install of a key not listed here or in `[providers]` is removed.
    pub shipped: Vec<ShippedSource>,
}

/// One installed provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The handle (a root `[providers]` handle, or a shipped key).
    pub handle: String,
    /// For a shipped key: which group ships what (`skill echo-notes ships ./provider (path ./provider)`).
    pub shipped_by: Option<String>,
    /// The pinned entry.
    pub entry: LockEntry,
    /// True when the pinned tree differs from what was installed before.
    pub changed: bool,
}

/// Why `loom install` installed nothing (it never leaves a partial install behind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// `--frozen`, and the lock file cannot be read.
    #[error("{0}")]
    Lock(String),
    /// A `[providers]` handle cannot name an install directory.
    #[error("{0}")]
    Handle(String),
    /// A source could not be fetched, built or hashed.
    #[error("{subject}: {why}; nothing was changed")]
    Source {
        /// The provider (`[providers].fs (npm @x/fs)`, or the group that ships it).
        subject: String,
        /// What failed.
        why: String,
    },
    /// `--frozen`, and the fresh trees differ from the lock.
    #[error(
        "--frozen: the providers drifted from {LOCK_FILE}, so nothing was written:\n  {}\nrun `loom install` \
         without --frozen to re-pin them, review the change, and commit {LOCK_FILE}",
        .0.join("\n  ")
    )]
    Drift(Vec<String>),
    /// The installs or the lock could not be written.
    #[error("{0}")]
    Write(String),
}

/// Installs every source provider of `m` (the manifest in `manifest_dir`).
pub fn install(
    manifest_dir: &Path,
    m: &Manifest,
    opts: &InstallOptions,
) -> Result<Vec<Installed>, InstallError> {
    let dot = manifest_dir.join(".loom");
    let created_dot = !dot.exists();
    let staging = dot.join(format!(".staging-{}", std::process::id()));
    let cleanup = || {
        remove_tree(&staging);
        if created_dot {
            let _ = std::fs::remove_dir(&dot);
        }
    };
    let old_lock = match read_lock(manifest_dir) {
        Ok(l) => l,
        Err(e) if opts.frozen => return Err(InstallError::Lock(e)),
        // a damaged lock is rewritten by a normal install
        Err(_) => None,
    };
    let roots = sources(m);
    if let Some(why) = roots.keys().find_map(|h| root_handle_problem(h)) {
        return Err(InstallError::Handle(why));
    }
    // what to materialise: key -> (source, where it comes from, the folder it must stay inside, who ships it)
    let mut srcs: BTreeMap<String, Target<'_>> = roots
        .iter()
        .map(|(h, source)| {
            let t = Target {
                source,
                base: manifest_dir,
                confine: None,
                subject: format!("[providers].{h} ({})", source.describe()),
            };
            (h.clone(), t)
        })
        .collect();
    for s in &opts.shipped {
        srcs.entry(s.key.clone()).or_insert_with(|| Target {
            source: &s.source,
            base: &s.dir,
            confine: Some(&s.dir),
            subject: s.describe(),
        });
    }
    // nothing to install and nothing installed before: nothing to write either (no empty lock, no .loom/)
    let had_installs = old_lock.as_ref().is_some_and(|l| !l.providers.is_empty())
        || manifest_dir.join(INSTALL_DIR).exists();
    if srcs.is_empty() && !had_installs {
        return Ok(Vec::new());
    }
    let mut staged = Vec::new();
    for (handle, t) in &srcs {
        let dst = staging.join(handle);
        let done = materialise(manifest_dir, t, &dst, &staging, &opts.env)
            .and_then(|resolved| Ok((resolved, tree_hash(&dst)?)));
        match done {
            Ok((resolved, sha256)) => staged.push((
                handle.clone(),
                LockEntry {
                    source: t.source.describe(),
                    resolved,
                    sha256,
                },
            )),
            Err(why) => {
                cleanup();
                return Err(InstallError::Source {
                    subject: t.subject.clone(),
                    why,
                });
            }
        }
    }
    if opts.frozen {
        let fresh: BTreeMap<String, (String, String)> = staged
            .iter()
            .map(|(h, e)| (h.clone(), (e.source.clone(), e.sha256.clone())))
            .collect();
        let drift = frozen_drift(old_lock.as_ref(), &fresh);
        if !drift.is_empty() {
            cleanup();
            return Err(InstallError::Drift(drift));
        }
    }
    // commit: swap each staged tree in, then the lock
    let root = manifest_dir.join(INSTALL_DIR);
    std::fs::create_dir_all(&root).map_err(|e| {
        cleanup();
        InstallError::Write(format!("cannot create {}: {e}", root.display()))
    })?;
    let mut out = Vec::new();
    for (handle, entry) in staged {
        let dst = root.join(&handle);
        swap_in(
            &staging.join(&handle),
            &dst,
            &staging.join(format!(".old-{handle}")),
        )
        .map_err(|e| {
            cleanup();
            InstallError::Write(e)
        })?;
        let before = old_lock.as_ref().and_then(|l| l.providers.get(&handle));
        out.push(Installed {
            changed: before.map(|b| b.sha256 != entry.sha256) != Some(false),
            shipped_by: srcs.get(&handle).and_then(Target::shipped_by),
            handle,
            entry,
        });
    }
    remove_tree(&staging);
    // installs of handles the manifest (or an accepted group) no longer has are loom's to remove
    if let Ok(list) = std::fs::read_dir(&root) {
        for item in list.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            if !srcs.contains_key(&name) {
                remove_tree(&item.path());
            }
        }
    }
    if !opts.frozen {
        let lock = Lock {
            providers: out
                .iter()
                .map(|i| (i.handle.clone(), i.entry.clone()))
                .collect(),
        };
        write_atomic(&manifest_dir.join(LOCK_FILE), &lock.render()).map_err(InstallError::Write)?;
    }
    Ok(out)
}

/// Replaces `dst` with `new` by renames; the previous `dst` is parked at `park` and restored if the swap fails.
fn swap_in(new: &Path, dst: &Path, park: &Path) -> Result<(), String> {
    let had = std::fs::symlink_metadata(dst).is_ok();
    if had {
        std::fs::rename(dst, park).map_err(|e| {
            format!(
                "cannot move the previous install {} aside: {e}",
                dst.display()
            )
        })?;
    }
    if let Err(e) = std::fs::rename(new, dst) {
        if had {
            let _ = std::fs::rename(park, dst);
        }
        return Err(format!(
            "cannot move the new install into {}: {e}",
            dst.display()
        ));
    }
    remove_tree(park);
    Ok(())
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename.
fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })
}

/// One source to materialise.
struct Target<'a> {
    /// The source.
    source: &'a Source,
    /// What a relative path resolves against: the manifest's directory, or the shipping group's folder.
    base: &'a Path,
    /// For a shipped source: the group's folder, which a local source must stay inside.
    confine: Option<&'a Path>,
    /// How errors name it (for a shipped source: who ships what).
    subject: String,
}

impl Target<'_> {
    /// For a shipped source: who ships it.
    fn shipped_by(&self) -> Option<String> {
        self.confine.map(|_| self.subject.clone())
    }
}

/// Puts the target's source into the new directory `dst`; returns what it resolved to. `scratch` is for downloads.
fn materialise(
    manifest_dir: &Path,
    t: &Target<'_>,
    dst: &Path,
    scratch: &Path,
    env: &BTreeMap<String, String>,
) -> Result<String, String> {
    // a shipped local source is the group's own code: its canonical path must stay inside the group's folder
    let confined = |written: &str, at: &Path| -> Result<(), String> {
        let Some(dir) = t.confine else {
            return Ok(());
        };
        let (dir, canon) = (dir.canonicalize(), at.canonicalize());
        let (Ok(dir), Ok(canon)) = (dir, canon) else {
            return Err(format!(
                "cannot read the source {written:?} in the folder it ships from"
            ));
        };
        match shipped_path_problem(
            &dir.display().to_string(),
            &canon.display().to_string(),
            written,
        ) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    };
    match t.source {
        Source::Path(p) => {
            let from = local(t.base, p, env);
            confined(p, &from)?;
            let canon = std::fs::canonicalize(&from)
                .map_err(|e| format!("cannot read the source directory {}: {e}", from.display()))?;
            if !canon.is_dir() {
                return Err(format!(
                    "{} is not a directory (a path provider is a directory with a package.json)",
                    canon.display()
                ));
            }
            if manifest_dir
                .canonicalize()
                .is_ok_and(|m| m.join(".loom").starts_with(&canon))
            {
                return Err(format!(
                    "the source {} contains the manifest's .loom directory; point it at the provider's own directory",
                    canon.display()
                ));
            }
            copy_tree(&canon, dst)?;
            Ok(canon.display().to_string())
        }
        Source::Npm { name, version } => {
            let spec = match version {
                Some(v) => format!("{name}@{v}"),
                None => name.clone(),
            };
            let pack = scratch.join(".npm-pack");
            std::fs::create_dir_all(&pack)
                .map_err(|e| format!("cannot create {}: {e}", pack.display()))?;
            let out = run(
                Command::new("npm")
                    .args([
                        "pack",
                        &spec,
                        "--json",
                        "--ignore-scripts",
                        "--pack-destination",
                    ])
                    .arg(&pack)
                    .current_dir(&pack),
                env,
                "npm pack",
            )?;
            let info: Json = serde_json::from_str(&out)
                .map_err(|e| format!("npm pack did not print its JSON summary ({e})"))?;
            let first = &info[0];
            let (Some(file), Some(pname), Some(pversion)) = (
                first["filename"].as_str(),
                first["name"].as_str(),
                first["version"].as_str(),
            ) else {
                return Err("npm pack's summary names no filename, name and version".into());
            };
            std::fs::create_dir_all(dst)
                .map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
            run(
                Command::new("tar")
                    .args(["-xzf"])
                    .arg(pack.join(file))
                    .args(["--strip-components=1", "--no-same-owner", "-C"])
                    .arg(dst),
                env,
                "tar",
            )?;
            remove_tree(&pack);
            let pj: Json = std::fs::read_to_string(dst.join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Json::Null);
            if pj["dependencies"]
                .as_object()
                .is_some_and(|d| !d.is_empty())
            {
                run(
                    Command::new("npm")
                        .args([
                            "install",
                            "--omit=dev",
                            "--ignore-scripts",
                            "--no-audit",
                            "--no-fund",
                            "--no-package-lock",
                        ])
                        .current_dir(dst),
                    env,
                    "npm install",
                )?;
            }
            Ok(format!("{pname}@{pversion}"))
        }
        Source::Git { url, rev } => {
            let url = if url.starts_with("./") || url.starts_with("../") {
                let at = local(t.base, url, env);
                confined(url, &at)?;
                at.display().to_string()
            } else if t.confine.is_some()
                && (url.starts_with('/') || url.starts_with('~') || url.starts_with("file:"))
            {
                return Err(format!(
                    "the git source {url:?} is a local repository outside the folder it ships from; a shipped git \
                     source is a remote URL or a ./ path inside the skill's folder"
                ));
            } else {
                url.clone()
            };
            run(
                Command::new("git")
                    .args(["clone", "--quiet", "--", &url])
                    .arg(dst),
                env,
                "git clone",
            )?;
            if let Some(rev) = rev {
                run(
                    Command::new("git")
                        .args([
                            "-c",
                            "advice.detachedHead=false",
                            "checkout",
                            "--quiet",
                            rev,
                            "--",
                        ])
                        .current_dir(dst),
                    env,
                    "git checkout",
                )?;
            }
            let head = run(
                Command::new("git")
                    .args(["rev-parse", "HEAD"])
                    .current_dir(dst),
                env,
                "git rev-parse",
            )?;
            remove_tree(&dst.join(".git"));
            Ok(head.trim().to_string())
        }
    }
}

/// A `./`, `../`, `~/` or absolute path, made absolute against `base` (the manifest's or the shipping group's folder).
pub(crate) fn local(base: &Path, p: &str, env: &BTreeMap<String, String>) -> PathBuf {
    match p.strip_prefix("~/") {
        Some(rest) => PathBuf::from(env.get("HOME").map(String::as_str).unwrap_or("/")).join(rest),
        None => base.join(p),
    }
}

/// Runs a tool with loom's PATH and HOME (nothing secret), no terminal prompts; its stdout, or an error quoting the
/// end of its stderr.
fn run(cmd: &mut Command, env: &BTreeMap<String, String>, what: &str) -> Result<String, String> {
    cmd.env_clear()
        .envs(crate::mcp::inherited_env(env))
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err
            .trim()
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(format!("{what} failed ({}): {tail}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
