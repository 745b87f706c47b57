//! The context window of a model: the `contextWindow` key of `[harness]` when set, else a small table of the
//! providers' published windows, else unknown.
//!
//! The table is deliberately short and matched by model-id prefix (the longest prefix wins), so a dated or
//! `-latest` id finds its family. It errs on the small side where a model has a larger opt-in window (Claude's
//! 1M-token beta): a window that is too small compacts early, one that is too large overflows. Anything not listed
//! (local servers, proxies with their own names) is unknown, and the usage updates then carry no `size`; set
//! `contextWindow` for it.

/// Published context windows, by provider and model-id prefix.
const KNOWN: &[(&str, &str, u64)] = &[
    ("anthropic", "claude-", 200_000),
    ("openai", "gpt-5-chat", 128_000),
    ("openai", "gpt-5", 400_000),
    ("openai", "gpt-4.1", 1_047_576),
    ("openai", "gpt-4o", 128_000),
    ("openai", "o1", 200_000),
    ("openai", "o3", 200_000),
    ("openai", "o4-mini", 200_000),
];

/// The window of `model` at `provider` (`anthropic` or `openai`) from the table, when listed.
pub fn known_context_window(provider: &str, model: &str) -> Option<u64> {
    KNOWN
        .iter()
        .filter(|(p, prefix, _)| *p == provider && model.starts_with(prefix))
        .max_by_key(|(_, prefix, _)| prefix.len())
        .map(|(_, _, size)| *size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_match_by_longest_prefix() {
        for (provider, model, want) in [
            ("anthropic", "claude-sonnet-4-5-latest", Some(200_000)),
            ("anthropic", "claude-haiku-4-5", Some(200_000)),
            ("openai", "gpt-5.1", Some(400_000)),
            ("openai", "gpt-5-chat-latest", Some(128_000)),
            ("openai", "gpt-4.1-mini", Some(1_047_576)),
            ("openai", "o4-mini-2025-04-16", Some(200_000)),
            ("openai", "llama3.2", None),
            ("openai", "claude-sonnet-4-5", None),
            ("anthropic", "gpt-5", None),
            ("ollama", "claude-x", None),
        ] {
            assert_eq!(
                known_context_window(provider, model),
                want,
                "{provider} {model}"
            );
        }
    }
}
