//! `compacting`: a pass-through layer that replaces the older part of the history with one summary event.
//!
//! **Push** passes every event down except usage updates: those stay here as in-memory metadata (the tokens the
//! last request used), so the durable log below is not cluttered with them.
//!
//! **Pull** shows the layers above the history below with the summarised part replaced by one summary event (a user
//! message, id `loom-compaction-<n>`). The layer remembers how many events below the summary covers and a
//! fingerprint of the last of them; when the history below no longer starts with those events (an `in-memory`
//! layer after a restart with `persist = true`), the summary is shown before ALL of the events below: nothing is
//! ever hidden that the summary does not cover.
//!
//! **Compaction** runs before each model request ([`Layer::compact`], driven by the turn loop). It trips when the
//! tokens of the last request reach `token_fraction` of the context window (the configured one, else the `size` the
//! harness reports in its usage updates) or an SDK token threshold — these take priority when usage data and the
//! window are known — and otherwise when more than `threshold` events would be shown (consecutive chunks of one
//! message count as one event: an `in-memory` layer keeps every streamed delta). Everything but the last `keep`
//! events is summarised; the cut moves earlier rather than separate a tool call from its result or from the
//! reasoning and text of the message that made it. A forced compaction (context overflow, `/compact`) skips the
//! threshold. When the compactor yields no summary, the cause is reported, the history stays as it was, and
//! automatic compaction pauses for [`PAUSE_AFTER_FAILURE`] (on an injectable [`Clock`]) so a broken summariser
//! cannot stall every request; a forced compaction ignores the pause.
//!
//! **Persistence** (`persist = true`): the summary state is written to `<storage>/compacting/state.json` after each
//! compaction (temporary file + rename, so a crash leaves the old or the new state, never a torn one) and loaded at
//! boot. A state file that does not parse is a boot error naming it; it is never overwritten or ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::compactor::{
    Compactor, HeuristicCompactor, SummaryError, SUMMARY_HEADER, SUMMARY_ID_PREFIX,
};
use super::file::same_run;
use super::{CompactCtx, CompactMode, Compaction, Layer, SessionError};
use crate::update::{Chunk, Content, SessionUpdate};

/// The default event-count threshold.
pub const DEFAULT_THRESHOLD: usize = 40;
/// The default number of most recent events kept verbatim.
pub const DEFAULT_KEEP: usize = 10;
/// How long automatic compaction pauses after a compaction produced no summary.
pub const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(60);
/// Where `persist = true` keeps the state, relative to the agent's storage directory.
pub const STATE_FILE: &str = "compacting/state.json";

/// The clock the failure pause is measured on. Tests inject one they advance by hand.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
}

/// The monotonic system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The largest fraction of the context window a token threshold may reach: the rest is room for the request that
/// trips it and the summarisation that follows.
pub const MAX_FRACTION: f64 = 0.8;

/// How a `compacting` layer decides and what it keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactingConfig {
    /// Compact when more than this many events would be shown, counting a message's chunks as one (raised to
    /// `keep + 4` when at or below `keep + 2`; see [`CompactingConfig::effective_threshold`]).
    pub threshold: usize,
    /// Compact when the last request used at least this many tokens (SDK only).
    pub token_threshold: Option<u64>,
    /// Compact when the last request used at least this fraction of `context_window`.
    pub token_fraction: Option<f64>,
    /// The most recent events kept verbatim (a message's chunks count as one).
    pub keep: usize,
    /// The model's context window in tokens, when set here (SDK); otherwise the layer uses the `size` the
    /// harness reports in its usage updates (its `contextWindow` key or its table of known models).
    pub context_window: Option<u64>,
    /// The state file, when compaction state persists across runs.
    pub persist: Option<PathBuf>,
}

impl Default for CompactingConfig {
    fn default() -> Self {
        CompactingConfig {
            threshold: DEFAULT_THRESHOLD,
            token_threshold: None,
            token_fraction: None,
            keep: DEFAULT_KEEP,
            context_window: None,
            persist: None,
        }
    }
}

impl CompactingConfig {
    /// The threshold in force: a threshold at or below `keep + 2` would compact on nearly every request, so it is
    /// raised to `keep + 4`.
    pub fn effective_threshold(&self) -> usize {
        if self.threshold <= self.keep.saturating_add(2) {
            self.keep.saturating_add(4)
        } else {
            self.threshold
        }
    }

    /// Reads a `[session]` layer's config (`threshold`, `token_fraction` / `tokenFraction`, `keep`, `persist`;
    /// the kernel has checked the keys and types). `storage` is the agent's storage directory. The notes say what
    /// was not honoured verbatim.
    pub fn from_toml(
        config: &toml::Table,
        storage: &Path,
    ) -> Result<(CompactingConfig, Vec<String>), SessionError> {
        let bad = |key: &str, what: &str| {
            SessionError::Config(format!("session.compacting.{key}: must be {what}"))
        };
        let count = |key: &str| -> Result<Option<usize>, SessionError> {
            config
                .get(key)
                .map(|v| {
                    v.as_integer()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| bad(key, "a non-negative integer"))
                })
                .transpose()
        };
        let fraction = |key: &str| -> Result<Option<f64>, SessionError> {
            config
                .get(key)
                .map(|v| {
                    let x = match v {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(i) => *i as f64,
                        _ => f64::NAN,
                    };
                    if x > 0.0 && x <= 1.0 {
                        Ok(x)
                    } else {
                        Err(bad(key, "a fraction in (0, 1], e.g. 0.75"))
                    }
                })
                .transpose()
        };
        let mut c = CompactingConfig::default();
        let mut notes = Vec::new();
        c.threshold = count("threshold")?.unwrap_or(DEFAULT_THRESHOLD);
        c.keep = count("keep")?.unwrap_or(DEFAULT_KEEP);
        c.token_fraction = match (fraction("token_fraction")?, fraction("tokenFraction")?) {
            (Some(_), Some(_)) => {
                return Err(SessionError::Config(
                    "session.compacting: token_fraction and tokenFraction are the same setting; set one".into(),
                ))
            }
            (a, b) => a.or(b),
        };
        if let Some(f) = c.token_fraction.filter(|f| *f > MAX_FRACTION) {
            notes.push(format!(
                "session.compacting: token_fraction {f} is above {MAX_FRACTION}, so it was capped at {MAX_FRACTION} \
                 (compaction needs room in the window for the request that trips it and the summary)"
            ));
            c.token_fraction = Some(MAX_FRACTION);
        }
        c.persist = match config.get("persist") {
            None | Some(toml::Value::Boolean(false)) => None,
            Some(toml::Value::Boolean(true)) => Some(storage.join(STATE_FILE)),
            Some(_) => return Err(bad("persist", "true or false")),
        };
        if c.effective_threshold() != c.threshold {
            notes.push(format!(
                "session.compacting: threshold {} is at or below keep + 2 (keep = {}), so it was raised to {}",
                c.threshold,
                c.keep,
                c.effective_threshold()
            ));
        }
        Ok((c, notes))
    }
}

/// What persists of a compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct State {
    /// The format version (1).
    version: u32,
    /// The summary, once a compaction happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    /// How many events of the history below the summary covers.
    #[serde(default)]
    covered: usize,
    /// The fingerprint of the last covered event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_covered: Option<String>,
    /// Compactions so far.
    #[serde(default)]
    compactions: u64,
}

const STATE_VERSION: u32 = 1;

/// FNV-1a (64 bit) of the event's JSON: stable across processes and releases, unlike the std hasher.
fn fingerprint(e: &SessionUpdate) -> String {
    let json = serde_json::to_string(e).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in json.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn load_state(path: &Path) -> Result<State, SessionError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
        Err(source) => {
            return Err(SessionError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let corrupt = |reason: String| SessionError::State {
        path: path.display().to_string(),
        reason,
    };
    let state: State = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if state.version != STATE_VERSION {
        return Err(corrupt(format!(
            "version {} is not one this build reads ({STATE_VERSION})",
            state.version
        )));
    }
    if state.summary.is_some() != (state.covered > 0 && state.last_covered.is_some()) {
        return Err(corrupt(
            "a summary needs covered > 0 and lastCovered, and only a summary has them".into(),
        ));
    }
    Ok(state)
}

/// Writes `state` to `path` atomically: a temporary file beside it, synced, then renamed over it.
fn save_state(path: &Path, state: &State) -> Result<(), SessionError> {
    use std::io::Write;
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |source| SessionError::Io { path: p, source }
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension("json.tmp");
    let json = serde_json::to_vec_pretty(state).map_err(|e| io(path)(std::io::Error::other(e)))?;
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(&json).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(dir) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
        // the rename is durable once the directory is; a failure here leaves a valid file either way
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The summary event: a user message the model reads before the kept events.
fn summary_event(summary: &str, n: u64) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(Chunk {
        content: Content::text(format!("{SUMMARY_HEADER}\n\n{summary}")),
        message_id: Some(format!("{SUMMARY_ID_PREFIX}{n}")),
    })
}

/// How many events `events` holds when consecutive chunks of one message count as one (an `in-memory` layer keeps
/// every streamed delta; a `file` layer coalesces them).
pub(crate) fn count_events(events: &[SessionUpdate]) -> usize {
    events
        .iter()
        .enumerate()
        .filter(|(i, e)| *i == 0 || !same_run(&events[i - 1], e))
        .count()
}

/// Where to cut `view` so that the last `keep` events (counted as [`count_events`] does) stay: `view[..cut]` is
/// summarised. The cut moves earlier while it would keep a tool result whose call would be summarised, and then
/// over the reasoning and text of the message that made the first kept call.
pub(crate) fn cut_point(view: &[SessionUpdate], keep: usize) -> usize {
    let mut cut = view.len();
    let mut kept = 0;
    while cut > 0 && kept < keep {
        cut -= 1;
        if cut == 0 || !same_run(&view[cut - 1], &view[cut]) {
            kept += 1;
        }
    }
    loop {
        let before = cut;
        for e in &view[cut..] {
            let SessionUpdate::ToolCallUpdate(u) = e else {
                continue;
            };
            let call = view[..cut].iter().position(|c| {
                matches!(c, SessionUpdate::ToolCall(call) if call.tool_call_id == u.tool_call_id)
            });
            if let Some(at) = call {
                cut = at;
                break;
            }
        }
        if cut == before {
            return message_start(view, cut);
        }
    }
}

/// `cut`, moved back over the assistant chunks (reasoning, text) right before a kept tool call: they are the same
/// message, and a provider that signs reasoning (Anthropic) refuses a call replayed without the thinking before it.
fn message_start(view: &[SessionUpdate], mut cut: usize) -> usize {
    if !matches!(view.get(cut), Some(SessionUpdate::ToolCall(_))) {
        return cut;
    }
    while cut > 0
        && matches!(
            view[cut - 1],
            SessionUpdate::AgentThoughtChunk(_)
                | SessionUpdate::AgentMessageChunk(_)
                | SessionUpdate::UsageUpdate(_)
        )
    {
        cut -= 1;
    }
    cut
}

/// What [`CompactingLayer::on_compact`] calls.
type OnCompact = Box<dyn Fn(&Compaction) + Send + Sync>;

/// The `compacting` layer. See the module documentation.
pub struct CompactingLayer {
    config: CompactingConfig,
    compactor: Arc<dyn Compactor>,
    clock: Arc<dyn Clock>,
    state: State,
    used: Option<u64>,
    /// The context window the harness last reported (a usage update's `size`).
    reported_window: Option<u64>,
    paused_until: Option<Instant>,
    last_failure: Option<String>,
    on_compact: Option<OnCompact>,
}

impl std::fmt::Debug for CompactingLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactingLayer")
            .field("config", &self.config)
            .field("compactor", &self.compactor.name())
            .field("compactions", &self.state.compactions)
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl CompactingLayer {
    /// A layer summarising with `compactor`; with `persist`, the saved state is loaded now (a corrupt state file is
    /// an error naming it).
    pub fn new(
        config: CompactingConfig,
        compactor: Arc<dyn Compactor>,
    ) -> Result<CompactingLayer, SessionError> {
        let state = match &config.persist {
            Some(path) => load_state(path)?,
            None => State::default(),
        };
        Ok(CompactingLayer {
            config,
            compactor,
            clock: Arc::new(SystemClock),
            state: State {
                version: STATE_VERSION,
                ..state
            },
            used: None,
            reported_window: None,
            paused_until: None,
            last_failure: None,
            on_compact: None,
        })
    }

    /// A layer with the [`HeuristicCompactor`] (what `[session]` builds).
    pub fn heuristic(config: CompactingConfig) -> Result<CompactingLayer, SessionError> {
        CompactingLayer::new(config, Arc::new(HeuristicCompactor))
    }

    /// Measures the failure pause on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> CompactingLayer {
        self.clock = clock;
        self
    }

    /// Calls `f` after each compaction attempt that reached the compactor (compacted or failed).
    pub fn on_compact(
        mut self,
        f: impl Fn(&Compaction) + Send + Sync + 'static,
    ) -> CompactingLayer {
        self.on_compact = Some(Box::new(f));
        self
    }

    /// The config in force.
    pub fn config(&self) -> &CompactingConfig {
        &self.config
    }

    /// The tokens the last request used, once a usage update arrived since the last compaction.
    pub fn tokens_in_context(&self) -> Option<u64> {
        self.used
    }

    /// The context window `token_fraction` is measured against: the configured one, else the one the harness
    /// reports in its usage updates (`size`), else unknown (then the event count applies).
    pub fn context_window(&self) -> Option<u64> {
        self.config.context_window.or(self.reported_window)
    }

    /// The current summary, once a compaction happened.
    pub fn summary(&self) -> Option<&str> {
        self.state.summary.as_deref()
    }

    /// Why the last compaction attempt produced no summary, until one succeeds.
    pub fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
    }

    /// Compacts now, ignoring the threshold and any pause (what `/compact` and a context overflow do).
    pub async fn compact_now(
        &mut self,
        below: &[SessionUpdate],
        ctx: &CompactCtx<'_>,
    ) -> Result<Option<Compaction>, SessionError> {
        self.run(below, CompactMode::Forced, ctx).await
    }

    /// Where the events not covered by the summary start in `below`.
    fn base(&self, below: &[SessionUpdate]) -> usize {
        let c = self.state.covered;
        match (&self.state.summary, &self.state.last_covered) {
            (Some(_), Some(fp))
                if c > 0 && below.len() >= c && fingerprint(&below[c - 1]) == *fp =>
            {
                c
            }
            _ => 0,
        }
    }

    /// What the layers above see: the summary, then the events below it does not cover (from `base`).
    fn view(&self, below: &[SessionUpdate], base: usize) -> Vec<SessionUpdate> {
        let Some(summary) = &self.state.summary else {
            return below.to_vec();
        };
        let rest = &below[base..];
        let mut view = Vec::with_capacity(rest.len() + 1);
        view.push(summary_event(summary, self.state.compactions));
        view.extend_from_slice(rest);
        view
    }

    /// True when automatic compaction should run over a view of `events` events.
    fn trips(&self, events: usize) -> bool {
        if let Some(used) = self.used {
            // an explicit token threshold never waits past MAX_FRACTION of the window, when the window is known
            let cap = self
                .context_window()
                .map(|size| (MAX_FRACTION * size as f64) as u64);
            let by_count = self
                .config
                .token_threshold
                .map(|t| used >= cap.map_or(t, |c| t.min(c)));
            let by_fraction = self
                .config
                .token_fraction
                .zip(self.context_window())
                .map(|(f, size)| used as f64 >= f * size as f64);
            if by_count.is_some() || by_fraction.is_some() {
                return by_count == Some(true) || by_fraction == Some(true);
            }
        }
        events > self.config.effective_threshold()
    }

    fn report(&mut self, c: Compaction) -> Compaction {
        if let Some(f) = &self.on_compact {
            f(&c);
        }
        c
    }

    fn failed(&mut self, cause: String) -> Compaction {
        self.paused_until = Some(self.clock.now() + PAUSE_AFTER_FAILURE);
        self.last_failure = Some(cause.clone());
        self.report(Compaction::Failed {
            layer: "compacting".into(),
            cause: format!("{cause}; the history was kept as it was"),
        })
    }

    async fn run(
        &mut self,
        below: &[SessionUpdate],
        mode: CompactMode,
        ctx: &CompactCtx<'_>,
    ) -> Result<Option<Compaction>, SessionError> {
        let base = self.base(below);
        let s = usize::from(self.state.summary.is_some());
        if mode == CompactMode::Auto {
            if self.paused_until.is_some_and(|t| self.clock.now() < t) {
                return Ok(None);
            }
            if !self.trips(s + count_events(&below[base..])) {
                return Ok(None);
            }
        }
        let view = self.view(below, base);
        let cut = cut_point(&view, self.config.keep);
        if cut <= s {
            // nothing but the summary lies before what is kept
            return Ok(None);
        }
        let summary = match self.compactor.summarize(&view[..cut], ctx).await {
            Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
            Ok(_) => {
                let cause = format!(
                    "the {} compactor returned an empty summary",
                    self.compactor.name()
                );
                return Ok(Some(self.failed(cause)));
            }
            Err(SummaryError::Cancelled) => return Ok(None),
            Err(SummaryError::Failed(cause)) => return Ok(Some(self.failed(cause))),
        };
        let covered = base + cut - s;
        let next = State {
            version: STATE_VERSION,
            summary: Some(summary),
            covered,
            last_covered: below.get(covered - 1).map(fingerprint),
            compactions: self.state.compactions + 1,
        };
        if let Some(path) = &self.config.persist {
            if let Err(e) = save_state(path, &next) {
                return Ok(Some(self.failed(format!("cannot save the summary: {e}"))));
            }
        }
        self.state = next;
        self.used = None;
        self.paused_until = None;
        self.last_failure = None;
        let c = Compaction::Compacted {
            layer: "compacting".into(),
            before: view.len(),
            after: view.len() - cut + 1,
        };
        Ok(Some(self.report(c)))
    }
}

impl Layer for CompactingLayer {
    fn name(&self) -> &str {
        "compacting"
    }

    fn stores(&self) -> bool {
        false
    }

    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        let mut down = Vec::with_capacity(events.len());
        for e in events {
            match e {
                SessionUpdate::UsageUpdate(u) => {
                    self.used = Some(u.used);
                    if u.size.is_some() {
                        self.reported_window = u.size;
                    }
                }
                other => down.push(other),
            }
        }
        Ok(down)
    }

    fn pull(&self, below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        if self.state.summary.is_none() {
            return Ok(below);
        }
        Ok(self.view(&below, self.base(&below)))
    }

    fn compacts(&self) -> bool {
        true
    }

    fn compact<'a>(
        &'a mut self,
        below: &'a [SessionUpdate],
        mode: CompactMode,
        ctx: &'a CompactCtx<'a>,
    ) -> BoxFuture<'a, Result<Option<Compaction>, SessionError>> {
        Box::pin(self.run(below, mode, ctx))
    }

    fn tokens_in_context(&self) -> Option<u64> {
        self.used
    }
}

#[cfg(test)]
mod tests;
