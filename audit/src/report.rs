//! The audit report: the kernel's objects for one manifest, gathered without calling a model.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};

use loom_kernel::{
    judge_group, tool_grants, Algebra, AlgebraKind, Ceiling, GroupJudgement, LawCheck, LawReport,
    LawTally, LawViolation, Manifest, ManifestLoader, PathCtx, ProviderRef, ProviderSpec,
    SubagentVerdict, ToolGrant, Trial, DEFAULT_SEED, DEFAULT_TRIALS,
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
    // a check that panics is a failure, never a pass
    let mut laws: Vec<LawOutcome> = Vec::new();
    for (kind, names, result) in check_algebras(by_kind, &ctx) {
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
    }
}

type LawResult = Result<LawReport, LawViolation>;

/// The boot property check of each algebra in use, spread over the cores (this thread is one of the workers).
///
/// Each algebra's trials are drawn in order on one worker (they come from one seeded generator); the algebras are
/// dealt to the workers by estimated cost, and the worker with the most work hands a share of its costliest
/// algebra's trials, as it draws them, to the worker with the least, which checks them between its own. Every worker
/// checks with its own instance of the algebra; [`LawCheck::finish`] joins the tallies into exactly what
/// `check_laws` returns. `None` for an algebra means a worker crashed before its tally came back.
fn check_algebras(
    by_kind: BTreeMap<AlgebraKind, Vec<String>>,
    ctx: &PathCtx,
) -> Vec<(AlgebraKind, Vec<String>, Option<LawResult>)> {
    let checks: Vec<(AlgebraKind, Vec<String>)> = by_kind.into_iter().collect();
    if checks.is_empty() {
        return Vec::new();
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, checks.len().max(2));
    let plan = Plan::new(&checks, workers);
    let mut tasks: Vec<Task> = (0..workers)
        .map(|w| Task {
            own: (0..checks.len()).filter(|&i| plan.owner[i] == w).collect(),
            outbox: None,
            inbox: None,
        })
        .collect();
    if let Some(share) = &plan.share {
        let (to, from) = std::sync::mpsc::channel();
        let (back, returned) = std::sync::mpsc::channel();
        tasks[share.from].outbox = Some(Outbox {
            check: share.check,
            every: share.every,
            to: Some(to),
            returned,
            batch: Vec::with_capacity(BATCH),
        });
        tasks[share.to].inbox = Some(Inbox {
            check: share.check,
            from,
            back,
        });
    }
    let outcome: Vec<Done> = std::thread::scope(|scope| {
        let mut tasks = tasks.into_iter();
        let mine = tasks.next();
        let helpers: Vec<_> = tasks
            .map(|task| scope.spawn(|| task.run(&checks, ctx)))
            .collect();
        // this thread's own part; a panic in it is caught like a helper's, so the audit still reports
        let mut done: Vec<Done> = mine
            .map(|task| {
                std::panic::catch_unwind(AssertUnwindSafe(|| task.run(&checks, ctx)))
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        for helper in helpers {
            done.extend(helper.join().unwrap_or_default());
        }
        done
    });
    let mut drawn: Vec<Option<LawCheck>> = checks.iter().map(|_| None).collect();
    let mut tallies: Vec<Vec<LawTally>> = checks.iter().map(|_| Vec::new()).collect();
    for d in outcome {
        match d {
            Done::Drawn(i, check) => drawn[i] = Some(check),
            Done::Tally(i, tally) => tallies[i].push(tally),
        }
    }
    checks
        .into_iter()
        .zip(drawn.into_iter().zip(tallies))
        .map(|((kind, names), (check, tallies))| {
            let result = check.and_then(|c| c.finish(tallies));
            (kind, names, result)
        })
        .collect()
}

/// Estimated instructions (thousands) per trial to draw and to check an algebra's boot check: what the workers of
/// [`check_algebras`] are balanced by (measured with callgrind; a wrong guess costs balance, never an answer).
fn trial_cost(kind: AlgebraKind) -> (u64, u64) {
    match kind {
        AlgebraKind::Bash => (12, 19),
        AlgebraKind::Files => (7, 11),
        AlgebraKind::Default => (7, 9),
        AlgebraKind::Mcp => (6, 8),
    }
}

/// Who checks what: the worker that owns (draws) each algebra, and the share of trials one worker hands another.
struct Plan {
    owner: Vec<usize>,
    share: Option<Share>,
}

/// The trials of check `check` that worker `from` (which draws them) hands to worker `to`: those [`Every::takes`].
struct Share {
    check: usize,
    from: usize,
    to: usize,
    every: Every,
}

/// A fraction `num / den` of the trials.
#[derive(Clone, Copy)]
struct Every {
    num: u64,
    den: u64,
}

impl Every {
    /// Does trial `i` belong to the share? Spread evenly: the share's count grows by one at each such trial.
    fn takes(self, i: usize) -> bool {
        let i = i as u64;
        (i + 1) * self.num / self.den > i * self.num / self.den
    }
}

impl Plan {
    fn new(checks: &[(AlgebraKind, Vec<String>)], workers: usize) -> Plan {
        let cost = |i: usize| {
            let (draw, check) = trial_cost(checks[i].0);
            (draw + check) * DEFAULT_TRIALS as u64
        };
        // the costliest algebra first, each to the least loaded worker
        let mut order: Vec<usize> = (0..checks.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(cost(i)));
        let mut load = vec![0u64; workers.max(1)];
        let mut owner = vec![0; checks.len()];
        for &i in &order {
            let w = (0..load.len()).min_by_key(|&w| load[w]).unwrap_or(0);
            owner[i] = w;
            load[w] += cost(i);
        }
        let from = (0..load.len()).max_by_key(|&w| load[w]).unwrap_or(0);
        let to = (0..load.len()).min_by_key(|&w| load[w]).unwrap_or(0);
        // the busiest worker's costliest algebra hands over enough checking to even the two out
        let share = order
            .iter()
            .find(|&&i| owner[i] == from)
            .and_then(|&check| {
                let per_trial = trial_cost(checks[check].0).1;
                let den = per_trial * DEFAULT_TRIALS as u64 * 2;
                let num = load[from].saturating_sub(load[to]);
                (from != to && num > 0).then_some(Share {
                    check,
                    from,
                    to,
                    every: Every {
                        num: num.min(den),
                        den,
                    },
                })
            });
        Plan { owner, share }
    }
}

/// One worker's part of [`check_algebras`].
struct Task {
    /// The checks it draws.
    own: Vec<usize>,
    /// Where it hands over its share of one check's trials.
    outbox: Option<Outbox>,
    /// Where it takes another worker's share from.
    inbox: Option<Inbox>,
}

/// Trials handed over per message: few messages (each may wake the taker), little imbalance at the end.
const BATCH: usize = 8;

/// The handing side of a share. Batches come back once checked, so the worker that drew the trials also frees
/// them: glibc frees into another thread's arena under that arena's lock, and the two workers then queue on it.
struct Outbox {
    check: usize,
    every: Every,
    /// `None` once every trial has been handed over (dropping it ends the taker's wait).
    to: Option<Sender<Vec<Trial>>>,
    returned: Receiver<Vec<Trial>>,
    batch: Vec<Trial>,
}

impl Outbox {
    /// Keeps trial `n` for the taker if it belongs to the share; otherwise gives it back to be checked here.
    fn offer(&mut self, n: usize, trial: Trial) -> Option<Trial> {
        if !self.every.takes(n) {
            return Some(trial);
        }
        self.batch.push(trial);
        if self.batch.len() == BATCH {
            self.send();
        }
        None
    }

    fn send(&mut self) {
        // a buffer that came back is reused (its trials freed here); if the taker crashed, its tally is lost and
        // the check fails as crashed, so a batch it can no longer take is simply dropped
        let next = match self.returned.try_recv() {
            Ok(mut used) => {
                used.clear();
                used
            }
            Err(_) => Vec::with_capacity(BATCH),
        };
        let batch = std::mem::replace(&mut self.batch, next);
        if let Some(to) = &self.to {
            let _ = to.send(batch);
        }
    }

    /// Hands over what is left and says there is no more.
    fn close(&mut self) {
        if !self.batch.is_empty() {
            self.send();
        }
        self.to = None;
    }

    /// Frees the trials that came back.
    fn collect(&self) {
        while self.returned.try_recv().is_ok() {}
    }
}

/// The taking side of a share.
struct Inbox {
    check: usize,
    from: Receiver<Vec<Trial>>,
    back: Sender<Vec<Trial>>,
}

/// What a worker hands back.
enum Done {
    Drawn(usize, LawCheck),
    Tally(usize, LawTally),
}

impl Task {
    fn run(mut self, checks: &[(AlgebraKind, Vec<String>)], ctx: &PathCtx) -> Vec<Done> {
        let mut algebras: Vec<Option<Box<dyn Algebra>>> = checks.iter().map(|_| None).collect();
        let mut tallies: Vec<LawTally> = checks.iter().map(|_| LawTally::default()).collect();
        let mut done = Vec::new();
        // the shared check first, so the taker never waits long for its share
        let mut own = std::mem::take(&mut self.own);
        if let Some(out) = &self.outbox {
            own.sort_by_key(|&i| i != out.check);
        }
        for i in own {
            let (kind, names) = &checks[i];
            let alg = algebras[i].take().unwrap_or_else(|| kind.build(ctx));
            let tools = names.join(", ");
            let mut check = LawCheck::new(&tools, alg.as_ref(), DEFAULT_SEED, DEFAULT_TRIALS);
            let mut n = 0;
            while let Some(trial) = check.draw(alg.as_ref()) {
                let trial = match &mut self.outbox {
                    Some(out) if out.check == i => out.offer(n, trial),
                    _ => Some(trial),
                };
                n += 1;
                if let Some(trial) = trial {
                    trial.check(alg.as_ref(), &mut tallies[i]);
                }
                if tallies[i].broken() {
                    // later trials cannot change the outcome (the first broken law wins)
                    break;
                }
                if let Some(out) = &self.outbox {
                    out.collect();
                }
                self.take(checks, ctx, &mut algebras, &mut tallies, false);
            }
            if let Some(out) = self.outbox.as_mut().filter(|o| o.check == i) {
                out.close();
            }
            algebras[i] = Some(alg);
            done.push(Done::Drawn(i, check));
        }
        self.take(checks, ctx, &mut algebras, &mut tallies, true);
        done.extend(
            tallies
                .into_iter()
                .enumerate()
                .map(|(i, t)| Done::Tally(i, t)),
        );
        done
    }

    /// Checks the trials handed over: the batches waiting now, or (`all`) every batch until the hander is done.
    fn take(
        &self,
        checks: &[(AlgebraKind, Vec<String>)],
        ctx: &PathCtx,
        algebras: &mut [Option<Box<dyn Algebra>>],
        tallies: &mut [LawTally],
        all: bool,
    ) {
        let Some(inbox) = &self.inbox else {
            return;
        };
        let i = inbox.check;
        loop {
            let batch = if all {
                inbox.from.recv().ok()
            } else {
                inbox.from.try_recv().ok()
            };
            let Some(batch) = batch else {
                return;
            };
            let alg = algebras[i].get_or_insert_with(|| checks[i].0.build(ctx));
            for trial in &batch {
                trial.check(alg.as_ref(), &mut tallies[i]);
            }
            // back to the hander, which frees them; if it is gone, they are freed here
            let _ = inbox.back.send(batch);
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
            let got = check_algebras(names(kinds), &ctx);
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
        assert!(check_algebras(BTreeMap::new(), &ctx).is_empty());
    }

    #[test]
    fn the_busiest_worker_hands_over_an_even_share() {
        let checks: Vec<(AlgebraKind, Vec<String>)> =
            names(&[AlgebraKind::Files, AlgebraKind::Bash])
                .into_iter()
                .collect();
        let plan = Plan::new(&checks, 2);
        // bash (index 1) and the file tools land on different workers; bash's hands part of its trials over
        assert_ne!(plan.owner[0], plan.owner[1]);
        let Some(share) = plan.share.as_ref() else {
            panic!("bash should hand part of its trials over");
        };
        assert_eq!(
            (share.check, share.from, share.to),
            (1, plan.owner[1], plan.owner[0])
        );
        let handed = (0..DEFAULT_TRIALS)
            .filter(|&i| share.every.takes(i))
            .count() as u64;
        let want = DEFAULT_TRIALS as u64 * share.every.num / share.every.den;
        assert!(
            handed.abs_diff(want) <= 1 && handed > 0,
            "{handed} of {DEFAULT_TRIALS}"
        );
        // one worker: nothing to share
        assert!(Plan::new(&checks, 1).share.is_none());
    }
}
