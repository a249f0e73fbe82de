//! The agent's background tasks: the kubelet's registration mirrored into readiness and
//! metrics, the admin server, the inventory and its health read again every
//! `inventory_interval`, on SIGHUP and (health) when an event source wakes the agent, the
//! inventory without its unhealthy devices kept for the `v1alpha2` stream, and garbage collection every `gc_interval` against the claims of the API version the
//! agent runs with. Each task logs its own failures and runs until it is aborted.

use dra_runtime::lock::{LockExt, RwLockExt};
use std::sync::{Arc, Mutex, RwLock};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{watch, Notify};
use tracing::{error, info, warn};

use super::health::HealthTracker;
use super::measured::Measured;
use super::AgentConfig;
use crate::admin::{self, AgentReadiness, AgentState};
use crate::device::{Discovered, Inventory};
use crate::gc::{find_stale, find_stale_v1, PreparedRef, StaleReason};
use crate::grpc::RegistrationState;
use crate::health::{without_unhealthy, HealthMap};
use crate::metrics::{GcKind, NodeMetrics};
use crate::prepare::{ClaimPreparer, ClaimRequest};
use crate::v1::claims::ClaimSource;

/// Mirrors the registration state the kubelet reports into the readiness and the
/// `registered` gauge, until the plugin is gone.
pub(super) async fn mirror_registration(
    mut registration: watch::Receiver<RegistrationState>,
    readiness: AgentReadiness,
    metrics: NodeMetrics,
) {
    loop {
        let registered = registration.borrow_and_update().is_registered();
        readiness.set_registered(registered);
        metrics.set_registered(registered);
        if registration.changed().await.is_err() {
            return;
        }
    }
}

/// Serves the admin API on `listener` with `state`; a failure is logged.
pub(super) async fn serve_admin(listener: tokio::net::TcpListener, state: AgentState) {
    if let Err(e) = axum::serve(listener, admin::router(state)).await {
        error!(error = %e, "The admin server stopped");
    }
}

/// Starts watching for SIGHUP, which from then on no longer ends the process; `None` (logged)
/// when it cannot be watched.
pub(super) fn watch_hangup() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(e) => {
            warn!(error = %e, "Cannot watch for SIGHUP; the inventory is read again on the interval only");
            None
        }
    }
}

/// What the inventory refresh updates.
pub(super) struct InventoryOutlets {
    /// The preparer's inventory.
    pub shared: Arc<RwLock<Inventory>>,
    /// The inventory's receivers (the resource stream, health, device status).
    pub sender: watch::Sender<Inventory>,
    /// The pool's receiver (the slice publisher): the inventory with how it is shared.
    pub pool: watch::Sender<Discovered>,
    /// The device health, judged again after each read.
    pub health: Arc<Mutex<HealthTracker>>,
    /// Notified by event sources of device health.
    pub wake: Arc<Notify>,
}

/// Reads the inventory again on the interval and on SIGHUP (`hangup`, from [`watch_hangup`]),
/// and judges the devices' health after each read and whenever `outlets.wake` is notified; a
/// changed inventory goes to the preparer and to the inventory's receivers.
pub(super) async fn refresh_inventory(
    config: AgentConfig,
    mut hangup: Option<Signal>,
    outlets: InventoryOutlets,
    metrics: NodeMetrics,
) {
    let InventoryOutlets {
        shared,
        sender,
        pool,
        health,
        wake,
    } = outlets;
    let mut tick = tokio::time::interval(config.inventory_interval);
    tick.tick().await;
    loop {
        let discover = tokio::select! {
            _ = tick.tick() => true,
            () = next_hangup(&mut hangup) => {
                info!("SIGHUP: reading the inventory again");
                true
            }
            () = wake.notified() => false,
        };
        if !discover {
            let inventory = sender.borrow().clone();
            judge_health(&health, inventory).await;
            continue;
        }
        let source = config.devices.clone();
        let roots = config.roots.clone();
        let read = tokio::task::spawn_blocking(move || source.discover_all(&roots)).await;
        match read {
            Ok(Ok(found)) => {
                let inventory = found.devices.clone();
                pool.send_if_modified(|current| {
                    let changed = *current != found;
                    *current = found;
                    changed
                });
                if *sender.borrow() != inventory {
                    info!(devices = inventory.len(), "The inventory changed");
                    metrics.set_devices(inventory.len());
                    *shared.write_or_recover() = inventory.clone();
                    sender.send_replace(inventory);
                }
            }
            Ok(Err(e)) => warn!(error = %e, "Failed to read the inventory; keeping the last one"),
            Err(e) => warn!(error = %e, "The inventory read did not complete"),
        }
        let inventory = sender.borrow().clone();
        judge_health(&health, inventory).await;
    }
}

/// One health round over `inventory`, off the runtime's threads (the sources read files).
async fn judge_health(health: &Arc<Mutex<HealthTracker>>, inventory: Inventory) {
    let tracker = Arc::clone(health);
    let judged = tokio::task::spawn_blocking(move || {
        tracker.lock_or_recover().round(&inventory);
    })
    .await;
    if let Err(e) = judged {
        warn!(error = %e, "The health round did not complete");
    }
}

/// Keeps `sender` showing `inventory` without the devices `health` calls unhealthy (the
/// inventory a `v1alpha2` kubelet gets), until either input ends.
pub(super) async fn withhold_unhealthy(
    mut inventory: watch::Receiver<Inventory>,
    mut health: watch::Receiver<HealthMap>,
    sender: watch::Sender<Inventory>,
) {
    loop {
        let published =
            without_unhealthy(&inventory.borrow_and_update(), &health.borrow_and_update());
        sender.send_if_modified(|current| {
            if *current == published {
                false
            } else {
                *current = published;
                true
            }
        });
        let ended = tokio::select! {
            changed = inventory.changed() => changed.is_err(),
            changed = health.changed() => changed.is_err(),
        };
        if ended {
            return;
        }
    }
}

/// Completes at the next SIGHUP; never when SIGHUP cannot be watched.
async fn next_hangup(hangup: &mut Option<Signal>) {
    if let Some(watch) = hangup {
        if watch.recv().await.is_some() {
            return;
        }
        *hangup = None;
    }
    std::future::pending::<()>().await;
}

/// Where garbage collection reads the claims.
pub(super) enum GcClaims {
    /// `resource.k8s.io/v1alpha2` claims (Kubernetes 1.30).
    V1alpha2(kube::Client),
    /// `resource.k8s.io/v1` claims (1.34+).
    V1(Arc<dyn ClaimSource>),
}

impl GcClaims {
    async fn find_stale(
        &self,
        prepared: &[PreparedRef],
        node: &str,
        driver: &str,
    ) -> kube::Result<Vec<(PreparedRef, StaleReason)>> {
        match self {
            GcClaims::V1alpha2(client) => find_stale(client, prepared, node, driver).await,
            GcClaims::V1(claims) => find_stale_v1(claims.as_ref(), prepared, node, driver).await,
        }
    }
}

/// At once and every `gc_interval`: unprepares the prepared claims the API server shows gone
/// or no longer allocated to this node.
pub(super) async fn collect_garbage(
    config: AgentConfig,
    claims: GcClaims,
    preparer: Arc<Measured>,
    metrics: NodeMetrics,
) {
    let mut tick = tokio::time::interval(config.gc_interval);
    loop {
        tick.tick().await;
        let held: Vec<PreparedRef> = match preparer.inner.entries() {
            Ok(entries) => entries
                .into_iter()
                .map(|(uid, e)| PreparedRef {
                    uid,
                    namespace: e.namespace,
                    name: e.name,
                })
                .collect(),
            Err(e) => {
                warn!(error = %e, "Garbage collection cannot read the journal");
                continue;
            }
        };
        let stale = match claims
            .find_stale(&held, &config.node_name, &config.driver_name)
            .await
        {
            Ok(stale) => stale,
            Err(e) => {
                warn!(error = %e, "Garbage collection cannot read the claims");
                continue;
            }
        };
        if stale.is_empty() {
            continue;
        }
        let requests: Vec<ClaimRequest> = stale
            .iter()
            .map(|(p, reason)| {
                info!(claim.uid = %p.uid, claim.name = %p.name, ?reason, "Unpreparing a stale claim");
                ClaimRequest {
                    uid: p.uid.clone(),
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    resource_handle: String::new(),
                }
            })
            .collect();
        let worker = Arc::clone(&preparer);
        match tokio::task::spawn_blocking(move || worker.unprepare(&requests)).await {
            Ok(answers) => {
                let removed = answers.iter().filter(|(_, a)| a.is_ok()).count();
                metrics.gc_removed(GcKind::Claim, removed);
            }
            Err(e) => warn!(error = %e, "Garbage collection's unprepare did not complete"),
        }
    }
}
