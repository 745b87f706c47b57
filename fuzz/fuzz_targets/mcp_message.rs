//! MCP server replies (a server is untrusted code): arbitrary bytes -> `serde_json` (as the client reads each message)
//! -> `flatten_result` (a `tools/call` result as the model will see it) and, for each entry of a `tools` array (a
//! `tools/list` page), the kernel's `bind_schema` of its `inputSchema` under `"*"` and under a row granting arguments.
//! Must hold: never panics or overflows the stack; a flattened result is at most `MAX_RESULT_CHARS` characters plus
//! the cut note; every binding error renders a non-empty message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loom_kernel::{bind_schema, Grant};
use loom_mcp::{flatten_result, MAX_RESULT_CHARS};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for v in [&msg, msg.get("result").unwrap_or(&Value::Null)] {
        let r = flatten_result(v);
        assert!(r.text.chars().count() <= MAX_RESULT_CHARS + 200);
        if let Some(tools) = v.get("tools").and_then(Value::as_array) {
            let row = grant(r#"{ path = ["./docs"], query = "*", limit = [1, 2, 3] }"#);
            for t in tools {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("t");
                let schema = t.get("inputSchema").cloned().unwrap_or(Value::Null);
                for g in [&Grant::Unrestricted, &row] {
                    if let Err(e) = bind_schema(name, &schema, g) {
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
        }
    }
});

fn grant(src: &str) -> Grant {
    let t: toml::Table = toml::from_str(&format!("g = {src}")).expect("a valid grant");
    Grant::from_toml(&t["g"]).expect("a valid grant")
}
