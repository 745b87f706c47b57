//! Test helpers for the guards' tests: finding the host processes a test marked, waiting (bounded) for a condition.

use std::time::{Duration, Instant};

/// Live (not zombie) host processes whose command line contains `mark`.
pub(crate) fn processes_with(mark: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let live = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.starts_with(" Z"))
        });
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if live && String::from_utf8_lossy(&cmd).contains(mark) {
                out.push(pid);
            }
        }
    }
    out
}

/// SIGKILL to what is left of a test's marked processes (a failed test's clean-up); returns their pids.
pub(crate) fn kill_marked(mark: &str) -> Vec<i32> {
    let left = processes_with(mark);
    for pid in &left {
        // SAFETY: a signal to a process the test started (its command line carries the test's mark).
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    left
}

/// Polls `f` until it holds or ten seconds have passed; its last answer.
pub(crate) fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
