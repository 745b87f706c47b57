//! Gathering the facts behind the kernel's authority files: which of the paths the manifest names exist (and where,
//! canonically), where a bare hook or server program is found on `PATH`, the skill roots, the secret stores, loom's
//! data directory and its own executables. The kernel decides what is refused ([`loom_kernel::authority_denial`]);
//! the sandbox keeps the same set read-only ([`AuthorityPaths`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loom_kernel::{
    authority_candidates, command_words, guidance_candidates, Authority, AuthorityFile,
    AuthorityKind, HookAction, Manifest, PathCtx, ProviderSpec,
};
use loom_sandbox::AuthorityPaths;
use sha2::{Digest, Sha256};

/// loom's executables, looked up next to the running one.
pub const LOOM_EXECUTABLES: [&str; 4] = ["loom", "loom-sandbox-exec", "loom-shim", "loom-engine"];

/// Where the facts come from.
pub struct AuthorityPlace<'a> {
    /// The manifest's canonical path.
    pub manifest_path: &'a Path,
    /// Its directory.
    pub manifest_dir: &'a Path,
    /// The agent's working directory (canonical): where its project guidance is read from.
    pub cwd: &'a Path,
    /// The process environment (`PATH`, `HOME`, `XDG_*`, `LOOM_DATA_HOME`).
    pub env: &'a BTreeMap<String, String>,
    /// The secrets files the chain reads.
    pub secret_stores: &'a [PathBuf],
    /// loom's data directory.
    pub data_home: &'a Path,
}

/// The authority files of `manifest`, resolved on this host.
pub fn resolve_authority(manifest: &Manifest, place: &AuthorityPlace<'_>) -> Authority {
    let home = place
        .env
        .get("HOME")
        .filter(|h| h.starts_with('/'))
        .cloned();
    let ctx = PathCtx::new(
        place.manifest_dir.to_string_lossy().into_owned(),
        home.clone(),
    );
    let mut files: Vec<AuthorityFile> = Vec::new();
    for c in authority_candidates(manifest, &place.manifest_path.to_string_lossy(), &ctx) {
        let path = Path::new(&c.path);
        let keep = match c.kind {
            // a word of a command line counts when it names a file (never a directory such as `.`, nor a server's
            // data directory); hook words written as paths that do not exist yet are added below
            AuthorityKind::HookProgram | AuthorityKind::ServerProgram => path.is_file(),
            _ => true,
        };
        if keep {
            files.push(AuthorityFile::new(
                resolved(path).to_string_lossy().into_owned(),
                c.kind,
                c.origin,
            ));
        }
    }
    for (origin, line) in program_lines(manifest) {
        // a hook's script that does not exist yet would run once something creates it
        if origin.starts_with("hooks.") {
            for w in command_words(&line).into_iter().filter(|w| w.contains('/')) {
                let p = Path::new(&ctx.normalize(&w)).to_path_buf();
                if !p.exists() {
                    files.push(AuthorityFile::new(
                        resolved(&p).to_string_lossy().into_owned(),
                        AuthorityKind::HookProgram,
                        origin.clone(),
                    ));
                }
            }
        }
        // a bare program name runs from PATH, as `sh -c` finds it
        if let Some(first) = command_words(&line).into_iter().next() {
            if !first.contains('/') {
                if let Some(found) = on_path(&first, place.env.get("PATH").map(String::as_str)) {
                    let kind = if origin.starts_with("hooks.") {
                        AuthorityKind::HookProgram
                    } else {
                        AuthorityKind::ServerProgram
                    };
                    files.push(AuthorityFile::new(
                        found.to_string_lossy().into_owned(),
                        kind,
                        origin,
                    ));
                }
            }
        }
    }
    if let Some(spec) = manifest
        .session
        .layers
        .iter()
        .find(|l| l.provider == "skills")
    {
        let home = home.as_deref().map(Path::new);
        for root in crate::session::skill_roots(&spec.config, place.manifest_dir, home) {
            files.push(AuthorityFile::new(
                resolved(&root).to_string_lossy().into_owned(),
                AuthorityKind::SkillRoot,
                "skills root",
            ));
        }
    }
    for g in guidance_candidates(&place.cwd.to_string_lossy()) {
        files.push(AuthorityFile::new(
            resolved(Path::new(&g.path)).to_string_lossy().into_owned(),
            g.kind,
            g.origin,
        ));
    }
    // project rules (`.loom` is protected as a whole; each rule is listed with where it applies)
    for name in crate::guidance::rule_files(place.cwd) {
        let path = place.cwd.join(loom_kernel::RULES_DIR).join(&name);
        let origin = match std::fs::read_to_string(&path).map(|t| loom_kernel::parse_rule(&t)) {
            Ok(Ok(r)) if r.paths.is_empty() => {
                "project rule: general, in the system prompt each turn".to_string()
            }
            Ok(Ok(r)) => format!(
                "project rule for {}: added to the result of a tool that touches one",
                r.paths.join(", ")
            ),
            Ok(Err(e)) => format!("project rule that does not parse ({e}): left out"),
            Err(e) => format!("project rule that cannot be read ({e}): left out"),
        };
        files.push(AuthorityFile::new(
            resolved(&path).to_string_lossy().into_owned(),
            AuthorityKind::Guidance,
            origin,
        ));
    }
    for s in place.secret_stores {
        files.push(AuthorityFile::new(
            resolved(s).to_string_lossy().into_owned(),
            AuthorityKind::SecretStore,
            "secrets file",
        ));
    }
    files.push(AuthorityFile::new(
        resolved(place.data_home).to_string_lossy().into_owned(),
        AuthorityKind::LoomData,
        "loom's data directory (sessions, approvals, installs, models)",
    ));
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        for name in LOOM_EXECUTABLES {
            let p = dir.join(name);
            if p.is_file() {
                files.push(AuthorityFile::new(
                    p.to_string_lossy().into_owned(),
                    AuthorityKind::LoomHelper,
                    "loom's own executable",
                ));
            }
        }
    }
    Authority::new(files)
}

/// Every hook command and server command line, with where it is written.
fn program_lines(manifest: &Manifest) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for (event, hook) in &manifest.hooks.0 {
        let i = n.entry(event.name()).or_default();
        *i += 1;
        if let HookAction::Command(line) = &hook.action {
            out.push((format!("hooks.{}[{i}]", event.name()), line.clone()));
        }
    }
    for (handle, spec) in &manifest.providers {
        if let ProviderSpec::Configured { factory, config } = spec {
            if factory == "mcp-server" {
                if let Some(c) = config.get("command").and_then(toml::Value::as_str) {
                    out.push((format!("providers.{handle}"), c.to_string()));
                }
            }
        }
    }
    out
}

/// `name` found on `path` as the shell would (absolute directories only: a relative entry would depend on the
/// working directory).
fn on_path(name: &str, path: Option<&str>) -> Option<PathBuf> {
    path?
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .map(|p| resolved(&p))
}

/// The canonical form of `p`, or — when it does not exist — its nearest existing ancestor's canonical form with the
/// rest appended, so a file that does not exist yet is still named where it would be created.
pub fn resolved(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cur = p;
    while let Some(parent) = cur.parent() {
        if let Some(name) = cur.file_name() {
            rest.push(name);
        }
        if let Ok(c) = std::fs::canonicalize(parent) {
            let mut out = c;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return out;
        }
        cur = parent;
    }
    p.to_path_buf()
}

/// The secret stores kept from the agent: every file the chain reads
/// (`secret_store_paths`), and a `.loom-secrets` in the working directory — never read any more,
/// but one written by following older advice holds real keys.
pub fn secret_stores(
    manifest_dir: &Path,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Vec<PathBuf> {
    let mut out = crate::secrets::secret_store_paths(manifest_dir, env);
    let in_cwd = cwd.join(".loom-secrets");
    if !out.contains(&in_cwd) {
        out.push(in_cwd);
    }
    out
}

/// The authority files as the sandbox enforces them.
pub fn sandbox_paths(authority: &Authority) -> AuthorityPaths {
    // a guidance file that is a symlink is never read (loom reads guidance only from a file that was a regular file
    // when the agent started), so there is nothing to protect — and the sandbox cannot protect a link's entry
    let untrusted_links: Vec<String> = authority
        .files()
        .iter()
        .filter(|f| f.kind == AuthorityKind::Guidance)
        .filter(|f| std::fs::symlink_metadata(&f.path).is_ok_and(|m| m.file_type().is_symlink()))
        .map(|f| f.path.clone())
        .collect();
    AuthorityPaths {
        protect: authority
            .protected_paths()
            .into_iter()
            .filter(|p| !untrusted_links.contains(p))
            .map(PathBuf::from)
            .collect(),
        mask: authority
            .masked_paths()
            .into_iter()
            .map(PathBuf::from)
            .collect(),
    }
}

/// The sha-256 of each existing sub-manifest in `authority`, taken at boot: a sub-manifest that differs at spawn is
/// refused (it was not the one audited).
pub fn submanifest_hashes(authority: &Authority) -> BTreeMap<PathBuf, [u8; 32]> {
    authority
        .files()
        .iter()
        .filter(|f| f.kind == AuthorityKind::SubManifest)
        .filter_map(|f| {
            let bytes = std::fs::read(&f.path).ok()?;
            Some((PathBuf::from(&f.path), sha256(&bytes)))
        })
        .collect()
}

/// The sha-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_hook_scripts_path_programs_skill_roots_and_stores() {
        let d = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(dir.join("hooks")).unwrap();
        std::fs::write(dir.join("hooks/check.sh"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/mytool"), "#!/bin/sh\n").unwrap();
        std::fs::write(dir.join("server.mjs"), "").unwrap();
        let text = r#"
            [agent]
            name = "a"
            [harness]
            provider = "test"
            [providers]
            fs = { provider = "mcp-server", command = "node", args = ["./server.mjs", "./data"] }
            [[hooks.PreToolUse]]
            command = "./hooks/check.sh"
            [[hooks.Stop]]
            command = "mytool --done"
            [[hooks.SessionStart]]
            command = "cd . && ./missing.sh"
        "#;
        let m = loom_kernel::parse_manifest(text, "agent.toml", &BTreeMap::new()).unwrap();
        let env = BTreeMap::from([
            (
                "PATH".to_string(),
                format!("{}/bin:/usr/bin", dir.display()),
            ),
            ("HOME".to_string(), dir.join("home").display().to_string()),
        ]);
        let stores = vec![dir.join(".loom-secrets")];
        let a = resolve_authority(
            &m,
            &AuthorityPlace {
                manifest_path: &dir.join("agent.toml"),
                manifest_dir: &dir,
                cwd: &dir,
                env: &env,
                secret_stores: &stores,
                data_home: &dir.join("data"),
            },
        );
        let has = |p: &Path, k: AuthorityKind| {
            a.files()
                .iter()
                .any(|f| Path::new(&f.path) == p && f.kind == k)
        };
        assert!(has(&dir.join("hooks/check.sh"), AuthorityKind::HookProgram));
        assert!(has(&dir.join("bin/mytool"), AuthorityKind::HookProgram));
        assert!(has(&dir.join("missing.sh"), AuthorityKind::HookProgram));
        assert!(has(&dir.join("server.mjs"), AuthorityKind::ServerProgram));
        assert!(has(&dir.join(".loom-secrets"), AuthorityKind::SecretStore));
        assert!(has(&dir.join("data"), AuthorityKind::LoomData));
        assert!(has(&dir.join("agent.toml"), AuthorityKind::Manifest));
        // `.` (a directory) and `./data` (a server's data directory, not its code) are not authority files
        assert!(!a.files().iter().any(|f| Path::new(&f.path) == dir));
        assert!(!has(&dir.join("data"), AuthorityKind::ServerProgram));
        assert_eq!(sandbox_paths(&a).mask, vec![dir.join(".loom-secrets")]);
    }
}
