//! The Streamable HTTP transport: each JSON-RPC message is a POST to the server's URL; a request's answer comes back
//! as one JSON body or as an SSE stream (`text/event-stream`) that may carry the server's notifications and requests
//! first. `Mcp-Session-Id` from `initialize` is sent on every later request, and `MCP-Protocol-Version` once
//! negotiated; a 404 on a request that carried a session means the session expired (the client re-initialises).
//! Redirects are refused. HTTP runs on a thread of its own with a private tokio runtime, so the synchronous client
//! works the same inside or outside loom's runtime.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{McpError, Received, Transport, Wait, MAX_MESSAGE_BYTES};
use loom_jsonrpc::{parse_message, Frame, SseFramer};

/// Messages read ahead of the client; when they are not taken, the HTTP thread stops reading (the server's stream
/// waits on TCP).
const EVENT_QUEUE: usize = 8;

/// Jobs queued for the HTTP thread; a reply to the server's own request is dropped when the queue is full.
const JOB_QUEUE: usize = 32;

/// Requests in flight at once; further jobs wait in the queue.
const IN_FLIGHT: usize = 16;

/// How often a full queue is re-tried.
const QUEUE_POLL: Duration = Duration::from_millis(5);

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
    /// A message's bytes (parsed by the client, one at a time), or one over the limit.
    Got(Frame),
    /// The answer's stream ended.
    Closed,
    Fail(McpError),
}

/// Hands `event` to the client, waiting while its queue is full; false once the client is gone.
async fn deliver(tx: &SyncSender<(Json, Event)>, id: &Json, event: Event) -> bool {
    let mut item = (id.clone(), event);
    loop {
        match tx.try_send(item) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => item = back,
        }
        tokio::time::sleep(QUEUE_POLL).await;
    }
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
    jobs: tokio::sync::mpsc::Sender<Job>,
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
        let (jobs, mut rx) = tokio::sync::mpsc::channel::<Job>(JOB_QUEUE);
        let (tx, events) = mpsc::sync_channel(EVENT_QUEUE);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = shared.clone();
        let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
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
                            exchange(&client, &spec, &state, job, &tx),
                        )
                        .await;
                        return;
                    }
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        return;
                    };
                    tokio::spawn(async move {
                        exchange(&client, &spec, &state, job, &tx).await;
                        drop(permit);
                    });
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

async fn exchange(
    client: &reqwest::Client,
    spec: &HttpSpec,
    shared: &Mutex<Shared>,
    job: Job,
    tx: &SyncSender<(Json, Event)>,
) {
    let id = job.id.clone().unwrap_or(Json::Null);
    let send = |e: Event| {
        let id = id.clone();
        async move {
            deliver(tx, &id, e).await;
        }
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
            ))))
            .await;
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
        return send(Event::Fail(McpError::SessionExpired)).await;
    }
    if status.is_redirection() {
        let to = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        return send(Event::Fail(McpError::Failed(format!(
            "the server redirects ({status}) to {to}; loom does not follow redirects — put the final URL in url"
        ))))
        .await;
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
        ))))
        .await;
    }
    if !is_sse {
        let event = match read_capped(&mut resp, MAX_MESSAGE_BYTES).await {
            Ok((_, Some(seen))) => Event::Got(Frame::TooLarge(seen)),
            Ok((body, None)) if parse_message(&body).is_none() => {
                Event::Fail(McpError::Failed("the server's answer is not JSON".into()))
            }
            Ok((body, None)) => Event::Got(Frame::Message(body)),
            Err(e) => Event::Fail(McpError::Dead(e)),
        };
        return send(event).await;
    }
    let want = job.id.clone();
    let ended = read_sse(
        &mut resp,
        &mut |frame| {
            let done = match &frame {
                Frame::Message(m) => parse_message(m)
                    .is_some_and(|m| m.get("id") == want.as_ref() && m.get("method").is_none()),
                Frame::TooLarge(_) => true,
            };
            (Event::Got(frame), done)
        },
        tx,
        &id,
    )
    .await;
    if let Err(e) = ended {
        send(Event::Fail(McpError::Dead(e))).await;
    }
}

/// Reads an SSE body, handing each event's message to the client (as `on` wraps it) until `on` says it was the last
/// or the stream ends (then [`Event::Closed`] is handed over). An event over [`MAX_MESSAGE_BYTES`] is reported as
/// soon as it crosses the limit, and the stream is not read further.
async fn read_sse(
    resp: &mut reqwest::Response,
    on: &mut (dyn FnMut(Frame) -> (Event, bool) + Send),
    tx: &SyncSender<(Json, Event)>,
    id: &Json,
) -> Result<(), String> {
    let mut framer = SseFramer::new(MAX_MESSAGE_BYTES);
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => {
                deliver(tx, id, Event::Closed).await;
                return Ok(());
            }
            Err(e) => return Err(format!("the event stream broke: {e}")),
        };
        let mut frames = Vec::new();
        framer.push(&chunk, &mut |f| {
            let last = matches!(f, Frame::TooLarge(_));
            frames.push(f);
            !last
        });
        for f in frames {
            let (event, last) = on(f);
            if !deliver(tx, id, event).await || last {
                return Ok(());
            }
        }
    }
}

/// The GET stream a server may open for its own notifications and requests (`tools/list_changed`): each message
/// goes to the transport as if it came with no request. A server without one (405, or no SSE) is fine.
async fn listen(
    client: &reqwest::Client,
    spec: &HttpSpec,
    shared: &Mutex<Shared>,
    tx: &SyncSender<(Json, Event)>,
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
    // only its messages go to the client (as if they came with no request); an event over the limit ends the stream
    let _ = read_sse(
        &mut resp,
        &mut |f| {
            let last = matches!(f, Frame::TooLarge(_));
            (Event::Got(f), last)
        },
        tx,
        &Json::Null,
    )
    .await;
}

/// Reads a body up to `cap` bytes: the bytes, or (as soon as it crosses `cap`) how many were seen — the rest is not
/// read.
async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, Option<usize>), String> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if body.len() + c.len() > cap {
                    return Ok((Vec::new(), Some(body.len() + c.len())));
                }
                body.extend_from_slice(&c);
            }
            Ok(None) => return Ok((body, None)),
            Err(e) => return Err(format!("the answer broke off: {e}")),
        }
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, message: &Json, deadline: Instant) -> Result<(), McpError> {
        let id = match (message.get("method"), message.get("id")) {
            (Some(_), Some(id)) => Some(id.clone()),
            _ => None,
        };
        if id.is_some() {
            self.current = id.clone();
        }
        let mut job = Job {
            body: message.clone(),
            id,
            delete: false,
            listen: false,
        };
        loop {
            match self.jobs.try_send(job) {
                Ok(()) => return Ok(()),
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                    return Err(McpError::Dead("the HTTP thread stopped".into()))
                }
                Err(tokio::sync::mpsc::error::TrySendError::Full(j)) => job = j,
            }
            if Instant::now() >= deadline {
                return Err(McpError::Timeout(format!(
                    "loom's {JOB_QUEUE} queued requests to the server were not sent in time"
                )));
            }
            std::thread::sleep(QUEUE_POLL);
        }
    }

    fn post(&mut self, message: &Json) {
        // dropped when the queue is full: nothing waits on a reply or a cancellation
        let _ = self.jobs.try_send(Job {
            body: message.clone(),
            id: None,
            delete: false,
            listen: false,
        });
    }

    fn next(&mut self, deadline: Instant) -> Wait {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok((_, Event::Closed)) => continue,
                Ok((_, Event::Got(Frame::TooLarge(n)))) => return Wait::Got(Received::TooLarge(n)),
                Ok((_, Event::Got(Frame::Message(bytes)))) => {
                    return Wait::Got(match parse_message(&bytes) {
                        Some(m) => Received::Message(m),
                        None => Received::Noise,
                    })
                }
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
        let _ = self.jobs.try_send(Job {
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
            let _ = self.jobs.try_send(Job {
                body: Json::Null,
                id: None,
                delete: true,
                listen: false,
            });
        }
    }
}
