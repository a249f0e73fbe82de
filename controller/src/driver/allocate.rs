//! [`dra_framework::Driver`] for [`LedgerDriver`]: parameters, allocate (one pod's claims in
//! one ledger transaction, immediate claims by the class policy), deallocate (idempotent, aborts
//! an allocation in flight; the devices of a claim that still shows them are released only once
//! its status no longer does, in `deallocation_published`), unsuitable nodes (in
//! `unsuitable`) and the claims seen, for the idle allocations.

use std::time::Instant;

use async_trait::async_trait;
use dra_allocator::idle::ClaimUse;
use dra_allocator::ledger::{AllocateRequest, Allocation, ClaimRef, LedgerError, PodClaimRequest};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClass};
use kube::ResourceExt;
use tracing::{debug, info, instrument, warn};

use crate::params::ClassParameters;

use super::handle::{allocation_result, claim_allocation, ClaimAllocationState, HandleData};
use super::{
    AllocationMode, AllocationOutcome, ClaimParameters, DeallocationOutcome, DriverError,
    LedgerDriver, Result,
};
use dra_framework::{ClaimAllocation, Driver};

/// The ledger's reference to a claim; fails when the object lacks UID or name.
pub(crate) fn claim_ref(claim: &ResourceClaim) -> Result<ClaimRef> {
    let name = claim.name_any();
    let namespace = claim.namespace().unwrap_or_default();
    let missing = |reason| DriverError::ClaimObject {
        claim: format!("{namespace}/{name}"),
        reason,
    };
    let uid = claim
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| missing("has no uid"))?;
    if name.is_empty() || namespace.is_empty() {
        return Err(missing("has no name or namespace"));
    }
    Ok(ClaimRef::new(uid, namespace, name))
}

/// A per-claim copy of an error that failed a whole batch.
fn batch_error(node: &str, error: &std::sync::Arc<DriverError>) -> DriverError {
    match &**error {
        DriverError::Ledger(LedgerError::Unsatisfiable { reason }) => {
            DriverError::Ledger(LedgerError::Unsatisfiable {
                reason: reason.clone(),
            })
        }
        DriverError::NotReady => DriverError::NotReady,
        _ => DriverError::Batch {
            node: node.to_owned(),
            source: std::sync::Arc::clone(error),
        },
    }
}

fn outcome_of(error: &DriverError) -> AllocationOutcome {
    match error {
        DriverError::Ledger(LedgerError::Unsatisfiable { .. }) => AllocationOutcome::Unsatisfiable,
        _ => AllocationOutcome::Error,
    }
}

impl LedgerDriver {
    fn handle_data(allocation: &Allocation) -> HandleData {
        HandleData {
            node: allocation.node.clone(),
            devices: allocation.devices.clone(),
            sharing: allocation.sharing.into(),
            claim_uid: allocation.claim.uid.clone(),
        }
    }

    /// Drops a ledger allocation of `uid` that the cluster does not show (the framework only
    /// allocates unallocated claims): aborted when pending, released when confirmed.
    async fn drop_stale(&self, uid: &str) -> Result<()> {
        warn!(claim.uid = %uid, "Replacing a ledger allocation the claim does not show");
        let owned = uid.to_owned();
        self.keeper
            .call(move |ledger| match ledger.abort(&owned) {
                Err(LedgerError::AbortConfirmed { .. }) => ledger.release(&owned).map(|_| ()),
                other => other.map(|_| ()),
            })
            .await
    }

    /// Allocates one immediate claim on the best node by its class policy.
    async fn allocate_immediate(
        &self,
        claim: ClaimRef,
        params: &ClaimParameters,
    ) -> Result<Allocation> {
        for _ in 0..2 {
            let request = AllocateRequest {
                claim: claim.clone(),
                pod_uid: None,
                request: params.request.clone(),
                node: None,
            };
            match self.keeper.call(move |l| l.allocate(request)).await {
                Err(DriverError::Ledger(LedgerError::ClaimConflict { uid })) => {
                    self.drop_stale(&uid).await?;
                }
                other => return other,
            }
        }
        Err(DriverError::LedgerConflictPersists {
            subject: format!("claim {} stays", claim.uid),
        })
    }

    /// Allocates all `claims` of one pod on `node` in one ledger transaction.
    async fn allocate_pod(
        &self,
        pod_uid: String,
        node: &str,
        claims: Vec<PodClaimRequest>,
    ) -> Result<Vec<Allocation>> {
        for _ in 0..=claims.len() {
            let (pod, at, batch) = (pod_uid.clone(), node.to_owned(), claims.clone());
            match self
                .keeper
                .call(move |l| l.allocate_pod(&pod, &at, batch))
                .await
            {
                Err(DriverError::Ledger(LedgerError::ClaimConflict { uid })) => {
                    self.drop_stale(&uid).await?;
                }
                other => return other,
            }
        }
        Err(DriverError::LedgerConflictPersists {
            subject: format!("claims of pod {pod_uid} stay"),
        })
    }

    /// The pod the claims are allocated for: the one whose unsuitable-node check included them,
    /// else the pod that owns the first claim, else the first claim's UID as the group key.
    fn pod_for(&self, claims: &[ClaimAllocation<Self>]) -> String {
        claims
            .iter()
            .find_map(|c| self.state.pod_of(c.claim_uid()))
            .or_else(|| {
                claims.iter().find_map(|c| {
                    c.claim
                        .owner_references()
                        .iter()
                        .find(|o| o.kind == "Pod" && o.controller == Some(true))
                        .map(|o| o.uid.clone())
                })
            })
            .unwrap_or_else(|| {
                let first = claims.first().map(ClaimAllocation::claim_uid);
                format!("claim:{}", first.unwrap_or_default())
            })
    }

    /// Releases the ledger allocation of claim `uid` (none is fine) and reports the outcome.
    async fn release_claim(&self, uid: &str) -> Result<()> {
        // Not while a reconcile runs: it may have listed the claim still allocated and would
        // import it again after this release, leaving devices held for a claim that is gone.
        let _no_reconcile = self.reconcile_lock.read().await;
        dra_allocator::failpoint::hit("during_deallocation");
        let owned = uid.to_owned();
        let released = self.keeper.call(move |l| l.release(&owned)).await;
        match released {
            Ok(Some(allocation)) => {
                debug!(claim.uid = %uid, node = %allocation.node, "Released");
                self.keeper
                    .observer()
                    .deallocation(DeallocationOutcome::Released);
                Ok(())
            }
            Ok(None) => {
                self.keeper
                    .observer()
                    .deallocation(DeallocationOutcome::NotAllocated);
                Ok(())
            }
            Err(error) => {
                self.keeper
                    .observer()
                    .deallocation(DeallocationOutcome::Error);
                Err(error)
            }
        }
    }

    async fn run_allocate(
        &self,
        claims: &mut [ClaimAllocation<Self>],
        selected_node: Option<&str>,
    ) -> Result<Vec<Option<Allocation>>> {
        self.wait_ready().await?;
        let mut refs = Vec::with_capacity(claims.len());
        for item in claims.iter() {
            refs.push(claim_ref(&item.claim)?);
        }
        let Some(node) = selected_node else {
            let mut out = Vec::with_capacity(claims.len());
            for (item, claim) in claims.iter_mut().zip(refs) {
                match self.allocate_immediate(claim, &item.claim_parameters).await {
                    Ok(allocation) => out.push(Some(allocation)),
                    Err(error) => {
                        item.error = Some(error);
                        out.push(None);
                    }
                }
            }
            return Ok(out);
        };
        let pod_uid = self.pod_for(claims);
        let requests = claims
            .iter()
            .zip(refs)
            .map(|(item, claim)| PodClaimRequest {
                claim,
                request: item.claim_parameters.request.clone(),
            })
            .collect();
        Ok(self
            .allocate_pod(pod_uid, node, requests)
            .await?
            .into_iter()
            .map(Some)
            .collect())
    }
}

/// Whether a claim is allocated (and not being deallocated) and how many consumers
/// `status.reservedFor` lists.
fn claim_use(claim: &ResourceClaim) -> ClaimUse {
    let status = claim.status.as_ref();
    let allocated =
        status.is_some_and(|s| s.allocation.is_some() && s.deallocation_requested != Some(true));
    ClaimUse::of(
        allocated,
        status
            .and_then(|s| s.reserved_for.as_ref())
            .map_or(0, Vec::len),
    )
}

#[async_trait]
impl Driver for LedgerDriver {
    type ClassParameters = ClassParameters;
    type ClaimParameters = ClaimParameters;
    type Error = DriverError;

    fn claim_seen(&self, claim: &ResourceClaim) {
        if let Some(uid) = claim.uid() {
            self.idle
                .observe(&uid, claim_use(claim), self.ledger().now_ms());
        }
    }

    fn claim_gone(&self, claim: &ResourceClaim) {
        if let Some(uid) = claim.uid() {
            self.idle.forget(&uid);
        }
    }

    async fn get_class_parameters(&self, class: &ResourceClass) -> Result<ClassParameters> {
        self.class_parameters(class).await
    }

    async fn get_claim_parameters(
        &self,
        claim: &ResourceClaim,
        _class: &ResourceClass,
        class_parameters: &ClassParameters,
    ) -> Result<ClaimParameters> {
        self.claim_request(claim, class_parameters).await
    }

    #[instrument(skip_all, fields(driver = %self.config.driver_name, node = selected_node.unwrap_or(""), claims = claims.len()))]
    async fn allocate(&self, claims: &mut [ClaimAllocation<Self>], selected_node: Option<&str>) {
        if claims.is_empty() {
            return;
        }
        let started = Instant::now();
        let mode = match selected_node {
            Some(_) => AllocationMode::Delayed,
            None => AllocationMode::Immediate,
        };
        let uids: Vec<String> = claims.iter().map(|c| c.claim_uid().to_owned()).collect();
        self.state.start_allocation(&uids);
        let result = self.run_allocate(claims, selected_node).await;
        let aborted = self.state.finish_allocation(&uids);
        let mut outcome = AllocationOutcome::Allocated;
        match result {
            Ok(allocations) => {
                for (item, allocation) in claims.iter_mut().zip(allocations) {
                    let Some(allocation) = allocation else {
                        outcome = item.error.as_ref().map_or(outcome, outcome_of);
                        continue;
                    };
                    let uid = allocation.claim.uid.clone();
                    if aborted.contains(&uid) {
                        // A deallocate ran while the ledger committed; it found nothing to free.
                        let _ = self.keeper.call(move |l| l.release(&uid)).await;
                        item.error = Some(DriverError::AllocationAborted {
                            uid: allocation.claim.uid,
                        });
                        outcome = AllocationOutcome::Error;
                        continue;
                    }
                    self.state.handed_out(&allocation.claim.uid);
                    debug!(claim.uid = %allocation.claim.uid, node = %allocation.node, devices = ?allocation.devices, "Allocated");
                    let data = Self::handle_data(&allocation);
                    item.allocation = Some(allocation_result(
                        &self.config.driver_name,
                        &data,
                        item.claim_parameters.shareable,
                    ));
                }
            }
            Err(error) => {
                info!(%error, "Allocation failed");
                outcome = outcome_of(&error);
                let node = selected_node.unwrap_or_default();
                let error = std::sync::Arc::new(error);
                for item in claims.iter_mut() {
                    item.error = Some(batch_error(node, &error));
                }
            }
        }
        self.keeper
            .observer()
            .allocation(mode, outcome, claims.len(), started.elapsed());
        dra_allocator::failpoint::hit("after_intent_commit");
    }

    #[instrument(skip_all, fields(driver = %self.config.driver_name, claim.name = %claim.name_any()))]
    async fn allocation_published(&self, claim: &ResourceClaim) {
        let Ok(ClaimAllocationState::Ours(data)) =
            claim_allocation(claim, &self.config.driver_name)
        else {
            return;
        };
        dra_allocator::failpoint::hit("after_status_write");
        // Confirmed only if the ledger holds what the claim shows; anything else is left to the
        // reconcile. Not waited for: a confirmation a crash loses is rolled forward at the next
        // start, as the claim shows the allocation.
        let deferred = self
            .keeper
            .defer(|l| l.confirm_deferred(&data.claim_uid, &data.node, &data.devices));
        if let Err(error) = deferred {
            warn!(%error, claim.uid = %data.claim_uid, "Cannot queue the allocation's confirmation; the reconcile confirms it");
        }
    }

    #[instrument(skip_all, fields(driver = %self.config.driver_name, claim.name = %claim.name_any()))]
    async fn deallocate(&self, claim: &ResourceClaim) -> Result<()> {
        let Some(uid) = claim.metadata.uid.clone().filter(|u| !u.is_empty()) else {
            self.keeper
                .observer()
                .deallocation(DeallocationOutcome::NotAllocated);
            return Ok(());
        };
        self.state.deallocated(&uid);
        if let Ok(ClaimAllocationState::Ours(_)) = claim_allocation(claim, &self.config.driver_name)
        {
            // The claim still names its devices: they are freed once the status write that
            // removes the allocation returned (`deallocation_published`), so no other claim is
            // given them while this one shows them.
            debug!(claim.uid = %uid, "Deallocation deferred until the claim no longer shows it");
            return Ok(());
        }
        self.release_claim(&uid).await
    }

    #[instrument(skip_all, fields(driver = %self.config.driver_name, claim.name = %claim.name_any()))]
    async fn deallocation_published(&self, claim: &ResourceClaim) {
        let Some(uid) = claim.metadata.uid.clone().filter(|u| !u.is_empty()) else {
            return;
        };
        if let Err(error) = self.release_claim(&uid).await {
            warn!(%error, claim.uid = %uid, "Failed to release a deallocated claim; the reconcile retries");
        }
    }

    async fn unsuitable_nodes(
        &self,
        pod: &Pod,
        claims: &mut [ClaimAllocation<Self>],
        potential_nodes: &[String],
    ) -> Result<()> {
        self.check_nodes(pod, claims, potential_nodes).await
    }
}
