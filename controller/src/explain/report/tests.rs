//! The report of `dra-ledger explain`: the lines of each fact and the reason a pod waits.

use super::*;
use k8s_openapi::api::core::v1::{ClaimSource, PodResourceClaim, PodSpec};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("pod1".into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpu".into(),
                source: Some(ClaimSource {
                    resource_claim_name: Some("shared".into()),
                    resource_claim_template_name: None,
                }),
            }]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn in_use_claim() -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some("shared".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: "gpu".into(),
            ..ResourceClaimSpec::default()
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                shareable: Some(false),
                ..AllocationResult::default()
            }),
            reserved_for: Some(vec![ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: "pod0".into(),
                uid: "uid-0".into(),
            }]),
            ..ResourceClaimStatus::default()
        }),
    }
}

fn facts(claim: Option<ResourceClaim>) -> Facts {
    Facts {
        pod: pod(),
        claims: vec![PodClaimFacts {
            pod_claim: "gpu".into(),
            claim_name: Some("shared".into()),
            from_template: false,
            claim,
        }],
        context: None,
        events: Vec::new(),
    }
}

#[test]
fn a_claim_in_use_by_another_pod_is_named_with_the_fix() {
    let text = report(&facts(Some(in_use_claim())), "gpu.dra-ledger.io");
    assert!(
        text.starts_with("pod ns/pod1: Pending, not scheduled\n"),
        "{text}"
    );
    assert!(text.contains("not shareable; reserved for pod0"), "{text}");
    assert!(
        text.contains("why: claim shared is in use by pod ns/pod0 and not shareable"),
        "{text}"
    );
}

#[test]
fn a_missing_claim_says_to_create_it() {
    let text = report(&facts(None), "gpu.dra-ledger.io");
    assert!(
        text.contains("claim shared (pod claim gpu): does not exist"),
        "{text}"
    );
    assert!(
        text.contains("why: ResourceClaim ns/shared does not exist: create it"),
        "{text}"
    );
}
