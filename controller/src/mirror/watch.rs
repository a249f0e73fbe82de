//! The mirror's loop: the watches of this driver's v1 ResourceSlices and of every v1
//! ResourceClaim, the first complete mirror once both have listed (after which the mirror is
//! ready and events write the ledger as they come), the periodic reconcile and the explanation
//! pass; every claim delivered also goes to the idle claims (a listing replaces them). Stops
//! when the shutdown future completes, between two steps: a step that started finishes its
//! ledger writes.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dra_allocator::idle::ClaimUse;
use dra_types::resource_v1::{ResourceClaim, ResourceSlice};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tracing::{info, warn};

use super::sync::uid_of;
use super::Mirror;
use crate::driver::reconcile::RETRY_DELAY;

/// What the loop knows beyond the cache: listings in progress and whether each watch has
/// completed one.
#[derive(Default)]
struct Listings {
    slices: Option<BTreeMap<String, ResourceSlice>>,
    claims: Option<BTreeMap<String, ResourceClaim>>,
    slices_listed: bool,
    claims_listed: bool,
}

fn every(period: Duration) -> tokio::time::Interval {
    let period = period.max(Duration::from_millis(10));
    let mut interval = interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// Watches and mirrors until `shutdown` completes. The first complete mirror (both listings
/// written, ledger allocations of vanished claims released) sets the readiness flags; it is
/// retried until it succeeds.
pub async fn run_mirror(mirror: Arc<Mirror>, shutdown: impl Future<Output = ()> + Send) {
    tokio::pin!(shutdown);
    let driver = mirror.config.driver_name.clone();
    let slice_api = Api::<ResourceSlice>::all(mirror.client.clone());
    let slices = watcher(
        slice_api,
        watcher::Config::default().fields(&format!("spec.driver={driver}")),
    )
    .default_backoff();
    let claims = watcher(
        Api::<ResourceClaim>::all(mirror.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    tokio::pin!(slices, claims);
    let mut listings = Listings::default();
    let mut reconcile = every(mirror.config.reconcile_interval);
    let mut explain = every(mirror.config.explain_interval);
    let mut retry = every(RETRY_DELAY);
    loop {
        let ready = mirror.keeper.readiness().is_ready();
        let listed = listings.slices_listed && listings.claims_listed;
        tokio::select! {
            () = &mut shutdown => return,
            event = slices.next() => match event {
                Some(event) => on_slice(&mirror, &mut listings, event).await,
                None => return,
            },
            event = claims.next() => match event {
                Some(event) => on_claim(&mirror, &mut listings, event).await,
                None => return,
            },
            _ = reconcile.tick(), if ready => {
                if let Err(error) = mirror.reconcile_now().await {
                    warn!(%error, "Periodic reconcile failed");
                }
            }
            _ = explain.tick(), if ready => mirror.explain_waiting().await,
            _ = retry.tick(), if listed && !ready => {}
        }
        if !mirror.keeper.readiness().is_ready() && listings.slices_listed && listings.claims_listed
        {
            first_mirror(&mirror).await;
        }
    }
}

/// The first complete mirror: the inventory of every node, then every claim.
async fn first_mirror(mirror: &Mirror) {
    let mut cache = mirror.cache.lock().await;
    mirror.sync_inventory(&mut cache, true).await;
    mirror.keeper.readiness().set_inventory_synced();
    let listing = cache.claims.clone();
    match mirror
        .mirror_listing(&mut cache, &listing, &BTreeSet::new())
        .await
    {
        Ok(report) => {
            mirror.keeper.readiness().set_reconciled();
            info!(driver = %mirror.config.driver_name, nodes = cache.inventory.devices.len(), claims = report.claims_checked, imported = report.imported, released = report.released, "Mirror ready: inventory and allocations mirrored from the cluster");
        }
        Err(error) => warn!(%error, "Initial mirror failed, retrying"),
    }
}

async fn on_slice(
    mirror: &Mirror,
    listings: &mut Listings,
    event: Result<watcher::Event<ResourceSlice>, watcher::Error>,
) {
    let driver = &mirror.config.driver_name;
    let ready = mirror.keeper.readiness().is_ready();
    match event {
        Ok(watcher::Event::Init) => listings.slices = Some(BTreeMap::new()),
        Ok(watcher::Event::InitApply(slice)) => {
            if let Some(listing) = listings.slices.as_mut() {
                if slice.spec.driver == *driver {
                    listing.insert(slice.name_any(), slice);
                }
            }
        }
        Ok(watcher::Event::InitDone) => {
            let mut cache = mirror.cache.lock().await;
            cache.slices = listings.slices.take().unwrap_or_default();
            listings.slices_listed = true;
            if ready {
                mirror.sync_inventory(&mut cache, true).await;
            }
        }
        Ok(watcher::Event::Apply(slice)) => {
            let mut cache = mirror.cache.lock().await;
            if slice.spec.driver == *driver {
                cache.slices.insert(slice.name_any(), slice);
            } else {
                cache.slices.remove(&slice.name_any());
            }
            if ready {
                mirror.sync_inventory(&mut cache, false).await;
            }
        }
        Ok(watcher::Event::Delete(slice)) => {
            let mut cache = mirror.cache.lock().await;
            cache.slices.remove(&slice.name_any());
            if ready {
                mirror.sync_inventory(&mut cache, false).await;
            }
        }
        Err(error) => warn!(%error, "ResourceSlice watch failed, retrying"),
    }
}

/// Whether a claim is allocated and how many consumers `status.reservedFor` lists.
fn claim_use(claim: &ResourceClaim) -> ClaimUse {
    let status = claim.status.as_ref();
    ClaimUse::of(
        status.is_some_and(|s| s.allocation.is_some()),
        status.map_or(0, |s| s.reserved_for.len()),
    )
}

async fn on_claim(
    mirror: &Mirror,
    listings: &mut Listings,
    event: Result<watcher::Event<ResourceClaim>, watcher::Error>,
) {
    let ready = mirror.keeper.readiness().is_ready();
    match event {
        Ok(watcher::Event::Init) => listings.claims = Some(BTreeMap::new()),
        Ok(watcher::Event::InitApply(claim)) => {
            if let (Some(listing), Some(uid)) = (listings.claims.as_mut(), uid_of(&claim)) {
                listing.insert(uid, claim);
            }
        }
        Ok(watcher::Event::InitDone) => {
            let listing = listings.claims.take().unwrap_or_default();
            listings.claims_listed = true;
            mirror.idle.replace(
                listing
                    .iter()
                    .map(|(uid, claim)| (uid.as_str(), claim_use(claim))),
                mirror.ledger().now_ms(),
            );
            let mut cache = mirror.cache.lock().await;
            cache.claims.clone_from(&listing);
            if ready {
                // A re-listing (the watch lost its place): what it shows is the cluster.
                if let Err(error) = mirror
                    .mirror_listing(&mut cache, &listing, &BTreeSet::new())
                    .await
                {
                    warn!(%error, "Mirroring the re-listed claims failed");
                }
            }
        }
        Ok(watcher::Event::Apply(claim)) => {
            if let Some(uid) = uid_of(&claim) {
                let now_ms = mirror.ledger().now_ms();
                mirror.idle.observe(&uid, claim_use(&claim), now_ms);
            }
            let mut cache = mirror.cache.lock().await;
            if ready {
                mirror.apply_claim(&mut cache, claim).await;
            } else if let Some(uid) = uid_of(&claim) {
                cache.claims.insert(uid, claim);
            }
        }
        Ok(watcher::Event::Delete(claim)) => {
            if let Some(uid) = uid_of(&claim) {
                mirror.idle.forget(&uid);
            }
            let mut cache = mirror.cache.lock().await;
            if ready {
                mirror.forget_claim(&mut cache, &claim).await;
            } else if let Some(uid) = uid_of(&claim) {
                cache.claims.remove(&uid);
            }
        }
        Err(error) => warn!(%error, "ResourceClaim watch failed, retrying"),
    }
}
