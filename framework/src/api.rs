//! Every write the framework makes to the API server, behind the [`ClusterApi`] trait.
//!
//! Owns the trait and the event value type; the implementation over `kube::Client` lives in
//! `kube_api`, the in-memory fake in `testing`. Must not depend on the queue or the driver.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};
use kube::Resource;

use super::error::KubeCallError;

/// Severity of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something an operator or user should look at.
    Warning,
}

/// An event about one object, posted with source component `resource driver <name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The object the event is about (claim, pod, class or scheduling context).
    pub regarding: ObjectReference,
    /// Severity.
    pub type_: EventType,
    /// Short `PascalCase` reason, e.g. `Failed`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl EventRecord {
    /// A Warning event with reason `Failed`, as the worker posts for a failed sync.
    pub fn failed<K: Resource<DynamicType = ()>>(object: &K, message: impl Into<String>) -> Self {
        Self {
            regarding: object_reference(object),
            type_: EventType::Warning,
            reason: "Failed".to_owned(),
            message: message.into(),
        }
    }
}

/// The reference to `object` used in events.
pub fn object_reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

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
