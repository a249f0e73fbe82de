//! The crate's error type: what failed while building metrics or reading the ledger for them.
//! HTTP error responses are a separate type, `router::ApiError`.

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What failed in the admin API crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A metric could not be created or registered.
    #[error("metric registration failed: {0}")]
    MetricRegistration(#[from] prometheus::Error),
    /// The metrics could not be rendered as text.
    #[error("metric encoding failed: {0}")]
    Encode(String),
    /// A blocking task of a request did not complete.
    #[error("blocking task failed: {0}")]
    Task(String),
    /// Reading the ledger's views failed.
    #[error("ledger read failed: {0}")]
    Ledger(#[source] dra_allocator::ledger::LedgerError),
}
