//! `tool_search`: large MCP catalogs kept out of ordinary requests. When an agent grants `tool_search`, its MCP tools
//! are deferred: their definitions are not sent with each request; the model calls `tool_search` with an empty query
//! to list their names and descriptions, or with words to load the definitions of the tools that match, which are
//! then sent with every request for the rest of the session. Only tools the agent has — granted, and so decided by
//! the kernel on every call like any other — are ever listed or loaded; a tool the manifest does not grant is not in
//! the catalog at all.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
use loom_tools::{check_fields, Prepared, Tool, ToolEnv, ToolOutput};
use serde_json::{json, Value};

/// The most tools one query loads.
pub const SEARCH_MAX_LOADED: usize = 10;

/// The deferred tools of an agent and which of them the model has loaded.
#[derive(Default)]
pub struct ToolSearch {
    /// The deferred tools' definitions by name (set once, when the agent's tools are built).
    deferred: OnceLock<BTreeMap<String, ToolSpec>>,
    /// The names loaded so far.
    loaded: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for ToolSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSearch")
            .field("deferred", &self.deferred.get().map(BTreeMap::len))
            .finish()
    }
}

impl ToolSearch {
    /// Sets the deferred tools (once; a later call is ignored).
    pub(crate) fn defer(&self, specs: Vec<ToolSpec>) {
        let _ = self
            .deferred
            .set(specs.into_iter().map(|s| (s.name.clone(), s)).collect());
    }

    /// Whether `name` is deferred and not loaded: its definition stays out of requests.
    pub fn hides(&self, name: &str) -> bool {
        self.deferred.get().is_some_and(|d| d.contains_key(name))
            && !self
                .loaded
                .lock()
                .map(|l| l.contains(name))
                .unwrap_or(false)
    }

    /// The listing for an empty query, or the definitions matching `query` (every word in the name or the
    /// description, case-insensitive), which are loaded from now on.
    fn search(&self, query: &str) -> String {
        let Some(deferred) = self.deferred.get().filter(|d| !d.is_empty()) else {
            return "no deferred tools: every tool this agent has is already in the request".into();
        };
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        if words.is_empty() {
            let mut out = format!(
                "{} deferred tools (call tool_search with words from a name or description to load their \
                 definitions):\n",
                deferred.len()
            );
            for s in deferred.values() {
                let first = s.description.lines().next().unwrap_or("");
                let first: String = first.chars().take(160).collect();
                out.push_str(&format!("- {}: {first}\n", s.name));
            }
            return out;
        }
        let hits: Vec<&ToolSpec> = deferred
            .values()
            .filter(|s| {
                let hay = format!("{} {}", s.name, s.description).to_lowercase();
                words.iter().all(|w| hay.contains(w.as_str()))
            })
            .take(SEARCH_MAX_LOADED)
            .collect();
        if hits.is_empty() {
            return format!("no deferred tool matches {query:?}; call tool_search with an empty query to list them");
        }
        if let Ok(mut l) = self.loaded.lock() {
            l.extend(hits.iter().map(|s| s.name.clone()));
        }
        let defs: Vec<Value> = hits
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "input_schema": s.input_schema}))
            .collect();
        format!(
            "loaded {} tool(s); they can be called from now on:\n{}",
            hits.len(),
            serde_json::to_string_pretty(&defs).unwrap_or_default()
        )
    }
}

/// The `tool_search` tool.
pub struct ToolSearchTool {
    env: ToolEnv,
    search: Arc<ToolSearch>,
}

impl ToolSearchTool {
    /// The tool for `env`, over the agent's deferred tools.
    pub(crate) fn new(env: ToolEnv, search: Arc<ToolSearch>) -> ToolSearchTool {
        ToolSearchTool { env, search }
    }
}

impl Tool for ToolSearchTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("tool_search")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: "Find the agent's MCP tools, whose definitions are not sent with each request: an empty \
                          `query` lists their names and descriptions; words load the definitions of the tools whose \
                          name or description has them all (at most 10), callable from then on."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": { "query": { "type": "string" } },
                "required": ["query"],
            }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, &["query"])?;
        let query = loom_tools::str_field(input, &name, "query")?.to_string();
        let search = self.search.clone();
        Ok(
            loom_tools::CallHead::whole_tool(&name).then(Box::new(move |_auth, _ctx| {
                Box::pin(async move { ToolOutput::ok(search.search(&query)) })
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn lists_then_loads_what_matches() {
        let s = ToolSearch::default();
        s.defer(vec![
            spec("echo", "Echoes back the input"),
            spec("get-sum", "Adds two numbers"),
        ]);
        assert!(s.hides("echo") && s.hides("get-sum") && !s.hides("read_file"));
        let list = s.search("  ");
        assert!(
            list.starts_with("2 deferred tools") && list.contains("- echo: Echoes back the input"),
            "{list}"
        );
        assert!(s.hides("echo"), "listing loads nothing");
        let got = s.search("ADDS numbers");
        assert!(
            got.starts_with("loaded 1 tool(s)") && got.contains("\"get-sum\""),
            "{got}"
        );
        assert!(!s.hides("get-sum") && s.hides("echo"));
        assert!(s
            .search("nothing like it")
            .starts_with("no deferred tool matches"));
    }
}
