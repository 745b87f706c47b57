//! JSON-RPC 2.0 messages: the standard error codes, an incoming message classified (request, notification,
//! response, or invalid with the error to answer), and the messages loom sends, built in one place.

use serde_json::{json, Map, Value};

/// The message is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON, but not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The params are wrong (a missing field, an unknown session).
pub const INVALID_PARAMS: i64 = -32602;
/// The callee failed.
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error: code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// `-32602`.
    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    /// The error object a peer answered with, read leniently (a peer is untrusted): a missing code reads as 0, a
    /// missing message as "(no message)".
    pub fn from_peer(error: &Value) -> RpcError {
        RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string(),
        }
    }
}

/// One incoming message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered.
    Request {
        /// Its id (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A response to one of our requests.
    Response {
        /// The id we sent.
        id: Value,
        /// The result, or the error object.
        outcome: Result<Value, Value>,
    },
    /// Not a valid message: answer with this error (and this id, when one could be read).
    Invalid {
        /// The id, or `null`.
        id: Value,
        /// The error.
        error: RpcError,
    },
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Classifies one line of input (a batch is invalid: neither loom peer that reads lines accepts one).
pub fn classify_line(line: &str) -> Incoming {
    match serde_json::from_str(line) {
        Ok(v) => classify(v),
        Err(e) => Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                PARSE_ERROR,
                format!("parse error: the line is not JSON ({e})"),
            ),
        },
    }
}

/// Classifies one parsed message. A batch (an array) is invalid here; a caller that accepts batches classifies
/// their entries one by one.
pub fn classify(value: Value) -> Incoming {
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                "invalid request: a message is one JSON object per line (batches are not supported)",
            ),
        };
    };
    let id = obj.remove("id");
    let invalid = |id: Option<Value>, message: &str| Incoming::Invalid {
        id: id.filter(valid_id).unwrap_or(Value::Null),
        error: RpcError::new(INVALID_REQUEST, format!("invalid request: {message}")),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "\"jsonrpc\" must be \"2.0\"");
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => {
            Incoming::Request { id, method, params }
        }
        (Some(Value::String(_)), Some(id)) => {
            invalid(Some(id), "\"id\" must be a string or an integer")
        }
        (Some(_), id) => invalid(id, "\"method\" must be a string"),
        (None, Some(id)) if valid_id(&id) => match (obj.remove("result"), obj.remove("error")) {
            (Some(result), None) => Incoming::Response {
                id,
                outcome: Ok(result),
            },
            (None, Some(error)) => Incoming::Response {
                id,
                outcome: Err(error),
            },
            _ => invalid(
                Some(id),
                "a response carries exactly one of \"result\" and \"error\"",
            ),
        },
        (None, id) => invalid(id, "no \"method\", and not a response to a request of ours"),
    }
}

/// A request (`params` omitted when `null`).
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    let mut m = envelope(params);
    m.insert("id".into(), id.into());
    m.insert("method".into(), method.into());
    Value::Object(m)
}

/// A notification (`params` omitted when `null`).
pub fn notification(method: &str, params: Value) -> Value {
    let mut m = envelope(params);
    m.insert("method".into(), method.into());
    Value::Object(m)
}

fn envelope(params: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), "2.0".into());
    if !params.is_null() {
        m.insert("params".into(), params);
    }
    m
}

/// A successful reply.
pub fn reply(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error reply.
pub fn reply_error(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn invalid(line: &str, code: i64, id: Value, needle: &str) {
        match classify_line(line) {
            Incoming::Invalid { id: got, error } => {
                assert_eq!((error.code, got), (code, id), "{line}: {}", error.message);
                assert!(error.message.contains(needle), "{line}: {}", error.message);
            }
            other => panic!("{line}: expected an invalid message, got {other:?}"),
        }
    }

    #[test]
    fn lines_are_classified() {
        assert_eq!(
            classify_line(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
            ),
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"protocolVersion": 1})
            }
        );
        assert_eq!(
            classify_line(
                r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#
            ),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({"sessionId": "s"})
            }
        );
        assert_eq!(
            classify_line(r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#),
            Incoming::Response {
                id: json!("a"),
                outcome: Ok(json!({"x": 1}))
            }
        );
        assert_eq!(
            classify_line(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#),
            Incoming::Response {
                id: json!(3),
                outcome: Err(json!({"code": -1, "message": "no"}))
            }
        );
        invalid("{not json", PARSE_ERROR, Value::Null, "parse error");
        invalid("", PARSE_ERROR, Value::Null, "parse error");
        invalid("[1,2]", INVALID_REQUEST, Value::Null, "batches");
        invalid(
            r#"{"id":1,"method":"x"}"#,
            INVALID_REQUEST,
            json!(1),
            "jsonrpc",
        );
        invalid(
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            INVALID_REQUEST,
            json!(1),
            "method",
        );
        invalid(
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
            INVALID_REQUEST,
            Value::Null,
            "\"id\"",
        );
        invalid(
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            INVALID_REQUEST,
            Value::Null,
            "\"id\"",
        );
        invalid(
            r#"{"jsonrpc":"2.0","id":1}"#,
            INVALID_REQUEST,
            json!(1),
            "exactly one",
        );
        invalid(
            r#"{"jsonrpc":"2.0"}"#,
            INVALID_REQUEST,
            Value::Null,
            "no \"method\"",
        );
    }

    #[test]
    fn messages_have_the_json_rpc_shape() {
        assert_eq!(
            request(7u64, "tools/call", json!({"name": "x"})),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}})
        );
        assert_eq!(
            notification("notifications/initialized", Value::Null),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        );
        assert_eq!(
            reply(&json!(1), json!({"stopReason": "end_turn"})),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
        );
        assert_eq!(
            reply_error(&Value::Null, &RpcError::new(PARSE_ERROR, "parse error: x")),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error: x"}})
        );
    }

    #[test]
    fn a_peers_error_object_is_read_leniently() {
        assert_eq!(
            RpcError::from_peer(&json!({"code": -32000, "message": "busy"})),
            RpcError::new(-32000, "busy")
        );
        assert_eq!(
            RpcError::from_peer(&json!("just a string")),
            RpcError::new(0, "(no message)")
        );
    }
}
