//! `loom acp serve`: raw JSON-RPC lines against the real binary (bad input, refusals, disconnect mid-turn), and a
//! real ACP client — the `@agentclientprotocol/sdk` npm package, in tests/acp-client/ — driving it end to end.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command};

use loom_tests::{loom_bin, workspace_root, Scratch};

use super::piped;
use serde_json::{json, Value};

const PLAIN: &str = r#"
[agent]
name = "acp-plain"

[harness]
provider = "test"
script = [[{ say = "reading" }, { call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "done" }]]

[session]
provider = "in-memory"

[tools]
read_file = { capabilities = { paths = ["./"] } }
"#;

/// Every turn asks before its read_file call runs.
const ASK: &str = r#"
[agent]
name = "acp-ask"

[harness]
provider = "test"
script = [
  [{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "after" }],
  [{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "after" }],
  [{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "after" }],
  [{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "after" }],
]

[session]
provider = "in-memory"

[tools]
read_file = { capabilities = { paths = ["./"] } }

[[permissions.ask_rules]]
tool = "read_file"
"#;

/// `loom acp serve <manifest>` with piped stdio, spoken to line by line.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Everything read so far, for failure messages.
    seen: Vec<String>,
}

impl Server {
    fn start(s: &Scratch, manifest: &str) -> Server {
        let mut child = piped(s, &["acp", "serve", manifest]).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
            seen: Vec::new(),
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string());
    }

    fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Sends `session/prompt` with one text block.
    fn prompt(&mut self, id: u64, session: &str, text: &str) {
        self.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
    }

    /// The next line, which must be one JSON-RPC 2.0 message (stdout carries nothing else).
    fn next(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "stdout ended; read so far:\n{}", self.seen.join(""));
        self.seen.push(line.clone());
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        v
    }

    /// Reads until the server asks `session/request_permission`; returns the request.
    fn until_asked(&mut self) -> Value {
        loop {
            let m = self.next();
            if m["method"] == "session/request_permission" {
                return m;
            }
        }
    }

    /// Reads until the reply to `id`; returns it with the messages before it.
    fn reply(&mut self, id: u64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let v = self.next();
            if v["id"] == json!(id) && v.get("method").is_none() {
                return (v, before);
            }
            before.push(v);
        }
    }

    fn init_and_session(&mut self, cwd: &Path) -> String {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        let (init, _) = self.reply(1);
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        self.request(
            2,
            "session/new",
            json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
        );
        let (new, _) = self.reply(2);
        assert_eq!(new["result"]["modes"]["currentModeId"], "default", "{new}");
        new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{new}"))
            .to_string()
    }

    /// Closes stdin and waits: (exit code, stderr).
    fn finish(mut self) -> (i32, String) {
        drop(self.stdin.take());
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert_eq!(v["jsonrpc"], "2.0", "{line}");
        }
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[track_caller]
fn error_of(reply: &Value, code: i64, needle: &str) {
    assert_eq!(reply["error"]["code"], code, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(needle), "{needle:?} not in {reply}");
}

#[test]
fn bad_input_gets_json_rpc_errors_and_the_server_keeps_serving() {
    let s = Scratch::new();
    s.write("agent.toml", PLAIN);
    s.write("a.txt", "hello\n");
    let mut server = Server::start(&s, "agent.toml");
    server.send_raw("{this is not json");
    let parse = server.next();
    assert_eq!(parse["id"], Value::Null);
    error_of(&parse, -32700, "parse error");
    server.send_raw(r#"{"jsonrpc":"2.0","id":7}"#);
    error_of(&server.next(), -32600, "invalid request");
    server.send_raw("[1, 2]");
    error_of(&server.next(), -32600, "batches");
    server.request(8, "no/such_method", json!({}));
    let (unknown, _) = server.reply(8);
    error_of(&unknown, -32601, "no/such_method");
    // an unknown notification is ignored (notifications are never answered)
    server.send(json!({"jsonrpc": "2.0", "method": "no/such_notification"}));
    let sid = server.init_and_session(s.path());
    server.request(
        9,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
    );
    let (bad, _) = server.reply(9);
    error_of(&bad, -32602, "unknown sessionId \"nope\"");
    server.request(
        10,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "image", "data": "", "mimeType": "image/png"}]}),
    );
    let (image, _) = server.reply(10);
    error_of(&image, -32602, "promptCapabilities.image");
    server.request(
        11,
        "session/new",
        json!({"cwd": s.path().to_str().unwrap(), "mcpServers": [{"name": "fs", "command": "/bin/true", "args": [], "env": []}]}),
    );
    let (mcp, _) = server.reply(11);
    error_of(&mcp, -32602, "mcpServers");
    server.request(
        12,
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    let (relative, _) = server.reply(12);
    error_of(&relative, -32602, "absolute");
    server.request(
        13,
        "session/load",
        json!({"sessionId": sid, "cwd": "/", "mcpServers": []}),
    );
    let (load, _) = server.reply(13);
    error_of(&load, -32600, "keeps its session in memory");
    server.request(
        15,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "gpt-9"}),
    );
    error_of(
        &server.reply(15).0,
        -32602,
        "the only model this session may use",
    );
    server.request(
        16,
        "session/set_config_option",
        json!({"sessionId": "nope", "configId": "model", "value": "test"}),
    );
    error_of(&server.reply(16).0, -32602, "unknown sessionId \"nope\"");
    // after all that, a prompt still runs: updates stream, frames and the echoed prompt stay off the wire
    server.prompt(14, &sid, "read a.txt");
    let (done, updates) = server.reply(14);
    assert_eq!(done["result"], json!({"stopReason": "end_turn"}), "{done}");
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| {
            assert_eq!(u["method"], "session/update", "{u}");
            assert_eq!(u["params"]["sessionId"], sid.as_str());
            u["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    assert_eq!(updates[2]["params"]["update"]["status"], "completed");
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("no/such_notification"), "{stderr}");
}

#[test]
fn each_session_has_its_own_cwd_and_agent() {
    let s = Scratch::new();
    s.write("agent.toml", PLAIN);
    s.write("one/a.txt", "first\n");
    s.write("two/a.txt", "second\n");
    let mut server = Server::start(&s, "agent.toml");
    let one = server.init_and_session(&s.path().join("one"));
    server.request(
        3,
        "session/new",
        json!({"cwd": s.path().join("two").to_str().unwrap(), "mcpServers": []}),
    );
    let (two, _) = server.reply(3);
    let two = two["result"]["sessionId"].as_str().unwrap().to_string();
    assert_ne!(one, two);
    for (id, sid, want) in [(4, &one, "first\n"), (5, &two, "second\n")] {
        server.prompt(id, sid, "go");
        let (done, updates) = server.reply(id);
        assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
        let result = updates
            .iter()
            .find(|u| u["params"]["update"]["sessionUpdate"] == "tool_call_update")
            .unwrap_or_else(|| panic!("{updates:#?}"));
        assert_eq!(
            result["params"]["update"]["content"][0]["content"]["text"], want,
            "{result}"
        );
    }
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_permission_ask_is_a_request_to_the_client_and_its_answer_decides() {
    let s = Scratch::new();
    s.write("agent.toml", ASK);
    s.write("a.txt", "hello\n");
    let mut server = Server::start(&s, "agent.toml");
    let sid = server.init_and_session(s.path());
    for (turn, option, status) in [
        (10, "allow_once", "completed"),
        (11, "reject_once", "failed"),
        (12, "allow_always", "completed"),
    ] {
        server.prompt(turn, &sid, "go");
        // the tool_call is on the wire before the question about it
        let call = server.next();
        assert_eq!(
            call["params"]["update"]["sessionUpdate"], "tool_call",
            "{call}"
        );
        let ask = server.next();
        assert_eq!(ask["method"], "session/request_permission", "{ask}");
        assert_eq!(ask["params"]["sessionId"], sid.as_str());
        assert_eq!(ask["params"]["toolCall"]["title"], "read_file");
        let kinds: Vec<&str> = ask["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["allow_once", "allow_always", "reject_once"],
            "an ask rule's ask can be remembered"
        );
        server.send(json!({"jsonrpc": "2.0", "id": ask["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option}}}));
        let (done, updates) = server.reply(turn);
        assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
        let result = &updates[0]["params"]["update"];
        assert_eq!(result["sessionUpdate"], "tool_call_update", "{updates:#?}");
        assert_eq!(result["status"], status, "{result}");
        if status == "failed" {
            let text = result["content"][0]["content"]["text"].as_str().unwrap();
            assert!(text.contains("the user rejected it"), "{text}");
        }
    }
    // remembered: the same call runs without a question, and the answer is on disk for `loom permissions`
    server.prompt(13, &sid, "go");
    let (done, before) = server.reply(13);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "session/request_permission"),
        "{before:#?}"
    );
    // modes: plan mode is the client's to switch, and an unknown mode is refused
    server.request(
        14,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    error_of(&server.reply(14).0, -32602, "unknown modeId \"yolo\"");
    server.request(
        15,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "plan"}),
    );
    assert_eq!(server.reply(15).0["result"], json!({}));
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn max_turn_requests_is_a_stop_reason_and_one_prompt_runs_at_a_time() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &ASK.replace(
            "provider = \"test\"",
            "provider = \"test\"\nmaxTurnRequests = 1",
        ),
    );
    s.write("a.txt", "hello\n");
    let mut server = Server::start(&s, "agent.toml");
    let sid = server.init_and_session(s.path());
    server.prompt(30, &sid, "go");
    let ask = server.until_asked();
    // while the turn waits on its question, a second prompt to the same session is refused, naming it
    server.prompt(31, &sid, "me too");
    let (busy, _) = server.reply(31);
    error_of(&busy, -32600, "already running a prompt");
    server.send(json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    // the tool ran; the model would need a second request, which maxTurnRequests = 1 does not allow
    let (done, updates) = server.reply(30);
    assert_eq!(
        done["result"],
        json!({"stopReason": "max_turn_requests"}),
        "{done}"
    );
    assert_eq!(
        updates[0]["params"]["update"]["status"], "completed",
        "{updates:#?}"
    );
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn cancel_answers_the_prompt_with_cancelled() {
    let s = Scratch::new();
    s.write("agent.toml", ASK);
    s.write("a.txt", "hello\n");
    let mut server = Server::start(&s, "agent.toml");
    let sid = server.init_and_session(s.path());
    server.prompt(20, &sid, "go");
    // the turn is now waiting on the question: cancel it instead of answering
    server.until_asked();
    server
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}));
    let (done, updates) = server.reply(20);
    assert_eq!(done["result"], json!({"stopReason": "cancelled"}), "{done}");
    let result = &updates[0]["params"]["update"];
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{result}"
    );
    // a cancel for an unknown session cannot be answered (a notification) and changes nothing
    server.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "gone"}}),
    );
    // the session still works: the next turn's question is answered
    server.prompt(21, &sid, "again");
    let ask = server.until_asked();
    server.send(json!({"jsonrpc": "2.0", "id": ask["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let (done, _) = server.reply(21);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("\"gone\""), "{stderr}");
}

#[test]
fn a_disconnect_mid_turn_cancels_it_flushes_the_file_session_and_exits_0() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &ASK.replace(
            "[session]\nprovider = \"in-memory\"",
            "[session]\nprovider = \"file\"\npath = \"./session.jsonl\"",
        ),
    );
    s.write("a.txt", "hello\n");
    let mut server = Server::start(&s, "agent.toml");
    let sid = server.init_and_session(s.path());
    // a file session is one log: a second session at once would interleave two conversations in it
    server.request(
        3,
        "session/new",
        json!({"cwd": s.path().to_str().unwrap(), "mcpServers": []}),
    );
    let (second, _) = server.reply(3);
    error_of(&second, -32600, "one \"file\" session log");
    server.prompt(4, &sid, "remember me");
    server.until_asked();
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert!(log.contains("remember me"), "{log}");
    assert!(
        log.contains("interrupted"),
        "the call was closed as interrupted: {log}"
    );
}

/// PLAIN with its session in a `file` log next to the manifest.
fn durable() -> String {
    PLAIN.replace(
        "[session]\nprovider = \"in-memory\"",
        "[session]\nprovider = \"file\"\npath = \"./session.jsonl\"",
    )
}

/// The `sessionUpdate` kinds of some notifications.
fn kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .map(|u| {
            assert_eq!(u["method"], "session/update", "{u}");
            u["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("")
        })
        .collect()
}

#[test]
fn session_load_replays_a_stored_session_from_an_earlier_process_then_continues_it() {
    let s = Scratch::new();
    s.write("agent.toml", &durable());
    s.write("a.txt", "hello\n");
    let log = s.path().join("session.jsonl");
    // the first process writes the session
    let mut server = Server::start(&s, "agent.toml");
    let sid = server.init_and_session(s.path());
    assert!(
        sid.starts_with("file:") && sid.ends_with("session.jsonl"),
        "{sid}"
    );
    server.prompt(3, &sid, "first prompt");
    assert_eq!(server.reply(3).0["result"]["stopReason"], "end_turn");
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");

    // a later process loads it: the history comes back as updates before the answer
    let mut server = Server::start(&s, "agent.toml");
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (init, _) = server.reply(1);
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let cwd = s.path().to_str().unwrap();
    server.request(
        2,
        "session/load",
        json!({"sessionId": "loom-1", "cwd": cwd, "mcpServers": []}),
    );
    let (unknown, _) = server.reply(2);
    error_of(&unknown, -32602, "unknown sessionId \"loom-1\"");
    error_of(&unknown, -32602, &sid);
    server.request(
        3,
        "session/load",
        json!({"sessionId": sid, "cwd": "rel", "mcpServers": []}),
    );
    error_of(&server.reply(3).0, -32602, "absolute");
    server.request(
        4,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    let (loaded, replay) = server.reply(4);
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "default",
        "{loaded}"
    );
    assert_eq!(
        kinds(&replay),
        [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    assert!(replay
        .iter()
        .all(|u| u["params"]["sessionId"] == sid.as_str()));
    assert_eq!(
        replay[0]["params"]["update"]["content"]["text"],
        "first prompt"
    );
    assert_eq!(replay[3]["params"]["update"]["status"], "completed");
    assert_eq!(
        replay[3]["params"]["update"]["content"][0]["content"]["text"],
        "hello\n"
    );
    // the loaded session takes prompts that continue the same log; a second session at once is still refused
    server.prompt(5, &sid, "second prompt");
    let (done, updates) = server.reply(5);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(kinds(&updates)[0], "agent_message_chunk");
    server.request(6, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    error_of(&server.reply(6).0, -32600, "one \"file\" session log");
    // loading the session this process already serves replays it again, now with both turns
    server.request(
        7,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    let (_, again) = server.reply(7);
    assert_eq!(
        kinds(&again)
            .iter()
            .filter(|k| **k == "user_message_chunk")
            .count(),
        2
    );
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    let (first, second) = (
        text.find("first prompt").unwrap(),
        text.find("second prompt").unwrap(),
    );
    assert!(first < second, "{text}");
}

#[test]
fn session_load_of_a_missing_or_damaged_log_is_refused_and_writes_nothing() {
    let s = Scratch::new();
    s.write("agent.toml", &durable());
    let log = std::fs::canonicalize(s.path())
        .unwrap()
        .join("session.jsonl");
    let mut server = Server::start(&s, "agent.toml");
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    server.reply(1);
    let sid = format!("file:{}", log.display());
    let cwd = s.path().to_str().unwrap();
    server.request(
        2,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    error_of(&server.reply(2).0, -32602, "there is no log at");
    assert!(!log.exists(), "a refused load created the log");
    // a bad line in the middle (a torn last line alone would be cut at load, see torn_log.rs)
    let event = "{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"hi\"}}";
    let damaged = format!("{event}\nnot json\n{event}\n");
    s.write("session.jsonl", &damaged);
    server.request(
        3,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    let (bad, before) = server.reply(3);
    error_of(&bad, -32603, "session.jsonl:2: not a session event");
    error_of(&bad, -32603, "fix or remove that line");
    error_of(&bad, -32603, &format!("session/load {sid:?}"));
    assert!(
        before.is_empty(),
        "nothing is replayed from a damaged log: {before:#?}"
    );
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), damaged);
}

/// Reads, is refused a path outside its grant, writes, edits; the next turn reads again.
const FS: &str = r#"
[agent]
name = "acp-fs"

[harness]
provider = "test"
script = [
  [
    { call = { tool = "read_file", input = { path = "a.txt" } } },
    { call = { tool = "read_file", input = { path = "/etc/passwd" } } },
    { call = { tool = "write_file", input = { path = "b.txt", content = "written" } } },
    { call = { tool = "edit_file", input = { path = "a.txt", edits = [{ old_text = "buffer", new_text = "edited" }] } } },
    { say = "done" },
  ],
  [{ call = { tool = "read_file", input = { path = "a.txt" } } }, { say = "after" }],
]

[session]
provider = "in-memory"

[tools]
read_file = { capabilities = { paths = ["./"] } }
write_file = { capabilities = { paths = ["./"] } }
edit_file = { capabilities = { paths = ["./"] } }
"#;

/// What a turn sent: the reply, the updates, and the requests the client answered with `answer`.
struct Turn {
    reply: Value,
    updates: Vec<Value>,
    requests: Vec<Value>,
}

impl Server {
    /// Reads until the reply to `id`, answering each request of the server's with `answer(request)` (a result,
    /// or `Err` with an error object).
    fn turn(&mut self, id: u64, answer: &mut dyn FnMut(&Value) -> Result<Value, Value>) -> Turn {
        let (mut updates, mut requests) = (Vec::new(), Vec::new());
        loop {
            let m = self.next();
            if m["id"] == json!(id) && m.get("method").is_none() {
                return Turn {
                    reply: m,
                    updates,
                    requests,
                };
            }
            if m.get("id").is_some() && m["method"].is_string() {
                let msg = match answer(&m) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": m["id"], "result": result}),
                    Err(error) => json!({"jsonrpc": "2.0", "id": m["id"], "error": error}),
                };
                requests.push(m);
                self.send(msg);
            } else {
                updates.push(m);
            }
        }
    }
}

/// The finished tool calls of some updates: (status, text).
fn tool_results(updates: &[Value]) -> Vec<(String, String)> {
    updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .map(|u| {
            (
                u["status"].as_str().unwrap_or("").to_string(),
                u["content"][0]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn a_client_with_fs_does_the_file_io_of_allowed_calls_only() {
    let s = Scratch::new();
    s.write("agent.toml", FS);
    s.write("a.txt", "on disk\n");
    let dir = std::fs::canonicalize(s.path()).unwrap();
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    let mut server = Server::start(&s, "agent.toml");
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    server.reply(1);
    server.request(
        2,
        "session/new",
        json!({"cwd": dir.to_str().unwrap(), "mcpServers": []}),
    );
    let sid = server.reply(2).0["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    server.prompt(3, &sid, "go");
    // the editor's buffer differs from the disk: the buffer is what the model sees and edits
    let t = server.turn(3, &mut |m| match m["method"].as_str() {
        Some("fs/read_text_file") => Ok(json!({"content": "from the buffer\n"})),
        Some("fs/write_text_file") => Ok(json!({})),
        _ => Err(json!({"code": -32601, "message": "unexpected"})),
    });
    assert_eq!(t.reply["result"]["stopReason"], "end_turn", "{}", t.reply);
    let asked: Vec<(&str, &str)> = t
        .requests
        .iter()
        .map(|r| {
            assert_eq!(r["params"]["sessionId"], sid.as_str(), "{r}");
            (
                r["method"].as_str().unwrap(),
                r["params"]["path"].as_str().unwrap(),
            )
        })
        .collect();
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    // the read, the write, the edit's read and write — and nothing about the path the kernel refused
    assert_eq!(
        asked,
        [
            ("fs/read_text_file", a_s),
            ("fs/write_text_file", b_s),
            ("fs/read_text_file", a_s),
            ("fs/write_text_file", a_s)
        ],
        "{:#?}",
        t.requests
    );
    assert_eq!(t.requests[1]["params"]["content"], "written");
    assert_eq!(t.requests[3]["params"]["content"], "from the edited\n");
    let results = tool_results(&t.updates);
    assert_eq!(results[0], ("completed".into(), "from the buffer\n".into()));
    assert_eq!(results[1].0, "failed");
    assert!(
        results[1].1.contains("outside this tool's grant"),
        "{results:?}"
    );
    assert_eq!(results[2].0, "completed", "{results:?}");
    assert_eq!(results[3].0, "completed", "{results:?}");
    // the client wrote, not loom
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "on disk\n");
    assert!(!b.exists());

    // the client's error is the tool's error the model sees
    server.prompt(4, &sid, "again");
    let t = server.turn(4, &mut |_| {
        Err(json!({"code": -32002, "message": "no buffer for that file"}))
    });
    assert_eq!(t.reply["result"]["stopReason"], "end_turn", "{}", t.reply);
    let results = tool_results(&t.updates);
    assert_eq!(results[0].0, "failed");
    assert!(
        results[0].1.contains("the client could not read it")
            && results[0].1.contains("no buffer for that file"),
        "{results:?}"
    );
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// bash under a general row confined to the session's directory: a write inside, a write outside, a long sleep.
const TERM: &str = r#"
[agent]
name = "acp-term"

[harness]
provider = "test"
script = [
  [{ call = { tool = "bash", input = { command = "echo inside > in.txt; cat in.txt" } } }, { say = "done" }],
  [{ call = { tool = "bash", input = { command = "echo x > /etc/loom-acp-pwned" } } }, { say = "done" }],
  [{ call = { tool = "bash", input = { command = "sleep 60" } } }, { say = "never" }],
]

[session]
provider = "in-memory"

[tools]
bash = { capabilities = { commands = "*", paths = ["./"] } }
"#;

#[test]
fn a_client_with_terminals_runs_bash_in_its_confined_form() {
    let s = Scratch::new();
    s.write("agent.toml", TERM);
    s.write("work/.keep", "");
    let root = std::fs::canonicalize(s.path()).unwrap();
    let work = root.join("work");
    let w = work.to_str().unwrap();
    let mut server = Server::start(&s, "agent.toml");
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    server.reply(1);
    server.request(2, "session/new", json!({"cwd": w, "mcpServers": []}));
    let sid = server.reply(2).0["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    server.prompt(3, &sid, "go");
    let t = server.turn(3, &mut |m| match m["method"].as_str() {
        Some("terminal/create") => Ok(json!({"terminalId": "t1"})),
        Some("terminal/wait_for_exit") => Ok(json!({"exitCode": 0})),
        Some("terminal/output") => {
            Ok(json!({"output": "inside\n", "truncated": false, "exitStatus": {"exitCode": 0}}))
        }
        Some("terminal/release") => Ok(json!({})),
        _ => Err(json!({"code": -32601, "message": "unexpected"})),
    });
    assert_eq!(t.reply["result"]["stopReason"], "end_turn", "{}", t.reply);
    let methods: Vec<&str> = t
        .requests
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    for r in &t.requests {
        assert_eq!(r["params"]["sessionId"], sid.as_str(), "{r}");
        if r["method"] != "terminal/create" {
            assert_eq!(r["params"]["terminalId"], "t1", "{r}");
        }
    }
    // the client is handed loom's own sandbox with the row the kernel chose, never the raw command
    let create = &t.requests[0]["params"];
    let command = create["command"].as_str().unwrap();
    assert!(command.ends_with("/loom"), "{create}");
    let args: Vec<&str> = create["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..3], ["sandbox", "run", "--grant"], "{create}");
    assert_eq!(
        args[3],
        format!("{{ commands = \"*\", paths = [{w:?}] }}"),
        "{create}"
    );
    let dashes = args.iter().position(|a| *a == "--").unwrap();
    assert_eq!(
        args[dashes + 1..],
        ["/bin/bash", "-c", "echo inside > in.txt; cat in.txt"]
    );
    assert!(args.windows(2).any(|p| p == ["--cwd", w]), "{create}");
    assert_eq!(create["env"], json!([]));
    assert_eq!(create["cwd"], w);
    // the terminal is embedded in the call's update before loom waits on it, and in the result
    let term = json!([{"type": "terminal", "terminalId": "t1"}]);
    let progress = t
        .updates
        .iter()
        .position(|u| u["params"]["update"]["status"] == "in_progress")
        .unwrap_or_else(|| panic!("{:#?}", t.updates));
    assert_eq!(t.updates[progress]["params"]["update"]["content"], term);
    let results = tool_results(&t.updates);
    assert_eq!(results, [("completed".to_string(), "inside\n".to_string())]);
    let done = t
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .find(|u| u["status"] == "completed")
        .unwrap();
    assert_eq!(done["content"][1], term[0], "{done}");

    // what the client runs is confined: executed as handed over, the write inside works, the write outside fails
    let run = |line: &str| {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let n = a.len();
        a[n - 1] = line.to_string();
        std::process::Command::new(command)
            .args(&a)
            .current_dir(&work)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap()
    };
    let inside = run("echo inside > in.txt; cat in.txt");
    assert!(
        inside.status.success(),
        "{}",
        String::from_utf8_lossy(&inside.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&inside.stdout), "inside\n");
    let outside = run("echo x > /etc/loom-acp-pwned");
    assert!(!outside.status.success());
    assert!(!std::path::Path::new("/etc/loom-acp-pwned").exists());
    // a write beside the grant lands in the sandbox's own /tmp or is refused: never on the host
    run("echo x > ../outside.txt");
    assert!(
        !root.join("outside.txt").exists(),
        "the confined form wrote outside its grant"
    );

    // turn 2: the client reports the failure it saw; turn 3: cancel while the command runs kills the terminal
    server.prompt(4, &sid, "outside");
    let t = server.turn(4, &mut |m| match m["method"].as_str() {
        Some("terminal/create") => Ok(json!({"terminalId": "t2"})),
        Some("terminal/wait_for_exit") => Ok(json!({"exitCode": 1})),
        Some("terminal/output") => {
            Ok(json!({"output": "Read-only file system\n", "truncated": false}))
        }
        _ => Ok(json!({})),
    });
    let results = tool_results(&t.updates);
    assert_eq!(results[0].0, "failed", "{results:?}");
    assert!(results[0].1.contains("[exit code 1]"), "{results:?}");

    server.prompt(5, &sid, "sleep");
    let mut cancel_sent = false;
    let mut methods = Vec::new();
    let reply = loop {
        let m = server.next();
        if m["id"] == json!(5) && m.get("method").is_none() {
            break m;
        }
        let Some(method) = m["method"].as_str().filter(|_| m.get("id").is_some()) else {
            continue;
        };
        methods.push(method.to_string());
        let result = match method {
            "terminal/create" => json!({"terminalId": "t3"}),
            // the command runs on: the user cancels instead of an answer
            "terminal/wait_for_exit" => {
                server.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}));
                cancel_sent = true;
                continue;
            }
            "terminal/output" => {
                json!({"output": "", "truncated": false, "exitStatus": {"signal": "SIGKILL"}})
            }
            _ => json!({}),
        };
        server.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
    };
    assert!(cancel_sent);
    assert_eq!(reply["result"]["stopReason"], "cancelled", "{reply}");
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release"
        ]
    );
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_call_the_terminal_form_cannot_carry_runs_in_loom_and_says_why() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        r#"
[agent]
name = "acp-brokered"

[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "echo hi | tr a-z A-Z" } } },
  { call = { tool = "bash", input = { command = "cat", args = ["f.txt"] } } },
  { say = "done" },
]]

[session]
provider = "in-memory"

[tools]
bash = { capabilities = [{ commands = "*", paths = ["./"] }, { commands = ["cat"], read_paths = ["./"] }] }
"#,
    );
    s.write("f.txt", "data\n");
    let dir = std::fs::canonicalize(s.path()).unwrap();
    let d = dir.to_str().unwrap();
    let mut server = Server::start(&s, "agent.toml");
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    server.reply(1);
    server.request(2, "session/new", json!({"cwd": d, "mcpServers": []}));
    let sid = server.reply(2).0["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    server.prompt(3, &sid, "go");
    let t = server.turn(3, &mut |m| match m["method"].as_str() {
        Some("terminal/create") => Ok(json!({"terminalId": "t1"})),
        Some("terminal/wait_for_exit") => Ok(json!({"exitCode": 0})),
        Some("terminal/output") => Ok(json!({"output": "data\n", "truncated": false})),
        _ => Ok(json!({})),
    });
    assert_eq!(t.reply["result"]["stopReason"], "end_turn", "{}", t.reply);
    // the general row needs the command broker beside the shell: loom runs it, and the raw output says why
    let finished: Vec<&Value> = t
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .collect();
    assert_eq!(finished.len(), 2, "{:#?}", t.updates);
    assert_eq!(finished[0]["content"][0]["content"]["text"], "HI\n");
    let why = finished[0]["rawOutput"]["notInTerminal"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains("command broker"), "{}", finished[0]);
    // what the sandbox enforced is part of the result: the tier and who withheld each right
    let enforced = &finished[0]["rawOutput"]["sandbox"];
    assert!(
        enforced["tier"].is_string() && enforced["rights"]["pathname-sockets"].is_string(),
        "{}",
        finished[0]
    );
    // the rowed command alone goes to the terminal, under its own row
    assert_eq!(t.requests.len(), 4, "{:#?}", t.requests);
    let args: Vec<&str> = t.requests[0]["params"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args[3],
        format!("{{ commands = [\"cat\"], read_paths = [{d:?}] }}")
    );
    assert_eq!(args[args.len() - 3..], ["--", "cat", "f.txt"]);
    assert_eq!(finished[1]["content"][0]["content"]["text"], "data\n");
    let (code, stderr) = server.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// The directory of the npm client, with its dependencies installed (`.ci/run` installs them; a checkout without
/// them gets `npm ci` here). `None` (and a printed reason) only when node itself is missing.
fn acp_client_dir() -> Option<std::path::PathBuf> {
    let dir = workspace_root().join("tests/acp-client");
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("SKIPPED: node is not installed, so the npm ACP client cannot run (.ci/run installs it)");
        return None;
    }
    if !dir.join("node_modules/@agentclientprotocol/sdk").is_dir() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .unwrap_or_else(|e| panic!("node is installed but npm cannot run: {e}"));
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    Some(dir)
}

/// How long the npm client may take before it is taken to hang: far beyond its usual second or two, even on a loaded
/// machine — a guard that turns a hang into a failure with the client's output, not a measure of speed.
const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `cmd` to the end with its output captured, like [`Command::output`], but kills it and fails the test, with
/// what it printed, when it has not ended after `limit`.
fn output_within(cmd: &mut Command, limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.join().unwrap_or_default();
            panic!(
                "{cmd:?} did not end within {limit:?} and was killed; its stderr:\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

#[test]
fn a_real_acp_client_drives_loom_acp_serve() {
    let Some(client) = acp_client_dir() else {
        return;
    };
    let s = Scratch::new();
    s.write("plain.toml", PLAIN);
    s.write("ask.toml", ASK);
    s.write("durable.toml", &durable());
    s.write("fs.toml", FS);
    s.write("term.toml", TERM);
    s.write("work/.keep", "");
    s.write("a.txt", "hello\n");
    let mut out = Command::new("node");
    out.arg(client.join("client.mjs"))
        .arg(loom_bin())
        .arg(s.path().join("plain.toml"))
        .arg(s.path().join("ask.toml"))
        .arg(s.path())
        .arg(s.path().join("durable.toml"))
        .arg(s.path().join("fs.toml"))
        .arg(s.path().join("term.toml"))
        .arg(s.path().join("work"))
        .current_dir(&client)
        .env("LOOM_DATA_HOME", s.path().join(".loom-data"));
    let out = output_within(&mut out, HANG_GUARD);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the client failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    let summary: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client's summary is not JSON ({e}): {stdout}\n{stderr}"));

    let plain = &summary["plain"];
    assert_eq!(plain["exitCode"], 0, "{plain}");
    let r = &plain["result"];
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["agentCapabilities"]["loadSession"], false);
    assert_eq!(
        r["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(
        r["turn"]["kinds"],
        json!([
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ])
    );
    assert_eq!(
        r["turn"]["toolResults"],
        json!([{"status": "completed", "text": "hello\n"}])
    );
    assert_eq!(r["turn"]["text"], "readingdone");
    // model config: listed, settable to the manifest's model only
    let model = json!([{"id": "model", "name": "Model", "category": "model", "type": "select",
        "currentValue": "test", "options": [{"value": "test", "name": "test"}],
        "description": "the model of the manifest's [harness]; change it there"}]);
    assert_eq!(r["configOptions"], model, "{r}");
    assert_eq!(r["modelSet"], model, "{r}");
    assert_eq!(r["otherModel"]["code"], -32602, "{r}");
    assert!(
        r["otherModel"]["message"]
            .as_str()
            .unwrap()
            .contains("model \"claude-opus\" is not offered"),
        "{r}"
    );
    assert_ne!(r["secondSessionId"], r["sessionId"]);
    assert_eq!(r["mcp"]["code"], -32602, "{r}");
    assert_eq!(r["unknown"]["code"], -32602, "{r}");
    assert!(
        r["unknown"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session"),
        "{r}"
    );

    let ask = &summary["ask"];
    assert_eq!(ask["exitCode"], 0, "{ask}");
    let r = &ask["result"];
    assert_eq!(
        r["askedTools"],
        json!(["read_file", "read_file", "read_file"])
    );
    // an ask rule's ask can be remembered, so the real client is offered "always" too
    assert_eq!(
        r["options"][0],
        json!(["allow_once", "allow_always", "reject_once"])
    );
    assert_eq!(r["allowed"]["stopReason"], "end_turn");
    assert_eq!(r["allowed"]["toolResults"][0]["status"], "completed");
    assert_eq!(r["allowed"]["text"], "after");
    assert_eq!(r["rejected"]["stopReason"], "end_turn");
    assert_eq!(r["rejected"]["toolResults"][0]["status"], "failed");
    assert!(
        r["rejected"]["toolResults"][0]["text"]
            .as_str()
            .unwrap()
            .contains("the user rejected it"),
        "{r}"
    );
    assert_eq!(r["cancelled"]["stopReason"], "cancelled");
    assert_eq!(r["cancelled"]["toolResults"][0]["status"], "failed");

    // session/load: a later process replays what an earlier one stored, then continues it
    let w = &summary["written"];
    assert_eq!(w["exitCode"], 0, "{w}");
    assert_eq!(w["result"]["loadSession"], true, "{w}");
    assert_eq!(w["result"]["stopReason"], "end_turn", "{w}");
    let l = &summary["loaded"];
    assert_eq!(l["exitCode"], 0, "{l}");
    let r = &l["result"];
    assert_eq!(r["loadSession"], true);
    assert_eq!(r["unknown"]["code"], -32602, "{r}");
    assert_eq!(r["modes"]["currentModeId"], "default", "{r}");
    assert_eq!(
        r["replay"]["kinds"],
        json!([
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ])
    );
    assert_eq!(r["userText"], json!(["first prompt"]));
    assert_eq!(
        r["replay"]["toolResults"],
        json!([{"status": "completed", "text": "hello\n"}])
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(r["continued"]["text"], "readingdone");
    let log = std::fs::read_to_string(s.path().join("session.jsonl")).unwrap();
    assert!(
        log.find("first prompt").unwrap() < log.find("second prompt").unwrap(),
        "{log}"
    );

    // a client with fs: its buffers are read and written, and it is never asked about the refused path
    let f = &summary["fs"];
    assert_eq!(f["exitCode"], 0, "{f}");
    let r = &f["result"];
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let a = s.path().join("a.txt").display().to_string();
    let b = s.path().join("b.txt").display().to_string();
    assert_eq!(
        r["fs"],
        json!([
            {"method": "fs/read_text_file", "path": a},
            {"method": "fs/write_text_file", "path": b, "content": "written"},
            {"method": "fs/read_text_file", "path": a},
            {"method": "fs/write_text_file", "path": a, "content": "from the edited\n"},
        ]),
        "{r}"
    );
    assert_eq!(
        r["turn"]["toolResults"][0],
        json!({"status": "completed", "text": "from the buffer\n"})
    );
    assert_eq!(r["turn"]["toolResults"][1]["status"], "failed");
    assert!(
        r["turn"]["toolResults"][1]["text"]
            .as_str()
            .unwrap()
            .contains("outside this tool's grant"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("a.txt")).unwrap(),
        "hello\n"
    );
    assert!(!s.path().join("b.txt").exists());

    // a client with terminals runs the confined form itself: inside the grant works, outside fails, cancel kills
    let t = &summary["terminal"];
    assert_eq!(t["exitCode"], 0, "{t}");
    let r = &t["result"];
    let inside = &r["inside"];
    assert_eq!(inside["stopReason"], "end_turn", "{r}");
    assert_eq!(inside["calls"][0]["method"], "terminal/create", "{r}");
    assert!(
        inside["calls"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with("/loom"),
        "{r}"
    );
    assert_eq!(inside["calls"][0]["args"][0], "sandbox", "{r}");
    let methods = |turn: &Value| -> Vec<String> {
        turn["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["method"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        methods(inside),
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    assert_eq!(inside["embedded"][0], "term-1", "{r}");
    assert_eq!(
        inside["toolResults"],
        json!([{"status": "completed", "text": "inside\n"}])
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("work/in.txt")).unwrap(),
        "inside\n"
    );
    let outside = &r["outside"];
    assert_eq!(outside["toolResults"][0]["status"], "failed", "{r}");
    assert!(
        outside["toolResults"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{r}"
    );
    assert!(!std::path::Path::new("/etc/loom-acp-pwned").exists());
    let cancelled = &r["cancelled"];
    assert_eq!(cancelled["stopReason"], "cancelled", "{r}");
    assert_eq!(
        methods(cancelled),
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release"
        ]
    );
    assert_eq!(cancelled["toolResults"][0]["status"], "failed", "{r}");
    assert_eq!(r["exits"]["term-3"]["signal"], "SIGKILL", "{r}");
}
