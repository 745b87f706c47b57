//! Background agents through the real binary with the scripted harness: `background_spawn` returns an id at once,
//! `background_message` steers a running child (its text reaches the child's next step), `background_list` shows
//! the status and, once finished, the report, which also enters the parent's history at its next step boundary (a
//! notice says so); a finished child refuses messages and kills; `background_kill` cancels one; the session's end
//! cancels what still runs; a report that arrives while the parent is idle reaches its next turn.
//!
//! The child (profile `waiter`, on the named harness `slow`) runs `bash`: it marks `started`, then waits for `go`
//! (which the parent or the test creates), then says back the latest user message of its own history — the task, or
//! the steering message when one arrived.

use loom_tests::Scratch;

use super::repl::Pty;
use super::{results, sandbox_available, updates};

/// The child's command: it says it started, waits for `go`, then leaves `outlived` (seen after loom ended, it outlived
/// it).
const CHILD_WAITS: &str = r#"{ call = { tool = "bash", input = { command = "touch started && while [ ! -f go ]; do sleep 0.05; done; touch outlived" } } }"#;
const PARENT_WAITS: &str = r#"{ call = { tool = "bash", input = { command = "while [ ! -f started ]; do sleep 0.05; done" } } }"#;
const SPAWN: &str = r#"{ call = { tool = "background_spawn", input = { agent = "waiter", task = "wait for go" } } }"#;
const LIST_WAIT: &str = r#"{ call = { tool = "background_list", input = { wait_ms = 60000 } } }"#;

/// A lead agent whose turns are `turns` (each a list of TOML step tables), with bash and the four background tools,
/// and the `waiter` profile.
fn lead(turns: &[&[&str]]) -> Scratch {
    let s = Scratch::new();
    let script: Vec<String> = turns
        .iter()
        .map(|t| format!("[\n  {}\n]", t.join(",\n  ")))
        .collect();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"lead\"\n\n[harness]\nprovider = \"test\"\nscript = [\n{}\n]\n\n\
             [harnesses.slow]\nprovider = \"test\"\nscript = [[ {CHILD_WAITS}, {{ echo = true }} ]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\nbash = \"builtin\"\nbackground_spawn = \"builtin\"\n\
             background_list = \"builtin\"\nbackground_message = \"builtin\"\nbackground_kill = \"builtin\"\n\n\
             [capabilities]\nbash = {{ commands = \"*\", paths = [\"./\"] }}\n\
             background_spawn = {{ agents = [\"waiter\"] }}\nbackground_list = \"*\"\n\
             background_message = \"*\"\nbackground_kill = \"*\"\n",
            script.join(",\n")
        ),
    );
    s.write(
        ".loom/agents/waiter.md",
        "---\nname: waiter\ndescription: Waits for go\nmodel: slow\ntools: [bash]\n---\nWait, then answer.\n",
    );
    s
}

fn notices(ups: &[serde_json::Value]) -> Vec<String> {
    ups.iter()
        .filter(|u| u["frame"] == "notice")
        .filter_map(|u| u["text"].as_str().map(str::to_string))
        .collect()
}

fn user_texts(ups: &[serde_json::Value]) -> Vec<String> {
    ups.iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_background_agent_is_steered_lists_its_report_and_reaches_the_parent() {
    if !sandbox_available() {
        return;
    }
    let s = lead(&[&[
        SPAWN,
        PARENT_WAITS,
        r#"{ call = { tool = "background_message", input = { id = "bg-1", message = "steered: say this" } } }"#,
        r#"{ call = { tool = "background_list", input = {} } }"#,
        r#"{ call = { tool = "bash", input = { command = "touch go" } } }"#,
        LIST_WAIT,
        r#"{ call = { tool = "background_message", input = { id = "bg-1", message = "late" } } }"#,
        r#"{ call = { tool = "background_kill", input = { id = "bg-1" } } }"#,
        r#"{ call = { tool = "background_spawn", input = { agent = "nobody", task = "x" } } }"#,
        r#"{ say = "done" }"#,
    ]]);
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let ups = updates(&run);
    let r = results(&ups);
    assert_eq!(r.len(), 9, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert!(
        r[0].1
            .starts_with("started bg-1 (waiter) in the background"),
        "{r:#?}"
    );
    assert_eq!(
        r[2],
        (
            "completed".to_string(),
            "sent to bg-1: it enters that agent's conversation at its next step (if it finishes first, it never \
             reads it; its report shows what it did)"
                .to_string()
        )
    );
    assert!(
        r[3].1
            .starts_with("bg-1 (waiter): running — task: wait for go"),
        "{r:#?}"
    );
    // the steering message reached the child's next step: its answer is that message
    assert!(
        r[5].1
            .starts_with("bg-1 (waiter): complete — task: wait for go\nreport:\nsteered: say this"),
        "{r:#?}"
    );
    assert_eq!(r[6].0, "failed", "{r:#?}");
    assert!(
        r[6].1
            .contains("bg-1 has finished (complete); nothing was sent"),
        "{r:#?}"
    );
    assert!(
        r[7].1.contains("bg-1 has finished already (complete)"),
        "{r:#?}"
    );
    assert!(
        r[8].1
            .contains("no profile \"nobody\" is granted (granted: waiter)"),
        "{r:#?}"
    );
    // the report entered the parent's history once, marked as the child's output, and the user was told
    let reports: Vec<String> = user_texts(&ups)
        .into_iter()
        .filter(|t| t.starts_with("[report of background agent bg-1 (profile waiter), complete:"))
        .collect();
    assert_eq!(reports.len(), 1, "{ups:#?}");
    // fenced by a mark the child never saw, opened and closed around its text
    let fence = reports[0]
        .split_once("\n<<")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map(|(fence, _)| fence.to_string())
        .unwrap_or_default();
    assert!(
        fence.starts_with("report-") && fence.len() == 23,
        "{reports:?}"
    );
    assert!(
        reports[0].ends_with(&format!("\nsteered: say this\n{fence}>>")),
        "{reports:?}"
    );
    assert!(
        notices(&ups).contains(&"background agent bg-1 (waiter) finished: complete".to_string()),
        "{:?}",
        notices(&ups)
    );
}

#[test]
fn background_kill_cancels_one_and_the_sessions_end_cancels_the_rest() {
    if !sandbox_available() {
        return;
    }
    let s = lead(&[&[
        SPAWN,
        PARENT_WAITS,
        r#"{ call = { tool = "background_kill", input = { id = "bg-1" } } }"#,
        LIST_WAIT,
        SPAWN,
        r#"{ say = "leaving bg-2 running" }"#,
    ]]);
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let ups = updates(&run);
    let r = results(&ups);
    assert_eq!(r.len(), 5, "{r:#?}");
    assert_eq!(
        r[2].1,
        "cancelling bg-1: it stops at its next step and its report follows"
    );
    assert!(
        r[3].1
            .starts_with("bg-1 (waiter): killed — task: wait for go"),
        "{r:#?}"
    );
    assert!(r[4].1.starts_with("started bg-2 (waiter)"), "{r:#?}");
    let n = notices(&ups);
    assert!(
        n.contains(&"background agent bg-1 (waiter) finished: killed".to_string()),
        "{n:?}"
    );
    assert!(
        n.contains(
            &"the session ended: 1 background agent(s) still running were cancelled".to_string()
        ),
        "{n:?}"
    );
    // nothing of the children outlives loom: no waiting loop is left to see `go` (one would leave `outlived` within
    // 50 ms of it)
    s.write("go", "");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !s.path().join("outlived").exists(),
        "a child's command outlived loom"
    );
    let ps = std::process::Command::new("pgrep")
        .args(["-f", "while \\[ ! -f go \\]"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&ps.stdout).lines().any(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(s.path()))
        }),
        "a child's command is still running"
    );
}

/// A report that arrives after the parent's last step (the child finishes while the parent waits for the user)
/// reaches the parent's next turn, with the notice shown in `loom run`.
#[test]
fn a_report_that_arrives_while_the_parent_is_idle_reaches_its_next_turn() {
    if !sandbox_available() {
        return;
    }
    let s = lead(&[
        &[SPAWN, r#"{ say = "spawned it" }"#],
        // no step boundary before the answer: the report can only arrive at the turn's start
        &[r#"{ say = "second turn over" }"#],
    ]);
    let mut t = Pty::spawn(s.path(), &["run", "agent.toml"]);
    t.expect("> ");
    t.send("start one\r");
    t.expect("spawned it");
    let first = t.expect("> ");
    assert!(!first.contains("finished: complete"), "{first}");
    // the child cannot finish before this: it waits for `go`; then it finishes while the parent waits for the user
    s.write("go", "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !s.path().join("outlived").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        s.path().join("outlived").exists(),
        "the child never finished its command"
    );
    // its last step (a scripted answer) takes no time; this leaves it ample room to end
    std::thread::sleep(std::time::Duration::from_millis(500));
    t.send("and now?\r");
    let second = t.expect("second turn over");
    assert!(
        second.contains("background agent bg-1 (waiter) finished: complete"),
        "{second}"
    );
    t.expect("> ");
    let status = t.quit();
    assert!(status.success(), "{status:?}");
}

/// A profile never gets the background tools, whatever it lists: a child cannot start children of its own.
#[test]
fn a_child_never_gets_the_background_tools() {
    let s = lead(&[&[r#"{ say = "hi" }"#]]);
    s.write(
        ".loom/agents/nester.md",
        "---\nname: nester\ndescription: Would nest\n---\nNest.\n",
    );
    let audit = s.loom(&["audit", "agent.toml"]);
    audit.expect_code(0).stdout_has(
        "subagent profile nester (project): contained — tools bash with this agent's grants",
    );
}
