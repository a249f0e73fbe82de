//! The part of a pod the controller reads: its metadata, `spec.resourceClaims` and
//! `status.resourceClaimStatuses`. The pod watch decodes only these from each event, skipping the
//! rest of the object (containers, volumes, conditions: most of a pod's bytes), and the cache
//! holds them as a `Pod` with only those fields set.
//!
//! Decoding only; no I/O.

use k8s_openapi::api::core::v1::{
    Pod, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// A pod as the controller reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct PodClaims {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<ClaimsSpec>,
    #[serde(default)]
    status: Option<ClaimsStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimsSpec {
    #[serde(default)]
    resource_claims: Option<Vec<PodResourceClaim>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimsStatus {
    #[serde(default)]
    resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
}

impl k8s_openapi::Resource for PodClaims {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for PodClaims {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<PodClaims> for Pod {
    fn from(pod: PodClaims) -> Pod {
        Pod {
            metadata: pod.metadata,
            spec: pod.spec.map(|spec| PodSpec {
                resource_claims: spec.resource_claims,
                ..PodSpec::default()
            }),
            status: pod.status.map(|status| PodStatus {
                resource_claim_statuses: status.resource_claim_statuses,
                ..PodStatus::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_metadata_and_the_claims_of_a_pod_are_kept() {
        let wire = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                "deletionTimestamp": "2026-12-05T10:00:00Z"},
            "spec": {
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"claims": [{"name": "gpu"}]}}],
                "nodeName": "node-1",
                "resourceClaims": [{"name": "gpu", "source": {"resourceClaimTemplateName": "t"}}]
            },
            "status": {
                "phase": "Running",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]
            }
        });
        let pod: Pod = serde_json::from_value::<PodClaims>(wire).unwrap().into();
        assert_eq!(pod.metadata.uid.as_deref(), Some("u-1"));
        assert!(pod.metadata.deletion_timestamp.is_some());
        let spec = pod.spec.unwrap();
        let claims = spec.resource_claims.unwrap();
        assert_eq!(claims[0].name, "gpu");
        assert_eq!(
            claims[0]
                .source
                .as_ref()
                .and_then(|s| s.resource_claim_template_name.as_deref()),
            Some("t")
        );
        assert!(spec.containers.is_empty() && spec.node_name.is_none());
        let status = pod.status.unwrap();
        assert_eq!(
            status.resource_claim_statuses.unwrap()[0]
                .resource_claim_name
                .as_deref(),
            Some("p-gpu-x")
        );
        assert!(status.phase.is_none());
    }

    #[test]
    fn a_pod_without_spec_or_status_decodes() {
        let pod: Pod = serde_json::from_value::<PodClaims>(json!({"metadata": {"name": "p"}}))
            .unwrap()
            .into();
        assert!(pod.spec.is_none() && pod.status.is_none());
    }
}
