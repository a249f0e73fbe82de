//! `GET /v1/idle` over a ledger on a hand-moved clock and the claim observations an observer
//! would report.

use std::sync::Arc;

use crate::support::get;
use axum::http::StatusCode;
use dra_allocator::idle::{ClaimUse, IdleClaims};
use dra_allocator::ledger::Ledger;
use dra_api::{AppState, Metrics, Readiness};
use serde_json::json;
use testkit::ledger::{allocate_on, gpus, ManualClock, DRIVER};

/// 2026-01-01T00:00:00Z.
const T0: u64 = 1_767_225_600_000;

struct World {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    idle: Arc<IdleClaims>,
    state: AppState,
}

/// `a` (team-a, one GPU on node-a) and `b` (team-b, two on node-b) allocated at T0; `other`
/// is a claim the ledger does not hold.
fn world() -> World {
    let clock = ManualClock::at(T0);
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Ledger::open_with(dir.path().join("ledger.redb"), DRIVER, clock.options()).unwrap();
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    ledger.set_inventory("node-b", gpus(2, "H200")).unwrap();
    allocate_on(&ledger, "a", "team-a", "node-a", 1);
    allocate_on(&ledger, "b", "team-b", "node-b", 2);
    let readiness = Readiness::new();
    readiness.set_ledger_open();
    let idle = Arc::new(IdleClaims::default());
    let state = AppState::new(Arc::new(Metrics::new("0.0.0").unwrap()), readiness)
        .with_ledger(ledger)
        .with_idle_claims(idle.clone());
    World {
        _dir: dir,
        clock,
        idle,
        state,
    }
}

#[tokio::test]
async fn an_unused_claim_is_listed_once_idle_for_longer_than_for_and_leaves_when_used() {
    let w = world();
    w.idle.observe("a", ClaimUse::Unused, w.clock.now_ms());
    w.idle.observe("b", ClaimUse::InUse, w.clock.now_ms());
    w.idle.observe("other", ClaimUse::Unused, w.clock.now_ms());

    w.clock.advance_secs(600);
    let early = get(&w.state, "/v1/idle").await;
    assert_eq!(early.status, StatusCode::OK);
    assert_eq!(early.json(), json!({"forSeconds": 600, "items": []}));

    w.clock.advance_secs(1);
    let late = get(&w.state, "/v1/idle?for=10m").await;
    assert_eq!(
        late.json(),
        json!({"forSeconds": 600, "items": [{
            "uid": "a", "namespace": "team-a", "name": "claim-a", "node": "node-a",
            "devices": ["gpu-0"], "idleSince": "2026-01-01T00:00:00.000Z", "idleSeconds": 601,
        }]})
    );

    w.idle.observe("a", ClaimUse::InUse, w.clock.now_ms());
    let used = get(&w.state, "/v1/idle?for=0").await;
    assert_eq!(used.json()["items"], json!([]));
}

#[tokio::test]
async fn idle_claims_are_listed_oldest_first() {
    let w = world();
    w.idle.observe("b", ClaimUse::Unused, w.clock.now_ms());
    w.clock.advance_secs(5);
    w.idle.observe("a", ClaimUse::Unused, w.clock.now_ms());
    w.clock.advance_secs(10);

    let answer = get(&w.state, "/v1/idle?for=2s").await;

    let items = answer.json()["items"].clone();
    let uids: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, ["b", "a"]);
    assert_eq!(items[0]["idleSeconds"], 15);
    assert_eq!(items[1]["idleSince"], "2026-01-01T00:00:05.000Z");
}

#[tokio::test]
async fn a_for_that_is_not_a_duration_is_a_json_400() {
    let w = world();

    let answer = get(&w.state, "/v1/idle?for=ten%20minutes").await;

    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["error"]["code"], "bad_request");
    let message = answer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.starts_with("for must be a duration"), "{message}");
}

#[tokio::test]
async fn without_a_claim_observer_the_idle_list_is_not_ready() {
    let w = world();
    let state = AppState::new(Arc::new(Metrics::new("0.0.0").unwrap()), Readiness::new());
    drop(w);

    let answer = get(&state, "/v1/idle").await;

    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.json()["error"]["code"], "not_ready");
}

#[tokio::test]
async fn the_idle_gauge_counts_devices_by_how_long_their_claims_are_idle() {
    let w = world();
    w.idle.observe("b", ClaimUse::Unused, w.clock.now_ms());
    w.clock.advance_secs(3000);
    w.idle.observe("a", ClaimUse::Unused, w.clock.now_ms());
    w.clock.advance_secs(601);

    let text = String::from_utf8(get(&w.state, "/metrics").await.body).unwrap();

    for (bucket, devices) in [("0s", 3), ("10m", 3), ("1h", 2), ("24h", 0)] {
        let series =
            format!("dra_ledger_idle_allocated_devices{{idle_for=\"{bucket}\"}} {devices}\n");
        assert!(text.contains(&series), "{series}{text}");
    }
}
