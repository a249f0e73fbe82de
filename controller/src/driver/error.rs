//! The driver's error type: one enum whose variants name what failed, plus the `Result` alias.
//!
//! Owns only error values; must not depend on the ledger handle or the API client.

use dra_allocator::ledger::LedgerError;

use super::handle::HandleDataError;
use crate::params::ParamsError;
use dra_framework::KubeCallError;

/// Result alias of the driver.
pub type Result<T, E = DriverError> = std::result::Result<T, E>;

/// What failed in the ledger-backed driver. The text ends up in events, so it names the object
/// or field at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// A `parametersRef` points at something this driver does not understand.
    #[error("{field}: {reason}")]
    ParametersRef {
        /// The offending field, e.g. `parametersRef.kind`.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The parameter object named by a `parametersRef` does not exist.
    #[error("{kind} {name} not found")]
    ParametersNotFound {
        /// `DeviceClassParameters` or `DeviceClaimParameters`.
        kind: &'static str,
        /// `name` or `namespace/name`.
        name: String,
    },
    /// Reading a parameter object from the API server failed.
    #[error("read {kind} {name}: {source}")]
    ParametersRead {
        /// `DeviceClassParameters` or `DeviceClaimParameters`.
        kind: &'static str,
        /// `name` or `namespace/name`.
        name: String,
        /// The client's error.
        source: KubeCallError,
    },
    /// The parameter object is invalid; the message names the field.
    #[error("invalid {kind} {name}: {source}")]
    InvalidParameters {
        /// `DeviceClassParameters` or `DeviceClaimParameters`.
        kind: &'static str,
        /// `name` or `namespace/name`.
        name: String,
        /// The field and reason.
        source: ParamsError,
    },
    /// The ledger refused or failed an operation.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A blocking ledger call could not be run or was cancelled.
    #[error("ledger call did not complete: {0}")]
    LedgerTask(#[source] tokio::task::JoinError),
    /// Replacing stale ledger allocations did not resolve a claim conflict in the ledger.
    #[error("{subject} in conflict in the ledger")]
    LedgerConflictPersists {
        /// `claim <uid> stays` or `claims of pod <uid> stay`.
        subject: String,
    },
    /// An allocation of several claims on one node failed; each claim gets this error.
    #[error("allocate on node {node}: {source}")]
    Batch {
        /// The node of the batch.
        node: String,
        /// The error of the whole batch.
        source: std::sync::Arc<DriverError>,
    },
    /// A claim object lacks something the driver needs (UID, name, namespace).
    #[error("claim {claim}: {reason}")]
    ClaimObject {
        /// The claim as far as it is known.
        claim: String,
        /// What is missing.
        reason: &'static str,
    },
    /// The allocation was aborted because the claim was deallocated while it was in progress.
    #[error("claim {uid} was deallocated while its allocation was in progress")]
    AllocationAborted {
        /// The claim UID.
        uid: String,
    },
    /// A claim's resource handle data does not parse as this driver's allocation.
    #[error("claim {claim}: resource handle data: {source}")]
    HandleData {
        /// `namespace/name` of the claim.
        claim: String,
        /// What is wrong with the data.
        source: HandleDataError,
    },
    /// Listing the claims of the cluster failed.
    #[error("list resource claims: {0}")]
    ListClaims(#[source] KubeCallError),
    /// The driver did not become ready (inventory synced, initial reconcile done) in time.
    #[error("driver is not ready: inventory sync or initial reconcile still pending")]
    NotReady,
    /// The driver was stopped ([`super::LedgerDriver::quiesce`]): it takes no new ledger call.
    #[error("driver is shutting down: no new ledger call is taken")]
    ShutDown,
}

impl DriverError {
    /// A short fixed label of the kind of failure, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            DriverError::ParametersRef { .. }
            | DriverError::ParametersNotFound { .. }
            | DriverError::InvalidParameters { .. } => "invalid_parameters",
            DriverError::ParametersRead { .. } => "parameters_read",
            DriverError::Ledger(LedgerError::Unsatisfiable { .. }) => "unsatisfiable",
            DriverError::Ledger(_)
            | DriverError::LedgerTask(_)
            | DriverError::LedgerConflictPersists { .. } => "ledger",
            DriverError::Batch { source, .. } => source.kind(),
            DriverError::ClaimObject { .. } => "claim_object",
            DriverError::AllocationAborted { .. } => "aborted",
            DriverError::HandleData { .. } => "handle_data",
            DriverError::ListClaims(_) => "list_claims",
            DriverError::NotReady => "not_ready",
            DriverError::ShutDown => "shut_down",
        }
    }
}
