//! `loom prompt` with `provider = "anthropic"` against a fake Messages API on loopback: the model asks for a
//! `read_file` call, the tool runs through the kernel like any other, and the answer comes back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use loom_tests::Scratch;

use super::{results, updates};

const KEY: &str = "sk-ant-e2e-secret-value";

/// A streamed `read_file` call on hello.txt (input 50 tokens, output 20).
pub const TOOL_CALL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_e2e_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_e2e","name":"read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"hello.txt\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// A streamed text answer: "The file says: greetings".
pub const ANSWER: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_e2e_2","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":80,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The file says: "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"greetings"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// (headers lower-cased, JSON body) of each request.
pub type Seen = Arc<Mutex<Vec<(Vec<(String, String)>, serde_json::Value)>>>;

/// Serves `replies` (event streams), one per connection, on a background thread; returns the base URL.
pub fn serve(replies: Vec<&'static str>) -> (String, Seen) {
    serve_status(replies.into_iter().map(|r| (200, r)).collect())
}

/// Like [`serve`], with an HTTP status per reply: 200 sends the body as an event stream, anything else as a JSON
/// error body.
pub fn serve_status(replies: Vec<(u16, &'static str)>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        for (status, reply) in replies {
            let Ok((sock, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(sock);
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((n, v)) = line.split_once(':') {
                    headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let len: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            rec.lock().unwrap().push((
                headers,
                serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            ));
            let mut sock = reader.into_inner();
            let (reason, kind) = match status {
                200 => ("OK", "text/event-stream"),
                _ => ("Error", "application/json"),
            };
            // a transient error asks for a retry at once (the provider's own hint), so tests never wait on backoff
            let hint = if matches!(status, 429 | 503 | 529) {
                "retry-after-ms: 1\r\n"
            } else {
                ""
            };
            let _ = write!(
                sock,
                "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n{hint}connection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (base, seen)
}

#[test]
fn loom_prompt_drives_a_tool_call_through_the_anthropic_harness() {
    let (base, seen) = serve(vec![TOOL_CALL, ANSWER]);
    let s = Scratch::new();
    s.write("hello.txt", "greetings");
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "claude-e2e"
system_prompt = "You are a careful reader."

[harness]
provider = "anthropic"
model = "claude-test"
apiBase = "{base}"
maxTokens = 1000

[session]
provider = "in-memory"

[capabilities]
read_file = {{ paths = ["./"] }}

[tools]
read_file = "builtin"
"#
        ),
    );
    let run = s.loom_env(
        &[
            "prompt",
            "agent.toml",
            "what does hello.txt say?",
            "--format",
            "jsonl",
        ],
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    run.expect_code(0);
    assert!(!run.stdout().contains(KEY) && !run.stderr().contains(KEY));
    let ups = updates(&run);
    assert_eq!(
        results(&ups),
        vec![("completed".to_string(), "greetings".to_string())]
    );
    let said: String = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "The file says: greetings");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let header = |i: usize, name: &str| {
        seen[i]
            .0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header(0, "x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        header(0, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    let first = &seen[0].1;
    assert_eq!(first["model"], "claude-test");
    assert_eq!(first["max_tokens"], 1000);
    assert_eq!(first["stream"], true);
    assert!(
        first["system"]
            .to_string()
            .contains("You are a careful reader."),
        "{first}"
    );
    assert!(first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "read_file" && t["input_schema"].is_object()));
    let second = &seen[1].1["messages"];
    assert_eq!(
        second[1]["content"][0],
        serde_json::json!({"type": "tool_use", "id": "toolu_e2e", "name": "read_file", "input": {"path": "hello.txt"}})
    );
    assert_eq!(
        second[2]["content"][0],
        // the last block of the conversation carries the prompt-cache breakpoint
        serde_json::json!({"type": "tool_result", "tool_use_id": "toolu_e2e", "content": "greetings", "is_error": false,
                           "cache_control": {"type": "ephemeral"}})
    );
}

#[test]
fn a_missing_api_key_fails_boot_naming_the_secret() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        "[agent]\nname = \"nokey\"\n\n[harness]\nprovider = \"anthropic\"\napiBase = \"http://127.0.0.1:9\"\n\n[session]\nprovider = \"in-memory\"\n",
    );
    let run = s.loom(&["prompt", "agent.toml", "hi"]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains("ANTHROPIC_API_KEY"),
        "{}",
        run.stderr()
    );
}

/// The walkthrough's row 28: a provider that is overloaded is retried, and the retry is never silent — `loom
/// prompt` says "retrying (n of m, in s)" on stderr (text) and as a notice frame (jsonl), then the answer comes.
#[test]
fn a_retry_says_so_and_the_answer_still_comes() {
    const OVERLOADED: &str =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    for format in ["text", "jsonl"] {
        let (base, seen) = serve_status(vec![(529, OVERLOADED), (200, ANSWER)]);
        let s = Scratch::new();
        s.write(
            "agent.toml",
            &format!(
                "[agent]\nname = \"retry\"\n[harness]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\n\
                 apiBase = \"{base}\"\n[session]\nprovider = \"in-memory\"\n[tools]\n"
            ),
        );
        let run = s.loom_env(
            &["prompt", "agent.toml", "hi", "--format", format],
            &[("ANTHROPIC_API_KEY", KEY)],
        );
        run.expect_code(0);
        assert_eq!(seen.lock().unwrap().len(), 2, "{format}: one retry");
        assert!(!run.stdout().contains(KEY) && !run.stderr().contains(KEY));
        match format {
            "text" => {
                run.stderr_has("loom: notice: anthropic: retrying (1 of 7, in 0.0s): ")
                    .stdout_has("The file says: greetings");
            }
            _ => {
                let notice = updates(&run)
                    .into_iter()
                    .find(|u| u.to_string().contains("retrying (1 of 7, in "));
                assert!(
                    notice.is_some(),
                    "no retry notice in the jsonl:\n{}",
                    run.stdout()
                );
            }
        }
    }
}

/// Issue 24 item 5: a transient provider error that outlasts the retries exits 75 (EX_TEMPFAIL, an engine retries the
/// job); a deterministic one (a rejected key) exits 1.
#[test]
fn exit_codes_tell_a_transient_failure_from_a_deterministic_one() {
    const OVERLOADED: &str =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    const AUTH: &str =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let agent = |base: &str| {
        format!(
            "[agent]\nname = \"codes\"\n[harness]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\n\
             apiBase = \"{base}\"\n[session]\nprovider = \"in-memory\"\n[tools]\n"
        )
    };
    // every attempt overloaded: 8 attempts, then 75
    let (base, seen) = serve_status(vec![(529, OVERLOADED); 8]);
    let s = Scratch::new();
    s.write("agent.toml", &agent(&base));
    let run = s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    run.expect_code(75).stderr_has("retrying (7 of 7");
    assert_eq!(seen.lock().unwrap().len(), 8);
    // a rejected key is not retried and is not temporary
    let (base, seen) = serve_status(vec![(401, AUTH)]);
    s.write("agent.toml", &agent(&base));
    s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("ANTHROPIC_API_KEY", KEY)],
    )
    .expect_code(1)
    .stderr_lacks("retrying");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// Issue 24 items 5 and 6: a cell whose turn failed on a transient provider error exits 75 (the engine retries the
/// index), says so in its result, and collect reports it as transient.
#[test]
fn a_job_cell_that_failed_transiently_exits_75_and_says_so() {
    const OVERLOADED: &str =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let (base, _seen) = serve_status(vec![(529, OVERLOADED); 8]);
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"codes\"\n[harness]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\n\
             apiBase = \"{base}\"\n[session]\nprovider = \"in-memory\"\n[tools]\n"
        ),
    );
    s.write("items.jsonl", "{\"id\": \"busy\", \"prompt\": \"hi\"}\n");
    s.loom_env(
        &[
            "job",
            "run",
            "--items",
            "items.jsonl",
            "--index",
            "0",
            "--out",
            "out",
        ],
        &[("ANTHROPIC_API_KEY", KEY)],
    )
    .expect_code(75)
    .stderr_lacks(KEY);
    let text = std::fs::read_to_string(s.path().join("out/busy/result.json")).unwrap();
    assert!(!text.contains(KEY), "the key is in the result:\n{text}");
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (r["exit"].as_i64(), r["outcome"].as_str()),
        (Some(75), Some("transient")),
        "{r:#}"
    );
    s.loom(&["job", "collect", "out"])
        .expect_code(1)
        .stdout_has("exit 75  transient");
}
