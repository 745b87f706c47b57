//! A skill that ships its own provider as a source (`note_add = { provider = "./provider" }`), through the real
//! binary: left out with the fix until `loom install` pins it under the kernel's shipped key, then bound and called
//! through `loom prompt`; `--frozen` refusing a changed skill without writing; boot refusing a tampered install; and
//! rejected groups and paths out of the skill's folder never installed.

use std::path::{Path, PathBuf};

use loom_tests::{workspace_root, Run, Scratch};

use super::{results, updates};

const SKILL: &str = ".agents/skills/notes-skill";

/// The skill: its tool comes from the example notes provider, copied into the skill's `provider/` folder.
fn skill(s: &Scratch, provider: &str) {
    s.write(
        &format!("{SKILL}/SKILL.md"),
        &format!(
            "---\nname: notes-skill\ndescription: Keep notes with the skill's own provider.\nmetadata:\n  loom.tools: |\n    \
             note_add = {{ provider = \"{provider}\" }}\n---\nCall note_add.\n"
        ),
    );
    let ex = workspace_root().join("examples/notes-provider");
    for f in ["package.json", "provider.mjs"] {
        let body = std::fs::read_to_string(ex.join(f)).unwrap();
        s.write(&format!("{SKILL}/provider/{f}"), &body);
    }
}

/// The host, with `consent` in its [capabilities] (the consent rule: the instance named) and, when it names one, the
/// `[consent]` line `loom audit` prints for the skill (its name and the digest of what it ships).
fn agent(s: &Scratch, consent: &str) {
    let text = format!(
        "[agent]\nname = \"shipped\"\n[harness]\nprovider = \"test\"\nscript = [[\n  \
         {{ call = {{ tool = \"note_add\", input = {{ text = \"buy milk\" }} }} }},\n  {{ say = \"ok\" }},\n]]\n\
         [tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = {{ paths = [\"./src\"] }}\n{consent}\n"
    );
    s.write("agent.toml", &text);
    if consent.is_empty() {
        return;
    }
    let out = loom(s, &["audit", "agent.toml"]).stdout();
    let lines: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split("in [consent]:  ").nth(1))
        .collect();
    assert!(!lines.is_empty(), "no [consent] line in audit:\n{out}");
    s.write(
        "agent.toml",
        &format!("{text}[consent]\n{}\n", lines.join("\n")),
    );
}

fn loom(s: &Scratch, args: &[&str]) -> Run {
    let home = s.path().join("home").display().to_string();
    s.loom_env(args, &[("HOME", &home)])
}

fn prompt(s: &Scratch) -> (Run, Vec<(String, String)>) {
    let run = loom(s, &["prompt", "agent.toml", "go", "--format", "jsonl"]);
    run.expect_code(0);
    let r = results(&updates(&run));
    (run, r)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The one install directory under `.loom/providers`, if there is exactly one.
fn installed(s: &Scratch) -> Option<PathBuf> {
    let list: Vec<PathBuf> = std::fs::read_dir(s.path().join(".loom/providers"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    (list.len() == 1).then(|| list[0].clone())
}

#[test]
fn a_skill_ships_its_provider_and_runs_only_from_its_pinned_install() {
    let s = Scratch::new();
    skill(&s, "./provider");
    agent(&s, "note_add = \"*\"");
    // before install: boot leaves the tool out with the fix; audit says the same
    let (run, r) = prompt(&s);
    run.stderr_has(
        "contributed tool note_add is left out: the provider `skill-notes-skill--provider-",
    )
    .stderr_has("there is no .loom/lock.toml")
    .stderr_has("run `loom install`");
    assert!(
        r[0].0 == "failed" && r[0].1.contains("no tool named \"note_add\""),
        "{r:#?}"
    );
    loom(&s, &["audit", "agent.toml"])
        .expect_code(1)
        .stdout_has("skill notes-skill  [ACTIVE]")
        .stdout_has("    ships     ./provider (path ./provider)  as skill-notes-skill--provider-")
        .stdout_has("[missing]")
        .stdout_has("note_add is left out at boot:")
        .stdout_has("run `loom install`");

    // install: pinned under the shipped key, copied from the skill's folder
    loom(&s, &["install", "agent.toml"])
        .expect_code(0)
        .stdout_has("(skill notes-skill ships ./provider (path ./provider))")
        .stdout_has("(pinned)");
    let dir = installed(&s).expect("one install");
    let key = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(key.starts_with("skill-notes-skill--provider-"), "{key}");
    assert!(dir.join("provider.mjs").is_file());
    let lock = read(&s.path().join(".loom/lock.toml"));
    assert!(
        lock.contains(&format!("[providers.{key}]\nsource = \"path ./provider\"")),
        "{lock}"
    );
    let skill_dir = std::fs::canonicalize(s.path().join(SKILL).join("provider")).unwrap();
    assert!(
        lock.contains(&format!("resolved = \"{}\"", skill_dir.display())),
        "{lock}"
    );

    // audit starts it from the install and shows what the model sees
    loom(&s, &["audit", "agent.toml"])
        .expect_code(0)
        .stdout_has("[installed]")
        .stdout_has(r#"note_add  model sees  {"type":"object","properties":{"text":{"type":"string","description":"What to remember."}},"required":["text"]}"#)
        .stdout_has("0 errors");
    let json = loom(&s, &["audit", "agent.toml", "--json"]);
    json.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    let group = v["toolGroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["label"] == "skill notes-skill")
        .unwrap()
        .clone();
    assert_eq!(group["shipped"][0]["handle"], key.as_str(), "{group}");
    assert_eq!(group["shipped"][0]["state"], "installed", "{group}");
    assert_eq!(
        group["shipped"][0]["tools"]["note_add"]["server"],
        key.as_str(),
        "{group}"
    );
    assert_eq!(v["providers"][0]["group"], "skill notes-skill", "{v}");

    // bound at boot and called end to end
    let (run, r) = prompt(&s);
    assert_eq!(
        r[0],
        ("completed".to_string(), "remembered (1 notes)".to_string()),
        "{}",
        run.stderr()
    );
    loom(&s, &["install", "agent.toml", "--frozen"])
        .expect_code(0)
        .stdout_has("(matches the lock)");

    // the skill's provider changes: --frozen names the drift and writes nothing
    let source = s.path().join(SKILL).join("provider/provider.mjs");
    let pinned = read(&source);
    std::fs::write(&source, format!("{pinned}\nprocess.exit(3);\n")).unwrap();
    loom(&s, &["install", "agent.toml", "--frozen"])
        .expect_code(1)
        .stderr_has(&format!(
            "the shipped provider `{key}`: `path ./provider` now materialises to tree sha256"
        ))
        .stderr_has("nothing was written");
    assert_eq!(read(&s.path().join(".loom/lock.toml")), lock);
    assert_eq!(read(&dir.join("provider.mjs")), pinned);
    // boot never runs the skill's folder: the pinned copy still answers
    let (run, r) = prompt(&s);
    assert_eq!(
        r[0],
        ("completed".to_string(), "remembered (2 notes)".to_string()),
        "{}",
        run.stderr()
    );
    // and a tampered install is refused: the tool is left out with the fix
    std::fs::write(dir.join("provider.mjs"), read(&source)).unwrap();
    let (run, r) = prompt(&s);
    run.stderr_has("contributed tool note_add is left out")
        .stderr_has("changed since install")
        .stderr_has("run `loom install`");
    assert!(r[0].0 == "failed", "{r:#?}");

    // without consent the group is rejected: nothing shipped is installed, and the old install goes
    agent(&s, "");
    loom(&s, &["install", "agent.toml"])
        .expect_code(0)
        .stdout_has("nothing to install");
    assert!(
        installed(&s).is_none(),
        "a rejected group's provider stayed installed"
    );
    assert!(!read(&s.path().join(".loom/lock.toml")).contains(&key));
}

#[test]
fn a_shipped_path_out_of_the_skill_folder_is_refused() {
    let s = Scratch::new();
    let ex = workspace_root().join("examples/notes-provider");
    for f in ["package.json", "provider.mjs"] {
        let body = std::fs::read_to_string(ex.join(f)).unwrap();
        s.write(&format!("elsewhere/{f}"), &body);
    }
    // `..` out of the folder, an absolute path elsewhere, and a symlink inside that points out
    let elsewhere = std::fs::canonicalize(s.path().join("elsewhere")).unwrap();
    let abs = elsewhere.display().to_string();
    for (written, link) in [
        ("../../../elsewhere", false),
        (abs.as_str(), false),
        ("./provider", true),
    ] {
        let _ = std::fs::remove_dir_all(s.path().join(".agents"));
        skill(&s, written);
        if link {
            std::fs::remove_dir_all(s.path().join(SKILL).join("provider")).unwrap();
            std::os::unix::fs::symlink(&elsewhere, s.path().join(SKILL).join("provider")).unwrap();
        }
        // consent to exactly this skill's spec
        agent(&s, "note_add = \"*\"");
        loom(&s, &["install", "agent.toml"])
            .expect_code(1)
            .stderr_has(&format!(
                "skill notes-skill ships {written} (path {written}): the path source"
            ))
            .stderr_has(&format!("resolves to {abs}, outside the folder"))
            .stderr_has("nothing was changed");
        assert!(
            !s.path().join(".loom").exists(),
            "{written}: install wrote something"
        );
    }
}
