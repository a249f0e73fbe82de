//! The kubelet's claim bookkeeping of one node, as the 1.30 DRA manager keeps it: which
//! `ResourceClaims` a pod uses (names resolved as `resourceclaim.Name` does), whether a claim may be
//! prepared for the pod (allocated, the pod in `reservedFor`), the claims in memory with the pods
//! that reference them and the drivers that prepared them, and from that the batches of
//! `NodePrepareResources` (a pod's unprepared claims, per driver) and of `NodeUnprepareResources`
//! (the claims a finished pod was the last one to use, per driver).
//!
//! Pure decisions, no I/O: the prepare module does the calls.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;

use super::error::ClaimError;

/// A claim of a pod: the `ResourceClaim`'s name and whether it was made from a template (then it
/// must be owned by the pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodClaim {
    /// The `ResourceClaim`'s name in the pod's namespace.
    pub name: String,
    /// Made from a template for this pod.
    pub from_template: bool,
}

/// The claims of `pod`, in `spec.resourceClaims` order. A template entry takes its claim name from
/// `status.resourceClaimStatuses` (an entry without a name needs no claim); `Err` says which entry
/// cannot be resolved yet.
pub(crate) fn pod_claims(pod: &Pod) -> Result<Vec<PodClaim>, ClaimError> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut claims = Vec::new();
    for entry in pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
    {
        let source = entry.source.as_ref();
        if let Some(name) = source.and_then(|s| s.resource_claim_name.as_ref()) {
            claims.push(PodClaim {
                name: name.clone(),
                from_template: false,
            });
        } else if source.is_some_and(|s| s.resource_claim_template_name.is_some()) {
            match statuses.and_then(|list| list.iter().find(|s| s.name == entry.name)) {
                None => {
                    return Err(ClaimError::NotCreated {
                        entry: entry.name.clone(),
                    })
                }
                Some(status) => {
                    if let Some(name) = &status.resource_claim_name {
                        claims.push(PodClaim {
                            name: name.clone(),
                            from_template: true,
                        });
                    }
                }
            }
        } else {
            return Err(ClaimError::NoSource {
                entry: entry.name.clone(),
            });
        }
    }
    Ok(claims)
}

/// One resource handle of an allocated claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handle {
    /// The driver the handle is for (`driverName`, else the claim's `status.driverName`).
    pub driver: String,
    /// The handle's opaque `data`.
    pub data: String,
}

/// A claim the kubelet keeps in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// The allocation's handles.
    pub handles: Vec<Handle>,
    /// The pods that reference the claim, by UID.
    pub pods: BTreeSet<String>,
    /// The drivers whose `NodePrepareResources` succeeded for the claim.
    pub prepared: BTreeSet<String>,
}

impl ClaimInfo {
    /// Whether every driver of the claim prepared it.
    pub(crate) fn is_prepared(&self) -> bool {
        self.handles
            .iter()
            .all(|h| self.prepared.contains(&h.driver))
    }
}

/// What one call carries for a claim: `v1alpha3.Claim` without the structured handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimCall {
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// Name.
    pub name: String,
    /// The handle's data.
    pub resource_handle: String,
}

/// Calls per driver name.
pub(crate) type Batches = BTreeMap<String, Vec<ClaimCall>>;

/// Checks `claim` for `pod` as the 1.30 kubelet does before it prepares: owned by the pod when made
/// from a template, allocated, and reserved for the pod. `Err` says why not (yet).
pub(crate) fn prepared_claim_info(
    pod: &Pod,
    pod_claim: &PodClaim,
    claim: &ResourceClaim,
) -> Result<ClaimInfo, ClaimError> {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    if pod_claim.from_template {
        let owned = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.uid == pod_uid);
        if !owned {
            return Err(ClaimError::NotOwned { name });
        }
    }
    let status = claim.status.as_ref();
    let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
        return Err(ClaimError::NotAllocated { namespace, name });
    };
    let reserved = status
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|list| {
            list.iter()
                .any(|r| r.resource == "pods" && r.uid == pod_uid)
        });
    if !reserved {
        return Err(ClaimError::NotReserved { namespace, name });
    }
    let fallback = status
        .and_then(|s| s.driver_name.clone())
        .unwrap_or_default();
    let mut handles: Vec<Handle> = allocation
        .resource_handles
        .iter()
        .flatten()
        .map(|h| Handle {
            driver: h
                .driver_name
                .clone()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| fallback.clone()),
            data: h.data.clone().unwrap_or_default(),
        })
        .collect();
    if handles.is_empty() {
        handles.push(Handle {
            driver: fallback,
            data: String::new(),
        });
    }
    Ok(ClaimInfo {
        namespace,
        name,
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        handles,
        pods: BTreeSet::new(),
        prepared: BTreeSet::new(),
    })
}

/// The claims of one node, by claim UID.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClaimCache {
    claims: BTreeMap<String, ClaimInfo>,
}

impl ClaimCache {
    /// Adds `pod_uid`'s reference to `claim`, which is added when new (a claim already known keeps
    /// what was prepared).
    pub(crate) fn reference(&mut self, pod_uid: &str, claim: ClaimInfo) {
        let entry = self.claims.entry(claim.uid.clone()).or_insert(claim);
        entry.pods.insert(pod_uid.to_owned());
    }

    /// Whether the pod references any claim.
    pub(crate) fn holds(&self, pod_uid: &str) -> bool {
        self.claims.values().any(|c| c.pods.contains(pod_uid))
    }

    /// A claim by UID.
    #[cfg(test)]
    pub(crate) fn get(&self, uid: &str) -> Option<&ClaimInfo> {
        self.claims.get(uid)
    }

    /// The UID of the cached claim of this namespace and name, if one is cached.
    pub(crate) fn uid_of(&self, namespace: &str, name: &str) -> Option<&str> {
        self.claims
            .values()
            .find(|c| c.namespace == namespace && c.name == name)
            .map(|c| c.uid.as_str())
    }

    /// Whether every claim of `claim_uids` is prepared.
    pub(crate) fn all_prepared<'a>(&self, mut claim_uids: impl Iterator<Item = &'a str>) -> bool {
        claim_uids.all(|uid| self.claims.get(uid).is_some_and(ClaimInfo::is_prepared))
    }

    /// The pod's `NodePrepareResources` calls: of each claim it references, the handles of the
    /// drivers that have not prepared it yet.
    pub(crate) fn prepare_batches(&self, pod_uid: &str) -> Batches {
        let mut batches = Batches::new();
        for claim in self.claims.values().filter(|c| c.pods.contains(pod_uid)) {
            for handle in claim
                .handles
                .iter()
                .filter(|h| !claim.prepared.contains(&h.driver))
            {
                batches
                    .entry(handle.driver.clone())
                    .or_default()
                    .push(call(claim, handle));
            }
        }
        batches
    }

    /// Records that `driver` prepared the claim.
    pub(crate) fn mark_prepared(&mut self, claim_uid: &str, driver: &str) {
        if let Some(claim) = self.claims.get_mut(claim_uid) {
            claim.prepared.insert(driver.to_owned());
        }
    }

    /// The `NodeUnprepareResources` calls once `pod_uid` no longer runs: the claims it is the
    /// last pod to reference, every handle per driver. Claims other pods still use need no call.
    pub(crate) fn unprepare_batches(&self, pod_uid: &str) -> Batches {
        let mut batches = Batches::new();
        for claim in self
            .claims
            .values()
            .filter(|c| c.pods.contains(pod_uid) && c.pods.len() == 1)
        {
            for handle in &claim.handles {
                batches
                    .entry(handle.driver.clone())
                    .or_default()
                    .push(call(claim, handle));
            }
        }
        batches
    }

    /// Drops `pod_uid`'s references once its unprepare calls succeeded: claims nobody references
    /// any more are forgotten; a claim in `unprepared` that another pod referenced meanwhile counts
    /// as unprepared again.
    pub(crate) fn release(&mut self, pod_uid: &str, unprepared: &BTreeSet<String>) {
        for claim in self.claims.values_mut() {
            claim.pods.remove(pod_uid);
            if unprepared.contains(&claim.uid) {
                claim.prepared.clear();
            }
        }
        self.claims.retain(|_, c| !c.pods.is_empty());
    }
}

fn call(claim: &ClaimInfo, handle: &Handle) -> ClaimCall {
    ClaimCall {
        namespace: claim.namespace.clone(),
        uid: claim.uid.clone(),
        name: claim.name.clone(),
        resource_handle: handle.data.clone(),
    }
}

/// The claim UIDs of a batch.
pub(crate) fn uids(batches: &Batches) -> BTreeSet<String> {
    batches.values().flatten().map(|c| c.uid.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ClaimSource, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
    };
    use k8s_openapi::api::resource::v1alpha2::{
        AllocationResult, ResourceClaimConsumerReference, ResourceClaimStatus, ResourceHandle,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(
        entries: &[(&str, Option<&str>, Option<&str>)],
        statuses: &[(&str, Option<&str>)],
    ) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("pod-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                resource_claims: Some(
                    entries
                        .iter()
                        .map(|(name, claim, template)| PodResourceClaim {
                            name: (*name).into(),
                            source: Some(ClaimSource {
                                resource_claim_name: claim.map(Into::into),
                                resource_claim_template_name: template.map(Into::into),
                            }),
                        })
                        .collect(),
                ),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                resource_claim_statuses: Some(
                    statuses
                        .iter()
                        .map(|(name, claim)| PodResourceClaimStatus {
                            name: (*name).into(),
                            resource_claim_name: claim.map(Into::into),
                        })
                        .collect(),
                ),
                ..PodStatus::default()
            }),
        }
    }

    fn claim(handles: &[(Option<&str>, &str)], reserved_for: &[&str]) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("default".into()),
                uid: Some("claim-1".into()),
                owner_references: Some(vec![OwnerReference {
                    uid: "pod-1".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            status: Some(ResourceClaimStatus {
                driver_name: Some("fallback.example.com".into()),
                allocation: Some(AllocationResult {
                    resource_handles: Some(
                        handles
                            .iter()
                            .map(|(driver, data)| ResourceHandle {
                                driver_name: driver.map(Into::into),
                                data: Some((*data).into()),
                                structured_data: None,
                            })
                            .collect(),
                    ),
                    ..AllocationResult::default()
                }),
                reserved_for: Some(
                    reserved_for
                        .iter()
                        .map(|uid| ResourceClaimConsumerReference {
                            resource: "pods".into(),
                            name: "p".into(),
                            uid: (*uid).into(),
                            api_group: None,
                        })
                        .collect(),
                ),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        }
    }

    fn info(uid: &str, drivers: &[&str]) -> ClaimInfo {
        ClaimInfo {
            namespace: "default".into(),
            name: format!("name-{uid}"),
            uid: uid.into(),
            handles: drivers
                .iter()
                .map(|d| Handle {
                    driver: (*d).into(),
                    data: format!("{uid}@{d}"),
                })
                .collect(),
            pods: BTreeSet::new(),
            prepared: BTreeSet::new(),
        }
    }

    #[test]
    fn claim_names_come_from_the_spec_or_the_recorded_statuses() {
        let p = pod(
            &[
                ("a", Some("direct"), None),
                ("b", None, Some("tmpl")),
                ("c", None, Some("t2")),
            ],
            &[("b", Some("p-b-xyz")), ("c", None)],
        );
        let claims = pod_claims(&p).unwrap();
        assert_eq!(
            claims,
            [
                PodClaim {
                    name: "direct".into(),
                    from_template: false
                },
                PodClaim {
                    name: "p-b-xyz".into(),
                    from_template: true
                },
            ]
        );
        let waiting = pod(&[("b", None, Some("tmpl"))], &[]);
        assert!(pod_claims(&waiting)
            .unwrap_err()
            .to_string()
            .contains("not created yet"));
    }

    #[test]
    fn a_claim_is_prepared_only_when_allocated_and_reserved_for_the_pod() {
        let p = pod(&[("a", Some("c"), None)], &[]);
        let direct = PodClaim {
            name: "c".into(),
            from_template: false,
        };
        let ok = prepared_claim_info(
            &p,
            &direct,
            &claim(&[(Some("d.example.com"), "h")], &["pod-1"]),
        )
        .unwrap();
        assert_eq!(ok.uid, "claim-1");
        assert_eq!(
            ok.handles,
            [Handle {
                driver: "d.example.com".into(),
                data: "h".into()
            }]
        );
        let not_reserved = prepared_claim_info(&p, &direct, &claim(&[(None, "h")], &["other"]));
        assert!(not_reserved
            .unwrap_err()
            .to_string()
            .contains("not reserved"));
        let mut unallocated = claim(&[], &["pod-1"]);
        unallocated.status.as_mut().unwrap().allocation = None;
        assert!(prepared_claim_info(&p, &direct, &unallocated)
            .unwrap_err()
            .to_string()
            .contains("not allocated"));
        let mut foreign = claim(&[(None, "h")], &["pod-1"]);
        foreign.metadata.owner_references = None;
        let templated = PodClaim {
            name: "c".into(),
            from_template: true,
        };
        assert!(prepared_claim_info(&p, &templated, &foreign).is_err());
        assert!(prepared_claim_info(&p, &direct, &foreign).is_ok());
    }

    #[test]
    fn handles_without_a_driver_take_the_claims_driver_and_no_handle_means_one_empty() {
        let p = pod(&[("a", Some("c"), None)], &[]);
        let direct = PodClaim {
            name: "c".into(),
            from_template: false,
        };
        let fallback =
            prepared_claim_info(&p, &direct, &claim(&[(None, "h")], &["pod-1"])).unwrap();
        assert_eq!(fallback.handles[0].driver, "fallback.example.com");
        let empty = prepared_claim_info(&p, &direct, &claim(&[], &["pod-1"])).unwrap();
        assert_eq!(
            empty.handles,
            [Handle {
                driver: "fallback.example.com".into(),
                data: String::new()
            }]
        );
    }

    #[test]
    fn a_pod_prepares_its_unprepared_claims_in_one_batch_per_driver() {
        let mut cache = ClaimCache::default();
        cache.reference("pod-1", info("c1", &["a"]));
        cache.reference("pod-1", info("c2", &["a", "b"]));
        cache.reference("pod-2", info("c3", &["a"]));
        let batches = cache.prepare_batches("pod-1");
        let uids_of = |driver: &str| -> Vec<String> {
            batches[driver].iter().map(|c| c.uid.clone()).collect()
        };
        assert_eq!(uids_of("a"), ["c1", "c2"]);
        assert_eq!(uids_of("b"), ["c2"]);
        assert_eq!(batches["b"][0].resource_handle, "c2@b");
        cache.mark_prepared("c1", "a");
        cache.mark_prepared("c2", "a");
        let again = cache.prepare_batches("pod-1");
        assert_eq!(again.keys().collect::<Vec<_>>(), ["b"]);
        assert!(!cache.all_prepared(["c1", "c2"].into_iter()));
        cache.mark_prepared("c2", "b");
        assert!(cache.all_prepared(["c1", "c2"].into_iter()));
        assert!(cache.prepare_batches("pod-1").is_empty());
    }

    #[test]
    fn a_claim_prepared_for_one_pod_is_not_prepared_again_for_a_second() {
        let mut cache = ClaimCache::default();
        cache.reference("pod-1", info("c1", &["a"]));
        cache.mark_prepared("c1", "a");
        cache.reference("pod-2", info("c1", &["a"]));
        assert!(cache.prepare_batches("pod-2").is_empty());
        assert_eq!(cache.get("c1").unwrap().pods.len(), 2);
    }

    #[test]
    fn only_claims_no_other_pod_uses_are_unprepared() {
        let mut cache = ClaimCache::default();
        cache.reference("pod-1", info("shared", &["a"]));
        cache.reference("pod-2", info("shared", &["a"]));
        cache.reference("pod-1", info("own", &["a", "b"]));
        let batches = cache.unprepare_batches("pod-1");
        assert_eq!(uids(&batches), BTreeSet::from(["own".to_owned()]));
        assert_eq!(batches.len(), 2);
        cache.release("pod-1", &uids(&batches));
        assert!(cache.get("own").is_none());
        assert_eq!(
            cache.get("shared").unwrap().pods,
            BTreeSet::from(["pod-2".to_owned()])
        );
        assert!(!cache.holds("pod-1"));
        assert!(cache.holds("pod-2"));
        assert_eq!(
            uids(&cache.unprepare_batches("pod-2")),
            BTreeSet::from(["shared".to_owned()])
        );
    }

    #[test]
    fn a_claim_unprepared_while_a_new_pod_referenced_it_is_prepared_again() {
        let mut cache = ClaimCache::default();
        cache.reference("pod-1", info("c", &["a"]));
        cache.mark_prepared("c", "a");
        let unprepared = uids(&cache.unprepare_batches("pod-1"));
        cache.reference("pod-2", info("c", &["a"]));
        cache.release("pod-1", &unprepared);
        assert_eq!(uids(&cache.prepare_batches("pod-2")), unprepared);
    }
}
