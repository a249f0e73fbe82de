//! Opening rules of ledger files: current, newer, empty, corrupt and foreign files.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

use dra_migrations::{
    backup_path, initialize, inspect, migrate, MigrateOutcome, MigrationError,
    CURRENT_SCHEMA_VERSION, META,
};
use redb::{Database, TableDefinition};

fn ledger_with_version(dir: &Path, version: u32) -> PathBuf {
    let path = dir.join("ledger.redb");
    let db = Database::create(&path).unwrap();
    let txn = db.begin_write().unwrap();
    initialize(&txn, "gpu.example.com").unwrap();
    txn.open_table(META)
        .unwrap()
        .insert("schema_version", version.to_be_bytes().as_slice())
        .unwrap();
    txn.commit().unwrap();
    drop(db);
    path
}

#[test]
fn current_file_needs_no_migration_and_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger_with_version(dir.path(), CURRENT_SCHEMA_VERSION);
    let before = fs::read(&path).unwrap();

    assert_eq!(migrate(&path).unwrap(), MigrateOutcome::Current);

    assert_eq!(fs::read(&path).unwrap(), before);
    let info = inspect(&path).unwrap();
    assert_eq!(info.schema_version, CURRENT_SCHEMA_VERSION);
    assert_eq!(info.driver_name, "gpu.example.com");
}

#[test]
fn newer_schema_is_refused_and_file_stays_byte_for_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger_with_version(dir.path(), CURRENT_SCHEMA_VERSION + 1);
    let before = fs::read(&path).unwrap();

    let error = migrate(&path).unwrap_err();

    assert!(
        matches!(error, MigrationError::NewerSchema { found, supported, .. }
            if found == CURRENT_SCHEMA_VERSION + 1 && supported == CURRENT_SCHEMA_VERSION),
        "{error}"
    );
    assert!(error
        .to_string()
        .contains("newer than the supported version"));
    assert_eq!(fs::read(&path).unwrap(), before);
    assert!(!backup_path(&path, CURRENT_SCHEMA_VERSION + 1).exists());
}

#[test]
fn empty_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.redb");
    fs::write(&path, b"").unwrap();

    let error = inspect(&path).unwrap_err();

    assert!(matches!(error, MigrationError::FileEmpty { .. }), "{error}");
    assert!(error.to_string().contains("is empty"));
    assert_eq!(fs::read(&path).unwrap(), b"");
}

#[test]
fn random_bytes_are_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noise.redb");
    // A fixed pseudo-random sequence (xorshift), so a failure reproduces.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let noise: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    fs::write(&path, &noise).unwrap();

    let error = migrate(&path).unwrap_err();

    assert!(
        matches!(error, MigrationError::FileCorrupt { .. }),
        "{error}"
    );
    assert_eq!(fs::read(&path).unwrap(), noise);
}

#[test]
fn truncated_ledger_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger_with_version(dir.path(), CURRENT_SCHEMA_VERSION);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();

    let error = inspect(&path).unwrap_err();

    assert!(
        matches!(error, MigrationError::FileCorrupt { .. }),
        "{error}"
    );
}

#[test]
fn missing_file_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.redb");

    let error = inspect(&path).unwrap_err();

    assert!(
        matches!(error, MigrationError::FileMissing { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("absent.redb"));
}

#[test]
fn redb_file_without_meta_is_not_a_ledger() {
    const OTHER: TableDefinition<u64, u64> = TableDefinition::new("something_else");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    let db = Database::create(&path).unwrap();
    let txn = db.begin_write().unwrap();
    txn.open_table(OTHER).unwrap().insert(1, 2).unwrap();
    txn.commit().unwrap();
    drop(db);

    let error = migrate(&path).unwrap_err();

    assert!(
        matches!(error, MigrationError::MetaMissing { .. }),
        "{error}"
    );
}

#[test]
fn backup_path_appends_the_old_version() {
    assert_eq!(
        backup_path(Path::new("/var/lib/dra-ledger/ledger.redb"), 3),
        PathBuf::from("/var/lib/dra-ledger/ledger.redb.bak-v3")
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

#[test]
fn v1_fixture_inspects_as_version_1_and_inspecting_it_changes_nothing() {
    let path = fixture("ledger-v1.redb");
    let before = fs::read(&path).unwrap();

    let info = inspect(&path).unwrap();

    assert_eq!(info.schema_version, 1);
    assert_eq!(info.driver_name, "gpu.example.com");
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn v1_fixture_migrates_to_the_current_version_after_a_backup_with_empty_new_tables() {
    use dra_migrations::{v1, v2, v3};
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger-v1.redb");
    fs::copy(fixture("ledger-v1.redb"), &path).unwrap();
    let before = fs::read(&path).unwrap();

    let outcome = migrate(&path).unwrap();

    assert_eq!(
        outcome,
        MigrateOutcome::Migrated {
            from: 1,
            to: CURRENT_SCHEMA_VERSION,
            backup: backup_path(&path, 1),
        }
    );
    assert_eq!(fs::read(backup_path(&path, 1)).unwrap(), before);
    assert_eq!(
        inspect(&path).unwrap().schema_version,
        CURRENT_SCHEMA_VERSION
    );
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(txn.open_table(v2::ADMIN_ACCESS).unwrap().len().unwrap(), 0);
    assert_eq!(txn.open_table(v3::DEVICE_HEALTH).unwrap().len().unwrap(), 0);
    let original = redb::ReadOnlyDatabase::open(fixture("ledger-v1.redb")).unwrap();
    let original = original.begin_read().unwrap();
    assert_eq!(
        txn.open_table(v1::AUDIT).unwrap().len().unwrap(),
        original.open_table(v1::AUDIT).unwrap().len().unwrap()
    );
    assert_eq!(
        txn.open_table(v1::DEVICES).unwrap().len().unwrap(),
        original.open_table(v1::DEVICES).unwrap().len().unwrap()
    );
}

#[test]
fn v2_fixture_migrates_to_the_current_version_after_a_backup_keeping_its_admin_access() {
    use dra_migrations::{v2, v3};
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger-v2.redb");
    fs::copy(fixture("ledger-v2.redb"), &path).unwrap();
    let before = fs::read(&path).unwrap();

    assert_eq!(inspect(&path).unwrap().schema_version, 2);
    let outcome = migrate(&path).unwrap();

    assert_eq!(
        outcome,
        MigrateOutcome::Migrated {
            from: 2,
            to: CURRENT_SCHEMA_VERSION,
            backup: backup_path(&path, 2),
        }
    );
    assert_eq!(fs::read(backup_path(&path, 2)).unwrap(), before);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(txn.open_table(v2::ADMIN_ACCESS).unwrap().len().unwrap(), 2);
    assert_eq!(txn.open_table(v3::DEVICE_HEALTH).unwrap().len().unwrap(), 0);
}

/// The postcard bytes of a history record opening an interval, as the v3 to v4 step writes them.
fn open_interval(
    node: &str,
    device: &str,
    uid: &str,
    namespace: &str,
    name: &str,
    from: u64,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    enum Entry<'a> {
        Held(&'a str, &'a str, &'a str, u64, Option<u64>, Option<u32>),
    }
    postcard::to_allocvec(&(
        node,
        device,
        Entry::Held(uid, namespace, name, from, None, None),
    ))
    .unwrap()
}

#[test]
fn v3_fixture_migrates_to_the_current_version_opening_an_interval_per_allocated_device() {
    use dra_migrations::{v1, v4};
    use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger-v3.redb");
    fs::copy(fixture("ledger-v3.redb"), &path).unwrap();
    let before = fs::read(&path).unwrap();

    assert_eq!(inspect(&path).unwrap().schema_version, 3);
    let outcome = migrate(&path).unwrap();

    assert_eq!(
        outcome,
        MigrateOutcome::Migrated {
            from: 3,
            to: CURRENT_SCHEMA_VERSION,
            backup: backup_path(&path, 3),
        }
    );
    assert_eq!(fs::read(backup_path(&path, 3)).unwrap(), before);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let history = txn.open_table(v4::HISTORY).unwrap();
    let index = txn.open_table(v4::HISTORY_DEVICES).unwrap();
    // claim-confirmed (2 devices), claim-pending, claim-shared-1, claim-shared-2, claim-imported.
    assert_eq!(history.len().unwrap(), 6);
    assert_eq!(index.len().unwrap(), 6);
    // The first allocation by UID is claim-confirmed: its devices come first, from its creation.
    let first = history
        .get(1_u64.to_be_bytes().as_slice())
        .unwrap()
        .unwrap();
    let allocations = txn.open_table(v1::ALLOCATIONS).unwrap();
    let (uid, _) = allocations.first().unwrap().unwrap();
    assert_eq!(uid.value(), b"claim-confirmed");
    assert_eq!(
        first.value(),
        open_interval(
            "node-a",
            "gpu-1",
            "claim-confirmed",
            "default",
            "claim-claim-confirmed",
            1_700_000_008_000
        )
        .as_slice()
    );
}

#[test]
fn v4_fixture_migrates_to_version_5_with_an_empty_hours_table_and_its_history_unchanged() {
    use dra_migrations::{v4, v5};
    use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger-v4.redb");
    fs::copy(fixture("ledger-v4.redb"), &path).unwrap();
    let before = fs::read(&path).unwrap();

    assert_eq!(inspect(&path).unwrap().schema_version, 4);
    assert_eq!(
        migrate(&path).unwrap(),
        MigrateOutcome::Migrated {
            from: 4,
            to: 5,
            backup: backup_path(&path, 4),
        }
    );

    assert_eq!(fs::read(backup_path(&path, 4)).unwrap(), before);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(txn.open_table(v5::HISTORY_HOURS).unwrap().len().unwrap(), 0);
    let original = redb::ReadOnlyDatabase::open(fixture("ledger-v4.redb")).unwrap();
    let original = original.begin_read().unwrap();
    let entries = |txn: &redb::ReadTransaction| -> Vec<(Vec<u8>, Vec<u8>)> {
        txn.open_table(v4::HISTORY)
            .unwrap()
            .iter()
            .unwrap()
            .map(|entry| {
                let (key, value) = entry.unwrap();
                (key.value().to_vec(), value.value().to_vec())
            })
            .collect()
    };
    let history = entries(&txn);
    assert!(!history.is_empty());
    assert_eq!(history, entries(&original));
}

#[test]
fn v5_fixture_is_a_current_ledger_that_migrates_without_backup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger-v5.redb");
    fs::copy(fixture("ledger-v5.redb"), &path).unwrap();
    let before = fs::read(&path).unwrap();

    assert_eq!(inspect(&path).unwrap().schema_version, 5);
    assert_eq!(migrate(&path).unwrap(), MigrateOutcome::Current);
    assert!(!backup_path(&path, 5).exists());
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn copy_of_v5_fixture_holds_every_table_entry() {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let dir = tempfile::tempdir().unwrap();
    let source = redb::ReadOnlyDatabase::open(fixture("ledger-v5.redb")).unwrap();
    let target_path = dir.path().join("copy.redb");
    let target = Database::create(&target_path).unwrap();
    let snapshot = source.begin_read().unwrap();
    let txn = target.begin_write().unwrap();

    dra_migrations::copy_current_tables(&snapshot, &txn).unwrap();
    txn.commit().unwrap();

    let copy = target.begin_read().unwrap();
    let lengths = |txn: &redb::ReadTransaction| {
        use dra_migrations::{v1, v2, v3, v4, v5};
        [
            txn.open_table(v1::DEVICES).unwrap().len().unwrap(),
            txn.open_table(v1::ALLOCATIONS).unwrap().len().unwrap(),
            txn.open_table(v1::INTENTS).unwrap().len().unwrap(),
            txn.open_table(v1::PENDING_INTENTS).unwrap().len().unwrap(),
            txn.open_table(v1::CLAIM_INTENTS).unwrap().len().unwrap(),
            txn.open_table(v1::AUDIT).unwrap().len().unwrap(),
            txn.open_table(v2::ADMIN_ACCESS).unwrap().len().unwrap(),
            txn.open_table(v3::DEVICE_HEALTH).unwrap().len().unwrap(),
            txn.open_table(v4::HISTORY).unwrap().len().unwrap(),
            txn.open_table(v4::HISTORY_DEVICES).unwrap().len().unwrap(),
            txn.open_table(v5::HISTORY_HOURS).unwrap().len().unwrap(),
        ]
    };
    let expected = lengths(&snapshot);
    assert!(
        expected.iter().all(|n| *n > 0),
        "fixture tables: {expected:?}"
    );
    assert_eq!(lengths(&copy), expected);
    assert_eq!(
        dra_migrations::read_meta(&copy, &target_path).unwrap(),
        inspect(&fixture("ledger-v5.redb")).unwrap()
    );
}
