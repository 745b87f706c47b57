//! Managed processes through `loom prompt`, in the sandbox: `bash` with `background = true` returns an id at once,
//! `process_output` polls it, `process_kill` ends it, and the ones still running when the session ends are killed
//! (a marker the command would write later never appears).

use loom_tests::Scratch;

use super::{results, sandbox_available, updates};

#[test]
fn background_commands_are_polled_killed_and_ended_with_the_session() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        r#"[agent]
name = "processes"

[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "echo started > started.txt; echo hello; sleep 3; echo late > late.txt", background = true } } },
  { call = { tool = "process_output", input = { id = 1, wait_ms = 10000 } } },
  { call = { tool = "bash", input = { command = "sleep 30", background = true } } },
  { call = { tool = "process_kill", input = { id = 2 } } },
  { call = { tool = "process_output", input = { id = 7 } } },
  { say = "leaving" },
]]

[session]
provider = "in-memory"

[tools]
bash = "builtin"
process_output = "builtin"
process_kill = "builtin"

[capabilities]
bash = { commands = "*", paths = ["./"] }
process_output = "*"
process_kill = "*"
"#,
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let ups = updates(&run);
    let r = results(&ups);
    assert_eq!(r.len(), 5, "{r:#?}");
    assert!(
        r[0].1.starts_with("started process 1 in the background"),
        "{r:#?}"
    );
    assert!(
        r[1].1.contains("process 1 (`echo started")
            && r[1].1.contains(": running,")
            && r[1].1.contains("hello"),
        "{r:#?}"
    );
    assert!(r[3].1.contains("process 2 (`sleep 30`): killed"), "{r:#?}");
    assert_eq!(r[4].0, "failed", "{r:#?}");
    assert!(
        r[4].1
            .contains("there is no process 7 (the processes are 1, 2)"),
        "{r:#?}"
    );
    // the session ended with process 1 still running: it was killed, and said so
    assert!(
        ups.iter().any(|u| u["text"]
            .as_str()
            .is_some_and(|t| t.contains("1 background process(es) still running were killed"))),
        "{ups:#?}"
    );
    assert!(s.path().join("started.txt").exists());
    // what it would have written three seconds in never comes
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !s.path().join("late.txt").exists(),
        "the background process outlived the session"
    );
}
