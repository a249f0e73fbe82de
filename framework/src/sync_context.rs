//! Sync of one PodSchedulingContext: collects the pod's pending delayed claims of this driver,
//! asks the driver for unsuitable nodes, allocates on the selected node when every claim fits
//! there, and otherwise writes this driver's entries of the context status (after a successful
//! allocation no claim is pending and the report is left out, unlike upstream).
//!
//! Writes go through `ClusterApi`; must not touch the queue.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaimConsumerReference};
use kube::ResourceExt;
use tracing::{debug, warn};

use super::controller::{SyncOutcome, Syncer};
use super::driver::{ClaimAllocation, Driver};
use super::error::{Error, KubeCallError, KubeCallErrorKind, Result};
use super::scheduling::{status_patch, truncate_nodes, ClaimStatusEntry, NODE_LIST_MAX_SIZE};
use super::sync_claim::is_allocated;

/// Whether `owner` is the controller of `context` (same UID).
fn controlled_by(context: &PodSchedulingContext, pod: &Pod) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    context
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Our status entries: each pending claim's unsuitable nodes, limited to the candidates, without
/// duplicates, truncated.
fn status_entries<D: Driver>(
    pending: &[ClaimAllocation<D>],
    candidates: &[String],
    selected_node: Option<&str>,
) -> Vec<ClaimStatusEntry> {
    let allowed: HashSet<&str> = candidates.iter().map(String::as_str).collect();
    pending
        .iter()
        .map(|item| {
            let mut seen = HashSet::new();
            let nodes = item
                .unsuitable_nodes
                .iter()
                .filter(|n| allowed.contains(n.as_str()) && seen.insert(n.as_str()))
                .cloned()
                .collect();
            ClaimStatusEntry {
                name: item.pod_claim_name.clone(),
                unsuitable_nodes: truncate_nodes(nodes, selected_node),
            }
        })
        .collect()
}

/// Adds the nodes this driver reported unsuitable for a pending claim before to `candidates`
/// (while the list has room), so that they are checked again and stay reported while they remain
/// unsuitable. The scheduler drops reported nodes from `potentialNodes`; a report limited to the
/// new potential nodes would make them look suitable again and let the scheduler flip between
/// two unsuitable nodes forever.
fn carry_forward_reported<D: Driver>(
    context: &PodSchedulingContext,
    pending: &[ClaimAllocation<D>],
    candidates: &mut Vec<String>,
) {
    let names: HashSet<&str> = pending.iter().map(|p| p.pod_claim_name.as_str()).collect();
    let reported = context
        .status
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter(|e| e.name.as_deref().is_some_and(|n| names.contains(n)))
        .flat_map(|e| e.unsuitable_nodes.iter().flatten());
    for node in reported {
        if candidates.len() >= NODE_LIST_MAX_SIZE {
            break;
        }
        if !candidates.contains(node) {
            candidates.push(node.clone());
        }
    }
}

/// The claim name of a pod claim and whether the claim must be owned by the pod (template).
/// `Ok(None)` when the template claim is not needed (`resourceClaimName` recorded as null).
fn claim_name(pod: &Pod, pod_claim: &PodResourceClaim) -> Result<Option<(String, bool)>> {
    let source = pod_claim.source.as_ref();
    if let Some(name) = source.and_then(|s| s.resource_claim_name.as_ref()) {
        return Ok(Some((name.clone(), false)));
    }
    if source
        .and_then(|s| s.resource_claim_template_name.as_ref())
        .is_some()
    {
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref());
        let entry = statuses
            .and_then(|list| list.iter().find(|s| s.name == pod_claim.name))
            .ok_or(Error::ClaimNotCreated)?;
        return Ok(entry.resource_claim_name.clone().map(|n| (n, true)));
    }
    Err(Error::UnsupportedClaimSource)
}

/// What became of a report ([`Syncer::write_report`]).
enum Report {
    /// The context shows our entries: written now, or already there.
    Current,
    /// The context is gone: no one reads the report.
    ContextGone,
}

/// The nodes the scheduler asks about: the selected one (empty means none) and the potential
/// ones; `None` when the context is being deleted or asks about no node.
fn nodes_asked(context: &PodSchedulingContext) -> Option<(Option<&str>, Vec<String>)> {
    if context.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let selected_node = context
        .spec
        .selected_node
        .as_deref()
        .filter(|n| !n.is_empty());
    let potential_nodes = context.spec.potential_nodes.clone().unwrap_or_default();
    if selected_node.is_none() && potential_nodes.is_empty() {
        return None;
    }
    Some((selected_node, potential_nodes))
}

/// The nodes to check: the potential ones, the selected one even when the scheduler did not
/// list it as potential, and those reported before ([`carry_forward_reported`]).
fn candidate_nodes<D: Driver>(
    context: &PodSchedulingContext,
    pending: &[ClaimAllocation<D>],
    selected_node: Option<&str>,
    potential_nodes: Vec<String>,
) -> Vec<String> {
    let mut candidates = potential_nodes;
    if let Some(node) = selected_node {
        if !candidates.iter().any(|n| n == node) {
            candidates.push(node.to_owned());
        }
    }
    carry_forward_reported(context, pending, &mut candidates);
    candidates
}

/// Adds the selected `node` to every entry's unsuitable nodes after a failed allocation there
/// (most often: it filled up since the check), so the scheduler moves on at once instead of
/// waiting for a retry; the next sync checks the node again and drops it once it fits.
fn report_failed_node(entries: &mut [ClaimStatusEntry], node: &str) {
    for entry in entries {
        if !entry.unsuitable_nodes.iter().any(|n| n == node) {
            entry.unsuitable_nodes.push(node.to_owned());
            let nodes = std::mem::take(&mut entry.unsuitable_nodes);
            entry.unsuitable_nodes = truncate_nodes(nodes, Some(node));
        }
    }
}

/// Logs a report that was not written while the sync fails for its allocation anyway.
fn log_unwritten_report(error: &KubeCallError) {
    if error.kind == KubeCallErrorKind::Conflict {
        // The newer copy arrives through the watch, and the retry reports again.
        debug!(%error, "Unsuitable nodes not written: the context changed since");
    } else {
        warn!(%error, "Failed to update unsuitable nodes");
    }
}

impl<D: Driver> Syncer<D> {
    /// Syncs one context: the pod's pending claims checked against the candidate nodes,
    /// allocated on the selected node when they all fit there, and otherwise the report of the
    /// unsuitable nodes written.
    pub(crate) async fn sync_context(
        &self,
        context: Arc<PodSchedulingContext>,
    ) -> Result<SyncOutcome> {
        let Some((selected_node, potential_nodes)) = nodes_asked(&context) else {
            return Ok(SyncOutcome::Done);
        };
        let Some(pod) = self.owning_pod(&context) else {
            return Ok(SyncOutcome::Done);
        };
        let mut pending = self.pending_claims(&pod).await?;
        if pending.is_empty() {
            return Ok(SyncOutcome::Periodic);
        }
        let candidates = candidate_nodes(&context, &pending, selected_node, potential_nodes);
        self.driver
            .unsuitable_nodes(&pod, &mut pending, &candidates)
            .await
            .map_err(|e| Error::UnsuitableNodes(Box::new(e)))?;
        let mut entries = status_entries(&pending, &candidates, selected_node);
        let allocation = match selected_node {
            Some(node) => self.allocate_on_selected(&pod, pending, node).await,
            None => None,
        };
        // Every pending claim is now allocated on the selected node, so none is pending any
        // more and the scheduler's filter no longer reads their entries; should the scheduler
        // undo the allocation, the claims turn pending again and the next sync reports afresh.
        // Upstream writes the report here anyway: most often to a context that the scheduler
        // has already deleted (the pod bound), and always an API round trip with its watch
        // events, which this saves.
        if let Some(Ok(())) = allocation {
            return Ok(SyncOutcome::Periodic);
        }
        let allocation_error = allocation.and_then(Result::err);
        if let (Some(node), Some(_)) = (selected_node, &allocation_error) {
            report_failed_node(&mut entries, node);
        }
        // The report is written even when the allocation failed, so the scheduler can move on.
        match self.write_report(&context, &entries).await {
            Ok(Report::Current) => {}
            Ok(Report::ContextGone) => return Ok(SyncOutcome::Done),
            Err(e) if allocation_error.is_none() => return Err(Error::UpdateSchedulingStatus(e)),
            Err(e) => log_unwritten_report(&e),
        }
        match allocation_error {
            Some(e) => Err(e),
            None => Ok(SyncOutcome::Periodic),
        }
    }

    /// The pod the context is for, from the watch, unless it is being deleted or does not
    /// control the context; when it arrives later its event re-queues the context.
    fn owning_pod(&self, context: &PodSchedulingContext) -> Option<Arc<Pod>> {
        let namespace = context.namespace().unwrap_or_default();
        let pod = self.caches.pod(&namespace, &context.name_any())?;
        if pod.metadata.deletion_timestamp.is_some() || !controlled_by(context, &pod) {
            return None;
        }
        Some(pod)
    }

    /// The pod's claims that are ours to allocate now; the first that cannot be resolved fails
    /// the sync, named.
    async fn pending_claims(&self, pod: &Pod) -> Result<Vec<ClaimAllocation<D>>> {
        let mut pending = Vec::new();
        for pod_claim in pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
        {
            match self.pending_claim(pod, pod_claim).await {
                Ok(Some(item)) => pending.push(item),
                Ok(None) => {}
                Err(e) => {
                    return Err(Error::PodClaim {
                        name: pod_claim.name.clone(),
                        source: Box::new(e),
                    })
                }
            }
        }
        Ok(pending)
    }

    /// Writes our entries of the context status when they differ from what it shows; a context
    /// that is gone is no failure.
    async fn write_report(
        &self,
        context: &PodSchedulingContext,
        entries: &[ClaimStatusEntry],
    ) -> std::result::Result<Report, KubeCallError> {
        let Some(patch) = status_patch(context, entries) else {
            return Ok(Report::Current);
        };
        let namespace = context.namespace().unwrap_or_default();
        match self
            .api
            .patch_scheduling_context_status(&namespace, &context.name_any(), &patch)
            .await
        {
            Ok(updated) => {
                self.contexts.mutation(Arc::new(updated));
                Ok(Report::Current)
            }
            Err(e) if e.kind == KubeCallErrorKind::NotFound => {
                // The context is gone (the scheduler deletes it once the pod is bound, or the
                // pod went away): no one reads the report.
                debug!(error = %e, "Scheduling context gone before the report");
                Ok(Report::ContextGone)
            }
            Err(e) => Err(e),
        }
    }

    /// Allocates the pending claims on the selected node unless a claim reported it unsuitable:
    /// `None` when not tried, otherwise the joined per-claim errors, if any.
    async fn allocate_on_selected(
        &self,
        pod: &Pod,
        pending: Vec<ClaimAllocation<D>>,
        node: &str,
    ) -> Option<Result<()>> {
        if pending
            .iter()
            .any(|item| item.unsuitable_nodes.iter().any(|n| n == node))
        {
            debug!(node, "Selected node is unsuitable, not allocating");
            return None;
        }
        let user = ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".to_owned(),
            name: pod.name_any(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        let mut errors: Vec<Error> = self
            .allocate_claims(pending, Some(node), Some(&user))
            .await
            .into_iter()
            .map(|(claim, source)| Error::ClaimAllocation {
                claim,
                source: Box::new(source),
            })
            .collect();
        Some(match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Joined(errors)),
        })
    }

    /// The pending claim behind one pod claim, or `None` when it is not ours to allocate now.
    async fn pending_claim(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
    ) -> Result<Option<ClaimAllocation<D>>> {
        let Some((name, must_be_owned)) = claim_name(pod, pod_claim)? else {
            return Ok(None);
        };
        let namespace = pod.namespace().unwrap_or_default();
        let Some(claim) = self.claim(&namespace, &name) else {
            return Ok(None);
        };
        if must_be_owned {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let owned = claim
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if !owned {
                return Err(Error::ClaimNotForPod {
                    claim: name,
                    pod: pod.name_any(),
                });
            }
        }
        let delayed = claim
            .spec
            .allocation_mode
            .as_deref()
            .unwrap_or("WaitForFirstConsumer")
            == "WaitForFirstConsumer";
        if !delayed || is_allocated(&claim) {
            return Ok(None);
        }
        let class = self.class_of(&claim)?;
        if class.driver_name != self.name {
            return Ok(None);
        }
        let (class_parameters, claim_parameters) = self.parameters(&claim, &class, true).await?;
        Ok(Some(ClaimAllocation::new(
            pod_claim.name.clone(),
            claim,
            class,
            class_parameters,
            claim_parameters,
        )))
    }
}
