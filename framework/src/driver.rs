//! The interface a resource driver implements, and the per-claim work item passed to it.
//!
//! Owns the [`Driver`] trait and [`ClaimAllocation`]; must not depend on the queue, the caches or
//! the API client.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{AllocationResult, ResourceClaim, ResourceClass};

/// A `v1alpha2` DRA resource driver, called by the [`super::Controller`].
///
/// All calls may be repeated for the same claim (after a crash, a conflict or a stale cache) and
/// must be idempotent per claim UID.
#[async_trait]
pub trait Driver: Send + Sync + 'static {
    /// The validated content of a class's `parametersRef`.
    type ClassParameters: Send + Sync + 'static;
    /// The validated content of a claim's `parametersRef`.
    type ClaimParameters: Send + Sync + 'static;
    /// What the driver fails with: kept as the source of the framework's [`crate::Error`], its
    /// text ends up in events and logs.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Retrieves and validates the parameters of a class. `class.parameters_ref` may be absent.
    async fn get_class_parameters(
        &self,
        class: &ResourceClass,
    ) -> Result<Self::ClassParameters, Self::Error>;

    /// Retrieves and validates the parameters of a claim. `claim.spec.parameters_ref` may be absent.
    async fn get_claim_parameters(
        &self,
        claim: &ResourceClaim,
        class: &ResourceClass,
        class_parameters: &Self::ClassParameters,
    ) -> Result<Self::ClaimParameters, Self::Error>;

    /// Allocates every claim of `claims`, setting either [`ClaimAllocation::allocation`] or
    /// [`ClaimAllocation::error`] of each. `selected_node` is `None` for immediate allocation (the
    /// driver picks the node) and otherwise the node the scheduler selected; if a claim does not fit
    /// there the driver must set an error. Never called with an empty list.
    async fn allocate(&self, claims: &mut [ClaimAllocation<Self>], selected_node: Option<&str>)
    where
        Self: Sized;

    /// Called once the API server has accepted a claim's allocation (its status write returned),
    /// with the claim as written. A driver that journals its allocations confirms them here; a
    /// crash before this call is covered by the driver's own reconcile. The default does nothing.
    async fn allocation_published(&self, claim: &ResourceClaim) {
        let _ = claim;
    }

    /// Frees the claim's resources. Must succeed when the claim is not allocated and must abort an
    /// allocation in progress. For a claim that shows an allocation, the framework removes the
    /// allocation from the claim's status next and then calls
    /// [`Driver::deallocation_published`].
    async fn deallocate(&self, claim: &ResourceClaim) -> Result<(), Self::Error>;

    /// Called once the API server has accepted the status write that removed a claim's
    /// allocation (after a successful [`Driver::deallocate`]), with the claim as written. A
    /// driver that must not hand the resources to another claim while this one still shows them
    /// frees them here instead of in `deallocate`; a crash before this call is covered by the
    /// driver's own reconcile. The default does nothing.
    async fn deallocation_published(&self, claim: &ResourceClaim) {
        let _ = claim;
    }

    /// Called with every claim the claim informer delivers (added, changed, or listed at a
    /// start or re-list), before the framework decides whether it needs a sync. Must not block:
    /// a driver that tracks claims (which are allocated and reserved) records it here. The
    /// default does nothing.
    fn claim_seen(&self, claim: &ResourceClaim) {
        let _ = claim;
    }

    /// Called with a claim the claim informer saw deleted. The default does nothing.
    fn claim_gone(&self, claim: &ResourceClaim) {
        let _ = claim;
    }

    /// Fills [`ClaimAllocation::unsuitable_nodes`] of each pending claim of `pod`, using only nodes
    /// from `potential_nodes`. A node where not all claims fit should be unsuitable for all of them.
    /// An error means the whole check is repeated later.
    async fn unsuitable_nodes(
        &self,
        pod: &Pod,
        claims: &mut [ClaimAllocation<Self>],
        potential_nodes: &[String],
    ) -> Result<(), Self::Error>
    where
        Self: Sized;
}

/// One claim to allocate or check, with its class and the parameters the driver returned.
pub struct ClaimAllocation<D: Driver> {
    /// `pod.spec.resourceClaims[].name`; empty on the immediate path.
    pub pod_claim_name: String,
    /// The claim as last written or observed (read-only for the driver).
    pub claim: Arc<ResourceClaim>,
    /// The claim's class.
    pub class: Arc<ResourceClass>,
    /// Parameters from [`Driver::get_class_parameters`], shared by the claims of one class.
    pub class_parameters: Arc<D::ClassParameters>,
    /// Parameters from [`Driver::get_claim_parameters`].
    pub claim_parameters: Arc<D::ClaimParameters>,
    /// Output of [`Driver::unsuitable_nodes`]: nodes where this claim cannot be allocated.
    pub unsuitable_nodes: Vec<String>,
    /// Output of [`Driver::allocate`] on success.
    pub allocation: Option<AllocationResult>,
    /// Output of [`Driver::allocate`] on failure.
    pub error: Option<D::Error>,
}

impl<D: Driver> ClaimAllocation<D> {
    /// A work item with no outputs yet.
    pub fn new(
        pod_claim_name: impl Into<String>,
        claim: Arc<ResourceClaim>,
        class: Arc<ResourceClass>,
        class_parameters: Arc<D::ClassParameters>,
        claim_parameters: Arc<D::ClaimParameters>,
    ) -> Self {
        Self {
            pod_claim_name: pod_claim_name.into(),
            claim,
            class,
            class_parameters,
            claim_parameters,
            unsuitable_nodes: Vec::new(),
            allocation: None,
            error: None,
        }
    }

    /// The claim's object name.
    pub fn claim_name(&self) -> &str {
        self.claim.metadata.name.as_deref().unwrap_or_default()
    }

    /// The claim's UID.
    pub fn claim_uid(&self) -> &str {
        self.claim.metadata.uid.as_deref().unwrap_or_default()
    }
}

impl<D: Driver> fmt::Debug for ClaimAllocation<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimAllocation")
            .field("pod_claim_name", &self.pod_claim_name)
            .field("claim", &self.claim_name())
            .field("unsuitable_nodes", &self.unsuitable_nodes)
            .field("allocated", &self.allocation.is_some())
            .field("error", &self.error.as_ref().map(ToString::to_string))
            .finish_non_exhaustive()
    }
}
