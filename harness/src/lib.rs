//! # loom-harness: the model vendors
//!
//! Each vendor adapts one provider to [`loom_protocol::Harness`] and streams the events of ONE request: the
//! Anthropic Messages SSE stream (`anthropic`), the OpenAI Responses stream (`openai`), Chat Completions for any
//! compatible server (`openai-chat`), a local GGUF model in a `loom-engine` process (`local`), and the scripted
//! harness tests use (`test`, in [`TestHarness`]). [`build_harness`] is the registry `[harness] provider = …` names.
//!
//! ## Adding a provider
//! One more module here implementing [`Harness`]: map [`ModelRequest`](loom_protocol::ModelRequest) onto the wire,
//! map the stream back onto [`ModelEvent`](loom_protocol::ModelEvent)s, classify failures as [`HarnessError`] (rate
//! limits and overloads carry the provider's `retry-after-ms` / `retry-after`; an error that arrives after HTTP 200
//! is still classified), and end the stream promptly when the cancellation token fires. Register it in
//! [`build_harness`]. Nothing in the turn loop changes. [`classify_http`] and [`SseParser`] are the shared pure
//! pieces (status/body -> error class; bytes -> events).
//!
//! ## What this crate must never do
//! Run a tool, retry on its own, or decide authority: the runtime's turn loop owns all three and asks the kernel.
//! Read the environment for an API key (keys come only through [`loom_protocol::SecretLookup`]), or put a key into
//! a log, an error or a `Debug` string. A harness a provider process contributes is not here: it is the runtime's
//! (`providers/harness.rs`), beside the process it talks to.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod anthropic;
#[cfg(test)]
mod bounds_tests;
mod client;
mod context_window;
// test support for other crates' tests (the `testing` feature): a failed set-up panics the test, as it should
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
#[expect(
    clippy::unwrap_used,
    reason = "test support: a failed set-up panics the test"
)]
pub mod fake_server;
mod http;
pub mod local;
mod openai;
mod openai_chat;
mod scripted;
mod settings;

use std::time::Duration;

pub use loom_protocol::harness::{EventStream, Harness, HarnessError};
use loom_protocol::{model, SecretLookup};

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
pub use scripted::{TestHarness, TestStep, TestTurn};

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
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = loom_kernel::DEFAULT_MAX_TURN_REQUESTS;

/// Where a harness is built: the manifest's directory (a local model's relative path) and the environment loom
/// runs in (the data directory a known local model is installed into).
#[derive(Debug, Clone, Default)]
pub struct HarnessPlace {
    /// The manifest's directory.
    pub manifest_dir: std::path::PathBuf,
    /// The environment map.
    pub env: std::collections::BTreeMap<String, String>,
    /// loom's models directory, where a known local model is found or installed (`None`: a known model is refused).
    pub models_dir: Option<std::path::PathBuf>,
}

/// Builds the harness `[harness]` names, with its `maxTurnRequests`. API keys come only from `secrets` (the
/// standard chain); a harness never reads the environment for them itself.
pub fn build_harness(
    harness: Option<&loom_kernel::HarnessSpec>,
    secrets: &dyn SecretLookup,
) -> Result<(std::sync::Arc<dyn Harness>, u32), HarnessConfigError> {
    build_harness_in(harness, secrets, &HarnessPlace::default())
}

/// [`build_harness`] for a manifest at `place`.
pub fn build_harness_in(
    harness: Option<&loom_kernel::HarnessSpec>,
    secrets: &dyn SecretLookup,
    place: &HarnessPlace,
) -> Result<(std::sync::Arc<dyn Harness>, u32), HarnessConfigError> {
    let h = harness.ok_or(HarnessConfigError::Missing)?;
    let max = max_turn_requests_of(Some(h))?;
    match h.provider.as_str() {
        "local" => Ok((
            std::sync::Arc::new(local::LocalHarness::from_config(
                &h.config,
                &place.manifest_dir,
                place.models_dir.as_deref(),
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
    harness: Option<&loom_kernel::HarnessSpec>,
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

/// Why a harness server tool has no wire definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerToolError {
    /// The harness runs no such tool.
    #[error(
        "the harness {harness:?} has no server tool {tool:?} (anthropic has web_search and web_fetch)"
    )]
    NoSuchTool {
        /// The harness provider.
        harness: String,
        /// The tool asked for.
        tool: String,
    },
    /// Its grant cannot be sent as the provider's limits.
    #[error(transparent)]
    Limits(#[from] loom_kernel::ServerToolLimitError),
}

/// The wire definition of harness server tool `underlying` (`web_search`, `web_fetch`) of harness `harness`, with the
/// limits the kernel derives from its grant.
pub fn server_tool_definition(
    harness: &str,
    underlying: &str,
    grant: &loom_kernel::Grant,
) -> Result<serde_json::Value, ServerToolError> {
    let ty = match (harness, underlying) {
        ("anthropic", "web_search") => "web_search_20250305",
        ("anthropic", "web_fetch") => "web_fetch_20250910",
        _ => {
            return Err(ServerToolError::NoSuchTool {
                harness: harness.to_string(),
                tool: underlying.to_string(),
            })
        }
    };
    let mut def = loom_kernel::server_tool_limits(underlying, grant)?;
    def.insert("type".into(), ty.into());
    def.insert("name".into(), underlying.into());
    Ok(serde_json::Value::Object(def))
}

/// A sub-agent's `small-model-of-parent` harness: the parent's provider with `model`, or the model the parent's
/// provider recommends for small tasks. The secrets are the parent's (no separate secret slot).
pub fn small_model_of_parent(
    harness: &loom_kernel::HarnessSpec,
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
        let h = loom_kernel::HarnessSpec {
            provider: "small-model-of-parent".into(),
            config: toml::Table::new(),
        };
        let err = build_harness(Some(&h), &loom_runtime::SecretChain::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("only in a sub-agent's manifest"), "{err}");
        assert!(matches!(
            build_harness(None, &loom_runtime::SecretChain::default()),
            Err(HarnessConfigError::Missing)
        ));
    }

    #[test]
    fn small_model_of_parent_needs_a_parent_that_can_switch_models() {
        let h = |config: &str| loom_kernel::HarnessSpec {
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
