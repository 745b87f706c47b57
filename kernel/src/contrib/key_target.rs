//! What a ceiling key names: the tool implementation its grant is for.
//!
//! A grant value means nothing on its own: `paths = ["/"]` is read-anywhere on `read_file` and write-anywhere on
//! `write_file`, and `"*"` is any query on an MCP search tool but an unconfined shell on `bash`. The CI gate and
//! sub-agent containment therefore compare a key's grant only when both sides' keys name the same tool; a key whose
//! tool changed is growth whatever its grant. Computed from the manifest's own `[tools]` entry for the key (a key with
//! no entry names the consented implementation when `[consent]` records one, else the built-in of that name, as the
//! runtime reads it); pure. It refines [`crate::key_for`] (what a key authorises, used to judge contributions) with
//! what makes two implementations differ for the gate: a provider's whole spec, a consent's digest.

use std::fmt;

use crate::contrib::keys::Consent;
use crate::manifest::{Manifest, ProviderRef, ProviderSpec};

/// The implementation a key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyTarget {
    /// A built-in tool, by its underlying name (`viewer = { provider = "builtin", tool = "read_file" }` names
    /// `read_file`; a key with no `[tools]` entry names the built-in of its own name).
    Builtin(String),
    /// A tool of the session chain, by its underlying name.
    Session(String),
    /// A harness-run server tool (`web_search = "anthropic"`).
    Harness {
        /// The harness.
        harness: String,
        /// The underlying tool.
        tool: String,
    },
    /// A tool of a `[providers]` handle (an MCP server or a provider package): the handle, its spec as written and the
    /// upstream tool. A changed spec (another command, package or config) is another implementation.
    Provider {
        /// The handle.
        handle: String,
        /// The handle's spec ([`ProviderSpec::describe`] plus its full config), or `None` when it is not defined.
        spec: Option<String>,
        /// The upstream tool.
        tool: String,
    },
    /// A tool whose implementation the entry ships itself.
    Shipped {
        /// The spec.
        spec: String,
        /// The upstream tool.
        tool: String,
    },
    /// A provider-less contribution (contributed groups only).
    Host(String),
    /// Consent (`[consent]`) to the implementation one skill ships, by its digest: another skill or another digest is
    /// another implementation.
    Consented(Consent),
}

/// A provider spec in full: its description, and every config value (the description of a package shows key names
/// only). Used only to compare two specs.
fn spec_identity(spec: &ProviderSpec) -> String {
    match spec {
        ProviderSpec::Package { config, .. } => format!("{} {config:?}", spec.describe()),
        ProviderSpec::Configured { factory, config } => format!("{factory} {config:?}"),
        ProviderSpec::Source(_) => spec.describe(),
    }
}

/// The tool `key` names in `manifest`.
pub fn key_target(manifest: &Manifest, key: &str) -> KeyTarget {
    let underlying = manifest.underlying(key).to_string();
    match manifest.tools.get(key).map(|e| &e.provider) {
        None => match manifest.consent.get(key) {
            Some(c) => KeyTarget::Consented(c.clone()),
            None => KeyTarget::Builtin(underlying),
        },
        Some(ProviderRef::Builtin) => KeyTarget::Builtin(underlying),
        Some(ProviderRef::Session) => KeyTarget::Session(underlying),
        Some(ProviderRef::Harness(h)) => KeyTarget::Harness {
            harness: h.clone(),
            tool: underlying,
        },
        Some(ProviderRef::Handle(h)) => KeyTarget::Provider {
            handle: h.clone(),
            spec: manifest.providers.get(h).map(spec_identity),
            tool: underlying,
        },
        Some(ProviderRef::Shipped(s)) => KeyTarget::Shipped {
            spec: spec_identity(&s.spec),
            tool: underlying,
        },
        Some(ProviderRef::Host) => KeyTarget::Host(underlying),
    }
}

impl fmt::Display for KeyTarget {
    /// `built-in write_file`, `tool search of provider docs`, ... (a provider's spec is never printed: its config may
    /// hold values substituted from the environment).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyTarget::Builtin(t) => write!(f, "built-in {t}"),
            KeyTarget::Session(t) => write!(f, "session tool {t}"),
            KeyTarget::Harness { harness, tool } => write!(f, "{harness} server tool {tool}"),
            KeyTarget::Provider { handle, tool, .. } => {
                write!(f, "tool {tool} of provider {handle}")
            }
            KeyTarget::Shipped { tool, .. } => write!(f, "tool {tool} of a shipped provider"),
            KeyTarget::Host(t) => write!(f, "host tool {t}"),
            KeyTarget::Consented(c) => write!(
                f,
                "the implementation skill {} ships (sha256 {})",
                c.skill,
                c.sha256.get(..12).unwrap_or(&c.sha256)
            ),
        }
    }
}

/// Why a key's tool changed, in words: `None` when both name the same implementation.
pub fn target_change(old: &KeyTarget, new: &KeyTarget) -> Option<String> {
    if old == new {
        return None;
    }
    let (a, b) = (old.to_string(), new.to_string());
    Some(if a == b {
        format!("{b}, whose provider spec changed")
    } else {
        format!("{b} (was {a})")
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manifest::parse_manifest;

    fn m(text: &str) -> Manifest {
        parse_manifest(
            &format!("[agent]\nname = \"a\"\n{text}"),
            "a.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    #[test]
    fn a_key_names_its_underlying_tool_and_provider() {
        let a = m("[tools]\nviewer = { provider = \"builtin\", tool = \"read_file\" }\n");
        let b = m("[tools]\nviewer = { provider = \"builtin\", tool = \"write_file\" }\n");
        assert_eq!(
            key_target(&a, "viewer"),
            KeyTarget::Builtin("read_file".into())
        );
        assert_eq!(
            target_change(&key_target(&a, "viewer"), &key_target(&b, "viewer")).as_deref(),
            Some("built-in write_file (was built-in read_file)")
        );
        // no entry: the built-in of that name, as a default tool entry names it
        let c = m("");
        assert_eq!(key_target(&c, "bash"), KeyTarget::Builtin("bash".into()));
        let d = m("[tools]\nbash = { provider = \"builtin\" }\n");
        assert_eq!(
            target_change(&key_target(&c, "bash"), &key_target(&d, "bash")),
            None
        );
        let e = m("[providers]\ndocs = { provider = \"mcp-server\", command = \"docs-server\" }\n[tools]\nsearch_docs = { provider = \"docs\", tool = \"search\" }\n");
        let f = m("[providers]\ndocs = { provider = \"mcp-server\", command = \"sh\" }\n[tools]\nsearch_docs = { provider = \"docs\", tool = \"search\" }\n");
        assert_eq!(
            key_target(&e, "search_docs").to_string(),
            "tool search of provider docs"
        );
        assert_eq!(
            target_change(
                &key_target(&e, "search_docs"),
                &key_target(&f, "search_docs")
            )
            .as_deref(),
            Some("tool search of provider docs, whose provider spec changed")
        );
    }

    #[test]
    fn a_consent_key_names_the_consented_implementation() {
        let cap = "[capabilities]\necho_note = \"*\"\n";
        let consent = |skill: &str, digit: char| {
            m(&format!(
                "{cap}[consent]\necho_note = {{ skill = \"{skill}\", sha256 = \"{}\" }}\n",
                digit.to_string().repeat(64)
            ))
        };
        let (a, b, c) = (
            consent("echo-notes", 'a'),
            consent("echo-notes", 'b'),
            consent("other", 'a'),
        );
        assert!(matches!(
            key_target(&a, "echo_note"),
            KeyTarget::Consented(_)
        ));
        assert_eq!(
            target_change(&key_target(&a, "echo_note"), &key_target(&a, "echo_note")),
            None
        );
        // another digest, another skill: another implementation, so the gate calls it growth
        let d = target_change(&key_target(&a, "echo_note"), &key_target(&b, "echo_note")).unwrap();
        assert!(
            d.contains("(was the implementation skill echo-notes ships (sha256 aaaaaaaaaaaa))"),
            "{d}"
        );
        assert!(
            target_change(&key_target(&a, "echo_note"), &key_target(&c, "echo_note")).is_some()
        );
    }
}
