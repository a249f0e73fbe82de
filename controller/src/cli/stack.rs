//! The running controller process, shared by `run` and `demo`: the ledger (with the commit hook
//! of the metrics), the Kubernetes client (counting its requests), the ledger-backed driver with
//! its background tasks, the framework `Controller` with N workers and the admin HTTP server.
//!
//! Start order: metrics, ledger, listener (so a busy port fails before any work), driver,
//! server, then (with leader election: once the lease is held) background and controller.
//! Every write, to the ledger and to the API server, passes the leader [`Fence`]; without leader
//! election it is always open. Shutdown: stop taking work, let syncs in flight and their ledger
//! commits finish, stop the background and the server, close the ledger, then release the lease.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use dra_allocator::ledger::{Ledger, LedgerOptions};
use dra_api::{AdminToken, ApiRequestsLayer, AppState, Metrics, Readiness, Reconciler};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::observe::MetricsObserver;
use super::{SHUTDOWN_GRACE, VERSION};
use crate::driver::{run_background, DriverConfig, LedgerDriver};
use crate::leader::{Elector, Fence, FenceLayer, LeaderConfig, Role};
use dra_framework::{Controller, ControllerConfig};

/// What the stack needs to start.
#[derive(Debug, Clone)]
pub struct StackConfig {
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
}

impl StackConfig {
    fn driver_config(&self) -> DriverConfig {
        let mut driver = DriverConfig {
            reconcile_interval: self.reconcile_interval,
            ..DriverConfig::new(self.driver_name.clone())
        };
        if let Some(grace) = self.grace_period {
            driver.grace_period = grace;
        }
        driver
    }
}

/// `POST /v1/reconcile` through the driver: the same reconcile as the periodic one, its drift
/// report as JSON.
struct DriverReconciler(Arc<LedgerDriver>);

#[async_trait::async_trait]
impl Reconciler for DriverReconciler {
    async fn reconcile_now(&self) -> Result<serde_json::Value, String> {
        let report = self.0.reconcile_now().await.map_err(|e| e.to_string())?;
        serde_json::to_value(report).map_err(|e| e.to_string())
    }
}

/// The running process parts.
pub struct Stack {
    /// The driver (its ledger, readiness and config).
    pub driver: Arc<LedgerDriver>,
    /// The observer feeding the registry.
    pub observer: Arc<MetricsObserver>,
    /// The `/readyz` flags.
    pub readiness: Readiness,
    /// The address the admin server listens on.
    pub local_addr: SocketAddr,
    role: watch::Receiver<Role>,
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    elector: Option<ElectorTask>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("driver", &self.driver)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// Opens the ledger in a blocking thread; errors name the file and say why (corrupt, newer
/// schema, another driver, locked).
async fn open_ledger(
    path: PathBuf,
    driver_name: String,
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

impl Stack {
    /// Starts everything against the cluster of `kube_config`.
    pub async fn start(config: StackConfig, kube_config: kube::Config) -> anyhow::Result<Stack> {
        let metrics = Arc::new(Metrics::new(VERSION)?);
        let readiness = Readiness::new();
        let fence = config
            .leader
            .as_ref()
            .map_or_else(Fence::always_open, |_| Fence::new());
        let ledger = open_ledger(
            config.ledger.clone(),
            config.driver_name.clone(),
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

        let client = kube::client::ClientBuilder::try_from(kube_config.clone())
            .context("cannot build the Kubernetes client")?
            .with_layer(&FenceLayer::new(fence.clone()))
            .with_layer(&ApiRequestsLayer::new(metrics.clone()))
            .build();
        let observer = Arc::new(MetricsObserver::new(metrics.clone()));
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

        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();

        let depth_source = controller.clone();
        let mut state = AppState::new(metrics.clone(), readiness.clone())
            .with_ledger(ledger)
            .with_queue_depth(Arc::new(move || depth_source.queue().len()))
            .with_reconciler(Arc::new(DriverReconciler(driver.clone())));
        if let Some(token) = config.admin_token.clone() {
            state = state.with_admin_token(token);
        }
        tasks.push((
            "admin server",
            tokio::spawn(serve_admin(listener, state, stop.subscribe())),
        ));

        let (role, elector) = match config.leader.clone() {
            Some(leader) => {
                readiness.set_standby(true);
                let (role, elector) = start_elector(kube_config, leader, &metrics, &fence)?;
                (role, Some(elector))
            }
            None => (
                watch::channel(Role::Leader {
                    previous: None,
                    takeover: false,
                })
                .1,
                None,
            ),
        };

        let workers = config.workers.max(1);
        tasks.push((
            "controller",
            tokio::spawn(lead(
                Work {
                    driver: driver.clone(),
                    readiness: readiness.clone(),
                    controller,
                    client,
                    workers,
                },
                role.clone(),
                stop.subscribe(),
            )),
        ));
        info!(listen = %local_addr, workers, "Controller started");
        Ok(Stack {
            driver,
            observer,
            readiness,
            local_addr,
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
        self.driver.ledger()
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
        let driver = self.driver;
        // The last ledger handle closes here: its writer drains queued commits before it stops.
        tokio::task::spawn_blocking(move || drop(driver))
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

/// What the leader runs.
struct Work {
    driver: Arc<LedgerDriver>,
    readiness: Readiness,
    controller: Controller<LedgerDriver>,
    client: kube::Client,
    workers: usize,
}

/// Completes once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Waits for the leader lease, then runs the driver's background work and the controller until
/// `stop`: the initial reconcile (after a takeover judging every pending intent by the cluster)
/// comes before the first allocation, because the driver allocates only once ready.
async fn lead(work: Work, role: watch::Receiver<Role>, stop: watch::Receiver<bool>) {
    let takeover = tokio::select! {
        takeover = wait_leader(role) => takeover,
        () = stopped(stop.clone()) => None,
    };
    let Some(takeover) = takeover else { return };
    let Work {
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
}

/// A running elector: the sender that asks it to release the lease, and its task.
type ElectorTask = (watch::Sender<bool>, JoinHandle<Role>);

/// Starts campaigning for the lease. The elector writes the lease through a client of its own:
/// the fence must not stop the renewals that keep it open.
fn start_elector(
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
