//! The composition of a running controller, used by `dra-ledger run` and `dra-ledger demo`:
//! [`RunningController`] holds the ledger (with the commit hook of the metrics), the Kubernetes
//! client (counting its requests), the work of the DRA API the cluster serves, the admin HTTP
//! server of `dra-api` and, with leader election, the elector (`leader_work`) and the admin
//! API's view of it (`leader_route`: a standby forwards `/v1` requests to the leader). The work
//! of the DRA API generation (`generation` builds it) is, on
//! `resource.k8s.io/v1alpha2` (Kubernetes 1.30), the ledger-backed driver with its background
//! tasks and the framework `Controller` with N workers; on `resource.k8s.io/v1` (1.34+, where
//! the kube-scheduler allocates) the [`Mirror`] of the cluster's allocations, with cordon
//! refused. [`MetricsObserver`] records the driver's and the mirror's facts in the Prometheus
//! registry.
//!
//! Start order: metrics, ledger, listener (so a busy port fails before any work), the DRA API
//! (`--dra-api`, by discovery for `auto`), driver or mirror, the elector (campaigning only:
//! nothing is written before the lease is held), server, then (with leader election: once the
//! lease is held) background and controller, or the mirror.
//! Every write, to the ledger and to the API server, passes the leader [`Fence`]; without leader
//! election it is always open. Shutdown: stop taking work, let syncs in flight and their ledger
//! commits finish, stop the background and the server, close the ledger, then release the lease.
//!
//! Owns process composition only (no flags, no logging setup, no signals: those belong to the
//! binary's command line); must not depend on the simulated cluster.

mod generation;
mod leader_route;
mod leader_work;
mod metrics_observer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use dra_allocator::ledger::{
    Ledger, LedgerOptions, DEFAULT_HISTORY_RETENTION, DEFAULT_HISTORY_ROLLUP_AFTER,
};
use dra_api::{AdminToken, ApiRequestsLayer, AppState, Metrics, Readiness};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::driver::LedgerDriver;
use crate::leader::{Fence, FenceLayer, LeaderConfig, LeaderUrlTemplate, Role};
use crate::mirror::Mirror;
use dra_types::api_mode::{resolve, ApiMode, DraApi};
use generation::{generation_work, GenerationWork};
use leader_route::LeaderRoute;
use leader_work::{run_while_leader, start_elector, ElectorTask};

pub use metrics_observer::MetricsObserver;

/// The version reported by `--version` and the `build_info` metric.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use dra_runtime::process::SHUTDOWN_GRACE;

/// What a [`RunningController`] needs to start.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The DRA driver name.
    pub driver_name: String,
    /// The ledger file (created when missing).
    pub ledger: PathBuf,
    /// Concurrent controller workers.
    pub workers: usize,
    /// Address of the admin API and metrics.
    pub listen: SocketAddr,
    /// Interval of the periodic reconcile.
    pub reconcile_interval: Duration,
    /// How soon a PodSchedulingContext with pending claims is looked at again (the upstream
    /// default is 30 s; the demo uses less so that freed devices are found sooner).
    pub recheck_delay: Duration,
    /// How long a pending intent may wait for its claim before a reconcile releases it; `None`
    /// keeps the driver's default.
    pub grace_period: Option<Duration>,
    /// The bearer token of the mutating admin endpoints and the backup; without it they
    /// answer 403.
    pub admin_token: Option<AdminToken>,
    /// Leader election: work starts only once this lease is held and stops when it is lost.
    /// `None` runs as the only allocator.
    pub leader: Option<LeaderConfig>,
    /// The DRA API to work with: `v1alpha2` allocates, `v1` mirrors, `auto` asks the API
    /// server which it serves.
    pub dra_api: DraApi,
    /// On `v1`: how long a claim of our classes stays unallocated before an event explains it
    /// (the claims are looked at every half of it, at least every 15 s); `None` keeps the
    /// mirror's default of 60 s.
    pub explain_after: Option<Duration>,
    /// How long the ledger keeps history (holder intervals that ended, device events); `None`
    /// keeps the ledger's default of 90 days.
    pub history_retention: Option<Duration>,
    /// How long ended holder intervals stay as they are before they are rolled up into hourly
    /// totals; `None` keeps the ledger's default of 7 days.
    pub history_rollup_after: Option<Duration>,
    /// With leader election: the admin URL of the replica holding the lease, where this one
    /// forwards `/v1` requests while it is a standby.
    pub leader_url: LeaderUrlTemplate,
    /// The replica's name in admin answers and `continue` tokens without leader election; with
    /// it, the Lease identity names the replica.
    pub replica: String,
}

/// A started controller process: its parts, and the handles to stop them in order.
pub struct RunningController {
    /// The DRA API it works with.
    pub mode: ApiMode,
    /// The driver (its ledger, readiness and config) on `resource.k8s.io/v1alpha2`.
    pub driver: Option<Arc<LedgerDriver>>,
    /// The mirror on `resource.k8s.io/v1`.
    pub mirror: Option<Arc<Mirror>>,
    /// The observer feeding the registry.
    pub observer: Arc<MetricsObserver>,
    /// The `/readyz` flags.
    pub readiness: Readiness,
    /// The address the admin server listens on.
    pub local_addr: SocketAddr,
    ledger: Ledger,
    role: watch::Receiver<Role>,
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    elector: Option<ElectorTask>,
}

impl std::fmt::Debug for RunningController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningController")
            .field("mode", &self.mode)
            .field("ledger", &self.ledger)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// Opens the ledger in a blocking thread; errors name the file and say why (corrupt, newer
/// schema, another driver, locked).
async fn open_ledger(
    path: PathBuf,
    driver_name: String,
    history_retention: Option<Duration>,
    history_rollup_after: Option<Duration>,
    metrics: &Arc<Metrics>,
    fence: &Fence,
) -> anyhow::Result<Ledger> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the ledger directory {}", dir.display()))?;
    }
    let options = LedgerOptions {
        on_commit: Some(metrics.commit_hook()),
        commit_guard: Some(fence.commit_guard()),
        history_retention: history_retention.unwrap_or(DEFAULT_HISTORY_RETENTION),
        history_rollup_after: history_rollup_after.unwrap_or(DEFAULT_HISTORY_ROLLUP_AFTER),
        ..LedgerOptions::default()
    };
    let shown = path.display().to_string();
    let ledger =
        tokio::task::spawn_blocking(move || Ledger::open_with(&path, &driver_name, options))
            .await
            .context("ledger open task failed")?
            .with_context(|| format!("cannot open the ledger {shown}"))?;
    Ok(ledger)
}

impl RunningController {
    /// Starts everything against the cluster of `kube_config`.
    pub async fn start(
        config: ProcessConfig,
        kube_config: kube::Config,
    ) -> anyhow::Result<RunningController> {
        let metrics = Arc::new(Metrics::new(VERSION)?);
        let readiness = Readiness::new();
        let fence = config
            .leader
            .as_ref()
            .map_or_else(Fence::always_open, |_| Fence::new());
        let ledger = open_ledger(
            config.ledger.clone(),
            config.driver_name.clone(),
            config.history_retention,
            config.history_rollup_after,
            &metrics,
            &fence,
        )
        .await?;
        readiness.set_ledger_open();
        info!(path = %config.ledger.display(), driver = %config.driver_name, "Ledger open");

        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let local_addr = listener.local_addr()?;

        let client = kube_client(kube_config.clone(), &fence, &metrics)?;
        let mode = resolve(config.dra_api, Some(&client))
            .await
            .context("cannot choose the DRA API")?;
        let observer = Arc::new(MetricsObserver::new(metrics.clone()));
        let (stop, _) = watch::channel(false);
        let (role, elector) = election(&config, kube_config, &metrics, &fence, &readiness)?;

        let state = admin_state(&config, &metrics, &readiness, &ledger, &role, local_addr);
        let GenerationWork {
            state,
            work,
            driver,
            mirror,
        } = generation_work(mode, &config, &ledger, client, &observer, state);
        let worker = if mode == ApiMode::V1 {
            "mirror"
        } else {
            "controller"
        };
        let leading = run_while_leader(work, readiness.clone(), role.clone(), stop.subscribe());
        let tasks = vec![
            (
                "admin server",
                tokio::spawn(serve_admin(listener, state, stop.subscribe())),
            ),
            (worker, tokio::spawn(leading)),
        ];
        let page = format!("http://{local_addr}/");
        info!(%page, listen = %local_addr, dra_api = %mode, workers = config.workers.max(1), "Controller started");
        Ok(RunningController {
            mode,
            driver,
            mirror,
            observer,
            readiness,
            local_addr,
            ledger,
            role,
            stop,
            tasks,
            elector,
        })
    }

    /// Waits until `/readyz` answers 200: ledger open, inventory synced, initial reconcile done.
    pub async fn wait_ready(&self) {
        while !self.readiness.is_ready() || self.readiness.is_standby() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Completes when the leader lease is lost, with the reason; never without leader election.
    pub fn lost(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut role = self.role.clone();
        async move {
            loop {
                if let Role::Lost { reason } = &*role.borrow_and_update() {
                    return reason.clone();
                }
                if role.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }

    /// Stops taking work, waits for syncs in flight (and their ledger commits), stops the
    /// background tasks and the server, closes the ledger, then releases the leader lease.
    /// Returns an error when a part did not stop within the grace period.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        let mut late = Vec::new();
        for (name, mut task) in self.tasks {
            if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
            {
                task.abort();
                late.push(name);
            }
        }
        let parts = (self.driver, self.mirror, self.ledger);
        // The last ledger handle closes here: its writer drains queued commits before it stops.
        tokio::task::spawn_blocking(move || drop(parts))
            .await
            .context("ledger close task failed")?;
        if let Some((release, task)) = self.elector {
            // Only now that nothing writes any more may a standby take over.
            let _ = release.send(true);
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                late.push("leader election");
            }
        }
        if late.is_empty() {
            info!("Stopped cleanly");
            Ok(())
        } else {
            anyhow::bail!(
                "did not stop within {SHUTDOWN_GRACE:?}: {}",
                late.join(", ")
            )
        }
    }
}

/// The Kubernetes client of the work: every request passes the leader `fence` and is counted
/// in `metrics`.
fn kube_client(
    kube_config: kube::Config,
    fence: &Fence,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<kube::Client> {
    Ok(kube::client::ClientBuilder::try_from(kube_config)
        .context("cannot build the Kubernetes client")?
        .with_layer(&FenceLayer::new(fence.clone()))
        .with_layer(&ApiRequestsLayer::new(metrics.clone()))
        .build())
}

/// The role of this process: with leader election a standby until the elector (started here,
/// campaigning) says otherwise; without it the leader for good, with no elector.
fn election(
    config: &ProcessConfig,
    kube_config: kube::Config,
    metrics: &Arc<Metrics>,
    fence: &Fence,
    readiness: &Readiness,
) -> anyhow::Result<(watch::Receiver<Role>, Option<ElectorTask>)> {
    let Some(leader) = config.leader.clone() else {
        let only = Role::Leader {
            previous: None,
            takeover: false,
            transitions: 0,
        };
        return Ok((watch::channel(only).1, None));
    };
    readiness.set_standby(true);
    let (role, elector) = start_elector(kube_config, leader, metrics, fence)?;
    Ok((role, Some(elector)))
}

/// The admin API's state over `ledger`, named for this replica: with leader election its Lease
/// identity, and `/v1` answered from the leader's ledger as `role` tells (forwarded to the
/// leader's admin URL while this replica is a standby); with the admin token, if any.
fn admin_state(
    config: &ProcessConfig,
    metrics: &Arc<Metrics>,
    readiness: &Readiness,
    ledger: &Ledger,
    role: &watch::Receiver<Role>,
    local_addr: SocketAddr,
) -> AppState {
    let mut state = AppState::new(metrics.clone(), readiness.clone()).with_ledger(ledger.clone());
    if let Some(token) = config.admin_token.clone() {
        state = state.with_admin_token(token);
    }
    match &config.leader {
        Some(leader) => state
            .with_replica(leader.identity.clone())
            .with_leadership(Arc::new(LeaderRoute {
                role: role.clone(),
                template: config.leader_url.clone(),
                namespace: leader.namespace.clone(),
                port: local_addr.port(),
            })),
        None => state.with_replica(config.replica.clone()),
    }
}

/// Serves the admin API until `stop`.
async fn serve_admin(
    listener: tokio::net::TcpListener,
    state: AppState,
    stop: watch::Receiver<bool>,
) {
    let app = dra_api::router(state);
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped(stop))
        .await
    {
        warn!(%error, "Admin server failed");
    }
}

/// Completes once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
