//! Providers that contributed tool groups ship as a source (a skill's `"./provider"`, `{ npm = … }`, or a group-local
//! handle whose spec is a source). Only groups the kernel accepts count — judged exactly as boot judges them
//! ([`judge_group`] against the effective ceiling, whose consent rule wants the instance named in `[capabilities]`).
//! Each is installed and pinned like a root handle, under the kernel's [`shipped_key`], and boot resolves it only
//! from that pinned install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loom_kernel::{
    judge_group, requested_grant, shipped_key, PathCtx, ProviderRef, ProviderSpec, ToolGroup,
};

use crate::load::Loaded;
use loom_kernel::{McpResolution, ShippedSource, ShippedState};

use super::{McpServers, McpTool};
use crate::session::{manifest_skills, SkillsEnv};

use super::{read_lock, resolve_as, start, state_of, ProviderPlace};

/// The source providers (plain sources and provider packages) `group` ships, by install key: the group-local label
/// and the spec.
pub fn group_sources(group: &ToolGroup) -> BTreeMap<String, (String, ProviderSpec)> {
    group
        .tools
        .values()
        .filter_map(|entry| match &entry.provider {
            ProviderRef::Shipped(s) if s.spec.source().is_some() => Some((
                shipped_key(&group.label, &s.label),
                (s.label.clone(), s.spec.clone()),
            )),
            _ => None,
        })
        .collect()
}

/// Every source provider that an accepted group of the manifest's skills layer ships (the skills the layer
/// discovers at boot, judged as boot judges them), sorted by key. Rejected groups ship nothing.
pub fn shipped_sources(loaded: &Loaded, ctx: &PathCtx) -> Vec<ShippedSource> {
    let m = &loaded.manifest;
    let env = SkillsEnv::for_manifest(
        m,
        ctx.home.as_ref().map(PathBuf::from),
        &crate::load::env_map(),
    );
    let Some(found) = manifest_skills(m, &loaded.dir, &env) else {
        return Vec::new();
    };
    let ceiling = m.effective_ceiling(ctx);
    let mut out: BTreeMap<String, ShippedSource> = BTreeMap::new();
    for skill in found.skills.values() {
        let group = &skill.group;
        if !judge_group(m, &ceiling, ctx, group).accepted {
            continue;
        }
        for (name, entry) in &group.tools {
            let ProviderRef::Shipped(s) = &entry.provider else {
                continue;
            };
            let Some(source) = s.spec.source() else {
                continue;
            };
            let key = shipped_key(&group.label, &s.label);
            let (grant, _) = requested_grant(&ceiling, name, entry);
            out.entry(key.clone())
                .or_insert_with(|| ShippedSource {
                    key,
                    group: group.label.clone(),
                    label: s.label.clone(),
                    source: source.clone(),
                    spec: s.spec.clone(),
                    dir: skill.dir.clone(),
                    tools: Vec::new(),
                })
                .tools
                .push((
                    name.clone(),
                    entry.tool.clone().unwrap_or_else(|| name.clone()),
                    grant,
                ));
        }
    }
    out.into_values().collect()
}

/// Resolves every shipped provider of `loaded` for audit: each installed one is started once to list its tools,
/// then stopped.
pub fn shipped_states(loaded: &Loaded, cwd: &Path) -> Vec<ShippedState> {
    let ctx = crate::load::path_ctx(cwd);
    let env = crate::load::env_map();
    let storage = crate::storage::storage_dir(&loaded.manifest, &env);
    let lock = read_lock(&loaded.dir).ok().flatten();
    let place = ProviderPlace {
        cwd,
        env: &env,
        storage: &storage,
    };
    let mut servers = McpServers::default();
    shipped_sources(loaded, &ctx)
        .into_iter()
        .map(|s| {
            let state = state_of(&loaded.dir, None, &s.key, &s.source);
            let pinned = lock.as_ref().and_then(|l| l.providers.get(&s.key));
            let tools = s
                .tools
                .iter()
                .map(|(instance, underlying, grant)| {
                    let resolved = servers
                        .get_or_start_with(&s.key, || {
                            start(&resolve_shipped(&loaded.dir, &s.key, &s.spec)?, &place)
                        })
                        .and_then(|server| McpTool::new(instance, underlying, grant, server))
                        .map(|tool| McpResolution {
                            server: s.key.clone(),
                            description: tool.description().to_string(),
                            schema: tool.visible_schema().clone(),
                        });
                    (instance.clone(), resolved)
                })
                .collect();
            ShippedState {
                state,
                resolved: pinned.map(|e| e.resolved.clone()),
                sha256: pinned.map(|e| e.sha256.clone()),
                tools,
                shipped: s,
            }
        })
        .collect()
}

/// Resolves the shipped provider `key` (`spec`: a source, or a provider package with its config) to its lock-pinned
/// install, or says why it cannot run and how to fix it.
pub fn resolve_shipped(
    manifest_dir: &Path,
    key: &str,
    spec: &ProviderSpec,
) -> Result<super::Resolved, String> {
    let who = format!("the provider `{key}` a skill ships");
    let Some(source) = spec.source() else {
        return Err(format!(
            "{who} ({}) is not a provider source",
            spec.describe()
        ));
    };
    let ext = super::External {
        handle: key,
        source,
        config: spec.package_config(),
    };
    resolve_as(manifest_dir, None, &ext, &who)
}
