//! Every write the framework makes to the API server, behind the [`ClusterApi`] trait.
//!
//! Owns the trait (the event value is `dra_runtime::events`'); the implementation over `kube::Client` lives in
//! `kube_api`, the in-memory fake in `testing`. Must not depend on the queue or the driver.

use async_trait::async_trait;
use dra_runtime::events::EventRecord;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};

use super::error::KubeCallError;

/// The writes of the framework. Every claim write carries the resourceVersion of the object passed
/// in, so a write based on a stale copy fails with [`super::KubeCallErrorKind::Conflict`].
#[async_trait]
pub trait ClusterApi: Send + Sync + 'static {
    /// Replaces the claim's metadata and spec (used for finalizers); returns the stored object.
    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, KubeCallError>;

    /// Replaces the claim's status subresource; returns the stored object.
    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, KubeCallError>;

    /// Applies a JSON patch to the status subresource of a PodSchedulingContext. The framework's
    /// patches begin with a `test` of `/metadata/resourceVersion` and touch only this driver's
    /// entries of `status.resourceClaims`.
    async fn patch_scheduling_context_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &json_patch::Patch,
    ) -> Result<PodSchedulingContext, KubeCallError>;

    /// Posts an event. Failures are logged by the caller and otherwise ignored.
    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError>;
}
