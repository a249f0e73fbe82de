//! Claim operations of the ledger: idempotence, intents, sharing, pods, inventory changes.

use crate::support::{assert_error, take, with_h100s};
use dra_allocator::ledger::{AllocationState, ImportRequest, IntentKind, LedgerError, Resolution};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

#[test]
fn repeat_allocate_returns_same_devices() {
    let (_dir, ledger) = with_h100s(4);

    let first = take(&ledger, "u1", 2);
    let again = take(&ledger, "u1", 2);

    assert_eq!(first, again);
    assert_eq!(first.devices.len(), 2);
    assert_eq!(ledger.nodes().unwrap()[0].counts.allocated, 2);
    assert_consistent(&ledger);
}

#[test]
fn repeat_with_different_parameters_conflicts_until_released() {
    let (_dir, ledger) = with_h100s(4);
    take(&ledger, "u1", 1);

    let error = ledger
        .allocate(allocate("u1", None, request(2, Sharing::Exclusive)))
        .unwrap_err();
    assert_error!(error, LedgerError::ClaimConflict { .. });
    let error = ledger
        .allocate(allocate(
            "u1",
            Some("node-b"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap_err();
    assert_error!(error, LedgerError::ClaimConflict { .. });

    ledger.release("u1").unwrap();
    let now = take(&ledger, "u1", 2);
    assert_eq!(now.devices.len(), 2);
    assert_consistent(&ledger);
}

#[test]
fn allocation_stays_pending_with_an_intent_until_confirmed() {
    let (_dir, ledger) = with_h100s(2);

    let allocation = ledger
        .allocate(allocate(
            "u1",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    assert_eq!(allocation.state, AllocationState::Pending);
    let pending = ledger.pending_intents().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].claim.uid, "u1");
    assert_eq!(pending[0].devices, allocation.devices);
    assert_eq!(pending[0].intent, allocation.intent);

    let confirmed = ledger.confirm("u1").unwrap();
    assert_eq!(confirmed.state, AllocationState::Confirmed);
    assert_eq!(
        ledger.confirm("u1").unwrap().state,
        AllocationState::Confirmed
    );
    assert!(ledger.pending_intents().unwrap().is_empty());
    let history = ledger.claim("u1").unwrap().unwrap().intents;
    assert_eq!(history[0].kind, IntentKind::Allocate);
    assert!(matches!(
        history[0].resolution,
        Some((Resolution::Confirmed, _))
    ));
    assert_eq!(history[1].kind, IntentKind::Confirm);
    assert_consistent(&ledger);
}

#[test]
fn a_deferred_confirmation_rides_with_the_next_write_and_checks_the_placement() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that nothing deferred is committed alone before the next write.
    let ledger = dra_allocator::ledger::Ledger::open_with(
        dir.path().join("ledger.redb"),
        DRIVER,
        dra_allocator::ledger::LedgerOptions {
            defer_limit: std::time::Duration::from_secs(600),
            ..options()
        },
    )
    .unwrap();
    ledger.set_inventory("node-a", gpus(4, "H100")).unwrap();
    let mut allocations = Vec::new();
    for uid in ["u1", "u2", "u3"] {
        allocations.push(
            ledger
                .allocate(allocate(uid, None, request(1, Sharing::Exclusive)))
                .unwrap(),
        );
    }
    let before = ledger.commit_stats().commits;

    let u1 = &allocations[0];
    ledger
        .confirm_deferred("u1", &u1.node, &u1.devices)
        .unwrap();
    // Another node, and other devices: not what the ledger holds, so not confirmed.
    let u2 = &allocations[1];
    ledger
        .confirm_deferred("u2", "node-b", &u2.devices)
        .unwrap();
    ledger
        .confirm_deferred("u3", "node-a", &allocations[0].devices)
        .unwrap();
    ledger.confirm_deferred("nobody", "node-a", &[]).unwrap();
    take(&ledger, "u4", 1);

    // The deferred confirmations were applied in the allocation's commit, before it.
    let stats = ledger.commit_stats();
    assert_eq!(stats.commits, before + 1, "{stats:?}");
    let last = stats.recent.last().unwrap();
    assert_eq!((last.batch_size, last.durable), (5, true));
    let state_of = |uid| ledger.allocation(uid).unwrap().unwrap().state;
    assert_eq!(state_of("u1"), AllocationState::Confirmed);
    assert_eq!(state_of("u2"), AllocationState::Pending);
    assert_eq!(state_of("u3"), AllocationState::Pending);
    let pending: Vec<String> = ledger
        .pending_intents()
        .unwrap()
        .into_iter()
        .map(|p| p.claim.uid)
        .collect();
    assert_eq!(pending, ["u2", "u3", "u4"]);
    assert_consistent(&ledger);
}

#[test]
fn a_deferred_confirmation_alone_is_committed_without_a_sync_and_synced_at_close() {
    let (dir, ledger) = with_h100s(2);
    let a = take(&ledger, "u1", 1);
    let b = take(&ledger, "u2", 1);

    ledger.confirm_deferred("u1", &a.node, &a.devices).unwrap();
    testkit::eventually_blocking(
        "the deferred confirmation of u1 committed",
        std::time::Duration::from_secs(2),
        std::time::Duration::from_millis(5),
        || ledger.allocation("u1").unwrap().unwrap().state == AllocationState::Confirmed,
    );
    let last = *ledger.commit_stats().recent.last().unwrap();
    assert_eq!((last.batch_size, last.durable, last.ok), (1, false, true));

    // Closed before its wait is over: the writer commits it, synced, on the way out.
    ledger.confirm_deferred("u2", &b.node, &b.devices).unwrap();
    drop(ledger);
    let ledger = open(dir.path());
    for uid in ["u1", "u2"] {
        assert_eq!(
            ledger.allocation(uid).unwrap().unwrap().state,
            AllocationState::Confirmed,
            "{uid}"
        );
    }
    assert!(ledger.pending_intents().unwrap().is_empty());
    assert_consistent(&ledger);
}

#[test]
fn confirm_of_unknown_claim_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    let error = ledger.confirm("nobody").unwrap_err();
    assert_error!(error, LedgerError::ClaimNotFound { .. });
}

#[test]
fn release_is_idempotent_and_unknown_uid_is_fine() {
    let (_dir, ledger) = with_h100s(1);
    take(&ledger, "u1", 1);

    assert!(ledger.release("u1").unwrap().is_some());
    assert!(ledger.release("u1").unwrap().is_none());
    assert!(ledger.release("never-seen").unwrap().is_none());
    assert!(ledger.allocation("u1").unwrap().is_none());
    assert_eq!(ledger.nodes().unwrap()[0].counts.free, 1);
    let history = ledger.claim("u1").unwrap().unwrap().intents;
    assert!(matches!(
        history[0].resolution,
        Some((Resolution::Released, _))
    ));
    assert_eq!(history.last().unwrap().kind, IntentKind::Release);
    assert_consistent(&ledger);
}

#[test]
fn abort_frees_a_pending_allocation_but_refuses_a_confirmed_one() {
    let (_dir, ledger) = with_h100s(2);
    take(&ledger, "pending", 1);
    take(&ledger, "confirmed", 1);
    ledger.confirm("confirmed").unwrap();

    assert!(ledger.abort("pending").unwrap().is_some());
    assert!(ledger.abort("pending").unwrap().is_none());
    let error = ledger.abort("confirmed").unwrap_err();
    assert_error!(error, LedgerError::AbortConfirmed { .. });
    assert!(ledger.allocation("confirmed").unwrap().is_some());
    assert!(ledger.pending_intents().unwrap().is_empty());
    assert_consistent(&ledger);
}

#[test]
fn exclusive_devices_are_never_given_twice() {
    let (_dir, ledger) = with_h100s(2);
    take(&ledger, "u1", 1);
    take(&ledger, "u2", 1);

    let error = ledger
        .allocate(allocate("u3", None, request(1, Sharing::Exclusive)))
        .unwrap_err();

    assert_error!(error, LedgerError::Unsatisfiable { .. });
    assert!(ledger.allocation("u3").unwrap().is_none());
    assert_consistent(&ledger);
}

#[test]
fn shared_devices_take_up_to_max_consumers() {
    let (_dir, ledger) = with_h100s(1);
    let shared = Sharing::Shared { max_consumers: 2 };
    ledger
        .allocate(allocate("u1", None, request(1, shared)))
        .unwrap();
    ledger
        .allocate(allocate("u2", None, request(1, shared)))
        .unwrap();

    assert!(ledger
        .allocate(allocate("u3", None, request(1, shared)))
        .is_err());
    let devices = ledger.node_devices("node-a").unwrap().unwrap();
    assert_eq!(devices[0].consumers.len(), 2);
    assert_eq!(ledger.nodes().unwrap()[0].counts.shared, 1);
    assert_consistent(&ledger);
}

#[test]
fn pod_claims_are_allocated_all_or_nothing() {
    let (_dir, ledger) = with_h100s(3);

    let error = ledger
        .allocate_pod(
            "pod-1",
            "node-a",
            vec![
                pod_claim("a", request(2, Sharing::Exclusive)),
                pod_claim("b", request(2, Sharing::Exclusive)),
            ],
        )
        .unwrap_err();
    assert_error!(error, LedgerError::Unsatisfiable { .. });
    assert!(ledger.allocation("a").unwrap().is_none());
    assert!(ledger.allocation("b").unwrap().is_none());

    let done = ledger
        .allocate_pod(
            "pod-1",
            "node-a",
            vec![
                pod_claim("a", request(2, Sharing::Exclusive)),
                pod_claim("b", request(1, Sharing::Exclusive)),
            ],
        )
        .unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].pod_uid.as_deref(), Some("pod-1"));
    let again = ledger
        .allocate_pod(
            "pod-1",
            "node-a",
            vec![
                pod_claim("a", request(2, Sharing::Exclusive)),
                pod_claim("b", request(1, Sharing::Exclusive)),
            ],
        )
        .unwrap();
    assert_eq!(done, again);
    assert_consistent(&ledger);
}

#[test]
fn vanished_allocated_device_becomes_missing_and_leaves_on_release() {
    let (_dir, ledger) = with_h100s(2);
    let allocation = take(&ledger, "u1", 1);
    let held = allocation.devices[0].clone();

    let change = ledger.set_inventory("node-a", Vec::new()).unwrap();

    assert_eq!(change.marked_missing, vec![held.clone()]);
    assert_eq!(change.removed.len(), 1);
    let devices = ledger.node_devices("node-a").unwrap().unwrap();
    assert_eq!(devices.len(), 1);
    assert!(devices[0].missing);
    assert_consistent(&ledger);

    ledger.release("u1").unwrap();
    assert!(ledger.node_devices("node-a").unwrap().is_none());
    assert_consistent(&ledger);
}

#[test]
fn missing_device_published_again_is_restored_with_its_consumer() {
    let (_dir, ledger) = with_h100s(1);
    take(&ledger, "u1", 1);
    ledger.set_inventory("node-a", Vec::new()).unwrap();

    let change = ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();

    assert_eq!(change.restored, vec!["gpu-0".to_owned()]);
    let devices = ledger.node_devices("node-a").unwrap().unwrap();
    assert!(!devices[0].missing);
    assert_eq!(devices[0].consumers[0].claim_uid, "u1");
    assert_consistent(&ledger);
}

#[test]
fn cordoned_device_is_skipped_and_keeps_its_consumer() {
    let (_dir, ledger) = with_h100s(2);
    let held = take(&ledger, "u1", 1);
    let other = if held.devices[0] == "gpu-0" {
        "gpu-1"
    } else {
        "gpu-0"
    };

    assert!(ledger.cordon("node-a", other).unwrap());
    assert!(!ledger.cordon("node-a", other).unwrap());
    assert!(ledger.cordon("node-a", &held.devices[0]).unwrap());

    assert!(ledger
        .allocate(allocate("u2", None, request(1, Sharing::Exclusive)))
        .is_err());
    assert!(ledger.allocation("u1").unwrap().is_some());
    assert!(ledger.uncordon("node-a", other).unwrap());
    let u2 = take(&ledger, "u2", 1);
    assert_eq!(u2.devices, vec![other.to_owned()]);
    let error = ledger.cordon("node-a", "gpu-9").unwrap_err();
    assert_error!(error, LedgerError::DeviceNotFound { .. });
    assert_consistent(&ledger);
}

#[test]
fn import_records_a_confirmed_allocation_and_refuses_conflicts() {
    let (_dir, ledger) = with_h100s(2);
    let imported = ImportRequest {
        claim: claim("u1"),
        pod_uid: None,
        node: "node-a".to_owned(),
        devices: vec!["gpu-1".to_owned()],
        sharing: Sharing::Exclusive,
        share_permille: std::collections::BTreeMap::new(),
    };

    let allocation = ledger.import(imported.clone()).unwrap();
    assert_eq!(allocation.state, AllocationState::Confirmed);
    assert_eq!(ledger.import(imported.clone()).unwrap(), allocation);
    assert!(ledger.pending_intents().unwrap().is_empty());

    let clash = ImportRequest {
        claim: claim("u2"),
        ..imported
    };
    let error = ledger.import(clash).unwrap_err();
    assert_error!(error, LedgerError::DeviceConflict { .. });
    let repeat = take(&ledger, "u1", 1);
    assert_eq!(repeat.devices, vec!["gpu-1".to_owned()]);
    assert_consistent(&ledger);
}

#[test]
fn imported_shares_of_one_device_without_a_bound_sit_side_by_side() {
    let (_dir, ledger) = with_h100s(2);
    let share = |uid: &str, sharing: Sharing| ImportRequest {
        claim: claim(uid),
        pod_uid: None,
        node: "node-a".to_owned(),
        devices: vec!["gpu-0".to_owned()],
        sharing,
        share_permille: std::collections::BTreeMap::new(),
    };
    let unbounded = Sharing::Shared {
        max_consumers: u32::MAX,
    };
    for uid in ["u1", "u2", "u3"] {
        ledger.import(share(uid, unbounded)).unwrap();
    }

    let devices = ledger.node_devices("node-a").unwrap().unwrap();
    let gpu0 = devices.iter().find(|d| d.name == "gpu-0").unwrap();
    assert_eq!(gpu0.consumers.len(), 3, "{gpu0:?}");
    let counts = ledger.nodes().unwrap()[0].counts;
    assert_eq!((counts.allocated, counts.shared, counts.free), (1, 1, 1));
    // An exclusive claim still finds the device taken.
    let error = ledger.import(share("u4", Sharing::Exclusive)).unwrap_err();
    assert_error!(error, LedgerError::DeviceConflict { .. });
    assert_consistent(&ledger);
}

#[test]
fn import_of_an_unpublished_device_records_it_missing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger
        .import(ImportRequest {
            claim: claim("u1"),
            pod_uid: None,
            node: "node-z".to_owned(),
            devices: vec!["gpu-7".to_owned()],
            sharing: Sharing::Exclusive,
            share_permille: std::collections::BTreeMap::new(),
        })
        .unwrap();

    let devices = ledger.node_devices("node-z").unwrap().unwrap();
    assert!(devices[0].missing);
    ledger
        .set_inventory("node-z", vec![gpu("gpu-7", "H100", 0)])
        .unwrap();
    assert!(!ledger.node_devices("node-z").unwrap().unwrap()[0].missing);
    assert_consistent(&ledger);
}

#[test]
fn malformed_input_is_refused_without_writing() {
    let (_dir, ledger) = with_h100s(1);

    let error = ledger
        .allocate(allocate("", None, request(1, Sharing::Exclusive)))
        .unwrap_err();
    assert_error!(error, LedgerError::InvalidInput { .. });
    let error = ledger
        .set_inventory("node-b", vec![gpu("x", "H100", 0), gpu("x", "H100", 0)])
        .unwrap_err();
    assert_error!(error, LedgerError::InvalidInput { .. });
    let error = ledger
        .allocate_pod(
            "pod",
            "node-a",
            vec![
                pod_claim("same", request(1, Sharing::Exclusive)),
                pod_claim("same", request(1, Sharing::Exclusive)),
            ],
        )
        .unwrap_err();
    assert_error!(error, LedgerError::InvalidInput { .. });
    assert_eq!(ledger.nodes().unwrap().len(), 1);
    assert_consistent(&ledger);
}

#[test]
fn selector_and_node_choice_are_respected() {
    let (_dir, ledger) = with_h100s(2);
    ledger.set_inventory("node-b", gpus(2, "H200")).unwrap();

    let h200 = ledger
        .allocate(allocate("u1", None, model_request(1, "H200")))
        .unwrap();
    assert_eq!(h200.node, "node-b");
    let error = ledger
        .allocate(allocate("u2", Some("node-a"), model_request(1, "H200")))
        .unwrap_err();
    assert_error!(error, LedgerError::Unsatisfiable { .. });
    assert_consistent(&ledger);
}

#[test]
fn gang_check_counts_the_pods_own_holds_as_free_and_leaves_them_in_place() {
    let (_dir, ledger) = with_h100s(2);
    ledger.set_inventory("node-b", gpus(2, "H100")).unwrap();
    // The pod's claim holds one device of node-a from an earlier (stale) allocation, another
    // claim one device of node-b.
    ledger
        .allocate(allocate(
            "own",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    ledger
        .allocate(allocate(
            "other",
            Some("node-b"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    let claims = vec![("own".to_owned(), request(2, Sharing::Exclusive))];
    let candidates = vec!["node-a".to_owned(), "node-b".to_owned()];

    let blocked = ledger
        .unsuitable_nodes(claims.clone(), candidates.clone(), &[])
        .unwrap();
    let ignoring = ledger
        .unsuitable_nodes(claims, candidates, &["own".to_owned()])
        .unwrap();

    let nodes = |list: &[dra_allocator::fit::UnsuitableNode]| {
        list.iter().map(|u| u.node.clone()).collect::<Vec<_>>()
    };
    assert_eq!(nodes(&blocked), ["node-a", "node-b"]);
    assert_eq!(nodes(&ignoring), ["node-b"]);
    assert_eq!(ignoring[0].reason, "claim own: 1 of 2 devices free");
    assert!(ledger.allocation("own").unwrap().is_some());
    assert_consistent(&ledger);
}

#[test]
fn inventories_changed_tells_apart_what_a_write_would_change() {
    let (_dir, ledger) = with_h100s(2);
    take(&ledger, "u1", 2);
    ledger.set_inventory("node-b", gpus(2, "H100")).unwrap();
    // node-a's allocated devices vanish: marked missing, still recorded.
    ledger.set_inventory("node-a", Vec::new()).unwrap();
    let mut other_attributes = gpus(2, "H100");
    other_attributes[1] = gpus(2, "A100").remove(1);
    let nodes = vec![
        ("node-a".to_owned(), Vec::new()),
        ("node-a".to_owned(), gpus(2, "H100")),
        ("node-b".to_owned(), gpus(2, "H100")),
        ("node-b".to_owned(), gpus(1, "H100")),
        ("node-b".to_owned(), gpus(3, "H100")),
        ("node-b".to_owned(), other_attributes),
        ("node-c".to_owned(), Vec::new()),
        ("node-c".to_owned(), gpus(1, "H100")),
    ];
    let changed = ledger
        .inventories_changed(std::sync::Arc::new(nodes.clone()))
        .unwrap();
    assert_eq!(
        changed,
        [false, true, false, true, true, true, false, true],
        "{nodes:?}"
    );
    // Each verdict agrees with what writing the devices reports.
    for ((node, devices), changed) in nodes.into_iter().zip(changed) {
        let recorded = ledger.node_devices(&node).unwrap().unwrap_or_default();
        let change = ledger.set_inventory(&node, devices).unwrap();
        let wrote = !(change.added.is_empty()
            && change.removed.is_empty()
            && change.updated.is_empty()
            && change.restored.is_empty()
            && change.marked_missing.is_empty());
        assert_eq!(wrote, changed, "{node}: {recorded:?} -> {change:?}");
        // Back to the recorded state for the next case.
        let back = recorded
            .iter()
            .filter(|d| !d.missing)
            .map(|d| dra_allocator::model::Device {
                name: d.name.clone(),
                attributes: d.attributes.clone(),
            })
            .collect();
        ledger.set_inventory(&node, back).unwrap();
    }
    assert_consistent(&ledger);
}
