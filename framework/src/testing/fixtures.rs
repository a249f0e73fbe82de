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

/// Declares a trait of builder methods for `$ty` and implements it there: each method takes
/// the object by value, changes it through `this` (`&mut $ty`) and returns it, so that
/// `claim().immediate().with_finalizer()` reads as the object it builds.
macro_rules! builder_trait {
    (
        $(#[$trait_meta:meta])*
        pub trait $trait:ident for $ty:ty {
            $(
                $(#[$meta:meta])*
                fn $name:ident $(<$generic:ident: $bound:path>)? (
                    $this:ident $(, $arg:ident: $arg_ty:ty)*
                ) $body:block
            )*
        }
    ) => {
        $(#[$trait_meta])*
        pub trait $trait: Sized {
            $(
                $(#[$meta])*
                #[must_use]
                fn $name $(<$generic: $bound>)? (self $(, $arg: $arg_ty)*) -> Self;
            )*
        }

        impl $trait for $ty {
            $(
                fn $name $(<$generic: $bound>)? (mut self $(, $arg: $arg_ty)*) -> Self {
                    let $this = &mut self;
                    $body
                    self
                }
            )*
        }
    };
}

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

fn add_finalizer(metadata: &mut ObjectMeta, finalizer: &str) {
    metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push(finalizer.to_owned());
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

builder_trait! {
    /// Builder methods for claims.
    pub trait ClaimFixture for ResourceClaim {
        /// Renames the claim (and its UID).
        fn named(this, name: &str) {
            this.metadata.name = Some(name.to_owned());
            this.metadata.uid = Some(format!("{name}-uid"));
        }
        /// Sets the class.
        fn in_class(this, class: &str) {
            class.clone_into(&mut this.spec.resource_class_name);
        }
        /// Immediate allocation.
        fn immediate(this) {
            this.spec.allocation_mode = Some("Immediate".to_owned());
        }
        /// Delayed (`WaitForFirstConsumer`) allocation.
        fn delayed(this) {
            this.spec.allocation_mode = Some("WaitForFirstConsumer".to_owned());
        }
        /// Adds our finalizer.
        fn with_finalizer(this) {
            add_finalizer(&mut this.metadata, FINALIZER);
        }
        /// Adds some other finalizer.
        fn with_other_finalizer(this, finalizer: &str) {
            add_finalizer(&mut this.metadata, finalizer);
        }
        /// Sets a deletion timestamp.
        fn deleted(this) {
            this.metadata.deletion_timestamp = Some(deletion_time());
        }
        /// Sets `status.allocation` and `status.driverName`.
        fn allocated(this, allocation: AllocationResult) {
            let status = this.status.get_or_insert_with(ResourceClaimStatus::default);
            status.allocation = Some(allocation);
            status.driver_name = Some(DRIVER.to_owned());
        }
        /// Sets `status.deallocationRequested`.
        fn deallocation_requested(this) {
            this.status
                .get_or_insert_with(ResourceClaimStatus::default)
                .deallocation_requested = Some(true);
        }
        /// Adds a pod to `status.reservedFor`.
        fn reserved_for(this, pod: &str, uid: &str) {
            this.status
                .get_or_insert_with(ResourceClaimStatus::default)
                .reserved_for
                .get_or_insert_with(Vec::new)
                .push(ResourceClaimConsumerReference {
                    api_group: None,
                    resource: "pods".to_owned(),
                    name: pod.to_owned(),
                    uid: uid.to_owned(),
                });
        }
        /// Sets `spec.parametersRef`.
        fn with_parameters(this, kind: &str, name: &str) {
            this.spec.parameters_ref = Some(ResourceClaimParametersReference {
                api_group: Some("dra-ledger.io".to_owned()),
                kind: kind.to_owned(),
                name: name.to_owned(),
            });
        }
        /// Makes the pod fixture the controller owner (a claim made from a template).
        fn owned_by_pod(this) {
            this.metadata
                .owner_references
                .get_or_insert_with(Vec::new)
                .push(pod_owner());
        }
        /// Sets the resourceVersion.
        fn with_version(this, version: &str) {
            this.metadata.resource_version = Some(version.to_owned());
        }
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

builder_trait! {
    /// Builder methods for classes.
    pub trait ClassFixture for ResourceClass {
        /// Renames the class.
        fn named(this, name: &str) {
            this.metadata.name = Some(name.to_owned());
        }
        /// Sets the driver name.
        fn of_driver(this, driver: &str) {
            driver.clone_into(&mut this.driver_name);
        }
        /// Sets `parametersRef`.
        fn with_parameters(this, kind: &str, name: &str) {
            this.parameters_ref = Some(ResourceClassParametersReference {
                api_group: Some("dra-ledger.io".to_owned()),
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: None,
            });
        }
    }
}

/// Adds the pod claim `name` of `source` to `pod`'s spec.
fn add_pod_claim(pod: &mut Pod, name: &str, source: ClaimSource) {
    pod.spec
        .get_or_insert_with(PodSpec::default)
        .resource_claims
        .get_or_insert_with(Vec::new)
        .push(PodResourceClaim {
            name: name.to_owned(),
            source: Some(source),
        });
}

/// Pod `default/pod` (uid 1234) without claims.
pub fn pod() -> Pod {
    Pod {
        metadata: meta(Some(NAMESPACE), POD, POD_UID),
        spec: Some(PodSpec::default()),
        status: None,
    }
}

builder_trait! {
    /// Builder methods for pods.
    pub trait PodFixture for Pod {
        /// Adds a pod claim referring to an existing claim by name.
        fn with_claim(this, pod_claim: &str, claim: &str) {
            add_pod_claim(
                this,
                pod_claim,
                ClaimSource {
                    resource_claim_name: Some(claim.to_owned()),
                    resource_claim_template_name: None,
                },
            );
        }
        /// Adds a pod claim made from a template; `generated` is the name recorded in
        /// `status.resourceClaimStatuses` (no entry at all when `None`).
        fn with_template_claim(this, pod_claim: &str, generated: Option<&str>) {
            add_pod_claim(
                this,
                pod_claim,
                ClaimSource {
                    resource_claim_name: None,
                    resource_claim_template_name: Some("template".to_owned()),
                },
            );
            if let Some(generated) = generated {
                this.status
                    .get_or_insert_with(PodStatus::default)
                    .resource_claim_statuses
                    .get_or_insert_with(Vec::new)
                    .push(PodResourceClaimStatus {
                        name: pod_claim.to_owned(),
                        resource_claim_name: Some(generated.to_owned()),
                    });
            }
        }
        /// Sets a deletion timestamp.
        fn deleted(this) {
            this.metadata.deletion_timestamp = Some(deletion_time());
        }
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

builder_trait! {
    /// Builder methods for scheduling contexts.
    pub trait ContextFixture for PodSchedulingContext {
        /// Sets `spec.selectedNode`.
        fn selected(this, node: &str) {
            this.spec.selected_node = Some(node.to_owned());
        }
        /// Sets `spec.potentialNodes`.
        fn potential<S: AsRef<str>>(this, nodes: &[S]) {
            this.spec.potential_nodes = Some(nodes.iter().map(|n| n.as_ref().to_owned()).collect());
        }
        /// Adds an entry to `status.resourceClaims`.
        fn with_status_entry<S: AsRef<str>>(this, pod_claim: &str, unsuitable: &[S]) {
            this.status
                .get_or_insert_with(PodSchedulingContextStatus::default)
                .resource_claims
                .get_or_insert_with(Vec::new)
                .push(ResourceClaimSchedulingStatus {
                    name: Some(pod_claim.to_owned()),
                    unsuitable_nodes: Some(unsuitable.iter().map(|n| n.as_ref().to_owned()).collect()),
                });
        }
        /// Sets a deletion timestamp.
        fn deleted(this) {
            this.metadata.deletion_timestamp = Some(deletion_time());
        }
    }
}

/// Node names `node-0` .. `node-<n-1>`.
pub fn nodes(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("node-{i}")).collect()
}
