//! Opening a ledger: from a file (inspect, driver check, migration, creation) or from a custom
//! storage backend; then the tables are created if absent and the writer starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dra_migrations::{MigrationError, CURRENT_SCHEMA_VERSION};
use redb::{Database, DatabaseError, ReadableDatabase, StorageError};

use super::stats::StatsRecorder;
use super::writer::{Retention, WriterHandle, WriterState};
use super::{ops, tables, Inner, Ledger, LedgerError, LedgerOptions, Result};
use crate::fit::Inventory;

/// The label a backend-based ledger reports as its path.
const BACKEND_PATH: &str = "<storage backend>";

fn open_error(path: &Path, error: DatabaseError) -> LedgerError {
    match error {
        DatabaseError::DatabaseAlreadyOpen => LedgerError::FileLocked {
            path: path.to_path_buf(),
        },
        DatabaseError::Storage(StorageError::Io(source)) => LedgerError::FileOpen {
            path: path.to_path_buf(),
            source,
        },
        other => LedgerError::storage(other),
    }
}

/// Creates a new ledger file under a temporary name and renames it into place once its first
/// transaction is durable, so a crash during creation never leaves a half-made file at `path`.
fn create_file(path: &Path, driver_name: &str) -> Result<()> {
    let mut name = path.as_os_str().to_owned();
    name.push(".creating");
    let staging = PathBuf::from(name);
    let io_error = |source| LedgerError::FileOpen {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::remove_file(&staging) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(io_error(error)),
        _ => {}
    }
    let db = Database::create(&staging).map_err(|error| open_error(path, error))?;
    let txn = db.begin_write().map_err(LedgerError::storage)?;
    dra_migrations::initialize(&txn, driver_name)?;
    tables::create_all(&txn)?;
    txn.commit().map_err(LedgerError::storage)?;
    drop(db);
    std::fs::rename(&staging, path).map_err(io_error)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error)?;
    }
    Ok(())
}

pub(super) fn open_file(path: &Path, driver_name: &str, options: LedgerOptions) -> Result<Ledger> {
    ops::check_name("driver name", driver_name)?;
    if path.exists() {
        let info = dra_migrations::inspect(path)?;
        if info.driver_name != driver_name {
            return Err(LedgerError::DriverMismatch {
                path: path.to_path_buf(),
                found: info.driver_name,
                expected: driver_name.to_owned(),
            });
        }
        if let dra_migrations::MigrateOutcome::Migrated { from, to, backup } =
            dra_migrations::migrate(path)?
        {
            tracing::info!(from, to, backup = %backup.display(), "Migrated ledger schema");
        }
    } else {
        create_file(path, driver_name)?;
    }
    let db = Database::builder()
        .set_cache_size(options.cache_bytes)
        .open(path)
        .map_err(|error| open_error(path, error))?;
    start(db, path.to_path_buf(), driver_name, false, options)
}

pub(super) fn open_backend(
    backend: impl redb::StorageBackend,
    driver_name: &str,
    options: LedgerOptions,
) -> Result<Ledger> {
    ops::check_name("driver name", driver_name)?;
    let path = PathBuf::from(BACKEND_PATH);
    let db = Database::builder()
        .set_cache_size(options.cache_bytes)
        .create_with_backend(backend)
        .map_err(|error| open_error(&path, error))?;
    let txn = db.begin_read().map_err(LedgerError::storage)?;
    let fresh = match dra_migrations::read_meta(&txn, &path) {
        Ok(info) if info.driver_name != driver_name => {
            return Err(LedgerError::DriverMismatch {
                path,
                found: info.driver_name,
                expected: driver_name.to_owned(),
            })
        }
        Ok(info) if info.schema_version != CURRENT_SCHEMA_VERSION => {
            return Err(MigrationError::NewerSchema {
                path,
                found: info.schema_version,
                supported: CURRENT_SCHEMA_VERSION,
            }
            .into())
        }
        Ok(_) => false,
        Err(MigrationError::MetaMissing { .. }) => true,
        Err(error) => return Err(error.into()),
    };
    drop(txn);
    start(db, path, driver_name, fresh, options)
}

/// Creates missing tables (stamping a fresh database), loads the writer's state and starts it.
fn start(
    db: Database,
    path: PathBuf,
    driver_name: &str,
    fresh: bool,
    options: LedgerOptions,
) -> Result<Ledger> {
    let txn = db.begin_write().map_err(LedgerError::storage)?;
    if fresh {
        dra_migrations::initialize(&txn, driver_name)?;
    }
    tables::create_all(&txn)?;
    txn.commit().map_err(LedgerError::storage)?;

    let db = Arc::new(db);
    let mut state = WriterState {
        inventory: Inventory::new(),
        next_intent: 1,
        next_audit: 1,
        next_history: 1,
        clock: options.clock.clone(),
        last_now: std::cell::Cell::new(0),
        retention: Retention {
            audit: options.audit_retention.max(1),
            intents: options.intent_retention.max(1),
            history_ms: millis(options.history_retention),
            rollup_after_ms: millis(options.history_rollup_after),
        },
        rollup_cursor: 0,
    };
    state.reload(&db)?;
    let recorder = Arc::new(StatsRecorder::new(options.on_commit));
    let writer = WriterHandle::spawn(
        db.clone(),
        state,
        recorder.clone(),
        options.max_batch,
        options.defer_limit,
        options.commit_guard,
    )?;
    Ok(Ledger {
        inner: Arc::new(Inner {
            writer,
            db,
            path,
            driver_name: driver_name.to_owned(),
            stats: recorder,
            clock: options.clock,
            rollup_after_ms: millis(options.history_rollup_after),
        }),
    })
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
