//! Admin-access claims: recorded, replaced and released with an audit entry each, idempotent,
//! apart from allocations (no consumer, no device state, no conflict), dropped with the devices
//! that leave the ledger, and checked by `verify()`.

use dra_allocator::ledger::records::AdminAccessRecord;
use dra_allocator::ledger::tables::{ClaimUid, ADMIN_ACCESS};
use dra_allocator::ledger::{AdminAccessChange, AdminAccessQuery, AuditEvent, Ledger, LedgerError};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

use crate::support::edited_behind_the_ledger;

fn audit_len(ledger: &Ledger) -> usize {
    ledger.audit_since(0, 10_000).unwrap().len()
}

fn last_event(ledger: &Ledger) -> AuditEvent {
    ledger.audit_since(0, 10_000).unwrap().pop().unwrap().event
}

#[test]
fn admin_access_is_recorded_once_and_an_identical_record_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();

    let first = ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-1"]))
        .unwrap();
    let entries = audit_len(&ledger);
    let again = ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-1"]))
        .unwrap();

    assert_eq!(first, AdminAccessChange::Recorded);
    assert_eq!(again, AdminAccessChange::Unchanged);
    assert_eq!(audit_len(&ledger), entries);
    assert_eq!(
        last_event(&ledger),
        AuditEvent::AdminAccessRecorded {
            claim_uid: "admin".into(),
            node: "node-a".into(),
            devices: vec!["gpu-1".into()],
        }
    );
    let recorded = ledger.admin_access("admin").unwrap().unwrap();
    assert_eq!(recorded.claim, claim("admin"));
    assert_eq!(recorded.devices, ["gpu-1"]);
    assert_consistent(&ledger);
}

#[test]
fn admin_access_to_other_devices_replaces_the_record_and_keeps_its_first_time() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0"]))
        .unwrap();
    let first = ledger.admin_access("admin").unwrap().unwrap();

    let change = ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0", "gpu-1"]))
        .unwrap();

    assert_eq!(change, AdminAccessChange::Replaced);
    let now = ledger.admin_access("admin").unwrap().unwrap();
    assert_eq!(now.devices, ["gpu-0", "gpu-1"]);
    assert_eq!(now.recorded_ms, first.recorded_ms);
    assert!(now.updated_ms > first.updated_ms);
    assert!(matches!(
        last_event(&ledger),
        AuditEvent::AdminAccessReplaced { devices, .. } if devices.len() == 2
    ));
}

#[test]
fn released_admin_access_is_gone_with_an_audit_entry_and_a_second_release_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0"]))
        .unwrap();

    let released = ledger.release_admin_access("admin").unwrap().unwrap();
    let entries = audit_len(&ledger);

    assert_eq!(released.devices, ["gpu-0"]);
    assert!(matches!(
        last_event(&ledger),
        AuditEvent::AdminAccessReleased { .. }
    ));
    assert!(ledger.admin_access("admin").unwrap().is_none());
    assert_eq!(ledger.release_admin_access("admin").unwrap(), None);
    assert_eq!(audit_len(&ledger), entries);
    assert_consistent(&ledger);
}

#[test]
fn admin_access_takes_no_device_from_an_exclusive_claim_nor_changes_the_counts() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    let before = ledger.utilisation().unwrap();
    ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0"]))
        .unwrap();
    assert_eq!(ledger.utilisation().unwrap(), before);

    // The only device is still free for an exclusive allocation, which in turn leaves the
    // admin access in place.
    let allocation = ledger
        .allocate(allocate(
            "worker",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    ledger
        .record_admin_access(admin_access("admin-2", "node-a", &["gpu-0"]))
        .unwrap();

    assert_eq!(allocation.devices, ["gpu-0"]);
    let device = &ledger.node_devices("node-a").unwrap().unwrap()[0];
    assert_eq!(device.consumers.len(), 1);
    assert_eq!(device.admin_access, ["admin", "admin-2"]);
    let utilisation = ledger.utilisation().unwrap();
    assert_eq!(utilisation.totals.allocated, 1);
    assert_eq!(utilisation.totals.total, 1);
    assert_eq!(utilisation.claims_allocated, 1);
    let nodes = ledger.nodes().unwrap();
    assert_eq!(nodes[0].admin_access, 2);
    assert_eq!(nodes[0].counts.allocated, 1);
    assert_consistent(&ledger);
}

#[test]
fn admin_access_to_a_device_the_ledger_does_not_hold_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    let entries = audit_len(&ledger);

    let error = ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0", "gpu-9"]))
        .unwrap_err();
    let empty = ledger
        .record_admin_access(admin_access("admin", "node-a", &[]))
        .unwrap_err();

    assert!(
        matches!(&error, LedgerError::DeviceNotFound { device, .. } if device == "gpu-9"),
        "{error}"
    );
    assert!(matches!(empty, LedgerError::InvalidInput { .. }), "{empty}");
    assert!(ledger.admin_access("admin").unwrap().is_none());
    assert_eq!(audit_len(&ledger), entries);
}

#[test]
fn a_device_leaving_the_inventory_is_dropped_from_admin_access_and_not_kept_missing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    ledger
        .record_admin_access(admin_access("both", "node-a", &["gpu-0", "gpu-1"]))
        .unwrap();
    ledger
        .record_admin_access(admin_access("one", "node-a", &["gpu-1"]))
        .unwrap();

    let change = ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();

    assert_eq!(change.removed, ["gpu-1"]);
    assert!(change.marked_missing.is_empty());
    assert_eq!(ledger.node_devices("node-a").unwrap().unwrap().len(), 1);
    assert_eq!(
        ledger.admin_access("both").unwrap().unwrap().devices,
        ["gpu-0"]
    );
    assert!(ledger.admin_access("one").unwrap().is_none());
    let events: Vec<AuditEvent> = ledger
        .audit_since(0, 10_000)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(events.contains(&AuditEvent::AdminAccessReleased {
        claim_uid: "one".into(),
        node: "node-a".into(),
        devices: vec!["gpu-1".into()],
    }));
    assert!(events.contains(&AuditEvent::AdminAccessReplaced {
        claim_uid: "both".into(),
        node: "node-a".into(),
        devices: vec!["gpu-0".into()],
    }));
    assert_consistent(&ledger);
}

#[test]
fn a_missing_device_deleted_at_its_last_release_leaves_the_admin_access_records_too() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    ledger
        .allocate(allocate(
            "worker",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    ledger
        .record_admin_access(admin_access("admin", "node-a", &["gpu-0"]))
        .unwrap();
    let change = ledger.set_inventory("node-a", Vec::new()).unwrap();
    assert_eq!(change.marked_missing, ["gpu-0"]);
    assert!(ledger.admin_access("admin").unwrap().is_some());

    ledger.release("worker").unwrap();

    assert!(ledger.node_devices("node-a").unwrap().is_none());
    assert!(ledger.admin_access("admin").unwrap().is_none());
    assert_consistent(&ledger);
}

#[test]
fn admin_accesses_are_listed_by_namespace_and_node() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    ledger.set_inventory("node-b", gpus(1, "H100")).unwrap();
    ledger
        .record_admin_access(admin_access("a", "node-a", &["gpu-0"]))
        .unwrap();
    let mut other = admin_access("b", "node-b", &["gpu-0"]);
    other.claim.namespace = "ops".into();
    ledger.record_admin_access(other).unwrap();

    let uids = |query: AdminAccessQuery| -> Vec<String> {
        ledger
            .admin_accesses(&query)
            .unwrap()
            .into_iter()
            .map(|a| a.claim.uid)
            .collect()
    };

    assert_eq!(uids(AdminAccessQuery::default()), ["a", "b"]);
    let ops = AdminAccessQuery {
        namespace: Some("ops".into()),
        node: None,
    };
    assert_eq!(uids(ops), ["b"]);
    let node_a = AdminAccessQuery {
        namespace: None,
        node: Some("node-a".into()),
    };
    assert_eq!(uids(node_a), ["a"]);
}

#[test]
fn verify_reports_an_admin_access_record_naming_a_device_the_ledger_does_not_hold() {
    let dir = edited_behind_the_ledger(|txn| {
        txn.open_table(ADMIN_ACCESS)
            .unwrap()
            .insert(
                ClaimUid::new("stray"),
                Ok(AdminAccessRecord {
                    namespace: "default".into(),
                    name: "stray".into(),
                    node: "node-z".into(),
                    devices: vec!["gpu-0".into()],
                    recorded_ms: 1,
                    updated_ms: 1,
                }),
            )
            .unwrap();
    });

    let ledger = open(dir.path());
    let report = ledger.verify().unwrap();

    assert_eq!(report.admin_access, 1);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("admin access stray names device node-z/gpu-0"),
        "{:?}",
        report.problems
    );
}
