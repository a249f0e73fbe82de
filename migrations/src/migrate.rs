//! Inspecting a file's schema version without changing it, and migrating older files.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use redb::{
    Builder, Database, DatabaseError, Key, ReadTransaction, ReadableDatabase, StorageError,
    TableDefinition, TableError, Value, WriteTransaction,
};

use crate::backend::MemoryCopy;
use crate::meta::{read_meta, set_schema_version};
use crate::{
    v1, v2, v3, v4, v5, FileInfo, MigrationError, Result, CURRENT_SCHEMA_VERSION, META,
    OLDEST_SUPPORTED_SCHEMA_VERSION,
};

/// Cache used while inspecting a copy of a file: inspection reads only the meta table.
const INSPECT_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// One frozen step: carries a file from schema version `from` to `from + 1` inside the migration's
/// write transaction. Once released, a step never changes.
pub(crate) struct Step {
    /// The version the step starts from.
    pub(crate) from: u32,
    /// Rewrites tables; returns what failed.
    pub(crate) apply: fn(&WriteTransaction) -> std::result::Result<(), StepError>,
}

/// What a step failed with: a storage error or the step's own finding about the file.
pub(crate) type StepError = Box<dyn std::error::Error + Send + Sync>;

/// The released steps, in order.
const STEPS: &[Step] = &[
    Step {
        from: 1,
        apply: v2::from_v1,
    },
    Step {
        from: 2,
        apply: v3::from_v2,
    },
    Step {
        from: 3,
        apply: v4::from_v3,
    },
    Step {
        from: 4,
        apply: v5::from_v4,
    },
];

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrateOutcome {
    /// The file already had the current schema version; nothing was written.
    Current,
    /// The file was copied to `backup` and then migrated.
    Migrated {
        /// The version found in the file.
        from: u32,
        /// The version now recorded.
        to: u32,
        /// The copy made before migrating.
        backup: PathBuf,
    },
}

/// Where the copy of a file of schema version `version` is written before migrating it:
/// `<file>.bak-v<version>`.
pub fn backup_path(path: &Path, version: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".bak-v{version}"));
    PathBuf::from(name)
}

/// Reads the schema version and driver name of the ledger file at `path` without changing the
/// file: redb opens an in-memory copy, so even a file that needs crash recovery stays untouched.
pub fn inspect(path: &Path) -> Result<FileInfo> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(MigrationError::FileMissing {
                path: path.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(MigrationError::FileAccess {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if bytes.is_empty() {
        return Err(MigrationError::FileEmpty {
            path: path.to_path_buf(),
        });
    }
    let db = Builder::new()
        .set_cache_size(INSPECT_CACHE_BYTES)
        .set_check_integrity_on_open(true)
        .create_with_backend(MemoryCopy::new(bytes))
        .map_err(|error| open_error(path, error))?;
    let txn = db.begin_read().map_err(MigrationError::storage)?;
    read_meta(&txn, path)
}

/// Brings the file at `path` to [`CURRENT_SCHEMA_VERSION`].
///
/// A current file is left alone. An older one is copied to [`backup_path`] first, then every step
/// runs in one write transaction that also records the new version. A newer file is refused with
/// [`MigrationError::NewerSchema`] and not written to.
pub fn migrate(path: &Path) -> Result<MigrateOutcome> {
    migrate_with(
        path,
        STEPS,
        CURRENT_SCHEMA_VERSION,
        OLDEST_SUPPORTED_SCHEMA_VERSION,
    )
}

pub(crate) fn migrate_with(
    path: &Path,
    steps: &[Step],
    current: u32,
    oldest: u32,
) -> Result<MigrateOutcome> {
    let found = inspect(path)?.schema_version;
    if found > current {
        return Err(MigrationError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported: current,
        });
    }
    if found == current {
        return Ok(MigrateOutcome::Current);
    }
    if found < oldest {
        return Err(MigrationError::SchemaTooOld {
            path: path.to_path_buf(),
            found,
            oldest,
        });
    }
    let chain: Vec<&Step> = (found..current)
        .map(|from| {
            steps
                .iter()
                .find(|step| step.from == from)
                .ok_or_else(|| MigrationError::Step {
                    from,
                    source: "no migration step is defined".into(),
                })
        })
        .collect::<Result<_>>()?;
    let backup = backup_path(path, found);
    write_backup(path, &backup)?;
    let db = Database::builder()
        .open(path)
        .map_err(|error| open_error(path, error))?;
    let txn = db.begin_write().map_err(MigrationError::storage)?;
    for step in chain {
        (step.apply)(&txn).map_err(|source| MigrationError::Step {
            from: step.from,
            source,
        })?;
    }
    set_schema_version(&txn, current)?;
    txn.commit().map_err(MigrationError::storage)?;
    Ok(MigrateOutcome::Migrated {
        from: found,
        to: current,
        backup,
    })
}

fn write_backup(path: &Path, backup: &Path) -> Result<()> {
    let copy = || -> io::Result<()> {
        fs::copy(path, backup)?;
        fs::File::open(backup)?.sync_all()
    };
    copy().map_err(|source| MigrationError::Backup {
        backup: backup.to_path_buf(),
        source,
    })
}

/// Translates a redb open failure into the error an operator can act on.
pub(crate) fn open_error(path: &Path, error: DatabaseError) -> MigrationError {
    let path = path.to_path_buf();
    match error {
        DatabaseError::Storage(StorageError::Io(source)) => {
            if source.kind() == io::ErrorKind::InvalidData
                || source.kind() == io::ErrorKind::UnexpectedEof
            {
                MigrationError::FileCorrupt {
                    path,
                    reason: source.to_string(),
                }
            } else {
                MigrationError::FileAccess { path, source }
            }
        }
        DatabaseError::Storage(StorageError::Corrupted(reason)) => {
            MigrationError::FileCorrupt { path, reason }
        }
        DatabaseError::UpgradeRequired(format) => MigrationError::FileCorrupt {
            path,
            reason: format!("redb file format {format} is not supported"),
        },
        other => MigrationError::storage(other),
    }
}

/// Copies every table of the current schema version from `source` into `target` (used for
/// consistent backups: `source` is one read snapshot).
pub fn copy_current_tables(source: &ReadTransaction, target: &WriteTransaction) -> Result<()> {
    copy_table(source, target, META)?;
    copy_table(source, target, v1::DEVICES)?;
    copy_table(source, target, v1::ALLOCATIONS)?;
    copy_table(source, target, v1::INTENTS)?;
    copy_table(source, target, v1::PENDING_INTENTS)?;
    copy_table(source, target, v1::CLAIM_INTENTS)?;
    copy_table(source, target, v1::AUDIT)?;
    copy_table(source, target, v2::ADMIN_ACCESS)?;
    copy_table(source, target, v3::DEVICE_HEALTH)?;
    copy_table(source, target, v4::HISTORY)?;
    copy_table(source, target, v4::HISTORY_DEVICES)?;
    copy_table(source, target, v5::HISTORY_HOURS)?;
    Ok(())
}

fn copy_table<K: Key + 'static, V: Value + 'static>(
    source: &ReadTransaction,
    target: &WriteTransaction,
    definition: TableDefinition<K, V>,
) -> Result<()> {
    let from = match source.open_table(definition) {
        Ok(table) => table,
        Err(TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(error) => return Err(MigrationError::storage(error)),
    };
    let mut to = target
        .open_table(definition)
        .map_err(MigrationError::storage)?;
    for entry in redb::ReadableTable::iter(&from).map_err(MigrationError::storage)? {
        let (key, value) = entry.map_err(MigrationError::storage)?;
        to.insert(key.value(), value.value())
            .map_err(MigrationError::storage)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
