//! The reconcile of the ledger with the claims of the cluster, at start, every
//! `reconcile_interval` and on demand (`POST /v1/reconcile`):
//!
//! - a pending intent whose claim shows our allocation (same node and devices) is confirmed;
//! - a pending intent whose claim is gone, unallocated or allocated otherwise is released once it
//!   is older than the grace period (younger ones may still be in flight, or the claim list may
//!   predate them, and are left alone);
//! - a confirmed allocation whose claim is gone, unallocated or allocated otherwise is an orphan
//!   and released;
//! - an allocation of ours that a claim shows and the ledger lacks is imported (this rebuilds a
//!   lost or empty ledger); one with other devices than the ledger has is replaced by the
//!   claim's;
//! - after a leader takeover ([`LedgerDriver::mark_takeover`]) no pending intent of a previous
//!   process is in flight, so none is left for later: the cluster decides each at once;
//! - handle data that does not parse is an error for that claim: logged, counted, left alone.
//!
//! Every difference is counted by [`DriftKind`] in the returned [`DriftReport`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dra_allocator::ledger::{
    Allocation, AllocationQuery, AllocationState, ClaimRef, ImportRequest, LedgerError,
};
use futures::StreamExt;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::ResourceExt;
use serde::Serialize;
use tracing::{debug, info, warn};

use super::handle::{claim_allocation, ClaimAllocationState, HandleData, HandleDataError};
use super::{DriftKind, DriverError, DriverObserver, LedgerDriver, Result};

/// What a reconcile found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DriftReport {
    /// Claims listed from the cluster.
    pub claims_checked: u64,
    /// Allocations the ledger held at the start.
    pub allocations_checked: u64,
    /// Pending intents confirmed because their claim shows the allocation (not drift).
    pub confirmed: u64,
    /// Allocations released from the ledger.
    pub released: u64,
    /// Allocations imported from claims into the ledger.
    pub imported: u64,
    /// Pending intents left alone because they are younger than the grace period.
    pub in_flight: u64,
    /// Differences by kind; every kind is present, most with 0.
    pub drift: BTreeMap<&'static str, u64>,
    /// One line per claim that could not be reconciled.
    pub errors: Vec<String>,
    /// How long the reconcile took, in milliseconds.
    pub duration_ms: u64,
}

impl DriftReport {
    /// An empty report: every kind present with 0.
    pub fn new() -> Self {
        DriftReport {
            drift: DriftKind::ALL.iter().map(|k| (k.as_str(), 0)).collect(),
            ..DriftReport::default()
        }
    }

    /// The count of `kind`.
    pub fn count(&self, kind: DriftKind) -> u64 {
        self.drift.get(kind.as_str()).copied().unwrap_or(0)
    }

    /// All differences together.
    pub fn total_drift(&self) -> u64 {
        self.drift.values().sum()
    }

    /// Counts one difference of `kind`.
    pub fn add(&mut self, kind: DriftKind) {
        *self.drift.entry(kind.as_str()).or_insert(0) += 1;
    }

    /// Reports the drift found (each kind seen) and the reconcile's duration `took` to
    /// `observer`.
    pub(crate) fn observe(&self, observer: &dyn DriverObserver, took: Duration) {
        for kind in DriftKind::ALL {
            let count = self.count(kind);
            if count > 0 {
                observer.drift(kind, count);
            }
        }
        observer.reconcile(took);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn claim_name(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    )
}

/// Whether the claim's handle data shows the ledger's allocation: same node, same set of devices.
pub(super) fn same_devices(allocation: &Allocation, data: &HandleData) -> bool {
    allocation.node == data.node
        && allocation.devices.iter().collect::<BTreeSet<_>>()
            == data.devices.iter().collect::<BTreeSet<_>>()
}

/// The pod a claim is reserved for, if any.
fn reserved_pod(claim: &ResourceClaim) -> Option<String> {
    claim
        .status
        .as_ref()?
        .reserved_for
        .as_ref()?
        .iter()
        .find(|r| r.resource == "pods")
        .map(|r| r.uid.clone())
}

fn import_request(claim: &ResourceClaim, data: &HandleData) -> ImportRequest {
    ImportRequest {
        claim: ClaimRef::new(
            data.claim_uid.clone(),
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
        ),
        pod_uid: reserved_pod(claim),
        node: data.node.clone(),
        devices: data.devices.clone(),
        sharing: data.sharing.into(),
    }
}

/// One repair a reconcile decided on.
enum Step<'a> {
    /// Confirm a pending intent the claim shows.
    Confirm(&'a Allocation),
    /// Release an allocation; counted as `kind` when given.
    Release(&'a Allocation, Option<DriftKind>),
    /// Record an allocation a claim shows, counted as `kind`.
    Import(&'a ResourceClaim, HandleData, DriftKind),
}

/// What one step did.
#[derive(Default)]
struct Tally {
    confirmed: u64,
    released: u64,
    imported: u64,
    drift: Option<DriftKind>,
    error: Option<String>,
}

impl DriftReport {
    fn merge(&mut self, tally: Tally) {
        self.confirmed += tally.confirmed;
        self.released += tally.released;
        self.imported += tally.imported;
        if let Some(kind) = tally.drift {
            self.add(kind);
        }
        self.errors.extend(tally.error);
    }
}

impl LedgerDriver {
    /// Runs a reconcile now and returns what it found. Reconciles never overlap.
    pub async fn reconcile_now(&self) -> Result<DriftReport> {
        let _serial = self.reconcile_lock.write().await;
        let started = Instant::now();
        let takeover = self.takeover.load(std::sync::atomic::Ordering::SeqCst);
        let claims = self
            .cluster
            .list_claims()
            .await
            .map_err(DriverError::ListClaims)?;
        let allocations = self.ledger_call(all_allocations).await?;
        let mut report = DriftReport::new();
        report.claims_checked = claims.len() as u64;
        report.allocations_checked = allocations.len() as u64;
        let by_uid: HashMap<&str, &ResourceClaim> = claims
            .iter()
            .filter_map(|c| c.metadata.uid.as_deref().map(|uid| (uid, c)))
            .collect();
        let known: HashSet<&str> = allocations.iter().map(|a| a.claim.uid.as_str()).collect();
        let (mut frees, mut imports) = (Vec::new(), Vec::new());
        for allocation in &allocations {
            self.judge_allocation(
                allocation,
                &by_uid,
                takeover,
                &mut report,
                &mut frees,
                &mut imports,
            );
        }
        for claim in &claims {
            let uid = claim.metadata.uid.as_deref().unwrap_or_default();
            if uid.is_empty() || known.contains(uid) {
                continue;
            }
            match claim_allocation(claim, &self.config.driver_name) {
                Ok(ClaimAllocationState::Ours(data)) => {
                    if !self
                        .state
                        .recently_deallocated(uid, self.config.grace_period)
                    {
                        imports.push(Step::Import(claim, data, DriftKind::MissingInLedger));
                    }
                }
                Err(reason) => self.bad_handle(&mut report, claim, reason),
                Ok(_) => {}
            }
        }
        // Frees first, so that imports find the devices that orphans held.
        for steps in [frees, imports] {
            let runs: Vec<_> = steps.into_iter().map(|step| self.run_step(step)).collect();
            let tallies: Vec<Tally> = futures::stream::iter(runs)
                .buffer_unordered(PARALLEL_STEPS)
                .collect()
                .await;
            for tally in tallies {
                report.merge(tally);
            }
        }
        report.errors.sort();
        if takeover && report.errors.is_empty() {
            self.takeover
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
        report.duration_ms = started.elapsed().as_millis() as u64;
        report.observe(self.observer.as_ref(), started.elapsed());
        if report.total_drift() > 0 || !report.errors.is_empty() {
            info!(drift = ?report.drift, errors = report.errors.len(), confirmed = report.confirmed, "Reconciled ledger with the cluster");
        } else {
            debug!(
                confirmed = report.confirmed,
                "Reconciled ledger with the cluster"
            );
        }
        Ok(report)
    }

    /// Decides what to do with one ledger allocation given the claims of the cluster. After a
    /// takeover only this process's own hand-outs count as in flight.
    fn judge_allocation<'a>(
        &self,
        allocation: &'a Allocation,
        by_uid: &HashMap<&str, &'a ResourceClaim>,
        takeover: bool,
        report: &mut DriftReport,
        frees: &mut Vec<Step<'a>>,
        imports: &mut Vec<Step<'a>>,
    ) {
        let pending = allocation.state == AllocationState::Pending;
        let young = pending
            && ((!takeover
                && now_ms().saturating_sub(allocation.created_ms)
                    < self.config.grace_period.as_millis() as u64)
                || self
                    .state
                    .recently_handed_out(&allocation.claim.uid, self.config.grace_period));
        let shown = by_uid
            .get(allocation.claim.uid.as_str())
            .map(|claim| (*claim, claim_allocation(claim, &self.config.driver_name)));
        match shown {
            Some((_, Ok(ClaimAllocationState::Ours(data)))) if same_devices(allocation, &data) => {
                if pending {
                    frees.push(Step::Confirm(allocation));
                }
            }
            // The claim list may predate a reallocation in flight: judge it next time.
            _ if young => report.in_flight += 1,
            Some((claim, Ok(ClaimAllocationState::Ours(data)))) => {
                // The claim shows other devices than the ledger: the claim wins.
                frees.push(Step::Release(allocation, None));
                imports.push(Step::Import(claim, data, DriftKind::DeviceMismatch));
            }
            Some((claim, Err(reason))) => self.bad_handle(report, claim, reason),
            _ => {
                let kind = if pending {
                    DriftKind::StaleIntent
                } else {
                    DriftKind::OrphanInLedger
                };
                frees.push(Step::Release(allocation, Some(kind)));
            }
        }
    }

    fn bad_handle(&self, report: &mut DriftReport, claim: &ResourceClaim, source: HandleDataError) {
        let error = DriverError::HandleData {
            claim: claim_name(claim),
            source,
        };
        warn!(%error, driver = %self.config.driver_name, "Claim allocation cannot be reconciled");
        report.add(DriftKind::BadHandleData);
        report.errors.push(error.to_string());
    }

    async fn run_step(&self, step: Step<'_>) -> Tally {
        match step {
            Step::Confirm(allocation) => {
                let uid = allocation.claim.uid.clone();
                match self.ledger_call(move |l| l.confirm(&uid)).await {
                    Ok(_) => Tally {
                        confirmed: 1,
                        ..Tally::default()
                    },
                    Err(e) => Tally {
                        error: Some(format!("confirm {}: {e}", allocation.claim.uid)),
                        ..Tally::default()
                    },
                }
            }
            Step::Release(allocation, kind) => self.release(allocation, kind).await,
            Step::Import(claim, data, kind) => self.import(claim, &data, kind).await,
        }
    }

    async fn release(&self, allocation: &Allocation, kind: Option<DriftKind>) -> Tally {
        let uid = allocation.claim.uid.clone();
        match self.ledger_call(move |l| l.release(&uid)).await {
            Ok(_) => {
                info!(claim.uid = %allocation.claim.uid, claim.name = %allocation.claim.name, node = %allocation.node, kind = kind.map_or("replaced", DriftKind::as_str), "Released ledger allocation the cluster does not show");
                Tally {
                    released: 1,
                    drift: kind,
                    ..Tally::default()
                }
            }
            Err(e) => Tally {
                error: Some(format!("release {}: {e}", allocation.claim.uid)),
                ..Tally::default()
            },
        }
    }

    async fn import(&self, claim: &ResourceClaim, data: &HandleData, kind: DriftKind) -> Tally {
        let request = import_request(claim, data);
        match self.ledger_call(move |l| l.import(request)).await {
            Ok(_) => {
                info!(claim.uid = %data.claim_uid, claim.name = %claim_name(claim), node = %data.node, kind = kind.as_str(), "Imported allocation from the cluster");
                Tally {
                    imported: 1,
                    drift: Some(kind),
                    ..Tally::default()
                }
            }
            Err(DriverError::Ledger(e @ LedgerError::DeviceConflict { .. })) => {
                warn!(error = %e, claim.name = %claim_name(claim), "Claim allocation conflicts with the ledger");
                Tally {
                    drift: Some(DriftKind::DeviceConflict),
                    error: Some(format!("{}: {e}", claim_name(claim))),
                    ..Tally::default()
                }
            }
            Err(e) => Tally {
                error: Some(format!("import {}: {e}", claim_name(claim))),
                ..Tally::default()
            },
        }
    }
}

/// Every allocation of the ledger, page by page.
pub(crate) fn all_allocations(
    ledger: &dra_allocator::ledger::Ledger,
) -> std::result::Result<Vec<Allocation>, LedgerError> {
    let mut out = Vec::new();
    let mut query = AllocationQuery {
        limit: 1000,
        ..AllocationQuery::default()
    };
    loop {
        let page = ledger.allocations(&query)?;
        out.extend(page.items);
        match page.next {
            Some(next) => query.after = Some(next),
            None => return Ok(out),
        }
    }
}

/// How many repairs run at once (the ledger's group commit batches them).
const PARALLEL_STEPS: usize = 16;

/// How long a background reconcile waits before retrying after a failure.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(5);
