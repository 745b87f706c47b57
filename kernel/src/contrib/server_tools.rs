//! Harness server tools (`web_search = "anthropic"`, `web_fetch = "anthropic"`): the provider runs them, so loom
//! cannot judge each call. The kernel decides, once at boot, what the model may do with them: the grant's row,
//! translated onto the wire as the provider's own limits (`max_uses`, `allowed_domains` / `blocked_domains`,
//! `user_location`, `max_content_tokens`, `citations`). A grant that cannot be expressed exactly is refused, never
//! widened: several rows (the provider takes one set of limits), an empty set, both domain lists, a value of the
//! wrong shape.

use serde_json::{json, Map, Value as Json};

use crate::{Grant, Value};

/// Why a server tool's grant cannot be sent as the provider's limits. Each message says how to fix the grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerToolLimitError {
    /// The grant has no row: no use at all, which the provider cannot be told.
    #[error(
        "the grant is {{}}, which allows no use of {tool}; grant it \"*\" or one row of limits"
    )]
    NoRow {
        /// The server tool.
        tool: String,
    },
    /// Several rows: the provider takes one set of limits.
    #[error(
        "{tool} runs at the provider with one set of limits, but the grant has {rows} rows; merge them into one row"
    )]
    SeveralRows {
        /// The server tool.
        tool: String,
        /// How many rows the grant has.
        rows: usize,
    },
    /// A limit of the wrong shape.
    #[error("`{kind}` must be {want}, not {value}")]
    BadValue {
        /// The limit.
        kind: String,
        /// What it must be.
        want: &'static str,
        /// What the grant holds (TOML).
        value: String,
    },
    /// A limit the tool does not have.
    #[error("{tool} has no limit `{kind}` (see `loom audit` for the kinds it knows)")]
    UnknownLimit {
        /// The server tool.
        tool: String,
        /// The kind.
        kind: String,
    },
    /// Both domain lists.
    #[error("`allowed_domains` and `blocked_domains` cannot both be set; keep one of them")]
    BothDomainLists,
}

/// The wire limits for server tool `underlying` (`web_search` or `web_fetch`) under `grant`, as the JSON fields of
/// the provider's tool definition (empty for the grant `"*"`). The error says what is wrong and how to fix it.
pub fn server_tool_limits(
    underlying: &str,
    grant: &Grant,
) -> Result<Map<String, Json>, ServerToolLimitError> {
    let rows = match grant {
        Grant::Unrestricted => return Ok(Map::new()),
        Grant::Set(rows) => rows,
    };
    let row = match rows.as_slice() {
        [row] => row,
        [] => {
            return Err(ServerToolLimitError::NoRow {
                tool: underlying.to_string(),
            })
        }
        _ => {
            return Err(ServerToolLimitError::SeveralRows {
                tool: underlying.to_string(),
                rows: rows.len(),
            })
        }
    };
    let mut out = Map::new();
    for (kind, v) in row.0.iter() {
        let kind = kind.as_str();
        let bad = |want: &'static str| ServerToolLimitError::BadValue {
            kind: kind.to_string(),
            want,
            value: v.to_toml(),
        };
        let field = match (underlying, kind, v) {
            (_, "max_uses" | "max_content_tokens", Value::Int(n)) if *n > 0 => json!(n),
            (_, "max_uses" | "max_content_tokens", _) => return Err(bad("a positive integer")),
            (_, "allowed_domains", Value::Star) => continue,
            (_, "allowed_domains" | "blocked_domains", v) => {
                let domains: Option<Vec<&str>> = v
                    .elements()
                    .and_then(|e| e.into_iter().map(Value::as_str).collect());
                match domains {
                    Some(d) if !d.is_empty() => json!(d),
                    _ => return Err(bad("a non-empty list of domain names")),
                }
            }
            ("web_search", "user_location", Value::Object(_)) => v.to_json(),
            ("web_search", "user_location", _) => return Err(bad(
                "a table such as { type = \"approximate\", city = \"Paris\", country = \"FR\" }",
            )),
            ("web_fetch", "citations", Value::Bool(b)) => json!({ "enabled": b }),
            ("web_fetch", "citations", Value::Object(_)) => v.to_json(),
            ("web_fetch", "citations", _) => return Err(bad("true, false or { enabled = true }")),
            _ => {
                return Err(ServerToolLimitError::UnknownLimit {
                    tool: underlying.to_string(),
                    kind: kind.to_string(),
                })
            }
        };
        out.insert(kind.to_string(), field);
    }
    if out.contains_key("allowed_domains") && out.contains_key("blocked_domains") {
        return Err(ServerToolLimitError::BothDomainLists);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::grant::test_grant as g;

    #[test]
    fn the_grant_becomes_the_wire_limits() {
        assert!(server_tool_limits("web_search", &Grant::Unrestricted)
            .unwrap()
            .is_empty());
        let l = server_tool_limits(
            "web_search",
            &g(r#"{ max_uses = 3, allowed_domains = ["docs.python.org"], user_location = { type = "approximate", city = "Paris" } }"#),
        )
        .unwrap();
        assert_eq!(
            Json::Object(l),
            json!({"max_uses": 3, "allowed_domains": ["docs.python.org"],
                   "user_location": {"type": "approximate", "city": "Paris"}})
        );
        let l = server_tool_limits(
            "web_fetch",
            &g("{ max_uses = 2, max_content_tokens = 8000, citations = true }"),
        )
        .unwrap();
        assert_eq!(
            Json::Object(l),
            json!({"max_uses": 2, "max_content_tokens": 8000, "citations": {"enabled": true}})
        );
    }

    #[test]
    fn what_cannot_be_expressed_is_refused() {
        for (tool, grant, says) in [
            ("web_search", "{}", "allows no use"),
            (
                "web_search",
                "[{ max_uses = 1 }, { max_uses = 5 }]",
                "merge them into one row",
            ),
            ("web_search", "{ max_uses = 0 }", "positive integer"),
            ("web_search", "{ allowed_domains = [] }", "non-empty list"),
            (
                "web_search",
                r#"{ allowed_domains = ["a.org"], blocked_domains = ["b.org"] }"#,
                "cannot both be set",
            ),
            ("web_search", "{ citations = true }", "no limit `citations`"),
            (
                "web_fetch",
                "{ user_location = { city = \"x\" } }",
                "no limit",
            ),
            ("web_fetch", "{ citations = 3 }", "true, false"),
        ] {
            let e = server_tool_limits(tool, &g(grant)).unwrap_err().to_string();
            assert!(e.contains(says), "{grant}: {e}");
        }
    }
}
