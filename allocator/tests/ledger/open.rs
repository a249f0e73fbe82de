//! Opening, reopening and backing up ledger files, and the read views over them.

use crate::support::{assert_error, take, with_h100s};
use std::fs;
use std::sync::{Arc, Mutex};

use dra_allocator::ledger::{AllocationQuery, AuditEvent, Ledger, LedgerError, LedgerOptions};
use dra_allocator::model::{AttributeValue, Device, Sharing};
use dra_migrations::{MigrationError, CURRENT_SCHEMA_VERSION, META};
use testkit::ledger::*;

#[test]
fn reopen_keeps_allocations_and_pending_intents() {
    let dir = tempfile::tempdir().unwrap();
    let (pending, confirmed) = {
        let ledger = open(dir.path());
        ledger.set_inventory("node-a", gpus(4, "H100")).unwrap();
        let pending = take(&ledger, "p", 1);
        let confirmed = take(&ledger, "c", 2);
        let confirmed_now = ledger.confirm("c").unwrap();
        assert_eq!(confirmed.devices, confirmed_now.devices);
        (pending, confirmed_now)
    };

    let ledger = open(dir.path());

    assert_eq!(ledger.allocation("p").unwrap(), Some(pending.clone()));
    assert_eq!(ledger.allocation("c").unwrap(), Some(confirmed));
    let intents = ledger.pending_intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].claim.uid, "p");
    assert_eq!(intents[0].devices, pending.devices);
    // The writer's inventory is rebuilt from the file: the held devices stay taken.
    assert!(ledger
        .allocate(allocate("x", None, request(2, Sharing::Exclusive)))
        .is_err());
    assert!(ledger
        .allocate(allocate("y", None, request(1, Sharing::Exclusive)))
        .is_ok());
    assert_consistent(&ledger);
}

#[test]
fn reopen_rebuilds_each_nodes_devices_when_names_share_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let inventory: Vec<(String, Vec<Device>)> = [("n", 3), ("n-1", 1), ("n-10", 4), ("n1", 2)]
        .into_iter()
        .map(|(node, count)| (node.to_owned(), gpus(count, node)))
        .collect();
    {
        let ledger = open(dir.path());
        for (node, devices) in &inventory {
            ledger.set_inventory(node, devices.clone()).unwrap();
        }
    }

    let ledger = open(dir.path());

    // The in-memory inventory the reopened writer allocates from holds each node's devices.
    let unchanged = ledger
        .inventories_changed(Arc::new(inventory.clone()))
        .unwrap();
    assert_eq!(unchanged, [false; 4]);
    let mut other = inventory.clone();
    other[2].1.pop();
    assert_eq!(
        ledger.inventories_changed(Arc::new(other)).unwrap(),
        [false, false, true, false]
    );
    assert_consistent(&ledger);
}

#[test]
fn file_of_another_driver_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    drop(Ledger::open(&path, "gpu.example.com").unwrap());
    let before = fs::read(&path).unwrap();

    let error = Ledger::open(&path, "fpga.example.com").unwrap_err();

    assert_error!(error, LedgerError::DriverMismatch { .. });
    assert!(error
        .to_string()
        .contains("belongs to driver gpu.example.com"));
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn newer_schema_is_refused_and_file_stays_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    drop(Ledger::open(&path, DRIVER).unwrap());
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(
                "schema_version",
                (CURRENT_SCHEMA_VERSION + 1).to_be_bytes().as_slice(),
            )
            .unwrap();
        txn.commit().unwrap();
    }
    let before = fs::read(&path).unwrap();

    let error = Ledger::open(&path, DRIVER).unwrap_err();

    assert!(
        matches!(
            error,
            LedgerError::Schema(MigrationError::NewerSchema { .. })
        ),
        "{error}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn corrupt_and_empty_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let noise = dir.path().join("noise.redb");
    fs::write(&noise, vec![0x5a_u8; 8192]).unwrap();
    let empty = dir.path().join("empty.redb");
    fs::write(&empty, b"").unwrap();

    let error = Ledger::open(&noise, DRIVER).unwrap_err();
    assert!(
        matches!(
            error,
            LedgerError::Schema(MigrationError::FileCorrupt { .. })
        ),
        "{error}"
    );
    let error = Ledger::open(&empty, DRIVER).unwrap_err();
    assert_error!(error, LedgerError::Schema(MigrationError::FileEmpty { .. }));
    assert_eq!(fs::read(&empty).unwrap(), b"");
}

#[test]
fn unusable_location_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("plain-file");
    fs::write(&not_a_dir, b"x").unwrap();

    let error = Ledger::open(not_a_dir.join("ledger.redb"), DRIVER).unwrap_err();

    assert_error!(error, LedgerError::FileOpen { .. });
    assert!(error.to_string().contains("cannot open ledger file"));
}

#[test]
fn second_open_of_an_open_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());

    let error = Ledger::open(dir.path().join("ledger.redb"), DRIVER).unwrap_err();

    assert_error!(error, LedgerError::FileLocked { .. });
}

#[test]
fn backup_is_a_consistent_copy_that_opens_and_verifies() {
    let (dir, ledger) = with_h100s(4);
    for uid in ["a", "b", "c"] {
        ledger
            .allocate(allocate(uid, None, request(1, Sharing::Exclusive)))
            .unwrap();
    }
    ledger.confirm("b").unwrap();
    let copy = dir.path().join("copy.redb");

    ledger.backup(&copy).unwrap();
    let error = ledger.backup(&copy).unwrap_err();
    assert_error!(error, LedgerError::Backup { .. });

    let restored = Ledger::open(&copy, DRIVER).unwrap();
    assert_consistent(&restored);
    for uid in ["a", "b", "c"] {
        assert_eq!(
            restored.allocation(uid).unwrap(),
            ledger.allocation(uid).unwrap()
        );
    }
    assert_eq!(
        restored.pending_intents().unwrap(),
        ledger.pending_intents().unwrap()
    );
    assert_eq!(
        restored.audit_since(0, 100).unwrap(),
        ledger.audit_since(0, 100).unwrap()
    );
}

#[test]
fn audit_log_is_bounded_by_retention_and_pages_by_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(
        dir.path().join("ledger.redb"),
        DRIVER,
        LedgerOptions {
            audit_retention: 5,
            intent_retention: 4,
            ..options()
        },
    )
    .unwrap();
    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    for round in 0..6 {
        let uid = format!("u{round}");
        ledger
            .allocate(allocate(&uid, None, request(1, Sharing::Exclusive)))
            .unwrap();
        ledger.release(&uid).unwrap();
    }

    let audit = ledger.audit_since(0, 100).unwrap();
    assert_eq!(audit.len(), 5);
    assert!(audit.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(
        matches!(audit.last().unwrap().event, AuditEvent::Released { ref claim_uid, .. } if claim_uid == "u5")
    );
    let tail = ledger.audit_since(audit[2].seq, 100).unwrap();
    assert_eq!(tail, audit[3..].to_vec());
    assert_eq!(ledger.audit_since(0, 2).unwrap(), audit[..2].to_vec());
    let report = ledger.verify().unwrap();
    assert!(
        report.intents <= 4,
        "journal kept {} entries",
        report.intents
    );
    assert!(report.is_consistent(), "{:?}", report.problems);
}

#[test]
fn allocations_page_by_claim_uid_with_filters() {
    let (_dir, ledger) = with_h100s(4);
    ledger.set_inventory("node-b", gpus(4, "H100")).unwrap();
    for uid in ["e", "a", "d", "b", "c"] {
        ledger
            .allocate(allocate(uid, None, request(1, Sharing::Exclusive)))
            .unwrap();
    }

    let first = ledger
        .allocations(&AllocationQuery {
            limit: 2,
            ..AllocationQuery::default()
        })
        .unwrap();
    let uids: Vec<_> = first.items.iter().map(|a| a.claim.uid.as_str()).collect();
    assert_eq!(uids, ["a", "b"]);
    let second = ledger
        .allocations(&AllocationQuery {
            limit: 2,
            after: first.next.clone(),
            ..AllocationQuery::default()
        })
        .unwrap();
    let uids: Vec<_> = second.items.iter().map(|a| a.claim.uid.as_str()).collect();
    assert_eq!(uids, ["c", "d"]);
    let last = ledger
        .allocations(&AllocationQuery {
            limit: 2,
            after: second.next,
            ..AllocationQuery::default()
        })
        .unwrap();
    assert_eq!(last.items.len(), 1);
    assert_eq!(last.next, None);

    let on_a = ledger
        .allocations(&AllocationQuery {
            node: Some("node-a".to_owned()),
            ..AllocationQuery::default()
        })
        .unwrap();
    assert!(on_a.items.iter().all(|a| a.node == "node-a"));
    assert_eq!(on_a.items.len(), 4, "pack fills node-a first");
    let elsewhere = ledger
        .allocations(&AllocationQuery {
            namespace: Some("other".to_owned()),
            ..AllocationQuery::default()
        })
        .unwrap();
    assert!(elsewhere.items.is_empty());
}

#[test]
fn utilisation_counts_totals_and_by_attribute() {
    let (_dir, ledger) = with_h100s(2);
    ledger.set_inventory("node-b", gpus(3, "H200")).unwrap();
    ledger
        .allocate(allocate("u1", None, model_request(2, "H200")))
        .unwrap();
    ledger.cordon("node-a", "gpu-0").unwrap();

    let utilisation = ledger.utilisation().unwrap();

    assert_eq!(utilisation.totals.total, 5);
    assert_eq!(utilisation.totals.allocated, 2);
    assert_eq!(utilisation.totals.cordoned, 1);
    assert_eq!(utilisation.totals.free, 2);
    assert_eq!(utilisation.claims_allocated, 1);
    assert_eq!(utilisation.intents_pending, 1);
    let h200 = utilisation.by_attribute["model"]["H200"];
    assert_eq!((h200.total, h200.allocated, h200.free), (3, 2, 1));
    assert_eq!(utilisation.by_attribute["model"]["H100"].cordoned, 1);
    let numa = &utilisation.by_attribute["numa"];
    assert_eq!(
        numa.values().map(|c| c.total).sum::<u64>(),
        5,
        "every device counts once per attribute it carries: {numa:?}"
    );

    // One pass gives both views as they are read apart.
    let (together, nodes) = ledger.utilisation_and_nodes().unwrap();
    assert_eq!(together, utilisation);
    assert_eq!(nodes, ledger.nodes().unwrap());
    assert_eq!(nodes.len(), 2);
    assert_eq!((nodes[1].counts.total, nodes[1].counts.allocated), (3, 2));
}

#[test]
fn attributes_of_every_kind_round_trip_through_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::new("gpu-0")
        .with("flag", AttributeValue::Bool(true))
        .with("memory", AttributeValue::Quantity("80Gi".parse().unwrap()))
        .with(
            "driver",
            AttributeValue::Version("535.1.2".parse().unwrap()),
        )
        .with("cores", AttributeValue::IntSlice(vec![1, 2]))
        .with(
            "links",
            AttributeValue::StringSlice(vec!["nvlink".to_owned()]),
        );
    {
        let ledger = open(dir.path());
        ledger
            .set_inventory("node-a", vec![device.clone()])
            .unwrap();
    }

    let ledger = open(dir.path());
    let stored = ledger.node_devices("node-a").unwrap().unwrap();
    assert_eq!(stored[0].attributes, device.attributes);
}

#[test]
fn commit_hook_sees_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let ledger = Ledger::open_with(
        dir.path().join("ledger.redb"),
        DRIVER,
        LedgerOptions {
            on_commit: Some(Arc::new(move |sample| sink.lock().unwrap().push(*sample))),
            ..options()
        },
    )
    .unwrap();

    ledger.set_inventory("node-a", gpus(1, "H100")).unwrap();
    take(&ledger, "u1", 1);

    let samples = seen.lock().unwrap().clone();
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|s| s.ok && s.batch_size == 1));
    let stats = ledger.commit_stats();
    assert_eq!((stats.commits, stats.operations), (2, 2));
    assert_eq!(stats.recent, samples);
}

#[test]
fn undecodable_record_is_an_error_not_a_panic_and_other_work_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    {
        let ledger = open(dir.path());
        ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();
    }
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(dra_migrations::v1::ALLOCATIONS)
            .unwrap()
            .insert(b"broken".as_slice(), [0xff_u8, 0xff, 0xff].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let ledger = open(dir.path());

    let threads: Vec<_> = (0..8)
        .map(|i| {
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    ledger.confirm("broken").map(|_| ())
                } else {
                    ledger
                        .allocate(allocate(
                            &format!("ok-{i}"),
                            None,
                            request(1, Sharing::Shared { max_consumers: 4 }),
                        ))
                        .map(|_| ())
                }
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();

    for (i, result) in results.iter().enumerate() {
        if i % 2 == 0 {
            assert!(
                matches!(
                    result,
                    Err(LedgerError::RecordDecode {
                        table: "allocations",
                        ..
                    })
                ),
                "{result:?}"
            );
        } else {
            assert!(result.is_ok(), "{result:?}");
        }
    }
    let report = ledger.verify().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].contains("allocation broken does not decode"));
}

#[test]
fn new_file_appears_only_complete_and_a_leftover_staging_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let staging = dir.path().join("ledger.redb.creating");
    fs::write(&staging, b"half-written by a crashed start").unwrap();

    let ledger = Ledger::open(&path, DRIVER).unwrap();

    assert!(!staging.exists());
    assert_eq!(dra_migrations::inspect(&path).unwrap().driver_name, DRIVER);
    assert_consistent(&ledger);
}
