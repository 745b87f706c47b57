//! `loom explain`: what the turn loop would decide about one call, without a model and without running the call.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::{ExplainRefusal, Explanation};
use crate::boot::{boot_with, BootError, BootOptions, Prebuilt};
use crate::harness::{EventStream, Harness, HarnessError};
use crate::load::load_manifest;
use crate::model::ModelRequest;

/// Why a call could not be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The agent does not boot (the same error `loom prompt` would give).
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The tool is unknown or refuses the input before any decision.
    #[error(transparent)]
    Call(#[from] ExplainRefusal),
    /// No async runtime could be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// The provider slot of an agent booted to be explained: `loom explain` never calls a model, so every request is
/// refused (nothing calls it; the slot only has to be filled without the real provider's key).
struct NoModel;

impl Harness for NoModel {
    fn name(&self) -> &str {
        "none (loom explain)"
    }

    fn stream(
        &self,
        _request: ModelRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        Box::pin(async {
            Err(HarnessError::Protocol {
                message: "loom explain never calls a model".into(),
            })
        })
    }
}

/// Boots the agent at `manifest` as `loom prompt` would — tools, grants, the law check, `[permissions]`, remembered
/// answers, the session — except for the model provider, and explains a call of `tool` with `input`. The agent is
/// headless, as in `loom prompt`. Returns the explanation and boot's notes.
pub fn explain_call(
    manifest: &Path,
    tool: &str,
    input: &serde_json::Value,
    opts: BootOptions,
) -> Result<(Explanation, Vec<String>), ExplainError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ExplainError::Runtime)?;
    rt.block_on(async {
        let loaded = Arc::new(load_manifest(manifest).map_err(BootError::from)?);
        let prebuilt = Prebuilt {
            harness: Some(Arc::new(NoModel)),
            layers: Vec::new(),
        };
        let booted = boot_with(loaded, opts, prebuilt)?;
        let explanation = booted.agent.explain(tool, input)?;
        Ok((explanation, booted.notes))
    })
}
