//! Run-scoped state (issue 24 item 3) through the real binary: a run id (`--run-id`, `LOOM_RUN_ID`, or the
//! engine's `GITHUB_RUN_ID` / `JOB_COMPLETION_INDEX`) gives a run storage of its own; a second writer on a `file`
//! session log fails at once with a clear message; a run's state moves to another machine as files.

use loom_tests::Scratch;

use super::repl::Pty;
use super::updates;

/// A `file` session in the agent's storage (no `path`): where a run id puts it.
const AGENT: &str = r#"[agent]
name = "runner"

[harness]
provider = "test"
echo = true

[session]
provider = "file"
"#;

/// The user texts of the history the model is about to see, for `loom prompt` with `extra` arguments and `env`.
fn seen(s: &Scratch, prompt: &str, extra: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec![
        "prompt",
        "agent.toml",
        prompt,
        "--format",
        "jsonl",
        "--emit-preamble",
    ];
    args.extend_from_slice(extra);
    let run = s.loom_env(&args, env);
    run.expect_code(0);
    updates(&run)[0]["preamble"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["sessionUpdate"] == "user_message_chunk")
        .filter_map(|e| e["content"]["text"].as_str().map(str::to_string))
        .collect()
}

fn agent_dir(s: &Scratch) -> std::path::PathBuf {
    s.path().join(".loom-data/agents/runner")
}

#[test]
fn each_run_keeps_its_own_session_and_the_same_run_resumes() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    assert_eq!(seen(&s, "one", &["--run-id", "r1"], &[]), ["one"]);
    // another run starts empty: nothing of r1 leaks in
    assert_eq!(seen(&s, "two", &["--run-id", "r2"], &[]), ["two"]);
    // the same run resumes (the flag and the variable are the same run id)
    assert_eq!(
        seen(&s, "three", &[], &[("LOOM_RUN_ID", "r1")]),
        ["one", "three"]
    );
    assert!(agent_dir(&s).join("runs/r1/session.jsonl").is_file());
    assert!(agent_dir(&s).join("runs/r2/session.jsonl").is_file());
    // without a run id: the agent's one shared state, as before
    assert_eq!(seen(&s, "four", &[], &[]), ["four"]);
    assert!(agent_dir(&s).join("session.jsonl").is_file());
}

#[test]
fn the_engines_job_ids_scope_a_run() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    let gha = [("GITHUB_RUN_ID", "4242"), ("GITHUB_RUN_ATTEMPT", "2")];
    seen(&s, "a", &[], &gha);
    assert!(agent_dir(&s).join("runs/gh-4242-2/session.jsonl").is_file());
    let k8s = [("JOB_COMPLETION_INDEX", "7")];
    seen(&s, "b", &[], &k8s);
    assert!(agent_dir(&s).join("runs/k8s-7/session.jsonl").is_file());
    // --run-id wins over the engine's ids
    seen(&s, "c", &["--run-id", "mine"], &gha);
    assert!(agent_dir(&s).join("runs/mine/session.jsonl").is_file());
}

#[test]
fn a_run_id_that_could_climb_is_refused() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    s.loom(&["prompt", "agent.toml", "hi", "--run-id", "../x"])
        .expect_code(2)
        .stderr_has("a run id is 1 to 64 characters");
    s.loom_env(
        &["prompt", "agent.toml", "hi"],
        &[("JOB_COMPLETION_INDEX", "../../etc")],
    )
    .expect_code(1)
    .stderr_has("JOB_COMPLETION_INDEX = \"../../etc\" cannot name a run");
    assert!(!s.path().join(".loom-data/agents/etc").exists());
    assert!(!agent_dir(&s).join("runs").exists(), "nothing was created");
}

#[test]
fn a_second_writer_on_a_session_log_fails_at_once() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    // the first writer: an interactive session, open until it quits
    let mut first = Pty::spawn(s.path(), &["run", "agent.toml", "--run-id", "shared"]);
    first.expect("> ");
    let log = agent_dir(&s).join("runs/shared/session.jsonl");
    assert!(log.is_file(), "the session log is open");
    let second = s.loom(&["prompt", "agent.toml", "hi", "--run-id", "shared"]);
    second
        .expect_code(1)
        .stderr_has("session.jsonl: another loom process is writing this session log")
        .stderr_has("--run-id or LOOM_RUN_ID");
    // the control: another run of the same agent is not blocked
    s.loom(&["prompt", "agent.toml", "hi", "--run-id", "other"])
        .expect_code(0);
    first.send("/quit\r");
    assert!(first.child.wait().unwrap().success());
    // once the first has ended, the log is free again and holds nothing of the refused writer
    assert_eq!(seen(&s, "again", &["--run-id", "shared"], &[]), ["again"]);
}

#[test]
fn a_runs_state_moves_to_another_machine_as_files() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    assert_eq!(
        seen(&s, "before the move", &["--run-id", "job-1"], &[]),
        ["before the move"]
    );
    // "another machine": a fresh data home that receives the run's directory as files (a restored artifact)
    let there = s.path().join("elsewhere");
    let from = agent_dir(&s).join("runs/job-1");
    let to = there.join("agents/runner/runs/job-1");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let home = there.display().to_string();
    assert_eq!(
        seen(
            &s,
            "after",
            &["--run-id", "job-1"],
            &[("LOOM_DATA_HOME", &home)]
        ),
        ["before the move", "after"]
    );
}
