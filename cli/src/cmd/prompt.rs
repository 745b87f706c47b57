//! `loom prompt <agent.toml> [text] [--format text|trace|jsonl] [--emit-preamble]`: boot the agent, run one turn,
//! print the result.
//!
//! `text` (the default) prints only the final agent message, pipe-friendly; `trace` prints a coalesced, labelled view
//! (messages, tool calls and results, the stop reason) as it happens; `jsonl` prints every update (ACP
//! `SessionUpdate`s and lifecycle frames) as one JSON object per line, as it happens. `--emit-preamble` (jsonl only)
//! first prints one `{"preamble": {systemPrompt, events, tools}}` line: exactly what the model is about to see. The
//! prompt is the `text` argument, or standard input when it is absent. Exit codes: 0 when the turn ended normally,
//! 130 when it was cancelled (Ctrl-C, SIGTERM, SIGHUP; the session is flushed first), 75 when a transient provider
//! error (rate limit, overload, network, 5xx) outlasted the retries, 1 otherwise (boot failed, the provider failed
//! for good, `maxTurnRequests` was reached), 2 for usage errors.
//!
//! When stdout is a terminal, `text` and `trace` output goes through [`terminal_safe`]: escape sequences and control
//! characters the model or a tool wrote are shown (as `\x1b[…`), never obeyed. Piped, the text is passed on as it is
//! (it is data for the next program); `jsonl` is escaped JSON either way. Notes and notices on stderr are always
//! made safe.

use std::io::{IsTerminal, Read};

use loom_protocol::{SessionUpdate, ToolStatus, TurnStop};
use loom_runtime::{
    prompt_blocking, terminal_safe, BootOptions, Preamble, PromptSink, TurnOutcome,
};

use crate::exit;
use crate::output::{emit, fail};

/// How `loom prompt` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The final agent message only.
    Text,
    /// A coalesced, labelled view of the turn.
    Trace,
    /// One update per line, as JSON.
    Jsonl,
}

/// Arguments of `loom prompt`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest (default ./agent.toml; a directory means its agent.toml). With one argument, it is the
    /// manifest when it names an existing file or directory or ends in .toml, else the prompt.
    #[arg(value_name = "MANIFEST")]
    first: Option<String>,
    /// The prompt (default: read standard input).
    text: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Print what the model is about to see first (jsonl only).
    #[arg(long)]
    emit_preamble: bool,
    /// Run the turn in plan mode: tools that change anything are neither offered nor run.
    #[arg(long)]
    plan: bool,
    #[command(flatten)]
    scope: super::scope::RunScope,
}

struct Sink {
    format: Format,
    preamble: bool,
    open: bool,
    /// stdout is a terminal: what is printed is made [`terminal_safe`] (text and trace).
    tty: bool,
    /// The label of the chunk run being printed (trace).
    run: Option<&'static str>,
    /// jsonl: the `{"sandbox": …}` line, printed first (after the preamble, when one is asked for).
    sandbox: Option<String>,
}

impl Sink {
    /// Prints the `{"sandbox": …}` line once.
    fn sandbox_line(&mut self) {
        if let Some(line) = self.sandbox.take() {
            self.out(&format!("{line}\n"));
        }
    }

    fn out(&mut self, text: &str) {
        if self.open {
            // loom adds no escape sequences of its own here: everything printed can go through the sanitiser
            let text = if self.tty && self.format != Format::Jsonl {
                terminal_safe(text)
            } else {
                std::borrow::Cow::Borrowed(text)
            };
            self.open = emit(&text);
        }
    }

    fn trace(&mut self, u: &SessionUpdate) {
        let chunk = |label: &'static str, text: &str, s: &mut Sink| {
            if s.run != Some(label) {
                let sep = if s.run.is_some() { "\n" } else { "" };
                s.out(&format!("{sep}{label}: "));
                s.run = Some(label);
            }
            s.out(text);
        };
        match u {
            SessionUpdate::UserMessageChunk(c) => chunk("user", c.content.as_text(), self),
            SessionUpdate::AgentMessageChunk(c) => chunk("agent", c.content.as_text(), self),
            SessionUpdate::AgentThoughtChunk(c) => chunk("thinking", c.content.as_text(), self),
            SessionUpdate::ToolCall(c) => {
                self.end_run();
                self.out(&format!(
                    "[tool {}] {} {}\n",
                    c.tool_call_id, c.title, c.raw_input
                ));
            }
            SessionUpdate::ToolCallUpdate(t) if t.status != Some(ToolStatus::InProgress) => {
                self.end_run();
                let status = if t.status == Some(ToolStatus::Completed) {
                    "ok"
                } else {
                    "failed"
                };
                let mut text = t.text();
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                self.out(&format!("[result {} {status}] {text}", t.tool_call_id));
            }
            SessionUpdate::Frame(f) => {
                if let Some(text) = u.notice_text() {
                    self.end_run();
                    self.out(&format!("[notice] {text}\n"));
                }
                if let Some(stop) = f.stop_reason {
                    self.end_run();
                    let stop = serde_json::to_value(stop)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                    self.out(&format!("[stop] {}\n", stop.unwrap_or_default()));
                }
            }
            _ => {}
        }
    }

    fn end_run(&mut self) {
        if self.run.take().is_some() {
            self.out("\n");
        }
    }
}

impl PromptSink for Sink {
    fn note(&mut self, note: &str) {
        eprintln!("loom: note: {}", terminal_safe(note));
    }

    fn wants_preamble(&self) -> bool {
        self.preamble
    }

    fn preamble(&mut self, p: &Preamble) {
        if let Ok(line) = serde_json::to_string(&serde_json::json!({ "preamble": p })) {
            self.out(&format!("{line}\n"));
        }
        self.sandbox_line();
    }

    fn update(&mut self, u: &SessionUpdate) {
        match self.format {
            // the answer alone goes to stdout; a notice is for the user
            Format::Text => {
                if let Some(text) = u.notice_text() {
                    eprintln!("loom: notice: {}", terminal_safe(text));
                }
            }
            Format::Trace => self.trace(u),
            Format::Jsonl => {
                if let Ok(line) = serde_json::to_string(u) {
                    self.out(&format!("{line}\n"));
                }
            }
        }
    }
}

/// Runs `loom prompt`.
pub fn run(args: Args) -> i32 {
    args.scope.apply();
    if let Err(code) = args.scope.preflight() {
        return code;
    }
    let (manifest, text) = match (args.first, args.text) {
        (Some(m), text @ Some(_)) => (m, text),
        (Some(one), None) if super::manifest_arg::is_manifest(&one) => (one, None),
        (Some(one), None) => (super::manifest_arg::DEFAULT.to_string(), Some(one)),
        (None, _) => (super::manifest_arg::DEFAULT.to_string(), None),
    };
    let manifest = match super::manifest_arg::resolve(std::path::Path::new(&manifest)) {
        Ok(m) => m,
        Err(e) => return fail(exit::FAILED, &e),
    };
    // before waiting on standard input for a prompt: a manifest that is not there is the first thing to say
    if !manifest.exists() {
        return fail(
            exit::FAILED,
            &format!(
                "{}: cannot read the manifest: it does not exist",
                manifest.display()
            ),
        );
    }
    if args.emit_preamble && args.format != Format::Jsonl {
        return fail(exit::USAGE, "--emit-preamble needs --format jsonl");
    }
    let text = match text {
        Some(t) => t,
        None => {
            let mut s = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                return fail(
                    exit::FAILED,
                    &format!("cannot read the prompt from standard input: {e}"),
                );
            }
            s
        }
    };
    if text.trim().is_empty() {
        return fail(
            exit::USAGE,
            "the prompt is empty; pass it as an argument or on standard input",
        );
    }
    let mut sink = Sink {
        format: args.format,
        preamble: args.emit_preamble,
        open: true,
        tty: std::io::stdout().is_terminal(),
        run: None,
        // the tier confined commands will use, chosen by trial now (the same cached trial the bash tool uses)
        sandbox: (args.format == Format::Jsonl).then(|| {
            let v = match loom_sandbox::chosen_tier(None, None) {
                Ok((t, enforced)) => serde_json::json!({ "tier": t.name(), "enforced": enforced }),
                Err(e) => serde_json::json!({ "tier": null, "error": e.to_string() }),
            };
            serde_json::json!({ "sandbox": v }).to_string()
        }),
    };
    if !sink.preamble {
        sink.sandbox_line();
    }
    let outcome = match prompt_blocking(
        &manifest,
        &text,
        BootOptions {
            plan_mode: args.plan,
            ..BootOptions::default()
        },
        &mut sink,
    ) {
        Ok(o) => o,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    if args.format == Format::Text && !outcome.final_text.is_empty() {
        let mut t = outcome.final_text.clone();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        sink.out(&t);
    }
    let (code, error) = exit_of(&outcome);
    match error {
        Some(e) => fail(code, &e),
        None => {
            if code == exit::CANCELLED {
                eprintln!("loom: cancelled");
            }
            code
        }
    }
}

/// The exit code of a turn's outcome, and the error to print with it (`loom prompt`, `loom job run`).
pub fn exit_of(outcome: &TurnOutcome) -> (i32, Option<String>) {
    match outcome.stop {
        TurnStop::Cancelled => (exit::CANCELLED, None),
        TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::Refusal => match &outcome.error {
            None => (exit::OK, None),
            Some(e) => (exit::FAILED, Some(e.clone())),
        },
        TurnStop::Error if outcome.transient => (
            exit::TEMPFAIL,
            Some(
                outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "the provider failed".to_string()),
            ),
        ),
        TurnStop::MaxTurnRequests | TurnStop::Error => (
            exit::FAILED,
            Some(
                outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "the turn failed".to_string()),
            ),
        ),
    }
}
