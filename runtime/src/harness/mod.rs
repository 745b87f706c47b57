//! Harnesses: model provider adapters that stream the events of ONE request. The runtime owns the turn loop (see
//! [`crate::Agent`]); a harness never runs a tool, never retries on its own and never decides authority.
//!
//! ## Adding a provider
//! An HTTP harness (the Anthropic Messages SSE stream, the OpenAI Responses stream, Chat Completions for
//! `openai-chat`) is one more module here implementing [`Harness`]: map [`ModelRequest`] onto the wire, map the
//! stream back onto [`ModelEvent`]s, classify failures as [`HarnessError`] (rate limits and overloads carry the
//! provider's `retry-after-ms` / `retry-after`; an error that arrives after HTTP 200 is still classified), and end
//! the stream promptly when the cancellation token fires. Register it in [`build_harness`]. Nothing in the loop
//! changes. [`classify_http`] and [`SseParser`] are the shared pure pieces (status/body -> error class; bytes ->
//! events).

mod anthropic;
#[cfg(test)]
mod bounds_tests;
mod client;
mod context_window;
#[cfg(test)]
pub(crate) mod fake_server;
mod http;
pub mod local;
mod openai;
mod openai_chat;
mod provider;
mod settings;
mod test;

use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::model::{ModelEvent, ModelRequest};

pub use anthropic::{
    request_body as anthropic_request_body, AnthropicConfig, AnthropicDecoder, AnthropicHarness,
    ANTHROPIC_API_KEY, ANTHROPIC_DEFAULT_API_BASE, ANTHROPIC_DEFAULT_MAX_TOKENS,
    ANTHROPIC_DEFAULT_MODEL, ANTHROPIC_VERSION,
};
pub use context_window::known_context_window;
pub use http::{
    classify_http, SseEvent, SseLimits, SseParser, MAX_SSE_EVENT, MAX_SSE_LINE, MAX_SSE_STREAM,
};
pub use openai::{responses_request_body, OpenAiConfig, OpenAiHarness, ResponsesDecoder};
pub use openai_chat::{
    chat_request_body, ChatDecoder, OpenAiChatConfig, OpenAiChatHarness, OPENAI_API_KEY,
    OPENAI_DEFAULT_API_BASE, OPENAI_DEFAULT_MODEL,
};
pub use provider::ProviderHarness;
pub use test::{TestHarness, TestStep, TestTurn};

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
    /// provider's table; see [`known_context_window`]). Usage updates carry it as `size`.
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

/// Parses the retry hint of an HTTP response: `retry-after-ms` (milliseconds) wins over `retry-after` (seconds;
/// an HTTP date is not supported and reads as no hint).
pub fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_millis(ms as u64));
        }
    }
    let secs = retry_after.and_then(|v| v.trim().parse::<f64>().ok())?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_millis((secs * 1000.0) as u64))
}

/// Why a harness could not be built from `[harness]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessConfigError {
    /// The manifest has no `[harness]`.
    #[error("the manifest has no [harness]; add one, e.g. [harness] provider = \"anthropic\"")]
    Missing,
    /// The provider is known but this build does not implement it yet.
    #[error("[harness] provider = {0:?} is not supported yet by this build of loom (supported: \"anthropic\", \"openai\", \"openai-chat\", \"local\", \"test\")")]
    NotSupported(String),
    /// The provider needs a secret the chain does not hold.
    #[error("[harness] needs the secret {0}: set it in the environment ({0}=… or LOOM_{0}=…), your user secrets file ($XDG_CONFIG_HOME/loom/secrets.toml, else ~/.config/loom/secrets.toml: {0} = \"…\"), or the OS keychain")]
    MissingSecret(String),
    /// The config is wrong.
    #[error("[harness]: {0}")]
    Invalid(String),
}

/// The default `maxTurnRequests`.
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 16;

/// Where a harness is built: the manifest's directory (a local model's relative path) and the environment loom
/// runs in (the data directory a known local model is installed into).
#[derive(Debug, Clone, Default)]
pub struct HarnessPlace {
    /// The manifest's directory.
    pub manifest_dir: std::path::PathBuf,
    /// The environment map.
    pub env: std::collections::BTreeMap<String, String>,
}

/// Builds the harness `[harness]` names, with its `maxTurnRequests`. API keys come only from `secrets` (the
/// standard chain); a harness never reads the environment for them itself.
pub fn build_harness(
    harness: Option<&loom_kernel::Harness>,
    secrets: &crate::secrets::SecretChain,
) -> Result<(std::sync::Arc<dyn Harness>, u32), HarnessConfigError> {
    build_harness_in(harness, secrets, &HarnessPlace::default())
}

/// [`build_harness`] for a manifest at `place`.
pub fn build_harness_in(
    harness: Option<&loom_kernel::Harness>,
    secrets: &crate::secrets::SecretChain,
    place: &HarnessPlace,
) -> Result<(std::sync::Arc<dyn Harness>, u32), HarnessConfigError> {
    let h = harness.ok_or(HarnessConfigError::Missing)?;
    let max = max_turn_requests_of(Some(h))?;
    match h.provider.as_str() {
        "local" => Ok((
            std::sync::Arc::new(local::LocalHarness::from_config(
                &h.config,
                &place.manifest_dir,
                &place.env,
                max,
            )?),
            max,
        )),
        "test" => Ok((
            std::sync::Arc::new(TestHarness::from_config(&h.config)?),
            max,
        )),
        "anthropic" => Ok((
            std::sync::Arc::new(AnthropicHarness::from_config(&h.config, secrets)?),
            max,
        )),
        "openai" => Ok((
            std::sync::Arc::new(OpenAiHarness::from_config(&h.config, secrets)?),
            max,
        )),
        "openai-chat" => Ok((
            std::sync::Arc::new(OpenAiChatHarness::from_config(&h.config, secrets)?),
            max,
        )),
        "small-model-of-parent" => Err(HarnessConfigError::Invalid(
            "provider \"small-model-of-parent\" clones the harness of the agent that spawns this one, so it works \
             only in a sub-agent's manifest; name a provider such as \"anthropic\" here"
                .into(),
        )),
        other => Err(HarnessConfigError::NotSupported(other.to_string())),
    }
}

/// `maxTurnRequests` of `[harness]` (the default when absent or when there is no `[harness]`).
pub fn max_turn_requests_of(
    harness: Option<&loom_kernel::Harness>,
) -> Result<u32, HarnessConfigError> {
    match harness.and_then(|h| h.config.get("maxTurnRequests")) {
        None => Ok(DEFAULT_MAX_TURN_REQUESTS),
        Some(v) => v
            .as_integer()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                HarnessConfigError::Invalid("maxTurnRequests must be a positive integer".into())
            }),
    }
}

/// A sub-agent's `small-model-of-parent` harness: the parent's provider with `model`, or the model the parent's
/// provider recommends for small tasks. The secrets are the parent's (no separate secret slot).
pub fn small_model_of_parent(
    harness: &loom_kernel::Harness,
    parent: &dyn Harness,
) -> Result<std::sync::Arc<dyn Harness>, HarnessConfigError> {
    let model = match harness.config.get("model") {
        Some(toml::Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(_) => return Err(HarnessConfigError::Invalid("model must be a non-empty string".into())),
        None => parent.small_model().ok_or_else(|| {
            HarnessConfigError::Invalid(format!(
                "the parent's {:?} harness recommends no small model; set model = \"...\" under [harness]",
                parent.name()
            ))
        })?,
    };
    parent.with_model(&model).ok_or_else(|| {
        HarnessConfigError::Invalid(format!(
            "the parent's {:?} harness cannot switch models, so small-model-of-parent cannot clone it; give the \
             sub-agent a harness of its own",
            parent.name()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        assert_eq!(
            parse_retry_after(Some("1500"), Some("9")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(None, Some("2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(parse_retry_after(Some("-1"), None), None);
    }

    #[test]
    fn classification() {
        assert!(HarnessError::Http {
            status: 503,
            message: String::new(),
            retry_after: None
        }
        .is_retryable());
        assert!(!HarnessError::Http {
            status: 400,
            message: String::new(),
            retry_after: None
        }
        .is_retryable());
        assert!(!HarnessError::Auth {
            message: String::new()
        }
        .is_retryable());
        assert!(!HarnessError::ContextOverflow {
            message: String::new()
        }
        .is_retryable());
    }

    #[test]
    fn small_model_of_parent_is_refused_at_the_top_level_and_missing_harnesses_are_named() {
        let h = loom_kernel::Harness {
            provider: "small-model-of-parent".into(),
            config: toml::Table::new(),
        };
        let err = build_harness(Some(&h), &crate::secrets::SecretChain::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("only in a sub-agent's manifest"), "{err}");
        assert!(matches!(
            build_harness(None, &crate::secrets::SecretChain::default()),
            Err(HarnessConfigError::Missing)
        ));
    }

    #[test]
    fn small_model_of_parent_needs_a_parent_that_can_switch_models() {
        let h = |config: &str| loom_kernel::Harness {
            provider: "small-model-of-parent".into(),
            config: toml::from_str(config).unwrap(),
        };
        let test = TestHarness::echo();
        let err = small_model_of_parent(&h(""), &test)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("recommends no small model"), "{err}");
        let err = small_model_of_parent(&h("model = \"m\""), &test)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot switch models"), "{err}");
    }
}
