//! The items file of `loom job`: JSON Lines, one object per item, `{"id": "...", "prompt": "..."}`.
//!
//! An item's index is its position among the non-blank lines, from 0 (`JOB_COMPLETION_INDEX`, a matrix cell's
//! `index`). `id` is optional (default `item-<index>`); it names the item's result directory, so it is a safe id and
//! unique. `prompt` is the text of the item's turn. Any other key is an error, so a typo never silently drops what
//! the author meant. Items are engine input in files: they hold no secrets (secrets come from the environment or
//! `LOOM_SECRETS_DIR`).

use std::path::Path;

use sha2::{Digest, Sha256};

/// Most items one file may hold (a Kubernetes Indexed Job's `completions` limit).
pub const MAX_ITEMS: usize = 100_000;
/// Largest items file read.
pub const MAX_BYTES: u64 = 64 << 20;

/// One item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its position, from 0.
    pub index: usize,
    /// Its line in the file, from 1.
    pub line: usize,
    /// Its id (given, or `item-<index>`).
    pub id: String,
    /// The prompt of its turn.
    pub prompt: String,
}

/// A parsed items file.
#[derive(Debug, Clone)]
pub struct Items {
    /// The items, by index.
    pub items: Vec<Item>,
    /// The file's text, as read.
    pub text: String,
    /// sha256 of the file, hex: which items a result belongs to.
    pub sha256: String,
}

/// Reads and checks `path`. The error names the file, the line and the fix.
pub fn read(path: &Path) -> Result<Items, String> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| format!("{shown}: cannot read the items file: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: the items file is not a regular file"));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "{shown}: the items file is {} bytes; the limit is {MAX_BYTES}: split it into several jobs",
            meta.len()
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| format!("{shown}: cannot read the items file: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("{shown}: the items file is not UTF-8: {e}"))?;
    let items = parse(&text).map_err(|e| format!("{shown}: {e}"))?;
    let sha256 = hex(&Sha256::digest(text.as_bytes()));
    Ok(Items {
        items,
        text,
        sha256,
    })
}

/// The lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const FORMAT: &str =
    "one JSON object per line, {\"id\": \"fix-1\", \"prompt\": \"...\"} (id optional)";

/// Parses the text of an items file. The error names the line.
pub fn parse(text: &str) -> Result<Vec<Item>, String> {
    let mut items: Vec<Item> = Vec::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for (n, line) in text.lines().enumerate() {
        let lineno = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |m: String| format!("line {lineno}: {m}");
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| at(format!("not JSON ({e}); each line is {FORMAT}")))?;
        let Some(obj) = v.as_object() else {
            return Err(at(format!("not a JSON object; each line is {FORMAT}")));
        };
        if let Some(k) = obj.keys().find(|k| *k != "id" && *k != "prompt") {
            return Err(at(format!(
                "unknown key {k:?}; an item has only \"id\" and \"prompt\" (secrets never go in items: they come from \
                 the environment or LOOM_SECRETS_DIR)"
            )));
        }
        let index = items.len();
        if index >= MAX_ITEMS {
            return Err(at(format!(
                "more than {MAX_ITEMS} items; split them into several jobs"
            )));
        }
        let prompt = match obj.get("prompt") {
            Some(serde_json::Value::String(p)) if !p.trim().is_empty() => p.clone(),
            Some(serde_json::Value::String(_)) => return Err(at("\"prompt\" is empty".into())),
            Some(_) => return Err(at("\"prompt\" must be a string".into())),
            None => return Err(at(format!("no \"prompt\"; each line is {FORMAT}"))),
        };
        let id = match obj.get("id") {
            None => format!("item-{index}"),
            Some(serde_json::Value::String(id)) if loom_kernel::is_safe_id(id) => id.clone(),
            Some(serde_json::Value::String(id)) => {
                return Err(at(format!(
                    "id {id:?} cannot name a result directory: use 1 to {} characters from A-Z a-z 0-9 . _ -, \
                     starting with a letter or a digit",
                    loom_kernel::MAX_ID_LEN
                )))
            }
            Some(_) => return Err(at("\"id\" must be a string".into())),
        };
        if let Some(first) = seen.insert(id.clone(), lineno) {
            return Err(at(format!(
                "id {id:?} is already used on line {first}; ids are unique"
            )));
        }
        items.push(Item {
            index,
            line: lineno,
            id,
            prompt,
        });
    }
    if items.is_empty() {
        return Err(format!("no items; the file holds {FORMAT}"));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_get_indexes_and_default_ids() -> Result<(), String> {
        let items = parse("{\"prompt\": \"a\"}\n\n{\"id\": \"b-1\", \"prompt\": \"b\"}\n")?;
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].index, items[0].id.as_str()), (0, "item-0"));
        assert_eq!((items[1].index, items[1].id.as_str()), (1, "b-1"));
        Ok(())
    }

    #[test]
    fn bad_items_name_the_line_and_the_fix() {
        for (text, needle) in [
            ("{\"prompt\": \"a\"}\nnot json\n", "line 2: not JSON"),
            ("[1]\n", "line 1: not a JSON object"),
            (
                "{\"prompt\": \"a\", \"token\": \"x\"}\n",
                "unknown key \"token\"",
            ),
            ("{\"id\": \"a\"}\n", "no \"prompt\""),
            ("{\"prompt\": \"  \"}\n", "\"prompt\" is empty"),
            (
                "{\"id\": \"../up\", \"prompt\": \"a\"}\n",
                "cannot name a result directory",
            ),
            (
                "{\"id\": \"x\", \"prompt\": \"a\"}\n{\"id\": \"x\", \"prompt\": \"b\"}\n",
                "already used on line 1",
            ),
            ("\n\n", "no items"),
        ] {
            match parse(text) {
                Ok(_) => panic!("{text:?} was accepted"),
                Err(e) => assert!(e.contains(needle), "{text:?}: {e}"),
            }
        }
    }
}
