//! `context7_search`, `context7_resolve_library`, `context7_query_docs` (builtin): library documentation from
//! Context7's REST API — a one-request search (`/v3/search`), the library search that gives a Context7 library id
//! (`/v2/libs/search`), and the documentation of one library for a question (`/v2/context`). One host, one key
//! (`CONTEXT7_API_KEY` from the secrets chain, sent only as a bearer token to that host, never in an error), no
//! capability kinds; responses are read up to 8 MiB and handed to the model cut at 64 KiB. A refused key (401/403)
//! and a rate limit (429) are errors that say so; a search with no documentation (404) is an empty answer.

use std::time::Duration;

use serde_json::{json, Value};

use super::web_search::read_capped;
use super::{check_fields, str_field, Prepared, Tool, ToolCtx, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
use loom_protocol::Secret;

/// The secret the key is read from.
pub const CONTEXT7_API_KEY: &str = "CONTEXT7_API_KEY";
/// The API's base URL.
pub const CONTEXT7_BASE: &str = "https://context7.com/api";
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The most text handed to the model.
const MAX_OUTPUT: usize = 64 * 1024;
/// The longest question or name sent.
const MAX_QUERY_CHARS: usize = 500;

/// Which Context7 tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context7Op {
    /// `context7_search`.
    Search,
    /// `context7_resolve_library`.
    ResolveLibrary,
    /// `context7_query_docs`.
    QueryDocs,
}

impl Context7Op {
    /// The operation of built-in tool `underlying`.
    pub fn of(underlying: &str) -> Option<Context7Op> {
        Some(match underlying {
            "context7_search" => Context7Op::Search,
            "context7_resolve_library" => Context7Op::ResolveLibrary,
            "context7_query_docs" => Context7Op::QueryDocs,
            _ => return None,
        })
    }

    fn builtin(self) -> &'static str {
        match self {
            Context7Op::Search => "context7_search",
            Context7Op::ResolveLibrary => "context7_resolve_library",
            Context7Op::QueryDocs => "context7_query_docs",
        }
    }
}

/// A Context7 tool.
#[derive(Debug)]
pub struct Context7Tool {
    env: ToolEnv,
    op: Context7Op,
    key: Secret,
    base: String,
    client: reqwest::Client,
}

impl Context7Tool {
    /// The tool for `op`, calling the API at `base` (normally [`CONTEXT7_BASE`]) with `key`.
    pub fn new(
        op: Context7Op,
        env: ToolEnv,
        key: Secret,
        base: &str,
    ) -> Result<Context7Tool, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Context7Tool {
            env,
            op,
            key,
            base: base.trim_end_matches('/').to_string(),
            client,
        })
    }
}

/// A required, non-empty string field of at most [`MAX_QUERY_CHARS`] characters.
fn text_field(input: &Value, tool: &str, key: &str) -> Result<String, String> {
    let v = str_field(input, tool, key)?.trim().to_string();
    if v.is_empty() {
        return Err(format!("{tool}: {key} is empty"));
    }
    if v.chars().count() > MAX_QUERY_CHARS {
        return Err(format!(
            "{tool}: {key} is longer than {MAX_QUERY_CHARS} characters; shorten it"
        ));
    }
    Ok(v)
}

impl Tool for Context7Tool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(self.op.builtin())
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        let (description, schema) = match self.op {
            Context7Op::Search => (
                "Search current library documentation (Context7) with a question; it picks the libraries and returns \
                 the most relevant snippets with their sources.",
                json!({"type": "object", "properties": {"query": {"type": "string", "description": "The question, in natural language."}}, "required": ["query"]}),
            ),
            Context7Op::ResolveLibrary => (
                "Find a library's Context7 id (such as /facebook/react) by its name, for context7_query_docs; `query` \
                 (what you want to know) ranks the matches.",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "query": {"type": "string"}}, "required": ["name"]}),
            ),
            Context7Op::QueryDocs => (
                "Get current documentation snippets of one library (its Context7 id from context7_resolve_library) \
                 for a question.",
                json!({"type": "object", "properties": {"library_id": {"type": "string", "description": "Such as /facebook/react."}, "query": {"type": "string"}}, "required": ["library_id", "query"]}),
            ),
        };
        ToolSpec {
            name: self.env.instance.clone(),
            description: description.into(),
            input_schema: schema,
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        let (path, params): (&str, Vec<(&str, String)>) = match self.op {
            Context7Op::Search => {
                check_fields(input, &tool, &["query"])?;
                (
                    "/v3/search",
                    vec![("query", text_field(input, &tool, "query")?)],
                )
            }
            Context7Op::ResolveLibrary => {
                check_fields(input, &tool, &["name", "query"])?;
                let name = text_field(input, &tool, "name")?;
                let query = match input.get("query") {
                    None | Some(Value::Null) => name.clone(),
                    Some(_) => text_field(input, &tool, "query")?,
                };
                (
                    "/v2/libs/search",
                    vec![("libraryName", name), ("query", query)],
                )
            }
            Context7Op::QueryDocs => {
                check_fields(input, &tool, &["library_id", "query"])?;
                let id = text_field(input, &tool, "library_id")?;
                if !id.starts_with('/') {
                    return Err(format!(
                        "{tool}: library_id {id:?} is not a Context7 id (they look like /facebook/react); find it \
                         with context7_resolve_library"
                    ));
                }
                (
                    "/v2/context",
                    vec![
                        ("libraryId", id),
                        ("query", text_field(input, &tool, "query")?),
                        ("type", "txt".into()),
                    ],
                )
            }
        };
        let url = format!("{}{path}", self.base);
        let host = reqwest::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        let request = self
            .client
            .get(&url)
            .query(&params)
            .bearer_auth(self.key.expose());
        let op = self.op;
        let key = self.key.clone();
        Ok(crate::CallHead::whole_tool(&tool).host(host).then(Box::new(
            move |_auth, ctx: ToolCtx| {
                Box::pin(async move {
                    tokio::select! {
                        out = fetch(&tool, op, request, &key) => out,
                        _ = ctx.cancel.cancelled() => ToolOutput::interrupted(""),
                    }
                })
            },
        )))
    }
}

/// Asks Context7 and renders its answer. The key is cut out of whatever the server sends back (an error that echoes
/// the request, a misbehaving proxy), so it never reaches the model.
async fn fetch(
    tool: &str,
    op: Context7Op,
    request: reqwest::RequestBuilder,
    key: &Secret,
) -> ToolOutput {
    let response = match request.send().await {
        Ok(r) => r,
        // reqwest's error names the URL, never the headers
        Err(e) => return ToolOutput::error(format!("{tool}: Context7 could not be reached: {e}")),
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match read_capped(response).await {
        Ok(b) if !key.expose().is_empty() => b.replace(key.expose(), "<redacted>"),
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("{tool}: {e}")),
    };
    let detail: String = body.chars().take(300).collect();
    match status.as_u16() {
        200..=299 => {}
        401 | 403 => {
            return ToolOutput::error(format!(
                "{tool}: Context7 refused the key ({status}): check {CONTEXT7_API_KEY} in the secrets chain (a key \
                 from context7.com/dashboard)"
            ))
        }
        429 => {
            return ToolOutput::error(format!(
                "{tool}: Context7's rate limit was reached ({status}){}; wait before asking again",
                retry_after
                    .map(|s| format!(", retry after {s} s"))
                    .unwrap_or_default()
            ))
        }
        404 if op != Context7Op::QueryDocs || detail.contains("no_documentation") => {
            return ToolOutput::ok("No documentation found for this question.")
        }
        _ => return ToolOutput::error(format!("{tool}: Context7 answered {status}: {detail}")),
    }
    let mut text = match op {
        Context7Op::ResolveLibrary => match serde_json::from_str::<Value>(&body) {
            Ok(v) => render_libraries(&v),
            Err(e) => {
                return ToolOutput::error(format!(
                    "{tool}: the library search answer is not JSON: {e}"
                ))
            }
        },
        _ => body.trim().to_string(),
    };
    if text.is_empty() {
        text = "No documentation found for this question.".into();
    }
    if text.len() > MAX_OUTPUT {
        let mut cut = MAX_OUTPUT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[cut at 64 KiB]");
    }
    ToolOutput::ok(text)
}

/// The libraries of a `/v2/libs/search` answer (an array, or an object with `results`), one per line.
fn render_libraries(v: &Value) -> String {
    let list = v
        .as_array()
        .or_else(|| v.get("results").and_then(Value::as_array))
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        return "No library matches that name.".into();
    }
    let s = |l: &Value, k: &str| l.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    list.iter()
        .take(20)
        .map(|l| {
            let name = match s(l, "name") {
                n if n.is_empty() => s(l, "title"),
                n => n,
            };
            let mut line = format!("{} — {name}", s(l, "id"));
            if let Some(d) = l.get("description").and_then(Value::as_str) {
                line.push_str(&format!(": {d}"));
            }
            if let Some(n) = l.get("totalSnippets").and_then(Value::as_u64) {
                line.push_str(&format!(" ({n} snippets)"));
            }
            if let Some(vs) = l
                .get("versions")
                .and_then(Value::as_array)
                .filter(|v| !v.is_empty())
            {
                let vs: Vec<&str> = vs.iter().filter_map(Value::as_str).take(5).collect();
                line.push_str(&format!(" [versions: {}]", vs.join(", ")));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_harness::fake_server::{FakeServer, Reply};
    use loom_kernel::AlgebraKind;

    const KEY: &str = "ctx7-test-key-0815";

    fn tool(op: Context7Op, dir: &std::path::Path, base: &str) -> Context7Tool {
        Context7Tool::new(
            op,
            env(op.builtin(), dir, "\"*\""),
            Secret::new(KEY),
            &format!("{base}/api"),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn each_tool_asks_its_endpoint_with_the_key_and_renders_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let server = FakeServer::start(vec![
            Reply::json(200, &[], r#"[{"id": "/facebook/react", "name": "React", "description": "UI library", "totalSnippets": 1250, "versions": ["v18.2.0"]}]"#),
            Reply::json(200, &[("content-type", "text/plain")], "### useState\nconst [a, setA] = useState(0);\n"),
            Reply::json(200, &[("content-type", "text/plain")], "snippet from next.js docs"),
        ])
        .await;
        let r = tool(Context7Op::ResolveLibrary, dir.path(), &server.base);
        let out = call(
            &r,
            AlgebraKind::Default,
            &r.env,
            json!({"name": "react", "query": "hooks"}),
        )
        .await;
        assert_eq!(
            out.text,
            "/facebook/react — React: UI library (1250 snippets) [versions: v18.2.0]"
        );
        let q = tool(Context7Op::QueryDocs, dir.path(), &server.base);
        let out = call(
            &q,
            AlgebraKind::Default,
            &q.env,
            json!({"library_id": "/facebook/react", "query": "state"}),
        )
        .await;
        assert!(out.text.starts_with("### useState"), "{}", out.text);
        let s = tool(Context7Op::Search, dir.path(), &server.base);
        let out = call(
            &s,
            AlgebraKind::Default,
            &s.env,
            json!({"query": "stream a response"}),
        )
        .await;
        assert_eq!(out.text, "snippet from next.js docs");
        let reqs = server.requests();
        assert_eq!(
            reqs[0].path,
            "/api/v2/libs/search?libraryName=react&query=hooks"
        );
        assert_eq!(
            reqs[1].path,
            "/api/v2/context?libraryId=%2Ffacebook%2Freact&query=state&type=txt"
        );
        assert_eq!(reqs[2].path, "/api/v3/search?query=stream+a+response");
        for r in &reqs {
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
        }
    }

    #[tokio::test]
    async fn auth_and_rate_limits_are_explicit_errors_without_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let server = FakeServer::start(vec![
            Reply::json(401, &[], r#"{"error": "invalid api key"}"#),
            Reply::json(
                429,
                &[("retry-after", "30")],
                r#"{"error": "rate limited"}"#,
            ),
            Reply::json(404, &[], r#"{"error": "no_documentation_found"}"#),
            Reply::json(
                500,
                &[],
                &format!("boom: bad header Authorization: Bearer {KEY}"),
            ),
            Reply::json(200, &[], &format!("docs that quote the key {KEY} back")),
        ])
        .await;
        let s = tool(Context7Op::Search, dir.path(), &server.base);
        let q = |t: &'static str| json!({ "query": t });
        let auth = call(&s, AlgebraKind::Default, &s.env, q("a")).await;
        assert!(
            auth.is_error
                && auth.text.contains("refused the key (401")
                && auth.text.contains(CONTEXT7_API_KEY),
            "{}",
            auth.text
        );
        let rate = call(&s, AlgebraKind::Default, &s.env, q("b")).await;
        assert!(
            rate.is_error
                && rate.text.contains("rate limit")
                && rate.text.contains("retry after 30 s"),
            "{}",
            rate.text
        );
        let none = call(&s, AlgebraKind::Default, &s.env, q("c")).await;
        assert_eq!(
            (none.is_error, none.text.as_str()),
            (false, "No documentation found for this question.")
        );
        let boom = call(&s, AlgebraKind::Default, &s.env, q("d")).await;
        assert!(
            boom.is_error && boom.text.contains("500") && boom.text.contains("Bearer <redacted>"),
            "{}",
            boom.text
        );
        let echo = call(&s, AlgebraKind::Default, &s.env, q("e")).await;
        assert!(
            echo.text.contains("the key <redacted> back"),
            "{}",
            echo.text
        );
        for o in [auth, rate, none, boom, echo] {
            assert!(!o.text.contains(KEY), "{}", o.text);
        }
        let bad = call(
            &tool(Context7Op::QueryDocs, dir.path(), &server.base),
            AlgebraKind::Default,
            &s.env,
            json!({"library_id": "react", "query": "x"}),
        )
        .await;
        assert!(
            bad.is_error && bad.text.contains("context7_resolve_library"),
            "{}",
            bad.text
        );
    }
}
