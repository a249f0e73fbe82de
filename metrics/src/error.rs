//! The crate's error type: what failed while building, refreshing or encoding the metrics.

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What failed in the metrics crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A metric could not be created or registered.
    #[error("metric registration failed: {0}")]
    Registration(#[from] prometheus::Error),
    /// The metrics could not be rendered as text.
    #[error("metric encoding failed: {0}")]
    Encode(#[source] std::string::FromUtf8Error),
    /// A ledger read view could not be taken.
    #[error("ledger call failed: {0}")]
    Ledger(#[source] dra_allocator::ledger::LedgerError),
}
