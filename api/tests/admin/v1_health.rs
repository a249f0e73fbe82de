//! Device health in the read-only `/v1` endpoints: counted per node, shown per device with the
//! reason and time, flagged on the claims holding the device, and named in the audit log.

use std::collections::BTreeMap;

use crate::support::{fixture, get};
use dra_allocator::ledger::DeviceHealth;
use serde_json::json;

#[tokio::test]
async fn an_unhealthy_device_is_counted_shown_and_flagged_on_its_claim() {
    let f = fixture();
    let held = f.ledger.allocation("c1").unwrap().unwrap().devices[0].clone();
    f.ledger
        .set_node_health(
            "node-a",
            BTreeMap::from([(
                held.clone(),
                DeviceHealth {
                    reason: "XidCritical".into(),
                    since_ms: 1234,
                },
            )]),
        )
        .unwrap();

    let nodes = get(&f.state, "/v1/nodes").await.json();
    let devices = get(&f.state, "/v1/nodes/node-a/devices").await.json();
    let claims = get(&f.state, "/v1/claims").await.json();
    let claim = get(&f.state, "/v1/claims/c1").await.json();
    let audit = get(&f.state, "/v1/audit?limit=1000").await.json();

    assert_eq!(nodes["items"][0]["unhealthy"], 1);
    assert_eq!(nodes["items"][1]["unhealthy"], 0);
    assert_eq!(nodes["items"][0]["devices"]["allocated"], 3);
    for device in devices["items"].as_array().unwrap() {
        if device["name"] == held.as_str() {
            assert_eq!(
                device["health"],
                json!({"state": "unhealthy", "reason": "XidCritical", "sinceMs": 1234})
            );
            assert_eq!(device["state"], "allocated");
        } else {
            assert_eq!(device["health"], json!({"state": "healthy"}));
        }
    }
    assert_eq!(claims["items"][0]["uid"], "c1");
    assert_eq!(claims["items"][0]["unhealthyDevices"], json!([held]));
    assert_eq!(claims["items"][1]["unhealthyDevices"], json!([]));
    assert_eq!(claim["allocation"]["unhealthyDevices"], json!([held]));
    let last = audit["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["event"], "deviceUnhealthy");
    assert_eq!(last["reason"], "XidCritical");
    assert_eq!(last["devices"], json!([held]));
}
