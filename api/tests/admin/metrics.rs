//! Every core metric is exposed on `/metrics` after a short workload on a real ledger, and the
//! ledger gauges follow the ledger's contents.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{scrape, series_value};
use dra_allocator::ledger::{Ledger, LedgerOptions};
use dra_allocator::model::{Device, Sharing};
use dra_api::metrics::{
    AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind, CORE_METRIC_NAMES,
    METRIC_NAMES,
};
use dra_api::{AppState, Metrics, Readiness};

fn open_ledger(dir: &tempfile::TempDir, metrics: &Arc<Metrics>) -> Ledger {
    let options = LedgerOptions {
        on_commit: Some(metrics.commit_hook()),
        ..LedgerOptions::default()
    };
    Ledger::open_with(dir.path().join("ledger.redb"), "gpu.example.com", options).unwrap()
}

/// Allocates one exclusive device to claim `uid`, on a node the ledger picks.
fn allocate(ledger: &Ledger, uid: &str) {
    let request = testkit::ledger::request(1, Sharing::Exclusive);
    ledger
        .allocate(testkit::ledger::allocate(uid, None, request))
        .unwrap();
}

#[tokio::test]
async fn every_core_metric_is_exposed_after_a_short_workload() {
    let metrics = Arc::new(Metrics::new("0.1.0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ledger = open_ledger(&dir, &metrics);
    let devices = (0..4).map(|i| Device::new(format!("gpu-{i}"))).collect();
    ledger.set_inventory("node-0", devices).unwrap();
    allocate(&ledger, "claim-a");
    allocate(&ledger, "claim-b");
    ledger.confirm("claim-a").unwrap();
    ledger.cordon("node-0", "gpu-3").unwrap();

    metrics.record_allocation(
        AllocationMode::Immediate,
        AllocationOutcome::Allocated,
        2,
        Duration::from_millis(3),
    );
    metrics.record_deallocation(DeallocationOutcome::Released);
    metrics.record_unsuitable_nodes(Duration::from_millis(1));
    metrics.record_drift(DriftKind::OrphanInLedger, 2);
    metrics.record_api_request("patch", "200");

    let state = AppState::new(metrics.clone(), Readiness::new()).with_ledger(ledger.clone());
    let text = scrape(&state).await;
    for name in CORE_METRIC_NAMES {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} missing from:\n{text}"
        );
    }
    let value =
        |series: &str| series_value::<u64>(&text, series).unwrap_or_else(|| panic!("{series}"));
    assert_eq!(value("dra_ledger_devices{state=\"allocated\"}"), 2);
    assert_eq!(value("dra_ledger_devices{state=\"free\"}"), 1);
    assert_eq!(value("dra_ledger_devices{state=\"cordoned\"}"), 1);
    assert_eq!(value("dra_ledger_claims_allocated"), 2);
    assert_eq!(value("dra_ledger_intents_pending"), 1);
    assert_eq!(
        value("dra_ledger_reconcile_drift_total{kind=\"orphan_in_ledger\"}"),
        2
    );
    assert_eq!(
        value("dra_ledger_allocations_total{mode=\"immediate\",outcome=\"allocated\"}"),
        2
    );
    assert_eq!(value("dra_ledger_allocate_duration_seconds_count"), 1);
    // Every write above went through a durable commit observed by the hook.
    assert!(value("dra_ledger_ledger_commit_batch_size_count") >= 1);
    assert!(value("dra_ledger_ledger_commit_duration_seconds_count") >= 1);

    ledger.release("claim-a").unwrap();
    let text = scrape(&state).await;
    assert_eq!(
        series_value::<u64>(&text, "dra_ledger_devices{state=\"allocated\"}"),
        Some(1)
    );
    assert_eq!(
        series_value::<u64>(&text, "dra_ledger_claims_allocated"),
        Some(1)
    );
}

#[test]
fn label_values_outside_the_fixed_verbs_count_as_other() {
    let metrics = Metrics::new("0.1.0").unwrap();
    metrics.record_api_request("list-everything", "200");
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("dra_ledger_api_requests_total{code=\"200\",verb=\"other\"} 1"),
        "{text}"
    );
}

#[test]
fn metric_names_use_the_prefix_and_base_units() {
    for name in METRIC_NAMES {
        assert!(name.starts_with(dra_api::metrics::PREFIX), "{name}");
    }
    let counters = METRIC_NAMES.iter().filter(|name| name.ends_with("_total"));
    assert_eq!(counters.count(), 5);
}
