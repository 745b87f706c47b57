//! `[harness] provider = "local"`: its keys, and which model file they name.

use std::path::{Path, PathBuf};

use loom_local::{known_model, KnownModel, DEFAULT_MODEL, RECOMMENDED_MODEL};

use super::examples::{parse_examples, Example};
use crate::settings::Settings;
use crate::HarnessConfigError;

/// The keys `provider = "local"` takes.
pub(crate) const KEYS: &[&str] = &[
    "provider",
    "model",
    "threads",
    "context",
    "max_tokens",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "maxTurnRequests",
    "tool_choice",
    "examples",
];

/// The default context window, in tokens.
pub const DEFAULT_CONTEXT: u32 = 2048;
/// The default output cap per request, in tokens.
pub const DEFAULT_MAX_TOKENS: u32 = 512;

/// Which model file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModelChoice {
    /// A model from the catalog.
    Known(&'static KnownModel),
    /// A GGUF file the manifest names.
    Path(PathBuf),
    /// `model = "auto"`: the recommended model when it is installed, else the default one (installed if missing),
    /// with a note on how to get the recommended one.
    Auto {
        /// The model wanted.
        recommended: &'static KnownModel,
        /// The one used without it.
        fallback: &'static KnownModel,
    },
}

/// The parsed `[harness]` of a local model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalConfig {
    pub model: ModelChoice,
    pub threads: u32,
    pub context: u32,
    pub max_tokens: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub seed: u32,
    /// `tool_choice = "required"`: every response is a call — the first of a turn to a tool, later ones to a tool
    /// or to the answer step that ends the turn.
    pub required: bool,
    /// Worked turns shown before the conversation (`examples`).
    pub examples: Vec<Example>,
}

fn invalid(m: String) -> HarnessConfigError {
    HarnessConfigError::Invalid(m)
}

fn float(
    config: &toml::Table,
    key: &str,
    default: f32,
    range: std::ops::RangeInclusive<f32>,
) -> Result<f32, HarnessConfigError> {
    match config.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_float()
            .or_else(|| v.as_integer().map(|i| i as f64))
            .map(|f| f as f32)
            .filter(|f| range.contains(f))
            .ok_or_else(|| {
                invalid(format!(
                    "{key} must be a number from {} to {}",
                    range.start(),
                    range.end()
                ))
            }),
    }
}

impl LocalConfig {
    /// Reads `config`; a relative model path resolves against `manifest_dir`.
    pub(crate) fn parse(
        config: &toml::Table,
        manifest_dir: &Path,
    ) -> Result<LocalConfig, HarnessConfigError> {
        let s = Settings::new("local", config, KEYS)?;
        let name = s.string("model", DEFAULT_MODEL)?;
        let model = match known_model(&name) {
            Some(k) => ModelChoice::Known(k),
            None if name == "auto" => {
                match (known_model(RECOMMENDED_MODEL), known_model(DEFAULT_MODEL)) {
                    (Some(recommended), Some(fallback)) => ModelChoice::Auto {
                        recommended,
                        fallback,
                    },
                    _ => {
                        return Err(invalid(
                            "the model catalog has no recommended or default model".into(),
                        ))
                    }
                }
            }
            None if name.ends_with(".gguf") || name.contains('/') => {
                let p = PathBuf::from(&name);
                ModelChoice::Path(if p.is_absolute() {
                    p
                } else {
                    manifest_dir.join(p)
                })
            }
            None => {
                let known: Vec<&str> = loom_local::KNOWN_MODELS.iter().map(|m| m.name).collect();
                return Err(invalid(format!(
                    "model {name:?} is neither a known model ({}), \"auto\" nor a path to a .gguf file",
                    known.join(", ")
                )));
            }
        };
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .unwrap_or(2);
        let threads = s.positive("threads")?.unwrap_or(cores).min(256) as u32;
        let context = s.positive("context")?.unwrap_or(u64::from(DEFAULT_CONTEXT));
        if !(128..=131_072).contains(&context) {
            return Err(invalid(format!(
                "context must be from 128 to 131072 tokens, not {context}"
            )));
        }
        let max_tokens = s
            .positive("max_tokens")?
            .unwrap_or(u64::from(DEFAULT_MAX_TOKENS));
        if max_tokens >= context {
            return Err(invalid(format!(
                "max_tokens ({max_tokens}) must be smaller than context ({context}), or no prompt fits"
            )));
        }
        let top_k = s.positive("top_k")?.unwrap_or(40).min(100_000) as i32;
        let seed = match config.get("seed") {
            None => 0x5eed,
            Some(v) => v
                .as_integer()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid("seed must be an integer from 0 to 4294967295".into()))?,
        };
        let required = match s.string("tool_choice", "auto")?.as_str() {
            "auto" => false,
            "required" => true,
            other => {
                return Err(invalid(format!(
                    "tool_choice must be \"auto\" (the model calls a tool when it opens a call) or \"required\" \
                     (every response is a call; the turn ends with a call to the answer step), not {other:?}"
                )))
            }
        };
        Ok(LocalConfig {
            model,
            required,
            threads,
            context: context as u32,
            max_tokens: max_tokens as u32,
            temperature: float(config, "temperature", 0.2, 0.0..=2.0)?,
            top_k,
            top_p: float(config, "top_p", 0.95, 0.01..=1.0)?,
            seed,
            examples: parse_examples(config)?,
        })
    }
}
