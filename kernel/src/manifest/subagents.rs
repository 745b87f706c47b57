//! Sub-agent manifests found in grants: the `manifest` kind of `spawn_subagent`-like tools.

use super::error::{index, join, Ctx, ManifestError};
use super::parse::{build_manifest, Manifest};
use super::typed::wrong_type;

/// A sub-agent the manifest delegates to.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRef {
    /// The `[capabilities]` key, or the `[tools]` instance, whose grant carries the sub-manifest.
    pub key: String,
    /// The sub-manifest.
    pub source: SubagentSource,
}

/// Where a sub-manifest is.
#[derive(Debug, Clone, PartialEq)]
pub enum SubagentSource {
    /// Written inline as a table, parsed here.
    Inline(Box<Manifest>),
    /// A path, relative to the manifest's directory, that the caller loads.
    Path(String),
}

/// Collects the sub-manifests of one grant written at `path` for `key`. The grant has already been substituted.
pub(crate) fn collect(
    ctx: Ctx<'_>,
    key: &str,
    path: &str,
    grant: &toml::Value,
    out: &mut Vec<SubagentRef>,
) -> Result<(), ManifestError> {
    match grant {
        toml::Value::Table(row) => row_manifest(ctx, key, path, row, out),
        toml::Value::Array(rows) => {
            for (i, row) in rows.iter().enumerate() {
                if let toml::Value::Table(row) = row {
                    row_manifest(ctx, key, &index(path, i), row, out)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn row_manifest(
    ctx: Ctx<'_>,
    key: &str,
    path: &str,
    row: &toml::Table,
    out: &mut Vec<SubagentRef>,
) -> Result<(), ManifestError> {
    let Some(v) = row.get("manifest") else {
        return Ok(());
    };
    let p = join(path, "manifest");
    let source = match v {
        toml::Value::Table(t) => SubagentSource::Inline(Box::new(build_manifest(ctx, t, &p, true)?)),
        toml::Value::String(s) if !s.trim().is_empty() => SubagentSource::Path(s.clone()),
        other => {
            return Err(wrong_type(ctx, &p, "an inline sub-manifest table or a path", other)
                .with_hint("manifest = { name = \"researcher\", tools = { read_file = \"builtin\" } }, or manifest = \"./researcher.toml\""))
        }
    };
    out.push(SubagentRef {
        key: key.to_string(),
        source,
    });
    Ok(())
}
