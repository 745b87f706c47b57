//! `[harness]`: which model provider drives the turn, and its construction config.

use std::collections::BTreeMap;

use super::error::{index, join, Ctx, ManifestError};
use super::tools::ToolEntry;
use super::typed::{check_schema, want_name, Ty};

/// `[harness]`: `provider` plus that provider's config.
///
/// Specification: the builtin harnesses have closed config key sets with typed values; any other provider name is an
/// external harness whose config stays open (its factory validates it).
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessSpec {
    /// The harness factory (`anthropic`, `openai`, ... or an external provider).
    pub provider: String,
    /// Every key but `provider`.
    pub config: toml::Table,
}

/// True for a builtin harness (one whose config keys are closed).
pub(crate) fn is_builtin_harness(provider: &str) -> bool {
    builtin_harness_schema(provider).is_some()
}

/// The closed config schema of a builtin harness, or `None` for an external one.
pub(crate) fn builtin_harness_schema(provider: &str) -> Option<&'static [(&'static str, Ty)]> {
    Some(match provider {
        "anthropic" => &[
            ("model", Ty::Str),
            ("apiBase", Ty::Str),
            ("maxTokens", Ty::Count),
            ("maxTurnRequests", Ty::Count),
            ("stream", Ty::Bool),
            ("contextWindow", Ty::Count),
            ("thinkingBudget", Ty::Count),
            ("effort", Ty::Str),
        ],
        "openai" => &[
            ("model", Ty::Str),
            ("apiBase", Ty::Str),
            ("maxOutputTokens", Ty::Count),
            ("maxTurnRequests", Ty::Count),
            ("stream", Ty::Bool),
            ("contextWindow", Ty::Count),
            ("effort", Ty::Str),
        ],
        "openai-chat" => &[
            ("model", Ty::Str),
            ("apiBase", Ty::Str),
            ("maxOutputTokens", Ty::Count),
            ("maxTurnRequests", Ty::Count),
            ("stream", Ty::Bool),
            ("contextWindow", Ty::Count),
        ],
        "small-model-of-parent" => &[("model", Ty::Str)],
        "test" => &[
            ("echo", Ty::Bool),
            ("script", Ty::Array),
            ("maxTurnRequests", Ty::Count),
        ],
        "local" => &[
            ("model", Ty::Str),
            ("threads", Ty::Count),
            ("context", Ty::Count),
            ("max_tokens", Ty::Count),
            ("temperature", Ty::Number),
            ("top_p", Ty::Number),
            ("top_k", Ty::Count),
            ("seed", Ty::Count),
            ("maxTurnRequests", Ty::Count),
            ("tool_choice", Ty::Str),
            ("examples", Ty::Array),
        ],
        _ => return None,
    })
}

/// Parses the harness table found at `path`.
pub(crate) fn parse_harness(
    ctx: Ctx<'_>,
    path: &str,
    table: &toml::Table,
) -> Result<HarnessSpec, ManifestError> {
    let provider = match table.get("provider") {
        Some(v) => want_name(ctx, &join(path, "provider"), v)?.to_string(),
        None => {
            return Err(ctx
                .err(
                    &join(path, "provider"),
                    "missing; a harness names its provider",
                )
                .with_hint("provider = \"anthropic\""))
        }
    };
    let mut config = table.clone();
    config.remove("provider");
    if let Some(schema) = builtin_harness_schema(&provider) {
        check_schema(ctx, path, &config, schema)?;
    }
    Ok(HarnessSpec { provider, config })
}

/// A local harness's worked `examples` call only the agent's own tools: one calling another would show the model a
/// tool it cannot call (the harness checks the rest of each example's shape when it is built).
pub(crate) fn check_example_tools(
    ctx: Ctx<'_>,
    path: &str,
    harness: &HarnessSpec,
    tools: &BTreeMap<String, ToolEntry>,
) -> Result<(), ManifestError> {
    if harness.provider != "local" {
        return Ok(());
    }
    let Some(list) = harness
        .config
        .get("examples")
        .and_then(toml::Value::as_array)
    else {
        return Ok(());
    };
    for (i, example) in list.iter().enumerate() {
        let Some(calls) = example.get("calls").and_then(toml::Value::as_array) else {
            continue;
        };
        for (j, call) in calls.iter().enumerate() {
            let Some(name) = call.get("tool").and_then(toml::Value::as_str) else {
                continue;
            };
            if !tools.contains_key(name) {
                let calls_path = join(&index(&join(path, "examples"), i), "calls");
                let names: Vec<&str> = tools.keys().map(String::as_str).collect();
                return Err(ctx
                    .err(
                        &join(&index(&calls_path, j), "tool"),
                        format!("names {name:?}, which is not one of the agent's [tools]"),
                    )
                    .with_hint(format!("call one of: {}", names.join(", "))));
            }
        }
    }
    Ok(())
}
