//! # loom-acp: `loom acp serve`, the Agent Client Protocol (v1) over stdio — JSON-RPC 2.0, one message per line.
//!
//! Methods: `initialize` (capabilities from the manifest's harness), `session/new` (the session's working
//! directory comes from the client and is passed to boot; the process's own cwd never changes), `session/prompt`
//! (one turn of the runtime's loop; every update except lifecycle frames and the echoed prompt streams as a
//! `session/update` notification; the reply carries the ACP `stopReason`), and the `session/cancel` notification.
//! `session/load` resumes the one session a `file` session log holds (its ACP id is `file:<log path>`), replaying
//! the stored history as `session/update` notifications before answering.
//! When the client advertises `fs`, the file tools' I/O goes through `fs/read_text_file` / `fs/write_text_file`
//! (see [`loom_tools::ClientFs`]) once the kernel has allowed the call.
//! When it advertises `terminal`, bash runs in a client terminal in the confined form the kernel decides
//! ([`loom_kernel::terminal_plan`]: `loom sandbox run` with the chosen row), or in loom when that form cannot carry
//! the call.
//! The model is the session's one config option (`configOptions`, `session/set_config_option`), offering only the
//! manifest's model.
//! Each session is its own [`loom_runtime::Agent`]. A `[permissions]` ask or the doom-loop guard becomes a
//! `session/request_permission` request to the client (allow once / reject once); the kernel has decided the call
//! first, and a kernel denial is never asked about, so the client can narrow what runs but never widen it.
//!
//! Bad input never stops the server: a line that is not JSON gets `-32700`, an unknown method `-32601`, an unknown
//! `sessionId` `-32602` naming it. When the client closes stdin, running turns are cancelled, every session is
//! closed (file sessions flushed) and [`serve`] returns. Nothing but protocol messages is written to the output.
//!
//! ## What this crate must never do
//! Decide authority or widen it: every tool call is decided by the kernel inside the runtime's turn loop, and a
//! client's answer to a permission request can only narrow what runs. Write anything but protocol messages to
//! stdout, or let bad input stop the server. Hold an agent itself: it drives `loom-runtime`'s [`loom_runtime::Agent`]
//! through the SDK surface, one per session.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod server;
mod wire;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

pub use server::serve;
pub use wire::ACP_PROTOCOL_VERSION;

/// The ACP wire parsers, for the cargo-fuzz targets in `fuzz/` only: not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::wire::prompt_text as acp_prompt_text;
    pub use loom_jsonrpc::{classify_line as acp_classify, Incoming};
}

use loom_runtime::{load_manifest, BootOptions, LoadError};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The manifest could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The async runtime could not start, or stdin / stdout could not be opened for it.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Loads `manifest` and serves ACP on the process's stdin and stdout until stdin closes. Notes (boot notes,
/// ignored notifications) go to `notes`, never to stdout.
pub fn serve_stdio(
    manifest: &Path,
    opts: BootOptions,
    notes: Arc<dyn Fn(&str) + Send + Sync>,
) -> Result<(), AcpError> {
    let loaded = Arc::new(load_manifest(manifest)?);
    // tokio reads and writes these on its blocking pool (the crate's tokio has no io-std feature)
    let dup = |fd: std::os::fd::BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map(|fd| tokio::fs::File::from_std(std::fs::File::from(fd)))
            .map_err(AcpError::Runtime)
    };
    use std::os::fd::AsFd;
    let stdin = dup(std::io::stdin().as_fd())?;
    let stdout = dup(std::io::stdout().as_fd())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(AcpError::Runtime)?;
    rt.block_on(serve(
        loaded,
        opts,
        tokio::io::BufReader::new(stdin),
        stdout,
        notes,
    ));
    // every session is closed; a blocked stdin reader thread must not hold the exit
    rt.shutdown_background();
    Ok(())
}
