//! The part of a ResourceClaim a reconcile reads: its name, namespace and uid, and of its status
//! the driver name, the allocation's resource handles and `reservedFor`. The reconcile's list of
//! every claim of the cluster decodes only these (skipping the spec, labels, annotations, the
//! nodes an allocation is available on), so that a list of 100,000 claims costs a fraction of the
//! memory and decoding time of the whole objects.
//!
//! Decoding only; no I/O.

use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    ResourceHandle,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

/// A claim as the reconcile reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct ListedClaim {
    #[serde(default, deserialize_with = "identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<ListedStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

/// Only the name, namespace and uid of the metadata.
fn identity<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let Identity {
        name,
        namespace,
        uid,
    } = Identity::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name,
        namespace,
        uid,
        ..ObjectMeta::default()
    })
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedStatus {
    #[serde(default)]
    allocation: Option<ListedAllocation>,
    #[serde(default)]
    driver_name: Option<String>,
    #[serde(default)]
    reserved_for: Option<Vec<ResourceClaimConsumerReference>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedAllocation {
    #[serde(default)]
    resource_handles: Option<Vec<ResourceHandle>>,
}

impl k8s_openapi::Resource for ListedClaim {
    const API_VERSION: &'static str = <ResourceClaim as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <ResourceClaim as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <ResourceClaim as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <ResourceClaim as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str =
        <ResourceClaim as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <ResourceClaim as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for ListedClaim {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<ListedClaim> for ResourceClaim {
    fn from(claim: ListedClaim) -> ResourceClaim {
        ResourceClaim {
            metadata: claim.metadata,
            spec: k8s_openapi::api::resource::v1alpha2::ResourceClaimSpec::default(),
            status: claim.status.map(|status| ResourceClaimStatus {
                allocation: status.allocation.map(|allocation| AllocationResult {
                    resource_handles: allocation.resource_handles,
                    ..AllocationResult::default()
                }),
                driver_name: status.driver_name,
                reserved_for: status.reserved_for,
                ..ResourceClaimStatus::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_a_reconcile_reads_is_kept() {
        let wire = json!({
            "apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u-1",
                "labels": {"a": "b"}, "finalizers": ["f"], "resourceVersion": "7"},
            "spec": {"resourceClassName": "gpu", "allocationMode": "Immediate"},
            "status": {
                "driverName": "gpu.example.com",
                "allocation": {
                    "resourceHandles": [{"driverName": "gpu.example.com", "data": "{}"}],
                    "shareable": true,
                    "availableOnNodes": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "p-1"}],
                "deallocationRequested": true
            }
        });
        let claim: ResourceClaim = serde_json::from_value::<ListedClaim>(wire).unwrap().into();
        assert_eq!(claim.metadata.name.as_deref(), Some("c"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(claim.metadata.uid.as_deref(), Some("u-1"));
        assert!(claim.metadata.labels.is_none() && claim.metadata.finalizers.is_none());
        assert!(claim.spec.resource_class_name.is_empty());
        let status = claim.status.unwrap();
        assert_eq!(status.driver_name.as_deref(), Some("gpu.example.com"));
        let allocation = status.allocation.unwrap();
        let handles = allocation.resource_handles.unwrap();
        assert_eq!(handles[0].data.as_deref(), Some("{}"));
        assert!(allocation.available_on_nodes.is_none() && allocation.shareable.is_none());
        assert_eq!(status.reserved_for.unwrap()[0].uid, "p-1");
        assert!(status.deallocation_requested.is_none());
    }

    #[test]
    fn a_claim_without_status_decodes() {
        let claim: ResourceClaim =
            serde_json::from_value::<ListedClaim>(json!({"metadata": {"name": "c"}}))
                .unwrap()
                .into();
        assert!(claim.status.is_none());
        assert!(claim.metadata.uid.is_none());
    }
}
