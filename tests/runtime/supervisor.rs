//! The supervisor and named harnesses through `loom prompt` with the scripted harness: a turn that ends while the
//! working record has unfinished items is sent back (each round a notice), at most `max_rounds` times; a model that
//! finishes after one round is let go; a named review harness judges a completion claim and its "incomplete" sends
//! the model back; a compaction summarises through a named harness; a named harness that cannot be built stops boot.

use loom_tests::Scratch;

use super::{results, updates};

/// An agent whose one turn is `steps` (TOML inline step tables), with `todo_write` granted, and `extra` TOML.
fn agent(steps: &[&str], extra: &str) -> Scratch {
    let s = Scratch::new();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"supervised\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n{}\n]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\ntodo_write = \"builtin\"\n\n[capabilities]\ntodo_write = \"*\"\n\n{extra}",
            steps.join(",\n")
        ),
    );
    s
}

const PENDING: &str = r#"{ call = { tool = "todo_write", input = { todos = [{ content = "write the parser", status = "pending" }] } } }"#;
const DONE: &str = r#"{ call = { tool = "todo_write", input = { todos = [{ content = "write the parser", status = "completed" }] } } }"#;

fn notices(ups: &[serde_json::Value]) -> Vec<String> {
    ups.iter()
        .filter(|u| u["frame"] == "notice")
        .filter_map(|u| u["text"].as_str().map(str::to_string))
        .collect()
}

fn run(s: &Scratch) -> Vec<serde_json::Value> {
    let r = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    r.expect_code(0);
    updates(&r)
}

#[test]
fn unfinished_work_sends_the_model_back_at_most_max_rounds_times() {
    let s = agent(
        &[
            PENDING,
            r#"{ say = "done" }"#,
            r#"{ stop = true }"#,
            r#"{ say = "not yet" }"#,
            r#"{ stop = true }"#,
            r#"{ say = "giving up" }"#,
        ],
        "[supervisor]\nenabled = true\nmax_rounds = 2\n",
    );
    let ups = run(&s);
    let n = notices(&ups);
    assert_eq!(n.len(), 3, "{n:#?}");
    assert!(
        n[0].starts_with("supervisor: round 1 of 2: 1 unfinished item(s)"),
        "{n:#?}"
    );
    assert!(n[1].starts_with("supervisor: round 2 of 2"), "{n:#?}");
    assert!(
        n[2].contains("the turn ends with 1 unfinished item(s) after 2 round(s)")
            && n[2].contains("write the parser"),
        "{n:#?}"
    );
    // the model saw loom's message listing what remains
    let sent: Vec<&str> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .filter(|t| t.starts_with("[loom supervisor"))
        .collect();
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(sent[0].contains("- [ ] write the parser"), "{sent:#?}");
    // without [supervisor] the same script ends at the first answer
    let plain = agent(&[PENDING, r#"{ say = "done" }"#, r#"{ stop = true }"#], "");
    assert!(notices(&run(&plain)).is_empty());
}

#[test]
fn a_model_that_finishes_after_one_round_is_let_go_and_a_review_can_send_it_back() {
    let s = agent(
        &[
            PENDING,
            r#"{ say = "done" }"#,
            r#"{ stop = true }"#,
            DONE,
            r#"{ say = "now it is done" }"#,
        ],
        "[supervisor]\nenabled = true\n",
    );
    let n = notices(&run(&s));
    assert_eq!(n.len(), 1, "{n:#?}");
    assert!(n[0].starts_with("supervisor: round 1 of 3"), "{n:#?}");

    // everything marked done: the named review harness judges the claim, first "incomplete", then "complete"
    let s = agent(
        &[
            DONE,
            r#"{ say = "all done" }"#,
            r#"{ stop = true }"#,
            DONE,
            r#"{ say = "checked again" }"#,
        ],
        "[harnesses.judge]\nprovider = \"test\"\nscript = [[{ say = \"INCOMPLETE: the parser has no tests\" }], [{ say = \"COMPLETE\" }]]\n\n\
         [supervisor]\nenabled = true\nreview = \"judge\"\n",
    );
    let ups = run(&s);
    let n = notices(&ups);
    assert_eq!(n.len(), 1, "{n:#?}");
    assert!(
        n[0].contains("the review by judge does not accept that the work is complete: the parser has no tests"),
        "{n:#?}"
    );
    let r = results(&ups);
    assert_eq!(r.len(), 2, "{r:#?}");
    // audit shows the named harness and the supervisor
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("harness   judge = test")
        .stdout_has(
            "supervisor on, sends a turn back at most 3 time(s); judge reviews completion claims",
        );
}

#[test]
fn a_compaction_summarises_through_a_named_harness() {
    let s = Scratch::new();
    let manifest = |steps: &[String]| {
        format!(
            "[agent]\nname = \"summarised\"\n\n[harness]\nprovider = \"test\"\nscript = [[{}]]\n\n\
             [harnesses.summariser]\nprovider = \"test\"\necho = true\n\n\
             [session]\nlayers = [\"compacting\", \"file\"]\n\n[session.compacting]\nthreshold = 6\nkeep = 2\n\
             persist = true\nsummarizer = \"summariser\"\n\n[session.file]\npath = \"session.jsonl\"\n\n\
             [tools]\ntodo_write = \"builtin\"\n\n[capabilities]\ntodo_write = \"*\"\n",
            steps.join(", ")
        )
    };
    let mut steps = vec![r#"{ say = "starting" }"#.to_string()];
    for _ in 0..8 {
        steps.push(r#"{ call = { tool = "todo_write", input = { todos = [] } } }"#.to_string());
    }
    steps.push(r#"{ say = "end" }"#.to_string());
    s.write("agent.toml", &manifest(&steps));
    s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"])
        .expect_code(0);
    // the next process starts from the summary: the echo harness answered the summarisation request with the request
    // itself, so the summary is the transcript loom sent it (the heuristic's would begin "Heuristic summary")
    let r = s.loom(&[
        "prompt",
        "agent.toml",
        "next",
        "--format",
        "jsonl",
        "--emit-preamble",
    ]);
    r.expect_code(0);
    let events = updates(&r)[0]["preamble"]["events"].clone();
    assert!(
        events[0]["messageId"]
            .as_str()
            .unwrap_or_default()
            .starts_with("loom-compaction-"),
        "{events:#}"
    );
    let summary = events[0]["content"]["text"].as_str().unwrap_or_default();
    assert!(
        summary.contains("Transcript")
            && summary.contains("todo_write")
            && !summary.contains("Heuristic summary"),
        "{summary}"
    );
}

#[test]
fn a_named_harness_that_cannot_be_built_stops_boot_naming_it() {
    let s = agent(
        &[r#"{ say = "hi" }"#],
        "[harnesses.cloud]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n",
    );
    let r = s.loom(&["prompt", "agent.toml", "go"]);
    assert_ne!(r.code(), 0);
    r.stderr_has("harnesses.cloud: needs the secret ANTHROPIC_API_KEY");
}

/// Subagent profiles are judged by the kernel against the agent: audit lists a contained one with the tools it
/// keeps, refuses (exit 1) one that names a tool the agent lacks, and boot says which cannot be used.
#[test]
fn profiles_are_judged_against_the_agent_by_audit_and_boot() {
    let s = agent(
        &[r#"{ say = "hi" }"#],
        "[harnesses.cheap]\nprovider = \"test\"\necho = true\n",
    );
    s.write(
        ".loom/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Review changes\nmodel: cheap\nmaxTurns: 5\ntools: [todo_write]\n---\nReview.\n",
    );
    let audit = s.loom(&["audit", "agent.toml"]);
    audit.expect_code(0).stdout_has(
        "subagent profile reviewer (project): contained — tools todo_write with this agent's grants, on the named \
         harness cheap, at most 5 requests",
    );
    s.write(
        ".loom/agents/wide.md",
        "---\nname: wide\ndescription: Writes\ntools: [todo_write, write_file]\n---\nWrite.\n",
    );
    let audit = s.loom(&["audit", "agent.toml"]);
    assert_eq!(audit.code(), 1, "{}", audit.stdout());
    audit.stdout_has("subagent profile wide is refused: tools names \"write_file\", which this agent does not have");
    let run = s.loom(&["prompt", "agent.toml", "go"]);
    run.expect_code(0)
        .stderr_has("subagent profile wide cannot be used: tools names \"write_file\"");
}

/// `delegate` runs a profile on one task: the child (a named `[harnesses.echo]`, so its answer is the task it got)
/// answers with the task text alone; a profile whose child runs out of `maxTurns` returns a visible incomplete
/// result; an ungranted profile is refused before anything starts; a grant naming a profile that does not exist
/// stops boot.
#[test]
fn delegate_runs_a_profile_on_the_task_text_alone() {
    let s = Scratch::new();
    let manifest = |grant: &str| {
        format!(
            "[agent]\nname = \"lead\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n\
             {{ call = {{ tool = \"delegate\", input = {{ agent = \"echoer\", task = \"check the parser\" }} }} }},\n\
             {{ call = {{ tool = \"delegate\", input = {{ agent = \"looper\", task = \"loop\" }} }} }},\n\
             {{ call = {{ tool = \"delegate\", input = {{ agent = \"nobody\", task = \"x\" }} }} }},\n\
             {{ say = \"done\" }},\n]]\n\n\
             [harnesses.echo]\nprovider = \"test\"\necho = true\n\n\
             [harnesses.loop]\nprovider = \"test\"\nscript = [[{{ call = {{ tool = \"todo_read\", input = {{}} }} }}, \
             {{ call = {{ tool = \"todo_read\", input = {{}} }} }}, {{ call = {{ tool = \"todo_read\", input = {{}} }} }}]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\ntodo_read = \"builtin\"\ndelegate = \"builtin\"\n\n\
             [capabilities]\ntodo_read = \"*\"\ndelegate = {grant}\n"
        )
    };
    s.write(
        ".loom/agents/echoer.md",
        "---\nname: echoer\ndescription: Says back what it was asked\nmodel: echo\ntools: [todo_read]\n---\nRepeat the task.\n",
    );
    s.write(
        ".loom/agents/looper.md",
        "---\nname: looper\ndescription: Never finishes\nmodel: loop\nmaxTurns: 2\n---\nKeep reading.\n",
    );
    s.write(
        "agent.toml",
        &manifest("{ agents = [\"echoer\", \"looper\"] }"),
    );
    let ups = run(&s);
    let r = results(&ups);
    assert_eq!(r.len(), 3, "{r:#?}");
    assert_eq!(
        r[0],
        ("completed".to_string(), "check the parser".to_string()),
        "{r:#?}"
    );
    assert!(
        r[1].1
            .starts_with("[incomplete: looper used all of its requests (maxTurns)"),
        "{r:#?}"
    );
    assert_eq!(r[2].0, "failed", "{r:#?}");
    assert!(
        r[2].1
            .contains("no profile \"nobody\" is granted (granted: echoer, looper)"),
        "{r:#?}"
    );
    // a grant naming a profile that is not there stops boot, naming it
    s.write(
        "agent.toml",
        &manifest("{ agents = [\"echoer\", \"ghost\"] }"),
    );
    let boot = s.loom(&["prompt", "agent.toml", "go"]);
    assert_ne!(boot.code(), 0);
    boot.stderr_has("tools.delegate: its grant names the profile \"ghost\", which cannot be used");
}

/// Project profiles and rules are out of a confined command's reach: loom makes the working directory's `.loom`
/// before an agent that runs commands boots, and the sandbox keeps it read-only — where it did not exist yet, and
/// where the working directory lies below the writable root (so `.loom` is not directly in it). Planting a profile,
/// or moving `.loom` (or, below the root, the working directory itself) away to plant a fresh one, fails; the next
/// agent finds no such profile.
#[test]
fn a_confined_command_cannot_plant_a_profile_for_the_next_agent() {
    if !super::sandbox_available() {
        return;
    }
    const PLANT: &str = "mkdir -p .loom/agents && printf -- '---\\\\nname: planted\\\\ndescription: x\\\\n---\\\\nGo.\\\\n' > .loom/agents/planted.md";
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("proj")).unwrap();
    // the working directory as the writable root; then below it (the grant is the directory above), where moving
    // the working directory itself away would leave the path free for a fresh `.loom`
    let cases = [
        (
            s.path().to_path_buf(),
            "./",
            "mv .loom moved && mkdir -p .loom/agents && echo ok",
        ),
        (
            s.path().join("proj"),
            "../",
            "cd .. && mv proj moved && mkdir -p proj/.loom/agents && echo ok",
        ),
    ];
    for (cwd, grant, escape) in cases {
        s.write(
            "agent.toml",
            &format!(
                "[agent]\nname = \"planter\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n\
                 {{ call = {{ tool = \"bash\", input = {{ command = \"{PLANT}\" }} }} }},\n\
                 {{ call = {{ tool = \"bash\", input = {{ command = \"{escape}\" }} }} }},\n\
                 {{ say = \"done\" }},\n]]\n\n[session]\nprovider = \"in-memory\"\n\n[tools]\nbash = \"builtin\"\n\n\
                 [capabilities]\nbash = {{ commands = \"*\", paths = [\"{grant}\"] }}\n"
            ),
        );
        let manifest = s.path().join("agent.toml");
        let run = s.loom_in(
            &cwd,
            &[
                "prompt",
                &manifest.to_string_lossy(),
                "go",
                "--format",
                "jsonl",
            ],
            &[],
        );
        run.expect_code(0);
        let r = results(&updates(&run));
        assert_eq!(r.len(), 2, "{r:#?}");
        assert!(
            r.iter().all(|(status, _)| status == "failed"),
            "{}: {r:#?}",
            cwd.display()
        );
        // loom made `.loom`, and it stays as loom made it: empty, not moved
        assert!(cwd.join(".loom").is_dir(), "{}", cwd.display());
        assert_eq!(std::fs::read_dir(cwd.join(".loom")).unwrap().count(), 0);
        assert!(!s.path().join("moved").exists());
    }
    let audit = s.loom(&["audit", "agent.toml"]);
    assert!(!audit.stdout().contains("planted"), "{}", audit.stdout());
}
