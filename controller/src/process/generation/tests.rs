//! The settings each DRA API generation gets from a `ProcessConfig`, and the admin API each
//! serves: cordon written to the cluster first and no queue depth on `v1`, the driver's cordon
//! on `v1alpha2`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use dra_api::{AdminToken, AppState, Metrics, Readiness};
use dra_types::api_mode::{ApiMode, DraApi};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::super::leader_work::LeaderWork;
use super::super::{MetricsObserver, ProcessConfig};
use super::{generation_work, GenerationWork};

const TOKEN: &str = "generation-work-token";

fn config() -> ProcessConfig {
    ProcessConfig {
        driver_name: testkit::ledger::DRIVER.to_owned(),
        ledger: "unused.redb".into(),
        workers: 0,
        listen: "127.0.0.1:0".parse().unwrap(),
        reconcile_interval: Duration::from_secs(42),
        recheck_delay: Duration::from_secs(1),
        grace_period: None,
        admin_token: None,
        leader: None,
        dra_api: DraApi::V1,
        explain_after: None,
        history_retention: None,
        history_rollup_after: None,
        leader_url: crate::leader::LeaderUrlTemplate::default(),
        replica: "test".to_owned(),
    }
}

#[test]
fn the_mirror_keeps_its_defaults_without_explain_after() {
    let mirror = config().mirror_config();
    assert_eq!(mirror.driver_name, testkit::ledger::DRIVER);
    assert_eq!(mirror.reconcile_interval, Duration::from_secs(42));
    assert_eq!(mirror.explain_after, Duration::from_secs(60));
    assert_eq!(mirror.explain_interval, Duration::from_secs(15));
}

#[test]
fn explain_after_sets_the_delay_and_a_look_every_half_of_it_within_bounds() {
    let with = |after: Duration| {
        let mirror = ProcessConfig {
            explain_after: Some(after),
            ..config()
        }
        .mirror_config();
        assert_eq!(mirror.explain_after, after);
        mirror.explain_interval
    };
    assert_eq!(with(Duration::from_secs(2)), Duration::from_secs(1));
    assert_eq!(with(Duration::from_millis(20)), Duration::from_millis(50));
    assert_eq!(with(Duration::from_secs(600)), Duration::from_secs(15));
}

#[test]
fn the_driver_gets_the_reconcile_interval_and_the_grace_period_when_set() {
    let driver = config().driver_config();
    assert_eq!(driver.reconcile_interval, Duration::from_secs(42));
    let default_grace = driver.grace_period;
    let driver = ProcessConfig {
        grace_period: Some(Duration::from_secs(3)),
        ..config()
    }
    .driver_config();
    assert_eq!(driver.grace_period, Duration::from_secs(3));
    assert_ne!(default_grace, Duration::from_secs(3));
}

/// The parts of `generation` over a ledger with four devices on `node-a`, and the directory holding
/// it (keep it while the ledger is used).
fn parts(generation: ApiMode) -> (GenerationWork, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = testkit::ledger::open(dir.path());
    ledger
        .set_inventory("node-a", testkit::ledger::gpus(4, "H100"))
        .unwrap();
    // Never contacted: nothing here runs the work.
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let metrics = Arc::new(Metrics::new("test").unwrap());
    let observer = Arc::new(MetricsObserver::new(metrics.clone()));
    let state = AppState::new(metrics, Readiness::new())
        .with_ledger(ledger.clone())
        .with_admin_token(AdminToken::new(TOKEN).unwrap());
    let work = generation_work(generation, &config(), &ledger, client, &observer, state);
    (work, dir)
}

/// `POST path` with the token: the status and the JSON body.
async fn post(state: &AppState, path: &str) -> (StatusCode, serde_json::Value) {
    let request = Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let answer = dra_api::router(state.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = answer.status();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn on_v1_the_mirror_is_the_work_and_cordon_needs_the_cluster_first() {
    let (work, _dir) = parts(ApiMode::V1);
    assert!(work.driver.is_none());
    assert!(work.mirror.is_some());
    assert!(matches!(work.work, LeaderWork::Mirror(_)));
    for action in ["cordon", "uncordon"] {
        let path = format!("/v1/nodes/node-a/devices/gpu-1/{action}");
        let (status, body) = post(&work.state, &path).await;
        // The cluster cannot be reached: the cordon fails there and the ledger is left alone.
        assert_eq!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{action}: {body}"
        );
    }
    let nodes = work.mirror.unwrap().ledger().nodes().unwrap();
    assert_eq!(nodes[0].counts.cordoned, 0, "nothing cordoned: {nodes:?}");
}

#[tokio::test]
async fn on_v1alpha2_the_driver_is_the_work_and_cordon_changes_the_ledger() {
    let (work, _dir) = parts(ApiMode::V1alpha2);
    assert!(work.mirror.is_none());
    assert!(matches!(work.work, LeaderWork::Allocate(_)));
    let (status, body) = post(&work.state, "/v1/nodes/node-a/devices/gpu-1/cordon").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["cordoned"], true);
    let nodes = work.driver.unwrap().ledger().nodes().unwrap();
    assert_eq!(nodes[0].counts.cordoned, 1, "{nodes:?}");
}
