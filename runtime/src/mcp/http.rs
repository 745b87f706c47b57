//! The Streamable HTTP transport: each JSON-RPC message is a POST to the server's URL; a request's answer comes back
//! as one JSON body or as an SSE stream (`text/event-stream`) that may carry the server's notifications and requests
//! first. `Mcp-Session-Id` from `initialize` is sent on every later request, and `MCP-Protocol-Version` once
//! negotiated; a 404 on a request that carried a session means the session expired (the client re-initialises).
//! Redirects are refused. HTTP runs on a thread of its own with a private tokio runtime, so the synchronous client
//! works the same inside or outside loom's runtime.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{Incoming, McpError, Transport, Wait, MAX_MESSAGE_BYTES};

/// Where a Streamable HTTP server lives.
#[derive(Clone)]
pub struct HttpSpec {
    /// Its endpoint.
    pub url: reqwest::Url,
    /// Extra headers (values may hold secrets: never printed).
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for HttpSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpSpec")
            .field("url", &self.url.as_str())
            .field("headers", &names)
            .finish()
    }
}

/// What the HTTP thread reports about one request.
enum Event {
    Got(Incoming),
    Fail(McpError),
}

struct Job {
    body: Json,
    /// The request's id; `None` for notifications and responses (their replies are not waited for).
    id: Option<Json>,
    delete: bool,
    /// Open the GET stream for the server's own messages (sent once, after `initialize`).
    listen: bool,
}

/// Session state shared with the HTTP thread.
#[derive(Default)]
struct Shared {
    session: Option<String>,
    version: Option<String>,
}

/// A Streamable HTTP connection.
pub struct HttpTransport {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    events: Receiver<(Json, Event)>,
    shared: Arc<Mutex<Shared>>,
    current: Option<Json>,
}

impl HttpTransport {
    /// Starts the HTTP thread (no request is sent yet).
    pub fn new(spec: HttpSpec, _startup: Duration) -> Result<HttpTransport, McpError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| McpError::Failed(format!("cannot build an HTTP client: {e}")))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| McpError::Failed(format!("cannot start the HTTP thread: {e}")))?;
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let (tx, events) = mpsc::channel();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = shared.clone();
        std::thread::spawn(move || {
            rt.block_on(async move {
                while let Some(job) = rx.recv().await {
                    let (client, spec, state, tx) =
                        (client.clone(), spec.clone(), state.clone(), tx.clone());
                    if job.listen {
                        tokio::spawn(async move { listen(&client, &spec, &state, &tx).await });
                        continue;
                    }
                    if job.delete {
                        // the last job: end the session, briefly, then stop
                        let _ = tokio::time::timeout(
                            Duration::from_secs(2),
                            post(&client, &spec, &state, job, &tx),
                        )
                        .await;
                        return;
                    }
                    tokio::spawn(async move { post(&client, &spec, &state, job, &tx).await });
                }
            });
        });
        Ok(HttpTransport {
            jobs,
            events,
            shared,
            current: None,
        })
    }
}

fn headers_of(spec: &HttpSpec, shared: &Mutex<Shared>) -> reqwest::header::HeaderMap {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut h = HeaderMap::new();
    let mut put = |k: &str, v: &str| {
        if let (Ok(k), Ok(mut v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            v.set_sensitive(true);
            h.insert(k, v);
        }
    };
    for (k, v) in &spec.headers {
        put(k, v);
    }
    put("content-type", "application/json");
    put("accept", "application/json, text/event-stream");
    if let Ok(s) = shared.lock() {
        if let Some(id) = &s.session {
            put("mcp-session-id", id);
        }
        if let Some(v) = &s.version {
            put("mcp-protocol-version", v);
        }
    }
    h
}

async fn post(
    client: &reqwest::Client,
    spec: &HttpSpec,
    shared: &Mutex<Shared>,
    job: Job,
    tx: &mpsc::Sender<(Json, Event)>,
) {
    let id = job.id.clone().unwrap_or(Json::Null);
    let send = |e: Event| {
        let _ = tx.send((id.clone(), e));
    };
    let had_session = shared.lock().map(|s| s.session.is_some()).unwrap_or(false);
    let builder = if job.delete {
        client.delete(spec.url.clone())
    } else {
        client.post(spec.url.clone()).body(job.body.to_string())
    };
    let resp = match builder.headers(headers_of(spec, shared)).send().await {
        Ok(r) => r,
        Err(e) => {
            // reqwest's error names the URL, never a header
            return send(Event::Fail(McpError::Dead(format!(
                "cannot reach the server: {e}"
            ))));
        }
    };
    if job.delete || job.id.is_none() {
        return;
    }
    let status = resp.status();
    if let Some(sid) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        if let Ok(mut s) = shared.lock() {
            s.session = Some(sid.to_string());
        }
    }
    if status == reqwest::StatusCode::NOT_FOUND && had_session {
        if let Ok(mut s) = shared.lock() {
            s.session = None;
        }
        return send(Event::Fail(McpError::SessionExpired));
    }
    if status.is_redirection() {
        let to = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        return send(Event::Fail(McpError::Failed(format!(
            "the server redirects ({status}) to {to}; loom does not follow redirects — put the final URL in url"
        ))));
    }
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let mut resp = resp;
    if !status.is_success() {
        let body = read_capped(&mut resp, 500)
            .await
            .map(|(b, _)| b)
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body).trim().to_string();
        return send(Event::Fail(McpError::Failed(format!(
            "the server answered HTTP {status}: {body}"
        ))));
    }
    if !is_sse {
        return match read_capped(&mut resp, MAX_MESSAGE_BYTES).await {
            Ok((_, Some(total))) => send(Event::Got(Incoming::TooLarge(total))),
            Ok((body, None)) => match serde_json::from_slice::<Json>(&body) {
                Ok(v) => send(Event::Got(Incoming::Message(v))),
                Err(e) => send(Event::Fail(McpError::Failed(format!(
                    "the server's answer is not JSON: {e}"
                )))),
            },
            Err(e) => send(Event::Fail(McpError::Dead(e))),
        };
    }
    let want = job.id.clone();
    let ended = read_sse(&mut resp, &mut |ev| {
        let done = matches!(&ev, Incoming::Message(m) if m.get("id") == want.as_ref() && m.get("method").is_none())
            || matches!(ev, Incoming::TooLarge(_));
        send(Event::Got(ev));
        done
    })
    .await;
    if let Err(e) = ended {
        send(Event::Fail(McpError::Dead(e)));
    }
}

/// Reads an SSE body, handing each event's message to `on` until it returns true or the stream ends (then
/// [`Incoming::Closed`] is handed over). Events are separated by blank lines; the `data:` lines of one event join
/// with newlines; an event over [`MAX_MESSAGE_BYTES`] is dropped unread as [`Incoming::TooLarge`].
async fn read_sse(
    resp: &mut reqwest::Response,
    on: &mut (dyn FnMut(Incoming) -> bool + Send),
) -> Result<(), String> {
    let mut pending: Vec<u8> = Vec::new();
    let mut data: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => {
                on(Incoming::Closed);
                return Ok(());
            }
            Err(e) => return Err(format!("the event stream broke: {e}")),
        };
        pending.extend_from_slice(&chunk);
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                let event = if dropped > 0 {
                    Some(Incoming::TooLarge(dropped))
                } else if data.is_empty() {
                    None
                } else {
                    serde_json::from_slice::<Json>(&data)
                        .ok()
                        .map(Incoming::Message)
                };
                data.clear();
                dropped = 0;
                if let Some(ev) = event {
                    if on(ev) {
                        return Ok(());
                    }
                }
            } else if let Some(d) = line.strip_prefix(b"data:") {
                let d = d.strip_prefix(b" ").unwrap_or(d);
                if dropped > 0 || data.len() + d.len() > MAX_MESSAGE_BYTES {
                    dropped += data.len() + d.len();
                    data.clear();
                } else {
                    if !data.is_empty() {
                        data.push(b'\n');
                    }
                    data.extend_from_slice(d);
                }
            }
        }
        if pending.len() > MAX_MESSAGE_BYTES {
            dropped += pending.len();
            pending.clear();
        }
    }
}

/// The GET stream a server may open for its own notifications and requests (`tools/list_changed`): each message
/// goes to the transport as if it came with no request. A server without one (405, or no SSE) is fine.
async fn listen(
    client: &reqwest::Client,
    spec: &HttpSpec,
    shared: &Mutex<Shared>,
    tx: &mpsc::Sender<(Json, Event)>,
) {
    let mut headers = headers_of(spec, shared);
    headers.remove("content-type");
    let Ok(mut resp) = client.get(spec.url.clone()).headers(headers).send().await else {
        return;
    };
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !resp.status().is_success() || !is_sse {
        return;
    }
    let _ = read_sse(&mut resp, &mut |ev| match ev {
        Incoming::Message(m) => tx
            .send((Json::Null, Event::Got(Incoming::Message(m))))
            .is_err(),
        _ => false,
    })
    .await;
}

/// Reads a body up to `cap` bytes: the bytes, and the total when it was over (the rest is drained, not kept).
async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, Option<usize>), String> {
    let mut body = Vec::new();
    let mut total = 0usize;
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                total += c.len();
                if total <= cap {
                    body.extend_from_slice(&c);
                }
            }
            Ok(None) => return Ok((body, (total > cap).then_some(total))),
            Err(e) => return Err(format!("the answer broke off: {e}")),
        }
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, message: &Json) -> Result<(), McpError> {
        let id = match (message.get("method"), message.get("id")) {
            (Some(_), Some(id)) => Some(id.clone()),
            _ => None,
        };
        if id.is_some() {
            self.current = id.clone();
        }
        self.jobs
            .send(Job {
                body: message.clone(),
                id,
                delete: false,
                listen: false,
            })
            .map_err(|_| McpError::Dead("the HTTP thread stopped".into()))
    }

    fn next(&mut self, deadline: Instant) -> Wait {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok((_, Event::Got(Incoming::Closed))) => continue,
                Ok((_, Event::Got(m))) => return Wait::Got(m),
                Ok((id, Event::Fail(e))) if Some(&id) == self.current.as_ref() => {
                    return Wait::Fail(e)
                }
                // the failure of an older request that already timed out
                Ok((_, Event::Fail(_))) => continue,
                Err(RecvTimeoutError::Timeout) => return Wait::TimedOut,
                Err(RecvTimeoutError::Disconnected) => {
                    return Wait::Closed("the HTTP thread stopped".into())
                }
            }
        }
    }

    fn stderr_tail(&self) -> String {
        String::new()
    }

    fn negotiated(&mut self, version: &str) {
        if let Ok(mut s) = self.shared.lock() {
            s.version = Some(version.to_string());
        }
        let _ = self.jobs.send(Job {
            body: Json::Null,
            id: None,
            delete: false,
            listen: true,
        });
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        let has_session = self
            .shared
            .lock()
            .map(|s| s.session.is_some())
            .unwrap_or(false);
        if has_session {
            let _ = self.jobs.send(Job {
                body: Json::Null,
                id: None,
                delete: true,
                listen: false,
            });
        }
    }
}
