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

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;
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

/// The node and device names of the ledger's allocations during a reconcile, each under a
/// number, so that what is held of an allocation is a few numbers and not its text.
#[derive(Default)]
struct Names(HashMap<Box<str>, u32>);

impl Names {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.0.get(name) {
            return id;
        }
        let id = self.0.len() as u32;
        self.0.insert(name.into(), id);
        id
    }

    /// The place (see [`place`]) of `node` and `devices`; `None` when a name is not known, so
    /// that no held allocation has that place.
    fn find_place<'a>(
        &self,
        node: &str,
        devices: impl IntoIterator<Item = &'a String>,
    ) -> Option<Box<[u32]>> {
        let node = *self.0.get(node)?;
        let devices: Option<Vec<u32>> = devices
            .into_iter()
            .map(|d| self.0.get(d.as_str()).copied())
            .collect();
        Some(place(node, devices?))
    }
}

/// The node and the set of devices of an allocation as numbers of [`Names`]: the node's, then
/// the distinct devices' in increasing order. Two allocations hold the same devices exactly when
/// their places are equal.
fn place(node: u32, mut devices: Vec<u32>) -> Box<[u32]> {
    devices.sort_unstable();
    devices.dedup();
    std::iter::once(node).chain(devices).collect()
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
        share_permille: BTreeMap::new(),
    }
}

/// What a reconcile keeps of one ledger allocation while it reads the claims: enough to judge
/// it, not the whole record (a reconcile may hold 100,000). The released allocation names its
/// claim and node in the log line of a release.
struct Held {
    /// The hash of the UID ([`uid_hash`]): the binary search compares these inline and reads
    /// the UID itself only when they are equal.
    hash: u64,
    /// The claim's UID.
    uid: Box<str>,
    /// The node and devices (see [`place`]).
    place: Box<[u32]>,
    pending: bool,
    /// A pending intent that may still be in flight.
    young: bool,
    /// Whether a listed claim has this UID.
    listed: bool,
}

/// A hash of `uid` that is the same in every process (SipHash with zero keys).
fn uid_hash(uid: &str) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(uid.as_bytes());
    hasher.finish()
}

impl Held {
    /// How an allocation that no claim shows is counted.
    fn drift(&self) -> DriftKind {
        if self.pending {
            DriftKind::StaleIntent
        } else {
            DriftKind::OrphanInLedger
        }
    }

    /// The release of this allocation, counted as `kind` when given.
    fn release(&self, kind: Option<DriftKind>) -> Step {
        Step::Release {
            uid: self.uid.to_string(),
            kind,
        }
    }
}

/// The ledger's allocations in compact form, in the order of their UIDs' hashes (UIDs may share
/// long prefixes, hashes hardly ever), and the names their places are numbers of.
struct HeldAllocations {
    held: Vec<Held>,
    names: Names,
}

impl HeldAllocations {
    fn get_mut(&mut self, uid: &str) -> Option<&mut Held> {
        let hash = uid_hash(uid);
        let at = self
            .held
            .binary_search_by(|h| h.hash.cmp(&hash).then_with(|| (*h.uid).cmp(uid)))
            .ok()?;
        self.held.get_mut(at)
    }
}

/// One repair a reconcile decided on.
enum Step {
    /// Confirm the pending intent of this claim UID, which its claim shows.
    Confirm(String),
    /// Release the allocation of a claim UID; counted as `kind` when given.
    Release {
        uid: String,
        kind: Option<DriftKind>,
    },
    /// Record an allocation a claim shows, counted as `kind`.
    Import {
        request: ImportRequest,
        kind: DriftKind,
    },
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

/// The decisions of a reconcile so far: the report, and the repairs to run once every claim
/// has been read (releases first, so that imports find the devices that orphans held).
struct Judgement {
    report: DriftReport,
    frees: Vec<Step>,
    imports: Vec<Step>,
}

impl LedgerDriver {
    /// Runs a reconcile now and returns what it found. Reconciles never overlap.
    ///
    /// The ledger's allocations are read first, in compact form, then the claims of the
    /// cluster page by page, each judged as it arrives; the repairs run once the whole list is
    /// read, so a failed list changes nothing. No allocation is made or released meanwhile
    /// (they wait for the reconcile), so the order of the two reads does not matter.
    pub async fn reconcile_now(&self) -> Result<DriftReport> {
        let _serial = self.reconcile_lock.write().await;
        let started = Instant::now();
        let takeover = self.takeover.load(std::sync::atomic::Ordering::SeqCst);
        let mut held = self.held_allocations(takeover).await?;
        let mut judgement = Judgement {
            report: DriftReport::new(),
            frees: Vec::new(),
            imports: Vec::new(),
        };
        judgement.report.allocations_checked = held.held.len() as u64;
        self.cluster
            .list_claims(&mut |page| {
                for claim in &page {
                    self.judge_claim(claim, &mut held, &mut judgement);
                }
            })
            .await
            .map_err(DriverError::ListClaims)?;
        let Judgement {
            mut report,
            mut frees,
            imports,
        } = judgement;
        for allocation in held.held {
            if allocation.listed {
                continue;
            }
            if allocation.young {
                report.in_flight += 1;
                continue;
            }
            frees.push(allocation.release(Some(allocation.drift())));
        }
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
        report.observe(self.keeper.observer(), started.elapsed());
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

    /// Every allocation of the ledger in compact form. After a takeover only this process's
    /// own hand-outs count as in flight.
    async fn held_allocations(&self, takeover: bool) -> Result<HeldAllocations> {
        let grace = self.config.grace_period;
        let now = now_ms();
        let mut held = self
            .keeper
            .call(move |ledger| {
                let mut names = Names::default();
                let mut held = Vec::new();
                each_allocation(ledger, |allocation| {
                    let pending = allocation.state == AllocationState::Pending;
                    let young = pending
                        && !takeover
                        && now.saturating_sub(allocation.created_ms) < grace.as_millis() as u64;
                    let node = names.intern(&allocation.node);
                    let devices = allocation.devices.iter().map(|d| names.intern(d));
                    held.push(Held {
                        hash: uid_hash(&allocation.claim.uid),
                        uid: allocation.claim.uid.into_boxed_str(),
                        place: place(node, devices.collect()),
                        pending,
                        young,
                        listed: false,
                    });
                })?;
                held.sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then_with(|| a.uid.cmp(&b.uid)));
                held.shrink_to_fit();
                Ok(HeldAllocations { held, names })
            })
            .await?;
        for allocation in &mut held.held {
            if allocation.pending && !allocation.young {
                allocation.young = self.state.recently_handed_out(&allocation.uid, grace);
            }
        }
        Ok(held)
    }

    /// Judges one listed claim against the ledger's allocation of its UID, if any.
    fn judge_claim(
        &self,
        claim: &ResourceClaim,
        held: &mut HeldAllocations,
        judgement: &mut Judgement,
    ) {
        let report = &mut judgement.report;
        report.claims_checked += 1;
        let Some(uid) = claim.metadata.uid.as_deref().filter(|uid| !uid.is_empty()) else {
            return;
        };
        let shown = claim_allocation(claim, &self.config.driver_name);
        let shown_place = match &shown {
            Ok(ClaimAllocationState::Ours(data)) => {
                held.names.find_place(&data.node, &data.devices)
            }
            _ => None,
        };
        let Some(allocation) = held.get_mut(uid) else {
            match shown {
                Ok(ClaimAllocationState::Ours(data)) => {
                    if !self
                        .state
                        .recently_deallocated(uid, self.config.grace_period)
                    {
                        judgement.imports.push(Step::Import {
                            request: import_request(claim, &data),
                            kind: DriftKind::MissingInLedger,
                        });
                    }
                }
                Err(reason) => self.bad_handle(report, claim, reason),
                Ok(_) => {}
            }
            return;
        };
        allocation.listed = true;
        match shown {
            Ok(ClaimAllocationState::Ours(_))
                if shown_place.as_ref() == Some(&allocation.place) =>
            {
                if allocation.pending {
                    judgement.frees.push(Step::Confirm(uid.to_owned()));
                }
            }
            // The claim list may predate a reallocation in flight: judge it next time.
            _ if allocation.young => report.in_flight += 1,
            Ok(ClaimAllocationState::Ours(data)) => {
                // The claim shows other devices than the ledger: the claim wins.
                judgement.frees.push(allocation.release(None));
                judgement.imports.push(Step::Import {
                    request: import_request(claim, &data),
                    kind: DriftKind::DeviceMismatch,
                });
            }
            Err(reason) => self.bad_handle(report, claim, reason),
            Ok(_) => judgement
                .frees
                .push(allocation.release(Some(allocation.drift()))),
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

    async fn run_step(&self, step: Step) -> Tally {
        match step {
            Step::Confirm(uid) => {
                let call = uid.clone();
                match self.keeper.call(move |l| l.confirm(&call)).await {
                    Ok(_) => Tally {
                        confirmed: 1,
                        ..Tally::default()
                    },
                    Err(e) => Tally {
                        error: Some(format!("confirm {uid}: {e}")),
                        ..Tally::default()
                    },
                }
            }
            Step::Release { uid, kind } => self.release(uid, kind).await,
            Step::Import { request, kind } => self.import(request, kind).await,
        }
    }

    async fn release(&self, uid: String, kind: Option<DriftKind>) -> Tally {
        let call = uid.clone();
        match self.keeper.call(move |l| l.release(&call)).await {
            Ok(released) => {
                if let Some(released) = released {
                    let claim = &released.claim;
                    info!(claim.uid = %uid, claim.name = %format_args!("{}/{}", claim.namespace, claim.name), node = %released.node, kind = kind.map_or("replaced", DriftKind::as_str), "Released ledger allocation the cluster does not show");
                }
                Tally {
                    released: 1,
                    drift: kind,
                    ..Tally::default()
                }
            }
            Err(e) => Tally {
                error: Some(format!("release {uid}: {e}")),
                ..Tally::default()
            },
        }
    }

    async fn import(&self, request: ImportRequest, kind: DriftKind) -> Tally {
        let name = format!("{}/{}", request.claim.namespace, request.claim.name);
        let (uid, node) = (request.claim.uid.clone(), request.node.clone());
        match self.keeper.call(move |l| l.import(request)).await {
            Ok(_) => {
                info!(claim.uid = %uid, claim.name = %name, node = %node, kind = kind.as_str(), "Imported allocation from the cluster");
                Tally {
                    imported: 1,
                    drift: Some(kind),
                    ..Tally::default()
                }
            }
            Err(DriverError::Ledger(e @ LedgerError::DeviceConflict { .. })) => {
                warn!(error = %e, claim.name = %name, "Claim allocation conflicts with the ledger");
                Tally {
                    drift: Some(DriftKind::DeviceConflict),
                    error: Some(format!("{name}: {e}")),
                    ..Tally::default()
                }
            }
            Err(e) => Tally {
                error: Some(format!("import {name}: {e}")),
                ..Tally::default()
            },
        }
    }
}

/// Every allocation of the ledger.
pub(crate) fn all_allocations(
    ledger: &dra_allocator::ledger::Ledger,
) -> std::result::Result<Vec<Allocation>, LedgerError> {
    let mut out = Vec::new();
    each_allocation(ledger, |allocation| out.push(allocation))?;
    Ok(out)
}

/// Calls `visit` with every allocation of the ledger, reading a page at a time.
pub(crate) fn each_allocation(
    ledger: &dra_allocator::ledger::Ledger,
    mut visit: impl FnMut(Allocation),
) -> std::result::Result<(), LedgerError> {
    let mut query = AllocationQuery {
        limit: 1000,
        ..AllocationQuery::default()
    };
    loop {
        let page = ledger.allocations(&query)?;
        page.items.into_iter().for_each(&mut visit);
        match page.next {
            Some(next) => query.after = Some(next),
            None => return Ok(()),
        }
    }
}

/// How many repairs run at once (the ledger's group commit batches them).
const PARALLEL_STEPS: usize = 16;

/// How long a background reconcile waits before retrying after a failure.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::{place, uid_hash, Held, HeldAllocations, Names};

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    /// The place of `node` and `devices`, numbering new names in `known`.
    fn held(known: &mut Names, node: &str, devices: &[&str]) -> Box<[u32]> {
        let node = known.intern(node);
        place(node, devices.iter().map(|d| known.intern(d)).collect())
    }

    #[test]
    fn every_held_uid_is_found_and_no_other() {
        let uids: Vec<String> = (0..1000)
            .map(|i| format!("00000000-0000-0000-0000-{i:012}"))
            .collect();
        let mut held: Vec<Held> = uids
            .iter()
            .map(|uid| Held {
                hash: uid_hash(uid),
                uid: uid.as_str().into(),
                place: place(0, vec![1]),
                pending: false,
                young: false,
                listed: false,
            })
            .collect();
        held.sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then_with(|| a.uid.cmp(&b.uid)));
        let mut allocations = HeldAllocations {
            held,
            names: Names::default(),
        };
        for uid in &uids {
            assert_eq!(
                allocations.get_mut(uid).map(|h| h.uid.to_string()).as_ref(),
                Some(uid)
            );
        }
        assert!(allocations
            .get_mut("00000000-0000-0000-0000-000000001000")
            .is_none());
        assert!(allocations.get_mut("").is_none());
    }

    #[test]
    fn places_compare_the_node_and_the_set_of_devices() {
        let mut known = Names::default();
        let a = held(&mut known, "node-1", &["gpu-1", "gpu-0"]);
        held(&mut known, "node-2", &["gpu-2"]);
        let find = |node: &str, devices: &[&str]| known.find_place(node, &names(devices));
        assert_eq!(
            Some(&a),
            find("node-1", &["gpu-0", "gpu-1", "gpu-0"]).as_ref()
        );
        assert_ne!(Some(&a), find("node-2", &["gpu-0", "gpu-1"]).as_ref());
        assert_ne!(Some(&a), find("node-1", &["gpu-0"]).as_ref());
        assert_ne!(
            Some(&a),
            find("node-1", &["gpu-0", "gpu-1", "gpu-2"]).as_ref()
        );
        // A node's name in a device's place (and the reverse) is another place.
        assert_ne!(Some(&a), find("gpu-1", &["node-1", "gpu-0"]).as_ref());
        // A name no held allocation has is no place of theirs.
        assert_eq!(find("node-1", &["gpu-9"]), None);
        assert_eq!(find("node-9", &["gpu-0"]), None);
    }
}
