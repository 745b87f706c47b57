//! The audit as a text tree.

use std::fmt::Write as _;

use loom_kernel::{
    is_general_row, rowed_commands, AlgebraKind, DeclVerdict, Grant, GrantSource, GroupJudgement,
    PathCtx, ProviderRef, SubagentVerdict, SystemPrompt, ToolGrant, Value,
};

use crate::report::{Level, Report};

/// Renders the report as the tree `loom audit` prints.
pub fn render_text(r: &Report) -> String {
    let mut o = String::new();
    let m = &r.manifest;
    let _ = writeln!(o, "agent     {}  ({})", m.agent.name, r.file);
    if let Some(d) = &m.agent.description {
        let _ = writeln!(o, "          {d}");
    }
    let _ = writeln!(o, "storage   {}", r.storage.display());
    let _ = writeln!(
        o,
        "cwd       {}  (relative grant paths resolve here)",
        r.ctx.base
    );
    match &m.harness {
        Some(h) => {
            let _ = writeln!(o, "harness   {}", harness_line(h));
        }
        None => {
            let _ = writeln!(o, "harness   none declared");
        }
    }
    for (name, h) in &m.harnesses {
        let _ = writeln!(o, "harness   {name} = {}  (named)", harness_line(h));
    }
    if m.supervisor.enabled || m.supervisor.review.is_some() {
        let s = &m.supervisor;
        let _ = writeln!(
            o,
            "supervisor {}, sends a turn back at most {} time(s){}",
            if s.enabled {
                "on"
            } else {
                "off (the REPL can switch it on)"
            },
            s.max_rounds,
            s.review
                .as_ref()
                .map(|r| format!(
                    "; {r} reviews completion claims ({} request(s) a turn)",
                    s.review_budget
                ))
                .unwrap_or_default()
        );
    }
    if let Some(p) = &m.agent.system_prompt {
        let _ = writeln!(
            o,
            "prompt    {}",
            match p {
                SystemPrompt::Text(t) => format!("{} chars inline", t.chars().count()),
                SystemPrompt::Path(p) => format!("from {p}"),
            }
        );
    }
    let examples = m
        .harness
        .as_ref()
        .filter(|h| h.provider == "local")
        .and_then(|h| h.config.get("examples"))
        .and_then(|v| v.as_array())
        .map(Vec::len);
    if let Some(n) = examples {
        let _ = writeln!(
            o,
            "examples  {n} worked turn(s) shown to the model before the conversation (text: they run and grant nothing)"
        );
    }
    if !m.agent.secrets.is_empty() {
        let _ = writeln!(
            o,
            "secrets   {} (names only; values are never printed)",
            m.agent.secrets.join(", ")
        );
    }
    let layers: Vec<&str> = m
        .session
        .layers
        .iter()
        .map(|l| l.provider.as_str())
        .collect();
    let _ = writeln!(
        o,
        "session   {}{}",
        layers.join(" -> "),
        if m.session.defaulted {
            "  (default chain)"
        } else {
            ""
        }
    );
    // external providers: the source, and a package's config by key name only (values may come from `${VAR}`)
    for (handle, spec) in &m.providers {
        if spec.source().is_some() {
            let _ = writeln!(o, "provider  {handle}  {}", spec.describe());
        }
    }

    let _ = writeln!(
        o,
        "\neffective ceiling{}",
        if r.ceiling.defaulted {
            "  (no [capabilities] section: the default ceiling)"
        } else {
            "  ([capabilities] joined with inline tool grants)"
        }
    );
    let width = r.ceiling.grants.keys().map(|k| k.len()).max().unwrap_or(0);
    for (k, g) in &r.ceiling.grants {
        let _ = writeln!(o, "  {k:width$}  {g}");
    }
    if r.ceiling.grants.is_empty() {
        let _ = writeln!(o, "  (empty: nothing granted)");
    }

    let _ = writeln!(o, "\ntools");
    for t in &r.tools {
        render_tool(&mut o, &r.ctx, t, &m.agent.secrets);
        match r.mcp.get(&t.instance) {
            Some(Ok(m)) => {
                let _ = writeln!(o, "      model sees  {}", m.schema);
            }
            Some(Err(e)) => {
                let _ = writeln!(o, "      unresolved  {e}");
            }
            None => {}
        }
    }
    if r.tools.is_empty() {
        let _ = writeln!(o, "  (none)");
    }

    let _ = writeln!(o, "\ncontributed tools");
    if r.groups.is_empty() {
        let _ = writeln!(
            o,
            "  (none{})",
            if layers.contains(&"skills") {
                "; no skills found"
            } else {
                ""
            }
        );
    }
    if let Some(s) = &r.skills {
        let total: usize = s.by_source.values().sum();
        let parts: Vec<String> = s
            .by_source
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let _ = writeln!(o, "  skills found  {total}: {}", parts.join(", "));
        for (name, source, dir) in &s.overrides {
            let _ = writeln!(
                o,
                "  overridden    the bundled skill {name}, by the {source} skill at {dir}"
            );
        }
    }
    // the bundled skills ask for nothing (the lint test holds them to it): one line for all that are active and do
    let quiet = |g: &GroupJudgement| {
        g.accepted
            && r.skills
                .as_ref()
                .is_some_and(|s| s.bundled.contains(&g.label))
            && g.decls.iter().all(|d| d.requested.is_none())
    };
    let bundled: Vec<&str> = r
        .groups
        .iter()
        .filter(|g| quiet(g))
        .map(|g| g.label.strip_prefix("skill ").unwrap_or(&g.label))
        .collect();
    if !bundled.is_empty() {
        let _ = writeln!(
            o,
            "  bundled skills ({})  [ACTIVE]  built into loom; read_skill requests nothing\n    {}",
            bundled.len(),
            bundled.join(", ")
        );
    }
    for g in r.groups.iter().filter(|g| !quiet(g)) {
        let _ = writeln!(
            o,
            "  {}  [{}]  {}",
            g.label,
            if g.accepted { "ACTIVE" } else { "INACTIVE" },
            g.origin
        );
        for d in &g.decls {
            let req = d
                .requested
                .as_ref()
                .map(|g| g.to_string())
                .unwrap_or_else(|| "nothing".into());
            match &d.verdict {
                DeclVerdict::Accepted { judged_against } => {
                    let against = judged_against
                        .as_ref()
                        .map(|k| format!(" (within `{k}`)"))
                        .unwrap_or_default();
                    let _ = writeln!(o, "    ok        {} requests {req}{against}", d.instance);
                }
                DeclVerdict::Rejected {
                    reason,
                    remediation,
                    ..
                } => {
                    let _ = writeln!(o, "    rejected  {}: {reason}", d.instance);
                    let _ = writeln!(o, "              to accept, {remediation}");
                }
            }
        }
        for s in r.shipped.iter().filter(|s| s.shipped.group == g.label) {
            render_shipped(&mut o, s);
        }
    }

    let _ = writeln!(o, "\nsub-agents");
    if r.subagents.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    render_subagents(&mut o, &r.subagents, 1);
    let (deny, ask, pre) = loom_kernel::inherited_counts(&r.manifest);
    if !r.subagents.is_empty() && deny + ask + pre > 0 {
        let _ = writeln!(
            o,
            "  every sub-agent keeps this agent's {deny} deny rules, {ask} ask rules and {pre} PreToolUse hooks \
             (before its own; its allow rules never answer a call they catch)"
        );
    }

    // hooks are programs the manifest runs outside every grant: they belong in the authority surface
    let _ = writeln!(
        o,
        "\nhooks  (run unconfined, from the manifest's directory)"
    );
    if m.hooks.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for (event, hook) in &m.hooks.0 {
        let what = &hook.action;
        let matcher = hook
            .matcher
            .as_deref()
            .map(|m| format!(" [{m}]"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {}{matcher}  {what}  (timeout {}s)",
            event.name(),
            hook.timeout_secs
        );
    }

    if !r.authority.is_empty() {
        let _ = writeln!(
            o,
            "\nauthority files  (what loom runs or trusts: no tool may change one, nor read a secret store; one a confined \
             command creates where none was is moved aside when it ends)"
        );
        for (f, e) in &r.authority {
            let state = match e {
                loom_kernel::Exposure::Unreached => "out of every grant".to_string(),
                loom_kernel::Exposure::Protected(t) => format!("protected from {}", t.join(", ")),
                loom_kernel::Exposure::Exposed(t) => {
                    format!("EXPOSED to {} (unconfined)", t.join(", "))
                }
            };
            let _ = writeln!(
                o,
                "  {:15} {}  [{state}]  {}",
                f.kind.name(),
                f.path,
                f.origin
            );
        }
    }

    let _ = writeln!(
        o,
        "\nalgebra laws  (seed {:#x}, {} trials per law)",
        loom_kernel::DEFAULT_SEED,
        loom_kernel::DEFAULT_TRIALS
    );
    for l in &r.laws {
        let status = match &l.result {
            Ok(rep) => format!("ok ({} transitive chains exercised)", rep.transitive_chains),
            Err(v) => format!("FAILED: {}", v.law),
        };
        let _ = writeln!(
            o,
            "  {:8} {}: {status}",
            algebra_name(l.algebra),
            l.tools.join(", ")
        );
    }

    let errors = r.count(Level::Error);
    let warnings = r.count(Level::Warning);
    let _ = writeln!(
        o,
        "\nhealth    {}  ({}, {}, {}, {})",
        if r.healthy() {
            "ok"
        } else {
            "NOT fully resolvable"
        },
        counted(r.tools.len(), "tool"),
        counted(errors, "error"),
        counted(warnings, "warning"),
        counted(r.rejected_groups(), "rejected tool group")
    );
    for f in &r.findings {
        let _ = writeln!(o, "  {:7}  {}: {}", f.level.name(), f.subject, f.message);
    }
    o
}

/// A provider a group ships: where it is installed (or why it is not), and what the model sees of each tool.
fn render_shipped(o: &mut String, s: &loom_kernel::ShippedState) {
    let _ = writeln!(
        o,
        "    ships     {} ({})  as {}  [{}]",
        s.shipped.label,
        s.shipped.source.describe(),
        s.shipped.key,
        s.state.label()
    );
    for (instance, resolved) in &s.tools {
        match resolved {
            Ok(m) => {
                let _ = writeln!(o, "      {instance}  model sees  {}", m.schema);
            }
            Err(e) => {
                let _ = writeln!(o, "      {instance}  unresolved  {e}");
            }
        }
    }
}

/// A harness as audit shows it: its provider, model, and the key it needs or where it runs.
fn harness_line(h: &loom_kernel::HarnessSpec) -> String {
    let model = h
        .config
        .get("model")
        .and_then(|v| v.as_str())
        .map(|s| format!(" (model {s})"))
        .unwrap_or_default();
    format!("{}{model}{}", h.provider, harness_note(&h.provider))
}

fn harness_note(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "  needs secret ANTHROPIC_API_KEY",
        "openai" => "  needs secret OPENAI_API_KEY",
        // SECURITY.md, "Local models": the engine confines itself before it loads the model
        "local" => "  runs in loom-engine, confined: reads only its model file; no network, exec, child processes or signals",
        _ => "",
    }
}

fn algebra_name(k: AlgebraKind) -> &'static str {
    match k {
        AlgebraKind::Default => "default",
        AlgebraKind::Files => "files",
        AlgebraKind::Bash => "bash",
        AlgebraKind::Mcp => "mcp",
        AlgebraKind::ServerTool => "server-tool",
    }
}

/// How a provider reference reads in the tree.
pub fn provider_label(p: &ProviderRef) -> String {
    match p {
        ProviderRef::Builtin => "builtin".into(),
        ProviderRef::Session => "session".into(),
        ProviderRef::Harness(h) => format!("harness {h}"),
        ProviderRef::Handle(h) => format!("[providers].{h}"),
        ProviderRef::Shipped(s) => format!("ships {}", s.label),
        ProviderRef::Host => "the host's instance".into(),
    }
}

fn render_tool(o: &mut String, ctx: &PathCtx, t: &ToolGrant, shared: &[String]) {
    let name = if t.instance == t.underlying {
        t.instance.clone()
    } else {
        format!("{} (= {})", t.instance, t.underlying)
    };
    let from = match t.source {
        GrantSource::Inline => "inline".to_string(),
        GrantSource::CeilingInstance => format!("ceiling `{}`", t.instance),
        GrantSource::CeilingUnderlying => format!("ceiling `{}`", t.underlying),
        GrantSource::Nothing => "nothing grants it".to_string(),
    };
    let _ = writeln!(o, "  {name}  <- {}", provider_label(&t.provider));
    let _ = writeln!(o, "      grant  {}  ({from})", t.grant);
    if t.algebra == AlgebraKind::Files && t.provider == ProviderRef::Builtin {
        for row in t.grant.rows().unwrap_or_default() {
            let _ = writeln!(
                o,
                "      roots  rw: {}; ro: {}",
                path_list(ctx, row.get("paths")),
                path_list(ctx, row.get("read_paths"))
            );
        }
    }
    if t.algebra == AlgebraKind::Bash {
        render_bash(o, ctx, &t.grant);
        let secrets = loom_kernel::grant_secrets(&t.grant, shared);
        let _ = writeln!(
            o,
            "      secrets  {}  (in its environment; every other secret loom knows is screened out)",
            if secrets.is_empty() {
                "none".to_string()
            } else {
                secrets.join(", ")
            }
        );
    }
    if t.underlying == "web_search" && t.provider == ProviderRef::Builtin {
        let _ = writeln!(
            o,
            "      reaches  api.search.brave.com only; needs secret BRAVE_SEARCH_API_KEY"
        );
    }
}

/// A path kind's value as a list, each relative path followed by what it resolves to.
fn path_list(ctx: &PathCtx, v: Option<&Value>) -> String {
    match v {
        None => "none".into(),
        Some(Value::Star) => "any path".into(),
        Some(v) => v
            .elements()
            .unwrap_or_default()
            .iter()
            .map(|e| match e.as_str() {
                Some(p) if ctx.normalize(p) != p => format!("{p} (= {})", ctx.normalize(p)),
                Some(p) => p.to_string(),
                None => e.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn render_bash(o: &mut String, ctx: &PathCtx, grant: &Grant) {
    let Some(rows) = grant.rows() else {
        let _ = writeln!(o, "      sandbox  none: \"*\" runs unconfined");
        return;
    };
    for row in rows {
        // the sandbox's own reading of the row: a value it refuses is shown as refused, never as "no network"
        let net = match loom_kernel::sandbox_network(row.get("network")) {
            Ok(true) => "network",
            Ok(false) => "no network",
            Err(_) => "network value refused by the sandbox (see the error)",
        };
        let fs = format!(
            "rw: {}; ro: {}",
            path_list(ctx, row.get("paths")),
            path_list(ctx, row.get("read_paths"))
        );
        if is_general_row(row) {
            let _ = writeln!(o, "      shell    any command via bash -c; {fs}; {net}");
        } else if let Some(cmds) = rowed_commands(row) {
            let _ = writeln!(
                o,
                "      own grant  {} — carried into pipelines by the broker; {fs}; {net}",
                cmds.join(", ")
            );
        }
    }
}

fn render_subagents(o: &mut String, subs: &[SubagentVerdict], depth: usize) {
    for s in subs {
        let pad = "  ".repeat(depth);
        let status = if let Some(e) = &s.error {
            format!("ERROR: {e}")
        } else if s.excess.is_empty() {
            "contained in its parent".into()
        } else {
            let keys: Vec<&str> = s.excess.iter().map(|x| x.key.as_str()).collect();
            format!("EXCEEDS its parent at {}", keys.join(", "))
        };
        let _ = writeln!(
            o,
            "{pad}{} > {}  ({})  {status}",
            s.key,
            s.name.as_deref().unwrap_or("?"),
            s.source
        );
        render_subagents(o, &s.children, depth + 1);
    }
}

/// `n` things, in the singular for one: "1 error", "2 errors", "0 rejected tool groups".
fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}
