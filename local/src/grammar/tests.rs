use serde_json::json;

use super::matcher::Grammar;
use super::*;

fn grammar(tools: &[(&str, Value)], final_only: bool) -> Grammar {
    let shapes: Vec<ToolShape<'_>> = tools
        .iter()
        .map(|(n, s)| ToolShape { name: n, schema: s })
        .collect();
    let text = response_grammar(&shapes, final_only).unwrap();
    Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[track_caller]
fn accepts(g: &Grammar, yes: &[&str], no: &[&str]) {
    for t in yes {
        assert!(g.accepts(t), "should accept {t}");
    }
    for t in no {
        assert!(!g.accepts(t), "should refuse {t}");
    }
}

fn bash() -> Value {
    json!({"type": "object", "properties": {
        "command": {"type": "string"},
        "args": {"type": "array", "items": {"type": "string"}},
        "cwd": {"type": "string"},
        "timeout_ms": {"type": "integer", "minimum": 1}},
        "required": ["command"]})
}

#[test]
fn calls_follow_the_schema_and_answers_are_plain_text() {
    let g = grammar(&[("bash", bash())], false);
    accepts(
        &g,
        &[
            r#"{"tool": "bash", "input": {"command": "ls -la"}}"#,
            r#"{"tool": "bash", "input": {"command": "ls", "args": ["-l", "a b"]}}"#,
            r#"{"tool": "bash", "input": {"command": "ls", "cwd": "/w", "timeout_ms": 500}}"#,
            r#"{"tool": "bash", "input": {"command": "ls", "timeout_ms": 5}}"#,
            r#"{"tool": "bash", "input": {"command": "say \"hi\"\n"}}"#,
            "The answer is 42.\nDone.",
            "ok",
        ],
        &[
            r#"{"tool": "bash", "input": {}}"#,
            r#"{"tool": "bash", "input": {"cwd": "/w"}}"#,
            r#"{"tool": "bash", "input": {"command": 5}}"#,
            r#"{"tool": "bash", "input": {"command": "ls", "timeout_ms": 0}}"#,
            r#"{"tool": "bash", "input": {"command": "ls", "extra": 1}}"#,
            r#"{"tool": "read", "input": {"path": "a"}}"#,
            r#"{"tool": "bash", "input": {"command": "ls"}"#,
            " leading space",
            "",
        ],
    );
}

#[test]
fn the_last_request_allows_only_an_answer() {
    let g = grammar(&[("bash", bash())], true);
    accepts(
        &g,
        &["All done."],
        &[r#"{"tool": "bash", "input": {"command": "ls"}}"#],
    );
    let none = grammar(&[], false);
    accepts(&none, &["hello"], &["{\"tool\": \"x\"}"]);
}

#[test]
fn optional_keys_in_any_subset_keep_their_order() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"enum": ["x", 2]}}});
    let g = grammar(&[("t", s)], false);
    accepts(
        &g,
        &[
            r#"{"tool": "t", "input": {}}"#,
            r#"{"tool": "t", "input": {"b": null}}"#,
            r#"{"tool": "t", "input": {"a": true, "c": 2}}"#,
            r#"{"tool": "t", "input": {"a": false, "b": null, "c": "x"}}"#,
        ],
        &[
            r#"{"tool": "t", "input": {"c": "x", "a": true}}"#,
            r#"{"tool": "t", "input": {"c": "y"}}"#,
            r#"{"tool": "t", "input": {, "a": true}}"#,
        ],
    );
}

#[test]
fn nested_arrays_min_items_any_of_and_open_objects() {
    let s = json!({"type": "object", "properties": {
        "edits": {"type": "array", "minItems": 1, "items": {"type": "object",
            "properties": {"old_text": {"type": "string"}, "new_text": {"type": "string"}},
            "required": ["old_text", "new_text"]}},
        "n": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "meta": {"type": "object"},
        "x": {"type": ["number", "null"]}},
        "required": ["edits"]});
    let g = grammar(&[("edit", s)], false);
    accepts(
        &g,
        &[
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a", "new_text": "b"}]}}"#,
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a", "new_text": "b"}, {"old_text": "", "new_text": ""}], "n": -3}}"#,
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a", "new_text": "b"}], "n": "q", "meta": {"k": [1, {"z": null}]}, "x": 1.5e3}}"#,
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a", "new_text": "b"}], "x": null}}"#,
        ],
        &[
            r#"{"tool": "edit", "input": {"edits": []}}"#,
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a"}]}}"#,
            r#"{"tool": "edit", "input": {"edits": [{"old_text": "a", "new_text": "b"}], "n": true}}"#,
        ],
    );
}

#[test]
fn names_and_literals_are_escaped() {
    let s = json!({"type": "object", "properties": {"q\"uote": {"const": "a\\b\n"}}, "required": ["q\"uote"]});
    let g = grammar(&[("we\"ird", s)], false);
    accepts(
        &g,
        &[r#"{"tool": "we\"ird", "input": {"q\"uote": "a\\b\n"}}"#],
        &[r#"{"tool": "weird", "input": {"q\"uote": "a\\b\n"}}"#],
    );
}

#[test]
fn structure_it_cannot_express_is_refused_by_name() {
    for (schema, word) in [
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}),
            "$ref",
        ),
        (json!({"type": "object", "allOf": [{}]}), "allOf"),
        (
            json!({"type": "object", "properties": {"a": {"type": "date"}}}),
            "unknown type",
        ),
        (
            json!({"type": "object", "properties": {"a": false}}),
            "`false`",
        ),
        (json!({"type": "string"}), "not {\"type\": \"object\"}"),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "requires \"b\"",
        ),
    ] {
        let e = response_grammar(
            &[ToolShape {
                name: "t",
                schema: &schema,
            }],
            false,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains(word), "{e} should name {word}");
        assert!(e.contains("tool \"t\""), "{e}");
        assert!(e.contains("remove it from [tools]"), "{e}");
    }
    // deep nesting is bounded
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "object", "properties": {"a": deep}});
    }
    let e = response_grammar(
        &[ToolShape {
            name: "t",
            schema: &deep,
        }],
        false,
    );
    assert!(e.err().is_some_and(|e| e.to_string().contains("deeper")));
}

#[test]
fn responses_parse_and_calls_replay_in_the_grammar_form() {
    assert_eq!(
        parse_response("hi there"),
        Some(Response::Answer("hi there".into()))
    );
    assert_eq!(parse_response(r#"{"tool": "bash", "input": {"comm"#), None);
    let input = json!({"command": "ls", "args": ["-l"]});
    let text = call_text("bash", &input);
    assert_eq!(
        text,
        r#"{"tool": "bash", "input": {"command": "ls", "args": ["-l"]}}"#
    );
    assert!(grammar(&[("bash", bash())], false).accepts(&text));
    assert_eq!(
        parse_response(&text),
        Some(Response::Call {
            tool: "bash".into(),
            input
        })
    );
}
