//! The audit report: the kernel's objects for one manifest, gathered without calling a model.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;

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
    }
}

type LawResult = Result<LawReport, LawViolation>;

/// The boot property check of each algebra in use, on two workers: this thread and `helper` (when there is one).
///
/// Each algebra's trials are drawn in order by one worker (they come from one seeded generator), and the algebras
/// are dealt to the workers, the costliest first. The worker that draws the costliest one hands its trials, as it
/// draws them, to the other worker once that one has run out of work of its own, whenever it has fewer than
/// [`DEPTH`] waiting: so both finish together whatever the machine, and no trial waits in memory for long. Every
/// worker checks with its own instance of the algebra; [`LawCheck::finish`] joins the tallies into exactly what
/// `check_laws` returns. `None` for an algebra means a worker crashed before its tally came back.
///
/// Two workers, not one per core: a manifest's tools use at most four algebras, usually two (bash and the file
/// tools), and asking the system how many cores there are costs more (~0.1 ms of cgroup files) than a third worker
/// would save on the rare manifest with more.
fn check_algebras(
    by_kind: BTreeMap<AlgebraKind, Vec<String>>,
    ctx: &PathCtx,
    helper: Option<Helper>,
) -> Vec<(AlgebraKind, Vec<String>, Option<LawResult>)> {
    let checks: Arc<[(AlgebraKind, Vec<String>)]> = by_kind.into_iter().collect();
    if checks.is_empty() {
        return Vec::new();
    }
    let workers = if helper.is_some() { 2 } else { 1 };
    let (owner, costliest, lightest) = deal(&checks, workers);
    let relay = Arc::new(Relay {
        check: costliest,
        idle: AtomicBool::new(false),
        pending: AtomicUsize::new(0),
    });
    let mut tasks: Vec<Task> = (0..workers)
        .map(|w| Task {
            own: (0..checks.len()).filter(|&i| owner[i] == w).collect(),
            give: None,
            take: None,
        })
        .collect();
    if owner[costliest] != lightest {
        let (to, from) = std::sync::mpsc::channel();
        let (back, returned) = std::sync::mpsc::channel();
        tasks[owner[costliest]].give = Some(Give { to, returned });
        tasks[lightest].take = Some(Take { from, back });
    }
    let mut tasks = tasks.into_iter();
    let mine = tasks.next();
    // the helper's part; if the helper is gone, its part is done here after this thread's own
    let (mut left, mut waiting) = (None, None);
    if let (Some(helper), Some(task)) = (&helper, tasks.next()) {
        let job = Job {
            task,
            checks: checks.clone(),
            ctx: ctx.clone(),
            relay: relay.clone(),
        };
        match helper.job.send(job) {
            Ok(()) => waiting = Some(&helper.done),
            Err(e) => left = Some(e.0.task),
        }
    }
    // a panicking worker hands nothing back, and its checks count as crashed
    let run = |task: Task| {
        std::panic::catch_unwind(AssertUnwindSafe(|| task.run(&checks, ctx, &relay)))
            .unwrap_or_default()
    };
    let mut outcome: Vec<Done> = mine.map(run).unwrap_or_default();
    outcome.extend(left.map(run).unwrap_or_default());
    if let Some(done) = waiting {
        // the helper finishes about when this thread does (see Relay): wait by polling, not by sleeping on a lock
        outcome.extend(poll(done).unwrap_or_default());
    }
    let mut drawn: Vec<Option<LawCheck>> = checks.iter().map(|_| None).collect();
    let mut tallies: Vec<Vec<LawTally>> = checks.iter().map(|_| Vec::new()).collect();
    for d in outcome {
        match d {
            Done::Drawn(i, check) => drawn[i] = Some(check),
            Done::Tally(i, tally) => tallies[i].push(tally),
        }
    }
    checks
        .iter()
        .zip(drawn.into_iter().zip(tallies))
        .map(|((kind, names), (check, tallies))| {
            let result = check.and_then(|c| c.finish(tallies));
            (*kind, names.clone(), result)
        })
        .collect()
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

/// A worker thread started as the report begins, so that it is already running when the boot checks are dealt out
/// (timed: a thread started at that point began its work ~0.1 ms after this one).
struct Helper {
    job: Sender<Job>,
    done: Receiver<Vec<Done>>,
}

/// What the helper is handed: its part of the checks, and what that part reads.
struct Job {
    task: Task,
    checks: Arc<[(AlgebraKind, Vec<String>)]>,
    ctx: PathCtx,
    relay: Arc<Relay>,
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
                    job.task.run(&job.checks, &job.ctx, &job.relay)
                }));
                let _ = report.send(outcome.unwrap_or_default());
            })
            .ok()?;
        Some(Helper { job, done })
    }
}

/// Trials handed over and not yet checked, at most: enough that the taker never waits for the next, few enough that
/// the worker drawing them checks the rest itself.
const DEPTH: usize = 2;

/// How costly an algebra's boot check is relative to the others (bash's rows have the most kinds), for dealing the
/// algebras to workers. A wrong guess costs balance, never an answer.
fn cost_rank(kind: AlgebraKind) -> u64 {
    match kind {
        AlgebraKind::Bash => 31,
        AlgebraKind::Files => 18,
        AlgebraKind::Default => 16,
        AlgebraKind::Mcp => 14,
    }
}

/// Deals the checks to `workers` workers, the costliest first, each to the least loaded worker. Returns each
/// check's worker, the costliest check, and the least loaded worker (the first to run out of work).
fn deal(checks: &[(AlgebraKind, Vec<String>)], workers: usize) -> (Vec<usize>, usize, usize) {
    let mut order: Vec<usize> = (0..checks.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cost_rank(checks[i].0)));
    let mut load = vec![0u64; workers.max(1)];
    let mut owner = vec![0; checks.len()];
    for &i in &order {
        let w = (0..load.len()).min_by_key(|&w| load[w]).unwrap_or(0);
        owner[i] = w;
        load[w] += cost_rank(checks[i].0);
    }
    let lightest = (0..load.len()).min_by_key(|&w| load[w]).unwrap_or(0);
    (owner, order.first().copied().unwrap_or(0), lightest)
}

/// What the worker drawing the costliest check and the worker taking its trials share.
struct Relay {
    /// The check whose trials are handed over.
    check: usize,
    /// Set by the taker once its own checks are done.
    idle: AtomicBool,
    /// Trials handed over and not yet checked.
    pending: AtomicUsize,
}

/// The handing side. Trials come back once checked, so the worker that drew them also frees them: glibc frees into
/// another thread's arena under that arena's lock, and two workers allocating constantly would queue on it.
struct Give {
    to: Sender<Trial>,
    returned: Receiver<Trial>,
}

/// The taking side.
struct Take {
    from: Receiver<Trial>,
    back: Sender<Trial>,
}

/// One worker's part of [`check_algebras`].
struct Task {
    /// The checks it draws.
    own: Vec<usize>,
    give: Option<Give>,
    take: Option<Take>,
}

/// What a worker hands back.
enum Done {
    Drawn(usize, LawCheck),
    Tally(usize, LawTally),
}

impl Task {
    fn run(
        mut self,
        checks: &[(AlgebraKind, Vec<String>)],
        ctx: &PathCtx,
        relay: &Relay,
    ) -> Vec<Done> {
        let mut tallies: Vec<LawTally> = checks.iter().map(|_| LawTally::default()).collect();
        let mut done = Vec::new();
        // the handed-over check first: the taker may run out of work early
        self.own.sort_by_key(|&i| i != relay.check);
        for i in std::mem::take(&mut self.own) {
            let (kind, names) = &checks[i];
            let built = kind.build(ctx);
            let alg = built.as_ref();
            let mut check = LawCheck::new(&names.join(", "), alg, DEFAULT_SEED, DEFAULT_TRIALS);
            let give = self.give.as_ref().filter(|_| i == relay.check);
            while let Some(trial) = check.draw(alg) {
                let trial = match give {
                    Some(give)
                        if relay.idle.load(Ordering::Acquire)
                            && relay.pending.load(Ordering::Acquire) < DEPTH =>
                    {
                        relay.pending.fetch_add(1, Ordering::AcqRel);
                        // if the taker crashed, its tally is lost and the check fails as crashed anyway
                        give.to.send(trial).err().map(|e| e.0)
                    }
                    _ => Some(trial),
                };
                if let Some(trial) = trial {
                    trial.check(alg, &mut tallies[i]);
                }
                if let Some(give) = give {
                    // free the trials that came back
                    while give.returned.try_recv().is_ok() {}
                }
                if tallies[i].broken() {
                    // later trials cannot change the outcome (the first broken law wins)
                    break;
                }
            }
            if give.is_some() {
                // no more trials: dropping the sender ends the taker's wait
                self.give = None;
            }
            done.push(Done::Drawn(i, check));
        }
        if let Some(take) = &self.take {
            relay.idle.store(true, Ordering::Release);
            let i = relay.check;
            let built = checks[i].0.build(ctx);
            take.all(built.as_ref(), &mut tallies[i], &relay.pending);
        }
        done.extend(
            tallies
                .into_iter()
                .enumerate()
                .map(|(i, t)| Done::Tally(i, t)),
        );
        done
    }
}

impl Take {
    /// Checks every trial handed over until the hander says there are no more. The wait is short (the hander is
    /// drawing the next trial), so it spins rather than sleeping on a lock.
    fn all(&self, alg: &dyn Algebra, tally: &mut LawTally, pending: &AtomicUsize) {
        let mut spins: u32 = 0;
        loop {
            match self.from.try_recv() {
                Ok(trial) => {
                    trial.check(alg, tally);
                    pending.fetch_sub(1, Ordering::AcqRel);
                    // back to the hander, which frees it; if the hander is done, it is freed here
                    let _ = self.back.send(trial);
                    spins = 0;
                }
                Err(TryRecvError::Empty) => {
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(64) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Err(TryRecvError::Disconnected) => return,
            }
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

    #[test]
    fn the_costliest_check_is_dealt_first() {
        let checks: Vec<(AlgebraKind, Vec<String>)> = names(&[
            AlgebraKind::Default,
            AlgebraKind::Files,
            AlgebraKind::Bash,
            AlgebraKind::Mcp,
        ])
        .into_iter()
        .collect();
        let (owner, costliest, lightest) = deal(&checks, 2);
        assert_eq!(checks[costliest].0, AlgebraKind::Bash);
        // bash (31) + mcp (14) on one worker, files (18) + default (16) on the other, which runs out first
        assert_eq!(owner, vec![1, 1, 0, 0]);
        assert_eq!(lightest, 1);
        let (owner, costliest, lightest) = deal(&checks, 1);
        assert_eq!((owner, costliest, lightest), (vec![0; 4], 2, 0));
    }
}
