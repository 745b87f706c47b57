//! `loom job run` cells as an engine runs them (issue 24 item 8, "many local processes standing in for indexes"):
//! parallel processes on one data home keep their runs apart, `collect` merges them, a retried cell resumes its
//! session, and SIGTERM (a Job's deadline) ends a cell with 130, its result and session written.

use std::process::{Child, Command, Stdio};

use loom_tests::{loom_bin, Scratch};

use super::sandbox_available;

const ECHO: &str = "[agent]\nname = \"fleet\"\n\n[harness]\nprovider = \"test\"\necho = true\n\n[session]\nprovider = \"file\"\n";

/// `loom job run args…` started in `s` with its data home, plus `env`.
fn start(s: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(loom_bin());
    cmd.arg("job")
        .arg("run")
        .args(args)
        .current_dir(s.path())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(key) {
            cmd.env(key, v);
        }
    }
    cmd.env("LOOM_DATA_HOME", s.path().join(".loom-data"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn result(s: &Scratch, id: &str) -> serde_json::Value {
    let p = s.path().join("out").join(id).join("result.json");
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[test]
fn cells_as_parallel_processes_keep_their_runs_apart_and_collect_merges_them() {
    let s = Scratch::new();
    s.write("agent.toml", ECHO);
    let items: String = (0..8)
        .map(|i| format!("{{\"id\": \"cell-{i}\", \"prompt\": \"prompt of item {i}\"}}\n"))
        .collect();
    s.write("items.jsonl", &items);
    // two at a time, as `parallelism: 2` would; odd indexes from JOB_COMPLETION_INDEX as a Kubernetes pod gets it
    for pair in [[0, 1], [2, 3], [4, 5], [6, 7]] {
        let children: Vec<Child> = pair
            .iter()
            .map(|&i| {
                let index = i.to_string();
                if i % 2 == 0 {
                    start(
                        &s,
                        &["--items", "items.jsonl", "--index", &index, "--out", "out"],
                        &[],
                    )
                } else {
                    start(
                        &s,
                        &["--items", "items.jsonl", "--out", "out"],
                        &[("JOB_COMPLETION_INDEX", &index)],
                    )
                }
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    for i in 0..8 {
        let r = result(&s, &format!("cell-{i}"));
        assert_eq!(
            (r["index"].as_u64(), r["exit"].as_i64()),
            (Some(i), Some(0)),
            "{r:#}"
        );
        assert_eq!(r["answer"], format!("prompt of item {i}"));
        // each cell's session holds its own prompt and no other cell's
        let log =
            std::fs::read_to_string(s.path().join(format!("out/cell-{i}/state/session.jsonl")))
                .unwrap();
        for j in 0..8 {
            assert_eq!(
                log.contains(&format!("prompt of item {j}\"")),
                i == j,
                "cell {i}'s session and item {j}:\n{log}"
            );
        }
    }
    let run = s.loom(&[
        "job",
        "collect",
        "out",
        "--items",
        "items.jsonl",
        "--format",
        "json",
    ]);
    run.expect_code(0);
    let report: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(report["summary"]["ok"], 8, "{report:#}");
    assert_eq!(report["summary"]["missing"], 0);

    // a retry of a cell (the same run id) resumes its session rather than starting over
    let again = start(
        &s,
        &["--items", "items.jsonl", "--index", "3", "--out", "out"],
        &[],
    );
    assert_eq!(again.wait_with_output().unwrap().status.code(), Some(0));
    let log = std::fs::read_to_string(s.path().join("out/cell-3/state/session.jsonl")).unwrap();
    assert_eq!(
        log.matches("prompt of item 3\"").count(),
        4,
        "prompt and echo, twice:\n{log}"
    );
}

/// A Job's `activeDeadlineSeconds` (or a node drain) sends SIGTERM: the turn ends cancelled, the cell exits 130 and
/// leaves its result and its flushed session behind; collect reports it as cancelled.
#[test]
fn sigterm_ends_a_cell_with_130_and_its_result_written() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        "[agent]\nname = \"fleet\"\n\n[harness]\nprovider = \"test\"\nscript = [[{ call = { tool = \"bash\", input = { command = \"sleep 60\" } } }, { say = \"never\" }]]\n\n\
         [session]\nprovider = \"file\"\n\n[tools]\nbash = \"builtin\"\n\n[capabilities]\nbash = { commands = [\"sleep\"], paths = [\"./\"] }\n",
    );
    s.write(
        "items.jsonl",
        "{\"id\": \"slow\", \"prompt\": \"wait for it\"}\n",
    );
    let mut child = start(
        &s,
        &["--items", "items.jsonl", "--index", "0", "--out", "out"],
        &[],
    );
    let updates = s.path().join("out/slow/updates.jsonl");
    let mut waited = 0;
    while !std::fs::read_to_string(&updates)
        .is_ok_and(|u| u.contains("\"sessionUpdate\":\"tool_call\""))
    {
        assert!(waited < 600, "the call never started");
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the cell ended early ({status}):\n{}",
                std::fs::read_to_string(&updates).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = result(&s, "slow");
    assert_eq!(
        (r["exit"].as_i64(), r["outcome"].as_str()),
        (Some(130), Some("cancelled")),
        "{r:#}"
    );
    let log = std::fs::read_to_string(s.path().join("out/slow/state/session.jsonl")).unwrap();
    assert!(
        log.contains("wait for it") && log.contains("sleep 60"),
        "{log}"
    );
    s.loom(&["job", "collect", "out"])
        .expect_code(1)
        .stdout_has("exit 130 cancelled");
}

/// The results directory is an authority file of every cell's agent: with write grants over the working directory
/// that holds it, neither a file tool nor a confined command can forge another cell's result.
#[test]
fn a_cells_agent_cannot_rewrite_the_results() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    s.write("echo.toml", ECHO);
    s.write(
        "agent.toml",
        "[agent]\nname = \"forger\"\n\n[harness]\nprovider = \"test\"\nscript = [[\
         { call = { tool = \"bash\", input = { command = \"echo forged > out/honest/result.json\" } } }, \
         { call = { tool = \"write_file\", input = { path = \"out/honest/result.json\", content = \"forged\" } } }, \
         { call = { tool = \"bash\", input = { command = \"echo fine > mine.txt\" } } }, \
         { say = \"done\" }]]\n\n[session]\nprovider = \"in-memory\"\n\n[tools]\nbash = \"builtin\"\nwrite_file = \"builtin\"\n\n\
         [capabilities]\nbash = { commands = \"*\", paths = [\"./\"] }\nwrite_file = { paths = [\"./\"] }\n",
    );
    s.write(
        "items.jsonl",
        "{\"id\": \"honest\", \"prompt\": \"a\"}\n{\"id\": \"forger\", \"prompt\": \"b\"}\n",
    );
    let honest = start(
        &s,
        &[
            "echo.toml",
            "--items",
            "items.jsonl",
            "--index",
            "0",
            "--out",
            "out",
        ],
        &[],
    );
    assert_eq!(honest.wait_with_output().unwrap().status.code(), Some(0));
    let before = std::fs::read_to_string(s.path().join("out/honest/result.json")).unwrap();
    let forger = start(
        &s,
        &["--items", "items.jsonl", "--index", "1", "--out", "out"],
        &[],
    );
    let out = forger.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("out/honest/result.json")).unwrap(),
        before
    );
    let updates = std::fs::read_to_string(s.path().join("out/forger/updates.jsonl")).unwrap();
    let results: Vec<serde_json::Value> = updates
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .collect();
    assert_eq!(results.len(), 3, "{updates}");
    assert_eq!(results[0]["status"], "failed", "{}", results[0]);
    assert_eq!(results[1]["status"], "failed", "{}", results[1]);
    assert!(
        results[1].to_string().contains("job results"),
        "{}",
        results[1]
    );
    // the control: the rest of the working directory is the agent's
    assert_eq!(results[2]["status"], "completed", "{}", results[2]);
    assert_eq!(
        std::fs::read_to_string(s.path().join("mine.txt")).unwrap(),
        "fine\n"
    );
}
