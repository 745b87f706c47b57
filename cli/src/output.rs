//! Writing to stdout and stderr the way a well-behaved CLI does.

use std::io::Write;

/// Writes `text` to stdout. Returns false when stdout is a closed pipe (the caller then exits quietly).
pub fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(_) => false,
    }
}

/// The working directory, or (after saying why on stderr) the exit code to return.
pub fn current_dir() -> Result<std::path::PathBuf, i32> {
    std::env::current_dir().map_err(|e| {
        fail(
            crate::exit::FAILED,
            &format!("cannot read the working directory: {e}"),
        )
    })
}

/// Prints `loom: <message>` to stderr and returns `code`. The message may quote a provider or a tool, so it is made
/// [`loom_runtime::terminal_safe`] first.
pub fn fail(code: i32, message: &str) -> i32 {
    eprintln!("loom: {}", loom_runtime::terminal_safe(message));
    code
}
