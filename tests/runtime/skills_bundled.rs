//! The skills built into loom (issue 26) through the real binary: the default chain offers them, `read_skill`
//! activates one, a workspace skill of the same name overrides it (and a broken one blocks it, saying so), `bundled =
//! false` turns them off, `loom skills list` shows each with its source, and a loaded skill's instructions come back
//! after a compaction — in the next process too.

use loom_tests::{workspace_root, Scratch};

use super::{results, updates};

/// A bundled skill to exercise: the first folder of the workspace's skills/ (what the binary embeds).
fn a_bundled_skill() -> Option<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(workspace_root().join("skills"))
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("SKILL.md").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    let name = names.into_iter().next()?;
    let text =
        std::fs::read_to_string(workspace_root().join("skills").join(&name).join("SKILL.md"))
            .ok()?;
    // the body's first line after the frontmatter: enough to recognise it
    let body = text
        .splitn(3, "---")
        .nth(2)?
        .trim()
        .lines()
        .next()?
        .to_string();
    Some((name, body))
}

fn agent(s: &Scratch, session: &str, script: &str) {
    s.write(
        "agent.toml",
        &format!("[agent]\nname = \"bundled-e2e\"\n[harness]\nprovider = \"test\"\nscript = {script}\n{session}\n"),
    );
}

fn home(s: &Scratch) -> String {
    s.path().join("home").display().to_string()
}

#[test]
fn a_bundled_skill_is_read_and_a_workspace_skill_of_its_name_overrides_it() {
    let Some((name, body)) = a_bundled_skill() else {
        panic!("skills/ holds no skill: loom ships bundled skills");
    };
    let s = Scratch::new();
    let script = format!("[[{{ call = {{ tool = \"read_skill\", input = {{ skill = \"{name}\" }} }} }}, {{ say = \"done\" }}]]");
    agent(&s, "", &script);
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "completed", "{r:#?}");
    assert!(
        r[0].1.contains(&format!("<skill name=\"{name}\"")) && r[0].1.contains(&body),
        "{}",
        r[0].1
    );
    assert!(
        r[0].1.contains("bundled-skills"),
        "not read from the bundled root: {}",
        r[0].1
    );
    let list = s.loom_env(&["skills", "list", "--json"], &[("HOME", &home(&s))]);
    list.expect_code(0);
    let l: serde_json::Value = serde_json::from_str(&list.stdout()).unwrap();
    let row = l["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (row["source"].as_str(), row["verdict"].as_str()),
        (Some("bundled"), Some("active"))
    );
    assert!(l["skills"].as_array().unwrap().len() >= 20, "{l:#}");

    // the workspace's own skill of that name wins
    s.write(
        &format!(".loom/skills/{name}/SKILL.md"),
        &format!("---\nname: {name}\ndescription: The team's own way. Use when the task calls for it.\n---\nOUR OWN STEPS\n"),
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    let r = results(&updates(&run));
    assert!(
        r[0].1.contains("OUR OWN STEPS") && !r[0].1.contains(&body),
        "{}",
        r[0].1
    );
    let list = s.loom_env(&["skills", "list"], &[("HOME", &home(&s))]);
    list.expect_code(0).stdout_has(&format!(
        "overridden: the bundled {name} by the workspace skill"
    ));
    s.loom_env(&["audit", "agent.toml"], &[("HOME", &home(&s))])
        .expect_code(0)
        .stdout_has(&format!(
            "overridden    the bundled skill {name}, by the workspace skill"
        ));

    // a broken override: skipped with the usual note, and the bundled one is not used in its place
    s.write(
        &format!(".loom/skills/{name}/SKILL.md"),
        "---\nname: Not Valid\n---\n",
    );
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("HOME", &home(&s))],
    );
    run.stderr_has("the skill is skipped")
        .stderr_has(&format!("the bundled skill {name} is not used"));
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(r[0].1.contains("there is no skill named"), "{}", r[0].1);
}

#[test]
fn bundled_false_turns_them_off() {
    let Some((name, _)) = a_bundled_skill() else {
        panic!("skills/ holds no skill");
    };
    let s = Scratch::new();
    let script = format!("[[{{ call = {{ tool = \"read_skill\", input = {{ skill = \"{name}\" }} }} }}, {{ say = \"done\" }}]]");
    agent(
        &s,
        "[session]\nlayers = [\"skills\", \"compacting\", \"in-memory\"]\n[session.skills]\nbundled = false\n",
        &script,
    );
    let list = s.loom_env(&["skills", "list", "--json"], &[("HOME", &home(&s))]);
    list.expect_code(0);
    let l: serde_json::Value = serde_json::from_str(&list.stdout()).unwrap();
    assert_eq!(l["skills"], serde_json::json!([]));
    let run = s.loom_env(
        &[
            "prompt",
            "agent.toml",
            "go",
            "--format",
            "jsonl",
            "--emit-preamble",
        ],
        &[("HOME", &home(&s))],
    );
    let u = updates(&run);
    let system = u[0]["preamble"]["systemPrompt"].as_array().unwrap();
    assert!(
        system.len() == 1 && system[0].as_str().unwrap().starts_with("# Environment"),
        "a catalog without skills: {system:?}"
    );
    let r = results(&u);
    assert_eq!(r[0].0, "failed", "{r:#?}");
}

/// A loaded skill's instructions are back in the request after a compaction cut its activation away — with each
/// prompt a process of its own, so the list of loaded skills outlives the process too.
#[test]
fn a_loaded_skill_comes_back_after_a_compaction_and_a_restart() {
    let Some((name, body)) = a_bundled_skill() else {
        panic!("skills/ holds no skill");
    };
    let s = Scratch::new();
    let session = "[session]\nlayers = [\"skills\", \"compacting\", \"file\"]\n[session.compacting]\nkeep = 2\nthreshold = 4\npersist = true\n";
    let read = format!("[[{{ call = {{ tool = \"read_skill\", input = {{ skill = \"{name}\" }} }} }}, {{ say = \"read it\" }}]]");
    agent(&s, session, &read);
    s.loom_env(&["prompt", "agent.toml", "first"], &[("HOME", &home(&s))])
        .expect_code(0);
    agent(
        &s,
        session,
        "[[{ say = \"ok\" }], [{ say = \"ok\" }], [{ say = \"ok\" }]]",
    );
    for p in ["second", "third"] {
        s.loom_env(&["prompt", "agent.toml", p], &[("HOME", &home(&s))])
            .expect_code(0);
    }
    let run = s.loom_env(
        &[
            "prompt",
            "agent.toml",
            "fourth",
            "--format",
            "jsonl",
            "--emit-preamble",
        ],
        &[("HOME", &home(&s))],
    );
    run.expect_code(0);
    let events = updates(&run)[0]["preamble"]["events"].clone();
    let first = &events[0];
    let text = first["content"]["text"].as_str().unwrap_or_default();
    assert!(
        first["messageId"]
            .as_str()
            .is_some_and(|id| id.starts_with("loom-compaction-")),
        "no compaction happened: {events:#}"
    );
    let activation_kept = events.as_array().unwrap().iter().any(|e| {
        e["sessionUpdate"] == "tool_call_update" && e.to_string().contains("<skill name=")
    });
    assert!(
        !activation_kept,
        "the activation was not compacted away: {events:#}"
    );
    assert!(
        text.contains("Skills activated earlier in this session")
            && text.contains(&format!("<skill name=\"{name}\""))
            && text.contains(&body),
        "the skill is not back after the compaction:\n{text}"
    );
}
