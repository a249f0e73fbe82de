//! The ledger's error type: one `#[non_exhaustive]` enum whose variants name what failed.

use std::path::PathBuf;

/// Result alias of the ledger.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;

/// What failed in the ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The file (or its directory) could not be opened or created, e.g. a read-only directory.
    #[error("cannot open ledger file {path}: {source}")]
    FileOpen {
        /// The ledger file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another process holds the file open.
    #[error("ledger file {path} is already open in another process")]
    FileLocked {
        /// The ledger file.
        path: PathBuf,
    },
    /// The file's schema is newer, the file is corrupt or not a ledger, or a migration failed.
    #[error(transparent)]
    Schema(#[from] dra_migrations::MigrationError),
    /// The file belongs to another DRA driver.
    #[error("ledger file {path} belongs to driver {found}, not {expected}")]
    DriverMismatch {
        /// The ledger file.
        path: PathBuf,
        /// The driver name recorded in the file.
        found: String,
        /// The driver name this process runs as.
        expected: String,
    },
    /// The storage engine failed while reading or writing.
    #[error("ledger storage failed: {0}")]
    Storage(String),
    /// The durable commit of a batch of operations failed; none of them took effect.
    #[error("ledger commit failed: {reason}")]
    Commit {
        /// What the storage engine reported.
        reason: String,
    },
    /// A stored record does not decode.
    #[error("ledger record in table {table} does not decode: {reason}")]
    RecordDecode {
        /// The table.
        table: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// The claim is allocated with other parameters (or on another node); release it first.
    #[error("claim {uid} is already allocated with different parameters; release it first")]
    ClaimConflict {
        /// The claim UID.
        uid: String,
    },
    /// The claim has no allocation.
    #[error("claim {uid} has no allocation")]
    ClaimNotFound {
        /// The claim UID.
        uid: String,
    },
    /// The allocation is confirmed in the cluster, so it cannot be aborted, only released.
    #[error("claim {uid} is confirmed in the cluster and cannot be aborted; release it")]
    AbortConfirmed {
        /// The claim UID.
        uid: String,
    },
    /// The device is not in the inventory of the node.
    #[error("device {device} on node {node} is not in the ledger")]
    DeviceNotFound {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
    /// An imported allocation names a device another claim holds incompatibly.
    #[error("device {device} on node {node} is already held; cannot record claim {uid}")]
    DeviceConflict {
        /// The node.
        node: String,
        /// The device.
        device: String,
        /// The claim that could not be recorded.
        uid: String,
    },
    /// No devices fit the request (on the given node, or on any node).
    #[error("no devices fit: {reason}")]
    Unsatisfiable {
        /// Why, as the fitting layer explains it.
        reason: String,
    },
    /// An argument is malformed (empty UID, a name with a zero byte, duplicate claims).
    #[error("invalid ledger input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },
    /// The writer thread is gone; the ledger must be reopened.
    #[error("ledger writer has stopped")]
    WriterStopped,
    /// The commit guard refused the batch (this process may no longer write, e.g. it lost its
    /// leader lease); nothing of it was written.
    #[error("ledger commit refused: {source}")]
    Fenced {
        /// Why the guard refused.
        source: super::CommitRefusal,
    },
    /// Writing a backup copy failed.
    #[error("cannot write ledger backup {path}: {reason}")]
    Backup {
        /// The backup destination.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl LedgerError {
    /// Wraps a storage engine error.
    pub(crate) fn storage(error: impl Into<redb::Error>) -> Self {
        LedgerError::Storage(error.into().to_string())
    }

    /// Whether the error came from storage, so the write transaction it happened in must be
    /// abandoned (as opposed to a refusal decided before anything was written).
    pub(crate) fn is_storage(&self) -> bool {
        matches!(
            self,
            LedgerError::Storage(_) | LedgerError::Commit { .. } | LedgerError::RecordDecode { .. }
        )
    }

    /// A short fixed label of the kind of failure, for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerError::FileOpen { .. } | LedgerError::FileLocked { .. } => "file",
            LedgerError::Schema(_) => "schema",
            LedgerError::DriverMismatch { .. } => "driver_mismatch",
            LedgerError::Storage(_) | LedgerError::RecordDecode { .. } => "storage",
            LedgerError::Commit { .. } => "commit",
            LedgerError::ClaimConflict { .. } => "claim_conflict",
            LedgerError::ClaimNotFound { .. } => "claim_not_found",
            LedgerError::AbortConfirmed { .. } => "abort_confirmed",
            LedgerError::DeviceNotFound { .. } => "device_not_found",
            LedgerError::DeviceConflict { .. } => "device_conflict",
            LedgerError::Unsatisfiable { .. } => "unsatisfiable",
            LedgerError::InvalidInput { .. } => "invalid_input",
            LedgerError::WriterStopped => "writer_stopped",
            LedgerError::Fenced { .. } => "fenced",
            LedgerError::Backup { .. } => "backup",
        }
    }
}
