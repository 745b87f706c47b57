//! Grant values, compared canonically.
//!
//! A [`Value`] is what one capability kind is granted: `"*"`, a scalar, an allowlist or a kind-defined object.
//! Lists are sets (sorted, de-duplicated on construction) and objects are key-sorted, so two values that mean the
//! same thing are equal whatever order the manifest author wrote them in. Values are never compared as text.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// A float with a total order (by IEEE-754 total ordering), so values can live in sets.
#[derive(Debug, Clone, Copy)]
pub struct Float(pub f64);

impl PartialEq for Float {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Float {}
impl PartialOrd for Float {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Float {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The value granted for one capability kind.
///
/// Specification:
/// - `Star` is `"*"`: everything this kind can mean. Only `Star` contains `Star`.
/// - `List` is a set: its elements are sorted and de-duplicated by [`Value::list`], the only constructor used by the
///   parser. A list never holds `Star` (the parser refuses `["*"]` as ambiguous).
/// - `Object` keys are sorted (a `BTreeMap`), so key order never matters.
/// - Scalars compare by type, then value. An integer and a float are different values.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// `"*"`: unrestricted within this kind.
    Star,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(Float),
    /// A string (TOML datetimes are carried as their RFC 3339 text).
    Str(String),
    /// A set of values.
    List(Vec<Value>),
    /// A kind-defined object.
    Object(BTreeMap<String, Value>),
}

impl Value {
    /// Builds a canonical list: sorted and de-duplicated.
    pub fn list(mut items: Vec<Value>) -> Value {
        items.sort();
        items.dedup();
        Value::List(items)
    }

    /// A canonical list of strings.
    pub fn strs<I, S>(items: I) -> Value
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Value::list(items.into_iter().map(|s| Value::Str(s.into())).collect())
    }

    /// The string, when this value is a string scalar.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements this value stands for as a set: a list's elements, or the scalar itself. `None` for `Star`.
    pub fn elements(&self) -> Option<Vec<&Value>> {
        self.as_set().map(|s| s.iter().collect())
    }

    /// Like [`Value::elements`], without allocating: a list's elements, or a one-element slice holding the scalar.
    pub fn as_set(&self) -> Option<&[Value]> {
        match self {
            Value::Star => None,
            Value::List(items) => Some(items),
            other => Some(std::slice::from_ref(other)),
        }
    }

    /// Converts to JSON (`Star` becomes the string `"*"`).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Star => serde_json::Value::String("*".into()),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(f.0)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Object(map) => serde_json::Value::Object(
                map.iter().map(|(k, v)| (k.clone(), v.to_json())).collect(),
            ),
        }
    }

    /// Converts from JSON. The string `"*"` becomes `Star` at the top level only; inside a list it is refused.
    pub fn from_json(json: &serde_json::Value) -> Result<Value, ValueError> {
        Self::from_json_at(json, true)
    }

    fn from_json_at(json: &serde_json::Value, top: bool) -> Result<Value, ValueError> {
        Ok(match json {
            serde_json::Value::Null => return Err(ValueError::Null),
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Value::Int(i),
                (None, Some(f)) if f.is_finite() => Value::Float(Float(f)),
                _ => return Err(ValueError::NotFinite(n.to_string())),
            },
            serde_json::Value::String(s) if s == "*" && top => Value::Star,
            serde_json::Value::String(s) if s == "*" => return Err(ValueError::StarInList),
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Array(items) => Value::list(
                items
                    .iter()
                    .map(|v| Self::from_json_at(v, false))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), Self::from_json_at(v, true)?)))
                    .collect::<Result<_, ValueError>>()?,
            ),
        })
    }

    /// Renders as an inline TOML value, paste-ready.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        self.write_toml(&mut out);
        out
    }

    fn write_toml(&self, out: &mut String) {
        match self {
            Value::Star => out.push_str("\"*\""),
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            // TOML spells the non-finite floats nan / inf / -inf (the parser refuses them in grants anyway)
            Value::Float(f) if f.0.is_nan() => out.push_str("nan"),
            Value::Float(f) if f.0.is_infinite() => {
                out.push_str(if f.0 > 0.0 { "inf" } else { "-inf" })
            }
            Value::Float(f) => {
                let _ = write!(out, "{:?}", f.0);
            }
            Value::Str(s) => out.push_str(&toml_string(s)),
            Value::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_toml(out);
                }
                out.push(']');
            }
            Value::Object(map) => write_inline_table(out, map.iter()),
        }
    }
}

/// Message for a `"*"` found inside a list.
/// Why a value cannot be a grant value, or cannot be enforced as written. The message follows the kind's name
/// (`` `env` holds 3; write … ``).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// JSON `null`.
    #[error("null is not a grant value")]
    Null,
    /// A number that is not finite (as written).
    #[error("{0} is not a grant value: write a finite number")]
    NotFinite(String),
    /// `"*"` inside a list.
    #[error("{STAR_IN_LIST}")]
    StarInList,
    /// A value of a shape the kind cannot take (a per-host `network` list, a number among `env` names).
    #[error("{verb} {value}; {fix}")]
    Shape {
        /// "is" or "holds".
        verb: &'static str,
        /// The value, as TOML.
        value: String,
        /// How to write it instead.
        fix: &'static str,
    },
}

pub(crate) const STAR_IN_LIST: &str =
    "\"*\" inside a list is ambiguous: write the kind as \"*\" (unrestricted) or list the values you mean";

/// Quotes a string as a TOML basic string.
pub fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The key path of the element at `index` (counted from 0, as Rust counts) of the array at `path`, as loom prints it:
/// counted from 1, like every row and position in loom's messages (`permissions.deny_rules[1]` is the first rule).
pub fn position(path: &str, index: usize) -> String {
    format!("{path}[{}]", index + 1)
}

/// Renders a TOML key, quoting it when it is not a bare key.
pub fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_string()
    } else {
        toml_string(key)
    }
}

pub(crate) fn write_inline_table<'a>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
) {
    out.push('{');
    let mut first = true;
    for (k, v) in entries {
        out.push_str(if first { " " } else { ", " });
        first = false;
        out.push_str(&toml_key(k));
        out.push_str(" = ");
        v.write_toml(out);
    }
    out.push_str(if first { "}" } else { " }" });
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_toml())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sets() {
        let a = Value::strs(["b", "a", "a"]);
        let b = Value::strs(["a", "b"]);
        assert_eq!(a, b);
        assert_eq!(a.to_toml(), "[\"a\", \"b\"]");
    }

    #[test]
    fn object_key_order_never_matters() {
        let a = Value::from_json(&serde_json::json!({"x": 1, "y": [2, 1]})).unwrap();
        let b = Value::from_json(&serde_json::json!({"y": [1, 2], "x": 1})).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn star_inside_list_is_refused() {
        let err = Value::from_json(&serde_json::json!(["*", "a"])).unwrap_err();
        assert_eq!(err, ValueError::StarInList);
        assert!(err.to_string().contains("ambiguous"), "{err}");
    }

    #[test]
    fn toml_rendering_quotes_odd_keys_and_strings() {
        let mut map = BTreeMap::new();
        map.insert("odd key".to_string(), Value::Str("a\"b".into()));
        assert_eq!(Value::Object(map).to_toml(), "{ \"odd key\" = \"a\\\"b\" }");
    }
}
