//! Plain HTTP/1.1 requests to the simulated API server, for tests that look at what a client
//! library would hide: the exact status code (200 vs 202), the raw body (indentation, a watch
//! stream instead of a list) and query strings spelled the way other clients spell them.

#![allow(dead_code)]

use std::fmt::Write;
use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw answer: status code and body (chunked transfer decoded).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status code.
    pub code: u16,
    /// Response body.
    pub body: String,
}

impl Answer {
    /// The body as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not one JSON document ({e}): {}", self.body))
    }

    /// The body as newline-delimited JSON (a watch stream).
    pub fn lines(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// Sends one request with `Connection: close` and reads the whole answer.
pub async fn send(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Answer {
    send_with(addr, method, path, body, &[]).await
}

/// Like [`send`] with extra request headers.
pub async fn send_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Answer {
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n"
    );
    let typed = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
    if body.is_some() && !typed {
        request.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        let _ = write!(request, "{name}: {value}\r\n");
    }
    let _ = write!(
        request,
        "Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("reads");
    let raw = String::from_utf8(raw).expect("utf-8 answer");
    let (head, rest) = raw.split_once("\r\n\r\n").expect("a header block");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Answer { code, body }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}
