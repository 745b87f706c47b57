//! Boot's session step: the chain `[session]` declares, with the session layers a provider process contributes
//! (started now; its tools share the process).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use loom_kernel::ProviderRef;

use super::context::Boot;
use super::BootError;
use crate::providers::{provider_source, resolve_and_start, ProviderLayers, ProviderPlace};
use crate::session::{
    build_chain_with, Chain, Layer, LayerSource, SessionError, SessionPlace, SkillsEnv,
};

impl Boot {
    /// Builds the session chain; `prebuilt` holds the SDK's layer instances by position.
    pub(super) fn session(
        &mut self,
        prebuilt: Vec<Option<Box<dyn Layer>>>,
    ) -> Result<Chain, BootError> {
        let loaded = self.loaded.clone();
        let m = &loaded.manifest;
        // a session layer named by a provider handle: the provider starts now, and its tools share the process
        let mut session_providers = BTreeMap::new();
        for spec in &m.session.layers {
            let Some(ext) = provider_source(m, &ProviderRef::Handle(spec.provider.clone())) else {
                continue;
            };
            let place = ProviderPlace {
                cwd: &self.cwd,
                env: &self.env,
                storage: &self.storage,
            };
            let server = self
                .servers
                .get_or_start_with(ext.handle, || resolve_and_start(&loaded.dir, &ext, &place))
                .map_err(|e| BootError::Session {
                    file: self.file.clone(),
                    source: SessionError::Config(format!("session: {e}")),
                })?;
            session_providers.insert(
                ext.handle.to_string(),
                Arc::new(ProviderLayers(server)) as Arc<dyn LayerSource>,
            );
        }
        let place = SessionPlace {
            manifest_dir: loaded.dir.clone(),
            storage: self.storage.clone(),
            parent_history: self.opts.lineage.parent_history.clone(),
            skills: SkillsEnv::for_manifest(
                m,
                self.ctx.home.as_ref().map(PathBuf::from),
                &self.env,
            ),
            providers: session_providers,
            harnesses: self.named.clone(),
        };
        let (session, session_notes) =
            build_chain_with(&m.session, &place, prebuilt).map_err(|source| {
                BootError::Session {
                    file: self.file.clone(),
                    source,
                }
            })?;
        self.notes.extend(session_notes);
        self.notes.extend(session.notes());
        Ok(session)
    }
}
