//! The 1.34 kubelet's validation pass before it prepares a pod's claims, per claim read from the
//! API server: made for the pod when it comes from a template, the pod in `reservedFor`,
//! allocated, and every driver of `status.allocation.devices.results` registered on the node.
//! Also the check of the claim cache that a claim of the same name is not an older one. The
//! error texts are the DRA manager's.
//!
//! Pure decisions, no I/O: the v1 prepare module reads the claims and does the calls.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::claims::{ClaimCache, ClaimInfo, Handle};
use super::error::{ClaimError, DriverError};
use crate::actors::claim_refs::{is_for_pod, is_reserved_for_pod, ClaimName};
use dra_types::resource_v1::ResourceClaim;

/// Checks `claim` (named by `pod_claim` of `pod`) before it is prepared; `registered` tells
/// whether a driver has a registered plugin. The claim info has one handle per driver, without
/// data (the plugin reads the allocation itself).
pub(crate) fn claim_info(
    pod: &Pod,
    pod_claim: &ClaimName,
    claim: &ResourceClaim,
    registered: &dyn Fn(&str) -> bool,
) -> Result<ClaimInfo, ClaimError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    if pod_claim.check_owner {
        is_for_pod(pod, &claim.metadata).map_err(ClaimError::NotForPod)?;
    }
    if !is_reserved_for_pod(pod, claim) {
        return Err(ClaimError::NotReservedForPod {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            claim: pod_claim.name.clone(),
            claim_uid: uid,
        });
    }
    if !claim.is_allocated() {
        return Err(ClaimError::Unallocated { name });
    }
    let drivers = claim.allocated_drivers();
    for driver in &drivers {
        if driver.is_empty() {
            return Err(DriverError::EmptyName.into());
        }
        if !registered(driver) {
            return Err(DriverError::NotRegistered {
                driver: driver.clone(),
            }
            .into());
        }
    }
    Ok(ClaimInfo {
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        name,
        uid,
        handles: drivers
            .into_iter()
            .map(|driver| Handle {
                driver,
                data: String::new(),
            })
            .collect(),
        pods: BTreeSet::new(),
        prepared: BTreeSet::new(),
    })
}

/// `Err` when the cache holds a claim of the same namespace and name as `info` with another UID
/// (the claim was replaced while an old pod still referenced the old one).
pub(crate) fn same_claim(cache: &ClaimCache, info: &ClaimInfo) -> Result<(), ClaimError> {
    match cache.uid_of(&info.namespace, &info.name) {
        Some(uid) if uid != info.uid => Err(ClaimError::Replaced {
            name: info.name.clone(),
            uid: uid.to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_types::resource_v1::{ResourceClaimConsumerReference, ResourceClaimStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use serde_json::json;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("pod-uid".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn claim(drivers: &[&str], reserved: &[&str], allocated: bool) -> ResourceClaim {
        let mut claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("claim-uid".into()),
                owner_references: Some(vec![OwnerReference {
                    uid: "pod-uid".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..ResourceClaim::default()
        };
        let results: Vec<_> = drivers
            .iter()
            .map(|d| json!({"request": "r", "driver": d, "pool": "p", "device": "x"}))
            .collect();
        claim.status = Some(ResourceClaimStatus {
            allocation: allocated
                .then(|| serde_json::from_value(json!({"devices": {"results": results}})).unwrap()),
            reserved_for: reserved
                .iter()
                .map(|u| ResourceClaimConsumerReference::pod("p", u))
                .collect(),
            ..ResourceClaimStatus::default()
        });
        claim
    }

    fn direct() -> ClaimName {
        ClaimName {
            name: "c".into(),
            check_owner: false,
        }
    }

    #[test]
    fn an_allocated_reserved_claim_gets_one_handle_per_registered_driver() {
        let info = claim_info(
            &pod(),
            &direct(),
            &claim(
                &["b.example.com", "a.example.com", "b.example.com"],
                &["pod-uid"],
                true,
            ),
            &|_| true,
        )
        .unwrap();
        let drivers: Vec<&str> = info.handles.iter().map(|h| h.driver.as_str()).collect();
        assert_eq!(drivers, ["b.example.com", "a.example.com"]);
        assert_eq!(info.uid, "claim-uid");
        let empty = claim_info(&pod(), &direct(), &claim(&[], &["pod-uid"], true), &|_| {
            false
        });
        assert!(
            empty.unwrap().is_prepared(),
            "no device, nothing to prepare"
        );
    }

    #[test]
    fn a_claim_not_reserved_for_the_pod_comes_first() {
        let error = claim_info(
            &pod(),
            &direct(),
            &claim(&["d"], &["other"], false),
            &|_| true,
        );
        assert_eq!(
            error.unwrap_err().to_string(),
            "pod p (pod-uid) is not allowed to use ResourceClaim c (claim-uid)"
        );
    }

    #[test]
    fn unallocated_claims_and_unregistered_drivers_are_refused() {
        let unallocated = claim_info(&pod(), &direct(), &claim(&[], &["pod-uid"], false), &|_| {
            true
        });
        assert_eq!(
            unallocated.unwrap_err().to_string(),
            "ResourceClaim c: not allocated"
        );
        let unregistered = claim_info(
            &pod(),
            &direct(),
            &claim(&["a.example.com", "b.example.com"], &["pod-uid"], true),
            &|d| d == "a.example.com",
        );
        assert_eq!(
            unregistered.unwrap_err().to_string(),
            "DRA driver b.example.com is not registered"
        );
        let nameless = claim_info(
            &pod(),
            &direct(),
            &claim(&[""], &["pod-uid"], true),
            &|_| true,
        );
        assert_eq!(
            nameless.unwrap_err().to_string(),
            "DRA driver name is empty"
        );
    }

    #[test]
    fn a_template_claim_must_be_the_pods() {
        let mut foreign = claim(&["d"], &["pod-uid"], true);
        foreign.metadata.owner_references = None;
        let templated = ClaimName {
            name: "c".into(),
            check_owner: true,
        };
        let error = claim_info(&pod(), &templated, &foreign, &|_| true)
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("(pod is not owner)"), "{error}");
        assert!(claim_info(&pod(), &direct(), &foreign, &|_| true).is_ok());
    }

    #[test]
    fn a_replaced_claim_of_the_same_name_is_refused_while_the_old_one_is_cached() {
        let mut cache = ClaimCache::default();
        let old = claim_info(
            &pod(),
            &direct(),
            &claim(&["d"], &["pod-uid"], true),
            &|_| true,
        )
        .unwrap();
        cache.reference("old-pod", old.clone());
        assert!(same_claim(&cache, &old).is_ok());
        let replaced = ClaimInfo {
            uid: "new-uid".into(),
            ..old
        };
        assert_eq!(
            same_claim(&cache, &replaced).unwrap_err().to_string(),
            "old ResourceClaim with same name c and different UID claim-uid still exists (previous pod force-deleted?!)"
        );
    }
}
