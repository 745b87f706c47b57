//! Whether a bash call the kernel authorised may run in an ACP client's terminal (`terminal/create`) without
//! losing confinement. The client runs whatever command it is handed, so for a sandboxed call that command is
//! `loom sandbox run` with the one row the kernel chose (every path made absolute), never the raw command; what the
//! terminal form cannot carry — secrets to inject, the command broker beside the shell, a row kind `sandbox run`
//! does not know, a `~` path without a home — keeps the call in loom's own hands.

use super::{brokered_commands, decide, is_general_row, Authorization, Decision, Exec, Request};
use crate::lattice::algebra::AlgebraKind;
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::value::Value;
use crate::policy::secrets::{row_secrets, EnvPolicy};

/// How an authorised bash call may run in the client's terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalPlan {
    /// The grant is `"*"`: the command itself runs in the terminal, unconfined, as loom would run it.
    Unconfined,
    /// The terminal runs `loom sandbox run --grant <grant> --cwd <cwd> -- <argv>`: `grant` is the chosen row alone,
    /// its paths absolute, as inline TOML; `sandbox run` decides again under it and builds the same sandbox.
    Confined {
        /// The row as a grant (inline TOML).
        grant: String,
    },
    /// The terminal form cannot carry this call; loom runs it itself. The reason says why.
    Local(String),
}

/// The facts [`terminal_plan`] decides on.
#[derive(Debug, Clone, Copy)]
pub struct TerminalFacts<'a> {
    /// The tool's whole grant.
    pub grant: &'a Grant,
    /// The kernel's authorisation of the call.
    pub auth: &'a Authorization,
    /// How the grant's relative and `~` paths resolve for this tool.
    pub ctx: &'a PathCtx,
    /// The call's absolute working directory.
    pub cwd: &'a str,
    /// What runs: `/bin/bash -c <command>` under a general row, or the rowed command's argv.
    pub argv: &'a [String],
    /// The environment names of every secret loom knows (names only).
    pub secret_env_names: &'a [String],
    /// `[agent] secrets`: the secrets the agent may hand its commands.
    pub shareable: &'a [String],
}

/// The row kinds `loom sandbox run` builds a sandbox from.
const CARRIED_KINDS: &[&str] = &["commands", "paths", "read_paths", "network", "env"];

/// Decides how (or whether) the call runs in the client's terminal.
pub fn terminal_plan(f: &TerminalFacts<'_>) -> TerminalPlan {
    let local = |why: &str| TerminalPlan::Local(why.to_string());
    match (&f.auth.exec, &f.auth.row) {
        (Exec::Unconfined, _) if *f.grant == Grant::Unrestricted => {
            if !f.shareable.is_empty() {
                return local(
                    "the agent shares secrets with its commands ([agent] secrets), and a secret value never goes into \
                     a terminal request",
                );
            }
            if !f.secret_env_names.is_empty() {
                return local(
                    "loom screens the secrets it knows out of an unconfined command's environment, which it cannot do \
                     for the client's environment",
                );
            }
            TerminalPlan::Unconfined
        }
        (Exec::Shell | Exec::Argv(_), Some((_, row))) => confined(f, row),
        _ => local("the authorisation names no sandbox row"),
    }
}

fn confined(f: &TerminalFacts<'_>, row: &Row) -> TerminalPlan {
    let local = |why: String| TerminalPlan::Local(why);
    if is_general_row(row) && !brokered_commands(f.grant).is_empty() {
        return local(
            "the row runs with the command broker beside the shell, which lives in loom's own process".into(),
        );
    }
    if let Some(kind) = row.0.keys().find(|k| !CARRIED_KINDS.contains(&k.as_str())) {
        return local(format!(
            "the row grants {kind:?}, which `loom sandbox run` does not carry"
        ));
    }
    let policy = match EnvPolicy::from_value(row.get("env")) {
        Ok(p) => p,
        Err(e) => return local(format!("the row's env {e}")),
    };
    if !row_secrets(&policy, f.shareable).is_empty() {
        return local(
            "the row is granted secrets, and a secret value never goes into a terminal request"
                .into(),
        );
    }
    if f.secret_env_names.iter().any(|n| policy.allows(n)) {
        return local(
            "the row's env lets a variable named like a secret loom knows through, and loom cannot screen the \
             client's environment"
                .into(),
        );
    }
    let mut abs = row.clone();
    for kind in ["paths", "read_paths"] {
        let Some(v) = row.get(kind) else { continue };
        let Some(items) = v.elements() else { continue };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let Value::Str(p) = item else {
                return local(format!("the row's {kind} holds {}", item.to_toml()));
            };
            let n = f.ctx.normalize(p);
            if !n.starts_with('/') {
                return local(format!(
                    "the row's {kind} entry {p:?} has no home directory to resolve against"
                ));
            }
            out.push(Value::Str(n));
        }
        abs.insert(kind, Value::List(out));
    }
    // `loom sandbox run` decides again, under exactly this row, in the call's directory: it must agree
    let ctx = PathCtx::new(f.cwd, f.ctx.home.clone());
    let request = Request::BashArgv {
        argv: f.argv.to_vec(),
        cwd: f.cwd.to_string(),
    };
    match decide(
        "bash",
        AlgebraKind::Bash,
        &ctx,
        &Grant::row(abs.clone()),
        &request,
    ) {
        Decision::Allow(Authorization { row: Some(_), .. }) => TerminalPlan::Confined {
            grant: abs.to_toml(),
        },
        Decision::Allow(_) => local("the row alone would run unconfined".into()),
        Decision::Deny(d) => local(format!(
            "the row alone does not allow the terminal form: {}",
            d
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> Grant {
        let t: toml::Table = toml::from_str(&format!("g = {text}")).unwrap();
        Grant::from_toml(&t["g"]).unwrap()
    }

    fn plan(g: &str, command: &str, secrets: &[&str], shareable: &[&str]) -> TerminalPlan {
        let g = grant(g);
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        let request = Request::Bash {
            command: command.into(),
            cwd: "/w/sub".into(),
        };
        let Decision::Allow(auth) = decide("bash", AlgebraKind::Bash, &ctx, &g, &request) else {
            panic!("{command} not allowed under {g}");
        };
        let argv: Vec<String> = match &auth.exec {
            Exec::Argv(v) => v.clone(),
            _ => vec!["/bin/bash".into(), "-c".into(), command.into()],
        };
        let names: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        let shareable: Vec<String> = shareable.iter().map(|s| s.to_string()).collect();
        terminal_plan(&TerminalFacts {
            grant: &g,
            auth: &auth,
            ctx: &ctx,
            cwd: "/w/sub",
            argv: &argv,
            secret_env_names: &names,
            shareable: &shareable,
        })
    }

    #[track_caller]
    fn local(p: TerminalPlan, needle: &str) {
        match p {
            TerminalPlan::Local(why) => assert!(why.contains(needle), "{why}"),
            other => panic!("expected Local({needle:?}), got {other:?}"),
        }
    }

    #[test]
    fn the_chosen_row_is_carried_with_absolute_paths() {
        let p = plan(
            r#"{ commands = "*", paths = ["./", "~/cache"], read_paths = ["../ro"] }"#,
            "make",
            &[],
            &[],
        );
        let TerminalPlan::Confined { grant: g } = p else {
            panic!("{p:?}")
        };
        // relative paths resolve against the tool's base (/w), not the call's cwd (/w/sub)
        assert!(grant(&g).rows().is_some_and(|r| r.len() == 1), "{g}");
        assert!(
            g.contains("\"/w\"") && g.contains("\"/home/u/cache\"") && g.contains("\"/ro\""),
            "{g}"
        );
        assert!(!g.contains("./") && !g.contains('~'), "{g}");
        // a rowed command runs under its own row alone
        let p = plan(
            r#"{ commands = ["ls"], paths = ["./"] }"#,
            "ls -la",
            &[],
            &[],
        );
        let TerminalPlan::Confined { grant: g } = p else {
            panic!("{p:?}")
        };
        assert!(g.contains("commands = [\"ls\"]"), "{g}");
    }

    #[test]
    fn what_the_terminal_cannot_carry_stays_local() {
        assert_eq!(plan("\"*\"", "ls", &[], &[]), TerminalPlan::Unconfined);
        local(
            plan("\"*\"", "ls", &["GH_TOKEN"], &[]),
            "screens the secrets",
        );
        local(plan("\"*\"", "ls", &[], &["gh_token"]), "never goes into");
        local(
            plan(
                r#"[{ commands = "*", paths = ["./"] }, { commands = ["curl"], network = "*" }]"#,
                "make",
                &[],
                &[],
            ),
            "command broker",
        );
        local(
            plan(
                r#"{ commands = "*", env = "*" }"#,
                "make",
                &["GH_TOKEN"],
                &[],
            ),
            "named like a secret",
        );
        local(
            plan(
                r#"{ commands = "*", env = ["GH_TOKEN"] }"#,
                "make",
                &["GH_TOKEN"],
                &["GH_TOKEN"],
            ),
            "granted secrets",
        );
        // no secret known: even env = "*" is carried (there is nothing loom would have screened)
        assert!(matches!(
            plan(r#"{ commands = "*", env = "*" }"#, "make", &[], &[]),
            TerminalPlan::Confined { .. }
        ));
        let g = grant(r#"{ commands = "*", paths = ["~/x"] }"#);
        let ctx = PathCtx::new("/w", None);
        let auth = Authorization {
            row: Some((0, g.rows().unwrap()[0].clone())),
            exec: Exec::Shell,
        };
        let argv = vec!["/bin/bash".to_string(), "-c".into(), "ls".into()];
        local(
            terminal_plan(&TerminalFacts {
                grant: &g,
                auth: &auth,
                ctx: &ctx,
                cwd: "/w",
                argv: &argv,
                secret_env_names: &[],
                shareable: &[],
            }),
            "no home directory",
        );
    }
}
