//! What boot refuses in a manifest before it starts anything, decided once for boot and audit: "if `loom audit`
//! exits 0, `loom prompt` boots" holds because both call [`boot_refusals`]. Each refusal names the key and, for a
//! likely typo, the nearest valid name.
//!
//! Pure: the caller says whether the harness slot is already filled (an SDK caller's instance) and whether the
//! manifest is a sub-agent's (where `small-model-of-parent` is a harness).

use crate::contrib::contracts::BUILTIN_TOOLS;
use crate::manifest::suggest::nearest;
use crate::manifest::{Manifest, ProviderRef};

/// The harness providers this build implements, besides an external provider's `[providers]` handle.
pub const HARNESS_PROVIDERS: [&str; 5] = ["anthropic", "openai", "openai-chat", "local", "test"];

/// The harness a sub-agent may borrow from its parent.
const PARENT_HARNESS: &str = "small-model-of-parent";

/// One thing boot refuses: the key it is about (`[harness]`, `tools.read_files`) and why, with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootRefusal {
    /// The manifest key: `[harness]`, `[harness].provider` or `tools.<instance>`.
    pub key: String,
    /// Why, and how to fix it.
    pub message: String,
}

/// Where the manifest boots: facts boot knows and audit assumes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootSlot {
    /// The caller passes its own harness instance (the SDK), so `[harness]` is not read.
    pub harness_given: bool,
    /// The manifest is a sub-agent's, spawned by a parent whose harness it may borrow.
    pub subagent: bool,
}

/// The valid name closest to `name`, when one is close enough to be a likely typo (the manifest parser's rule).
pub fn nearest_name<'a>(name: &str, valid: &[&'a str]) -> Option<&'a str> {
    nearest(name, valid)
}

/// Everything in `m` that boot refuses before it starts a process: a missing `[harness]`, a harness provider this
/// build does not have, a built-in `[tools]` entry naming no built-in tool. Sorted by key.
pub fn boot_refusals(m: &Manifest, slot: BootSlot) -> Vec<BootRefusal> {
    let mut out = Vec::new();
    if !slot.harness_given {
        match &m.harness {
            None => out.push(BootRefusal {
                key: "[harness]".into(),
                message: "the manifest has no [harness]; add one, e.g. [harness] provider = \"anthropic\"".into(),
            }),
            Some(h) => {
                let p = h.provider.as_str();
                let external = m.providers.get(p).is_some_and(|s| s.source().is_some());
                let known = HARNESS_PROVIDERS.contains(&p) || (slot.subagent && p == PARENT_HARNESS);
                if !known && !external {
                    let mut valid: Vec<&str> = HARNESS_PROVIDERS.to_vec();
                    if slot.subagent {
                        valid.push(PARENT_HARNESS);
                    }
                    let message = if p == PARENT_HARNESS {
                        "provider \"small-model-of-parent\" clones the harness of the agent that spawns this one, so \
                         it works only in a sub-agent's manifest; name a provider such as \"anthropic\" here"
                            .to_string()
                    } else {
                        let hint = nearest(p, &valid)
                            .map(|n| format!("; did you mean {n:?}?"))
                            .unwrap_or_default();
                        format!(
                            "{p:?} is not a harness of this build of loom (supported: {}, or the handle of a \
                             [providers] source that provides a harness){hint}",
                            valid
                                .iter()
                                .map(|v| format!("{v:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    };
                    out.push(BootRefusal {
                        key: "[harness].provider".into(),
                        message,
                    });
                }
            }
        }
    }
    for (instance, entry) in &m.tools {
        if entry.provider != ProviderRef::Builtin {
            continue;
        }
        let underlying = entry.tool.as_deref().unwrap_or(instance);
        if BUILTIN_TOOLS.contains(&underlying) {
            continue;
        }
        let hint = nearest(underlying, &BUILTIN_TOOLS)
            .map(|n| format!("; did you mean {n:?}?"))
            .unwrap_or_default();
        out.push(BootRefusal {
            key: format!("tools.{instance}"),
            message: format!(
                "there is no built-in tool named {underlying:?} (built-ins: {}){hint}",
                BUILTIN_TOOLS.join(", ")
            ),
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(text: &str) -> Manifest {
        crate::parse_manifest(text, "agent.toml", &BTreeMap::new()).unwrap()
    }

    fn keys_and_messages(m: &Manifest, slot: BootSlot) -> Vec<(String, String)> {
        boot_refusals(m, slot)
            .into_iter()
            .map(|r| (r.key, r.message))
            .collect()
    }

    #[test]
    fn each_newcomer_mistake_is_refused_with_the_nearest_name() {
        let m = parse("[agent]\nname = \"a\"\n[harness]\nprovider = \"antropic\"\n[tools]\nread_files = \"builtin\"\n");
        let got = keys_and_messages(&m, BootSlot::default());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "[harness].provider");
        assert!(
            got[0].1.ends_with("did you mean \"anthropic\"?"),
            "{}",
            got[0].1
        );
        assert_eq!(got[1].0, "tools.read_files");
        assert!(
            got[1].1.ends_with("did you mean \"read_file\"?"),
            "{}",
            got[1].1
        );

        let none = parse("[agent]\nname = \"a\"\n");
        let got = keys_and_messages(&none, BootSlot::default());
        assert_eq!(got[0].0, "[harness]");
        // the SDK fills the harness slot itself: no [harness] is needed
        let sdk = BootSlot {
            harness_given: true,
            subagent: false,
        };
        assert!(boot_refusals(&none, sdk).is_empty());
    }

    #[test]
    fn what_boot_accepts_is_not_refused() {
        for p in HARNESS_PROVIDERS {
            let m = parse(&format!(
                "[agent]\nname = \"a\"\n[harness]\nprovider = \"{p}\"\n[tools]\nreader = {{ tool = \"read_file\" }}\nbash = \"builtin\"\n"
            ));
            assert_eq!(keys_and_messages(&m, BootSlot::default()), vec![], "{p}");
        }
        // an external provider's handle names a harness
        let m = parse(
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"brain\"\n[providers]\nbrain = { path = \"./brain\" }\n",
        );
        assert!(boot_refusals(&m, BootSlot::default()).is_empty());
        // the parent's small model: only in a sub-agent
        let m = parse("[agent]\nname = \"a\"\n[harness]\nprovider = \"small-model-of-parent\"\n");
        let sub = BootSlot {
            harness_given: false,
            subagent: true,
        };
        assert!(boot_refusals(&m, sub).is_empty());
        let root = boot_refusals(&m, BootSlot::default());
        assert!(root[0].message.contains("only in a sub-agent"), "{root:?}");
    }

    #[test]
    fn a_renamed_builtin_is_checked_by_its_underlying_name() {
        let m = parse("[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\n[tools]\nreader = { tool = \"read_fle\" }\n");
        let got = keys_and_messages(&m, BootSlot::default());
        assert_eq!(got[0].0, "tools.reader");
        assert!(got[0].1.contains("named \"read_fle\""), "{}", got[0].1);
        assert!(
            got[0].1.ends_with("did you mean \"read_file\"?"),
            "{}",
            got[0].1
        );
    }
}
