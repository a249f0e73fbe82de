//! The `resource.k8s.io/v1` objects the 1.34 actors read and write, in the shape they need:
//! `ResourceClaim` with `status.reservedFor` (what `dra_types::resource_v1` leaves out), kept
//! round-trip safe so that a status write loses no field it does not model;
//! `ResourceClaimTemplate`; `ResourceSlices` (pool, node selection, devices) and `DeviceClasses`
//! (selectors, configuration), which the actors watch, list and delete and the 1.34 scheduler
//! allocates from; and, in `requests`, the typed claim spec and allocation result the scheduler
//! reads and writes.
//!
//! Types only; the decisions on them live with the actors.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub mod requests;

pub use dra_types::resource_v1::{Device, DeviceAttribute, DeviceCapacity, ResourcePool};
pub use requests::{
    AllocationConfigSource, AllocationResult, CelDeviceSelector, DeviceAllocationConfiguration,
    DeviceAllocationResult, DeviceClaim, DeviceClaimConfiguration, DeviceClassConfiguration,
    DeviceClassSpec, DeviceConstraint, DeviceRequest, DeviceRequestAllocationResult,
    DeviceSelector, DeviceSubRequest, ExactDeviceRequest, OpaqueDeviceConfiguration,
};

/// The API group of DRA.
pub const GROUP: &str = "resource.k8s.io";
/// `apiVersion` of every object here.
pub const API_VERSION: &str = "resource.k8s.io/v1";
/// The finalizer the scheduler puts on a claim it allocates; the resourceclaim controller
/// deallocates such a claim when its last consumer goes, then removes the finalizer.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

fn api_version() -> String {
    API_VERSION.to_owned()
}

/// `kube::Resource` for a type with `metadata: ObjectMeta` in `resource.k8s.io/v1`.
macro_rules! v1_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind((): &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group((): &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version((): &()) -> Cow<'_, str> {
                Cow::Borrowed("v1")
            }
            fn api_version((): &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural((): &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A `ResourceClaim`: the spec kept as it came, the status with `reservedFor` typed and every
/// other status field (the allocation, `devices`) kept as it came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// Always `resource.k8s.io/v1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `ResourceClaim`.
    #[serde(default = "ResourceClaim::kind_name")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The requests, constraints and config, not interpreted here.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
    /// The allocation and the reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResourceClaimStatus>,
}

impl ResourceClaim {
    fn kind_name() -> String {
        "ResourceClaim".to_owned()
    }

    /// A new claim with this metadata and spec.
    pub fn new(metadata: ObjectMeta, spec: Value) -> Self {
        Self {
            api_version: api_version(),
            kind: Self::kind_name(),
            metadata,
            spec,
            status: None,
        }
    }

    /// The allocation, if the claim has one.
    pub fn allocation(&self) -> Option<&Value> {
        self.status.as_ref()?.allocation.as_ref()
    }

    /// `spec.devices`, typed (an error when the stored spec does not read as one).
    pub fn device_claim(&self) -> Result<DeviceClaim, serde_json::Error> {
        match self.spec.get("devices") {
            Some(devices) => serde_json::from_value(devices.clone()),
            None => Ok(DeviceClaim::default()),
        }
    }

    /// `status.allocation`, typed (`None` when unset or not readable as one).
    pub fn typed_allocation(&self) -> Option<AllocationResult> {
        serde_json::from_value(self.allocation()?.clone()).ok()
    }

    /// Whether the claim is allocated.
    pub fn is_allocated(&self) -> bool {
        self.allocation().is_some()
    }

    /// `status.reservedFor` (empty when unset).
    pub fn reserved_for(&self) -> &[ConsumerReference] {
        self.status.as_ref().map_or(&[], |s| &s.reserved_for)
    }

    /// The drivers of `status.allocation.devices.results`, each once, in result order.
    pub fn allocated_drivers(&self) -> Vec<String> {
        let mut drivers: Vec<String> = Vec::new();
        let results = self
            .allocation()
            .and_then(|a| a.pointer("/devices/results"))
            .and_then(Value::as_array);
        for result in results.into_iter().flatten() {
            let driver = result
                .get("driver")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !drivers.iter().any(|d| d == driver) {
                drivers.push(driver.to_owned());
            }
        }
        drivers
    }

    /// Whether the claim carries [`DELETE_PROTECTION_FINALIZER`].
    pub fn has_delete_protection(&self) -> bool {
        self.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == DELETE_PROTECTION_FINALIZER)
    }
}

v1_resource!(
    ResourceClaim,
    "ResourceClaim",
    "resourceclaims",
    NamespaceResourceScope
);

/// `ResourceClaim.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// Set once the claim is allocated; kept as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Value>,
    /// The consumers allowed to use the claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ConsumerReference>,
    /// Every other status field (`devices`), kept as it came.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One `status.reservedFor` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerReference {
    /// The consumer's API group; empty or absent for the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The consumer's resource (`pods`).
    pub resource: String,
    /// The consumer's name.
    pub name: String,
    /// The consumer's UID.
    pub uid: String,
}

impl ConsumerReference {
    /// The entry of a pod.
    pub fn pod(name: &str, uid: &str) -> Self {
        Self {
            api_group: None,
            resource: "pods".into(),
            name: name.to_owned(),
            uid: uid.to_owned(),
        }
    }

    /// Whether the consumer is a core/v1 pod.
    pub fn is_pod(&self) -> bool {
        self.resource == "pods" && self.api_group.as_deref().unwrap_or_default().is_empty()
    }
}

/// A `ResourceClaimTemplate`: the metadata and spec of the claims made from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplate {
    /// Always `resource.k8s.io/v1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `ResourceClaimTemplate`.
    #[serde(default = "ResourceClaimTemplate::kind_name")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What a claim made from it gets.
    #[serde(default)]
    pub spec: ResourceClaimTemplateSpec,
}

impl ResourceClaimTemplate {
    fn kind_name() -> String {
        "ResourceClaimTemplate".to_owned()
    }

    /// A template named `name` whose claims get `metadata` and `spec`.
    pub fn new(name: &str, metadata: Option<ObjectMeta>, spec: Value) -> Self {
        Self {
            api_version: api_version(),
            kind: Self::kind_name(),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimTemplateSpec { metadata, spec },
        }
    }
}

v1_resource!(
    ResourceClaimTemplate,
    "ResourceClaimTemplate",
    "resourceclaimtemplates",
    NamespaceResourceScope
);

/// `ResourceClaimTemplate.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplateSpec {
    /// Labels and annotations copied to the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The claim's spec, copied unchanged.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
}

/// A `ResourceSlice` as the actors see it: its metadata, driver and node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The driver and the node.
    #[serde(default)]
    pub spec: ResourceSliceSpec,
}

v1_resource!(
    ResourceSlice,
    "ResourceSlice",
    "resourceslices",
    ClusterResourceScope
);

/// The part of `ResourceSlice.spec` the actors read: the driver, where the devices are, the pool
/// and the devices.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// The driver.
    #[serde(default)]
    pub driver: String,
    /// The pool the slice belongs to.
    #[serde(default)]
    pub pool: ResourcePool,
    /// The node, for node-local slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The nodes that can reach the devices, for network-attached slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// The devices are reachable from every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// The devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
}

/// A `DeviceClass`: the selectors every device of the class meets and the configuration its
/// drivers get.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The selectors and configuration.
    #[serde(default)]
    pub spec: DeviceClassSpec,
}

v1_resource!(
    DeviceClass,
    "DeviceClass",
    "deviceclasses",
    ClusterResourceScope
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_write_keeps_the_fields_it_does_not_model() {
        let stored = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [
                        {"request": "gpu", "driver": "b.example.com", "pool": "p", "device": "d0"},
                        {"request": "gpu", "driver": "a.example.com", "pool": "p", "device": "d1"},
                        {"request": "gpu", "driver": "b.example.com", "pool": "p", "device": "d2"}
                    ]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": []}]}
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
                "devices": [{"driver": "a.example.com", "pool": "p", "device": "d1"}]
            }
        });
        let mut claim: ResourceClaim = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(
            claim.allocated_drivers(),
            ["b.example.com", "a.example.com"]
        );
        assert_eq!(claim.reserved_for(), [ConsumerReference::pod("p", "u1")]);
        assert_eq!(serde_json::to_value(&claim).unwrap(), stored);
        claim.status.as_mut().unwrap().reserved_for.clear();
        let written = serde_json::to_value(&claim).unwrap();
        assert!(written["status"].get("reservedFor").is_none());
        assert_eq!(written["status"]["devices"], stored["status"]["devices"]);
        assert_eq!(
            written["status"]["allocation"],
            stored["status"]["allocation"]
        );
    }

    #[test]
    fn an_unallocated_claim_has_no_drivers_and_a_consumer_of_another_group_is_no_pod() {
        let claim: ResourceClaim =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "status": {}})).unwrap();
        assert!(!claim.is_allocated());
        assert!(claim.allocated_drivers().is_empty());
        let other = ConsumerReference {
            api_group: Some("example.com".into()),
            ..ConsumerReference::pod("p", "u")
        };
        assert!(!other.is_pod());
        assert!(ConsumerReference::pod("p", "u").is_pod());
    }
}
