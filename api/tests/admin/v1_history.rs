//! `GET /v1/usage` and `GET /v1/nodes/{node}/devices/{device}/history` over a ledger whose
//! claims ran through known intervals on a hand-moved clock.

use std::sync::Arc;

use crate::support::{fixture, get};
use axum::http::StatusCode;
use dra_allocator::ledger::Ledger;
use dra_api::{AppState, Metrics, Readiness};
use serde_json::json;
use testkit::ledger::{allocate_on, gpus, ManualClock, DRIVER};

/// 2026-01-01T00:00:00Z.
const T0: u64 = 1_767_225_600_000;

/// `a` (team-a) holds one H100 on node-a for 90 s from T0; `b` (team-b) two H200 on node-b from
/// T0 + 60 s on; node-a's gpu-0 is cordoned at T0 + 100 s; the clock stops at T0 + 120 s.
fn history_state() -> (tempfile::TempDir, Ledger, AppState) {
    let clock = ManualClock::at(T0);
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Ledger::open_with(dir.path().join("ledger.redb"), DRIVER, clock.options()).unwrap();
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    ledger.set_inventory("node-b", gpus(2, "H200")).unwrap();
    allocate_on(&ledger, "a", "team-a", "node-a", 1);
    clock.advance_secs(60);
    allocate_on(&ledger, "b", "team-b", "node-b", 2);
    clock.advance_secs(30);
    ledger.release("a").unwrap();
    clock.advance_secs(10);
    ledger.cordon("node-a", "gpu-0").unwrap();
    clock.advance_secs(20);
    let readiness = Readiness::new();
    readiness.set_ledger_open();
    let state = AppState::new(Arc::new(Metrics::new("0.0.0").unwrap()), readiness)
        .with_ledger(ledger.clone());
    (dir, ledger, state)
}

const WINDOW: &str = "from=2026-01-01T00:00:00Z&to=2026-01-01T00:02:00Z";

/// Seven days (the default rollup age) before the ledger clock's reading, 00:02.
const ROLLED_UP_BEFORE: &str = "2025-12-25T00:02:00.000Z";

#[tokio::test]
async fn usage_by_namespace_is_exact_to_the_second() {
    let (_dir, _ledger, state) = history_state();

    let answer = get(&state, &format!("/v1/usage?{WINDOW}")).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json(),
        json!({
            "from": "2026-01-01T00:00:00.000Z",
            "to": "2026-01-01T00:02:00.000Z",
            "by": "namespace",
            "rows": [
                {"key": "team-a", "deviceSeconds": 90.0, "claims": 1, "peakDevices": 1.0},
                {"key": "team-b", "deviceSeconds": 120.0, "claims": 1, "peakDevices": 2.0},
            ],
            "total": {"key": "total", "deviceSeconds": 210.0, "claims": 2, "peakDevices": 3.0},
            "rolledUpBefore": ROLLED_UP_BEFORE,
        })
    );
}

#[tokio::test]
async fn usage_by_node_and_model_clips_to_the_window() {
    let (_dir, _ledger, state) = history_state();
    // From T0 + 80 s: a 10 s, b 2 x 40 s.
    let window = "from=2026-01-01T00:01:20Z&to=2026-01-01T00:02:00Z";

    let by_node = get(&state, &format!("/v1/usage?{window}&by=node"))
        .await
        .json();
    let by_model = get(&state, &format!("/v1/usage?{window}&by=model"))
        .await
        .json();

    let seconds = |json: &serde_json::Value| -> Vec<(String, f64)> {
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_owned(),
                    r["deviceSeconds"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(by_node["by"], "node");
    assert_eq!(
        seconds(&by_node),
        [("node-a".to_owned(), 10.0), ("node-b".to_owned(), 80.0)]
    );
    assert_eq!(
        seconds(&by_model),
        [("H100".to_owned(), 10.0), ("H200".to_owned(), 80.0)]
    );
}

#[tokio::test]
async fn usage_defaults_to_the_last_24_hours() {
    let f = fixture();

    let json = get(&f.state, "/v1/usage").await.json();

    let parse = |key: &str| {
        chrono::DateTime::parse_from_rfc3339(json[key].as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    assert_eq!(parse("to") - parse("from"), 24 * 3600 * 1000);
    // c1 (2 devices) and c3 are held now and c4 was released: team-a and team-b both used some.
    let keys: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["team-a", "team-b"]);
    assert_eq!(json["rows"][0]["claims"], 2);
    assert_eq!(json["rows"][0]["peakDevices"], 3.0);
}

#[tokio::test]
async fn bad_times_groupings_and_empty_windows_are_400_with_the_error_json() {
    let (_dir, _ledger, state) = history_state();
    let cases = [
        ("/v1/usage?from=yesterday", "from must be an RFC 3339 time"),
        ("/v1/usage?to=2026-13-01T00:00:00Z", "to must be an RFC 3339 time"),
        ("/v1/usage?by=team", "by: unknown grouping \"team\""),
        (
            "/v1/usage?from=2026-01-01T00:02:00Z&to=2026-01-01T00:02:00Z",
            "from must be before to",
        ),
        (
            "/v1/nodes/node-a/devices/gpu-0/history?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
            "from must be before to",
        ),
    ];
    for (path, message) in cases {
        let answer = get(&state, path).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(answer.code(), "bad_request", "{path}");
        assert!(
            answer.message().starts_with(message),
            "{path}: {}",
            answer.message()
        );
    }
}

#[tokio::test]
async fn device_history_lists_holders_and_events_oldest_first() {
    let (_dir, _ledger, state) = history_state();

    let a = get(
        &state,
        &format!("/v1/nodes/node-a/devices/gpu-0/history?{WINDOW}"),
    )
    .await;
    let b = get(
        &state,
        &format!("/v1/nodes/node-b/devices/gpu-1/history?{WINDOW}"),
    )
    .await;

    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({
            "holders": [{
                "claimUid": "a", "namespace": "team-a", "name": "claim-a",
                "from": "2026-01-01T00:00:00.000Z", "to": "2026-01-01T00:01:30.000Z",
            }],
            "events": [
                {"time": "2026-01-01T00:00:00.000Z", "kind": "added", "detail": ""},
                {"time": "2026-01-01T00:01:40.000Z", "kind": "cordoned", "detail": ""},
            ],
            "rolledUpBefore": ROLLED_UP_BEFORE,
        })
    );
    assert_eq!(b.json()["holders"][0]["claimUid"], "b");
    assert_eq!(b.json()["holders"][0]["to"], serde_json::Value::Null);
}

#[tokio::test]
async fn device_history_of_a_device_without_history_is_404() {
    let (_dir, _ledger, state) = history_state();

    let answer = get(&state, "/v1/nodes/node-z/devices/gpu-0/history").await;

    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.code(), "not_found");
    assert_eq!(
        answer.message(),
        "device gpu-0 of node node-z has no history in the ledger"
    );
}
