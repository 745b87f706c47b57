//! The file tools against a racing process, through the real binary: `loom acp serve` asks the client before a
//! `write_file` / `read_file` call runs — after the path was resolved and the kernel decided — and the client, playing
//! the racer, swaps the checked directory for a symlink to a directory outside the grant before it answers "allow".
//! loom opens the decided path beneath its grant root without following symlinks, so the call is refused and
//! nothing outside is written or read. The same calls without the swap are the controls.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};

use loom_tests::Scratch;
use serde_json::{json, Value};

use super::piped;

const MANIFEST: &str = r#"
[agent]
name = "racer"

[harness]
provider = "test"
script = [
  [{ call = { tool = "write_file", input = { path = "d/authorized_keys", content = "ssh-ed25519 AAAA attacker" } } }, { say = "after" }],
  [{ call = { tool = "read_file", input = { path = "d/notes.txt" } } }, { say = "after" }],
  [{ call = { tool = "write_file", input = { path = "d/authorized_keys", content = "ssh-ed25519 AAAA attacker" } } }, { say = "after" }],
  [{ call = { tool = "read_file", input = { path = "d/notes.txt" } } }, { say = "after" }],
]

[session]
provider = "in-memory"

[tools]
read_file = { capabilities = { paths = ["./"] } }
write_file = { capabilities = { paths = ["./"] } }

[[permissions.ask_rules]]
tool = "write_file"

[[permissions.ask_rules]]
tool = "read_file"
"#;

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "stdout ended"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Reads until the reply to `id`; returns the messages before it.
    fn until_reply(&mut self, id: u64) -> Vec<Value> {
        let mut before = Vec::new();
        loop {
            let v = self.next();
            if v["id"] == json!(id) && v.get("method").is_none() {
                return before;
            }
            before.push(v);
        }
    }

    /// One prompt turn: when asked, runs `racer`, then allows the call once. Returns the call's (status, text).
    fn turn(&mut self, id: u64, session: &str, racer: impl FnOnce()) -> (String, String) {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
        );
        let ask = loop {
            let m = self.next();
            if m["method"] == "session/request_permission" {
                break m;
            }
        };
        racer();
        self.send(json!({"jsonrpc": "2.0", "id": ask["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
        let before = self.until_reply(id);
        let done = before
            .iter()
            .map(|m| &m["params"]["update"])
            .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
            .unwrap_or_else(|| panic!("no tool result: {before:#?}"));
        (
            done["status"].as_str().unwrap_or("").to_string(),
            done["content"][0]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }
}

fn swap(work: &Path, outside: &Path) {
    std::fs::rename(work.join("d"), work.join("d.real")).unwrap();
    std::os::unix::fs::symlink(outside, work.join("d")).unwrap();
}

fn unswap(work: &Path) {
    std::fs::remove_file(work.join("d")).unwrap();
    std::fs::rename(work.join("d.real"), work.join("d")).unwrap();
}

#[test]
fn a_directory_swapped_for_a_symlink_after_the_decision_redirects_no_file_tool() {
    let s = Scratch::new();
    let outside = Scratch::new();
    s.write("agent.toml", MANIFEST);
    s.write("d/notes.txt", "inside notes\n");
    outside.write("notes.txt", "outside s3cret\n");
    let mut child = piped(&s, &["acp", "serve", "agent.toml"]).spawn().unwrap();
    let mut c = Client {
        stdin: child.stdin.take(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child,
    };
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    c.until_reply(1);
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": s.path().to_str().unwrap(), "mcpServers": []}}));
    let new = c.next();
    let sid = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{new}"))
        .to_string();
    let (work, out) = (s.path().to_path_buf(), outside.path().to_path_buf());

    // the write is decided as ./d/authorized_keys; the racer points d at the outside directory
    let (status, text) = c.turn(10, &sid, || swap(&work, &out));
    assert_eq!(status, "failed", "{text}");
    assert!(text.contains("changed after loom checked it"), "{text}");
    assert!(
        !out.join("authorized_keys").exists(),
        "written outside the grant"
    );
    unswap(&work);
    // the read likewise: the outside file's text never reaches the model
    let (status, text) = c.turn(11, &sid, || swap(&work, &out));
    assert_eq!(status, "failed", "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("changed after loom checked it"), "{text}");
    unswap(&work);

    // controls: without the swap both calls work, inside the grant
    let (status, text) = c.turn(12, &sid, || {});
    assert_eq!(status, "completed", "{text}");
    assert!(work.join("d/authorized_keys").is_file());
    let (status, text) = c.turn(13, &sid, || {});
    assert_eq!(
        (status.as_str(), text.as_str()),
        ("completed", "inside notes\n")
    );

    drop(c.stdin.take());
    let out = c.child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
