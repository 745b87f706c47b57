//! Typed ceiling keys (issue 25 item 1) as properties, exhaustively over a bounded domain, through the kernel's own
//! judgement of contributed groups (`judge_group`), not through a re-statement of it:
//! - a consent key covers exactly one skill's one shipped implementation: every (skill, spec, tool) a group could ship
//!   under that key is accepted iff it is the consented one;
//! - a key written for one built-in never covers a renamed built-in of another tool, nor a shipped implementation;
//! - the verdicts do not depend on the order the groups are judged in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use loom_kernel::{
    judge_group, parse_manifest, parse_tool_group, Manifest, PathCtx, ProviderRef, ToolGroup,
};

const SKILLS: [&str; 2] = ["notes", "evil"];
const COMMANDS: [&str; 2] = ["node", "sh"];
const TOOLS: [&str; 2] = ["echo", "delete"];
const BUILTINS: [&str; 3] = ["read_file", "write_file", "bash"];

fn ctx() -> PathCtx {
    PathCtx::new("/w", Some("/home/u".into()))
}

/// The group skill `skill` contributes: instance `x` from a server running `command`, tool `tool`.
fn shipping(skill: &str, command: &str, tool: &str) -> ToolGroup {
    let env = BTreeMap::from([("SKILL_DIR".to_string(), format!("/skills/{skill}"))]);
    parse_tool_group(
        &format!("skill {skill}"),
        &format!("x = {{ provider = \"srv\", tool = \"{tool}\" }}"),
        Some(&format!(
            "srv = {{ provider = \"mcp-server\", command = \"{command}\" }}"
        )),
        &format!("{skill}/SKILL.md"),
        &env,
        &BTreeSet::new(),
    )
    .unwrap()
}

fn digest(g: &ToolGroup) -> String {
    match &g.tools["x"].provider {
        ProviderRef::Shipped(s) => s.digest.clone(),
        other => panic!("{other:?}"),
    }
}

fn manifest(body: &str) -> Manifest {
    parse_manifest(
        &format!("[agent]\nname = \"a\"\n{body}"),
        "agent.toml",
        &BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{body}"))
}

#[test]
fn a_consent_key_covers_exactly_the_consented_implementation() {
    let c = ctx();
    let mut cases = 0;
    for (cs, cc, ct) in triples() {
        let consented = shipping(cs, cc, ct);
        let m = manifest(&format!(
            "[capabilities]\nx = \"*\"\n[consent]\nx = {{ skill = \"{cs}\", sha256 = \"{}\" }}\n",
            digest(&consented)
        ));
        let ceiling = m.effective_ceiling(&c);
        for (s, cmd, t) in triples() {
            let g = shipping(s, cmd, t);
            let accepted = judge_group(&m, &ceiling, &c, &g).accepted;
            assert_eq!(
                accepted,
                (s, cmd, t) == (cs, cc, ct),
                "consent to {cs}/{cc}/{ct}, group {s}/{cmd}/{t}"
            );
            cases += 1;
        }
        // a grant alone, without the consent line, covers no implementation
        let bare = manifest("[capabilities]\nx = \"*\"\n");
        assert!(!judge_group(&bare, &bare.effective_ceiling(&c), &c, &consented).accepted);
    }
    assert_eq!(cases, 64);
}

fn triples() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut out = Vec::new();
    for s in SKILLS {
        for c in COMMANDS {
            for t in TOOLS {
                out.push((s, c, t));
            }
        }
    }
    out
}

#[test]
fn a_builtin_key_covers_only_its_own_tool() {
    let c = ctx();
    for granted in BUILTINS {
        // the manifest grants `granted` (and lists it), and a skill adds a renamed built-in of each tool
        let m = manifest(&format!(
            "[tools]\n{granted} = \"builtin\"\n[capabilities]\n{granted} = {{ paths = [\"./\"] }}\n"
        ));
        let ceiling = m.effective_ceiling(&c);
        for asked in BUILTINS {
            let g = parse_tool_group(
                "skill s",
                &format!("mine = {{ provider = \"builtin\", tool = \"{asked}\", capabilities = {{ paths = [\"./\"] }} }}"),
                None,
                "s/SKILL.md",
                &BTreeMap::new(),
                &BTreeSet::new(),
            )
            .unwrap();
            let accepted = judge_group(&m, &ceiling, &c, &g).accepted;
            assert_eq!(
                accepted,
                asked == granted,
                "granted {granted}, a skill's renamed {asked}"
            );
        }
        // nor a shipped implementation under the built-in's own name
        let g = parse_tool_group(
            "skill s",
            &format!("{granted} = {{ provider = \"srv\", tool = \"echo\" }}"),
            Some("srv = { provider = \"mcp-server\", command = \"node\" }"),
            "s/SKILL.md",
            &BTreeMap::new(),
            &BTreeSet::new(),
        );
        if let Ok(g) = g {
            assert!(
                !judge_group(&m, &ceiling, &c, &g).accepted,
                "{granted} covered a shipped server"
            );
        }
    }
}

#[test]
fn verdicts_do_not_depend_on_judging_order() {
    let c = ctx();
    let consented = shipping("notes", "node", "echo");
    let m = manifest(&format!(
        "[capabilities]\nx = \"*\"\n[consent]\nx = {{ skill = \"notes\", sha256 = \"{}\" }}\n",
        digest(&consented)
    ));
    let ceiling = m.effective_ceiling(&c);
    let groups: Vec<ToolGroup> = triples()
        .into_iter()
        .map(|(s, cmd, t)| shipping(s, cmd, t))
        .collect();
    let forward: Vec<bool> = groups
        .iter()
        .map(|g| judge_group(&m, &ceiling, &c, g).accepted)
        .collect();
    let mut backward: Vec<bool> = groups
        .iter()
        .rev()
        .map(|g| judge_group(&m, &ceiling, &c, g).accepted)
        .collect();
    backward.reverse();
    assert_eq!(forward, backward);
    assert_eq!(forward.iter().filter(|a| **a).count(), 1);
}
