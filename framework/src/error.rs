//! Errors of the controller framework, with the message texts of the upstream Go library.
//!
//! Owns only error values; must not depend on the API client or the driver.

/// Result alias of the framework.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the [`super::Driver`], boxed so that [`Error`] is not generic over the driver;
/// kept as the source of the framework's error, so its own chain survives.
pub type BoxedDriverError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failed write or read against the API server, as seen through [`super::ClusterApi`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct KubeCallError {
    /// What went wrong (class of failure).
    pub kind: KubeCallErrorKind,
    /// Human-readable text from the server or client.
    pub message: String,
}

/// Class of a [`KubeCallError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeCallErrorKind {
    /// The object does not exist (404).
    NotFound,
    /// The object changed since it was read (409, resourceVersion mismatch or failed patch test).
    Conflict,
    /// Anything else (transport, validation, authorization).
    Other,
}

impl KubeCallError {
    /// An error of the given kind.
    pub fn new(kind: KubeCallErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Fixed label value for metrics and logs.
    pub fn kind_label(&self) -> &'static str {
        match self.kind {
            KubeCallErrorKind::NotFound => "not_found",
            KubeCallErrorKind::Conflict => "conflict",
            KubeCallErrorKind::Other => "other",
        }
    }
}

/// Everything a sync can fail with. Messages follow the upstream texts so that operators who know
/// the Go library recognise them in events; what failed underneath is each variant's source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ResourceClass named by a claim is not in the cache.
    #[error("resourceclass.resource.k8s.io {0:?} not found")]
    ClassNotFound(String),
    /// The driver rejected the class parameters.
    #[error("class parameters {reference}: {source}")]
    ClassParameters {
        /// The class's `parametersRef`, formatted.
        reference: String,
        /// The driver's error.
        source: BoxedDriverError,
    },
    /// The driver rejected the claim parameters.
    #[error("claim parameters {reference}: {source}")]
    ClaimParameters {
        /// The claim's `parametersRef`, formatted.
        reference: String,
        /// The driver's error.
        source: BoxedDriverError,
    },
    /// Adding our finalizer before allocation failed.
    #[error("add finalizer: {0}")]
    AddFinalizer(#[source] KubeCallError),
    /// Writing the allocation result to the claim status failed.
    #[error("add allocation: {0}")]
    AddAllocation(#[source] KubeCallError),
    /// The driver's Deallocate failed for an allocated claim.
    #[error("deallocate: {0}")]
    Deallocate(#[source] BoxedDriverError),
    /// The driver's Deallocate failed for a claim that was not allocated (stopping an allocation).
    #[error("stop allocation: {0}")]
    StopAllocation(#[source] BoxedDriverError),
    /// Clearing the allocation from the claim status failed.
    #[error("remove allocation: {0}")]
    RemoveAllocation(#[source] KubeCallError),
    /// Clearing `deallocationRequested` failed.
    #[error("remove deallocation: {0}")]
    RemoveDeallocation(#[source] KubeCallError),
    /// Removing our finalizer failed.
    #[error("remove finalizer: {0}")]
    RemoveFinalizer(#[source] KubeCallError),
    /// The driver's Allocate reported an error for the claim (immediate path).
    #[error("allocate: {0}")]
    Allocate(#[source] Box<Error>),
    /// An error the driver's Allocate set on a claim: its text is the driver's.
    #[error(transparent)]
    Driver(BoxedDriverError),
    /// The driver's Allocate returned neither an allocation nor an error for a claim.
    #[error("allocating claim: missing allocation from driver")]
    MissingAllocation,
    /// A template claim named in the pod has not been created by the resourceclaim controller yet.
    #[error("ResourceClaim not created yet")]
    ClaimNotCreated,
    /// A pod claim has neither `resourceClaimName` nor `resourceClaimTemplateName`.
    #[error("unsupported pod claim source")]
    UnsupportedClaimSource,
    /// A template claim is not controlled by the pod that refers to it.
    #[error("ResourceClaim {claim} was not created for pod {pod} (pod is not owner)")]
    ClaimNotForPod {
        /// Claim name.
        claim: String,
        /// Pod name.
        pod: String,
    },
    /// Resolving one of the pod's claims failed.
    #[error("pod claim {name}: {source}")]
    PodClaim {
        /// The pod claim name (`pod.spec.resourceClaims[].name`).
        name: String,
        /// What failed.
        source: Box<Error>,
    },
    /// One claim of a pod failed to allocate (joined with the others by newlines).
    #[error("claim {claim}: {source}")]
    ClaimAllocation {
        /// The claim's object name.
        claim: String,
        /// What failed.
        source: Box<Error>,
    },
    /// Several errors, one per line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Joined(Vec<Error>),
    /// The driver's UnsuitableNodes failed; the whole check is repeated.
    #[error("checking potential nodes: {0}")]
    UnsuitableNodes(#[source] BoxedDriverError),
    /// Writing our entries of the PodSchedulingContext status failed.
    #[error("update unsuitable node status: {0}")]
    UpdateSchedulingStatus(#[source] KubeCallError),
}

impl Error {
    /// Whether the sync failed only because another writer changed the object since our copy
    /// (a scheduling-context status patch whose resourceVersion test failed). The newer copy
    /// arrives through the watch and queues the key again.
    pub fn is_stale_copy(&self) -> bool {
        matches!(self, Error::UpdateSchedulingStatus(e) if e.kind == KubeCallErrorKind::Conflict)
    }

    /// Whether the sync failed on a passing state that a watch event resolves: a stale copy of
    /// the context ([`Error::is_stale_copy`]) or of a claim whose release wrote from a copy
    /// another writer had changed (the resourceclaim controller drops a finished pod from
    /// `reservedFor` while the claim is being deleted), or a pod whose claim made from a
    /// template the resourceclaim controller has not created yet (its creation changes the
    /// pod's status, which queues the context again). Retried quietly, without event.
    pub fn is_passing(&self) -> bool {
        match self {
            Error::PodClaim { source, .. } => matches!(**source, Error::ClaimNotCreated),
            Error::RemoveAllocation(e)
            | Error::RemoveDeallocation(e)
            | Error::RemoveFinalizer(e) => e.kind == KubeCallErrorKind::Conflict,
            _ => self.is_stale_copy(),
        }
    }

    /// Fixed label value naming what failed, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ClassNotFound(_) => "class_not_found",
            Error::ClassParameters { .. } => "class_parameters",
            Error::ClaimParameters { .. } => "claim_parameters",
            Error::AddFinalizer(_) => "add_finalizer",
            Error::AddAllocation(_) => "add_allocation",
            Error::Deallocate(_) => "deallocate",
            Error::StopAllocation(_) => "stop_allocation",
            Error::RemoveAllocation(_) => "remove_allocation",
            Error::RemoveDeallocation(_) => "remove_deallocation",
            Error::RemoveFinalizer(_) => "remove_finalizer",
            Error::Allocate(_)
            | Error::Driver(_)
            | Error::MissingAllocation
            | Error::ClaimAllocation { .. } => "allocate",
            Error::ClaimNotCreated
            | Error::UnsupportedClaimSource
            | Error::ClaimNotForPod { .. }
            | Error::PodClaim { .. } => "pod_claim",
            Error::Joined(_) => "multiple",
            Error::UnsuitableNodes(_) => "unsuitable_nodes",
            Error::UpdateSchedulingStatus(_) => "update_scheduling_status",
        }
    }
}
