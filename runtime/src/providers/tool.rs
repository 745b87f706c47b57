//! One `[tools]` instance over an MCP server's tool: the kernel's pre-binding decides what the model sees and what
//! is sent; each call is decided by the kernel like any other (its request row is the arguments actually sent).

use std::sync::Arc;

use futures::FutureExt;
use loom_kernel::{bind_schema, ArgBinding, BoundTool, CallFacts, Grant, Request, Row, Value};
use serde_json::Value as Json;

use crate::model::ToolSpec;
use crate::tools::{Prepared, Tool, ToolOutput};
use crate::update::ToolKind;
use loom_mcp::{McpServer, UpstreamTool};

/// An MCP tool instance.
pub struct McpTool {
    instance: String,
    underlying: String,
    /// For a resources or prompts adapter (`tool = "resources/read"`, …): the MCP method it sends instead of
    /// `tools/call`.
    adapter: Option<&'static super::adapter::Adapter>,
    grant: Grant,
    description: String,
    bound: BoundTool,
    server: Arc<McpServer>,
}

impl McpTool {
    /// Binds `grant` to the server's tool `underlying` as instance `instance`. The error says what to change in
    /// the manifest (a tool the server does not have, a grant that does not fit its schema).
    pub fn new(
        instance: &str,
        underlying: &str,
        grant: &Grant,
        server: Arc<McpServer>,
    ) -> Result<McpTool, String> {
        let mut tools = server.tools();
        let adapter = super::adapter::adapter(underlying);
        if let Some(a) = adapter {
            if !a.offered(&server.info()) {
                return Err(format!(
                    "the {} [providers].{} does not advertise {} (its initialize answer has no capabilities.{}), so \
                     tools.{instance} = `{underlying}` cannot be offered",
                    server.noun(),
                    server.handle,
                    a.capability,
                    a.capability
                ));
            }
            tools.push(UpstreamTool {
                name: a.method.to_string(),
                description: a.description.to_string(),
                input_schema: a.schema(),
            });
        }
        let Some(up) = tools.iter().rev().find(|t| t.name == underlying) else {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let rename = if instance == underlying {
                format!("; to expose one of them under this name, add tool = \"<name>\" to tools.{instance}")
            } else {
                String::new()
            };
            return Err(format!(
                "the {} [providers].{} has no tool `{underlying}` (it has: {}){rename}",
                server.noun(),
                server.handle,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        };
        let bound = bind_schema(instance, &up.input_schema, grant).map_err(|e| {
            format!(
                "{e} (server [providers].{}, tool `{underlying}`)",
                server.handle
            )
        })?;
        Ok(McpTool {
            instance: instance.to_string(),
            underlying: underlying.to_string(),
            adapter,
            grant: grant.clone(),
            description: up.description.clone(),
            bound,
            server,
        })
    }

    /// The schema the model sees.
    pub fn visible_schema(&self) -> &Json {
        &self.bound.visible_schema
    }

    /// The upstream tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// The request row of a call: each argument the grant names, as sent. An open argument's value that is no grant
/// value (null, a nested `"*"`) is left out: `"*"` covers it whatever it is.
fn request_row(bound: &BoundTool, sent: &Json) -> Result<Row, String> {
    let Some(bindings) = &bound.bindings else {
        return Ok(Row::default());
    };
    let mut pairs = Vec::new();
    for (arg, binding) in bindings {
        let Some(v) = sent.get(arg) else { continue };
        match (Value::from_json(v), binding) {
            (Ok(v), _) => pairs.push((arg.as_str(), v)),
            (Err(_), ArgBinding::Open) => {}
            (Err(e), _) => return Err(format!("argument `{arg}`: {e}")),
        }
    }
    Ok(Row::from_pairs(pairs))
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.instance
    }

    fn kind(&self) -> ToolKind {
        // listing and reading resources and prompts changes nothing; any other tool may
        if self.adapter.is_some() {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.instance.clone(),
            description: self.description.clone(),
            input_schema: self.bound.visible_schema.clone(),
        }
    }

    fn prepare(&self, input: &Json) -> Result<Prepared, String> {
        let sent = self
            .bound
            .apply(&self.instance, input)
            .map_err(|e| e.to_string())?;
        let row = request_row(&self.bound, &sent).map_err(|e| format!("{}: {e}", self.instance))?;
        let (server, underlying, instance, grant) = (
            self.server.clone(),
            self.underlying.clone(),
            self.instance.clone(),
            self.grant.clone(),
        );
        if let Some(a) = self.adapter {
            return Ok(Prepared {
                request: Request::Args(row),
                more: Vec::new(),
                facts: CallFacts {
                    tool: self.instance.clone(),
                    ..CallFacts::default()
                },
                locations: vec![],
                run: Box::new(move |_auth, ctx| {
                    async move {
                        let token = ctx.cancel.clone();
                        let call = tokio::task::spawn_blocking(move || {
                            server.request_until(a.method, sent, &|| token.is_cancelled())
                        });
                        tokio::select! {
                            _ = ctx.cancel.cancelled() => ToolOutput::interrupted(""),
                            joined = call => match joined {
                                Ok(Ok(result)) => ToolOutput::ok(a.render(&result)),
                                Ok(Err(e)) => ToolOutput::error(e.to_string()),
                                Err(e) => ToolOutput::error(format!("the MCP request stopped: {e}")),
                            },
                        }
                    }
                    .boxed()
                }),
            });
        }
        Ok(Prepared {
            request: Request::Args(row),
            more: Vec::new(),
            facts: CallFacts {
                tool: self.instance.clone(),
                ..CallFacts::default()
            },
            locations: vec![],
            run: Box::new(move |_auth, ctx| {
                async move {
                    // a changed tool list re-binds the grant to the tool's new schema: a grant that no longer fits
                    // refuses the call rather than sending what the new schema would read differently
                    let check = move |up: &UpstreamTool| {
                        bind_schema(&instance, &up.input_schema, &grant)
                            .map(|_| ())
                            .map_err(|e| {
                                format!("{e}; the server changed the tool `{}` since boot", up.name)
                            })
                    };
                    // a cancelled turn also stops the blocking wait, so the server is free for the next call
                    let token = ctx.cancel.clone();
                    let call = tokio::task::spawn_blocking(move || {
                        server.call_until(&underlying, sent, &check, &|| token.is_cancelled())
                    });
                    tokio::select! {
                        _ = ctx.cancel.cancelled() => ToolOutput::interrupted(""),
                        joined = call => match joined {
                            Ok(Ok(r)) => ToolOutput {
                                text: r.text,
                                is_error: r.is_error,
                                raw_output: r.raw,
                                ..ToolOutput::default()
                            },
                            Ok(Err(e)) => ToolOutput::error(e.to_string()),
                            Err(e) => ToolOutput::error(format!("the MCP call stopped: {e}")),
                        },
                    }
                }
                .boxed()
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_kernel::{decide, AlgebraKind, PathCtx};
    use loom_mcp::testing::fake_stdio;
    use serde_json::json;

    fn bound(grant: &str) -> (Grant, BoundTool) {
        let t: toml::Table = toml::from_str(&format!("g = {grant}")).unwrap();
        let g = Grant::from_toml(&t["g"]).unwrap();
        let schema = json!({ "type": "object", "properties": {
            "path": { "type": "string" }, "status": { "type": "string" }, "extra": {} }, "required": ["path"] });
        let b = bind_schema("t", &schema, &g).unwrap();
        (g, b)
    }

    #[test]
    fn the_sent_arguments_are_what_the_kernel_decides_on() {
        let (g, b) = bound("{ path = \"/doc/a\", status = [\"online\", \"away\"], extra = \"*\" }");
        let sent = b
            .apply(
                "t",
                &json!({ "path": "/etc/shadow", "status": "away", "extra": null }),
            )
            .unwrap();
        assert_eq!(
            sent,
            json!({ "path": "/doc/a", "status": "away", "extra": null })
        );
        let row = request_row(&b, &sent).unwrap();
        let ctx = PathCtx::new("/".to_string(), None);
        assert!(decide("t", AlgebraKind::Mcp, &ctx, &g, &Request::Args(row)).is_allowed());
        // a row the grant does not cover is denied by the kernel, whatever apply let through
        let forged = request_row(&b, &json!({ "path": "/etc/shadow" })).unwrap();
        assert!(!decide("t", AlgebraKind::Mcp, &ctx, &g, &Request::Args(forged)).is_allowed());
    }

    #[test]
    fn a_malformed_schema_refuses_that_tool_only() {
        let Some(cfg) = fake_stdio("malformed", &[], 10_000) else {
            return;
        };
        let s = McpServer::start("bad", cfg).unwrap();
        let star = loom_kernel::Grant::Unrestricted;
        let err = McpTool::new("broken", "broken", &star, s.clone())
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("not a JSON object schema") && err.contains("[providers].bad"),
            "{err}"
        );
        assert!(
            McpTool::new("ok", "ok", &star, s.clone()).is_ok(),
            "the server's other tools still work"
        );
        let err = McpTool::new("nope", "nope", &star, s)
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("has no tool `nope` (it has: broken, ok)"),
            "{err}"
        );
    }
}
