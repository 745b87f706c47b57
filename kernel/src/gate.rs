//! The CI ceiling gate: does a new manifest's authority grow past a baseline's?

use crate::ceiling::Ceiling;
use crate::grant::Grant;
use crate::manifest::Manifest;
use crate::path::PathCtx;

/// One key whose grant grew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    /// Where: empty for the root agent, else the sub-agent path (`spawn_subagent > researcher`).
    pub scope: String,
    /// The ceiling key.
    pub key: String,
    /// The baseline's grant (`None`: absent from the baseline).
    pub old: Option<Grant>,
    /// The new grant.
    pub new: Grant,
    /// What the new grant has that the baseline does not cover (`"*"` or the uncovered rows).
    pub grown: Grant,
    /// The narrowest change that passes: the new grant without what grew (`None`: remove the key).
    pub narrowest: Option<Grant>,
}

/// Compares `new` against `old` key by key under `new_manifest`'s algebras. Empty when `new` is contained.
pub fn ceiling_growth(
    scope: &str,
    new_manifest: &Manifest,
    new: &Ceiling,
    old: &Ceiling,
    ctx: &PathCtx,
) -> Vec<Growth> {
    let mut out = Vec::new();
    for (key, grant) in &new.grants {
        let alg = new_manifest.algebra_kind(key).build(ctx);
        let base = old.grants.get(key);
        let sup = base.cloned().unwrap_or_else(Grant::none);
        if alg.contains(&sup, grant) {
            continue;
        }
        let (grown, kept) = match grant {
            Grant::Unrestricted => (Grant::Unrestricted, sup.clone()),
            Grant::Set(rows) => {
                let (kept, grown): (Vec<_>, Vec<_>) = rows
                    .iter()
                    .cloned()
                    .partition(|r| alg.contains(&sup, &Grant::row(r.clone())));
                (Grant::set(grown), Grant::set(kept))
            }
        };
        out.push(Growth {
            scope: scope.to_string(),
            key: key.clone(),
            old: base.cloned(),
            new: grant.clone(),
            grown,
            narrowest: if kept.is_none() { None } else { Some(kept) },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manifest::parse_manifest;

    fn growth(old: &str, new: &str) -> Vec<Growth> {
        let p = |caps: &str| {
            parse_manifest(
                &format!("[agent]\nname = \"a\"\n[capabilities]\n{caps}"),
                "a.toml",
                &BTreeMap::new(),
            )
            .unwrap()
        };
        let (o, n) = (p(old), p(new));
        let ctx = PathCtx::new("/w", None);
        ceiling_growth(
            "",
            &n,
            &n.effective_ceiling(&ctx),
            &o.effective_ceiling(&ctx),
            &ctx,
        )
    }

    #[test]
    fn key_order_and_row_order_never_count_as_growth() {
        let old = "bash = [{ commands = \"*\", paths = [\"./\"] }, { network = \"*\", commands = [\"gcalcli\"] }]";
        let new = "bash = [{ commands = [\"gcalcli\"], network = \"*\" }, { paths = [\"./\"], commands = \"*\" }]";
        assert!(growth(old, new).is_empty());
    }

    #[test]
    fn narrowing_is_not_growth_and_widening_is() {
        assert!(growth(
            "read_file = { paths = [\"./\"] }",
            "read_file = { paths = [\"./src\"] }"
        )
        .is_empty());
        let g = growth(
            "read_file = { paths = [\"./src\"] }",
            "read_file = { paths = [\"./\"] }",
        );
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].narrowest, None,
            "nothing of the new grant fits: remove it"
        );
    }

    #[test]
    fn the_narrowest_change_keeps_what_fits() {
        let g = growth(
            "bash = { commands = [\"ls\"] }",
            "bash = [{ commands = [\"ls\"] }, { commands = [\"curl\"], network = \"*\" }]",
        );
        assert_eq!(
            g[0].grown.to_toml(),
            "{ commands = [\"curl\"], network = \"*\" }"
        );
        assert_eq!(
            g[0].narrowest.as_ref().unwrap().to_toml(),
            "{ commands = [\"ls\"] }"
        );
    }

    #[test]
    fn star_and_new_keys_are_growth() {
        let g = growth("bash = { commands = [\"ls\"] }", "bash = \"*\"");
        assert_eq!(g[0].grown, Grant::Unrestricted);
        let g = growth("", "web_fetch = \"*\"");
        assert_eq!((g[0].key.as_str(), g[0].old.is_none()), ("web_fetch", true));
    }
}
