//! The mirror's work on the ledger: the inventory per node from the cached slices, one claim as
//! the watch delivers it, a complete claim listing with the drift it shows (the start, a
//! re-listing of the watch, the periodic and the requested reconcile), and the explanation
//! events of claims that wait. Every method here runs under the mirror's cache lock.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use chrono::Utc;
use dra_allocator::ledger::{AdminAccessQuery, ImportRequest, LedgerError};
use dra_allocator::model::Device;
use dra_types::resource_v1::{DeviceClass, ResourceClaim};
use futures::StreamExt;
use kube::api::{Api, ListParams};
use tracing::{debug, info, warn};

use super::explain::{asked, explanation, our_classes, waiting_claim, REASON};
use super::mapping::{
    claim_mirror, plan, slice_inventory, steps_for, unpublished, ClaimMirror, Plan,
};
use super::{Cache, Mirror};
use crate::driver::reconcile::all_allocations;
use crate::driver::{DriftKind, DriftReport, DriverError, Result};
use dra_framework::kube_call_error;
use dra_metrics::{AllocationMode, AllocationOutcome, DeallocationOutcome};
use dra_runtime::events::EventRecord;

/// How many ledger writes of a reconcile run at once (the ledger's group commit batches them).
const PARALLEL_WRITES: usize = 16;

/// The UID of a claim, if it has one.
pub(super) fn uid_of(claim: &ResourceClaim) -> Option<String> {
    claim.metadata.uid.clone().filter(|u| !u.is_empty())
}

fn name_of(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Mirror {
    /// Recomputes the inventory from the cached slices and writes each node whose devices
    /// changed since they were last written; with `every_node`, every node the slices or the
    /// ledger know is checked against the ledger (a node the slices no longer name gets no
    /// devices: its allocated ones become missing).
    pub(super) async fn sync_inventory(&self, cache: &mut Cache, every_node: bool) {
        let driver = &self.config.driver_name;
        cache.inventory = slice_inventory(driver, cache.slices.values());
        let mut nodes: BTreeSet<String> = cache.inventory.devices.keys().cloned().collect();
        nodes.extend(cache.written.keys().cloned());
        if every_node {
            match self.keeper.call(dra_allocator::ledger::Ledger::nodes).await {
                Ok(known) => nodes.extend(known.into_iter().map(|n| n.node)),
                Err(error) => warn!(%error, "Failed to read the ledger's nodes"),
            }
        }
        let pending: Vec<(String, Vec<Device>)> = nodes
            .into_iter()
            .map(|node| {
                let devices = cache.inventory.devices_of(&node);
                (node, devices)
            })
            .filter(|(node, devices)| every_node || cache.written.get(node) != Some(devices))
            .collect();
        for skipped in cache
            .inventory
            .skipped
            .iter()
            .filter(|s| pending.iter().any(|(node, _)| *node == s.node))
        {
            warn!(node = %skipped.node, device = %skipped.device, attribute = %skipped.attribute, reason = %skipped.reason, "Dropped device attribute");
        }
        for (node, result) in self.keeper.write_inventories(pending).await {
            match result {
                Ok(()) => {
                    let devices = cache.inventory.devices_of(&node);
                    cache.written.insert(node, devices);
                }
                Err(error) => {
                    // Written again by the next change or reconcile.
                    warn!(%error, node = %node, "Failed to update inventory");
                    cache.written.remove(&node);
                }
            }
        }
        self.sync_health(cache, every_node).await;
        self.publish_capacity(cache);
    }

    /// Logs a claim's problem when it differs from the last one logged for it.
    fn note_problem(cache: &mut Cache, uid: &str, problem: Option<&str>) {
        match problem {
            Some(problem) if cache.problems.get(uid).map(String::as_str) != Some(problem) => {
                warn!(claim.uid = %uid, problem, "Claim allocation cannot be mirrored as it is");
                cache.problems.insert(uid.to_owned(), problem.to_owned());
            }
            Some(_) => {}
            None => {
                cache.problems.remove(uid);
            }
        }
    }

    /// Brings the ledger in line with `claim` as the watch delivered it: recorded, replaced,
    /// released or left alone. Differences here are the ordinary course, not drift.
    pub(super) async fn apply_claim(&self, cache: &mut Cache, claim: ResourceClaim) {
        let Some(uid) = uid_of(&claim) else { return };
        let mirror = claim_mirror(&claim, &self.config.driver_name, &cache.inventory);
        Self::note_problem(cache, &uid, mirror.problem.as_deref());
        cache.claims.insert(uid.clone(), claim);
        self.publish_capacity(cache);
        if let Err(error) = self.converge(&uid, mirror.allocation.as_ref()).await {
            warn!(%error, claim.uid = %uid, "Failed to mirror claim allocation; the next reconcile repairs it");
        }
        if let Err(error) = self
            .converge_admin(&uid, mirror.admin_access.as_ref())
            .await
        {
            warn!(%error, claim.uid = %uid, "Failed to mirror claim admin access; the next reconcile repairs it");
        }
    }

    /// Forgets a deleted claim and releases its allocation.
    pub(super) async fn forget_claim(&self, cache: &mut Cache, claim: &ResourceClaim) {
        let Some(uid) = uid_of(claim) else { return };
        cache.claims.remove(&uid);
        cache.problems.remove(&uid);
        cache.explained.remove(&uid);
        self.publish_capacity(cache);
        if let Err(error) = self.converge(&uid, None).await {
            warn!(%error, claim.uid = %uid, "Failed to release the allocation of a deleted claim; the next reconcile repairs it");
        }
        if let Err(error) = self.converge_admin(&uid, None).await {
            warn!(%error, claim.uid = %uid, "Failed to release the admin access of a deleted claim; the next reconcile repairs it");
        }
    }

    /// Applies the steps from the ledger's allocation of `uid` to `shown`.
    async fn converge(&self, uid: &str, shown: Option<&ImportRequest>) -> Result<()> {
        let key = uid.to_owned();
        let held = self.keeper.call(move |l| l.allocation(&key)).await?;
        let steps = steps_for(held.as_ref(), shown);
        if steps.release {
            self.release(uid).await?;
        }
        if let Some(request) = steps.import {
            self.import(request).await?;
        }
        Ok(())
    }

    async fn release(&self, uid: &str) -> Result<()> {
        let key = uid.to_owned();
        if let Some(released) = self.keeper.call(move |l| l.release(&key)).await? {
            self.keeper
                .observer()
                .deallocation(DeallocationOutcome::Released);
            info!(claim.uid = %uid, claim.name = %format!("{}/{}", released.claim.namespace, released.claim.name), node = %released.node, "Released the allocation the cluster no longer shows");
        }
        Ok(())
    }

    async fn import(&self, request: ImportRequest) -> Result<()> {
        let (uid, node) = (request.claim.uid.clone(), request.node.clone());
        let name = format!("{}/{}", request.claim.namespace, request.claim.name);
        let started = Instant::now();
        self.keeper.call(move |l| l.import(request)).await?;
        self.keeper.observer().allocation(
            AllocationMode::Mirrored,
            AllocationOutcome::Allocated,
            1,
            started.elapsed(),
        );
        info!(claim.uid = %uid, claim.name = %name, node = %node, "Mirrored allocation from the cluster");
        Ok(())
    }

    /// Mirrors a complete claim `listing` (by UID) into the ledger and reports the drift: the
    /// ledger's allocations the listing does not show are released, the listing's the ledger
    /// lacks are recorded, differing ones replaced; claims in `unsettled` are left to the watch.
    /// Also counted: unreadable allocations and allocated devices no slice publishes.
    pub(super) async fn mirror_listing(
        &self,
        cache: &mut Cache,
        listing: &BTreeMap<String, ResourceClaim>,
        unsettled: &BTreeSet<String>,
    ) -> Result<DriftReport> {
        let started = Instant::now();
        let held = self.keeper.call(all_allocations).await?;
        let held_admin = self
            .keeper
            .call(|l| l.admin_accesses(&AdminAccessQuery::default()))
            .await?;
        let driver = &self.config.driver_name;
        let shown: BTreeMap<String, ClaimMirror> = listing
            .iter()
            .filter(|(uid, _)| !unsettled.contains(*uid))
            .map(|(uid, claim)| (uid.clone(), claim_mirror(claim, driver, &cache.inventory)))
            .collect();
        self.publish_capacity(cache);
        let mut report = DriftReport::new();
        report.claims_checked = listing.len() as u64;
        report.allocations_checked = held.len() as u64;
        let mut missing = Vec::new();
        for (uid, mirror) in &shown {
            Self::note_problem(cache, uid, mirror.problem.as_deref());
            if let Some(problem) = &mirror.problem {
                report.add(DriftKind::BadHandleData);
                report.errors.push(problem.clone());
            }
            if let Some(allocation) = &mirror.allocation {
                for device in unpublished(allocation, &cache.inventory) {
                    report.add(DriftKind::UnpublishedDevice);
                    missing.push(format!("{}/{device}", allocation.node));
                }
            }
            for device in &mirror.admin_unpublished {
                report.add(DriftKind::UnpublishedDevice);
                missing.push(device.clone());
            }
        }
        if !missing.is_empty() {
            warn!(devices = ?missing, "Claims are allocated (or have admin access to) devices that no ResourceSlice publishes");
        }
        let mut plan = plan(&held, &held_admin, &shown, unsettled);
        report.in_flight = plan.in_flight;
        let admin = std::mem::take(&mut plan.admin);
        self.run_plan(plan, &mut report).await;
        self.run_admin_plan(admin, &mut report).await;
        report.errors.sort();
        report.duration_ms = started.elapsed().as_millis() as u64;
        report.observe(self.keeper.observer(), started.elapsed());
        if report.total_drift() > 0 || !report.errors.is_empty() {
            info!(drift = ?report.drift, errors = report.errors.len(), "Reconciled ledger with the cluster's claims");
        } else {
            debug!(
                claims = report.claims_checked,
                "Reconciled ledger with the cluster's claims"
            );
        }
        Ok(report)
    }

    /// Runs the steps of `plan`, releases first (so that imports find the devices that
    /// orphans held), and counts what they did in `report`.
    async fn run_plan(&self, mut plan: Plan, report: &mut DriftReport) {
        let releases: Vec<String> = plan
            .steps
            .iter()
            .filter(|(_, steps)| steps.release)
            .map(|(uid, _)| uid.clone())
            .collect();
        let outcomes: Vec<(String, Result<()>)> = futures::stream::iter(releases)
            .map(|uid| async move {
                let result = self.release(&uid).await;
                (uid, result)
            })
            .buffer_unordered(PARALLEL_WRITES)
            .collect()
            .await;
        for (uid, result) in outcomes {
            let steps = plan.steps.get_mut(&uid);
            match result {
                Ok(()) => {
                    report.released += 1;
                    if let Some(steps) = steps.filter(|s| s.import.is_none()) {
                        report.add(steps.drift.unwrap_or(DriftKind::OrphanInLedger));
                    }
                }
                Err(error) => {
                    report.errors.push(format!("release {uid}: {error}"));
                    // Not released: importing the claim's other devices would conflict.
                    if let Some(steps) = steps {
                        steps.import = None;
                    }
                }
            }
        }
        let imports: Vec<(ImportRequest, Option<DriftKind>)> = plan
            .steps
            .into_values()
            .filter_map(|steps| steps.import.map(|i| (i, steps.drift)))
            .collect();
        let imported: Vec<_> = futures::stream::iter(imports)
            .map(|(request, kind)| async move {
                let name = format!("{}/{}", request.claim.namespace, request.claim.name);
                (name, kind, self.import(request).await)
            })
            .buffer_unordered(PARALLEL_WRITES)
            .collect()
            .await;
        for (name, kind, result) in imported {
            match result {
                Ok(()) => {
                    report.imported += 1;
                    if let Some(kind) = kind {
                        report.add(kind);
                    }
                }
                Err(DriverError::Ledger(error @ LedgerError::DeviceConflict { .. })) => {
                    warn!(%error, claim.name = %name, "Claim allocation conflicts with the ledger");
                    report.add(DriftKind::DeviceConflict);
                    report.errors.push(format!("{name}: {error}"));
                }
                Err(error) => report.errors.push(format!("import {name}: {error}")),
            }
        }
    }

    /// Reconciles now against a fresh list of every claim: the same as the start, with the
    /// inventory of every node checked again. A claim whose listed version the watch has not
    /// delivered yet (or whose deletion it has not) is left to the watch.
    pub async fn reconcile_now(&self) -> Result<DriftReport> {
        let mut cache = self.cache.lock().await;
        let listing: BTreeMap<String, ResourceClaim> = self
            .list_claims()
            .await?
            .into_iter()
            .filter_map(|claim| uid_of(&claim).map(|uid| (uid, claim)))
            .collect();
        let version = |claim: &ResourceClaim| claim.metadata.resource_version.clone();
        let unsettled: BTreeSet<String> = listing
            .keys()
            .chain(cache.claims.keys())
            .filter(|uid| listing.get(*uid).map(version) != cache.claims.get(*uid).map(version))
            .cloned()
            .collect();
        self.sync_inventory(&mut cache, true).await;
        self.mirror_listing(&mut cache, &listing, &unsettled).await
    }

    /// Every claim of the cluster, page by page.
    async fn list_claims(&self) -> Result<Vec<ResourceClaim>> {
        let api = Api::<ResourceClaim>::all(self.client.clone());
        let mut claims = Vec::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|e| DriverError::ListClaims(kube_call_error(e)))?;
            claims.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(claims),
            }
        }
    }

    /// Posts the explanation of every claim of our classes that waits, unless the same text
    /// was posted for it before.
    pub(super) async fn explain_waiting(&self) {
        let mut cache = self.cache.lock().await;
        let now = Utc::now();
        let waiting: Vec<ResourceClaim> = cache
            .claims
            .values()
            .filter(|claim| waiting_claim(claim, now, self.config.explain_after))
            .cloned()
            .collect();
        let uids: BTreeSet<String> = waiting.iter().filter_map(uid_of).collect();
        cache.explained.retain(|uid, _| uids.contains(uid));
        if waiting.is_empty() {
            return;
        }
        let classes = match Api::<DeviceClass>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(error) => {
                warn!(%error, "Cannot list DeviceClasses; unallocated claims are not explained");
                return;
            }
        };
        let driver = &self.config.driver_name;
        let ours = our_classes(&classes, driver);
        let counts = match self
            .keeper
            .call(dra_allocator::ledger::Ledger::utilisation)
            .await
        {
            Ok(utilisation) => utilisation.totals,
            Err(error) => {
                warn!(%error, "Cannot read the ledger's utilisation");
                return;
            }
        };
        let unhealthy_free = self.unhealthy_free().await;
        for claim in waiting {
            let (Some(uid), Some(asked)) = (uid_of(&claim), asked(&claim.spec, &ours)) else {
                continue;
            };
            let note = explanation(driver, &asked, &counts, &unhealthy_free);
            if cache.explained.get(&uid) == Some(&note) {
                continue;
            }
            match self.post_explanation(&claim, &note).await {
                Ok(()) => {
                    debug!(claim.name = %name_of(&claim), note, "Explained unallocated claim");
                    cache.explained.insert(uid, note);
                }
                Err(error) => warn!(%error, claim.name = %name_of(&claim), "Failed to post event"),
            }
        }
    }

    /// Posts the Warning event `note` about `claim`.
    async fn post_explanation(&self, claim: &ResourceClaim, note: &str) -> kube::Result<()> {
        self.recorder
            .post("Mirror", EventRecord::warning(claim, REASON, note))
            .await
    }
}
