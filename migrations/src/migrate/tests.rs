//! The migration machinery exercised with synthetic steps.

use std::fs;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{migrate_with, Step, StepError};
use crate::{initialize, inspect, read_meta, MigrateOutcome, MigrationError, META};

const EXTRA: TableDefinition<u64, u64> = TableDefinition::new("extra_v2");

fn v1_file(dir: &Path) -> PathBuf {
    let path = dir.join("ledger.redb");
    let db = Database::create(&path).unwrap();
    let txn = db.begin_write().unwrap();
    initialize(&txn, "gpu.example.com").unwrap();
    txn.open_table(META)
        .unwrap()
        .insert(crate::SCHEMA_VERSION_KEY, 1_u32.to_be_bytes().as_slice())
        .unwrap();
    txn.commit().unwrap();
    path
}

fn add_extra_table(txn: &WriteTransaction) -> Result<(), StepError> {
    let mut table = txn.open_table(EXTRA)?;
    table.insert(7, 42)?;
    Ok(())
}

fn fail_after_writing(txn: &WriteTransaction) -> Result<(), StepError> {
    add_extra_table(txn)?;
    Err("synthetic failure".into())
}

#[test]
fn older_file_is_backed_up_then_migrated_with_version_bump() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_file(dir.path());
    let before = fs::read(&path).unwrap();
    let steps = [Step {
        from: 1,
        apply: add_extra_table,
    }];

    let outcome = migrate_with(&path, &steps, 2, 1).unwrap();

    let backup = dir.path().join("ledger.redb.bak-v1");
    assert_eq!(
        outcome,
        MigrateOutcome::Migrated {
            from: 1,
            to: 2,
            backup: backup.clone()
        }
    );
    assert_eq!(fs::read(&backup).unwrap(), before);
    assert_eq!(inspect(&path).unwrap().schema_version, 2);
    assert_eq!(inspect(&backup).unwrap().schema_version, 1);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(EXTRA).unwrap();
    assert_eq!(table.get(7).unwrap().unwrap().value(), 42);
    assert_eq!(
        read_meta(&txn, &path).unwrap().driver_name,
        "gpu.example.com"
    );
}

#[test]
fn failing_step_commits_nothing_and_keeps_old_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_file(dir.path());
    let steps = [Step {
        from: 1,
        apply: fail_after_writing,
    }];

    let error = migrate_with(&path, &steps, 2, 1).unwrap_err();

    assert!(
        matches!(error, MigrationError::Step { from: 1, ref source } if source.to_string() == "synthetic failure"),
        "{error}"
    );
    assert_eq!(inspect(&path).unwrap().schema_version, 1);
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert!(txn.open_table(EXTRA).is_err(), "step writes must roll back");
}

#[test]
fn missing_step_is_refused_before_any_backup() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_file(dir.path());

    let error = migrate_with(&path, &[], 2, 1).unwrap_err();

    assert!(
        matches!(error, MigrationError::Step { from: 1, .. }),
        "{error}"
    );
    assert!(!dir.path().join("ledger.redb.bak-v1").exists());
}

#[test]
fn file_older_than_oldest_supported_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_file(dir.path());

    let error = migrate_with(&path, &[], 3, 2).unwrap_err();

    assert!(
        matches!(
            error,
            MigrationError::SchemaTooOld {
                found: 1,
                oldest: 2,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn two_steps_run_in_order_in_one_migration() {
    fn second(txn: &WriteTransaction) -> Result<(), StepError> {
        let mut table = txn.open_table(EXTRA)?;
        let seen = table.get(7)?.ok_or("first step did not run")?.value();
        table.insert(8, seen + 1)?;
        Ok(())
    }
    let dir = tempfile::tempdir().unwrap();
    let path = v1_file(dir.path());
    let steps = [
        Step {
            from: 2,
            apply: second,
        },
        Step {
            from: 1,
            apply: add_extra_table,
        },
    ];

    migrate_with(&path, &steps, 3, 1).unwrap();

    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(
        txn.open_table(EXTRA)
            .unwrap()
            .get(8)
            .unwrap()
            .unwrap()
            .value(),
        43
    );
    let meta = txn.open_table(META).unwrap();
    assert_eq!(
        meta.get("schema_version").unwrap().unwrap().value(),
        3u32.to_be_bytes().as_slice()
    );
}
