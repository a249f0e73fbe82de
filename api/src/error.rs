//! The crate's error type: what failed while encoding metrics, reading the token file or serving
//! a request from the ledger.
//! HTTP error responses are a separate type, [`ErrorResponse`](crate::ErrorResponse).

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What failed in the admin API crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The metrics could not be refreshed or encoded.
    #[error("metrics: {0}")]
    Metrics(#[from] dra_metrics::Error),
    /// A blocking task of a request did not complete.
    #[error("blocking task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// A ledger call failed.
    #[error("ledger call failed: {0}")]
    Ledger(#[source] dra_allocator::ledger::LedgerError),
    /// The admin token file could not be read or holds no token.
    #[error("cannot read admin token file {}: {reason}", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// A reconcile requested through the API failed.
    #[error("reconcile failed: {0}")]
    Reconcile(#[source] crate::reconciler::ReconcileError),
    /// A cordon or uncordon could not be written to the cluster.
    #[error("cordon failed: {0}")]
    Cordon(#[source] crate::cordon::CordonError),
    /// A backup copy could not be prepared or read back.
    #[error("backup failed: {0}")]
    Backup(#[source] std::io::Error),
}
