//! The work of each DRA API generation and the admin API state that serves it
//! ([`generation_work`]): on `resource.k8s.io/v1alpha2` the ledger-backed driver with the
//! framework's controller (queue depth and `POST /v1/reconcile` through the driver); on
//! `resource.k8s.io/v1` the [`Mirror`] (`POST /v1/reconcile` through the mirror, cordon and
//! uncordon through a `DeviceTaintRule`, 409 where the cluster serves none). Also the driver's and the mirror's settings from a
//! [`ProcessConfig`].
//!
//! Builds the parts only; running them is `leader_work`'s.

use std::sync::Arc;
use std::time::Duration;

use dra_allocator::ledger::Ledger;
use dra_api::reconciler::ReconcileError;
use dra_api::{AppState, Reconciler, SharedCapacity};
use dra_framework::{Controller, ControllerConfig};
use dra_types::api_mode::ApiMode;

use super::leader_work::{Allocator, LeaderWork};
use super::{MetricsObserver, ProcessConfig};
use crate::driver::{DriverConfig, LedgerDriver};
use crate::mirror::cordon::TaintRuleCordon;
use crate::mirror::{Mirror, MirrorConfig};

/// The shortest time between two looks at unallocated claims.
const MIN_EXPLAIN_INTERVAL: Duration = Duration::from_millis(50);

impl ProcessConfig {
    /// The driver's settings (`v1alpha2`).
    pub(super) fn driver_config(&self) -> DriverConfig {
        let mut driver = DriverConfig {
            reconcile_interval: self.reconcile_interval,
            ..DriverConfig::new(self.driver_name.clone())
        };
        if let Some(grace) = self.grace_period {
            driver.grace_period = grace;
        }
        driver
    }

    /// The mirror's settings (`v1`): with `explain_after`, unallocated claims are looked at
    /// every half of it, but at least as often as by default and at most every 50 ms.
    pub(super) fn mirror_config(&self) -> MirrorConfig {
        let mut mirror = MirrorConfig {
            reconcile_interval: self.reconcile_interval,
            ..MirrorConfig::new(self.driver_name.clone())
        };
        if let Some(after) = self.explain_after {
            mirror.explain_after = after;
            mirror.explain_interval = (after / 2)
                .min(mirror.explain_interval)
                .max(MIN_EXPLAIN_INTERVAL);
        }
        mirror
    }
}

/// `POST /v1/reconcile` through the driver: the same reconcile as the periodic one, its drift
/// report as JSON.
struct DriverReconciler(Arc<LedgerDriver>);

#[async_trait::async_trait]
impl Reconciler for DriverReconciler {
    async fn reconcile_now(&self) -> Result<serde_json::Value, ReconcileError> {
        let report = self.0.reconcile_now().await?;
        Ok(serde_json::to_value(report)?)
    }
}

/// `POST /v1/reconcile` through the mirror: a reconcile against a fresh claim list.
struct MirrorReconciler(Arc<Mirror>);

#[async_trait::async_trait]
impl Reconciler for MirrorReconciler {
    async fn reconcile_now(&self) -> Result<serde_json::Value, ReconcileError> {
        let report = self.0.reconcile_now().await?;
        Ok(serde_json::to_value(report)?)
    }
}

/// The parts of one generation.
pub(super) struct GenerationWork {
    /// The admin API state, with the generation's reconciler (and queue depth or cluster cordon).
    pub(super) state: AppState,
    /// What runs while the lease is held.
    pub(super) work: LeaderWork,
    /// The driver, on `v1alpha2`.
    pub(super) driver: Option<Arc<LedgerDriver>>,
    /// The mirror, on `v1`.
    pub(super) mirror: Option<Arc<Mirror>>,
}

/// The work of `generation` over `ledger` and `client`, and `state` made to serve it.
pub(super) fn generation_work(
    generation: ApiMode,
    config: &ProcessConfig,
    ledger: &Ledger,
    client: kube::Client,
    observer: &Arc<MetricsObserver>,
    state: AppState,
) -> GenerationWork {
    match generation {
        ApiMode::V1alpha2 => {
            let driver = Arc::new(
                LedgerDriver::new(ledger.clone(), client.clone(), config.driver_config())
                    .with_observer(observer.clone()),
            );
            let controller = Controller::new(
                config.driver_name.clone(),
                driver.clone(),
                client.clone(),
                ControllerConfig {
                    recheck_delay: config.recheck_delay,
                    ..ControllerConfig::default()
                },
            );
            let depth_source = controller.clone();
            let state = state
                .with_queue_depth(Arc::new(move || depth_source.queue().len()))
                .with_reconciler(Arc::new(DriverReconciler(driver.clone())))
                .with_idle_claims(driver.idle_claims());
            let work = LeaderWork::Allocate(Box::new(Allocator {
                driver: driver.clone(),
                controller,
                client,
                workers: config.workers.max(1),
            }));
            GenerationWork {
                state,
                work,
                driver: Some(driver),
                mirror: None,
            }
        }
        ApiMode::V1 => {
            let cordon = TaintRuleCordon::new(client.clone(), config.driver_name.clone());
            let capacity = SharedCapacity::default();
            let mirror = Arc::new(
                Mirror::new(ledger.clone(), client, config.mirror_config())
                    .with_observer(observer.clone())
                    .with_capacity(capacity.clone()),
            );
            let state = state
                .with_capacity(capacity)
                .with_reconciler(Arc::new(MirrorReconciler(mirror.clone())))
                .with_cluster_cordon(Arc::new(cordon))
                .with_idle_claims(mirror.idle_claims());
            GenerationWork {
                state,
                work: LeaderWork::Mirror(mirror.clone()),
                driver: None,
                mirror: Some(mirror),
            }
        }
    }
}

#[cfg(test)]
mod tests;
