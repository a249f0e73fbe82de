//! The reconcile of the ledger with the claims of the (in-memory) cluster.

use std::time::Duration;

use dra_allocator::ledger::AllocationState;
use dra_controller::driver::handle::{allocation_result, HandleData, HandleSharing};
use dra_controller::driver::{DriftKind, DriverError};
use dra_framework::Driver;
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceHandle};

use super::fixture::{allocated, claim, Fixture, DRIVER};

const NODES: &[(&str, usize, &str)] = &[("node-0", 2, "H100"), ("node-1", 2, "H100")];

/// Allocates claim `name`/`uid` on `node` and returns it as the cluster would show it.
async fn allocate_shown(f: &Fixture, name: &str, uid: &str, node: &str) -> ResourceClaim {
    let mut items = vec![f.item("gpu", claim(name, uid)).await];
    f.driver.allocate(&mut items, Some(node)).await;
    let result = items[0].allocation.clone().expect("allocated");
    allocated(&items[0].claim, result)
}

#[tokio::test]
async fn pending_intent_is_confirmed_when_the_claim_shows_the_allocation() {
    let f = Fixture::new(NODES);
    let shown = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(shown);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.confirmed, 1);
    assert_eq!(report.total_drift(), 0, "{report:?}");
    let allocation = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    assert_eq!(allocation.state, AllocationState::Confirmed);
    assert!(f.driver.ledger().pending_intents().unwrap().is_empty());
}

#[tokio::test]
async fn young_pending_intent_is_left_alone_and_a_stale_one_released() {
    let f = Fixture::new(NODES);
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(claim("c1", "uid-1").0);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.released, 0);
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_some());

    let f = Fixture::with_grace(NODES, Duration::ZERO);
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(claim("c1", "uid-1").0);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::StaleIntent), 1, "{report:?}");
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
}

#[tokio::test]
async fn old_pending_intent_handed_out_again_recently_is_not_released() {
    let f = Fixture::with_grace(NODES, Duration::from_millis(800));
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(claim("c1", "uid-1").0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The framework retries after a failed status write and gets the same devices again.
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(
        report.in_flight, 1,
        "its status write may be under way: {report:?}"
    );
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_some());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::StaleIntent), 1, "{report:?}");
}

#[tokio::test]
async fn confirmed_allocation_whose_claim_is_gone_is_an_orphan_and_released() {
    let f = Fixture::new(NODES);
    let shown = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(shown);
    f.driver.reconcile_now().await.unwrap();
    f.cluster.remove_claim("uid-1");
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::OrphanInLedger), 1, "{report:?}");
    assert_eq!(report.released, 1);
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
    let node = f.driver.ledger().node_devices("node-0").unwrap().unwrap();
    assert!(node.iter().all(|d| d.consumers.is_empty()), "nothing leaks");
}

#[tokio::test]
async fn lost_ledger_is_rebuilt_from_the_claims_allocation_results() {
    let old = Fixture::new(NODES);
    let shown = [
        allocate_shown(&old, "c1", "uid-1", "node-0").await,
        allocate_shown(&old, "c2", "uid-2", "node-1").await,
        allocate_shown(&old, "c3", "uid-3", "node-1").await,
    ];
    let fresh = Fixture::new(NODES);
    for claim in &shown {
        fresh.cluster.put_claim(claim.clone());
    }
    fresh.cluster.put_claim(claim("unallocated", "uid-9").0);
    let report = fresh.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::MissingInLedger), 3, "{report:?}");
    assert_eq!(report.imported, 3);
    for uid in ["uid-1", "uid-2", "uid-3"] {
        let before = old.driver.ledger().allocation(uid).unwrap().unwrap();
        let after = fresh.driver.ledger().allocation(uid).unwrap().unwrap();
        assert_eq!((after.node, after.devices), (before.node, before.devices));
        assert_eq!(after.state, AllocationState::Confirmed);
    }
    assert!(fresh.driver.ledger().verify().unwrap().is_consistent());
    let again = fresh.driver.reconcile_now().await.unwrap();
    assert_eq!(
        again.total_drift(),
        0,
        "a second reconcile finds nothing: {again:?}"
    );
}

fn with_data(claim: &ResourceClaim, data: &str) -> ResourceClaim {
    let mut claim = claim.clone();
    let allocation = claim.status.as_mut().unwrap().allocation.as_mut().unwrap();
    allocation.resource_handles = Some(vec![ResourceHandle {
        driver_name: Some(DRIVER.to_owned()),
        data: Some(data.to_owned()),
        structured_data: None,
    }]);
    claim
}

#[tokio::test]
async fn bad_handle_data_is_an_error_for_that_claim_only() {
    let old = Fixture::new(NODES);
    let good = allocate_shown(&old, "c1", "uid-1", "node-0").await;
    let bad = with_data(
        &allocate_shown(&old, "c2", "uid-2", "node-1").await,
        "{\"node\": 3",
    );
    let fresh = Fixture::new(NODES);
    fresh.cluster.put_claim(good);
    fresh.cluster.put_claim(bad);
    let report = fresh.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::BadHandleData), 1);
    assert_eq!(report.count(DriftKind::MissingInLedger), 1);
    assert_eq!(report.errors.len(), 1);
    assert!(
        report.errors[0].contains("default/c2: resource handle data"),
        "{:?}",
        report.errors
    );
    assert!(fresh.driver.ledger().allocation("uid-2").unwrap().is_none());
}

#[tokio::test]
async fn claim_showing_other_devices_wins_over_the_ledger() {
    let f = Fixture::with_grace(NODES, Duration::ZERO);
    let shown = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    let held = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    let other = if held.devices[0] == "gpu-0" {
        "gpu-1"
    } else {
        "gpu-0"
    };
    let data = HandleData {
        node: "node-0".into(),
        devices: vec![other.into()],
        sharing: HandleSharing::Exclusive,
        claim_uid: "uid-1".into(),
    };
    let mut moved = shown.clone();
    moved.status.as_mut().unwrap().allocation = Some(allocation_result(DRIVER, &data, false));
    f.cluster.put_claim(moved);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::DeviceMismatch), 1, "{report:?}");
    let now = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    assert_eq!(now.devices, [other]);
}

#[tokio::test]
async fn young_reallocation_is_not_undone_by_a_claim_list_that_predates_it() {
    let f = Fixture::new(&[("node-0", 1, "H100"), ("node-1", 1, "H100")]);
    let before = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(before.clone());
    f.driver.reconcile_now().await.unwrap();
    // Deallocated and reallocated on node-1 while the listed claim still shows node-0.
    f.driver.deallocate(&before).await.unwrap();
    let _ = allocate_shown(&f, "c1", "uid-1", "node-1").await;
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.in_flight, 1, "{report:?}");
    assert_eq!(report.total_drift(), 0, "{report:?}");
    let now = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    assert_eq!(now.node, "node-1");
}

#[tokio::test]
async fn imported_allocation_conflicting_with_a_held_device_is_counted() {
    let old = Fixture::new(&[("node-0", 1, "H100")]);
    let first = allocate_shown(&old, "c1", "uid-1", "node-0").await;
    let fresh = Fixture::new(&[("node-0", 1, "H100")]);
    let _ = allocate_shown(&fresh, "c2", "uid-2", "node-0").await;
    let second = allocated(&claim("c2", "uid-2").0, fresh_result(&fresh, "uid-2"));
    fresh.cluster.put_claim(first);
    fresh.cluster.put_claim(second);
    let report = fresh.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::DeviceConflict), 1, "{report:?}");
    assert!(fresh.driver.ledger().allocation("uid-1").unwrap().is_none());
}

fn fresh_result(f: &Fixture, uid: &str) -> k8s_openapi::api::resource::v1alpha2::AllocationResult {
    let held = f.driver.ledger().allocation(uid).unwrap().unwrap();
    let data = HandleData {
        node: held.node,
        devices: held.devices,
        sharing: held.sharing.into(),
        claim_uid: uid.to_owned(),
    };
    allocation_result(DRIVER, &data, false)
}

#[tokio::test]
async fn recently_deallocated_claim_is_not_imported_again() {
    let f = Fixture::new(NODES);
    let shown = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    // The claim list was taken before the status was cleared.
    f.cluster.put_claim(shown.clone());
    f.driver.deallocate(&shown).await.unwrap();
    let mut cleared = shown.clone();
    cleared.status = None;
    f.driver.deallocation_published(&cleared).await;
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.imported, 0, "{report:?}");
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
}

#[tokio::test]
async fn failing_claim_list_fails_the_reconcile_without_changes() {
    let f = Fixture::new(NODES);
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.fail_list(true);
    let error = f.driver.reconcile_now().await.unwrap_err();
    assert!(matches!(error, DriverError::ListClaims(_)), "{error}");
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_some());
}

#[tokio::test]
async fn orphans_are_freed_before_imports_that_need_their_devices() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    let first = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(first);
    f.driver.reconcile_now().await.unwrap();
    // c1 is gone; c2 shows the same device (allocated while the ledger was not looking).
    f.cluster.remove_claim("uid-1");
    let data = HandleData {
        node: "node-0".into(),
        devices: vec!["gpu-0".into()],
        sharing: HandleSharing::Exclusive,
        claim_uid: "uid-2".into(),
    };
    f.cluster.put_claim(allocated(
        &claim("c2", "uid-2").0,
        allocation_result(DRIVER, &data, false),
    ));
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::OrphanInLedger), 1, "{report:?}");
    assert_eq!(report.count(DriftKind::MissingInLedger), 1, "{report:?}");
    assert_eq!(report.count(DriftKind::DeviceConflict), 0, "{report:?}");
    assert_eq!(
        f.driver
            .ledger()
            .allocation("uid-2")
            .unwrap()
            .unwrap()
            .devices,
        ["gpu-0"]
    );
}

#[tokio::test]
async fn after_a_takeover_pending_intents_of_a_previous_leader_yield_to_the_cluster() {
    // This replica's ledger holds a young pending intent from its last term as leader; since
    // then another leader gave the same device to another claim.
    let mut f = Fixture::new(NODES);
    let _ = allocate_shown(&f, "c1", "uid-1", "node-0").await;
    let other = Fixture::new(NODES);
    let theirs = allocate_shown(&other, "c2", "uid-2", "node-0").await;
    let mine = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    let shown = other.driver.ledger().allocation("uid-2").unwrap().unwrap();
    assert_eq!(
        mine.devices, shown.devices,
        "the scenario needs one device twice"
    );
    f.cluster.put_claim(claim("c1", "uid-1").0);
    f.cluster.put_claim(theirs);

    // Without a takeover the young intent is in flight: it keeps the device and the other
    // claim cannot be recorded.
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.in_flight, 1, "{report:?}");
    assert_eq!(report.count(DriftKind::DeviceConflict), 1, "{report:?}");

    f.restart();
    f.driver.mark_takeover();
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.count(DriftKind::StaleIntent), 1, "{report:?}");
    assert_eq!(report.count(DriftKind::MissingInLedger), 1, "{report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
    let imported = f.driver.ledger().allocation("uid-2").unwrap().unwrap();
    assert_eq!(imported.devices, shown.devices);
    assert!(f.driver.ledger().verify().unwrap().is_consistent());

    // The flag is spent: an intent handed out after the takeover is in flight again.
    let _ = allocate_shown(&f, "c3", "uid-3", "node-1").await;
    f.cluster.put_claim(claim("c3", "uid-3").0);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(report.in_flight, 1, "{report:?}");
}

#[tokio::test]
async fn release_of_a_deallocated_claim_waits_for_a_running_reconcile() {
    // Another leader allocated the claim; this replica's reconcile lists it still allocated
    // while the claim is being deallocated: the release must not slip in before the import.
    let f = Fixture::new(NODES);
    let other = Fixture::new(NODES);
    let shown = allocate_shown(&other, "c1", "uid-1", "node-0").await;
    f.cluster.put_claim(shown);
    f.cluster.delay_list(Duration::from_millis(300));
    let driver = f.driver.clone();
    let reconcile = tokio::spawn(async move { driver.reconcile_now().await });
    tokio::time::sleep(Duration::from_millis(50)).await;

    let cleared = claim("c1", "uid-1").0;
    f.cluster.put_claim(cleared.clone());
    let driver = f.driver.clone();
    let release = tokio::spawn(async move { driver.deallocate(&cleared).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !release.is_finished(),
        "the release waits for the reconcile"
    );

    reconcile.await.unwrap().unwrap();
    release.await.unwrap().unwrap();
    assert!(
        f.driver.ledger().allocation("uid-1").unwrap().is_none(),
        "nothing is left held for the deallocated claim"
    );
    assert!(f.driver.ledger().verify().unwrap().is_consistent());
}
