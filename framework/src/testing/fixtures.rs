//! Small fixture builders in the names of the upstream unit tests: driver `mock-driver`, classes
//! `mock-class` (ours) and `other-class`, claim `default/claim`, pod `default/pod` (uid 1234) with
//! pod claim `my-pod-claim`, its scheduling context, and nodes `worker` and `worker-2`.
//!
//! `claim().immediate().with_finalizer()` reads as the object it builds.

use chrono::{TimeZone, Utc};
use k8s_openapi::api::core::v1::{
    ClaimSource, Pod, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, PodSchedulingContext, PodSchedulingContextSpec, PodSchedulingContextStatus,
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimParametersReference,
    ResourceClaimSchedulingStatus, ResourceClaimSpec, ResourceClaimStatus, ResourceClass,
    ResourceClassParametersReference, ResourceHandle,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// The driver name of the fixtures.
pub const DRIVER: &str = "mock-driver";
/// Our finalizer.
pub const FINALIZER: &str = "mock-driver/deletion-protection";
/// Our class.
pub const CLASS: &str = "mock-class";
/// A class of another driver.
pub const OTHER_CLASS: &str = "other-class";
/// Namespace of all namespaced fixtures.
pub const NAMESPACE: &str = "default";
/// Claim name.
pub const CLAIM: &str = "claim";
/// Pod and scheduling context name.
pub const POD: &str = "pod";
/// Pod UID.
pub const POD_UID: &str = "1234";
/// The pod claim name.
pub const POD_CLAIM: &str = "my-pod-claim";
/// The selected node.
pub const NODE: &str = "worker";
/// Another node.
pub const OTHER_NODE: &str = "worker-2";

fn meta(namespace: Option<&str>, name: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        uid: Some(uid.to_owned()),
        resource_version: Some("1".to_owned()),
        ..ObjectMeta::default()
    }
}

fn deletion_time() -> Time {
    Time(Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap())
}

fn pod_owner() -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: POD.to_owned(),
        uid: POD_UID.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The allocation the fixtures treat as "allocated" (as the scripted driver makes on the
/// immediate path).
pub fn allocation() -> AllocationResult {
    AllocationResult {
        resource_handles: Some(vec![ResourceHandle {
            driver_name: Some(DRIVER.to_owned()),
            data: Some("immediate".to_owned()),
            structured_data: None,
        }]),
        available_on_nodes: None,
        shareable: None,
    }
}

/// Claim `default/claim` of class `mock-class`, delayed allocation, resourceVersion 1.
pub fn claim() -> ResourceClaim {
    ResourceClaim {
        metadata: meta(Some(NAMESPACE), CLAIM, "claim-uid"),
        spec: ResourceClaimSpec {
            resource_class_name: CLASS.to_owned(),
            allocation_mode: Some("WaitForFirstConsumer".to_owned()),
            parameters_ref: None,
        },
        status: None,
    }
}

/// Builder methods for claims.
pub trait ClaimFixture: Sized {
    /// Renames the claim (and its UID).
    #[must_use]
    fn named(self, name: &str) -> Self;
    /// Sets the class.
    #[must_use]
    fn in_class(self, class: &str) -> Self;
    /// Immediate allocation.
    #[must_use]
    fn immediate(self) -> Self;
    /// Delayed (`WaitForFirstConsumer`) allocation.
    #[must_use]
    fn delayed(self) -> Self;
    /// Adds our finalizer.
    #[must_use]
    fn with_finalizer(self) -> Self;
    /// Adds some other finalizer.
    #[must_use]
    fn with_other_finalizer(self, finalizer: &str) -> Self;
    /// Sets a deletion timestamp.
    #[must_use]
    fn deleted(self) -> Self;
    /// Sets `status.allocation` and `status.driverName`.
    #[must_use]
    fn allocated(self, allocation: AllocationResult) -> Self;
    /// Sets `status.deallocationRequested`.
    #[must_use]
    fn deallocation_requested(self) -> Self;
    /// Adds a pod to `status.reservedFor`.
    #[must_use]
    fn reserved_for(self, pod: &str, uid: &str) -> Self;
    /// Sets `spec.parametersRef`.
    #[must_use]
    fn with_parameters(self, kind: &str, name: &str) -> Self;
    /// Makes the pod fixture the controller owner (a claim made from a template).
    #[must_use]
    fn owned_by_pod(self) -> Self;
    /// Sets the resourceVersion.
    #[must_use]
    fn with_version(self, version: &str) -> Self;
}

impl ClaimFixture for ResourceClaim {
    fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.to_owned());
        self.metadata.uid = Some(format!("{name}-uid"));
        self
    }
    fn in_class(mut self, class: &str) -> Self {
        class.clone_into(&mut self.spec.resource_class_name);
        self
    }
    fn immediate(mut self) -> Self {
        self.spec.allocation_mode = Some("Immediate".to_owned());
        self
    }
    fn delayed(mut self) -> Self {
        self.spec.allocation_mode = Some("WaitForFirstConsumer".to_owned());
        self
    }
    fn with_finalizer(self) -> Self {
        self.with_other_finalizer(FINALIZER)
    }
    fn with_other_finalizer(mut self, finalizer: &str) -> Self {
        self.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(finalizer.to_owned());
        self
    }
    fn deleted(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(deletion_time());
        self
    }
    fn allocated(mut self, allocation: AllocationResult) -> Self {
        let status = self.status.get_or_insert_with(ResourceClaimStatus::default);
        status.allocation = Some(allocation);
        status.driver_name = Some(DRIVER.to_owned());
        self
    }
    fn deallocation_requested(mut self) -> Self {
        self.status
            .get_or_insert_with(ResourceClaimStatus::default)
            .deallocation_requested = Some(true);
        self
    }
    fn reserved_for(mut self, pod: &str, uid: &str) -> Self {
        self.status
            .get_or_insert_with(ResourceClaimStatus::default)
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".to_owned(),
                name: pod.to_owned(),
                uid: uid.to_owned(),
            });
        self
    }
    fn with_parameters(mut self, kind: &str, name: &str) -> Self {
        self.spec.parameters_ref = Some(ResourceClaimParametersReference {
            api_group: Some("dra-ledger.io".to_owned()),
            kind: kind.to_owned(),
            name: name.to_owned(),
        });
        self
    }
    fn owned_by_pod(mut self) -> Self {
        self.metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(pod_owner());
        self
    }
    fn with_version(mut self, version: &str) -> Self {
        self.metadata.resource_version = Some(version.to_owned());
        self
    }
}

/// Class `mock-class` of driver `mock-driver`.
pub fn class() -> ResourceClass {
    ResourceClass {
        metadata: meta(None, CLASS, "class-uid"),
        driver_name: DRIVER.to_owned(),
        parameters_ref: None,
        structured_parameters: None,
        suitable_nodes: None,
    }
}

/// Builder methods for classes.
pub trait ClassFixture: Sized {
    /// Renames the class.
    #[must_use]
    fn named(self, name: &str) -> Self;
    /// Sets the driver name.
    #[must_use]
    fn of_driver(self, driver: &str) -> Self;
    /// Sets `parametersRef`.
    #[must_use]
    fn with_parameters(self, kind: &str, name: &str) -> Self;
}

impl ClassFixture for ResourceClass {
    fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.to_owned());
        self
    }
    fn of_driver(mut self, driver: &str) -> Self {
        driver.clone_into(&mut self.driver_name);
        self
    }
    fn with_parameters(mut self, kind: &str, name: &str) -> Self {
        self.parameters_ref = Some(ResourceClassParametersReference {
            api_group: Some("dra-ledger.io".to_owned()),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: None,
        });
        self
    }
}

/// Pod `default/pod` (uid 1234) without claims.
pub fn pod() -> Pod {
    Pod {
        metadata: meta(Some(NAMESPACE), POD, POD_UID),
        spec: Some(PodSpec::default()),
        status: None,
    }
}

/// Builder methods for pods.
pub trait PodFixture: Sized {
    /// Adds a pod claim referring to an existing claim by name.
    #[must_use]
    fn with_claim(self, pod_claim: &str, claim: &str) -> Self;
    /// Adds a pod claim made from a template; `generated` is the name recorded in
    /// `status.resourceClaimStatuses` (no entry at all when `None`).
    #[must_use]
    fn with_template_claim(self, pod_claim: &str, generated: Option<&str>) -> Self;
    /// Sets a deletion timestamp.
    #[must_use]
    fn deleted(self) -> Self;
}

impl PodFixture for Pod {
    fn with_claim(mut self, pod_claim: &str, claim: &str) -> Self {
        self.spec
            .get_or_insert_with(PodSpec::default)
            .resource_claims
            .get_or_insert_with(Vec::new)
            .push(PodResourceClaim {
                name: pod_claim.to_owned(),
                source: Some(ClaimSource {
                    resource_claim_name: Some(claim.to_owned()),
                    resource_claim_template_name: None,
                }),
            });
        self
    }
    fn with_template_claim(mut self, pod_claim: &str, generated: Option<&str>) -> Self {
        self.spec
            .get_or_insert_with(PodSpec::default)
            .resource_claims
            .get_or_insert_with(Vec::new)
            .push(PodResourceClaim {
                name: pod_claim.to_owned(),
                source: Some(ClaimSource {
                    resource_claim_name: None,
                    resource_claim_template_name: Some("template".to_owned()),
                }),
            });
        if let Some(generated) = generated {
            self.status
                .get_or_insert_with(PodStatus::default)
                .resource_claim_statuses
                .get_or_insert_with(Vec::new)
                .push(PodResourceClaimStatus {
                    name: pod_claim.to_owned(),
                    resource_claim_name: Some(generated.to_owned()),
                });
        }
        self
    }
    fn deleted(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(deletion_time());
        self
    }
}

/// PodSchedulingContext `default/pod`, controlled by the pod fixture, with an empty spec.
pub fn context() -> PodSchedulingContext {
    let mut metadata = meta(Some(NAMESPACE), POD, "context-uid");
    metadata.owner_references = Some(vec![pod_owner()]);
    PodSchedulingContext {
        metadata,
        spec: PodSchedulingContextSpec::default(),
        status: None,
    }
}

/// Builder methods for scheduling contexts.
pub trait ContextFixture: Sized {
    /// Sets `spec.selectedNode`.
    #[must_use]
    fn selected(self, node: &str) -> Self;
    /// Sets `spec.potentialNodes`.
    #[must_use]
    fn potential<S: AsRef<str>>(self, nodes: &[S]) -> Self;
    /// Adds an entry to `status.resourceClaims`.
    #[must_use]
    fn with_status_entry<S: AsRef<str>>(self, pod_claim: &str, unsuitable: &[S]) -> Self;
    /// Sets a deletion timestamp.
    #[must_use]
    fn deleted(self) -> Self;
}

impl ContextFixture for PodSchedulingContext {
    fn selected(mut self, node: &str) -> Self {
        self.spec.selected_node = Some(node.to_owned());
        self
    }
    fn potential<S: AsRef<str>>(mut self, nodes: &[S]) -> Self {
        self.spec.potential_nodes = Some(nodes.iter().map(|n| n.as_ref().to_owned()).collect());
        self
    }
    fn with_status_entry<S: AsRef<str>>(mut self, pod_claim: &str, unsuitable: &[S]) -> Self {
        self.status
            .get_or_insert_with(PodSchedulingContextStatus::default)
            .resource_claims
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimSchedulingStatus {
                name: Some(pod_claim.to_owned()),
                unsuitable_nodes: Some(unsuitable.iter().map(|n| n.as_ref().to_owned()).collect()),
            });
        self
    }
    fn deleted(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(deletion_time());
        self
    }
}

/// Node names `node-0` .. `node-<n-1>`.
pub fn nodes(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("node-{i}")).collect()
}
