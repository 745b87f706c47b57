//! A storage layer a provider contributes (runtime/PROVIDERS.md, "Session layers"): `[session] layers = [..., "<handle>"]`
//! where `<handle>` is a `[providers]` source whose `initialize` lists a session. Events the chain stores go to the
//! provider with `session/append`; the history comes back from `session/load`. The provider process is the one the
//! handle's tools use.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use loom_mcp::McpServer;

use crate::session::{Layer, LayerSource, SessionError};
use crate::update::SessionUpdate;

/// The session layers a started provider offers, for the chain to build by name.
#[derive(Debug)]
pub struct ProviderLayers(pub Arc<McpServer>);

impl LayerSource for ProviderLayers {
    fn layer(&self, layer: Option<&str>, session: &str) -> Result<Box<dyn Layer>, SessionError> {
        Ok(Box::new(ProviderLayer::new(
            self.0.clone(),
            layer,
            session,
        )?))
    }
}

/// A provider's storage layer.
pub struct ProviderLayer {
    handle: String,
    layer: String,
    session: String,
    server: Arc<McpServer>,
}

impl std::fmt::Debug for ProviderLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderLayer")
            .field("handle", &self.handle)
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl ProviderLayer {
    /// The layer `layer` (from the spec's `layer` key; else the provider's first session) of the started provider
    /// `server`, storing the session `session` (the agent's storage id).
    pub fn new(
        server: Arc<McpServer>,
        layer: Option<&str>,
        session: &str,
    ) -> Result<ProviderLayer, SessionError> {
        let handle = server.handle.clone();
        let chosen = super::pick_contribution(&server, "sessions", layer, "layer")
            .map_err(|e| SessionError::Config(format!("session: {e}")))?;
        Ok(ProviderLayer {
            handle,
            layer: chosen,
            session: session.to_string(),
            server,
        })
    }

    fn fail(&self, e: String) -> SessionError {
        SessionError::Config(format!(
            "session layer [providers].{} ({}): {e}",
            self.handle, self.layer
        ))
    }
}

impl Layer for ProviderLayer {
    fn name(&self) -> &str {
        &self.handle
    }

    fn stores(&self) -> bool {
        true
    }

    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        let kept: Vec<Json> = events
            .iter()
            .filter(|e| !e.is_frame() && !e.is_progress())
            .map(|e| serde_json::to_value(e).unwrap_or(Json::Null))
            .collect();
        if !kept.is_empty() {
            self.server
                .request(
                    "session/append",
                    json!({ "layer": self.layer, "session": self.session, "messages": kept }),
                )
                .map_err(|e| self.fail(e.to_string()))?;
        }
        Ok(events)
    }

    fn pull(&self, mut below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        let got = self
            .server
            .request(
                "session/load",
                json!({ "layer": self.layer, "session": self.session }),
            )
            .map_err(|e| self.fail(e.to_string()))?;
        let Some(list) = got.get("messages").and_then(Json::as_array) else {
            return Err(self.fail("session/load answered without a `messages` array".into()));
        };
        for (i, m) in list.iter().enumerate() {
            let e: SessionUpdate = serde_json::from_value(m.clone()).map_err(|err| {
                self.fail(format!(
                    "session/load message {i} is not a session event ({err})"
                ))
            })?;
            below.push(e);
        }
        Ok(below)
    }
}
