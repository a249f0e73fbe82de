//! The facts the driver reports for metrics, behind the [`DriverObserver`] trait, so that the
//! admin API's Prometheus registry can plug in without the driver depending on prometheus.
//!
//! Owns the trait and its fixed label sets; must not depend on the ledger or the API client.

use std::time::Duration;

use serde::Serialize;

/// How a claim is allocated: label `mode` of `allocations_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// Immediate allocation: the driver picks the node.
    Immediate,
    /// Delayed allocation on the node the scheduler selected.
    Delayed,
}

impl AllocationMode {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationMode::Immediate => "immediate",
            AllocationMode::Delayed => "delayed",
        }
    }
}

/// How an allocate call ended: label `outcome` of `allocations_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocationOutcome {
    /// Every claim of the call got devices.
    Allocated,
    /// The claims did not fit.
    Unsatisfiable,
    /// Anything else failed (ledger, aborted, not ready).
    Error,
}

impl AllocationOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationOutcome::Allocated => "allocated",
            AllocationOutcome::Unsatisfiable => "unsatisfiable",
            AllocationOutcome::Error => "error",
        }
    }
}

/// How a deallocate call ended: label `outcome` of `deallocations_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeallocationOutcome {
    /// The claim's devices were freed.
    Released,
    /// The claim had no allocation in the ledger (a repeat).
    NotAllocated,
    /// The ledger failed.
    Error,
}

impl DeallocationOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeallocationOutcome::Released => "released",
            DeallocationOutcome::NotAllocated => "not_allocated",
            DeallocationOutcome::Error => "error",
        }
    }
}

/// A kind of difference between the ledger and the cluster found by a reconcile: label `kind` of
/// `reconcile_drift_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// A claim shows an allocation of ours that the ledger did not have (imported).
    MissingInLedger,
    /// The ledger held an allocation whose claim is gone, unallocated, or allocated otherwise
    /// (released).
    OrphanInLedger,
    /// The claim shows other devices or another node than the ledger (the claim wins).
    DeviceMismatch,
    /// A pending intent whose claim stayed unallocated past the grace period (released).
    StaleIntent,
    /// A claim's resource handle data does not parse (logged, left alone).
    BadHandleData,
    /// A claim's allocation could not be recorded because its devices are held by another claim.
    DeviceConflict,
}

impl DriftKind {
    /// Every kind, in label order.
    pub const ALL: [DriftKind; 6] = [
        DriftKind::MissingInLedger,
        DriftKind::OrphanInLedger,
        DriftKind::DeviceMismatch,
        DriftKind::StaleIntent,
        DriftKind::BadHandleData,
        DriftKind::DeviceConflict,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::MissingInLedger => "missing_in_ledger",
            DriftKind::OrphanInLedger => "orphan_in_ledger",
            DriftKind::DeviceMismatch => "device_mismatch",
            DriftKind::StaleIntent => "stale_intent",
            DriftKind::BadHandleData => "bad_handle_data",
            DriftKind::DeviceConflict => "device_conflict",
        }
    }
}

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
}

/// The observer that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopObserver;

impl DriverObserver for NoopObserver {}
