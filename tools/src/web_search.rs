//! `web_search` (builtin): the Brave LLM Context API. One host, one key (`BRAVE_SEARCH_API_KEY` from the secrets
//! chain), no capability kinds; the answer is rendered as markdown the model reads directly: one section per result
//! with its snippets, and the places sections when the API sends them.
//!
//! The key travels only in the `x-subscription-token` header to the configured endpoint; error results carry the
//! status and the API's message, never the key. The harness-exposed flavour (`web_search = "anthropic"`) is a
//! provider-side tool and is not this module.

use std::time::Duration;

use super::{check_fields, str_field, Prepared, Tool, ToolCtx, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
use loom_protocol::Secret;

/// The secret the key is read from.
pub const BRAVE_SEARCH_API_KEY: &str = "BRAVE_SEARCH_API_KEY";
/// The Brave LLM Context endpoint.
pub const BRAVE_ENDPOINT: &str = "https://api.search.brave.com/res/v1/llm/context";
/// The longest query the API takes.
pub const MAX_QUERY_CHARS: usize = 400;
/// How long one search may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The most result text handed to the model.
const MAX_OUTPUT: usize = 64 * 1024;
/// The largest search response read (8 MiB); a longer one fails the call before more of it is held.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The response body as (lossy) text, read chunk by chunk up to [`MAX_RESPONSE_BYTES`].
pub(crate) async fn read_capped(response: reqwest::Response) -> Result<String, String> {
    use futures::StreamExt;
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(format!(
            "the search response is larger than {MAX_RESPONSE_BYTES} bytes; not read"
        ));
    }
    let mut out = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("the search response was cut off: {e}"))?;
        if out.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "the search response is larger than {MAX_RESPONSE_BYTES} bytes; not read"
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The `web_search` tool.
pub struct WebSearchTool {
    env: ToolEnv,
    key: Secret,
    endpoint: String,
    client: reqwest::Client,
}

impl WebSearchTool {
    /// A tool that searches `endpoint` (normally [`BRAVE_ENDPOINT`]) with `key`.
    pub fn new(env: ToolEnv, key: Secret, endpoint: &str) -> Result<WebSearchTool, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(WebSearchTool {
            env,
            key,
            endpoint: endpoint.to_string(),
            client,
        })
    }
}

/// A valid `freshness`: `pd`, `pw`, `pm`, `py`, or `YYYY-MM-DDtoYYYY-MM-DD`.
fn valid_freshness(f: &str) -> bool {
    let date = |d: &str| {
        d.len() == 10
            && d.char_indices().all(|(i, c)| {
                if i == 4 || i == 7 {
                    c == '-'
                } else {
                    c.is_ascii_digit()
                }
            })
    };
    matches!(f, "pd" | "pw" | "pm" | "py")
        || f.split_once("to").is_some_and(|(a, b)| date(a) && date(b))
}

impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("web_search")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: "Search the web. Returns pre-extracted snippets from the most relevant pages, as markdown, \
                          with each page's title and URL."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What to search for, in natural language (at most 400 characters)." },
                    "freshness": { "type": "string", "description": "pd (24 h), pw (7 days), pm (31 days), py (365 days), or YYYY-MM-DDtoYYYY-MM-DD." },
                    "count": { "type": "integer", "minimum": 1, "maximum": 50, "description": "How many results to consider." }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        check_fields(input, &tool, &["query", "freshness", "count"])?;
        let query = str_field(input, &tool, "query")?.trim().to_string();
        if query.is_empty() {
            return Err(format!("{tool}: query is empty"));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(format!(
                "{tool}: query is longer than {MAX_QUERY_CHARS} characters; shorten it"
            ));
        }
        let mut params = vec![("q".to_string(), query.clone())];
        match input.get("freshness") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(f)) if valid_freshness(f) => {
                params.push(("freshness".into(), f.clone()))
            }
            Some(_) => {
                return Err(format!(
                    "{tool}: freshness must be pd, pw, pm, py or YYYY-MM-DDtoYYYY-MM-DD"
                ))
            }
        }
        match input.get("count") {
            None | Some(serde_json::Value::Null) => {}
            Some(c) => match c.as_u64().filter(|n| (1..=50).contains(n)) {
                Some(n) => params.push(("count".into(), n.to_string())),
                None => return Err(format!("{tool}: count must be an integer from 1 to 50")),
            },
        }
        let host = reqwest::Url::parse(&self.endpoint)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        let request = self
            .client
            .get(&self.endpoint)
            .query(&params)
            .header("accept", "application/json")
            .header("x-subscription-token", self.key.expose());
        Ok(crate::CallHead::whole_tool(&tool).host(host).then(Box::new(
            move |_auth, ctx: ToolCtx| {
                Box::pin(async move {
                    tokio::select! {
                        out = search(&tool, request) => out,
                        _ = ctx.cancel.cancelled() => ToolOutput::interrupted(""),
                    }
                })
            },
        )))
    }
}

async fn search(tool: &str, request: reqwest::RequestBuilder) -> ToolOutput {
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            // reqwest's error names the URL, never the headers
            return ToolOutput::error(format!(
                "{tool}: the search service could not be reached: {e}"
            ));
        }
    };
    let status = response.status();
    let body = match read_capped(response).await {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("{tool}: {e}")),
    };
    if !status.is_success() {
        let detail: String = body.chars().take(300).collect();
        let hint = match status.as_u16() {
            401 | 403 => {
                " (check BRAVE_SEARCH_API_KEY and the plan's access to the LLM Context API)"
            }
            429 => " (rate limited; try again later)",
            _ => "",
        };
        return ToolOutput::error(format!(
            "{tool}: the search service answered {status}{hint}: {detail}"
        ));
    }
    let json: serde_json::Value = match serde_json::from_str(&body) {
        Ok(j) => j,
        Err(e) => {
            return ToolOutput::error(format!("{tool}: the search response is not JSON: {e}"))
        }
    };
    match render(&json) {
        Some(text) => {
            let mut out = ToolOutput::ok(text);
            out.raw_output = Some(serde_json::json!({
                "results": json["grounding"]["generic"].as_array().map_or(0, Vec::len)
            }));
            out
        }
        None => ToolOutput::error(format!(
            "{tool}: the search response has no grounding section; the API may have changed"
        )),
    }
}

/// Renders the API's answer as markdown: `None` when it has no `grounding` object.
pub fn render(json: &serde_json::Value) -> Option<String> {
    let grounding = json.get("grounding")?.as_object()?;
    let mut out = String::new();
    let results = grounding
        .get("generic")
        .and_then(serde_json::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if results.is_empty() {
        out.push_str("No results.\n");
    }
    for r in results {
        section(&mut out, r);
    }
    for (key, heading) in [("poi", "Place"), ("map", "Places")] {
        let items: Vec<&serde_json::Value> = match grounding.get(key) {
            Some(serde_json::Value::Array(a)) => a.iter().collect(),
            Some(v @ serde_json::Value::Object(_)) => vec![v],
            _ => Vec::new(),
        };
        if !items.is_empty() {
            out.push_str(&format!("## {heading}\n\n"));
            for item in items {
                section(&mut out, item);
            }
        }
    }
    if out.len() > MAX_OUTPUT {
        let mut cut = MAX_OUTPUT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n[results cut at 64 KiB]\n");
    }
    Some(out)
}

fn section(out: &mut String, r: &serde_json::Value) {
    let s = |k: &str| r.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
    let title = match (s("title"), s("name")) {
        ("", "") => "(untitled)",
        ("", name) => name,
        (title, _) => title,
    };
    out.push_str(&format!("### {title}\n"));
    if !s("url").is_empty() {
        out.push_str(&format!("{}\n", s("url")));
    }
    out.push('\n');
    if let Some(snippets) = r.get("snippets").and_then(serde_json::Value::as_array) {
        for snippet in snippets {
            let text = match snippet {
                serde_json::Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            out.push_str(text.trim());
            out.push_str("\n\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_harness::fake_server::{FakeServer, Reply};
    use loom_kernel::AlgebraKind;

    const KEY: &str = "brave-test-key-0123";

    const ANSWER: &str = r#"{
      "grounding": {
        "generic": [
          { "url": "https://docs.python.org/3/library/asyncio.html", "title": "asyncio — Asynchronous I/O",
            "snippets": ["asyncio is a library to write concurrent code.", "It is used as a foundation for many frameworks."] },
          { "url": "https://example.org/b", "title": "Second", "snippets": [] }
        ]
      },
      "sources": { "https://docs.python.org/3/library/asyncio.html": { "title": "asyncio", "hostname": "docs.python.org" } }
    }"#;

    fn tool(dir: &std::path::Path, base: &str) -> WebSearchTool {
        WebSearchTool::new(
            env("web_search", dir, "\"*\""),
            Secret::new(KEY),
            &format!("{base}/res/v1/llm/context"),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_search_sends_the_query_and_key_and_renders_markdown() {
        let dir = tempfile::tempdir().unwrap();
        let server = FakeServer::start(vec![Reply::json(200, &[], ANSWER)]).await;
        let t = tool(dir.path(), &server.base);
        let input = serde_json::json!({"query": "python asyncio", "freshness": "pw", "count": 5});
        let out = call(&t, AlgebraKind::Default, &t.env, input).await;
        assert!(!out.is_error, "{}", out.text);
        assert!(out.text.starts_with("### asyncio — Asynchronous I/O\nhttps://docs.python.org/3/library/asyncio.html\n\nasyncio is a library"), "{}", out.text);
        assert!(
            out.text.contains("### Second\nhttps://example.org/b\n"),
            "{}",
            out.text
        );
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].method, "GET");
        assert_eq!(
            reqs[0].path,
            "/res/v1/llm/context?q=python+asyncio&freshness=pw&count=5"
        );
        assert_eq!(reqs[0].header("x-subscription-token"), Some(KEY));
    }

    #[tokio::test]
    async fn errors_name_the_status_and_never_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let server = FakeServer::start(vec![
            Reply::json(401, &[], r#"{"error":{"detail":"invalid token"}}"#),
            Reply::json(200, &[], r#"{"unexpected": true}"#),
        ])
        .await;
        let t = tool(dir.path(), &server.base);
        let out = call(
            &t,
            AlgebraKind::Default,
            &t.env,
            serde_json::json!({"query": "x"}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.text.contains("401") && out.text.contains("BRAVE_SEARCH_API_KEY"),
            "{}",
            out.text
        );
        assert!(!out.text.contains(KEY));
        let out = call(
            &t,
            AlgebraKind::Default,
            &t.env,
            serde_json::json!({"query": "x"}),
        )
        .await;
        assert!(
            out.is_error && out.text.contains("no grounding section"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn an_oversized_response_fails_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_RESPONSE_BYTES));
        let server = FakeServer::start(vec![Reply::json(200, &[], &huge)]).await;
        let t = tool(dir.path(), &server.base);
        let out = call(
            &t,
            AlgebraKind::Default,
            &t.env,
            serde_json::json!({"query": "x"}),
        )
        .await;
        assert!(
            out.is_error
                && out
                    .text
                    .contains(&format!("larger than {MAX_RESPONSE_BYTES} bytes")),
            "{}",
            out.text
        );
    }

    #[test]
    fn bad_inputs_are_refused_before_anything_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path(), "http://127.0.0.1:9");
        for (input, want) in [
            (serde_json::json!({"query": "  "}), "query is empty"),
            (
                serde_json::json!({"query": "x".repeat(401)}),
                "longer than 400",
            ),
            (
                serde_json::json!({"query": "x", "freshness": "yesterday"}),
                "freshness must be",
            ),
            (
                serde_json::json!({"query": "x", "count": 0}),
                "count must be",
            ),
            (
                serde_json::json!({"query": "x", "site": "a"}),
                "unknown field",
            ),
        ] {
            let err = t.prepare(&input).err().unwrap();
            assert!(err.contains(want), "{input}: {err}");
        }
        assert!(valid_freshness("2025-01-01to2025-02-01"));
        assert!(!valid_freshness("2025-1-01to2025-02-01"));
    }
}
