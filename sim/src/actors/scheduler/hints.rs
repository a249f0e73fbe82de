//! Whether a change of a pod's `PodSchedulingContext` is worth another scheduling cycle for the
//! pod: the queueing hint of the 1.30 `DynamicResources` plugin
//! (`isSchedulableAfterPodSchedulingContextChange`). The scheduler's own updates of the spec
//! (new potential nodes, a selected node) and driver reports that still miss a pending claim do
//! not wake the pod; the first complete report, a selected node a driver found unsuitable, and
//! any other change do. Without it, a pod with more than 128 feasible nodes would wake itself:
//! every cycle publishes another random sample of potential nodes.
//!
//! Pure logic: no I/O.

use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, PodSchedulingContextSpec, PodSchedulingContextStatus, ResourceClaim,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1alpha2::{
        ResourceClaimSchedulingStatus, ResourceClaimSpec, ResourceClaimStatus,
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
