//! `[sandbox]`: what the manifest author accepts the OS sandbox may lack on a host.
//!
//! ```toml
//! [sandbox]
//! accept = ["signals"]   # tier B below Landlock ABI 6 may signal processes outside the sandbox
//! ```
//!
//! Every other gap of a weak host is either made up for (seccomp) or refuses the tier; only what is named here is
//! let through, and `loom audit` / `loom doctor` show it.

use super::error::{index, join, Ctx, ManifestError};
use super::suggest::unknown_key_message;
use super::typed::{want_str, want_table};

/// A right the sandbox may lack that a manifest can accept by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum AcceptedGap {
    /// `signals`: no signal scoping (Landlock below ABI 6, tier B): a command may signal any process of the same
    /// user, loom and its MCP servers included.
    Signals,
}

impl AcceptedGap {
    /// Every name, in the order the manifest documentation lists them.
    pub const ALL: [AcceptedGap; 1] = [AcceptedGap::Signals];

    /// The name written in `accept`.
    pub fn name(self) -> &'static str {
        match self {
            AcceptedGap::Signals => "signals",
        }
    }

    /// Parses a name written in `accept`.
    pub fn parse(s: &str) -> Option<AcceptedGap> {
        AcceptedGap::ALL.into_iter().find(|g| g.name() == s)
    }
}

/// `[sandbox]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSection {
    /// The gaps accepted by name, sorted and deduplicated.
    pub accept: Vec<AcceptedGap>,
}

const KEYS: &[&str] = &["accept"];

pub(crate) fn parse_sandbox(
    ctx: Ctx<'_>,
    prefix: &str,
    v: &toml::Value,
) -> Result<SandboxSection, ManifestError> {
    let table = want_table(ctx, prefix, v)?;
    for key in table.keys() {
        if !KEYS.contains(&key.as_str()) {
            return Err(ctx.err(&join(prefix, key), unknown_key_message(key, KEYS)));
        }
    }
    let mut accept = Vec::new();
    if let Some(v) = table.get("accept") {
        let p = join(prefix, "accept");
        let items = v
            .as_array()
            .ok_or_else(|| super::typed::wrong_type(ctx, &p, "an array of strings", v))?;
        for (i, item) in items.iter().enumerate() {
            let ip = index(&p, i);
            let name = want_str(ctx, &ip, item)?;
            let Some(gap) = AcceptedGap::parse(name) else {
                let known: Vec<&str> = AcceptedGap::ALL.iter().map(|g| g.name()).collect();
                return Err(ctx
                    .err(&ip, format!("unknown sandbox gap \"{name}\""))
                    .with_hint(format!(
                        "the gaps a manifest can accept are: {} (`loom doctor` shows what this host lacks)",
                        known.join(", ")
                    )));
            };
            accept.push(gap);
        }
    }
    accept.sort();
    accept.dedup();
    Ok(SandboxSection { accept })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<SandboxSection, ManifestError> {
        let t: toml::Table = toml::from_str(src).unwrap();
        parse_sandbox(Ctx::new("agent.toml"), "sandbox", &t["sandbox"])
    }

    #[test]
    fn accept_names_are_closed() {
        let s = parse("sandbox = { accept = [\"signals\", \"signals\"] }").unwrap();
        assert_eq!(s.accept, vec![AcceptedGap::Signals]);
        assert_eq!(parse("sandbox = {}").unwrap(), SandboxSection::default());
        let e = parse("sandbox = { accept = [\"sockets\"] }").unwrap_err();
        assert_eq!(e.key_path, "sandbox.accept[1]");
        assert!(
            e.to_string().contains("unknown sandbox gap \"sockets\""),
            "{e}"
        );
        assert!(e.to_string().contains("signals"), "{e}");
        let e = parse("sandbox = { acept = [] }").unwrap_err();
        assert!(e.to_string().contains("did you mean accept"), "{e}");
        let e = parse("sandbox = { accept = \"signals\" }").unwrap_err();
        assert!(
            e.to_string().contains("expected an array of strings"),
            "{e}"
        );
    }
}
