//! Ledger files of every released schema version (`migrations/fixtures/`) open, migrate and
//! verify, and keep their content. The generator of the current version's fixture is here too,
//! ignored by default: `cargo test -p dra-allocator --test ledger fixtures:: -- --ignored`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dra_allocator::ledger::{AllocationState, ImportRequest, IntentKind, Ledger, LedgerOptions};
use dra_allocator::model::{AttributeValue, Device, Sharing};
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

/// Writes the schema version 1 fixture: every table populated, every record kind present.
#[test]
#[ignore = "generates migrations/fixtures/ledger-v1.redb; run by hand when releasing a schema"]
fn generate_v1_fixture() {
    let path = fixtures().join("ledger-v1.redb");
    let _ = std::fs::remove_file(&path);
    let ledger = Ledger::open_with(&path, DRIVER, fixed_clock()).unwrap();
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
        })
        .unwrap();
    ledger.cordon("node-a", "gpu-3").unwrap();
    assert_consistent(&ledger);
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
    assert!(
        names.contains(&"ledger-v1.redb".to_owned()),
        "fixtures: {names:?}"
    );
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

#[test]
fn v1_fixture_keeps_its_content() {
    let (_dir, path) = working_copy("ledger-v1.redb");
    let ledger = Ledger::open(&path, DRIVER).unwrap();

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

    // The migrated file accepts new work.
    ledger.release("claim-pending").unwrap();
    ledger
        .allocate(allocate(
            "new",
            Some("node-a"),
            request(1, Sharing::Exclusive),
        ))
        .unwrap();
    assert_consistent(&ledger);
}
