//! `[permissions]`: allow / ask / deny rules that can only narrow what the grants allow.

use crate::policy::rules::{Permissions, Rule};

use super::error::{index, join, Ctx, ManifestError};
use super::suggest::check_keys;
use super::typed::{want_name, want_table, wrong_type};

const SECTION_KEYS: &[&str] = &["allow_rules", "ask_rules", "deny_rules"];
const RULE_KEYS: &[&str] = &["tool", "path_prefix", "command_prefix", "host"];

/// Parses the permissions table found at `path`.
pub(crate) fn parse_permissions(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
) -> Result<Permissions, ManifestError> {
    let table = want_table(ctx, path, v)?;
    check_keys(ctx, path, table, SECTION_KEYS)?;
    let list = |key: &str| -> Result<Vec<Rule>, ManifestError> {
        let p = join(path, key);
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| parse_rule(ctx, &index(&p, i), item))
                .collect(),
            Some(other) => Err(
                wrong_type(ctx, &p, "an array of rule tables", other).with_hint(format!(
                    "write one [[{p}]] table per rule, e.g. tool = \"bash\", command_prefix = \"cargo test\""
                )),
            ),
        }
    };
    Ok(Permissions {
        allow: list("allow_rules")?,
        ask: list("ask_rules")?,
        deny: list("deny_rules")?,
    })
}

fn parse_rule(ctx: Ctx<'_>, path: &str, v: &toml::Value) -> Result<Rule, ManifestError> {
    let t = want_table(ctx, path, v)?;
    check_keys(ctx, path, t, RULE_KEYS)?;
    if t.is_empty() {
        return Err(ctx
            .err(path, "an empty rule would match every call")
            .with_hint("give at least one of tool, path_prefix, command_prefix, host"));
    }
    let field = |key: &str| -> Result<Option<String>, ManifestError> {
        t.get(key)
            .map(|v| want_name(ctx, &join(path, key), v).map(str::to_string))
            .transpose()
    };
    Ok(Rule {
        tool: field("tool")?,
        path_prefix: field("path_prefix")?,
        command_prefix: field("command_prefix")?,
        host: field("host")?,
    })
}
