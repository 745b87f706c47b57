//! Boot: from `agent.toml` to a running [`Agent`]. Load the manifest, compute the effective ceiling and each tool's
//! grant, check the lattice laws of every algebra in use (a violation refuses to boot), then build the harness, the
//! session chain and the tools. Anything the manifest names that this build does not implement yet is a boot error
//! naming it — never silently dropped.

mod options;
mod subagent;

pub use options::{BootError, BootOptions, Booted, HarnessCell, Prebuilt};
pub use subagent::{SpawnEnv, SpawnSubagentTool};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loom_kernel::{
    check_laws, tool_grants, AlgebraKind, AuthorityFile, AuthorityKind, ProviderRef, SystemPrompt,
    DEFAULT_SEED, DEFAULT_TRIALS,
};

use crate::agent::{Agent, AgentParts, ToolSlot};
use crate::approvals::ApprovalStore;
use crate::authority::{resolve_authority, sandbox_paths, submanifest_hashes, AuthorityPlace};
use crate::contributed::{bind_groups, NewTool};
use crate::harness::{
    build_harness_in, max_turn_requests_of, server_tool_definition, small_model_of_parent, Harness,
    HarnessConfigError,
};
use crate::hooks::HookRunner;
use crate::load::{env_map, load_manifest, path_ctx, LoadError, Loaded};
use crate::providers::{
    mcp_provider, provider_source, resolve_and_start, resolve_shipped, start as start_provider,
    McpPlace, McpServers, McpTool, ProviderHarness, ProviderLayers, ProviderPlace,
};
use crate::retry::{RetryPolicy, TokioSleeper};
use crate::secrets::SecretChain;
use crate::session::{build_chain_with, LayerSource, SessionError, SessionPlace, SkillsEnv};
use crate::storage::{ensure_storage, storage_dir};
use crate::tools::{
    builtin_tool, ToolEnv, WebSearchTool, BRAVE_ENDPOINT, BRAVE_SEARCH_API_KEY, IMPLEMENTED,
};

/// The keys loom's own harnesses and tools take from the secrets chain: screened out of every tool environment
/// unless `[agent] secrets` shares them.
pub const SECRET_SLOTS: &[&str] = &[
    crate::harness::ANTHROPIC_API_KEY,
    crate::harness::OPENAI_API_KEY,
    BRAVE_SEARCH_API_KEY,
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

    // tools and their grants, decided by the kernel
    let ceiling = m.effective_ceiling(&ctx);
    let grants = tool_grants(m, &ceiling);
    let tool_err = |tool: &str, message: String| BootError::Tool {
        file: file.clone(),
        tool: tool.to_string(),
        message,
    };
    let mut tools = BTreeMap::new();
    let mut server_tools = Vec::new();
    let mut algebras = BTreeSet::new();
    let mut mcp_servers = McpServers::default();
    let harness_cell = HarnessCell::default();
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
        .map_err(|message| BootError::Secrets {
            file: file.clone(),
            message,
        })?;
    // per-tool secret filtering: a command sees only the secrets its row is granted
    let mut sandbox = opts.sandbox.clone();
    sandbox.secrets = chain.facts(SECRET_SLOTS, &m.agent.secrets);
    // authority files: what loom runs or trusts stays out of the agent's reach (a sub-agent keeps its parent's too)
    let authority = {
        let stores = crate::authority::secret_stores(&loaded.dir, &cwd, &env);
        let own = resolve_authority(
            m,
            &AuthorityPlace {
                manifest_path: &loaded.path,
                manifest_dir: &loaded.dir,
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
    let submanifests = Arc::new(submanifest_hashes(&authority));

    // a run id that cannot name a directory stops boot (storage_dir never uses it)
    crate::storage::run_id(&env).map_err(|e| BootError::Storage {
        file: file.clone(),
        message: format!("{e}; fix it, or unset it to share the agent's state across runs"),
    })?;
    let storage = storage_dir(m, &env);
    let storage_for_providers = storage.clone();
    match ensure_storage(&storage, &loaded.path) {
        Ok(warning) => notes.extend(warning),
        Err(e) => notes.push(format!(
            "cannot create the agent's storage {}: {e}",
            storage.display()
        )),
    }
    // remembered "always" answers live with the agent's other state; a damaged file stops boot rather than being
    // overwritten
    let approvals = ApprovalStore::open(&storage).map_err(|message| BootError::Storage {
        file: file.clone(),
        message,
    })?;
    // a session layer named by a provider handle: the provider starts now, and its tools share the process
    let mut session_providers = BTreeMap::new();
    for spec in &m.session.layers {
        let Some(ext) = provider_source(m, &ProviderRef::Handle(spec.provider.clone())) else {
            continue;
        };
        let place = ProviderPlace {
            cwd: &cwd,
            env: &env,
            storage: &storage,
        };
        let server = mcp_servers
            .get_or_start_with(ext.handle, || resolve_and_start(&loaded.dir, &ext, &place))
            .map_err(|e| BootError::Session {
                file: file.clone(),
                source: SessionError::Config(format!("session: {e}")),
            })?;
        session_providers.insert(
            ext.handle.to_string(),
            Arc::new(ProviderLayers(server)) as Arc<dyn LayerSource>,
        );
    }
    let place = SessionPlace {
        manifest_dir: loaded.dir.clone(),
        storage,
        parent_history: opts.lineage.parent_history.clone(),
        skills: SkillsEnv::for_manifest(m, ctx.home.as_ref().map(PathBuf::from), &env),
        providers: session_providers,
    };
    let (mut session, session_notes) = build_chain_with(&m.session, &place, prebuilt.layers)
        .map_err(|source| BootError::Session {
            file: file.clone(),
            source,
        })?;
    notes.extend(session_notes);
    notes.extend(session.notes());
    // contributed tool groups (skills, session layers): judged by the kernel, fail-soft, bound before tools are built
    let bound = bind_groups(&loaded, &ceiling, &ctx, &grants, &mut session);
    notes.extend(bound.notes);

    // MCP servers start in directories of loom's own, never in the agent's working directory (a planted
    // `node_modules`, `.npmrc` or `pkg.py` there must not run)
    let mcp_run_base = crate::providers::server_run_base(&storage_for_providers);
    let mcp_place = McpPlace {
        manifest_dir: &loaded.dir,
        run_base: &mcp_run_base,
        chain: &chain,
        env: &env,
    };
    // external providers: one process per handle, resolved only from the lock-pinned install directory
    let provider_place = ProviderPlace {
        cwd: &cwd,
        env: &env,
        storage: &storage_for_providers,
    };
    for g in &grants {
        if !g.problems.is_empty() {
            return Err(tool_err(&g.instance, g.problems.join("; ")));
        }
        // a harness server tool runs at the provider: the kernel turns its grant into the provider's limits, and
        // the harness (below) offers it with every request
        if let ProviderRef::Harness(h) = &g.provider {
            let def = server_tool_definition(h, &g.underlying, &g.grant)
                .map_err(|e| tool_err(&g.instance, e))?;
            server_tools.push(def);
            continue;
        }
        let mcp = mcp_provider(m, &g.provider);
        let external = provider_source(m, &g.provider);
        let what = match &g.provider {
            _ if mcp.is_some() || external.is_some() => None,
            ProviderRef::Builtin if IMPLEMENTED.contains(&g.underlying.as_str()) => None,
            // a name that is no built-in at all never gets here: boot_refusals (above) refused it
            ProviderRef::Builtin => Some(format!("the built-in tool {:?}", g.underlying)),
            ProviderRef::Session => {
                Some("tools provided by the session (provider = \"session\")".to_string())
            }
            ProviderRef::Harness(h) => Some(format!("harness server tools (provider = {h:?})")),
            ProviderRef::Handle(h) => Some(format!(
                "tools from [providers].{h} (neither an mcp-server nor a provider source; MCP servers and \
                 path/npm/git provider sources, with or without config, are supported)"
            )),
            ProviderRef::Shipped(s) => Some(format!("tools from shipped providers ({})", s.label)),
            ProviderRef::Host => Some("contributed grant rows".to_string()),
        };
        if let Some(what) = what {
            return Err(tool_err(
                &g.instance,
                format!(
                    "{what} are not supported yet by this build of loom; remove tools.{} for now",
                    g.instance
                ),
            ));
        }
        let grant = bound.widened.get(&g.instance).unwrap_or(&g.grant).clone();
        let tool_env = ToolEnv {
            instance: g.instance.clone(),
            grant: grant.clone(),
            ctx: ctx.clone(),
            cwd: cwd.clone(),
        };
        let built = if let Some((key, table)) = mcp {
            let server = mcp_servers
                .get_or_start(&key, table, &mcp_place)
                .map_err(|e| tool_err(&g.instance, e))?;
            let tool = McpTool::new(&g.instance, &g.underlying, &g.grant, server)
                .map_err(|e| tool_err(&g.instance, e))?;
            Some(Arc::new(tool) as Arc<dyn crate::tools::Tool>)
        } else if let Some(ext) = external {
            let server = mcp_servers
                .get_or_start_with(ext.handle, || {
                    resolve_and_start(&loaded.dir, &ext, &provider_place)
                })
                .map_err(|e| tool_err(&g.instance, e))?;
            let tool = McpTool::new(&g.instance, &g.underlying, &g.grant, server)
                .map_err(|e| tool_err(&g.instance, e))?;
            Some(Arc::new(tool) as Arc<dyn crate::tools::Tool>)
        } else if g.underlying == "web_search" {
            let key = chain
                .get(BRAVE_SEARCH_API_KEY)
                .map(|(k, _)| k)
                .ok_or_else(|| {
                    tool_err(
                        &g.instance,
                        format!(
                            "web_search needs the secret {BRAVE_SEARCH_API_KEY} (Brave Search API): {}",
                            chain.missing_hint(&[BRAVE_SEARCH_API_KEY.to_string()])
                        ),
                    )
                })?;
            let tool = WebSearchTool::new(tool_env, key, BRAVE_ENDPOINT)
                .map_err(|e| tool_err(&g.instance, e))?;
            Some(Arc::new(tool) as Arc<dyn crate::tools::Tool>)
        } else if g.underlying == "spawn_subagent" {
            let spawn = SpawnEnv {
                parent: loaded.clone(),
                ctx: ctx.clone(),
                opts: BootOptions {
                    cwd: Some(cwd.clone()),
                    ..opts.clone()
                },
                harness: harness_cell.clone(),
                authority: authority.clone(),
                submanifests: submanifests.clone(),
                boot: Arc::new(boot_loaded),
            };
            Some(Arc::new(SpawnSubagentTool::new(tool_env, spawn)) as Arc<dyn crate::tools::Tool>)
        } else {
            builtin_tool(&g.underlying, tool_env, &sandbox)
        };
        let Some(tool) = built else {
            return Err(tool_err(
                &g.instance,
                "not supported yet by this build of loom".into(),
            ));
        };
        if algebras.insert(g.algebra) {
            check_laws(
                &g.instance,
                g.algebra.build(&ctx).as_ref(),
                DEFAULT_SEED,
                DEFAULT_TRIALS,
            )?;
        }
        tools.insert(
            g.instance.clone(),
            ToolSlot {
                tool,
                algebra: g.algebra,
                grant,
            },
        );
    }
    // what each instance runs, for hook matchers: a renamed tool answers to its underlying name too
    let mut underlying_of: BTreeMap<String, String> = grants
        .iter()
        .map(|g| (g.instance.clone(), g.underlying.clone()))
        .collect();
    for new in &bound.new_tools {
        if let NewTool::Builtin {
            instance,
            underlying,
            ..
        }
        | NewTool::Mcp {
            instance,
            underlying,
            ..
        } = new
        {
            underlying_of.insert(instance.clone(), underlying.clone());
        }
    }
    for new in bound.new_tools {
        let (instance, slot) = match new {
            NewTool::Builtin {
                instance,
                underlying,
                grant,
            } => {
                let tool_env = ToolEnv {
                    instance: instance.clone(),
                    grant: grant.clone(),
                    ctx: ctx.clone(),
                    cwd: cwd.clone(),
                };
                let Some(tool) = builtin_tool(&underlying, tool_env, &opts.sandbox) else {
                    continue;
                };
                let algebra = AlgebraKind::for_builtin(&underlying);
                (
                    instance,
                    ToolSlot {
                        tool,
                        algebra,
                        grant,
                    },
                )
            }
            NewTool::Mcp {
                instance,
                underlying,
                grant,
                key,
                table,
            } => {
                // fail-soft like the judging: a contributed server that does not start leaves its tool out
                // a source a group ships runs only from its pinned install, like a root handle's
                let server = match &table {
                    Some(table) => mcp_servers.get_or_start(&key, table, &mcp_place),
                    None => match (
                        bound.shipped.get(&key),
                        provider_source(m, &ProviderRef::Handle(key.clone())),
                    ) {
                        (Some(spec), _) => mcp_servers.get_or_start_with(&key, || {
                            start_provider(
                                &resolve_shipped(&loaded.dir, &key, spec)?,
                                &provider_place,
                            )
                        }),
                        (None, Some(ext)) => mcp_servers.get_or_start_with(&key, || {
                            resolve_and_start(&loaded.dir, &ext, &provider_place)
                        }),
                        (None, None) => Err(format!("[providers].{key} is not a provider source")),
                    },
                };
                let tool =
                    server.and_then(|server| McpTool::new(&instance, &underlying, &grant, server));
                let tool = match tool {
                    Ok(t) => Arc::new(t) as Arc<dyn crate::tools::Tool>,
                    Err(e) => {
                        notes.push(format!("contributed tool {instance} is left out: {e}"));
                        continue;
                    }
                };
                (
                    instance,
                    ToolSlot {
                        tool,
                        algebra: AlgebraKind::Mcp,
                        grant,
                    },
                )
            }
            NewTool::Session { instance } => {
                // no active skill: no read_skill either (the catalog is empty too)
                let Some((tool, grant)) = session
                    .session_tool(&instance)
                    .filter(|(_, g)| !g.is_none())
                else {
                    continue;
                };
                // read_skill's calls are file reads inside the active skills' folders
                let algebra = AlgebraKind::for_builtin("read_file");
                (
                    instance,
                    ToolSlot {
                        tool,
                        algebra,
                        grant,
                    },
                )
            }
        };
        if algebras.insert(slot.algebra) {
            check_laws(
                &instance,
                slot.algebra.build(&ctx).as_ref(),
                DEFAULT_SEED,
                DEFAULT_TRIALS,
            )?;
        }
        tools.insert(instance, slot);
    }

    let harness_err = |source: HarnessConfigError| BootError::Harness {
        file: file.clone(),
        // a missing key: where to put it, by the user secrets file's real path and the keychain's state
        source: match source {
            HarnessConfigError::MissingSecret(name) => HarnessConfigError::Invalid(format!(
                "needs the secret {name}: {}",
                chain.missing_hint(std::slice::from_ref(&name))
            )),
            other => other,
        },
    };
    // a harness a provider contributes: the same process as the handle's tools and session layers
    let provided = m
        .harness
        .as_ref()
        .and_then(|h| provider_source(m, &ProviderRef::Handle(h.provider.clone())));
    let (harness, max_turn_requests) = match (
        prebuilt.harness,
        m.harness.as_ref(),
        &opts.lineage.parent_harness,
        provided,
    ) {
        (Some(instance), h, _, _) => (instance, max_turn_requests_of(h).map_err(harness_err)?),
        (None, Some(h), Some((parent, max)), _) if h.provider == "small-model-of-parent" => (
            small_model_of_parent(h, parent.as_ref()).map_err(harness_err)?,
            *max,
        ),
        (None, Some(h), _, Some(ext)) => {
            let max = max_turn_requests_of(Some(h)).map_err(harness_err)?;
            let place = ProviderPlace {
                cwd: &cwd,
                env: &env,
                storage: &storage_for_providers,
            };
            let server = mcp_servers
                .get_or_start_with(ext.handle, || resolve_and_start(&loaded.dir, &ext, &place))
                .map_err(|e| harness_err(HarnessConfigError::Invalid(format!("[harness]: {e}"))))?;
            let name = h.config.get("harness").and_then(toml::Value::as_str);
            let harness = ProviderHarness::new(server, name).map_err(harness_err)?;
            (Arc::new(harness) as Arc<dyn Harness>, max)
        }
        _ => build_harness_in(
            m.harness.as_ref(),
            &chain,
            &crate::harness::HarnessPlace {
                manifest_dir: loaded.dir.clone(),
                env: env.clone(),
                models_dir: Some(crate::storage::models_dir(&env)),
            },
        )
        .map_err(harness_err)?,
    };
    let harness = if server_tools.is_empty() {
        harness
    } else {
        harness.with_server_tools(server_tools).ok_or_else(|| BootError::Harness {
            file: file.clone(),
            source: HarnessConfigError::Invalid(format!(
                "web_search / web_fetch = \"anthropic\" are Anthropic server tools, but the harness is {:?}; use \
                 [harness] provider = \"anthropic\", or web_search = \"builtin\"",
                harness.name()
            )),
        })?
    };
    // spawn_subagent reaches the harness through this cell (a sub-agent's small-model-of-parent clones it)
    let _ = harness_cell.set((harness.clone(), max_turn_requests));

    let mut system = Vec::new();
    match &m.agent.system_prompt {
        None => {}
        Some(SystemPrompt::Text(t)) => system.push(t.clone()),
        Some(SystemPrompt::Path(p)) => {
            let path = loaded.dir.join(p);
            let text = crate::load::read_text(&path).map_err(|e| BootError::SystemPrompt {
                file: file.clone(),
                message: e.to_string(),
            })?;
            system.push(text);
        }
    }

    let mut parts = AgentParts::new(harness, session, ctx);
    parts.name = m.agent.name.clone();
    parts.max_turn_requests = max_turn_requests;
    parts.system = system;
    parts.tools = tools;
    parts.permissions = permissions;
    parts.approvals = Some(Arc::new(approvals));
    parts.authority = authority;
    parts.plan_mode = opts.plan_mode;
    // hooks run from the manifest's directory; the id ties one agent's hook calls together
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let session_id = format!("{}-{}-{nanos:08x}", m.agent.name, std::process::id());
    parts.hooks = HookRunner::new(m.hooks.clone(), loaded.dir.clone(), cwd.clone(), session_id)
        .map(|h| Arc::new(h.with_underlying(underlying_of)));
    parts.retry = RetryPolicy::default();
    parts.sleeper = opts
        .sleeper
        .clone()
        .unwrap_or_else(|| Arc::new(TokioSleeper));
    Ok(Booted {
        agent: Agent::new(parts),
        notes,
    })
}
