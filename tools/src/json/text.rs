//! Format-preserving JSON reads and edits addressed by RFC 6901 JSON Pointers.
//!
//! This module backs the `read_json {path, pointer?}` and
//! `json_edit {path, pointer, value}` tools. It is pure: it takes and returns
//! text and never touches the filesystem.
//!
//! # What an edit preserves
//!
//! [`set_value`] and [`remove_value`] change only the bytes of the edited
//! value (or of the inserted / removed member or element, with the comma and
//! line it sits on). Everything else — indentation, key order, spacing inside
//! untouched containers, line endings (`\n` or `\r\n`), leading whitespace and
//! the final newline — stays byte-for-byte.
//!
//! New values are written in the document's style:
//! - scalars and empty containers are written compact (`serde_json::to_string`);
//! - a non-empty object/array is written compact when the document is on one
//!   line (no newline inside the root value), and otherwise pretty-printed
//!   with the document's indent unit (taken from the first indented line:
//!   two spaces, four spaces, a tab…; two spaces when none is found), nested
//!   lines indented relative to the line the value starts on;
//! - a new member goes at the end of its object: on its own line, indented
//!   like the previous member, when that member starts on its own line;
//!   otherwise inline after it, reusing the container's `", "`/`","` and
//!   `": "`/`":"` spacing. An empty container in a multi-line document is
//!   opened onto its own lines. Arrays behave the same.
//!
//! # Limits
//!
//! - Texts over [`MAX_TEXT_BYTES`] (16 MiB), as input or as the result of an
//!   edit, are refused.
//! - Arrays/objects nested more than [`MAX_NESTING`] deep are refused; this is
//!   serde_json's own recursion limit (128 levels counting the innermost
//!   values), so anything accepted here also parses with serde_json.
//! - Missing intermediate containers are never created: set the parent first.
//! - An object that holds the addressed key more than once is ambiguous and is
//!   refused rather than guessing which copy is meant.
//! - Untouched values keep their exact text, but a written value is
//!   re-serialized by serde_json (e.g. `1.50` would be written as `1.5`).
//! - Every edit is self-checked: the result is re-parsed and compared (order
//!   included) with the same edit applied to the parsed document; any
//!   mismatch is reported as [`JsonTextError::Internal`] instead of returning
//!   a wrong text.

use serde_json::Value;

/// The largest JSON text, in bytes, that [`set_value`] and [`remove_value`]
/// accept or produce (16 MiB).
pub const MAX_TEXT_BYTES: usize = 16 * 1024 * 1024;

/// The deepest nesting of arrays/objects that [`set_value`] and
/// [`remove_value`] accept or produce (serde_json's recursion limit).
pub const MAX_NESTING: usize = 127;

/// How many keys an error lists when a key is missing from an object.
const MAX_HINT_KEYS: usize = 20;

/// Errors from parsing pointers, reading and editing JSON text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonTextError {
    /// The pointer is not a valid RFC 6901 JSON Pointer.
    #[error("invalid json pointer {pointer:?}: {reason}")]
    InvalidPointer {
        /// The pointer as given.
        pointer: String,
        /// What is wrong with it and how to fix it.
        reason: String,
    },
    /// The text does not parse as JSON.
    #[error(
        "the text is not valid json: {message} at line {line}, column {column}; fix the syntax before editing it"
    )]
    InvalidJson {
        /// serde_json's description of the problem.
        message: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },
    /// The text (input or edited result) is larger than [`MAX_TEXT_BYTES`].
    #[error("the json text is {size} bytes, over the {limit}-byte limit; edit a smaller file or a smaller value")]
    TooLarge {
        /// Size of the text in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Arrays/objects nest deeper than [`MAX_NESTING`] (in the input, the new
    /// value, or the edited result).
    #[error("the json nests {depth} arrays/objects deep, over the limit of {limit}; use a flatter document or value")]
    TooDeep {
        /// The nesting depth found (at least `limit + 1`).
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// Nothing exists at the pointer (reading or removing).
    #[error("nothing at {pointer:?}: {parent:?} has no {token:?} ({hint})")]
    NotFound {
        /// The full pointer.
        pointer: String,
        /// Pointer of the container that lacks `token`.
        parent: String,
        /// The first token that is missing.
        token: String,
        /// The container's length (array) or up to 20 of its keys (object).
        hint: String,
    },
    /// An intermediate container on the way to the target does not exist.
    #[error(
        "cannot set {pointer:?}: {missing:?} does not exist ({hint}); set {missing:?} first (for example to {{}} or [])"
    )]
    MissingParent {
        /// The full pointer.
        pointer: String,
        /// Pointer of the first missing container.
        missing: String,
        /// The length (array) or up to 20 keys (object) of the container
        /// that lacks it.
        hint: String,
    },
    /// The pointer goes through a string, number, boolean or null.
    #[error(
        "cannot resolve {pointer:?}: the value at {parent:?} is {kind}, not an object or array; point at a member of an existing object or array"
    )]
    NotAContainer {
        /// The full pointer.
        pointer: String,
        /// Pointer of the scalar value.
        parent: String,
        /// What the scalar is ("a string", "a number", "a boolean", "null").
        kind: String,
    },
    /// An array is indexed by a token that is not a canonical array index.
    #[error(
        "invalid array index {token:?} in {pointer:?}: use a non-negative integer without leading zeros or a sign (or \"-\" to append)"
    )]
    InvalidIndex {
        /// The full pointer.
        pointer: String,
        /// The offending token.
        token: String,
    },
    /// An array index is past the end of the array (index > length).
    #[error(
        "cannot set {pointer:?}: index {index} is past the end of the array at {parent:?} (length {len}); use {len} or \"-\" to append"
    )]
    IndexOutOfRange {
        /// The full pointer.
        pointer: String,
        /// Pointer of the array.
        parent: String,
        /// The index token.
        index: String,
        /// The array's length.
        len: usize,
    },
    /// An object on the path holds the addressed key more than once.
    #[error(
        "ambiguous pointer {pointer:?}: the object at {parent:?} has the key {key:?} more than once; remove the duplicate first"
    )]
    DuplicateKey {
        /// The full pointer.
        pointer: String,
        /// Pointer of the object with the duplicate key.
        parent: String,
        /// The duplicated key.
        key: String,
    },
    /// [`remove_value`] was asked to remove the whole document.
    #[error("cannot remove the whole document (pointer \"\"); set it to a new value instead")]
    RemoveRoot,
    /// A bug in the span logic was caught by the self-check; no edit was made.
    #[error("internal error editing {pointer:?}: {detail}; no edit was made, please report this")]
    Internal {
        /// The full pointer.
        pointer: String,
        /// What went wrong.
        detail: String,
    },
}

type Result<T> = std::result::Result<T, JsonTextError>;

fn internal(pointer: &str, detail: impl Into<String>) -> JsonTextError {
    JsonTextError::Internal {
        pointer: pointer.to_owned(),
        detail: detail.into(),
    }
}

// ---------------------------------------------------------------------------
// Pointers
// ---------------------------------------------------------------------------

/// Parses an RFC 6901 pointer: "" is the whole document; otherwise it must start with "/"; "~0" = "~", "~1" = "/"; any other "~" escape is an error.
pub fn parse_pointer(pointer: &str) -> Result<Vec<String>> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(JsonTextError::InvalidPointer {
            pointer: pointer.to_owned(),
            reason: "it must be \"\" (the whole document) or start with \"/\", e.g. \"/a/0\""
                .to_owned(),
        });
    };
    rest.split('/')
        .map(|raw| unescape_token(pointer, raw))
        .collect()
}

fn unescape_token(pointer: &str, raw: &str) -> Result<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        let reason = match chars.next() {
            Some('0') => {
                out.push('~');
                continue;
            }
            Some('1') => {
                out.push('/');
                continue;
            }
            Some(other) => format!(
                "\"~{other}\" in token {raw:?} is not a valid escape; write \"~0\" for \"~\" and \"~1\" for \"/\""
            ),
            None => format!(
                "token {raw:?} ends with a lone \"~\"; write \"~0\" for \"~\" and \"~1\" for \"/\""
            ),
        };
        return Err(JsonTextError::InvalidPointer {
            pointer: pointer.to_owned(),
            reason,
        });
    }
    Ok(out)
}

/// Encodes tokens back into a pointer string.
fn encode_pointer<'a>(tokens: impl IntoIterator<Item = &'a String>) -> String {
    let mut out = String::new();
    for token in tokens {
        out.push('/');
        out.push_str(&token.replace('~', "~0").replace('/', "~1"));
    }
    out
}

enum ArrayToken {
    /// `-`: the slot after the last element.
    Append,
    Index(usize),
    /// Canonical but does not fit in `usize`.
    TooBig,
    /// Not a canonical array index (leading zero, sign, non-digit, empty).
    Invalid,
}

fn array_token(token: &str) -> ArrayToken {
    if token == "-" {
        return ArrayToken::Append;
    }
    let bytes = token.as_bytes();
    let canonical = match bytes.first() {
        Some(b'0') => bytes.len() == 1,
        Some(b'1'..=b'9') => bytes.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return ArrayToken::Invalid;
    }
    token
        .parse::<usize>()
        .map_or(ArrayToken::TooBig, ArrayToken::Index)
}

// ---------------------------------------------------------------------------
// Resolving pointers on parsed values
// ---------------------------------------------------------------------------

/// How a missing token is reported.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    NotFound,
    SetParentFirst,
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn container_hint(container: &Value, token: &str) -> String {
    match container {
        Value::Object(map) if map.is_empty() => "the object is empty".to_owned(),
        Value::Object(map) => {
            let shown: Vec<String> = map
                .keys()
                .take(MAX_HINT_KEYS)
                .map(|k| format!("{k:?}"))
                .collect();
            let mut hint = format!("its keys are {}", shown.join(", "));
            if map.len() > MAX_HINT_KEYS {
                hint.push_str(&format!(" and {} more", map.len() - MAX_HINT_KEYS));
            }
            hint
        }
        Value::Array(items) => {
            let mut hint = match items.len() {
                0 => "the array is empty".to_owned(),
                1 => "the array has 1 element, index 0".to_owned(),
                n => format!(
                    "the array has {n} elements, indices 0 to {}",
                    n.saturating_sub(1)
                ),
            };
            if token == "-" {
                hint.push_str("; \"-\" names the slot after the last element and only appends");
            }
            hint
        }
        _ => String::new(),
    }
}

fn missing_error(
    container: &Value,
    tokens: &[String],
    i: usize,
    pointer: &str,
    missing: Missing,
) -> JsonTextError {
    let token = tokens.get(i).cloned().unwrap_or_default();
    let hint = container_hint(container, &token);
    match missing {
        Missing::NotFound => JsonTextError::NotFound {
            pointer: pointer.to_owned(),
            parent: encode_pointer(tokens.iter().take(i)),
            token,
            hint,
        },
        Missing::SetParentFirst => JsonTextError::MissingParent {
            pointer: pointer.to_owned(),
            missing: encode_pointer(tokens.iter().take(i + 1)),
            hint,
        },
    }
}

fn not_container(value: &Value, tokens: &[String], i: usize, pointer: &str) -> JsonTextError {
    JsonTextError::NotAContainer {
        pointer: pointer.to_owned(),
        parent: encode_pointer(tokens.iter().take(i)),
        kind: kind_name(value).to_owned(),
    }
}

fn invalid_index(token: &str, pointer: &str) -> JsonTextError {
    JsonTextError::InvalidIndex {
        pointer: pointer.to_owned(),
        token: token.to_owned(),
    }
}

/// Resolves `tokens[i]` inside `value`; for arrays also returns the index.
fn step<'v>(
    value: &'v Value,
    tokens: &[String],
    i: usize,
    pointer: &str,
    missing: Missing,
) -> Result<(&'v Value, Option<usize>)> {
    let Some(token) = tokens.get(i) else {
        return Err(internal(pointer, "pointer token out of range"));
    };
    match value {
        Value::Object(map) => match map.get(token.as_str()) {
            Some(child) => Ok((child, None)),
            None => Err(missing_error(value, tokens, i, pointer, missing)),
        },
        Value::Array(items) => match array_token(token) {
            ArrayToken::Invalid => Err(invalid_index(token, pointer)),
            ArrayToken::Index(n) => match items.get(n) {
                Some(child) => Ok((child, Some(n))),
                None => Err(missing_error(value, tokens, i, pointer, missing)),
            },
            ArrayToken::Append | ArrayToken::TooBig => {
                Err(missing_error(value, tokens, i, pointer, missing))
            }
        },
        other => Err(not_container(other, tokens, i, pointer)),
    }
}

/// The value at `pointer` in `doc`, or an error naming the first token that is missing (and, for an array, its length; for an object, up to 20 of its keys).
pub fn lookup<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value> {
    let tokens = parse_pointer(pointer)?;
    let mut value = doc;
    for i in 0..tokens.len() {
        value = step(value, &tokens, i, pointer, Missing::NotFound)?.0;
    }
    Ok(value)
}

/// The container at `tokens` (all of which must exist) for mutation.
fn value_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    let mut value = doc;
    for token in tokens {
        value = match value {
            Value::Object(map) => map.get_mut(token.as_str())?,
            Value::Array(items) => match array_token(token) {
                ArrayToken::Index(n) => items.get_mut(n)?,
                _ => return None,
            },
            _ => return None,
        };
    }
    Some(value)
}

fn apply_set(doc: &mut Value, parent: &[String], last: &str, new: Value) -> Option<()> {
    match value_mut(doc, parent)? {
        Value::Object(map) => {
            map.insert(last.to_owned(), new);
        }
        Value::Array(items) => match array_token(last) {
            ArrayToken::Append => items.push(new),
            ArrayToken::Index(n) if n == items.len() => items.push(new),
            ArrayToken::Index(n) => *items.get_mut(n)? = new,
            _ => return None,
        },
        _ => return None,
    }
    Some(())
}

fn apply_remove(doc: &mut Value, parent: &[String], last: &str) -> Option<()> {
    match value_mut(doc, parent)? {
        Value::Object(map) => {
            map.shift_remove(last)?;
        }
        Value::Array(items) => match array_token(last) {
            ArrayToken::Index(n) if n < items.len() => {
                items.remove(n);
            }
            _ => return None,
        },
        _ => return None,
    }
    Some(())
}

/// Deepest nesting of arrays/objects in `value`, computed without recursion
/// (stops counting once past [`MAX_NESTING`]).
fn nesting_of(value: &Value) -> usize {
    let mut max = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, depth)) = stack.pop() {
        let depth = depth + 1;
        match v {
            Value::Array(items) => {
                max = max.max(depth);
                if depth > MAX_NESTING {
                    return max;
                }
                stack.extend(items.iter().map(|c| (c, depth)));
            }
            Value::Object(map) => {
                max = max.max(depth);
                if depth > MAX_NESTING {
                    return max;
                }
                stack.extend(map.values().map(|c| (c, depth)));
            }
            _ => {}
        }
    }
    max
}

// ---------------------------------------------------------------------------
// Text survey: nesting depth and separator style, in one pass
// ---------------------------------------------------------------------------

struct Survey {
    depth: usize,
    /// The first `:` that sits on one line with its surrounding spaces.
    colon: Option<String>,
    /// The first `,` followed by more content on the same line.
    comma: Option<String>,
}

fn is_inline_space(byte: Option<&u8>) -> bool {
    matches!(byte, Some(b' ' | b'\t'))
}

/// The separator at byte `at` with the spaces around it, if it does not start
/// or end a line.
fn inline_separator(text: &str, at: usize) -> Option<String> {
    let bytes = text.as_bytes();
    let mut start = at;
    while start > 0 && is_inline_space(bytes.get(start - 1)) {
        start -= 1;
    }
    if start > 0 && matches!(bytes.get(start - 1), Some(b'\n' | b'\r')) {
        return None;
    }
    let mut end = at + 1;
    while is_inline_space(bytes.get(end)) {
        end += 1;
    }
    if matches!(bytes.get(end), None | Some(b'\n' | b'\r')) {
        return None;
    }
    text.get(start..end).map(str::to_owned)
}

fn survey(text: &str) -> Survey {
    let mut out = Survey {
        depth: 0,
        colon: None,
        comma: None,
    };
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &byte) in text.as_bytes().iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                out.depth = out.depth.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if out.colon.is_none() => out.colon = inline_separator(text, i),
            b',' if out.comma.is_none() => out.comma = inline_separator(text, i),
            _ => {}
        }
    }
    out
}

fn check_size(text: &str) -> Result<()> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(JsonTextError::TooLarge {
            size: text.len(),
            limit: MAX_TEXT_BYTES,
        });
    }
    Ok(())
}

fn check_depth(depth: usize) -> Result<()> {
    if depth > MAX_NESTING {
        return Err(JsonTextError::TooDeep {
            depth,
            limit: MAX_NESTING,
        });
    }
    Ok(())
}

fn invalid_json(err: &serde_json::Error) -> JsonTextError {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    JsonTextError::InvalidJson {
        message: full.strip_suffix(&suffix).unwrap_or(&full).to_owned(),
        line: err.line(),
        column: err.column(),
    }
}

/// Checks bounds and parses `text`.
fn load(text: &str) -> Result<(Value, Survey)> {
    check_size(text)?;
    let found = survey(text);
    check_depth(found.depth)?;
    let doc = serde_json::from_str(text).map_err(|e| invalid_json(&e))?;
    Ok((doc, found))
}

// ---------------------------------------------------------------------------
// Byte-span scanner over text already known to be valid JSON
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

#[derive(Debug)]
struct Entry {
    /// Where the member (its key) or the element starts.
    start: usize,
    /// The key string, quotes included (objects only).
    key: Option<Span>,
    value: Span,
}

#[derive(Debug)]
struct Container {
    /// Index of `{` / `[`.
    open: usize,
    /// Index of `}` / `]`.
    close: usize,
    is_object: bool,
    entries: Vec<Entry>,
}

struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pointer: &'t str,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str, pointer: &'t str) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            pointer,
        }
    }

    fn fail(&self, detail: &str) -> JsonTextError {
        internal(self.pointer, format!("scanner: {detail}"))
    }

    fn byte(&self, at: usize) -> Result<u8> {
        self.bytes
            .get(at)
            .copied()
            .ok_or_else(|| self.fail("unexpected end of text"))
    }

    fn slice(&self, start: usize, end: usize) -> Result<&'t str> {
        self.text
            .get(start..end)
            .ok_or_else(|| self.fail("span is not on character boundaries"))
    }

    fn skip_ws(&self, mut at: usize) -> usize {
        while matches!(self.bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            at += 1;
        }
        at
    }

    /// `at` is on an opening quote; returns the index just past the closing one.
    fn string_end(&self, at: usize) -> Result<usize> {
        if self.byte(at)? != b'"' {
            return Err(self.fail("expected a string"));
        }
        let mut i = at + 1;
        loop {
            match self.byte(i)? {
                b'\\' => i += 2,
                b'"' => return Ok(i + 1),
                _ => i += 1,
            }
        }
    }

    /// `at` is on the first byte of a value; returns the index just past it.
    fn value_end(&self, at: usize) -> Result<usize> {
        match self.byte(at)? {
            b'"' => self.string_end(at),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut i = at;
                loop {
                    match self.byte(i)? {
                        b'"' => i = self.string_end(i)?,
                        b'{' | b'[' => {
                            depth += 1;
                            i += 1;
                        }
                        b'}' | b']' => {
                            depth = depth
                                .checked_sub(1)
                                .ok_or_else(|| self.fail("unbalanced brackets"))?;
                            i += 1;
                            if depth == 0 {
                                return Ok(i);
                            }
                        }
                        _ => i += 1,
                    }
                }
            }
            _ => {
                let mut i = at;
                while let Some(byte) = self.bytes.get(i) {
                    if matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}') {
                        break;
                    }
                    i += 1;
                }
                if i == at {
                    return Err(self.fail("expected a value"));
                }
                Ok(i)
            }
        }
    }

    /// Span of the top-level value.
    fn root(&self) -> Result<Span> {
        let start = self.skip_ws(0);
        let end = self.value_end(start)?;
        Ok(Span { start, end })
    }

    /// Lists the members/elements of the container opening at `open`.
    fn container(&self, open: usize) -> Result<Container> {
        let (is_object, close_byte) = match self.byte(open)? {
            b'{' => (true, b'}'),
            b'[' => (false, b']'),
            _ => return Err(self.fail("expected an object or array")),
        };
        let mut entries = Vec::new();
        let mut i = self.skip_ws(open + 1);
        if self.byte(i)? == close_byte {
            return Ok(Container {
                open,
                close: i,
                is_object,
                entries,
            });
        }
        loop {
            let start = i;
            let key = if is_object {
                let key_end = self.string_end(i)?;
                i = self.skip_ws(key_end);
                if self.byte(i)? != b':' {
                    return Err(self.fail("expected ':'"));
                }
                i = self.skip_ws(i + 1);
                Some(Span {
                    start,
                    end: key_end,
                })
            } else {
                None
            };
            let value_start = i;
            let value_end = self.value_end(value_start)?;
            entries.push(Entry {
                start,
                key,
                value: Span {
                    start: value_start,
                    end: value_end,
                },
            });
            i = self.skip_ws(value_end);
            match self.byte(i)? {
                b',' => i = self.skip_ws(i + 1),
                byte if byte == close_byte => {
                    return Ok(Container {
                        open,
                        close: i,
                        is_object,
                        entries,
                    })
                }
                _ => return Err(self.fail("expected ',' or the end of the container")),
            }
        }
    }

    /// The container at `open`, checked to be an object.
    fn object(&self, open: usize) -> Result<Container> {
        let found = self.container(open)?;
        if !found.is_object {
            return Err(self.fail("expected an object"));
        }
        Ok(found)
    }

    /// The container at `open`, checked to be an array of `len` elements.
    fn array(&self, open: usize, len: usize) -> Result<Container> {
        let found = self.container(open)?;
        if found.is_object || found.entries.len() != len {
            return Err(self.fail("array does not match the parsed document"));
        }
        Ok(found)
    }

    fn key_is(&self, key: Span, token: &str) -> Result<bool> {
        let raw = self.slice(key.start, key.end)?;
        let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
        if !inner.contains('\\') {
            return Ok(inner == token);
        }
        let decoded: String =
            serde_json::from_str(raw).map_err(|_| self.fail("cannot decode a key"))?;
        Ok(decoded == token)
    }

    /// Index of the member of `object` whose key is `tokens[i]`; errors if
    /// the key occurs more than once.
    fn find_key(&self, object: &Container, tokens: &[String], i: usize) -> Result<Option<usize>> {
        let token = tokens.get(i).map(String::as_str).unwrap_or_default();
        let mut found = None;
        for (index, entry) in object.entries.iter().enumerate() {
            let Some(key) = entry.key else {
                return Err(self.fail("object member without a key"));
            };
            if self.key_is(key, token)? {
                if found.is_some() {
                    return Err(JsonTextError::DuplicateKey {
                        pointer: self.pointer.to_owned(),
                        parent: encode_pointer(tokens.iter().take(i)),
                        key: token.to_owned(),
                    });
                }
                found = Some(index);
            }
        }
        Ok(found)
    }

    /// Follows `tokens[..count]` from the root in both the parsed document
    /// and the text; returns the value reached and where its text starts.
    fn walk<'v>(
        &self,
        doc: &'v Value,
        root: Span,
        tokens: &[String],
        count: usize,
        missing: Missing,
    ) -> Result<(&'v Value, usize)> {
        let mut value = doc;
        let mut start = root.start;
        for i in 0..count {
            let (child, index) = step(value, tokens, i, self.pointer, missing)?;
            let entry_start = match (value, index) {
                (Value::Array(items), Some(n)) => {
                    let array = self.array(start, items.len())?;
                    array.entries.get(n).map(|e| e.value.start)
                }
                (Value::Object(_), None) => {
                    let object = self.object(start)?;
                    self.find_key(&object, tokens, i)?
                        .and_then(|k| object.entries.get(k))
                        .map(|e| e.value.start)
                }
                _ => None,
            };
            start = entry_start.ok_or_else(|| self.fail("path not found in the text"))?;
            value = child;
        }
        Ok((value, start))
    }
}

// ---------------------------------------------------------------------------
// Formatting new values
// ---------------------------------------------------------------------------

struct Style {
    /// One indentation step.
    unit: String,
    /// The root value has no newline inside.
    one_line: bool,
    /// `"\n"` or `"\r\n"`.
    newline: &'static str,
    /// Key/value separator for new members when none is nearby.
    colon: String,
    /// Inline element separator when none is nearby.
    comma: String,
}

impl Style {
    fn detect(text: &str, found: &Survey, root: Span) -> Self {
        let unit = detect_unit(text).unwrap_or("  ").to_owned();
        let one_line = !text
            .get(root.start..root.end)
            .unwrap_or_default()
            .contains('\n');
        let bytes = text.as_bytes();
        let newline = match bytes.iter().position(|&b| b == b'\n') {
            Some(at) if at > 0 && bytes.get(at - 1) == Some(&b'\r') => "\r\n",
            _ => "\n",
        };
        let colon = found.colon.clone().unwrap_or_else(|| ": ".to_owned());
        let comma = found.comma.clone().unwrap_or_else(|| {
            if colon.trim().len() == colon.len() {
                ",".to_owned()
            } else {
                ", ".to_owned()
            }
        });
        Self {
            unit,
            one_line,
            newline,
            colon,
            comma,
        }
    }
}

/// The leading whitespace of the first indented line with content.
fn detect_unit(text: &str) -> Option<&str> {
    for line in text.split('\n').skip(1) {
        let indent = line
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        if indent == 0 {
            continue;
        }
        if matches!(line.as_bytes().get(indent), None | Some(b'\r')) {
            continue;
        }
        return line.get(..indent);
    }
    None
}

/// The leading spaces/tabs of the line holding the byte just before `pos`
/// (or at `pos` when it starts a line).
fn line_indent(text: &str, pos: usize) -> &str {
    let bytes = text.as_bytes();
    let head = bytes.get(..pos).unwrap_or(bytes);
    let line_start = head
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let mut end = line_start;
    while end < pos && is_inline_space(bytes.get(end)) {
        end += 1;
    }
    text.get(line_start..end).unwrap_or_default()
}

fn value_json(value: &Value, pointer: &str) -> Result<String> {
    serde_json::to_string(value).map_err(|e| internal(pointer, format!("serializing: {e}")))
}

fn key_json(key: &str, pointer: &str) -> Result<String> {
    serde_json::to_string(key).map_err(|e| internal(pointer, format!("serializing: {e}")))
}

/// Writes `value` in the document's style; `base` is the indentation of the
/// line the value starts on.
fn render(value: &Value, style: &Style, base: &str, pointer: &str) -> Result<String> {
    let empty = match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => true,
    };
    if empty || style.one_line {
        return value_json(value, pointer);
    }
    let mut out = String::new();
    write_pretty(value, style, base, 0, pointer, &mut out)?;
    Ok(out)
}

fn push_line(out: &mut String, style: &Style, base: &str, level: usize) {
    out.push_str(style.newline);
    out.push_str(base);
    for _ in 0..level {
        out.push_str(&style.unit);
    }
}

fn write_pretty(
    value: &Value,
    style: &Style,
    base: &str,
    level: usize,
    pointer: &str,
    out: &mut String,
) -> Result<()> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_line(out, style, base, level + 1);
                write_pretty(item, style, base, level + 1, pointer, out)?;
            }
            push_line(out, style, base, level);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_line(out, style, base, level + 1);
                out.push_str(&key_json(key, pointer)?);
                out.push_str(&style.colon);
                write_pretty(item, style, base, level + 1, pointer, out)?;
            }
            push_line(out, style, base, level);
            out.push('}');
        }
        _ => out.push_str(&value_json(value, pointer)?),
    }
    Ok(())
}

/// The span to replace and its replacement, for adding a member (`key` is
/// `Some`) or an element (`None`) at the end of `container`.
fn insertion(
    scan: &Scanner<'_>,
    container: &Container,
    style: &Style,
    key: Option<&str>,
    value: &Value,
) -> Result<(Span, String)> {
    let text = scan.text;
    let pointer = scan.pointer;
    let prefix = |colon: &str| -> Result<String> {
        match key {
            Some(k) => Ok(format!("{}{colon}", key_json(k, pointer)?)),
            None => Ok(String::new()),
        }
    };
    let Some((last, before)) = container.entries.split_last() else {
        let inner = Span {
            start: container.open + 1,
            end: container.close,
        };
        let member = prefix(&style.colon)?;
        if style.one_line {
            let rendered = render(value, style, "", pointer)?;
            return Ok((inner, format!("{member}{rendered}")));
        }
        let nl = style.newline;
        let brace_indent = line_indent(text, container.open);
        let indent = format!("{brace_indent}{}", style.unit);
        let rendered = render(value, style, &indent, pointer)?;
        return Ok((
            inner,
            format!("{nl}{indent}{member}{rendered}{nl}{brace_indent}"),
        ));
    };
    let colon = match last.key {
        Some(k) => scan
            .slice(k.end, last.value.start)
            .ok()
            .filter(|s| !s.contains(['\n', '\r']))
            .unwrap_or(&style.colon),
        None => "",
    };
    let member = prefix(colon)?;
    let gap_start = before.last().map_or(container.open + 1, |p| p.value.end);
    let gap = scan.slice(gap_start, last.start)?;
    let at = Span {
        start: last.value.end,
        end: last.value.end,
    };
    if gap.contains('\n') {
        let indent = line_indent(text, last.start);
        let rendered = render(value, style, indent, pointer)?;
        return Ok((at, format!(",{}{indent}{member}{rendered}", style.newline)));
    }
    let comma = if before.is_empty() {
        style.comma.as_str()
    } else {
        gap
    };
    let rendered = render(value, style, line_indent(text, last.value.end), pointer)?;
    Ok((at, format!("{comma}{member}{rendered}")))
}

/// The span removed with the entry `index` of `container`.
fn removal(container: &Container, index: usize) -> Option<Span> {
    let entry = container.entries.get(index)?;
    if container.entries.len() == 1 {
        return Some(Span {
            start: container.open + 1,
            end: container.close,
        });
    }
    if let Some(next) = container.entries.get(index + 1) {
        return Some(Span {
            start: entry.start,
            end: next.start,
        });
    }
    let prev = container.entries.get(index.checked_sub(1)?)?;
    Some(Span {
        start: prev.value.end,
        end: entry.value.end,
    })
}

fn splice(text: &str, span: Span, replacement: &str, pointer: &str) -> Result<String> {
    let (Some(head), Some(tail)) = (text.get(..span.start), text.get(span.end..)) else {
        return Err(internal(
            pointer,
            "edit span is not on character boundaries",
        ));
    };
    if span.start > span.end {
        return Err(internal(pointer, "edit span is reversed"));
    }
    let mut out = String::with_capacity(head.len() + replacement.len() + tail.len());
    out.push_str(head);
    out.push_str(replacement);
    out.push_str(tail);
    Ok(out)
}

/// Bounds-checks the edited text and verifies it parses to `expected`.
fn finish(out: String, expected: &Value, pointer: &str) -> Result<String> {
    check_size(&out)?;
    check_depth(survey(&out).depth)?;
    let reparsed: Value = serde_json::from_str(&out)
        .map_err(|e| internal(pointer, format!("the edited text does not parse ({e})")))?;
    // Compare serialized forms so that key order is checked as well.
    if value_json(&reparsed, pointer)? != value_json(expected, pointer)? {
        return Err(internal(
            pointer,
            "the edited text does not match the expected document",
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Public edits
// ---------------------------------------------------------------------------

/// Sets the value at `pointer` in the JSON text `text`, returning the new text.
///
/// An existing value is replaced in place; a missing key is added as the last
/// member of its object; an array index equal to the length, or `-`, appends.
/// Intermediate containers must already exist. Only the bytes of the written
/// value (or the inserted member/element) change; see the module docs for the
/// formatting rules and limits.
pub fn set_value(text: &str, pointer: &str, value: &Value) -> Result<String> {
    let tokens = parse_pointer(pointer)?;
    let (mut doc, found) = load(text)?;
    check_depth(nesting_of(value))?;
    let scan = Scanner::new(text, pointer);
    let root = scan.root()?;
    let style = Style::detect(text, &found, root);

    let Some((last, parent_tokens)) = tokens.split_last() else {
        let rendered = render(value, &style, line_indent(text, root.start), pointer)?;
        let out = splice(text, root, &rendered, pointer)?;
        return finish(out, value, pointer);
    };
    let depth = parent_tokens.len();
    let (parent, parent_start) = scan.walk(&doc, root, &tokens, depth, Missing::SetParentFirst)?;
    let (span, replacement) = match parent {
        Value::Object(map) => {
            let object = scan.object(parent_start)?;
            match (
                scan.find_key(&object, &tokens, depth)?,
                map.contains_key(last),
            ) {
                (Some(k), true) => {
                    let target = object
                        .entries
                        .get(k)
                        .ok_or_else(|| internal(pointer, "member vanished"))?
                        .value;
                    let base = line_indent(text, target.start);
                    (target, render(value, &style, base, pointer)?)
                }
                (None, false) => insertion(&scan, &object, &style, Some(last), value)?,
                _ => return Err(internal(pointer, "key presence differs from the text")),
            }
        }
        Value::Array(items) => {
            let array = scan.array(parent_start, items.len())?;
            match array_token(last) {
                ArrayToken::Index(n) if n < items.len() => {
                    let target = array
                        .entries
                        .get(n)
                        .ok_or_else(|| internal(pointer, "element vanished"))?
                        .value;
                    let base = line_indent(text, target.start);
                    (target, render(value, &style, base, pointer)?)
                }
                ArrayToken::Append => insertion(&scan, &array, &style, None, value)?,
                ArrayToken::Index(n) if n == items.len() => {
                    insertion(&scan, &array, &style, None, value)?
                }
                ArrayToken::Index(_) | ArrayToken::TooBig => {
                    return Err(JsonTextError::IndexOutOfRange {
                        pointer: pointer.to_owned(),
                        parent: encode_pointer(parent_tokens),
                        index: last.clone(),
                        len: items.len(),
                    })
                }
                ArrayToken::Invalid => return Err(invalid_index(last, pointer)),
            }
        }
        other => return Err(not_container(other, &tokens, depth, pointer)),
    };
    let out = splice(text, span, &replacement, pointer)?;
    apply_set(&mut doc, parent_tokens, last, value.clone())
        .ok_or_else(|| internal(pointer, "cannot apply the edit to the parsed document"))?;
    finish(out, &doc, pointer)
}

/// Removes the member/element at `pointer`.
///
/// The member goes together with its comma and the whitespace/newline it sits
/// on: removing a member that is not last removes it up to the next member;
/// removing the last one also removes the comma before it; removing the only
/// one leaves `{}` / `[]`. Pointer `""` is an error.
pub fn remove_value(text: &str, pointer: &str) -> Result<String> {
    let tokens = parse_pointer(pointer)?;
    let Some((last, parent_tokens)) = tokens.split_last() else {
        return Err(JsonTextError::RemoveRoot);
    };
    let (mut doc, _) = load(text)?;
    let scan = Scanner::new(text, pointer);
    let root = scan.root()?;
    let depth = parent_tokens.len();
    let (parent, parent_start) = scan.walk(&doc, root, &tokens, depth, Missing::NotFound)?;
    let (container, index) = match parent {
        Value::Object(map) => {
            let object = scan.object(parent_start)?;
            match (
                scan.find_key(&object, &tokens, depth)?,
                map.contains_key(last),
            ) {
                (Some(k), true) => (object, k),
                (None, false) => {
                    return Err(missing_error(
                        parent,
                        &tokens,
                        depth,
                        pointer,
                        Missing::NotFound,
                    ))
                }
                _ => return Err(internal(pointer, "key presence differs from the text")),
            }
        }
        Value::Array(items) => match array_token(last) {
            ArrayToken::Index(n) if n < items.len() => (scan.array(parent_start, items.len())?, n),
            ArrayToken::Invalid => return Err(invalid_index(last, pointer)),
            _ => {
                return Err(missing_error(
                    parent,
                    &tokens,
                    depth,
                    pointer,
                    Missing::NotFound,
                ))
            }
        },
        other => return Err(not_container(other, &tokens, depth, pointer)),
    };
    let span = removal(&container, index).ok_or_else(|| internal(pointer, "entry vanished"))?;
    let out = splice(text, span, "", pointer)?;
    apply_remove(&mut doc, parent_tokens, last)
        .ok_or_else(|| internal(pointer, "cannot apply the removal to the parsed document"))?;
    finish(out, &doc, pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PRETTY: &str = "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true\n  }\n}\n";

    fn set(text: &str, pointer: &str, value: Value) -> String {
        set_value(text, pointer, &value).unwrap()
    }

    fn set_err(text: &str, pointer: &str, value: Value) -> JsonTextError {
        set_value(text, pointer, &value).unwrap_err()
    }

    /// Runs a table of `(doc, pointer, value, expected text)` cases.
    fn check_sets(cases: &[(&str, &str, Value, &str)]) {
        for (doc, pointer, value, expected) in cases {
            let got = set_value(doc, pointer, value)
                .unwrap_or_else(|e| panic!("{doc:?} {pointer:?}: {e}"));
            assert_eq!(got, *expected, "doc {doc:?}, pointer {pointer:?}");
        }
    }

    fn check_removes(cases: &[(&str, &str, &str)]) {
        for (doc, pointer, expected) in cases {
            let got =
                remove_value(doc, pointer).unwrap_or_else(|e| panic!("{doc:?} {pointer:?}: {e}"));
            assert_eq!(got, *expected, "doc {doc:?}, pointer {pointer:?}");
        }
    }

    #[test]
    fn parse_pointer_table() {
        let ok: &[(&str, &[&str])] = &[
            ("", &[]),
            ("/", &[""]),
            ("/a/b", &["a", "b"]),
            ("/a~1b/c~0d", &["a/b", "c~d"]),
            ("/~01", &["~1"]),
            ("/~10", &["/0"]),
            ("//x/", &["", "x", ""]),
            ("/ключ/😀", &["ключ", "😀"]),
        ];
        for (pointer, tokens) in ok {
            assert_eq!(parse_pointer(pointer).unwrap(), *tokens, "{pointer:?}");
        }
        for bad in ["a/b", "#/a", "/~2", "/~", "/a~", "/~a", "/x/~~"] {
            assert!(
                matches!(
                    parse_pointer(bad),
                    Err(JsonTextError::InvalidPointer { .. })
                ),
                "{bad:?}"
            );
        }
        let msg = parse_pointer("/~2").unwrap_err().to_string();
        assert!(
            msg.contains("\"~2\"") && msg.contains("~0") && msg.contains("~1"),
            "{msg}"
        );
        let msg = parse_pointer("a/b").unwrap_err().to_string();
        assert!(msg.contains("start with \"/\""), "{msg}");
    }

    #[test]
    fn encode_pointer_round_trips() {
        let tokens: Vec<String> = vec!["a/b".into(), "c~d".into(), "".into()];
        let encoded = encode_pointer(&tokens);
        assert_eq!(encoded, "/a~1b/c~0d/");
        assert_eq!(parse_pointer(&encoded).unwrap(), tokens);
    }

    #[test]
    fn lookup_finds_values() {
        let doc: Value = serde_json::from_str(PRETTY).unwrap();
        assert_eq!(lookup(&doc, "").unwrap(), &doc);
        assert_eq!(lookup(&doc, "/nested/x").unwrap(), &json!(true));
        assert_eq!(lookup(&doc, "/tags/1").unwrap(), &json!("b"));
        let escaped = json!({"a/b": {"c~d": 5}});
        assert_eq!(lookup(&escaped, "/a~1b/c~0d").unwrap(), &json!(5));
    }

    #[test]
    fn lookup_errors_name_the_missing_token() {
        let doc: Value = serde_json::from_str(PRETTY).unwrap();
        let err = lookup(&doc, "/nested/y/z").unwrap_err();
        assert_eq!(
            err,
            JsonTextError::NotFound {
                pointer: "/nested/y/z".into(),
                parent: "/nested".into(),
                token: "y".into(),
                hint: "its keys are \"x\"".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "nothing at \"/nested/y/z\": \"/nested\" has no \"y\" (its keys are \"x\")"
        );
        let err = lookup(&doc, "/tags/2").unwrap_err();
        assert!(
            err.to_string()
                .contains("the array has 2 elements, indices 0 to 1"),
            "{err}"
        );
        let err = lookup(&doc, "/tags/-").unwrap_err();
        assert!(err.to_string().contains("only appends"), "{err}");
        assert!(matches!(
            lookup(&doc, "/tags/01"),
            Err(JsonTextError::InvalidIndex { token, .. }) if token == "01"
        ));
        assert!(matches!(
            lookup(&doc, "/tags/-1"),
            Err(JsonTextError::InvalidIndex { .. })
        ));
        assert!(matches!(
            lookup(&doc, "/tags/99999999999999999999999"),
            Err(JsonTextError::NotFound { .. })
        ));
        let err = lookup(&doc, "/name/first").unwrap_err();
        assert_eq!(
            err,
            JsonTextError::NotAContainer {
                pointer: "/name/first".into(),
                parent: "/name".into(),
                kind: "a string".into(),
            }
        );
        assert!(matches!(
            lookup(&doc, "x"),
            Err(JsonTextError::InvalidPointer { .. })
        ));
        let empty = json!({"e": {}, "a": []});
        assert!(lookup(&empty, "/e/k")
            .unwrap_err()
            .to_string()
            .contains("the object is empty"));
        assert!(lookup(&empty, "/a/0")
            .unwrap_err()
            .to_string()
            .contains("the array is empty"));
    }

    #[test]
    fn lookup_lists_at_most_20_keys() {
        let mut map = serde_json::Map::new();
        for i in 0..25 {
            map.insert(format!("k{i:02}"), json!(i));
        }
        let doc = Value::Object(map);
        let err = lookup(&doc, "/nope").unwrap_err().to_string();
        assert!(err.contains("\"k19\" and 5 more"), "{err}");
        assert!(!err.contains("k20"), "{err}");
    }

    #[test]
    fn replace_scalar_changes_only_that_token() {
        check_sets(&[
            (
                PRETTY,
                "/version",
                json!(2),
                &PRETTY.replace("\"version\": 1", "\"version\": 2"),
            ),
            (
                PRETTY,
                "/name",
                json!("a \"q\""),
                &PRETTY.replace("\"loom\"", r#""a \"q\"""#),
            ),
            (
                PRETTY,
                "/nested/x",
                json!(null),
                &PRETTY.replace("true", "null"),
            ),
            (
                PRETTY,
                "/tags/0",
                json!("z"),
                &PRETTY.replace("[\"a\"", "[\"z\""),
            ),
            (
                PRETTY,
                "/tags",
                json!([]),
                &PRETTY.replace("[\"a\", \"b\"]", "[]"),
            ),
            (
                PRETTY,
                "/nested",
                json!({}),
                &PRETTY.replace("{\n    \"x\": true\n  }", "{}"),
            ),
            (
                r#"{"a" : 1 , "b":2}"#,
                "/a",
                json!(1.5),
                r#"{"a" : 1.5 , "b":2}"#,
            ),
            ("[1,2,3]", "/1", json!(false), "[1,false,3]"),
        ]);
    }

    #[test]
    fn replace_with_container_is_pretty_and_indented() {
        check_sets(&[
            (
                PRETTY,
                "/nested",
                json!({"y": [1, 2], "z": {}}),
                "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"y\": [\n      1,\n      2\n    ],\n    \"z\": {}\n  }\n}\n",
            ),
            (
                PRETTY,
                "/tags/1",
                json!({"k": "v"}),
                "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", {\n    \"k\": \"v\"\n  }],\n  \"nested\": {\n    \"x\": true\n  }\n}\n",
            ),
            (
                "[\n  {\n    \"a\": 1\n  },\n  2\n]",
                "/0/a",
                json!([true]),
                "[\n  {\n    \"a\": [\n      true\n    ]\n  },\n  2\n]",
            ),
            // One-line documents get compact values.
            (r#"{"a": 1, "b": 2}"#, "/a", json!({"x": [1, 2]}), r#"{"a": {"x":[1,2]}, "b": 2}"#),
        ]);
    }

    #[test]
    fn insert_member_pretty() {
        check_sets(&[
            (
                PRETTY,
                "/new",
                json!("v"),
                "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true\n  },\n  \"new\": \"v\"\n}\n",
            ),
            (
                PRETTY,
                "/obj",
                json!({"k": 1}),
                "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true\n  },\n  \"obj\": {\n    \"k\": 1\n  }\n}\n",
            ),
            (
                PRETTY,
                "/nested/y",
                json!({"a": [1]}),
                "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true,\n    \"y\": {\n      \"a\": [\n        1\n      ]\n    }\n  }\n}\n",
            ),
            // The text between the last member and the brace is kept.
            ("{\n  \"a\": 1   \n\n}", "/b", json!(2), "{\n  \"a\": 1,\n  \"b\": 2   \n\n}"),
            // Colon spacing is copied from the last member.
            ("{\n  \"a\" : 1\n}", "/b", json!(2), "{\n  \"a\" : 1,\n  \"b\" : 2\n}"),
            // Special characters in the new key are escaped.
            ("{\n  \"a\": 1\n}", "/q\"~1~0", json!(2), "{\n  \"a\": 1,\n  \"q\\\"/~\": 2\n}"),
        ]);
    }

    #[test]
    fn insert_member_one_line() {
        check_sets(&[
            (
                r#"{"a": 1, "b": 2}"#,
                "/c",
                json!(3),
                r#"{"a": 1, "b": 2, "c": 3}"#,
            ),
            (r#"{"a":1,"b":2}"#, "/c", json!(3), r#"{"a":1,"b":2,"c":3}"#),
            (r#"{"a": 1}"#, "/c", json!(3), r#"{"a": 1, "c": 3}"#),
            (r#"{"a":1}"#, "/c", json!(3), r#"{"a":1,"c":3}"#),
            (
                r#"{ "a": 1 }"#,
                "/c",
                json!([1, 2]),
                r#"{ "a": 1, "c": [1,2] }"#,
            ),
            (
                "{\"a\": 1}\n",
                "/o",
                json!({"x": {}}),
                "{\"a\": 1, \"o\": {\"x\":{}}}\n",
            ),
            // An inline object inside a pretty document stays inline.
            (
                "{\n  \"p\": {\"a\": 1, \"b\": 2}\n}",
                "/p/c",
                json!(3),
                "{\n  \"p\": {\"a\": 1, \"b\": 2, \"c\": 3}\n}",
            ),
        ]);
    }

    #[test]
    fn insert_into_empty_object() {
        check_sets(&[
            ("{}", "/k", json!(1), r#"{"k": 1}"#),
            ("{}\n", "/k", json!({"a": 1}), "{\"k\": {\"a\":1}}\n"),
            (r#"{"a": {}}"#, "/a/k", json!(1), r#"{"a": {"k": 1}}"#),
            (r#"{"a":{}}"#, "/a/k", json!(1), r#"{"a":{"k":1}}"#),
            (r#"{"a": { }}"#, "/a/k", json!(1), r#"{"a": {"k": 1}}"#),
            (
                "{\n  \"a\": {}\n}\n",
                "/a/k",
                json!(1),
                "{\n  \"a\": {\n    \"k\": 1\n  }\n}\n",
            ),
            (
                "{\n  \"a\": {}\n}\n",
                "/a/k",
                json!({"x": [1]}),
                "{\n  \"a\": {\n    \"k\": {\n      \"x\": [\n        1\n      ]\n    }\n  }\n}\n",
            ),
            ("{\n}\n", "/k", json!(true), "{\n  \"k\": true\n}\n"),
        ]);
    }

    #[test]
    fn arrays_append_replace_and_range() {
        check_sets(&[
            (
                PRETTY,
                "/tags/-",
                json!("c"),
                &PRETTY.replace("\"b\"]", "\"b\", \"c\"]"),
            ),
            (
                PRETTY,
                "/tags/2",
                json!("c"),
                &PRETTY.replace("\"b\"]", "\"b\", \"c\"]"),
            ),
            (PRETTY, "/tags/1", json!(7), &PRETTY.replace("\"b\"]", "7]")),
            ("[1,2]", "/-", json!(3), "[1,2,3]"),
            ("[1]", "/-", json!(3), "[1, 3]"),
            ("[]", "/-", json!([1, 2]), "[[1,2]]"),
            ("[]", "/0", json!(1), "[1]"),
            (
                "{\n  \"l\": [\n    1,\n    2\n  ]\n}",
                "/l/-",
                json!(3),
                "{\n  \"l\": [\n    1,\n    2,\n    3\n  ]\n}",
            ),
            (
                "{\n  \"l\": []\n}",
                "/l/-",
                json!({"a": 1}),
                "{\n  \"l\": [\n    {\n      \"a\": 1\n    }\n  ]\n}",
            ),
            (
                "[\n  [],\n  []\n]",
                "/1/-",
                json!(0),
                "[\n  [],\n  [\n    0\n  ]\n]",
            ),
        ]);
        let err = set_err(PRETTY, "/tags/3", json!(1));
        assert_eq!(
            err,
            JsonTextError::IndexOutOfRange {
                pointer: "/tags/3".into(),
                parent: "/tags".into(),
                index: "3".into(),
                len: 2,
            }
        );
        assert!(
            err.to_string().contains("use 2 or \"-\" to append"),
            "{err}"
        );
        assert!(matches!(
            set_err(PRETTY, "/tags/99999999999999999999999", json!(1)),
            JsonTextError::IndexOutOfRange { .. }
        ));
        for bad in ["01", "+1", "-1", "1.0", "", " 1", "x"] {
            let pointer = format!("/tags/{bad}");
            assert_eq!(
                set_err(PRETTY, &pointer, json!(1)),
                JsonTextError::InvalidIndex {
                    pointer: pointer.clone(),
                    token: bad.into()
                },
                "{pointer}"
            );
        }
    }

    #[test]
    fn escaped_pointer_tokens() {
        check_sets(&[
            (
                r#"{"a/b": {"c~d": 1}}"#,
                "/a~1b/c~0d",
                json!(2),
                r#"{"a/b": {"c~d": 2}}"#,
            ),
            (
                r#"{"a/b": {"c~d": 1}}"#,
                "/a~1b/n~1~0",
                json!(2),
                r#"{"a/b": {"c~d": 1, "n/~": 2}}"#,
            ),
            // Keys written with escapes are matched by their decoded text.
            (
                r#"{"\u0041": 1, "\/": 2}"#,
                "/A",
                json!(3),
                r#"{"\u0041": 3, "\/": 2}"#,
            ),
            (
                r#"{"\u0041": 1, "\/": 2}"#,
                "/~1",
                json!(3),
                r#"{"\u0041": 1, "\/": 3}"#,
            ),
        ]);
        for bad in ["a/b", "/~2", "/a~"] {
            assert!(matches!(
                set_err(PRETTY, bad, json!(1)),
                JsonTextError::InvalidPointer { .. }
            ));
        }
    }

    #[test]
    fn missing_intermediate_is_an_error() {
        let err = set_err(PRETTY, "/nested/y/z", json!(1));
        assert_eq!(
            err,
            JsonTextError::MissingParent {
                pointer: "/nested/y/z".into(),
                missing: "/nested/y".into(),
                hint: "its keys are \"x\"".into(),
            }
        );
        assert!(err.to_string().contains("set \"/nested/y\" first"), "{err}");
        assert!(matches!(
            set_err(PRETTY, "/tags/5/x", json!(1)),
            JsonTextError::MissingParent { missing, .. } if missing == "/tags/5"
        ));
        assert!(matches!(
            set_err(PRETTY, "/tags/-/x", json!(1)),
            JsonTextError::MissingParent { missing, .. } if missing == "/tags/-"
        ));
    }

    #[test]
    fn scalar_parent_is_an_error() {
        let err = set_err(PRETTY, "/version/x", json!(1));
        assert_eq!(
            err,
            JsonTextError::NotAContainer {
                pointer: "/version/x".into(),
                parent: "/version".into(),
                kind: "a number".into(),
            }
        );
        assert!(matches!(
            set_err(PRETTY, "/nested/x/y/z", json!(1)),
            JsonTextError::NotAContainer { parent, kind, .. } if parent == "/nested/x" && kind == "a boolean"
        ));
        assert!(matches!(
            set_err("\"s\"", "/0", json!(1)),
            JsonTextError::NotAContainer { parent, .. } if parent.is_empty()
        ));
        assert!(matches!(
            remove_value("null", "/0"),
            Err(JsonTextError::NotAContainer { .. })
        ));
    }

    #[test]
    fn duplicate_keys_are_ambiguous() {
        let doc = r#"{"a": 1, "a": 2}"#;
        let err = set_err(doc, "/a", json!(3));
        assert_eq!(
            err,
            JsonTextError::DuplicateKey {
                pointer: "/a".into(),
                parent: "".into(),
                key: "a".into(),
            }
        );
        assert!(err.to_string().contains("more than once"), "{err}");
        assert!(matches!(
            remove_value(doc, "/a"),
            Err(JsonTextError::DuplicateKey { .. })
        ));
        // Other keys of that object are unambiguous.
        assert_eq!(set(doc, "/b", json!(3)), r#"{"a": 1, "a": 2, "b": 3}"#);
        let nested = r#"{"p": {"x": 1}, "p": {"x": 2}}"#;
        assert!(matches!(
            set_err(nested, "/p/x", json!(3)),
            JsonTextError::DuplicateKey { key, .. } if key == "p"
        ));
        // An escaped spelling of the same key is still a duplicate.
        assert!(matches!(
            set_err(r#"{"A": 1, "\u0041": 2}"#, "/A", json!(3)),
            JsonTextError::DuplicateKey { .. }
        ));
        // Duplicates off the path do not matter.
        assert_eq!(
            set(r#"{"d": 1, "d": 2, "b": {"c": 1}}"#, "/b/c", json!(5)),
            r#"{"d": 1, "d": 2, "b": {"c": 5}}"#
        );
    }

    #[test]
    fn remove_members_and_elements() {
        check_removes(&[
            (PRETTY, "/name", "{\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true\n  }\n}\n"),
            (PRETTY, "/version", "{\n  \"name\": \"loom\",\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {\n    \"x\": true\n  }\n}\n"),
            (PRETTY, "/nested", "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"]\n}\n"),
            (PRETTY, "/nested/x", "{\n  \"name\": \"loom\",\n  \"version\": 1,\n  \"tags\": [\"a\", \"b\"],\n  \"nested\": {}\n}\n"),
            (PRETTY, "/tags/0", &PRETTY.replace("[\"a\", \"b\"]", "[\"b\"]")),
            (PRETTY, "/tags/1", &PRETTY.replace("[\"a\", \"b\"]", "[\"a\"]")),
            (r#"{"a": 1, "b": 2, "c": 3}"#, "/a", r#"{"b": 2, "c": 3}"#),
            (r#"{"a": 1, "b": 2, "c": 3}"#, "/b", r#"{"a": 1, "c": 3}"#),
            (r#"{"a": 1, "b": 2, "c": 3}"#, "/c", r#"{"a": 1, "b": 2}"#),
            (r#"{"a":1 , "b":2}"#, "/b", r#"{"a":1}"#),
            ("{ \"a\": 1 }\n", "/a", "{}\n"),
            ("[\n  1,\n  2,\n  3\n]", "/1", "[\n  1,\n  3\n]"),
            ("[\n  1,\n  2,\n  3\n]", "/2", "[\n  1,\n  2\n]"),
            ("[\n  [\n    1\n  ]\n]", "/0/0", "[\n  []\n]"),
        ]);
        assert_eq!(remove_value(PRETTY, ""), Err(JsonTextError::RemoveRoot));
        assert!(matches!(
            remove_value(PRETTY, "/nope"),
            Err(JsonTextError::NotFound { token, .. }) if token == "nope"
        ));
        assert!(matches!(
            remove_value(PRETTY, "/nope/deeper"),
            Err(JsonTextError::NotFound { token, .. }) if token == "nope"
        ));
        assert!(matches!(
            remove_value(PRETTY, "/tags/2"),
            Err(JsonTextError::NotFound { .. })
        ));
        assert!(matches!(
            remove_value(PRETTY, "/tags/-"),
            Err(JsonTextError::NotFound { .. })
        ));
        assert!(matches!(
            remove_value(PRETTY, "/tags/00"),
            Err(JsonTextError::InvalidIndex { .. })
        ));
    }

    #[test]
    fn whole_document_replace_keeps_surrounding_whitespace() {
        check_sets(&[
            (PRETTY, "", json!(5), "5\n"),
            ("\n  {\"a\": 1}\n\n", "", json!([1]), "\n  [1]\n\n"),
            (
                "{\n  \"a\": 1\n}\n",
                "",
                json!({"b": {"c": 1}}),
                "{\n  \"b\": {\n    \"c\": 1\n  }\n}\n",
            ),
            (
                "{\"a\": 1}\n",
                "",
                json!({"b": {"c": 1}}),
                "{\"b\":{\"c\":1}}\n",
            ),
            ("  1  ", "", json!("x"), "  \"x\"  "),
        ]);
    }

    #[test]
    fn strings_with_structural_characters_do_not_confuse_the_scanner() {
        let doc = r#"{"k}\"{": "v]\\\"}", "a\\": {"b": "}{][,:"}, "[": ["\"", "\\", "}"], "c": 1}"#;
        check_sets(&[
            (doc, "/c", json!(2), &doc.replace("\"c\": 1", "\"c\": 2")),
            (
                doc,
                "/a\\/b",
                json!("x"),
                &doc.replace(r#""}{][,:""#, "\"x\""),
            ),
            (doc, "/k}\"{", json!(0), &doc.replace(r#""v]\\\"}""#, "0")),
            (
                doc,
                "/[/2",
                json!("]"),
                &doc.replace(r#""}"], "c""#, r#""]"], "c""#),
            ),
            (
                doc,
                "/[/-",
                json!("{"),
                &doc.replace(r#""}"], "c""#, r#""}", "{"], "c""#),
            ),
            (
                doc,
                "/new",
                json!("\"}"),
                &doc.replace("\"c\": 1}", "\"c\": 1, \"new\": \"\\\"}\"}"),
            ),
        ]);
        check_removes(&[
            (doc, "/k}\"{", &doc.replace(r#""k}\"{": "v]\\\"}", "#, "")),
            (doc, "/[/1", &doc.replace(r#", "\\""#, "")),
        ]);
        let parsed: Value = serde_json::from_str(doc).unwrap();
        assert_eq!(lookup(&parsed, "/k}\"{").unwrap(), &json!("v]\\\"}"));
    }

    #[test]
    fn non_ascii_text() {
        let doc = "{\n  \"ключ\": \"значение\",\n  \"😀\": [\"é\"]\n}";
        check_sets(&[
            (doc, "/ключ", json!("ж"), "{\n  \"ключ\": \"ж\",\n  \"😀\": [\"é\"]\n}"),
            (doc, "/😀/-", json!("ü"), "{\n  \"ключ\": \"значение\",\n  \"😀\": [\"é\", \"ü\"]\n}"),
            (doc, "/ñ", json!({"ß": 1}), "{\n  \"ключ\": \"значение\",\n  \"😀\": [\"é\"],\n  \"ñ\": {\n    \"ß\": 1\n  }\n}"),
        ]);
        check_removes(&[(doc, "/ключ", "{\n  \"😀\": [\"é\"]\n}")]);
    }

    #[test]
    fn tab_indented_document() {
        let doc = "{\n\t\"a\": 1,\n\t\"o\": {\n\t\t\"x\": []\n\t}\n}\n";
        check_sets(&[
            (doc, "/b", json!([1, 2]), "{\n\t\"a\": 1,\n\t\"o\": {\n\t\t\"x\": []\n\t},\n\t\"b\": [\n\t\t1,\n\t\t2\n\t]\n}\n"),
            (doc, "/o/x/-", json!({"k": null}), "{\n\t\"a\": 1,\n\t\"o\": {\n\t\t\"x\": [\n\t\t\t{\n\t\t\t\t\"k\": null\n\t\t\t}\n\t\t]\n\t}\n}\n"),
        ]);
    }

    #[test]
    fn four_space_document() {
        let doc = "{\n    \"a\": {\n        \"b\": 1\n    }\n}";
        check_sets(&[
            (doc, "/a/c", json!({"d": null}), "{\n    \"a\": {\n        \"b\": 1,\n        \"c\": {\n            \"d\": null\n        }\n    }\n}"),
            (doc, "/a", json!([1]), "{\n    \"a\": [\n        1\n    ]\n}"),
        ]);
    }

    #[test]
    fn crlf_document_keeps_crlf() {
        let doc = "{\r\n  \"a\": 1\r\n}\r\n";
        check_sets(&[(
            doc,
            "/b",
            json!({"c": 1}),
            "{\r\n  \"a\": 1,\r\n  \"b\": {\r\n    \"c\": 1\r\n  }\r\n}\r\n",
        )]);
        check_removes(&[(doc, "/a", "{}\r\n")]);
    }

    #[test]
    fn invalid_json_reports_line_and_column() {
        let err = set_err("{\n  \"a\": 1,\n}", "/a", json!(1));
        let JsonTextError::InvalidJson {
            message,
            line,
            column,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*line, *column), (3, 1));
        assert_eq!(message, "trailing comma");
        assert_eq!(
            err.to_string(),
            "the text is not valid json: trailing comma at line 3, column 1; fix the syntax before editing it"
        );
        for bad in ["", "   ", "{", "[1,]", "{'a': 1}", "nul", "1 2", "\"\\x\""] {
            assert!(
                matches!(
                    set_err(bad, "", json!(1)),
                    JsonTextError::InvalidJson { .. }
                ),
                "{bad:?}"
            );
            assert!(
                matches!(
                    remove_value(bad, "/a"),
                    Err(JsonTextError::InvalidJson { .. })
                ),
                "{bad:?}"
            );
        }
    }

    fn nested_arrays(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_limits() {
        let ok = nested_arrays(MAX_NESTING);
        assert_eq!(set(&ok, "", json!(1)), "1");
        let inner = format!("/{}", vec!["0"; MAX_NESTING - 1].join("/"));
        assert!(set_value(&ok, &format!("{inner}/-"), &json!(1)).is_ok());
        assert_eq!(
            set_err(&ok, &format!("{inner}/-"), json!([])),
            JsonTextError::TooDeep {
                depth: MAX_NESTING + 1,
                limit: MAX_NESTING
            }
        );
        let deep = nested_arrays(MAX_NESTING + 1);
        // The limit is serde_json's: one level more does not parse there.
        assert!(serde_json::from_str::<Value>(&ok).is_ok());
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert!(matches!(
            set_err(&deep, "", json!(1)),
            JsonTextError::TooDeep { .. }
        ));
        assert!(matches!(
            remove_value(&deep, "/0"),
            Err(JsonTextError::TooDeep { .. })
        ));
        // A deeply nested new value is refused before it is serialized.
        let mut value = json!(1);
        for _ in 0..1000 {
            value = Value::Array(vec![value]);
        }
        assert!(matches!(
            set_err("{}", "/a", value),
            JsonTextError::TooDeep { .. }
        ));
    }

    #[test]
    fn size_limits() {
        let big = format!("{}1", " ".repeat(MAX_TEXT_BYTES));
        assert!(matches!(
            set_err(&big, "", json!(1)),
            JsonTextError::TooLarge { .. }
        ));
        assert!(matches!(
            remove_value(&big, "/a"),
            Err(JsonTextError::TooLarge { .. })
        ));
        let huge = Value::String("x".repeat(MAX_TEXT_BYTES));
        assert!(matches!(
            set_err("[]", "/-", huge),
            JsonTextError::TooLarge { .. }
        ));
    }

    #[test]
    fn scanner_spans() {
        let text = r#" {"a\"": [1, "]", {"b": null}], "c" : -1.5e3 } "#;
        let scan = Scanner::new(text, "");
        let root = scan.root().unwrap();
        assert_eq!(text.get(root.start..root.end).unwrap(), text.trim());
        let object = scan.container(root.start).unwrap();
        let spans: Vec<&str> = object
            .entries
            .iter()
            .map(|e| text.get(e.value.start..e.value.end).unwrap())
            .collect();
        assert_eq!(spans, [r#"[1, "]", {"b": null}]"#, "-1.5e3"]);
        let array = scan.container(object.entries[0].value.start).unwrap();
        let spans: Vec<&str> = array
            .entries
            .iter()
            .map(|e| text.get(e.value.start..e.value.end).unwrap())
            .collect();
        assert_eq!(spans, ["1", r#""]""#, r#"{"b": null}"#]);
        // Garbage is reported, not panicked on.
        for bad in ["", "{", "[1,", "\"abc", "{\"a\" 1}", "}"] {
            let scan = Scanner::new(bad, "");
            assert!(
                scan.root().and_then(|r| scan.container(r.start)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn style_detection() {
        assert_eq!(detect_unit(PRETTY), Some("  "));
        assert_eq!(detect_unit("{\n\t\"a\": 1\n}"), Some("\t"));
        assert_eq!(detect_unit("{\n\n    \"a\": 1\n}"), Some("    "));
        assert_eq!(detect_unit("{\"a\": 1}"), None);
        assert_eq!(line_indent("{\n    \"a\": 1\n}", 6), "    ");
        assert_eq!(line_indent("x", 0), "");
        assert_eq!(line_indent("x", 99), "");
        let found = survey(r#"{"a" :1,"b": [1, 2]}"#);
        assert_eq!(found.colon.as_deref(), Some(" :"));
        assert_eq!(found.comma.as_deref(), Some(","));
        assert_eq!(found.depth, 2);
    }

    /// Every pointer of existing values in `value`, root first.
    fn all_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
        out.push(at.to_owned());
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let tokens = [key.clone()];
                    all_pointers(child, &format!("{at}{}", encode_pointer(&tokens)), out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    all_pointers(child, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    fn assert_same(text: &str, expected: &Value, what: &str) {
        let parsed: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            serde_json::to_string(expected).unwrap(),
            "{what}\n{text}"
        );
    }

    #[test]
    fn every_path_of_sample_documents() {
        let docs = [
            PRETTY,
            r#"{"a": 1, "b": [true, null, {"c": "}"}], "d": {}, "e": []}"#,
            r#"{"a":1,"b":[true,null,{"c":"}"}],"d":{},"e":[]}"#,
            "[\n\t{\n\t\t\"k\\\\\": [\n\t\t\t1,\n\t\t\t[]\n\t\t]\n\t},\n\t\"s\\\"]\",\n\t{}\n]\n",
            "{\r\n    \"x\": {\"y\": [1, 2], \"z\": \"a/b~c\"},\r\n    \"a/b\": {\r\n        \"c~d\": [\r\n        ]\r\n    }\r\n}",
            "{\n  \"one\": [ { \"two\": { } } ] ,\n  \"three\" : [\n    \"ключ\",\n    -0.5\n  ]\n}\n",
            "\n  [1, [2, [3, {\"4\": [5]}]]]  \n",
            "{}",
            "[]",
            "\"scalar\"\n",
        ];
        let values = [
            json!(null),
            json!(-7),
            json!("s\"}{\\"),
            json!({}),
            json!([]),
            json!({"k": [1, {"z": []}], "e": {}}),
            json!([[1], {"a": "b"}]),
        ];
        let mut edits = 0;
        for doc in docs {
            let parsed: Value = serde_json::from_str(doc).unwrap();
            let mut pointers = Vec::new();
            all_pointers(&parsed, "", &mut pointers);
            for pointer in &pointers {
                let current = lookup(&parsed, pointer).unwrap().clone();
                for value in &values {
                    let what = format!("set {pointer:?} = {value} in {doc:?}");
                    let out =
                        set_value(doc, pointer, value).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let mut expected = parsed.clone();
                    *expected.pointer_mut(pointer).unwrap() = value.clone();
                    assert_same(&out, &expected, &what);
                    edits += 1;

                    let (new_pointer, mut expected) = (pointer.clone(), parsed.clone());
                    match expected.pointer_mut(pointer).unwrap() {
                        Value::Object(map) => {
                            map.insert("new/key~".into(), value.clone());
                            let target = format!("{new_pointer}/new~1key~0");
                            let out = set_value(doc, &target, value)
                                .unwrap_or_else(|e| panic!("{what} (insert): {e}"));
                            assert_same(&out, &expected, &what);
                            edits += 1;
                        }
                        Value::Array(items) => {
                            let len = items.len();
                            items.push(value.clone());
                            for token in ["-".to_owned(), len.to_string()] {
                                let target = format!("{new_pointer}/{token}");
                                let out = set_value(doc, &target, value)
                                    .unwrap_or_else(|e| panic!("{what} (append): {e}"));
                                assert_same(&out, &expected, &what);
                                edits += 1;
                            }
                        }
                        _ => {}
                    }
                }
                if pointer.is_empty() {
                    continue;
                }
                // Removal.
                let what = format!("remove {pointer:?} in {doc:?}");
                let out = remove_value(doc, pointer).unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut expected = parsed.clone();
                let (parent, last) = pointer.rsplit_once('/').unwrap();
                let last = parse_pointer(&format!("/{last}")).unwrap().remove(0);
                match expected.pointer_mut(parent).unwrap() {
                    Value::Object(map) => {
                        map.shift_remove(&last).unwrap();
                    }
                    Value::Array(items) => {
                        items.remove(last.parse::<usize>().unwrap());
                    }
                    _ => unreachable!(),
                }
                assert_same(&out, &expected, &what);
                edits += 1;
                // Scalars: writing another value and then the original back
                // restores the text byte for byte.
                if !current.is_array() && !current.is_object() {
                    let changed = set(doc, pointer, json!(0));
                    assert_eq!(
                        set(&changed, pointer, current.clone()),
                        doc,
                        "restore {pointer:?}"
                    );
                }
            }
        }
        assert!(edits > 500, "{edits}");
    }

    /// Mutated and truncated documents never panic and never produce an
    /// internal error; any edit that succeeds yields valid JSON.
    #[test]
    fn mutated_documents_do_not_panic() {
        let docs = [
            PRETTY,
            r#"{"k}\"{": "v]\\\"}", "a": [1, {"b": "}{"}], "c": {}}"#,
            "[\n\t{\"é\": [1, []]},\n\t\"s\"\n]\n",
        ];
        let pieces = [
            "{", "}", "[", "]", "\"", ",", ":", "\\", " ", "\n", "0", "a", "é", "",
        ];
        let pointers = [
            "", "/a", "/a/0", "/a/-", "/c/x", "/0", "/0/é/1", "/k}\"{", "/name",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |bound: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(seed >> 33).unwrap() % bound.max(1)
        };
        let mut checked = 0;
        for doc in docs {
            let boundaries: Vec<usize> = (0..=doc.len())
                .filter(|&i| doc.is_char_boundary(i))
                .collect();
            for round in 0..400 {
                let at = boundaries[next(boundaries.len())];
                let mutated = if round % 4 == 0 {
                    doc[..at].to_owned()
                } else {
                    let after = boundaries.iter().copied().find(|&b| b > at).unwrap_or(at);
                    let keep = if round % 4 == 1 { at } else { after };
                    format!(
                        "{}{}{}",
                        &doc[..at],
                        pieces[next(pieces.len())],
                        &doc[keep..]
                    )
                };
                for pointer in pointers {
                    for result in [
                        set_value(&mutated, pointer, &json!({"n": [1]})),
                        remove_value(&mutated, pointer),
                    ] {
                        match result {
                            Ok(out) => {
                                assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}")
                            }
                            Err(JsonTextError::Internal { detail, .. }) => {
                                panic!("internal error {detail} on {mutated:?} at {pointer:?}")
                            }
                            Err(_) => {}
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }
}
