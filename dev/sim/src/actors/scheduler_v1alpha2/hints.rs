//! Whether a change is worth another scheduling cycle for a waiting pod, as the 1.30 scheduler
//! decides it:
//!
//! - a change of the pod's `PodSchedulingContext`: the queueing hint of the `DynamicResources`
//!   plugin (`isSchedulableAfterPodSchedulingContextChange`). The scheduler's own updates of the
//!   spec (new potential nodes, a selected node) and driver reports that still miss a pending
//!   claim do not wake the pod; the first complete report, a selected node a driver found
//!   unsuitable, and any other change do. Without it, a pod with more than 128 feasible nodes
//!   would wake itself: every cycle publishes another random sample of potential nodes;
//! - a change of one of its claims: the plugin's `isSchedulableAfterClaimChange`, which wakes
//!   the pod for a new claim or a changed status only (not for a driver's finalizer);
//! - a change of the pod itself: the scheduling queue's `isPodUpdated`, which ignores the
//!   status (but for `resourceClaimStatuses`), so that the scheduler's own `PodScheduled`
//!   condition does not wake the pod it was written for.
//!
//! Pure logic: no I/O.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, PodSchedulingContextSpec, PodSchedulingContextStatus, ResourceClaim,
    ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::actors::claims::is_delayed;

/// The part of a context a hint compares with the next version of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    spec: PodSchedulingContextSpec,
    status: Option<PodSchedulingContextStatus>,
}

impl Seen {
    /// What `context` shows now.
    pub fn of(context: &PodSchedulingContext) -> Seen {
        Seen {
            spec: context.spec.clone(),
            status: context.status.clone(),
        }
    }

    fn reports(&self) -> usize {
        reports(self.status.as_ref())
    }
}

fn reports(status: Option<&PodSchedulingContextStatus>) -> usize {
    status
        .and_then(|s| s.resource_claims.as_ref())
        .map_or(0, Vec::len)
}

/// Whether a claim waits for a node to be allocated for (delayed allocation, not allocated,
/// no deallocation requested).
pub fn pending(claim: &ResourceClaim) -> bool {
    let status = claim.status.as_ref();
    is_delayed(claim)
        && status.and_then(|s| s.allocation.as_ref()).is_none()
        && !status
            .and_then(|s| s.deallocation_requested)
            .unwrap_or(false)
}

/// Whether the change from `old` (`None`: a new context) to `new` should wake the pod, whose
/// pending claims number `pending_claims` (`None`: some claim of the pod is missing, so the pod
/// cannot be scheduled anyway).
pub fn wakes_pod(
    pending_claims: Option<usize>,
    old: Option<&Seen>,
    new: &PodSchedulingContext,
) -> bool {
    let Some(pending_claims) = pending_claims else {
        return false;
    };
    let status = new.status.as_ref();
    if reports(status) < pending_claims {
        // Some driver has not reported yet.
        return false;
    }
    if old.is_some_and(|old| old.reports() < pending_claims) {
        // The report is complete for the first time.
        return true;
    }
    if let Some(selected) = new.spec.selected_node.as_deref().filter(|n| !n.is_empty()) {
        let unsuitable = status
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
            .any(|claim| {
                claim
                    .unsuitable_nodes
                    .iter()
                    .flatten()
                    .any(|node| node == selected)
            });
        if unsuitable {
            return true;
        }
    }
    // Only the scheduler's part changed: its own update.
    let spec_only = old.is_some_and(|old| old.spec != new.spec && old.status == new.status);
    !spec_only
}

/// Whether a claim change wakes the pods that use it: a claim not seen before (`old` is `None`)
/// or a status other than `old`'s.
pub fn claim_wakes_pods(old: Option<&Option<ResourceClaimStatus>>, new: &ResourceClaim) -> bool {
    old.is_none_or(|old| *old != new.status)
}

/// The pod's `status.resourceClaimStatuses`.
fn claim_statuses(pod: &Pod) -> Option<&Vec<PodResourceClaimStatus>> {
    pod.status.as_ref()?.resource_claim_statuses.as_ref()
}

/// Whether `new` differs from `old` in what can make a pod schedulable: upstream's
/// `isPodUpdated`, which compares the two without their resource version, generation, managed
/// fields, finalizers and status, `resourceClaimStatuses` excepted.
pub fn pod_updated(old: &Pod, new: &Pod) -> bool {
    // Every field is named, so that a field added to the type must be placed on one side.
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers: _,
        generate_name,
        generation: _,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = &old.metadata;
    let n = &new.metadata;
    let same_meta = *annotations == n.annotations
        && *creation_timestamp == n.creation_timestamp
        && *deletion_grace_period_seconds == n.deletion_grace_period_seconds
        && *deletion_timestamp == n.deletion_timestamp
        && *generate_name == n.generate_name
        && *labels == n.labels
        && *name == n.name
        && *namespace == n.namespace
        && *owner_references == n.owner_references
        && *self_link == n.self_link
        && *uid == n.uid;
    !(same_meta && old.spec == new.spec && claim_statuses(old) == claim_statuses(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodResourceClaim, PodSpec, PodStatus};
    use k8s_openapi::api::resource::v1alpha2::{
        AllocationResult, ResourceClaimSchedulingStatus, ResourceClaimSpec,
    };

    fn context(
        potential: &[&str],
        selected: Option<&str>,
        reports: &[&[&str]],
    ) -> PodSchedulingContext {
        PodSchedulingContext {
            spec: PodSchedulingContextSpec {
                potential_nodes: Some(potential.iter().map(|n| (*n).to_owned()).collect()),
                selected_node: selected.map(str::to_owned),
            },
            status: (!reports.is_empty()).then(|| PodSchedulingContextStatus {
                resource_claims: Some(
                    reports
                        .iter()
                        .enumerate()
                        .map(|(i, unsuitable)| ResourceClaimSchedulingStatus {
                            name: Some(format!("claim-{i}")),
                            unsuitable_nodes: Some(
                                unsuitable.iter().map(|n| (*n).to_owned()).collect(),
                            ),
                        })
                        .collect(),
                ),
            }),
            ..PodSchedulingContext::default()
        }
    }

    #[test]
    fn the_schedulers_own_spec_updates_do_not_wake_the_pod() {
        let before = context(&["a", "b"], None, &[&["a"]]);
        let after = context(&["c", "d"], Some("c"), &[&["a"]]);
        assert!(!wakes_pod(Some(1), Some(&Seen::of(&before)), &after));
    }

    #[test]
    fn an_incomplete_report_waits_and_the_first_complete_one_wakes() {
        let none = context(&["a", "b"], None, &[]);
        let one = context(&["a", "b"], None, &[&["a"]]);
        let two = context(&["a", "b"], None, &[&["a"], &[]]);
        assert!(!wakes_pod(Some(2), Some(&Seen::of(&none)), &one));
        assert!(wakes_pod(Some(2), Some(&Seen::of(&one)), &two));
    }

    #[test]
    fn a_selected_node_found_unsuitable_wakes_the_pod() {
        let before = context(&["a", "b"], Some("a"), &[&["b"]]);
        let after = context(&["a", "b"], Some("a"), &[&["a", "b"]]);
        assert!(wakes_pod(Some(1), Some(&Seen::of(&before)), &after));
    }

    #[test]
    fn other_report_changes_wake_and_missing_claims_never_do() {
        let before = context(&["a", "b"], Some("a"), &[&["b"]]);
        let after = context(&["a", "b"], Some("a"), &[&[]]);
        assert!(wakes_pod(Some(1), Some(&Seen::of(&before)), &after));
        assert!(
            wakes_pod(Some(1), None, &after),
            "a context not seen before"
        );
        assert!(!wakes_pod(None, Some(&Seen::of(&before)), &after));
    }

    fn waiting_pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("uid-p".into()),
                resource_version: Some("1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                resource_claims: Some(vec![PodResourceClaim {
                    name: "gpu".into(),
                    ..PodResourceClaim::default()
                }]),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn the_schedulers_own_condition_does_not_wake_the_pod_its_claims_and_spec_do() {
        let old = waiting_pod();
        let mut condition = old.clone();
        condition.metadata.resource_version = Some("2".into());
        condition.metadata.finalizers = Some(vec!["example.com/keep".into()]);
        condition.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        assert!(!pod_updated(&old, &condition));

        let mut claim_made = condition.clone();
        claim_made.status.as_mut().unwrap().resource_claim_statuses =
            Some(vec![PodResourceClaimStatus {
                name: "gpu".into(),
                resource_claim_name: Some("p-gpu-x".into()),
            }]);
        assert!(pod_updated(&condition, &claim_made));

        let mut labelled = old.clone();
        labelled.metadata.labels = Some([("tier".to_owned(), "a".to_owned())].into());
        assert!(pod_updated(&old, &labelled));

        let mut gated = old.clone();
        gated.spec.as_mut().unwrap().scheduling_gates = Some(Vec::new());
        assert!(pod_updated(&old, &gated));
    }

    #[test]
    fn a_claim_wakes_its_pods_when_new_or_when_its_status_changed() {
        let claim = |allocated: bool| ResourceClaim {
            metadata: ObjectMeta {
                finalizers: allocated.then(|| vec!["gpu.example.com/deletion-protection".into()]),
                ..ObjectMeta::default()
            },
            status: allocated.then(|| ResourceClaimStatus {
                allocation: Some(AllocationResult::default()),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        };
        assert!(claim_wakes_pods(None, &claim(false)), "a new claim");
        let mut finalizer = claim(false);
        finalizer.metadata.finalizers = Some(vec!["gpu.example.com/deletion-protection".into()]);
        assert!(
            !claim_wakes_pods(Some(&None), &finalizer),
            "a driver's finalizer alone"
        );
        assert!(claim_wakes_pods(Some(&None), &claim(true)), "allocated");
        let allocated = claim(true).status;
        assert!(!claim_wakes_pods(Some(&allocated), &claim(true)));
    }

    #[test]
    fn only_unallocated_delayed_claims_are_pending() {
        let claim = |mode: Option<&str>, allocated: bool, deallocating: bool| ResourceClaim {
            spec: ResourceClaimSpec {
                allocation_mode: mode.map(str::to_owned),
                ..ResourceClaimSpec::default()
            },
            status: Some(ResourceClaimStatus {
                allocation: allocated.then(Default::default),
                deallocation_requested: Some(deallocating),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        };
        assert!(pending(&claim(None, false, false)));
        assert!(pending(&claim(Some("WaitForFirstConsumer"), false, false)));
        assert!(!pending(&claim(Some("Immediate"), false, false)));
        assert!(!pending(&claim(None, true, false)));
        assert!(!pending(&claim(None, false, true)));
    }
}
