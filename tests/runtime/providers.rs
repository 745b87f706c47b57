//! External providers through the real binary: `loom install` materialising a path and a git source into
//! `.loom/providers` with a pinned tree hash, `loom audit` / `loom providers` spawning the provider (no model), a
//! scripted prompt calling the example notes provider's tools, `--frozen` refusing drift without writing, a tampered
//! install refused at boot, and providers that exit at start or die mid-call reported with their handle and source.

use std::path::Path;

use loom_tests::{workspace_root, Scratch};

use super::{results, updates};

/// Copies examples/full-agent and examples/notes-provider side by side into the scratch directory, with the
/// scripted harness in place of Anthropic's.
fn full_agent(s: &Scratch, script: &str) {
    let ex = workspace_root().join("examples");
    let text = std::fs::read_to_string(ex.join("full-agent/agent.toml")).unwrap();
    let scripted = text.replace(
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"",
        &format!("provider = \"test\"\nscript = {script}"),
    );
    assert_ne!(
        scripted, text,
        "the example's [harness] changed; update this test"
    );
    s.write("full-agent/agent.toml", &scripted);
    for f in ["package.json", "provider.mjs", "README.md"] {
        let body = std::fs::read_to_string(ex.join("notes-provider").join(f)).unwrap();
        s.write(&format!("notes-provider/{f}"), &body);
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

const ADD_AND_SEARCH: &str = r#"[[
  { call = { tool = "note_add", input = { text = "the dentist is on Tuesday" } } },
  { call = { tool = "note_add", input = { text = "buy milk" } } },
  { call = { tool = "note_search", input = { query = "DENTIST" } } },
  { say = "noted" },
]]"#;

#[test]
fn the_full_agent_installs_audits_and_calls_its_notes_provider() {
    let s = Scratch::new();
    full_agent(&s, ADD_AND_SEARCH);
    let dir = s.path().join("full-agent");
    // before install: boot refuses, naming the handle, the source and the fix
    s.loom(&["prompt", "full-agent/agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("provider [providers].notes (path ../notes-provider)")
        .stderr_has("there is no .loom/lock.toml")
        .stderr_has("run `loom install`");
    s.loom(&["install", "full-agent/agent.toml"])
        .expect_code(0)
        .stdout_has("notes  path ../notes-provider");
    let lock = read(&dir.join(".loom/lock.toml"));
    assert!(
        lock.contains("[providers.notes]") && lock.contains("sha256 = \""),
        "{lock}"
    );
    assert!(dir.join(".loom/providers/notes/provider.mjs").is_file());
    s.loom(&["audit", "full-agent/agent.toml"])
        .expect_code(0)
        .stdout_has("note_add  <- [providers].notes")
        .stdout_has(r#"model sees  {"type":"object","properties":{"query":{"type":"string","description":"The word or phrase."}},"required":["query"]}"#)
        // run from the scratch directory, the example's `./drafts` lands outside its manifest's directory
        .stdout_has("0 errors, 2 warnings")
        .stdout_has("grant path `./drafts` (write_file): `./drafts` resolves to")
        .stdout_has("outside the manifest's directory");
    let json = s.loom(&["audit", "full-agent/agent.toml", "--json"]);
    json.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    assert_eq!(v["providers"][0]["handle"], "notes", "{v}");
    assert_eq!(v["providers"][0]["state"], "installed", "{v}");
    let add = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "note_add")
        .unwrap();
    assert_eq!(add["mcp"]["server"], "notes", "{add}");
    s.loom(&["providers", "list", "full-agent/agent.toml"])
        .expect_code(0)
        .stdout_has("notes  path ../notes-provider  [installed]")
        .stdout_has("tools  note_add, note_list, note_search");
    s.loom(&["providers", "info", "notes", "full-agent/agent.toml"])
        .expect_code(0)
        .stdout_has("sha256    ")
        .stdout_has("tool note_search: List the notes");
    // the provider's tools run through the same decision and updates as built-ins
    let run = s.loom(&[
        "prompt",
        "full-agent/agent.toml",
        "remember",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(
        r,
        [
            ("completed".to_string(), "remembered (1 notes)".to_string()),
            ("completed".to_string(), "remembered (2 notes)".to_string()),
            (
                "completed".to_string(),
                "- the dentist is on Tuesday".to_string()
            ),
        ],
        "{}",
        run.stderr()
    );
    // the notes file is in the provider's data directory, in the agent's storage
    let notes = read(
        &s.path()
            .join(".loom-data/agents/full-agent/providers/notes/notes.md"),
    );
    assert_eq!(notes, "- the dentist is on Tuesday\n- buy milk\n");
}

#[test]
fn frozen_refuses_drift_without_writing_and_a_tampered_install_is_refused_at_boot() {
    let s = Scratch::new();
    full_agent(
        &s,
        r#"[[ { call = { tool = "note_list", input = {} } }, { say = "ok" } ]]"#,
    );
    let dir = s.path().join("full-agent");
    // no lock yet: --frozen fails and creates nothing
    s.loom(&["install", "full-agent/agent.toml", "--frozen"])
        .expect_code(1)
        .stderr_has("there is no .loom/lock.toml");
    assert!(!dir.join(".loom").exists(), "--frozen wrote something");
    s.loom(&["install", "full-agent/agent.toml"]).expect_code(0);
    s.loom(&["install", "full-agent/agent.toml", "--frozen"])
        .expect_code(0)
        .stdout_has("(matches the lock)");
    let lock = read(&dir.join(".loom/lock.toml"));
    let installed = read(&dir.join(".loom/providers/notes/provider.mjs"));
    // the source changes: --frozen names the drift and leaves the lock and the install as they were
    s.write(
        "notes-provider/provider.mjs",
        &format!("{installed}\n// a change\n"),
    );
    s.loom(&["install", "full-agent/agent.toml", "--frozen"])
        .expect_code(1)
        .stderr_has("[providers].notes: `path ../notes-provider` now materialises to tree sha256")
        .stderr_has("nothing was written");
    assert_eq!(read(&dir.join(".loom/lock.toml")), lock);
    assert_eq!(
        read(&dir.join(".loom/providers/notes/provider.mjs")),
        installed
    );
    assert!(
        std::fs::read_dir(dir.join(".loom")).unwrap().count() == 2,
        "a staging directory was left behind"
    );
    // the manifest's source changes: drift too
    let m = read(&dir.join("agent.toml"));
    s.write(
        "full-agent/agent.toml",
        &m.replace("../notes-provider", "../notes-provider/"),
    );
    s.loom(&["install", "full-agent/agent.toml", "--frozen"])
        .expect_code(1)
        .stderr_has("pins `path ../notes-provider`");
    s.write("full-agent/agent.toml", &m);
    // boot runs the installed copy, never the source: an edited source is drift until `loom install` runs, so the
    // stale copy does not go on running unnoticed (examples/full-agent/README.md says so)
    s.loom(&["prompt", "full-agent/agent.toml", "list"])
        .expect_code(1)
        .stderr_has("the source directory `../notes-provider` changed since install")
        .stderr_has("run `loom install`");
    s.loom(&["audit", "full-agent/agent.toml"])
        .expect_code(1)
        .stdout_has("the source directory `../notes-provider` changed since install");
    s.loom(&["providers", "list", "full-agent/agent.toml"])
        .expect_code(1)
        .stdout_has("[drifted]");
    // the source as installed again: the still-pinned install runs
    s.write("notes-provider/provider.mjs", &installed);
    s.loom(&["prompt", "full-agent/agent.toml", "list"])
        .expect_code(0);
    // somebody edits the installed code: boot refuses it, and audit cannot vouch for the tools
    s.write(
        "full-agent/.loom/providers/notes/provider.mjs",
        &format!("{installed}\nprocess.exit(0);\n"),
    );
    s.loom(&["prompt", "full-agent/agent.toml", "list"])
        .expect_code(1)
        .stderr_has("changed since install")
        .stderr_has("run `loom install`");
    s.loom(&["audit", "full-agent/agent.toml"])
        .expect_code(1)
        .stdout_has("changed since install");
    s.loom(&["providers", "list", "full-agent/agent.toml"])
        .expect_code(1)
        .stdout_has("[drifted]");
    // a normal install re-pins the (changed) source and replaces the tampered tree
    s.write(
        "notes-provider/provider.mjs",
        &format!("{installed}\n// a change\n"),
    );
    s.loom(&["install", "full-agent/agent.toml"])
        .expect_code(0)
        .stdout_has("(pinned)");
    assert!(read(&dir.join(".loom/providers/notes/provider.mjs")).contains("// a change"));
    s.loom(&["prompt", "full-agent/agent.toml", "list"])
        .expect_code(0);
}

/// A provider that says `hello` on stderr and then behaves per `mode`: `exit` at start, `die` on its first call.
fn odd_provider(s: &Scratch, mode: &str) {
    s.write(
        "odd/package.json",
        r#"{ "name": "odd", "loom": { "provider": "./odd.mjs" } }"#,
    );
    s.write(
        "odd/odd.mjs",
        &format!(
            r#"import {{ createInterface }} from "node:readline";
const mode = {mode:?};
process.stderr.write("odd provider: hello\n");
if (mode === "exit") {{ process.stderr.write("odd provider: cannot open my database\n"); process.exit(3); }}
const send = (m) => process.stdout.write(JSON.stringify({{ jsonrpc: "2.0", ...m }}) + "\n");
createInterface({{ input: process.stdin }}).on("line", (l) => {{
  const m = JSON.parse(l);
  if (m.method === "initialize") send({{ id: m.id, result: {{ protocolVersion: "loom-provider/1",
    contributes: {{ tools: [{{ name: "poke", description: "Poke.", inputSchema: {{ type: "object", properties: {{}} }} }}] }} }} }});
  if (m.method === "tools/call") {{ process.stderr.write("odd provider: dying mid-call\n"); process.exit(4); }}
}});
"#
        ),
    );
    s.write(
        "agent.toml",
        r#"[agent]
name = "odd"

[harness]
provider = "test"
script = [[
  { call = { tool = "poke", input = {} } },
  { say = "done" },
]]

[session]
provider = "in-memory"

[providers]
odd = { path = "./odd" }

[tools]
poke = { provider = "odd" }

[capabilities]
poke = "*"
"#,
    );
    s.loom(&["install"]).expect_code(0);
}

#[test]
fn a_provider_that_exits_at_start_is_reported_with_its_source_and_stderr() {
    let s = Scratch::new();
    odd_provider(&s, "exit");
    s.loom(&["prompt", "agent.toml", "go"])
        .expect_code(1)
        .stderr_has("tools.poke: provider [providers].odd (path ./odd, installed in ")
        .stderr_has("cannot start")
        .stderr_has("odd provider: cannot open my database")
        .stderr_has("loom providers info odd");
    s.loom(&["providers", "info", "odd"])
        .expect_code(1)
        .stdout_has("odd  path ./odd  [installed]")
        .stdout_has("cannot start");
}

#[test]
fn a_provider_that_dies_mid_call_fails_that_call_and_the_turn_goes_on() {
    let s = Scratch::new();
    odd_provider(&s, "die");
    let run = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, "failed", "{r:?}");
    for needle in [
        "provider [providers].odd (path ./odd",
        "odd provider: dying mid-call",
        "loom restarts it on the next call",
    ] {
        assert!(r[0].1.contains(needle), "{needle:?} not in {:?}", r[0].1);
    }
}

#[test]
fn a_git_source_is_cloned_at_its_pinned_rev_and_audit_warns_about_writable_installs() {
    let s = Scratch::new();
    let ex = workspace_root().join("examples/notes-provider");
    let repo = s.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for f in ["package.json", "provider.mjs"] {
        std::fs::copy(ex.join(f), repo.join(f)).unwrap();
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "v1"]);
    let v1 = git(&["rev-parse", "HEAD"]);
    std::fs::write(repo.join("later.txt"), "v2").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "v2"]);
    s.write(
        "agent.toml",
        &format!(
            r#"[agent]
name = "g"

[harness]
provider = "test"
script = [[ {{ say = "hi" }} ]]

[session]
provider = "in-memory"

[providers]
notes = {{ git = "./repo", rev = "{v1}" }}

[tools]
note_list = {{ provider = "notes" }}
bash = "builtin"

[capabilities]
note_list = "*"
bash = {{ commands = "*", paths = ["./"] }}
"#
        ),
    );
    s.loom(&["install"]).expect_code(0).stdout_has(&v1);
    let installed = s.path().join(".loom/providers/notes");
    assert!(installed.join("provider.mjs").is_file());
    assert!(!installed.join("later.txt").exists(), "not the pinned rev");
    assert!(!installed.join(".git").exists());
    // bash may write ./ — which holds .loom: audit warns (the kernel's finding), naming the fix
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("lets the agent write")
        .stdout_has("narrow [capabilities].bash to exclude the manifest's .loom directory");
}

#[test]
fn a_provider_session_layer_stores_the_conversation_and_gives_it_back_next_run() {
    let s = Scratch::new();
    full_agent(&s, r#"[[ { say = "ok" } ]]"#);
    let m = read(&s.path().join("full-agent/agent.toml"));
    let layered = m
        .replace(
            "layers = [\"compacting\", \"file\"]",
            "layers = [\"compacting\", \"notes\"]",
        )
        .replace(
            "[session.compacting]",
            "[session.notes]\nlayer = \"history\"\n\n[session.compacting]",
        );
    assert_ne!(
        layered, m,
        "the example's [session] changed; update this test"
    );
    s.write("full-agent/agent.toml", &layered);
    s.loom(&["install", "full-agent/agent.toml"]).expect_code(0);
    s.loom(&["prompt", "full-agent/agent.toml", "my cat is called Ada"])
        .expect_code(0);
    let log = read(
        &s.path()
            .join(".loom-data/agents/full-agent/providers/notes/history-full-agent.jsonl"),
    );
    assert!(log.contains("my cat is called Ada"), "{log}");
    // a new process: the history comes back from session/load before the model is asked
    let run = s.loom(&[
        "prompt",
        "full-agent/agent.toml",
        "what is my cat called?",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    run.expect_code(0);
    let first = run.stdout().lines().next().unwrap_or_default().to_string();
    assert!(
        first.contains("preamble") && first.contains("my cat is called Ada"),
        "{first}\n{}",
        run.stderr()
    );
    // a layer the provider does not offer is refused at boot, naming what it offers
    s.write(
        "full-agent/agent.toml",
        &layered.replace("layer = \"history\"", "layer = \"diary\""),
    );
    s.loom(&["prompt", "full-agent/agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("offers the sessions [history], not \"diary\"");
}

#[test]
fn an_npm_source_is_packed_extracted_and_pinned() {
    // `ms` is a dependency of the MCP peers (tests/mcp-peers/package-lock.json), so `npm ci` there has it cached
    if std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: npm is not installed (.ci/run installs it)");
        return;
    }
    let s = Scratch::new();
    s.write(
        "agent.toml",
        "[agent]\nname = \"n\"\n\n[harness]\nprovider = \"test\"\nscript = [[ { say = \"hi\" } ]]\n\n[session]\n\
         provider = \"in-memory\"\n\n[providers]\nms = { npm = \"ms\", version = \"2.1.3\" }\n",
    );
    s.loom(&["install"])
        .expect_code(0)
        .stdout_has("ms  npm ms@2.1.3  ms@2.1.3  sha256 ");
    let dir = s.path().join(".loom/providers/ms");
    assert!(dir.join("package.json").is_file() && dir.join("index.js").is_file());
    assert!(!s.path().join(".loom").read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".staging")));
    s.loom(&["install", "--frozen"])
        .expect_code(0)
        .stdout_has("(matches the lock)");
    // not a provider (no loom.provider in its package.json): info says so, naming the fix
    s.loom(&["providers", "info", "ms"])
        .expect_code(1)
        .stdout_has("[installed]")
        .stdout_has("loom.provider: missing");
}

#[test]
fn a_provider_harness_answers_requests_and_its_tool_call_goes_through_the_kernel() {
    let s = Scratch::new();
    s.write(
        "echo/package.json",
        r#"{ "name": "echo", "loom": { "provider": "./echo.mjs" } }"#,
    );
    // a "model" that calls its own shout tool with the prompt, then answers with the tool's result
    s.write(
        "echo/echo.mjs",
        r#"import { createInterface } from "node:readline";
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
createInterface({ input: process.stdin }).on("line", (l) => {
  const m = JSON.parse(l);
  if (m.method === "initialize") return send({ id: m.id, result: { protocolVersion: "loom-provider/1",
    contributes: { harnesses: ["echo"], tools: [{ name: "shout", description: "Upper-case.",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }] } } });
  if (m.method === "tools/call") return send({ id: m.id, result: { content: [{ type: "text",
    text: String(m.params.arguments.text).toUpperCase() }] } });
  if (m.method === "harness/request") {
    const { messages, tools } = m.params.request;
    const last = messages[messages.length - 1].content[0];
    if (last.type === "tool_result") return send({ id: m.id, result: { stopReason: "end_turn",
      message: { role: "assistant", content: [{ type: "text", text: `the tool said ${last.content}` }] } } });
    return send({ id: m.id, result: { stopReason: "tool_use", usage: { input_tokens: 5, output_tokens: 2 },
      message: { role: "assistant", content: [
        { type: "text", text: `I see ${tools.map((t) => t.name).join(",")}. ` },
        { type: "tool_use", id: "c1", name: "shout", input: { text: last.text } }] } } });
  }
});
"#,
    );
    s.write(
        "agent.toml",
        r#"[agent]
name = "echo"

[harness]
provider = "echo"

[session]
provider = "in-memory"

[providers]
echo = { path = "./echo" }

[tools]
shout = { provider = "echo" }

[capabilities]
shout = { text = "*" }
"#,
    );
    s.loom(&["install"]).expect_code(0);
    s.loom(&["prompt", "agent.toml", "hello there"])
        .expect_code(0)
        .stdout_has("the tool said HELLO THERE");
    // the grant still decides: with `text` bound, the model's own text is replaced before the call
    let m = read(&s.path().join("agent.toml"));
    s.write(
        "agent.toml",
        &m.replace("shout = { text = \"*\" }", "shout = { text = \"bound\" }"),
    );
    s.loom(&["prompt", "agent.toml", "hello there"])
        .expect_code(0)
        .stdout_has("the tool said BOUND");
    // a harness the provider does not offer is refused at boot
    s.write(
        "agent.toml",
        &m.replace(
            "provider = \"echo\"\n\n[session]",
            "provider = \"echo\"\nharness = \"gpt\"\n\n[session]",
        ),
    );
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("offers the harnesses [echo], not \"gpt\"");
}

/// A provider package `./echo-config` whose one tool, `show_config`, answers with the `config` its `initialize` got.
fn echo_config_provider(s: &Scratch, dir: &str) {
    s.write(
        &format!("{dir}/package.json"),
        r#"{ "name": "echo-config", "loom": { "provider": "./provider.mjs" } }"#,
    );
    s.write(
        &format!("{dir}/provider.mjs"),
        r#"import { createInterface } from "node:readline";
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
let config = "(no initialize)";
createInterface({ input: process.stdin }).on("line", (l) => {
  const m = JSON.parse(l);
  if (m.method === "initialize") {
    config = m.params.config;
    send({ id: m.id, result: { protocolVersion: "loom-provider/1",
      contributes: { tools: [{ name: "show_config", description: "Show my config.", inputSchema: { type: "object", properties: {} } }] } } });
  }
  if (m.method === "tools/call") send({ id: m.id, result: { content: [{ type: "text", text: JSON.stringify(config) }] } });
});
"#,
    );
}

const CONFIGURED: &str = r#"[agent]
name = "configured"

[harness]
provider = "test"
script = [[
  { call = { tool = "show_config", input = {} } },
  { say = "done" },
]]

[session]
provider = "in-memory"

[providers]
fetch = { provider = "./echo-config", url_prefix = "${PREFIX:-https://api.example.com/}", retries = 3, nested = { on = true } }

[tools]
show_config = { provider = "fetch" }

[capabilities]
show_config = "*"
"#;

#[test]
fn a_provider_package_with_config_installs_like_its_source_and_gets_the_config_in_initialize() {
    let s = Scratch::new();
    echo_config_provider(&s, "echo-config");
    s.write("agent.toml", CONFIGURED);
    // not installed: boot refuses, naming the handle, its source and the fix
    s.loom(&["prompt", "agent.toml", "go"])
        .expect_code(1)
        .stderr_has("provider [providers].fetch (path ./echo-config)")
        .stderr_has("run `loom install`");
    s.loom(&["install"])
        .expect_code(0)
        .stdout_has("fetch  path ./echo-config");
    let lock = read(&s.path().join(".loom/lock.toml"));
    assert!(lock.contains("source = \"path ./echo-config\""), "{lock}");
    assert!(!lock.contains("url_prefix"), "config is not pinned: {lock}");
    // the tool shows the config it was constructed with, `${VAR}` substituted
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("PREFIX", "https://env.example/")],
    );
    run.expect_code(0);
    assert_eq!(
        results(&updates(&run)),
        [(
            "completed".to_string(),
            r#"{"nested":{"on":true},"retries":3,"url_prefix":"https://env.example/"}"#.to_string()
        )],
        "{}",
        run.stderr()
    );
    // audit and `providers list` show the handle, its source, its install state and the config's key names only
    let json = s.loom(&["audit", "agent.toml", "--json"]);
    json.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    let p = &v["providers"][0];
    assert_eq!(
        (&p["handle"], &p["source"], &p["state"]),
        (
            &"fetch".into(),
            &"path ./echo-config".into(),
            &"installed".into()
        ),
        "{p}"
    );
    assert_eq!(
        p["configKeys"],
        serde_json::json!(["nested", "retries", "url_prefix"])
    );
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("provider  fetch  path ./echo-config (config: nested, retries, url_prefix)")
        .stdout_lacks("api.example.com");
    s.loom(&["providers", "list"])
        .expect_code(0)
        .stdout_has("fetch  path ./echo-config  [installed]")
        .stdout_has("config  nested, retries, url_prefix")
        .stdout_lacks("api.example.com");
    // config is not part of the pin: changing it needs no install
    s.write(
        "agent.toml",
        &CONFIGURED.replace("retries = 3", "retries = 4"),
    );
    s.loom(&["install", "--frozen"])
        .expect_code(0)
        .stdout_has("(matches the lock)");
    // the package's source changes: --frozen refuses, and boot refuses the drifted handle
    echo_config_provider(&s, "echo-config-2");
    s.write(
        "agent.toml",
        &CONFIGURED.replace("\"./echo-config\"", "\"./echo-config-2\""),
    );
    s.loom(&["install", "--frozen"])
        .expect_code(1)
        .stderr_has("[providers].fetch: the manifest's source is `path ./echo-config-2`, .loom/lock.toml pins `path ./echo-config`");
    s.loom(&["prompt", "agent.toml", "go"])
        .expect_code(1)
        .stderr_has("the manifest's source is `path ./echo-config-2` but .loom/lock.toml pins `path ./echo-config`");
}
