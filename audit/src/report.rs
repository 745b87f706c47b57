//! The audit report: the kernel's objects for one manifest, gathered without calling a model.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loom_kernel::{
    check_laws, judge_group, tool_grants, AlgebraKind, Ceiling, GroupJudgement, LawReport,
    LawViolation, Manifest, ManifestLoader, PathCtx, ProviderRef, ProviderSpec, SubagentVerdict,
    ToolGrant, DEFAULT_SEED, DEFAULT_TRIALS,
};

/// How serious a finding is. `Error` makes the audit fail (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Worth knowing; the manifest is still fully resolvable.
    Note,
    /// Probably a mistake, but not a hole.
    Warning,
    /// The manifest is not fully resolvable, or a check failed.
    Error,
}

impl Level {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// One finding of the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Severity.
    pub level: Level,
    /// What it is about (a tool, a key, a sub-agent).
    pub subject: String,
    /// The finding, with the fix where there is one.
    pub message: String,
}

/// The result of the boot property check for one algebra.
#[derive(Debug, Clone)]
pub struct LawOutcome {
    /// The algebra.
    pub algebra: AlgebraKind,
    /// The tools that use it.
    pub tools: Vec<String>,
    /// The kernel's answer.
    pub result: Result<LawReport, LawViolation>,
}

/// Everything `loom audit` prints.
#[derive(Debug, Clone)]
pub struct Report {
    /// The manifest file as given.
    pub file: String,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The per-agent storage directory.
    pub storage: PathBuf,
    /// The path facts grants resolve against.
    pub ctx: PathCtx,
    /// The effective ceiling.
    pub ceiling: Ceiling,
    /// Each tool instance with its grant.
    pub tools: Vec<ToolGrant>,
    /// The property check of each algebra in use.
    pub laws: Vec<LawOutcome>,
    /// Contributed tool groups with verdicts.
    pub groups: Vec<GroupJudgement>,
    /// The sub-agent tree with containment verdicts.
    pub subagents: Vec<SubagentVerdict>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
}

impl Report {
    /// True when nothing is an error: the manifest is fully resolvable and every check passed.
    pub fn healthy(&self) -> bool {
        !self.findings.iter().any(|f| f.level == Level::Error)
    }

    /// How many findings of `level`.
    pub fn count(&self, level: Level) -> usize {
        self.findings.iter().filter(|f| f.level == level).count()
    }

    /// How many contributed groups were rejected.
    pub fn rejected_groups(&self) -> usize {
        self.groups.iter().filter(|g| !g.accepted).count()
    }
}

/// Inputs of [`build_report`] that come from the runtime (I/O done by the caller).
pub struct Facts<'a> {
    /// The manifest file as given on the command line.
    pub file: String,
    /// The canonical identity of the file (for cycle detection).
    pub id: String,
    /// The storage directory.
    pub storage: PathBuf,
    /// The path facts.
    pub ctx: PathCtx,
    /// Contributed tool groups already parsed by the runtime (skills, session layers).
    pub groups: Vec<loom_kernel::ToolGroup>,
    /// Loads sub-manifests named by path.
    pub loader: &'a mut dyn ManifestLoader,
}

/// Builds the report. Pure apart from what `facts.loader` does.
pub fn build_report(manifest: Manifest, facts: Facts<'_>) -> Report {
    let ctx = facts.ctx;
    let ceiling = manifest.effective_ceiling(&ctx);
    let tools = tool_grants(&manifest, &ceiling);
    let mut findings = Vec::new();

    for t in &tools {
        for p in &t.problems {
            findings.push(Finding {
                level: Level::Error,
                subject: t.instance.clone(),
                message: p.clone(),
            });
        }
        if let Some(pending) = unresolved(&manifest, &t.provider) {
            findings.push(Finding {
                level: Level::Error,
                subject: t.instance.clone(),
                message: format!(
                    "not resolved yet: {pending}; audit cannot list its schema or check its argument grants, so it \
                     cannot vouch for this tool"
                ),
            });
        }
    }
    for key in ceiling.grants.keys() {
        if !manifest.tools.contains_key(key)
            && !is_builtin_name(key)
            && !is_subagent_key(&manifest, key)
        {
            findings.push(Finding {
                level: Level::Note,
                subject: key.clone(),
                message: format!(
                    "[capabilities].{key} grants a tool no [tools] entry uses; it only pre-authorises contributions \
                     (skills, session tool groups) that name `{key}`"
                ),
            });
        }
    }
    if manifest
        .session
        .layers
        .iter()
        .any(|l| l.provider == "skills")
    {
        findings.push(Finding {
            level: Level::Note,
            subject: "session.skills".into(),
            message: "skills not resolved yet: the skills layer's roots are not scanned by this version, so no skill \
                      contributes tools"
                .into(),
        });
    }

    // the boot property check, once per algebra in use
    let mut by_kind: BTreeMap<AlgebraKind, Vec<String>> = BTreeMap::new();
    for t in &tools {
        by_kind
            .entry(t.algebra)
            .or_default()
            .push(t.instance.clone());
    }
    // the algebras are independent, so check them side by side; a check that panics is a failure, never a pass
    let mut laws: Vec<LawOutcome> = Vec::new();
    std::thread::scope(|scope| {
        let jobs: Vec<_> = by_kind
            .into_iter()
            .map(|(kind, names)| {
                let ctx = &ctx;
                let tools = names.join(", ");
                let job = scope.spawn(move || {
                    let alg = kind.build(ctx);
                    check_laws(&tools, alg.as_ref(), DEFAULT_SEED, DEFAULT_TRIALS)
                });
                (kind, names, job)
            })
            .collect();
        for (kind, names, job) in jobs {
            match job.join() {
                Ok(result) => laws.push(LawOutcome {
                    algebra: kind,
                    tools: names,
                    result,
                }),
                Err(_) => findings.push(Finding {
                    level: Level::Error,
                    subject: names.join(", "),
                    message:
                        "the property check of this algebra crashed; loom refuses to vouch for it"
                            .into(),
                }),
            }
        }
    });
    for l in &laws {
        if let Err(v) = &l.result {
            findings.push(Finding {
                level: Level::Error,
                subject: v.tool.clone(),
                message: v.to_string(),
            });
        }
    }

    let groups: Vec<GroupJudgement> = facts
        .groups
        .iter()
        .map(|g| judge_group(&manifest, &ceiling, &ctx, g))
        .collect();
    for g in groups.iter().filter(|g| !g.accepted) {
        findings.push(Finding {
            level: Level::Error,
            subject: g.label.clone(),
            message:
                "tool group rejected (fail-soft: the agent boots without it); see its verdicts"
                    .into(),
        });
    }

    let subagents = loom_kernel::check_subagents(&manifest, &facts.id, &ctx, facts.loader);
    collect_subagent_findings(&subagents, "", &mut findings);

    findings.sort_by_key(|f| std::cmp::Reverse(f.level));
    Report {
        file: facts.file,
        manifest,
        storage: facts.storage,
        ctx,
        ceiling,
        tools,
        laws,
        groups,
        subagents,
        findings,
    }
}

fn collect_subagent_findings(subs: &[SubagentVerdict], prefix: &str, out: &mut Vec<Finding>) {
    for s in subs {
        let name = format!("{prefix}{} > {}", s.key, s.name.as_deref().unwrap_or("?"));
        if let Some(e) = &s.error {
            out.push(Finding {
                level: Level::Error,
                subject: name.clone(),
                message: e.clone(),
            });
        }
        for x in &s.excess {
            let parent = x
                .parent
                .as_ref()
                .map(|g| g.to_string())
                .unwrap_or_else(|| "nothing".into());
            out.push(Finding {
                level: Level::Error,
                subject: name.clone(),
                message: format!(
                    "sub-agent exceeds its parent's ceiling at `{}`: it has {}, the parent grants {parent}; narrow the \
                     sub-manifest's [capabilities].{} (a sub-manifest with no [capabilities] gets the default ceiling — \
                     write an empty [capabilities] table to request none)",
                    x.key, x.child, x.key
                ),
            });
        }
        collect_subagent_findings(&s.children, &format!("{name} > "), out);
    }
}

fn is_builtin_name(key: &str) -> bool {
    loom_kernel::BUILTIN_TOOLS.contains(&key) || key == "web_fetch"
}

fn is_subagent_key(manifest: &Manifest, key: &str) -> bool {
    manifest.subagents.iter().any(|s| s.key == key)
}

/// Why a provider's tools cannot be resolved by this version, if they cannot.
fn unresolved(manifest: &Manifest, provider: &ProviderRef) -> Option<String> {
    let describe = |spec: &ProviderSpec| match spec {
        ProviderSpec::Configured { factory, .. } if factory == "mcp-server" => {
            "an MCP server (spawning servers to list their tools comes with MCP support)"
                .to_string()
        }
        ProviderSpec::Configured { factory, .. } => {
            format!("provider factory `{factory}` (external providers)")
        }
        ProviderSpec::Source(_) => "an external provider package (external providers)".to_string(),
    };
    match provider {
        ProviderRef::Builtin
        | ProviderRef::Session
        | ProviderRef::Harness(_)
        | ProviderRef::Host => None,
        ProviderRef::Handle(h) => Some(match manifest.providers.get(h) {
            Some(spec) => format!("[providers].{h} is {}", describe(spec)),
            None => format!("[providers].{h} is not defined"),
        }),
        ProviderRef::Shipped(s) => Some(format!("{} is {}", s.label, describe(&s.spec))),
    }
}
