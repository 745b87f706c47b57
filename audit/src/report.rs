//! The audit report: the kernel's objects for one manifest, gathered without calling a model.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;

use loom_kernel::{
    judge_group, tool_grants, AlgebraKind, Ceiling, GroupJudgement, LawCheck, LawReport, LawTally,
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
    /// Each MCP tool instance: its server and schema after pre-binding, or why it could not be resolved.
    pub mcp: BTreeMap<String, Result<loom_runtime::McpResolution, String>>,
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
    /// MCP tools resolved by spawning their servers (`loom_runtime::resolve_mcp_tools`); an MCP tool missing here
    /// is reported as unresolved.
    pub mcp: BTreeMap<String, Result<loom_runtime::McpResolution, String>>,
}

/// Builds the report. Pure apart from what `facts.loader` does.
pub fn build_report(manifest: Manifest, facts: Facts<'_>) -> Report {
    // started first, so it is running by the time the boot checks are dealt out
    let helper = Helper::start();
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

    // the boot property check, once per algebra in use
    let mut by_kind: BTreeMap<AlgebraKind, Vec<String>> = BTreeMap::new();
    for t in &tools {
        by_kind
            .entry(t.algebra)
            .or_default()
            .push(t.instance.clone());
    }
    // a check that panics is a failure, never a pass
    let mut laws: Vec<LawOutcome> = Vec::new();
    for (kind, names, result) in check_algebras(by_kind, &ctx, helper) {
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
        mcp: facts.mcp,
    }
}

type LawResult = Result<LawReport, LawViolation>;

/// The boot property check of each algebra in use, on two workers: this thread and `helper` (when there is one).
///
/// Every trial of a check draws its grants from a generator of its own ([`LawCheck::trial`]), so the work is split
/// by trial, not by algebra: worker `w` of `n` checks trials `w, w + n, w + 2n, ...` of every algebra, in increasing
/// order, each with its own instance of the algebra, and stops an algebra at its first broken trial. Both workers
/// get the same share of every algebra, so they finish together whatever the mix; [`LawCheck::finish`] joins their
/// tallies into exactly what `check_laws` returns. `None` for an algebra means a worker crashed before its tally
/// came back (a lost tally never passes).
///
/// Two workers, not one per core: asking the system how many cores there are costs more (~0.1 ms of cgroup files)
/// than a third worker would save on this machine class (the target machine has two).
fn check_algebras(
    by_kind: BTreeMap<AlgebraKind, Vec<String>>,
    ctx: &PathCtx,
    helper: Option<Helper>,
) -> Vec<(AlgebraKind, Vec<String>, Option<LawResult>)> {
    if by_kind.is_empty() {
        return Vec::new();
    }
    let checks: Arc<[Check]> = by_kind
        .into_iter()
        .map(|(kind, names)| {
            let alg = kind.build(ctx);
            let law = LawCheck::new(
                &names.join(", "),
                alg.as_ref(),
                DEFAULT_SEED,
                DEFAULT_TRIALS,
            );
            Check { kind, names, law }
        })
        .collect();
    let workers = if helper.is_some() { 2 } else { 1 };
    // the helper's share; if the helper is gone, its share is checked here after this thread's own
    let (mut left, mut waiting) = (None, None);
    if let Some(helper) = &helper {
        let job = Job {
            share: Share { worker: 1, workers },
            checks: checks.clone(),
            ctx: ctx.clone(),
        };
        match helper.job.send(job) {
            Ok(()) => waiting = Some(&helper.done),
            Err(e) => left = Some(e.0.share),
        }
    }
    // a panicking worker hands nothing back, and its checks count as crashed
    let run = |share: Share| {
        std::panic::catch_unwind(AssertUnwindSafe(|| share.run(&checks, ctx))).unwrap_or_default()
    };
    let mut tallies: Vec<Vec<LawTally>> = checks.iter().map(|_| Vec::new()).collect();
    let mut collect = |outcome: Vec<(usize, LawTally)>| {
        for (i, tally) in outcome {
            tallies[i].push(tally);
        }
    };
    collect(run(Share { worker: 0, workers }));
    if let Some(share) = left {
        collect(run(share));
    }
    if let Some(done) = waiting {
        // the helper finishes about when this thread does: wait by polling, not by sleeping on a lock
        collect(poll(done).unwrap_or_default());
    }
    checks
        .iter()
        .zip(tallies)
        .map(|(check, tallies)| (check.kind, check.names.clone(), check.law.finish(tallies)))
        .collect()
}

/// One algebra's boot check: the algebra, the tools that use it, and the kernel's check.
struct Check {
    kind: AlgebraKind,
    names: Vec<String>,
    law: LawCheck,
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

/// A worker thread started as the report begins, so that it is already running when the boot checks are handed
/// out (timed: a thread started at that point began its work ~0.1 ms after this one).
struct Helper {
    job: Sender<Job>,
    done: Receiver<Vec<(usize, LawTally)>>,
}

/// What the helper is handed: its share of the checks, and what that share reads.
struct Job {
    share: Share,
    checks: Arc<[Check]>,
    ctx: PathCtx,
}

impl Helper {
    /// Starts the helper; `None` if no thread can be started (this thread then does all the work). The thread ends
    /// once its job is done, or at once if the report needs no job (the `Helper` is dropped).
    fn start() -> Option<Helper> {
        let (job, jobs) = std::sync::mpsc::channel::<Job>();
        let (report, done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("loom-audit-check".into())
            .spawn(move || {
                let Some(job) = poll(&jobs) else {
                    return;
                };
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    job.share.run(&job.checks, &job.ctx)
                }));
                let _ = report.send(outcome.unwrap_or_default());
            })
            .ok()?;
        Some(Helper { job, done })
    }
}

/// One worker's share of [`check_algebras`]: trials `worker, worker + workers, ...` of every check.
#[derive(Debug, Clone, Copy)]
struct Share {
    worker: usize,
    workers: usize,
}

impl Share {
    /// Checks this share's trials of every check, each algebra with an instance of its own; one tally per check.
    fn run(self, checks: &[Check], ctx: &PathCtx) -> Vec<(usize, LawTally)> {
        checks
            .iter()
            .enumerate()
            .map(|(i, check)| {
                let built = check.kind.build(ctx);
                let alg = built.as_ref();
                let mut tally = LawTally::default();
                for index in (self.worker..check.law.trials()).step_by(self.workers) {
                    check.law.trial(alg, index).check(alg, &mut tally);
                    if tally.broken() {
                        // later trials cannot change the outcome (the earliest broken trial wins)
                        break;
                    }
                }
                (i, tally)
            })
            .collect()
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
        // resolved by spawning the server (see build_report); reached only for a tool whose algebra is not MCP
        ProviderSpec::Configured { factory, .. } if factory == "mcp-server" => {
            "an MCP server".to_string()
        }
        ProviderSpec::Configured { factory, .. } => {
            format!("provider factory `{factory}` (external providers)")
        }
        ProviderSpec::Source(_) => {
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
            for helper in [Helper::start(), None] {
                let got = check_algebras(names(kinds), &ctx, helper);
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
        assert!(check_algebras(BTreeMap::new(), &ctx, Helper::start()).is_empty());
    }
}
