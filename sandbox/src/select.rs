//! Picking the row of a bash grant that authorises one command.

use loom_kernel::{Grant, Row, Value};

/// The authority one command runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected<'g> {
    /// The grant is `"*"`: whole-tool unrestricted, no sandbox.
    Unrestricted,
    /// The row that names the command, or the general `commands = "*"` row.
    Row(&'g Row),
}

/// Why no row authorises a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// `{}`.
    #[error("grant {{}} grants nothing; write a row such as {{ commands = [\"{command}\"], paths = [\"./\"] }}")]
    Empty {
        /// The command.
        command: String,
    },
    /// No row names the command and none is general.
    #[error("grant {grant}: no row names `{command}` and no row has commands = \"*\"; add \"{command}\" to a row's commands")]
    NotNamed {
        /// The grant.
        grant: String,
        /// The command.
        command: String,
    },
}

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

/// Picks the row for `command` (argv[0], compared exactly): a row whose `commands` list names it, else the general
/// `commands = "*"` row, else a refusal. A row without `commands` authorises nothing.
pub fn select_row<'g>(grant: &'g Grant, command: &str) -> Result<Selected<'g>, SelectError> {
    let rows = match grant {
        Grant::Unrestricted => return Ok(Selected::Unrestricted),
        Grant::Set(rows) if rows.is_empty() => {
            return Err(SelectError::Empty {
                command: command.into(),
            })
        }
        Grant::Set(rows) => rows,
    };
    let names = |r: &Row| match r.get("commands") {
        Some(Value::Star) | None => false,
        Some(v) => v
            .elements()
            .unwrap_or_default()
            .iter()
            .any(|e| matches!(e, Value::Str(s) if s == command)),
    };
    if let Some(r) = rows.iter().find(|r| names(r)) {
        return Ok(Selected::Row(r));
    }
    if let Some(r) = rows
        .iter()
        .find(|r| matches!(r.get("commands"), Some(Value::Star)))
    {
        return Ok(Selected::Row(r));
    }
    Err(SelectError::NotNamed {
        grant: grant.to_toml(),
        command: command.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(src: &str) -> Grant {
        parse_grant(src).unwrap()
    }

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

    #[test]
    fn named_row_beats_the_general_row() {
        let g = grant(
            r#"[{ commands = "*", paths = ["./"] }, { commands = ["curl"], network = "*" }]"#,
        );
        let Selected::Row(r) = select_row(&g, "curl").unwrap() else {
            panic!("unrestricted")
        };
        assert_eq!(r.get("network"), Some(&Value::Star));
        let Selected::Row(r) = select_row(&g, "ls").unwrap() else {
            panic!("unrestricted")
        };
        assert_eq!(r.get("commands"), Some(&Value::Star));
    }

    #[test]
    fn refusals() {
        let g = grant(r#"{ commands = ["ls"] }"#);
        let err = select_row(&g, "/bin/ls").unwrap_err().to_string();
        assert!(err.contains("no row names `/bin/ls`"), "{err}");
        let err = select_row(&grant("{}"), "ls").unwrap_err().to_string();
        assert!(err.contains("grants nothing"), "{err}");
        let g = grant(r#"{ paths = ["./"] }"#);
        assert!(select_row(&g, "ls").is_err());
        assert_eq!(
            select_row(&grant("\"*\""), "ls").unwrap(),
            Selected::Unrestricted
        );
    }
}
