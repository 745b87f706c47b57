//! What a ceiling key is written for: a key authorises one kind of thing, and a contribution of another kind never
//! takes its grant.
//!
//! Specification ([`key_for`]):
//! - A key the manifest's `[tools]` lists is written for that entry's implementation: a built-in (its underlying
//!   name), a tool of a root `[providers]` handle or of a harness (handle and tool), or the root's own inline
//!   provider (its description and tool).
//! - A key `[consent]` records is written for one shipped implementation: the skill that ships it and the sha256 of
//!   what it ships ([`shipped_digest`]: the provider spec as written, `${SKILL_DIR}` unexpanded, and the tool it
//!   names). Such a key is neither a `[tools]` name nor a built-in's name (the parser refuses both).
//! - Any other key named like a built-in is written for that built-in (the default ceiling's keys, the fallback of a
//!   renamed instance).
//! - Any other key is [`KeyFor::Unrecorded`]: it covers only a tool of a root provider named exactly like the key.
//!
//! [`contribution_for`] says what a contributed declaration needs a key to be written for; [`key_fits`] compares
//! the two.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::manifest::{Manifest, ProviderRef, ProviderSpec, ToolEntry};

/// A `[consent]` entry: run the implementation `skill` ships under this instance, as long as what it ships hashes to
/// `sha256`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Consent {
    /// The skill's name (its group is labeled `skill <name>`).
    pub skill: String,
    /// [`shipped_digest`] of what it ships, 64 lowercase hex digits.
    pub sha256: String,
}

/// What one ceiling key is written for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyFor {
    /// A built-in tool, by its underlying name.
    Builtin {
        /// `bash`, `read_file`, …
        tool: String,
    },
    /// A tool of a root `[providers]` handle.
    Provider {
        /// The handle.
        handle: String,
        /// The server's (or provider's) tool name.
        tool: String,
    },
    /// A server tool of a harness (`web_search = "anthropic"`).
    Harness {
        /// The harness.
        harness: String,
        /// The tool.
        tool: String,
    },
    /// The root manifest's own inline provider (`x = { provider = { provider = "mcp-server", … } }`).
    Inline {
        /// The spec's description.
        provider: String,
        /// The tool.
        tool: String,
    },
    /// Consent to run one shipped implementation.
    Consent(Consent),
    /// A ceiling-only key that `[tools]` and `[consent]` do not record and that is not a built-in's name: a tool of a
    /// root provider named exactly like the key.
    Unrecorded {
        /// The key (and the tool name it covers).
        tool: String,
    },
}

impl fmt::Display for KeyFor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFor::Builtin { tool } => write!(f, "the built-in `{tool}`"),
            KeyFor::Provider { handle, tool } => {
                write!(f, "the tool `{tool}` of [providers].{handle}")
            }
            KeyFor::Harness { harness, tool } => write!(f, "the {harness} server tool `{tool}`"),
            KeyFor::Inline { provider, tool } => write!(
                f,
                "the tool `{tool}` of the manifest's own provider {provider}"
            ),
            KeyFor::Consent(c) => write!(
                f,
                "consent to the implementation skill {} ships (sha256 {})",
                c.skill,
                short(&c.sha256)
            ),
            KeyFor::Unrecorded { tool } => write!(f, "a root provider's tool named `{tool}`"),
        }
    }
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// The sha256 (lowercase hex) of what a contributed entry ships: a canonical text of `spec` and the `tool` the entry
/// names on it. Deterministic, independent of key order and of where the skill lives (the caller passes the spec
/// with `${SKILL_DIR}` unexpanded).
pub fn shipped_digest(spec: &ProviderSpec, tool: &str) -> String {
    let mut text = String::from("loom-shipped-v1\0");
    match spec {
        ProviderSpec::Source(s) => {
            text.push_str("source\0");
            text.push_str(&s.describe());
        }
        ProviderSpec::Package { source, config } => {
            text.push_str("package\0");
            text.push_str(&source.describe());
            text.push('\0');
            canon_table(config, &mut text);
        }
        ProviderSpec::Configured { factory, config } => {
            text.push_str("configured\0");
            text.push_str(factory);
            text.push('\0');
            canon_table(config, &mut text);
        }
    }
    text.push_str("\0tool\0");
    text.push_str(tool);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn canon_table(t: &toml::Table, out: &mut String) {
    let mut keys: Vec<&String> = t.keys().collect();
    keys.sort();
    out.push('{');
    for k in keys {
        canon_str(k, out);
        out.push('=');
        if let Some(v) = t.get(k) {
            canon(v, out);
        }
        out.push(',');
    }
    out.push('}');
}

fn canon_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn canon(v: &toml::Value, out: &mut String) {
    match v {
        toml::Value::String(s) => canon_str(s, out),
        toml::Value::Integer(i) => out.push_str(&format!("i{i}")),
        toml::Value::Float(x) => out.push_str(&format!("f{:016x}", x.to_bits())),
        toml::Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        toml::Value::Datetime(d) => out.push_str(&format!("d{d}")),
        toml::Value::Array(a) => {
            out.push('[');
            for x in a {
                canon(x, out);
                out.push(',');
            }
            out.push(']');
        }
        toml::Value::Table(t) => canon_table(t, out),
    }
}

/// What ceiling key `key` of `manifest` is written for (see the module docs).
pub fn key_for(manifest: &Manifest, key: &str) -> KeyFor {
    if let Some(entry) = manifest.tools.get(key) {
        let tool = manifest.underlying(key).to_string();
        return match &entry.provider {
            ProviderRef::Handle(handle) => KeyFor::Provider {
                handle: handle.clone(),
                tool,
            },
            ProviderRef::Harness(harness) => KeyFor::Harness {
                harness: harness.clone(),
                tool,
            },
            ProviderRef::Shipped(s) => KeyFor::Inline {
                provider: s.label.clone(),
                tool,
            },
            ProviderRef::Builtin | ProviderRef::Session | ProviderRef::Host => {
                KeyFor::Builtin { tool }
            }
        };
    }
    if let Some(c) = manifest.consent.get(key) {
        return KeyFor::Consent(c.clone());
    }
    if crate::contrib::contracts::BUILTIN_TOOLS.contains(&key) {
        return KeyFor::Builtin {
            tool: key.to_string(),
        };
    }
    KeyFor::Unrecorded {
        tool: key.to_string(),
    }
}

/// The skill a group labeled `label` is (`skill echo-notes` -> `echo-notes`); other groups by their whole label.
pub fn group_skill(label: &str) -> &str {
    label.strip_prefix("skill ").unwrap_or(label)
}

/// What a key must be written for to cover the declaration `instance = entry` of the group labeled `group_label`.
/// `None` for provider-less rows and session tools (their key comes from the manifest tool they join).
pub fn contribution_for(group_label: &str, instance: &str, entry: &ToolEntry) -> Option<KeyFor> {
    let tool = entry.tool.clone().unwrap_or_else(|| instance.to_string());
    match &entry.provider {
        ProviderRef::Builtin => Some(KeyFor::Builtin { tool }),
        ProviderRef::Handle(handle) => Some(KeyFor::Provider {
            handle: handle.clone(),
            tool,
        }),
        ProviderRef::Harness(harness) => Some(KeyFor::Harness {
            harness: harness.clone(),
            tool,
        }),
        ProviderRef::Shipped(s) => Some(KeyFor::Consent(Consent {
            skill: group_skill(group_label).to_string(),
            sha256: s.digest.clone(),
        })),
        ProviderRef::Host | ProviderRef::Session => None,
    }
}

/// True when a key written for `key` covers a contribution that needs `want`. An unrecorded key covers a root
/// provider's or a harness's tool of its own name.
pub fn key_fits(key: &KeyFor, want: &KeyFor) -> bool {
    match (key, want) {
        (KeyFor::Unrecorded { tool }, KeyFor::Provider { tool: t, .. })
        | (KeyFor::Unrecorded { tool }, KeyFor::Harness { tool: t, .. }) => tool == t,
        _ => key == want,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::manifest::{parse_manifest, parse_tool_group};

    fn man(text: &str) -> Manifest {
        parse_manifest(
            &format!("[agent]\nname = \"k\"\n{text}"),
            "agent.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    #[test]
    fn every_key_says_what_it_is_written_for() {
        let digest = "a".repeat(64);
        let m = man(&format!(
            "[providers]\nfs = {{ provider = \"mcp-server\", command = \"node\" }}\n[tools]\nread_file = \"builtin\"\nsh = {{ provider = \"builtin\", tool = \"bash\" }}\nread_one = {{ provider = \"fs\", tool = \"read_text_file\" }}\nweb_search = \"anthropic\"\n[capabilities]\nbash = {{ commands = [\"ls\"] }}\necho_note = \"*\"\nlist_allowed_directories = {{ path = \"*\" }}\n[consent]\necho_note = {{ skill = \"echo-notes\", sha256 = \"{digest}\" }}\n"
        ));
        let cases = [
            (
                "read_file",
                KeyFor::Builtin {
                    tool: "read_file".into(),
                },
            ),
            (
                "sh",
                KeyFor::Builtin {
                    tool: "bash".into(),
                },
            ),
            (
                "bash",
                KeyFor::Builtin {
                    tool: "bash".into(),
                },
            ),
            (
                "read_one",
                KeyFor::Provider {
                    handle: "fs".into(),
                    tool: "read_text_file".into(),
                },
            ),
            (
                "web_search",
                KeyFor::Harness {
                    harness: "anthropic".into(),
                    tool: "web_search".into(),
                },
            ),
            (
                "echo_note",
                KeyFor::Consent(Consent {
                    skill: "echo-notes".into(),
                    sha256: digest.clone(),
                }),
            ),
            (
                "list_allowed_directories",
                KeyFor::Unrecorded {
                    tool: "list_allowed_directories".into(),
                },
            ),
        ];
        for (key, want) in cases {
            assert_eq!(key_for(&m, key), want, "{key}");
        }
        assert_eq!(
            key_for(&m, "echo_note").to_string(),
            "consent to the implementation skill echo-notes ships (sha256 aaaaaaaaaaaa)"
        );
    }

    #[test]
    fn a_key_covers_only_what_it_is_written_for() {
        let b = |t: &str| KeyFor::Builtin { tool: t.into() };
        let p = |h: &str, t: &str| KeyFor::Provider {
            handle: h.into(),
            tool: t.into(),
        };
        let c = |s: &str, d: &str| {
            KeyFor::Consent(Consent {
                skill: s.into(),
                sha256: d.into(),
            })
        };
        let u = |t: &str| KeyFor::Unrecorded { tool: t.into() };
        let cases = [
            (b("bash"), b("bash"), true),
            (b("read_file"), b("write_file"), false),
            (b("bash"), p("fs", "bash"), false),
            (c("echo-notes", "d1"), b("bash"), false),
            (c("echo-notes", "d1"), c("echo-notes", "d1"), true),
            (c("echo-notes", "d1"), c("abc-helper", "d1"), false),
            (c("echo-notes", "d1"), c("echo-notes", "d2"), false),
            (c("echo-notes", "d1"), p("fs", "echo"), false),
            (p("fs", "read"), p("fs", "read"), true),
            (p("fs", "read"), p("fs", "write"), false),
            (p("fs", "read"), p("other", "read"), false),
            (
                u("list_allowed_directories"),
                p("fs", "list_allowed_directories"),
                true,
            ),
            (u("list_allowed_directories"), p("fs", "write_file"), false),
            (
                u("list_allowed_directories"),
                b("list_allowed_directories"),
                false,
            ),
            (u("x"), c("x", "d1"), false),
        ];
        for (key, want, fits) in cases {
            assert_eq!(key_fits(&key, &want), fits, "{key:?} for {want:?}");
        }
    }

    #[test]
    fn a_bad_consent_is_refused_with_the_key_and_the_fix() {
        let d = "a".repeat(64);
        let base = "[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\necho_note = \"*\"\nbash = \"*\"\n[consent]\n";
        let cases = [
            (
                format!("echo_note = {{ skill = \"echo-notes\", sha256 = \"{d}\" }}"),
                None,
            ),
            (
                "echo_note = { skill = \"echo-notes\" }".to_string(),
                Some(("consent.echo_note.sha256", "missing")),
            ),
            (
                "echo_note = { skill = \"echo-notes\", sha256 = \"abc\" }".to_string(),
                Some(("consent.echo_note.sha256", "not a sha256 digest")),
            ),
            (
                format!("echo_note = {{ skill = \"Echo\", sha256 = \"{d}\" }}"),
                Some(("consent.echo_note.skill", "\"Echo\" is not a skill name")),
            ),
            (
                format!("echo_note = {{ skill = \"echo-notes\", sha256 = \"{d}\", tool = \"x\" }}"),
                Some(("consent.echo_note.tool", "unknown key")),
            ),
            (
                format!("read_file = {{ skill = \"echo-notes\", sha256 = \"{d}\" }}"),
                Some(("consent.read_file", "`read_file` is a [tools] name")),
            ),
            (
                format!("bash = {{ skill = \"echo-notes\", sha256 = \"{d}\" }}"),
                Some(("consent.bash", "`bash` is the key of the built-in `bash`")),
            ),
            (
                format!("other = {{ skill = \"echo-notes\", sha256 = \"{d}\" }}"),
                Some(("consent.other", "[capabilities] has no `other`")),
            ),
        ];
        for (line, want) in cases {
            let got = parse_manifest(
                &format!("[agent]\nname = \"k\"\n{base}{line}\n"),
                "agent.toml",
                &BTreeMap::new(),
            );
            match (want, got) {
                (None, Ok(m)) => assert_eq!(m.consent["echo_note"].skill, "echo-notes"),
                (Some((key, msg)), Err(e)) => {
                    let e = e.to_string();
                    assert!(
                        e.starts_with(&format!("agent.toml: {key}: {msg}")),
                        "{line}: {e}"
                    );
                }
                (w, g) => panic!("{line}: want {w:?}, got {g:?}"),
            }
        }
    }

    fn shipped(tools: &str, providers: Option<&str>, dir: &str) -> String {
        let env = BTreeMap::from([("SKILL_DIR".to_string(), dir.to_string())]);
        let g = parse_tool_group(
            "skill s",
            tools,
            providers,
            "s/SKILL.md",
            &env,
            &BTreeSet::new(),
        )
        .unwrap();
        match &g.tools["x"].provider {
            ProviderRef::Shipped(s) => s.digest.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_digest_binds_the_spec_and_tool_but_not_where_the_skill_lives() {
        let local = Some("notes = { provider = \"mcp-server\", command = \"node\", args = [\"${SKILL_DIR}/server.mjs\"] }");
        let a = shipped(
            "x = { provider = \"notes\", tool = \"echo\" }",
            local,
            "/home/a/skills/s",
        );
        assert_eq!(a.len(), 64);
        assert_eq!(
            a,
            shipped(
                "x = { provider = \"notes\", tool = \"echo\" }",
                local,
                "/elsewhere/s"
            ),
            "portable"
        );
        // the same spec inline (key order does not matter) is the same implementation
        assert_eq!(
            a,
            shipped("x = { provider = { args = [\"${SKILL_DIR}/server.mjs\"], command = \"node\", provider = \"mcp-server\" }, tool = \"echo\" }", None, "/x")
        );
        let other = [
            shipped("x = { provider = \"notes\", tool = \"delete\" }", local, "/x"),
            shipped("x = { provider = \"notes\", tool = \"echo\" }", Some("notes = { provider = \"mcp-server\", command = \"sh\", args = [\"-c\", \"id\"] }"), "/x"),
            shipped("x = { provider = \"notes\", tool = \"echo\" }", Some("notes = { provider = \"mcp-server\", command = \"node\", args = [\"${SKILL_DIR}/other.mjs\"] }"), "/x"),
            shipped("x = { provider = \"./bin\", tool = \"echo\" }", None, "/x"),
            shipped("x = { provider = \"./bin2\", tool = \"echo\" }", None, "/x"),
        ];
        let all: BTreeSet<&String> = other.iter().chain([&a]).collect();
        assert_eq!(all.len(), other.len() + 1, "each differs: {other:?}");
    }
}
