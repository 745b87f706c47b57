//! The effectful half every HTTP harness shares: POST a JSON body (racing cancellation), classify a failed response
//! with [`classify_http`], and turn a 200 event-stream body into an [`EventStream`] through a provider's
//! [`Decoder`]. The pure halves live in `http.rs` (SSE parsing, classification) and in each provider's decoder.
//!
//! API keys travel only as sensitive header values; no error built here ever holds a request header.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{classify_http, EventStream, HarnessConfigError, HarnessError, SseEvent, SseParser};
use crate::model::ModelEvent;

/// The longest error body read from a failed response (the classifier keeps 500 characters of it).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The largest non-streamed (`stream = false`) response read (32 MiB; a whole model message is a few MiB at most):
/// past it the request fails instead of loom reading without limit.
pub const MAX_JSON_BODY: usize = 32 * 1024 * 1024;

/// How long connecting may take before it is a network error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Maps one provider's server-sent events onto [`ModelEvent`]s. Pure: it holds the per-stream state (open content
/// blocks, the stop reason so far) and never does I/O.
pub(crate) trait Decoder: Send + 'static {
    /// The events (or the error) one SSE event produces.
    fn event(&mut self, event: SseEvent) -> Vec<Result<ModelEvent, HarnessError>>;
    /// True once the message is complete: nothing after this point is read.
    fn done(&self) -> bool;
    /// The body ended: the last events (a provider may end a message by closing the stream), or the error to
    /// report when the message was not complete.
    fn finish(&mut self) -> Vec<Result<ModelEvent, HarnessError>>;
}

/// A client for provider APIs: rustls, a connect timeout, no overall timeout (streams may be long).
pub(crate) fn http_client() -> Result<reqwest::Client, HarnessConfigError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| HarnessConfigError::Invalid(format!("cannot build the HTTP client: {e}")))
}

/// A request header; `secret` marks it sensitive (never printed by the client's debug output).
pub(crate) struct Header {
    pub name: &'static str,
    pub value: String,
    pub secret: bool,
}

/// A network failure, with the chain of causes (reqwest errors name the URL, never a header).
pub(crate) fn network(e: &reqwest::Error) -> HarnessError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    HarnessError::Network { message }
}

/// POSTs `body` to `url`. Resolves once the response headers arrived: a 2xx response is returned, anything else is
/// read (bounded) and classified. Cancellation wins over every wait.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[Header],
    body: &serde_json::Value,
    cancel: &CancellationToken,
) -> Result<reqwest::Response, HarnessError> {
    let mut req = client.post(url).json(body);
    for h in headers {
        let mut value = reqwest::header::HeaderValue::from_str(&h.value).map_err(|_| {
            HarnessError::Protocol {
                message: format!(
                    "the {} header holds characters HTTP does not allow{}",
                    h.name,
                    if h.secret {
                        "; check the API key in your secret store"
                    } else {
                        ""
                    }
                ),
            }
        })?;
        value.set_sensitive(h.secret);
        req = req.header(h.name, value);
    }
    let resp = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(HarnessError::Cancelled),
        r = req.send() => r.map_err(|e| network(&e))?,
    };
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let retry_after_ms = header("retry-after-ms");
    let retry_after = header("retry-after");
    let body = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(HarnessError::Cancelled),
        b = read_bounded(resp, MAX_ERROR_BODY) => b,
    };
    Err(classify_http(
        status.as_u16(),
        retry_after_ms.as_deref(),
        retry_after.as_deref(),
        &body,
    ))
}

/// Reads at most `limit` bytes of a body as (lossy) text; a body that fails midway keeps what arrived.
async fn read_bounded(resp: reqwest::Response, limit: usize) -> String {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        out.extend_from_slice(&chunk);
        if out.len() >= limit {
            out.truncate(limit);
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads a whole (non-streamed) JSON body of at most [`MAX_JSON_BODY`] bytes, racing cancellation.
pub(crate) async fn read_json(
    resp: reqwest::Response,
    cancel: &CancellationToken,
) -> Result<serde_json::Value, HarnessError> {
    read_json_within(resp, cancel, MAX_JSON_BODY).await
}

/// [`read_json`] with the bound `limit`: a body announced (`content-length`) or found longer fails the request.
async fn read_json_within(
    resp: reqwest::Response,
    cancel: &CancellationToken,
    limit: usize,
) -> Result<serde_json::Value, HarnessError> {
    let too_long = || {
        HarnessError::Protocol {
        message: format!(
            "the response body is longer than {limit} bytes, more than any model message: the endpoint is broken \
             or hostile"
        ),
    }
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_long());
    }
    let mut body = resp.bytes_stream();
    let mut bytes = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(HarnessError::Cancelled),
            c = body.next() => c,
        };
        match chunk {
            None => break,
            Some(Err(e)) => return Err(network(&e)),
            Some(Ok(c)) => {
                if bytes.len() + c.len() > limit {
                    return Err(too_long());
                }
                bytes.extend_from_slice(&c);
            }
        }
    }
    serde_json::from_slice(&bytes).map_err(|e| HarnessError::Protocol {
        message: format!("the response is not JSON: {e}"),
    })
}

type Body = Pin<Box<dyn Stream<Item = Result<Vec<u8>, reqwest::Error>> + Send>>;

struct State<D> {
    body: Body,
    parser: SseParser,
    decoder: D,
    pending: VecDeque<Result<ModelEvent, HarnessError>>,
    closed: bool,
    cancel: CancellationToken,
}

/// The events of a 200 event-stream response. The stream ends after the decoder reports the message complete, on
/// the first error (which it yields), or with [`HarnessError::Cancelled`] when `cancel` fires; dropping it drops the
/// connection.
pub(crate) fn sse_stream<D: Decoder>(
    resp: reqwest::Response,
    decoder: D,
    cancel: CancellationToken,
) -> EventStream {
    let body: Body = Box::pin(resp.bytes_stream().map(|r| r.map(|b| b.to_vec())));
    let state = State {
        body,
        parser: SseParser::default(),
        decoder,
        pending: VecDeque::new(),
        closed: false,
        cancel,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                if item.is_err() {
                    st.closed = true;
                    st.pending.clear();
                }
                return Some((item, st));
            }
            if st.closed || st.decoder.done() {
                return None;
            }
            let next = tokio::select! {
                biased;
                _ = st.cancel.cancelled() => {
                    st.closed = true;
                    return Some((Err(HarnessError::Cancelled), st));
                }
                n = st.body.next() => n,
            };
            match next {
                None => {
                    // the body ended: what the decoder still has is drained above, then the stream ends
                    let last = st.decoder.finish();
                    st.pending.extend(last);
                    st.closed = true;
                }
                Some(Err(e)) => {
                    st.closed = true;
                    return Some((Err(network(&e)), st));
                }
                Some(Ok(bytes)) => match st.parser.feed(&bytes) {
                    Err(e) => st.pending.push_back(Err(e)),
                    Ok(events) => {
                        for ev in events {
                            if st.decoder.done() {
                                break;
                            }
                            st.pending.extend(st.decoder.event(ev));
                        }
                    }
                },
            }
        }
    }))
}

/// Events decoded from a complete (non-streamed) response, as a stream that stops after the first error.
pub(crate) fn vec_stream(events: Vec<Result<ModelEvent, HarnessError>>) -> EventStream {
    let mut failed = false;
    Box::pin(futures::stream::iter(events).take_while(move |e| {
        let keep = !failed;
        failed |= e.is_err();
        futures::future::ready(keep)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_server::{FakeServer, Reply};

    async fn get(base: &str) -> reqwest::Response {
        http_client()
            .unwrap()
            .post(base)
            .body("{}")
            .send()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_non_streamed_body_is_read_within_its_bound() {
        let body = format!("{{\"text\":\"{}\"}}", "x".repeat(100));
        let server = FakeServer::start(vec![
            Reply::json(200, &[], &body),
            Reply::json(200, &[], &body),
            Reply::json(200, &[("content-length", "999999999999")], "{}"),
        ])
        .await;
        let cancel = CancellationToken::new();
        // at the bound: read
        let v = read_json_within(get(&server.base).await, &cancel, body.len())
            .await
            .unwrap();
        assert_eq!(v["text"].as_str().map(str::len), Some(100));
        // one byte over: refused, whatever was read so far is dropped
        let err = read_json_within(get(&server.base).await, &cancel, body.len() - 1)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, HarnessError::Protocol { message } if message.contains("longer than")),
            "{err:?}"
        );
        // announced too long: refused before reading
        let err = read_json(get(&server.base).await, &cancel)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, HarnessError::Protocol { message } if message.contains(&MAX_JSON_BODY.to_string())),
            "{err:?}"
        );
    }
}
