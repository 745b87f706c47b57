//! The client against tests/mcp-peers/hostile.py, a server that floods, stops reading, writes an endless line or
//! asks loom things — each next to a control that behaves. Deadlines are short and configured; the assertions are on
//! the kind of error, never on elapsed time.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::stdio::StdioSpawn;
use super::*;

fn hostile(mode: &str, pidfile: Option<&std::path::Path>, call_ms: u64) -> Option<ServerConfig> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp-peers/hostile.py");
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: python3 is not installed; the hostile MCP server needs it");
        return None;
    }
    let mut args = vec![script.display().to_string(), mode.to_string()];
    args.extend(pidfile.map(|p| p.display().to_string()));
    let mut env: Vec<(String, String)> = ["PATH", "HOME", "PYENV_ROOT", "PYENV_VERSION"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    env.push(("PYTHONUNBUFFERED".into(), "1".into()));
    Some(ServerConfig {
        launch: Launch::Stdio(StdioSpawn {
            program: "python3".into(),
            args,
            env,
            cwd: std::env::temp_dir(),
        }),
        startup_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_millis(call_ms),
    })
}

fn ok(_: &UpstreamTool) -> Result<(), String> {
    Ok(())
}

fn starts(pidfile: &std::path::Path) -> usize {
    std::fs::read_to_string(pidfile)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_server_flooding_at_start_fails_it_at_the_startup_deadline_and_a_chatty_one_starts() {
    let Some(mut cfg) = hostile("flood-start", None, 1000) else {
        return;
    };
    cfg.startup_timeout = Duration::from_millis(1500);
    let err = McpServer::start("flood", cfg).unwrap_err().to_string();
    assert!(
        err.contains("[providers].flood")
            && err.contains("did not answer initialize within 1500 ms"),
        "{err}"
    );
    // the control: notifications, stdout log lines and a megabyte of stderr before every answer
    let Some(cfg) = hostile("chatty", None, 30_000) else {
        return;
    };
    let s = McpServer::start("chatty", cfg).unwrap();
    let r = s.call("a", json!({ "text": "hello" }), &ok).unwrap();
    assert_eq!(r.text, "a got 5 chars");
}

#[test]
fn a_server_flooding_during_a_call_fails_it_at_the_deadline_and_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let Some(cfg) = hostile("flood-call", Some(&pids), 1000) else {
        return;
    };
    let s = McpServer::start("flood", cfg).unwrap();
    assert_eq!(starts(&pids), 1);
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].flood")
            && err.contains("did not answer tools/call within 1000 ms")
            && err.contains("loom stopped the hung MCP server")
            && err.contains("loom restarts it on the next call"),
        "{err}"
    );
    // the next call runs on a fresh process, and hangs the same way
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(err.contains("did not answer tools/call"), "{err}");
    assert_eq!(starts(&pids), 2, "restarted once");
}

#[test]
fn a_server_that_stops_reading_fails_a_large_call_at_its_deadline_and_frees_the_server() {
    let big = "x".repeat(256 * 1024);
    // the control: a server that reads takes the whole request
    let Some(cfg) = hostile("ok", None, 30_000) else {
        return;
    };
    let s = McpServer::start("reader", cfg).unwrap();
    let r = s.call("a", json!({ "text": big }), &ok).unwrap();
    assert_eq!(r.text, format!("a got {} chars", big.len()));

    let Some(cfg) = hostile("no-read", None, 1000) else {
        return;
    };
    let s = McpServer::start("deaf", cfg).unwrap();
    let err = s
        .call("a", json!({ "text": big }), &ok)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[providers].deaf")
            && err.contains("stopped reading its stdin")
            && err.contains("loom restarts it on the next call"),
        "{err}"
    );
    // nothing holds the server's state: its listing is read at once
    assert_eq!(s.tools().len(), 1);
}

#[test]
fn an_endless_line_fails_the_call_at_the_size_limit_not_at_the_deadline() {
    let Some(cfg) = hostile("giant-line", None, 600_000) else {
        return;
    };
    let s = McpServer::start("giant", cfg).unwrap();
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].giant") && err.contains("over loom's limit"),
        "{err}"
    );
    assert!(!err.contains("did not answer"), "{err}");
}

#[test]
fn the_servers_own_requests_are_answered_and_a_flood_of_them_cannot_hold_the_server() {
    let Some(cfg) = hostile("ask", None, 30_000) else {
        return;
    };
    let s = McpServer::start("asker", cfg).unwrap();
    let r = s.call("a", json!({}), &ok).unwrap();
    assert_eq!(r.text, "roots: loom does not offer roots/list; ping: pong");

    // pings loom answers into a pipe the server never reads: the call still ends at its deadline
    let Some(cfg) = hostile("ask-flood", None, 1000) else {
        return;
    };
    let s = Arc::new(McpServer::start("pinger", cfg).unwrap());
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].pinger") && err.contains("did not answer tools/call"),
        "{err}"
    );
    assert_eq!(s.tools().len(), 1);
}

#[test]
fn a_call_waiting_for_the_servers_previous_call_gives_up_at_its_own_deadline_or_when_cancelled() {
    let Some(cfg) = hostile("flood-call", None, 600_000) else {
        return;
    };
    let s = McpServer::start("busy", cfg).unwrap();
    let held = s.inner.lock().unwrap();
    let err = s
        .call_until("a", json!({}), &ok, &|| true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cancelled while its previous call was still running"),
        "{err}"
    );
    drop(held);
    let Some(cfg) = hostile("ok", None, 3000) else {
        return;
    };
    let s = McpServer::start("busy", cfg).unwrap();
    let held = s.inner.lock().unwrap();
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("busy: its previous call still ran after 3000 ms"),
        "{err}"
    );
    drop(held);
    assert_eq!(s.call("a", json!({}), &ok).unwrap().text, "a got 0 chars");
}

#[test]
fn over_http_an_endless_event_fails_at_the_size_limit_and_a_flood_at_the_deadline() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp-peers/hostile.py");
    if hostile("ok", None, 0).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Running(
        std::process::Command::new("python3")
            .arg(&script)
            .arg("http")
            .arg(&port_file)
            .spawn()
            .unwrap(),
    );
    let port = loop {
        match std::fs::read_to_string(&port_file) {
            Ok(p) if !p.is_empty() => break p,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let cfg = |call_ms| ServerConfig {
        launch: Launch::Http(super::http::HttpSpec {
            url: reqwest::Url::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap(),
            headers: vec![],
        }),
        startup_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_millis(call_ms),
    };
    let s = McpServer::start("web", cfg(600_000)).unwrap();
    let err = s.call("a", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].web") && err.contains("over loom's limit"),
        "{err}"
    );
    assert_eq!(s.call("c", json!({}), &ok).unwrap().text, "c answered");
    let s = McpServer::start("web", cfg(1000)).unwrap();
    let err = s.call("b", json!({}), &ok).unwrap_err().to_string();
    assert!(
        err.contains("[providers].web") && err.contains("did not answer tools/call within 1000 ms"),
        "{err}"
    );
    assert!(err.contains("loom restarts it on the next call"), "{err}");
}
