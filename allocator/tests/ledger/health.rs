//! Device health: set per node with an audit entry per change, idempotent, beside the device
//! state (not instead of it), dropped with the device, and checked by `verify()`.

use std::collections::BTreeMap;

use dra_allocator::ledger::records::DeviceHealthRecord;
use dra_allocator::ledger::tables::{DeviceKey, DEVICE_HEALTH};
use dra_allocator::ledger::{AuditEvent, DeviceHealth, Ledger};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

use crate::support::edited_behind_the_ledger;

fn unhealthy(device: &str, reason: &str, since_ms: u64) -> BTreeMap<String, DeviceHealth> {
    BTreeMap::from([(
        device.to_owned(),
        DeviceHealth {
            reason: reason.to_owned(),
            since_ms,
        },
    )])
}

fn health_events(ledger: &Ledger) -> Vec<AuditEvent> {
    ledger
        .audit_since(0, 10_000)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .filter(|e| matches!(e, AuditEvent::DeviceHealthChanged { .. }))
        .collect()
}

#[test]
fn a_device_turns_unhealthy_and_healthy_again_with_one_audit_entry_per_change() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();

    let first = ledger
        .set_node_health("node-a", unhealthy("gpu-1", "XidCritical", 5))
        .unwrap();
    let again = ledger
        .set_node_health("node-a", unhealthy("gpu-1", "XidCritical", 5))
        .unwrap();
    let healed = ledger.set_node_health("node-a", BTreeMap::new()).unwrap();

    assert_eq!(first.len(), 1);
    assert_eq!(first[0].device, "gpu-1");
    assert_eq!(first[0].from, None);
    assert_eq!(first[0].to.as_ref().unwrap().reason, "XidCritical");
    assert!(again.is_empty());
    assert_eq!(healed.len(), 1);
    assert_eq!(healed[0].to, None);
    assert_eq!(
        health_events(&ledger),
        [
            AuditEvent::DeviceHealthChanged {
                node: "node-a".into(),
                device: "gpu-1".into(),
                from: None,
                to: Some(DeviceHealthRecord {
                    reason: "XidCritical".into(),
                    since_ms: 5
                }),
            },
            AuditEvent::DeviceHealthChanged {
                node: "node-a".into(),
                device: "gpu-1".into(),
                from: Some(DeviceHealthRecord {
                    reason: "XidCritical".into(),
                    since_ms: 5
                }),
                to: None,
            },
        ]
    );
    assert!(ledger.unhealthy_devices().unwrap().is_empty());
    assert_consistent(&ledger);
}

#[test]
fn an_unhealthy_device_keeps_its_consumer_and_state_and_is_counted_apart() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    let held = ledger
        .allocate(allocate(
            "worker",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    let before = ledger.utilisation().unwrap();

    ledger
        .set_node_health("node-a", unhealthy(&held.devices[0], "GpuLost", 9))
        .unwrap();

    assert_eq!(ledger.utilisation().unwrap(), before);
    let nodes = ledger.nodes().unwrap();
    assert_eq!(nodes[0].unhealthy, 1);
    assert_eq!(nodes[0].unhealthy_allocated, 1);
    assert_eq!(nodes[0].counts.allocated, 1);
    let devices = ledger.node_devices("node-a").unwrap().unwrap();
    let device = devices.iter().find(|d| d.name == held.devices[0]).unwrap();
    assert_eq!(device.consumers.len(), 1);
    assert_eq!(
        device.health,
        Some(DeviceHealth {
            reason: "GpuLost".into(),
            since_ms: 9
        })
    );
    assert!(devices.iter().any(|d| d.health.is_none()));
}

#[test]
fn names_the_ledger_does_not_hold_are_ignored_and_a_removed_device_takes_its_health_along() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    let mut marks = unhealthy("gpu-1", "LinkDown", 3);
    marks.extend(unhealthy("gpu-9", "LinkDown", 3));

    let changes = ledger.set_node_health("node-a", marks).unwrap();
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();

    assert_eq!(changes.len(), 1);
    assert!(ledger.unhealthy_devices().unwrap().is_empty());
    assert_consistent(&ledger);
}

#[test]
fn verify_reports_health_recorded_for_a_device_the_ledger_does_not_hold() {
    let dir = edited_behind_the_ledger(|txn| {
        txn.open_table(DEVICE_HEALTH)
            .unwrap()
            .insert(
                DeviceKey::new("node-a", "gpu-7"),
                Ok(DeviceHealthRecord {
                    reason: "Marked".into(),
                    since_ms: 1,
                }),
            )
            .unwrap();
    });

    let report = open(dir.path()).verify().unwrap();

    assert_eq!(report.health, 1);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].contains("node-a/gpu-7"));
}
