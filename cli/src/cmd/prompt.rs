//! `loom prompt <agent.toml> [text] [--format text|jsonl]`: boot the agent, run one turn, print the result.
//!
//! `text` (the default) prints only the final agent message, pipe-friendly; `jsonl` prints every update (ACP
//! `SessionUpdate`s and lifecycle frames) as one JSON object per line, as it happens. The prompt is the `text`
//! argument, or standard input when it is absent. Exit codes: 0 when the turn ended normally, 130 when it was
//! cancelled (Ctrl-C), 1 otherwise (boot failed, the provider failed, `maxTurnRequests` was reached).

use std::io::Read;
use std::path::PathBuf;

use loom_runtime::{prompt_blocking, BootOptions, SessionUpdate, TurnStop};

use crate::exit;
use crate::output::{emit, fail};

/// How `loom prompt` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The final agent message only.
    Text,
    /// One update per line, as JSON.
    Jsonl,
}

/// Arguments of `loom prompt`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest.
    manifest: PathBuf,
    /// The prompt (default: read standard input).
    text: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Runs `loom prompt`.
pub fn run(args: Args) -> i32 {
    let text = match args.text {
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
    let jsonl = args.format == Format::Jsonl;
    let mut pipe_open = true;
    let mut on_update = |u: &SessionUpdate| {
        if jsonl && pipe_open {
            if let Ok(line) = serde_json::to_string(u) {
                pipe_open = emit(&format!("{line}\n"));
            }
        }
    };
    let mut on_note = |n: &str| eprintln!("loom: note: {n}");
    let outcome = match prompt_blocking(
        &args.manifest,
        &text,
        BootOptions::default(),
        &mut on_note,
        &mut on_update,
    ) {
        Ok(o) => o,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    if !jsonl && !outcome.final_text.is_empty() {
        let mut t = outcome.final_text.clone();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        emit(&t);
    }
    match outcome.stop {
        TurnStop::Cancelled => {
            eprintln!("loom: cancelled");
            exit::CANCELLED
        }
        TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::Refusal => match outcome.error {
            None => exit::OK,
            Some(e) => fail(exit::FAILED, &e),
        },
        TurnStop::MaxTurnRequests | TurnStop::Error => fail(
            exit::FAILED,
            &outcome
                .error
                .unwrap_or_else(|| "the turn failed".to_string()),
        ),
    }
}
