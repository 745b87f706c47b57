//! `loom audit` on skills: ACTIVE/INACTIVE verdicts per skill with paste-ready remediation, and malformed skills as
//! warnings naming the file, the key and the fix.

use loom_tests::skills_fixture::write_skills;
use loom_tests::Scratch;

const AGENT: &str = "[agent]\nname = \"skills-audit\"\n[harness]\nprovider = \"test\"\necho = true\n[tools]\nbash = { capabilities = { commands = \"*\", paths = [\"./\"] } }\n";

#[test]
fn audit_lists_skills_with_verdicts_remediation_and_warnings() {
    let s = Scratch::new();
    write_skills(&s, ".agents/skills");
    let home = s.path().join("home").display().to_string();
    let m = s.write(
        "agent.toml",
        &format!("{AGENT}[capabilities]\nbash = {{ commands = [\"dig\"], network = \"*\" }}\n"),
    );
    let m = m.display().to_string();
    let run = s.loom_env(&["audit", &m], &[("HOME", &home)]);
    run.expect_code(1)
        .stdout_has("skill dns-lookup  [ACTIVE]")
        .stdout_has("ok        bash requests { commands = [\"dig\"], network = \"*\" } (within `bash`)")
        .stdout_has("skill pdf-processing  [ACTIVE]")
        .stdout_has("ok        read_skill requests nothing")
        .stdout_has("skill calendar  [INACTIVE]")
        .stdout_has("error    skill calendar: tool group rejected")
        .stdout_has("broken-yaml/SKILL.md: frontmatter: line 3: a flow collection opened with \"[\" is never closed")
        .stdout_has("wrong-name/SKILL.md: name: the name \"right-name\" does not match the skill's folder \"wrong-name\" (hint: set `name: wrong-name`")
        .stdout_has("linked/SKILL.md: it is a symlink to");
    assert!(
        !run.stdout().contains("not resolved yet"),
        "{}",
        run.stdout()
    );

    // paste the remediation line: the calendar skill becomes ACTIVE and the audit is clean
    let out = run.stdout();
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("to accept, put in [capabilities]:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no remediation line in {out}"))
        .to_string();
    assert!(line.starts_with("bash = ["), "{line}");
    s.write("agent.toml", &format!("{AGENT}[capabilities]\n{line}\n"));
    s.loom_env(&["audit", &m], &[("HOME", &home)])
        .expect_code(0)
        .stdout_has("skill calendar  [ACTIVE]")
        .stdout_has("skill dns-lookup  [ACTIVE]");

    let json = s.loom_env(&["audit", &m, "--json"], &[("HOME", &home)]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap_or_default();
    // the skills built into loom are listed too; this test is about the workspace's
    let bundled: Vec<String> = std::fs::read_dir(loom_tests::workspace_root().join("skills"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str().map(|n| format!("skill {n}")))
        .collect();
    let labels: Vec<&str> = v["toolGroups"]
        .as_array()
        .map(|g| g.iter().filter_map(|g| g["label"].as_str()).collect())
        .unwrap_or_default();
    let labels: Vec<&str> = labels
        .into_iter()
        .filter(|l| !bundled.iter().any(|b| b == l))
        .collect();
    assert_eq!(
        labels,
        [
            "skills session",
            "skill calendar",
            "skill dns-lookup",
            "skill pdf-processing"
        ]
    );
    // three skills warnings, and `./` covering the test's HOME (inside the directory it runs from)
    assert_eq!(v["health"]["warnings"], 4, "{}", json.stdout());
}

#[test]
fn a_skill_adding_rows_to_a_tool_the_agent_lacks_is_flagged() {
    let s = Scratch::new();
    s.write(
        ".loom/skills/writer/SKILL.md",
        "---\nname: writer\ndescription: Writes notes.\nmetadata:\n  loom.tools: |\n    write_file = { capabilities = { paths = [\"./notes\"] } }\n---\nWrite notes.\n",
    );
    let m = s.write(
        "agent.toml",
        &format!("{AGENT}[capabilities]\nwrite_file = {{ paths = [\"./\"] }}\n"),
    );
    s.loom_env(&["audit", &m.display().to_string()], &[("HOME", &s.path().join("home").display().to_string())])
        .stdout_has("skill writer  [ACTIVE]")
        .stdout_has("warning  skill writer: fits the ceiling but cannot be bound, so it is inactive at run: it adds grant rows to `write_file`, which this agent has no [tools] entry for; add `write_file = \"builtin\"`");
}
