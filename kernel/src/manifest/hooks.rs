//! `[hooks]`: `[[hooks.<Event>]]` tables with `matcher`, exactly one of `command` / `url`, and `timeout_secs`.

use crate::policy::hooks::{HookAction, HookEvent, HookSpec, Hooks, DEFAULT_HOOK_TIMEOUT_SECS};

use super::error::{index, join, Ctx, ManifestError};
use super::suggest::{check_keys, unknown_key_message};
use super::typed::{want_name, want_table, wrong_type};

const HOOK_KEYS: &[&str] = &["matcher", "command", "url", "timeout_secs"];

/// Parses the hooks table found at `path`.
pub(crate) fn parse_hooks(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
) -> Result<Hooks, ManifestError> {
    let table = want_table(ctx, path, v)?;
    let names: Vec<&str> = HookEvent::ALL.iter().map(|e| e.name()).collect();
    let mut hooks = Vec::new();
    for (name, list) in table {
        let p = join(path, name);
        let Some(event) = HookEvent::named(name) else {
            return Err(ctx.err(&p, unknown_key_message(name, &names)));
        };
        let toml::Value::Array(items) = list else {
            return Err(
                wrong_type(ctx, &p, "an array of hook tables", list).with_hint(format!(
                    "write one [[{p}]] table per hook, with command = \"...\" or url = \"...\""
                )),
            );
        };
        for (i, item) in items.iter().enumerate() {
            hooks.push((event, parse_hook(ctx, &index(&p, i), event, item)?));
        }
    }
    // declaration order within an event is the array order; events run separately, so their relative order is moot
    Ok(Hooks(hooks))
}

fn parse_hook(
    ctx: Ctx<'_>,
    path: &str,
    event: HookEvent,
    v: &toml::Value,
) -> Result<HookSpec, ManifestError> {
    let t = want_table(ctx, path, v)?;
    check_keys(ctx, path, t, HOOK_KEYS)?;
    let text = |key: &str| -> Result<Option<String>, ManifestError> {
        t.get(key)
            .map(|v| want_name(ctx, &join(path, key), v).map(str::to_string))
            .transpose()
    };
    let action = match (text("command")?, text("url")?) {
        (Some(c), None) => HookAction::Command(c),
        (None, Some(u)) => {
            if !(u.starts_with("https://") || u.starts_with("http://")) {
                return Err(ctx
                    .err(&join(path, "url"), format!("{u:?} is not an http:// or https:// URL"))
                    .with_hint("hooks POST the event's JSON to an HTTP(S) endpoint"));
            }
            HookAction::Url(u)
        }
        (Some(_), Some(_)) => {
            return Err(ctx
                .err(path, "a hook has exactly one of command and url, not both")
                .with_hint("split it into two [[hooks.<Event>]] tables"))
        }
        (None, None) => {
            return Err(ctx
                .err(path, "a hook needs command or url")
                .with_hint("command = \"./scripts/check.sh\" (run from the manifest's directory) or url = \"https://...\""))
        }
    };
    let matcher = text("matcher")?;
    if matcher.is_some() && !event.is_tool_event() {
        return Err(ctx.err(
            &join(path, "matcher"),
            format!("{} hooks do not match tools; remove matcher", event.name()),
        ));
    }
    let timeout_secs = match t.get("timeout_secs") {
        None => DEFAULT_HOOK_TIMEOUT_SECS,
        Some(toml::Value::Integer(n)) if (1..=3600).contains(n) => *n as u64,
        Some(other) => {
            return Err(wrong_type(
                ctx,
                &join(path, "timeout_secs"),
                "a whole number of seconds from 1 to 3600",
                other,
            ))
        }
    };
    Ok(HookSpec {
        matcher,
        action,
        timeout_secs,
    })
}
