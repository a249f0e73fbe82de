//! The token-protected `/v1` endpoints: auth, cordon, reconcile, backup, body limits and
//! time limits, through `oneshot`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{fixture, get, post, send, with_token, TOKEN};
use async_trait::async_trait;
use axum::http::{header, Method, StatusCode};
use dra_allocator::ledger::Ledger;
use dra_api::{router, ClusterCordon, CordonError, Reconciler};
use serde_json::json;
use tower::ServiceExt;

const CORDON: &str = "/v1/nodes/node-a/devices/gpu-3/cordon";
const UNCORDON: &str = "/v1/nodes/node-a/devices/gpu-3/uncordon";

#[tokio::test]
async fn protected_routes_are_403_without_a_token_file() {
    let f = fixture();
    for path in [CORDON, UNCORDON, "/v1/reconcile"] {
        let answer = post(&f.state, path, Some(TOKEN), None).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(answer.code(), "forbidden");
    }
    let backup = send(
        router(f.state.clone()),
        Method::GET,
        "/v1/backup",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(backup.status, StatusCode::FORBIDDEN);
    // Nothing changed.
    let devices = get(&f.state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["cordoned"], false);
}

#[tokio::test]
async fn missing_or_wrong_bearer_token_is_401() {
    let state = with_token(fixture().state);
    let missing = post(&state, CORDON, None, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.headers[header::WWW_AUTHENTICATE], "Bearer");
    assert_eq!(missing.json()["error"]["message"], "missing bearer token");
    for wrong in ["wrong", "s3cret-admin-toke", "s3cret-admin-token2", ""] {
        let answer = post(&state, CORDON, Some(wrong), None).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert!(!String::from_utf8_lossy(&answer.body).contains(TOKEN));
    }
    let backup = send(router(state.clone()), Method::GET, "/v1/backup", None, None).await;
    assert_eq!(backup.status, StatusCode::UNAUTHORIZED);
    let basic = router(state.clone())
        .oneshot(
            axum::http::Request::post(CORDON)
                .header(header::AUTHORIZATION, format!("Basic {TOKEN}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
}

/// A cluster that answers every cordon with `answer` and records what it was asked.
struct FakeCluster {
    answer: fn() -> Result<(), CordonError>,
    calls: std::sync::Mutex<Vec<(String, String, bool)>>,
}

#[async_trait]
impl ClusterCordon for FakeCluster {
    async fn set(&self, node: &str, device: &str, cordon: bool) -> Result<(), CordonError> {
        self.calls
            .lock()
            .unwrap()
            .push((node.to_owned(), device.to_owned(), cordon));
        (self.answer)()
    }
}

fn cluster(answer: fn() -> Result<(), CordonError>) -> Arc<FakeCluster> {
    Arc::new(FakeCluster {
        answer,
        calls: std::sync::Mutex::new(Vec::new()),
    })
}

#[tokio::test]
async fn a_cluster_that_cannot_cordon_answers_409_with_its_message_and_changes_nothing() {
    let fake = cluster(|| Err(CordonError::Unavailable("enable DeviceTaintRule".into())));
    let state = with_token(fixture().state).with_cluster_cordon(fake.clone());
    for path in [CORDON, UNCORDON] {
        let answer = post(&state, path, Some(TOKEN), Some(r#"{"reason": "xid 79"}"#)).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{path}");
        assert_eq!(
            answer.json(),
            json!({"error": {"code": "conflict", "message": "enable DeviceTaintRule"}})
        );
    }
    // The token is still checked first.
    let missing = post(&state, CORDON, None, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        fake.calls.lock().unwrap().len(),
        2,
        "asked once per authorized call"
    );
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["cordoned"], false);
}

#[tokio::test]
async fn a_failed_cluster_write_is_a_generic_500_and_the_ledger_stays() {
    let fake = cluster(|| Err(CordonError::Failed("forbidden: devicetaintrules".into())));
    let state = with_token(fixture().state).with_cluster_cordon(fake);
    let answer = post(&state, CORDON, Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    let body = String::from_utf8_lossy(&answer.body);
    assert!(!body.contains("forbidden"), "{body}");
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["cordoned"], false);
}

#[tokio::test]
async fn a_cluster_cordon_is_written_to_the_cluster_then_recorded_in_the_ledger() {
    let fake = cluster(|| Ok(()));
    let state = with_token(fixture().state).with_cluster_cordon(fake.clone());
    let first = post(&state, CORDON, Some(TOKEN), None).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        get(&state, "/v1/nodes/node-a/devices").await.json()["items"][3]["state"],
        "cordoned"
    );
    let second = post(&state, UNCORDON, Some(TOKEN), None).await;
    assert_eq!(second.json()["cordoned"], false);
    assert_eq!(
        *fake.calls.lock().unwrap(),
        [
            ("node-a".to_owned(), "gpu-3".to_owned(), true),
            ("node-a".to_owned(), "gpu-3".to_owned(), false)
        ]
    );
}

#[tokio::test]
async fn cordon_and_uncordon_change_the_device_once() {
    let state = with_token(fixture().state);
    let first = post(&state, CORDON, Some(TOKEN), None).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.json(),
        json!({"node": "node-a", "device": "gpu-3", "cordoned": true, "changed": true})
    );
    let again = post(&state, CORDON, Some(TOKEN), Some(r#"{"reason": "xid 79"}"#)).await;
    assert_eq!(again.json()["changed"], false);
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["state"], "cordoned");
    let nodes = get(&state, "/v1/nodes").await.json();
    assert_eq!(nodes["items"][0]["devices"]["cordoned"], 1);
    let audit = get(&state, "/v1/audit?since=0&limit=1000").await.json();
    assert_eq!(
        audit["items"].as_array().unwrap().last().unwrap()["event"],
        "cordoned"
    );

    let back = post(&state, UNCORDON, Some(TOKEN), Some("  ")).await;
    assert_eq!(back.json()["changed"], true);
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["state"], "free");
}

#[tokio::test]
async fn cordon_of_unknown_device_or_node_is_404() {
    let state = with_token(fixture().state);
    for path in [
        "/v1/nodes/node-a/devices/gpu-9/cordon",
        "/v1/nodes/node-z/devices/gpu-0/uncordon",
    ] {
        let answer = post(&state, path, Some(TOKEN), None).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.code(), "not_found");
    }
}

#[tokio::test]
async fn malformed_or_unknown_json_body_is_400() {
    let state = with_token(fixture().state);
    for body in ["{", "[1]", r#"{"reason": 5}"#, r#"{"force": true}"#] {
        let answer = post(&state, CORDON, Some(TOKEN), Some(body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON body"));
    }
    let devices = get(&state, "/v1/nodes/node-a/devices").await.json();
    assert_eq!(devices["items"][3]["cordoned"], false);
}

#[tokio::test]
async fn oversized_body_is_413() {
    let state = with_token(fixture().state);
    let reason = "x".repeat(70 * 1024);
    let body = format!(r#"{{"reason": "{reason}"}}"#);
    let answer = post(&state, CORDON, Some(TOKEN), Some(&body)).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer.code(), "payload_too_large");
}

/// Counts its calls; answers after `delay`, or fails when `fail`.
struct FakeReconciler {
    calls: AtomicUsize,
    delay: Duration,
    fail: bool,
}

#[async_trait]
impl Reconciler for FakeReconciler {
    async fn reconcile_now(
        &self,
    ) -> Result<serde_json::Value, dra_api::reconciler::ReconcileError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(self.delay).await;
        if self.fail {
            Err("cluster unreachable at 10.0.0.1".into())
        } else {
            Ok(json!({"released": 0, "call": call}))
        }
    }
}

fn fake(delay: Duration, fail: bool) -> Arc<FakeReconciler> {
    Arc::new(FakeReconciler {
        calls: AtomicUsize::new(0),
        delay,
        fail,
    })
}

#[tokio::test]
async fn reconcile_returns_the_report_of_the_reconciler() {
    let reconciler = fake(Duration::ZERO, false);
    let state = with_token(fixture().state).with_reconciler(reconciler.clone());
    let answer = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json(), json!({"released": 0, "call": 1}));
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reconcile_is_503_without_reconciler_or_before_ready() {
    let f = fixture();
    let none = post(
        &with_token(f.state.clone()),
        "/v1/reconcile",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(none.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(none.code(), "not_ready");

    let reconciler = fake(Duration::ZERO, false);
    let metrics = f.state.metrics().clone();
    let state = with_token(dra_api::AppState::new(metrics, dra_api::Readiness::new()))
        .with_ledger(f.ledger.clone())
        .with_reconciler(reconciler.clone());
    let early = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(early.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(early.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("initial reconcile"));
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn reconcile_on_a_standby_is_503_waiting_for_the_leader_lease() {
    let f = fixture();
    let reconciler = fake(Duration::ZERO, false);
    let readiness = dra_api::Readiness::new();
    readiness.set_standby(true);
    readiness.set_ledger_open();
    let state = with_token(dra_api::AppState::new(f.state.metrics().clone(), readiness))
        .with_ledger(f.ledger.clone())
        .with_reconciler(reconciler.clone());
    let answer = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("leader lease"));
    assert_eq!(reconciler.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn second_reconcile_while_one_runs_is_409() {
    let reconciler = fake(Duration::from_millis(300), false);
    let state = with_token(fixture().state).with_reconciler(reconciler.clone());
    let slow = tokio::spawn({
        let state = state.clone();
        async move { post(&state, "/v1/reconcile", Some(TOKEN), None).await }
    });
    while reconciler.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    assert_eq!(slow.await.unwrap().status, StatusCode::OK);
}

#[tokio::test]
async fn failed_reconcile_is_a_generic_500() {
    let state = with_token(fixture().state).with_reconciler(fake(Duration::ZERO, true));
    let answer = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        answer.json(),
        json!({"error": {"code": "internal", "message": "internal error"}})
    );
}

#[tokio::test]
async fn request_over_the_time_limit_is_503_timeout() {
    let state = with_token(fixture().state)
        .with_reconciler(fake(Duration::from_secs(5), false))
        .with_request_timeout(Duration::from_millis(100));
    let answer = post(&state, "/v1/reconcile", Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.code(), "timeout");
}

#[tokio::test]
async fn backup_streams_a_ledger_with_the_same_contents() {
    let f = fixture();
    let state = with_token(f.state.clone());
    let answer = send(router(state), Method::GET, "/v1/backup", Some(TOKEN), None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.headers[header::CONTENT_TYPE],
        "application/octet-stream"
    );
    assert_eq!(
        answer.headers[header::CONTENT_LENGTH],
        answer.body.len().to_string()
    );
    let out = tempfile::tempdir().unwrap();
    let copy_path = out.path().join("copy.redb");
    std::fs::write(&copy_path, &answer.body).unwrap();
    let copy = Ledger::open(&copy_path, "gpu.example.com").unwrap();
    assert_eq!(copy.nodes().unwrap(), f.ledger.nodes().unwrap());
    assert_eq!(copy.utilisation().unwrap(), f.ledger.utilisation().unwrap());
    assert!(copy.verify().unwrap().is_consistent());
    // The temporary copy next to the ledger is gone once streamed.
    let leftovers: Vec<_> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".dra-ledger-backup-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
