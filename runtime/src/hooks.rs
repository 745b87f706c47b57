//! Running lifecycle hooks: a command (`sh -c`, from the manifest's directory) or an HTTP POST, with the event's
//! JSON as input, a timeout, and bounded output. What a run means is the kernel's ([`interpret_hook`]); this module
//! only runs hooks and hands their runs over.
//!
//! Hooks are the manifest author's own programs, like a shell's rc files: they run with loom's environment and are
//! not sandboxed by loom (SECURITY.md). Commands get their own process group, killed whole on timeout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use loom_kernel::{
    interpret_hook, HookAction, HookEvent, HookExit, HookRun, HookSpec, HookVerdict, Hooks,
};
use loom_sandbox::{exit_code, GroupSlot, KillOnDrop};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Output kept per stream (and per HTTP body); the rest is read and dropped.
pub const HOOK_OUTPUT_LIMIT: usize = 64 * 1024;

/// The hooks of one agent and where they run.
#[derive(Debug, Clone)]
pub struct HookRunner {
    hooks: Hooks,
    /// Where commands run (the manifest's directory).
    dir: PathBuf,
    /// The agent's working directory, as `cwd` in the input.
    cwd: PathBuf,
    /// The session id in the input.
    session_id: String,
    /// Renamed tool instances -> the underlying tool each runs: a matcher naming that tool matches them too.
    underlying: BTreeMap<String, String>,
}

/// One hook's run, interpreted, with what ran (for messages).
#[derive(Debug, Clone)]
pub struct HookOutcome {
    /// What ran: the command or the URL.
    pub what: String,
    /// What it means.
    pub verdict: HookVerdict,
}

impl HookRunner {
    /// A runner for `hooks`; `None` when there are none.
    pub fn new(hooks: Hooks, dir: PathBuf, cwd: PathBuf, session_id: String) -> Option<HookRunner> {
        (!hooks.is_empty()).then_some(HookRunner {
            hooks,
            dir,
            cwd,
            session_id,
            underlying: BTreeMap::new(),
        })
    }

    /// The same runner, told which tool each renamed instance runs (`run` -> `bash`): a matcher written for the
    /// underlying tool matches the instance too, so renaming a tool never slips it past a hook.
    pub fn with_underlying(mut self, underlying: BTreeMap<String, String>) -> HookRunner {
        self.underlying = underlying
            .into_iter()
            .filter(|(instance, tool)| instance != tool)
            .collect();
        self
    }

    /// The names `tool` answers to in matchers: itself, and the tool it runs when renamed.
    fn names<'a>(&'a self, tool: Option<&'a str>) -> Vec<&'a str> {
        let Some(tool) = tool else {
            return Vec::new();
        };
        let mut names = vec![tool];
        names.extend(self.underlying.get(tool).map(String::as_str));
        names
    }

    /// True when some hook runs at `event` (for `tool`, for tool events).
    pub fn has(&self, event: HookEvent, tool: Option<&str>) -> bool {
        !self.hooks.at(event, &self.names(tool)).is_empty()
    }

    /// What runs at `event` (for `tool`), described (`command "..."` / `url ...`), without running anything.
    pub fn describe(&self, event: HookEvent, tool: Option<&str>) -> Vec<String> {
        self.hooks
            .at(event, &self.names(tool))
            .into_iter()
            .map(describe)
            .collect()
    }

    /// Runs every hook of `event` (for `tool`), one after another in declaration order, with `fields` as the
    /// event's fields; returns each one's outcome. A gate stops at the first hook that blocks.
    pub async fn run(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        fields: Map<String, Value>,
    ) -> Vec<HookOutcome> {
        let hooks = self.hooks.at(event, &self.names(tool));
        if hooks.is_empty() {
            return Vec::new();
        }
        let mut input = json!({
            "hook_event_name": event.name(),
            "session_id": self.session_id,
            "cwd": self.cwd.display().to_string(),
            "data": Value::Object(fields.clone()),
        });
        if let Some(obj) = input.as_object_mut() {
            for (k, v) in fields {
                obj.entry(k).or_insert(v);
            }
        }
        let body = input.to_string();
        let mut out = Vec::new();
        for hook in hooks {
            let run = self.run_one(hook, &body).await;
            let verdict = interpret_hook(event, &run);
            let blocked = verdict.decision == Some(loom_kernel::Verdict::Deny);
            out.push(HookOutcome {
                what: describe(hook),
                verdict,
            });
            if blocked {
                break;
            }
        }
        out
    }

    async fn run_one(&self, hook: &HookSpec, body: &str) -> HookRun {
        let timeout = Duration::from_secs(hook.timeout_secs);
        match &hook.action {
            HookAction::Command(command) => run_command(command, &self.dir, body, timeout).await,
            HookAction::Url(url) => run_http(url, body, timeout).await,
        }
    }
}

fn describe(hook: &HookSpec) -> String {
    hook.action.to_string()
}

async fn run_command(
    command: &str,
    dir: &std::path::Path,
    body: &str,
    timeout: Duration,
) -> HookRun {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return HookRun {
                exit: HookExit::Failed(format!("cannot start /bin/sh in {}: {e}", dir.display())),
                stdout: String::new(),
                stderr: String::new(),
            }
        }
    };
    // the hook's whole group dies when this run ends, however it ends (finished, timed out, or this future dropped)
    let group = Arc::new(GroupSlot::new());
    group.started(child.id().unwrap_or(0));
    let _kill_on_drop = KillOnDrop(group);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let input = body.as_bytes().to_vec();
    let work = async {
        let feed = async move {
            if let Some(mut s) = stdin {
                // a hook that does not read its input is fine: a closed pipe is not an error here
                let _ = s.write_all(&input).await;
            }
        };
        let (_, out, err, status) =
            tokio::join!(feed, bounded(stdout), bounded(stderr), child.wait());
        (out, err, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            let exit = match status {
                Ok(s) => HookExit::Code(exit_code(s)),
                Err(e) => HookExit::Failed(format!("waiting for it failed: {e}")),
            };
            HookRun {
                exit,
                stdout,
                stderr,
            }
        }
        Err(_) => no_output(HookExit::TimedOut),
    }
}

/// A run that printed nothing (it could not start, or was killed).
fn no_output(exit: HookExit) -> HookRun {
    HookRun {
        exit,
        stdout: String::new(),
        stderr: String::new(),
    }
}

/// Reads a stream to its end, keeping at most [`HOOK_OUTPUT_LIMIT`] bytes.
async fn bounded(stream: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut s) = stream else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = HOOK_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

async fn run_http(url: &str, body: &str, timeout: Duration) -> HookRun {
    let failed = |why: String| no_output(HookExit::Failed(why));
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot build the HTTP client: {e}")),
    };
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    let mut response = match sent {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return no_output(HookExit::TimedOut),
        Err(e) => return failed(format!("POST {url}: {e}")),
    };
    let status = response.status();
    let mut kept = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = HOOK_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if room == 0 {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) if e.is_timeout() => return no_output(HookExit::TimedOut),
            Err(e) => return failed(format!("reading the answer of {url}: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&kept).into_owned();
    if status.is_success() {
        HookRun {
            exit: HookExit::Code(0),
            stdout: text,
            stderr: String::new(),
        }
    } else {
        // a redirect is not followed: it is a failure like any other non-2xx answer
        HookRun {
            exit: HookExit::Code(1),
            stdout: String::new(),
            stderr: format!(
                "HTTP {status}: {}",
                text.chars().take(400).collect::<String>()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_kernel::Verdict;

    fn runner(toml_text: &str, dir: &std::path::Path) -> HookRunner {
        let m = loom_kernel::parse_manifest(
            &format!("[agent]\nname = \"h\"\n{toml_text}"),
            "agent.toml",
            &Default::default(),
        )
        .unwrap();
        HookRunner::new(m.hooks, dir.to_path_buf(), dir.to_path_buf(), "s-1".into()).unwrap()
    }

    fn fields(pairs: Value) -> Map<String, Value> {
        pairs.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn a_command_hook_gets_the_event_and_its_answer_is_read() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("check.sh"),
            "#!/bin/sh\ncat > input.json\necho '{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"use cargo\"}}'\n",
        )
        .unwrap();
        let r = runner(
            "[[hooks.PreToolUse]]\nmatcher = \"bash\"\ncommand = \"sh ./check.sh\"\n",
            d.path(),
        );
        let out = r
            .run(
                HookEvent::PreToolUse,
                Some("bash"),
                fields(json!({"tool_name": "bash", "tool_input": {"command": "make"}})),
            )
            .await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].verdict.decision, Some(Verdict::Deny));
        assert_eq!(out[0].verdict.reason.as_deref(), Some("use cargo"));
        let input: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("input.json")).unwrap())
                .unwrap();
        assert_eq!(input["hook_event_name"], "PreToolUse");
        assert_eq!(input["session_id"], "s-1");
        assert_eq!(input["tool_name"], "bash");
        assert_eq!(input["tool_input"]["command"], "make");
        assert_eq!(input["data"]["tool_name"], "bash");
        // another tool does not match
        assert!(r
            .run(HookEvent::PreToolUse, Some("read_file"), Map::new())
            .await
            .is_empty());
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_and_blocks_a_gate() {
        let d = tempfile::tempdir().unwrap();
        let r = runner(
            "[[hooks.PreToolUse]]\ncommand = \"(sleep 30; touch late) & sleep 30\"\ntimeout_secs = 1\n",
            d.path(),
        );
        let out = r.run(HookEvent::PreToolUse, Some("bash"), Map::new()).await;
        assert_eq!(out[0].verdict.decision, Some(Verdict::Deny));
        assert!(
            out[0]
                .verdict
                .reason
                .as_deref()
                .unwrap()
                .contains("timed out"),
            "{out:?}"
        );
        // the whole group was killed: nothing it started is left to act later
        std::thread::sleep(Duration::from_millis(200));
        let ps = std::process::Command::new("pgrep")
            .args(["-f", "touch late"])
            .output()
            .unwrap();
        assert!(
            ps.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&ps.stdout)
        );
    }

    #[tokio::test]
    async fn output_is_bounded_and_exit_two_blocks_with_stderr() {
        let d = tempfile::tempdir().unwrap();
        let r = runner(
            "[[hooks.UserPromptSubmit]]\ncommand = \"head -c 1000000 /dev/zero | tr '\\\\0' x; echo no >&2; exit 2\"\n",
            d.path(),
        );
        let out = r.run(HookEvent::UserPromptSubmit, None, Map::new()).await;
        assert_eq!(out[0].verdict.decision, Some(Verdict::Deny));
        assert_eq!(out[0].verdict.reason.as_deref(), Some("no"));
    }

    #[tokio::test]
    async fn http_hooks_post_the_event_and_never_follow_redirects() {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut bodies = Vec::new();
            let json = r#"{"hookSpecificOutput":{"additionalContext":"from http"}}"#;
            let ok = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{json}",
                json.len()
            );
            let moved =
                "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/\r\ncontent-length: 0\r\n\r\n"
                    .to_string();
            for answer in [ok, moved] {
                let (sock, _) = listener.accept().await.unwrap();
                let mut r = BufReader::new(sock);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).await.unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                r.read_exact(&mut body).await.unwrap();
                bodies.push(String::from_utf8(body).unwrap());
                let mut sock = r.into_inner();
                sock.write_all(answer.as_bytes()).await.unwrap();
            }
            bodies
        });
        let d = tempfile::tempdir().unwrap();
        let url = format!("http://127.0.0.1:{port}/hook");
        let r = runner(
            &format!(
                "[[hooks.PostToolUse]]\nurl = \"{url}\"\n[[hooks.PreToolUse]]\nurl = \"{url}\"\n"
            ),
            d.path(),
        );
        let post = r
            .run(HookEvent::PostToolUse, Some("bash"), Map::new())
            .await;
        assert_eq!(post[0].verdict.problem, None, "{post:?}");
        assert_eq!(post[0].verdict.context.as_deref(), Some("from http"));
        let pre = r.run(HookEvent::PreToolUse, Some("bash"), Map::new()).await;
        assert_eq!(
            pre[0].verdict.decision,
            Some(Verdict::Deny),
            "a redirect is a failure, and gates fail closed"
        );
        let bodies = server.await.unwrap();
        let first: Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(first["hook_event_name"], "PostToolUse");
    }
}
