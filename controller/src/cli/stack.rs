//! The running controller process, shared by `run` and `demo`: the ledger (with the commit hook
//! of the metrics), the Kubernetes client (counting its requests), the ledger-backed driver with
//! its background tasks, the framework `Controller` with N workers and the admin HTTP server.
//!
//! Start order: metrics, ledger, listener (so a busy port fails before any work), driver,
//! background, controller, server. Shutdown: stop taking work, let syncs in flight and their
//! ledger commits finish, stop the background and the server, then close the ledger.

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
use crate::framework::{Controller, ControllerConfig};

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
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
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
) -> anyhow::Result<Ledger> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the ledger directory {}", dir.display()))?;
    }
    let options = LedgerOptions {
        on_commit: Some(metrics.commit_hook()),
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
        let ledger =
            open_ledger(config.ledger.clone(), config.driver_name.clone(), &metrics).await?;
        readiness.set_ledger_open();
        info!(path = %config.ledger.display(), driver = %config.driver_name, "Ledger open");

        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let local_addr = listener.local_addr()?;

        let client = kube::client::ClientBuilder::try_from(kube_config)
            .context("cannot build the Kubernetes client")?
            .with_layer(&ApiRequestsLayer::new(metrics.clone()))
            .build();
        let observer = Arc::new(MetricsObserver::new(metrics.clone()));
        let mut driver_config = DriverConfig {
            reconcile_interval: config.reconcile_interval,
            ..DriverConfig::new(config.driver_name.clone())
        };
        if let Some(grace) = config.grace_period {
            driver_config.grace_period = grace;
        }
        let driver = Arc::new(
            LedgerDriver::new(ledger.clone(), client.clone(), driver_config)
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
        let stopped = |stop: &watch::Sender<bool>| {
            let mut rx = stop.subscribe();
            async move {
                let _ = rx.wait_for(|stopped| *stopped).await;
            }
        };
        let mut tasks = Vec::new();

        let depth_source = controller.clone();
        let mut state = AppState::new(metrics.clone(), readiness.clone())
            .with_ledger(ledger)
            .with_queue_depth(Arc::new(move || depth_source.queue().len()))
            .with_reconciler(Arc::new(DriverReconciler(driver.clone())));
        if let Some(token) = config.admin_token.clone() {
            state = state.with_admin_token(token);
        }
        let server_stop = stopped(&stop);
        tasks.push((
            "admin server",
            tokio::spawn(async move {
                let app = dra_api::router(state);
                if let Err(error) = axum::serve(listener, app)
                    .with_graceful_shutdown(server_stop)
                    .await
                {
                    warn!(%error, "Admin server failed");
                }
            }),
        ));
        tasks.push((
            "driver background",
            tokio::spawn(run_background(driver.clone(), client, stopped(&stop))),
        ));
        let workers = config.workers.max(1);
        tasks.push((
            "controller",
            tokio::spawn(controller.run(workers, stopped(&stop))),
        ));
        let driver_readiness = driver.readiness();
        let flags = readiness.clone();
        tasks.push((
            "readiness",
            tokio::spawn(async move {
                driver_readiness.wait_inventory_synced().await;
                flags.set_caches_synced();
                driver_readiness.wait().await;
                flags.set_reconciled();
            }),
        ));
        info!(listen = %local_addr, workers, "Controller started");
        Ok(Stack {
            driver,
            observer,
            readiness,
            local_addr,
            stop,
            tasks,
        })
    }

    /// Waits until `/readyz` answers 200: ledger open, inventory synced, initial reconcile done.
    pub async fn wait_ready(&self) {
        while !self.readiness.is_ready() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        self.driver.ledger()
    }

    /// Stops taking work, waits for syncs in flight (and their ledger commits), stops the
    /// background tasks and the server, then closes the ledger. Returns an error when a part did
    /// not stop within the grace period.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        let mut late = Vec::new();
        for (name, mut task) in self.tasks {
            if name == "readiness" {
                task.abort();
            }
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
