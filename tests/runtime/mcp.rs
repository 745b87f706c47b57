//! MCP servers through the real binary: `loom prompt` with the scripted harness calling tools of real npm servers
//! (@modelcontextprotocol/server-everything over stdio and Streamable HTTP, @modelcontextprotocol/server-filesystem,
//! installed by .ci/run from tests/mcp-peers/package-lock.json), of tests/mcp-peers/py_server.py (written with the
//! Python `mcp` SDK, pinned by tests/mcp-peers/requirements.txt) and of tests/mcp-peers/fake.mjs, which misbehaves.

use std::path::PathBuf;

use loom_tests::{workspace_root, Scratch};

use super::{results, updates};

fn peers() -> PathBuf {
    workspace_root().join("tests/mcp-peers")
}

/// The entry script of an installed peer package, or `None` (with the reason printed) when it is not installed.
fn peer(package: &str) -> Option<String> {
    let path = peers()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    if !path.exists() {
        eprintln!(
            "SKIPPED: {} is missing; run `npm ci` in tests/mcp-peers (.ci/run does)",
            path.display()
        );
        return None;
    }
    Some(path.display().to_string())
}

fn fake() -> String {
    peers().join("fake.mjs").display().to_string()
}

fn manifest(script: &str, rest: &str) -> String {
    format!(
        "[agent]\nname = \"mcp-e2e\"\n\n[harness]\nprovider = \"test\"\nscript = {script}\n\n[session]\nprovider = \
         \"in-memory\"\n\n{rest}"
    )
}

#[test]
fn server_everything_over_stdio_renames_binds_narrows_and_gets_only_its_secrets() {
    let Some(everything) = peer("server-everything") else {
        return;
    };
    let s = Scratch::new();
    s.write(".loom-secrets", "DEMO_TOKEN=tok-e2e-4711\n");
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "shout", input = { message = "what the model wanted" } } },
  { call = { tool = "sum", input = { a = 2, b = 3 } } },
  { call = { tool = "sum", input = { a = 7, b = 3 } } },
  { call = { tool = "env", input = {} } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
everything = {{ provider = "mcp-server", command = "node", args = [{everything:?}, "stdio"], secrets = {{ DEMO_TOKEN = "SERVER_TOKEN" }} }}

[tools]
shout = {{ provider = "everything", tool = "echo" }}
sum = {{ provider = "everything", tool = "get-sum" }}
env = {{ provider = "everything", tool = "get-env" }}

[capabilities]
shout = {{ message = "bound hello" }}
sum = {{ a = [1, 2], b = "*" }}
env = "*"
"#
            ),
        ),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("LOOM_CANARY_NOT_A_SECRET", "canary-value-0815")],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 4, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert!(
        r[0].1.contains("bound hello") && !r[0].1.contains("what the model wanted"),
        "{r:#?}"
    );
    assert_eq!(r[1].0, "completed", "{r:#?}");
    assert!(r[1].1.contains('5'), "{r:#?}");
    assert_eq!(r[2].0, "failed", "a = 7 is outside the enum: {r:#?}");
    assert!(r[2].1.contains("must be one of"), "{r:#?}");
    assert_eq!(r[3].0, "completed", "{r:#?}");
    assert!(
        r[3].1.contains("SERVER_TOKEN") && r[3].1.contains("tok-e2e-4711"),
        "the named secret is in the server's env: {r:#?}"
    );
    assert!(
        !r[3].1.contains("canary-value-0815"),
        "loom's other env vars are not: {r:#?}"
    );
    assert!(!run.stderr().contains("tok-e2e-4711"), "{}", run.stderr());
}

#[test]
fn server_filesystem_with_a_bound_path_reads_only_that_file() {
    let Some(fs) = peer("server-filesystem") else {
        return;
    };
    let s = Scratch::new();
    s.write("welcome.md", "welcome to loom\n");
    s.write("secret.txt", "do not read\n");
    let dir = std::fs::canonicalize(s.path())
        .unwrap()
        .display()
        .to_string();
    let welcome = format!("{dir}/welcome.md");
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "read_one_doc", input = { path = "secret.txt" } } },
  { call = { tool = "list_directory", input = { path = "/etc" } } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
fs_mcp = {{ provider = "mcp-server", command = "node", args = [{fs:?}, {dir:?}] }}

[tools.read_one_doc]
provider = "fs_mcp"
tool = "read_text_file"

[tools.list_directory]
provider = "fs_mcp"

[capabilities]
read_one_doc = {{ path = {welcome:?} }}
list_directory = {{ path = {dir:?} }}
"#
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(
        r[0],
        ("completed".to_string(), "welcome to loom\n".to_string()),
        "{r:#?}"
    );
    assert_eq!(r[1].0, "completed", "{r:#?}");
    assert!(
        r[1].1.contains("welcome.md") && r[1].1.contains("secret.txt"),
        "the bound directory was listed, not /etc: {r:#?}"
    );
}

#[test]
fn server_everything_over_streamable_http() {
    let Some(everything) = peer("server-everything") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = std::process::Command::new("node")
        .args([everything.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.try_wait() {
            panic!("server-everything streamableHttp exited: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let s = Scratch::new();
    s.write(".loom-secrets", "WEB_TOKEN=hdr-secret-99\n");
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "echo", input = { message = "over http" } } },
  { call = { tool = "echo", input = { message = "again" } } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
web = {{ provider = "mcp-server", url = "http://127.0.0.1:{port}/mcp", headers = {{ Authorization = "Bearer {{secret:WEB_TOKEN}}" }} }}

[tools]
echo = {{ provider = "web" }}

[capabilities]
echo = {{ message = "*" }}
"#
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    let _ = server.kill();
    let _ = server.wait();
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(
        r[0],
        ("completed".to_string(), "Echo: over http".to_string()),
        "{r:#?}"
    );
    assert_eq!(
        r[1],
        ("completed".to_string(), "Echo: again".to_string()),
        "{r:#?}"
    );
    assert!(!run.stdout().contains("hdr-secret-99") && !run.stderr().contains("hdr-secret-99"));
}

#[test]
fn misbehaving_servers_fail_their_calls_clearly_and_the_turn_goes_on() {
    let s = Scratch::new();
    let fake = fake();
    let marker = s.path().join("crash-marker").display().to_string();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "stuck", input = { text = "x" } } },
  { call = { tool = "crashy", input = { text = "first" } } },
  { call = { tool = "crashy", input = { text = "second" } } },
  { call = { tool = "huge", input = {} } },
  { say = "still here" },
]]"#,
            &format!(
                r#"[providers]
hang = {{ provider = "mcp-server", command = "node", args = [{fake:?}, "hang-call"], call_timeout_ms = 300 }}
crash = {{ provider = "mcp-server", command = "node", args = [{fake:?}, "crash", {marker:?}] }}
big = {{ provider = "mcp-server", command = "node", args = [{fake:?}, "big"] }}

[tools]
stuck = {{ provider = "hang", tool = "a" }}
crashy = {{ provider = "crash", tool = "a" }}
huge = {{ provider = "big", tool = "a" }}

[capabilities]
stuck = {{ text = "*" }}
crashy = {{ text = "*" }}
huge = "*"
"#
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0).stdout_has("still here");
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(
        r[0].1.contains("[providers].hang") && r[0].1.contains("call_timeout_ms"),
        "{r:#?}"
    );
    assert_eq!(r[1].0, "failed", "{r:#?}");
    assert!(
        r[1].1.contains("[providers].crash") && r[1].1.contains("simulated crash"),
        "{r:#?}"
    );
    assert_eq!(
        r[2],
        (
            "completed".to_string(),
            "after restart: {\"text\":\"second\"}".to_string()
        ),
        "{r:#?}"
    );
    assert_eq!(r[3].0, "failed", "{r:#?}");
    assert!(
        r[3].1.contains("[providers].big") && r[3].1.contains("over loom's limit"),
        "{r:#?}"
    );
}

#[test]
fn boot_refuses_a_grant_that_does_not_fit_the_servers_schema() {
    let s = Scratch::new();
    let fake = fake();
    let tools = format!(
        "[providers]\nbad = {{ provider = \"mcp-server\", command = \"node\", args = [{fake:?}, \"malformed\"] }}\n\n[tools]\n"
    );
    s.write(
        "agent.toml",
        &manifest(
            "[[{ say = \"hi\" }]]",
            &format!("{tools}broken = {{ provider = \"bad\" }}\n\n[capabilities]\nbroken = {{ text = \"*\" }}\n"),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    assert_ne!(run.code(), 0);
    run.stderr_has("tools.broken")
        .stderr_has("[providers].bad")
        .stderr_has("not a JSON object schema");
    // a tool the server lacks
    s.write(
        "agent.toml",
        &manifest(
            "[[{ say = \"hi\" }]]",
            &format!("{tools}nope = {{ provider = \"bad\" }}\n\n[capabilities]\nnope = \"*\"\n"),
        ),
    );
    s.loom(&["prompt", "agent.toml", "go"])
        .stderr_has("has no tool `nope` (it has: broken, ok)");
    // the server's other tools are fine: only the broken one is refused
    s.write(
        "agent.toml",
        &manifest(
            "[[{ say = \"booted\" }]]",
            &format!("{tools}ok = {{ provider = \"bad\" }}\n\n[capabilities]\nok = {{}}\n"),
        ),
    );
    s.loom(&["prompt", "agent.toml", "go"])
        .expect_code(0)
        .stdout_has("booted");
}

/// The Python peer's interpreter (a venv with the pinned `mcp` SDK), or `None` (with the reason printed).
fn python_peer() -> Option<String> {
    let python = peers().join(".venv/bin/python");
    if !python.exists() {
        eprintln!(
            "SKIPPED: {} is missing; create it and `pip install -r tests/mcp-peers/requirements.txt` (.ci/run does)",
            python.display()
        );
        return None;
    }
    Some(python.display().to_string())
}

#[test]
fn a_server_written_with_the_python_sdk_is_called_with_its_arguments_bound() {
    let Some(python) = python_peer() else {
        return;
    };
    let server = peers().join("py_server.py").display().to_string();
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "add", input = { a = 2, b = 3 } } },
  { call = { tool = "shout", input = { text = "hi", times = 5 } } },
  { call = { tool = "env_has", input = { name = "LOOM_PY_TOKEN" } } },
  { call = { tool = "env_has", input = { name = "LOOM_UNRELATED" } } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
py = {{ provider = "mcp-server", command = {python:?}, args = [{server:?}], secrets = {{ LOOM_PY_TOKEN = "LOOM_PY_TOKEN" }} }}

[tools.add]
provider = "py"

[tools.shout]
provider = "py"

[tools.env_has]
provider = "py"

[capabilities]
add = {{ a = "*", b = "*" }}
shout = {{ text = "*", times = 2 }}
env_has = {{ name = "*" }}
"#
            ),
        )
        .replace(
            "name = \"mcp-e2e\"",
            "name = \"mcp-e2e\"\nsecrets = [\"LOOM_PY_TOKEN\"]",
        ),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("LOOM_PY_TOKEN", "py-secret"), ("LOOM_UNRELATED", "x")],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 4, "{r:#?}");
    assert_eq!(r[0], ("completed".to_string(), "5".to_string()), "{r:#?}");
    // `times` is bound to 2 by the grant and hidden from the model: what the model sent is replaced
    assert_eq!(
        r[1],
        ("completed".to_string(), "HI HI".to_string()),
        "{r:#?}"
    );
    // the server gets the secret its [providers] entry names, and not the rest of loom's environment
    assert_eq!(r[2].1, "yes", "{r:#?}");
    assert_eq!(r[3].1, "no", "{r:#?}");
}

#[test]
fn the_mcp_agent_example_binds_the_folder_it_files_in() {
    let example = workspace_root().join("examples/mcp-agent");
    let m = example.join("agent.toml").display().to_string();
    let s = Scratch::new();
    s.loom(&["audit", &m])
        .expect_code(0)
        .stdout_has("remember (= add_note)  <- [providers].notes")
        .stdout_has(r#"model sees  {"type":"object","properties":{"text":{"type":"string"},"title":{"type":"string"}},"required":["title","text"]}"#);
    // the same manifest with the scripted harness; the model asks for another folder and gets "work"
    let text = std::fs::read_to_string(example.join("agent.toml")).unwrap_or_default();
    let scripted = text.replace(
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"",
        r#"provider = "test"
script = [[
  { call = { tool = "remember", input = { folder = "personal", title = "groceries", text = "milk" } } },
  { call = { tool = "list_notes", input = {} } },
  { say = "done" },
]]"#,
    );
    assert_ne!(
        scripted, text,
        "the example's [harness] changed; update this test"
    );
    s.write("agent.toml", &scripted);
    std::fs::copy(example.join("server.mjs"), s.path().join("server.mjs")).unwrap();
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(
        r,
        [
            (
                "completed".to_string(),
                "filed \"groceries\" in work (1 notes there)".to_string()
            ),
            ("completed".to_string(), "- groceries: milk".to_string()),
        ],
        "{}",
        run.stderr()
    );
}

/// `tool_search` against server-everything: the MCP tools' definitions stay out of the request until loaded; an empty
/// query lists only the tools the manifest declares and grants (not the server's others); a query loads the matching
/// definitions for the rest of the session; a loaded tool's call is still decided by the kernel on its grant.
#[test]
fn tool_search_keeps_the_catalog_out_of_requests_until_a_query_loads_it() {
    let Some(everything) = peer("server-everything") else {
        return;
    };
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "tool_search", input = { query = "" } } },
  { call = { tool = "tool_search", input = { query = "sum" } } },
  { call = { tool = "sum", input = { a = 2, b = 3 } } },
  { call = { tool = "sum", input = { a = 7, b = 3 } } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
everything = {{ provider = "mcp-server", command = "node", args = [{everything:?}, "stdio"] }}

[tools]
tool_search = "builtin"
shout = {{ provider = "everything", tool = "echo" }}
sum = {{ provider = "everything", tool = "get-sum" }}

[capabilities]
tool_search = "*"
shout = {{ message = "*" }}
sum = {{ a = [1, 2], b = "*" }}
"#
            ),
        ),
    );
    let pre = s.loom(&[
        "prompt",
        "agent.toml",
        "go",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    pre.expect_code(0);
    let tools: Vec<String> = updates(&pre)[0]["preamble"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tools, ["tool_search"], "the MCP tools are deferred");
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 4, "{r:#?}");
    assert!(r[0].1.starts_with("2 deferred tools"), "{r:#?}");
    assert!(
        r[0].1.contains("- shout: ") && r[0].1.contains("- sum: "),
        "{r:#?}"
    );
    assert!(
        !r[0].1.contains("get-tiny-image") && !r[0].1.contains("- echo"),
        "only granted tools: {r:#?}"
    );
    assert!(
        r[1].1.starts_with("loaded 1 tool(s)") && r[1].1.contains("\"sum\""),
        "{r:#?}"
    );
    assert_eq!(r[2].0, "completed", "{r:#?}");
    assert!(r[2].1.contains('5'), "{r:#?}");
    assert_eq!(r[3].0, "failed", "the kernel still decides: {r:#?}");
    assert!(r[3].1.contains("must be one of"), "{r:#?}");
}

/// MCP resources and prompts as tools against server-everything: listed, read and got through tools declared and
/// granted like any MCP tool — a bound `uri` reads only that resource whatever the model sends.
#[test]
fn resources_and_prompts_are_tools_granted_per_argument() {
    let Some(everything) = peer("server-everything") else {
        return;
    };
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &manifest(
            r#"[[
  { call = { tool = "resources", input = {} } },
  { call = { tool = "read_doc", input = { uri = "demo://resource/static/document/architecture.md" } } },
  { call = { tool = "prompts", input = {} } },
  { call = { tool = "prompt", input = { name = "simple-prompt" } } },
  { say = "done" },
]]"#,
            &format!(
                r#"[providers]
everything = {{ provider = "mcp-server", command = "node", args = [{everything:?}, "stdio"] }}

[tools]
resources = {{ provider = "everything", tool = "resources/list" }}
read_doc = {{ provider = "everything", tool = "resources/read" }}
prompts = {{ provider = "everything", tool = "prompts/list" }}
prompt = {{ provider = "everything", tool = "prompts/get" }}

[capabilities]
resources = "*"
read_doc = {{ uri = "demo://resource/static/document/features.md" }}
prompts = "*"
prompt = {{ name = "*", arguments = "*" }}
"#
            ),
        ),
    );
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 4, "{r:#?}");
    for (status, _) in &r {
        assert_eq!(status, "completed", "{r:#?}");
    }
    assert!(
        r[0].1
            .contains("demo://resource/static/document/features.md"),
        "{r:#?}"
    );
    // the grant binds the uri: the model asked for architecture.md and got features.md
    assert!(
        r[1].1
            .starts_with("==> demo://resource/static/document/features.md <=="),
        "{r:#?}"
    );
    assert!(
        r[2].1.contains("simple-prompt: A prompt with no arguments"),
        "{r:#?}"
    );
    assert_eq!(
        r[3].1, "user: This is a simple prompt without arguments.\n",
        "{r:#?}"
    );
}
