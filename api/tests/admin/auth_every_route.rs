//! Every operation of the OpenAPI document that changes state (any method but GET) or reads the
//! whole ledger (`/v1/backup`) refuses requests without the token: 403 while no token is
//! configured, 401 with a missing, wrong or non-bearer token, and nothing changes; every other
//! operation answers without one. The operations are read from the document, so a new route
//! cannot slip through (`openapi.rs` checks that they declare the bearer scheme).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::{fixture, get, send, with_token, Answer, TOKEN};
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use dra_api::{router, AppState, Reconciler};
use tower::ServiceExt;

/// Counts reconciles; none may run without the token.
#[derive(Default)]
struct CountingReconciler {
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Reconciler for CountingReconciler {
    async fn reconcile_now(
        &self,
    ) -> Result<serde_json::Value, dra_api::reconciler::ReconcileError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::json!({"released": 0}))
    }
}

/// Every (method, path template, declares security) of the document.
fn operations() -> Vec<(Method, String, bool)> {
    let document = serde_json::to_value(dra_api::openapi()).unwrap();
    let mut out = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            let secured = operation
                .get("security")
                .and_then(|s| s.as_array())
                .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            out.push((method, path.clone(), secured));
        }
    }
    assert!(out.len() >= 15, "{out:?}");
    out
}

/// The template with names the fixture knows.
fn concrete(template: &str) -> String {
    let path = template
        .replace("{node}", "node-a")
        .replace("{device}", "gpu-0")
        .replace("{uid}", "c1")
        .replace("{file}", "page.js");
    // The one route with a required query parameter.
    if path == "/v1/devices" {
        return "/v1/devices?nodes=node-a".to_owned();
    }
    path
}

fn protected() -> Vec<(Method, String)> {
    operations()
        .into_iter()
        .filter(|(method, path, _)| *method != Method::GET || path == "/v1/backup")
        .map(|(method, path, _)| (method, path))
        .collect()
}

async fn send_with_header(state: &AppState, method: &Method, path: &str, auth: &str) -> Answer {
    let request = Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::AUTHORIZATION, auth)
        .body(Body::empty())
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    }
}

#[tokio::test]
async fn protected_operations_are_403_while_no_token_is_configured() {
    let f = fixture();
    let reconciler = Arc::new(CountingReconciler::default());
    let state = f.state.clone().with_reconciler(reconciler.clone());
    let audit_before = get(&state, "/v1/audit?limit=1000").await.body;
    for (method, template) in protected() {
        let path = concrete(&template);
        for token in [None, Some(TOKEN)] {
            let answer = send(router(state.clone()), method.clone(), &path, token, None).await;
            assert_eq!(answer.status, StatusCode::FORBIDDEN, "{method} {path}");
            assert_eq!(answer.code(), "forbidden", "{method} {path}");
        }
    }
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 0);
    assert_eq!(get(&state, "/v1/audit?limit=1000").await.body, audit_before);
}

#[tokio::test]
async fn protected_operations_are_401_without_the_right_bearer_token() {
    let f = fixture();
    let reconciler = Arc::new(CountingReconciler::default());
    let state = with_token(f.state.clone()).with_reconciler(reconciler.clone());
    let audit_before = get(&state, "/v1/audit?limit=1000").await.body;
    for (method, template) in protected() {
        let path = concrete(&template);
        let missing = send(router(state.clone()), method.clone(), &path, None, None).await;
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(missing.headers[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(missing.code(), "unauthorized");
        for auth in [
            "Bearer wrong".to_owned(),
            format!("Bearer {TOKEN}x"),
            format!("Basic {TOKEN}"),
            format!("bearer {TOKEN}"),
            TOKEN.to_owned(),
            "Bearer ".to_owned(),
        ] {
            let answer = send_with_header(&state, &method, &path, &auth).await;
            assert_eq!(
                answer.status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {auth:?}"
            );
            assert!(!String::from_utf8_lossy(&answer.body).contains(TOKEN));
        }
    }
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 0);
    assert_eq!(get(&state, "/v1/audit?limit=1000").await.body, audit_before);
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert!(devices["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["cordoned"] == false));

    // With the token the same requests go through, so the refusals above were the token's.
    for (method, template) in protected() {
        let path = concrete(&template);
        let answer = send(
            router(state.clone()),
            method.clone(),
            &path,
            Some(TOKEN),
            None,
        )
        .await;
        assert!(
            answer.status.is_success(),
            "{method} {path}: {}",
            answer.status
        );
    }
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn read_operations_need_no_token() {
    let f = fixture();
    let state = with_token(f.state.clone());
    for (method, template, secured) in operations() {
        if secured {
            continue;
        }
        let path = concrete(&template);
        let answer = send(router(state.clone()), method.clone(), &path, None, None).await;
        assert!(
            answer.status.is_success(),
            "{method} {path}: {}",
            answer.status
        );
    }
}
