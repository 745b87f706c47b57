//! The interactive loop behind `loom run`: boot once, then read lines and run a turn for each, with slash commands
//! between turns. Presentation belongs to the caller through [`ReplUi`]; this module owns the async parts (the
//! turn, the update stream, Ctrl-C, input that arrives while a turn runs) so tokio stays out of the CLI.
//!
//! Ctrl-C during a turn cancels that turn (its tools are killed and marked interrupted) and the loop goes on; at the
//! prompt it asks for a second Ctrl-C, Ctrl-D or `/quit` to leave. A line typed while a turn runs is steering: it is
//! queued and enters the history after the current tool batch — except while the agent asks the user to approve a
//! call (a `[permissions]` ask rule or the doom-loop guard): then the next line is the answer (once, always when
//! the ask can be remembered, or reject), asked again until it is one of those; Ctrl-C or the end of input refuses.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AskAnswer, Asker, PermissionAsk, TurnOutcome};
use crate::boot::{boot, BootOptions};
use crate::bus::Capacity;
use crate::display::terminal_safe;
use crate::prompt::PromptError;
use crate::update::SessionUpdate;

/// How often [`ReplUi::tick`] is called while a turn runs (spinner frames, the live rate).
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// What the REPL shows. Implemented by the CLI (a terminal) and by tests (a recorder).
pub trait ReplUi: Send {
    /// A note for the user (boot notes, command answers, hints).
    fn note(&mut self, text: &str);
    /// Show the input prompt.
    fn prompt(&mut self);
    /// A turn starts.
    fn turn_start(&mut self);
    /// One update of the running turn, in order.
    fn update(&mut self, update: &SessionUpdate);
    /// Called every [`TICK`] while a turn runs.
    fn tick(&mut self, elapsed: Duration);
    /// The turn ended.
    fn turn_end(&mut self, outcome: &TurnOutcome, stats: &TurnStats);
    /// The agent asks the user to approve a call; the next line typed is the answer (see [`ask_question`]).
    fn ask(&mut self, ask: &PermissionAsk) {
        self.note(&ask_question(ask));
    }
    /// The user answered `ask` (or it was refused by Ctrl-C or the end of input); nothing the turn produced was
    /// shown since the question. The default repeats the call with the answer ([`answer_line`]).
    fn answered(&mut self, ask: &PermissionAsk, answer: &AskAnswer) {
        self.note(&answer_line(ask, answer));
    }
}

/// The question for an ask: why, the call, and the answers possible. Built from loom's own data (the call as the
/// kernel judged it) and made [`terminal_safe`]: nothing in it can move the cursor or restyle the screen.
pub fn ask_question(ask: &PermissionAsk) -> String {
    let choices = if ask.rememberable {
        "[o]nce, [a]lways (this exact call, remembered for this agent), [r]eject"
    } else {
        "[o]nce, [r]eject"
    };
    let question = format!(
        "approve? {}\n  {} {}\n  {choices}",
        ask.reason, ask.call.title, ask.call.raw_input
    );
    terminal_safe(&question).into_owned()
}

/// The line that records an answer: what was decided, for exactly which call (loom's data, [`terminal_safe`]).
pub fn answer_line(ask: &PermissionAsk, answer: &AskAnswer) -> String {
    let what = match answer {
        AskAnswer::AllowOnce => "approved once".to_string(),
        AskAnswer::AllowAlways => "approved always".to_string(),
        AskAnswer::Reject(why) => format!("rejected ({why})"),
    };
    let line = format!("{what}: {} {}", ask.call.title, ask.call.raw_input);
    terminal_safe(&line).into_owned()
}

/// The answer a typed line gives to `ask`, or `None` when it is not one of the choices offered.
pub(crate) fn parse_answer(line: &str, ask: &PermissionAsk) -> Option<AskAnswer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Some(AskAnswer::AllowOnce),
        "a" | "always" if ask.rememberable => Some(AskAnswer::AllowAlways),
        "r" | "reject" | "n" | "no" => Some(AskAnswer::Reject("the user rejected it".into())),
        _ => None,
    }
}

/// Asks go from the running turn to the loop that reads the terminal.
type AskMsg = (PermissionAsk, oneshot::Sender<AskAnswer>);

/// The REPL's [`Asker`]: hands each ask to the loop, which puts it to the user.
struct ReplAsker {
    asks: mpsc::UnboundedSender<AskMsg>,
}

impl Asker for ReplAsker {
    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'static, AskAnswer> {
        let (tx, rx) = oneshot::channel();
        let sent = self.asks.send((ask, tx)).is_ok();
        Box::pin(async move {
            if !sent {
                return AskAnswer::Reject("no one is at the terminal to answer".into());
            }
            rx.await
                .unwrap_or_else(|_| AskAnswer::Reject("the question went unanswered".into()))
        })
    }
}

/// Measurements of one turn, for the meters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnStats {
    /// Wall time of the turn.
    pub elapsed: Duration,
    /// Characters of assistant text streamed.
    pub text_chars: usize,
    /// Time from the first to the last assistant text chunk.
    pub streaming: Duration,
    /// Tokens in the context after the turn, when the provider reported usage.
    pub context_tokens: Option<u64>,
    /// The model's context window, when the harness reported it.
    pub context_size: Option<u64>,
}

impl TurnStats {
    /// The context meter: `12% of 200000 tok` when the window is known, else the token count.
    pub fn context_meter(&self) -> Option<String> {
        let used = self.context_tokens.filter(|n| *n > 0)?;
        Some(match self.context_size.filter(|n| *n > 0) {
            Some(size) => format!(
                "context {:.0}% ({used}/{size} tok)",
                used as f64 * 100.0 / size as f64
            ),
            None => format!("context {used} tok"),
        })
    }

    /// Approximate output tokens per second while text streamed (4 characters a token), when it streamed long
    /// enough to measure.
    pub fn token_rate(&self) -> Option<f64> {
        let secs = self.streaming.as_secs_f64();
        (secs >= 0.05).then(|| self.text_chars as f64 / 4.0 / secs)
    }
}

/// A slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `/help`.
    Help,
    /// `/audit`: the authority surface of the agent.
    Audit,
    /// `/tools`: the tools the model sees.
    Tools,
    /// `/events`: the session history.
    Events,
    /// `/compact`: compact the session now.
    Compact,
    /// `/tokens`: tokens in the context.
    Tokens,
    /// `/plan`: enter plan mode.
    Plan,
    /// `/plan off`: leave plan mode.
    PlanOff,
    /// `/record`: the working record.
    Record,
    /// `/goal [text]`: show or set the session's goal.
    Goal,
    /// `/supervisor [on|off]`: show or switch the supervisor for this session.
    Supervisor,
    /// `/quit`.
    Quit,
}

/// The commands with their one-line help, in `/help` order.
pub(crate) const COMMANDS: &[(&str, Command, &str)] = &[
    ("/help", Command::Help, "this list"),
    (
        "/audit",
        Command::Audit,
        "the agent's whole authority surface, as `loom audit` prints it",
    ),
    ("/tools", Command::Tools, "the tools the model can call"),
    (
        "/events",
        Command::Events,
        "the session history, one event per line",
    ),
    (
        "/compact",
        Command::Compact,
        "summarise older history now (needs a compacting session layer)",
    ),
    (
        "/tokens",
        Command::Tokens,
        "tokens in the context, as the provider last reported",
    ),
    (
        "/plan",
        Command::Plan,
        "plan mode: tools that change anything are neither offered nor run",
    ),
    ("/plan off", Command::PlanOff, "leave plan mode"),
    (
        "/record",
        Command::Record,
        "the working record: goal, checklist, tasks, notes",
    ),
    (
        "/goal",
        Command::Goal,
        "/goal TEXT sets the session's goal, /goal clear clears it, /goal shows it",
    ),
    (
        "/supervisor",
        Command::Supervisor,
        "/supervisor on|off: send the model back while its record has unfinished work",
    ),
    ("/quit", Command::Quit, "leave (also Ctrl-D)"),
];

/// What `/compact` says about one layer's compaction: "nothing to compact" when the history did not get shorter.
pub(crate) fn compact_report(c: &crate::session::Compaction) -> String {
    use crate::session::Compaction;
    match c {
        Compaction::Compacted { before, after, .. } if after >= before => format!(
            "nothing to compact: the history ({before} events) is no longer than what compaction keeps"
        ),
        Compaction::Compacted { layer, before, after } => {
            format!("compacted {before} events into {after} ({layer} layer)")
        }
        Compaction::Failed { layer, cause } => {
            format!("compaction failed ({layer} layer): {cause}; the history was kept as it was")
        }
    }
}

/// Parses a line: `None` when it is not a command (a prompt), else the command or why it is not one.
pub(crate) fn parse_command(line: &str) -> Option<Result<Command, String>> {
    let word = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let word = word.as_str();
    if !word.starts_with('/') {
        return None;
    }
    // the one command that takes text after it
    if word == "/goal" || word.starts_with("/goal ") {
        return Some(Ok(Command::Goal));
    }
    if matches!(word, "/supervisor" | "/supervisor on" | "/supervisor off") {
        return Some(Ok(Command::Supervisor));
    }
    Some(
        COMMANDS
            .iter()
            .find(|(name, _, _)| *name == word)
            .map(|(_, c, _)| *c)
            .ok_or_else(|| format!("unknown command {word:?}; /help lists the commands")),
    )
}

/// Boots `manifest` and runs the loop until `/quit`, end of input or a second Ctrl-C at the prompt. `audit` renders
/// the `/audit` answer (the caller owns the audit crate).
pub fn run_repl(
    manifest: &Path,
    opts: BootOptions,
    input: Box<dyn BufRead + Send>,
    ui: &mut dyn ReplUi,
    audit: &dyn Fn() -> String,
) -> Result<(), PromptError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(PromptError::Runtime)?;
    rt.block_on(async {
        let booted = boot(manifest, opts)?;
        for n in &booted.notes {
            ui.note(n);
        }
        let mut agent = booted.agent;
        let (ask_tx, mut asks) = mpsc::unbounded_channel::<AskMsg>();
        agent.set_asker(Arc::new(ReplAsker { asks: ask_tx }));
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        // a plain thread reads the terminal: blocking reads never hold a runtime worker
        std::thread::spawn(move || {
            for line in input.lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigint = signal(SignalKind::interrupt()).map_err(PromptError::Runtime)?;
        let mut armed = false;
        ui.note("type a message, or /help; Ctrl-C cancels a turn, Ctrl-D leaves");
        loop {
            ui.prompt();
            let line = tokio::select! {
                l = lines.recv() => l.flatten(),
                _ = sigint.recv() => {
                    if armed {
                        break;
                    }
                    armed = true;
                    ui.note("(Ctrl-C again, Ctrl-D or /quit to leave)");
                    continue;
                }
            };
            armed = false;
            let Some(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match parse_command(&line) {
                Some(Ok(Command::Quit)) => break,
                Some(Ok(c)) => command(&agent, c, &line, ui, audit).await,
                Some(Err(e)) => ui.note(&e),
                None => {
                    let eof = turn(&agent, &line, ui, &mut lines, &mut asks, &mut sigint).await;
                    if eof {
                        break;
                    }
                }
            }
        }
        if let Err(e) = agent.close().await {
            ui.note(&format!("session: {e}"));
        }
        Ok(())
    })
}

/// What the user sees of a running turn: the updates in order, except that nothing the model or a tool produces is
/// shown while a permission question waits for its answer. Updates that arrive meanwhile are held and shown after
/// the answer (which is repeated first, from loom's own data), so the question is always the last thing on screen
/// while it is open and nothing can draw over it.
#[derive(Default)]
struct Screen {
    /// The ask being put to the user: the next line answers it.
    asking: Option<AskMsg>,
    /// Updates that arrived while it was open.
    held: Vec<SessionUpdate>,
    stats: TurnStats,
    first_text: Option<Instant>,
}

impl Screen {
    /// An update of the running turn: shown, or held while a question is open.
    fn update(&mut self, u: SessionUpdate, ui: &mut dyn ReplUi) {
        match &u {
            SessionUpdate::AgentMessageChunk(c) => {
                let now = Instant::now();
                let first = *self.first_text.get_or_insert(now);
                self.stats.text_chars += c.content.as_text().chars().count();
                self.stats.streaming = now - first;
            }
            SessionUpdate::UsageUpdate(usage) => {
                self.stats.context_size = usage.size.or(self.stats.context_size);
                self.stats.context_tokens = Some(usage.used);
            }
            _ => {}
        }
        if self.asking.is_some() {
            self.held.push(u);
        } else {
            ui.update(&u);
        }
    }

    /// Puts a question to the user.
    fn ask(&mut self, msg: AskMsg, ui: &mut dyn ReplUi) {
        ui.ask(&msg.0);
        self.asking = Some(msg);
    }

    /// A line typed while a question is open: its answer, or the question again when it is not one of the choices.
    /// False when no question is open (the line is steering).
    fn line(&mut self, line: &str, ui: &mut dyn ReplUi) -> bool {
        let Some((ask, reply)) = self.asking.take() else {
            return false;
        };
        match parse_answer(line, &ask) {
            Some(answer) => {
                ui.answered(&ask, &answer);
                let _ = reply.send(answer);
                self.release(ui);
            }
            None => {
                ui.note(if ask.rememberable {
                    "answer o (once), a (always) or r (reject)"
                } else {
                    "answer o (once) or r (reject)"
                });
                ui.ask(&ask);
                self.asking = Some((ask, reply));
            }
        }
        true
    }

    /// The open question (if any) goes unanswered, which refuses it: `why` says why (Ctrl-C, the end of input).
    fn refuse(&mut self, why: &str, ui: &mut dyn ReplUi) {
        if let Some((ask, reply)) = self.asking.take() {
            ui.answered(&ask, &AskAnswer::Reject(why.into()));
            drop(reply);
        }
        self.release(ui);
    }

    /// Shows what was held while the question was open.
    fn release(&mut self, ui: &mut dyn ReplUi) {
        for u in std::mem::take(&mut self.held) {
            ui.update(&u);
        }
    }
}

/// Runs one turn. Returns true when the input ended while it ran.
async fn turn(
    agent: &Agent,
    text: &str,
    ui: &mut dyn ReplUi,
    lines: &mut tokio::sync::mpsc::UnboundedReceiver<Option<String>>,
    asks: &mut mpsc::UnboundedReceiver<AskMsg>,
    sigint: &mut tokio::signal::unix::Signal,
) -> bool {
    let mut screen = Screen::default();
    let updates = agent.subscribe(Capacity::Unbounded);
    let cancel = CancellationToken::new();
    let start = Instant::now();
    let mut eof = false;
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ui.turn_start();
    let run = agent.prompt(text, cancel.clone());
    tokio::pin!(run);
    let outcome = loop {
        tokio::select! {
            biased;
            Some(u) = updates.recv() => screen.update(u, ui),
            o = &mut run => break o,
            _ = sigint.recv() => {
                // dropping an unanswered question refuses it; the cancelled turn stops waiting anyway
                screen.refuse("Ctrl-C", ui);
                cancel.cancel();
            }
            Some(msg) = asks.recv(), if screen.asking.is_none() => {
                // what the turn produced before it asked comes first: the question is the last thing shown
                while let Some(u) = updates.try_recv() {
                    screen.update(u, ui);
                }
                screen.ask(msg, ui);
            }
            l = lines.recv(), if !eof => match l.flatten() {
                Some(l) => {
                    if !screen.line(&l, ui) && !l.trim().is_empty() {
                        agent.steer(l);
                        ui.note("(queued: the agent reads it after the current tool calls)");
                    }
                }
                None => {
                    // the end of input answers nothing: an open question is refused
                    screen.refuse("the input ended", ui);
                    eof = true;
                }
            },
            _ = ticker.tick() => ui.tick(start.elapsed()),
        }
    };
    // the turn is over: a question still open has no one waiting for it
    screen.asking = None;
    screen.release(ui);
    while let Some(u) = updates.try_recv() {
        screen.update(u, ui);
    }
    let mut stats = std::mem::take(&mut screen.stats);
    stats.elapsed = start.elapsed();
    // the compacting layer's count is what the next request carries (it drops to nothing right after a compaction)
    if let Some(n) = agent.tokens_in_context().await {
        stats.context_tokens = Some(n);
    }
    ui.turn_end(&outcome, &stats);
    eof
}

async fn command(
    agent: &Agent,
    c: Command,
    line: &str,
    ui: &mut dyn ReplUi,
    audit: &dyn Fn() -> String,
) {
    match c {
        Command::Help => {
            let text: Vec<String> = COMMANDS
                .iter()
                .map(|(name, _, help)| format!("{name:<9} {help}"))
                .collect();
            ui.note(&text.join("\n"));
        }
        Command::Audit => ui.note(audit().trim_end()),
        Command::Tools => {
            let specs = agent.tool_specs();
            if specs.is_empty() {
                ui.note("this agent has no tools");
            }
            let text: Vec<String> = specs
                .iter()
                .map(|s| format!("{}: {}", s.name, s.description.lines().next().unwrap_or("")))
                .collect();
            ui.note(&text.join("\n"));
        }
        Command::Events => match agent.preamble("").await {
            Ok(mut p) => {
                p.events.pop(); // the empty prompt preamble() appends
                if p.events.is_empty() {
                    ui.note("the session is empty");
                }
                let text: Vec<String> = p
                    .events
                    .iter()
                    .filter_map(|e| serde_json::to_string(e).ok())
                    .collect();
                ui.note(&text.join("\n"));
            }
            Err(e) => ui.note(&format!("session: {e}")),
        },
        Command::Compact => match agent.compact_now(CancellationToken::new()).await {
            Ok(done) if done.is_empty() => {
                ui.note("nothing to compact: the session has no compacting layer (add \"compacting\" to [session] \
                         layers)")
            }
            Ok(done) => {
                for c in done {
                    ui.note(&compact_report(&c));
                }
            }
            Err(e) => ui.note(&format!("compaction failed: {e}")),
        },
        Command::Tokens => match agent.tokens_in_context().await {
            Some(n) => ui.note(&format!("{n} tokens in the context (as the provider last reported)")),
            None => ui.note("no usage reported yet (or the session has no compacting layer to track it)"),
        },
        Command::Plan => {
            agent.set_plan_mode(true);
            ui.note("plan mode: tools that change anything are neither offered nor run; /plan off leaves it");
        }
        Command::PlanOff => {
            agent.set_plan_mode(false);
            ui.note("plan mode is off: every granted tool is offered again");
        }
        Command::Record => {
            let r = agent.record();
            if r.is_empty() {
                ui.note("the working record is empty");
            } else {
                ui.note(&r.render());
            }
        }
        Command::Supervisor => {
            match line.split_whitespace().nth(1) {
                Some("on") => agent.set_supervising(true),
                Some("off") => agent.set_supervising(false),
                _ => {}
            }
            let s = agent.supervisor();
            ui.note(&if agent.supervising() {
                format!(
                    "the supervisor is on: a turn that ends with unfinished work in the record is sent back (at \
                     most {} time(s){})",
                    s.max_rounds,
                    s.review
                        .as_ref()
                        .map(|(n, _)| format!("; {n} reviews completion claims"))
                        .unwrap_or_default()
                )
            } else {
                "the supervisor is off; /supervisor on switches it on for this session".to_string()
            });
        }
        Command::Goal => {
            let text = line.trim().strip_prefix("/goal").unwrap_or("").trim();
            let set = match text {
                "" => {
                    ui.note(&match agent.record().goal {
                        Some(g) => format!("goal: {g}"),
                        None => "no goal is set; /goal TEXT sets one".to_string(),
                    });
                    return;
                }
                "clear" => agent.set_goal(""),
                t => agent.set_goal(t),
            };
            match set {
                Ok(()) => ui.note(&match agent.record().goal {
                    Some(g) => format!("goal: {g}"),
                    None => "the goal is cleared".to_string(),
                }),
                Err(e) => ui.note(&format!("the goal was not set: {e}")),
            }
        }
        Command::Quit => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_says_when_nothing_got_shorter() {
        use crate::session::Compaction;
        let c = |before, after| Compaction::Compacted {
            layer: "compacting".into(),
            before,
            after,
        };
        assert_eq!(
            compact_report(&c(12, 12)),
            "nothing to compact: the history (12 events) is no longer than what compaction keeps"
        );
        assert_eq!(
            compact_report(&c(40, 11)),
            "compacted 40 events into 11 (compacting layer)"
        );
        let failed = Compaction::Failed {
            layer: "compacting".into(),
            cause: "the model returned nothing".into(),
        };
        assert_eq!(
            compact_report(&failed),
            "compaction failed (compacting layer): the model returned nothing; the history was kept as it was"
        );
    }

    #[test]
    fn answers_are_only_the_choices_offered() {
        use crate::update::{ToolCall, ToolKind, ToolStatus};
        let mut ask = PermissionAsk {
            call: ToolCall {
                tool_call_id: "c".into(),
                title: "bash".into(),
                kind: ToolKind::Execute,
                status: ToolStatus::Pending,
                raw_input: serde_json::json!({"command": "git push"}),
                content: vec![],
                locations: vec![],
            },
            reason: "an ask rule".into(),
            rememberable: true,
        };
        assert_eq!(parse_answer(" A ", &ask), Some(AskAnswer::AllowAlways));
        assert_eq!(parse_answer("once", &ask), Some(AskAnswer::AllowOnce));
        assert!(matches!(
            parse_answer("r", &ask),
            Some(AskAnswer::Reject(_))
        ));
        assert_eq!(parse_answer("sure", &ask), None);
        assert!(ask_question(&ask).contains("[a]lways"));
        // the doom-loop guard's asks cannot be remembered: "always" is neither offered nor accepted
        ask.rememberable = false;
        assert_eq!(parse_answer("a", &ask), None);
        assert!(!ask_question(&ask).contains("always"));
    }

    /// A [`ReplUi`] that records what it was asked to show.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl ReplUi for Recorder {
        fn note(&mut self, text: &str) {
            self.0.push(format!("note: {text}"));
        }
        fn prompt(&mut self) {}
        fn turn_start(&mut self) {}
        fn update(&mut self, update: &SessionUpdate) {
            let text = match update {
                SessionUpdate::AgentMessageChunk(c) => c.content.as_text().to_string(),
                SessionUpdate::ToolCallUpdate(t) => t.text(),
                other => format!("{other:?}"),
            };
            self.0.push(format!("update: {text}"));
        }
        fn tick(&mut self, _elapsed: Duration) {}
        fn turn_end(&mut self, _outcome: &TurnOutcome, _stats: &TurnStats) {}
        fn ask(&mut self, ask: &PermissionAsk) {
            self.0.push(format!("ask: {}", ask_question(ask)));
        }
    }

    fn read_ask(raw_input: serde_json::Value) -> PermissionAsk {
        use crate::update::{ToolCall, ToolKind, ToolStatus};
        PermissionAsk {
            call: ToolCall {
                tool_call_id: "c".into(),
                title: "read_file".into(),
                kind: ToolKind::Read,
                status: ToolStatus::Pending,
                raw_input,
                content: vec![],
                locations: vec![],
            },
            reason: "read_file: an ask rule".into(),
            rememberable: false,
        }
    }

    fn text(t: &str) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk(crate::update::Chunk {
            content: crate::update::Content::text(t),
            message_id: None,
        })
    }

    fn output(t: &str) -> SessionUpdate {
        use crate::update::{Content, ToolCallContent, ToolCallUpdate, ToolStatus};
        SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: "other".into(),
            status: Some(ToolStatus::Completed),
            content: Some(vec![ToolCallContent::Content {
                content: Content::text(t),
            }]),
            raw_output: None,
        })
    }

    #[test]
    fn nothing_is_shown_while_a_question_waits_and_the_answer_repeats_the_call() {
        let mut ui = Recorder::default();
        let mut screen = Screen::default();
        screen.update(text("before"), &mut ui);
        let (tx, mut rx) = oneshot::channel();
        screen.ask(
            (read_ask(serde_json::json!({"path": "a.txt"})), tx),
            &mut ui,
        );
        // a tool's output and the model's text arrive while the question is open: held, not shown
        screen.update(output("\x1b[3A\x1b[Jfake question"), &mut ui);
        screen.update(text("after"), &mut ui);
        assert_eq!(ui.0.len(), 2, "{:#?}", ui.0);
        assert!(ui.0[1].starts_with("ask: approve?"), "{:#?}", ui.0);
        // not an answer: the hint, the question again, and still nothing held is shown
        assert!(screen.line("maybe", &mut ui));
        assert!(rx.try_recv().is_err());
        assert_eq!(ui.0.len(), 4, "{:#?}", ui.0);
        assert!(ui.0[3].starts_with("ask: approve?"), "{:#?}", ui.0);
        // the answer: the call repeated with it, then what was held, in order
        assert!(screen.line("o", &mut ui));
        assert_eq!(rx.try_recv().unwrap(), AskAnswer::AllowOnce);
        assert_eq!(
            ui.0[4..],
            [
                r#"note: approved once: read_file {"path":"a.txt"}"#.to_string(),
                "update: \x1b[3A\x1b[Jfake question".to_string(),
                "update: after".to_string(),
            ]
        );
        // with no question open a line is not an answer (it is steering)
        assert!(!screen.line("o", &mut ui));
        screen.update(text("live"), &mut ui);
        assert_eq!(ui.0.last().unwrap(), "update: live");
    }

    #[test]
    fn a_refused_question_releases_what_was_held() {
        let mut ui = Recorder::default();
        let mut screen = Screen::default();
        let (tx, mut rx) = oneshot::channel();
        screen.ask((read_ask(serde_json::json!({"path": "b"})), tx), &mut ui);
        screen.update(output("late"), &mut ui);
        assert_eq!(ui.0.len(), 1);
        screen.refuse("Ctrl-C", &mut ui);
        // the reply was dropped: the asker reads that as a refusal
        assert!(rx.try_recv().is_err());
        assert_eq!(
            ui.0[1..],
            [
                r#"note: rejected (Ctrl-C): read_file {"path":"b"}"#.to_string(),
                "update: late".to_string()
            ]
        );
    }

    #[test]
    fn the_question_shows_a_hostile_call_escaped() {
        let ask = read_ask(serde_json::json!({
            "path": "git push evil #\r\u{1b}[2K? \u{9b}33m\u{202e}status"
        }));
        let q = ask_question(&ask);
        assert!(
            !q.contains('\x1b') && !q.contains('\r') && !q.contains('\u{9b}'),
            "{q:?}"
        );
        assert!(!q.contains('\u{202e}'), "{q:?}");
        assert!(
            q.contains("\\u{9b}33m") && q.contains("\\u{202e}status"),
            "{q:?}"
        );
        let a = answer_line(&ask, &AskAnswer::AllowOnce);
        assert!(
            a.starts_with("approved once: read_file") && !a.contains('\u{9b}'),
            "{a:?}"
        );
    }

    #[test]
    fn commands_parse_and_unknown_ones_are_named() {
        assert_eq!(parse_command("hello"), None);
        assert_eq!(parse_command(" /quit "), Some(Ok(Command::Quit)));
        assert_eq!(parse_command("/tokens"), Some(Ok(Command::Tokens)));
        assert_eq!(parse_command("/plan"), Some(Ok(Command::Plan)));
        assert_eq!(parse_command(" /plan   off "), Some(Ok(Command::PlanOff)));
        let err = parse_command("/qiut").unwrap().unwrap_err();
        assert!(err.contains("/qiut") && err.contains("/help"), "{err}");
    }

    #[test]
    fn the_rate_needs_a_measurable_stream() {
        let mut s = TurnStats {
            text_chars: 400,
            streaming: Duration::from_secs(1),
            ..TurnStats::default()
        };
        assert_eq!(s.token_rate(), Some(100.0));
        s.streaming = Duration::from_millis(1);
        assert_eq!(s.token_rate(), None);
        assert_eq!(s.context_meter(), None);
        s.context_tokens = Some(50_000);
        assert_eq!(s.context_meter().as_deref(), Some("context 50000 tok"));
        s.context_size = Some(200_000);
        assert_eq!(
            s.context_meter().as_deref(),
            Some("context 25% (50000/200000 tok)")
        );
    }
}
