//! The audit report: the kernel's objects for one manifest, gathered without calling a model.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use loom_kernel::{
    authority_exposure, boot_refusals, judge_group, landing_warning, nearest_name, tool_grants,
    AlgebraKind, Authority, AuthorityFile, AuthorityKind, BootSlot, Ceiling, Exposure, GrantSource,
    GroupJudgement, LawCheck, LawReport, LawTally, LawViolation, Manifest, ManifestLoader, PathCtx,
    ProviderRef, ProviderSpec, SubagentVerdict, ToolGrant, DEFAULT_SEED, DEFAULT_TRIALS,
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
    /// Each MCP tool instance: its server and schema after pre-binding, or why it could not be resolved.
    pub mcp: BTreeMap<String, Result<loom_kernel::McpResolution, String>>,
    /// The providers accepted contributed groups ship: install state and each tool resolved from the pinned install.
    pub shipped: Vec<loom_kernel::ShippedState>,
    /// The agent's authority files (what loom runs or trusts) and how each stands against the grants
    /// ([`add_authority`]).
    pub authority: Vec<(AuthorityFile, Exposure)>,
    /// What the skills layer found, when the chain has one (set by the caller, which scans the roots).
    pub skills: Option<SkillsSummary>,
}

/// The skills layer's find, counted by where each skill comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillsSummary {
    /// Skills found, by source (`workspace`, `user`, `root`, `bundled`).
    pub by_source: BTreeMap<String, usize>,
    /// The groups of the bundled skills (`skill <name>`), shown together.
    pub bundled: std::collections::BTreeSet<String>,
    /// Bundled skills a higher root overrides: (name, the overriding skill's source, its folder).
    pub overrides: Vec<(String, String, String)>,
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
    /// MCP tools resolved by spawning their servers (the runtime's `resolve_mcp_tools`); an MCP tool missing here
    /// is reported as unresolved.
    pub mcp: BTreeMap<String, Result<loom_kernel::McpResolution, String>>,
    /// The providers accepted contributed groups ship, resolved from their pinned installs
    /// (the runtime's `shipped_states`).
    pub shipped: Vec<loom_kernel::ShippedState>,
    /// The boot property check, if the caller started it as soon as the manifest was parsed
    /// ([`BootChecks::start`] with this manifest and `ctx`); otherwise (or if it was started for other algebras or
    /// another context) the report starts its own.
    pub checks: Option<BootChecks>,
}

/// Builds the report. Pure apart from what `facts.loader` does.
pub fn build_report(manifest: Manifest, facts: Facts<'_>) -> Report {
    let ctx = facts.ctx;
    let ceiling = manifest.effective_ceiling(&ctx);
    let mut tools = tool_grants(&manifest, &ceiling);
    let mut findings = Vec::new();
    let groups: Vec<GroupJudgement> = facts
        .groups
        .iter()
        .map(|g| judge_group(&manifest, &ceiling, &ctx, g))
        .collect();
    // what runs: a manifest tool's grant widened by the rows accepted groups add at boot (the kernel's
    // bound_grants, over the groups boot would keep), so the grant, sandbox and secrets lines below are the ones that run
    for (instance, labels) in widen_by_groups(&manifest, &ctx, &facts.groups, &groups, &mut tools) {
        findings.push(Finding {
            level: Level::Note,
            subject: format!("tools.{instance}"),
            message: format!(
                "its grant as shown includes the rows {} add{} at boot (what [capabilities] alone grants is in the \
                 effective ceiling above)",
                labels.join(", "),
                if labels.len() == 1 { "s" } else { "" }
            ),
        });
    }

    for t in &tools {
        for p in &t.problems {
            findings.push(Finding {
                level: Level::Error,
                subject: t.instance.clone(),
                message: p.clone(),
            });
        }
        if t.algebra == AlgebraKind::Mcp {
            let message = match facts.mcp.get(&t.instance) {
                Some(Ok(_)) => None,
                Some(Err(e)) => Some(format!("cannot resolve this tool: {e}")),
                // an inline provider source on a tool entry is not bound by this build (boot refuses it too)
                None => Some(match (&t.provider, unresolved(&manifest, &t.provider)) {
                    (ProviderRef::Shipped(_), Some(pending)) => format!(
                        "not resolved yet: {pending}; name the source in [providers] and use its handle"
                    ),
                    _ => "this tool was not resolved (its MCP server or provider was not started), so audit cannot \
                          vouch for its schema or argument grants"
                        .to_string(),
                }),
            };
            if let Some(message) = message {
                findings.push(Finding {
                    level: Level::Error,
                    subject: t.instance.clone(),
                    message,
                });
            }
        } else if let Some(pending) = unresolved(&manifest, &t.provider) {
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
    // what boot refuses, from the same kernel function: if audit exits 0, boot gets past these
    let refusals = boot_refusals(&manifest, BootSlot::default());
    for r in &refusals {
        findings.push(Finding {
            level: Level::Error,
            subject: r.key.clone(),
            message: format!("boot refuses this: {}", r.message),
        });
    }
    // where a relative grant path of a built-in file or shell tool lands, when that is probably not what was meant
    let manifest_dir = std::path::Path::new(&facts.id)
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| ctx.base.clone());
    // one finding per path, naming every tool whose grant has it
    let mut landings: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for t in &tools {
        if t.provider != ProviderRef::Builtin
            || !matches!(t.algebra, AlgebraKind::Files | AlgebraKind::Bash)
        {
            continue;
        }
        for row in t.grant.rows().unwrap_or_default() {
            for kind in ["paths", "read_paths"] {
                let Some(v) = row.get(kind) else { continue };
                for raw in v
                    .elements()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|e| e.as_str())
                {
                    let users = landings.entry(raw.to_string()).or_default();
                    if !users.contains(&t.instance.as_str()) {
                        users.push(t.instance.as_str());
                    }
                }
            }
        }
    }
    for (raw, users) in landings {
        if let Some(why) = landing_warning(&ctx, &manifest_dir, &raw) {
            findings.push(Finding {
                level: Level::Warning,
                subject: format!("grant path `{raw}` ({})", users.join(", ")),
                message: why,
            });
        }
    }
    // K11: a per-command row naming a program that runs what its arguments say is a shell under that row
    for t in &tools {
        if t.algebra != AlgebraKind::Bash {
            continue;
        }
        for (i, row) in t.grant.rows().unwrap_or_default().iter().enumerate() {
            let runners = loom_kernel::code_runners(row);
            if runners.is_empty() {
                continue;
            }
            findings.push(Finding {
                level: Level::Warning,
                subject: format!("tools.{} row {}", t.instance, i + 1),
                message: format!(
                    "{} run{} code {} arguments choose (git -c alias.x='!…', core.sshCommand; an interpreter's -c; \
                     env, xargs, find -exec), so this row is in effect any command with the row's own paths, network \
                     and secrets; grant only what you would grant a shell here",
                    runners.join(", "),
                    if runners.len() == 1 { "s" } else { "" },
                    if runners.len() == 1 { "its" } else { "their" },
                ),
            });
        }
    }
    // a built-in entry nothing grants: every call would be refused
    let ungranted: Vec<&str> = tools
        .iter()
        .filter(|t| t.source == GrantSource::Nothing && t.provider == ProviderRef::Builtin)
        .filter(|t| {
            !refusals
                .iter()
                .any(|r| r.key == format!("tools.{}", t.instance))
        })
        .map(|t| t.instance.as_str())
        .collect();
    let unused: Vec<&str> = ceiling
        .grants
        .keys()
        .map(String::as_str)
        .filter(|key| {
            // the default ceiling (no [capabilities]) names the four FS/shell built-ins whether offered or not
            let offered = manifest.tools.contains_key(*key);
            let defaulted = ceiling.defaulted && is_builtin_name(key);
            !offered && !defaulted && !is_subagent_key(&manifest, key)
        })
        .collect();
    for instance in &ungranted {
        let hint = match nearest_name(instance, &unused) {
            Some(near) => format!("; [capabilities].{near} looks like a misspelling of it"),
            None => String::new(),
        };
        findings.push(Finding {
            level: Level::Error,
            subject: format!("tools.{instance}"),
            message: format!(
                "nothing grants this tool, so every call to it would be refused: grant it in \
                 [capabilities].{instance} (or remove the entry){hint}"
            ),
        });
    }
    for key in unused {
        let near = nearest_name(key, &ungranted);
        findings.push(match near {
            Some(near) => Finding {
                level: Level::Warning,
                subject: format!("[capabilities].{key}"),
                message: format!(
                    "no [tools] entry is named `{key}`; did you mean `{near}`, which nothing grants? (as written it \
                     only pre-authorises contributions that name `{key}`)"
                ),
            },
            // a contribution here names it: the key does what it is for
            None if facts.groups.iter().any(|g| g.tools.contains_key(key)) => Finding {
                level: Level::Note,
                subject: key.to_string(),
                message: format!(
                    "[capabilities].{key} grants a tool no [tools] entry uses; it only pre-authorises contributions \
                     (skills, session tool groups) that name `{key}`, and only {}",
                    loom_kernel::key_for(&manifest, key)
                ),
            },
            None => Finding {
                level: Level::Warning,
                subject: format!("[capabilities].{key}"),
                message: format!(
                    "grants a tool nothing here offers: no [tools] entry and no contribution names `{key}`{offer}; \
                     as written it only pre-authorises contributions that name `{key}`, and only {}",
                    loom_kernel::key_for(&manifest, key),
                    offer = if is_builtin_name(key) {
                        format!(" (add `{key} = \"builtin\"` to [tools] to offer the built-in)")
                    } else {
                        String::new()
                    }
                ),
            },
        });
    }

    // an MCP server that asks to start in the project resolves code from it (npx, python -m, uvx)
    for (subject, cwd) in project_cwd_servers(&manifest, &tools) {
        findings.push(Finding {
            level: Level::Warning,
            subject,
            message: format!(
                "cwd = {}: this server starts in that directory (relative to the manifest's), not in a directory of \
                 loom's own, so it resolves code from the project directory: npx's node_modules and .npmrc, python \
                 -m's modules, uvx's config there are what runs, and a repository or the agent may have written \
                 them; remove cwd unless the server needs it",
                loom_kernel::toml_string(&cwd)
            ),
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
    let checks = match facts.checks {
        Some(c) if c.by_kind == by_kind && c.ctx == ctx => c,
        _ => BootChecks::of(by_kind, &ctx),
    };

    // gathered while the checks run; their findings follow the checks' below
    let subagents = loom_kernel::check_subagents(&manifest, &facts.id, &ctx, facts.loader);

    // a check that panics is a failure, never a pass
    let mut laws: Vec<LawOutcome> = Vec::new();
    for (kind, names, result) in checks.finish() {
        match result {
            Some(result) => laws.push(LawOutcome {
                algebra: kind,
                tools: names,
                result,
            }),
            None => findings.push(Finding {
                level: Level::Error,
                subject: names.join(", "),
                message: "the property check of this algebra crashed; loom refuses to vouch for it"
                    .into(),
            }),
        }
    }
    for l in &laws {
        if let Err(v) = &l.result {
            findings.push(Finding {
                level: Level::Error,
                subject: v.tool.clone(),
                message: v.to_string(),
            });
        }
    }

    for g in groups.iter().filter(|g| !g.accepted) {
        findings.push(Finding {
            level: Level::Error,
            subject: g.label.clone(),
            message:
                "tool group rejected (fail-soft: the agent boots without it); see its verdicts"
                    .into(),
        });
    }
    // a shipped provider that does not resolve leaves its group's tools out at boot
    for s in &facts.shipped {
        for (instance, resolved) in &s.tools {
            if let Err(e) = resolved {
                findings.push(Finding {
                    level: Level::Error,
                    subject: s.shipped.group.clone(),
                    message: format!("{instance} is left out at boot: {e}"),
                });
            }
        }
    }
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
        mcp: facts.mcp,
        shipped: facts.shipped,
        authority: Vec::new(),
        skills: None,
    }
}

type LawResult = Result<LawReport, LawViolation>;

/// How many trials of one algebra a worker claims at a time: small enough that the workers finish within a few
/// trials of each other, large enough that claiming costs nothing next to checking.
const CHUNK: usize = 10;

/// The boot property check of every algebra a manifest uses, running while the rest of the report is gathered.
///
/// [`BootChecks::start`] hands the trials to a helper thread at once; [`build_report`] joins in with the calling
/// thread once everything else is gathered, then collects the verdicts. Every trial of a check draws its grants from
/// a generator of its own ([`LawCheck::trial`]), so any worker can check any trial: the trials are claimed a chunk at
/// a time from one shared counter, in increasing order, so each worker checks its trials of an algebra in increasing
/// order, each with its own instance of the algebra, and stops that algebra at its first broken trial.
/// [`LawCheck::finish`] joins the workers' tallies into exactly what `check_laws` returns for the same seed and number
/// of trials, whoever checked which trial. A tally lost with a crashed worker never passes.
///
/// One helper, not one per core: asking the system how many cores there are costs more (~0.1 ms of cgroup files)
/// than a third worker would save on this machine class (the target machine has two).
pub struct BootChecks {
    ctx: PathCtx,
    by_kind: BTreeMap<AlgebraKind, Vec<String>>,
    work: Arc<Work>,
    /// The helper's tallies, once it is done (`None`: no helper could be started).
    helper: Option<Receiver<Vec<LawTally>>>,
}

/// What the workers share: the checks and the counter they claim chunks of trials from.
struct Work {
    checks: Vec<Check>,
    ctx: PathCtx,
    /// Chunk `u` is trials `CHUNK * k ..` of check `i`, in check order, then trial order.
    chunks: Vec<(usize, std::ops::Range<usize>)>,
    next: AtomicUsize,
}

/// One algebra's boot check: the algebra and the kernel's check.
struct Check {
    kind: AlgebraKind,
    law: LawCheck,
}

impl BootChecks {
    /// Starts the check of every algebra `manifest`'s tools use (as [`build_report`] groups them), with grants
    /// resolved against `ctx`. Call it as soon as the manifest is parsed.
    pub fn start(manifest: &Manifest, ctx: &PathCtx) -> BootChecks {
        let mut by_kind: BTreeMap<AlgebraKind, Vec<String>> = BTreeMap::new();
        for instance in manifest.tools.keys() {
            by_kind
                .entry(manifest.algebra_kind(instance))
                .or_default()
                .push(instance.clone());
        }
        BootChecks::of(by_kind, ctx)
    }

    fn of(by_kind: BTreeMap<AlgebraKind, Vec<String>>, ctx: &PathCtx) -> BootChecks {
        BootChecks::with(by_kind, ctx, true)
    }

    /// [`BootChecks::of`], with a helper thread or (`helper` false) none: the finishing thread then checks all.
    fn with(
        by_kind: BTreeMap<AlgebraKind, Vec<String>>,
        ctx: &PathCtx,
        helper: bool,
    ) -> BootChecks {
        let checks: Vec<Check> = by_kind
            .iter()
            .map(|(kind, names)| {
                let alg = kind.build(ctx);
                let law = LawCheck::new(
                    &names.join(", "),
                    alg.as_ref(),
                    DEFAULT_SEED,
                    DEFAULT_TRIALS,
                );
                Check { kind: *kind, law }
            })
            .collect();
        let chunks = checks
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                let trials = c.law.trials();
                (0..trials)
                    .step_by(CHUNK)
                    .map(move |start| (i, start..(start + CHUNK).min(trials)))
            })
            .collect();
        let work = Arc::new(Work {
            checks,
            ctx: ctx.clone(),
            chunks,
            next: AtomicUsize::new(0),
        });
        let helper = if work.chunks.is_empty() || !helper {
            None
        } else {
            start_helper(work.clone())
        };
        BootChecks {
            ctx: ctx.clone(),
            by_kind,
            work,
            helper,
        }
    }

    /// Checks what is left with this thread, then collects every verdict: `None` for an algebra means a worker
    /// crashed before its tally came back (a lost tally never passes).
    fn finish(self) -> Vec<(AlgebraKind, Vec<String>, Option<LawResult>)> {
        let work = &self.work;
        // a panicking worker hands nothing back, and its checks count as crashed
        let mine = std::panic::catch_unwind(AssertUnwindSafe(|| work.run())).unwrap_or_default();
        let theirs = match &self.helper {
            // the helper finishes within a chunk of this thread: wait by polling, not by sleeping on a lock
            Some(done) => poll(done).unwrap_or_default(),
            None => Vec::new(),
        };
        let mut tallies: Vec<Vec<LawTally>> = work.checks.iter().map(|_| Vec::new()).collect();
        for outcome in [mine, theirs] {
            for (i, tally) in outcome.into_iter().enumerate() {
                tallies[i].push(tally);
            }
        }
        work.checks
            .iter()
            .zip(tallies)
            .zip(self.by_kind.values())
            .map(|((check, tallies), names)| (check.kind, names.clone(), check.law.finish(tallies)))
            .collect()
    }
}

impl Drop for BootChecks {
    fn drop(&mut self) {
        // unclaimed chunks stay unclaimed: a helper of checks no one will collect stops at its next claim
        self.work
            .next
            .store(self.work.chunks.len(), Ordering::Relaxed);
    }
}

impl Work {
    /// Claims and checks chunks until none is left; one tally per check (default for a check it never reached).
    fn run(&self) -> Vec<LawTally> {
        let mut tallies: Vec<LawTally> = self.checks.iter().map(|_| LawTally::default()).collect();
        let mut algebras: Vec<Option<Box<dyn loom_kernel::Algebra>>> =
            self.checks.iter().map(|_| None).collect();
        while let Some((i, trials)) = self.chunks.get(self.next.fetch_add(1, Ordering::Relaxed)) {
            let (check, tally) = (&self.checks[*i], &mut tallies[*i]);
            if tally.broken() {
                // later trials cannot change the outcome (the earliest broken trial wins)
                continue;
            }
            let alg = algebras[*i].get_or_insert_with(|| check.kind.build(&self.ctx));
            for index in trials.clone() {
                check
                    .law
                    .trial(alg.as_ref(), index)
                    .check(alg.as_ref(), tally);
                if tally.broken() {
                    break;
                }
            }
        }
        tallies
    }
}

/// Starts the helper on `work`; `None` if no thread can be started (the caller then checks every trial itself).
fn start_helper(work: Arc<Work>) -> Option<Receiver<Vec<LawTally>>> {
    let (report, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("loom-audit-check".into())
        .spawn(move || {
            if let Ok(tallies) = std::panic::catch_unwind(AssertUnwindSafe(|| work.run())) {
                let _ = report.send(tallies);
            }
        })
        .ok()?;
    Some(done)
}

/// The next message on `from`, waiting for it by polling (with a yield, so a machine with one core still runs the
/// sender) for up to a millisecond, then by sleeping. `None` once the sender is gone.
fn poll<T>(from: &Receiver<T>) -> Option<T> {
    let start = std::time::Instant::now();
    loop {
        match from.try_recv() {
            Ok(message) => return Some(message),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed().as_micros() < 1000 => {
                std::thread::yield_now()
            }
            Err(TryRecvError::Empty) => return from.recv().ok(),
        }
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
            if let Some(why) = &x.why {
                out.push(Finding {
                    level: Level::Error,
                    subject: name.clone(),
                    message: format!(
                        "sub-agent exceeds its parent at `{}`: {why}; give the key the parent's tool and a grant \
                         within the parent's",
                        x.key
                    ),
                });
                continue;
            }
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

/// Widens `tools` the way boot does: the rows of each contributed group boot would keep (accepted by the kernel, bindable,
/// and not adding a tool name another group adds too) merged into the manifest tool they extend. Returns each widened
/// instance with the labels of the groups that widened it.
fn widen_by_groups(
    manifest: &Manifest,
    ctx: &PathCtx,
    groups: &[loom_kernel::ToolGroup],
    judged: &[GroupJudgement],
    tools: &mut [ToolGrant],
) -> BTreeMap<String, Vec<String>> {
    let accepted: Vec<&loom_kernel::ToolGroup> = groups
        .iter()
        .zip(judged)
        .filter(|(_, j)| j.accepted)
        .map(|(g, _)| g)
        .filter(|g| loom_kernel::binding_problem(manifest, g).is_none())
        .collect();
    let claims: Vec<(String, Vec<String>)> = accepted
        .iter()
        .map(|g| {
            let names = g
                .tools
                .keys()
                .filter(|n| !manifest.tools.contains_key(*n))
                .cloned()
                .collect();
            (g.label.clone(), names)
        })
        .collect();
    let clashes = loom_kernel::group_clashes(&claims);
    let kept: Vec<&loom_kernel::ToolGroup> = accepted
        .into_iter()
        .filter(|g| !clashes.contains_key(&g.label))
        .collect();
    let widened = loom_kernel::bound_grants(manifest, ctx, tools, &kept);
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in tools.iter_mut() {
        if let Some(g) = widened.get(&t.instance) {
            t.grant = g.clone();
            let labels = kept
                .iter()
                .filter(|k| {
                    k.tools
                        .get(&t.instance)
                        .is_some_and(|e| e.provider == ProviderRef::Host)
                })
                .map(|k| k.label.clone())
                .collect();
            by.insert(t.instance.clone(), labels);
        }
    }
    by
}

fn is_builtin_name(key: &str) -> bool {
    loom_kernel::BUILTIN_TOOLS.contains(&key) || key == "web_fetch"
}

fn is_subagent_key(manifest: &Manifest, key: &str) -> bool {
    manifest.subagents.iter().any(|s| s.key == key)
}

/// Every `mcp-server` the manifest starts with `cwd` set (a `[providers]` handle, or an inline table on a tool
/// entry), with that `cwd`.
fn project_cwd_servers(manifest: &Manifest, tools: &[ToolGrant]) -> Vec<(String, String)> {
    let cwd_of = |spec: &ProviderSpec| match spec {
        ProviderSpec::Configured { factory, config } if factory == "mcp-server" => config
            .get("cwd")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        _ => None,
    };
    let mut out: Vec<(String, String)> = manifest
        .providers
        .iter()
        .filter_map(|(h, spec)| cwd_of(spec).map(|c| (format!("[providers].{h}"), c)))
        .collect();
    for t in tools {
        if let ProviderRef::Shipped(s) = &t.provider {
            if let Some(c) = cwd_of(&s.spec) {
                let subject = format!("tools.{} ({})", t.instance, s.label);
                if !out.iter().any(|(x, _)| *x == subject) {
                    out.push((subject, c));
                }
            }
        }
    }
    out
}

/// Why a provider's tools cannot be resolved by this version, if they cannot.
fn unresolved(manifest: &Manifest, provider: &ProviderRef) -> Option<String> {
    let describe = |spec: &ProviderSpec| match spec {
        // resolved by spawning the server (see build_report); reached only for a tool whose algebra is not MCP
        ProviderSpec::Configured { factory, .. } if factory == "mcp-server" => {
            "an MCP server".to_string()
        }
        ProviderSpec::Configured { factory, .. } => {
            format!("provider factory `{factory}` (external providers)")
        }
        ProviderSpec::Source(_) | ProviderSpec::Package { .. } => {
            "an inline provider source, which this build does not bind".to_string()
        }
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

/// Adds the authority files of the report's agent, with where each stands against its built-in tools' grants (the
/// kernel's [`authority_exposure`]): one the agent could change or read unconfined is an error.
pub fn add_authority(report: &mut Report, authority: &Authority) {
    let grants: Vec<(String, loom_kernel::AlgebraKind, loom_kernel::Grant)> = report
        .tools
        .iter()
        .filter(|t| t.provider == loom_kernel::ProviderRef::Builtin)
        .map(|t| (t.instance.clone(), t.algebra, t.grant.clone()))
        .collect();
    report.authority = authority_exposure(authority, &grants, &report.ctx);
    for (file, e) in &report.authority {
        if let (AuthorityKind::LoomHelper, Exposure::Protected(tools)) = (file.kind, e) {
            report.findings.push(Finding {
                level: Level::Warning,
                subject: tools.join(", "),
                message: format!(
                    "the grant covers loom's own executable {}: loom keeps it read-only for the agent, but install \
                     loom outside every directory an agent may write (for example /usr/local/bin, not ~/.cargo/bin \
                     under a `~` grant, nor the project's target/)",
                    file.path
                ),
            });
        }
        if let Exposure::Exposed(tools) = e {
            report.findings.push(Finding {
                level: Level::Error,
                subject: tools.join(", "),
                message: format!(
                    "runs unconfined and reaches the authority file {} ({}: {}); loom cannot keep it from being \
                     changed{} — grant bash rows (`{{ commands = \"*\", paths = [...] }}`) instead of \"*\"",
                    file.path,
                    file.kind,
                    file.origin,
                    if file.kind.is_secret() { " or read" } else { "" }
                ),
            });
        }
    }
    report.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_kernel::check_laws;

    fn names(kinds: &[AlgebraKind]) -> BTreeMap<AlgebraKind, Vec<String>> {
        kinds
            .iter()
            .map(|k| (*k, vec![format!("{k:?}"), "other".to_string()]))
            .collect()
    }

    #[test]
    fn shared_checks_give_what_check_laws_gives() {
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        let all = [
            AlgebraKind::Default,
            AlgebraKind::Files,
            AlgebraKind::Bash,
            AlgebraKind::Mcp,
        ];
        for kinds in [&all[..], &all[1..3], &all[2..3], &all[..1]] {
            // with the helper thread, and without (this thread alone)
            for helper in [true, false] {
                let got = BootChecks::with(names(kinds), &ctx, helper).finish();
                assert_eq!(got.len(), kinds.len());
                for (kind, tools, result) in got {
                    let alg = kind.build(&ctx);
                    let want = check_laws(
                        &tools.join(", "),
                        alg.as_ref(),
                        DEFAULT_SEED,
                        DEFAULT_TRIALS,
                    );
                    assert_eq!(result, Some(want), "{kind:?} among {kinds:?}");
                }
            }
        }
        assert!(BootChecks::of(BTreeMap::new(), &ctx).finish().is_empty());
        // checks nobody collects stop without harm
        drop(BootChecks::of(names(&all), &ctx));
    }

    #[test]
    fn every_trial_is_checked_once_whoever_claims_it() {
        let ctx = PathCtx::new("/w", None);
        let checks = BootChecks::with(names(&[AlgebraKind::Files, AlgebraKind::Bash]), &ctx, false);
        // claimed in order, chunk by chunk, each check's trials covered exactly once
        let mut seen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, trials) in &checks.work.chunks {
            assert!(trials.len() <= CHUNK && !trials.is_empty());
            seen.entry(*i).or_default().extend(trials.clone());
        }
        for (i, check) in checks.work.checks.iter().enumerate() {
            assert_eq!(seen[&i], (0..check.law.trials()).collect::<Vec<_>>());
        }
        // a worker that starts late finds nothing left, and its (empty) tallies change nothing
        let first = checks.work.run();
        let late = checks.work.run();
        for (i, (check, tools)) in checks
            .work
            .checks
            .iter()
            .zip(checks.by_kind.values())
            .enumerate()
        {
            let alg = check.kind.build(&ctx);
            let want = check_laws(
                &tools.join(", "),
                alg.as_ref(),
                DEFAULT_SEED,
                DEFAULT_TRIALS,
            );
            assert_eq!(
                check.law.finish([first[i].clone(), late[i].clone()]),
                Some(want)
            );
            // a tally lost with its worker never passes
            assert_eq!(check.law.finish([late[i].clone()]), None);
        }
    }
}
