//! The 1.34 resourceclaim controller's decisions about a claim's `reservedFor`: which pod
//! entries are stale (the pod is known deleted, missing, replaced by a pod of the same name, or
//! done), the status that drops them (deallocating, `allocation: nil`, when the list becomes
//! empty on a claim with the delete-protection finalizer), and when that finalizer goes.
//!
//! Pure; the v1 controller module does the I/O.

use std::collections::{HashSet, VecDeque};

use dra_types::resource_v1::{
    ResourceClaim, ResourceClaimConsumerReference, DELETE_PROTECTION_FINALIZER,
};

/// How many deleted pod UIDs the controller remembers (upstream's `maxUIDCacheEntries`).
pub const DELETED_PODS_REMEMBERED: usize = 500;

/// The UIDs of pods seen deleted, the oldest forgotten first once the cache is full.
#[derive(Debug, Default)]
pub struct DeletedPods {
    order: VecDeque<String>,
    uids: HashSet<String>,
}

impl DeletedPods {
    /// Remembers `uid` as deleted.
    pub fn add(&mut self, uid: &str) {
        if !self.uids.insert(uid.to_owned()) {
            return;
        }
        self.order.push_back(uid.to_owned());
        while self.order.len() > DELETED_PODS_REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.uids.remove(&old);
            }
        }
    }

    /// Whether `uid` was seen deleted.
    pub fn has(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }
}

/// What is known of the pod a `reservedFor` entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// The pod with that UID was seen deleted.
    Deleted,
    /// No pod of that name exists, or one with another UID.
    GoneOrReplaced,
    /// The pod exists with that UID and is done (terminal, or deleted before scheduling).
    Done,
    /// The pod exists with that UID and may still run.
    Active,
}

impl PodState {
    /// Whether the entry stays in `reservedFor`.
    pub fn keeps_reservation(self) -> bool {
        self == PodState::Active
    }
}

/// The entries of `reserved` that are not pods of the core group: the controller cannot judge
/// them (upstream fails the sync on them).
pub fn unsupported(
    reserved: &[ResourceClaimConsumerReference],
) -> Option<&ResourceClaimConsumerReference> {
    reserved.iter().find(|r| !r.is_pod())
}

/// Drops the `reservedFor` entries whose UID is in `stale`; when that empties the list of a claim
/// with the delete-protection finalizer, the allocation is cleared too. Returns whether the claim
/// changed.
pub fn drop_stale(claim: &mut ResourceClaim, stale: &[String]) -> bool {
    let protected = claim.has_delete_protection();
    let Some(status) = claim.status.as_mut() else {
        return false;
    };
    let before = status.reserved_for.len();
    status.reserved_for.retain(|r| !stale.contains(&r.uid));
    if status.reserved_for.len() == before {
        return false;
    }
    if status.reserved_for.is_empty() && protected {
        status.allocation = None;
    }
    true
}

/// Clears the allocation of an unreserved claim (one being deleted). Returns whether it changed.
pub fn clear_allocation(claim: &mut ResourceClaim) -> bool {
    match claim.status.as_mut() {
        Some(status) if status.reserved_for.is_empty() && status.allocation.is_some() => {
            status.allocation = None;
            true
        }
        _ => false,
    }
}

/// Removes the delete-protection finalizer of an unallocated claim. Returns whether it changed.
pub fn release_finalizer(claim: &mut ResourceClaim) -> bool {
    if claim.is_allocated() || !claim.has_delete_protection() {
        return false;
    }
    if let Some(finalizers) = claim.metadata.finalizers.as_mut() {
        finalizers.retain(|f| f != DELETE_PROTECTION_FINALIZER);
    }
    true
}

/// Adds the pod to `reservedFor` of an allocated claim that does not list it and is not being
/// deleted (the API refuses new consumers then). Returns whether it changed.
pub fn reserve_for(claim: &mut ResourceClaim, pod_name: &str, pod_uid: &str) -> bool {
    if !claim.is_allocated() || claim.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(status) = claim.status.as_mut() else {
        return false;
    };
    if status.reserved_for.iter().any(|r| r.uid == pod_uid) {
        return false;
    }
    status
        .reserved_for
        .push(ResourceClaimConsumerReference::pod(pod_name, pod_uid));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_types::resource_v1::ResourceClaimStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use serde_json::json;

    fn claim(reserved: &[&str], protected: bool) -> ResourceClaim {
        let mut claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                finalizers: protected.then(|| vec![DELETE_PROTECTION_FINALIZER.to_owned()]),
                ..ObjectMeta::default()
            },
            ..ResourceClaim::default()
        };
        claim.status = Some(ResourceClaimStatus {
            allocation: Some(
                serde_json::from_value(json!({"devices": {"results": [{"driver": "d"}]}})).unwrap(),
            ),
            reserved_for: reserved
                .iter()
                .map(|uid| ResourceClaimConsumerReference::pod(&format!("pod-{uid}"), uid))
                .collect(),
            ..ResourceClaimStatus::default()
        });
        claim
    }

    #[test]
    fn only_active_pods_keep_their_reservation() {
        assert!(PodState::Active.keeps_reservation());
        for state in [PodState::Deleted, PodState::GoneOrReplaced, PodState::Done] {
            assert!(!state.keeps_reservation(), "{state:?}");
        }
    }

    #[test]
    fn dropping_some_entries_keeps_the_allocation() {
        let mut c = claim(&["a", "b"], true);
        assert!(drop_stale(&mut c, &["a".into()]));
        assert_eq!(
            c.reserved_for(),
            [ResourceClaimConsumerReference::pod("pod-b", "b")]
        );
        assert!(c.is_allocated());
        assert!(!release_finalizer(&mut c), "still allocated");
    }

    #[test]
    fn dropping_the_last_entry_of_a_protected_claim_deallocates_it_and_frees_the_finalizer() {
        let mut c = claim(&["a"], true);
        assert!(drop_stale(&mut c, &["a".into()]));
        assert!(c.reserved_for().is_empty());
        assert!(!c.is_allocated());
        assert!(release_finalizer(&mut c));
        assert!(!c.has_delete_protection());
        assert!(!release_finalizer(&mut c), "nothing left to remove");
    }

    #[test]
    fn a_claim_without_the_finalizer_stays_allocated_when_unreserved() {
        let mut c = claim(&["a"], false);
        assert!(drop_stale(&mut c, &["a".into()]));
        assert!(c.is_allocated());
        assert!(!release_finalizer(&mut c));
    }

    #[test]
    fn nothing_changes_when_no_entry_is_stale() {
        let mut c = claim(&["a"], true);
        assert!(!drop_stale(&mut c, &["zzz".into()]));
        assert!(c.is_allocated());
        assert!(!clear_allocation(&mut c), "still reserved");
        let mut unreserved = claim(&[], true);
        assert!(clear_allocation(&mut unreserved));
        assert!(!unreserved.is_allocated());
    }

    #[test]
    fn a_pod_is_added_once_and_never_to_a_claim_being_deleted_or_unallocated() {
        let mut c = claim(&[], true);
        assert!(reserve_for(&mut c, "p", "u"));
        assert!(!reserve_for(&mut c, "p", "u"));
        assert_eq!(
            c.reserved_for(),
            [ResourceClaimConsumerReference::pod("p", "u")]
        );
        let mut deleting = claim(&[], true);
        deleting.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
        assert!(!reserve_for(&mut deleting, "p", "u"));
        let mut unallocated = claim(&[], false);
        unallocated.status.as_mut().unwrap().allocation = None;
        assert!(!reserve_for(&mut unallocated, "p", "u"));
    }

    #[test]
    fn consumers_other_than_pods_are_reported() {
        let mut entries = vec![ResourceClaimConsumerReference::pod("p", "u")];
        assert!(unsupported(&entries).is_none());
        entries.push(ResourceClaimConsumerReference {
            api_group: Some("apps".into()),
            resource: "deployments".into(),
            name: "d".into(),
            uid: "x".into(),
        });
        assert_eq!(unsupported(&entries).unwrap().resource, "deployments");
    }

    #[test]
    fn the_deleted_pods_cache_forgets_the_oldest() {
        let mut deleted = DeletedPods::default();
        for i in 0..=DELETED_PODS_REMEMBERED {
            deleted.add(&format!("uid-{i}"));
        }
        deleted.add("uid-1");
        assert!(!deleted.has("uid-0"));
        assert!(deleted.has("uid-1"));
        assert!(deleted.has(&format!("uid-{DELETED_PODS_REMEMBERED}")));
    }
}
