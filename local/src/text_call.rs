//! Tool calls a model writes as text: small models often answer in prose with the call they meant written out as
//! JSON — bare, or in a fenced block (```` ```json … ``` ````) — in loom's form (`{"tool": …, "input": …}`) or in the
//! shapes their chat templates taught them (`{"name": …, "arguments": …}`, `{"name": …, "parameters": …}`).
//! Such a call is recognised, so it runs (or, naming a tool that does not exist or with input that does not fit,
//! comes back as a tool error the model can correct) instead of ending the turn as an answer.
//!
//! Tags in the Hermes style (`<tool_call>{…}</tool_call>`) count too, for a model that writes them where no lazy
//! grammar watches for them.
//!
//! A call that ends the text counts whatever tool it names (prose may come before it, nothing but whitespace after
//! it): one that names no granted tool comes back as an error the model can correct. A fenced block with prose
//! after it (the model explaining what the call will do) counts only when it names a granted tool: the first such
//! block is the call, and the prose after it, a guess at the result, is dropped. Pure: the harness decides when to
//! ask (never on the last request of a turn, when only an answer can follow).

use serde_json::Value;

/// A call found at the end of a response text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    /// Where the call's text starts (a fence's opening backticks, or the opening brace): the text before it is
    /// prose.
    pub start: usize,
    /// The tool it names.
    pub tool: String,
    /// Its input.
    pub input: Value,
}

/// Where a line that may open a written call starts in `text`, at or after `from`: a line (first, or after a
/// newline) whose first non-blank characters are ```` ``` ````, `{` or `<tool_call>`. For holding text back while it
/// streams: `Some` also for a last line that could still become one (its start is blank, or a prefix of one of
/// those).
pub fn possible_call_start(text: &str, from: usize) -> Option<usize> {
    let from = from.min(text.len());
    let opens = |lead: &str| {
        lead.starts_with("```") || lead.starts_with('{') || lead.starts_with("<tool_call>")
    };
    // from the start of the line holding `from`
    let mut start = text[..from].rfind('\n').map_or(0, |i| i + 1);
    loop {
        let rest = &text[start..];
        match rest.find('\n') {
            Some(end) => {
                if opens(rest[..end].trim_start()) {
                    return Some(start);
                }
                start += end + 1;
            }
            None => {
                let lead = rest.trim_start();
                let may_open = "```".starts_with(lead) || "<tool_call>".starts_with(lead);
                return (opens(lead) || may_open).then_some(start);
            }
        }
    }
}

/// The call `text` makes, if it makes one (module doc); `granted` says whether a tool name is one of the request's.
pub fn call_in_text(text: &str, granted: &dyn Fn(&str) -> bool) -> Option<TextCall> {
    call_at_end(text).or_else(|| fenced_call_before_prose(text, granted))
}

/// The first fenced block, its fence starting a line, that is a call of a granted tool.
fn fenced_call_before_prose(text: &str, granted: &dyn Fn(&str) -> bool) -> Option<TextCall> {
    let mut from = 0;
    while let Some(i) = text[from..].find("```") {
        let open = from + i;
        let line_start = text[..open].rfind('\n').map_or(0, |n| n + 1);
        let close = text[open + 3..].find("```").map(|c| open + 3 + c);
        let close = close?;
        if text[line_start..open].trim().is_empty() {
            if let Some((tool, input)) = fenced_call(&text[open + 3..close]) {
                if granted(&tool) {
                    return Some(TextCall {
                        start: line_start,
                        tool,
                        input,
                    });
                }
            }
        }
        from = close + 3;
    }
    None
}

/// The call inside a fence (what lies between its backticks): a language line that JSON calls may carry, then the
/// call.
fn fenced_call(inner: &str) -> Option<(String, Value)> {
    let (lang, body) = inner.split_once('\n')?;
    if !matches!(lang.trim(), "" | "json" | "JSON" | "tool_call" | "tool") {
        return None;
    }
    call_shape(body.trim())
}

/// The call that ends `text`, if it ends in one.
fn call_at_end(text: &str) -> Option<TextCall> {
    let trimmed = text.trim_end();
    // Hermes-style tags that end the text
    if let Some(body_end) = trimmed.strip_suffix("</tool_call>").map(str::len) {
        let open = trimmed[..body_end].rfind("<tool_call>")?;
        let (tool, input) = call_shape(trimmed[open + "<tool_call>".len()..body_end].trim())?;
        return Some(TextCall {
            start: open,
            tool,
            input,
        });
    }
    // a fenced block that ends the text
    if let Some(body_end) = trimmed.strip_suffix("```").map(str::len) {
        let open = trimmed[..body_end].rfind("```")?;
        // the opening fence starts its line
        if !trimmed[..open].is_empty()
            && !trimmed[..open]
                .trim_end_matches([' ', '\t'])
                .ends_with('\n')
        {
            return None;
        }
        let (tool, input) = fenced_call(&trimmed[open + 3..body_end])?;
        let start = trimmed[..open].rfind('\n').map_or(0, |i| i + 1);
        return Some(TextCall { start, tool, input });
    }
    // a bare object that ends the text, starting a line
    if !trimmed.ends_with('}') {
        return None;
    }
    // opening braces that start a line, in order (match_indices yields them so)
    let candidates: Vec<usize> = trimmed
        .match_indices('{')
        .map(|(i, _)| i)
        .filter(|i| {
            let before = trimmed[..*i].trim_end_matches([' ', '\t']);
            before.is_empty() || before.ends_with('\n')
        })
        .collect();
    for i in candidates {
        if let Some((tool, input)) = call_shape(&trimmed[i..]) {
            let start = trimmed[..i].rfind('\n').map_or(0, |n| n + 1);
            return Some(TextCall { start, tool, input });
        }
    }
    None
}

/// The tool and input of a JSON text shaped like a call: `{"tool", "input"}`, `{"name", "arguments"}` or
/// `{"name", "parameters"}` (arguments given as a JSON string are read too), and no other keys.
pub(crate) fn call_shape(json: &str) -> Option<(String, Value)> {
    let v: Value = serde_json::from_str(json).ok()?;
    let o = v.as_object()?;
    let (name_key, input_key) = if o.contains_key("tool") {
        ("tool", "input")
    } else if o.contains_key("arguments") {
        ("name", "arguments")
    } else {
        ("name", "parameters")
    };
    if o.len() != 2 {
        return None;
    }
    let tool = o.get(name_key)?.as_str()?.to_string();
    let input = match o.get(input_key)? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    input.is_object().then_some((tool, input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(text: &str) -> Option<(String, String, Value)> {
        call_in_text(text, &|t| t == "read_file")
            .map(|c| (text[..c.start].to_string(), c.tool, c.input))
    }

    #[test]
    fn fenced_and_bare_calls_in_every_known_shape_are_found() {
        let read = json!({"path": "notes.txt"});
        for text in [
            "```json\n{\"tool\": \"read_file\", \"input\": {\"path\": \"notes.txt\"}}\n```",
            "```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```\n",
            "{\"name\": \"read_file\", \"parameters\": {\"path\": \"notes.txt\"}}",
            "{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"notes.txt\\\"}\"}",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>\n",
        ] {
            assert_eq!(
                call(text),
                Some((String::new(), "read_file".into(), read.clone())),
                "{text}"
            );
        }
        // prose first is kept as prose
        assert_eq!(
            call("I will read it.\n```json\n{\"tool\": \"read_file\", \"input\": {\"path\": \"notes.txt\"}}\n```"),
            Some(("I will read it.\n".into(), "read_file".into(), read))
        );
    }

    #[test]
    fn a_fenced_call_of_a_granted_tool_followed_by_prose_is_the_call() {
        let read = json!({"path": "server.ini"});
        let text = "To find the port, read the file:\n\n```json\n{\"name\": \"read_file\", \"arguments\": \
                    {\"path\": \"server.ini\"}}\n```\n\nThis will show the port.";
        assert_eq!(
            call(text),
            Some((
                "To find the port, read the file:\n\n".into(),
                "read_file".into(),
                read
            ))
        );
        // a tool that is not granted, followed by prose: an example, not a call
        let other = text.replace("read_file", "open_file");
        assert_eq!(call(&other), None);
        // the first granted call wins; a block that is not a call is passed over
        let two = "```sh\nls\n```\n```json\n{\"tool\": \"read_file\", \"input\": {\"path\": \"a\"}}\n```\n\
                   then\n```json\n{\"tool\": \"read_file\", \"input\": {\"path\": \"b\"}}\n```\nok";
        assert_eq!(call(two).map(|c| c.2), Some(json!({"path": "a"})));
        // an unclosed fence is no call
        assert_eq!(
            call("```json\n{\"tool\": \"read_file\", \"input\": {}}\nand more"),
            None
        );
    }

    #[test]
    fn answers_that_only_mention_json_stay_answers() {
        for text in [
            "The first line is: hello",
            "Use {\"tool\": \"x\"} like this.",
            "```python\nprint({\"name\": \"a\", \"arguments\": {}})\n```",
            "```json\n{\"name\": \"a\", \"arguments\": {}, \"extra\": 1}\n```",
            "```json\n{\"tool\": \"write_it\", \"input\": {}}\n```\nand then more text",
            "{\"tool\": \"read_file\", \"input\": [1]}",
            "{\"tool\": \"read_file\", \"input\": {",
            "<tool_call>\n{\"name\": \"read_file\"}\n</tool_call>",
            "Close it with </tool_call>",
        ] {
            assert_eq!(call(text), None, "{text}");
        }
    }

    #[test]
    fn a_line_that_may_open_a_call_is_held_back() {
        assert_eq!(possible_call_start("Sure.\n``", 0), Some(6));
        assert_eq!(possible_call_start("Sure.\n```json\n{", 0), Some(6));
        assert_eq!(possible_call_start("{\"tool\"", 0), Some(0));
        assert_eq!(possible_call_start("Sure.\nThe answer", 0), None);
        assert_eq!(possible_call_start("Sure.\n", 0), Some(6));
        assert_eq!(possible_call_start("Sure.\n<tool_c", 0), Some(6));
        assert_eq!(possible_call_start("Sure.\n<b>bold</b>", 0), None);
        // from: lines wholly before it are not looked at again
        assert_eq!(possible_call_start("{\n}\nText", 4), None);
    }
}
