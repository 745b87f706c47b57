use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::contrib::ceiling::tool_grants;
use crate::contrib::judge::judge_group;
use crate::manifest::parse_manifest;

fn doc(text: &str, folder: &str) -> Result<SkillDoc, ManifestError> {
    parse_skill_md(text, folder, &format!("/s/{folder}/SKILL.md"))
}

fn compile(text: &str, folder: &str, sidecar: Option<&str>) -> Result<ToolGroup, ManifestError> {
    let d = doc(text, folder)?;
    let origin = format!("/s/{folder}/SKILL.md");
    let dir = format!("/s/{folder}");
    let side = format!("/s/{folder}/loom.toml");
    compile_skill(
        SkillFacts {
            doc: &d,
            origin: &origin,
            dir: &dir,
            sidecar: sidecar.map(|t| (t, side.as_str())),
        },
        &BTreeSet::new(),
    )
}

const DNS: &str = "---\nname: dns-lookup\ndescription: Look up DNS records with dig. Use when the user asks\n  what a domain resolves to.\nmetadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"dig\"], network = \"*\" } }\n---\n\n# DNS lookup\n";

#[test]
fn name_rules() {
    assert!(check_skill_name("pdf-processing", "pdf-processing").is_ok());
    assert!(check_skill_name("a1", "a1").is_ok());
    let cases = [
        ("PDF-Processing", "contains 'P'", "\"pdf-processing\""),
        ("-pdf", "starts or ends with a hyphen", "\"pdf\""),
        ("pdf-", "starts or ends with a hyphen", "\"pdf\""),
        ("pdf--x", "two hyphens in a row", "\"pdf-x\""),
        ("pdf_x", "contains '_'", "\"pdf-x\""),
        ("", "empty", "name: "),
    ];
    for (name, msg, fix) in cases {
        let (m, hint) = check_skill_name(name, "pdf").unwrap_err();
        assert!(m.contains(msg), "{name}: {m}");
        assert!(hint.contains(fix), "{name}: {hint}");
    }
    let long = "a".repeat(65);
    assert!(check_skill_name(&long, &long)
        .unwrap_err()
        .0
        .contains("limit is 64"));
    let (m, hint) = check_skill_name("calendar", "cal").unwrap_err();
    assert!(
        m.contains("does not match the skill's folder \"cal\""),
        "{m}"
    );
    assert_eq!(
        hint,
        "set `name: cal`, or rename the folder to \"calendar\""
    );
}

#[test]
fn the_seed_dns_skill_parses_and_compiles_to_its_bash_row() {
    let d = doc(DNS, "dns-lookup").unwrap();
    assert_eq!(
        d.description,
        "Look up DNS records with dig. Use when the user asks what a domain resolves to."
    );
    assert_eq!(d.body, "\n# DNS lookup\n");
    let g = compile(DNS, "dns-lookup", None).unwrap();
    assert_eq!(g.label, "skill dns-lookup");
    assert_eq!(g.origin, "/s/dns-lookup/SKILL.md");
    assert_eq!(g.tools["bash"].provider, ProviderRef::Host);
    assert_eq!(
        g.tools["bash"].capabilities.as_ref().unwrap().to_string(),
        "{ commands = [\"dig\"], network = \"*\" }"
    );
}

#[test]
fn a_spec_skill_without_loom_metadata_is_authority_free() {
    let text = "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files.\nlicense: Apache-2.0\nmetadata:\n  author: example-org\n  version: \"1.0\"\n---\nUse pdfplumber.\n";
    let g = compile(text, "pdf-processing", None).unwrap();
    assert_eq!(g.tools.len(), 1);
    assert_eq!(g.tools["read_skill"].provider, ProviderRef::Host);
    assert!(g.tools["read_skill"].capabilities.is_none());
}

#[test]
fn the_sidecar_wins_and_skill_dir_is_substituted() {
    let side = "[tools]\nrun = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"${SKILL_DIR}/run.sh\"], paths = [\"${SKILL_DIR}\"] } }\n";
    let g = compile(DNS, "dns-lookup", Some(side)).unwrap();
    assert_eq!(g.origin, "/s/dns-lookup/loom.toml");
    assert!(
        !g.tools.contains_key("bash"),
        "frontmatter ignored when a sidecar exists"
    );
    assert_eq!(
        g.tools["run"].capabilities.as_ref().unwrap().to_string(),
        "{ commands = [\"/s/dns-lookup/run.sh\"], paths = [\"/s/dns-lookup\"] }"
    );
    let e = compile(DNS, "dns-lookup", Some("[tool]\nx = 1\n")).unwrap_err();
    assert_eq!(e.file, "/s/dns-lookup/loom.toml");
}

#[test]
fn a_skill_never_reads_the_environment() {
    // every ${NAME} but ${SKILL_DIR} is an error naming the variable and where it is, default or not
    let fm = |value: &str| {
        format!("---\nname: x\ndescription: d\nmetadata:\n  loom.tools: |\n    r = {{ provider = \"builtin\", tool = \"read_file\", capabilities = {{ paths = [\"{value}\"] }} }}\n---\n")
    };
    let cases = [
        ("./${AWS_SECRET_ACCESS_KEY}", "AWS_SECRET_ACCESS_KEY"),
        ("${HOME}/.ssh", "HOME"),
        ("${GITHUB_TOKEN:-none}", "GITHUB_TOKEN"),
        ("${SKILL_DIR}/${PWD}", "PWD"),
    ];
    for (value, name) in cases {
        let e = compile(&fm(value), "x", None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("/s/x/SKILL.md: tools.r.capabilities.paths[1]: ${{{name}}}: a skill's declarations never read the environment; only ${{SKILL_DIR}} is substituted here (hint: write the value itself (a path under ${{SKILL_DIR}} for the skill's own files); settings that depend on the user's machine belong in the manifest)")
        );
        let side = format!("[tools]\nr = {{ provider = \"builtin\", tool = \"read_file\", capabilities = {{ paths = [\"{value}\"] }} }}\n");
        let e = compile(DNS, "dns-lookup", Some(&side)).unwrap_err();
        assert_eq!(e.file, "/s/dns-lookup/loom.toml");
        assert!(e.message.starts_with(&format!("${{{name}}}: ")), "{e}");
    }
    // the providers text too
    let shipped = "---\nname: x\ndescription: d\nmetadata:\n  loom.tools: |\n    n = { provider = \"srv\" }\n  loom.providers: |\n    srv = { provider = \"mcp-server\", command = \"node\", args = [\"${SKILL_DIR}/s.mjs\", \"${GH_TOKEN}\"] }\n---\n";
    let e = compile(shipped, "x", None).unwrap_err();
    assert_eq!(e.key_path, "providers.srv.args[2]");
    assert!(e.message.starts_with("${GH_TOKEN}: "), "{e}");
    // ${SKILL_DIR} alone compiles
    assert!(compile(&fm("${SKILL_DIR}/data"), "x", None).is_ok());
}

#[test]
fn malformed_skills_are_reported_with_file_key_and_fix() {
    let cases = [
        ("---\nname: x\ndescription: [broken\n---\n", "x", "frontmatter", "line 3"),
        ("---\nname: other\ndescription: d\n---\n", "x", "name", "does not match"),
        ("---\nname: x\n---\n", "x", "description", "missing or empty"),
        ("---\nname: x\ndescription: d\nmetadata:\n  loom.tools:\n    - a\n---\n", "x", "metadata.loom.tools", "must be a string"),
        ("---\nname: x\ndescription: d\nmetadata:\n  loom.tools: |\n    bash = { capabilities = 3 }\n---\n", "x", "tools.bash", ""),
        ("---\nname: x\ndescription: d\nmetadata:\n  loom.providers: |\n    p = { provider = \"mcp-server\", command = \"node\" }\n---\n", "x", "metadata.loom.providers", "no tool uses"),
    ];
    for (text, folder, key, msg) in cases {
        let e = compile(text, folder, None).unwrap_err();
        assert_eq!(e.file, format!("/s/{folder}/SKILL.md"), "{text}");
        assert!(e.key_path.starts_with(key), "{text}: {e}");
        assert!(e.message.contains(msg), "{text}: {e}");
    }
    let long = format!("---\nname: x\ndescription: {}\n---\n", "d".repeat(1025));
    let e = compile(&long, "x", None).unwrap_err();
    assert!(e.to_string().contains("limit is 1024"), "{e}");
}

fn host(caps: &str) -> Manifest {
    parse_manifest(
        &format!("[agent]\nname = \"h\"\n[tools]\nbash = {{ capabilities = {{ commands = \"*\", paths = [\"./\"] }} }}\nread_file = \"builtin\"\n{caps}"),
        "agent.toml",
        &BTreeMap::new(),
    )
    .unwrap()
}

#[test]
fn an_accepted_skill_adds_its_rows_to_the_hosts_tool() {
    let m = host("[capabilities]\nbash = { commands = [\"dig\"], network = \"*\" }\n");
    let ctx = PathCtx::new("/w", Some("/home/u".into()));
    let ceiling = m.effective_ceiling(&ctx);
    let g = compile(DNS, "dns-lookup", None).unwrap();
    assert!(judge_group(&m, &ceiling, &ctx, &g).accepted);
    assert_eq!(binding_problem(&m, &g), None);
    let tools = tool_grants(&m, &ceiling);
    let bound = bound_grants(&m, &ctx, &tools, &[&g]);
    assert_eq!(
        bound["bash"].to_string(),
        "[{ commands = \"*\", paths = [\"./\"] }, { commands = [\"dig\"], network = \"*\" }]"
    );
    // already covered: nothing changes
    assert!(bound_grants(&m, &ctx, &tools, &[&compile("---\nname: a\ndescription: d\nmetadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"ls\"], paths = [\"./\"] } }\n---\n", "a", None).unwrap()]).is_empty());
}

/// Skill `a` declaring `tools` in its frontmatter.
fn g(tools: &str) -> ToolGroup {
    compile(
        &format!("---\nname: a\ndescription: d\nmetadata:\n  loom.tools: |\n    {tools}\n---\n"),
        "a",
        None,
    )
    .unwrap()
}

#[test]
fn binding_problems() {
    let m = host("");
    assert!(binding_problem(
        &m,
        &g("write_file = { capabilities = { paths = [\"./\"] } }")
    )
    .unwrap()
    .contains("no [tools] entry for"));
    assert!(binding_problem(&m, &g("remember = \"session\""))
        .unwrap()
        .contains("provides only `read_skill`"));
    assert!(
        binding_problem(&m, &g("bash = { provider = \"builtin\", tool = \"bash\" }"))
            .unwrap()
            .contains("already uses")
    );
    assert_eq!(binding_problem(&m, &g("jq = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"jq\"] } }")), None);
    assert_eq!(binding_problem(&m, &g("read_skill = {}")), None);
}

#[test]
fn a_rescan_may_only_shrink() {
    let m = host("");
    let ctx = PathCtx::new("/w", None);
    let boot = g("bash = { capabilities = [{ commands = [\"dig\"], network = \"*\" }, { commands = [\"ls\"] }] }");
    assert!(rescan_keeps(&m, &ctx, &boot, &boot).is_ok());
    assert!(rescan_keeps(
        &m,
        &ctx,
        &boot,
        &g("bash = { capabilities = { commands = [\"ls\"] } }")
    )
    .is_ok());
    let e = rescan_keeps(
        &m,
        &ctx,
        &boot,
        &g("bash = { capabilities = { commands = [\"curl\"], network = \"*\" } }"),
    )
    .unwrap_err();
    assert!(
        matches!(e, RescanDrop::Wider { ref name, .. } if name == "bash"),
        "{e}"
    );
    assert!(e.to_string().contains("more than"), "{e}");
    let e = rescan_keeps(
        &m,
        &ctx,
        &boot,
        &g("jq = { provider = \"builtin\", tool = \"bash\" }"),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "it now declares `jq`, which was not bound at boot; restart to bind it"
    );
    let free = g("read_skill = {}");
    assert!(rescan_keeps(&m, &ctx, &free, &free).is_ok());
    assert!(rescan_keeps(&m, &ctx, &free, &boot).is_err());
}

#[test]
fn clashing_groups_are_refused_whatever_the_order() {
    let claims = [
        (
            "skill abc-helper".to_string(),
            vec!["echo_note".to_string()],
        ),
        (
            "skill echo-notes".to_string(),
            vec!["echo_note".to_string()],
        ),
        (
            "skill wc-a".to_string(),
            vec!["wc".to_string(), "grep".to_string()],
        ),
        ("skill wc-b".to_string(), vec!["wc".to_string()]),
        ("skill alone".to_string(), vec!["solo".to_string()]),
        ("skills session".to_string(), vec!["read_skill".to_string()]),
    ];
    let want: BTreeMap<String, (String, Vec<String>)> = [
        ("skill abc-helper", ("echo_note", vec!["skill echo-notes"])),
        ("skill echo-notes", ("echo_note", vec!["skill abc-helper"])),
        ("skill wc-a", ("wc", vec!["skill wc-b"])),
        ("skill wc-b", ("wc", vec!["skill wc-a"])),
    ]
    .into_iter()
    .map(|(l, (n, o))| {
        (
            l.to_string(),
            (n.to_string(), o.into_iter().map(String::from).collect()),
        )
    })
    .collect();
    // every permutation of the load order gives the same answer (Heap's algorithm)
    let mut order: Vec<usize> = (0..claims.len()).collect();
    let mut c = vec![0usize; order.len()];
    let check = |order: &[usize]| {
        let permuted: Vec<_> = order.iter().map(|i| claims[*i].clone()).collect();
        assert_eq!(group_clashes(&permuted), want, "{order:?}");
    };
    check(&order);
    let mut i = 1;
    let mut seen = 1;
    while i < order.len() {
        if c[i] < i {
            order.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
            check(&order);
            seen += 1;
            c[i] += 1;
            i = 1;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    assert_eq!(seen, 720);
}
