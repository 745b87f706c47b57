//! The grant parser: arbitrary text -> `toml::from_str` -> `Grant::from_toml` for the document and for every value in
//! it. Whatever parses must round-trip: `to_toml()` re-parses to an equal grant, and so does `to_json()` through
//! `from_json` (both as a value and through JSON text). Never a panic.
//!
//! Earlier findings, now fixed in the kernel (see `fuzz/README.md`): non-finite floats (`nan`, `inf`) are refused
//! by the parser, so a parsed grant never holds one (asserted below); and the JSON *text* round trip relies on
//! serde_json's `float_roundtrip` feature, which the workspace enables.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loom_kernel::{Grant, Value};

/// True when a value holds a non-finite float (which the parser must refuse).
fn has_non_finite(v: &Value) -> bool {
    match v {
        Value::Float(f) => !f.0.is_finite(),
        Value::List(items) => items.iter().any(has_non_finite),
        Value::Object(map) => map.values().any(has_non_finite),
        _ => false,
    }
}

fn grant_has_non_finite(g: &Grant) -> bool {
    g.rows()
        .is_some_and(|rows| rows.iter().any(|r| r.0.values().any(has_non_finite)))
}

fn reparse_toml(g: &Grant) -> Grant {
    let rendered = g.to_toml();
    let doc = format!("g = {rendered}");
    let table: toml::Table = match toml::from_str(&doc) {
        Ok(t) => t,
        Err(e) => panic!("to_toml rendered {rendered:?}, which is not TOML: {e}"),
    };
    match Grant::from_toml(&table["g"]) {
        Ok(back) => back,
        Err(e) => panic!("to_toml rendered {rendered:?}, which does not parse back: {e}"),
    }
}

fn check(value: &toml::Value) {
    let Ok(g) = Grant::from_toml(value) else {
        return;
    };
    assert!(!grant_has_non_finite(&g), "the parser let a non-finite float into {g:?}");
    let back = reparse_toml(&g);
    assert_eq!(
        back,
        g,
        "TOML round trip changed the grant (rendered {})",
        g.to_toml()
    );
    let json = g.to_json();
    match Grant::from_json(&json) {
        Ok(back) => assert_eq!(back, g, "JSON round trip changed the grant ({json})"),
        Err(e) => panic!("to_json gave {json}, which does not parse back: {e}"),
    }
    let text = json.to_string();
    let reread: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("to_json text {text:?} is not JSON: {e}"),
    };
    match Grant::from_json(&reread) {
        Ok(back) => assert_eq!(back, g, "JSON text round trip changed the grant ({text})"),
        Err(e) => panic!("to_json text {text} does not parse back: {e}"),
    }
    // rendering is canonical: rendering the re-parsed grant gives the same text
    assert_eq!(back.to_toml(), g.to_toml());
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // a whole document (its table is a one-row grant) and each of its values
    if let Ok(table) = toml::from_str::<toml::Table>(text) {
        for v in table.values() {
            check(v);
        }
        check(&toml::Value::Table(table));
    }
    // the text as the right-hand side of `g = ...`, where a grant is usually written
    if let Ok(table) = toml::from_str::<toml::Table>(&format!("g = {text}")) {
        if let Some(v) = table.get("g") {
            check(v);
        }
    }
});
