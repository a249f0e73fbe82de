//! The fixed label values of the metrics: every label value exposed comes from one of these
//! enums or constants (an HTTP status code aside), never from object names or error text. The
//! driver reports its facts in these enums (its observer's arguments), so the values are defined
//! once, here.

use serde::Serialize;

/// How a claim was allocated (`mode` label of `allocations_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// Immediate allocation: the driver picks the node.
    Immediate,
    /// Delayed allocation (`WaitForFirstConsumer`) on the node the scheduler selected.
    Delayed,
    /// On `resource.k8s.io/v1` (Kubernetes 1.34+): the kube-scheduler allocated, the mirror
    /// recorded the allocation in the ledger.
    Mirrored,
}

impl AllocationMode {
    /// All modes.
    pub const ALL: [AllocationMode; 3] = [Self::Immediate, Self::Delayed, Self::Mirrored];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Immediate => "immediate",
            Self::Delayed => "delayed",
            Self::Mirrored => "mirrored",
        }
    }
}

/// How an allocation ended (`outcome` label of `allocations_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationOutcome {
    /// The claims got devices (including idempotent repeats).
    Allocated,
    /// No devices fit the claims.
    Unsatisfiable,
    /// Anything else failed (parameters, ledger, not ready).
    Error,
    /// An admin-access claim recorded by the mirror: it looks at devices and holds none.
    AdminAccess,
}

impl AllocationOutcome {
    /// All outcomes.
    pub const ALL: [AllocationOutcome; 4] = [
        Self::Allocated,
        Self::Unsatisfiable,
        Self::Error,
        Self::AdminAccess,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allocated => "allocated",
            Self::Unsatisfiable => "unsatisfiable",
            Self::Error => "error",
            Self::AdminAccess => "admin_access",
        }
    }
}

/// How a deallocation ended (`outcome` label of `deallocations_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeallocationOutcome {
    /// The claim's devices were freed.
    Released,
    /// The claim had no allocation in the ledger (a repeat).
    NotAllocated,
    /// The ledger failed.
    Error,
}

impl DeallocationOutcome {
    /// All outcomes.
    pub const ALL: [DeallocationOutcome; 3] = [Self::Released, Self::NotAllocated, Self::Error];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::NotAllocated => "not_allocated",
            Self::Error => "error",
        }
    }
}

/// What a reconcile between ledger and cluster found (`kind` label of `reconcile_drift_total`).
///
/// Also the key of a reconcile report's counts, serialized as the label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// A claim showed an allocation the ledger lacked; it was imported.
    MissingInLedger,
    /// The ledger held an allocation whose claim is gone, unallocated or allocated otherwise.
    OrphanInLedger,
    /// The claim showed other devices or another node than the ledger; the claim won.
    DeviceMismatch,
    /// A pending intent whose claim stayed unallocated past the grace period was released.
    StaleIntent,
    /// A claim's allocation of our devices could not be read: on `resource.k8s.io/v1alpha2` its
    /// resource handle data did not parse; on `resource.k8s.io/v1` our opaque configuration did
    /// not parse, or our devices are in the pools of several nodes.
    BadHandleData,
    /// A claim's allocation could not be recorded because another claim holds its devices.
    DeviceConflict,
    /// A claim's allocation names a device of ours that no `ResourceSlice` publishes (counted per
    /// device, `resource.k8s.io/v1` only): the ledger keeps it, marked missing.
    UnpublishedDevice,
}

impl DriftKind {
    /// All kinds.
    pub const ALL: [DriftKind; 7] = [
        Self::MissingInLedger,
        Self::OrphanInLedger,
        Self::DeviceMismatch,
        Self::StaleIntent,
        Self::BadHandleData,
        Self::DeviceConflict,
        Self::UnpublishedDevice,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingInLedger => "missing_in_ledger",
            Self::OrphanInLedger => "orphan_in_ledger",
            Self::DeviceMismatch => "device_mismatch",
            Self::StaleIntent => "stale_intent",
            Self::BadHandleData => "bad_handle_data",
            Self::DeviceConflict => "device_conflict",
            Self::UnpublishedDevice => "unpublished_device",
        }
    }
}

/// The `state` label values of `devices`.
pub const DEVICE_STATES: [&str; 5] = ["free", "allocated", "shared", "cordoned", "missing"];

/// The Kubernetes API verbs of `api_requests_total`.
pub const API_VERBS: [&str; 7] = [
    "get", "watch", "create", "update", "patch", "delete", "other",
];
