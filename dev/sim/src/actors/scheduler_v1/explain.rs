//! The texts of the events and conditions a 1.34 kube-scheduler with the `DynamicResources`
//! plugin posts about a pod: the plugin's `PreFilter` and Filter reasons, the fit error around
//! them (`0/N nodes are available: ...`, node reasons counted and sorted) followed by the
//! `PostFilter` messages of the DRA plugin and default preemption, and the Filter error that
//! aborts a cycle (`running "DynamicResources" filter plugin: ...`). The `Scheduled` text and
//! the reasons shared with 1.30, with the counting of node reasons, come from
//! [`crate::actors::scheduler_v1alpha2::explain`].
//!
//! Pure text building: no I/O.

pub use crate::actors::scheduler_v1alpha2::explain::{
    claim_being_deleted, scheduled, FAILED_SCHEDULING, NODE_UNSCHEDULABLE, NOT_AVAILABLE_ON_NODE,
    POST_FILTER_STILL, SCHEDULED,
};
use crate::actors::scheduler_v1alpha2::explain::{fit_error, node_reasons};

/// Filter: the node's devices cannot satisfy every unallocated claim of the pod.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";

/// The `PodScheduled` reason of a pod no node fits.
pub const UNSCHEDULABLE: &str = "Unschedulable";
/// The `PodScheduled` reason of a cycle that failed with an error (a CEL error).
pub const SCHEDULER_ERROR: &str = "SchedulerError";

/// `PreEnqueue` (logged, not posted): a claim missing from the scheduler's cache.
pub fn claim_not_found(claim: &str) -> String {
    format!("resourceclaim.resource.k8s.io \"{claim}\" not found")
}

/// `PreFilter`: a request whose class does not exist (`request` is `req` or `req/sub`).
pub fn class_missing(request: &str, class: &str) -> String {
    format!("request {request}: device class {class} does not exist")
}

/// `PreFilter`: a claim another pod's scheduling cycle is allocating.
pub fn in_flight(namespace: &str, claim: &str) -> String {
    format!("resource claim {namespace}/{claim} is in the process of being allocated")
}

/// The `PostFilter` messages: the DRA plugin's (`dra`), then default preemption's, which finds
/// nothing to preempt when every node was rejected as unresolvable.
fn post_filter(nodes: usize, dra: &str) -> String {
    format!(
        "{dra}, preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )
}

/// The message of a cycle whose `PreFilter` refused the pod with `reason` in a cluster of
/// `nodes` nodes; `dra_post_filter` is what the DRA plugin's `PostFilter` said.
pub fn pre_filter_failure(nodes: usize, reason: &str, dra_post_filter: &str) -> String {
    fit_error(nodes, reason, &post_filter(nodes, dra_post_filter))
}

/// The message of a cycle in which every node was filtered out, one reason per node.
pub fn filter_failure(rejections: &[&str]) -> String {
    let nodes = rejections.len();
    fit_error(
        nodes,
        &node_reasons(rejections),
        &post_filter(nodes, POST_FILTER_STILL),
    )
}

/// The message of a cycle aborted by a Filter error (the allocator could not evaluate a claim).
pub fn filter_error(error: &str) -> String {
    format!("running \"DynamicResources\" filter plugin: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_failure_counts_the_reasons_and_ends_with_the_post_filter_messages() {
        assert_eq!(
            filter_failure(&[CANNOT_ALLOCATE, NODE_UNSCHEDULABLE, CANNOT_ALLOCATE]),
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 cannot allocate all \
             claims. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption \
             is not helpful for scheduling."
        );
        assert_eq!(
            filter_failure(&[]),
            crate::actors::scheduler_v1alpha2::explain::NO_NODES
        );
    }

    #[test]
    fn a_pre_filter_failure_names_its_reason() {
        assert_eq!(
            pre_filter_failure(2, &class_missing("gpu", "missing"), POST_FILTER_STILL),
            "0/2 nodes are available: request gpu: device class missing does not exist. \
             still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not \
             helpful for scheduling."
        );
        assert_eq!(
            filter_error("claim ns/c: selector #0: CEL runtime error: no such key: model"),
            "running \"DynamicResources\" filter plugin: claim ns/c: selector #0: CEL runtime \
             error: no such key: model"
        );
    }
}
