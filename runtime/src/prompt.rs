//! One-shot prompting for `loom prompt`: boot, run one turn on a tokio runtime of its own, hand every update to the
//! caller as it happens, cancel the turn on Ctrl-C. Keeps tokio out of the CLI.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::agent::TurnOutcome;
use crate::boot::{boot, BootError, BootOptions};
use crate::bus::Capacity;
use crate::update::SessionUpdate;

/// Why a prompt could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// Boot failed.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Boots `manifest`, runs one turn with `text`, and calls `on_update` for every update (losslessly, in order) and
/// `on_note` for boot notes. Ctrl-C (SIGINT) cancels the turn, which then ends with `TurnStop::Cancelled`.
pub fn prompt_blocking(
    manifest: &Path,
    text: &str,
    opts: BootOptions,
    on_note: &mut dyn FnMut(&str),
    on_update: &mut (dyn FnMut(&SessionUpdate) + Send),
) -> Result<TurnOutcome, PromptError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(PromptError::Runtime)?;
    rt.block_on(async {
        let booted = boot(manifest, opts)?;
        for n in &booted.notes {
            on_note(n);
        }
        let agent = booted.agent;
        let updates = agent.subscribe(Capacity::Unbounded);
        let cancel = CancellationToken::new();
        let sigint = cancel.clone();
        let watcher = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                sigint.cancel();
            }
        });
        let turn = agent.prompt(text, cancel);
        tokio::pin!(turn);
        let outcome = loop {
            tokio::select! {
                biased;
                Some(u) = updates.recv() => on_update(&u),
                o = &mut turn => break o,
            }
        };
        let closed = agent.close().await;
        while let Some(u) = updates.recv().await {
            on_update(&u);
        }
        watcher.abort();
        let mut outcome = outcome;
        if let Err(e) = closed {
            outcome.error.get_or_insert_with(|| format!("session: {e}"));
            if outcome.stop == crate::update::TurnStop::EndTurn {
                outcome.stop = crate::update::TurnStop::Error;
            }
        }
        Ok(outcome)
    })
}
