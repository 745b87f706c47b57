//! `[consent]`: which shipped implementation each consent key of `[capabilities]` is written for.
//!
//! Specification: `instance = { skill = "<skill name>", sha256 = "<64 lowercase hex digits>" }`. The instance must be
//! a key of `[capabilities]` (its grant), not a `[tools]` name and not a built-in's name (those keys are written for
//! a tool of their own). The digest is [`shipped_digest`](crate::shipped_digest) of what the skill ships; `loom
//! audit` prints the paste-ready line for a skill it refuses.

use std::collections::BTreeMap;

use super::error::{join, Ctx, ManifestError};
use super::suggest::check_keys;
use super::tools::ToolEntry;
use super::typed::{want_str, want_table};
use crate::contrib::keys::Consent;
use crate::Grant;

/// Parses `[consent]` found at `path`, against the manifest's `[capabilities]` and `[tools]`.
pub(crate) fn parse_consent(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
    capabilities: Option<&BTreeMap<String, Grant>>,
    tools: &BTreeMap<String, ToolEntry>,
) -> Result<BTreeMap<String, Consent>, ManifestError> {
    let mut out = BTreeMap::new();
    for (key, entry) in want_table(ctx, path, v)? {
        let p = join(path, key);
        let t = want_table(ctx, &p, entry)?;
        check_keys(ctx, &p, t, &["skill", "sha256"])?;
        let field = |name: &str| -> Result<String, ManifestError> {
            match t.get(name) {
                Some(v) => want_str(ctx, &join(&p, name), v).map(str::to_string),
                None => Err(ctx
                    .err(&join(&p, name), "missing")
                    .with_hint("a consent is { skill = \"<skill name>\", sha256 = \"<digest>\" }; `loom audit` prints the line for a skill it refuses")),
            }
        };
        let skill = field("skill")?;
        if skill.is_empty()
            || !skill
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(ctx
                .err(&join(&p, "skill"), format!("{skill:?} is not a skill name"))
                .with_hint("a skill name holds only lowercase letters, digits and hyphens"));
        }
        let sha256 = field("sha256")?;
        if sha256.len() != 64
            || !sha256
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        {
            return Err(ctx
                .err(
                    &join(&p, "sha256"),
                    "not a sha256 digest (64 lowercase hex digits)",
                )
                .with_hint("paste the line `loom audit` prints for the skill"));
        }
        if tools.contains_key(key) {
            return Err(ctx
                .err(
                    &p,
                    format!(
                        "`{key}` is a [tools] name, so its ceiling key is written for that tool; a consent key names \
                         an instance only a skill adds"
                    ),
                )
                .with_hint(format!("remove [consent].{key}, or rename the skill's instance")));
        }
        if crate::contrib::contracts::BUILTIN_TOOLS.contains(&key.as_str()) {
            return Err(ctx
                .err(
                    &p,
                    format!("`{key}` is the key of the built-in `{key}`; a consent key names another instance"),
                )
                .with_hint("rename the skill's instance (a loom.toml sidecar can)"));
        }
        if !capabilities.is_some_and(|c| c.contains_key(key)) {
            return Err(ctx
                .err(
                    &p,
                    format!("[capabilities] has no `{key}`: a consent needs the grant the instance runs under"),
                )
                .with_hint(format!("add `{} = {{}}` (or the grant it needs) to [capabilities]", crate::lattice::value::toml_key(key))));
        }
        out.insert(key.clone(), Consent { skill, sha256 });
    }
    Ok(out)
}
