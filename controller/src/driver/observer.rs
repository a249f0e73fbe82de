//! The facts the driver reports for metrics, behind the [`DriverObserver`] trait, so that the
//! Prometheus registry (`dra-metrics`) plugs in without the driver recording into it directly.
//! The facts are given in the metrics' own label enums, re-exported here.
//!
//! Owns the trait; must not depend on the ledger or the API client.

use std::time::Duration;

pub use dra_metrics::{AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind};

/// Receives the driver's metric-relevant facts. Every method has a no-op default, so an
/// implementation overrides only what it records. Calls happen on the driver's tasks and must
/// not block.
pub trait DriverObserver: Send + Sync + 'static {
    /// One `allocate` call of `claims` claims ended with `outcome` after `duration`.
    fn allocation(
        &self,
        mode: AllocationMode,
        outcome: AllocationOutcome,
        claims: usize,
        duration: Duration,
    ) {
        let _ = (mode, outcome, claims, duration);
    }

    /// One `deallocate` call ended with `outcome`.
    fn deallocation(&self, outcome: DeallocationOutcome) {
        let _ = outcome;
    }

    /// One `unsuitable_nodes` call took `duration`.
    fn unsuitable_nodes(&self, duration: Duration) {
        let _ = duration;
    }

    /// A reconcile found `count` differences of `kind`.
    fn drift(&self, kind: DriftKind, count: u64) {
        let _ = (kind, count);
    }

    /// A reconcile finished after `duration`.
    fn reconcile(&self, duration: Duration) {
        let _ = duration;
    }

    /// A device of `node` changed its health in the ledger, to unhealthy or back to healthy.
    fn health_change(&self, node: &str, unhealthy: bool) {
        let _ = (node, unhealthy);
    }
}

/// The observer that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopObserver;

impl DriverObserver for NoopObserver {}
