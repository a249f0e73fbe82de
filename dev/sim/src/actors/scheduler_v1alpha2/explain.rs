//! The texts of the events a 1.30 kube-scheduler posts about a pod: `FailedScheduling` (Warning)
//! when a cycle ends without a node, `Scheduled` (Normal) when it binds. The reasons are those of
//! the `DynamicResources` plugin and `NodeUnschedulable`; the message around them is the
//! scheduler's fit error (`0/N nodes are available: ...`) with the `PostFilter` part that default
//! preemption and the DRA plugin add. The list of texts and their upstream source is in
//! `docs/simulator.md`.
//!
//! Pure text building: no I/O.

use std::collections::BTreeMap;

/// Event reason of a cycle that found no node.
pub const FAILED_SCHEDULING: &str = "FailedScheduling";
/// Event reason of a bound pod.
pub const SCHEDULED: &str = "Scheduled";

/// `PreFilter`: an allocated claim that is not shareable (or full) is reserved for someone else.
pub const IN_USE: &str = "resourceclaim in use";
/// `PreFilter`: the claim waits for its driver to deallocate it.
pub const MUST_BE_REALLOCATED: &str = "resourceclaim must be reallocated";
/// `PreFilter`: an immediate claim that its driver has not allocated yet.
pub const UNALLOCATED_IMMEDIATE: &str = "unallocated immediate resourceclaim";
/// Filter (`NodeUnschedulable`): a cordoned node.
pub const NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// Filter: an allocated claim is not available on the node.
pub const NOT_AVAILABLE_ON_NODE: &str = "resourceclaim not available on the node";
/// Filter: the node is not among the class's `suitableNodes`.
pub const EXCLUDED_BY_CLASS: &str = "excluded by resource class node filter";
/// Filter: the driver listed the node in `unsuitableNodes`.
pub const UNSUITABLE: &str = "resourceclaim cannot be allocated for the node (unsuitable)";
/// Reserve: the drivers have not said which nodes suit every pending claim yet.
pub const WAITING_FOR_INFORMATION: &str = "waiting for resource driver to provide information";
/// `PreBind`: the scheduling context was just published; the drivers allocate now.
pub const PRE_BIND_WAITING: &str = "waiting for resource driver";
/// The DRA plugin's `PostFilter` after a failed `PreFilter` (it looked at no claim).
pub const POST_FILTER_NO_CLAIMS: &str = "no new claims to deallocate";
/// The DRA plugin's `PostFilter` when no unavailable claim could be freed.
pub const POST_FILTER_STILL: &str = "still not schedulable";
/// The DRA plugin's `PostFilter` after it requested the deallocation of a claim.
pub const POST_FILTER_DEALLOCATED: &str = "deallocation of ResourceClaim completed";
/// The scheduler's message when the cluster has no node at all.
pub const NO_NODES: &str = "no nodes available to schedule pods";

/// `PreEnqueue` (logged, not posted): a claim made from a template that the resourceclaim
/// controller has not created yet.
pub fn claim_not_created(namespace: &str, pod: &str) -> String {
    format!("pod \"{namespace}/{pod}\": ResourceClaim not created yet")
}

/// `PreEnqueue` (logged, not posted): a claim that does not exist.
pub fn claim_not_found(namespace: &str, claim: &str) -> String {
    format!("could not find ResourceClaim \"{namespace}/{claim}\"")
}

/// `PreEnqueue` (logged, not posted): a claim that is being deleted.
pub fn claim_being_deleted(claim: &str) -> String {
    format!("resourceclaim \"{claim}\" is being deleted")
}

/// `PreEnqueue` (logged, not posted): a claim with the pod's generated name that the pod does
/// not own.
pub fn claim_not_for_pod(namespace: &str, claim: &str, pod: &str) -> String {
    format!(
        "ResourceClaim {namespace}/{claim} was not created for pod {namespace}/{pod} (pod is not owner)"
    )
}

/// `PreFilter`: the claim's class does not exist.
pub fn class_missing(class: &str) -> String {
    format!("resource class {class} does not exist")
}

/// What default preemption says when every node rejected the pod for a reason preemption cannot
/// change, followed by the DRA plugin's own `PostFilter` reason.
fn post_filter(nodes: usize, dra: &str) -> String {
    format!(
        "preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling., {dra}"
    )
}

/// The message of a cycle whose `PreFilter` refused the pod with `reason`, in a cluster of
/// `nodes` nodes.
pub fn pre_filter_failure(nodes: usize, reason: &str) -> String {
    fit_error(nodes, reason, &post_filter(nodes, POST_FILTER_NO_CLAIMS))
}

/// The scheduler's fit error, `0/N nodes are available: <reasons>. <post_filter>`, or
/// [`NO_NODES`] in a cluster without nodes; the 1.34 scheduler's has the same frame.
pub fn fit_error(nodes: usize, reasons: &str, post_filter: &str) -> String {
    if nodes == 0 {
        return NO_NODES.to_owned();
    }
    format!("0/{nodes} nodes are available: {reasons}. {post_filter}")
}

/// The message of a cycle in which every node was filtered out: `rejections` holds one reason
/// per node (counted and sorted as the scheduler does), `dra_post_filter` what the DRA plugin's
/// `PostFilter` did.
pub fn filter_failure(rejections: &[&str], dra_post_filter: &str) -> String {
    let nodes = rejections.len();
    fit_error(
        nodes,
        &node_reasons(rejections),
        &post_filter(nodes, dra_post_filter),
    )
}

/// The per-node reasons of a fit error as the scheduler lists them: each reason once with the
/// number of nodes that gave it (`2 node(s) were unschedulable`), sorted, joined by `, `. The
/// 1.34 scheduler's fit error lists them the same way.
pub fn node_reasons(rejections: &[&str]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in rejections {
        *counts.entry(reason).or_default() += 1;
    }
    let mut histogram: Vec<String> = counts
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    histogram.sort();
    histogram.join(", ")
}

/// The message of a cycle whose Reserve waits for the drivers (the scheduler counts only the
/// chosen node).
pub fn reserve_waiting() -> String {
    format!("0/1 nodes are available: 1 {WAITING_FOR_INFORMATION}.")
}

/// The message of the `Scheduled` event.
pub fn scheduled(namespace: &str, pod: &str, node: &str) -> String {
    format!("Successfully assigned {namespace}/{pod} to {node}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_filter_failures_name_the_cluster_size_and_the_reason() {
        assert_eq!(
            pre_filter_failure(3, IN_USE),
            "0/3 nodes are available: resourceclaim in use. preemption: 0/3 nodes are available: \
             3 Preemption is not helpful for scheduling., no new claims to deallocate"
        );
        assert_eq!(pre_filter_failure(0, IN_USE), NO_NODES);
    }

    #[test]
    fn filter_failures_count_and_sort_the_reasons() {
        let text = filter_failure(
            &[UNSUITABLE, NODE_UNSCHEDULABLE, UNSUITABLE],
            POST_FILTER_STILL,
        );
        assert_eq!(
            text,
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 resourceclaim cannot be \
             allocated for the node (unsuitable). preemption: 0/3 nodes are available: 3 \
             Preemption is not helpful for scheduling., still not schedulable"
        );
    }

    #[test]
    fn claim_texts_quote_as_upstream() {
        assert_eq!(
            claim_not_created("ns", "p"),
            "pod \"ns/p\": ResourceClaim not created yet"
        );
        assert_eq!(
            claim_not_found("ns", "c"),
            "could not find ResourceClaim \"ns/c\""
        );
        assert_eq!(
            scheduled("ns", "p", "n1"),
            "Successfully assigned ns/p to n1"
        );
        assert_eq!(
            reserve_waiting(),
            "0/1 nodes are available: 1 waiting for resource driver to provide information."
        );
    }
}
