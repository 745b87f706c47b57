//! `[agent]`: who the agent is.

use std::collections::BTreeMap;

use super::error::{join, Ctx, ManifestError};
use super::suggest::check_keys;
use super::typed::{want_name, want_str, want_str_list, want_table, wrong_type};

/// The keys `[agent]` takes.
pub(crate) const AGENT_KEYS: &[&str] = &[
    "name",
    "description",
    "system_prompt",
    "secrets",
    "storage_id",
    "metadata",
    "environment",
    "read_before_write",
];

/// `[agent]`: the agent's identity and prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    /// Display name; also the per-agent storage id unless `storage_id` is set. Required, non-empty.
    pub name: String,
    /// A human description.
    pub description: Option<String>,
    /// The system prompt, inline or from a file the caller reads.
    pub system_prompt: Option<SystemPrompt>,
    /// Secret names the agent itself declares.
    pub secrets: Vec<String>,
    /// A stable per-agent storage identifier independent of `name`.
    pub storage_id: Option<String>,
    /// Free-form metadata, kept verbatim.
    pub metadata: BTreeMap<String, toml::Value>,
    /// `environment` (default true): the system prompt opens with an environment block (working directory,
    /// platform, date, git branch and whether the work tree has changes); `false` leaves it out, for a prompt that is
    /// the same byte for byte from run to run.
    pub environment: bool,
    /// `read_before_write` (default false): `write_file` replaces an existing file whole only when the session has
    /// read it (or written it) and it still holds that text; a file never read, or changed since, is refused with the
    /// fix. A guard on the tool's behaviour, not a grant: it narrows nothing the kernel decides and widens nothing.
    pub read_before_write: bool,
}

/// The longest `name` / `storage_id`.
pub const MAX_ID_LEN: usize = 64;

/// True for a safe identifier: 1 to [`MAX_ID_LEN`] characters from `A-Z a-z 0-9 . _ -`, starting with a letter or
/// a digit. `name` and `storage_id` become a directory name under loom's data home (`agents/<id>`), so they must
/// be one path component that cannot climb (`..`), hide (`.x`) or read as an option (`-x`).
pub fn is_safe_id(s: &str) -> bool {
    s.len() <= MAX_ID_LEN
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn want_id(ctx: Ctx<'_>, path: &str, v: &toml::Value) -> Result<String, ManifestError> {
    let s = want_name(ctx, path, v)?;
    if is_safe_id(s) {
        return Ok(s.to_string());
    }
    let key = path.rsplit('.').next().unwrap_or(path);
    Err(ctx
        .err(
            path,
            // the value is not echoed: it may come from a substituted variable
            format!(
                "not a safe identifier: it names the agent's storage directory, so it must be 1-{MAX_ID_LEN} \
                 characters from A-Z a-z 0-9 . _ - starting with a letter or a digit"
            ),
        )
        .with_hint(format!(
            "{key} = \"my-agent\"; put a longer display text in description"
        )))
}

/// `system_prompt = "..."` or `system_prompt = { path = "..." }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemPrompt {
    /// The prompt text itself.
    Text(String),
    /// A file, relative to the manifest's directory, that the caller reads.
    Path(String),
}

/// Parses the agent table found at `path`.
pub(crate) fn parse_agent(
    ctx: Ctx<'_>,
    path: &str,
    table: &toml::Table,
) -> Result<AgentSpec, ManifestError> {
    check_keys(ctx, path, table, AGENT_KEYS)?;
    let name = match table.get("name") {
        Some(v) => want_id(ctx, &join(path, "name"), v)?,
        None => {
            return Err(ctx
                .err(&join(path, "name"), "missing; every agent needs a name")
                .with_hint("name = \"my-agent\""))
        }
    };
    let opt_str = |key: &str| -> Result<Option<String>, ManifestError> {
        table
            .get(key)
            .map(|v| want_str(ctx, &join(path, key), v).map(str::to_string))
            .transpose()
    };
    let system_prompt = match table.get("system_prompt") {
        None => None,
        Some(toml::Value::String(s)) => Some(SystemPrompt::Text(s.clone())),
        Some(toml::Value::Table(t)) => {
            let p = join(path, "system_prompt");
            check_keys(ctx, &p, t, &["path"])?;
            match t.get("path") {
                Some(v) => Some(SystemPrompt::Path(
                    want_name(ctx, &join(&p, "path"), v)?.to_string(),
                )),
                None => {
                    return Err(ctx
                        .err(&p, "a system_prompt table needs path")
                        .with_hint("system_prompt = { path = \"./prompt.md\" }"))
                }
            }
        }
        Some(other) => {
            return Err(wrong_type(
                ctx,
                &join(path, "system_prompt"),
                "a string or { path = \"...\" }",
                other,
            ))
        }
    };
    let secrets = match table.get("secrets") {
        Some(v) => want_str_list(ctx, &join(path, "secrets"), v)?,
        None => Vec::new(),
    };
    let storage_id = match table.get("storage_id") {
        Some(v) => Some(want_id(ctx, &join(path, "storage_id"), v)?),
        None => None,
    };
    let metadata = match table.get("metadata") {
        Some(v) => want_table(ctx, &join(path, "metadata"), v)?
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => BTreeMap::new(),
    };
    let flag = |key: &str, default: bool| -> Result<bool, ManifestError> {
        match table.get(key) {
            Some(v) => v
                .as_bool()
                .ok_or_else(|| wrong_type(ctx, &join(path, key), "true or false", v)),
            None => Ok(default),
        }
    };
    Ok(AgentSpec {
        environment: flag("environment", true)?,
        read_before_write: flag("read_before_write", false)?,
        name,
        description: opt_str("description")?,
        system_prompt,
        secrets,
        storage_id,
        metadata,
    })
}
