//! Grants: `"*"`, one row, a capability set of rows, or `{}`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub use crate::lattice::row_map::Kind;
use crate::lattice::row_map::RowMap;
use crate::lattice::value::{write_inline_table, Float, Value, ValueError};

/// One grant row: an independent box of authority, kind -> value. A kind absent from a row is not granted.
///
/// The map is shared (`Arc`), so cloning a row — which merges and decisions do constantly — is a reference-count
/// increment. Change a row with [`Row::insert`] (copy-on-write).
#[derive(Debug, Clone, Default)]
pub struct Row(pub Arc<RowMap>);

// Rows compare by their maps. A row shared with itself (the same `Arc`, as merges produce) is equal without walking
// the map: value order is total, so this never changes an answer.
impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for Row {}

impl PartialOrd for Row {
    fn partial_cmp(&self, other: &Row) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Row {
    fn cmp(&self, other: &Row) -> Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            Ordering::Equal
        } else {
            self.0.cmp(&other.0)
        }
    }
}

impl Row {
    /// The value granted for `kind`, if any.
    #[inline]
    pub fn get(&self, kind: &str) -> Option<&Value> {
        self.0.get(kind)
    }

    /// Sets the value of `kind` (copying the shared map first if another row shares it).
    pub fn insert(&mut self, kind: impl Into<Kind>, value: Value) {
        Arc::make_mut(&mut self.0).insert(kind.into(), value);
    }

    /// True when the row grants no kind at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Builds a row from `(kind, value)` pairs.
    pub fn from_pairs<I, K>(pairs: I) -> Row
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        Row(Arc::new(
            pairs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        ))
    }

    /// Renders the row as an inline TOML table.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        write_inline_table(&mut out, self.0.iter());
        out
    }

    /// Converts to a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        )
    }
}

impl From<BTreeMap<Kind, Value>> for Row {
    fn from(map: BTreeMap<Kind, Value>) -> Row {
        Row(Arc::new(map.into()))
    }
}

impl From<RowMap> for Row {
    fn from(map: RowMap) -> Row {
        Row(Arc::new(map))
    }
}

/// What a tool instance may do.
///
/// Specification:
/// - `Unrestricted` is `"*"`: whole-tool unrestricted; it opts out of sandbox engagement.
/// - `Set(rows)` is a capability set. A request is authorised iff it fits entirely within ONE row; rows never combine.
///   `Set(vec![])` is `{}`: nothing granted. Rows are canonical: sorted, de-duplicated, and empty rows dropped (an
///   empty row grants nothing), so equal grants are structurally equal. Build sets with [`Grant::set`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grant {
    /// `"*"`.
    Unrestricted,
    /// A capability set (one row, several rows, or none).
    Set(Vec<Row>),
}

impl Grant {
    /// `{}`: nothing granted.
    pub fn none() -> Grant {
        Grant::Set(Vec::new())
    }

    /// A canonical capability set.
    pub fn set(mut rows: Vec<Row>) -> Grant {
        rows.retain(|r| !r.is_empty());
        rows.sort();
        rows.dedup();
        Grant::Set(rows)
    }

    /// A single-row grant.
    pub fn row(row: Row) -> Grant {
        Grant::set(vec![row])
    }

    /// The rows, or `None` for `Unrestricted`.
    pub fn rows(&self) -> Option<&[Row]> {
        match self {
            Grant::Unrestricted => None,
            Grant::Set(rows) => Some(rows),
        }
    }

    /// True for `{}`.
    pub fn is_none(&self) -> bool {
        matches!(self, Grant::Set(rows) if rows.is_empty())
    }

    /// Parses a grant written in TOML. `"*"`, a table (one row; `{}` is nothing) or an array of tables.
    pub fn from_toml(value: &toml::Value) -> Result<Grant, GrantError> {
        match value {
            toml::Value::String(s) if s == "*" => Ok(Grant::Unrestricted),
            toml::Value::String(s) => Err(GrantError::BareString(s.clone())),
            toml::Value::Table(t) => Ok(Grant::row(row_from_toml(t)?)),
            toml::Value::Array(items) => {
                let mut rows = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        toml::Value::Table(t) => {
                            rows.push(row_from_toml(t).map_err(|e| e.at_row(i + 1))?)
                        }
                        other => {
                            return Err(GrantError::RowNotTable {
                                row: i + 1,
                                found: type_name(other),
                            });
                        }
                    }
                }
                Ok(Grant::set(rows))
            }
            other => Err(GrantError::WrongType(type_name(other))),
        }
    }

    /// Parses a grant written in JSON (the SDK and `--json` form).
    pub fn from_json(value: &serde_json::Value) -> Result<Grant, GrantError> {
        match value {
            serde_json::Value::String(s) if s == "*" => Ok(Grant::Unrestricted),
            serde_json::Value::String(s) => Err(GrantError::BareString(s.clone())),
            serde_json::Value::Object(map) => Ok(Grant::row(row_from_json(map)?)),
            serde_json::Value::Array(items) => {
                let mut rows = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        serde_json::Value::Object(m) => {
                            rows.push(row_from_json(m).map_err(|e| e.at_row(i + 1))?)
                        }
                        _ => {
                            return Err(GrantError::RowNotTable {
                                row: i + 1,
                                found: "a non-object",
                            })
                        }
                    }
                }
                Ok(Grant::set(rows))
            }
            _ => Err(GrantError::WrongType("a non-grant JSON value")),
        }
    }

    /// Renders as paste-ready inline TOML (`"*"`, `{ ... }` or `[{ ... }, { ... }]`).
    pub fn to_toml(&self) -> String {
        match self {
            Grant::Unrestricted => "\"*\"".into(),
            Grant::Set(rows) if rows.is_empty() => "{}".into(),
            Grant::Set(rows) if rows.len() == 1 => rows[0].to_toml(),
            Grant::Set(rows) => {
                let parts: Vec<String> = rows.iter().map(Row::to_toml).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }

    /// Converts to JSON: `"*"`, `{}`, an object for one row, an array for several.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Grant::Unrestricted => serde_json::Value::String("*".into()),
            Grant::Set(rows) if rows.is_empty() => serde_json::json!({}),
            Grant::Set(rows) if rows.len() == 1 => rows[0].to_json(),
            Grant::Set(rows) => serde_json::Value::Array(rows.iter().map(Row::to_json).collect()),
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_toml())
    }
}

/// Parses a grant written as it would follow `key = ` in TOML. For tests across the crate.
#[cfg(test)]
pub(crate) fn test_grant(src: &str) -> Grant {
    let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
    Grant::from_toml(&t["g"]).unwrap()
}

/// Why a grant could not be parsed. Messages are lowercase and say how to fix the grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// A string other than `"*"` where a grant belongs (often a provider name written in `[capabilities]`).
    #[error(
        "{0:?} is not a grant: a grant is \"*\", a row such as {{ paths = [\"./\"] }}, a list of rows, or {{}} \
         (provider names such as \"builtin\" belong in [tools])"
    )]
    BareString(String),
    /// A value of the wrong type where a grant belongs.
    #[error("expected a grant (\"*\", a table of kinds, or an array of tables), found {0}")]
    WrongType(&'static str),
    /// An element of a capability set that is not a table.
    #[error("row {row} of the capability set is {found}; every row must be a table such as {{ commands = [\"ls\"] }}")]
    RowNotTable {
        /// The row, counted from 1 (as every row loom prints).
        row: usize,
        /// What was found instead.
        found: &'static str,
    },
    /// A kind's value could not be read.
    #[error("{where_}kind `{kind}`: {reason}")]
    BadKind {
        /// Prefix naming the row, or empty.
        where_: String,
        /// The kind.
        kind: String,
        /// Why.
        reason: String,
    },
}

impl GrantError {
    /// The error, naming row `row` (counted from 1).
    fn at_row(self, row: usize) -> GrantError {
        match self {
            GrantError::BadKind { kind, reason, .. } => GrantError::BadKind {
                where_: format!("row {row}, "),
                kind,
                reason,
            },
            other => other,
        }
    }
}

fn row_from_toml(table: &toml::Table) -> Result<Row, GrantError> {
    row_from_entries(table, |v| value_from_toml(v, true))
}

fn row_from_json(map: &serde_json::Map<String, serde_json::Value>) -> Result<Row, GrantError> {
    row_from_entries(map, Value::from_json)
}

/// A row from a parsed table, each value read by `read`; the first value it cannot read names its kind.
fn row_from_entries<'a, V: 'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a V)>,
    read: impl Fn(&V) -> Result<Value, ValueError>,
) -> Result<Row, GrantError> {
    let row = entries
        .into_iter()
        .map(|(kind, v)| {
            let value = read(v).map_err(|e| GrantError::BadKind {
                where_: String::new(),
                kind: kind.clone(),
                reason: e.to_string(),
            })?;
            Ok((kind.clone(), value))
        })
        .collect::<Result<RowMap, GrantError>>()?;
    Ok(Row::from(row))
}

/// Converts a TOML value into a grant value. `"*"` is `Star` only where `top` is true.
pub(crate) fn value_from_toml(v: &toml::Value, top: bool) -> Result<Value, ValueError> {
    Ok(match v {
        toml::Value::String(s) if s == "*" && top => Value::Star,
        toml::Value::String(s) if s == "*" => return Err(ValueError::StarInList),
        toml::Value::String(s) => Value::Str(s.clone()),
        toml::Value::Integer(i) => Value::Int(*i),
        toml::Value::Float(f) if !f.is_finite() => {
            return Err(ValueError::NotFinite(f.to_string()))
        }
        toml::Value::Float(f) => Value::Float(Float(*f)),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::Str(d.to_string()),
        toml::Value::Array(items) => Value::list(
            items
                .iter()
                .map(|i| value_from_toml(i, false))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), value_from_toml(v, true)?)))
                .collect::<Result<_, ValueError>>()?,
        ),
    })
}

/// The TOML type name of a value, for error messages.
pub(crate) fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Grant, GrantError> {
        let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
        Grant::from_toml(&t["g"])
    }

    #[test]
    fn the_four_shapes() {
        assert_eq!(parse("\"*\"").unwrap(), Grant::Unrestricted);
        assert_eq!(parse("{}").unwrap(), Grant::none());
        let one = parse("{ paths = [\"./\"] }").unwrap();
        assert_eq!(one.rows().unwrap().len(), 1);
        let set =
            parse("[{ commands = \"*\" }, { commands = [\"gcalcli\"], network = \"*\" }]").unwrap();
        assert_eq!(set.rows().unwrap().len(), 2);
    }

    #[test]
    fn row_and_key_order_never_matter() {
        let a = parse("[{ a = 1, b = [2, 1] }, { c = \"x\" }]").unwrap();
        let b = parse("[{ c = \"x\" }, { b = [1, 2], a = 1 }]").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn empty_rows_grant_nothing() {
        assert_eq!(parse("[{}]").unwrap(), Grant::none());
    }

    #[test]
    fn bare_strings_are_refused_with_a_hint() {
        let err = parse("\"builtin\"").unwrap_err().to_string();
        assert!(err.contains("belong in [tools]"), "{err}");
    }

    #[test]
    fn non_table_rows_are_refused() {
        let err = parse("[\"*\"]").unwrap_err().to_string();
        assert!(err.starts_with("row 1 of the capability set"), "{err}");
        let err = parse("[{ commands = \"*\" }, { commands = [\"*\"] }]")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("row 2, kind `commands`"), "{err}");
    }

    #[test]
    fn non_finite_floats_are_refused() {
        for src in ["{ a = nan }", "{ a = inf }", "{ a = [-inf] }"] {
            let err = parse(src).unwrap_err().to_string();
            assert!(err.contains("finite"), "{src}: {err}");
        }
    }

    #[test]
    fn floats_round_trip_through_toml_and_json_text() {
        // found by fuzzing: without serde_json's float_roundtrip this came back as ...78.0
        let g = parse("{ a = 7777877777777777.0, b = 0.1 }").unwrap();
        assert_eq!(parse(&g.to_toml()).unwrap(), g);
        let text = serde_json::to_string(&g.to_json()).unwrap();
        assert_eq!(
            Grant::from_json(&serde_json::from_str(&text).unwrap()).unwrap(),
            g
        );
    }

    #[test]
    fn toml_round_trip() {
        for src in [
            "\"*\"",
            "{}",
            "{ paths = [\"./\"] }",
            "[{ commands = \"*\" }, { commands = [\"gcalcli\"], network = \"*\" }]",
        ] {
            let g = parse(src).unwrap();
            assert_eq!(parse(&g.to_toml()).unwrap(), g, "{src}");
            assert_eq!(Grant::from_json(&g.to_json()).unwrap(), g, "{src}");
        }
    }
}
