//! Capacity beside the ledger's counts: what `/v1/nodes`, `/v1/utilisation`,
//! `/v1/nodes/{node}/devices` and `/v1/devices` show of partitions and shares once a capacity
//! view is published, and that they leave it out where there is none.

use dra_allocator::capacity::{Amounts, DevicePart, Hold, NodeParts, Unit};
use dra_allocator::ledger::ClaimRef;
use dra_allocator::model::{AttributeValue, Device, Quantity};
use dra_api::capacity::{CapacityView, ClaimHold, NodeCapacity};
use dra_api::SharedCapacity;
use serde_json::json;

use crate::support::{fixture, get, scrape, series_value, Fixture};

fn amounts(pairs: &[(&str, &str)]) -> Amounts {
    pairs
        .iter()
        .map(|(name, q)| ((*name).to_owned(), Quantity::parse(q).unwrap()))
        .collect()
}

fn held(uid: &str, hold: Hold) -> ClaimHold {
    ClaimHold {
        claim: ClaimRef::new(uid, "team-a", format!("claim-{uid}")),
        hold,
    }
}

fn h100(totals: Amounts) -> Unit {
    Unit {
        model: Some("H100".to_owned()),
        totals,
    }
}

/// `node-a`: `gpu-0` given to many claims (two shares of 40Gi of its 80Gi), `gpu-1` to `gpu-3`
/// whole GPUs of 80Gi (`gpu-1` held).
fn node_a() -> NodeCapacity {
    let memory = amounts(&[("memory", "80Gi")]);
    let mut parts = NodeParts::default();
    for i in 0..4 {
        let name = format!("gpu-{i}");
        let mut part = DevicePart::whole(&name, memory.clone());
        part.multi_allocation = i == 0;
        parts.units.insert(name.clone(), h100(memory.clone()));
        parts.devices.insert(name, part);
    }
    let share = |id: &str| Hold::share("", "gpu-0", id, amounts(&[("memory", "40Gi")]));
    NodeCapacity {
        parts,
        holds: vec![
            held("s1", share("share-1")),
            held("s2", share("share-2")),
            held("c3", Hold::whole("c3", "gpu-1")),
        ],
    }
}

/// `node-c`: one H100 as seven `1g` partitions (one compute slice of seven, 10Gi of 80Gi, one
/// memory slice of eight each), all held.
fn node_c() -> NodeCapacity {
    let mut totals = amounts(&[("memory", "80Gi"), ("compute-slices", "7")]);
    for slot in 0..8 {
        totals.insert(format!("memory-slice-{slot}"), Quantity::from_units(1));
    }
    let mut parts = NodeParts::default();
    parts.units.insert("gpu-0".to_owned(), h100(totals));
    let mut holds = Vec::new();
    for i in 0..7 {
        let name = format!("gpu-0-mig-1g-{i}");
        let mut takes = amounts(&[("memory", "10Gi"), ("compute-slices", "1")]);
        takes.insert(format!("memory-slice-{i}"), Quantity::from_units(1));
        let part = DevicePart {
            unit: "gpu-0".to_owned(),
            takes,
            capacity: amounts(&[("memory", "10Gi")]),
            multi_allocation: false,
        };
        parts.devices.insert(name.clone(), part);
        holds.push(held(&format!("p{i}"), Hold::whole(&format!("p{i}"), &name)));
    }
    NodeCapacity { parts, holds }
}

/// The fixture with `node-c`'s partitions in the ledger and the view of `node-a` and `node-c`
/// published; `node-b` has whole devices only and no view.
fn with_view() -> Fixture {
    let mut f = fixture();
    let partitions = (0..7)
        .map(|i| {
            Device::new(format!("gpu-0-mig-1g-{i}"))
                .with("model", AttributeValue::String("H100".to_owned()))
        })
        .collect();
    f.ledger.set_inventory("node-c", partitions).unwrap();
    let capacity = SharedCapacity::default();
    let mut view = CapacityView::default();
    view.nodes.insert("node-a".to_owned(), node_a());
    view.nodes.insert("node-c".to_owned(), node_c());
    capacity.publish(view);
    f.state = f.state.with_capacity(capacity);
    f
}

#[tokio::test]
async fn nodes_show_equivalents_and_memory_where_they_have_shared_devices() {
    let f = with_view();
    let json = get(&f.state, "/v1/nodes").await.json();
    let node = |name: &str| {
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        node("node-a")["capacity"],
        json!({
            "units": 4,
            "equivalentsAllocated": 2.0,
            "capacity": {"memory": {"allocated": "160Gi", "total": "320Gi"}},
        })
    );
    assert_eq!(
        node("node-c")["capacity"],
        json!({
            "units": 1,
            "equivalentsAllocated": 1.0,
            "capacity": {
                "memory": {"allocated": "70Gi", "total": "80Gi"},
                "compute-slices": {"allocated": "7", "total": "7"},
            },
        })
    );
    assert!(node("node-b").get("capacity").is_none());
}

#[tokio::test]
async fn utilisation_adds_up_capacity_per_model() {
    let f = with_view();
    let json = get(&f.state, "/v1/utilisation").await.json();
    assert_eq!(
        json["capacityByModel"],
        json!({"H100": {
            "units": 5,
            "equivalentsAllocated": 3.0,
            "capacity": {
                "memory": {"allocated": "230Gi", "total": "400Gi"},
                "compute-slices": {"allocated": "7", "total": "7"},
            },
        }})
    );
}

#[tokio::test]
async fn devices_show_their_parent_gpu_and_the_shares_claims_hold() {
    let f = with_view();
    let a = get(&f.state, "/v1/nodes/node-a/devices").await.json();
    let gpu0 = &a["items"][0];
    assert_eq!(gpu0["name"], "gpu-0");
    assert_eq!(
        gpu0["shares"],
        json!([
            {"claimUid": "s1", "namespace": "team-a", "name": "claim-s1", "shareId": "share-1", "consumed": {"memory": "40Gi"}},
            {"claimUid": "s2", "namespace": "team-a", "name": "claim-s2", "shareId": "share-2", "consumed": {"memory": "40Gi"}},
        ])
    );
    assert!(gpu0.get("parent").is_none());
    assert!(
        a["items"][1].get("shares").is_none(),
        "a whole GPU has no shares"
    );
    let grid = get(&f.state, "/v1/devices?nodes=node-c,node-b")
        .await
        .json();
    let partitions = grid["items"][0]["items"].as_array().unwrap();
    assert_eq!(partitions.len(), 7);
    assert!(partitions.iter().all(|d| d["parent"] == "gpu-0"));
    let whole = grid["items"][1]["items"].as_array().unwrap();
    assert!(whole
        .iter()
        .all(|d| d.get("parent").is_none() && d.get("shares").is_none()));
}

#[tokio::test]
async fn without_a_published_view_capacity_is_left_out() {
    let f = fixture();
    let nodes = get(&f.state, "/v1/nodes").await.json();
    assert!(nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n.get("capacity").is_none()));
    let utilisation = get(&f.state, "/v1/utilisation").await.json();
    assert!(utilisation.get("capacityByModel").is_none());
}

#[tokio::test]
async fn metrics_show_equivalents_and_capacity_by_model_without_placement_counters() {
    let f = with_view();
    let text = scrape(&f.state).await;
    let value = |series: &str| series_value::<f64>(&text, series);
    assert_eq!(
        value("dra_ledger_device_equivalents_allocated{model=\"H100\"}"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value("dra_ledger_device_equivalents_published{model=\"H100\"}"),
        Some(5.0)
    );
    let gib = f64::from(1u32 << 30);
    assert_eq!(
        value("dra_ledger_capacity_allocated{capacity=\"memory\",model=\"H100\"}"),
        Some(230.0 * gib)
    );
    assert_eq!(
        value("dra_ledger_capacity_published{capacity=\"memory\",model=\"H100\"}"),
        Some(400.0 * gib)
    );
    assert_eq!(
        value("dra_ledger_capacity_allocated{capacity=\"compute-slices\",model=\"H100\"}"),
        Some(7.0)
    );
    assert!(!text.contains("memory-slice"), "{text}");

    // Without partitions or shares the gauges have no series.
    f.state.capacity().publish(CapacityView::default());
    let text = scrape(&f.state).await;
    for name in dra_api::metrics::CAPACITY_METRIC_NAMES {
        assert!(!text.contains(&format!("{name}{{")), "{name}\n{text}");
    }
}
