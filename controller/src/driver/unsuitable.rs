//! Unsuitable nodes: the gang check over all pending claims of a pod against the ledger's
//! inventory of the candidate nodes, and the Warning event that explains, node by node, why a
//! pod fits nowhere.
//!
//! The check runs in the ledger against its in-memory inventory (`Ledger::unsuitable_nodes`), not
//! over a copy rebuilt from the file on every call. Devices held by other claims (confirmed or
//! still pending) count as taken; the pod's own claims are left out of the consumers, so a stale
//! pending allocation of the pod does not block it. No soft reservation is made, so nothing can
//! leak.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Instant;

use dra_allocator::fit::UnsuitableNode;
use dra_allocator::model::EffectiveRequest;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tracing::{debug, warn};

use super::{LedgerDriver, Result};
use dra_framework::{ClaimAllocation, EventRecord, EventType};
use dra_runtime::events::object_reference;

/// The event reason of the "no node fits" explanation on a pod.
pub const NO_NODE_FITS_REASON: &str = "NoSuitableNode";

/// Longest event message (the API server limits an event note to 1 KiB).
const MAX_MESSAGE: usize = 1000;

/// The text explaining why no candidate node fits: the first `max_reasons` node reasons, then
/// "and N more". `reasons` is one entry per candidate node.
pub fn explain_unsuitable(reasons: &[UnsuitableNode], max_reasons: usize) -> String {
    let shown: Vec<String> = reasons
        .iter()
        .take(max_reasons.max(1))
        .map(ToString::to_string)
        .collect();
    let mut message = format!(
        "no node can hold all pending claims of the pod ({} checked): {}",
        reasons.len(),
        shown.join("; ")
    );
    let hidden = reasons.len().saturating_sub(shown.len());
    if hidden > 0 {
        let _ = write!(message, "; and {hidden} more");
    }
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    message
}

impl LedgerDriver {
    /// The gang check of [`dra_framework::Driver::unsuitable_nodes`].
    pub(crate) async fn check_nodes(
        &self,
        pod: &Pod,
        claims: &mut [ClaimAllocation<Self>],
        potential_nodes: &[String],
    ) -> Result<()> {
        let started = Instant::now();
        self.wait_ready().await?;
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let ignore: HashSet<String> = claims.iter().map(|c| c.claim_uid().to_owned()).collect();
        for uid in &ignore {
            self.state.remember_pod(uid, &pod_uid);
        }
        let requests: Vec<(String, EffectiveRequest)> = claims
            .iter()
            .map(|c| {
                let name = if c.pod_claim_name.is_empty() {
                    c.claim_name().to_owned()
                } else {
                    c.pod_claim_name.clone()
                };
                (name, c.claim_parameters.request.clone())
            })
            .collect();
        let candidates = potential_nodes.to_vec();
        let ignore: Vec<String> = ignore.into_iter().collect();
        let unsuitable = self
            .keeper
            .call(move |ledger| ledger.unsuitable_nodes(requests, candidates, &ignore))
            .await?;
        let nodes: Vec<String> = unsuitable.iter().map(|u| u.node.clone()).collect();
        for item in claims.iter_mut() {
            item.unsuitable_nodes.clone_from(&nodes);
        }
        let candidates: HashSet<&str> = potential_nodes.iter().map(String::as_str).collect();
        debug!(
            pod = %pod.name_any(),
            candidates = candidates.len(),
            unsuitable = unsuitable.len(),
            "Checked potential nodes"
        );
        if !candidates.is_empty() && unsuitable.len() >= candidates.len() {
            self.explain(pod, &pod_uid, &unsuitable).await;
        } else {
            self.state.clear_message(&pod_uid);
        }
        self.keeper.observer().unsuitable_nodes(started.elapsed());
        Ok(())
    }

    /// Posts the "no node fits" event on the pod when its text changed since the last one.
    async fn explain(&self, pod: &Pod, pod_uid: &str, unsuitable: &[UnsuitableNode]) {
        let message = explain_unsuitable(unsuitable, self.config.event_reasons);
        if !self.state.message_changed(pod_uid, &message) {
            return;
        }
        let event = EventRecord {
            regarding: object_reference(pod),
            type_: EventType::Warning,
            reason: NO_NODE_FITS_REASON.to_owned(),
            message,
        };
        if let Err(error) = self.cluster.post_event(event).await {
            warn!(%error, pod = %pod.name_any(), "Failed to post event");
        }
    }
}
