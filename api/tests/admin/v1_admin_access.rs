//! Admin-access claims in the read-only `/v1` endpoints: apart from allocations in `/v1/claims`
//! and in the device view, counted per node, and left out of the device counts and utilisation.

use crate::support::{fixture, get, uids_of, Fixture};
use dra_allocator::ledger::{AdminAccessRequest, ClaimRef};

/// The fixture plus `adm-1` (team-a) looking at the first device of `c1` on node-a, and
/// `adm-2` (team-b) at `gpu-1` on node-b.
fn with_admin_access() -> (Fixture, String) {
    let f = fixture();
    let device = f.ledger.allocation("c1").unwrap().unwrap().devices[0].clone();
    for (uid, namespace, node, device) in [
        ("adm-1", "team-a", "node-a", device.as_str()),
        ("adm-2", "team-b", "node-b", "gpu-1"),
    ] {
        f.ledger
            .record_admin_access(AdminAccessRequest {
                claim: ClaimRef::new(uid, namespace, format!("claim-{uid}")),
                node: node.to_owned(),
                devices: vec![device.to_owned()],
            })
            .unwrap();
    }
    (f, device)
}

fn admin_uids(json: &serde_json::Value) -> Vec<String> {
    uids_of(json, "adminAccess")
}

#[tokio::test]
async fn claims_list_admin_access_apart_from_the_allocations_with_the_same_filters() {
    let (f, device) = with_admin_access();

    let all = get(&f.state, "/v1/claims").await.json();
    let team_a = get(&f.state, "/v1/claims?namespace=team-a").await.json();
    let node_b = get(&f.state, "/v1/claims?node=node-b").await.json();

    let items: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["c1", "c2", "c3"]);
    assert_eq!(admin_uids(&all), ["adm-1", "adm-2"]);
    assert_eq!(all["adminAccess"][0]["node"], "node-a");
    assert_eq!(all["adminAccess"][0]["devices"][0], device);
    assert_eq!(all["adminAccess"][0]["name"], "claim-adm-1");
    assert_eq!(admin_uids(&team_a), ["adm-1"]);
    assert_eq!(admin_uids(&node_b), ["adm-2"]);
}

#[tokio::test]
async fn admin_access_comes_with_the_first_page_only() {
    let (f, _) = with_admin_access();

    let first = get(&f.state, "/v1/claims?limit=1").await.json();
    let token = first["continue"].as_str().unwrap();
    let second = get(&f.state, &format!("/v1/claims?limit=1&continue={token}"))
        .await
        .json();

    assert_eq!(admin_uids(&first), ["adm-1", "adm-2"]);
    assert_eq!(first["items"].as_array().unwrap().len(), 1);
    assert_eq!(admin_uids(&second), Vec::<String>::new());
    assert_eq!(second["items"][0]["uid"], "c2");
}

#[tokio::test]
async fn claim_detail_of_an_admin_access_claim_says_so() {
    let (f, device) = with_admin_access();

    let admin = get(&f.state, "/v1/claims/adm-1").await;
    let allocated = get(&f.state, "/v1/claims/c1").await.json();

    assert_eq!(admin.status, axum::http::StatusCode::OK);
    let admin = admin.json();
    assert_eq!(admin["allocation"], serde_json::Value::Null);
    assert_eq!(admin["adminAccess"]["devices"][0], device);
    assert_eq!(admin["adminAccess"]["namespace"], "team-a");
    assert!(allocated.get("adminAccess").is_none());
}

#[tokio::test]
async fn nodes_count_admin_access_and_devices_list_it_apart_from_consumers() {
    let f = fixture();
    let before_nodes = get(&f.state, "/v1/nodes").await.json();
    let before_utilisation = get(&f.state, "/v1/utilisation").await.json();
    drop(f);
    let (f, device) = with_admin_access();

    let nodes = get(&f.state, "/v1/nodes").await.json();
    let devices = get(&f.state, "/v1/nodes/node-a/devices").await.json();
    let utilisation = get(&f.state, "/v1/utilisation").await.json();

    assert_eq!(nodes["items"][0]["adminAccess"], 1);
    assert_eq!(nodes["items"][1]["adminAccess"], 1);
    assert_eq!(before_nodes["items"][0]["adminAccess"], 0);
    for i in 0..2 {
        assert_eq!(
            nodes["items"][i]["devices"],
            before_nodes["items"][i]["devices"]
        );
    }
    assert_eq!(utilisation, before_utilisation);
    let looked_at = devices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == device.as_str())
        .unwrap();
    assert_eq!(looked_at["state"], "allocated");
    assert_eq!(looked_at["consumers"].as_array().unwrap().len(), 1);
    assert_eq!(looked_at["consumers"][0]["claimUid"], "c1");
    assert_eq!(looked_at["adminAccess"], serde_json::json!(["adm-1"]));
}

#[tokio::test]
async fn audit_names_admin_access_events() {
    let (f, _) = with_admin_access();
    f.ledger.release_admin_access("adm-2").unwrap();

    let audit = get(&f.state, "/v1/audit?limit=1000").await.json();

    let events: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"].as_str().unwrap().starts_with("adminAccess"))
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["claimUid"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("adminAccessRecorded", "adm-1"),
            ("adminAccessRecorded", "adm-2"),
            ("adminAccessReleased", "adm-2"),
        ]
    );
}
