//! The hook through which cordon and uncordon reach the cluster where the ledger does not
//! allocate (`resource.k8s.io/v1`: the kube-scheduler does): the controller implements
//! [`ClusterCordon`] (a `DeviceTaintRule` per cordoned device) and hands it to the
//! [`crate::AppState`]. The ledger records the cordon after the hook succeeded. This crate knows
//! nothing of Kubernetes; the hook's errors say whether the client can do anything about them.

use async_trait::async_trait;

/// Why a cordon or uncordon did not reach the cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CordonError {
    /// The cluster cannot keep a device out of allocation (409 with the message, which says
    /// what to enable).
    #[error("{0}")]
    Unavailable(String),
    /// The request would be valid but the cluster refused or failed it (logged, 500).
    #[error("cluster write failed: {0}")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Takes a device out of allocation in the cluster, or puts it back.
#[async_trait]
pub trait ClusterCordon: Send + Sync + 'static {
    /// Cordons (`true`) or uncordons `device` of `node`; idempotent.
    async fn set(&self, node: &str, device: &str, cordon: bool) -> Result<(), CordonError>;
}
