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
