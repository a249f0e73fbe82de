//! The running node agent, as `dra-ledger node` starts it: the journal opened and recovered, the
//! inventory discovered (again every `inventory_interval` and on SIGHUP), the kubelet plugin sockets served,
//! the admin server, and garbage collection against the API server every `gc_interval`. Each
//! part logs its own failures; the agent stops when `shutdown` completes (the sockets are then
//! removed) or when the plugin server fails.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::admin::{self, AgentReadiness, AgentState, PreparedClaim};
use crate::cdi::CdiDir;
use crate::device::Inventory;
use crate::discovery::{DeviceSource, DiscoveryRoots};
use crate::gc::{find_stale, PreparedRef};
use crate::grpc::{Plugin, PluginConfig};
use crate::journal::Journal;
use crate::metrics::{GcKind, NodeMetrics, Outcome};
use crate::prepare::{AllocatedClaim, ClaimPreparer, ClaimRequest, JournalPreparer, PrepareError};

/// Everything the agent is started with.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// This node's name (`--node-name`).
    pub node_name: String,
    /// The driver name.
    pub driver_name: String,
    /// The kubelet's plugin registry directory.
    pub registry_dir: PathBuf,
    /// The kubelet's plugins directory.
    pub plugins_dir: PathBuf,
    /// Where the CDI specs go.
    pub cdi_dir: PathBuf,
    /// Where the prepare journal lives (mode 0700).
    pub state_dir: PathBuf,
    /// Where the inventory comes from.
    pub devices: DeviceSource,
    /// The host directories discovery reads.
    pub roots: DiscoveryRoots,
    /// How often garbage collection runs.
    pub gc_interval: Duration,
    /// How often the inventory is read again.
    pub inventory_interval: Duration,
    /// The admin server's address.
    pub listen: SocketAddr,
}

/// What stopped the agent from starting or running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The state directory could not be made private.
    #[error("state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The journal could not be opened.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// Recovery at start failed.
    #[error("recovery of the prepare journal: {0}")]
    Recover(#[from] crate::prepare::RecoverError),
    /// The first inventory could not be read.
    #[error("device discovery: {0}")]
    Discovery(#[from] crate::discovery::DiscoveryError),
    /// The plugin sockets could not be bound or served.
    #[error(transparent)]
    Grpc(#[from] crate::grpc::GrpcError),
    /// The metrics could not be created.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The admin server could not listen.
    #[error("admin server on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
}

/// The preparer with the agent's metrics around it.
struct Measured {
    inner: JournalPreparer,
    metrics: NodeMetrics,
}

impl Measured {
    fn count(&self) {
        let prepared = self.inner.entries().map(|e| e.len()).unwrap_or_default();
        self.metrics.set_prepared_claims(prepared);
    }
}

impl Measured {
    /// Times `prepare` and counts its answers.
    fn measure_prepare(
        &self,
        prepare: impl FnOnce(&JournalPreparer) -> Vec<(String, Result<Vec<String>, PrepareError>)>,
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        let started = Instant::now();
        let answers = prepare(&self.inner);
        self.metrics
            .observe_prepare(started.elapsed().as_secs_f64());
        for (uid, answer) in &answers {
            match answer {
                Ok(_) => self.metrics.prepared(Outcome::Success),
                Err(e) => {
                    warn!(claim.uid = %uid, error = %e, "Refused to prepare a claim");
                    self.metrics.prepared(Outcome::Error);
                }
            }
        }
        self.count();
        answers
    }
}

impl ClaimPreparer for Measured {
    fn prepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.measure_prepare(|inner| inner.prepare(claims))
    }

    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.measure_prepare(|inner| inner.prepare_allocated(claims))
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        let answers = self.inner.unprepare(claims);
        for (uid, answer) in &answers {
            match answer {
                Ok(()) => self.metrics.unprepared(Outcome::Success),
                Err(e) => {
                    warn!(claim.uid = %uid, error = %e, "Failed to unprepare a claim");
                    self.metrics.unprepared(Outcome::Error);
                }
            }
        }
        self.count();
        answers
    }
}

/// Runs the agent until `shutdown` completes. `client` reaches the API server for garbage
/// collection; without one (a node without API access) prepared claims are only unprepared by
/// the kubelet.
pub async fn run(
    config: AgentConfig,
    client: Option<kube::Client>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| AgentError::Listen {
            addr: config.listen,
            source,
        })?;
    run_on(listener, config, client, shutdown).await
}

/// [`run`] with the admin server on `listener`, bound by the caller (who then knows its address
/// before the agent starts); `config.listen` is not used.
pub async fn run_on(
    listener: tokio::net::TcpListener,
    config: AgentConfig,
    client: Option<kube::Client>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    let readiness = AgentReadiness::default();
    let metrics = NodeMetrics::new()?;
    crate::grpc::sockets::create_private_dir(&config.state_dir).map_err(|source| {
        AgentError::StateDir {
            path: config.state_dir.clone(),
            source,
        }
    })?;
    let journal = Journal::open(
        config.state_dir.join("prepare-journal.redb"),
        &config.driver_name,
    )?;
    let first = config.devices.discover(&config.roots)?;
    let shared = Arc::new(RwLock::new(first.clone()));
    let (inventory_tx, inventory_rx) = watch::channel(first);
    let preparer = JournalPreparer::new(
        journal,
        CdiDir::new(&config.cdi_dir, &config.driver_name),
        &config.node_name,
        Arc::clone(&shared),
        &JournalPreparer::current_boot_id(),
    );
    let recovery = preparer.recover()?;
    info!(?recovery, "Recovered the prepare journal");
    metrics.gc_removed(GcKind::CdiFile, recovery.orphans_removed.len());
    readiness.set_journal_open();
    let preparer = Arc::new(Measured {
        inner: preparer,
        metrics: metrics.clone(),
    });
    preparer.count();
    metrics.set_devices(inventory_rx.borrow().len());
    readiness.set_inventory_published();

    let plugin = Plugin::bind(PluginConfig::new(
        &config.driver_name,
        &config.registry_dir,
        &config.plugins_dir,
    ))?;
    let mut registration = plugin.registration();
    let (ready, gauge) = (readiness.clone(), metrics.clone());
    let registration_task = tokio::spawn(async move {
        loop {
            let registered = registration.borrow_and_update().is_registered();
            ready.set_registered(registered);
            gauge.set_registered(registered);
            if registration.changed().await.is_err() {
                return;
            }
        }
    });

    let addr = listener.local_addr().unwrap_or(config.listen);
    let state = admin_state(readiness, metrics.clone(), &preparer, &inventory_rx);
    let admin_task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, admin::router(state)).await {
            error!(error = %e, "The admin server stopped");
        }
    });
    info!(listen = %addr, node = %config.node_name, "Node agent started");

    let inventory_task = tokio::spawn(refresh_inventory(
        config.clone(),
        shared,
        inventory_tx,
        metrics.clone(),
    ));
    let gc_task = client.map(|client| {
        tokio::spawn(collect_garbage(
            config.clone(),
            client,
            Arc::clone(&preparer),
            metrics.clone(),
        ))
    });
    let served = plugin
        .serve(Arc::clone(&preparer), inventory_rx, shutdown)
        .await;
    for task in [
        Some(registration_task),
        Some(admin_task),
        Some(inventory_task),
        gc_task,
    ]
    .into_iter()
    .flatten()
    {
        task.abort();
    }
    served.map_err(AgentError::from)
}

fn admin_state(
    readiness: AgentReadiness,
    metrics: NodeMetrics,
    preparer: &Arc<Measured>,
    inventory: &watch::Receiver<Inventory>,
) -> AgentState {
    let journal = Arc::clone(preparer);
    let devices = inventory.clone();
    AgentState {
        readiness,
        metrics,
        prepared: Arc::new(move || {
            let entries = journal.inner.entries()?;
            Ok(entries
                .into_iter()
                .map(|(uid, e)| PreparedClaim {
                    uid,
                    namespace: e.namespace,
                    name: e.name,
                    devices: e.devices,
                    cdi_devices: e.cdi_ids,
                })
                .collect())
        }),
        devices: Arc::new(move || Ok(devices.borrow().values().cloned().collect())),
    }
}

async fn refresh_inventory(
    config: AgentConfig,
    shared: Arc<RwLock<Inventory>>,
    sender: watch::Sender<Inventory>,
    metrics: NodeMetrics,
) {
    let mut tick = tokio::time::interval(config.inventory_interval);
    tick.tick().await;
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(e) => {
            warn!(error = %e, "Cannot watch for SIGHUP; the inventory is read again on the interval only");
            None
        }
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = next_hangup(&mut hangup) => info!("SIGHUP: reading the inventory again"),
        }
        let source = config.devices.clone();
        let roots = config.roots.clone();
        let read = tokio::task::spawn_blocking(move || source.discover(&roots)).await;
        match read {
            Ok(Ok(inventory)) => {
                if *sender.borrow() != inventory {
                    info!(devices = inventory.len(), "The inventory changed");
                    metrics.set_devices(inventory.len());
                    *shared.write().unwrap_or_else(PoisonError::into_inner) = inventory.clone();
                    sender.send_replace(inventory);
                }
            }
            Ok(Err(e)) => warn!(error = %e, "Failed to read the inventory; keeping the last one"),
            Err(e) => warn!(error = %e, "The inventory read did not complete"),
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

async fn collect_garbage(
    config: AgentConfig,
    client: kube::Client,
    preparer: Arc<Measured>,
    metrics: NodeMetrics,
) {
    let mut tick = tokio::time::interval(config.gc_interval);
    loop {
        tick.tick().await;
        let claims: Vec<PreparedRef> = match preparer.inner.entries() {
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
        let stale = match find_stale(&client, &claims, &config.node_name, &config.driver_name).await
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
