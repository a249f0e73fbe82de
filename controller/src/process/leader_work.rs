//! The leader's part of the running controller: campaigning for the Lease and, once it is
//! held, running the driver's background work and the framework's controller until stopped.
//!
//! Owns the order of a start as leader (after a takeover the driver is told so before its
//! initial reconcile); must not open the ledger or serve HTTP (that is [`super`]).

use std::sync::Arc;

use anyhow::Context;
use dra_api::{ApiRequestsLayer, Metrics, Readiness};
use dra_framework::Controller;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use super::stopped;
use crate::driver::{run_background, LedgerDriver};
use crate::leader::{Elector, Fence, LeaderConfig, Role};

/// What runs while this process holds the lease: the driver's background work and the
/// framework's controller, with the readiness flags they set.
pub(super) struct LeaderWork {
    pub(super) driver: Arc<LedgerDriver>,
    pub(super) readiness: Readiness,
    pub(super) controller: Controller<LedgerDriver>,
    pub(super) client: kube::Client,
    pub(super) workers: usize,
}

/// Waits for the leader lease, then runs the driver's background work and the controller until
/// `stop`: the initial reconcile (after a takeover judging every pending intent by the cluster)
/// comes before the first allocation, because the driver allocates only once ready.
pub(super) async fn run_while_leader(
    work: LeaderWork,
    role: watch::Receiver<Role>,
    stop: watch::Receiver<bool>,
) {
    let takeover = tokio::select! {
        takeover = wait_leader(role) => takeover,
        () = stopped(stop.clone()) => None,
    };
    let Some(takeover) = takeover else { return };
    let LeaderWork {
        driver,
        readiness,
        controller,
        client,
        workers,
    } = work;
    if takeover {
        driver.mark_takeover();
    }
    readiness.set_standby(false);
    info!(
        workers,
        takeover, "Leading: starting the driver and the controller"
    );
    let driver_readiness = driver.readiness();
    let flags = async {
        tokio::select! {
            () = async {
                driver_readiness.wait_inventory_synced().await;
                readiness.set_caches_synced();
                driver_readiness.wait().await;
                readiness.set_reconciled();
            } => {}
            () = stopped(stop.clone()) => {}
        }
    };
    tokio::join!(
        run_background(driver.clone(), client, stopped(stop.clone())),
        controller.run(workers, stopped(stop.clone())),
        flags,
    );
    // A ledger call whose caller was dropped at the stop still runs: none may write after the
    // lease is released.
    driver.quiesce().await;
}

/// A running elector: the sender that asks it to release the lease, and its task.
pub(super) type ElectorTask = (watch::Sender<bool>, JoinHandle<Role>);

/// Starts campaigning for the lease. The elector writes the lease through a client of its own:
/// the fence must not stop the renewals that keep it open.
pub(super) fn start_elector(
    kube_config: kube::Config,
    leader: LeaderConfig,
    metrics: &Arc<Metrics>,
    fence: &Fence,
) -> anyhow::Result<(watch::Receiver<Role>, ElectorTask)> {
    let lease_client = kube::client::ClientBuilder::try_from(kube_config)
        .context("cannot build the Kubernetes client of the leader election")?
        .with_layer(&ApiRequestsLayer::new(metrics.clone()))
        .build();
    info!(lease = %leader.lease_name, namespace = %leader.namespace, identity = %leader.identity, "Campaigning for the leader lease");
    let elector = Elector::new(lease_client, leader, fence.clone());
    let role = elector.role();
    let (release, released) = watch::channel(false);
    let task = tokio::spawn(elector.run(async move {
        let mut rx = released;
        let _ = rx.wait_for(|release| *release).await;
    }));
    Ok((role, (release, task)))
}

/// Waits until `role` is [`Role::Leader`] and returns whether it was a takeover; `None` when
/// the lease was lost first or the elector is gone.
async fn wait_leader(mut role: watch::Receiver<Role>) -> Option<bool> {
    loop {
        match &*role.borrow_and_update() {
            Role::Leader { takeover, .. } => return Some(*takeover),
            Role::Lost { .. } => return None,
            Role::Standby { .. } => {}
        }
        role.changed().await.ok()?;
    }
}
