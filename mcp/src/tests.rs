//! The client against tests/mcp-peers/fake.mjs: a server that never answers, crashes mid-call, sends a malformed
//! schema or a 10 MB result, changes its tool list, or (over HTTP) forgets its session.

use std::time::{Duration, Instant};

use serde_json::json;

use super::stdio::StdioSpawn;
use super::*;

use crate::testing::{fake, fake_stdio as stdio};

fn ok(_: &UpstreamTool) -> Result<(), String> {
    Ok(())
}

#[test]
fn a_server_that_never_answers_initialize_fails_start_naming_the_handle_and_the_fix() {
    let Some(mut cfg) = stdio("hang-start", &[], 1000) else {
        return;
    };
    cfg.startup_timeout = Duration::from_millis(300);
    let err = McpServer::start("slow", cfg).unwrap_err();
    assert!(matches!(err, StartError::TimedOut(_)), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("[providers].slow"), "{err}");
    assert!(err.contains("did not answer initialize"), "{err}");
    assert!(err.contains("startup_timeout_ms"), "{err}");
}

#[test]
fn a_call_that_never_returns_times_out_and_the_hung_server_is_restarted() {
    let Some(cfg) = stdio("hang-call", &[], 300) else {
        return;
    };
    let s = McpServer::start("hang", cfg).unwrap();
    let err = s.call("a", json!({}), &ok).unwrap_err();
    assert!(matches!(err, CallError::TimedOut(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("[providers].hang") && err.contains("did not answer tools/call"),
        "{err}"
    );
    assert!(err.contains("call_timeout_ms"), "{err}");
    assert!(
        err.contains("loom stopped the hung MCP server; loom restarts it on the next call"),
        "{err}"
    );
    // the next call restarts it (its listing is fresh) and times out the same way
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(err.contains("did not answer tools/call"), "{err}");
    assert_eq!(s.tools().len(), 2);
}

#[test]
fn a_cancelled_call_stops_waiting_and_frees_the_server() {
    let Some(cfg) = stdio("hang-call", &[], 600_000) else {
        return;
    };
    let s = McpServer::start("hang", cfg).unwrap();
    // the turn is cancelled while the call waits (after a few polls), long before its 10-minute timeout
    let polls = std::sync::atomic::AtomicUsize::new(0);
    let stop = || polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 3;
    let err = s.call_until("a", json!({}), &ok, &stop).unwrap_err();
    assert!(matches!(err, CallError::Cancelled(_)), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("tools/call was cancelled"), "{err}");
    assert!(
        polls.load(std::sync::atomic::Ordering::SeqCst) > 3,
        "it was waiting when cancelled"
    );
    // the server is still usable: its tools can be listed and another cancelled call returns too
    assert_eq!(s.tools().len(), 2);
    assert!(s.call_until("b", json!({}), &ok, &|| true).is_err());
}

#[test]
fn a_crash_mid_call_is_reported_with_stderr_and_the_server_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("crashed");
    let Some(cfg) = stdio("crash", &[&marker.display().to_string()], 10_000) else {
        return;
    };
    let s = McpServer::start("crashy", cfg).unwrap();
    let err = s.call("a", json!({ "text": "hi" }), &ok).unwrap_err();
    assert!(matches!(err, CallError::Unavailable(_)), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("[providers].crashy"), "{err}");
    assert!(
        err.contains("simulated crash"),
        "the server's stderr is surfaced: {err}"
    );
    assert!(err.contains("loom restarts it on the next call"), "{err}");
    let r = s.call("a", json!({ "text": "hi" }), &ok).unwrap();
    assert_eq!(r.text, "after restart: {\"text\":\"hi\"}");
}

/// A server whose every process crashes on its first call (its marker cannot be written), its restart guard reading
/// `clock`.
fn always_crashing(clock: fn() -> Instant) -> Option<Arc<McpServer>> {
    let cfg = stdio("crash", &["/nonexistent-dir/marker"], 10_000)?;
    let s = McpServer::start("crashy", cfg).unwrap();
    s.inner.lock().unwrap().restarts.clock = clock;
    Some(s)
}

#[test]
fn a_crash_loop_is_not_restarted() {
    // every death at the same instant: the third one makes a crash loop
    fn frozen() -> Instant {
        static T: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *T.get_or_init(Instant::now)
    }
    let Some(s) = always_crashing(frozen) else {
        return;
    };
    for _ in 1..restart::CRASH_LOOP_DEATHS {
        let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
        assert!(err.contains("loom restarts it on the next call"), "{err}");
    }
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("exit status")
            && err.contains("the server's stderr ends with")
            && err.contains("it died 3 times within 60 s, so loom will not restart it again"),
        "{err}"
    );
    // refused without a restart, naming the last death (with its stderr) and the fix
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].crashy")
            && err.contains("died 3 times within 60 s (last: ")
            && err.contains("the server's stderr ends with")
            && err.contains("fix it, then restart loom"),
        "{err}"
    );
}

#[test]
fn deaths_spread_out_are_restarted_every_time() {
    // each reading of the clock is a window and a second later than the last: no two deaths share a window
    fn stepping() -> Instant {
        static T: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        static STEP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STEP.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        *T.get_or_init(Instant::now) + (restart::CRASH_LOOP_WINDOW + Duration::from_secs(1)) * n
    }
    let Some(s) = always_crashing(stepping) else {
        return;
    };
    for _ in 0..restart::CRASH_LOOP_DEATHS + 2 {
        let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
        // a restarted process died in the call (its stderr is quoted), not a refusal
        assert!(
            err.contains("calling `a` failed")
                && err.contains("the server's stderr ends with")
                && err.contains("loom restarts it on the next call"),
            "{err}"
        );
    }
}

#[test]
fn a_ten_megabyte_result_is_refused_without_buffering_it() {
    let Some(cfg) = stdio("big", &[], 30_000) else {
        return;
    };
    let s = McpServer::start("huge", cfg).unwrap();
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(err.contains("over loom's limit"), "{err}");
    assert!(err.contains("[providers].huge"), "{err}");
    // the connection survives: the next message is read normally
    assert!(s.call("a", json!({}), &ok).is_err());
}

#[test]
fn tools_list_follows_next_cursor() {
    let Some(cfg) = stdio("paged", &[], 10_000) else {
        return;
    };
    let s = McpServer::start("paged", cfg).unwrap();
    let names: Vec<String> = s.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn a_tool_that_disappears_after_list_changed_is_refused() {
    let Some(cfg) = stdio("changing", &[], 10_000) else {
        return;
    };
    let s = McpServer::start("moving", cfg).unwrap();
    assert_eq!(s.tools().len(), 2);
    assert_eq!(s.call("a", json!({}), &ok).unwrap().text, "called a");
    let err = s.call("b", json!({}), &ok).unwrap_err().to_string();
    assert!(err.contains("no longer offers the tool `b`"), "{err}");
    assert_eq!(s.tools().len(), 1);
    let err = s
        .call("a", json!({}), &|_| {
            Err("the grant no longer fits".to_string())
        })
        .unwrap_err()
        .to_string();
    assert_eq!(err, "the grant no longer fits");
}

/// A fake HTTP server, stopped on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts fake.mjs in an HTTP mode; its port.
fn http_fake(mode: &str) -> Option<(Running, String)> {
    let script = fake()?;
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let child = Running(
        std::process::Command::new("node")
            .arg(&script)
            .arg(mode)
            .arg(&port_file)
            .spawn()
            .unwrap(),
    );
    loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            if !p.is_empty() {
                return Some((child, p));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn http_config(port: &str, path: &str) -> ServerConfig {
    ServerConfig {
        launch: Launch::Http(super::http::HttpSpec {
            url: reqwest::Url::parse(&format!("http://127.0.0.1:{port}{path}")).unwrap(),
            headers: vec![],
        }),
        startup_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(10),
    }
}

#[test]
fn the_servers_get_stream_delivers_list_changed() {
    let Some((_server, port)) = http_fake("http-notify") else {
        return;
    };
    let s = McpServer::start("web", http_config(&port, "/mcp")).unwrap();
    // the notification arrives on the GET stream on its own schedule: call `b` until the client has seen it
    let mut refused = None;
    for _ in 0..500 {
        match s.call("b", json!({}), &ok) {
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let Some(CallError::ToolGone(err)) = refused else {
        panic!("expected the tool to be gone: {refused:?}");
    };
    assert!(err.contains("no longer offers the tool `b`"), "{err}");
    assert_eq!(s.call("a", json!({}), &ok).unwrap().text, "a got {}");
    drop(s);
}

#[test]
fn an_expired_http_session_is_re_initialised() {
    let Some((_server, port)) = http_fake("http-404") else {
        return;
    };
    let cfg = |path: &str| http_config(&port, path);
    let err = McpServer::start("moved", cfg("/redirect"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("307") && err.contains("does not follow redirects"),
        "{err}"
    );
    let s = McpServer::start("web", cfg("/mcp")).unwrap();
    let first = s.call("a", json!({ "text": "x" }), &ok).unwrap();
    assert_eq!(first.text, "a got {\"text\":\"x\"} in session s1");
    // the server forgot s1: the client gets a 404, initialises s2 and sends the call again
    let second = s.call("a", json!({ "text": "y" }), &ok).unwrap();
    assert_eq!(second.text, "a got {\"text\":\"y\"} in session s2");
    drop(s);
}

#[test]
fn dropping_a_server_kills_its_whole_process_group() {
    let Some(script) = fake() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // sh stays the direct child, node is its child: what `npx -y pkg` looks like
    let cfg = ServerConfig {
        launch: Launch::Stdio(StdioSpawn {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                format!("node {} hang-call; exit 0", script.display()),
            ],
            env: vec![
                (
                    "PATH".to_string(),
                    std::env::var("PATH").unwrap_or_default(),
                ),
                ("FAKE_PIDFILE".to_string(), pidfile.display().to_string()),
            ],
            cwd: std::env::temp_dir(),
        }),
        startup_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(30),
    };
    let s = McpServer::start("grand", cfg).unwrap();
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|st| {
                !st.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    };
    assert!(alive(), "the grandchild runs while the server is up");
    drop(s);
    // SIGKILL is delivered before killpg returns; the grandchild is gone or a zombie once it is scheduled
    let mut polls = 0;
    while alive() && polls < 1000 {
        std::thread::sleep(Duration::from_millis(10));
        polls += 1;
    }
    assert!(!alive(), "the grandchild {pid} outlived the server");
}
