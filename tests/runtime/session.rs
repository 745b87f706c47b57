//! The `file` session across runs of `loom prompt`.

use loom_tests::Scratch;

use super::{label, updates};

const AGENT: &str = r#"[agent]
name = "filed"

[harness]
provider = "test"
echo = true

[session]
provider = "file"
path = "session.jsonl"
"#;

#[test]
fn the_file_session_keeps_history_and_survives_a_torn_last_line() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    s.loom(&["prompt", "agent.toml", "first"])
        .expect_code(0)
        .stdout_has("first");
    let log = s.path().join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    // user chunk + agent chunk (+ usage), no frames, one JSON object per line
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{text}"
    );
    assert!(!text.contains("\"frame\""), "{text}");
    assert!(text.contains("\"first\""));

    // a kill in the middle of a write leaves a torn last line
    std::fs::write(
        &log,
        format!("{text}{{\"sessionUpdate\":\"agent_message_chu"),
    )
    .unwrap();
    let run = s.loom(&["prompt", "agent.toml", "second", "--format", "jsonl"]);
    run.expect_code(0).stderr_has("cut short");
    assert!(updates(&run)
        .iter()
        .any(|u| label(u) == "agent_message_chunk" && u["content"]["text"] == "second"));
    let after = std::fs::read_to_string(&log).unwrap();
    assert!(
        after.starts_with(&text),
        "earlier history must be intact:\n{after}"
    );
    assert!(
        after
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{after}"
    );
    assert!(after.contains("\"second\""));

    // a hand-edited middle line is an error naming the line, and nothing is changed
    let broken = after.replacen("\"first\"", "\"first", 1);
    std::fs::write(&log, &broken).unwrap();
    s.loom(&["prompt", "agent.toml", "third"])
        .expect_code(1)
        .stderr_has("session.jsonl:1: not a session event");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), broken);
}
