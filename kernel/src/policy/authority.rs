//! Authority files: the paths whose content decides what loom runs or trusts.
//!
//! The agent is the adversary, also against loom itself. A hook script, an MCP server's program, a sub-manifest, the
//! manifest, a skill folder, `.loom/` (lock, installed providers, approvals), a secrets file, loom's own helper
//! binaries: whoever can rewrite one of them runs code outside every grant, or changes what loom trusts, at the next
//! tool call, restart or spawn. So the kernel computes that set once, from the manifest and the facts the runtime
//! resolved, and every consumer enforces the same set:
//! - the file tools ask [`authority_denial`]: no tool writes an authority file, and no tool reads a secret store;
//! - the sandbox profile keeps each one read-only inside a writable root and masks secret stores even from reads
//!   ([`Authority::protected_paths`], [`Authority::masked_paths`]);
//! - `loom audit` lists each with where it lies in the grants ([`authority_exposure`]).
//!
//! Pure, like the rest of the kernel: [`authority_candidates`] reads only the manifest and returns lexically
//! resolved paths; the runtime keeps the ones that exist (canonicalised) and adds what only it can know (skill roots,
//! secret stores, its own executables), then builds the [`Authority`].

pub use crate::policy::authority_kind::AuthorityKind;

use crate::lattice::algebra::{paths_value_contains, AlgebraKind};
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::{path_within, PathCtx};
use crate::lattice::value::Value;
use crate::manifest::{Manifest, ProviderSpec, Source, SubagentSource};
use crate::policy::decide::{Access, Decision, Denial, DenialKind, Request};
use crate::policy::hooks::HookAction;

/// Names that stay read-only even inside a writable root (and inside the home directory when a writable root holds
/// it): code that git, shells, editors, desktop sessions, package managers and agents run or trust on their own.
/// A repository's `.git` is read-only as a whole. The file tools never write below one of these names anywhere; the
/// sandbox keeps them read-only directly inside each writable root and the home directory (and `.git` one level
/// down).
pub const PROTECTED_NAMES: [&str; 31] = [
    ".git",
    ".loom",
    ".mcp.json",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish",
    ".inputrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".config/autostart",
    ".config/systemd",
    ".config/loom",
    ".local/bin",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".envrc",
    ".vscode",
    ".idea",
    ".claude",
    ".agents",
    ".cargo/config.toml",
];

/// One authority file (or directory: everything below it counts).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuthorityFile {
    /// Absolute, normalised path (canonical once the runtime has resolved it).
    pub path: String,
    /// What it is.
    pub kind: AuthorityKind,
    /// Where it comes from, for messages: `hooks.PreToolUse[1]`, `providers.fs.command`, `skills root`, …
    pub origin: String,
}

impl AuthorityFile {
    /// A file of `kind` at `path`, named by `origin`.
    pub fn new(path: impl Into<String>, kind: AuthorityKind, origin: impl Into<String>) -> Self {
        AuthorityFile {
            path: path.into(),
            kind,
            origin: origin.into(),
        }
    }

    /// True when `path` is this file or lies below it.
    pub fn covers(&self, path: &str) -> bool {
        path_within(&self.path, path)
    }
}

/// The authority files of one agent. Built once at boot; a sub-agent's set includes its parent's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Authority {
    files: Vec<AuthorityFile>,
}

impl Authority {
    /// The set of `files`, sorted, one entry per path and kind.
    pub fn new(files: impl IntoIterator<Item = AuthorityFile>) -> Authority {
        let mut files: Vec<AuthorityFile> = files.into_iter().collect();
        files.sort();
        files.dedup_by(|a, b| a.path == b.path && a.kind == b.kind);
        Authority { files }
    }

    /// Every file, sorted by path.
    pub fn files(&self) -> &[AuthorityFile] {
        &self.files
    }

    /// This set together with `other`'s (a sub-agent keeps its parent's authority files out of reach too).
    pub fn union(&self, other: &Authority) -> Authority {
        Authority::new(self.files.iter().chain(other.files.iter()).cloned())
    }

    /// The first file that covers `path`, secret stores first (the stricter answer).
    pub fn covering(&self, path: &str) -> Option<&AuthorityFile> {
        self.files
            .iter()
            .filter(|f| f.covers(path))
            .max_by_key(|f| (f.kind.is_secret(), std::cmp::Reverse(f.kind)))
    }

    /// Paths no confined command may change: every authority file.
    pub fn protected_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self.files.iter().map(|f| f.path.clone()).collect();
        out.dedup();
        out
    }

    /// Paths no confined command may even read: the secret stores.
    pub fn masked_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.kind.is_secret())
            .map(|f| f.path.clone())
            .collect();
        out.dedup();
        out
    }
}

/// The paths the manifest itself names as code loom runs or trusts, resolved lexically against `manifest_ctx` (the
/// manifest's directory and home). `manifest_path` is the manifest's absolute path. The runtime keeps the entries
/// that exist, canonicalised; for hook and server commands it also resolves a bare program name on `PATH`, as the
/// shell would (see [`command_words`]).
pub fn authority_candidates(
    manifest: &Manifest,
    manifest_path: &str,
    manifest_ctx: &PathCtx,
) -> Vec<AuthorityFile> {
    let mut out = vec![
        AuthorityFile::new(
            manifest_ctx.normalize(manifest_path),
            AuthorityKind::Manifest,
            "the manifest",
        ),
        AuthorityFile::new(
            manifest_ctx.normalize(".loom"),
            AuthorityKind::LoomState,
            ".loom (lock, installed providers, approvals)",
        ),
    ];
    for sub in &manifest.subagents {
        if let SubagentSource::Path(p) = &sub.source {
            out.push(AuthorityFile::new(
                manifest_ctx.normalize(p),
                AuthorityKind::SubManifest,
                format!("sub-manifest of {}", sub.key),
            ));
        }
    }
    let mut per_event: std::collections::BTreeMap<String, usize> = Default::default();
    for (event, hook) in &manifest.hooks.0 {
        let n = per_event.entry(event.name().to_string()).or_default();
        *n += 1;
        if let HookAction::Command(line) = &hook.action {
            for w in command_words(line) {
                out.push(AuthorityFile::new(
                    manifest_ctx.normalize(&w),
                    AuthorityKind::HookProgram,
                    format!("hooks.{}[{n}]", event.name()),
                ));
            }
        }
    }
    for (handle, spec) in &manifest.providers {
        match spec {
            ProviderSpec::Configured { factory, config } if factory == "mcp-server" => {
                let mut words: Vec<String> = Vec::new();
                if let Some(c) = config.get("command").and_then(toml::Value::as_str) {
                    words.extend(command_words(c));
                }
                if let Some(args) = config.get("args").and_then(toml::Value::as_array) {
                    words.extend(
                        args.iter()
                            .filter_map(toml::Value::as_str)
                            .map(String::from),
                    );
                }
                for w in words.iter().filter(|w| looks_like_path(w)) {
                    out.push(AuthorityFile::new(
                        manifest_ctx.normalize(w),
                        AuthorityKind::ServerProgram,
                        format!("providers.{handle}"),
                    ));
                }
            }
            _ => {
                if let Some(Source::Path(p)) = spec.source() {
                    out.push(AuthorityFile::new(
                        manifest_ctx.normalize(p),
                        AuthorityKind::ServerProgram,
                        format!("providers.{handle} (source)"),
                    ));
                }
            }
        }
    }
    out
}

/// The project guidance files loom reads into the system prompt each turn, from the agent's working directory.
pub const GUIDANCE_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The guidance files of an agent working in `cwd` (absolute), whether they exist or not: each is an authority
/// file, so the agent can neither rewrite nor create the instructions it will be given on its next turn.
pub fn guidance_candidates(cwd: &str) -> Vec<AuthorityFile> {
    let ctx = PathCtx::new(cwd, None);
    let mut out: Vec<AuthorityFile> = GUIDANCE_FILES
        .iter()
        .map(|name| {
            AuthorityFile::new(
                ctx.normalize(name),
                AuthorityKind::Guidance,
                "read into the system prompt each turn",
            )
        })
        .collect();
    out.push(AuthorityFile::new(
        ctx.normalize(PROJECT_STATE_DIR),
        AuthorityKind::LoomState,
        ".loom in the working directory (subagent profiles, project rules)",
    ));
    out
}

/// The directory in an agent's working directory that holds what loom trusts from the project: subagent profiles
/// (`.loom/agents`) and project rules (`.loom/rules`).
pub const PROJECT_STATE_DIR: &str = ".loom";

/// The directories loom makes (empty) in `cwd` before an agent that declares a built-in command tool boots, so the
/// sandbox has something to keep read-only: a path that does not exist cannot be bound over, and a confined command
/// could otherwise create `.loom/agents/NAME.md` for the next agent started there. Empty when the manifest declares
/// no command tool (the file tools refuse every protected name on their own).
pub fn dirs_to_make(manifest: &Manifest, cwd: &str) -> Vec<String> {
    let runs_commands = manifest.tools.iter().any(|(instance, entry)| {
        entry.provider == crate::ProviderRef::Builtin
            && crate::lattice::algebra::COMMAND_TOOLS.contains(&manifest.underlying(instance))
    });
    if runs_commands {
        vec![PathCtx::new(cwd, None).normalize(PROJECT_STATE_DIR)]
    } else {
        Vec::new()
    }
}

/// The words of a hook or server command line that may name a file loom would run or read: every word but options
/// (`-x`, `--flag`), assignments (`A=b`) and shell operators, quotes removed. The runtime keeps those that name an
/// existing regular file (a bare name is looked up on `PATH` only for the first word, as the shell does).
pub fn command_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() || ";|&()<>`$".contains(c) => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
        .into_iter()
        .filter(|w| !w.starts_with('-') && !w.contains('=') && !w.contains('*'))
        .collect()
}

/// The first protected name ([`PROTECTED_NAMES`]) that `path` passes through or ends at.
pub fn protected_name_in(path: &str) -> Option<&'static str> {
    PROTECTED_NAMES.iter().copied().find(|name| {
        let mid = format!("/{name}/");
        path.contains(&mid) || path.ends_with(&format!("/{name}"))
    })
}

/// Whether boot must refuse over `created`: a path that a confined command still running beside it (its loom alive)
/// created at a protected name ([`PROTECTED_NAMES`]), when the path lies where the booting agent would trust it —
/// below its working directory `cwd` or its manifest's directory `manifest_dir` (both absolute and canonical), where
/// boot reads guidance, secret stores and `.loom`. One elsewhere is left to that command's own sweep.
pub fn planted_refuses_boot(created: &str, cwd: &str, manifest_dir: &str) -> bool {
    path_within(cwd, created) || path_within(manifest_dir, created)
}

fn looks_like_path(w: &str) -> bool {
    w.contains('/') || w.starts_with('.') || w.starts_with('~')
}

/// The kernel's refusal of a file-tool call that touches an authority file: any write to one (or below one), and
/// any read of a secret store; a write below a protected name ([`PROTECTED_NAMES`]), or to a project guidance file
/// ([`GUIDANCE_FILES`]) in any directory. `None` when the call does not touch the set. The turn loop applies it on
/// top of [`crate::policy::decide`], so a grant can never authorise it.
pub fn authority_denial(tool: &str, request: &Request, authority: &Authority) -> Option<Decision> {
    let Request::File { path, access } = request else {
        return None;
    };
    let deny = |kind| Some(Decision::Deny(Denial::new(tool, request, None, kind)));
    let Some(file) = authority.covering(path) else {
        if *access != Access::Write {
            return None;
        }
        // project guidance in any directory: what loom (and other agents) read as instructions
        if let Some(name) = GUIDANCE_FILES
            .iter()
            .find(|g| path.rsplit('/').next() == Some(**g))
        {
            return deny(DenialKind::ProtectedName { name });
        }
        let name = protected_name_in(path)?;
        return deny(DenialKind::ProtectedName { name });
    };
    match access {
        Access::Write => deny(DenialKind::AuthorityFile {
            kind: file.kind,
            origin: file.origin.clone(),
        }),
        Access::Read if file.kind.is_secret() => deny(DenialKind::SecretStore {
            origin: file.origin.clone(),
        }),
        Access::Read => None,
    }
}

#[cfg(test)]
mod guidance_name_tests {
    use super::*;

    #[test]
    fn a_guidance_file_in_any_directory_is_never_written_but_is_read() {
        let none = Authority::default();
        let req = |p: &str, access| Request::File {
            path: p.into(),
            access,
        };
        for p in ["/w/src/AGENTS.md", "/w/a/b/CLAUDE.md"] {
            assert!(
                authority_denial("t", &req(p, Access::Write), &none).is_some(),
                "{p}"
            );
            assert!(
                authority_denial("t", &req(p, Access::Read), &none).is_none(),
                "{p}"
            );
        }
        for p in ["/w/src/AGENTS.md.bak", "/w/AGENTS/x.md", "/w/notes.md"] {
            assert!(
                authority_denial("t", &req(p, Access::Write), &none).is_none(),
                "{p}"
            );
        }
    }
}

/// How one authority file stands against an agent's grants, for `loom audit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// No grant reaches it.
    Unreached,
    /// Grants reach it and loom keeps it out of their reach: the file tools refuse it, and confined commands see it
    /// read-only (masked, for a secret store). The tools named are those whose grant covers it.
    Protected(Vec<String>),
    /// A grant reaches it that loom cannot hold back (a tool that runs unconfined): the tools named.
    Exposed(Vec<String>),
}

/// Where each authority file stands against `grants` (tool instance, its algebra, its grant), whose relative paths
/// resolve against `ctx`. A bash grant of `"*"` runs unconfined, so everything it could reach is exposed; any other
/// file or bash grant whose paths (or, for a secret store, read paths) cover a file is held back by loom.
pub fn authority_exposure(
    authority: &Authority,
    grants: &[(String, AlgebraKind, Grant)],
    ctx: &PathCtx,
) -> Vec<(AuthorityFile, Exposure)> {
    authority
        .files()
        .iter()
        .map(|f| {
            let mut protected = Vec::new();
            let mut exposed = Vec::new();
            for (tool, kind, grant) in grants {
                match (kind, grant) {
                    (AlgebraKind::Bash, Grant::Unrestricted) => exposed.push(tool.clone()),
                    (AlgebraKind::Bash | AlgebraKind::Files, Grant::Set(rows))
                        if rows
                            .iter()
                            .any(|r| row_reaches(r, &f.path, f.kind.is_secret(), ctx)) =>
                    {
                        protected.push(tool.clone())
                    }
                    (AlgebraKind::Files, Grant::Unrestricted) => protected.push(tool.clone()),
                    _ => {}
                }
            }
            let e = if !exposed.is_empty() {
                Exposure::Exposed(exposed)
            } else if !protected.is_empty() {
                Exposure::Protected(protected)
            } else {
                Exposure::Unreached
            };
            (f.clone(), e)
        })
        .collect()
}

fn row_reaches(row: &Row, path: &str, reads_count: bool, ctx: &PathCtx) -> bool {
    let want = Value::strs([path]);
    let covers = |kind: &str| {
        row.get(kind)
            .is_some_and(|v| paths_value_contains(ctx, v, &want))
    };
    covers("paths") || (reads_count && covers("read_paths"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn manifest(src: &str) -> Manifest {
        crate::parse_manifest(src, "agent.toml", &BTreeMap::new()).unwrap()
    }

    fn ctx() -> PathCtx {
        PathCtx::new("/p", Some("/home/u".into()))
    }

    #[test]
    fn the_project_state_dir_is_made_only_for_an_agent_that_runs_commands() {
        let base = "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\n[session]\nprovider = \"in-memory\"\n";
        let with = |tools: &str| manifest(&format!("{base}[tools]\n{tools}\n"));
        assert_eq!(
            dirs_to_make(&with("bash = \"builtin\""), "/p/w"),
            vec!["/p/w/.loom"]
        );
        assert_eq!(
            dirs_to_make(
                &with("sh = { provider = \"builtin\", tool = \"bash\" }"),
                "/p/w"
            ),
            vec!["/p/w/.loom"]
        );
        assert!(dirs_to_make(&with("read_file = \"builtin\""), "/p/w").is_empty());
        // it is an authority file whether it exists or not
        assert!(guidance_candidates("/p/w")
            .iter()
            .any(|f| f.path == "/p/w/.loom" && f.kind == AuthorityKind::LoomState));
    }

    #[test]
    fn command_words_drop_options_assignments_and_operators() {
        assert_eq!(
            command_words("FOO=1 ./hooks/check.sh --strict -v 'a b' && python3 \"x.py\"|tee log"),
            vec!["./hooks/check.sh", "a b", "python3", "x.py", "tee", "log"]
        );
        assert_eq!(command_words(""), Vec::<String>::new());
    }

    #[test]
    fn candidates_name_manifest_state_hooks_servers_sources_and_submanifests() {
        let m = manifest(
            r#"
            [agent]
            name = "a"
            [harness]
            provider = "test"
            [providers]
            fs = { provider = "mcp-server", command = "node", args = ["./server.mjs", "--port", "1"] }
            notes = "./providers/notes"
            [tools]
            spawn_subagent = { capabilities = { manifest = "./sub/agent.toml" } }
            [[hooks.PreToolUse]]
            command = "./hooks/check.sh --fast"
            "#,
        );
        let c = authority_candidates(&m, "/p/agent.toml", &ctx());
        let got: Vec<(&str, AuthorityKind)> = c.iter().map(|f| (f.path.as_str(), f.kind)).collect();
        for want in [
            ("/p/agent.toml", AuthorityKind::Manifest),
            ("/p/.loom", AuthorityKind::LoomState),
            ("/p/sub/agent.toml", AuthorityKind::SubManifest),
            ("/p/hooks/check.sh", AuthorityKind::HookProgram),
            ("/p/server.mjs", AuthorityKind::ServerProgram),
            ("/p/providers/notes", AuthorityKind::ServerProgram),
        ] {
            assert!(got.contains(&want), "{want:?} missing from {got:?}");
        }
        // a bare server command is a PATH lookup, not a file next to the manifest; `--port` and `1` are not paths
        assert!(!got.iter().any(|(p, _)| *p == "/p/node" || *p == "/p/1"));
        let hook = c
            .iter()
            .find(|f| f.kind == AuthorityKind::HookProgram)
            .unwrap();
        assert_eq!(hook.origin, "hooks.PreToolUse[1]");
    }

    fn set() -> Authority {
        Authority::new([
            AuthorityFile::new("/p/agent.toml", AuthorityKind::Manifest, "the manifest"),
            AuthorityFile::new("/p/.loom", AuthorityKind::LoomState, ".loom"),
            AuthorityFile::new(
                "/p/.loom-secrets",
                AuthorityKind::SecretStore,
                "secrets file",
            ),
        ])
    }

    fn file(path: &str, access: Access) -> Request {
        Request::File {
            path: path.into(),
            access,
        }
    }

    #[test]
    fn writes_to_authority_files_and_reads_of_secret_stores_are_refused() {
        let a = set();
        let deny = |r: &Request| authority_denial("write_file", r, &a);
        let Some(Decision::Deny(d)) = deny(&file("/p/agent.toml", Access::Write)) else {
            panic!("manifest write allowed")
        };
        assert!(
            d.to_string().contains("authority file (manifest"),
            "{}",
            d.to_string()
        );
        assert!(deny(&file("/p/.loom/lock.toml", Access::Write)).is_some());
        assert!(deny(&file("/p/.loom-secrets", Access::Read)).is_some());
        assert!(deny(&file("/p/.loom-secrets", Access::Write)).is_some());
        // controls: reading the manifest is fine, and so are neighbours that merely share a prefix
        assert!(deny(&file("/p/agent.toml", Access::Read)).is_none());
        assert!(deny(&file("/p/.loomx", Access::Write)).is_none());
        assert!(deny(&file("/p/agent.toml.bak", Access::Write)).is_none());
        assert!(deny(&file("/p/src/main.rs", Access::Write)).is_none());
        assert!(authority_denial("bash", &Request::Args(Row::default()), &a).is_none());
        // protected names anywhere in the path: a repository's metadata, shell start-up files, editor tasks
        for p in [
            "/w/.git/config",
            "/w/sub/.git/commondir",
            "/home/u/.bashrc",
            "/w/.vscode/tasks.json",
            "/w/.git",
        ] {
            assert!(deny(&file(p, Access::Write)).is_some(), "{p}");
            assert!(deny(&file(p, Access::Read)).is_none(), "{p}");
        }
        for p in [
            "/w/.gitignore",
            "/w/x.git/y",
            "/w/.github/workflows/ci.yml",
            "/w/my.bashrc",
        ] {
            assert!(deny(&file(p, Access::Write)).is_none(), "{p}");
        }
    }

    #[test]
    fn a_planted_name_refuses_boot_only_where_the_agent_would_trust_it() {
        let refuses = |p| planted_refuses_boot(p, "/w/proj", "/etc/agents");
        assert!(refuses("/w/proj/.envrc"));
        assert!(refuses("/w/proj/sub/AGENTS.md"));
        assert!(refuses("/etc/agents/.loom-secrets"));
        // a sibling sharing a prefix, a parent, or anywhere else is the running command's own sweep's
        assert!(!refuses("/w/project2/.envrc"));
        assert!(!refuses("/w/.envrc"));
        assert!(!refuses("/tmp/x/AGENTS.md"));
        // a working directory of `/` trusts everything
        assert!(planted_refuses_boot("/tmp/x/AGENTS.md", "/", "/etc/agents"));
    }

    #[test]
    fn masked_paths_are_the_secret_stores_and_union_keeps_both_sets() {
        let a = set();
        assert_eq!(a.masked_paths(), vec!["/p/.loom-secrets"]);
        assert_eq!(a.protected_paths().len(), 3);
        let parent = Authority::new([AuthorityFile::new(
            "/q/hooks/x.sh",
            AuthorityKind::HookProgram,
            "hooks.Stop[1]",
        )]);
        assert_eq!(a.union(&parent).files().len(), 4);
    }

    #[test]
    fn exposure_separates_unreached_protected_and_unconfined() {
        let a = set();
        let g = |src: &str| {
            let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
            Grant::from_toml(&t["g"]).unwrap()
        };
        let grants = vec![
            (
                "read_file".to_string(),
                AlgebraKind::Files,
                g(r#"{ read_paths = ["./"] }"#),
            ),
            (
                "write_file".to_string(),
                AlgebraKind::Files,
                g(r#"{ paths = ["./src"] }"#),
            ),
        ];
        let ex = authority_exposure(&a, &grants, &ctx());
        let of = |p: &str| ex.iter().find(|(f, _)| f.path == p).unwrap().1.clone();
        // read_file reaches the secret store (read counts), not the manifest (only writes count there)
        assert_eq!(
            of("/p/.loom-secrets"),
            Exposure::Protected(vec!["read_file".into()])
        );
        assert_eq!(of("/p/agent.toml"), Exposure::Unreached);
        let mut grants = grants;
        grants.push(("bash".into(), AlgebraKind::Bash, Grant::Unrestricted));
        let ex = authority_exposure(&a, &grants, &ctx());
        assert!(ex
            .iter()
            .all(|(_, e)| matches!(e, Exposure::Exposed(t) if t == &["bash"])));
    }
}
