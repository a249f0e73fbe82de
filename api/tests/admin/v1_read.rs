//! The read-only `/v1` endpoints over a real ledger, through `oneshot`.

use std::sync::Arc;

use crate::support::{fixture, get, uids_of};
use axum::http::StatusCode;
use dra_api::{AppState, Metrics, Readiness};
use serde_json::json;

#[tokio::test]
async fn nodes_list_device_counts_per_node() {
    let f = fixture();
    let answer = get(&f.state, "/v1/nodes").await;
    assert_eq!(answer.status, StatusCode::OK);
    let json = answer.json();
    assert_eq!(json["items"][0]["name"], "node-a");
    assert_eq!(
        json["items"][0]["devices"],
        json!({"total": 4, "free": 1, "allocated": 3, "shared": 0, "cordoned": 0, "missing": 0})
    );
    assert_eq!(json["items"][1]["name"], "node-b");
    assert_eq!(json["items"][1]["devices"]["allocated"], 1);
    assert_eq!(json["items"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn node_devices_show_attributes_state_and_consumers() {
    let f = fixture();
    let json = get(&f.state, "/v1/nodes/node-b/devices").await.json();
    assert_eq!(json["node"], "node-b");
    let items = json["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let held: Vec<_> = items.iter().filter(|d| d["state"] == "allocated").collect();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["attributes"]["model"], "A100");
    assert_eq!(held[0]["consumers"][0]["claimUid"], "c2");
    assert_eq!(held[0]["consumers"][0]["sharing"]["mode"], "exclusive");
    assert!(items
        .iter()
        .any(|d| d["state"] == "free" && d["consumers"] == json!([])));
}

#[tokio::test]
async fn devices_of_unknown_node_are_404() {
    let answer = get(&fixture().state, "/v1/nodes/node-z/devices").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.code(), "not_found");
    assert_eq!(
        answer.json()["error"]["message"],
        "node node-z has no devices in the ledger"
    );
}

fn uids(json: &serde_json::Value) -> Vec<String> {
    uids_of(json, "items")
}

#[tokio::test]
async fn claims_filter_by_namespace_and_node() {
    let f = fixture();
    let all = get(&f.state, "/v1/claims").await.json();
    assert_eq!(uids(&all), ["c1", "c2", "c3"]);
    assert!(all.get("continue").is_none());
    assert_eq!(all["items"][0]["state"], "confirmed");
    assert_eq!(all["items"][0]["devices"].as_array().unwrap().len(), 2);
    assert_eq!(all["items"][1]["state"], "pending");
    let team_a = get(&f.state, "/v1/claims?namespace=team-a").await.json();
    assert_eq!(uids(&team_a), ["c1", "c3"]);
    let node_b = get(&f.state, "/v1/claims?node=node-b").await.json();
    assert_eq!(uids(&node_b), ["c2"]);
    let none = get(&f.state, "/v1/claims?namespace=team-b&node=node-a")
        .await
        .json();
    assert_eq!(uids(&none), Vec::<String>::new());
}

#[tokio::test]
async fn claims_page_through_continue_tokens_to_the_last_page() {
    let f = fixture();
    let mut seen = Vec::new();
    let mut path = "/v1/claims?limit=1".to_owned();
    for _ in 0..10 {
        let page = get(&f.state, &path).await.json();
        seen.extend(uids(&page));
        match page["continue"].as_str() {
            Some(token) => path = format!("/v1/claims?limit=1&continue={token}"),
            None => break,
        }
    }
    assert_eq!(seen, ["c1", "c2", "c3"]);

    let first = get(&f.state, "/v1/claims?namespace=team-a&limit=1")
        .await
        .json();
    let token = first["continue"].as_str().unwrap();
    let second = get(
        &f.state,
        &format!("/v1/claims?namespace=team-a&limit=1&continue={token}"),
    )
    .await
    .json();
    assert_eq!(uids(&second), ["c3"]);
}

#[tokio::test]
async fn bad_paging_input_is_400() {
    let f = fixture();
    let token = get(&f.state, "/v1/claims?namespace=team-a&limit=1")
        .await
        .json()["continue"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        "/v1/claims?continue=zzzz".to_owned(),
        "/v1/claims?continue=00".to_owned(),
        format!("/v1/claims?continue={token}"),
        "/v1/claims?limit=0".to_owned(),
        "/v1/claims?limit=1001".to_owned(),
        "/v1/claims?limit=many".to_owned(),
        "/v1/audit?since=-1".to_owned(),
    ] {
        let answer = get(&f.state, &path).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(answer.code(), "bad_request", "{path}");
    }
}

#[tokio::test]
async fn claim_detail_carries_the_intent_history() {
    let f = fixture();
    let json = get(&f.state, "/v1/claims/c1").await.json();
    assert_eq!(json["uid"], "c1");
    assert_eq!(json["allocation"]["namespace"], "team-a");
    assert_eq!(json["allocation"]["name"], "claim-c1");
    let kinds: Vec<_> = json["intents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allocate", "confirm"]);
    assert_eq!(json["intents"][0]["outcome"], "confirmed");

    let released = get(&f.state, "/v1/claims/c4").await.json();
    assert_eq!(released["allocation"], serde_json::Value::Null);
    assert_eq!(released["intents"][0]["outcome"], "released");
}

#[tokio::test]
async fn unknown_claim_is_404() {
    let answer = get(&fixture().state, "/v1/claims/nope").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        answer.json()["error"]["message"],
        "claim nope is not in the ledger"
    );
}

#[tokio::test]
async fn intents_list_only_unconfirmed_allocations() {
    let json = get(&fixture().state, "/v1/intents").await.json();
    let claims: Vec<_> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["claimUid"].as_str().unwrap())
        .collect();
    assert_eq!(claims, ["c2", "c3"]);
    assert_eq!(json["items"][0]["node"], "node-b");
}

#[tokio::test]
async fn audit_pages_by_sequence_number() {
    let f = fixture();
    let all = get(&f.state, "/v1/audit").await.json();
    let events: Vec<_> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events.iter().filter(|e| **e == "deviceAdded").count(), 6);
    assert_eq!(events.iter().filter(|e| **e == "allocated").count(), 4);
    assert_eq!(events.last(), Some(&"released"));

    let first = get(&f.state, "/v1/audit?limit=2").await.json();
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let next = first["nextSince"].as_u64().unwrap();
    let rest = get(&f.state, &format!("/v1/audit?since={next}"))
        .await
        .json();
    assert_eq!(
        rest["items"].as_array().unwrap().len() + 2,
        all["items"].as_array().unwrap().len()
    );
    assert_eq!(rest["items"][0]["seq"].as_u64().unwrap(), next + 1);
    let end = get(&f.state, &format!("/v1/audit?since={}", all["nextSince"]))
        .await
        .json();
    assert_eq!(end["items"], json!([]));
    assert_eq!(end["nextSince"], all["nextSince"]);
}

#[tokio::test]
async fn utilisation_totals_and_breakdown_by_model() {
    let json = get(&fixture().state, "/v1/utilisation").await.json();
    assert_eq!(json["totals"]["total"], 6);
    assert_eq!(json["totals"]["allocated"], 4);
    assert_eq!(json["byAttribute"]["model"]["H100"]["allocated"], 3);
    assert_eq!(json["byAttribute"]["model"]["A100"]["free"], 1);
    assert_eq!(json["claimsAllocated"], 3);
    assert_eq!(json["intentsPending"], 2);
}

#[tokio::test]
async fn ledger_views_are_503_without_a_ledger() {
    let state = AppState::new(Arc::new(Metrics::new("0").unwrap()), Readiness::new());
    for path in [
        "/v1/nodes",
        "/v1/claims",
        "/v1/utilisation",
        "/v1/claims/c1",
    ] {
        let answer = get(&state, path).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(answer.code(), "not_ready");
    }
}
