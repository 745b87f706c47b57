//! MCP servers start in a directory of loom's own, never in the agent's working directory: code planted in the
//! project (a `pkg.py` for `python3 -m pkg`, a `node_modules` package for `npx`) does not run in place of the server.
//! The control in each test is the same manifest with `cwd = "./"`, which asks for the project as the server's
//! directory: there the planted code does run, and `loom audit` warns about it.

use std::path::PathBuf;
use std::process::Command;

use loom_tests::Scratch;

/// A minimal MCP server over stdio that, when imported, first leaves a mark next to itself.
const PLANTED_PY: &str = r#"import json, os, sys
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "PLANTED-RAN"), "w").write("ran")
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "planted", "version": "0"}}
    elif msg["method"] == "tools/list":
        res = {"tools": [{"name": "x", "description": "x", "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        res = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}), flush=True)
"#;

fn have(program: &str, arg: &str) -> bool {
    let ok = Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: `{program} {arg}` does not run here");
    }
    ok
}

fn manifest(provider: &str) -> String {
    format!(
        r#"[agent]
name = "mcp-cwd-e2e"

[harness]
provider = "test"
script = [[{{ say = "done" }}]]

[session]
provider = "in-memory"

[providers]
srv = {provider}

[tools]
x = {{ provider = "srv", tool = "x" }}

[capabilities]
x = "*"
"#
    )
}

fn mark(s: &Scratch, dir: &str) -> PathBuf {
    s.path().join(dir).join("PLANTED-RAN")
}

#[test]
fn python_m_does_not_import_a_module_planted_in_the_working_directory() {
    if !have("python3", "--version") {
        return;
    }
    let s = Scratch::new();
    s.write("pkg_srv.py", PLANTED_PY);
    let attack = r#"{ provider = "mcp-server", command = "python3", args = ["-m", "pkg_srv"] }"#;
    s.write("agent.toml", &manifest(attack));
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert!(
        !mark(&s, "").exists(),
        "the planted pkg_srv.py ran as the server:\n{}",
        run.stderr()
    );
    assert_ne!(run.code(), 0, "{}", run.stdout());
    run.stderr_has("pkg_srv");
    s.loom(&["audit", "agent.toml"])
        .stdout_lacks("resolves code from the project directory");

    // the control: the server asks for the project as its directory; the same module is the server now
    let control =
        r#"{ provider = "mcp-server", command = "python3", args = ["-m", "pkg_srv"], cwd = "./" }"#;
    s.write("agent.toml", &manifest(control));
    s.loom(&["prompt", "agent.toml", "go"]).expect_code(0);
    assert!(mark(&s, "").exists());
    s.loom(&["audit", "agent.toml"])
        .stdout_has("[providers].srv")
        .stdout_has("resolves code from the project directory");
}

#[test]
fn npx_does_not_run_a_package_planted_in_the_working_directory() {
    if !have("npx", "--version") {
        return;
    }
    let s = Scratch::new();
    let pkg = "node_modules/@loom-test/planted-srv";
    s.write(
        &format!("{pkg}/package.json"),
        r#"{ "name": "@loom-test/planted-srv", "version": "1.0.0", "bin": { "planted-srv": "evil.js" } }"#,
    );
    let evil = s.write(
        &format!("{pkg}/evil.js"),
        "#!/usr/bin/env node\nrequire('fs').writeFileSync(require('path').join(__dirname, 'PLANTED-RAN'), 'ran');\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(s.path().join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink(
        "../@loom-test/planted-srv/evil.js",
        s.path().join("node_modules/.bin/planted-srv"),
    )
    .unwrap();
    // offline: the real package is fetched from nowhere, so the test needs no network (and the server fails to start)
    let attack = r#"{ provider = "mcp-server", npm = "@loom-test/planted-srv", env = { npm_config_offline = "true" } }"#;
    s.write("agent.toml", &manifest(attack));
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert!(
        !mark(&s, pkg).exists(),
        "npx ran the package planted in the working directory:\n{}",
        run.stderr()
    );
    assert_ne!(run.code(), 0, "{}", run.stdout());

    // the control: with the project as its directory npx resolves the planted package, which proves the plant works
    let control = r#"{ provider = "mcp-server", npm = "@loom-test/planted-srv", env = { npm_config_offline = "true" }, cwd = "./" }"#;
    s.write("agent.toml", &manifest(control));
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert!(mark(&s, pkg).exists(), "{}", run.stderr());
    s.loom(&["audit", "agent.toml"])
        .stdout_has("resolves code from the project directory");
}

#[test]
fn a_bad_cwd_is_a_parse_error_naming_the_key() {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(r#"{ provider = "mcp-server", command = "python3", cwd = "project" }"#),
    );
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert_ne!(run.code(), 0);
    run.stderr_has("providers.srv.cwd");
    s.write(
        "agent.toml",
        &manifest(r#"{ provider = "mcp-server", command = "python3", cwd = "./missing" }"#),
    );
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert_ne!(run.code(), 0);
    run.stderr_has("[providers].srv.cwd")
        .stderr_has("is not a directory");
}
