//! What an authority file is to loom: a leaf both the authority set and the kernel's denials name.

use std::fmt;

/// What an authority file is to loom. Ordered by how directly it runs code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AuthorityKind {
    /// The manifest itself (`agent.toml`).
    Manifest,
    /// A sub-agent's manifest, loaded at spawn.
    SubManifest,
    /// A program or script a hook command names (hooks run unconfined).
    HookProgram,
    /// A program or script an MCP server / provider runs (unconfined), or a local provider source.
    ServerProgram,
    /// A skill root or skill folder: trusted instructions and contributed tools.
    SkillRoot,
    /// Project guidance (`AGENTS.md`, `CLAUDE.md` in the working directory): read into the system prompt each turn.
    Guidance,
    /// `.loom/` next to the manifest: the lock, installed providers, approvals.
    LoomState,
    /// loom's data or config directory (sessions, remembered approvals, user settings).
    LoomData,
    /// A file the secrets chain reads: never readable by the agent either.
    SecretStore,
    /// One of loom's own executables (`loom`, `loom-sandbox-exec`, `loom-shim`, `loom-engine`).
    LoomHelper,
    /// The results directory of `loom job run`: every cell's record (results, updates, sessions), written by loom.
    JobResults,
}

impl AuthorityKind {
    /// The short name audit shows.
    pub fn name(self) -> &'static str {
        match self {
            AuthorityKind::Manifest => "manifest",
            AuthorityKind::SubManifest => "sub-manifest",
            AuthorityKind::HookProgram => "hook program",
            AuthorityKind::ServerProgram => "server program",
            AuthorityKind::SkillRoot => "skill root",
            AuthorityKind::Guidance => "project guidance",
            AuthorityKind::LoomState => "loom state",
            AuthorityKind::LoomData => "loom data",
            AuthorityKind::SecretStore => "secret store",
            AuthorityKind::LoomHelper => "loom executable",
            AuthorityKind::JobResults => "job results",
        }
    }

    /// True when even reading it must be refused (it holds secrets).
    pub fn is_secret(self) -> bool {
        self == AuthorityKind::SecretStore
    }
}

impl fmt::Display for AuthorityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
