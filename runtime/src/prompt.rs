//! One-shot prompting for `loom prompt`: boot, run one turn on a tokio runtime of its own, hand every update to the
//! caller as it happens, cancel the turn on Ctrl-C. Keeps tokio out of the CLI.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::agent::{Preamble, TurnOutcome};
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

/// Where a one-shot prompt reports.
pub trait PromptSink: Send {
    /// A boot note (a layer running reduced, a torn session line skipped).
    fn note(&mut self, note: &str);
    /// Called before the turn when [`PromptSink::wants_preamble`] is true.
    fn preamble(&mut self, _preamble: &Preamble) {}
    /// True to receive the preamble.
    fn wants_preamble(&self) -> bool {
        false
    }
    /// Every update, losslessly and in order.
    fn update(&mut self, update: &SessionUpdate);
}

/// Boots `manifest`, runs one turn with `text`, and reports to `sink`. Ctrl-C (SIGINT), SIGTERM or SIGHUP cancels
/// the turn, which then ends with `TurnStop::Cancelled`; a second signal while it winds down exits the process with
/// status 130.
pub fn prompt_blocking(
    manifest: &Path,
    text: &str,
    opts: BootOptions,
    sink: &mut dyn PromptSink,
) -> Result<TurnOutcome, PromptError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(PromptError::Runtime)?;
    rt.block_on(async {
        let booted = boot(manifest, opts)?;
        for n in &booted.notes {
            sink.note(n);
        }
        let agent = booted.agent;
        if sink.wants_preamble() {
            match agent.preamble(text).await {
                Ok(p) => sink.preamble(&p),
                Err(e) => sink.note(&format!("cannot build the preamble: {e}")),
            }
        }
        let updates = agent.subscribe(Capacity::Unbounded);
        let cancel = CancellationToken::new();
        let on_signal = cancel.clone();
        let watcher = tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                if on_signal.is_cancelled() {
                    // a second signal while the turn winds down: leave now (sandboxed children die with us)
                    std::process::exit(130);
                }
                on_signal.cancel();
            }
        });
        let turn = agent.prompt(text, cancel);
        tokio::pin!(turn);
        let outcome = loop {
            tokio::select! {
                biased;
                Some(u) = updates.recv() => sink.update(&u),
                o = &mut turn => break o,
            }
        };
        let closed = agent.close().await;
        while let Some(u) = updates.recv().await {
            sink.update(&u);
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
