//! The provider seam: a [`Harness`] streams the events of ONE model request, and [`HarnessError`] classifies why a
//! request failed, for the retry policy. The vendors implement it in `loom-harness`; the turn loop in
//! `loom-runtime` drives it. A harness never runs a tool, never retries on its own and never decides authority.

use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::model::{ModelEvent, ModelRequest};

/// The events of one response. The stream ends after `MessageEnd` (or an error).
pub type EventStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, HarnessError>> + Send>>;

/// A model provider.
pub trait Harness: Send + Sync {
    /// The provider name (`anthropic`, `test`, …), for messages.
    fn name(&self) -> &str;

    /// Starts one request. The returned future resolves once the provider accepted the request (for HTTP: the
    /// response headers arrived); errors before that point are what the retry policy may retry. `cancel` ends the
    /// request and its stream.
    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>>;

    /// The model requests go to (the configured `model`, or the provider's default), for hosts to show (ACP's model
    /// config option). `None`: this provider does not say.
    fn model(&self) -> Option<String> {
        None
    }

    /// This provider with another model and everything else (endpoint, key, limits) unchanged, for a sub-agent's
    /// `small-model-of-parent` harness. `None`: this provider cannot switch models.
    fn with_model(&self, _model: &str) -> Option<std::sync::Arc<dyn Harness>> {
        None
    }

    /// The context window of the model in use, in tokens, when known (the `contextWindow` key, else the
    /// provider's table; see `loom_harness::known_context_window`). Usage updates carry it as `size`.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// The model this provider recommends for cheap sub-tasks (`small-model-of-parent` without a `model`).
    fn small_model(&self) -> Option<String> {
        None
    }

    /// This provider offering the model its own server tools (`web_search = "anthropic"`): `tools` are the wire
    /// definitions, limits already decided by the kernel. `None`: this provider has no server tools.
    fn with_server_tools(
        &self,
        _tools: Vec<serde_json::Value>,
    ) -> Option<std::sync::Arc<dyn Harness>> {
        None
    }
}

/// Why a request failed, classified for the retry policy. Messages never hold secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// 429: too many requests.
    #[error("rate limited: {message}")]
    RateLimited {
        /// What the provider said.
        message: String,
        /// The provider's `retry-after-ms` / `retry-after`, when sent.
        retry_after: Option<Duration>,
    },
    /// 529 or an `overloaded_error`.
    #[error("the provider is overloaded: {message}")]
    Overloaded {
        /// What the provider said.
        message: String,
        /// The provider's retry hint, when sent.
        retry_after: Option<Duration>,
    },
    /// The connection failed or dropped.
    #[error("network error: {message}")]
    Network {
        /// What failed.
        message: String,
    },
    /// Another HTTP error status.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// What the provider said.
        message: String,
        /// The provider's retry hint, when sent.
        retry_after: Option<Duration>,
    },
    /// 401/403: the credentials were refused. Never retried.
    #[error("authentication failed: {message}; check the API key in your secret store")]
    Auth {
        /// What the provider said.
        message: String,
    },
    /// The prompt does not fit the context window. Never retried.
    #[error("the conversation no longer fits the model's context window: {message}; start a new session")]
    ContextOverflow {
        /// What the provider said.
        message: String,
    },
    /// The provider sent something this harness cannot read, or the harness is misconfigured.
    #[error("protocol error: {message}")]
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl HarnessError {
    /// True for the failures the retry policy may retry: rate limits, overloads, network errors and 5xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            HarnessError::RateLimited { .. }
            | HarnessError::Overloaded { .. }
            | HarnessError::Network { .. } => true,
            HarnessError::Http { status, .. } => (500..600).contains(status),
            HarnessError::Auth { .. }
            | HarnessError::ContextOverflow { .. }
            | HarnessError::Protocol { .. }
            | HarnessError::Cancelled => false,
        }
    }

    /// The provider's retry hint, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HarnessError::RateLimited { retry_after, .. }
            | HarnessError::Overloaded { retry_after, .. }
            | HarnessError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
