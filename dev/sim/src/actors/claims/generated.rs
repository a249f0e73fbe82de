//! The 1.34 resourceclaim controller's decisions about pods: the claim it makes for a pod claim
//! from a `ResourceClaimTemplate` (its `generateName`, owner, labels and annotations), when a
//! pod still needs its claims, when it is done for good, and whether a changed pod needs a sync
//! (a template claim to create, or an allocated claim to reserve for a pod already on a node).
//!
//! Pure; the v1 controller module does the I/O.

use k8s_openapi::api::core::v1::Pod;

use super::generated_claim_metadata;
use crate::actors::claim_refs::{claim_name, is_for_pod, is_reserved_for_pod, pod_claim_entries};
use dra_types::resource_v1::{ResourceClaim, ResourceClaimTemplate};

/// The longest `generateName` base: 63 characters less a hyphen and five random characters.
const MAX_BASE_LEN: usize = 57;

/// The `generateName` of the claim for `pod_claim` of pod `pod`: `<pod>-<podClaim>-`, or, when
/// that is longer than 57 characters, both names cut in proportion to their length and joined by
/// a hyphen (without the trailing one), so that the pod claim's name is not lost to the API
/// server's cut at the end.
pub fn generate_name(pod: &str, pod_claim: &str) -> String {
    let full = format!("{pod}-{pod_claim}-");
    if full.len() <= MAX_BASE_LEN {
        return full;
    }
    let cut = |name: &str| -> String {
        let keep = name.len() * MAX_BASE_LEN / full.len();
        name.chars().take(keep).collect()
    };
    format!("{}-{}", cut(pod), cut(pod_claim))
}

/// The claim the controller creates for `pod_claim` of `pod` from `template`.
pub fn claim_from_template(
    pod: &Pod,
    pod_claim: &str,
    template: &ResourceClaimTemplate,
) -> ResourceClaim {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    ResourceClaim {
        metadata: generated_claim_metadata(
            pod,
            pod_claim,
            template.spec.metadata.as_ref(),
            generate_name(pod_name, pod_claim),
        ),
        spec: template.spec.spec.clone(),
        ..ResourceClaim::default()
    }
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Whether none of the pod's containers runs or will ever run: it is terminal, or it is being
/// deleted before it was scheduled.
pub fn is_pod_done(pod: &Pod) -> bool {
    is_terminal(pod) || (pod.metadata.deletion_timestamp.is_some() && !is_scheduled(pod))
}

/// Whether the pod may still use its claims; `deleted` says it is gone from the API server.
pub fn pod_needs_claims(pod: &Pod, deleted: bool) -> bool {
    !deleted && !is_pod_done(pod)
}

/// What a changed pod needs from the controller, with upstream's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Whether the pod is to be synced.
    pub needed: bool,
    /// Why (or why not).
    pub reason: String,
}

impl Work {
    fn yes(reason: impl Into<String>) -> Self {
        Self {
            needed: true,
            reason: reason.into(),
        }
    }

    fn no(reason: impl Into<String>) -> Self {
        Self {
            needed: false,
            reason: reason.into(),
        }
    }
}

/// Whether `pod` needs a sync, given the claims the controller knows (`lookup` by name in the
/// pod's namespace). The checks stop at the first pod claim that decides, as upstream's do: a
/// missing direct claim or a pod claim that needs no claim ends them.
pub fn pod_needs_work(pod: &Pod, lookup: &dyn Fn(&str) -> Option<ResourceClaim>) -> Work {
    if pod.metadata.deletion_timestamp.is_some() {
        return Work::no("pod is deleted");
    }
    for entry in pod_claim_entries(pod) {
        let name = match claim_name(pod, entry) {
            Err(error) => return Work::yes(error.to_string()),
            Ok(None) => return Work::no("claim is not needed"),
            Ok(Some(name)) => name,
        };
        let Some(claim) = lookup(&name.name) else {
            let from_template = entry
                .source
                .as_ref()
                .is_some_and(|s| s.resource_claim_template_name.is_some());
            return if from_template {
                Work::yes("must create ResourceClaim from template")
            } else {
                Work::no("claim is missing and must be created by user")
            };
        };
        if name.check_owner {
            if let Err(error) = is_for_pod(pod, &claim.metadata) {
                return Work::no(error.to_string());
            }
        }
        if !is_scheduled(pod) {
            continue;
        }
        if claim.is_allocated() && !is_reserved_for_pod(pod, &claim) {
            return Work::yes(format!(
                "need to reserve claim {}/{} for pod",
                claim.metadata.namespace.as_deref().unwrap_or_default(),
                name.name
            ));
        }
    }
    Work::no("nothing to do")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::claim_refs::fixtures;
    use crate::actors::POD_CLAIM_NAME_ANNOTATION;
    use dra_types::resource_v1::{
        AllocationResult, ResourceClaimConsumerReference, ResourceClaimStatus,
    };
    use k8s_openapi::api::core::v1::{PodResourceClaimStatus, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use serde_json::json;

    fn pod(node: Option<&str>, entries: &[(&str, Option<&str>, Option<&str>)]) -> Pod {
        let mut pod = fixtures::pod(
            entries
                .iter()
                .map(|(name, claim, template)| fixtures::entry(name, *claim, *template))
                .collect(),
        );
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = node.map(Into::into);
        }
        pod.status = Some(PodStatus::default());
        pod
    }

    fn claim(name: &str, allocated: bool, reserved: &[&str], owner: Option<&str>) -> ResourceClaim {
        let mut claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        uid: uid.into(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..ResourceClaim::default()
        };
        claim.status = Some(ResourceClaimStatus {
            allocation: allocated.then(AllocationResult::default),
            reserved_for: reserved
                .iter()
                .map(|uid| ResourceClaimConsumerReference::pod("x", uid))
                .collect(),
            ..ResourceClaimStatus::default()
        });
        claim
    }

    #[test]
    fn short_names_keep_both_parts_and_the_trailing_hyphen() {
        assert_eq!(generate_name("web-0", "gpu"), "web-0-gpu-");
        let exactly = format!("{}-{}-", "p".repeat(40), "c".repeat(15));
        assert_eq!(exactly.len(), 57);
        assert_eq!(generate_name(&"p".repeat(40), &"c".repeat(15)), exactly);
    }

    #[test]
    fn long_names_are_cut_in_proportion_without_the_trailing_hyphen() {
        let pod = "a".repeat(60);
        let claim = "b".repeat(20);
        // The full base has 82 characters: 60 * 57 / 82 = 41 and 20 * 57 / 82 = 13.
        let name = generate_name(&pod, &claim);
        assert_eq!(name, format!("{}-{}", "a".repeat(41), "b".repeat(13)));
        assert!(name.len() <= 57);
        let long_claim = generate_name("web", &"g".repeat(100));
        // 105 characters in all: 3 * 57 / 105 = 1 and 100 * 57 / 105 = 54.
        assert_eq!(long_claim, format!("w-{}", "g".repeat(54)));
    }

    #[test]
    fn a_claim_from_a_template_is_owned_by_the_pod_and_carries_the_templates_metadata() {
        let p = pod(None, &[("gpu", None, Some("t"))]);
        let template = ResourceClaimTemplate::new(
            "t",
            Some(ObjectMeta {
                labels: Some([("team".to_owned(), "a".to_owned())].into()),
                annotations: Some([("note".to_owned(), "x".to_owned())].into()),
                ..ObjectMeta::default()
            }),
            serde_json::from_value(json!({"devices": {"requests": [
                {"name": "r", "exactly": {"deviceClassName": "g"}}
            ]}}))
            .unwrap(),
        );
        let claim = claim_from_template(&p, "gpu", &template);
        assert_eq!(claim.metadata.generate_name.as_deref(), Some("p-gpu-"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(claim.spec, template.spec.spec);
        let annotations = claim.metadata.annotations.unwrap();
        assert_eq!(annotations[POD_CLAIM_NAME_ANNOTATION], "gpu");
        assert_eq!(annotations["note"], "x");
        assert_eq!(claim.metadata.labels.unwrap()["team"], "a");
        let owner = &claim.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Pod", "pod-uid", Some(true))
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
    }

    #[test]
    fn a_pod_is_done_when_terminal_or_deleted_before_scheduling() {
        let mut p = pod(None, &[]);
        assert!(!is_pod_done(&p));
        assert!(!pod_needs_claims(&p, true));
        p.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
        assert!(is_pod_done(&p));
        let mut bound = pod(Some("n"), &[]);
        bound.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
        assert!(!is_pod_done(&bound), "its kubelet still has to stop it");
        assert!(pod_needs_claims(&bound, false));
        bound.status.as_mut().unwrap().phase = Some("Failed".into());
        assert!(is_pod_done(&bound));
    }

    #[test]
    fn a_template_claim_not_recorded_yet_needs_work() {
        let p = pod(None, &[("gpu", None, Some("t"))]);
        let work = pod_needs_work(&p, &|_| None);
        assert!(work.needed);
        assert!(work.reason.contains("ResourceClaim not created yet"));
        let mut recorded = p.clone();
        recorded.status.as_mut().unwrap().resource_claim_statuses =
            Some(vec![PodResourceClaimStatus {
                name: "gpu".into(),
                resource_claim_name: Some("p-gpu-x".into()),
            }]);
        let deleted_claim = pod_needs_work(&recorded, &|_| None);
        assert_eq!(
            deleted_claim.reason,
            "must create ResourceClaim from template"
        );
        let present = pod_needs_work(&recorded, &|_| {
            Some(claim("p-gpu-x", false, &[], Some("pod-uid")))
        });
        assert!(!present.needed, "{present:?}");
        let foreign = pod_needs_work(&recorded, &|_| Some(claim("p-gpu-x", false, &[], None)));
        assert!(!foreign.needed);
        assert!(foreign.reason.contains("pod is not owner"));
    }

    #[test]
    fn a_bound_pod_needs_its_allocated_claims_reserved() {
        let p = pod(Some("n"), &[("gpu", Some("c"), None)]);
        let allocated = pod_needs_work(&p, &|_| Some(claim("c", true, &[], None)));
        assert_eq!(allocated.reason, "need to reserve claim ns/c for pod");
        let reserved = pod_needs_work(&p, &|_| Some(claim("c", true, &["pod-uid"], None)));
        assert!(!reserved.needed);
        let unallocated = pod_needs_work(&p, &|_| Some(claim("c", false, &[], None)));
        assert!(!unallocated.needed);
        let unbound = pod(None, &[("gpu", Some("c"), None)]);
        assert!(!pod_needs_work(&unbound, &|_| Some(claim("c", true, &[], None))).needed);
        assert_eq!(
            pod_needs_work(&p, &|_| None).reason,
            "claim is missing and must be created by user"
        );
        let mut deleting = p.clone();
        deleting.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
        assert!(!pod_needs_work(&deleting, &|_| Some(claim("c", true, &[], None))).needed);
    }
}
