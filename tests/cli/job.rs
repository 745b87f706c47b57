//! `loom job plan | run | collect` (issue 24 items 6 and 8) through the real binary: the generated GitHub Actions
//! matrix and Kubernetes objects as golden files, checked against the engines' own schemas offline; the examples'
//! checked-in files are what the generator writes; bad input gets a clear error and an exit code from the list, with
//! nothing half-written.

use std::path::{Path, PathBuf};
use std::process::Command;

use loom_tests::{workspace_root, Scratch};

fn golden(name: &str) -> PathBuf {
    workspace_root().join("tests/cli/golden").join(name)
}

/// Compares `actual` with the golden file `name` (`LOOM_UPDATE_GOLDEN=1` rewrites it).
fn check_golden(name: &str, actual: &str) {
    let path = golden(name);
    if std::env::var_os("LOOM_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        actual,
        want,
        "{} differs from the generator's output (LOOM_UPDATE_GOLDEN=1 rewrites it after review)",
        path.display()
    );
}

/// A tool of tests/job-tools' venv (installed by .ci/run), or None after printing why the check is skipped.
fn job_tool(name: &str) -> Option<PathBuf> {
    let p = workspace_root()
        .join("tests/job-tools/.venv/bin")
        .join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {} is not installed; .ci/run installs tests/job-tools/requirements.txt into that venv",
            p.display()
        );
        None
    }
}

/// The YAML stream at `path` as JSON, read by PyYAML (the venv's, else the system's python3).
fn yaml_as_json(path: &Path) -> serde_json::Value {
    let venv = workspace_root().join("tests/job-tools/.venv/bin/python");
    let python = if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    };
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "PyYAML cannot read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const K8S_ARGS: &[&str] = &[
    "--emit",
    "k8s-indexed-job",
    "--name",
    "crate-notes",
    "--image",
    "ghcr.io/example/loom-agent:1",
    "--secret",
    "loom-provider-keys",
    "--baseline",
    "/opt/agent/baseline.toml",
    "--require-tier",
    "b",
];

#[test]
fn the_gha_matrix_is_golden_and_shards_past_256_cells() {
    let s = Scratch::new();
    let items = golden("job-items.jsonl");
    let run = s.loom(&[
        "job",
        "plan",
        items.to_str().unwrap(),
        "--emit",
        "gha-matrix",
    ]);
    run.expect_code(0);
    check_golden("job-gha-matrix.json", &run.stdout());
    // 600 items: at most 256 cells, each index in exactly one cell, in order
    let many: String = (0..600)
        .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
        .collect();
    s.write("many.jsonl", &many);
    let run = s.loom(&["job", "plan", "many.jsonl", "--emit", "gha-matrix"]);
    run.expect_code(0);
    let m: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let cells = m["include"].as_array().unwrap();
    assert!(cells.len() <= 256, "{} cells", cells.len());
    let mut next = 0;
    for c in cells {
        assert_eq!(c["index"], next, "{c}");
        next += c["count"].as_u64().unwrap();
    }
    assert_eq!(next, 600);
}

#[test]
fn the_k8s_job_is_golden_reads_back_as_built_and_passes_the_kubernetes_schema() {
    let s = Scratch::new();
    let items = golden("job-items.jsonl");
    let mut args = vec!["job", "plan", items.to_str().unwrap()];
    args.extend_from_slice(K8S_ARGS);
    let run = s.loom(&args);
    run.expect_code(0);
    check_golden("job-k8s.yaml", &run.stdout());
    let docs = yaml_as_json(&golden("job-k8s.yaml"));
    let (cm, job) = (&docs[0], &docs[1]);
    // the items file is in the ConfigMap byte for byte, the strings YAML 1.1 would read as something else included
    assert_eq!(
        cm["data"]["items.jsonl"],
        std::fs::read_to_string(&items).unwrap()
    );
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 3);
    assert_eq!(job["spec"]["backoffLimitPerIndex"], 2);
    let rules = job["spec"]["podFailurePolicy"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["action"], "FailIndex");
    assert_eq!(
        rules[0]["onExitCodes"]["values"],
        serde_json::json!([1, 2, 3, 69]),
        "deterministic failures fail the index; 75 and 130 are retried"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&args[..3], ["job", "run", "/opt/agent/agent.toml"]);
    assert!(args.windows(2).any(|w| w == ["--require-tier", "b"]));
    // secrets are referenced, never inlined
    assert!(c["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "LOOM_SECRETS_DIR"));
    assert!(!run.stdout().contains("stringData") && !run.stdout().contains("kind: Secret"));
    let Some(validate) = job_tool("kubernetes-validate") else {
        return;
    };
    for version in ["1.33.0", "1.37.0"] {
        let out = Command::new(&validate)
            .args(["--strict", "-k", version])
            .arg(golden("job-k8s.yaml"))
            .arg(workspace_root().join("examples/k8s/job.yaml"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubernetes-validate {version}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // the check can fail: a Job with a key Kubernetes does not know is refused
    let bad = s.write(
        "bad.yaml",
        &std::fs::read_to_string(golden("job-k8s.yaml"))
            .unwrap()
            .replace("backoffLimitPerIndex: 2", "backoffLimitPerIndx: 2"),
    );
    let out = Command::new(&validate)
        .args(["--strict", "-k", "1.33.0"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a misspelt key passed the schema check"
    );
}

#[test]
fn the_examples_workflows_pass_githubs_workflow_schema() {
    let Some(check) = job_tool("check-jsonschema") else {
        return;
    };
    let root = workspace_root();
    let files = [
        root.join("examples/ci-matrix/.github/workflows/loom-matrix.yml"),
        root.join("examples/ci-gate/.github/workflows/loom-ceiling.yml"),
    ];
    let out = Command::new(&check)
        .args(["--builtin-schema", "vendor.github-workflows"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // the check can fail: a job without runs-on is refused
    let s = Scratch::new();
    let bad = s.write(
        "bad.yml",
        &std::fs::read_to_string(&files[0])
            .unwrap()
            .replacen("runs-on:", "runs_on:", 1),
    );
    let out = Command::new(&check)
        .args(["--builtin-schema", "vendor.github-workflows"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a broken workflow passed");
}

/// The Dockerfile, the k8s generator and the examples agree: the image's user is the pod's, the binaries it copies
/// are the workspace's, the default agent folder exists.
#[test]
fn the_dockerfile_matches_what_the_job_and_the_workspace_name() {
    let root = workspace_root();
    let docker = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    for stage in ["AS build", "AS base", "AS with-bwrap", "AS tier-b"] {
        assert!(docker.contains(stage), "no stage {stage:?}");
    }
    // the last stage is the default build: tier B works under a default container seccomp profile
    let last = docker.rfind("FROM ").unwrap();
    assert!(docker[last..].starts_with("FROM base AS tier-b"));
    assert!(!docker[last..].contains("bubblewrap"));
    assert_eq!(docker.matches("USER 10001:10001").count(), 2);
    let yaml = std::fs::read_to_string(golden("job-k8s.yaml")).unwrap();
    assert!(yaml.contains("runAsUser: 10001"));
    for bin in ["loom", "loom-sandbox-exec", "loom-shim"] {
        assert!(
            docker.contains(&format!("target/release/{bin}")),
            "the image lacks {bin}"
        );
    }
    let agent = docker
        .lines()
        .find_map(|l| l.strip_prefix("ARG AGENT="))
        .unwrap();
    assert!(root.join(agent).join("agent.toml").is_file(), "{agent}");
    assert!(docker.contains("loom install --frozen"));
    // no secret is ever baked in
    assert!(!docker.contains("API_KEY"));
}

/// `loom job run --items items.jsonl --index INDEX --out OUT EXTRA…` in `s`.
fn cell(s: &Scratch, index: &str, out: &str, extra: &[&str]) -> loom_tests::Run {
    let mut args = vec![
        "job",
        "run",
        "--items",
        "items.jsonl",
        "--index",
        index,
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    s.loom(&args)
}

#[test]
fn bad_items_and_arguments_get_clear_errors_and_codes_from_the_list() {
    let s = Scratch::new();
    s.write("agent.toml", "[agent]\nname = \"j\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n");
    s.write(
        "bad.jsonl",
        "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"apiKey\": \"x\"}\n",
    );
    for args in [
        vec!["job", "plan", "bad.jsonl", "--emit", "gha-matrix"],
        vec![
            "job",
            "run",
            "--items",
            "bad.jsonl",
            "--index",
            "0",
            "--out",
            "out",
        ],
    ] {
        s.loom(&args)
            .expect_code(1)
            .stderr_has("bad.jsonl: line 2: unknown key \"apiKey\"")
            .stderr_has("secrets never go in items");
    }
    assert!(
        !s.path().join("out").exists(),
        "a malformed items file wrote results"
    );
    s.write("items.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n");
    cell(&s, "2", "out", &[])
        .expect_code(2)
        .stderr_has("--index 2 is out of range: items.jsonl holds 2 items (indexes 0 to 1)");
    s.loom(&[
        "job",
        "run",
        "--items",
        "items.jsonl",
        "--index",
        "1",
        "--count",
        "2",
        "--out",
        "out",
    ])
    .expect_code(2)
    .stderr_has("pass --count 1");
    s.loom(&["job", "run", "--items", "items.jsonl", "--out", "out"])
        .expect_code(2)
        .stderr_has("pass --index N");
    assert!(!s.path().join("out").exists());
    s.loom(&["job", "plan", "items.jsonl", "--emit", "k8s-indexed-job"])
        .expect_code(2)
        .stderr_has("needs --name NAME and --image IMAGE");
    s.loom(&[
        "job",
        "plan",
        "items.jsonl",
        "--emit",
        "k8s-indexed-job",
        "--name",
        "Bad_Name",
        "--image",
        "i",
    ])
    .expect_code(2)
    .stderr_has("a Job name is 1 to 52 lowercase letters");
    s.loom(&[
        "job",
        "plan",
        "items.jsonl",
        "--emit",
        "gha-matrix",
        "--max-cells",
        "300",
    ])
    .expect_code(2);
    // a ConfigMap holds about 1 MB
    let big: String = (0..2000)
        .map(|i| format!("{{\"prompt\": \"{}{i}\"}}\n", "x".repeat(600)))
        .collect();
    s.write("big.jsonl", &big);
    s.loom(&[
        "job",
        "plan",
        "big.jsonl",
        "--emit",
        "k8s-indexed-job",
        "--name",
        "big",
        "--image",
        "i",
    ])
    .expect_code(1)
    .stderr_has("a ConfigMap holds about");

    // a results directory another run wrote is refused, its files untouched; a retry of the same cell is allowed
    cell(&s, "0", "out", &["--run-id", "first"]).expect_code(0);
    let result = s.path().join("out/item-0/result.json");
    let before = std::fs::read_to_string(&result).unwrap();
    cell(&s, "0", "out", &["--run-id", "second"])
        .expect_code(1)
        .stderr_has("holds a cell of another run")
        .stderr_has("pass an empty --out");
    assert_eq!(std::fs::read_to_string(&result).unwrap(), before);
    cell(&s, "0", "out", &["--run-id", "first"]).expect_code(0);
    // a directory no loom job wrote is not taken over
    s.write("mine/item-1/notes.txt", "my notes");
    cell(&s, "1", "mine", &[])
        .expect_code(1)
        .stderr_has("is not empty and no loom job wrote it");
    assert_eq!(
        std::fs::read_to_string(s.path().join("mine/item-1/notes.txt")).unwrap(),
        "my notes"
    );
    // collect: results of other items are refused; a missing item fails the collection
    s.write("other.jsonl", "{\"prompt\": \"z\"}\n");
    s.loom(&["job", "collect", "out", "--items", "other.jsonl"])
        .expect_code(1)
        .stderr_has("belongs to other items");
    s.loom(&["job", "collect", "out", "--items", "items.jsonl"])
        .expect_code(1)
        .stdout_has("item-1")
        .stdout_has("missing: no cell ran it");
    s.loom(&["job", "collect", "nowhere"]).expect_code(1);
}

/// A node without the required tier: the cell exits 69 (the index fails, never retried), its result says why.
#[test]
fn a_required_tier_missing_on_the_node_fails_the_cell_with_69() {
    let s = Scratch::new();
    s.write("agent.toml", "[agent]\nname = \"j\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n");
    s.write("items.jsonl", "{\"id\": \"one\", \"prompt\": \"a\"}\n");
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
            "--require-tier",
            "a",
        ],
        &[("LOOM_SANDBOX_DISABLE", "a")],
    )
    .expect_code(69)
    .stderr_has("LOOM_SANDBOX_DISABLE removes it");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(s.path().join("out/one/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (r["exit"].as_i64(), r["outcome"].as_str()),
        (Some(69), Some("unavailable")),
        "{r:#}"
    );
    assert!(r["error"].as_str().unwrap().contains("tier A"), "{r:#}");
    assert!(s.path().join("out/one/doctor.json").is_file());
    assert!(
        !s.path().join("out/one/updates.jsonl").exists(),
        "the turn ran"
    );
    s.loom(&["job", "collect", "out"])
        .expect_code(1)
        .stdout_has("exit 69  unavailable");
}

/// A second process on the same cell fails at once (the cell's lock), and never writes its result.
#[test]
fn a_second_writer_on_a_cell_fails_at_once() {
    let s = Scratch::new();
    s.write("agent.toml", "[agent]\nname = \"j\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n");
    s.write("items.jsonl", "{\"id\": \"one\", \"prompt\": \"a\"}\n");
    cell(&s, "0", "out", &[]).expect_code(0);
    // hold the cell's lock as a running `loom job run` does
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(s.path().join("out/one/.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let before = std::fs::read_to_string(s.path().join("out/one/result.json")).unwrap();
    cell(&s, "0", "out", &[])
        .expect_code(1)
        .stderr_has("another loom job run is writing this cell now");
    assert_eq!(
        std::fs::read_to_string(s.path().join("out/one/result.json")).unwrap(),
        before
    );
}

/// The ceiling gate runs in each cell before its turn: growth exits 3 and the turn never runs; collect reports it as
/// SARIF on the item's line.
#[test]
fn the_gate_runs_per_job_and_growth_stops_the_cell_with_3() {
    let s = Scratch::new();
    let agent = |paths: &str| {
        format!(
            "[agent]\nname = \"j\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n\
             [tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = {{ paths = [{paths}] }}\n"
        )
    };
    s.write("baseline.toml", &agent("\"./docs\""));
    s.write("agent.toml", &agent("\"./docs\""));
    s.write("grown.toml", &agent("\"./\""));
    s.write(
        "items.jsonl",
        "{\"id\": \"a\", \"prompt\": \"hi\"}\n{\"id\": \"b\", \"prompt\": \"ho\"}\n",
    );
    cell(&s, "0", "out", &["--baseline", "baseline.toml"]).expect_code(0);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("out/a/result.json")).unwrap())
            .unwrap();
    assert_eq!(r["gate"]["verdict"], "contained");
    s.loom(&[
        "job",
        "run",
        "grown.toml",
        "--items",
        "items.jsonl",
        "--index",
        "1",
        "--out",
        "out",
        "--baseline",
        "baseline.toml",
    ])
    .expect_code(3)
    .stderr_has("the ceiling grew");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("out/b/result.json")).unwrap())
            .unwrap();
    assert_eq!(
        (r["exit"].as_i64(), r["outcome"].as_str()),
        (Some(3), Some("ceiling-grew"))
    );
    assert!(s.path().join("out/b/gate.json").is_file());
    assert!(
        !s.path().join("out/b/updates.jsonl").exists(),
        "the turn ran although the ceiling grew"
    );
    let run = s.loom(&[
        "job",
        "collect",
        "out",
        "--items",
        "items.jsonl",
        "--format",
        "sarif",
    ]);
    run.expect_code(1);
    let sarif: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["ruleId"], "loom-job/ceiling-grew");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        2
    );
}
