//! The tool-call format a model was trained on, recognised from the chat template its GGUF file carries: how the
//! tools are described to it, how its earlier calls and their results are written back into the conversation, how a
//! call opens (the trigger of the lazy grammar) and how it is spelled (the grammar from the trigger on).
//!
//! A model answers far better in its own format than in one it was never shown: Qwen 2.5 (and other ChatML models
//! in the Hermes style, SmolLM among them) writes `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>` and reads
//! results inside `<tool_response>` tags; Llama 3.x writes a bare `{"name": …, "parameters": …}` and reads results in
//! an `ipython` turn. A template loom does not recognise gets loom's own protocol ([`ToolFormat::Loom`]: "reply with
//! only `{"tool": …, "input": …}`"), with the grammar applying from the first token. Pure: no model here.

use serde_json::{json, Value};

use crate::grammar::{
    call_grammar, call_text as loom_call_text, response_grammar, spaced_json, CallSyntax,
    GrammarError, ToolShape, LOOM_CALL,
};
use crate::protocol::Trigger;
use crate::text_call::call_shape;

/// A family of chat templates loom knows the tool-call format of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Qwen 2.5 (ChatML with a `<tools>` section and `<tool_call>` tags).
    Qwen25,
    /// Another ChatML template (Hermes 2/3 and the like): the same tags.
    Hermes,
    /// SmolLM (ChatML without a tools section): the same tags.
    SmolLm,
    /// Llama 3.x (`<|start_header_id|>` headers, results in an `ipython` turn).
    Llama3,
    /// Anything else: loom's own protocol.
    Unrecognised,
}

impl Family {
    /// The family of a GGUF chat template (Jinja text).
    pub fn recognise(template: &str) -> Family {
        if template.contains("<|start_header_id|>") && template.contains("<|eot_id|>") {
            Family::Llama3
        } else if template.contains("<|im_start|>") {
            if template.contains("<tool_call>") && template.contains("Qwen") {
                Family::Qwen25
            } else if template.contains("SmolLM") {
                Family::SmolLm
            } else {
                Family::Hermes
            }
        } else {
            Family::Unrecognised
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Family::Qwen25 => "Qwen 2.5",
            Family::Hermes => "Hermes/ChatML",
            Family::SmolLm => "SmolLM",
            Family::Llama3 => "Llama 3.x",
            Family::Unrecognised => "unrecognised",
        }
    }

    /// The format its models call tools in.
    pub fn format(self) -> ToolFormat {
        match self {
            Family::Qwen25 | Family::Hermes | Family::SmolLm => ToolFormat::Tagged,
            Family::Llama3 => ToolFormat::Llama3,
            Family::Unrecognised => ToolFormat::Loom,
        }
    }
}

/// How calls are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>` anywhere in the response; results in
    /// `<tool_response>` tags in a user turn.
    Tagged,
    /// `{"name": …, "parameters": …}` as the whole response; results in an `ipython` turn.
    Llama3,
    /// loom's own: `{"tool": …, "input": …}` as the whole response, chosen by the grammar from the first token.
    Loom,
}

/// What a response may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Respond {
    /// A call or an answer, as the model chooses.
    Either,
    /// A call (`tool_choice = "required"`, on the first request of a turn).
    Call,
    /// An answer (the last request a turn allows).
    Answer,
}

/// A tool as the model is told about it.
#[derive(Debug, Clone, Copy)]
pub struct ToolDoc<'a> {
    /// The instance name.
    pub name: &'a str,
    /// What it does (its first line is used).
    pub description: &'a str,
    /// Its input schema.
    pub schema: &'a Value,
}

const TAGGED_CALL: CallSyntax = CallSyntax {
    open: "<tool_call>\n{\"name\": ",
    between: ", \"arguments\": ",
    close: "}\n</tool_call>",
};

const LLAMA3_CALL: CallSyntax = CallSyntax {
    open: "{\"name\": ",
    between: ", \"parameters\": ",
    close: "}",
};

/// loom's protocol, told to a model whose template loom does not know (the grammar makes it true whatever the model
/// makes of it).
const LOOM_PROTOCOL: &str =
    "You can use tools. To call one, reply with only a JSON object of the form \
{\"tool\": \"<tool name>\", \"input\": {<arguments>}} and nothing else, for example \
{\"tool\": \"bash\", \"input\": {\"command\": \"ls\"}}; the result comes back in the next message. \
When you have the answer, reply in plain text instead. The tools:";

impl ToolFormat {
    /// The text appended to the system prompt that describes `tools` and how to call them. The tagged and Llama
    /// texts follow the wording of the Qwen 2.5 and Llama 3.1 templates, since those are what the models were
    /// trained on.
    pub fn tools_section(self, tools: &[ToolDoc<'_>]) -> String {
        let signature = |t: &ToolDoc<'_>| {
            spaced_json(&json!({"type": "function", "function": {
                "name": t.name,
                "description": t.description.lines().next().unwrap_or_default(),
                "parameters": t.schema,
            }}))
        };
        match self {
            ToolFormat::Tagged => {
                let mut s = String::from(
                    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
                     You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
                );
                for t in tools {
                    s.push('\n');
                    s.push_str(&signature(t));
                }
                s.push_str(
                    "\n</tools>\n\nFor each function call, return a json object with function name and arguments \
                     within <tool_call></tool_call> XML tags:\n<tool_call>\n\
                     {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
                );
                s
            }
            ToolFormat::Llama3 => {
                let mut s = String::from(
                    "Given the following functions, please respond with a JSON for a function call with its proper \
                     arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function \
                     name, \"parameters\": dictionary of argument name and its value}. Do not use variables. When \
                     you have the answer, reply in plain text instead.",
                );
                for t in tools {
                    s.push_str("\n\n");
                    s.push_str(&signature(t));
                }
                s
            }
            ToolFormat::Loom => {
                let mut s = String::from(LOOM_PROTOCOL);
                for t in tools {
                    s.push_str(&format!(
                        "\n- {}: {}\n  input schema: {}",
                        t.name,
                        t.description.lines().next().unwrap_or_default(),
                        spaced_json(t.schema)
                    ));
                }
                s
            }
        }
    }

    /// An earlier call as the model would have written it.
    pub fn call_text(self, tool: &str, input: &Value) -> String {
        match self {
            ToolFormat::Tagged => format!(
                "<tool_call>\n{{\"name\": {}, \"arguments\": {}}}\n</tool_call>",
                spaced_json(&Value::String(tool.into())),
                spaced_json(input)
            ),
            ToolFormat::Llama3 => format!(
                "{{\"name\": {}, \"parameters\": {}}}",
                spaced_json(&Value::String(tool.into())),
                spaced_json(input)
            ),
            ToolFormat::Loom => loom_call_text(tool, input),
        }
    }

    /// A call's result as a chat message: (role, content).
    pub fn result_message(
        self,
        tool: &str,
        content: &str,
        is_error: bool,
    ) -> (&'static str, String) {
        let body = if is_error {
            format!("Error: {content}")
        } else {
            content.to_string()
        };
        match self {
            ToolFormat::Tagged => ("user", format!("<tool_response>\n{body}\n</tool_response>")),
            ToolFormat::Llama3 => ("ipython", body),
            ToolFormat::Loom => {
                let what = if is_error { "error" } else { "result" };
                ("user", format!("[{tool} {what}]\n{content}"))
            }
        }
    }

    /// The grammar of a response and, for a lazy one, its trigger. [`Respond::Either`]: a call spelled this
    /// format's way (from the trigger on, free text before it; loom's form: a call or an answer from the first
    /// token); [`Respond::Call`]: a call from the first token; [`Respond::Answer`] (or no tools): an answer whose
    /// first character is neither `{` nor white space.
    pub fn grammar(
        self,
        tools: &[ToolShape<'_>],
        respond: Respond,
    ) -> Result<(String, Option<Trigger>), GrammarError> {
        if respond == Respond::Answer || tools.is_empty() {
            return Ok((response_grammar(tools, true)?, None));
        }
        if respond == Respond::Call {
            return Ok((call_grammar(tools, self.syntax())?, None));
        }
        match self {
            ToolFormat::Tagged => Ok((
                call_grammar(tools, &TAGGED_CALL)?,
                Some(Trigger {
                    text: "<tool_call>".into(),
                    at_start: false,
                }),
            )),
            ToolFormat::Llama3 => Ok((
                call_grammar(tools, &LLAMA3_CALL)?,
                Some(Trigger {
                    text: "{".into(),
                    at_start: true,
                }),
            )),
            ToolFormat::Loom => Ok((response_grammar(tools, false)?, None)),
        }
    }

    fn syntax(self) -> &'static CallSyntax {
        match self {
            ToolFormat::Tagged => &TAGGED_CALL,
            ToolFormat::Llama3 => &LLAMA3_CALL,
            ToolFormat::Loom => &LOOM_CALL,
        }
    }

    /// The tool and input of a call's text (from the trigger on), decoded under [`ToolFormat::grammar`]; `None`
    /// when it is not a whole call (the output cap cut it off).
    pub fn parse_call(self, text: &str) -> Option<(String, Value)> {
        let text = text.trim();
        let body = match self {
            ToolFormat::Tagged => text
                .strip_prefix("<tool_call>")?
                .strip_suffix("</tool_call>")?,
            ToolFormat::Llama3 | ToolFormat::Loom => text,
        };
        call_shape(body.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Grammar;

    const QWEN: &str = "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}\
        {{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful \
        assistant.' }}{%- endif %}{{- \"\\n\\n# Tools\\n\\n<tools>\" }}{{- \"\\n<tool_call>\\n\" }}";
    const SMOLLM: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}\
        {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}\
        {% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
    const HERMES: &str =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
        message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    const LLAMA3: &str = "{{- bos_token }}{%- if tools is not none %}{{- \"Environment: ipython\\n\" }}{%- endif %}\
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + \
        '<|eot_id|>' }}";
    const GEMMA: &str =
        "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}";

    #[test]
    fn families_are_recognised_from_their_templates() {
        assert_eq!(Family::recognise(QWEN), Family::Qwen25);
        assert_eq!(Family::recognise(SMOLLM), Family::SmolLm);
        assert_eq!(Family::recognise(HERMES), Family::Hermes);
        assert_eq!(Family::recognise(LLAMA3), Family::Llama3);
        assert_eq!(Family::recognise(GEMMA), Family::Unrecognised);
        assert_eq!(Family::recognise(""), Family::Unrecognised);
        assert_eq!(Family::Qwen25.format(), ToolFormat::Tagged);
        assert_eq!(Family::SmolLm.format(), ToolFormat::Tagged);
        assert_eq!(Family::Llama3.format(), ToolFormat::Llama3);
        assert_eq!(Family::Unrecognised.format(), ToolFormat::Loom);
    }

    fn read_schema() -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }

    #[test]
    fn each_format_describes_the_tools_in_its_own_words() {
        let schema = read_schema();
        let tools = [ToolDoc {
            name: "read_file",
            description: "Reads a file.\nMore detail.",
            schema: &schema,
        }];
        let sig = r#"{"type": "function", "function": {"name": "read_file", "description": "Reads a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}"#;
        let tagged = ToolFormat::Tagged.tools_section(&tools);
        assert!(
            tagged.contains(&format!("<tools>\n{sig}\n</tools>")),
            "{tagged}"
        );
        assert!(tagged.contains("<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"));
        assert!(!tagged.contains("More detail"));
        let llama = ToolFormat::Llama3.tools_section(&tools);
        assert!(llama.contains("\"parameters\": dictionary"), "{llama}");
        assert!(llama.ends_with(&format!("\n\n{sig}")), "{llama}");
        let loom = ToolFormat::Loom.tools_section(&tools);
        assert!(loom.contains("- read_file: Reads a file.\n  input schema: {\"type\": \"object\""));
    }

    #[test]
    fn calls_and_results_are_written_back_in_each_format() {
        let input = json!({"path": "a.txt"});
        assert_eq!(
            ToolFormat::Tagged.call_text("read_file", &input),
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>"
        );
        assert_eq!(
            ToolFormat::Llama3.call_text("read_file", &input),
            "{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.txt\"}}"
        );
        assert_eq!(
            ToolFormat::Loom.call_text("read_file", &input),
            "{\"tool\": \"read_file\", \"input\": {\"path\": \"a.txt\"}}"
        );
        assert_eq!(
            ToolFormat::Tagged.result_message("read_file", "hello", false),
            ("user", "<tool_response>\nhello\n</tool_response>".into())
        );
        assert_eq!(
            ToolFormat::Tagged.result_message("read_file", "no such file", true),
            (
                "user",
                "<tool_response>\nError: no such file\n</tool_response>".into()
            )
        );
        assert_eq!(
            ToolFormat::Llama3.result_message("read_file", "hello", false),
            ("ipython", "hello".into())
        );
        assert_eq!(
            ToolFormat::Loom.result_message("read_file", "gone", true),
            ("user", "[read_file error]\ngone".into())
        );
        // every written call parses back
        for f in [ToolFormat::Tagged, ToolFormat::Llama3, ToolFormat::Loom] {
            assert_eq!(
                f.parse_call(&f.call_text("read_file", &input)),
                Some(("read_file".into(), input.clone())),
                "{f:?}"
            );
        }
        assert_eq!(
            ToolFormat::Tagged.parse_call("<tool_call>\n{\"name\": \"read_file\", \"argu"),
            None
        );
    }

    #[test]
    fn the_lazy_grammar_starts_at_the_trigger_and_spells_the_call_the_format_s_way() {
        let schema = read_schema();
        let tools = [ToolShape {
            name: "read_file",
            schema: &schema,
        }];
        let (text, trigger) = ToolFormat::Tagged.grammar(&tools, Respond::Either).unwrap();
        let trigger = trigger.unwrap();
        assert_eq!(trigger.text, "<tool_call>");
        assert!(!trigger.at_start);
        let g = Grammar::parse(&text).unwrap();
        let call = ToolFormat::Tagged.call_text("read_file", &json!({"path": "a"}));
        assert!(call.starts_with(&trigger.text));
        assert!(g.accepts(&call), "{text}");
        assert!(!g.accepts("<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>"));
        assert!(
            !g.accepts("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {}}\n</tool_call>")
        );
        assert!(!g.accepts("Sure."));

        let (text, trigger) = ToolFormat::Llama3.grammar(&tools, Respond::Either).unwrap();
        let trigger = trigger.unwrap();
        assert!(trigger.at_start);
        let g = Grammar::parse(&text).unwrap();
        let call = ToolFormat::Llama3.call_text("read_file", &json!({"path": "a"}));
        assert!(call.starts_with(&trigger.text));
        assert!(g.accepts(&call));
        assert!(!g.accepts("{\"tool\": \"read_file\", \"input\": {\"path\": \"a\"}}"));

        // loom's form: no trigger, call or answer from the first token
        let (text, trigger) = ToolFormat::Loom.grammar(&tools, Respond::Either).unwrap();
        assert!(trigger.is_none());
        let g = Grammar::parse(&text).unwrap();
        assert!(g.accepts("{\"tool\": \"read_file\", \"input\": {\"path\": \"a\"}}"));
        assert!(g.accepts("The answer."));

        // a call required: from the first token, no answer, no trigger
        for f in [ToolFormat::Tagged, ToolFormat::Llama3, ToolFormat::Loom] {
            let (text, trigger) = f.grammar(&tools, Respond::Call).unwrap();
            assert!(trigger.is_none());
            let g = Grammar::parse(&text).unwrap();
            assert!(
                g.accepts(&f.call_text("read_file", &json!({"path": "a"}))),
                "{f:?}"
            );
            assert!(!g.accepts("The answer."));
        }

        // the last request: an answer, in every format
        for f in [ToolFormat::Tagged, ToolFormat::Llama3, ToolFormat::Loom] {
            let (text, trigger) = f.grammar(&tools, Respond::Answer).unwrap();
            assert!(trigger.is_none());
            let g = Grammar::parse(&text).unwrap();
            assert!(g.accepts("The answer."));
            assert!(!g.accepts("{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}"));
        }
    }
}
