//! `SKILL.md` files come from skill folders a user installs (untrusted text): arbitrary text ->
//! `parse_skill_md(text, "pdf", "skills/pdf/SKILL.md")`, and for a parsed skill `compile_skill` on its
//! `metadata.loom.tools` / `metadata.loom.providers` TOML. Must hold: never panics or overflows the stack; every error
//! renders a non-empty message naming the file; a parsed skill has the folder's name and a non-empty description.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use loom_kernel::{compile_skill, parse_skill_md, SkillFacts};

const ORIGIN: &str = "skills/pdf/SKILL.md";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_skill_md(text, "pdf", ORIGIN) {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(ORIGIN), "{msg}");
        }
        Ok(doc) => {
            assert_eq!(doc.name, "pdf");
            assert!(!doc.description.trim().is_empty());
            let facts = SkillFacts {
                doc: &doc,
                origin: ORIGIN,
                dir: "/home/u/skills/pdf",
                sidecar: None,
            };
            let handles: BTreeSet<String> = ["notes".to_string()].into();
            if let Err(e) = compile_skill(facts, &handles) {
                assert!(!e.to_string().is_empty());
            }
        }
    }
});
