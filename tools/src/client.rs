//! What an editor-side client does for the built-in tools once the kernel has allowed a call: ACP's
//! `fs/read_text_file` and `fs/write_text_file`, so the model reads the editor's buffers (unsaved changes included)
//! and its edits land in the editor. The client is asked only about the canonical path the kernel allowed, after
//! rules, hooks and plan mode; a refused call never reaches it. Without a client (`loom run`, `loom prompt`), or
//! when it does not advertise a capability, the tool does that I/O itself.

use std::path::Path;

use futures::future::BoxFuture;

/// A client's file system (ACP `clientCapabilities.fs`).
pub trait ClientFs: Send + Sync {
    /// True when the client advertised `fs.readTextFile`.
    fn can_read(&self) -> bool;
    /// True when the client advertised `fs.writeTextFile`.
    fn can_write(&self) -> bool;
    /// The text of `path` as the client has it (an open buffer wins over the disk). `Err`: why not, for the model.
    fn read_text_file(&self, path: &Path) -> BoxFuture<'static, Result<String, String>>;
    /// Replaces the text of `path` in the client (creating the file when it is missing). `Err`: why not.
    fn write_text_file(
        &self,
        path: &Path,
        content: String,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// A client's terminals (ACP `clientCapabilities.terminal`): `terminal/create`, `terminal/output`,
/// `terminal/wait_for_exit`, `terminal/kill`, `terminal/release`. The client runs exactly the command it is given,
/// so bash hands it only what [`loom_kernel::terminal_plan`] allows: `loom sandbox run` with the chosen row, or the
/// command itself under the grant `"*"`.
pub trait ClientTerminals: Send + Sync {
    /// Sends `terminal/<method>` with `params` (the session id is added) and returns the client's result; `Err`:
    /// why there is none, for the model.
    fn terminal(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> BoxFuture<'static, Result<serde_json::Value, String>>;

    /// The `loom` binary the terminal runs `loom sandbox run` with.
    fn loom_exe(&self) -> Result<std::path::PathBuf, String>;
}

/// The client of a call, when it reads files.
pub(crate) fn reader(ctx: &super::ToolCtx) -> Option<&dyn ClientFs> {
    ctx.client_fs.as_deref().filter(|c| c.can_read())
}

/// The client of a call, when it writes files.
pub(crate) fn writer(ctx: &super::ToolCtx) -> Option<&dyn ClientFs> {
    ctx.client_fs.as_deref().filter(|c| c.can_write())
}

/// Reads `path` through the client when it reads files, else with `local` on the blocking pool — until the call is
/// cancelled (see [`super::beneath::run_blocking`]).
pub(crate) async fn read_text(
    ctx: &super::ToolCtx,
    path: &Path,
    local: impl FnOnce() -> Result<String, String> + Send + 'static,
) -> Result<String, String> {
    match reader(ctx) {
        Some(c) => c
            .read_text_file(path)
            .await
            .map_err(|e| format!("the client could not read it: {e}")),
        None => super::beneath::run_blocking(&ctx.cancel, None, local).await,
    }
}
