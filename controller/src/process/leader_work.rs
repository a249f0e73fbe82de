//! The leader's part of the running controller: campaigning for the Lease and, once it is
//! held, running the work of the mode until stopped: on `resource.k8s.io/v1alpha2` the driver's
//! background work and the framework's controller, on `resource.k8s.io/v1` the mirror (only
//! the leader writes its ledger, so a standby's mirror waits like its allocator would).
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
use crate::driver::{run_background, DriverReadiness, LedgerDriver};
use crate::leader::{Elector, Fence, LeaderConfig, Role};
use crate::mirror::{run_mirror, Mirror};

/// The allocator of `resource.k8s.io/v1alpha2`: the driver's background work and the
/// framework's controller.
pub(super) struct Allocator {
    pub(super) driver: Arc<LedgerDriver>,
    pub(super) controller: Controller<LedgerDriver>,
    pub(super) client: kube::Client,
    pub(super) workers: usize,
}

/// What runs while this process holds the lease.
pub(super) enum LeaderWork {
    /// `resource.k8s.io/v1alpha2`: allocate.
    Allocate(Box<Allocator>),
    /// `resource.k8s.io/v1`: mirror the cluster's allocations.
    Mirror(Arc<Mirror>),
}

/// Sets the process's readiness flags from the work's: caches synced, then reconciled.
async fn follow(work: DriverReadiness, readiness: &Readiness, stop: watch::Receiver<bool>) {
    tokio::select! {
        () = async {
            work.wait_inventory_synced().await;
            readiness.set_caches_synced();
            work.wait().await;
            readiness.set_reconciled();
        } => {}
        () = stopped(stop) => {}
    }
}

/// Waits for the leader lease, then runs `work` until `stop`. For the allocator the initial
/// reconcile (after a takeover judging every pending intent by the cluster) comes before the
/// first allocation, because the driver allocates only once ready; the mirror writes the
/// ledger only once it holds the lease.
pub(super) async fn run_while_leader(
    work: LeaderWork,
    readiness: Readiness,
    role: watch::Receiver<Role>,
    stop: watch::Receiver<bool>,
) {
    let takeover = tokio::select! {
        takeover = wait_leader(role) => takeover,
        () = stopped(stop.clone()) => None,
    };
    let Some(takeover) = takeover else { return };
    readiness.set_standby(false);
    match work {
        LeaderWork::Allocate(allocator) => {
            let Allocator {
                driver,
                controller,
                client,
                workers,
            } = *allocator;
            if takeover {
                driver.mark_takeover();
            }
            info!(
                workers,
                takeover, "Leading: starting the driver and the controller"
            );
            tokio::join!(
                run_background(driver.clone(), client, stopped(stop.clone())),
                controller.run(workers, stopped(stop.clone())),
                follow(driver.readiness(), &readiness, stop.clone()),
            );
            // A ledger call whose caller was dropped at the stop still runs: none may write
            // after the lease is released.
            driver.quiesce().await;
        }
        LeaderWork::Mirror(mirror) => {
            info!(
                takeover,
                "Leading: mirroring the cluster's allocations into the ledger"
            );
            tokio::join!(
                run_mirror(mirror.clone(), stopped(stop.clone())),
                follow(mirror.readiness(), &readiness, stop.clone()),
            );
            mirror.quiesce().await;
        }
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Gives the follower task a moment to act on a change.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    #[tokio::test]
    async fn follow_sets_caches_synced_then_reconciled_as_the_work_reports_them() {
        let work = DriverReadiness::new();
        let readiness = Readiness::new();
        readiness.set_ledger_open();
        let (_stop, stop) = watch::channel(false);
        let task = tokio::spawn({
            let (work, readiness) = (work.clone(), readiness.clone());
            async move { follow(work, &readiness, stop).await }
        });
        settle().await;
        assert_eq!(
            readiness.waiting_for(),
            ["caches synced", "initial reconcile"]
        );
        work.set_inventory_synced();
        settle().await;
        assert_eq!(readiness.waiting_for(), ["initial reconcile"]);
        work.set_reconciled();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("follow ends once ready")
            .unwrap();
        assert!(readiness.is_ready());
    }

    #[tokio::test]
    async fn follow_ends_at_the_stop_without_setting_what_the_work_did_not_report() {
        let readiness = Readiness::new();
        readiness.set_ledger_open();
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn({
            let readiness = readiness.clone();
            async move { follow(DriverReadiness::new(), &readiness, stop).await }
        });
        stop_tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("follow ends at the stop")
            .unwrap();
        assert!(!readiness.is_ready());
    }
}
