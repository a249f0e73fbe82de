//! One scheduling cycle of the 1.30 `DynamicResources` plugin (classic DRA) as a pure decision:
//! `PreEnqueue` (claims resolve), `PreFilter`, Filter, `PostFilter`, `PreScore`, Reserve and the `PreBind`
//! waiting point, computed from a snapshot. The caller performs the writes the decision names.
//!
//! Pure logic: no I/O, no async, no kube client.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, Pod};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim, ResourceClass};
use rand::seq::IndexedRandom;

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
    /// Its resolved claims (see [`resolve_claims`]).
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

/// `PreEnqueue`: every pod claim must resolve to an existing claim that is not being deleted, and a
/// claim made from a template must be controlled by the pod. `Err` says what is missing.
pub fn resolve_claims(
    pod: &Pod,
    claim: &dyn Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> Result<Vec<PodClaim>, String> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut resolved = Vec::new();
    for entry in pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
    {
        let source = entry.source.as_ref();
        let (name, from_template) =
            if let Some(name) = source.and_then(|s| s.resource_claim_name.as_ref()) {
                (name.clone(), false)
            } else if source
                .and_then(|s| s.resource_claim_template_name.as_ref())
                .is_some()
            {
                let recorded = statuses.and_then(|list| list.iter().find(|s| s.name == entry.name));
                match recorded {
                    None => {
                        return Err(format!(
                            "pod claim {}: resourceclaim not created yet",
                            entry.name
                        ))
                    }
                    // No claim needed for this entry.
                    Some(status) if status.resource_claim_name.is_none() => continue,
                    Some(status) => (status.resource_claim_name.clone().unwrap_or_default(), true),
                }
            } else {
                return Err(format!("pod claim {}: no claim source", entry.name));
            };
        let Some(object) = claim(&name) else {
            return Err(format!("resourceclaim {name} not found"));
        };
        if object.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim {name} is being deleted"));
        }
        if from_template {
            let controlled = object
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == pod_uid);
            if !controlled {
                return Err(format!("resourceclaim {name} was not created for the pod"));
            }
        }
        resolved.push(PodClaim {
            pod_claim_name: entry.name.clone(),
            claim: object,
        });
    }
    Ok(resolved)
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
    unsuitable: &'a [String],
}

type Allocated<'a> = Vec<(&'a PodClaim, Option<&'a NodeSelector>)>;

/// `PreFilter`: sorts the claims into allocated ones (with where they are available) and pending
/// delayed ones (with the driver's view), or says why the pod cannot be scheduled at all.
fn pre_filter<'a>(
    snap: &'a Snapshot<'_>,
    pod_uid: &str,
) -> Result<(Allocated<'a>, Vec<Pending<'a>>), Decision> {
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
            return Err(Decision::Unschedulable(format!(
                "resourceclaim {name} must be reallocated"
            )));
        }
        if let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) {
            let reserved = status
                .and_then(|s| s.reserved_for.as_ref())
                .map_or(0, Vec::len);
            if !reserved_for(&pc.claim, pod_uid) {
                if reserved > 0 && allocation.shareable != Some(true) {
                    return Err(Decision::Unschedulable(format!(
                        "resourceclaim {name} is in use"
                    )));
                }
                if reserved >= MAX_RESERVED_FOR {
                    return Err(Decision::Unschedulable(format!(
                        "resourceclaim {name} has no room for another consumer"
                    )));
                }
            }
            allocated.push((pc, allocation.available_on_nodes.as_ref()));
        } else if pc.claim.spec.allocation_mode.as_deref() == Some("Immediate") {
            return Err(Decision::Unschedulable(format!(
                "unallocated immediate resourceclaim {name}"
            )));
        } else {
            let class_name = &pc.claim.spec.resource_class_name;
            let Some(class) = (snap.class)(class_name) else {
                return Err(Decision::Unschedulable(format!(
                    "resource class {class_name} does not exist"
                )));
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
                    .unwrap_or_default(),
            });
        }
    }
    Ok((allocated, pending))
}

/// `Filter`: the nodes that fit, and the indexes of allocated claims that ruled out some
/// otherwise schedulable node. `None` when no node is schedulable at all.
fn filter<'a>(
    nodes: &'a [Arc<Node>],
    allocated: &Allocated<'_>,
    pending: &[Pending<'_>],
) -> Option<(Vec<&'a str>, BTreeSet<usize>)> {
    let schedulable: Vec<&Node> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| {
            n.metadata.deletion_timestamp.is_none()
                && !n
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
        })
        .collect();
    if schedulable.is_empty() {
        return None;
    }
    let mut unavailable: BTreeSet<usize> = BTreeSet::new();
    let mut feasible: Vec<&str> = Vec::new();
    for node in schedulable {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut fits = true;
        for (index, (_, on_nodes)) in allocated.iter().enumerate() {
            if on_nodes.is_some_and(|sel| !node_matches(sel, node)) {
                unavailable.insert(index);
                fits = false;
            }
        }
        fits = fits
            && pending.iter().all(|p| {
                p.suitable
                    .as_ref()
                    .is_none_or(|sel| node_matches(sel, node))
                    && !p.unsuitable.iter().any(|u| u == name)
            });
        if fits {
            feasible.push(name);
        }
    }
    Some((feasible, unavailable))
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

/// Runs one scheduling cycle over the snapshot.
pub fn decide(snap: &Snapshot<'_>) -> Decision {
    let pod_uid = snap.pod.metadata.uid.as_deref().unwrap_or_default();
    let ctx_spec = snap.context.map(|c| c.spec.clone()).unwrap_or_default();
    let (allocated, pending) = match pre_filter(snap, pod_uid) {
        Ok(sorted) => sorted,
        Err(decision) => return decision,
    };
    let Some((feasible, unavailable)) = filter(snap.nodes, &allocated, &pending) else {
        return Decision::Unschedulable("no schedulable node".into());
    };
    if feasible.is_empty() {
        return post_filter(
            &allocated,
            unavailable,
            pod_uid,
            ctx_spec.selected_node.as_deref(),
        );
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
        return Decision::Bind { node, reserve };
    }

    // PreScore.
    let potential_nodes = potential_nodes(&feasible);
    // Reserve: select a node once the drivers said enough (or with a single pending claim).
    let reported = pending.iter().filter(|p| p.reported).count();
    let selected_node = if pending.len() == 1 || reported == pending.len() {
        Some(node)
    } else {
        ctx_spec.selected_node.clone()
    };
    let unchanged = snap.context.is_some()
        && ctx_spec.potential_nodes.as_deref().unwrap_or_default() == potential_nodes.as_slice()
        && ctx_spec.selected_node == selected_node;
    if unchanged {
        let reason = if selected_node.is_some() {
            "waiting for resource driver to allocate resource"
        } else {
            "waiting for resource driver to provide information"
        };
        return Decision::Unschedulable(reason.into());
    }
    // PreBind publishes this, then waits.
    Decision::Publish {
        potential_nodes,
        selected_node,
    }
}

/// The node with the fewest pods, ties broken by name.
fn least_loaded(feasible: &[&str], load: &dyn Fn(&str) -> usize) -> String {
    feasible
        .iter()
        .min_by_key(|n| (load(n), **n))
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
