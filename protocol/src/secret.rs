//! [`Secret`]: a value that never prints itself, and [`SecretLookup`]: where a harness or a server configuration
//! finds the secrets it names, without knowing which stores the chain holds.

/// A secret value. Read it with [`Secret::expose`] only where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(v: impl Into<String>) -> Secret {
        Secret(v.into())
    }

    /// The value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where a harness or an MCP server configuration looks up the secrets it names. The runtime's chain of stores
/// implements it; a lookup never reads the environment on its own.
pub trait SecretLookup {
    /// The value of `name`, when a store holds it.
    fn lookup(&self, name: &str) -> Option<Secret>;

    /// What to tell the user when `names` are missing: where each could be put (never a value).
    fn missing_hint(&self, names: &[String]) -> String;
}
