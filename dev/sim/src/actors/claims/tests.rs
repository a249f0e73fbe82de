use super::*;
use k8s_openapi::api::core::v1::{ClaimSource, PodResourceClaim, PodSpec, PodStatus};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
    ResourceClaimTemplateSpec,
};

fn pod_with_template_claims(entries: &[(&str, &str)], recorded: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("train".into()),
            namespace: Some("default".into()),
            uid: Some("pod-uid".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            resource_claims: Some(
                entries
                    .iter()
                    .map(|(name, template)| PodResourceClaim {
                        name: (*name).into(),
                        source: Some(ClaimSource {
                            resource_claim_template_name: Some((*template).into()),
                            resource_claim_name: None,
                        }),
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            resource_claim_statuses: Some(
                recorded
                    .iter()
                    .map(|(name, claim)| PodResourceClaimStatus {
                        name: (*name).into(),
                        resource_claim_name: Some((*claim).into()),
                    })
                    .collect(),
            ),
            ..PodStatus::default()
        }),
    }
}

fn consumer(uid: &str) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
    }
}

fn claim(mode: &str, allocated: bool, reserved: &[&str]) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some("c".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            allocation_mode: Some(mode.into()),
            resource_class_name: "gpu".into(),
            parameters_ref: None,
        },
        status: Some(ResourceClaimStatus {
            allocation: allocated.then(AllocationResult::default),
            driver_name: None,
            deallocation_requested: None,
            reserved_for: Some(reserved.iter().map(|u| consumer(u)).collect()),
        }),
    }
}

#[test]
fn only_unrecorded_template_claims_are_missing() {
    let pod = pod_with_template_claims(
        &[("gpu", "gpu-template"), ("nic", "nic-template")],
        &[("gpu", "train-gpu-x7k2")],
    );
    assert_eq!(
        missing_template_claims(&pod),
        vec![("nic".to_owned(), "nic-template".to_owned())]
    );
}

#[test]
fn generated_claim_is_owned_by_the_pod_and_names_its_pod_claim() {
    let pod = pod_with_template_claims(&[("gpu", "gpu-template")], &[]);
    let template = ResourceClaimTemplate {
        metadata: ObjectMeta::default(),
        spec: ResourceClaimTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("team".to_owned(), "ml".to_owned())].into()),
                ..ObjectMeta::default()
            }),
            spec: ResourceClaimSpec {
                allocation_mode: None,
                resource_class_name: "gpu".into(),
                parameters_ref: None,
            },
        },
    };
    let claim = claim_from_template(&pod, "gpu", &template);
    assert_eq!(claim.metadata.generate_name.as_deref(), Some("train-gpu-"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(claim.metadata.labels.unwrap()["team"], "ml");
    assert_eq!(
        claim.metadata.annotations.unwrap()[POD_CLAIM_NAME_ANNOTATION],
        "gpu"
    );
    let owner = &claim.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pod", "pod-uid")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(claim.spec.resource_class_name, "gpu");
}

#[test]
fn last_consumer_gone_requests_deallocation_of_delayed_claim() {
    let mut c = claim("WaitForFirstConsumer", true, &["a"]);
    assert!(drop_reservations(&mut c, &["a".into()]));
    let status = c.status.unwrap();
    assert_eq!(status.reserved_for, None);
    assert_eq!(status.deallocation_requested, Some(true));
}

#[test]
fn immediate_claim_keeps_its_allocation_when_unreserved() {
    let mut c = claim("Immediate", true, &["a"]);
    assert!(drop_reservations(&mut c, &["a".into()]));
    assert_eq!(c.status.unwrap().deallocation_requested, None);
}

#[test]
fn remaining_consumer_keeps_the_claim_allocated() {
    let mut c = claim("WaitForFirstConsumer", true, &["a", "b"]);
    assert!(drop_reservations(&mut c, &["a".into()]));
    let status = c.status.unwrap();
    assert_eq!(status.reserved_for.unwrap(), vec![consumer("b")]);
    assert_eq!(status.deallocation_requested, None);
}

#[test]
fn active_consumers_leave_the_claim_unchanged() {
    let mut c = claim("WaitForFirstConsumer", true, &["a"]);
    assert!(!drop_reservations(&mut c, &["z".into()]));
    assert_eq!(c, claim("WaitForFirstConsumer", true, &["a"]));
}

#[test]
fn done_pods_are_recognised_by_phase() {
    let mut pod = pod_with_template_claims(&[], &[]);
    assert!(!is_pod_done(&pod));
    for (phase, done) in [("Running", false), ("Succeeded", true), ("Failed", true)] {
        pod.status.as_mut().unwrap().phase = Some(phase.into());
        assert_eq!(is_pod_done(&pod), done, "{phase}");
    }
}
