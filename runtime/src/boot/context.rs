//! One boot in progress ([`Boot`]): the manifest, where it runs (working directory, environment, storage), the
//! secrets chain, the authority files, the servers started so far, and the tools built so far. Each step of boot is
//! a method on it, in its own file: the session chain (`session.rs`), the tools (`tools.rs`), the harness
//! (`harness.rs`). [`Boot::add_tool`] is the one place the lattice laws of an algebra are checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use loom_kernel::{
    check_laws, AlgebraKind, Authority, AuthorityFile, AuthorityKind, PathCtx, SystemPrompt,
    DEFAULT_SEED, DEFAULT_TRIALS,
};

use super::{BootError, BootOptions, HarnessCell, SECRET_SLOTS};
use crate::agent::ToolSlot;
use crate::authority::{resolve_authority, sandbox_paths, submanifest_hashes, AuthorityPlace};
use crate::load::{env_map, path_ctx, Loaded};
use crate::providers::McpServers;
use crate::secrets::SecretChain;
use crate::storage::{ensure_storage, storage_dir};
use crate::tools::SandboxEnv;

/// One boot in progress.
pub(super) struct Boot {
    pub(super) loaded: Arc<Loaded>,
    pub(super) opts: BootOptions,
    /// The manifest's path, for errors.
    pub(super) file: String,
    /// The working directory, canonical.
    pub(super) cwd: PathBuf,
    pub(super) ctx: PathCtx,
    pub(super) env: BTreeMap<String, String>,
    pub(super) chain: SecretChain,
    /// The agent's storage directory.
    pub(super) storage: PathBuf,
    /// What boot wants the user to know.
    pub(super) notes: Vec<String>,
    /// The MCP servers and provider processes started so far, one per handle.
    pub(super) servers: McpServers,
    /// The authority files of this agent and every agent above it.
    pub(super) authority: Arc<Authority>,
    /// The sha-256 of each sub-manifest file at boot.
    pub(super) submanifests: Arc<BTreeMap<PathBuf, [u8; 32]>>,
    /// The sandbox machinery, with this agent's secrets and authority files.
    pub(super) sandbox: SandboxEnv,
    /// The agent's undo snapshots, shared by its change tools and `undo`.
    pub(super) undo: loom_tools::UndoLog,
    /// What the agent has read of each file (`[agent] read_before_write`; off unless the manifest turns it on).
    pub(super) seen: loom_tools::SeenFiles,
    /// The agent's working record, shared by its record tools and the agent.
    pub(super) record: loom_tools::RecordLog,
    /// The agent's background processes, shared by bash, the process tools and the agent (which ends them).
    pub(super) processes: loom_tools::ProcessTable,
    /// The agent's background agents, shared by the background tools and the agent (which takes their reports and
    /// ends them).
    pub(super) background: crate::background::BackgroundTable,
    /// The subagent profiles found, with the kernel's verdicts (`delegate` runs them).
    pub(super) profiles: Vec<crate::profiles::FoundProfile>,
    /// The manifest's named harnesses, built before the session (a compacting layer may summarise through one).
    pub(super) named: crate::session::NamedHarnesses,
    /// The agent's deferred MCP tools, when it grants `tool_search`.
    pub(super) tool_search: Arc<crate::tool_search::ToolSearch>,
    /// The harness, once built (spawn_subagent reaches it through this cell).
    pub(super) harness_cell: HarnessCell,
    /// The tools built so far, by instance.
    pub(super) tools: BTreeMap<String, ToolSlot>,
    /// The algebras whose laws were checked.
    algebras: BTreeSet<AlgebraKind>,
}

impl Boot {
    /// Starts a boot: the working directory, the secrets chain (the agent's own secrets must resolve), the
    /// authority files, the sandbox's view of both, and the storage directory.
    pub(super) fn new(loaded: Arc<Loaded>, opts: BootOptions) -> Result<Boot, BootError> {
        let file = loaded.path.display().to_string();
        let m = &loaded.manifest;
        let cwd_raw = match &opts.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().map_err(|source| BootError::Cwd {
                path: ".".into(),
                source,
            })?,
        };
        let cwd = std::fs::canonicalize(&cwd_raw).map_err(|source| BootError::Cwd {
            path: cwd_raw.display().to_string(),
            source,
        })?;
        let ctx = path_ctx(&cwd);
        let env = env_map();
        let mut notes = Vec::new();
        // a command whose loom died before it ended may have left a protected name here (`.loom-secrets`,
        // `AGENTS.md`, `.envrc`) for this boot to trust: what the records of such commands watched is moved aside
        // before anything below reads the directory
        let sweep_records = crate::storage::sweep_records_dir(&env);
        notes.extend(
            loom_sandbox::sweep_earlier(&sweep_records)
                .iter()
                .map(ToString::to_string),
        );
        // and what a confined command still running beside this boot has created there is not trusted either: boot
        // waits for that command's end, whose sweep moves it aside (where it is trusted is the kernel's answer)
        let (cwd_str, manifest_dir) = (cwd.to_string_lossy(), loaded.dir.to_string_lossy());
        let planted: Vec<(PathBuf, PathBuf)> = loom_sandbox::created_while_running(&sweep_records)
            .into_iter()
            .filter(|(p, _)| {
                loom_kernel::planted_refuses_boot(&p.to_string_lossy(), &cwd_str, &manifest_dir)
            })
            .collect();
        if let Some((_, record)) = planted.first() {
            return Err(BootError::Planted {
                paths: planted
                    .iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect(),
                record: record.display().to_string(),
            });
        }
        // secrets first: tools that call services (web_search) take their key at boot
        let chain =
            SecretChain::standard(opts.secrets.clone(), &loaded.dir, &cwd, &env).map_err(|e| {
                BootError::Secrets {
                    file: file.clone(),
                    message: e.to_string(),
                }
            })?;
        // a sub-agent shares its parent's working directory: the parent already said so
        if opts.lineage.depth == 0 {
            notes.extend(chain.notices());
        }
        chain
            .resolve(&m.agent.secrets)
            .map_err(|e| BootError::Secrets {
                file: file.clone(),
                message: e.to_string(),
            })?;
        // per-tool secret filtering: a command sees only the secrets its row is granted
        let mut sandbox = opts.sandbox.clone();
        sandbox.secrets = chain.facts(SECRET_SLOTS, &m.agent.secrets);
        // what the sandbox keeps read-only must exist before a command runs (a missing `.loom` could be created)
        for dir in loom_kernel::dirs_to_make(m, &cwd.to_string_lossy()) {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => notes.push(format!(
                    "cannot create {dir}, which commands must find read-only: {e}"
                )),
            }
        }
        // authority files: what loom runs or trusts stays out of the agent's reach (a sub-agent keeps its parent's too)
        let authority = {
            let stores = crate::authority::secret_stores(&loaded.dir, &cwd, &env);
            let own = resolve_authority(
                m,
                &AuthorityPlace {
                    manifest_path: &loaded.path,
                    manifest_dir: &loaded.dir,
                    cwd: &cwd,
                    env: &env,
                    secret_stores: &stores,
                    data_home: &crate::storage::data_home(&env),
                },
            );
            let job = opts.job_results.iter().map(|d| {
                AuthorityFile::new(
                    crate::authority::resolved(d).to_string_lossy().into_owned(),
                    AuthorityKind::JobResults,
                    "loom job run --out",
                )
            });
            Arc::new(
                own.union(&opts.lineage.authority)
                    .union(&loom_kernel::Authority::new(job)),
            )
        };
        sandbox.authority = sandbox_paths(&authority);
        sandbox.accept = m.sandbox.accept.clone();
        sandbox.sweep_records = Some(sweep_records);
        let submanifests = Arc::new(submanifest_hashes(&authority));

        // a run id that cannot name a directory stops boot (storage_dir never uses it)
        crate::storage::run_id(&env).map_err(|e| BootError::Storage {
            file: file.clone(),
            message: format!("{e}; fix it, or unset it to share the agent's state across runs"),
        })?;
        let storage = storage_dir(m, &env);
        match ensure_storage(&storage, &loaded.path) {
            Ok(warning) => notes.extend(warning),
            Err(e) => notes.push(format!(
                "cannot create the agent's storage {}: {e}",
                storage.display()
            )),
        }
        let record =
            open_record(m, &loaded.dir, &storage, &mut notes).map_err(|e| BootError::Storage {
                file: file.clone(),
                message: e.to_string(),
            })?;
        Ok(Boot {
            processes: loom_tools::ProcessTable::default(),
            background: crate::background::BackgroundTable::default(),
            profiles: Vec::new(),
            named: crate::session::NamedHarnesses::default(),
            record,
            file,
            cwd,
            ctx,
            env,
            chain,
            storage,
            notes,
            servers: McpServers::default(),
            authority,
            submanifests,
            sandbox,
            undo: loom_tools::UndoLog::default(),
            seen: if loaded.manifest.agent.read_before_write {
                loom_tools::SeenFiles::guarding()
            } else {
                loom_tools::SeenFiles::default()
            },
            tool_search: Arc::default(),
            harness_cell: HarnessCell::default(),
            tools: BTreeMap::new(),
            algebras: BTreeSet::new(),
            loaded,
            opts,
        })
    }

    /// A tool error naming the manifest, the instance and the fix.
    pub(super) fn tool_err(&self, tool: &str, message: String) -> BootError {
        BootError::Tool {
            file: self.file.clone(),
            tool: tool.to_string(),
            message,
        }
    }

    /// Adds a built tool. The first tool of each algebra checks that algebra's lattice laws; a violation refuses
    /// to boot. This is the only place boot checks them.
    pub(super) fn add_tool(&mut self, instance: String, slot: ToolSlot) -> Result<(), BootError> {
        if self.algebras.insert(slot.algebra) {
            check_laws(
                &instance,
                slot.algebra.build(&self.ctx).as_ref(),
                DEFAULT_SEED,
                DEFAULT_TRIALS,
            )?;
        }
        self.tools.insert(instance, slot);
        Ok(())
    }

    /// The system prompt: the manifest's text, or the file it names (relative to the manifest's directory).
    pub(super) fn system_prompt(&self) -> Result<Vec<String>, BootError> {
        let mut system = Vec::new();
        match &self.loaded.manifest.agent.system_prompt {
            None => {}
            Some(SystemPrompt::Text(t)) => system.push(t.clone()),
            Some(SystemPrompt::Path(p)) => {
                let path = self.loaded.dir.join(p);
                let text = crate::load::read_text(&path).map_err(|e| BootError::SystemPrompt {
                    file: self.file.clone(),
                    message: e.to_string(),
                })?;
                system.push(text);
            }
        }
        Ok(system)
    }
}

/// The file the working record of a resumable session is kept in, in the agent's storage.
pub const RECORD_FILE: &str = "record.json";

/// The agent's working record: kept in memory for a session that does not outlive the process, and in
/// [`RECORD_FILE`] of its storage for one that can be resumed (a `file` session layer). A stored record whose session
/// log is gone or empty belongs to a session that no longer exists: it is set aside (`record.prev.json`, with a
/// note), never shown to a new session.
fn open_record(
    m: &loom_kernel::Manifest,
    manifest_dir: &std::path::Path,
    storage: &std::path::Path,
    notes: &mut Vec<String>,
) -> Result<loom_tools::RecordLog, loom_tools::RecordError> {
    let Some(log) = crate::session::resumable_log(&m.session, manifest_dir, storage) else {
        return Ok(loom_tools::RecordLog::in_memory());
    };
    let file = storage.join(RECORD_FILE);
    let log_has_history = std::fs::metadata(&log).is_ok_and(|md| md.len() > 0);
    if !log_has_history && file.exists() {
        let prev = storage.join("record.prev.json");
        match std::fs::rename(&file, &prev) {
            Ok(()) => notes.push(format!(
                "{} held the working record of a session whose log ({}) is gone or empty; it was set aside as {} and \
                 this session starts with an empty record",
                file.display(),
                log.display(),
                prev.display()
            )),
            Err(e) => {
                return Err(loom_tools::RecordError {
                    path: file.display().to_string(),
                    reason: format!(
                        "it belongs to a session whose log ({}) is gone, and it could not be set aside ({e})",
                        log.display()
                    ),
                })
            }
        }
    }
    loom_tools::RecordLog::open(&file)
}
