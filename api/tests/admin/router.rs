//! The admin router through `tower::ServiceExt::oneshot`, without a socket.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use dra_api::{router, AppState, Metrics, Readiness};
use tower::ServiceExt;

fn state() -> AppState {
    AppState::new(Arc::new(Metrics::new("1.2.3").unwrap()), Readiness::new())
}

async fn get(state: &AppState, path: &str) -> (StatusCode, String, Option<String>) {
    let response = router(state.clone())
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap().to_owned());
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (
        status,
        String::from_utf8(body.to_vec()).unwrap(),
        content_type,
    )
}

#[tokio::test]
async fn healthz_answers_while_not_ready() {
    let (status, body, _) = get(&state(), "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"status":"ok"}"#);
}

#[tokio::test]
async fn readyz_is_503_with_json_error_until_every_flag_is_set() {
    let state = state();
    let (status, body, content_type) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "not_ready");
    assert_eq!(
        json["error"]["message"],
        "not ready: waiting for ledger open, caches synced, initial reconcile"
    );

    state.readiness().set_ledger_open();
    state.readiness().set_caches_synced();
    let (status, body, _) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("waiting for initial reconcile"), "{body}");

    state.readiness().set_reconciled();
    let (status, body, _) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"status":"ready"}"#);
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_build_info() {
    let (status, body, content_type) = get(&state(), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    assert!(
        body.contains("dra_ledger_build_info{version=\"1.2.3\"} 1"),
        "{body}"
    );
}

#[tokio::test]
async fn metrics_read_the_queue_depth_on_each_scrape() {
    let depth = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let source = depth.clone();
    let state = state().with_queue_depth(Arc::new(move || {
        source.load(std::sync::atomic::Ordering::Relaxed)
    }));
    let (_, body, _) = get(&state, "/metrics").await;
    assert!(body.contains("dra_ledger_workqueue_depth 3"), "{body}");
    depth.store(7, std::sync::atomic::Ordering::Relaxed);
    let (_, body, _) = get(&state, "/metrics").await;
    assert!(body.contains("dra_ledger_workqueue_depth 7"), "{body}");
}

#[tokio::test]
async fn unknown_path_is_a_json_404_naming_the_path() {
    let (status, body, _) = get(&state(), "/v1/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "not_found");
    assert_eq!(json["error"]["message"], "no such endpoint: /v1/nope");
}

#[tokio::test]
async fn known_path_with_another_method_is_a_json_405() {
    let response = router(state())
        .oneshot(Request::delete("/v1/nodes").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["error"]["code"], "method_not_allowed");
    assert_eq!(
        json["error"]["message"],
        "method DELETE not allowed on /v1/nodes"
    );
}

#[tokio::test]
async fn path_segment_that_is_not_utf8_is_a_json_400() {
    let (status, body, _) = get(&state(), "/v1/claims/%FF").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "bad_request");
}

#[tokio::test]
async fn standby_is_ready_as_standby_and_reports_not_leading() {
    let state = state();
    state.readiness().set_standby(true);
    let (status, body, _) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("waiting for ledger open"), "{body}");

    state.readiness().set_ledger_open();
    let (status, body, _) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"status":"standby"}"#);
    let (_, metrics, _) = get(&state, "/metrics").await;
    assert!(metrics.contains("dra_ledger_leader 0"), "{metrics}");

    state.readiness().set_standby(false);
    let (status, _, _) = get(&state, "/readyz").await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "a leader needs every flag"
    );
    let (_, metrics, _) = get(&state, "/metrics").await;
    assert!(metrics.contains("dra_ledger_leader 1"), "{metrics}");
}
