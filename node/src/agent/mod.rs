//! The running node agent, as `dra-ledger node` starts it: the DRA API chosen
//! ([`dra_types::api_mode`]), the journal opened and recovered, the inventory discovered (again
//! every `inventory_interval` and on SIGHUP), the kubelet plugin sockets served, the admin
//! server, garbage collection against the API server every `gc_interval`, and in `v1` mode the
//! node's `ResourceSlice` kept published. Each part logs its own failures; the agent stops when
//! `shutdown` completes (the sockets are then removed; the slice stays) or when the plugin
//! server fails.
//!
//! - `v1alpha2` (Kubernetes 1.30): the plugin socket serves `v1alpha3.Node`, registration
//!   advertises `1.0.0`, the kubelet publishes the slice from the resource stream;
//! - `v1` (1.34+): the plugin socket serves `v1.DRAPlugin` and `v1beta1.DRAPlugin` (not
//!   `v1alpha3.Node`: a 1.34 kubelet never calls it and a v1 allocation has no handle for it to
//!   carry) and `v1alpha1.DRAResourceHealth`, registration advertises their service names,
//!   claims are read from the API server,
//!   the agent publishes the slice and reports the prepared devices in the claims' status
//!   ([`crate::v1::status`]).
//!
//! In both, the devices' health is judged after every inventory read ([`HealthConfig`]): an
//! unhealthy device is tainted in the slice (`v1`) or left out of the resource stream
//! (`v1alpha2`), and stays prepared for the claims that hold it.
//!
//! Inside: `measured`, the preparer with its metrics; `background`, the periodic tasks;
//! `health`, the health sources and their debouncing.

mod background;
pub(crate) mod health;
mod measured;

pub use health::HealthConfig;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::admin::{AgentReadiness, AgentState, DeviceView, PreparedClaim};
use crate::cdi::CdiDir;
use crate::device::{Discovered, Inventory};
use crate::discovery::{DeviceSource, DiscoveryRoots};
use crate::grpc::{DraService, HealthService, Plugin, PluginConfig, PluginServices};
use crate::health::{without_unhealthy, HealthMap};
use crate::journal::Journal;
use crate::metrics::{GcKind, NodeMetrics};
use crate::prepare::JournalPreparer;
use crate::v1::claims::{ApiClaims, ClaimSource};
use crate::v1::slices::{keep_published, SlicePublisher};
use crate::v1::status::{self, ClaimStatusApi, StatusReporter, Wanted};
use background::{
    collect_garbage, mirror_registration, refresh_inventory, serve_admin, watch_hangup,
    withhold_unhealthy, GcClaims, InventoryOutlets,
};
use dra_types::api_mode::{resolve, ApiMode, DraApi};
use health::{sources_for, HealthTracker};
use measured::Measured;

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
    /// How device health is judged and shown.
    pub health: HealthConfig,
}

/// How the agent reaches the API server and which DRA API it speaks there.
#[derive(Clone, Default)]
pub struct ApiAccess {
    /// The client; `None` on a node without API access (then only the 1.30 path works and
    /// prepared claims are unprepared by the kubelet alone).
    pub client: Option<kube::Client>,
    /// The `--dra-api` flag.
    pub dra_api: DraApi,
}

impl ApiAccess {
    /// `client`, with the DRA API chosen by discovery (`--dra-api auto`).
    pub fn discovered(client: Option<kube::Client>) -> Self {
        ApiAccess {
            client,
            dra_api: DraApi::Auto,
        }
    }
}

impl std::fmt::Debug for ApiAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAccess")
            .field("client", &self.client.is_some())
            .field("dra_api", &self.dra_api)
            .finish()
    }
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
    /// The DRA API could not be chosen.
    #[error(transparent)]
    Mode(#[from] dra_types::api_mode::ModeError),
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

/// Runs the agent until `shutdown` completes. `client` reaches the API server for garbage
/// collection and, where discovery finds `resource.k8s.io/v1`, for the `v1` DRA API; without
/// one (a node without API access) the agent speaks the 1.30 API and prepared claims are only
/// unprepared by the kubelet. [`run_with_api`] takes the `--dra-api` flag too.
pub async fn run(
    config: AgentConfig,
    client: Option<kube::Client>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    run_with_api(config, ApiAccess::discovered(client), shutdown).await
}

/// [`run`] with the API access and DRA API given.
pub async fn run_with_api(
    config: AgentConfig,
    access: ApiAccess,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| AgentError::Listen {
            addr: config.listen,
            source,
        })?;
    run_on_with_api(listener, config, access, shutdown).await
}

/// [`run`] with the admin server on `listener`, bound by the caller (who then knows its address
/// before the agent starts); `config.listen` is not used.
pub async fn run_on(
    listener: tokio::net::TcpListener,
    config: AgentConfig,
    client: Option<kube::Client>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    run_on_with_api(listener, config, ApiAccess::discovered(client), shutdown).await
}

/// [`run_on`] with the API access and DRA API given.
pub async fn run_on_with_api(
    listener: tokio::net::TcpListener,
    config: AgentConfig,
    access: ApiAccess,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    let mode = resolve(access.dra_api, access.client.as_ref()).await?;
    info!(node = %config.node_name, flag = %access.dra_api, mode = %mode, "Chose the DRA API");
    let readiness = AgentReadiness::default();
    let metrics = NodeMetrics::new()?;
    let (preparer, shared, inventory_tx, pool_tx) = open_preparer(&config, &metrics)?;
    let inventory_rx = inventory_tx.subscribe();
    readiness.set_journal_open();
    let wake = Arc::new(Notify::new());
    let tracker = HealthTracker::start(
        sources_for(&config.devices, &config.roots, &wake),
        config.health,
        &inventory_rx.borrow(),
        metrics.clone(),
    );
    let health_rx = tracker.subscribe();
    readiness.set_inventory_published();

    let plugin = Plugin::bind(PluginConfig::new(
        &config.driver_name,
        &config.registry_dir,
        &config.plugins_dir,
    ))?;
    let mut tasks = vec![tokio::spawn(mirror_registration(
        plugin.registration(),
        readiness.clone(),
        metrics.clone(),
    ))];

    let (stop_tx, stop_rx) = watch::channel(false);
    let (services, gc_claims) = match (mode, access.client) {
        (ApiMode::V1, Some(client)) => {
            let parts = V1Parts {
                config: &config,
                readiness: &readiness,
                metrics: &metrics,
                inventory: &inventory_rx,
                pool: &pool_tx,
                health: &health_rx,
                stop: &stop_rx,
            };
            let (service, claims, started) = parts.start(client, &preparer);
            tasks.extend(started);
            let health = HealthService::new(
                &config.node_name,
                inventory_rx.clone(),
                health_rx.clone(),
                stop_rx.clone(),
            );
            (
                PluginServices::v1(service).with_health(health),
                Some(GcClaims::V1(claims)),
            )
        }
        (_, client) => {
            let (healthy, task) = healthy_inventory(&inventory_rx, &health_rx);
            tasks.push(task);
            (
                PluginServices::v1alpha2(Arc::clone(&preparer), healthy),
                client.map(GcClaims::V1alpha2),
            )
        }
    };

    let addr = listener.local_addr().unwrap_or(config.listen);
    let state = admin_state(
        readiness,
        metrics.clone(),
        &preparer,
        &inventory_rx,
        &health_rx,
    );
    tasks.push(tokio::spawn(serve_admin(listener, state)));
    // SIGHUP is watched before the agent says it started: until then its default action
    // would end the process.
    let hangup = watch_hangup();
    info!(listen = %addr, node = %config.node_name, mode = %mode, "Node agent started");

    let outlets = InventoryOutlets {
        shared,
        sender: inventory_tx,
        pool: pool_tx,
        health: Arc::new(Mutex::new(tracker)),
        wake,
    };
    tasks.push(tokio::spawn(refresh_inventory(
        config.clone(),
        hangup,
        outlets,
        metrics.clone(),
    )));
    if let Some(claims) = gc_claims {
        tasks.push(tokio::spawn(collect_garbage(
            config.clone(),
            claims,
            Arc::clone(&preparer),
            metrics.clone(),
        )));
    }
    let served = plugin.serve_services(services, shutdown).await;
    stop_tx.send_replace(true);
    for task in tasks {
        task.abort();
    }
    served.map_err(AgentError::from)
}

/// The inventory without its unhealthy devices, as the `v1alpha2` resource stream shows it,
/// and the task that keeps it so.
fn healthy_inventory(
    inventory: &watch::Receiver<Inventory>,
    health: &watch::Receiver<HealthMap>,
) -> (watch::Receiver<Inventory>, JoinHandle<()>) {
    let (sender, receiver) =
        watch::channel(without_unhealthy(&inventory.borrow(), &health.borrow()));
    let task = tokio::spawn(withhold_unhealthy(
        inventory.clone(),
        health.clone(),
        sender,
    ));
    (receiver, task)
}

/// What the `v1` mode's parts of the agent share with the rest.
struct V1Parts<'a> {
    config: &'a AgentConfig,
    readiness: &'a AgentReadiness,
    metrics: &'a NodeMetrics,
    inventory: &'a watch::Receiver<Inventory>,
    pool: &'a watch::Sender<Discovered>,
    health: &'a watch::Receiver<HealthMap>,
    stop: &'a watch::Receiver<bool>,
}

impl V1Parts<'_> {
    /// The `v1.DRAPlugin` service over `preparer` reading claims through `client`, the claims
    /// garbage collection reads, and the tasks: the one keeping the node's slice published
    /// (readiness waits for its first write) and the device status writers, to which
    /// `preparer` reports from now on and the journal's prepared claims are queued at once.
    fn start(
        &self,
        client: kube::Client,
        preparer: &Arc<Measured>,
    ) -> (
        DraService<Measured>,
        Arc<dyn ClaimSource>,
        Vec<JoinHandle<()>>,
    ) {
        let config = self.config;
        self.readiness.require_slices();
        let readiness = self.readiness.clone();
        let mut tasks = vec![tokio::spawn(keep_published(
            SlicePublisher::new(&client, &config.node_name, &config.driver_name)
                .with_taint_effect(config.health.taint_effect),
            self.pool.subscribe(),
            self.health.clone(),
            config.inventory_interval,
            move |_| readiness.set_slices_published(),
            self.stop.clone(),
        ))];
        let api = Arc::new(ApiClaims::new(client));
        let status = StatusReporter::new(
            Arc::clone(&api) as Arc<dyn ClaimStatusApi>,
            &config.driver_name,
            &config.node_name,
            self.inventory.clone(),
            status::RETRY,
            Some(self.metrics.clone()),
        );
        tasks.extend(status.start());
        report_prepared(&preparer.inner, &status);
        let _ = preparer.status.set(status);
        let claims: Arc<dyn ClaimSource> = api;
        let service = DraService::new(
            Arc::clone(preparer),
            Arc::clone(&claims),
            &config.driver_name,
            &config.node_name,
        )
        .with_metrics(self.metrics.clone());
        (service, claims, tasks)
    }
}

/// Queues the device status of every claim the journal holds prepared (all of them, once
/// recovery settled the half-done ones): a write lost to a crash or a stop is made now.
fn report_prepared(journal: &JournalPreparer, status: &StatusReporter) {
    match journal.entries() {
        Ok(entries) => {
            for (uid, entry) in entries {
                let wanted = Wanted::Ready {
                    devices: entry.devices,
                    cdi_ids: entry.cdi_ids,
                };
                status.report(&uid, &entry.namespace, &entry.name, wanted);
            }
        }
        Err(error) => {
            warn!(%error, "Cannot read the journal; the prepared claims' device status is written at their next prepare");
        }
    }
}

/// The journal opened and recovered, and the first inventory read: the preparer, the
/// inventory it checks claims against, the sender of the inventory's changes and that of the
/// pool's (the inventory with how its devices are shared, which the slices publish).
#[allow(clippy::type_complexity)] // three parts with their own roles; a struct would only name them again
fn open_preparer(
    config: &AgentConfig,
    metrics: &NodeMetrics,
) -> Result<
    (
        Arc<Measured>,
        Arc<RwLock<Inventory>>,
        watch::Sender<Inventory>,
        watch::Sender<Discovered>,
    ),
    AgentError,
> {
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
    let found = config.devices.discover_all(&config.roots)?;
    let first = found.devices.clone();
    metrics.set_devices(first.len());
    let shared = Arc::new(RwLock::new(first.clone()));
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
    let preparer = Arc::new(Measured {
        inner: preparer,
        metrics: metrics.clone(),
        status: OnceLock::new(),
    });
    preparer.count();
    Ok((
        preparer,
        shared,
        watch::channel(first).0,
        watch::channel(found).0,
    ))
}

fn admin_state(
    readiness: AgentReadiness,
    metrics: NodeMetrics,
    preparer: &Arc<Measured>,
    inventory: &watch::Receiver<Inventory>,
    health: &watch::Receiver<HealthMap>,
) -> AgentState {
    let journal = Arc::clone(preparer);
    let devices = inventory.clone();
    let health = health.clone();
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
        devices: Arc::new(move || {
            let health = health.borrow();
            Ok(devices
                .borrow()
                .values()
                .map(|device| DeviceView {
                    device: device.clone(),
                    health: health.get(&device.name).cloned(),
                })
                .collect())
        }),
    }
}
