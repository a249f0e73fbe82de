//! Ledger files of every released schema version (`migrations/fixtures/`) open, migrate and
//! verify, and keep their content. The generator of the current version's fixture is here too,
//! ignored by default: `cargo test -p dra-allocator --test ledger fixtures:: -- --ignored`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dra_allocator::ledger::{
    AdminAccessQuery, AllocationState, AuditEvent, DeviceHealth, ImportRequest, IntentKind, Ledger,
    LedgerOptions,
};
use dra_allocator::model::{AttributeValue, Device, Sharing};
use dra_allocator::usage::UsageBy;
use testkit::ledger::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/fixtures")
}

fn fixed_clock() -> LedgerOptions {
    let now = Arc::new(AtomicU64::new(1_700_000_000_000));
    LedgerOptions {
        clock: Arc::new(move || now.fetch_add(1000, Ordering::Relaxed)),
        ..LedgerOptions::default()
    }
}

fn rich_device(name: &str, model: &str, numa: i64) -> Device {
    gpu(name, model, numa)
        .with("memory", AttributeValue::Quantity("80Gi".parse().unwrap()))
        .with(
            "driverVersion",
            AttributeValue::Version("550.54.15".parse().unwrap()),
        )
        .with("mig", AttributeValue::Bool(false))
        .with("cores", AttributeValue::IntSlice(vec![0, 1, 2, 3]))
        .with(
            "links",
            AttributeValue::StringSlice(vec!["nvlink-0".to_owned()]),
        )
}

/// How long the v5 fixture's generator keeps ended intervals raw: a few writes (clock readings)
/// after `claim-released` ends, its interval is rolled up into hourly totals.
const FIXTURE_ROLLUP_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// Writes the schema version 5 fixture: every table populated, every record kind present.
#[test]
#[ignore = "generates migrations/fixtures/ledger-v5.redb; run by hand when releasing a schema"]
fn generate_v5_fixture() {
    let path = fixtures().join("ledger-v5.redb");
    let _ = std::fs::remove_file(&path);
    let options = LedgerOptions {
        history_rollup_after: FIXTURE_ROLLUP_AFTER,
        ..fixed_clock()
    };
    let ledger = Ledger::open_with(&path, DRIVER, options).unwrap();
    ledger
        .set_inventory(
            "node-a",
            (0..4)
                .map(|i| rich_device(&format!("gpu-{i}"), "H100", i / 2))
                .collect(),
        )
        .unwrap();
    ledger
        .set_inventory(
            "node-b",
            (0..2)
                .map(|i| rich_device(&format!("gpu-{i}"), "H200", 0))
                .collect(),
        )
        .unwrap();
    ledger
        .allocate(allocate(
            "claim-pending",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    ledger
        .allocate(allocate(
            "claim-confirmed",
            Some("node-a"),
            request(2, Sharing::Exclusive),
        ))
        .unwrap();
    ledger.confirm("claim-confirmed").unwrap();
    let shared = Sharing::Shared { max_consumers: 4 };
    ledger
        .allocate(allocate(
            "claim-shared-1",
            Some("node-b"),
            request(1, shared),
        ))
        .unwrap();
    ledger
        .allocate(allocate(
            "claim-shared-2",
            Some("node-b"),
            request(1, shared),
        ))
        .unwrap();
    ledger
        .allocate(allocate(
            "claim-released",
            Some("node-b"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    ledger.release("claim-released").unwrap();
    ledger
        .import(ImportRequest {
            claim: claim("claim-imported"),
            pod_uid: Some("pod-1".to_owned()),
            node: "node-c".to_owned(),
            devices: vec!["gpu-0".to_owned()],
            sharing: Sharing::Exclusive,
            share_permille: BTreeMap::new(),
        })
        .unwrap();
    ledger.cordon("node-a", "gpu-3").unwrap();
    write_admin_access_and_health(&ledger);
    // History beyond what the writes above leave: a device cordoned and put back.
    ledger.cordon("node-b", "gpu-1").unwrap();
    ledger.uncordon("node-b", "gpu-1").unwrap();
    assert_consistent(&ledger);
}

/// What schema versions 2 and 3 added to the fixture: admin access to a device another claim
/// holds exclusively, one replaced, one released; that device unhealthy, another unhealthy and
/// healthy again.
fn write_admin_access_and_health(ledger: &Ledger) {
    // Admin access to a device another claim holds exclusively, one replaced, one released.
    let held = ledger.allocation("claim-confirmed").unwrap().unwrap();
    ledger
        .record_admin_access(admin_access(
            "claim-admin",
            "node-a",
            &[held.devices[0].as_str()],
        ))
        .unwrap();
    ledger
        .record_admin_access(admin_access("claim-admin-b", "node-b", &["gpu-0"]))
        .unwrap();
    ledger
        .record_admin_access(admin_access("claim-admin-b", "node-b", &["gpu-1"]))
        .unwrap();
    ledger
        .record_admin_access(admin_access("claim-admin-gone", "node-b", &["gpu-0"]))
        .unwrap();
    ledger.release_admin_access("claim-admin-gone").unwrap();
    // Health: a device held by a claim unhealthy; another unhealthy, then healthy again.
    let unhealthy = |reason: &str, since_ms| DeviceHealth {
        reason: reason.to_owned(),
        since_ms,
    };
    ledger
        .set_node_health(
            "node-a",
            BTreeMap::from([(
                held.devices[0].clone(),
                unhealthy("XidCritical", 1_700_000_100_000),
            )]),
        )
        .unwrap();
    ledger
        .set_node_health(
            "node-b",
            BTreeMap::from([(
                "gpu-0".to_owned(),
                unhealthy("EccDoubleBit", 1_700_000_200_000),
            )]),
        )
        .unwrap();
    ledger.set_node_health("node-b", BTreeMap::new()).unwrap();
}

/// Copies a fixture to a temporary directory (fixtures themselves are never opened for writing).
fn working_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::copy(fixtures().join(name), &path).unwrap();
    (dir, path)
}

#[test]
fn every_fixture_opens_migrates_and_verifies() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "redb"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for expected in [
        "ledger-v1.redb",
        "ledger-v2.redb",
        "ledger-v3.redb",
        "ledger-v4.redb",
        "ledger-v5.redb",
    ] {
        assert!(names.contains(&expected.to_owned()), "fixtures: {names:?}");
    }
    for name in names {
        let (_dir, path) = working_copy(&name);
        let info = dra_migrations::inspect(&path).unwrap();
        let ledger = Ledger::open(&path, &info.driver_name).unwrap();
        assert_consistent(&ledger);
        assert_eq!(
            dra_migrations::inspect(&path).unwrap().schema_version,
            dra_migrations::CURRENT_SCHEMA_VERSION,
            "{name}"
        );
    }
}

/// What the v1 fixture holds, and the v2 fixture too (its generator wrote the same first).
fn assert_v1_content(ledger: &Ledger) {
    let pending = ledger.pending_intents().unwrap();
    assert_eq!(pending.len(), 3, "{pending:?}");
    let confirmed = ledger.allocation("claim-confirmed").unwrap().unwrap();
    assert_eq!(confirmed.state, AllocationState::Confirmed);
    assert_eq!(confirmed.devices.len(), 2);
    assert_eq!(confirmed.created_ms, 1_700_000_008_000);
    assert!(confirmed.updated_ms > confirmed.created_ms);
    let imported = ledger.allocation("claim-imported").unwrap().unwrap();
    assert_eq!(imported.pod_uid.as_deref(), Some("pod-1"));
    assert!(ledger.allocation("claim-released").unwrap().is_none());
    let history = ledger.claim("claim-released").unwrap().unwrap().intents;
    assert_eq!(history.last().unwrap().kind, IntentKind::Release);
    let node_b = ledger.node_devices("node-b").unwrap().unwrap();
    assert_eq!(node_b.iter().map(|d| d.consumers.len()).sum::<usize>(), 2);
    let node_a = ledger.node_devices("node-a").unwrap().unwrap();
    assert!(node_a[3].cordoned);
    assert_eq!(
        node_a[0].attributes,
        rich_device("gpu-0", "H100", 0).attributes
    );
    assert!(ledger.node_devices("node-c").unwrap().unwrap()[0].missing);
    let utilisation = ledger.utilisation().unwrap();
    assert_eq!(utilisation.totals.total, 7);
    assert_eq!(utilisation.claims_allocated, 5);
}

/// The migrated or current file accepts new work.
fn assert_accepts_new_work(ledger: &Ledger) {
    ledger.release("claim-pending").unwrap();
    ledger
        .allocate(allocate(
            "new",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    assert_consistent(ledger);
}

#[test]
fn v1_fixture_migrates_to_the_current_version_keeps_its_content_and_has_no_admin_access() {
    let (_dir, path) = working_copy("ledger-v1.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(dra_migrations::backup_path(&path, 1).exists());
    assert_eq!(
        dra_migrations::inspect(&path).unwrap().schema_version,
        dra_migrations::CURRENT_SCHEMA_VERSION
    );
    assert!(ledger.unhealthy_devices().unwrap().is_empty());
    assert_consistent(&ledger);
    assert_v1_content(&ledger);
    assert!(ledger
        .admin_accesses(&AdminAccessQuery::default())
        .unwrap()
        .is_empty());
    // Audit entries written by version 1 still decode after the new event kinds were appended.
    let audit = ledger.audit_since(0, 1000).unwrap();
    assert!(audit
        .iter()
        .any(|e| matches!(e.event, AuditEvent::Cordoned { .. })));
    ledger
        .record_admin_access(admin_access("late", "node-a", &["gpu-0"]))
        .unwrap();
    assert_accepts_new_work(&ledger);
}

#[test]
fn v2_fixture_migrates_and_keeps_its_admin_access_apart_from_allocations() {
    let (_dir, path) = working_copy("ledger-v2.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(dra_migrations::backup_path(&path, 2).exists());
    assert!(ledger.unhealthy_devices().unwrap().is_empty());
    assert_v2_content(&ledger);
    assert_accepts_new_work(&ledger);
}

/// What the v2 fixture holds, and the v3 fixture too.
fn assert_v2_content(ledger: &Ledger) {
    assert_v1_content(ledger);
    let confirmed = ledger.allocation("claim-confirmed").unwrap().unwrap();
    let admin = ledger.admin_access("claim-admin").unwrap().unwrap();
    assert_eq!(admin.node, "node-a");
    assert_eq!(admin.devices, confirmed.devices[..1]);
    let moved = ledger.admin_access("claim-admin-b").unwrap().unwrap();
    assert_eq!(moved.devices, ["gpu-1"]);
    assert!(moved.updated_ms > moved.recorded_ms);
    assert!(ledger.admin_access("claim-admin-gone").unwrap().is_none());
    let node_a = ledger.node_devices("node-a").unwrap().unwrap();
    let looked_at = node_a
        .iter()
        .find(|d| d.name == confirmed.devices[0])
        .unwrap();
    assert_eq!(looked_at.consumers.len(), 1);
    assert_eq!(looked_at.admin_access, ["claim-admin"]);
    let nodes = ledger.nodes().unwrap();
    let counts: Vec<(&str, u64)> = nodes
        .iter()
        .map(|n| (n.node.as_str(), n.admin_access))
        .collect();
    assert_eq!(counts, [("node-a", 1), ("node-b", 1), ("node-c", 0)]);
    let audit = ledger.audit_since(0, 1000).unwrap();
    let admin_events = audit
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                AuditEvent::AdminAccessRecorded { .. }
                    | AuditEvent::AdminAccessReplaced { .. }
                    | AuditEvent::AdminAccessReleased { .. }
            )
        })
        .count();
    assert_eq!(admin_events, 5);
    assert_eq!(ledger.verify().unwrap().admin_access, 2);
}

#[test]
fn v3_fixture_migrates_keeping_its_device_health_and_opens_history_for_its_allocations() {
    let (_dir, path) = working_copy("ledger-v3.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(dra_migrations::backup_path(&path, 3).exists());
    assert_v3_content(&ledger);
    // Only the allocations found at migration time have history, each interval open from the
    // allocation's creation.
    let intervals = ledger.holder_intervals(0, u64::MAX).unwrap();
    let mut held: Vec<(String, String, String)> = intervals
        .iter()
        .map(|i| (i.claim_uid.clone(), i.node.clone(), i.device.clone()))
        .collect();
    held.sort();
    let mut expected = Vec::new();
    for uid in [
        "claim-confirmed",
        "claim-imported",
        "claim-pending",
        "claim-shared-1",
        "claim-shared-2",
    ] {
        let allocation = ledger.allocation(uid).unwrap().unwrap();
        for device in &allocation.devices {
            expected.push((uid.to_owned(), allocation.node.clone(), device.clone()));
        }
        let created = ledger.claim(uid).unwrap().unwrap().intents[0].at_ms;
        assert!(
            intervals
                .iter()
                .filter(|i| i.claim_uid == uid)
                .all(|i| i.from_ms == created && i.to_ms.is_none()),
            "{uid}: {intervals:?}"
        );
    }
    expected.sort();
    assert_eq!(held, expected);
    let health = ledger
        .device_history("node-b", "gpu-0", 0, u64::MAX)
        .unwrap()
        .unwrap();
    assert!(health.events.is_empty(), "{health:?}");
    assert_accepts_new_work(&ledger);
}

#[test]
fn v4_fixture_migrates_keeping_its_history_raw() {
    let (_dir, path) = working_copy("ledger-v4.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(dra_migrations::backup_path(&path, 4).exists());
    assert_v4_content(&ledger);
    let usage = ledger.usage(0, u64::MAX, UsageBy::Node).unwrap();
    assert_eq!(
        usage.total.claims, 6,
        "every claim's interval is raw and counts"
    );
    assert_accepts_new_work(&ledger);
}

#[test]
fn v5_fixture_opens_as_current_with_an_interval_rolled_up() {
    let (_dir, path) = working_copy("ledger-v5.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(!dra_migrations::backup_path(&path, 5).exists());
    assert_v3_content(&ledger);
    let raw: Vec<String> = ledger
        .holder_intervals(0, u64::MAX)
        .unwrap()
        .into_iter()
        .map(|i| i.claim_uid)
        .collect();
    assert!(!raw.contains(&"claim-released".to_owned()), "{raw:?}");
    let by_claim = ledger.usage(0, u64::MAX, UsageBy::Claim).unwrap();
    assert_eq!(
        by_claim.total.claims, 5,
        "the rolled-up claim is not listed"
    );
    let by_node = ledger.usage(0, u64::MAX, UsageBy::Node).unwrap();
    assert_eq!(by_node.total.claims, 6, "the rolled-up claim counts");
    assert_accepts_new_work(&ledger);
}

/// What the v4 fixture holds: the v3 content and the history its writes left.
fn assert_v4_content(ledger: &Ledger) {
    assert_v3_content(ledger);
    let released = ledger
        .holder_intervals(0, u64::MAX)
        .unwrap()
        .into_iter()
        .find(|i| i.claim_uid == "claim-released")
        .unwrap();
    assert!(released.to_ms.unwrap() > released.from_ms);
    let node_b = ledger
        .device_history("node-b", "gpu-1", 0, u64::MAX)
        .unwrap()
        .unwrap();
    let kinds: Vec<&str> = node_b.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["added", "cordoned", "uncordoned"]);
    let gpu_0 = ledger
        .device_history("node-b", "gpu-0", 0, u64::MAX)
        .unwrap()
        .unwrap();
    let health: Vec<(&str, &str)> = gpu_0
        .events
        .iter()
        .filter(|e| e.kind.as_str() != "added")
        .map(|e| (e.kind.as_str(), e.detail.as_str()))
        .collect();
    assert_eq!(health, [("unhealthy", "EccDoubleBit"), ("healthy", "")]);
    assert!(ledger.verify().unwrap().history > 0);
}

/// What the v3 fixture holds, and the v4 fixture too.
fn assert_v3_content(ledger: &Ledger) {
    assert_v2_content(ledger);
    let confirmed = ledger.allocation("claim-confirmed").unwrap().unwrap();
    let unhealthy = ledger.unhealthy_devices().unwrap();
    assert_eq!(unhealthy.len(), 1, "{unhealthy:?}");
    assert_eq!(
        (unhealthy[0].node.as_str(), &unhealthy[0].device),
        ("node-a", &confirmed.devices[0])
    );
    assert_eq!(
        unhealthy[0].health,
        DeviceHealth {
            reason: "XidCritical".into(),
            since_ms: 1_700_000_100_000
        }
    );
    let node_a = ledger.node_devices("node-a").unwrap().unwrap();
    let device = node_a
        .iter()
        .find(|d| d.name == confirmed.devices[0])
        .unwrap();
    assert_eq!(device.health.as_ref().unwrap().reason, "XidCritical");
    assert_eq!(device.consumers.len(), 1);
    let counts: Vec<u64> = ledger
        .nodes()
        .unwrap()
        .iter()
        .map(|n| n.unhealthy)
        .collect();
    assert_eq!(counts, [1, 0, 0]);
    let changes = ledger
        .audit_since(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, AuditEvent::DeviceHealthChanged { .. }))
        .count();
    assert_eq!(changes, 3);
    assert_eq!(ledger.verify().unwrap().health, 1);
}
