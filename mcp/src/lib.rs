//! # loom-mcp: the JSON-RPC client for MCP servers and provider processes
//!
//! The client behind the `mcp-server` meta-factory and loom's external providers: JSON-RPC 2.0 over stdio
//! ([`StdioSpawn`]) or Streamable HTTP, `initialize` with protocol version negotiation, paginated `tools/list`,
//! `tools/call`, startup and call timeouts, `notifications/tools/list_changed` (the next call re-lists; a tool that
//! disappeared is refused), bounded messages, and a restart of a server that died, on the next call, unless it
//! crash-loops. [`server_config`] turns a `[providers]` table into a [`ServerConfig`] (program, scrubbed environment,
//! secrets looked up through [`SecretLookup`], or a URL with headers).
//!
//! The client is synchronous on purpose: boot (which lists every server's tools) is synchronous, and a tool call
//! runs it on a blocking thread. One [`McpServer`] per `[providers]` handle; calls to one server are serialised.
//!
//! ## What this crate must never do
//! Decide authority: which tool instance may be called with which arguments is the kernel's (pre-binding in
//! `loom_kernel::mcp`), and the runtime's tool adapter enforces it before a call reaches this client. Pass a
//! server any of loom's environment it was not given (a spawned server gets a scrubbed environment plus the
//! secrets its table names), put a secret value into an error, or outlive its owner (dropping a server kills its
//! whole process group). No manifest or storage knowledge: callers pass the table, the directories and the secrets.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod http;
mod restart;
mod stdio;

#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loom_jsonrpc::{self as jsonrpc, Incoming, RpcError, METHOD_NOT_FOUND};
use serde_json::{json, Value as Json};

pub use loom_protocol::{Secret, SecretLookup};

pub use config::{
    inherited_env, server_config, ConfigError, Launch, ServerConfig, DEFAULT_CALL_TIMEOUT_MS,
    DEFAULT_STARTUP_TIMEOUT_MS,
};
pub use stdio::{StdioSpawn, STDERR_TAIL_BYTES};

/// The protocol versions this client speaks, newest first; `initialize` offers the first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// The largest JSON-RPC message accepted from a server; a larger one is dropped unread and the call fails.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The most result text handed to the model; the rest is cut with a note.
pub const MAX_RESULT_CHARS: usize = 100_000;

/// How often a waiting call checks whether its turn was cancelled.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How often a call waiting for the server's previous call re-tries the server's lock.
const LOCK_POLL: Duration = Duration::from_millis(2);

/// The most already-arrived messages handled between calls: a server that keeps talking cannot hold a call there.
const DRAIN_MAX: usize = 64;

/// `tools/list` pages followed before giving up (a server that keeps returning a cursor).
const MAX_PAGES: usize = 100;

/// What a transport read.
#[derive(Debug)]
pub(crate) enum Received {
    /// A JSON-RPC message.
    Message(Json),
    /// A message over [`MAX_MESSAGE_BYTES`], dropped unread; the bytes seen when it crossed the limit.
    TooLarge(usize),
    /// A line that is not JSON (logging on stdout): skipped.
    Noise,
}

/// The outcome of waiting for the next message.
pub(crate) enum Wait {
    /// A message arrived.
    Got(Received),
    /// The deadline passed.
    TimedOut,
    /// The server is gone; why.
    Closed(String),
    /// The exchange failed otherwise (an HTTP status, an expired session).
    Fail(McpError),
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq)]
pub enum McpError {
    /// The server is gone (exited, closed its pipes, refused the connection).
    Dead(String),
    /// No answer in time.
    Timeout(String),
    /// The HTTP session expired (404): re-initialise and retry.
    SessionExpired,
    /// The caller stopped waiting (its turn was cancelled).
    Cancelled(String),
    /// Anything else: a JSON-RPC error, a malformed or oversized answer.
    Failed(String),
}

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpError::Dead(m)
            | McpError::Timeout(m)
            | McpError::Failed(m)
            | McpError::Cancelled(m) => f.write_str(m),
            McpError::SessionExpired => {
                f.write_str("the server no longer knows this session (HTTP 404)")
            }
        }
    }
}

/// Why [`McpServer::start`] failed. Each message names the server, how it is launched, what failed, and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// It could not be launched, or exited (or closed its pipes, or refused the connection) while starting.
    #[error("{0}")]
    Unavailable(String),
    /// It did not finish `initialize` and `tools/list` within its startup timeout.
    #[error("{0}")]
    TimedOut(String),
    /// It answered, but wrongly: a protocol version loom does not speak, a malformed or oversized answer, an error.
    #[error("{0}")]
    Failed(String),
}

/// Why a call ([`McpServer::call`]) or a request ([`McpServer::request`]) failed. Each message names the server
/// and says whether loom restarts it on the next call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The server is gone (and could not be restarted, or crash-looped and is given up).
    #[error("{0}")]
    Unavailable(String),
    /// No answer within the call timeout: the hung server was stopped.
    #[error("{0}")]
    TimedOut(String),
    /// Its previous call still held it when this call's deadline passed.
    #[error("{0}")]
    Busy(String),
    /// The turn was cancelled while the call waited.
    #[error("{0}")]
    Cancelled(String),
    /// The server no longer lists the tool.
    #[error("{0}")]
    ToolGone(String),
    /// The tool's new listing no longer fits its grant (the caller's re-check refused it).
    #[error("{0}")]
    Refused(String),
    /// The server answered with an error, or a malformed or oversized answer.
    #[error("{0}")]
    Failed(String),
}

impl StartError {
    fn new(e: &McpError, message: String) -> StartError {
        match e {
            McpError::Dead(_) => StartError::Unavailable(message),
            McpError::Timeout(_) => StartError::TimedOut(message),
            McpError::SessionExpired | McpError::Failed(_) | McpError::Cancelled(_) => {
                StartError::Failed(message)
            }
        }
    }
}

impl CallError {
    fn new(e: &McpError, message: String) -> CallError {
        match e {
            McpError::Dead(_) => CallError::Unavailable(message),
            McpError::Timeout(_) => CallError::TimedOut(message),
            McpError::Cancelled(_) => CallError::Cancelled(message),
            McpError::SessionExpired | McpError::Failed(_) => CallError::Failed(message),
        }
    }
}

/// A way to exchange JSON-RPC messages with one server.
pub(crate) trait Transport: Send {
    /// Sends one message, giving up at `deadline` (a server that stopped reading): then the connection is unusable.
    fn send(&mut self, message: &Json, deadline: Instant) -> Result<(), McpError>;
    /// Queues a message that needs no answer (a reply to the server's own request, a cancellation) without waiting:
    /// it is dropped when the server is not reading what it was already sent.
    fn post(&mut self, message: &Json);
    /// Waits for the next message until `deadline`.
    fn next(&mut self, deadline: Instant) -> Wait;
    /// The server's recent stderr (stdio only).
    fn stderr_tail(&self) -> String;
    /// The protocol version `initialize` settled on (HTTP sends it on every later request).
    fn negotiated(&mut self, _version: &str) {}
}

/// One tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTool {
    /// Its MCP name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema (as sent; may be malformed — binding checks it).
    pub input_schema: Json,
}

/// A tool call's result, flattened for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The text the model sees.
    pub text: String,
    /// True when the server flagged the result as an error.
    pub is_error: bool,
    /// The raw result (content blocks, structured content), for hosts; `None` when it was cut.
    pub raw: Option<Json>,
}

/// A live, initialised connection.
struct Conn {
    transport: Box<dyn Transport>,
    next_id: u64,
    list_changed: bool,
}

impl Conn {
    /// Sends a request and waits for its response until `deadline` (`timeout` says how long that was, for the
    /// message), answering the server's own requests and noting `tools/list_changed` meanwhile. The deadline holds
    /// whatever the server sends meanwhile.
    fn request(
        &mut self,
        method: &str,
        params: Json,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Json, McpError> {
        self.request_until(method, params, deadline, timeout, &|| false)
    }

    /// [`Conn::request`] that gives up (telling the server) as soon as `stop` says so — checked every
    /// [`STOP_POLL`].
    fn request_until(
        &mut self,
        method: &str,
        params: Json,
        deadline: Instant,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Json, McpError> {
        self.next_id += 1;
        let id = self.next_id;
        let timed_out = || {
            McpError::Timeout(format!(
                "the server did not answer {method} within {} ms",
                timeout.as_millis()
            ))
        };
        let sent = self
            .transport
            .send(&jsonrpc::request(id, method, params), deadline);
        match sent {
            Err(McpError::Timeout(why)) => {
                return Err(McpError::Timeout(format!("{}: {why}", timed_out())))
            }
            other => other?,
        }
        loop {
            if stop() {
                self.transport
                    .post(&cancelled(id, "the turn was cancelled"));
                return Err(McpError::Cancelled(format!("{method} was cancelled")));
            }
            // checked on every message too: a server that keeps talking cannot push the deadline back
            if Instant::now() >= deadline {
                self.transport.post(&cancelled(id, "timed out"));
                return Err(timed_out());
            }
            let slice = deadline.min(Instant::now() + STOP_POLL);
            let msg = match self.transport.next(slice) {
                Wait::Got(Received::Message(m)) => m,
                Wait::Got(Received::Noise) => continue,
                Wait::Got(Received::TooLarge(seen)) => {
                    return Err(McpError::Failed(format!(
                        "the server's answer to {method} is over loom's limit of {MAX_MESSAGE_BYTES} bytes; loom \
                         stopped reading it at {seen} bytes (ask for less, e.g. narrower arguments)"
                    )))
                }
                Wait::Closed(why) => return Err(McpError::Dead(why)),
                Wait::Fail(e) => return Err(e),
                Wait::TimedOut => continue,
            };
            if let Some(result) = self.handle(msg, id)? {
                return Ok(result);
            }
        }
    }

    /// Handles one incoming message; returns the result when it answers request `id`.
    fn handle(&mut self, msg: Json, id: u64) -> Result<Option<Json>, McpError> {
        if let Json::Array(batch) = msg {
            let mut answer = None;
            for m in batch {
                if let Some(r) = self.handle(m, id)? {
                    answer = Some(r);
                }
            }
            return Ok(answer);
        }
        match jsonrpc::classify(msg) {
            Incoming::Request {
                id: req_id, method, ..
            } => {
                // the server's own request: loom offers no client features (sampling, roots, elicitation)
                let reply = if method == "ping" {
                    jsonrpc::reply(&req_id, json!({}))
                } else {
                    let e =
                        RpcError::new(METHOD_NOT_FOUND, format!("loom does not offer {method}"));
                    jsonrpc::reply_error(&req_id, &e)
                };
                // never waited for: a server that asks and stops reading cannot hold the call (or the lock)
                self.transport.post(&reply);
                Ok(None)
            }
            Incoming::Notification { method, .. } => {
                if method == "notifications/tools/list_changed" {
                    self.list_changed = true;
                }
                Ok(None)
            }
            Incoming::Response { id: got, outcome } if got.as_u64() == Some(id) => match outcome {
                Ok(result) => Ok(Some(result)),
                Err(error) => {
                    let RpcError { code, message } = RpcError::from_peer(&error);
                    Err(McpError::Failed(format!(
                        "the server answered with error {code}: {message}"
                    )))
                }
            },
            Incoming::Invalid { id: got, error } if got.as_u64() == Some(id) => {
                // an answer to our request, malformed (both or neither of result and error, no "jsonrpc")
                Err(McpError::Failed(format!(
                    "the server's answer is not valid JSON-RPC: {}",
                    error.message
                )))
            }
            // a late answer to a request that timed out, or junk
            _ => Ok(None),
        }
    }

    /// Handles what already arrived (a `list_changed` sent after the last answer), without waiting, and at most
    /// [`DRAIN_MAX`] messages: a server that keeps talking is read on while the call waits.
    fn drain(&mut self) {
        for _ in 0..DRAIN_MAX {
            match self.transport.next(Instant::now()) {
                Wait::Got(Received::Message(m)) => {
                    if self.handle(m, 0).is_err() {
                        return;
                    }
                }
                Wait::Got(Received::Noise) => {}
                _ => return,
            }
        }
    }

    fn notify(&mut self, method: &str, deadline: Instant) -> Result<(), McpError> {
        self.transport
            .send(&jsonrpc::notification(method, Json::Null), deadline)
    }
}

/// The `notifications/cancelled` loom sends for request `id`.
fn cancelled(id: u64, reason: &str) -> Json {
    jsonrpc::notification(
        "notifications/cancelled",
        json!({ "requestId": id, "reason": reason }),
    )
}

/// The protocol version of loom's own provider protocol (runtime/PROVIDERS.md).
pub const PROVIDER_PROTOCOL: &str = "loom-provider/1";

/// Which protocol a server speaks over the shared JSON-RPC client.
#[derive(Debug, Clone)]
pub enum Dialect {
    /// The Model Context Protocol: `initialize` with MCP versions, then paginated `tools/list`.
    Mcp,
    /// loom's provider protocol (runtime/PROVIDERS.md): `initialize` returns the contributions, tools included.
    Provider {
        /// Extra `initialize` params (`handle`, `dataDir`, `cwd`).
        init: serde_json::Map<String, Json>,
        /// For messages: the source and where it is installed.
        origin: String,
    },
}

/// One MCP server or external provider (one `[providers]` handle): its connection, its last tool listing, and its
/// recent deaths.
pub struct McpServer {
    /// The `[providers]` handle (or the inline spec's description).
    pub handle: String,
    /// How messages name it: `[providers].<handle>`, or what named it on the command line (`loom mcp inspect`).
    subject: String,
    /// Whether it is a `[providers]` entry of a manifest (its fixes then point at that entry).
    in_manifest: bool,
    cfg: ServerConfig,
    dialect: Dialect,
    inner: Mutex<Inner>,
}

struct Inner {
    conn: Option<Conn>,
    restarts: restart::RestartGuard,
    tools: Vec<UpstreamTool>,
    /// The `initialize` result (a provider's contributions live there).
    info: Json,
    /// Why the server died, when it did.
    death: Option<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Starts the server, initialises it and lists its tools. The error names the handle, what failed, the
    /// server's stderr tail and a fix.
    pub fn start(handle: &str, cfg: ServerConfig) -> Result<Arc<McpServer>, StartError> {
        McpServer::start_as(handle, cfg, Dialect::Mcp)
    }

    /// [`McpServer::start`] for a server speaking `dialect`.
    pub fn start_as(
        handle: &str,
        cfg: ServerConfig,
        dialect: Dialect,
    ) -> Result<Arc<McpServer>, StartError> {
        McpServer::start_named(handle, None, cfg, dialect)
    }

    /// [`McpServer::start_as`] for a server named on the command line by `named` (`loom mcp inspect ./x.mjs`) when
    /// given, so its messages name that rather than a `[providers]` entry that does not exist.
    pub fn start_named(
        handle: &str,
        named: Option<&str>,
        cfg: ServerConfig,
        dialect: Dialect,
    ) -> Result<Arc<McpServer>, StartError> {
        let server = McpServer {
            handle: handle.to_string(),
            subject: named.map_or_else(|| format!("[providers].{handle}"), |n| format!("{n:?}")),
            in_manifest: named.is_none(),
            cfg,
            dialect,
            inner: Mutex::new(Inner {
                conn: None,
                restarts: restart::RestartGuard::default(),
                tools: vec![],
                info: Json::Null,
                death: None,
            }),
        };
        let (conn, tools, info) = server
            .connect()
            .map_err(|e| StartError::new(&e, server.explain("cannot start", &e)))?;
        if let Ok(mut inner) = server.inner.lock() {
            inner.conn = Some(conn);
            inner.tools = tools;
            inner.info = info;
        }
        Ok(Arc::new(server))
    }

    /// What `initialize` answered (for a provider: its `contributes`).
    pub fn info(&self) -> Json {
        self.inner
            .lock()
            .map(|i| i.info.clone())
            .unwrap_or_default()
    }

    /// "MCP server" or "provider", for messages.
    pub fn noun(&self) -> &'static str {
        match self.dialect {
            Dialect::Mcp => "MCP server",
            Dialect::Provider { .. } => "provider",
        }
    }

    /// The tools listed at start (or at the latest re-list).
    pub fn tools(&self) -> Vec<UpstreamTool> {
        self.inner
            .lock()
            .map(|i| i.tools.clone())
            .unwrap_or_default()
    }

    /// How the server is launched, for messages (`npm @x/y`, `command node a.mjs`, `url https://…`).
    pub fn launch(&self) -> String {
        match &self.dialect {
            Dialect::Mcp => self.cfg.launch.describe(),
            Dialect::Provider { origin, .. } => origin.clone(),
        }
    }

    fn connect(&self) -> Result<(Conn, Vec<UpstreamTool>, Json), McpError> {
        let transport: Box<dyn Transport> = match &self.cfg.launch {
            Launch::Stdio(spawn) => {
                Box::new(stdio::StdioTransport::spawn(spawn).map_err(McpError::Dead)?)
            }
            Launch::Http(h) => Box::new(http::HttpTransport::new(
                h.clone(),
                self.cfg.startup_timeout,
            )?),
        };
        let mut conn = Conn {
            transport,
            next_id: 0,
            list_changed: false,
        };
        // one deadline for the whole start (initialize, every tools/list page), whatever the server sends meanwhile
        let timeout = self.cfg.startup_timeout;
        let deadline = Instant::now() + timeout;
        let fail = |conn: &Conn, e: McpError| with_stderr(e, &conn.transport.stderr_tail());
        if let Dialect::Provider { init, .. } = &self.dialect {
            let mut params = init.clone();
            params.insert("protocolVersion".into(), PROVIDER_PROTOCOL.into());
            params.insert(
                "clientInfo".into(),
                json!({ "name": "loom", "version": env!("CARGO_PKG_VERSION") }),
            );
            let info = conn
                .request("initialize", Json::Object(params), deadline, timeout)
                .map_err(|e| fail(&conn, e))?;
            let version = info.get("protocolVersion").and_then(Json::as_str);
            if version != Some(PROVIDER_PROTOCOL) {
                return Err(fail(
                    &conn,
                    McpError::Failed(format!(
                        "the provider answered initialize with protocolVersion {}; loom speaks {PROVIDER_PROTOCOL} \
                         (runtime/PROVIDERS.md)",
                        version.map_or("(none)".to_string(), |v| format!("{v:?}"))
                    )),
                ));
            }
            let tools = match info.pointer("/contributes/tools") {
                None | Some(Json::Null) => vec![],
                Some(Json::Array(list)) => upstream_tools(list),
                Some(_) => {
                    return Err(McpError::Failed(
                        "the provider's contributes.tools is not an array".into(),
                    ))
                }
            };
            conn.notify("notifications/initialized", deadline)
                .map_err(|e| fail(&conn, e))?;
            // a provider's tools are fixed by initialize: a list_changed is not followed
            conn.list_changed = false;
            return Ok((conn, tools, info));
        }
        let init = conn
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSIONS[0],
                    "capabilities": {},
                    "clientInfo": { "name": "loom", "version": env!("CARGO_PKG_VERSION") }
                }),
                deadline,
                timeout,
            )
            .map_err(|e| fail(&conn, e))?;
        let version = init
            .get("protocolVersion")
            .and_then(Json::as_str)
            .unwrap_or("");
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(McpError::Failed(format!(
                "the server speaks MCP protocol version {version:?}; loom speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
        conn.transport.negotiated(version);
        conn.notify("notifications/initialized", deadline)
            .map_err(|e| fail(&conn, e))?;
        let tools = list_tools(&mut conn, deadline, timeout).map_err(|e| fail(&conn, e))?;
        // a list_changed sent during start-up is already answered by this listing
        conn.list_changed = false;
        Ok((conn, tools, init))
    }

    /// "provider `fs` (npm @x/fs): <what>: <why>" plus the fix.
    fn explain(&self, what: &str, e: &McpError) -> String {
        let fix = match (e, &self.dialect) {
            (McpError::Timeout(_) | McpError::Dead(_), Dialect::Provider { .. }) => format!(
                "; check that the provider starts and speaks {PROVIDER_PROTOCOL} (`loom providers info {}`), fix \
                 its source, then run `loom install` again",
                self.handle
            ),
            (McpError::Timeout(_), _) if self.in_manifest => format!(
                "; if the server is just slow to start, raise startup_timeout_ms / call_timeout_ms on {}",
                self.subject
            ),
            (McpError::Timeout(_), _) => "; if the server is just slow to start, give it a [providers] entry with a \
                                          higher startup_timeout_ms"
                .to_string(),
            (McpError::Dead(_), _) if self.in_manifest => format!(
                "; check that {} launches a working MCP server (try `loom mcp inspect` on it)",
                self.subject
            ),
            (McpError::Dead(_), _) => {
                format!("; check that {} launches a working MCP server", self.subject)
            }
            _ => String::new(),
        };
        format!(
            "{} {} ({}): {what}: {e}{fix}",
            self.noun(),
            self.subject,
            self.launch()
        )
    }

    /// Calls `tool` with `arguments`. `still_ok` re-checks the tool's current listing when the server changed its
    /// tool list (the tool's grant must still bind to its schema). A dead server is reported, and restarted on the
    /// next call unless it crash-looped.
    pub fn call(
        &self,
        tool: &str,
        arguments: Json,
        still_ok: &dyn Fn(&UpstreamTool) -> Result<(), String>,
    ) -> Result<CallResult, CallError> {
        self.call_until(tool, arguments, still_ok, &|| false)
    }

    /// [`McpServer::call`] that stops waiting (and sends `notifications/cancelled`) once `stop` says so, so a
    /// cancelled turn frees the server for the next call.
    pub fn call_until(
        &self,
        tool: &str,
        arguments: Json,
        still_ok: &dyn Fn(&UpstreamTool) -> Result<(), String>,
        stop: &dyn Fn() -> bool,
    ) -> Result<CallResult, CallError> {
        let timeout = self.cfg.call_timeout;
        let (mut inner, deadline) = self.connected(timeout, stop)?;
        let Some(conn) = inner.conn.as_mut() else {
            return Err(self.not_connected());
        };
        conn.drain();
        if conn.list_changed && matches!(self.dialect, Dialect::Mcp) {
            conn.list_changed = false;
            let listed = list_tools(conn, deadline, timeout);
            match listed {
                Ok(tools) => inner.tools = tools,
                Err(e) => return Err(self.fail(&mut inner, e, "cannot re-list its tools")),
            }
        }
        let Some(current) = inner.tools.iter().find(|t| t.name == tool).cloned() else {
            return Err(CallError::ToolGone(format!(
                "{} {} no longer offers the tool `{tool}` (it changed its tool list); the call \
                 is refused — restart loom after checking [tools] against `loom mcp inspect`",
                self.noun(),
                self.subject
            )));
        };
        still_ok(&current).map_err(CallError::Refused)?;
        let Some(conn) = inner.conn.as_mut() else {
            return Err(self.not_connected());
        };
        let params = json!({ "name": tool, "arguments": arguments });
        let mut answer = conn.request_until("tools/call", params.clone(), deadline, timeout, stop);
        if answer == Err(McpError::SessionExpired) {
            // the HTTP server forgot the session: a fresh one, then the same call once more
            inner.conn = None;
            let (mut conn, tools, _) = self
                .connect()
                .map_err(|e| CallError::new(&e, self.explain("cannot re-initialise", &e)))?;
            inner.tools = tools;
            let deadline = Instant::now() + timeout;
            answer = conn.request_until("tools/call", params, deadline, timeout, stop);
            inner.conn = Some(conn);
        }
        match answer {
            Ok(result) => Ok(flatten_result(&result)),
            Err(e) => Err(self.fail(&mut inner, e, &format!("calling `{tool}` failed"))),
        }
    }

    /// The state, with a live connection, and the deadline of a call of `timeout` made now: a server that died is
    /// restarted here (within its startup timeout; the call's deadline then counts from the restart), unless it
    /// crash-looped. The wait for the server's previous call ends at the deadline too, or when `stop` says so.
    fn connected(
        &self,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<(std::sync::MutexGuard<'_, Inner>, Instant), CallError> {
        let mut deadline = Instant::now() + timeout;
        let mut inner = self.lock_until(deadline, timeout, stop)?;
        if inner.conn.is_none() {
            if inner.restarts.given_up() {
                return Err(CallError::Unavailable(format!(
                    "{} {} ({}) {} (last: {}); loom will not restart it again in this session — \
                     fix it, then restart loom",
                    self.noun(),
                    self.subject,
                    self.launch(),
                    restart::RestartGuard::why(),
                    inner.death.clone().unwrap_or_default()
                )));
            }
            // a restart that fails is one more death: a server that cannot come back is given up like a crash loop
            let (conn, tools, info) = match self.connect() {
                Ok(started) => started,
                Err(e) => {
                    let mut msg = self.explain("cannot restart", &e);
                    self.died(&mut inner, e.to_string(), &mut msg);
                    return Err(CallError::new(&e, msg));
                }
            };
            inner.conn = Some(conn);
            inner.tools = tools;
            inner.info = info;
            deadline = Instant::now() + timeout;
        }
        Ok((inner, deadline))
    }

    /// The server's state, waited for until `deadline` (a call of `timeout`) or until `stop` says so: the state is
    /// only ever held for one exchange, which its own deadline bounds.
    fn lock_until(
        &self,
        deadline: Instant,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<std::sync::MutexGuard<'_, Inner>, CallError> {
        loop {
            match self.inner.try_lock() {
                Ok(inner) => return Ok(inner),
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    return Err(CallError::Unavailable(format!(
                        "{} {}: its state is poisoned",
                        self.noun(),
                        self.subject
                    )))
                }
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            if stop() {
                return Err(CallError::Cancelled(format!(
                    "{} {}: cancelled while its previous call was still running",
                    self.noun(),
                    self.subject
                )));
            }
            if Instant::now() >= deadline {
                return Err(CallError::Busy(format!(
                    "{} {} ({}): busy: its previous call still ran after {} ms; raise \
                     call_timeout_ms on {} if its calls are just slow",
                    self.noun(),
                    self.subject,
                    self.launch(),
                    timeout.as_millis(),
                    self.subject
                )));
            }
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// Sends one request of the provider protocol other than `tools/call` (`session/load`, `session/append`) and
    /// returns its result. A dead provider is reported, and restarted on the next request, as for calls.
    pub fn request(&self, method: &str, params: Json) -> Result<Json, CallError> {
        self.request_until(method, params, &|| false)
    }

    /// [`McpServer::request`] that stops waiting (and sends `notifications/cancelled`) once `stop` says so.
    pub fn request_until(
        &self,
        method: &str,
        params: Json,
        stop: &dyn Fn() -> bool,
    ) -> Result<Json, CallError> {
        let timeout = self.cfg.call_timeout;
        let (mut inner, deadline) = self.connected(timeout, stop)?;
        let answer = match inner.conn.as_mut() {
            Some(conn) => conn.request_until(method, params, deadline, timeout, stop),
            None => Err(McpError::Dead("not connected".into())),
        };
        answer.map_err(|e| self.fail(&mut inner, e, &format!("{method} failed")))
    }

    /// Reports a failed exchange. A dead server's connection is dropped so the next call restarts it; so is a hung
    /// one's (no answer, or its input not read, within the deadline): its process is stopped, and the hang counts as
    /// a death for the crash-loop rule.
    fn fail(&self, inner: &mut Inner, e: McpError, what: &str) -> CallError {
        let tail = inner
            .conn
            .as_ref()
            .map(|c| c.transport.stderr_tail())
            .unwrap_or_default();
        let e = with_stderr(e, &tail);
        let mut msg = self.explain(what, &e);
        match &e {
            McpError::Dead(why) => {
                inner.conn = None;
                self.died(inner, why.clone(), &mut msg);
            }
            McpError::Timeout(why) => {
                // dropping the connection kills the process group (stdio) or ends the session (HTTP)
                inner.conn = None;
                msg.push_str(&format!("; loom stopped the hung {}", self.noun()));
                self.died(inner, why.clone(), &mut msg);
            }
            _ => {}
        }
        CallError::new(&e, msg)
    }

    fn not_connected(&self) -> CallError {
        CallError::Unavailable(format!("{} {}: not connected", self.noun(), self.subject))
    }

    /// Records a death (`why`, with the stderr tail) and says in `msg` whether the next call restarts the server.
    fn died(&self, inner: &mut Inner, why: String, msg: &mut String) {
        inner.death = Some(why);
        if inner.restarts.died() {
            msg.push_str(&format!(
                "; it {}, so loom will not restart it again in this session — fix the server, then restart loom",
                restart::RestartGuard::why()
            ));
        } else {
            msg.push_str("; loom restarts it on the next call");
        }
    }
}

/// Appends the server's stderr tail to a failure that has one.
fn with_stderr(e: McpError, tail: &str) -> McpError {
    if tail.is_empty() {
        return e;
    }
    let add = |m: String| format!("{m}; the server's stderr ends with:\n{tail}\n");
    match e {
        McpError::Dead(m) => McpError::Dead(add(m)),
        McpError::Timeout(m) => McpError::Timeout(add(m)),
        McpError::Failed(m) => McpError::Failed(add(m)),
        other => other,
    }
}

/// `tools/list`, following `nextCursor`.
fn list_tools(
    conn: &mut Conn,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<UpstreamTool>, McpError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let page = conn.request("tools/list", params, deadline, timeout)?;
        let Some(list) = page.get("tools").and_then(Json::as_array) else {
            return Err(McpError::Failed(
                "the server's tools/list answer has no `tools` array".into(),
            ));
        };
        tools.extend(upstream_tools(list));
        match page.get("nextCursor").and_then(Json::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(tools),
        }
    }
    Err(McpError::Failed(format!(
        "the server's tools/list did not end after {MAX_PAGES} pages"
    )))
}

/// Tool entries as MCP and the provider protocol list them; an entry without a name cannot be named in `[tools]` and
/// is skipped.
fn upstream_tools(list: &[Json]) -> Vec<UpstreamTool> {
    list.iter()
        .filter_map(|t| {
            Some(UpstreamTool {
                name: t.get("name").and_then(Json::as_str)?.to_string(),
                description: t
                    .get("description")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string(),
                input_schema: t.get("inputSchema").cloned().unwrap_or(Json::Null),
            })
        })
        .collect()
}

/// Flattens a `tools/call` result: text blocks as text, other blocks as a short note, cut at [`MAX_RESULT_CHARS`].
pub fn flatten_result(result: &Json) -> CallResult {
    let mut parts = Vec::new();
    for block in result
        .get("content")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let kind = block.get("type").and_then(Json::as_str).unwrap_or("");
        let s = |k: &str| block.get(k).and_then(Json::as_str).unwrap_or("");
        parts.push(match kind {
            "text" => s("text").to_string(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes of base64]",
                s("mimeType"),
                s("data").len()
            ),
            "resource" => {
                let r = &block["resource"];
                match r.get("text").and_then(Json::as_str) {
                    Some(t) => t.to_string(),
                    None => format!(
                        "[resource {}]",
                        r.get("uri").and_then(Json::as_str).unwrap_or("")
                    ),
                }
            }
            "resource_link" => format!("[resource link {} {}]", s("name"), s("uri")),
            other => format!("[{other} content]"),
        });
    }
    if parts.is_empty() {
        if let Some(sc) = result.get("structuredContent") {
            parts.push(sc.to_string());
        }
    }
    let mut text = parts.join("\n");
    let mut raw = Some(result.clone());
    if text.chars().count() > MAX_RESULT_CHARS {
        let total = text.len();
        text = text.chars().take(MAX_RESULT_CHARS).collect();
        text.push_str(&format!(
            "\n[… cut: the result was {total} bytes; loom passes the first {MAX_RESULT_CHARS} characters]"
        ));
        raw = None;
    }
    CallResult {
        text,
        is_error: result
            .get("isError")
            .and_then(Json::as_bool)
            .unwrap_or(false),
        raw,
    }
}
