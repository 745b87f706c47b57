//! The static capability contracts of the built-in tools: which kinds each requires and which it may use.

use crate::grant::Grant;

/// The kinds a tool requires (boot fails when no row grants them) and those it may use if granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contract {
    /// Every row must carry these kinds (and the grant must have at least one row).
    pub requires: &'static [&'static str],
    /// Kinds the tool understands besides `requires`.
    pub optional: &'static [&'static str],
}

const PATH_KINDS: &[&str] = &["paths", "read_paths"];

/// The contract of built-in tool `underlying`, reached through provider `builtin` (or, for `web_search` /
/// `web_fetch`, through the harness named `harness`).
pub fn builtin_contract(underlying: &str, harness: Option<&str>) -> Option<Contract> {
    Some(match (underlying, harness) {
        ("bash", None) => Contract {
            requires: &["commands"],
            optional: &["paths", "read_paths", "network", "env"],
        },
        ("read_file" | "write_file" | "edit_file" | "find", None) => Contract {
            requires: &[],
            optional: PATH_KINDS,
        },
        ("spawn_subagent", None) => Contract {
            requires: &[],
            optional: &["manifest"],
        },
        ("web_search", None) => Contract {
            requires: &[],
            optional: &[],
        },
        ("web_search", Some("anthropic")) => Contract {
            requires: &[],
            optional: &[
                "max_uses",
                "allowed_domains",
                "blocked_domains",
                "user_location",
            ],
        },
        ("web_fetch", Some("anthropic")) => Contract {
            requires: &[],
            optional: &[
                "max_uses",
                "max_content_tokens",
                "allowed_domains",
                "blocked_domains",
                "citations",
            ],
        },
        _ => return None,
    })
}

/// The names of the native built-in tools.
pub const BUILTIN_TOOLS: [&str; 7] = [
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "find",
    "spawn_subagent",
    "web_search",
];

/// Problems of a grant against a contract: unknown kinds (with the nearest known kind) and missing required kinds.
pub fn check_contract(instance: &str, contract: &Contract, grant: &Grant) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(rows) = grant.rows() else {
        return problems;
    };
    let known: Vec<&str> = contract
        .requires
        .iter()
        .chain(contract.optional)
        .copied()
        .collect();
    for (i, row) in rows.iter().enumerate() {
        for kind in row.0.keys() {
            if !known.contains(&kind.as_str()) {
                let near = known
                    .iter()
                    .map(|k| (strsim::levenshtein(k, kind), *k))
                    .min()
                    .filter(|(d, _)| *d <= 3)
                    .map(|(_, k)| format!("; did you mean `{k}`?"))
                    .unwrap_or_default();
                let list = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                problems.push(format!("{instance}: row {i} grants unknown kind `{kind}` (this tool knows: {list}){near}"));
            }
        }
        for req in contract.requires {
            if row.get(req).is_none() {
                problems.push(format!(
                    "{instance}: row {i} lacks the required kind `{req}`; add `{req} = …` to it"
                ));
            }
        }
    }
    if rows.is_empty() && !contract.requires.is_empty() {
        problems.push(format!(
            "{instance}: the tool requires {} but its grant is {{}}; grant it in [capabilities].{instance}",
            contract.requires.join(", ")
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::grant::test_grant as g;

    #[test]
    fn bash_requires_commands_and_knows_its_kinds() {
        let c = builtin_contract("bash", None).unwrap();
        assert!(
            check_contract("bash", &c, &g("{ commands = \"*\", paths = [\"./\"] }")).is_empty()
        );
        let p = check_contract("bash", &c, &g("{ commands = \"*\", netwrk = \"*\" }"));
        assert!(p[0].contains("did you mean `network`"), "{p:?}");
        let p = check_contract("bash", &c, &g("{ paths = [\"./\"] }"));
        assert!(p[0].contains("required kind `commands`"), "{p:?}");
        assert!(check_contract("bash", &c, &g("{}"))[0].contains("requires commands"));
        assert!(check_contract("bash", &c, &Grant::Unrestricted).is_empty());
    }
}
