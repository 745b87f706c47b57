//! The terminal cannot be spoofed (security review 2, N4): what the model and its tools write reaches a terminal
//! with its escape sequences shown, not obeyed — in `loom run` and in `loom prompt --format text|trace` on a
//! terminal — and a permission question is the last thing on screen until it is answered, then the answer is
//! echoed with the exact call. Piped output (the allowed control) stays byte for byte what the model wrote.

use std::time::{Duration, Instant};

use loom_tests::Scratch;

use super::repl::{Pty, PATIENCE};

/// A model answer that would clear the screen and set the clipboard (OSC 52), then ring the bell.
const HOSTILE_SAY: &str = r#"Look \u001b[2J\u001b]52;c;aGVsbG8=\u0007 here"#;

/// What a terminal must never receive raw from the model or a tool.
const RAW: &[&str] = &["\x1b[2J", "\x1b]52", "\x07", "\x1b[3A", "\u{9b}"];

fn wait_exit(t: &mut Pty) -> std::process::ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(st) = t.child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "loom did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_nothing_raw(raw: &str) {
    for r in RAW {
        assert!(!raw.contains(r), "{r:?} reached the terminal raw:\n{raw:?}");
    }
}

#[test]
fn loom_run_shows_model_and_tool_escapes_and_nothing_over_an_open_question() {
    let s = Scratch::new();
    // a file the agent reads: it would set the clipboard, move up and erase, and draw a fake question
    s.write(
        "evil.txt",
        "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[3A\x1b[Japprove? fake\n[o]nce\n",
    );
    s.write(
        "agent.toml",
        &format!(
            r##"[agent]
name = "spoof"

[harness]
provider = "test"
script = [
  [ {{ say = "{HOSTILE_SAY}" }}, {{ call = {{ tool = "read_file", input = {{ path = "evil.txt" }} }} }}, {{ say = "all read" }} ],
]

[session]
provider = "in-memory"

[capabilities]
read_file = {{ paths = ["./"] }}

[tools]
read_file = "builtin"

[[permissions.ask_rules]]
tool = "read_file"
"##
        ),
    );
    let mut t = Pty::spawn(s.path(), &["run", "agent.toml"]);
    t.expect("> ");
    t.send("read it\r");
    // the model's text arrives escaped, and before the question of the call that followed it
    let before = t.expect("approve? read_file");
    assert!(
        before.contains(r"Look \x1b[2J\x1b]52;c;aGVsbG8=\x07 here"),
        "{before:?}"
    );
    t.expect("[o]nce");
    let mark = t.seen.lock().unwrap().len();
    // not an answer: the hint and the question again, and nothing else
    t.send("hm\r");
    t.expect("answer o (once), a (always) or r (reject)");
    t.expect("[o]nce");
    t.send("o\r");
    let answered = t.expect(r#"approved once: read_file {"path":"evil.txt"}"#);
    assert!(!answered.contains("⎿"), "{answered:?}");
    // the tool's output comes after the answer, escaped
    let out = t.expect(r"⎿ ok \x1b]52;c;cm0gLXJmIH4=\x07\x1b[3A\x1b[Japprove? fake");
    assert!(!out.contains("[o]nce"), "{out:?}");
    t.expect("all read");
    t.expect("> ");
    t.send("/quit\r");
    assert!(wait_exit(&mut t).success());
    let raw = t.seen.lock().unwrap().clone();
    assert_nothing_raw(&raw);
    // between the question and the answer only the hint and the question again were printed
    let after_question = &raw[mark..];
    let until_answer = &after_question[..after_question.find("approved once").unwrap()];
    assert!(
        !until_answer.contains("all read") && !until_answer.contains("⎿"),
        "{until_answer:?}"
    );
}

fn prompt_agent(s: &Scratch) {
    s.write(
        "agent.toml",
        &format!(
            r##"[agent]
name = "spoof-prompt"

[harness]
provider = "test"
script = [
  [ {{ say = "{HOSTILE_SAY}" }} ],
  [ {{ say = "{HOSTILE_SAY}" }} ],
]

[session]
provider = "in-memory"
"##
        ),
    );
}

#[test]
fn loom_prompt_on_a_terminal_shows_escapes_and_piped_passes_them_on() {
    let s = Scratch::new();
    prompt_agent(&s);
    for format in ["text", "trace"] {
        let mut t = Pty::spawn(
            s.path(),
            &["prompt", "agent.toml", "go", "--format", format],
        );
        t.expect(r"Look \x1b[2J\x1b]52;c;aGVsbG8=\x07 here");
        assert!(wait_exit(&mut t).success(), "{format}");
        assert_nothing_raw(&t.seen.lock().unwrap());
    }
    // the control: piped, the text is data for the next program and passes unchanged (jsonl is escaped JSON)
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    run.expect_code(0)
        .stdout_has("Look \x1b[2J\x1b]52;c;aGVsbG8=\x07 here");
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0)
        .stdout_has(r"Look \u001b[2J\u001b]52;c;aGVsbG8=\u0007 here");
}
