//! Reading a bash grant written on the command line (`loom sandbox run --grant`). Which row authorises a command
//! is the kernel's decision (`loom_kernel::decide`), not this crate's.

use loom_kernel::Grant;

/// Why the text of a grant could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantTextError {
    /// Not TOML.
    #[error("--grant is not a TOML value: {0}; write it as in [capabilities], e.g. '{{ commands = [\"ls\"], paths = [\"./\"] }}'")]
    Toml(String),
    /// TOML, but not a grant.
    #[error("--grant: {0}")]
    Grant(String),
}

/// Parses a bash grant written as it would appear after `bash = ` in `[capabilities]`.
pub fn parse_grant(src: &str) -> Result<Grant, GrantTextError> {
    let table: toml::Table = toml::from_str(&format!("g = {src}"))
        .map_err(|e| GrantTextError::Toml(e.message().to_string()))?;
    let value = table
        .get("g")
        .ok_or_else(|| GrantTextError::Toml("empty".into()))?;
    Grant::from_toml(value).map_err(|e| GrantTextError::Grant(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_text_errors() {
        assert!(matches!(
            parse_grant("{ commands = "),
            Err(GrantTextError::Toml(_))
        ));
        assert!(matches!(
            parse_grant("\"builtin\""),
            Err(GrantTextError::Grant(_))
        ));
    }
}
