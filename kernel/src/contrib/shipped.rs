//! Providers a contributed tool group ships as a source (`"./provider"` in a skill, `{ npm = … }`, a group-local
//! handle whose spec is a source): the key each is installed and pinned under, and where a path source may come from.
//!
//! A shipped provider is installed like a root `[providers]` handle — into `.loom/providers/<key>` next to the
//! manifest, pinned in `.loom/lock.toml` under `[providers.<key>]` — so the key must be a valid install handle
//! ([`install_handle_problem`]), the same on every machine (the lock is committed), distinct for every group and
//! local label, and never a root handle's. Root handles may not contain [`SHIPPED_KEY_MARK`] and every shipped key
//! does ([`root_handle_problem`]), so the two never meet.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::contrib::install::{
    install_handle_problem, is_shipped_key, LockState, SHIPPED_KEY_MARK,
};
use crate::contrib::mcp::McpResolution;
use crate::lattice::grant::Grant;
use crate::lattice::path::path_within;
use crate::manifest::{ProviderSpec, Source};

/// One provider an accepted contributed group ships.
#[derive(Debug, Clone, PartialEq)]
pub struct ShippedSource {
    /// Its install key: `.loom/providers/<key>`, `[providers.<key>]` in the lock.
    pub key: String,
    /// The group's label (`skill echo-notes`).
    pub group: String,
    /// How the group named it (the local handle or the source string).
    pub label: String,
    /// The source.
    pub source: Source,
    /// The spec as written: the source, or a provider package with its construction config.
    pub spec: ProviderSpec,
    /// The group's folder: a path source resolves against it and must stay inside it.
    pub dir: PathBuf,
    /// The tool instances it provides: instance, the provider's tool name, the requested grant.
    pub tools: Vec<(String, String, Grant)>,
}

impl ShippedSource {
    /// `skill echo-notes ships ./provider (path ./provider)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ships {} ({})",
            self.group,
            self.label,
            self.source.describe()
        )
    }
}

/// A shipped provider as `loom audit` shows it: its lock state and pin, and each of its tools resolved by starting
/// it from its pinned install (no model calls), or why it could not be.
#[derive(Debug, Clone)]
pub struct ShippedState {
    /// What the group ships.
    pub shipped: ShippedSource,
    /// `installed`, `missing` or `drifted`, and why.
    pub state: LockState,
    /// The pinned resolution, when pinned.
    pub resolved: Option<String>,
    /// The pinned tree hash, when pinned.
    pub sha256: Option<String>,
    /// Each tool instance: its resolution, or why it cannot be resolved (with the fix).
    pub tools: BTreeMap<String, Result<McpResolution, String>>,
}

/// The longest slug of the group label, and of the local label, a key keeps (the hash keeps them apart).
const SLUG_MAX: usize = 24;

/// The install key of the provider that the group labeled `group_label` (`skill echo-notes`) ships under
/// `local_label` (the group-local handle, the source string, or the inline table's description, as
/// [`Shipped::label`](crate::Shipped) holds it).
///
/// Specification: `<group slug>--<local slug>-<hash>`, where a slug keeps ASCII letters and digits (lower-cased),
/// turns every other run of characters into one `-`, drops `-` at either end, is cut to 24 characters (`x` when
/// nothing is left), and `<hash>` is the first 12 hex digits of the sha256 of `group_label`, a NUL byte and
/// `local_label`. Deterministic, at most 63 characters, always a valid install handle, and it always contains
/// [`SHIPPED_KEY_MARK`] exactly once.
pub fn shipped_key(group_label: &str, local_label: &str) -> String {
    let mut h = Sha256::new();
    h.update(group_label.as_bytes());
    h.update([0u8]);
    h.update(local_label.as_bytes());
    let hash: String = h.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}{SHIPPED_KEY_MARK}{}-{hash}",
        slug(group_label),
        slug(local_label)
    )
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(SLUG_MAX);
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "x".to_string()
    } else {
        out.to_string()
    }
}

/// Why the root `[providers]` handle `handle` cannot be installed, if it cannot: what [`install_handle_problem`]
/// says, or that it contains [`SHIPPED_KEY_MARK`], which marks the keys of providers contributed groups ship.
pub fn root_handle_problem(handle: &str) -> Option<String> {
    install_handle_problem(handle).or_else(|| {
        is_shipped_key(handle).then(|| {
            format!(
                "the handle {handle:?} contains `{SHIPPED_KEY_MARK}`, which marks the install keys of providers that \
                 skills ship; rename [providers].{handle:?}"
            )
        })
    })
}

/// Why the path source `written` of a group whose folder is `group_dir` may not be installed, if it may not: both
/// paths are canonical (symlinks resolved by the caller), and the source must be the folder or inside it — a shipped
/// provider is the group's own code, never a directory elsewhere on the host.
pub fn shipped_path_problem(group_dir: &str, source_canon: &str, written: &str) -> Option<String> {
    (!path_within(group_dir, source_canon)).then(|| {
        format!(
            "the path source {written:?} resolves to {source_canon}, outside the folder {group_dir} it ships from; a \
             shipped provider must live inside its skill's folder (no `..`, absolute paths elsewhere, or symlinks \
             out)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn key(group: &str, local: &str, want: &str) {
        let k = shipped_key(group, local);
        assert!(k.starts_with(want), "{group:?} {local:?}: {k}");
        assert_eq!(install_handle_problem(&k), None, "{k}");
        assert!(k.len() <= 63 && is_shipped_key(&k), "{k}");
        assert_eq!(k.matches(SHIPPED_KEY_MARK).count(), 1, "{k}");
        assert_eq!(k, shipped_key(group, local), "not deterministic");
    }

    #[test]
    fn keys_are_readable_valid_handles() {
        key("skill echo-notes", "notes", "skill-echo-notes--notes-");
        key(
            "skill echo-notes",
            "./provider",
            "skill-echo-notes--provider-",
        );
        key("skill x", "path ./bin", "skill-x--path-bin-");
        key("skill x", "@scope/pkg@1.2", "skill-x--scope-pkg-1-2-");
        key(
            "skill x",
            "git+https://e.com/a.git#v1",
            "skill-x--git-https-e-com-a-git-",
        );
        key("", "", "x--x-");
        key("--", "éé", "x--x-");
        key(
            "skill a-very-long-skill-name-that-goes-on-and-on",
            "an-equally-long-local-handle-name-here",
            "skill-a-very-long-skill--an-equally-long-local-",
        );
        // the pinned form: the lock is committed, so this must never change
        assert_eq!(
            shipped_key("skill echo-notes", "./provider"),
            format!(
                "skill-echo-notes--provider-{}",
                &sha_hex("skill echo-notes\0./provider")[..12]
            )
        );
    }

    fn sha_hex(s: &str) -> String {
        Sha256::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn keys_never_collide() {
        // labels that slug alike still differ by their hash
        let pairs = [
            (("skill a", "./p"), ("skill a", "../p")),
            (("skill a", "./p"), ("skill b", "./p")),
            (("skill a-b", "c"), ("skill a", "b-c")),
            (("skill a", "b\0c"), ("skill a\0b", "c")),
            (("skill a", "p"), ("skill A", "p")),
        ];
        for (a, b) in pairs {
            assert_ne!(shipped_key(a.0, a.1), shipped_key(b.0, b.1), "{a:?} {b:?}");
        }
        // and never equal a root handle that may be installed
        let k = shipped_key("skill a", "p");
        assert!(root_handle_problem(&k).is_some_and(|p| p.contains("marks the install keys")));
        assert_eq!(root_handle_problem("notes"), None);
        assert_eq!(root_handle_problem("my-notes_2"), None);
        assert!(root_handle_problem("../x").is_some());
    }

    #[test]
    fn a_path_source_stays_in_its_folder() {
        assert_eq!(
            shipped_path_problem("/s/echo", "/s/echo/provider", "./provider"),
            None
        );
        assert_eq!(shipped_path_problem("/s/echo", "/s/echo", "."), None);
        for (canon, written) in [
            ("/s/other", "../other"),
            ("/s/echo-evil", "../echo-evil"),
            ("/etc", "/etc"),
            ("/home/u/x", "~/x"),
        ] {
            let p = shipped_path_problem("/s/echo", canon, written).unwrap();
            assert!(
                p.contains("outside the folder /s/echo") && p.contains(written),
                "{p}"
            );
        }
    }
}
