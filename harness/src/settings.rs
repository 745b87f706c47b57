//! Reading the `[harness]` keys the HTTP harnesses share, with one set of messages.

use super::HarnessConfigError;

/// How hard a reasoning model thinks (`effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// Little or no reasoning.
    Low,
    /// Some.
    Medium,
    /// Much.
    High,
}

impl Effort {
    /// The word the APIs use.
    pub fn word(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// A `[harness]` table whose keys were checked against the provider's known keys.
pub(crate) struct Settings<'a> {
    config: &'a toml::Table,
}

fn invalid(message: String) -> HarnessConfigError {
    HarnessConfigError::Invalid(message)
}

impl<'a> Settings<'a> {
    /// Refuses a key outside `keys` (whose first entry, `provider`, is not listed in the message).
    pub(crate) fn new(
        provider: &str,
        config: &'a toml::Table,
        keys: &[&str],
    ) -> Result<Self, HarnessConfigError> {
        if let Some(k) = config.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(invalid(format!(
                "unknown key {k:?} for provider \"{provider}\" (known: {})",
                keys.get(1..).unwrap_or_default().join(", ")
            )));
        }
        Ok(Settings { config })
    }

    /// A non-empty string, or `default`.
    pub(crate) fn string(&self, key: &str, default: &str) -> Result<String, HarnessConfigError> {
        match self.config.get(key) {
            None => Ok(default.to_string()),
            Some(v) => v
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
                .ok_or_else(|| invalid(format!("{key} must be a non-empty string"))),
        }
    }

    /// `apiBase` (or `default`) without a trailing `/`; it must be an http(s) URL.
    pub(crate) fn api_base(&self, default: &str) -> Result<String, HarnessConfigError> {
        let base = self
            .string("apiBase", default)?
            .trim_end_matches('/')
            .to_string();
        if base.starts_with("https://") || base.starts_with("http://") {
            Ok(base)
        } else {
            Err(invalid(format!(
                "apiBase {base:?} must start with https:// (or http:// for a local server or proxy)"
            )))
        }
    }

    /// A positive integer, if set.
    pub(crate) fn positive(&self, key: &str) -> Result<Option<u64>, HarnessConfigError> {
        self.config
            .get(key)
            .map(|v| {
                v.as_integer()
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| invalid(format!("{key} must be a positive integer")))
            })
            .transpose()
    }

    /// `effort`: `low`, `medium` or `high`, if set (how hard a reasoning model thinks; a subagent profile's `effort`
    /// lands here).
    pub(crate) fn effort(&self) -> Result<Option<Effort>, HarnessConfigError> {
        match self.config.get("effort") {
            None => Ok(None),
            Some(v) => match v.as_str() {
                Some("low") => Ok(Some(Effort::Low)),
                Some("medium") => Ok(Some(Effort::Medium)),
                Some("high") => Ok(Some(Effort::High)),
                _ => Err(invalid(format!(
                    "effort must be \"low\", \"medium\" or \"high\", not {v}"
                ))),
            },
        }
    }

    /// A boolean, or `default`.
    pub(crate) fn flag(&self, key: &str, default: bool) -> Result<bool, HarnessConfigError> {
        match self.config.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| invalid(format!("{key} must be true or false"))),
        }
    }
}
