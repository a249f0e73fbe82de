//! The hook through which `POST /v1/reconcile` runs a reconcile: the controller implements
//! [`Reconciler`] over its driver and hands it to the [`crate::AppState`]. This crate knows
//! nothing of the driver; the report is opaque JSON.

use async_trait::async_trait;

/// Why a reconcile failed: the implementor's own error, kept as the source of
/// [`crate::Error::Reconcile`].
pub type ReconcileError = Box<dyn std::error::Error + Send + Sync>;

/// Runs one reconcile of the ledger against the cluster now.
#[async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// Reconciles and returns the drift report as JSON; `Err` is the failure (logged by the
    /// server, not shown to the client).
    async fn reconcile_now(&self) -> Result<serde_json::Value, ReconcileError>;
}
