//! How the 1.34 actors tie a pod to its `ResourceClaims`, as the `resourceclaim` helper package
//! of Kubernetes does: the claim a pod claim names (`Name`: a direct name, or the generated name
//! recorded in `status.resourceClaimStatuses`), whether a claim was made for the pod
//! (`IsForPod`: controlled by it) and whether it is reserved for the pod (`IsReservedForPod`).
//! The error texts are upstream's.
//!
//! Pure; the controller and the kubelet share it.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ObjectKey;
use dra_types::resource_v1::ResourceClaim;

/// Why a pod claim names no claim yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A template claim whose claim is not recorded in the pod status yet.
    #[error("pod \"{pod}\": ResourceClaim not created yet")]
    NotCreated {
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// Neither a claim name nor a template name is set.
    #[error("pod \"{pod}\", spec.resourceClaim \"{claim}\": none of the supported fields are set")]
    Unsupported {
        /// `namespace/name` of the pod.
        pod: String,
        /// The pod claim.
        claim: String,
    },
}

/// A claim made from a template that the pod does not control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ResourceClaim {claim} was not created for pod {pod} (pod is not owner)")]
pub struct NotForPod {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `namespace/name` of the pod.
    pub pod: String,
}

/// The claim a pod claim refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimName {
    /// The `ResourceClaim`'s name in the pod's namespace.
    pub name: String,
    /// Made from a template: it must be controlled by the pod.
    pub check_owner: bool,
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The claim of `entry` of `pod`: `Ok(None)` when the recorded status says that no claim is
/// needed.
pub fn claim_name(pod: &Pod, entry: &PodResourceClaim) -> Result<Option<ClaimName>, NameError> {
    let source = entry.source.as_ref();
    if let Some(name) = source.and_then(|s| s.resource_claim_name.as_ref()) {
        return Ok(Some(ClaimName {
            name: name.clone(),
            check_owner: false,
        }));
    }
    if source.is_some_and(|s| s.resource_claim_template_name.is_some()) {
        let recorded = pod
            .status
            .iter()
            .flat_map(|s| s.resource_claim_statuses.iter().flatten())
            .find(|s| s.name == entry.name);
        return match recorded {
            Some(status) => Ok(status.resource_claim_name.clone().map(|name| ClaimName {
                name,
                check_owner: true,
            })),
            None => Err(NameError::NotCreated { pod: pod_key(pod) }),
        };
    }
    Err(NameError::Unsupported {
        pod: pod_key(pod),
        claim: entry.name.clone(),
    })
}

/// The pod's `spec.resourceClaims`.
pub fn pod_claim_entries(pod: &Pod) -> &[PodResourceClaim] {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or_default()
}

/// The names of the claims of `pod` that resolve now.
pub fn resolved_claim_names(pod: &Pod) -> Vec<String> {
    pod_claim_entries(pod)
        .iter()
        .filter_map(|entry| claim_name(pod, entry).ok().flatten())
        .map(|c| c.name)
        .collect()
}

/// The claims of `pod` that resolve now, as keys in the pod's namespace.
pub fn resolved_claim_keys(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    resolved_claim_names(pod)
        .iter()
        .map(|name| ObjectKey::new(namespace, name))
        .collect()
}

/// `Ok` when the claim with metadata `claim` is in the pod's namespace and controlled by the pod.
pub fn is_for_pod(pod: &Pod, claim: &ObjectMeta) -> Result<(), NotForPod> {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let controlled = claim
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == pod_uid);
    if claim.namespace == pod.metadata.namespace && controlled {
        Ok(())
    } else {
        Err(NotForPod {
            claim: format!(
                "{}/{}",
                claim.namespace.as_deref().unwrap_or_default(),
                claim.name.as_deref().unwrap_or_default()
            ),
            pod: pod_key(pod),
        })
    }
}

/// Whether the claim lists the pod's UID in `reservedFor`.
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    claim.reserved_for().iter().any(|r| r.uid == pod_uid)
}

/// Pods with claims for the tests of the actors that read them.
#[cfg(test)]
pub(crate) mod fixtures {
    use k8s_openapi::api::core::v1::{ClaimSource, Pod, PodResourceClaim, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// The pod claim `name` naming a claim, a template, both or neither.
    pub(crate) fn entry(
        name: &str,
        claim: Option<&str>,
        template: Option<&str>,
    ) -> PodResourceClaim {
        PodResourceClaim {
            name: name.into(),
            source: Some(ClaimSource {
                resource_claim_name: claim.map(Into::into),
                resource_claim_template_name: template.map(Into::into),
            }),
        }
    }

    /// Pod `ns/p` (UID `pod-uid`) with `entries` as its pod claims, on no node, without status.
    pub(crate) fn pod(entries: Vec<PodResourceClaim>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("pod-uid".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                resource_claims: Some(entries),
                ..PodSpec::default()
            }),
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::entry;
    use super::*;
    use dra_types::resource_v1::{ResourceClaimConsumerReference, ResourceClaimStatus};
    use k8s_openapi::api::core::v1::{PodResourceClaimStatus, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(entries: Vec<PodResourceClaim>, statuses: &[(&str, Option<&str>)]) -> Pod {
        Pod {
            status: Some(PodStatus {
                resource_claim_statuses: Some(
                    statuses
                        .iter()
                        .map(|(n, c)| PodResourceClaimStatus {
                            name: (*n).into(),
                            resource_claim_name: c.map(Into::into),
                        })
                        .collect(),
                ),
                ..PodStatus::default()
            }),
            ..super::fixtures::pod(entries)
        }
    }

    #[test]
    fn names_come_from_the_spec_or_the_recorded_status() {
        let p = pod(
            vec![
                entry("a", Some("direct"), None),
                entry("b", None, Some("t")),
                entry("c", None, Some("t")),
                entry("d", None, Some("t")),
                PodResourceClaim {
                    name: "e".into(),
                    source: None,
                },
            ],
            &[("b", Some("p-b-x")), ("c", None)],
        );
        let entries = pod_claim_entries(&p);
        assert_eq!(
            claim_name(&p, &entries[0]),
            Ok(Some(ClaimName {
                name: "direct".into(),
                check_owner: false
            }))
        );
        assert_eq!(
            claim_name(&p, &entries[1]),
            Ok(Some(ClaimName {
                name: "p-b-x".into(),
                check_owner: true
            }))
        );
        assert_eq!(claim_name(&p, &entries[2]), Ok(None));
        assert_eq!(
            claim_name(&p, &entries[3]).unwrap_err().to_string(),
            "pod \"ns/p\": ResourceClaim not created yet"
        );
        assert_eq!(
            claim_name(&p, &entries[4]).unwrap_err().to_string(),
            "pod \"ns/p\", spec.resourceClaim \"e\": none of the supported fields are set"
        );
        assert_eq!(resolved_claim_names(&p), ["direct", "p-b-x"]);
    }

    #[test]
    fn a_claim_is_for_the_pod_only_when_the_pod_controls_it_in_its_namespace() {
        let p = pod(vec![], &[]);
        let owned = |controller: Option<bool>, namespace: &str| ObjectMeta {
            name: Some("c".into()),
            namespace: Some(namespace.into()),
            owner_references: Some(vec![OwnerReference {
                uid: "pod-uid".into(),
                controller,
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        };
        assert!(is_for_pod(&p, &owned(Some(true), "ns")).is_ok());
        assert_eq!(
            is_for_pod(&p, &owned(None, "ns")).unwrap_err().to_string(),
            "ResourceClaim ns/c was not created for pod ns/p (pod is not owner)"
        );
        assert!(is_for_pod(&p, &owned(Some(true), "other")).is_err());
    }

    #[test]
    fn a_claim_is_reserved_for_the_pod_by_uid() {
        let p = pod(vec![], &[]);
        let mut claim = ResourceClaim::default();
        assert!(!is_reserved_for_pod(&p, &claim));
        claim.status = Some(ResourceClaimStatus {
            reserved_for: vec![ResourceClaimConsumerReference::pod("renamed", "pod-uid")],
            ..ResourceClaimStatus::default()
        });
        assert!(is_reserved_for_pod(&p, &claim));
    }
}
