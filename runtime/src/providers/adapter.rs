//! MCP resources and prompts as tools. A server that advertises `resources` or `prompts` can have them declared in
//! `[tools]` under these names, each granted per argument like any MCP tool and decided by the kernel on every call:
//! `resources/list`, `resources/templates/list`, `resources/read {uri}`, `prompts/list`, `prompts/get {name,
//! arguments?}`. loom gives each its input schema and turns the server's answer into bounded text.

use serde_json::{json, Value as Json};

/// The most bytes an adapter's answer gives the model.
pub const ADAPTER_OUTPUT_CAP: usize = 256 * 1024;

/// One adapter: the tool name (= the MCP method), the capability the server must advertise, what it does, its input
/// schema.
pub(crate) struct Adapter {
    /// The MCP method, also the name in `tool = "…"`.
    pub method: &'static str,
    /// The capability `initialize` must advertise.
    pub capability: &'static str,
    /// The description the model sees.
    pub description: &'static str,
}

const ADAPTERS: [Adapter; 5] = [
    Adapter {
        method: "resources/list",
        capability: "resources",
        description: "List the resources this MCP server offers (uri, name, type, description); pass `cursor` to read on.",
    },
    Adapter {
        method: "resources/templates/list",
        capability: "resources",
        description: "List the resource URI templates this MCP server offers; pass `cursor` to read on.",
    },
    Adapter {
        method: "resources/read",
        capability: "resources",
        description: "Read one resource of this MCP server by its `uri`.",
    },
    Adapter {
        method: "prompts/list",
        capability: "prompts",
        description: "List the prompts this MCP server offers, with their arguments; pass `cursor` to read on.",
    },
    Adapter {
        method: "prompts/get",
        capability: "prompts",
        description: "Get one prompt of this MCP server by `name`, with its `arguments` (an object of strings).",
    },
];

/// The adapter named `underlying`, if it is one.
pub(crate) fn adapter(underlying: &str) -> Option<&'static Adapter> {
    ADAPTERS.iter().find(|a| a.method == underlying)
}

impl Adapter {
    /// The input schema of the tool.
    pub fn schema(&self) -> Json {
        match self.method {
            "resources/read" => json!({
                "type": "object",
                "properties": { "uri": { "type": "string" } },
                "required": ["uri"],
            }),
            "prompts/get" => json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "arguments": { "type": "object", "additionalProperties": { "type": "string" } },
                },
                "required": ["name"],
            }),
            _ => json!({
                "type": "object",
                "properties": { "cursor": { "type": "string" } },
            }),
        }
    }

    /// Whether the server's `initialize` answer advertises the capability.
    pub fn offered(&self, info: &Json) -> bool {
        info.get("capabilities")
            .and_then(|c| c.get(self.capability))
            .is_some_and(Json::is_object)
    }

    /// The model's text for the server's `result`.
    pub fn render(&self, result: &Json) -> String {
        let mut out = String::new();
        let s = |v: &Json, k: &str| v.get(k).and_then(Json::as_str).unwrap_or("").to_string();
        match self.method {
            "resources/list" => {
                for r in result
                    .get("resources")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push_str(&format!("{} — {}", s(r, "uri"), s(r, "name")));
                    if let Some(m) = r.get("mimeType").and_then(Json::as_str) {
                        out.push_str(&format!(" ({m})"));
                    }
                    if let Some(d) = r.get("description").and_then(Json::as_str) {
                        out.push_str(&format!(": {d}"));
                    }
                    out.push('\n');
                }
            }
            "resources/templates/list" => {
                for r in result
                    .get("resourceTemplates")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push_str(&format!("{} — {}", s(r, "uriTemplate"), s(r, "name")));
                    if let Some(d) = r.get("description").and_then(Json::as_str) {
                        out.push_str(&format!(": {d}"));
                    }
                    out.push('\n');
                }
            }
            "resources/read" => {
                for c in result
                    .get("contents")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push_str(&format!("==> {} <==\n", s(c, "uri")));
                    match (
                        c.get("text").and_then(Json::as_str),
                        c.get("blob").and_then(Json::as_str),
                    ) {
                        (Some(t), _) => out.push_str(t),
                        (None, Some(b)) => out.push_str(&format!(
                            "[binary content{}: {} bytes of base64]",
                            c.get("mimeType")
                                .and_then(Json::as_str)
                                .map(|m| format!(", {m}"))
                                .unwrap_or_default(),
                            b.len()
                        )),
                        _ => out.push_str("[no content]"),
                    }
                    out.push('\n');
                }
            }
            "prompts/list" => {
                for p in result
                    .get("prompts")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push_str(&s(p, "name"));
                    if let Some(d) = p.get("description").and_then(Json::as_str) {
                        out.push_str(&format!(": {d}"));
                    }
                    let args: Vec<String> = p
                        .get("arguments")
                        .and_then(Json::as_array)
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            let req = a.get("required").and_then(Json::as_bool).unwrap_or(false);
                            format!("{}{}", s(a, "name"), if req { " (required)" } else { "" })
                        })
                        .collect();
                    if !args.is_empty() {
                        out.push_str(&format!(" [arguments: {}]", args.join(", ")));
                    }
                    out.push('\n');
                }
            }
            _ => {
                if let Some(d) = result.get("description").and_then(Json::as_str) {
                    out.push_str(&format!("{d}\n"));
                }
                for m in result
                    .get("messages")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    let content = m.get("content").unwrap_or(&Json::Null);
                    let text = match content.get("type").and_then(Json::as_str) {
                        Some("text") => s(content, "text"),
                        Some("resource") => content
                            .get("resource")
                            .map(|r| format!("[resource {}]\n{}", s(r, "uri"), s(r, "text")))
                            .unwrap_or_default(),
                        Some(other) => format!("[{other} content]"),
                        None => String::new(),
                    };
                    out.push_str(&format!("{}: {text}\n", s(m, "role")));
                }
            }
        }
        if let Some(next) = result.get("nextCursor").and_then(Json::as_str) {
            out.push_str(&format!("(more: pass cursor {next:?})\n"));
        }
        if out.is_empty() {
            out.push_str("(nothing)");
        }
        if out.len() > ADAPTER_OUTPUT_CAP {
            let mut end = ADAPTER_OUTPUT_CAP;
            while !out.is_char_boundary(end) {
                end -= 1;
            }
            let total = out.len();
            out.truncate(end);
            out.push_str(&format!("\n[cut at {ADAPTER_OUTPUT_CAP} of {total} bytes]"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_text() {
        let read = adapter("resources/read").unwrap();
        assert_eq!(
            read.render(&json!({"contents": [{"uri": "demo://a", "text": "hello"}, {"uri": "demo://b", "blob": "AAAA", "mimeType": "image/png"}]})),
            "==> demo://a <==\nhello\n==> demo://b <==\n[binary content, image/png: 4 bytes of base64]\n"
        );
        let prompts = adapter("prompts/list").unwrap();
        assert_eq!(
            prompts.render(&json!({"prompts": [{"name": "p", "description": "d", "arguments": [{"name": "x", "required": true}]}], "nextCursor": "2"})),
            "p: d [arguments: x (required)]\n(more: pass cursor \"2\")\n"
        );
        let get = adapter("prompts/get").unwrap();
        assert_eq!(
            get.render(
                &json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]})
            ),
            "user: Hi\n"
        );
        assert!(adapter("tools/call").is_none());
        assert!(read.offered(&json!({"capabilities": {"resources": {}}})));
        assert!(!get.offered(&json!({"capabilities": {"resources": {}}})));
    }
}
