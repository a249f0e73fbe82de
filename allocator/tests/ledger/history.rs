//! The history (schema version 4): claims driven through known intervals on a hand-moved clock,
//! checked to the second through usage by namespace and by node, a device's holders and events,
//! the intervals of imported (mirrored) and shared allocations, and retention by age.

#![allow(
    clippy::float_cmp,
    reason = "device-seconds of whole milliseconds and shares in thousandths compare exactly"
)]

use std::time::Duration;

use crate::support::raw_uids;
use dra_allocator::ledger::{ClaimRef, ImportRequest, Ledger, LedgerOptions};
use dra_allocator::model::Sharing;
use dra_allocator::usage::{usage, UsageBy};
use testkit::ledger::{
    allocate, allocate_on, assert_consistent, gpus, request, ManualClock, DRIVER,
};

/// 2026-01-01T00:00:00Z.
const T0: u64 = 1_767_225_600_000;

fn ledger_at(options: LedgerOptions) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(dir.path().join("ledger.redb"), DRIVER, options).unwrap();
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    ledger.set_inventory("node-b", gpus(2, "H200")).unwrap();
    (dir, ledger)
}

fn seconds(rows: &[dra_allocator::usage::UsageRow]) -> Vec<(&str, f64)> {
    rows.iter()
        .map(|row| (row.key.as_str(), row.device_seconds))
        .collect()
}

#[test]
fn usage_by_namespace_and_by_node_is_exact_to_the_second() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());

    allocate_on(&ledger, "a", "team-a", "node-a", 1);
    clock.advance_secs(90);
    allocate_on(&ledger, "b", "team-b", "node-b", 2);
    clock.advance_secs(30);
    ledger.release("a").unwrap();
    clock.advance_secs(60);
    allocate_on(&ledger, "c", "team-a", "node-a", 1);
    clock.advance_secs(45);

    let (from, to) = (T0, clock.now_ms());
    let intervals = ledger.holder_intervals(from, to).unwrap();
    let by_namespace = usage(&intervals, from, to, UsageBy::Namespace);
    // team-a: a held 120 s, c 45 s; team-b: two devices for 135 s.
    assert_eq!(
        seconds(&by_namespace.rows),
        [("team-a", 165.0), ("team-b", 270.0)]
    );
    assert_eq!(by_namespace.rows[0].claims, 2);
    assert_eq!(by_namespace.rows[1].peak_devices, 2.0);
    assert_eq!(by_namespace.total.device_seconds, 435.0);
    assert_eq!(by_namespace.total.peak_devices, 3.0);
    let by_node = usage(&intervals, from, to, UsageBy::Node);
    assert_eq!(
        seconds(&by_node.rows),
        [("node-a", 165.0), ("node-b", 270.0)]
    );
    let by_model = usage(&intervals, from, to, UsageBy::Model);
    assert_eq!(seconds(&by_model.rows), [("H100", 165.0), ("H200", 270.0)]);
    // A window from 100 s to 150 s: a 20 s, b 2 x 50 s, c nothing yet.
    let (from, to) = (T0 + 100_000, T0 + 150_000);
    let window = ledger.holder_intervals(from, to).unwrap();
    assert_eq!(
        seconds(&usage(&window, from, to, UsageBy::Namespace).rows),
        [("team-a", 20.0), ("team-b", 100.0)]
    );
    assert_consistent(&ledger);
}

#[test]
fn a_device_history_names_three_holders_and_a_cordon_oldest_first() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    ledger.set_inventory("node-c", gpus(1, "H100")).unwrap();

    for (uid, held) in [("first", 60), ("second", 120)] {
        allocate_on(&ledger, uid, "team-a", "node-c", 1);
        clock.advance_secs(held);
        ledger.release(uid).unwrap();
        clock.advance_secs(10);
    }
    ledger.cordon("node-c", "gpu-0").unwrap();
    clock.advance_secs(300);
    ledger.uncordon("node-c", "gpu-0").unwrap();
    clock.advance_secs(5);
    allocate_on(&ledger, "third", "team-b", "node-c", 1);
    clock.advance_secs(5);

    let history = ledger
        .device_history("node-c", "gpu-0", 0, u64::MAX)
        .unwrap()
        .unwrap();
    let holders: Vec<(&str, &str, u64, Option<u64>)> = history
        .holders
        .iter()
        .map(|h| {
            (
                h.claim_uid.as_str(),
                h.namespace.as_str(),
                h.from_ms,
                h.to_ms,
            )
        })
        .collect();
    assert_eq!(
        holders,
        [
            ("first", "team-a", T0, Some(T0 + 60_000)),
            ("second", "team-a", T0 + 70_000, Some(T0 + 190_000)),
            ("third", "team-b", T0 + 505_000, None),
        ]
    );
    let events: Vec<(&str, u64)> = history
        .events
        .iter()
        .map(|e| (e.kind.as_str(), e.at_ms))
        .collect();
    assert_eq!(
        events,
        [
            ("added", T0),
            ("cordoned", T0 + 200_000),
            ("uncordoned", T0 + 500_000)
        ]
    );
    // Who held it at T0 + 100 s: the window [t, t + 1 ms) holds only the second claim.
    let at = ledger
        .device_history("node-c", "gpu-0", T0 + 100_000, T0 + 100_001)
        .unwrap()
        .unwrap();
    assert_eq!(at.holders.len(), 1);
    assert_eq!(at.holders[0].claim_uid, "second");
    assert!(at.events.is_empty());
    assert_eq!(
        ledger
            .device_history("node-c", "gpu-9", 0, u64::MAX)
            .unwrap(),
        None
    );
}

#[test]
fn imported_allocations_open_and_close_intervals_like_our_own() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());

    ledger
        .import(ImportRequest {
            claim: ClaimRef::new("m", "team-m", "mirrored"),
            pod_uid: None,
            node: "node-b".to_owned(),
            devices: vec!["gpu-1".to_owned()],
            sharing: Sharing::Exclusive,
            share_permille: std::collections::BTreeMap::new(),
        })
        .unwrap();
    clock.advance_secs(42);
    ledger.release("m").unwrap();

    let intervals = ledger.holder_intervals(0, u64::MAX).unwrap();
    assert_eq!(intervals.len(), 1);
    assert_eq!(
        (
            intervals[0].name.as_str(),
            intervals[0].from_ms,
            intervals[0].to_ms
        ),
        ("mirrored", T0, Some(T0 + 42_000))
    );
    assert_consistent(&ledger);
}

#[test]
fn imported_shares_keep_their_fraction_and_usage_weights_by_it() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    for uid in ["half-1", "half-2"] {
        ledger
            .import(ImportRequest {
                claim: ClaimRef::new(uid, "team-s", uid),
                pod_uid: None,
                node: "node-b".to_owned(),
                devices: vec!["gpu-1".to_owned()],
                sharing: Sharing::Shared {
                    max_consumers: u32::MAX,
                },
                share_permille: [("gpu-1".to_owned(), 500)].into(),
            })
            .unwrap();
    }
    clock.advance_secs(3600);

    let intervals = ledger.holder_intervals(0, u64::MAX).unwrap();
    let shares: Vec<Option<u32>> = intervals.iter().map(|i| i.share_permille).collect();
    assert_eq!(shares, vec![Some(500), Some(500)]);
    let total = usage(&intervals, T0, T0 + 3_600_000, UsageBy::Node).total;
    assert!((total.device_seconds - 3600.0).abs() < 1e-6, "{total:?}");
    assert!((total.peak_devices - 1.0).abs() < 1e-9, "{total:?}");
    assert_consistent(&ledger);
}

#[test]
fn every_holder_of_a_shared_device_has_its_own_interval() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    let shared = Sharing::Shared { max_consumers: 2 };

    ledger
        .allocate(allocate("s1", Some("node-a"), request(1, shared)))
        .unwrap();
    clock.advance_secs(10);
    ledger
        .allocate(allocate("s2", Some("node-a"), request(1, shared)))
        .unwrap();
    clock.advance_secs(10);
    ledger.release("s1").unwrap();

    let history = ledger
        .device_history("node-a", "gpu-0", 0, u64::MAX)
        .unwrap()
        .unwrap();
    let holders: Vec<(&str, Option<u64>)> = history
        .holders
        .iter()
        .map(|h| (h.claim_uid.as_str(), h.to_ms))
        .collect();
    assert_eq!(holders, [("s1", Some(T0 + 20_000)), ("s2", None)]);
    let from_to = (T0, T0 + 20_000);
    let intervals = ledger.holder_intervals(from_to.0, from_to.1).unwrap();
    let total = usage(&intervals, from_to.0, from_to.1, UsageBy::Node).total;
    assert_eq!((total.device_seconds, total.peak_devices), (30.0, 2.0));
    assert_consistent(&ledger);
}

#[test]
fn history_older_than_the_retention_is_pruned_and_open_intervals_stay() {
    let clock = ManualClock::at(T0);
    let options = LedgerOptions {
        history_retention: Duration::from_secs(3600),
        ..clock.options()
    };
    let (_dir, ledger) = ledger_at(options);
    allocate_on(&ledger, "old", "team-a", "node-a", 1);
    allocate_on(&ledger, "kept", "team-a", "node-b", 1);
    clock.advance_secs(60);
    ledger.release("old").unwrap();
    ledger.cordon("node-a", "gpu-1").unwrap();

    // Not yet an hour after the release: nothing goes.
    clock.advance_secs(3500);
    allocate_on(&ledger, "new", "team-b", "node-a", 1);
    assert_eq!(raw_uids(&ledger), ["kept", "new", "old"]);

    // Over an hour after the release and the cordon: the next write prunes them.
    clock.advance_secs(200);
    ledger.release("new").unwrap();
    assert_eq!(raw_uids(&ledger), ["kept", "new"]);
    let node_a = ledger
        .device_history("node-a", "gpu-1", 0, u64::MAX)
        .unwrap();
    assert_eq!(
        node_a, None,
        "the device's cordon and publication are pruned"
    );
    assert_consistent(&ledger);
}
