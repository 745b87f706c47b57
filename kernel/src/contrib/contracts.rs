//! The static capability contracts of the built-in tools: which kinds each requires and which it may use.

use crate::lattice::algebra::{COMMAND_TOOLS, FILE_TOOLS};
use crate::lattice::grant::Grant;

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
        (t, None) if COMMAND_TOOLS.contains(&t) => Contract {
            requires: &["commands"],
            optional: &["paths", "read_paths", "network", "env"],
        },
        (t, None) if FILE_TOOLS.contains(&t) => Contract {
            requires: &[],
            optional: PATH_KINDS,
        },
        ("spawn_subagent", None) => Contract {
            requires: &[],
            optional: &["manifest"],
        },
        ("delegate" | "background_spawn", None) => Contract {
            requires: &[],
            optional: &["agents"],
        },
        (
            "tool_search"
            | "context7_search"
            | "context7_resolve_library"
            | "context7_query_docs"
            | "todo_read"
            | "todo_write"
            | "update_plan"
            | "task"
            | "note"
            | "process_output"
            | "process_kill"
            | "background_list"
            | "background_message"
            | "background_kill",
            None,
        ) => Contract {
            requires: &[],
            optional: &[],
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

/// Whether `kind` is a grant kind some built-in tool's contract knows (`paths`, `commands`, `max_uses`, …): a key a
/// newcomer may write straight into a `[tools]` entry when it belongs in the entry's `capabilities`.
pub fn is_builtin_grant_kind(kind: &str) -> bool {
    BUILTIN_TOOLS
        .iter()
        .map(|t| (*t, None))
        .chain([
            ("web_search", Some("anthropic")),
            ("web_fetch", Some("anthropic")),
        ])
        .filter_map(|(t, h)| builtin_contract(t, h))
        .any(|c| c.requires.contains(&kind) || c.optional.contains(&kind))
}

/// The names of the native built-in tools.
pub const BUILTIN_TOOLS: [&str; 47] = [
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "find",
    "grep",
    "glob",
    "list_directory",
    "tree",
    "file_info",
    "project_info",
    "read_many",
    "find_symbol",
    "file_compare",
    "notebook_read",
    "notebook_edit",
    "read_json",
    "json_edit",
    "apply_patch",
    "git_status",
    "git_diff",
    "git_log",
    "git_show",
    "git_blame",
    "git_branches",
    "run_tests",
    "run_build",
    "run_lint",
    "undo",
    "tool_search",
    "spawn_subagent",
    "web_search",
    "context7_search",
    "context7_resolve_library",
    "context7_query_docs",
    "todo_read",
    "todo_write",
    "update_plan",
    "task",
    "note",
    "process_output",
    "process_kill",
    "delegate",
    "background_spawn",
    "background_list",
    "background_message",
    "background_kill",
];

/// Problems of a grant against a contract: unknown kinds (with the nearest known kind) and missing required kinds.
/// `key` is where the grant is written (`[capabilities].bash`, `[tools].sh.capabilities`: see
/// [`crate::GrantSource::key`]); each message names it and the row, counted from 1 as everywhere loom prints a row.
pub fn check_contract(key: &str, contract: &Contract, grant: &Grant) -> Vec<String> {
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
                problems.push(format!(
                    "{key} row {} grants unknown kind `{kind}` (this tool knows: {list}){near}",
                    i + 1
                ));
            }
        }
        for req in contract.requires {
            if row.get(req).is_none() {
                problems.push(format!(
                    "{key} row {} lacks the required kind `{req}`; add `{req} = …` to it",
                    i + 1
                ));
            }
        }
    }
    if rows.is_empty() && !contract.requires.is_empty() {
        problems.push(format!(
            "the tool requires {} but its grant is {{}}; grant it in {key}",
            contract.requires.join(", ")
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lattice::grant::test_grant as g;

    #[test]
    fn bash_requires_commands_and_knows_its_kinds() {
        let c = builtin_contract("bash", None).unwrap();
        let k = "[capabilities].bash";
        assert!(check_contract(k, &c, &g("{ commands = \"*\", paths = [\"./\"] }")).is_empty());
        let p = check_contract(k, &c, &g("{ commands = \"*\", netwrk = \"*\" }"));
        assert_eq!(
            p,
            ["[capabilities].bash row 1 grants unknown kind `netwrk` (this tool knows: commands, paths, \
              read_paths, network, env); did you mean `network`?"]
        );
        // rows count from 1
        let p = check_contract(k, &c, &g("[{ commands = \"*\" }, { paths = [\"./\"] }]"));
        assert_eq!(
            p,
            ["[capabilities].bash row 2 lacks the required kind `commands`; add `commands = …` to it"]
        );
        assert_eq!(
            check_contract(k, &c, &g("{}")),
            ["the tool requires commands but its grant is {}; grant it in [capabilities].bash"]
        );
        assert!(check_contract(k, &c, &Grant::Unrestricted).is_empty());
    }
}
