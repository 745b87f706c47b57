//! Reading and editing Jupyter notebooks (nbformat 4) for the `notebook_read` and
//! `notebook_edit` tools.
//!
//! The module is pure: it never touches the filesystem. The caller reads the notebook
//! file as text, passes it to [`render`] or [`edit`], and (for edits) writes the returned
//! text back atomically.
//!
//! Edits keep everything they do not touch: notebook metadata, other cells (metadata,
//! outputs, attachments, ids), key order and unknown keys. The output is formatted the
//! way Jupyter writes notebooks (pretty JSON, UTF-8 kept, trailing newline), using the
//! indentation, line ending and byte-order mark of the input so that diffs stay small.

use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Largest notebook text accepted by [`render`] and [`edit`] (32 MiB), and the largest
/// text [`edit`] will produce.
pub const MAX_NOTEBOOK_BYTES: usize = 32 * 1024 * 1024;

/// Each output's text (stream text, `text/plain`, error with traceback) is cut to this
/// many characters by [`render`], followed by a "… N more chars" note.
pub const OUTPUT_CHAR_CAP: usize = 4000;

/// How many known ids an unknown-id error lists.
const MAX_LISTED_IDS: usize = 10;

/// Indentation used when the input has none to copy (Jupyter's own: one space).
const DEFAULT_INDENT: &str = " ";

/// Errors from [`render`] and [`edit`]. Messages are lowercase and say how to fix the
/// problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotebookError {
    /// The text is larger than [`MAX_NOTEBOOK_BYTES`].
    #[error("notebook is {bytes} bytes, over the {limit}-byte limit; clear large outputs or split the notebook first")]
    TooLarge {
        /// Size of the text in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The text is not valid JSON.
    #[error("not a notebook: not JSON (line {line}, column {column})")]
    NotJson {
        /// 1-based line of the syntax error.
        line: usize,
        /// 1-based column of the syntax error.
        column: usize,
    },
    /// The JSON does not have a notebook's shape.
    #[error("not a notebook: {reason}")]
    NotNotebook {
        /// What is wrong.
        reason: String,
    },
    /// `nbformat` is missing or not 4.
    #[error("unsupported notebook format (nbformat {found}): only nbformat 4 notebooks are supported; convert it with `jupyter nbconvert --to notebook --nbformat 4`")]
    UnsupportedFormat {
        /// The `nbformat` value found, or "missing".
        found: String,
    },
    /// A cell in the file is malformed (bad `cell_type`, bad `source`, not an object).
    #[error(
        "cell {index} is invalid: {reason}; fix the notebook file before reading or editing it"
    )]
    InvalidCell {
        /// 0-based index of the cell.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A cell index is not below the cell count.
    #[error("cell index {index} is out of range: {}", count_hint(*.count))]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// Number of cells in the notebook.
        count: usize,
    },
    /// An insert position is past the end.
    #[error("insert position {at} is out of range: the notebook has {}; use 0..={count} ({count} appends at the end)", cells_word(*.count))]
    InsertOutOfRange {
        /// The position asked for.
        at: usize,
        /// Number of cells in the notebook.
        count: usize,
    },
    /// A `cells` range for [`render`] is empty or starts past the last cell.
    #[error("cell range {start}-{end} is invalid: {}; give start <= end with start a valid index (end is clamped to the last cell)", count_hint(*.count))]
    InvalidRange {
        /// First cell asked for.
        start: usize,
        /// Last cell asked for.
        end: usize,
        /// Number of cells in the notebook.
        count: usize,
    },
    /// No cell has the given id.
    #[error("no cell has id {id:?}; {}", known_ids_hint(.known, *.total))]
    UnknownId {
        /// The id asked for.
        id: String,
        /// Up to 10 ids that do exist.
        known: Vec<String>,
        /// How many cells have an id.
        total: usize,
    },
    /// A cell id given by the caller does not match `^[a-zA-Z0-9-_]{1,64}$`.
    #[error("invalid cell id {id:?}: an id is 1-64 characters from a-z, A-Z, 0-9, '-' and '_'; or refer to the cell by its 0-based index")]
    BadId {
        /// The id given.
        id: String,
    },
    /// Several cells share the given id.
    #[error("cell id {id:?} is shared by cells {}; refer to the cell by its 0-based index instead", join_indexes(.indexes))]
    DuplicateId {
        /// The id given.
        id: String,
        /// Indexes of the cells that have it.
        indexes: Vec<usize>,
    },
    /// Delete on a notebook without cells.
    #[error("cannot delete: the notebook has no cells")]
    EmptyNotebook,
    /// The edited notebook could not be written out (should not happen).
    #[error("could not serialize the notebook: {0}")]
    Serialize(String),
}

fn cells_word(count: usize) -> String {
    if count == 1 {
        "1 cell".to_owned()
    } else {
        format!("{count} cells")
    }
}

fn count_hint(count: usize) -> String {
    match count {
        0 => "the notebook has no cells".to_owned(),
        1 => "the notebook has 1 cell, so the only valid index is 0".to_owned(),
        n => format!(
            "the notebook has {n} cells, so valid indexes are 0-{}",
            n - 1
        ),
    }
}

fn known_ids_hint(known: &[String], total: usize) -> String {
    if known.is_empty() {
        return "no cell in this notebook has an id; refer to cells by 0-based index".to_owned();
    }
    let list = known
        .iter()
        .map(|id| format!("{id:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let more = total.saturating_sub(known.len());
    if more > 0 {
        format!("known ids: {list} (and {more} more); or refer to the cell by its 0-based index")
    } else {
        format!("known ids: {list}; or refer to the cell by its 0-based index")
    }
}

fn join_indexes(indexes: &[usize]) -> String {
    indexes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The three nbformat 4 cell types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellType {
    /// A code cell (has `outputs` and `execution_count`).
    Code,
    /// A markdown cell.
    Markdown,
    /// A raw cell.
    Raw,
}

impl CellType {
    /// The `cell_type` string used in the file: "code", "markdown" or "raw".
    pub fn as_str(self) -> &'static str {
        match self {
            CellType::Code => "code",
            CellType::Markdown => "markdown",
            CellType::Raw => "raw",
        }
    }

    /// Parses a `cell_type` string ("code", "markdown", "raw"); `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "code" => Some(CellType::Code),
            "markdown" => Some(CellType::Markdown),
            "raw" => Some(CellType::Raw),
            _ => None,
        }
    }
}

impl fmt::Display for CellType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names one cell: by 0-based position or by its `id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CellRef {
    /// 0-based position in the notebook.
    Index(usize),
    /// The cell's `id` (must match `^[a-zA-Z0-9-_]{1,64}$`).
    Id(String),
}

/// One change to a notebook, applied by [`edit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellEdit {
    /// Replaces the source of the cell at `cell` (0-based index, or a cell id string); a
    /// code cell's outputs are cleared and execution_count set to null (they are stale);
    /// cell_type may change it.
    Replace {
        /// The cell to replace.
        cell: CellRef,
        /// Its new source.
        source: String,
        /// A new cell type, or `None` to keep the current one.
        cell_type: Option<CellType>,
    },
    /// Inserts a new cell before index `at` (== len appends).
    Insert {
        /// Position of the new cell; equal to the cell count to append.
        at: usize,
        /// Type of the new cell.
        cell_type: CellType,
        /// Source of the new cell.
        source: String,
    },
    /// Deletes the cell.
    Delete {
        /// The cell to delete.
        cell: CellRef,
    },
}

/// How the input file was laid out, so the output can match it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Style {
    indent: String,
    crlf: bool,
    bom: bool,
}

/// A parsed, validated notebook.
struct Notebook {
    root: Map<String, Value>,
    style: Style,
}

impl Notebook {
    fn cells(&self) -> Result<&Vec<Value>, NotebookError> {
        self.root
            .get("cells")
            .and_then(Value::as_array)
            .ok_or_else(no_cells_array)
    }

    fn cells_mut(&mut self) -> Result<&mut Vec<Value>, NotebookError> {
        self.root
            .get_mut("cells")
            .and_then(Value::as_array_mut)
            .ok_or_else(no_cells_array)
    }

    fn minor(&self) -> Option<u64> {
        self.root.get("nbformat_minor").and_then(Value::as_u64)
    }

    fn metadata_str(&self, path: &[&str]) -> Option<&str> {
        let mut v = self.root.get("metadata")?;
        for key in path {
            v = v.get(key)?;
        }
        v.as_str()
    }
}

fn no_cells_array() -> NotebookError {
    NotebookError::NotNotebook {
        reason: "`cells` is missing or not an array".to_owned(),
    }
}

fn parse(text: &str) -> Result<Notebook, NotebookError> {
    if text.len() > MAX_NOTEBOOK_BYTES {
        return Err(NotebookError::TooLarge {
            bytes: text.len(),
            limit: MAX_NOTEBOOK_BYTES,
        });
    }
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value: Value = serde_json::from_str(body).map_err(|e| NotebookError::NotJson {
        line: e.line(),
        column: e.column(),
    })?;
    let Value::Object(root) = value else {
        return Err(NotebookError::NotNotebook {
            reason: "the top level is not a JSON object".to_owned(),
        });
    };
    match root.get("nbformat") {
        Some(v) if v.as_u64() == Some(4) => {}
        Some(v) => {
            return Err(NotebookError::UnsupportedFormat {
                found: one_line(&v.to_string()),
            })
        }
        None => {
            return Err(NotebookError::UnsupportedFormat {
                found: "missing".to_owned(),
            })
        }
    }
    let cells = root
        .get("cells")
        .and_then(Value::as_array)
        .ok_or_else(no_cells_array)?;
    for (index, cell) in cells.iter().enumerate() {
        let cell = cell.as_object().ok_or_else(|| NotebookError::InvalidCell {
            index,
            reason: "it is not a JSON object".to_owned(),
        })?;
        cell_type_of(cell, index)?;
        source_of(cell, index)?;
    }
    let style = Style {
        indent: detect_indent(body),
        crlf: body.find('\n').is_some_and(|i| body[..i].ends_with('\r')),
        bom,
    };
    Ok(Notebook { root, style })
}

fn cell_type_of(cell: &Map<String, Value>, index: usize) -> Result<CellType, NotebookError> {
    match cell.get("cell_type") {
        Some(Value::String(s)) => {
            CellType::from_name(s).ok_or_else(|| NotebookError::InvalidCell {
                index,
                reason: format!(
                    "cell_type {:?} is not code, markdown or raw",
                    truncate_chars(s, 64)
                ),
            })
        }
        Some(_) => Err(NotebookError::InvalidCell {
            index,
            reason: "cell_type is not a string (expected code, markdown or raw)".to_owned(),
        }),
        None => Err(NotebookError::InvalidCell {
            index,
            reason: "it has no cell_type (expected code, markdown or raw)".to_owned(),
        }),
    }
}

/// The cell's source, joined if it is a list of strings.
fn source_of(cell: &Map<String, Value>, index: usize) -> Result<String, NotebookError> {
    let bad = |reason: &str| NotebookError::InvalidCell {
        index,
        reason: reason.to_owned(),
    };
    match cell.get("source") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for part in parts {
                out.push_str(
                    part.as_str()
                        .ok_or_else(|| bad("its source list holds a non-string"))?,
                );
            }
            Ok(out)
        }
        Some(_) => Err(bad("its source is neither a string nor a list of strings")),
        None => Err(bad("it has no source")),
    }
}

fn cell_id(cell: &Value) -> Option<&str> {
    cell.get("id").and_then(Value::as_str)
}

/// Whether `id` matches `^[a-zA-Z0-9-_]{1,64}$`.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The indentation unit of the input: the leading whitespace of its first indented line.
fn detect_indent(text: &str) -> String {
    let mut lines = 0usize;
    for line in text.lines() {
        lines += 1;
        let ws_len = line
            .bytes()
            .take_while(|b| *b == b' ' || *b == b'\t')
            .count();
        if ws_len == 0 {
            continue;
        }
        let ws = &line[..ws_len];
        return if ws.bytes().all(|b| b == b'\t') {
            "\t".to_owned()
        } else if ws.bytes().all(|b| b == b' ') && ws_len <= 8 {
            ws.to_owned()
        } else {
            DEFAULT_INDENT.to_owned()
        };
    }
    // Several lines yet none indented: written with indent 0 (newlines only).
    if lines > 2 {
        String::new()
    } else {
        DEFAULT_INDENT.to_owned()
    }
}

/// Serializes like Jupyter (`json.dumps(indent=1, ensure_ascii=False)` + "\n"), with the
/// input's indent unit, line ending and BOM.
///
/// The result is byte-for-byte what `PrettyFormatter::with_indent(indent)` writes: the
/// 2-space pretty output is re-indented line by line. This is exact because JSON strings
/// never hold a raw newline, so every line's leading spaces are structural (2 per level).
/// It avoids a direct dependency on `serde` for the `Serialize` trait.
fn serialize(root: &Map<String, Value>, style: &Style) -> Result<String, NotebookError> {
    let pretty =
        serde_json::to_string_pretty(root).map_err(|e| NotebookError::Serialize(e.to_string()))?;
    let newline = if style.crlf { "\r\n" } else { "\n" };
    let mut out = String::with_capacity(pretty.len() + pretty.len() / 8);
    if style.bom {
        out.push('\u{feff}');
    }
    for line in pretty.split('\n') {
        let spaces = line.bytes().take_while(|b| *b == b' ').count();
        for _ in 0..spaces / 2 {
            out.push_str(&style.indent);
        }
        out.push_str(&line[spaces..]);
        out.push_str(newline);
    }
    if out.len() > MAX_NOTEBOOK_BYTES {
        return Err(NotebookError::TooLarge {
            bytes: out.len(),
            limit: MAX_NOTEBOOK_BYTES,
        });
    }
    Ok(out)
}

/// Jupyter's multi-line string convention: lines keeping their "\n", the last without
/// one unless the text ends with a newline; "" is `[]`.
fn source_lines(source: &str) -> Value {
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|line| Value::String(line.to_owned()))
            .collect(),
    )
}

fn keys_sorted(map: &Map<String, Value>) -> bool {
    map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b)
}

fn sort_keys(map: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    *map = entries.into_iter().collect();
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A new 8-hex-char id from sha256(source, position, counter), unique among `taken`.
fn new_cell_id(source: &str, position: usize, taken: &HashSet<String>) -> String {
    let mut counter: u64 = 0;
    loop {
        let mut hasher = Sha256::new();
        hasher.update(source.as_bytes());
        hasher.update([0u8]);
        hasher.update((position as u64).to_le_bytes());
        hasher.update(counter.to_le_bytes());
        let digest = hasher.finalize();
        let id: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        if !taken.contains(&id) {
            return id;
        }
        counter = counter.wrapping_add(1);
    }
}

fn resolve(cells: &[Value], cell: &CellRef) -> Result<usize, NotebookError> {
    match cell {
        CellRef::Index(index) => {
            if *index < cells.len() {
                Ok(*index)
            } else {
                Err(NotebookError::IndexOutOfRange {
                    index: *index,
                    count: cells.len(),
                })
            }
        }
        CellRef::Id(id) => {
            if !valid_id(id) {
                return Err(NotebookError::BadId {
                    id: truncate_chars(id, 80),
                });
            }
            let matches: Vec<usize> = cells
                .iter()
                .enumerate()
                .filter(|(_, c)| cell_id(c) == Some(id.as_str()))
                .map(|(i, _)| i)
                .collect();
            match matches.as_slice() {
                [index] => Ok(*index),
                [] => {
                    let all: Vec<&str> = cells.iter().filter_map(cell_id).collect();
                    Err(NotebookError::UnknownId {
                        id: id.clone(),
                        known: all
                            .iter()
                            .take(MAX_LISTED_IDS)
                            .map(|s| truncate_chars(s, 64))
                            .collect(),
                        total: all.len(),
                    })
                }
                _ => Err(NotebookError::DuplicateId {
                    id: id.clone(),
                    indexes: matches,
                }),
            }
        }
    }
}

/// Applies one edit; returns the new notebook text and a one-line summary ("replaced
/// cell 3 (code), cleared 2 outputs").
///
/// The text must be an nbformat 4 notebook of at most [`MAX_NOTEBOOK_BYTES`]. Everything
/// the edit does not touch is kept, including key order and unknown keys; the output uses
/// the input's indentation (Jupyter's 1 space when none can be detected).
pub fn edit(text: &str, edit: &CellEdit) -> Result<(String, String), NotebookError> {
    let mut nb = parse(text)?;
    let summary = match edit {
        CellEdit::Replace {
            cell,
            source,
            cell_type,
        } => replace_cell(nb.cells_mut()?, cell, source, *cell_type)?,
        CellEdit::Insert {
            at,
            cell_type,
            source,
        } => {
            let needs_id = nb.minor().is_some_and(|m| m >= 5)
                || nb.cells()?.iter().any(|c| cell_id(c).is_some());
            insert_cell(nb.cells_mut()?, *at, *cell_type, source, needs_id)?
        }
        CellEdit::Delete { cell } => {
            let cells = nb.cells_mut()?;
            if cells.is_empty() {
                return Err(NotebookError::EmptyNotebook);
            }
            let index = resolve(cells, cell)?;
            let removed = cells.remove(index);
            let kind = removed
                .as_object()
                .and_then(|c| cell_type_of(c, index).ok())
                .map_or("?", CellType::as_str);
            format!(
                "deleted cell {index} ({kind}); notebook now has {}",
                cells_word(cells.len())
            )
        }
    };
    let out = serialize(&nb.root, &nb.style)?;
    Ok((out, summary))
}

fn replace_cell(
    cells: &mut [Value],
    cell: &CellRef,
    source: &str,
    cell_type: Option<CellType>,
) -> Result<String, NotebookError> {
    let index = resolve(cells, cell)?;
    let Some(Value::Object(map)) = cells.get_mut(index) else {
        return Err(NotebookError::InvalidCell {
            index,
            reason: "it is not a JSON object".to_owned(),
        });
    };
    let old_type = cell_type_of(map, index)?;
    let new_type = cell_type.unwrap_or(old_type);
    let was_sorted = keys_sorted(map);

    map.insert("source".to_owned(), source_lines(source));
    if new_type != old_type {
        map.insert("cell_type".to_owned(), Value::from(new_type.as_str()));
    }
    let cleared = if old_type == CellType::Code {
        map.get("outputs")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    } else {
        0
    };
    let mut removed_attachments = 0;
    if new_type == CellType::Code {
        map.insert("outputs".to_owned(), Value::Array(Vec::new()));
        map.insert("execution_count".to_owned(), Value::Null);
        // nbformat allows attachments only on markdown and raw cells.
        if let Some(att) = map.shift_remove("attachments") {
            removed_attachments = att.as_object().map_or(1, Map::len);
        }
    } else {
        map.shift_remove("outputs");
        map.shift_remove("execution_count");
    }
    if was_sorted {
        sort_keys(map);
    }

    let mut summary = if new_type == old_type {
        format!("replaced cell {index} ({new_type})")
    } else {
        format!("replaced cell {index} ({old_type} → {new_type})")
    };
    if cleared > 0 {
        let _ = write!(summary, ", cleared {}", plural(cleared, "output"));
    }
    if removed_attachments > 0 {
        let _ = write!(
            summary,
            ", removed {} (code cells cannot have attachments)",
            plural(removed_attachments, "attachment")
        );
    }
    Ok(summary)
}

fn insert_cell(
    cells: &mut Vec<Value>,
    at: usize,
    cell_type: CellType,
    source: &str,
    needs_id: bool,
) -> Result<String, NotebookError> {
    if at > cells.len() {
        return Err(NotebookError::InsertOutOfRange {
            at,
            count: cells.len(),
        });
    }
    let id = needs_id.then(|| {
        let taken: HashSet<String> = cells
            .iter()
            .filter_map(cell_id)
            .map(str::to_owned)
            .collect();
        new_cell_id(source, at, &taken)
    });
    // Keys in sorted order, as Jupyter writes them.
    let mut map = Map::new();
    map.insert("cell_type".to_owned(), Value::from(cell_type.as_str()));
    if cell_type == CellType::Code {
        map.insert("execution_count".to_owned(), Value::Null);
    }
    if let Some(id) = &id {
        map.insert("id".to_owned(), Value::from(id.as_str()));
    }
    map.insert("metadata".to_owned(), Value::Object(Map::new()));
    if cell_type == CellType::Code {
        map.insert("outputs".to_owned(), Value::Array(Vec::new()));
    }
    map.insert("source".to_owned(), source_lines(source));
    cells.insert(at, Value::Object(map));
    let id_note = id.map(|id| format!(", id: {id}")).unwrap_or_default();
    Ok(format!(
        "inserted cell {at} ({cell_type}{id_note}); notebook now has {}",
        cells_word(cells.len())
    ))
}

// ---------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------

/// Renders the notebook for a model to read: a header line (nbformat version,
/// kernel/language from metadata if present, cell count), then each cell as
/// `## cell N [code|markdown|raw] (id: …)` + its source, + for code cells
/// `execution_count` and outputs summarised: stream text (name: stdout/stderr),
/// execute_result/display_data `text/plain` (other mime types as
/// `[image/png: 1234 bytes of base64]`), error as `ename: evalue` + traceback lines with
/// ANSI escape codes removed. Each output's text capped (e.g. 4000 chars, with a
/// "… N more chars" note); whole render capped at `max_chars`.
/// `cells`: an optional inclusive 0-based range to render only some cells.
///
/// Sources and output texts are shown in backtick fences longer than any backtick run
/// inside them, so cell content cannot pose as notebook structure. Output texts also lose
/// ANSI escapes, other control characters, and text overwritten by a carriage return.
/// The range's end is clamped to the last cell. When `max_chars` cuts the render, it ends
/// with a note naming the cells not shown; the result never exceeds `max_chars` chars.
pub fn render(
    text: &str,
    cells: Option<(usize, usize)>,
    max_chars: usize,
) -> Result<String, NotebookError> {
    let nb = parse(text)?;
    let all = nb.cells()?;
    let count = all.len();
    let range = match cells {
        None if count == 0 => None,
        None => Some((0, count - 1)),
        Some((start, end)) => {
            if start > end || start >= count {
                return Err(NotebookError::InvalidRange { start, end, count });
            }
            Some((start, end.min(count - 1)))
        }
    };

    let lang = nb
        .metadata_str(&["language_info", "name"])
        .or_else(|| nb.metadata_str(&["kernelspec", "language"]));
    let mut header = String::from("# notebook: nbformat 4");
    if let Some(minor) = nb.minor() {
        let _ = write!(header, ".{minor}");
    }
    if let Some(kernel) = nb.metadata_str(&["kernelspec", "name"]) {
        let _ = write!(header, ", kernel: {}", one_line(kernel));
        if let Some(display) = nb.metadata_str(&["kernelspec", "display_name"]) {
            if display != kernel {
                let _ = write!(header, " ({})", one_line(display));
            }
        }
    }
    if let Some(lang) = lang {
        let _ = write!(header, ", language: {}", one_line(lang));
    }
    let _ = write!(header, ", {}", cells_word(count));
    if let (Some((start, end)), Some(_)) = (range, cells) {
        let _ = write!(header, ", showing cells {start}-{end}");
    }
    header.push('\n');

    let Some((start, end)) = range else {
        return Ok(truncate_chars(&header, max_chars));
    };
    let fence_lang: String = lang
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '-' | '_' | '.'))
        .take(32)
        .collect();

    let header_len = header.chars().count();
    let mut pieces: Vec<(String, usize)> = Vec::new();
    let mut used = header_len;
    let mut overflow = false;
    for (index, cell) in all.iter().enumerate().take(end + 1).skip(start) {
        let Some(cell) = cell.as_object() else {
            continue;
        };
        let piece = render_cell(index, cell, &fence_lang)?;
        let len = piece.chars().count();
        used += len;
        pieces.push((piece, len));
        if used > max_chars {
            overflow = true;
            break;
        }
    }

    let mut out = header;
    if !overflow {
        for (piece, _) in &pieces {
            out.push_str(piece);
        }
        return Ok(out);
    }

    // Keep as many whole cells as fit together with the note.
    let mut kept_len: usize = header_len + pieces.iter().map(|(_, l)| *l).sum::<usize>();
    for keep in (1..pieces.len()).rev() {
        kept_len -= pieces[keep].1;
        let note = cut_note(max_chars, start + keep, end, false);
        if kept_len + note.chars().count() <= max_chars {
            for (piece, _) in &pieces[..keep] {
                out.push_str(piece);
            }
            out.push_str(&note);
            return Ok(out);
        }
    }
    // Not even the first cell fits: show part of it.
    let note = cut_note(max_chars, start, end, true);
    let avail = max_chars
        .saturating_sub(header_len)
        .saturating_sub(note.chars().count() + 1);
    if let Some((first, _)) = pieces.first() {
        out.push_str(&truncate_chars(first, avail));
    }
    out.push('\n');
    out.push_str(&note);
    Ok(truncate_chars(&out, max_chars))
}

fn cut_note(max_chars: usize, from: usize, to: usize, partial: bool) -> String {
    let what = if partial {
        format!("cell {from} shown only in part, cells {from}-{to} not shown in full")
    } else {
        format!("cells {from}-{to} not shown")
    };
    format!("[… render cut at {max_chars} chars: {what}; request cells {from}-{to} to see more]\n")
}

fn render_cell(
    index: usize,
    cell: &Map<String, Value>,
    fence_lang: &str,
) -> Result<String, NotebookError> {
    let cell_type = cell_type_of(cell, index)?;
    let source = source_of(cell, index)?;
    let mut out = format!("## cell {index} [{cell_type}]");
    if let Some(id) = cell.get("id").and_then(Value::as_str) {
        let _ = write!(out, " (id: {})", one_line(&truncate_chars(id, 80)));
    }
    out.push('\n');
    let lang = if cell_type == CellType::Code {
        fence_lang
    } else {
        ""
    };
    fenced(&mut out, lang, &source);
    if let Some(att) = cell.get("attachments").and_then(Value::as_object) {
        if !att.is_empty() {
            let names: Vec<String> = att.keys().map(|k| one_line(k)).collect();
            let _ = writeln!(out, "### attachments: {}", names.join(", "));
        }
    }
    if cell_type == CellType::Code {
        let execution_count = match cell.get("execution_count") {
            Some(Value::Number(n)) => n.to_string(),
            _ => "none".to_owned(),
        };
        let outputs = cell
            .get("outputs")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let _ = writeln!(
            out,
            "### execution_count: {execution_count}, {}",
            plural(outputs.len(), "output")
        );
        for (i, output) in outputs.iter().enumerate() {
            render_output(&mut out, i, output);
        }
    }
    Ok(out)
}

fn render_output(out: &mut String, i: usize, output: &Value) {
    let Some(output) = output.as_object() else {
        let _ = writeln!(out, "### output {i}: (not an object)");
        return;
    };
    let kind = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("(no output_type)");
    match kind {
        "stream" => {
            let name = output
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("(unnamed)");
            let _ = writeln!(out, "### output {i}: stream {}", one_line(name));
            capped_block(out, &clean_output(&join_text(output.get("text"))));
        }
        "execute_result" | "display_data" | "update_display_data" => {
            let _ = writeln!(out, "### output {i}: {kind}");
            render_data(out, output.get("data"));
        }
        "error" => {
            let _ = writeln!(out, "### output {i}: error");
            let field = |k: &str| output.get(k).and_then(Value::as_str).unwrap_or("");
            let mut text = format!("{}: {}", field("ename"), field("evalue"));
            if let Some(tb) = output.get("traceback").and_then(Value::as_array) {
                for line in tb.iter().filter_map(Value::as_str) {
                    text.push('\n');
                    text.push_str(line);
                }
            }
            capped_block(out, &clean_output(&text));
        }
        other => {
            let _ = writeln!(
                out,
                "### output {i}: {} (not shown)",
                one_line(&truncate_chars(other, 64))
            );
        }
    }
}

fn render_data(out: &mut String, data: Option<&Value>) {
    let Some(data) = data.and_then(Value::as_object).filter(|d| !d.is_empty()) else {
        out.push_str("(no data)\n");
        return;
    };
    if let Some(plain) = data.get("text/plain") {
        capped_block(out, &clean_output(&join_text(Some(plain))));
    }
    for (mime, value) in data {
        if mime == "text/plain" {
            continue;
        }
        let mime_shown = one_line(&truncate_chars(mime, 100));
        if !(value.is_string() || value.is_array()) {
            let len = serde_json::to_string(value).map_or(0, |s| s.chars().count());
            let _ = writeln!(out, "[{mime_shown}: {len} chars of JSON]");
        } else if is_textual_mime(mime) {
            let len = join_text(Some(value)).chars().count();
            let _ = writeln!(out, "[{mime_shown}: {len} chars]");
        } else {
            let len = join_text(Some(value))
                .bytes()
                .filter(|b| !b.is_ascii_whitespace())
                .count();
            let _ = writeln!(out, "[{mime_shown}: {len} bytes of base64]");
        }
    }
}

fn is_textual_mime(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.ends_with("+xml")
        || mime.ends_with("json")
        || mime.ends_with("javascript")
        || mime == "application/x-latex"
}

/// A string, or the concatenation of a list's strings; anything else is "".
fn join_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// Writes `text` fenced, cut to [`OUTPUT_CHAR_CAP`] chars with a note.
fn capped_block(out: &mut String, text: &str) {
    match text.char_indices().nth(OUTPUT_CHAR_CAP) {
        Some((cut, _)) => {
            fenced(out, "", &text[..cut]);
            let more = text[cut..].chars().count();
            let _ = writeln!(out, "… {more} more chars");
        }
        None => fenced(out, "", text),
    }
}

/// Writes `body` between backtick fences longer than any backtick run inside it.
fn fenced(out: &mut String, lang: &str, body: &str) {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    out.push_str(&fence);
    out.push_str(lang);
    out.push('\n');
    out.push_str(body);
    if !body.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
}

/// Removes ANSI escape sequences and other control characters (keeping "\n" and "\t"),
/// and drops text overwritten by a bare carriage return (progress bars).
fn clean_output(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates (0x20-0x3f), then a final byte.
                Some('[') => {
                    while let Some(&n) = chars.peek() {
                        if ('\u{40}'..='\u{7e}').contains(&n) {
                            chars.next();
                            break;
                        } else if ('\u{20}'..='\u{3f}').contains(&n) {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
                // OSC (e.g. hyperlinks): up to BEL or ESC \.
                Some(']') => {
                    while let Some(n) = chars.next() {
                        if n == '\u{7}' {
                            break;
                        }
                        if n == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                // Two-character escapes; a lone ESC at the end is dropped.
                _ => {}
            },
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    continue;
                }
                let line_start = out.rfind('\n').map_or(0, |i| i + 1);
                out.truncate(line_start);
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Escapes control characters so a value from the file stays on one line.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The first `max` chars of `s`.
fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => s[..cut].to_owned(),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A notebook as Jupyter writes it: 1-space indent, sorted keys, trailing newline.
    const SAMPLE: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some *text*."
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "calc",
   "metadata": {
    "tags": [
     "keep"
    ]
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "hello\n",
      "world\n"
     ]
    },
    {
     "name": "stderr",
     "output_type": "stream",
     "text": "\u001b[33mwarning\u001b[0m: careful\n"
    },
    {
     "data": {
      "text/plain": [
       "42"
      ]
     },
     "execution_count": 3,
     "metadata": {},
     "output_type": "execute_result"
    },
    {
     "data": {
      "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==\n",
      "text/plain": [
       "<Figure size 640x480 with 1 Axes>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    },
    {
     "ename": "ZeroDivisionError",
     "evalue": "division by zero",
     "output_type": "error",
     "traceback": [
      "\u001b[0;31m----------------\u001b[0m",
      "\u001b[0;31mZeroDivisionError\u001b[0m        Traceback (most recent call last)",
      "Cell \u001b[0;32mIn[3], line 4\u001b[0m\n\u001b[1;32m----> 4\u001b[0m \u001b[38;5;241m1\u001b[39m\u001b[38;5;241m/\u001b[39m\u001b[38;5;241m0\u001b[39m\n",
      "\u001b[0;31mZeroDivisionError\u001b[0m: division by zero"
     ]
    }
   ],
   "source": [
    "print(\"hello\\nworld\")\n",
    "x = 42\n",
    "x\n",
    "1/0"
   ]
  },
  {
   "cell_type": "raw",
   "id": "raw1",
   "metadata": {},
   "source": "raw text"
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3 (ipykernel)",
   "language": "python",
   "name": "python3"
  },
  "language_info": {
   "name": "python",
   "version": "3.11.4"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    const HEADER: &str = "# notebook: nbformat 4.5, kernel: python3 (Python 3 (ipykernel)), language: python, 3 cells";

    const CELL0: &str = "## cell 0 [markdown] (id: intro)\n```\n# Title\nSome *text*.\n```\n";

    const CELL1: &str = concat!(
        "## cell 1 [code] (id: calc)\n",
        "```python\n",
        "print(\"hello\\nworld\")\n",
        "x = 42\n",
        "x\n",
        "1/0\n",
        "```\n",
        "### execution_count: 3, 5 outputs\n",
        "### output 0: stream stdout\n",
        "```\nhello\nworld\n```\n",
        "### output 1: stream stderr\n",
        "```\nwarning: careful\n```\n",
        "### output 2: execute_result\n",
        "```\n42\n```\n",
        "### output 3: display_data\n",
        "```\n<Figure size 640x480 with 1 Axes>\n```\n",
        "[image/png: 96 bytes of base64]\n",
        "### output 4: error\n",
        "```\n",
        "ZeroDivisionError: division by zero\n",
        "----------------\n",
        "ZeroDivisionError        Traceback (most recent call last)\n",
        "Cell In[3], line 4\n",
        "----> 4 1/0\n",
        "\n",
        "ZeroDivisionError: division by zero\n",
        "```\n",
    );

    const CELL2: &str = "## cell 2 [raw] (id: raw1)\n```\nraw text\n```\n";

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn cells(v: &Value) -> &Vec<Value> {
        v["cells"].as_array().unwrap()
    }

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    fn replace(cell: CellRef, source: &str, cell_type: Option<CellType>) -> CellEdit {
        CellEdit::Replace {
            cell,
            source: source.to_owned(),
            cell_type,
        }
    }

    fn insert(at: usize, cell_type: CellType, source: &str) -> CellEdit {
        CellEdit::Insert {
            at,
            cell_type,
            source: source.to_owned(),
        }
    }

    fn id(s: &str) -> CellRef {
        CellRef::Id(s.to_owned())
    }

    /// SAMPLE laid out with another indent unit (and line ending).
    fn reindent(unit: &str, newline: &str) -> String {
        let mut out = String::new();
        for line in SAMPLE.lines() {
            let n = line.bytes().take_while(|b| *b == b' ').count();
            out.push_str(&unit.repeat(n));
            out.push_str(&line[n..]);
            out.push_str(newline);
        }
        out
    }

    // ---- render ----

    #[test]
    fn render_whole_notebook() {
        let expected = format!("{HEADER}\n{CELL0}{CELL1}{CELL2}");
        assert_eq!(render(SAMPLE, None, 100_000).unwrap(), expected);
    }

    #[test]
    fn render_range() {
        assert_eq!(
            render(SAMPLE, Some((2, 2)), 100_000).unwrap(),
            format!("{HEADER}, showing cells 2-2\n{CELL2}")
        );
        assert_eq!(
            render(SAMPLE, Some((0, 1)), 100_000).unwrap(),
            format!("{HEADER}, showing cells 0-1\n{CELL0}{CELL1}")
        );
        // The end is clamped to the last cell.
        assert_eq!(
            render(SAMPLE, Some((2, 99)), 100_000).unwrap(),
            format!("{HEADER}, showing cells 2-2\n{CELL2}")
        );
    }

    #[test]
    fn render_range_errors() {
        let err = render(SAMPLE, Some((3, 5)), 1000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cell range 3-5 is invalid: the notebook has 3 cells, so valid indexes are 0-2; \
             give start <= end with start a valid index (end is clamped to the last cell)"
        );
        assert_eq!(
            render(SAMPLE, Some((2, 1)), 1000),
            Err(NotebookError::InvalidRange {
                start: 2,
                end: 1,
                count: 3
            })
        );
    }

    #[test]
    fn render_header_without_metadata() {
        let text = r#"{"cells": [], "metadata": {}, "nbformat": 4}"#;
        assert_eq!(
            render(text, None, 1000).unwrap(),
            "# notebook: nbformat 4, 0 cells\n"
        );
    }

    #[test]
    fn render_caps_each_output() {
        let long = "a".repeat(OUTPUT_CHAR_CAP + 1234);
        let nb = json!({
            "cells": [{
                "cell_type": "code", "execution_count": null, "metadata": {},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": long}],
                "source": "print('a' * 5234)"
            }],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 4
        })
        .to_string();
        let expected = format!(
            "# notebook: nbformat 4.4, 1 cell\n## cell 0 [code]\n```\nprint('a' * 5234)\n```\n\
             ### execution_count: none, 1 output\n### output 0: stream stdout\n```\n{}\n```\n\
             … 1234 more chars\n",
            "a".repeat(OUTPUT_CHAR_CAP)
        );
        assert_eq!(render(&nb, None, 100_000).unwrap(), expected);
    }

    #[test]
    fn render_caps_whole_render_at_cell_boundary() {
        let out = render(SAMPLE, None, 300).unwrap();
        assert_eq!(
            out,
            format!(
                "{HEADER}\n{CELL0}[… render cut at 300 chars: cells 1-2 not shown; \
                 request cells 1-2 to see more]\n"
            )
        );
        assert!(out.chars().count() <= 300);
    }

    #[test]
    fn render_caps_whole_render_inside_first_cell() {
        let out = render(SAMPLE, Some((1, 2)), 260).unwrap();
        let header = format!("{HEADER}, showing cells 1-2\n");
        let note = "[… render cut at 260 chars: cell 1 shown only in part, cells 1-2 not shown in \
                    full; request cells 1-2 to see more]\n";
        let avail = 260 - header.chars().count() - note.chars().count() - 1;
        assert_eq!(avail, 33);
        assert_eq!(
            out,
            format!("{header}## cell 1 [code] (id: calc)\n```py\n{note}")
        );
        assert_eq!(out.chars().count(), 260);
        // Too small for anything: a hard cut.
        assert_eq!(render(SAMPLE, None, 10).unwrap(), "# notebook");
        assert_eq!(render(SAMPLE, None, 0).unwrap(), "");
    }

    #[test]
    fn render_fences_content_that_looks_like_structure() {
        let nb = json!({
            "cells": [{"cell_type": "markdown", "metadata": {},
                       "source": "```\n## cell 9 [code]\n```"}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 4
        })
        .to_string();
        assert_eq!(
            render(&nb, None, 1000).unwrap(),
            "# notebook: nbformat 4.4, 1 cell\n## cell 0 [markdown]\n````\n```\n## cell 9 [code]\n```\n````\n"
        );
    }

    #[test]
    fn render_other_mime_types_and_odd_outputs() {
        let nb = json!({
            "cells": [{
                "cell_type": "code", "execution_count": 1, "metadata": {},
                "outputs": [
                    {"output_type": "display_data", "metadata": {}, "data": {
                        "text/html": ["<b>", "hi</b>"],
                        "application/vnd.jupyter.widget-view+json": {"model_id": "ab"},
                        "image/jpeg": "/9j/4AAQ\nSkZJRg==\n"
                    }},
                    {"output_type": "display_data", "data": {}},
                    {"output_type": "mystery"},
                    7
                ],
                "source": ["display(x)"]
            }],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 4
        })
        .to_string();
        assert_eq!(
            render(&nb, None, 10_000).unwrap(),
            concat!(
                "# notebook: nbformat 4.4, 1 cell\n",
                "## cell 0 [code]\n```\ndisplay(x)\n```\n",
                "### execution_count: 1, 4 outputs\n",
                "### output 0: display_data\n",
                "[text/html: 9 chars]\n",
                "[application/vnd.jupyter.widget-view+json: 17 chars of JSON]\n",
                "[image/jpeg: 16 bytes of base64]\n",
                "### output 1: display_data\n(no data)\n",
                "### output 2: mystery (not shown)\n",
                "### output 3: (not an object)\n",
            )
        );
    }

    #[test]
    fn clean_output_strips_escapes_and_overwritten_text() {
        let raw = "\u{1b}[1;31mred\u{1b}[0m ok\r\n10%\r50%\r100%\nlink \u{1b}]8;;http://x\u{7}t\u{1b}]8;;\u{1b}\\ end\u{7}\u{1b}";
        assert_eq!(clean_output(raw), "red ok\n100%\nlink t end");
    }

    // ---- edit: replace ----

    #[test]
    fn replace_clears_outputs_and_keeps_the_rest() {
        let before = parsed(SAMPLE);
        for cell in [CellRef::Index(1), id("calc")] {
            let (out, summary) = edit(SAMPLE, &replace(cell, "y = 1\nprint(y)\n", None)).unwrap();
            assert_eq!(summary, "replaced cell 1 (code), cleared 5 outputs");
            let after = parsed(&out);
            assert_eq!(cells(&after)[0], cells(&before)[0]);
            assert_eq!(cells(&after)[2], cells(&before)[2]);
            assert_eq!(after["metadata"], before["metadata"]);
            assert_eq!(keys(&after), keys(&before));
            let cell = &cells(&after)[1];
            assert_eq!(
                cell,
                &json!({
                    "cell_type": "code", "execution_count": null, "id": "calc",
                    "metadata": {"tags": ["keep"]}, "outputs": [],
                    "source": ["y = 1\n", "print(y)\n"]
                })
            );
            assert_eq!(
                keys(cell),
                [
                    "cell_type",
                    "execution_count",
                    "id",
                    "metadata",
                    "outputs",
                    "source"
                ]
            );
        }
    }

    #[test]
    fn replace_with_own_source_changes_only_outputs_and_execution_count() {
        let (out, summary) = edit(
            SAMPLE,
            &replace(id("calc"), "print(\"hello\\nworld\")\nx = 42\nx\n1/0", None),
        )
        .unwrap();
        assert_eq!(summary, "replaced cell 1 (code), cleared 5 outputs");
        let mut expected = parsed(SAMPLE);
        expected["cells"][1]["outputs"] = json!([]);
        expected["cells"][1]["execution_count"] = Value::Null;
        assert_eq!(parsed(&out), expected);
        assert_eq!(keys(&parsed(&out)["cells"][1]), keys(&expected["cells"][1]));
        // Only the lines of the outputs and the execution count differ.
        let changed: Vec<&str> = out.lines().filter(|l| !SAMPLE.contains(l)).collect();
        assert_eq!(
            changed,
            ["   \"execution_count\": null,", "   \"outputs\": [],"]
        );
    }

    #[test]
    fn replace_markdown_with_own_source_is_byte_identical() {
        let (out, summary) = edit(
            SAMPLE,
            &replace(CellRef::Index(0), "# Title\nSome *text*.", None),
        )
        .unwrap();
        assert_eq!(summary, "replaced cell 0 (markdown)");
        assert_eq!(out, SAMPLE);
    }

    #[test]
    fn replace_writes_jupyter_line_lists_and_keeps_utf8() {
        let (out, _) = edit(SAMPLE, &replace(id("raw1"), "é ✓ 🎉\nsecond", None)).unwrap();
        assert!(out.contains("    \"é ✓ 🎉\\n\",\n    \"second\"\n"));
        assert_eq!(source_lines("a\nb\n"), json!(["a\n", "b\n"]));
        assert_eq!(source_lines("a\n\nb"), json!(["a\n", "\n", "b"]));
        assert_eq!(source_lines(""), json!([]));
    }

    #[test]
    fn change_code_to_markdown_and_back() {
        let (out, summary) = edit(
            SAMPLE,
            &replace(CellRef::Index(1), "now *prose*", Some(CellType::Markdown)),
        )
        .unwrap();
        assert_eq!(
            summary,
            "replaced cell 1 (code → markdown), cleared 5 outputs"
        );
        let v = parsed(&out);
        let cell = &cells(&v)[1];
        assert_eq!(
            cell,
            &json!({"cell_type": "markdown", "id": "calc",
                    "metadata": {"tags": ["keep"]}, "source": ["now *prose*"]})
        );
        assert_eq!(keys(cell), ["cell_type", "id", "metadata", "source"]);

        let (out, summary) = edit(
            &out,
            &replace(CellRef::Index(1), "x = 1", Some(CellType::Code)),
        )
        .unwrap();
        assert_eq!(summary, "replaced cell 1 (markdown → code)");
        let v = parsed(&out);
        let cell = &cells(&v)[1];
        assert_eq!(
            keys(cell),
            [
                "cell_type",
                "execution_count",
                "id",
                "metadata",
                "outputs",
                "source"
            ]
        );
        assert_eq!(cell["outputs"], json!([]));
        assert_eq!(cell["execution_count"], Value::Null);
    }

    #[test]
    fn markdown_to_code_drops_attachments_and_keeps_unsorted_key_order() {
        let nb = json!({
            "cells": [{"source": "![x](attachment:x.png)", "cell_type": "markdown",
                       "metadata": {"k": 1},
                       "attachments": {"x.png": {"image/png": "AAAA"}}}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 4
        })
        .to_string();
        let (out, summary) =
            edit(&nb, &replace(CellRef::Index(0), "1", Some(CellType::Code))).unwrap();
        assert_eq!(
            summary,
            "replaced cell 0 (markdown → code), removed 1 attachment (code cells cannot have attachments)"
        );
        let v = parsed(&out);
        let cell = &cells(&v)[0];
        assert_eq!(
            keys(cell),
            [
                "source",
                "cell_type",
                "metadata",
                "outputs",
                "execution_count"
            ]
        );
        assert_eq!(cell["metadata"], json!({"k": 1}));
    }

    // ---- edit: insert ----

    #[test]
    fn insert_at_start_middle_and_end_with_ids() {
        let (out, summary) = edit(SAMPLE, &insert(0, CellType::Code, "import os\n")).unwrap();
        let new_id = cells(&parsed(&out))[0]["id"].as_str().unwrap().to_owned();
        assert_eq!(new_id, new_cell_id("import os\n", 0, &HashSet::new()));
        assert_eq!(new_id, "25af9f2e");
        assert_eq!(
            summary,
            format!("inserted cell 0 (code, id: {new_id}); notebook now has 4 cells")
        );
        let v = parsed(&out);
        let cell = &cells(&v)[0];
        assert_eq!(
            cell,
            &json!({"cell_type": "code", "execution_count": null, "id": new_id,
                    "metadata": {}, "outputs": [], "source": ["import os\n"]})
        );
        assert_eq!(
            keys(cell),
            [
                "cell_type",
                "execution_count",
                "id",
                "metadata",
                "outputs",
                "source"
            ]
        );
        assert_eq!(&cells(&v)[1..], &cells(&parsed(SAMPLE))[..]);

        let (out, summary) = edit(&out, &insert(2, CellType::Markdown, "## Part 2")).unwrap();
        assert!(summary.starts_with("inserted cell 2 (markdown, id: "));
        let v = parsed(&out);
        assert_eq!(
            keys(&cells(&v)[2]),
            ["cell_type", "id", "metadata", "source"]
        );
        assert_eq!(cells(&v)[2]["source"], json!(["## Part 2"]));

        let (out, summary) = edit(&out, &insert(5, CellType::Raw, "tail")).unwrap();
        assert!(summary.ends_with("); notebook now has 6 cells"));
        let v = parsed(&out);
        assert_eq!(cells(&v)[5]["cell_type"], "raw");
        let ids: Vec<&str> = cells(&v)
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 6);
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 6);
        assert!(ids.iter().all(|i| valid_id(i)));
        for i in [0, 2, 5] {
            assert_eq!(ids[i].len(), 8);
            assert!(ids[i].bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn insert_without_ids_in_old_minor_is_exact() {
        let text = "{\n \"cells\": [],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 4\n}\n";
        let (out, summary) = edit(text, &insert(0, CellType::Code, "a = 1\nb = 2")).unwrap();
        assert_eq!(summary, "inserted cell 0 (code); notebook now has 1 cell");
        assert_eq!(
            out,
            concat!(
                "{\n",
                " \"cells\": [\n",
                "  {\n",
                "   \"cell_type\": \"code\",\n",
                "   \"execution_count\": null,\n",
                "   \"metadata\": {},\n",
                "   \"outputs\": [],\n",
                "   \"source\": [\n",
                "    \"a = 1\\n\",\n",
                "    \"b = 2\"\n",
                "   ]\n",
                "  }\n",
                " ],\n",
                " \"metadata\": {},\n",
                " \"nbformat\": 4,\n",
                " \"nbformat_minor\": 4\n",
                "}\n",
            )
        );
    }

    #[test]
    fn insert_gets_id_when_other_cells_have_ids() {
        let text = r#"{"cells": [{"cell_type": "raw", "id": "r", "metadata": {}, "source": ""}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 4}"#;
        let (out, _) = edit(text, &insert(1, CellType::Raw, "")).unwrap();
        let v = parsed(&out);
        assert!(valid_id(cells(&v)[1]["id"].as_str().unwrap()));
        assert_eq!(cells(&v)[1]["source"], json!([]));
    }

    #[test]
    fn new_ids_avoid_collisions() {
        let first = new_cell_id("x", 3, &HashSet::new());
        let taken: HashSet<String> = [first.clone()].into_iter().collect();
        let second = new_cell_id("x", 3, &taken);
        assert_ne!(first, second);
        assert!(valid_id(&second) && second.len() == 8);
    }

    #[test]
    fn insert_out_of_range() {
        let err = edit(SAMPLE, &insert(4, CellType::Code, "")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "insert position 4 is out of range: the notebook has 3 cells; use 0..=3 (3 appends at the end)"
        );
    }

    // ---- edit: delete ----

    #[test]
    fn delete_by_id_and_index() {
        let (out, summary) = edit(SAMPLE, &CellEdit::Delete { cell: id("raw1") }).unwrap();
        assert_eq!(summary, "deleted cell 2 (raw); notebook now has 2 cells");
        let (before, after) = (parsed(SAMPLE), parsed(&out));
        assert_eq!(&cells(&after)[..], &cells(&before)[..2]);
        assert_eq!(after["metadata"], before["metadata"]);

        let (out, summary) = edit(
            &out,
            &CellEdit::Delete {
                cell: CellRef::Index(0),
            },
        )
        .unwrap();
        assert_eq!(
            summary,
            "deleted cell 0 (markdown); notebook now has 1 cell"
        );
        assert_eq!(cells(&parsed(&out))[0]["id"], "calc");
    }

    #[test]
    fn id_errors() {
        let err = edit(SAMPLE, &CellEdit::Delete { cell: id("nope") }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no cell has id \"nope\"; known ids: \"intro\", \"calc\", \"raw1\"; or refer to the cell by its 0-based index"
        );
        let err = edit(SAMPLE, &replace(id("bad id!"), "", None)).unwrap_err();
        assert_eq!(
            err,
            NotebookError::BadId {
                id: "bad id!".to_owned()
            }
        );
        assert!(matches!(
            edit(SAMPLE, &replace(id(&"a".repeat(65)), "", None)),
            Err(NotebookError::BadId { .. })
        ));

        let many: Vec<Value> = (0..12)
            .map(|i| json!({"cell_type": "raw", "id": format!("c{i}"), "metadata": {}, "source": ""}))
            .collect();
        let text =
            json!({"cells": many, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).to_string();
        let err = edit(&text, &CellEdit::Delete { cell: id("zz") }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no cell has id \"zz\"; known ids: \"c0\", \"c1\", \"c2\", \"c3\", \"c4\", \"c5\", \"c6\", \
             \"c7\", \"c8\", \"c9\" (and 2 more); or refer to the cell by its 0-based index"
        );

        let dup = r#"{"cells": [{"cell_type": "raw", "id": "d", "metadata": {}, "source": ""},
                                {"cell_type": "raw", "id": "d", "metadata": {}, "source": ""}],
                      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#;
        assert_eq!(
            edit(dup, &CellEdit::Delete { cell: id("d") })
                .unwrap_err()
                .to_string(),
            "cell id \"d\" is shared by cells 0, 1; refer to the cell by its 0-based index instead"
        );
    }

    #[test]
    fn delete_from_empty_notebook() {
        let text = r#"{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#;
        let err = edit(
            text,
            &CellEdit::Delete {
                cell: CellRef::Index(0),
            },
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "cannot delete: the notebook has no cells");
        let err = edit(text, &replace(CellRef::Index(0), "", None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cell index 0 is out of range: the notebook has no cells"
        );
    }

    // ---- input errors ----

    #[test]
    fn not_json() {
        let err = render("{\n \"cells\": [,]\n}", None, 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a notebook: not JSON (line 2, column 12)"
        );
        assert_eq!(
            edit(
                "",
                &CellEdit::Delete {
                    cell: CellRef::Index(0)
                }
            ),
            Err(NotebookError::NotJson { line: 1, column: 0 })
        );
    }

    #[test]
    fn unsupported_or_malformed_notebooks() {
        let v3 = r#"{"metadata": {}, "nbformat": 3, "nbformat_minor": 0, "worksheets": []}"#;
        assert_eq!(
            render(v3, None, 100).unwrap_err().to_string(),
            "unsupported notebook format (nbformat 3): only nbformat 4 notebooks are supported; \
             convert it with `jupyter nbconvert --to notebook --nbformat 4`"
        );
        assert_eq!(
            render(r#"{"cells": []}"#, None, 100),
            Err(NotebookError::UnsupportedFormat {
                found: "missing".to_owned()
            })
        );
        assert_eq!(
            render("[1]", None, 100).unwrap_err().to_string(),
            "not a notebook: the top level is not a JSON object"
        );
        assert_eq!(
            render(r#"{"nbformat": 4}"#, None, 100)
                .unwrap_err()
                .to_string(),
            "not a notebook: `cells` is missing or not an array"
        );
        let bad_type =
            r#"{"cells": [{"cell_type": "heading", "metadata": {}, "source": ""}], "nbformat": 4}"#;
        assert_eq!(
            edit(bad_type, &insert(0, CellType::Code, ""))
                .unwrap_err()
                .to_string(),
            "cell 0 is invalid: cell_type \"heading\" is not code, markdown or raw; \
             fix the notebook file before reading or editing it"
        );
        let bad_source = r#"{"cells": [{"cell_type": "code", "source": ["a", 1]}], "nbformat": 4}"#;
        assert_eq!(
            render(bad_source, None, 100),
            Err(NotebookError::InvalidCell {
                index: 0,
                reason: "its source list holds a non-string".to_owned()
            })
        );
    }

    #[test]
    fn out_of_range_index() {
        let err = edit(SAMPLE, &replace(CellRef::Index(7), "", None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cell index 7 is out of range: the notebook has 3 cells, so valid indexes are 0-2"
        );
        assert_eq!(
            edit(
                SAMPLE,
                &CellEdit::Delete {
                    cell: CellRef::Index(3)
                }
            ),
            Err(NotebookError::IndexOutOfRange { index: 3, count: 3 })
        );
    }

    #[test]
    fn refuses_huge_text() {
        let text = " ".repeat(MAX_NOTEBOOK_BYTES + 1);
        assert_eq!(
            render(&text, None, 100),
            Err(NotebookError::TooLarge {
                bytes: MAX_NOTEBOOK_BYTES + 1,
                limit: MAX_NOTEBOOK_BYTES
            })
        );
    }

    // ---- formatting ----

    #[test]
    fn indentation_line_endings_and_bom_are_kept() {
        let noop = replace(CellRef::Index(0), "# Title\nSome *text*.", None);
        for (unit, newline) in [
            (" ", "\n"),
            ("  ", "\n"),
            ("    ", "\n"),
            ("\t", "\n"),
            (" ", "\r\n"),
        ] {
            let text = reindent(unit, newline);
            let (out, _) = edit(&text, &noop).unwrap();
            assert_eq!(out, text, "indent {unit:?}, newline {newline:?}");
        }
        let with_bom = format!("\u{feff}{SAMPLE}");
        assert_eq!(edit(&with_bom, &noop).unwrap().0, with_bom);
        // Two-space input stays two-space after a real edit.
        let two = reindent("  ", "\n");
        let (out, _) = edit(
            &two,
            &CellEdit::Delete {
                cell: CellRef::Index(2),
            },
        )
        .unwrap();
        assert!(out.starts_with("{\n  \"cells\": [\n    {\n      \"cell_type\": \"markdown\",\n"));
        // Compact input gets Jupyter's layout.
        let compact = parsed(SAMPLE).to_string();
        assert_eq!(edit(&compact, &noop).unwrap().0, SAMPLE);
    }

    #[test]
    fn detects_indent_units() {
        assert_eq!(detect_indent("{\n \"a\": 1\n}"), " ");
        assert_eq!(detect_indent("{\n  \"a\": 1\n}"), "  ");
        assert_eq!(detect_indent("{\n\t\"a\": 1\n}"), "\t");
        assert_eq!(detect_indent("{\"a\": 1}"), " ");
        assert_eq!(detect_indent("{\n\"a\": [\n1\n]\n}"), "");
        assert_eq!(detect_indent("{\n \t\"a\": 1\n}"), " ");
    }

    // ---- robustness ----

    #[test]
    fn never_panics_on_broken_or_odd_input() {
        let mut inputs: Vec<String> = SAMPLE
            .char_indices()
            .map(|(i, _)| SAMPLE[..i].to_owned())
            .collect();
        inputs.extend(
            [
                "",
                "null",
                "{}",
                "\u{feff}",
                "\u{feff}{\"nbformat\": 4, \"cells\": []}",
                r#"{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x",
                    "outputs": [1, {"output_type": "stream"}, {"output_type": 5},
                                {"output_type": "error", "traceback": [1, "\u001b["]},
                                {"output_type": "display_data", "data": {"image/png": 5}}],
                    "execution_count": "x", "id": 7, "attachments": []}],
                    "metadata": {"kernelspec": 1, "language_info": {"name": "a\nb"}}}"#,
                r#"{"nbformat": 4.0, "cells": []}"#,
                r#"{"nbformat": 4, "cells": {}}"#,
                r#"{"nbformat": 4, "cells": [null]}"#,
            ]
            .map(str::to_owned),
        );
        inputs.push("[".repeat(100_000));
        inputs.push(format!("{}1{}", "[".repeat(127), "]".repeat(127)));
        let edits = [
            CellEdit::Delete {
                cell: CellRef::Index(0),
            },
            replace(CellRef::Index(0), "x", Some(CellType::Code)),
            insert(0, CellType::Markdown, ""),
            replace(id("calc"), "", Some(CellType::Raw)),
        ];
        for text in &inputs {
            for max in [0, 1, 50, 100_000] {
                let _ = render(text, None, max);
                let _ = render(text, Some((1, 1)), max);
            }
            for e in &edits {
                let _ = edit(text, e);
            }
        }
    }
}
