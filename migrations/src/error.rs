//! The error type of schema inspection and migration.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = MigrationError> = std::result::Result<T, E>;

/// What failed while inspecting or migrating a ledger file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// The file does not exist.
    #[error("ledger file {path} does not exist")]
    FileMissing {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// The file exists but holds no bytes.
    #[error("ledger file {path} is empty, not a ledger")]
    FileEmpty {
        /// The empty file.
        path: PathBuf,
    },
    /// The file could not be read or written.
    #[error("cannot access ledger file {path}: {source}")]
    FileAccess {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a readable redb database (random bytes, truncated, or damaged).
    #[error("ledger file {path} is corrupt or not a redb database: {reason}")]
    FileCorrupt {
        /// The file.
        path: PathBuf,
        /// What the storage engine reported.
        reason: String,
    },
    /// The file is a redb database but carries no dra-ledger meta table.
    #[error("ledger file {path} is a redb database but not a dra-ledger ledger (no meta table)")]
    MetaMissing {
        /// The file.
        path: PathBuf,
    },
    /// A meta entry is absent or does not decode.
    #[error("ledger meta entry {key} is invalid: {reason}")]
    MetaInvalid {
        /// The meta key.
        key: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// The file was written by a newer release; it is left unchanged.
    #[error(
        "ledger file {path} has schema version {found}, newer than the supported version \
         {supported}; upgrade dra-ledger (the file was not changed)"
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The version recorded in the file.
        found: u32,
        /// The newest version this release understands.
        supported: u32,
    },
    /// The file is older than the oldest version this release can migrate.
    #[error("ledger file {path} has schema version {found}, older than the oldest migratable version {oldest}")]
    SchemaTooOld {
        /// The file.
        path: PathBuf,
        /// The version recorded in the file.
        found: u32,
        /// The oldest version this release can migrate.
        oldest: u32,
    },
    /// Copying the file before a migration failed; the file was not migrated.
    #[error("cannot write backup {backup} before migrating: {source}")]
    Backup {
        /// The backup path.
        backup: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A migration step failed; its transaction was not committed.
    #[error("migration step from schema version {from} failed: {source}")]
    Step {
        /// The version the step starts from.
        from: u32,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The storage engine failed.
    #[error("ledger storage failed: {0}")]
    Storage(#[from] redb::Error),
}

impl MigrationError {
    /// Wraps any redb error as [`MigrationError::Storage`].
    pub(crate) fn storage(error: impl Into<redb::Error>) -> Self {
        Self::Storage(error.into())
    }
}
