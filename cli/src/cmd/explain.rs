//! `loom explain [agent.toml] <tool> '<input JSON>'`: which grant row, rule and remembered answer decide a call, and
//! why — the decision the turn loop would make, without a model and without running the call.
//!
//! Exit codes: 0 when the call was explained (whatever the verdict), 1 when it cannot be (the agent does not boot,
//! the tool is unknown, the tool refuses the input), 2 for usage errors (input that is not a JSON object).

use loom_kernel::{Decision, Exec, Grant, Rule, RuleKind, Verdict};
use loom_runtime::{explain_call, BootOptions, Explanation};

use crate::exit;
use crate::output::{emit, fail};

/// Arguments of `loom explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// [MANIFEST] TOOL INPUT: the agent manifest (default ./agent.toml; a directory means its agent.toml), the tool
    /// instance as the model calls it (a key of `[tools]`), and the call's input as one JSON object (what the model
    /// would send).
    #[arg(value_name = "[MANIFEST] TOOL INPUT", num_args = 2..=3, required = true)]
    args: Vec<String>,
}

/// Runs `loom explain`.
pub fn run(args: Args) -> i32 {
    let (manifest, tool, input) = match args.args.as_slice() {
        [m, t, i] => (m.as_str(), t, i),
        [t, i] => (super::manifest_arg::DEFAULT, t, i),
        _ => return fail(exit::USAGE, "usage: loom explain [MANIFEST] TOOL INPUT"),
    };
    let manifest = match super::manifest_arg::resolve(std::path::Path::new(manifest)) {
        Ok(m) => m,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let input: serde_json::Value = match serde_json::from_str(input) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => return fail(exit::USAGE, "the input must be one JSON object, e.g. '{\"command\": \"ls\"}'"),
        Err(e) => {
            return fail(
                exit::USAGE,
                &format!("the input is not valid JSON ({e}); quote it for the shell, e.g. '{{\"path\": \"a.txt\"}}'"),
            )
        }
    };
    match explain_call(&manifest, tool, &input, BootOptions::default()) {
        Ok((explanation, notes)) => {
            for n in notes {
                eprintln!("loom: note: {n}");
            }
            emit(&render(&explanation));
            exit::OK
        }
        Err(e) => fail(exit::FAILED, &format!("{}: {e}", manifest.display())),
    }
}

fn render(x: &Explanation) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        out.push_str(&format!("{label:<9}{text}\n"));
    };
    let algebra = format!("{:?}", x.algebra).to_lowercase();
    line("tool", format!("{} ({algebra} algebra)", x.tool));
    line("grant", x.grant.to_string());
    let facts = [
        x.facts.command.as_ref().map(|c| format!("command {c:?}")),
        x.facts.path.as_ref().map(|p| format!("path {p}")),
        x.facts.host.as_ref().map(|h| format!("host {h}")),
    ];
    let facts: Vec<String> = facts.into_iter().flatten().collect();
    line(
        "facts",
        if facts.is_empty() {
            "(no command, path or host: rules match on the tool name only)".into()
        } else {
            facts.join(", ")
        },
    );
    match &x.decision {
        Decision::Allow(a) => {
            let how = match a.exec() {
                Exec::Unconfined => "runs unconfined (the grant is \"*\")".to_string(),
                Exec::Shell => {
                    "runs as `/bin/bash -c` in the sandbox built from that row".to_string()
                }
                Exec::Argv(argv) => format!(
                    "runs as the argv {argv:?} (no shell) in the sandbox built from that row"
                ),
                Exec::InProcess => "runs in loom under that row".to_string(),
            };
            match a.row() {
                Some((i, row)) => line(
                    "kernel",
                    format!(
                        "allowed by row {} of the grant: {}; {how}",
                        i + 1,
                        Grant::row(row.clone())
                    ),
                ),
                None => line("kernel", format!("allowed: {how}")),
            }
        }
        Decision::Deny(d) => line("kernel", format!("DENIED: {d}")),
    }
    match &x.rule {
        _ if matches!(x.decision, Decision::Deny(_)) => {
            line("rule", "not consulted: a grant denial is final".into())
        }
        Some((kind, i, rule)) => {
            let what = match kind {
                RuleKind::Deny => "deny",
                RuleKind::Ask => "ask",
                RuleKind::Allow => "allow",
            };
            line(
                "rule",
                format!(
                    "{} {} matched: {what}",
                    loom_kernel::position(kind.key(), *i),
                    render_rule(rule)
                ),
            );
            if let Some(m) = &x.matched {
                line("matched", m.clone());
            }
        }
        None => line(
            "rule",
            "no [permissions] rule matched: the default (allow) applies".into(),
        ),
    }
    if let Some(r) = &x.approval {
        let subject = r
            .approval
            .subject
            .as_ref()
            .map_or_else(|| "every call of the tool".into(), ToString::to_string);
        line(
            "answer",
            format!(
                "the ask is answered by a remembered \"always\" ({subject}, given {}); `loom permissions revoke` \
                 forgets it",
                super::permissions::utc(r.at)
            ),
        );
    }
    line(
        "hooks",
        if x.pre_hooks.is_empty() {
            "no PreToolUse hook matches this tool".into()
        } else {
            format!(
                "PreToolUse {} would run first — not run by explain; a hook can deny, ask or rewrite the input, \
                 never grant",
                x.pre_hooks.join(", ")
            )
        },
    );
    let verdict = match (x.verdict, &x.decision) {
        (Verdict::Deny, Decision::Deny(_)) => "DENY — the grant does not allow it; no rule or answer can change that".into(),
        (Verdict::Deny, _) => "DENY — a deny rule refuses it inside the grant".into(),
        (Verdict::Ask, _) if x.headless => {
            "ASK — the user must approve it; a headless run (loom prompt) refuses it, loom run and ACP clients ask"
                .to_string()
        }
        (Verdict::Ask, _) => "ASK — the user must approve it".into(),
        (Verdict::Allow, _) => "ALLOW".to_string(),
    };
    line("verdict", verdict);
    out
}

fn render_rule(r: &Rule) -> String {
    let fields = [
        r.tool.as_ref().map(|v| format!("tool = {v:?}")),
        r.path_prefix
            .as_ref()
            .map(|v| format!("path_prefix = {v:?}")),
        r.command_prefix
            .as_ref()
            .map(|v| format!("command_prefix = {v:?}")),
        r.host.as_ref().map(|v| format!("host = {v:?}")),
    ];
    let fields: Vec<String> = fields.into_iter().flatten().collect();
    format!("{{ {} }}", fields.join(", "))
}
