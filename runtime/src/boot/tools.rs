//! Boot's tool step: every `[tools]` instance built under the grant the kernel gave it (built-ins, MCP servers,
//! provider processes, harness server tools, the sub-agent tool), then the tools contributed groups add (fail-soft:
//! one that cannot start is left out with a note).

use std::collections::BTreeMap;
use std::sync::Arc;

use loom_kernel::{AlgebraKind, ProviderRef, ToolGrant};

use super::context::Boot;
use super::{boot_loaded, BootError, BootOptions, SpawnEnv, SpawnSubagentTool};
use crate::agent::ToolSlot;
use crate::contributed::{Bound, NewTool};
use crate::harness::server_tool_definition;
use crate::providers::{
    mcp_provider, provider_source, resolve_and_start, resolve_shipped, start as start_provider,
    McpPlace, McpTool, ProviderPlace,
};
use crate::session::Chain;
use crate::tools::{
    builtin_tool, Tool, ToolEnv, WebSearchTool, BRAVE_ENDPOINT, BRAVE_SEARCH_API_KEY, IMPLEMENTED,
};

impl Boot {
    /// Builds the tool of every grant (`bound.widened` holds the grants contributed groups widened). Returns the
    /// wire definitions of the harness server tools, which the harness offers with every request.
    pub(super) fn manifest_tools(
        &mut self,
        grants: &[ToolGrant],
        bound: &Bound,
    ) -> Result<Vec<serde_json::Value>, BootError> {
        let loaded = self.loaded.clone();
        let m = &loaded.manifest;
        let mut server_tools = Vec::new();
        // MCP servers start in directories of loom's own, never in the agent's working directory (a planted
        // `node_modules`, `.npmrc` or `pkg.py` there must not run)
        let mcp_run_base = crate::providers::server_run_base(&self.storage);
        for g in grants {
            if !g.problems.is_empty() {
                return Err(self.tool_err(&g.instance, g.problems.join("; ")));
            }
            // a harness server tool runs at the provider: the kernel turns its grant into the provider's limits,
            // and the harness offers it with every request
            if let ProviderRef::Harness(h) = &g.provider {
                let def = server_tool_definition(h, &g.underlying, &g.grant)
                    .map_err(|e| self.tool_err(&g.instance, e.to_string()))?;
                server_tools.push(def);
                continue;
            }
            let mcp = mcp_provider(m, &g.provider);
            let external = provider_source(m, &g.provider);
            let what = match &g.provider {
                _ if mcp.is_some() || external.is_some() => None,
                ProviderRef::Builtin if IMPLEMENTED.contains(&g.underlying.as_str()) => None,
                // a name that is no built-in at all never gets here: boot_refusals refused it
                ProviderRef::Builtin => Some(format!("the built-in tool {:?}", g.underlying)),
                ProviderRef::Session => {
                    Some("tools provided by the session (provider = \"session\")".to_string())
                }
                ProviderRef::Harness(h) => Some(format!("harness server tools (provider = {h:?})")),
                ProviderRef::Handle(h) => Some(format!(
                    "tools from [providers].{h} (neither an mcp-server nor a provider source; MCP servers and \
                     path/npm/git provider sources, with or without config, are supported)"
                )),
                ProviderRef::Shipped(s) => {
                    Some(format!("tools from shipped providers ({})", s.label))
                }
                ProviderRef::Host => Some("contributed grant rows".to_string()),
            };
            if let Some(what) = what {
                return Err(self.tool_err(
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
                ctx: self.ctx.clone(),
                cwd: self.cwd.clone(),
                authority: self.authority.clone(),
                undo: self.undo.clone(),
                record: self.record.clone(),
                processes: self.processes.clone(),
                seen: self.seen.clone(),
            };
            let built = if let Some((key, table)) = mcp {
                let place = McpPlace {
                    manifest_dir: &loaded.dir,
                    run_base: &mcp_run_base,
                    chain: &self.chain,
                    env: &self.env,
                };
                let server = self
                    .servers
                    .get_or_start(&key, table, &place)
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                let tool = McpTool::new(&g.instance, &g.underlying, &g.grant, server)
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else if let Some(ext) = external {
                let place = ProviderPlace {
                    cwd: &self.cwd,
                    env: &self.env,
                    storage: &self.storage,
                };
                let server = self
                    .servers
                    .get_or_start_with(ext.handle, || resolve_and_start(&loaded.dir, &ext, &place))
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                let tool = McpTool::new(&g.instance, &g.underlying, &g.grant, server)
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else if g.underlying == "web_search" {
                let key = self
                    .chain
                    .get(BRAVE_SEARCH_API_KEY)
                    .map(|(k, _)| k)
                    .ok_or_else(|| {
                        self.tool_err(
                            &g.instance,
                            format!(
                                "web_search needs the secret {BRAVE_SEARCH_API_KEY} (Brave Search API): {}",
                                self.chain.missing_hint(&[BRAVE_SEARCH_API_KEY.to_string()])
                            ),
                        )
                    })?;
                let tool = WebSearchTool::new(tool_env, key, BRAVE_ENDPOINT)
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else if let Some(op) = loom_tools::Context7Op::of(&g.underlying) {
                let key = self
                    .chain
                    .get(loom_tools::CONTEXT7_API_KEY)
                    .map(|(k, _)| k)
                    .ok_or_else(|| {
                        self.tool_err(
                            &g.instance,
                            format!(
                                "{} needs the secret {} (a Context7 API key from context7.com/dashboard): {}",
                                g.underlying,
                                loom_tools::CONTEXT7_API_KEY,
                                self.chain
                                    .missing_hint(&[loom_tools::CONTEXT7_API_KEY.to_string()])
                            ),
                        )
                    })?;
                let tool =
                    loom_tools::Context7Tool::new(op, tool_env, key, loom_tools::CONTEXT7_BASE)
                        .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else if g.underlying == "tool_search" {
                Some(Arc::new(crate::tool_search::ToolSearchTool::new(
                    tool_env,
                    self.tool_search.clone(),
                )) as Arc<dyn Tool>)
            } else if g.underlying == "spawn_subagent" {
                let spawn = self.spawn_env(&loaded);
                Some(Arc::new(SpawnSubagentTool::new(tool_env, spawn)) as Arc<dyn Tool>)
            } else if let Some(op) = super::background::BackgroundOp::of(&g.underlying) {
                let spawn = self.spawn_env(&loaded);
                let tool = super::background::BackgroundTool::new(
                    op,
                    tool_env,
                    self.background.clone(),
                    spawn,
                    &self.profiles,
                )
                .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else if g.underlying == "delegate" {
                let spawn = self.spawn_env(&loaded);
                let tool = super::delegate::DelegateTool::new(tool_env, spawn, &self.profiles)
                    .map_err(|e| self.tool_err(&g.instance, e))?;
                Some(Arc::new(tool) as Arc<dyn Tool>)
            } else {
                builtin_tool(&g.underlying, tool_env, &self.sandbox)
            };
            let Some(tool) = built else {
                return Err(self.tool_err(
                    &g.instance,
                    "not supported yet by this build of loom".into(),
                ));
            };
            self.add_tool(
                g.instance.clone(),
                ToolSlot {
                    tool,
                    algebra: g.algebra,
                    grant,
                },
            )?;
        }
        Ok(server_tools)
    }

    /// What the sub-agent tools (`spawn_subagent`, `delegate`) need to boot a child of this agent.
    fn spawn_env(&self, loaded: &Arc<crate::load::Loaded>) -> SpawnEnv {
        SpawnEnv {
            parent: loaded.clone(),
            ctx: self.ctx.clone(),
            opts: BootOptions {
                cwd: Some(self.cwd.clone()),
                ..self.opts.clone()
            },
            harness: self.harness_cell.clone(),
            authority: self.authority.clone(),
            submanifests: self.submanifests.clone(),
            boot: Arc::new(boot_loaded),
        }
    }

    /// Builds the tools contributed groups add: built-ins, MCP tools of a contributed or shipped server, and the
    /// session's own tools (read_skill). Fail-soft: a tool that cannot be built is left out with a note.
    pub(super) fn contributed_tools(
        &mut self,
        new_tools: Vec<NewTool>,
        shipped: &BTreeMap<String, loom_kernel::ProviderSpec>,
        session: &Chain,
    ) -> Result<(), BootError> {
        let loaded = self.loaded.clone();
        let m = &loaded.manifest;
        let mcp_run_base = crate::providers::server_run_base(&self.storage);
        for new in new_tools {
            let (instance, slot) = match new {
                NewTool::Builtin {
                    instance,
                    underlying,
                    grant,
                } => {
                    let tool_env = ToolEnv {
                        instance: instance.clone(),
                        grant: grant.clone(),
                        ctx: self.ctx.clone(),
                        cwd: self.cwd.clone(),
                        authority: self.authority.clone(),
                        undo: self.undo.clone(),
                        record: self.record.clone(),
                        processes: self.processes.clone(),
                        seen: self.seen.clone(),
                    };
                    // the agent's sandbox, with its secrets screened and its authority files read-only: a tool a
                    // group adds is confined exactly like the manifest's own
                    let Some(tool) = builtin_tool(&underlying, tool_env, &self.sandbox) else {
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
                    let provider_place = ProviderPlace {
                        cwd: &self.cwd,
                        env: &self.env,
                        storage: &self.storage,
                    };
                    let server = match &table {
                        Some(table) => {
                            let place = McpPlace {
                                manifest_dir: &loaded.dir,
                                run_base: &mcp_run_base,
                                chain: &self.chain,
                                env: &self.env,
                            };
                            self.servers.get_or_start(&key, table, &place)
                        }
                        None => match (
                            shipped.get(&key),
                            provider_source(m, &ProviderRef::Handle(key.clone())),
                        ) {
                            (Some(spec), _) => self.servers.get_or_start_with(&key, || {
                                start_provider(
                                    &resolve_shipped(&loaded.dir, &key, spec)?,
                                    &provider_place,
                                )
                            }),
                            (None, Some(ext)) => self.servers.get_or_start_with(&key, || {
                                resolve_and_start(&loaded.dir, &ext, &provider_place)
                            }),
                            (None, None) => {
                                Err(format!("[providers].{key} is not a provider source"))
                            }
                        },
                    };
                    let tool = server
                        .and_then(|server| McpTool::new(&instance, &underlying, &grant, server));
                    let tool = match tool {
                        Ok(t) => Arc::new(t) as Arc<dyn Tool>,
                        Err(e) => {
                            self.notes
                                .push(format!("contributed tool {instance} is left out: {e}"));
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
            self.add_tool(instance, slot)?;
        }
        Ok(())
    }
}

/// What each instance runs, for hook matchers: a renamed tool answers to its underlying name too.
pub(super) fn underlying_names(
    grants: &[ToolGrant],
    new_tools: &[NewTool],
) -> BTreeMap<String, String> {
    let mut underlying_of: BTreeMap<String, String> = grants
        .iter()
        .map(|g| (g.instance.clone(), g.underlying.clone()))
        .collect();
    for new in new_tools {
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
    underlying_of
}
