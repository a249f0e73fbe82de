//! One scheduling cycle of the 1.34 `DynamicResources` plugin as a pure decision over a
//! snapshot: `PreFilter` (the pod's claims resolve, exist, are not being deleted or allocated by
//! another cycle, their classes exist), Filter per node (schedulable, within the node selector
//! of every allocated claim, the unallocated claims allocatable from the node's devices), the
//! choice of a node (the feasible node with the fewest pods bound or being bound, ties by name:
//! kube-scheduler has no DRA scoring and picks among equal scores at random, this spreads
//! pods the same way but reproducibly) and Reserve (the allocations to write). The caller does
//! the writes the decision names. Upstream `PostFilter` deallocation is not modelled.
//!
//! Pure logic: no I/O, no async, no kube client.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::allocator::{allocate, AllocatorError, ClaimToAllocate, DeviceId, Inventory};
use super::cel_env::CelEnv;
use super::explain;
use super::extended::{self, ExtendedClaim, PodExtended};
use super::sharing::{Amounts, Sharing};
use crate::actors::claim_refs::{claim_name, is_for_pod, is_reserved_for_pod, pod_claim_entries};
use crate::actors::device_taints::TaintView;
use crate::actors::selectors::node_matches;
use dra_types::resource_v1::{
    AllocationResult, DeviceClaim, DeviceClass, ResourceClaim, ResourceSlice,
};

/// What the cluster looks like to one cycle.
pub struct Snapshot<'a> {
    /// The pod being scheduled.
    pub pod: &'a Pod,
    /// Claim lookup by name in the pod's namespace.
    pub claim: &'a dyn Fn(&str) -> Option<Arc<ResourceClaim>>,
    /// Whether a claim (by UID) is being allocated by a cycle whose write is not seen yet.
    pub in_flight: &'a dyn Fn(&str) -> bool,
    /// All nodes.
    pub nodes: &'a [Arc<Node>],
    /// All slices.
    pub slices: &'a [Arc<ResourceSlice>],
    /// `DeviceClass` lookup by name.
    pub class: &'a dyn Fn(&str) -> Option<Arc<DeviceClass>>,
    /// Devices allocated whole in any claim or in flight.
    pub allocated: &'a dyn Fn(&DeviceId) -> bool,
    /// What the shares of a device in any claim or in flight consume together.
    pub shares: &'a dyn Fn(&DeviceId) -> Option<Amounts>,
    /// The sharing mechanisms in force.
    pub sharing: Sharing,
    /// The selector environment.
    pub cel: &'a CelEnv,
    /// Pods bound or being bound to a node.
    pub load: &'a dyn Fn(&str) -> usize,
    /// The device taints in force, while `DRADeviceTaints` is on.
    pub taints: Option<TaintView<'a>>,
    /// What the pod's extended resources ask for ([`extended::plan`]).
    pub extended: &'a PodExtended,
}

/// What to write for one claim of the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimWrite {
    /// The claim's name.
    pub name: String,
    /// The claim's UID, a precondition of the write.
    pub uid: String,
    /// The allocation to store; `None` for a claim that is allocated and only needs the pod in
    /// `reservedFor`.
    pub allocation: Option<AllocationResult>,
}

/// The outcome of a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// `PreEnqueue` refused the pod (a claim that does not resolve, does not exist, is being
    /// deleted or was not made for the pod): the pod waits outside the queue, without a cycle,
    /// so without an event or a condition. The text is what upstream logs.
    Gated(String),
    /// No node now: the `FailedScheduling` text and the `PodScheduled` reason.
    Wait {
        /// The event and condition message.
        message: String,
        /// `Unschedulable` or `SchedulerError`.
        reason: &'static str,
    },
    /// Write the claims (allocation with the finalizer, reservation), then bind the pod.
    Bind {
        /// The chosen node.
        node: String,
        /// The claims not yet reserved for the pod, in pod order.
        claims: Vec<ClaimWrite>,
        /// The claim to create for the pod's extended resources, with its allocation.
        extended: Option<(ExtendedClaim, AllocationResult)>,
    },
}

struct Resolved {
    claim: Arc<ResourceClaim>,
    spec: Option<DeviceClaim>,
}

/// Why `PreFilter` did not pass the pod on.
enum Refusal {
    /// A `PreEnqueue` check failed: the pod does not get a cycle.
    Gated(String),
    /// The cycle fails: the text and what the DRA plugin's `PostFilter` says.
    Unschedulable(String, &'static str),
}

/// `PreEnqueue` (the pod's claims resolve, exist, are not being deleted and, when made from a
/// template, are the pod's) and `PreFilter` (the rest): the pod's claims, or the refusal.
fn pre_filter(snap: &Snapshot<'_>) -> Result<Vec<Resolved>, Refusal> {
    let pod = snap.pod;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut resolved = Vec::new();
    for entry in pod_claim_entries(pod) {
        let name = match claim_name(pod, entry) {
            Ok(Some(name)) => name,
            Ok(None) => continue,
            Err(error) => return Err(Refusal::Gated(error.to_string())),
        };
        let claim = (snap.claim)(&name.name)
            .ok_or_else(|| Refusal::Gated(explain::claim_not_found(&name.name)))?;
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(Refusal::Gated(explain::claim_being_deleted(&name.name)));
        }
        if name.check_owner {
            is_for_pod(pod, &claim.metadata).map_err(|e| Refusal::Gated(e.to_string()))?;
        }
        let spec = if claim.is_allocated() {
            None
        } else {
            if (snap.in_flight)(claim.metadata.uid.as_deref().unwrap_or_default()) {
                return Err(Refusal::Unschedulable(
                    explain::in_flight(namespace, &name.name),
                    explain::POST_FILTER_STILL,
                ));
            }
            let spec = claim.spec.devices.clone();
            for request in &spec.requests {
                let classes = request
                    .exactly
                    .iter()
                    .map(|e| (request.name.clone(), e.device_class_name.as_str()))
                    .chain(request.first_available.iter().map(|s| {
                        (
                            format!("{}/{}", request.name, s.name),
                            s.device_class_name.as_str(),
                        )
                    }));
                for (request, class) in classes {
                    if (snap.class)(class).is_none() {
                        return Err(Refusal::Unschedulable(
                            explain::class_missing(&request, class),
                            explain::POST_FILTER_STILL,
                        ));
                    }
                }
            }
            Some(spec)
        };
        resolved.push(Resolved { claim, spec });
    }
    Ok(resolved)
}

/// Whether `node` takes pods (`NodeUnschedulable`).
pub(super) fn schedulable(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
}

/// The nodes that fit, each with the allocations of `requests` there, and one reason per node
/// that does not; `Err` is an allocator error, which aborts the cycle.
type Filtered<'n> = (
    Vec<(&'n str, Option<Vec<AllocationResult>>)>,
    Vec<&'static str>,
);

/// Filter over all nodes, in name order.
fn filter<'n>(
    snap: &Snapshot<'n>,
    claims: &[Resolved],
    requests: &[ClaimToAllocate<'_>],
) -> Result<Filtered<'n>, AllocatorError> {
    let inventory = Inventory {
        slices: snap.slices,
        class: snap.class,
        allocated: snap.allocated,
        shares: snap.shares,
        sharing: snap.sharing,
        cel: snap.cel,
        taints: snap.taints,
    };
    let mut rejections = Vec::new();
    let mut feasible: Vec<(&'n str, Option<Vec<AllocationResult>>)> = Vec::new();
    let mut nodes: Vec<&'n Node> = snap.nodes.iter().map(AsRef::as_ref).collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if !schedulable(node) {
            rejections.push(explain::NODE_UNSCHEDULABLE);
            continue;
        }
        let elsewhere = claims.iter().any(|c| {
            c.claim
                .allocation()
                .and_then(|a| a.node_selector.as_ref())
                .is_some_and(|selector| !node_matches(selector, node))
        });
        if elsewhere {
            rejections.push(explain::NOT_AVAILABLE_ON_NODE);
        } else if requests.is_empty() {
            feasible.push((name, None));
        } else {
            match allocate(&inventory, node, requests)? {
                Some(results) => feasible.push((name, Some(results))),
                None => rejections.push(explain::CANNOT_ALLOCATE),
            }
        }
    }
    Ok((feasible, rejections))
}

/// Runs one scheduling cycle.
pub fn decide(snap: &Snapshot<'_>) -> Decision {
    let unschedulable = |message: String| Decision::Wait {
        message,
        reason: explain::UNSCHEDULABLE,
    };
    let claims = match pre_filter(snap) {
        Ok(claims) => claims,
        Err(Refusal::Gated(reason)) => return Decision::Gated(reason),
        Err(Refusal::Unschedulable(reason, post)) => {
            return unschedulable(explain::pre_filter_failure(snap.nodes.len(), &reason, post))
        }
    };
    if let PodExtended::Unmapped(names) = snap.extended {
        return unschedulable(extended::unmapped_failure(
            snap.nodes,
            names,
            !claims.is_empty(),
        ));
    }
    let keys: Vec<String> = claims
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c.claim.metadata.namespace.as_deref().unwrap_or_default(),
                c.claim.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let to_allocate: Vec<(usize, ClaimToAllocate<'_>)> = claims
        .iter()
        .zip(&keys)
        .enumerate()
        .filter_map(|(i, (c, key))| {
            c.spec
                .as_ref()
                .map(|spec| (i, ClaimToAllocate { key, spec }))
        })
        .collect();
    let mut requests: Vec<ClaimToAllocate<'_>> = to_allocate.iter().map(|(_, c)| *c).collect();
    let extended_key = extended::in_memory_key(snap.pod);
    let extended_claim = match snap.extended {
        PodExtended::Claim(claim) => Some(claim),
        _ => None,
    };
    if let Some(claim) = extended_claim {
        requests.push(ClaimToAllocate {
            key: &extended_key,
            spec: &claim.spec,
        });
    }
    let (feasible, rejections) = match filter(snap, &claims, &requests) {
        Ok(filtered) => filtered,
        Err(error) => {
            return Decision::Wait {
                message: explain::filter_error(&error.to_string()),
                reason: explain::SCHEDULER_ERROR,
            }
        }
    };
    let Some((node, results)) = feasible
        .into_iter()
        .min_by_key(|(name, _)| ((snap.load)(name), *name))
    else {
        return unschedulable(explain::filter_failure(&rejections));
    };
    let mut results = results.unwrap_or_default().into_iter();
    let mut allocations: Vec<Option<AllocationResult>> = vec![None; claims.len()];
    for (index, _) in &to_allocate {
        allocations[*index] = results.next();
    }
    let extended = extended_claim.and_then(|claim| Some((claim.clone(), results.next()?)));
    let writes = claims
        .iter()
        .zip(allocations)
        .filter(|(c, allocation)| allocation.is_some() || !is_reserved_for_pod(snap.pod, &c.claim))
        .map(|(c, allocation)| ClaimWrite {
            name: c.claim.metadata.name.clone().unwrap_or_default(),
            uid: c.claim.metadata.uid.clone().unwrap_or_default(),
            allocation,
        })
        .collect();
    Decision::Bind {
        node: node.to_owned(),
        claims: writes,
        extended,
    }
}

#[cfg(test)]
mod tests;
