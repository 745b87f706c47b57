//! A fake provider on loopback for harness tests: it records each request (method, path, headers, JSON body) and
//! answers each connection with the next scripted reply, written verbatim, then closes the connection (so an event
//! stream ends where the script ends, which is how a dropped stream is simulated).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One scripted reply: the status line's code, extra headers, and the body in the chunks it is written in.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<Vec<u8>>,
    /// Keep the connection open after the last chunk (a stalled stream).
    pub hang: bool,
}

impl Reply {
    /// A 200 event stream of `text`, written in one chunk per event.
    pub fn sse(text: &str) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: text
                .split_inclusive("\n\n")
                .map(|c| c.as_bytes().to_vec())
                .collect(),
            hang: false,
        }
    }

    /// A JSON reply with `status` and extra headers.
    pub fn json(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut h = vec![("content-type".to_string(), "application/json".to_string())];
        h.extend(headers.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        Reply {
            status,
            headers: h,
            chunks: vec![body.as_bytes().to_vec()],
            hang: false,
        }
    }

    /// A 200 reply whose body is `bytes`, as an event stream.
    pub fn raw(bytes: &[u8]) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: vec![bytes.to_vec()],
            hang: false,
        }
    }
}

pub struct FakeServer {
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeServer {
    /// Serves `replies`, one per connection, in order; a connection past the last reply gets a 500.
    pub async fn start(replies: Vec<Reply>) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let rec = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let Some(req) = read_request(&mut sock).await else {
                    continue;
                };
                rec.lock().unwrap().push(req);
                let reply = replies.lock().unwrap().pop_front().unwrap_or(Reply::json(
                    500,
                    &[],
                    "{\"error\":\"the fake server has no more replies\"}",
                ));
                let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", reply.status);
                for (n, v) in &reply.headers {
                    head.push_str(&format!("{n}: {v}\r\n"));
                }
                head.push_str("\r\n");
                if sock.write_all(head.as_bytes()).await.is_err() {
                    continue;
                }
                for c in &reply.chunks {
                    if sock.write_all(c).await.is_err() || sock.flush().await.is_err() {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                if reply.hang {
                    // hold the socket until the client drops it
                    tokio::spawn(async move {
                        let mut sink = [0u8; 64];
                        while matches!(sock.read(&mut sink).await, Ok(n) if n > 0) {}
                    });
                    continue;
                }
                let _ = sock.shutdown().await;
            }
        });
        FakeServer { base, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    })
}
