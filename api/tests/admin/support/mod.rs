//! A ledger with a few allocations behind the admin router, and a request helper.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use dra_allocator::ledger::Ledger;
use dra_allocator::model::{AttributeValue, Device};
use dra_api::{router, AdminToken, AppState, Metrics, Readiness};
use testkit::ledger::allocate_on;
use tower::ServiceExt;

pub const TOKEN: &str = "s3cret-admin-token";

/// The ledger directory (kept alive), the ledger and state over it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub ledger: Ledger,
    pub state: AppState,
}

fn gpu(name: &str, model: &str) -> Device {
    Device::new(name).with("model", AttributeValue::String(model.to_owned()))
}

/// `node-a`: four H100; `node-b`: two A100. Claims `c1` (team-a, 2 on node-a, confirmed),
/// `c2` (team-b, 1 on node-b), `c3` (team-a, 1 on node-a); `c4` allocated then released.
/// The state has the ledger and every readiness flag set, but no token or reconciler.
pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com").unwrap();
    ledger
        .set_inventory(
            "node-a",
            (0..4).map(|i| gpu(&format!("gpu-{i}"), "H100")).collect(),
        )
        .unwrap();
    ledger
        .set_inventory("node-b", vec![gpu("gpu-0", "A100"), gpu("gpu-1", "A100")])
        .unwrap();
    allocate_on(&ledger, "c1", "team-a", "node-a", 2);
    ledger.confirm("c1").unwrap();
    allocate_on(&ledger, "c2", "team-b", "node-b", 1);
    allocate_on(&ledger, "c3", "team-a", "node-a", 1);
    allocate_on(&ledger, "c4", "team-b", "node-b", 1);
    ledger.release("c4").unwrap();
    let readiness = Readiness::new();
    readiness.set_ledger_open();
    readiness.set_caches_synced();
    readiness.set_reconciled();
    let state = AppState::new(Arc::new(Metrics::new("0.0.0").unwrap()), readiness)
        .with_ledger(ledger.clone())
        .with_idle_claims(Arc::default());
    Fixture { dir, ledger, state }
}

/// The `uid` of every entry of the list `key` of a `/v1/claims` answer.
pub fn uids_of(json: &serde_json::Value, key: &str) -> Vec<String> {
    json[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap().to_owned())
        .collect()
}

/// `state` with the admin token [`TOKEN`].
pub fn with_token(state: AppState) -> AppState {
    state.with_admin_token(AdminToken::new(TOKEN).unwrap())
}

/// An answer: status, headers and body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&self.body));
        })
    }

    /// The `error.code` of a JSON error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap().to_owned()
    }

    /// The `error.message` of a JSON error body.
    pub fn message(&self) -> String {
        self.json()["error"]["message"].as_str().unwrap().to_owned()
    }
}

/// The status, headers and whole body of `response`.
pub async fn answer_of(response: axum::response::Response) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let body = to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

/// Sends one request through the router without a socket.
pub async fn send(
    app: Router,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> Answer {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, Body::from))
        .unwrap();
    answer_of(app.oneshot(request).await.unwrap()).await
}

/// `GET path` without a token.
pub async fn get(state: &AppState, path: &str) -> Answer {
    send(router(state.clone()), Method::GET, path, None, None).await
}

/// `POST path` with an optional token and body.
pub async fn post(state: &AppState, path: &str, token: Option<&str>, body: Option<&str>) -> Answer {
    send(
        router(state.clone()),
        Method::POST,
        path,
        token,
        body.map(|b| b.as_bytes().to_vec()),
    )
    .await
}

/// `POST path` with the token [`TOKEN`] and `body` as JSON.
pub async fn post_with_token(state: &AppState, path: &str, body: Vec<u8>) -> Answer {
    send(
        router(state.clone()),
        Method::POST,
        path,
        Some(TOKEN),
        Some(body),
    )
    .await
}

/// The text of `GET /metrics`.
pub async fn scrape(state: &AppState) -> String {
    String::from_utf8(get(state, "/metrics").await.body).unwrap()
}

/// The value of `series` (name and labels) in the Prometheus text `text`.
pub fn series_value<T: std::str::FromStr>(text: &str, series: &str) -> Option<T> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
