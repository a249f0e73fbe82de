//! `ResourceClaim` (namespaced): the devices a pod asks for (`spec`, immutable) and, in
//! `status`, the allocation, the consumers it is reserved for and the drivers' device status;
//! and `ResourceClaimTemplate`, the metadata and spec of the claims made from it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::NamespaceResourceScope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    api_version, nullable, v1_resource, AllocationResult, DeviceAllocationResult, DeviceClaim,
};

/// The finalizer the scheduler puts on a claim it allocates; the resourceclaim controller
/// deallocates such a claim when its last consumer goes, then removes the finalizer.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// A `ResourceClaim`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// Always `resource.k8s.io/v1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `ResourceClaim`.
    #[serde(default = "ResourceClaim::kind_name")]
    pub kind: String,
    /// Object metadata; `uid` identifies the claim in prepare calls.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The requests, constraints and config.
    #[serde(default)]
    pub spec: ResourceClaimSpec,
    /// The allocation, the reservations and the device status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResourceClaimStatus>,
}

v1_resource!(ResourceClaim, "resourceclaims", NamespaceResourceScope, { spec, status });

impl ResourceClaim {
    /// The claim `namespace/name` with `uid`, without requests or status.
    pub fn new(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            ..Self::default()
        }
    }

    /// The claim with `devices` as its allocation (and no other status), as the scheduler
    /// writes it.
    #[must_use]
    pub fn allocated(mut self, devices: DeviceAllocationResult) -> Self {
        self.status = Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices,
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        });
        self
    }

    /// `status.allocation`, if the claim is allocated.
    pub fn allocation(&self) -> Option<&AllocationResult> {
        self.status.as_ref()?.allocation.as_ref()
    }

    /// Whether the claim is allocated.
    pub fn is_allocated(&self) -> bool {
        self.allocation().is_some()
    }

    /// `status.reservedFor` (empty when unset).
    pub fn reserved_for(&self) -> &[ResourceClaimConsumerReference] {
        self.status.as_ref().map_or(&[], |s| &s.reserved_for)
    }

    /// The drivers of `status.allocation.devices.results`, each once, in result order.
    pub fn allocated_drivers(&self) -> Vec<String> {
        let mut drivers: Vec<String> = Vec::new();
        let results = self.allocation().map_or(&[][..], |a| &a.devices.results);
        for result in results {
            if !drivers.contains(&result.driver) {
                drivers.push(result.driver.clone());
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

/// `ResourceClaim.spec` (also a template's `spec.spec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimSpec {
    /// The requests, constraints and configuration.
    #[serde(default)]
    pub devices: DeviceClaim,
}

/// `ResourceClaim.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// Set once the claim is allocated; immutable until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
    /// The consumers allowed to use the claim (at most 256).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ResourceClaimConsumerReference>,
    /// What the drivers report about the allocated devices.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<AllocatedDeviceStatus>,
}

/// One `status.reservedFor` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimConsumerReference {
    /// The consumer's API group; empty or absent for the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The consumer's resource (`pods`).
    #[serde(default)]
    pub resource: String,
    /// The consumer's name.
    #[serde(default)]
    pub name: String,
    /// The consumer's UID.
    #[serde(default)]
    pub uid: String,
}

impl ResourceClaimConsumerReference {
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

/// One `status.devices` entry: a driver's report on an allocated device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDeviceStatus {
    /// The device's driver.
    #[serde(default)]
    pub driver: String,
    /// The device's pool.
    #[serde(default)]
    pub pool: String,
    /// The device's name.
    #[serde(default)]
    pub device: String,
    /// The device's conditions (at most 8).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Driver-specific data (at most 10 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// The device's network details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<NetworkDeviceData>,
    /// The share of a device allocated more than once (the result's `shareID`).
    #[serde(default, rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
}

/// The network details of a device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDeviceData {
    /// The interface's name in the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
    /// The addresses, in CIDR notation.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// The hardware (MAC) address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_address: Option<String>,
}

/// A `ResourceClaimTemplate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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

v1_resource!(
    ResourceClaimTemplate,
    "resourceclaimtemplates",
    NamespaceResourceScope,
    { spec }
);

impl ResourceClaimTemplate {
    /// A template named `name` whose claims get `metadata` and `spec`.
    pub fn new(name: &str, metadata: Option<ObjectMeta>, spec: ResourceClaimSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimTemplateSpec { metadata, spec },
            ..Self::default()
        }
    }
}

/// `ResourceClaimTemplate.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplateSpec {
    /// Labels and annotations copied to the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The claim's spec, copied unchanged.
    #[serde(default)]
    pub spec: ResourceClaimSpec,
}

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
                "devices": [{"driver": "a.example.com", "pool": "p", "device": "d1",
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Up",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                    "data": {"k": "v"},
                    "networkData": {"interfaceName": "net1", "ips": ["10.0.0.1/24"]}}]
            }
        });
        let mut claim: ResourceClaim = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(
            claim.allocated_drivers(),
            ["b.example.com", "a.example.com"]
        );
        assert_eq!(
            claim.reserved_for(),
            [ResourceClaimConsumerReference::pod("p", "u1")]
        );
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
        let other = ResourceClaimConsumerReference {
            api_group: Some("example.com".into()),
            ..ResourceClaimConsumerReference::pod("p", "u")
        };
        assert!(!other.is_pod());
        assert!(ResourceClaimConsumerReference::pod("p", "u").is_pod());
    }

    #[test]
    fn a_claim_without_spec_or_status_is_written_with_an_empty_spec() {
        let claim = ResourceClaim::new("ns", "c", "u1");
        assert_eq!(
            serde_json::to_value(&claim).unwrap(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"namespace": "ns", "name": "c", "uid": "u1"},
                "spec": {"devices": {}}})
        );
    }
}
