//! Sync of one ResourceClaim: deallocation and finalizer removal for deleted or
//! deallocation-requested claims, and allocation of claims with immediate allocation. Also the
//! shared steps: parameter retrieval and `allocate_claims`.
//!
//! Writes go through `ClusterApi`; must not touch the queue.

use std::sync::Arc;

use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClass,
};
use tracing::{debug, warn};

use super::controller::{SyncOutcome, Syncer};
use super::driver::{ClaimAllocation, Driver};
use super::error::{Error, KubeCallError, KubeCallErrorKind, Result};
use dra_runtime::events::EventRecord;

/// Whether the claim has an allocation result.
pub(crate) fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

fn is_reserved(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| !r.is_empty())
}

fn deallocation_requested(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.deallocation_requested)
        .unwrap_or(false)
}

fn class_parameters_ref(class: &ResourceClass) -> String {
    match &class.parameters_ref {
        None => "<none>".to_owned(),
        Some(r) => {
            let group = r.api_group.as_deref().unwrap_or_default();
            match r.namespace.as_deref() {
                Some(ns) => format!("{}.{group} {ns}/{}", r.kind, r.name),
                None => format!("{}.{group} {}", r.kind, r.name),
            }
        }
    }
}

fn claim_parameters_ref(claim: &ResourceClaim) -> String {
    match &claim.spec.parameters_ref {
        None => "<none>".to_owned(),
        Some(r) => format!(
            "{}.{} {}",
            r.kind,
            r.api_group.as_deref().unwrap_or_default(),
            r.name
        ),
    }
}

impl<D: Driver> Syncer<D> {
    pub(crate) async fn sync_claim(&self, claim: Arc<ResourceClaim>) -> Result<SyncOutcome> {
        if is_reserved(&claim) {
            return Ok(SyncOutcome::Done);
        }
        if claim.metadata.deletion_timestamp.is_some() || deallocation_requested(&claim) {
            if !self.has_finalizer(&claim) {
                return Ok(SyncOutcome::Done);
            }
            self.release(claim).await?;
            // Never reallocate in the same pass.
            return Ok(SyncOutcome::Done);
        }
        if is_allocated(&claim) {
            return Ok(SyncOutcome::Done);
        }
        if claim.spec.allocation_mode.as_deref() != Some("Immediate") {
            return Ok(SyncOutcome::Done);
        }
        let class = self.class_of(&claim)?;
        if class.driver_name != self.name {
            return Ok(SyncOutcome::Requeue);
        }
        let (class_parameters, claim_parameters) = self.parameters(&claim, &class, false).await?;
        let items = vec![ClaimAllocation::new(
            "",
            claim,
            class,
            class_parameters,
            claim_parameters,
        )];
        let mut errors = self.allocate_claims(items, None, None).await;
        match errors.pop() {
            Some((_, error)) => Err(Error::Allocate(Box::new(error))),
            None => Ok(SyncOutcome::Done),
        }
    }

    /// Deallocates (or stops allocating) a claim being deleted or asked to be deallocated, clears
    /// its allocation and `deallocationRequested`, then removes our finalizer. A claim that is
    /// gone at one of the writes is released: it can only be gone once its finalizers were
    /// removed, most often by an earlier pass of this sync over a newer copy (the watch then
    /// delivers the intermediate versions, each of which syncs again).
    async fn release(&self, claim: Arc<ResourceClaim>) -> Result<()> {
        let mut claim = claim;
        if is_allocated(&claim) {
            self.driver
                .deallocate(&claim)
                .await
                .map_err(|e| Error::Deallocate(Box::new(e)))?;
            let mut cleared = (*claim).clone();
            let status = cleared.status.get_or_insert_with(Default::default);
            status.allocation = None;
            status.driver_name = None;
            status.deallocation_requested = None;
            let Some(written) = self
                .release_write(&cleared, true, Error::RemoveAllocation)
                .await?
            else {
                // Gone: no copy shows the allocation any more.
                self.driver.deallocation_published(&claim).await;
                return Ok(());
            };
            claim = written;
            self.driver.deallocation_published(&claim).await;
        } else {
            self.driver
                .deallocate(&claim)
                .await
                .map_err(|e| Error::StopAllocation(Box::new(e)))?;
        }
        if deallocation_requested(&claim) {
            let mut cleared = (*claim).clone();
            cleared
                .status
                .get_or_insert_with(Default::default)
                .deallocation_requested = None;
            let Some(written) = self
                .release_write(&cleared, true, Error::RemoveDeallocation)
                .await?
            else {
                return Ok(());
            };
            claim = written;
        }
        let mut without = (*claim).clone();
        if let Some(finalizers) = without.metadata.finalizers.as_mut() {
            finalizers.retain(|f| *f != self.finalizer);
        }
        if self
            .release_write(&without, false, Error::RemoveFinalizer)
            .await?
            .is_none()
        {
            return Ok(());
        }
        debug!(claim.name = ?claim.metadata.name, "Released claim");
        Ok(())
    }

    /// One write of a release (`status`: to the status subresource): the claim as written, or
    /// `None` when it is gone; any other failure becomes the error `fail` names.
    async fn release_write(
        &self,
        claim: &ResourceClaim,
        status: bool,
        fail: fn(KubeCallError) -> Error,
    ) -> Result<Option<Arc<ResourceClaim>>> {
        match self.write_claim(claim, status).await {
            Ok(written) => Ok(Some(written)),
            Err(e) if e.kind == KubeCallErrorKind::NotFound => {
                debug!(error = %e, "Claim gone before its release was written; released");
                Ok(None)
            }
            Err(e) => Err(fail(e)),
        }
    }

    /// Class and claim parameters from the driver. A class failure is also reported as an event on
    /// the class; a claim failure on the claim when `notify_claim` (the pod path, whose sync error
    /// lands on the scheduling context).
    pub(crate) async fn parameters(
        &self,
        claim: &ResourceClaim,
        class: &ResourceClass,
        notify_claim: bool,
    ) -> Result<(Arc<D::ClassParameters>, Arc<D::ClaimParameters>)> {
        let class_parameters = match self.driver.get_class_parameters(class).await {
            Ok(p) => Arc::new(p),
            Err(e) => {
                self.post_event(EventRecord::failed(class, e.to_string()))
                    .await;
                return Err(Error::ClassParameters {
                    reference: class_parameters_ref(class),
                    source: Box::new(e),
                });
            }
        };
        match self
            .driver
            .get_claim_parameters(claim, class, &class_parameters)
            .await
        {
            Ok(p) => Ok((class_parameters, Arc::new(p))),
            Err(e) => {
                if notify_claim {
                    self.post_event(EventRecord::failed(claim, e.to_string()))
                        .await;
                }
                Err(Error::ClaimParameters {
                    reference: claim_parameters_ref(claim),
                    source: Box::new(e),
                })
            }
        }
    }

    /// Allocates the claims of `items` that are not allocated yet: our finalizer is persisted
    /// first, then the driver allocates the batch, then each result is written to the claim status
    /// (with `user` appended to `reservedFor` when configured). Returns the failed claims' names
    /// with their errors (finalizer failures first, then allocation failures).
    pub(crate) async fn allocate_claims(
        &self,
        items: Vec<ClaimAllocation<D>>,
        selected_node: Option<&str>,
        user: Option<&ResourceClaimConsumerReference>,
    ) -> Vec<(String, Error)> {
        let mut errors = Vec::new();
        let mut batch = Vec::with_capacity(items.len());
        for mut item in items {
            if is_allocated(&item.claim) {
                // Another pod's context allocated a shared claim first.
                continue;
            }
            if !self.has_finalizer(&item.claim) {
                let mut claim = (*item.claim).clone();
                claim
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(self.finalizer.clone());
                match self.write_claim(&claim, false).await {
                    Ok(updated) => item.claim = updated,
                    Err(e) => {
                        errors.push((item.claim_name().to_owned(), Error::AddFinalizer(e)));
                        continue;
                    }
                }
            }
            batch.push(item);
        }
        if batch.is_empty() {
            return errors;
        }
        self.driver.allocate(&mut batch, selected_node).await;
        for item in batch {
            let name = item.claim_name().to_owned();
            if let Some(e) = item.error {
                errors.push((name, Error::Driver(Box::new(e))));
                continue;
            }
            let Some(allocation) = item.allocation else {
                errors.push((name, Error::MissingAllocation));
                continue;
            };
            let mut claim = (*item.claim).clone();
            let status = claim.status.get_or_insert_with(Default::default);
            status.allocation = Some(allocation);
            status.driver_name = Some(self.name.clone());
            if let (Some(user), true) = (user, self.config.set_reserved_for) {
                status
                    .reserved_for
                    .get_or_insert_with(Vec::new)
                    .push(user.clone());
            }
            match self.write_claim(&claim, true).await {
                Ok(written) => self.driver.allocation_published(&written).await,
                Err(e) if e.kind == KubeCallErrorKind::NotFound => {
                    // The claim is gone (deleted while the driver allocated): the allocation can
                    // never be published, so the driver frees it now instead of holding it until
                    // its next reconcile.
                    if let Err(error) = self.driver.deallocate(&item.claim).await {
                        warn!(%error, claim.name = %name, "Failed to release the allocation of a claim gone before its status write; the driver's reconcile releases it");
                    }
                    errors.push((name, Error::AddAllocation(e)));
                }
                Err(e) => errors.push((name, Error::AddAllocation(e))),
            }
        }
        errors
    }
}
