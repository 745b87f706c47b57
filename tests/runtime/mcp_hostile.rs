//! Hostile MCP servers through the real binary (tests/mcp-peers/hostile.py): a server that floods a call, stops
//! reading its stdin, writes an endless line or floods at start fails that call (or the start) with a clear error
//! within its configured deadline, and the turn goes on — next to servers that behave, in the same turn.

use loom_tests::{workspace_root, Scratch};

use super::{results, updates};

/// The real python3 (not a version-manager shim that needs loom's scrubbed environment), or `None` with the reason.
fn python() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => {
            eprintln!("SKIPPED: python3 is not installed; the hostile MCP server needs it");
            None
        }
    }
}

fn server(python: &str, handle: &str, mode: &str, extra: &str) -> String {
    let script = workspace_root().join("tests/mcp-peers/hostile.py");
    format!(
        "{handle} = {{ provider = \"mcp-server\", command = {python:?}, args = [{:?}, {mode:?}]{extra} }}\n",
        script.display().to_string()
    )
}

fn manifest(script: &str, rest: &str) -> String {
    format!(
        "[agent]\nname = \"mcp-hostile\"\n\n[harness]\nprovider = \"test\"\nscript = {script}\n\n[session]\nprovider = \
         \"in-memory\"\n\n{rest}"
    )
}

#[test]
fn hostile_servers_fail_their_calls_within_their_deadlines_and_the_turn_goes_on() {
    let Some(py) = python() else { return };
    let s = Scratch::new();
    // more than a pipe buffer: a server that never reads cannot take it
    let big = "x".repeat(200 * 1024);
    let providers = [
        server(&py, "flood", "flood-call", ", call_timeout_ms = 1000"),
        server(&py, "deaf", "no-read", ", call_timeout_ms = 1000"),
        server(&py, "giant", "giant-line", ""),
        server(&py, "asker", "ask", ""),
        server(&py, "good", "chatty", ""),
    ]
    .concat();
    s.write(
        "agent.toml",
        &manifest(
            &format!(
                r#"[[
  {{ call = {{ tool = "flooded", input = {{}} }} }},
  {{ call = {{ tool = "unread", input = {{ text = "{big}" }} }} }},
  {{ call = {{ tool = "endless", input = {{}} }} }},
  {{ call = {{ tool = "asking", input = {{}} }} }},
  {{ call = {{ tool = "fine", input = {{ text = "{big}" }} }} }},
  {{ say = "still here" }},
]]"#
            ),
            &format!(
                r#"[providers]
{providers}
[tools]
flooded = {{ provider = "flood", tool = "a" }}
unread = {{ provider = "deaf", tool = "a" }}
endless = {{ provider = "giant", tool = "a" }}
asking = {{ provider = "asker", tool = "a" }}
fine = {{ provider = "good", tool = "a" }}

[capabilities]
flooded = "*"
unread = "*"
endless = "*"
asking = "*"
fine = "*"
"#
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0).stdout_has("still here");
    let r = results(&updates(&run));
    assert_eq!(r.len(), 5, "{r:#?}");
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(
        r[0].1.contains("[providers].flood")
            && r[0].1.contains("did not answer tools/call within 1000 ms")
            && r[0].1.contains("loom restarts it on the next call"),
        "{r:#?}"
    );
    assert_eq!(r[1].0, "failed", "{r:#?}");
    assert!(
        r[1].1.contains("[providers].deaf") && r[1].1.contains("stopped reading its stdin"),
        "{r:#?}"
    );
    assert_eq!(r[2].0, "failed", "{r:#?}");
    assert!(
        r[2].1.contains("[providers].giant") && r[2].1.contains("over loom's limit"),
        "{r:#?}"
    );
    assert_eq!(
        r[3],
        (
            "completed".to_string(),
            "roots: loom does not offer roots/list; ping: pong".to_string()
        ),
        "{r:#?}"
    );
    assert_eq!(
        r[4],
        (
            "completed".to_string(),
            format!("a got {} chars", big.len())
        ),
        "{r:#?}"
    );
}

#[test]
fn a_server_flooding_at_start_fails_boot_at_its_startup_deadline_naming_it() {
    let Some(py) = python() else { return };
    let s = Scratch::new();
    let providers = server(&py, "flood", "flood-start", ", startup_timeout_ms = 1500");
    s.write(
        "agent.toml",
        &manifest(
            r#"[[ { say = "never" } ]]"#,
            &format!(
                "[providers]\n{providers}\n[tools]\nflooded = {{ provider = \"flood\", tool = \"a\" }}\n\n\
                 [capabilities]\nflooded = \"*\"\n"
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    assert_ne!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("[providers].flood")
            && run
                .stderr()
                .contains("did not answer initialize within 1500 ms")
            && run.stderr().contains("startup_timeout_ms"),
        "{}",
        run.stderr()
    );
}
