use std::fs;
use std::path::Path;

use super::*;
use crate::tools::{ToolCtx, ToolOutput};
use loom_kernel::{decide, AlgebraKind, Decision, PathCtx};

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn skill(root: &Path, name: &str, extra_fm: &str, body: &str) {
    write(
        &root.join(name).join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: The {name} skill.\n{extra_fm}---\n{body}"),
    );
}

fn layer(root: &Path) -> SkillsLayer {
    let mut l = SkillsLayer::new(vec![root.to_path_buf()], SkillsEnv::default());
    let labels = l.tools().into_iter().map(|g| g.label).collect();
    l.bind(&labels, Arc::new(|_b: &ToolGroup, _n: &ToolGroup| Ok(())));
    l
}

/// Prepares, decides (as the turn loop does, under the layer's grant) and runs one read_skill call.
async fn call(l: &SkillsLayer, input: serde_json::Value) -> ToolOutput {
    let tool = l.session_tool(READ_SKILL).unwrap();
    let grant = l.session_tool_grant(READ_SKILL).unwrap();
    let p = match tool.prepare(&input) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let ctx = PathCtx::new("/", None);
    match decide(
        READ_SKILL,
        AlgebraKind::for_builtin("read_file"),
        &ctx,
        &grant,
        &p.request,
    ) {
        Decision::Allow(a) => {
            let tctx = ToolCtx {
                more: Vec::new(),
                cancel: tokio_util::sync::CancellationToken::new(),
                progress: Arc::new(|_| {}),
                history: None,
                client_fs: None,
                terminals: None,
            };
            (p.run)(a, tctx).await
        }
        Decision::Deny(d) => ToolOutput::error(d.to_string()),
    }
}

#[test]
fn roots_default_to_home_skills_then_project_then_home_dirs() {
    let roots = skill_roots(&toml::Table::new(), Path::new("/p"), Some(Path::new("/h")));
    let shown: Vec<String> = roots.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        shown,
        [
            "/h/.skills",
            "/p/.loom/skills",
            "/p/.agents/skills",
            "/h/.loom/skills",
            "/h/.agents/skills"
        ]
    );
    let cfg: toml::Table = toml::from_str("roots = [\"./skills\", \"/abs\", \"~/x\"]").unwrap();
    let roots = skill_roots(&cfg, Path::new("/p"), Some(Path::new("/h")));
    assert_eq!(
        roots[..3],
        [PathBuf::from("/p/./skills"), "/abs".into(), "/h/x".into()]
    );
}

#[test]
fn discovery_keeps_good_skills_and_warns_about_bad_ones_by_path() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    skill(&root, "good", "", "Do good.\n");
    write(
        &root.join("bad-yaml/SKILL.md"),
        "---\nname: bad-yaml\ndescription: [oops\n---\n",
    );
    write(
        &root.join("mismatch/SKILL.md"),
        "---\nname: other\ndescription: d\n---\n",
    );
    write(&root.join("not-a-skill/README.md"), "no SKILL.md here");
    let outside = d.path().join("elsewhere.md");
    write(&outside, "---\nname: linked\ndescription: d\n---\n");
    fs::create_dir_all(root.join("linked")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("linked/SKILL.md")).unwrap();

    let found = discover(
        &[root.clone(), d.path().join("missing")],
        &SkillsEnv::default(),
    );
    assert_eq!(found.skills.keys().collect::<Vec<_>>(), ["good"]);
    assert_eq!(found.warnings.len(), 3, "{:#?}", found.warnings);
    let w = found.warnings.join("\n");
    assert!(
        w.contains(&format!(
            "{}: frontmatter: line 3",
            root.join("bad-yaml/SKILL.md").display()
        )),
        "{w}"
    );
    assert!(
        w.contains("name: the name \"other\" does not match the skill's folder \"mismatch\""),
        "{w}"
    );
    assert!(w.contains("set `name: mismatch`"), "{w}");
    assert!(w.contains("outside the skill's folder"), "{w}");
    assert!(w.contains("copy the file into the folder"), "{w}");
    assert!(found
        .warnings
        .iter()
        .all(|w| w.ends_with("the skill is skipped")));
}

#[tokio::test]
async fn activation_wraps_the_body_lists_files_and_reads_one() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    skill(&root, "pdf", "", "# PDF\nRun scripts/extract.py.\n");
    write(&root.join("pdf/scripts/extract.py"), "print('x')\n");
    write(&root.join("pdf/references/REFERENCE.md"), "ref\n");
    write(&root.join("pdf/.hidden"), "no\n");
    let l = layer(&root);
    let dir = fs::canonicalize(root.join("pdf")).unwrap();

    let catalog = l.system_prompt_section().unwrap();
    assert!(
        catalog.contains(&format!("- pdf ({}): The pdf skill.", dir.display())),
        "{catalog}"
    );
    assert!(catalog.contains("read_skill"));

    let out = call(&l, json!({"skill": "pdf"})).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with(&format!(
            "<skill name=\"pdf\" directory=\"{}\">\n# PDF\nRun scripts/extract.py.\n</skill>",
            dir.display()
        )),
        "{}",
        out.text
    );
    assert!(out.text.contains(&format!(
        "Relative paths in these instructions resolve against {}",
        dir.display()
    )));
    assert!(
        out.text
            .contains("\n- references/REFERENCE.md\n- scripts/extract.py"),
        "{}",
        out.text
    );
    assert!(!out.text.contains(".hidden"));

    let out = call(&l, json!({"skill": "pdf", "path": "scripts/extract.py"})).await;
    assert_eq!((out.text.as_str(), out.is_error), ("print('x')\n", false));
}

#[tokio::test]
async fn the_listing_is_capped_at_fifty() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    skill(&root, "many", "", "b\n");
    for i in 0..60 {
        write(&root.join(format!("many/assets/f{i:02}.txt")), "x");
    }
    let out = call(&layer(&root), json!({"skill": "many"})).await;
    assert_eq!(out.text.matches("\n- assets/").count(), MAX_LISTED);
    assert!(
        out.text.contains("… and 10 more (not listed)"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn paths_out_of_the_skill_are_refused_with_the_skill_path_and_fix() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    skill(&root, "a", "", "a\n");
    skill(&root, "b", "", "b\n");
    write(&d.path().join("secret.txt"), "s3cret");
    std::os::unix::fs::symlink(d.path().join("secret.txt"), root.join("a/leak.txt")).unwrap();
    let l = layer(&root);
    let dir = fs::canonicalize(root.join("a")).unwrap();
    for p in ["../b/SKILL.md", "../../secret.txt", "leak.txt"] {
        let out = call(&l, json!({"skill": "a", "path": p})).await;
        assert!(out.is_error, "{p}");
        assert!(
            out.text
                .contains(&format!("outside the skill's folder {}", dir.display())),
            "{p}: {}",
            out.text
        );
        assert!(out.text.contains("give a path inside it"), "{}", out.text);
        assert!(!out.text.contains("s3cret"));
    }
    let abs = d.path().join("secret.txt").display().to_string();
    let out = call(&l, json!({"skill": "a", "path": abs})).await;
    assert!(
        out.is_error && out.text.contains("is absolute"),
        "{}",
        out.text
    );
    // the listing never shows the escaping symlink
    let out = call(&l, json!({"skill": "a"})).await;
    assert!(!out.text.contains("leak.txt"), "{}", out.text);
    let out = call(&l, json!({"skill": "nope"})).await;
    assert!(
        out.is_error
            && out
                .text
                .contains("there is no skill named \"nope\"; the skills are: a, b"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn trimmed_skills_are_invisible() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    skill(&root, "kept", "", "k\n");
    skill(&root, "trimmed", "", "t\n");
    let mut l = SkillsLayer::new(vec![root.clone()], SkillsEnv::default());
    let accepted = ["skill kept".to_string(), SKILLS_SESSION_GROUP.to_string()].into();
    l.bind(&accepted, Arc::new(|_b: &ToolGroup, _n: &ToolGroup| Ok(())));
    assert_eq!(l.active(), ["kept"]);
    assert!(!l.system_prompt_section().unwrap().contains("trimmed"));
    let out = call(&l, json!({"skill": "trimmed"})).await;
    assert!(
        out.is_error && out.text.contains("the skills are: kept"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn a_rescan_is_subtractive_only() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("skills");
    let bash_row = "metadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"dig\"], network = \"*\" } }\n";
    skill(&root, "dns", bash_row, "dig\n");
    skill(&root, "gone", "", "g\n");
    skill(&root, "stays", "", "s\n");
    let mut l = SkillsLayer::new(vec![root.clone()], SkillsEnv::default());
    let labels = l.tools().into_iter().map(|g| g.label).collect();
    let m =
        loom_kernel::parse_manifest("[agent]\nname = \"a\"\n", "agent.toml", &Default::default())
            .unwrap();
    let keeps: Keeper = Arc::new(move |b: &ToolGroup, n: &ToolGroup| {
        loom_kernel::rescan_keeps(&m, &PathCtx::new("/", None), b, n)
    });
    l.bind(&labels, keeps);
    assert_eq!(l.active(), ["dns", "gone", "stays"]);

    // dns now asks for curl with network; gone is deleted; a new skill appears
    skill(&root, "dns", "metadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"curl\"], network = \"*\" } }\n", "x\n");
    fs::remove_dir_all(root.join("gone")).unwrap();
    skill(&root, "newcomer", "", "n\n");
    l.prepare_turn().await.unwrap();
    assert_eq!(l.active(), ["stays"]);
    let dropped = l.dropped().join("\n");
    assert!(
        dropped.contains("skill dns is no longer available this session"),
        "{dropped}"
    );
    assert!(dropped.contains("restart to judge it"), "{dropped}");
    assert!(dropped.contains("skill gone"), "{dropped}");
    // each drop is told once, as a notice for the user
    let notices = l.take_notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(
        notices[0].starts_with("skill dns is no longer available this session"),
        "{notices:?}"
    );
    assert!(l.take_notices().is_empty());
    assert!(!l.system_prompt_section().unwrap().contains("newcomer"));
    let out = call(&l, json!({"skill": "newcomer"})).await;
    assert!(out.is_error);
    // and a skill that went away does not come back
    skill(&root, "gone", "", "g\n");
    l.prepare_turn().await.unwrap();
    assert_eq!(l.active(), ["stays"]);
}

#[test]
fn at_most_eight_loaded_skills_are_kept_the_oldest_going_first_with_a_notice() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("skills/loaded.json");
    let l = SkillsLayer::new(Vec::new(), SkillsEnv::default()).keeping_loaded_in(file.clone());
    for i in 0..10 {
        remember(
            &l.state,
            &format!("s{i}"),
            &format!("<skill name=\"s{i}\">body {i}</skill>"),
        );
    }
    // loading one again moves it to the end, it is not kept twice
    remember(&l.state, "s5", "<skill name=\"s5\">body 5</skill>");
    assert_eq!(l.loaded(), ["s2", "s3", "s4", "s6", "s7", "s8", "s9", "s5"]);
    let notices = lock(&l.state).pending.clone();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(
        notices[0].contains("skill s0 is no longer kept"),
        "{notices:?}"
    );
    // kept for the next process, which only keeps what it still finds
    let saved: Vec<(String, String)> = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(saved.len(), MAX_KEPT_SKILLS);
    // a long activation is cut at the cap, saying where the rest is
    remember(&l.state, "long", &"x".repeat(MAX_KEPT_CHARS + 500));
    let st = lock(&l.state);
    let (_, kept) = st.loaded.last().unwrap();
    assert!(
        kept.starts_with(&"x".repeat(MAX_KEPT_CHARS)) && kept.contains("[cut at 8000 characters")
    );
    assert!(kept.chars().count() < MAX_KEPT_CHARS + 200);
}

#[test]
fn reinjection_adds_only_missing_activations_and_only_to_a_summary() {
    use crate::update::{Chunk, Content, ToolCallContent, ToolCallUpdate};
    let loaded = vec![
        ("a".to_string(), "<skill name=\"a\">AAA</skill>".to_string()),
        ("b".to_string(), "<skill name=\"b\">BBB</skill>".to_string()),
    ];
    let user = |id: &str, text: &str| {
        SessionUpdate::UserMessageChunk(Chunk {
            content: Content::text(text),
            message_id: Some(id.into()),
        })
    };
    let result = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
        tool_call_id: "c1".into(),
        status: None,
        content: Some(vec![ToolCallContent::Content {
            content: Content::text("<skill name=\"b\" directory=\"x\">BBB</skill>"),
        }]),
        raw_output: None,
    });
    // no compaction: nothing changes
    let plain = vec![user("u1", "hello"), result.clone()];
    assert_eq!(reinject(plain.clone(), &loaded), plain);
    // after one: the summary gains the activation the history lost, not the one it kept
    let compacted = vec![user("loom-compaction-1", "summary"), result];
    let out = reinject(compacted, &loaded);
    let SessionUpdate::UserMessageChunk(first) = &out[0] else {
        panic!("{out:?}");
    };
    let text = first.content.as_text();
    assert!(
        text.starts_with("summary") && text.contains("AAA") && !text.contains("BBB"),
        "{text}"
    );
    assert_eq!(out.len(), 2);
}
