//! Boot: from `agent.toml` to a running [`Agent`]. Load the manifest, compute the effective ceiling and each tool's
//! grant, check the lattice laws of every algebra in use (a violation refuses to boot), then build the harness, the
//! session chain and the tools. Anything the manifest names that this build does not implement yet is a boot error
//! naming it — never silently dropped.

mod background;
mod context;
mod delegate;
mod harness;
mod options;
mod session;
mod subagent;
mod tools;

pub use options::{BootError, BootOptions, Booted, HarnessCell, Prebuilt};
pub use subagent::{SpawnEnv, SpawnSubagentTool};

use std::path::Path;
use std::sync::Arc;

use loom_kernel::tool_grants;

use crate::agent::{Agent, AgentParts};
use crate::approvals::ApprovalStore;
use crate::contributed::bind_groups;
use crate::hooks::HookRunner;
use crate::load::{load_manifest, LoadError, Loaded};
use crate::retry::{RetryPolicy, TokioSleeper};
use crate::tools::BRAVE_SEARCH_API_KEY;
use context::Boot;
use tools::underlying_names;

/// The keys loom's own harnesses and tools take from the secrets chain: screened out of every tool environment
/// unless `[agent] secrets` shares them.
pub const SECRET_SLOTS: &[&str] = &[
    crate::harness::ANTHROPIC_API_KEY,
    crate::harness::OPENAI_API_KEY,
    BRAVE_SEARCH_API_KEY,
    loom_tools::CONTEXT7_API_KEY,
];

/// Boots the agent at `manifest`.
pub fn boot(manifest: &Path, opts: BootOptions) -> Result<Booted, BootError> {
    boot_loaded(Arc::new(load_manifest(manifest)?), opts)
}

/// Boots an agent from a manifest already loaded (a sub-agent's, or the SDK's). Grants resolve against the working
/// directory in `opts`; files the manifest names resolve against `loaded.dir`.
pub fn boot_loaded(loaded: Arc<Loaded>, opts: BootOptions) -> Result<Booted, BootError> {
    boot_with(loaded, opts, Prebuilt::default())
}

/// [`boot_loaded`] with some parts already built. Everything else — the ceiling, every tool's grant, the law
/// check — is exactly as for a manifest on disk: an instance never widens authority.
pub fn boot_with(
    loaded: Arc<Loaded>,
    opts: BootOptions,
    prebuilt: Prebuilt,
) -> Result<Booted, BootError> {
    let file = loaded.path.display().to_string();
    let m = &loaded.manifest;
    // what audit refuses too: one kernel function, so a manifest `loom audit` passes boots
    let slot = loom_kernel::BootSlot {
        harness_given: prebuilt.harness.is_some(),
        subagent: opts.lineage.parent_harness.is_some(),
    };
    if let Some(r) = loom_kernel::boot_refusals(m, slot).into_iter().next() {
        return Err(BootError::Refused {
            file,
            key: r.key,
            message: r.message,
        });
    }
    // rules loaded from disk are resolved already; a manifest built in code (an inline sub-manifest, the SDK) is
    // resolved here, against its directory, the same way, before anything runs or is written
    let permissions = crate::load::resolve_permissions(m, &loaded.dir, &file)
        .map_err(|e| BootError::Load(LoadError::Manifest(e)))?;
    let mut boot = Boot::new(loaded.clone(), opts)?;
    // tools and their grants, decided by the kernel
    let ceiling = m.effective_ceiling(&boot.ctx);
    let grants = tool_grants(m, &ceiling);
    // remembered "always" answers live with the agent's other state; a damaged file stops boot rather than being
    // overwritten
    let approvals = ApprovalStore::open(&boot.storage).map_err(|e| BootError::Storage {
        file: file.clone(),
        message: e.to_string(),
    })?;
    boot.named_harnesses()?;
    // subagent profiles: judged by the kernel; one that cannot be used is a note (nothing delegates to it yet)
    let profiles =
        crate::profiles::discover_profiles(m, &boot.cwd, &crate::storage::data_home(&boot.env));
    boot.notes.extend(crate::profiles::profile_notes(&profiles));
    boot.profiles = profiles;
    let mut session = boot.session(prebuilt.layers)?;
    // contributed tool groups (skills, session layers): judged by the kernel, fail-soft, bound before tools are built
    let mut bound = bind_groups(&loaded, &ceiling, &boot.ctx, &grants, &mut session);
    boot.notes.append(&mut bound.notes);
    let server_tools = boot.manifest_tools(&grants, &bound)?;
    let underlying_of = underlying_names(&grants, &bound.new_tools);
    boot.contributed_tools(bound.new_tools, &bound.shipped, &session)?;
    let (harness, max_turn_requests) = boot.harness(prebuilt.harness, server_tools)?;
    let system = boot.system_prompt()?;

    let mut parts = AgentParts::new(harness, session, boot.ctx.clone());
    parts.name = m.agent.name.clone();
    parts.max_turn_requests = max_turn_requests;
    parts.system = system;
    parts.tools = std::mem::take(&mut boot.tools);
    // the working record: the record tools' handle, kept through compactions and published as the plan; with record
    // tools, the system prompt says how to keep it
    parts.record = boot.record.clone();
    parts.processes = boot.processes.clone();
    parts.background = boot.background.clone();
    let record_tools: Vec<(&str, String)> = parts
        .tools
        .iter()
        .filter_map(|(instance, s)| {
            s.tool
                .builtin()
                .filter(|b| loom_tools::RecordOp::of(b).is_some())
                .map(|b| (b, instance.clone()))
        })
        .collect();
    parts
        .system
        .extend(crate::record::prompt_section(&record_tools));
    // the supervisor: the review model is one of the named harnesses built above
    let sup = &m.supervisor;
    parts.supervisor = crate::agent::Supervisor {
        enabled: sup.enabled,
        max_rounds: sup.max_rounds,
        review: sup
            .review
            .as_ref()
            .and_then(|n| boot.named.0.get(n).map(|h| (n.clone(), h.clone()))),
        review_budget: sup.review_budget,
    };
    // with tool_search granted, the MCP tools' definitions stay out of requests until the model loads them
    if parts
        .tools
        .values()
        .any(|s| s.tool.builtin() == Some("tool_search"))
    {
        let deferred = parts
            .tools
            .values()
            .filter(|s| s.algebra == loom_kernel::AlgebraKind::Mcp)
            .map(|s| s.tool.spec())
            .collect();
        boot.tool_search.defer(deferred);
        parts.tool_search = Some(boot.tool_search.clone());
    }
    parts.permissions = permissions;
    parts.approvals = Some(Arc::new(approvals));
    parts.authority = boot.authority.clone();
    // the working directory's AGENTS.md / CLAUDE.md, read each turn (authority files: the agent cannot write them)
    parts.guidance = Some(boot.cwd.clone());
    // the environment block: git is asked through the agent's own sandbox (its secrets screened, authority read-only)
    if m.agent.environment {
        parts.environment = Some((boot.cwd.clone(), Some(boot.sandbox.clone())));
    }
    parts.plan_mode = boot.opts.plan_mode;
    // hooks run from the manifest's directory; the id ties one agent's hook calls together
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let session_id = format!("{}-{}-{nanos:08x}", m.agent.name, std::process::id());
    parts.hooks = HookRunner::new(
        m.hooks.clone(),
        loaded.dir.clone(),
        boot.cwd.clone(),
        session_id,
    )
    .map(|h| Arc::new(h.with_underlying(underlying_of)));
    parts.retry = RetryPolicy::default();
    parts.sleeper = boot
        .opts
        .sleeper
        .clone()
        .unwrap_or_else(|| Arc::new(TokioSleeper));
    Ok(Booted {
        agent: Agent::new(parts),
        notes: boot.notes,
    })
}
