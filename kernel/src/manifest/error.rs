//! The one error type of the manifest grammar.

use std::fmt;

/// Why a manifest (or a contributed tool group) was refused.
///
/// Specification:
/// - `file` names the text that was parsed (`agent.toml`, a `SKILL.md`, a sidecar `loom.toml`).
/// - `key_path` is the dotted TOML path of the offending key (`agent.system_prompt`, `session.layers[1]`), or empty
///   when the error concerns the whole text (size, nesting, TOML syntax).
/// - `message` is lowercase and says what is wrong; `hint`, when present, says how to fix it.
/// - Display is one paragraph: `{file}: {key_path}: {message} (hint: {hint})`.
/// - Messages name environment variables, never their values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The file (or origin) the error was found in.
    pub file: String,
    /// Dotted key path of the offending key; empty for whole-text errors.
    pub key_path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    pub hint: Option<String>,
}

impl ManifestError {
    /// An error without a hint.
    pub fn new(
        file: impl Into<String>,
        key_path: impl Into<String>,
        message: impl Into<String>,
    ) -> ManifestError {
        ManifestError {
            file: file.into(),
            key_path: key_path.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// Attaches a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> ManifestError {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if !self.key_path.is_empty() {
            write!(f, "{}: ", self.key_path)?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// Where parsing is: the file being read, for building errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str) -> Ctx<'a> {
        Ctx { file }
    }

    /// An error at `path`.
    pub(crate) fn err(&self, path: &str, message: impl Into<String>) -> ManifestError {
        ManifestError::new(self.file, path, message)
    }
}

/// Appends `key` to a dotted key path, quoting it when it is not a bare key.
pub(crate) fn join(path: &str, key: &str) -> String {
    let key = crate::lattice::value::toml_key(key);
    if path.is_empty() {
        key
    } else {
        format!("{path}.{key}")
    }
}

/// Appends an array position to a key path, counted from 1 ([`crate::position`]).
pub(crate) fn index(path: &str, i: usize) -> String {
    crate::lattice::value::position(path, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_paragraph() {
        let e = ManifestError::new(
            "agent.toml",
            "agent.name",
            "expected a string, found an integer",
        )
        .with_hint("write name = \"my-agent\"");
        assert_eq!(
            e.to_string(),
            "agent.toml: agent.name: expected a string, found an integer (hint: write name = \"my-agent\")"
        );
        let e = ManifestError::new("agent.toml", "", "manifest is 2 bytes");
        assert_eq!(e.to_string(), "agent.toml: manifest is 2 bytes");
    }

    #[test]
    fn join_quotes_non_bare_keys() {
        assert_eq!(join("", "agent"), "agent");
        assert_eq!(join("tools", "a.b"), "tools.\"a.b\"");
        assert_eq!(index("session.layers", 2), "session.layers[3]");
    }
}
