//! Boot's harness step: the SDK's instance, a sub-agent's `small-model-of-parent`, a harness a provider process
//! contributes, or a vendor from `[harness]`; then the harness server tools it must offer.

use std::sync::Arc;

use loom_kernel::ProviderRef;

use super::context::Boot;
use super::BootError;
use crate::harness::{
    build_harness_in, max_turn_requests_of, small_model_of_parent, Harness, HarnessConfigError,
};
use crate::providers::{provider_source, resolve_and_start, ProviderHarness, ProviderPlace};

impl Boot {
    /// A harness error naming the manifest; a missing key says where to put it (by the user secrets file's real
    /// path and the keychain's state).
    fn harness_err(&self, source: HarnessConfigError) -> BootError {
        BootError::Harness {
            file: self.file.clone(),
            source: match source {
                HarnessConfigError::MissingSecret(name) => HarnessConfigError::Invalid(format!(
                    "needs the secret {name}: {}",
                    self.chain.missing_hint(std::slice::from_ref(&name))
                )),
                other => other,
            },
        }
    }

    /// Builds the manifest's named harnesses (`[harnesses.NAME]`, built-in providers only) into [`Boot::named`];
    /// one that cannot be built stops boot, naming it.
    pub(super) fn named_harnesses(&mut self) -> Result<(), BootError> {
        let loaded = self.loaded.clone();
        let place = crate::harness::HarnessPlace {
            manifest_dir: loaded.dir.clone(),
            env: self.env.clone(),
            models_dir: Some(crate::storage::models_dir(&self.env)),
        };
        for (name, spec) in &loaded.manifest.harnesses {
            let (h, _) = build_harness_in(Some(spec), &self.chain, &place).map_err(|e| {
                let why = match self.harness_err(e) {
                    BootError::Harness { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                BootError::Refused {
                    file: self.file.clone(),
                    key: format!("harnesses.{name}"),
                    message: why
                        .trim_start_matches("[harness]: ")
                        .trim_start_matches("[harness] ")
                        .to_string(),
                }
            })?;
            self.named.0.insert(name.clone(), h);
        }
        Ok(())
    }

    /// Builds the harness and its `maxTurnRequests`; `prebuilt` is the SDK's instance, `server_tools` the wire
    /// definitions of the harness server tools the grants allow.
    pub(super) fn harness(
        &mut self,
        prebuilt: Option<Arc<dyn Harness>>,
        server_tools: Vec<serde_json::Value>,
    ) -> Result<(Arc<dyn Harness>, u32), BootError> {
        let loaded = self.loaded.clone();
        let m = &loaded.manifest;
        // a harness a provider contributes: the same process as the handle's tools and session layers
        let provided = m
            .harness
            .as_ref()
            .and_then(|h| provider_source(m, &ProviderRef::Handle(h.provider.clone())));
        let (harness, max_turn_requests) = match (
            prebuilt,
            m.harness.as_ref(),
            &self.opts.lineage.parent_harness,
            provided,
        ) {
            (Some(instance), h, _, _) => (
                instance,
                max_turn_requests_of(h).map_err(|e| self.harness_err(e))?,
            ),
            (None, Some(h), Some((parent, max)), _) if h.provider == "small-model-of-parent" => (
                small_model_of_parent(h, parent.as_ref()).map_err(|e| self.harness_err(e))?,
                *max,
            ),
            (None, Some(h), _, Some(ext)) => {
                let max = max_turn_requests_of(Some(h)).map_err(|e| self.harness_err(e))?;
                let place = ProviderPlace {
                    cwd: &self.cwd,
                    env: &self.env,
                    storage: &self.storage,
                };
                let server = self
                    .servers
                    .get_or_start_with(ext.handle, || resolve_and_start(&loaded.dir, &ext, &place))
                    .map_err(|e| {
                        self.harness_err(HarnessConfigError::Invalid(format!("[harness]: {e}")))
                    })?;
                let name = h.config.get("harness").and_then(toml::Value::as_str);
                let harness =
                    ProviderHarness::new(server, name).map_err(|e| self.harness_err(e))?;
                (Arc::new(harness) as Arc<dyn Harness>, max)
            }
            _ => build_harness_in(
                m.harness.as_ref(),
                &self.chain,
                &crate::harness::HarnessPlace {
                    manifest_dir: loaded.dir.clone(),
                    env: self.env.clone(),
                    models_dir: Some(crate::storage::models_dir(&self.env)),
                },
            )
            .map_err(|e| self.harness_err(e))?,
        };
        let harness = if server_tools.is_empty() {
            harness
        } else {
            harness
                .with_server_tools(server_tools)
                .ok_or_else(|| BootError::Harness {
                    file: self.file.clone(),
                    source: HarnessConfigError::Invalid(format!(
                        "web_search / web_fetch = \"anthropic\" are Anthropic server tools, but the harness is \
                         {:?}; use [harness] provider = \"anthropic\", or web_search = \"builtin\"",
                        harness.name()
                    )),
                })?
        };
        // spawn_subagent reaches the harness through this cell (a sub-agent's small-model-of-parent clones it)
        let _ = self.harness_cell.set((harness.clone(), max_turn_requests));
        Ok((harness, max_turn_requests))
    }
}
