//! One scheduling cycle of the 1.30 `DynamicResources` plugin (`v1alpha2`) as a pure decision:
//! `PreEnqueue` (claims resolve), `PreFilter`, Filter, `PostFilter`, `PreScore`, Reserve and the `PreBind`
//! waiting point, computed from a snapshot. The caller performs the writes the decision names.
//! [`decide_explained`] also gives the `FailedScheduling` text a 1.30 scheduler would post for the
//! cycle (built by [`super::explain`]); [`decide`] and the `PodScheduled` condition keep our own
//! shorter reasons.
//!
//! Pure logic: no I/O, no async, no kube client.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, PodSchedulingContextSpec, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClass,
};
use rand::seq::IndexedRandom;

use super::explain;
use crate::actors::selectors::node_matches;

/// Upper bound of `potentialNodes` and `unsuitableNodes` lists.
pub const MAX_NODE_LIST: usize = 128;
/// Upper bound of `status.reservedFor`.
pub const MAX_RESERVED_FOR: usize = 32;

/// A claim the pod uses, with the name the pod gives it.
#[derive(Debug, Clone)]
pub struct PodClaim {
    /// `pod.spec.resourceClaims[].name`.
    pub pod_claim_name: String,
    /// The `ResourceClaim` object.
    pub claim: Arc<ResourceClaim>,
}

/// What the scheduler does next for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The pod cannot be scheduled now; the reason says what it waits for.
    Unschedulable(String),
    /// `PostFilter`: first clear `selectedNode` (when `clear_selected_node`), then set
    /// `deallocationRequested` on the claim and clear its `reservedFor`.
    Deallocate {
        /// Name of the `ResourceClaim` to deallocate.
        claim: String,
        /// Whether the context currently has a selected node that must be cleared first.
        clear_selected_node: bool,
    },
    /// Reserve/`PreBind`: publish the scheduling context (create it when absent), then wait for the
    /// drivers.
    Publish {
        /// The new `spec.potentialNodes`.
        potential_nodes: Vec<String>,
        /// The new `spec.selectedNode`.
        selected_node: Option<String>,
    },
    /// Every claim is allocated and usable on `node`: reserve the listed claims for the pod and bind.
    Bind {
        /// The node to bind to.
        node: String,
        /// Names of the claims whose `reservedFor` does not list the pod yet.
        reserve: Vec<String>,
    },
}

/// The cluster state one cycle looks at.
pub struct Snapshot<'a> {
    /// The pod being scheduled.
    pub pod: &'a Pod,
    /// Its resolved claims (see [`resolve`]).
    pub claims: &'a [PodClaim],
    /// Its `PodSchedulingContext`, if one exists and the pod controls it.
    pub context: Option<&'a PodSchedulingContext>,
    /// All nodes.
    pub nodes: &'a [Arc<Node>],
    /// `ResourceClass` lookup by name.
    pub class: &'a dyn Fn(&str) -> Option<Arc<ResourceClass>>,
    /// Pods already on a node, for spreading.
    pub load: &'a dyn Fn(&str) -> usize,
}

/// Why the pod's claims do not resolve: our reason (for the `PodScheduled` condition) and the
/// scheduler's text (for the event).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unresolved {
    /// Our reason.
    pub reason: String,
    /// The 1.30 scheduler's text.
    pub upstream: String,
}

/// `PreEnqueue`: every pod claim must resolve to an existing claim that is not being deleted, and a
/// claim made from a template must be controlled by the pod. `Err` says what is missing, in our
/// words and in the scheduler's.
pub fn resolve(
    pod: &Pod,
    claim: &dyn Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> Result<Vec<PodClaim>, Unresolved> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let fail = |reason: String, upstream: String| Unresolved { reason, upstream };
    let mut resolved = Vec::new();
    for entry in pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
    {
        let source = entry.source.as_ref();
        let (name, from_template) = if let Some(name) =
            source.and_then(|s| s.resource_claim_name.as_ref())
        {
            (name.clone(), false)
        } else if source
            .and_then(|s| s.resource_claim_template_name.as_ref())
            .is_some()
        {
            let recorded = statuses.and_then(|list| list.iter().find(|s| s.name == entry.name));
            match recorded {
                None => {
                    return Err(fail(
                        format!("pod claim {}: resourceclaim not created yet", entry.name),
                        explain::claim_not_created(namespace, pod_name),
                    ))
                }
                // No claim needed for this entry.
                Some(status) if status.resource_claim_name.is_none() => continue,
                Some(status) => (status.resource_claim_name.clone().unwrap_or_default(), true),
            }
        } else {
            let reason = format!("pod claim {}: no claim source", entry.name);
            let upstream = format!(
                    "pod \"{namespace}/{pod_name}\", spec.resourceClaim {:?}: none of the supported fields are set",
                    entry.name
                );
            return Err(fail(reason, upstream));
        };
        let Some(object) = claim(&name) else {
            return Err(fail(
                format!("resourceclaim {name} not found"),
                explain::claim_not_found(namespace, &name),
            ));
        };
        if object.metadata.deletion_timestamp.is_some() {
            return Err(fail(
                format!("resourceclaim {name} is being deleted"),
                explain::claim_being_deleted(&name),
            ));
        }
        if from_template {
            let controlled = object
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == pod_uid);
            if !controlled {
                return Err(fail(
                    format!("resourceclaim {name} was not created for the pod"),
                    explain::claim_not_for_pod(namespace, &name, pod_name),
                ));
            }
        }
        resolved.push(PodClaim {
            pod_claim_name: entry.name.clone(),
            claim: object,
        });
    }
    Ok(resolved)
}

/// What `PreBind` does with one claim of the pod it binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreBind {
    /// Usable as it is: allocated on the node, not being deallocated, reserved for the pod.
    Keep,
    /// Usable once the pod is added to `reservedFor` (done on the claim given).
    Reserve,
    /// Changed since the decision: the bind must wait for another cycle.
    Unusable,
}

/// `PreBind`'s check of one claim the cycle decided to bind pod `pod_name`/`pod_uid` to `node`
/// with, on the claim as it will be written (`to_reserve`: the decision saw it not reserved for
/// the pod). The claim must still be allocated and available on `node` (it may have been
/// deallocated and allocated elsewhere since) and not being deallocated; a claim the decision
/// saw reserved for the pod must still be. [`PreBind::Reserve`] adds the pod to `reservedFor`.
pub fn pre_bind(
    claim: &mut ResourceClaim,
    pod_name: &str,
    pod_uid: &str,
    to_reserve: bool,
    node: &Node,
) -> PreBind {
    let already = reserved_for(claim, pod_uid);
    let Some(status) = claim.status.as_mut() else {
        return PreBind::Unusable;
    };
    let Some(allocation) = status.allocation.as_ref() else {
        return PreBind::Unusable;
    };
    let elsewhere = allocation
        .available_on_nodes
        .as_ref()
        .is_some_and(|on| !node_matches(on, node));
    if elsewhere || status.deallocation_requested == Some(true) {
        return PreBind::Unusable;
    }
    if already {
        return PreBind::Keep;
    }
    if !to_reserve {
        // Seen reserved for the pod, no longer: the decision read a stale copy.
        return PreBind::Unusable;
    }
    let shareable = allocation.shareable == Some(true);
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    if (!reserved.is_empty() && !shareable) || reserved.len() >= MAX_RESERVED_FOR {
        return PreBind::Unusable;
    }
    reserved.push(ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod_name.to_owned(),
        uid: pod_uid.to_owned(),
    });
    PreBind::Reserve
}

/// Whether `claim.status.reservedFor` lists the pod with this UID.
pub fn reserved_for(claim: &ResourceClaim, pod_uid: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| r.iter().any(|c| c.resource == "pods" && c.uid == pod_uid))
}

struct Pending<'a> {
    suitable: Option<NodeSelector>,
    reported: bool,
    /// The nodes the driver reported unsuitable, looked up once per node.
    unsuitable: HashSet<&'a str>,
}

type Allocated<'a> = Vec<(&'a PodClaim, Option<&'a NodeSelector>)>;

/// A decision that ends the cycle, with the scheduler's `FailedScheduling` reason.
type Refusal = (Decision, String);

/// `PreFilter`: sorts the claims into allocated ones (with where they are available) and pending
/// delayed ones (with the driver's view), or says why the pod cannot be scheduled at all.
fn pre_filter<'a>(
    snap: &'a Snapshot<'_>,
    pod_uid: &str,
) -> Result<(Allocated<'a>, Vec<Pending<'a>>), Refusal> {
    let refuse =
        |ours: String, upstream: &str| (Decision::Unschedulable(ours), upstream.to_owned());
    let ctx_entries = snap
        .context
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.resource_claims.as_ref());
    let mut allocated: Allocated<'a> = Vec::new();
    let mut pending: Vec<Pending<'a>> = Vec::new();
    for pc in snap.claims {
        let name = pc.claim.metadata.name.as_deref().unwrap_or_default();
        let status = pc.claim.status.as_ref();
        if status.and_then(|s| s.deallocation_requested) == Some(true) {
            return Err(refuse(
                format!("resourceclaim {name} must be reallocated"),
                explain::MUST_BE_REALLOCATED,
            ));
        }
        if let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) {
            let reserved = status
                .and_then(|s| s.reserved_for.as_ref())
                .map_or(0, Vec::len);
            if !reserved_for(&pc.claim, pod_uid) {
                if reserved > 0 && allocation.shareable != Some(true) {
                    return Err(refuse(
                        format!("resourceclaim {name} is in use"),
                        explain::IN_USE,
                    ));
                }
                if reserved >= MAX_RESERVED_FOR {
                    return Err(refuse(
                        format!("resourceclaim {name} has no room for another consumer"),
                        explain::IN_USE,
                    ));
                }
            }
            allocated.push((pc, allocation.available_on_nodes.as_ref()));
        } else if pc.claim.spec.allocation_mode.as_deref() == Some("Immediate") {
            return Err(refuse(
                format!("unallocated immediate resourceclaim {name}"),
                explain::UNALLOCATED_IMMEDIATE,
            ));
        } else {
            let class_name = &pc.claim.spec.resource_class_name;
            let Some(class) = (snap.class)(class_name) else {
                let text = explain::class_missing(class_name);
                return Err(refuse(text.clone(), &text));
            };
            let entry = ctx_entries.and_then(|list| {
                list.iter()
                    .find(|e| e.name.as_deref() == Some(pc.pod_claim_name.as_str()))
            });
            pending.push(Pending {
                suitable: class.suitable_nodes.clone(),
                reported: entry.is_some(),
                unsuitable: entry
                    .and_then(|e| e.unsuitable_nodes.as_deref())
                    .unwrap_or_default()
                    .iter()
                    .map(String::as_str)
                    .collect(),
            });
        }
    }
    Ok((allocated, pending))
}

/// What `Filter` found: the nodes that fit, the indexes of allocated claims that ruled out some
/// otherwise schedulable node, the scheduler's reason for each node that does not fit, and
/// whether any node was schedulable at all.
struct Filtered<'a> {
    feasible: Vec<&'a str>,
    unavailable: BTreeSet<usize>,
    rejections: Vec<&'static str>,
    any_schedulable: bool,
}

/// The scheduler's reason a schedulable node does not fit (`None`: it fits). A pending claim's
/// verdict comes first, as the plugin returns at the first pending claim that fails; allocated
/// claims that are elsewhere are recorded in `unavailable`.
fn node_rejection(
    node: &Node,
    allocated: &Allocated<'_>,
    pending: &[Pending<'_>],
    unavailable: &mut BTreeSet<usize>,
) -> Option<&'static str> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut elsewhere = false;
    for (index, (_, on_nodes)) in allocated.iter().enumerate() {
        if on_nodes.is_some_and(|sel| !node_matches(sel, node)) {
            unavailable.insert(index);
            elsewhere = true;
        }
    }
    for p in pending {
        if p.suitable
            .as_ref()
            .is_some_and(|sel| !node_matches(sel, node))
        {
            return Some(explain::EXCLUDED_BY_CLASS);
        }
        if p.unsuitable.contains(name) {
            return Some(explain::UNSUITABLE);
        }
    }
    elsewhere.then_some(explain::NOT_AVAILABLE_ON_NODE)
}

/// `Filter` over all nodes.
fn filter<'a>(
    nodes: &'a [Arc<Node>],
    allocated: &Allocated<'_>,
    pending: &[Pending<'_>],
) -> Filtered<'a> {
    let mut out = Filtered {
        feasible: Vec::new(),
        unavailable: BTreeSet::new(),
        rejections: Vec::new(),
        any_schedulable: false,
    };
    for node in nodes.iter().map(AsRef::as_ref) {
        let schedulable = node.metadata.deletion_timestamp.is_none()
            && !node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
        if !schedulable {
            out.rejections.push(explain::NODE_UNSCHEDULABLE);
            continue;
        }
        out.any_schedulable = true;
        match node_rejection(node, allocated, pending, &mut out.unavailable) {
            Some(reason) => out.rejections.push(reason),
            None => out
                .feasible
                .push(node.metadata.name.as_deref().unwrap_or_default()),
        }
    }
    out
}

/// `PostFilter`: no node fits; free an unavailable claim that nobody else uses.
fn post_filter(
    allocated: &Allocated<'_>,
    unavailable: BTreeSet<usize>,
    pod_uid: &str,
    selected_node: Option<&str>,
) -> Decision {
    for index in unavailable {
        let claim = &allocated[index].0.claim;
        let reserved = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or_default();
        if reserved.iter().all(|r| r.uid == pod_uid) {
            return Decision::Deallocate {
                claim: claim.metadata.name.clone().unwrap_or_default(),
                clear_selected_node: selected_node.is_some_and(|n| !n.is_empty()),
            };
        }
    }
    Decision::Unschedulable("no node fits the pod's claims".into())
}

/// Runs one scheduling cycle over the snapshot; with the `FailedScheduling` message a 1.30
/// scheduler posts for it (`None` when the pod gets bound).
pub fn decide_explained(snap: &Snapshot<'_>) -> (Decision, Option<String>) {
    let pod_uid = snap.pod.metadata.uid.as_deref().unwrap_or_default();
    let no_spec = PodSchedulingContextSpec::default();
    let ctx_spec = snap.context.map_or(&no_spec, |c| &c.spec);
    let (allocated, pending) = match pre_filter(snap, pod_uid) {
        Ok(sorted) => sorted,
        Err((decision, reason)) => {
            let text = explain::pre_filter_failure(snap.nodes.len(), &reason);
            return (decision, Some(text));
        }
    };
    let filtered = filter(snap.nodes, &allocated, &pending);
    if !filtered.any_schedulable {
        let text = explain::filter_failure(&filtered.rejections, explain::POST_FILTER_STILL);
        return (
            Decision::Unschedulable("no schedulable node".into()),
            Some(text),
        );
    }
    let feasible = filtered.feasible;
    if feasible.is_empty() {
        let decision = post_filter(
            &allocated,
            filtered.unavailable,
            pod_uid,
            ctx_spec.selected_node.as_deref(),
        );
        let post = if matches!(decision, Decision::Deallocate { .. }) {
            explain::POST_FILTER_DEALLOCATED
        } else {
            explain::POST_FILTER_STILL
        };
        let text = explain::filter_failure(&filtered.rejections, post);
        return (decision, Some(text));
    }

    let previous = ctx_spec
        .selected_node
        .as_deref()
        .filter(|n| feasible.contains(n));
    let node = previous.map_or_else(|| least_loaded(&feasible, snap.load), str::to_owned);
    if pending.is_empty() {
        let reserve = snap
            .claims
            .iter()
            .filter(|pc| !reserved_for(&pc.claim, pod_uid))
            .map(|pc| pc.claim.metadata.name.clone().unwrap_or_default())
            .collect();
        return (Decision::Bind { node, reserve }, None);
    }

    // PreScore: the published potential nodes stay while they hold every feasible node
    // (upstream's `haveAllPotentialNodes`); a driver's report that rules nodes out, or claims
    // allocated on one node, narrow the feasible nodes without a new list.
    let published = ctx_spec.potential_nodes.as_deref().unwrap_or_default();
    let keep = snap.context.is_some() && {
        let listed: HashSet<&str> = published.iter().map(String::as_str).collect();
        feasible.iter().all(|node| listed.contains(node))
    };
    // Reserve: select a node once the drivers said enough (or with a single pending claim).
    let reported = pending.iter().filter(|p| p.reported).count();
    let selected_node = if pending.len() == 1 || reported == pending.len() {
        Some(node)
    } else {
        ctx_spec.selected_node.clone()
    };
    let unchanged = keep && ctx_spec.selected_node == selected_node;
    if unchanged {
        let reason = if selected_node.is_some() {
            "waiting for resource driver to allocate resource"
        } else {
            "waiting for resource driver to provide information"
        };
        // Nothing new to publish: Reserve waits for the drivers.
        return (
            Decision::Unschedulable(reason.into()),
            Some(explain::reserve_waiting()),
        );
    }
    let potential_nodes = if keep {
        published.to_vec()
    } else {
        potential_nodes(&feasible)
    };
    // PreBind publishes this, then waits.
    let decision = Decision::Publish {
        potential_nodes,
        selected_node,
    };
    (decision, Some(explain::PRE_BIND_WAITING.to_owned()))
}

/// The node with the fewest pods; among several, one at random, as kube-scheduler picks among
/// the nodes of the best score. (Always the first by name would walk every pod through the same
/// nodes in the same order: in `v1alpha2` DRA the scheduler cannot see which nodes' devices are
/// taken, so it would propose the full ones one after the other.)
fn least_loaded(feasible: &[&str], load: &dyn Fn(&str) -> usize) -> String {
    let loads: Vec<usize> = feasible.iter().map(|n| load(n)).collect();
    let Some(&least) = loads.iter().min() else {
        return String::new();
    };
    let best: Vec<&str> = feasible
        .iter()
        .zip(&loads)
        .filter(|(_, l)| **l == least)
        .map(|(n, _)| *n)
        .collect();
    best.choose(&mut rand::rng())
        .map(|n| (*n).to_owned())
        .unwrap_or_default()
}

/// `PreScore`: the filtered nodes, a random 128 of them when there are more, sorted.
pub fn potential_nodes(feasible: &[&str]) -> Vec<String> {
    let mut chosen: Vec<String> = if feasible.len() > MAX_NODE_LIST {
        feasible
            .choose_multiple(&mut rand::rng(), MAX_NODE_LIST)
            .map(|n| (*n).to_owned())
            .collect()
    } else {
        feasible.iter().map(|n| (*n).to_owned()).collect()
    };
    chosen.sort();
    chosen
}

#[cfg(test)]
mod choice_tests {
    use super::least_loaded;

    #[test]
    fn the_least_loaded_node_wins_and_ties_are_spread() {
        let nodes: Vec<String> = (0..100).map(|i| format!("node-{i}")).collect();
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let load = |n: &str| usize::from(n != "node-42");
        assert_eq!(least_loaded(&names, &load), "node-42");
        let even = |_: &str| 0;
        let picks: std::collections::HashSet<String> =
            (0..50).map(|_| least_loaded(&names, &even)).collect();
        assert!(picks.len() > 1, "always {picks:?}");
        assert_eq!(least_loaded(&[], &even), "");
    }
}
