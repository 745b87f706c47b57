//! One confined program run whose output a tool reads whole (the git inspection tools): the plan runs through
//! `loom_broker::run_bash` — the path `bash` and `loom sandbox run` take — on the blocking pool, its stdout and stderr
//! captured separately up to a bound, the process tree killed on cancel, on timeout, or when the call's future is
//! dropped.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use loom_broker::{run_bash, BashPlan, BashRun, BrokerLimits};
use loom_sandbox::{GroupSlot, KillOnDrop, Limits, Stream, Streams};
use tokio_util::sync::CancellationToken;

use super::{SandboxEnv, ToolEnv, ToolOutput};

/// What a stream kept: its first bytes, its last bytes, the lines a [`Keep::hits`] picked, and its length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Head {
    /// At most [`Keep::head`] bytes, from the start.
    pub bytes: Vec<u8>,
    /// At most [`Keep::tail`] bytes, from the end (past the head only).
    pub tail: Vec<u8>,
    /// Lines [`Keep::hits`] picked, in order, at most [`MAX_HITS`] (each cut to 400 bytes).
    pub hits: Vec<String>,
    /// Everything the stream wrote.
    pub total: u64,
}

/// The most lines a stream's [`Keep::hits`] keeps.
pub(crate) const MAX_HITS: usize = 80;

impl Head {
    /// The bytes as text (invalid UTF-8 replaced), with a note when they were cut.
    pub fn text(&self, what: &str) -> String {
        let mut s = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.total > self.bytes.len() as u64 {
            s.push_str(&format!(
                "\n[{what} cut: showing the first {} of {} bytes]",
                self.bytes.len(),
                self.total
            ));
        }
        s
    }
}

/// What to keep of a stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    /// Bytes from the start.
    pub head: usize,
    /// Bytes from the end.
    pub tail: usize,
    /// Picks lines worth keeping wherever they are (failures in a test run).
    pub hits: Option<fn(&str) -> bool>,
}

impl Keep {
    /// The first `n` bytes only.
    pub fn head(n: usize) -> Keep {
        Keep {
            head: n,
            tail: 0,
            hits: None,
        }
    }
}

/// How a confined run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The exit status (a signal's is 128 + its number).
    pub code: i32,
    /// The timeout fired and the tree was killed.
    pub timed_out: bool,
    /// The call was cancelled and the tree was killed.
    pub cancelled: bool,
    /// Standard output.
    pub stdout: Head,
    /// Standard error.
    pub stderr: Head,
    /// What the command created at protected paths, moved aside once it ended.
    pub swept: Vec<loom_sandbox::Swept>,
}

impl Captured {
    /// `out` with the sweep's note added when it found anything (the call then fails: what the command did was
    /// partly undone).
    pub fn noted(&self, mut out: ToolOutput) -> ToolOutput {
        if let Some(note) = loom_sandbox::swept_note(&self.swept) {
            if !out.text.ends_with('\n') {
                out.text.push('\n');
            }
            out.text.push_str(&note);
            out.is_error = true;
        }
        out
    }
}

/// What a confined run needs besides its plan.
pub(crate) struct Confined<'a> {
    /// The tool and its grant (its instance name is used in messages and by the broker).
    pub env: &'a ToolEnv,
    /// The sandbox machinery, secrets and authority files.
    pub sandbox: &'a SandboxEnv,
    /// The working directory (canonical).
    pub cwd: &'a Path,
    /// The time limit.
    pub timeout: Duration,
    /// What is kept of stdout (and of stderr, when it is `combined` into stdout).
    pub keep: Keep,
    /// Stderr goes to the same pipe as stdout, interleaved as written ([`Captured::stderr`] stays empty); otherwise
    /// the first 64 KiB of it are kept apart.
    pub combined: bool,
    /// A directory loom made for the command to fill, whose new entries are kept (see `loom_broker::BashRun`).
    pub fills: Option<&'a Path>,
}

const STDERR_CAP: usize = 64 * 1024;

/// Runs `plan` (decided by the kernel) and captures its output; `Err` when nothing ran or the sandbox refused.
pub(crate) async fn run_confined(
    plan: BashPlan,
    run: Confined<'_>,
    cancel: &CancellationToken,
) -> Result<Captured, String> {
    let (out_r, out_w) = std::io::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let (err_r, err_w) = if run.combined {
        (
            None,
            out_w
                .try_clone()
                .map_err(|e| format!("cannot create a pipe: {e}"))?,
        )
    } else {
        let (r, w) = std::io::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
        (Some(r), w)
    };
    let out_job = std::thread::spawn({
        let keep = run.keep;
        move || drain(out_r, keep)
    });
    let err_job = err_r.map(|r| std::thread::spawn(move || drain(r, Keep::head(STDERR_CAP))));
    let slot = Arc::new(GroupSlot::new());
    let _kill_on_drop = KillOnDrop(slot.clone());
    let job = {
        let slot = slot.clone();
        let (env, sandbox, cwd, timeout, fills) = (
            run.env.clone(),
            run.sandbox.clone(),
            run.cwd.to_path_buf(),
            run.timeout,
            run.fills.map(Path::to_path_buf),
        );
        tokio::task::spawn_blocking(move || {
            let bash_run = BashRun {
                tool: &env.instance,
                grant: &env.grant,
                ctx: &env.ctx,
                cwd: &cwd,
                home: None,
                limits: Limits {
                    timeout: Some(timeout),
                    accept: sandbox.accept.clone(),
                    ..Limits::default()
                },
                tier: None,
                inner_exe: sandbox.inner_exe.clone(),
                shim: sandbox.shim.clone(),
                broker: BrokerLimits::default(),
                secrets: &sandbox.secrets,
                authority: &sandbox.authority,
                fills: fills.as_deref(),
                sweep_records: sandbox.sweep_records.as_deref(),
            };
            let streams = Streams {
                stdin: Stream::Null,
                stdout: Stream::from(out_w),
                stderr: Stream::from(err_w),
            };
            let outcome = run_bash(plan, bash_run, streams, &mut |p| slot.started(p));
            slot.finish();
            outcome.map_err(|e| e.to_string())
        })
    };
    tokio::pin!(job);
    let deadline = tokio::time::sleep(run.timeout);
    tokio::pin!(deadline);
    let (mut killed, mut timed_out, mut cancelled) = (false, false, false);
    let result = loop {
        tokio::select! {
            r = &mut job => break r,
            _ = cancel.cancelled(), if !killed => {
                (cancelled, killed) = (true, true);
                slot.kill();
            }
            _ = &mut deadline, if !killed => {
                (timed_out, killed) = (true, true);
                slot.kill();
            }
        }
    };
    let outcome = result.map_err(|e| format!("the command runner failed: {e}"))??;
    // the leader is gone; whatever it left holding the pipes dies with its group (a finished slot kills nothing, so
    // wait for the readers only as long as the pipes stay open, which they no longer can once the group is gone)
    let stdout = join_reader(out_job).await;
    let stderr = match err_job {
        Some(j) => join_reader(j).await,
        None => Head::default(),
    };
    Ok(Captured {
        code: outcome.code,
        timed_out: timed_out || outcome.timed_out,
        cancelled,
        stdout,
        stderr,
        swept: outcome.swept,
    })
}

/// Reads `r` to its end, keeping what `keep` says and counting the rest.
fn drain(mut r: std::io::PipeReader, keep: Keep) -> Head {
    let mut head = Head::default();
    let mut chunk = vec![0u8; 16 * 1024];
    // the line being read, for `keep.hits` (cut at 400 bytes; the rest of a long line is skipped)
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let got = &chunk[..n];
        head.total += n as u64;
        let room = keep.head.saturating_sub(head.bytes.len()).min(n);
        head.bytes.extend_from_slice(&got[..room]);
        if keep.tail > 0 {
            head.tail.extend_from_slice(&got[room..]);
            if head.tail.len() > 2 * keep.tail {
                let cut = head.tail.len() - keep.tail;
                head.tail.drain(..cut);
            }
        }
        if let Some(pick) = keep.hits {
            for &b in got {
                if b == b'\n' {
                    take_hit(&mut head.hits, &line, pick);
                    line.clear();
                } else if line.len() < 400 {
                    line.push(b);
                }
            }
        }
    }
    if let Some(pick) = keep.hits {
        take_hit(&mut head.hits, &line, pick);
    }
    if head.tail.len() > keep.tail {
        let cut = head.tail.len() - keep.tail;
        head.tail.drain(..cut);
    }
    head
}

fn take_hit(hits: &mut Vec<String>, line: &[u8], pick: fn(&str) -> bool) {
    if hits.len() >= MAX_HITS || line.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    if pick(text) && hits.last().map(String::as_str) != Some(text) {
        hits.push(text.to_string());
    }
}

/// The reader's result, waiting at most a moment past the command's end (a descendant that escaped the group and
/// holds the pipe is left behind with its bytes).
async fn join_reader(job: std::thread::JoinHandle<Head>) -> Head {
    let waited = tokio::task::spawn_blocking(move || job.join().unwrap_or_default());
    match tokio::time::timeout(Duration::from_secs(2), waited).await {
        Ok(Ok(h)) => h,
        _ => Head::default(),
    }
}
