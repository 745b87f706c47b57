//! What the OS sandbox refuses in a bash grant row, decided from the row alone.
//!
//! The sandbox builds each command's view from the row the kernel picked, and refuses a row it cannot express (a
//! kind it does not know, a per-host `network` list, a malformed `paths` or `env`). Those refusals depend on the row
//! only, not on the host, so they are decided here once: the sandbox refuses with this answer, and `loom audit` and
//! boot report the same answer as an error for every row of a bash grant, so a manifest whose rows would refuse
//! every call never audits clean or boots (and audit never renders such a row as something else).

use crate::lattice::grant::{Grant, Row};
use crate::lattice::value::{Value, ValueError};
use crate::policy::secrets::EnvPolicy;

/// The kinds the OS sandbox enforces in a bash row.
pub const SANDBOX_KINDS: [&str; 5] = ["commands", "paths", "read_paths", "network", "env"];

/// Why the sandbox cannot run a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRefusal {
    /// The kind at fault.
    pub kind: String,
    /// True when the kind is not one the sandbox knows ([`SANDBOX_KINDS`]); `reason` is then empty.
    pub unknown: bool,
    /// What is wrong with its value, and the fix (follows "`kind` ").
    pub reason: String,
}

/// Reads a row's `network`: absent, `false` or `[]` is off; `"*"` or `true` is on. Anything else (a list of hosts)
/// is refused: the OS sandboxes cannot filter per host.
pub fn sandbox_network(v: Option<&Value>) -> Result<bool, ValueError> {
    match v {
        None | Some(Value::Bool(false)) => Ok(false),
        Some(Value::List(items)) if items.is_empty() => Ok(false),
        Some(Value::Star) | Some(Value::Bool(true)) => Ok(true),
        Some(other) => Err(ValueError::Shape {
            verb: "is",
            value: other.to_toml(),
            fix: "the OS sandboxes cannot filter per host, so write network = \"*\" (on) or leave it out (off)",
        }),
    }
}

fn path_shape(v: Option<&Value>) -> Result<(), ValueError> {
    match v.map(Value::as_set) {
        None | Some(None) => Ok(()),
        Some(Some(items)) => match items.iter().find(|i| i.as_str().is_none()) {
            None => Ok(()),
            Some(other) => Err(ValueError::Shape {
                verb: "holds",
                value: other.to_toml(),
                fix: "write a list of path strings such as [\"./\"] or \"*\"",
            }),
        },
    }
}

/// The first reason the sandbox refuses `row`, from the row alone (`None`: the row can be expressed; the host may
/// still lack a root it names).
pub fn sandbox_row_refusal(row: &Row) -> Option<RowRefusal> {
    if let Some(kind) = row.0.keys().find(|k| !SANDBOX_KINDS.contains(&k.as_str())) {
        return Some(RowRefusal {
            kind: kind.to_string(),
            unknown: true,
            reason: String::new(),
        });
    }
    let bad = |kind: &str, reason: ValueError| {
        Some(RowRefusal {
            kind: kind.into(),
            unknown: false,
            reason: reason.to_string(),
        })
    };
    for kind in ["paths", "read_paths"] {
        if let Err(reason) = path_shape(row.get(kind)) {
            return bad(kind, reason);
        }
    }
    if let Err(reason) = sandbox_network(row.get("network")) {
        return bad("network", reason);
    }
    if let Err(reason) = EnvPolicy::from_value(row.get("env")) {
        return bad("env", reason);
    }
    None
}

/// The rows of bash grant `grant` that the sandbox would refuse, as errors naming the key path (`key` is where the
/// grant is written, such as `[capabilities].bash`), the row (counted from 1), the value and the fix. Unknown kinds
/// are left to the tool's contract ([`crate::check_contract`]), which names the nearest known kind.
pub fn sandbox_grant_problems(key: &str, grant: &Grant) -> Vec<String> {
    let Some(rows) = grant.rows() else {
        return Vec::new();
    };
    rows.iter()
        .enumerate()
        .filter_map(|(i, row)| {
            let r = sandbox_row_refusal(row).filter(|r| !r.unknown)?;
            Some(format!(
                "{key} row {n}: `{kind}` {reason}; the sandbox refuses this row, so every command it would run \
                 fails",
                n = i + 1,
                kind = r.kind,
                reason = r.reason
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::grant::test_grant as g;

    fn refusal(src: &str) -> Option<RowRefusal> {
        sandbox_row_refusal(&g(src).rows().unwrap()[0])
    }

    #[test]
    fn row_only_refusals() {
        let r = refusal("{ commands = \"*\", network = [\"example.com\"] }").unwrap();
        assert_eq!((r.kind.as_str(), r.unknown), ("network", false));
        assert!(r.reason.contains("[\"example.com\"]") && r.reason.contains("network = \"*\""));
        let r = refusal("{ commands = \"*\", netwrk = \"*\" }").unwrap();
        assert_eq!((r.kind.as_str(), r.unknown), ("netwrk", true));
        let r = refusal("{ commands = \"*\", paths = [\"./\", 3] }").unwrap();
        assert_eq!(r.kind, "paths");
        let r = refusal("{ commands = \"*\", env = [\"A\", 1] }").unwrap();
        assert_eq!(r.kind, "env");
        for fine in [
            "{ commands = \"*\" }",
            "{ commands = \"*\", network = \"*\", paths = [\"./\"], read_paths = \"*\", env = [\"AWS_*\"] }",
            "{ commands = [\"ls\"], network = false, env = \"*\" }",
            "{ commands = [\"ls\"], network = true, paths = \"./\" }",
            "{ commands = [\"ls\"], network = [] }",
        ] {
            assert_eq!(refusal(fine), None, "{fine}");
        }
    }

    #[test]
    fn problems_name_the_key_path_and_leave_unknown_kinds_to_the_contract() {
        let grant = g("[{ commands = \"*\" }, { commands = [\"gh\"], network = [\"github.com\"], oops = 1 }, \
             { commands = [\"x\"], network = \"on\" }]");
        let p = sandbox_grant_problems("[capabilities].bash", &grant);
        assert_eq!(p.len(), 1, "{p:?}");
        // rows count from 1: the third row is row 3
        assert!(
            p[0].starts_with("[capabilities].bash row 3: `network` is \"on\""),
            "{p:?}"
        );
        let p = sandbox_grant_problems(
            "[tools].sh.capabilities",
            &g("{ commands = \"*\", network = [\"example.com\"] }"),
        );
        assert!(
            p[0].contains("[tools].sh.capabilities row 1: `network` is [\"example.com\"]"),
            "{p:?}"
        );
        assert!(sandbox_grant_problems("k", &g("\"*\"")).is_empty());
    }
}
