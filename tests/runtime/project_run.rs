//! `run_tests`, `run_build`, `run_lint` through `loom prompt` with the scripted harness: a failing Node project and a
//! failing Python (unittest) project report the exact command, the real exit status and the failure first; a
//! program the grant does not allow is refused by the kernel before anything runs; a script the project does not
//! define, and a program that is not installed, are errors naming them.

use loom_tests::Scratch;

use super::{results, sandbox_available, updates};

fn project(calls: &[&str], grant: &str) -> Scratch {
    let s = Scratch::new();
    let steps: String = calls
        .iter()
        .map(|c| format!("  {{ call = {c} }},\n"))
        .collect();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"run-e2e\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n{steps}  {{ say = \"done\" }},\n]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\nrun_tests = \"builtin\"\nrun_lint = \"builtin\"\nrun_build = \"builtin\"\n\n\
             [capabilities]\nrun_tests = {grant}\nrun_lint = {grant}\nrun_build = {grant}\n"
        ),
    );
    s.write(
        "web/package.json",
        r#"{"name": "web", "version": "1.0.0", "scripts": {"test": "node test.js", "build": "node -e \"console.log('built')\""}}"#,
    );
    s.write(
        "web/test.js",
        "console.log('adds ok');\nfor (let i = 0; i < 3000; i++) console.log('noise line ' + i);\n\
         console.error('FAIL subtracts: expected 1, got 2');\nprocess.exit(3);\n",
    );
    s.write("py/requirements.txt", "");
    s.write(
        "py/test_calc.py",
        "import unittest\n\nclass Calc(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(1 + 1, 2)\n\n\
         \x20   def test_subtracts(self):\n        self.assertEqual(3 - 1, 1)\n",
    );
    s.write("lintme/pyproject.toml", "[tool.ruff]\nline-length = 100\n");
    s
}

fn run(s: &Scratch) -> Vec<(String, String)> {
    let r = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    r.expect_code(0);
    results(&updates(&r))
}

#[test]
fn failing_node_and_python_projects_report_the_command_the_status_and_the_failure_first() {
    if !sandbox_available() {
        return;
    }
    let s = project(
        &[
            r#"{ tool = "run_tests", input = { path = "web" } }"#,
            r#"{ tool = "run_tests", input = { path = "py" } }"#,
            r#"{ tool = "run_build", input = { path = "web" } }"#,
            r#"{ tool = "run_lint", input = { path = "web" } }"#,
            r#"{ tool = "run_lint", input = { path = "lintme" } }"#,
        ],
        r#"{ commands = ["npm", "python3"], paths = ["./"] }"#,
    );
    let r = run(&s);
    assert_eq!(r.len(), 5, "{r:#?}");
    let (status, node) = &r[0];
    assert_eq!(status, "failed", "{r:#?}");
    assert!(node.starts_with("$ npm run test    (in "), "{node}");
    assert!(node.contains("FAILED (exit 3)"), "{node}");
    // the failure comes before the output, though 3000 lines of noise followed it there
    let fail = node.find("FAIL subtracts").unwrap();
    let output = node.find("--- output").unwrap();
    assert!(fail < output, "{node}");
    assert!(node.contains("noise line 2999"), "{node}");
    assert!(
        !node.contains("noise line 500\n"),
        "the output is bounded: {node}"
    );
    let (status, py) = &r[1];
    assert_eq!(status, "failed", "{r:#?}");
    assert!(py.starts_with("$ python3 -m unittest    (in "), "{py}");
    assert!(py.contains("FAILED (exit 1)"), "{py}");
    assert!(py.contains("AssertionError: 2 != 1"), "{py}");
    assert!(py.contains("FAIL: test_subtracts"), "{py}");
    assert_eq!(r[2].0, "completed", "{r:#?}");
    assert!(
        r[2].1.contains("passed (exit 0)") && r[2].1.contains("built"),
        "{r:#?}"
    );
    assert_eq!(r[3].0, "failed", "{r:#?}");
    assert!(
        r[3].1
            .contains("package.json defines no \"lint\" script (scripts: test, build)"),
        "{r:#?}"
    );
    assert_eq!(r[4].0, "failed", "{r:#?}");
    assert!(r[4].1.contains("ruff is not installed"), "{r:#?}");
}

#[test]
fn a_program_the_grant_does_not_allow_never_runs() {
    if !sandbox_available() {
        return;
    }
    let s = project(
        &[
            r#"{ tool = "run_tests", input = { path = "web" } }"#,
            r#"{ tool = "run_tests", input = { path = "py" } }"#,
        ],
        r#"{ commands = ["cargo"], paths = ["./"] }"#,
    );
    s.write("web/test.js", "require('fs').writeFileSync('ran', 'x');\n");
    let r = run(&s);
    assert_eq!(r.len(), 2, "{r:#?}");
    for (status, text) in &r {
        assert_eq!(status, "failed", "{r:#?}");
        assert!(text.contains("commands"), "{r:#?}");
    }
    assert!(!s.path().join("web/ran").exists());
}

/// A directory no row of the grant covers is refused before its build files are read: the error names the
/// directory and the grant, never what the project there defines.
#[test]
fn a_project_outside_the_grant_is_not_read() {
    let s = project(
        &[r#"{ tool = "run_lint", input = { path = "other" } }"#],
        r#"{ commands = ["npm"], paths = ["./web"] }"#,
    );
    s.write(
        "other/package.json",
        r#"{"name": "other", "scripts": {"deploy-with-secret-token": "true"}}"#,
    );
    let r = run(&s);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(r[0].1.contains("outside this tool's grant"), "{r:#?}");
    assert!(!r[0].1.contains("deploy-with-secret-token"), "{r:#?}");
}
