//! `[harnesses.NAME]` (named harnesses beside `[harness]`) and `[supervisor]` (sending the model back while its
//! working record has unfinished work).
//!
//! ```toml
//! [harnesses.cheap]
//! provider = "anthropic"
//! model = "claude-haiku-4-5"
//!
//! [supervisor]
//! enabled = true
//! max_rounds = 3          # times a turn is sent back, 1 to 20 (default 3)
//! review = "cheap"        # a named harness that judges completion claims (optional)
//! review_budget = 2       # its requests per turn, 1 to 10 (default 2)
//! ```

use std::collections::BTreeMap;

use super::agent::is_safe_id;
use super::error::{join, Ctx, ManifestError};
use super::harness::{parse_harness, HarnessSpec};
use super::suggest::unknown_key_message;
use super::typed::{want_name, want_table, wrong_type};

/// `[supervisor]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorSpec {
    /// Whether a turn that ends with unfinished work is sent back (the REPL can toggle it per session).
    pub enabled: bool,
    /// The most times one turn is sent back.
    pub max_rounds: u32,
    /// The named harness that judges completion claims, if any.
    pub review: Option<String>,
    /// The most requests the review harness gets per turn.
    pub review_budget: u32,
}

/// The default `max_rounds`.
pub const DEFAULT_MAX_ROUNDS: u32 = 3;
/// The default `review_budget`.
pub const DEFAULT_REVIEW_BUDGET: u32 = 2;

impl Default for SupervisorSpec {
    fn default() -> SupervisorSpec {
        SupervisorSpec {
            enabled: false,
            max_rounds: DEFAULT_MAX_ROUNDS,
            review: None,
            review_budget: DEFAULT_REVIEW_BUDGET,
        }
    }
}

const SUPERVISOR_KEYS: &[&str] = &["enabled", "max_rounds", "review", "review_budget"];

/// Providers a named harness may not use: they mean something only for `[harness]` of a sub-agent.
const NOT_NAMED: &[&str] = &["small-model-of-parent"];

/// Parses `[harnesses]`: each key a harness name (a safe id), each value a harness table like `[harness]`.
pub(crate) fn parse_harnesses(
    ctx: Ctx<'_>,
    prefix: &str,
    v: &toml::Value,
) -> Result<BTreeMap<String, HarnessSpec>, ManifestError> {
    let mut out = BTreeMap::new();
    for (name, table) in want_table(ctx, prefix, v)? {
        let path = join(prefix, name);
        if !is_safe_id(name) {
            return Err(ctx.err(
                &path,
                "a harness name is 1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or a digit",
            ));
        }
        let spec = parse_harness(ctx, &path, want_table(ctx, &path, table)?)?;
        if NOT_NAMED.contains(&spec.provider.as_str()) {
            return Err(ctx.err(
                &join(&path, "provider"),
                format!(
                    "{:?} works only as a sub-agent's [harness]; a named harness names a provider such as \
                     \"anthropic\" or \"local\"",
                    spec.provider
                ),
            ));
        }
        out.insert(name.clone(), spec);
    }
    Ok(out)
}

fn bounded(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
    lo: i64,
    hi: i64,
) -> Result<u32, ManifestError> {
    let n = v
        .as_integer()
        .ok_or_else(|| wrong_type(ctx, path, "an integer", v))?;
    if n < lo || n > hi {
        return Err(ctx.err(path, format!("{n} is not between {lo} and {hi}")));
    }
    u32::try_from(n).map_err(|_| ctx.err(path, format!("{n} is not between {lo} and {hi}")))
}

/// Parses `[supervisor]`; `harnesses` are the named harnesses `review` may name.
pub(crate) fn parse_supervisor(
    ctx: Ctx<'_>,
    prefix: &str,
    v: &toml::Value,
    harnesses: &BTreeMap<String, HarnessSpec>,
) -> Result<SupervisorSpec, ManifestError> {
    let table = want_table(ctx, prefix, v)?;
    for key in table.keys() {
        if !SUPERVISOR_KEYS.contains(&key.as_str()) {
            return Err(ctx.err(
                &join(prefix, key),
                unknown_key_message(key, SUPERVISOR_KEYS),
            ));
        }
    }
    let mut s = SupervisorSpec::default();
    if let Some(v) = table.get("enabled") {
        let p = join(prefix, "enabled");
        s.enabled = v
            .as_bool()
            .ok_or_else(|| wrong_type(ctx, &p, "true or false", v))?;
    }
    if let Some(v) = table.get("max_rounds") {
        s.max_rounds = bounded(ctx, &join(prefix, "max_rounds"), v, 1, 20)?;
    }
    if let Some(v) = table.get("review_budget") {
        s.review_budget = bounded(ctx, &join(prefix, "review_budget"), v, 1, 10)?;
    }
    if let Some(v) = table.get("review") {
        let p = join(prefix, "review");
        let name = want_name(ctx, &p, v)?;
        named_harness(ctx, &p, name, harnesses)?;
        s.review = Some(name.to_string());
    }
    Ok(s)
}

/// Checks that `name` (written at `path`) is one of `harnesses`.
pub(crate) fn named_harness(
    ctx: Ctx<'_>,
    path: &str,
    name: &str,
    harnesses: &BTreeMap<String, HarnessSpec>,
) -> Result<(), ManifestError> {
    if harnesses.contains_key(name) {
        return Ok(());
    }
    let known = if harnesses.is_empty() {
        "there are none; declare one as [harnesses.NAME] with a provider".to_string()
    } else {
        format!(
            "the named harnesses are {}",
            harnesses.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    Err(ctx.err(path, format!("names no harness {name:?} ({known})")))
}
