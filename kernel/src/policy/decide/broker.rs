//! Broker decisions: which commands a capability set carries into its general row's shell, which row a brokered
//! call runs under, and which of the caller's environment variables may cross into it.
//!
//! A brokered call arrives from inside the general row's sandbox, so every fact in it (argv, cwd, env) is written
//! by the sandboxed side and is untrusted. The broker may only ever *narrow* to a row a per-command row names: a
//! general row never brokers, a path never brokers, a name no row lists never brokers.

use super::{cwd_fits, is_general_row, rowed_commands};
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::value::Value;
use crate::ENV_TIER1;

/// The commands a capability set brokers into the general row's shell, sorted, each with the index of the first
/// per-command row that names it (the row a brokered call runs under). Empty unless the grant is a set with a
/// general (`commands = "*"`) row and at least one per-command row: `"*"` and argv-only sets start no broker.
pub fn brokered_commands(grant: &Grant) -> Vec<(String, usize)> {
    let Grant::Set(rows) = grant else {
        return Vec::new();
    };
    if !rows.iter().any(is_general_row) {
        return Vec::new();
    }
    let mut out: Vec<(String, usize)> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for name in rowed_commands(row).unwrap_or_default() {
            if is_brokerable_name(name) && !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_string(), i));
            }
        }
    }
    out.sort();
    out
}

/// A name the broker can put on the shell's PATH: non-empty, no `/`, not `.` or `..`, no NUL.
fn is_brokerable_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// A brokered call the grant authorises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brokered {
    /// The index of the per-command row in the grant.
    pub index: usize,
    /// The per-command row the command runs under.
    pub row: Row,
    /// The caller's working directory (normalised) when the row's paths contain it; `None` when they do not, and
    /// the command must start in a neutral directory instead of the caller's.
    pub cwd: Option<String>,
}

/// Why a brokered call is refused. The message is written for the person (or model) whose command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct BrokerDenial {
    /// What was refused and what is possible instead.
    pub reason: String,
    /// True when the name is simply not a brokered command (the shim reports "command not found", 127); false for
    /// any other refusal (126).
    pub not_found: bool,
}

/// Decides one brokered call of tool instance `tool`: `name` is the caller's `argv[0]` exactly as sent, `cwd` the
/// caller's working directory. Allowed only when `name` is a bare command name that a per-command row of `grant`
/// lists (and the grant also has a general row, so a broker exists at all); the call runs under the first such
/// row. The cwd is kept only when that row's paths contain it.
pub fn decide_brokered(
    tool: &str,
    ctx: &PathCtx,
    grant: &Grant,
    name: &str,
    cwd: &str,
) -> Result<Brokered, BrokerDenial> {
    let commands = brokered_commands(grant);
    let list = || {
        commands
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if name.contains('/') {
        return Err(BrokerDenial {
            reason: format!(
                "{tool}: `{name}` is a path; the broker runs only commands named by a row, by bare name ({})",
                list()
            ),
            not_found: false,
        });
    }
    let Some((_, index)) = commands.iter().find(|(n, _)| n == name) else {
        let reason = if commands.is_empty() {
            format!("{tool}: this grant brokers no commands ({grant})")
        } else {
            format!(
                "{tool}: `{name}` is not named by any row of this grant, so it has no grant of its own to run under \
                 (brokered commands: {})",
                list()
            )
        };
        return Err(BrokerDenial {
            reason,
            not_found: true,
        });
    };
    let Grant::Set(rows) = grant else {
        return Err(BrokerDenial {
            reason: format!("{tool}: the grant \"*\" brokers nothing"),
            not_found: true,
        });
    };
    let row = rows[*index].clone();
    let cwd = ctx.normalize(cwd);
    let cwd = (cwd.starts_with('/') && cwd_fits(ctx, &row, &cwd)).then_some(cwd);
    Ok(Brokered {
        index: *index,
        row,
        cwd,
    })
}

/// Variables a brokered command always takes from loom's own environment (through its row's `env`), never from the
/// caller: the search path (the broker sets it to loom's PATH, minus every directory the grant can write), the
/// working directory and temporary directory (the sandbox sets them), and the identity and locale plumbing of tier 1
/// (`HOME`, `USER`, `LOGNAME`, `SHELL`, `TERM`, `COLORTERM`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TZ`).
pub const BROKER_BASE_ENV: [&str; 3] = ["PATH", "PWD", "TMPDIR"];

/// Whether the caller's value of the environment variable `name` may reach a command brokered under `row`.
///
/// A brokered command runs with more authority than its caller, and most variables can load code or configuration
/// into a program (`LD_PRELOAD`, `GIT_DIR`, `GIT_PROXY_COMMAND`, `OPENSSL_CONF`, `JDK_JAVA_OPTIONS`, `KUBECONFIG`,
/// `npm_config_*`, CA bundles, proxies…), so this is an allowlist: the caller's value crosses only when the row's
/// `env` is a list naming `name` exactly. A `PREFIX_*` pattern, `env = "*"`, the tier-2 default (no `env`) and the
/// names loom always sets itself ([`BROKER_BASE_ENV`] and tier 1) never pass a caller's value. (The row's `env`
/// still selects which of loom's own variables the command inherits; secrets are screened after this, as for every
/// command.)
pub fn caller_var_crosses(row: &Row, name: &str) -> bool {
    if name.is_empty()
        || name.ends_with('*')
        || BROKER_BASE_ENV.contains(&name)
        || ENV_TIER1.contains(&name)
    {
        return false;
    }
    match row.get("env") {
        None | Some(Value::Star) => false,
        Some(v) => v
            .as_set()
            .unwrap_or_default()
            .iter()
            .any(|e| e.as_str() == Some(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(src: &str) -> Grant {
        let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
        Grant::from_toml(&t["g"]).unwrap()
    }

    fn ctx() -> PathCtx {
        PathCtx::new("/w", Some("/home/u".into()))
    }

    const GCAL: &str = "[{ commands = \"*\", paths = [\"./\"] }, \
         { commands = [\"gcalcli\", \"jq\"], network = \"*\", paths = [\"~/.gcalcli\"] }, \
         { commands = [\"jq\", \"curl\"] }]";

    #[test]
    fn only_sets_with_a_general_row_broker_and_each_name_takes_its_first_row() {
        let grant = g(GCAL);
        let rows = grant.rows().unwrap();
        let got = brokered_commands(&grant);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["curl", "gcalcli", "jq"]);
        for (name, i) in &got {
            let first = rows.iter().position(|r| {
                rowed_commands(r)
                    .unwrap_or_default()
                    .contains(&name.as_str())
            });
            assert_eq!(Some(*i), first, "{name}");
        }
        assert!(brokered_commands(&g("\"*\"")).is_empty());
        assert!(brokered_commands(&g("{ commands = [\"ls\"] }")).is_empty());
        assert!(brokered_commands(&g("{ commands = \"*\" }")).is_empty());
        assert!(brokered_commands(&g("{}")).is_empty());
        let odd = g("[{ commands = \"*\" }, { commands = [\"a/b\", \"..\", \"\", \"ok\"] }]");
        assert_eq!(brokered_commands(&odd), vec![("ok".into(), 1)]);
    }

    #[test]
    fn a_named_command_runs_under_its_row_keeping_a_cwd_inside_its_paths() {
        let b = decide_brokered("bash", &ctx(), &g(GCAL), "gcalcli", "/home/u/.gcalcli/x").unwrap();
        assert!(b.row.get("network").is_some());
        assert_eq!(&g(GCAL).rows().unwrap()[b.index], &b.row);
        assert_eq!(b.cwd.as_deref(), Some("/home/u/.gcalcli/x"));
        let b = decide_brokered("bash", &ctx(), &g(GCAL), "gcalcli", "/w/src").unwrap();
        assert_eq!(b.cwd, None, "the caller's cwd is outside the row's paths");
        let b = decide_brokered("bash", &ctx(), &g(GCAL), "curl", "/w/src").unwrap();
        assert!(b.row.get("network").is_none() && b.row.get("paths").is_none());
        assert_eq!(
            b.cwd.as_deref(),
            Some("/w/src"),
            "a row without path kinds constrains no cwd"
        );
        let b = decide_brokered("bash", &ctx(), &g(GCAL), "curl", "relative").unwrap();
        assert_eq!(b.cwd.as_deref(), Some("/w/relative"));
    }

    #[track_caller]
    fn refused(name: &str, needle: &str, not_found: bool) {
        let d = decide_brokered("bash", &ctx(), &g(GCAL), name, "/w").unwrap_err();
        assert!(d.reason.contains(needle), "{name}: {}", d.reason);
        assert_eq!(d.not_found, not_found, "{name}");
    }

    #[test]
    fn refusals() {
        refused("/usr/bin/gcalcli", "is a path", false);
        refused("./gcalcli", "is a path", false);
        refused("ls", "`ls` is not named by any row", true);
        refused("", "is not named", true);
        refused("sh", "brokered commands: curl, gcalcli, jq", true);
        let d = decide_brokered("bash", &ctx(), &g("\"*\""), "gcalcli", "/w").unwrap_err();
        assert!(d.reason.contains("brokers no commands"), "{}", d.reason);
        let d = decide_brokered(
            "bash",
            &ctx(),
            &g("{ commands = [\"gcalcli\"] }"),
            "gcalcli",
            "/w",
        )
        .unwrap_err();
        assert!(d.reason.contains("brokers no commands"), "{}", d.reason);
    }

    #[test]
    fn only_names_the_row_lists_exactly_cross_from_the_caller() {
        let row = |env: &str| {
            g(&format!("{{ commands = [\"git\"]{env} }}"))
                .rows()
                .unwrap()[0]
                .clone()
        };
        let listed = row(", env = [\"GIT_AUTHOR_NAME\", \"GH_*\", \"LANG\", \"PATH\", \"HOME\"]");
        assert!(caller_var_crosses(&listed, "GIT_AUTHOR_NAME"));
        for v in [
            "GH_TOKEN",
            "GH_CONFIG_DIR",
            "GH_*",
            "GIT_DIR",
            "GIT_PROXY_COMMAND",
            "LANG",
            "PATH",
            "HOME",
            "PWD",
            "TMPDIR",
            "",
        ] {
            assert!(!caller_var_crosses(&listed, v), "{v}");
        }
        for r in [row(""), row(", env = \"*\""), row(", env = []")] {
            for v in [
                "GIT_DIR",
                "GIT_PROXY_COMMAND",
                "GIT_EXTERNAL_DIFF",
                "OPENSSL_CONF",
                "JDK_JAVA_OPTIONS",
                "KUBECONFIG",
                "npm_config_userconfig",
                "SSL_CERT_FILE",
                "CURL_CA_BUNDLE",
                "https_proxy",
                "HTTP_PROXY",
                "LD_PRELOAD",
                "EDITOR",
                "PAGER",
                "ANYTHING",
            ] {
                assert!(!caller_var_crosses(&r, v), "{v} under {r:?}");
            }
        }
        // a name the row lists exactly is the row author's decision, whatever it is
        assert!(caller_var_crosses(
            &row(", env = [\"KUBECONFIG\"]"),
            "KUBECONFIG"
        ));
        assert!(caller_var_crosses(
            &row(", env = \"KUBECONFIG\""),
            "KUBECONFIG"
        ));
    }
}
