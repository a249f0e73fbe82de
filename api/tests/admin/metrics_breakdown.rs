//! The breakdown gauges follow the ledger: per-node and per-attribute series appear with the
//! inventory and vanish with it, attributes with too many distinct values are left out, and
//! `ready` and the oldest intent age are refreshed on each scrape.

// Compared values are small whole numbers or exact decimal fractions parsed from the same text.
#![allow(clippy::float_cmp)]

use std::time::Duration;

use crate::support::{scrape, series_value};
use dra_allocator::ledger::Ledger;
use dra_allocator::model::{AttributeValue, Device};
use dra_api::metrics::{CORE_METRIC_NAMES, MAX_ATTRIBUTE_VALUES, METRIC_NAMES};
use dra_api::{AppState, Metrics, Readiness};
use std::sync::Arc;
use testkit::ledger::allocate_on;

fn gpus(model: &str, count: usize) -> Vec<Device> {
    (0..count)
        .map(|i| {
            Device::new(format!("gpu-{i}"))
                .with("model", AttributeValue::String(model.to_owned()))
                .with("serial", AttributeValue::String(format!("{model}-{i}")))
        })
        .collect()
}

#[tokio::test]
async fn node_and_model_series_follow_the_inventory() {
    let metrics = Arc::new(Metrics::new("0.1.0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com").unwrap();
    ledger.set_inventory("node-a", gpus("H100", 4)).unwrap();
    // More serials than MAX_ATTRIBUTE_VALUES across the inventory: left out of the breakdown.
    ledger
        .set_inventory("node-b", gpus("A100", MAX_ATTRIBUTE_VALUES))
        .unwrap();
    allocate_on(&ledger, "claim-1", "default", "node-a", 1);
    let state = AppState::new(metrics.clone(), Readiness::new()).with_ledger(ledger.clone());

    let text = scrape(&state).await;
    let get = |series: &str| {
        series_value::<f64>(&text, series).unwrap_or_else(|| panic!("{series} in\n{text}"))
    };
    assert_eq!(
        get("dra_ledger_node_devices{node=\"node-a\",state=\"allocated\"}"),
        1.0
    );
    assert_eq!(
        get("dra_ledger_node_devices{node=\"node-a\",state=\"free\"}"),
        3.0
    );
    assert_eq!(
        get("dra_ledger_node_devices{node=\"node-b\",state=\"free\"}"),
        16.0
    );
    assert_eq!(
        get("dra_ledger_attribute_devices{attribute=\"model\",state=\"allocated\",value=\"H100\"}"),
        1.0
    );
    assert_eq!(
        get("dra_ledger_attribute_devices{attribute=\"model\",state=\"free\",value=\"A100\"}"),
        16.0
    );
    assert!(!text.contains("attribute=\"serial\""), "{text}");

    // A node whose devices all go away loses its series; the model only it had goes too.
    ledger.set_inventory("node-b", Vec::new()).unwrap();
    let text = scrape(&state).await;
    assert!(!text.contains("node=\"node-b\""), "{text}");
    assert!(!text.contains("value=\"A100\""), "{text}");
    assert!(text.contains("node=\"node-a\""), "{text}");
}

#[tokio::test]
async fn ready_gauge_and_intent_age_are_refreshed_on_scrape() {
    let metrics = Arc::new(Metrics::new("0.1.0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com").unwrap();
    ledger.set_inventory("node-a", gpus("H100", 2)).unwrap();
    let readiness = Readiness::new();
    let state = AppState::new(metrics.clone(), readiness.clone()).with_ledger(ledger.clone());

    let text = scrape(&state).await;
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_ready"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_oldest_pending_intent_age_seconds"),
        Some(0.0)
    );
    // The gauges beyond the core metrics are all exposed as soon as a ledger is attached.
    for name in METRIC_NAMES
        .iter()
        .filter(|name| !CORE_METRIC_NAMES.contains(name))
    {
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}\n{text}");
    }

    readiness.set_ledger_open();
    readiness.set_caches_synced();
    readiness.set_reconciled();
    allocate_on(&ledger, "claim-1", "default", "node-a", 1);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let text = scrape(&state).await;
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_ready"),
        Some(1.0),
        "{text}"
    );
    let age = series_value::<f64>(&text, "dra_ledger_oldest_pending_intent_age_seconds").unwrap();
    assert!((0.02..60.0).contains(&age), "{age}");

    // Confirmed: no intent pending, the age is back to 0.
    ledger.confirm("claim-1").unwrap();
    let text = scrape(&state).await;
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_oldest_pending_intent_age_seconds"),
        Some(0.0)
    );
}

#[test]
fn oldest_intent_age_is_measured_from_its_creation() {
    let metrics = Metrics::new("0.1.0").unwrap();
    metrics.set_oldest_intent(Some(1_000), 91_500);
    let text = metrics.encode().unwrap();
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_oldest_pending_intent_age_seconds"),
        Some(90.5)
    );
    // A clock that went backwards never shows a negative age.
    metrics.set_oldest_intent(Some(5_000), 1_000);
    let text = metrics.encode().unwrap();
    assert_eq!(
        series_value::<f64>(&text, "dra_ledger_oldest_pending_intent_age_seconds"),
        Some(0.0)
    );
}
