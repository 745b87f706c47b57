//! A `file` session log with a torn tail (security review 2, N9) through `loom prompt`: boot goes on with every
//! committed line, cuts the tail and says which file and how many bytes; a bad line in the middle is still an error.

use loom_tests::Scratch;

use super::updates;

const AGENT: &str = r#"[agent]
name = "torn"

[harness]
provider = "test"
echo = true

[session]
provider = "file"
path = "session.jsonl"
"#;

/// The user texts of the history the model is about to see (`--emit-preamble`).
fn history(s: &Scratch, prompt: &str) -> (Vec<String>, String) {
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        prompt,
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    run.expect_code(0);
    let ups = updates(&run);
    let texts = ups[0]["preamble"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["sessionUpdate"] == "user_message_chunk")
        .filter_map(|e| e["content"]["text"].as_str().map(str::to_string))
        .collect();
    (texts, run.stderr())
}

#[test]
fn a_glued_or_cut_tail_is_cut_with_a_note_and_every_committed_line_stays() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    s.loom(&["prompt", "agent.toml", "first"]).expect_code(0);
    let log = s.path().join("session.jsonl");
    let committed = std::fs::read_to_string(&log).unwrap();

    // an append that failed halfway (a full disk) and a later one glued onto it, as a loom without the undo left it
    let glued = "{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"te{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"lost\"}}\n";
    std::fs::write(&log, format!("{committed}{glued}")).unwrap();
    let (texts, stderr) = history(&s, "second");
    assert!(
        stderr.contains("session.jsonl")
            && stderr.contains(&format!("its {} bytes were cut off", glued.len())),
        "{stderr}"
    );
    assert_eq!(texts, ["first", "second"], "{stderr}");
    let after = std::fs::read_to_string(&log).unwrap();
    assert!(after.starts_with(&committed), "{after}");
    assert!(
        after
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{after}"
    );

    // a line cut short (no newline): the same, and the next append starts on a clean line
    let before = std::fs::read_to_string(&log).unwrap();
    let cut = "{\"sessionUpdate\":\"agent_mess";
    std::fs::write(&log, format!("{before}{cut}")).unwrap();
    let (texts, stderr) = history(&s, "third");
    assert!(
        stderr.contains(&format!("its {} bytes were cut off", cut.len())),
        "{stderr}"
    );
    assert_eq!(texts, ["first", "second", "third"]);

    // the control: a clean log boots without a note
    let (_, stderr) = history(&s, "fourth");
    assert!(!stderr.contains("cut off"), "{stderr}");

    // a bad line with committed lines after it is not a tail: an error naming it, nothing changed
    let clean = std::fs::read_to_string(&log).unwrap();
    let broken = format!("{glued}{clean}");
    std::fs::write(&log, &broken).unwrap();
    s.loom(&["prompt", "agent.toml", "fifth"])
        .expect_code(1)
        .stderr_has("session.jsonl:1: not a session event");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), broken);
}
