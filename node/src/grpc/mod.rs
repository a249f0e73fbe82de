//! The kubelet's gRPC interfaces (generated in `dra_types::kubelet`) served over Unix sockets: the registration service the kubelet's
//! plugin watcher finds in its registry directory, and on the plugin socket the Kubernetes 1.30
//! `v1alpha3.Node` service and the v1 (1.34+) `v1.DRAPlugin` and `v1beta1.DRAPlugin`, with the
//! `v1alpha1.DRAResourceHealth` stream beside them.
//!
//! - [`sockets`]: where the two sockets live, their modes, stale files and removal;
//! - [`authority`]: the sockets' connections accept any `:authority` (grpc-core clients send
//!   the socket path), as the kubelet's Go plugins do;
//! - [`registration`]: `GetInfo` (with the `supported_versions` of the services served),
//!   `NotifyRegistrationStatus` and the registration state;
//! - [`batch`]: the checks of a claim batch, the error of each claim and the answer map;
//! - [`calls`]: prepare and unprepare of a batch through the [`ClaimPreparer`], the one path
//!   every protocol below shares, its services converting their messages only;
//! - [`node_service`]: `v1alpha3.Node`: prepare, unprepare and the resource stream over a
//!   [`ClaimPreparer`];
//! - [`dra_service`]: `v1.DRAPlugin` and `v1beta1.DRAPlugin`: claims read from the API server,
//!   prepared by the same [`ClaimPreparer`];
//! - [`health_service`]: `v1alpha1.DRAResourceHealth`: the devices' health streamed to the
//!   kubelet (`v1` mode);
//! - [`resources`]: the inventory as `namedResources` instances;
//! - [`versions`]: how a 1.30 and a 1.34 kubelet read `supported_versions`.
//!
//! [`Plugin::bind`] creates both sockets and [`Plugin::serve_services`] serves them until a
//! shutdown signal, then removes them. The services know the prepare contract only
//! ([`crate::prepare`]), never the journal or CDI files behind it.

pub mod authority;
pub mod batch;
pub mod calls;
pub mod dra_service;
pub mod health_service;
pub mod node_service;
pub mod registration;
pub mod resources;
pub mod sockets;
pub mod versions;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::device::Inventory;
use crate::prepare::ClaimPreparer;
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
use dra_types::kubelet::v1alpha1::dra_resource_health_server::DraResourceHealthServer;
use dra_types::kubelet::v1alpha3::node_server::NodeServer;

pub use dra_service::{DraService, DraServiceV1beta1};
pub use health_service::HealthService;
pub use node_service::NodeService;
pub use registration::{
    supported_versions, RegistrationService, RegistrationState, HEALTH_SERVICE, PLUGIN_TYPE,
    SUPPORTED_VERSIONS, V1ALPHA3_VERSION, V1BETA1_SERVICE, V1_SERVICE,
};
pub use sockets::PluginSockets;

/// What failed while setting up or serving the kubelet's sockets.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrpcError {
    /// The driver name cannot name a socket file.
    #[error("driver name {name:?}: {reason}")]
    DriverName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A socket directory could not be created or given its mode.
    #[error("socket directory {}: {source}", path.display())]
    SocketDir {
        /// The directory.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file that is not a socket sits where a socket belongs; it is left alone.
    #[error("{} exists and is not a socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Another process answers on the socket: a second agent for the same driver.
    #[error("{} is in use by another process", path.display())]
    SocketInUse {
        /// The socket path.
        path: PathBuf,
    },
    /// A socket could not be created, given its mode or moved into place.
    #[error("socket {}: {source}", path.display())]
    SocketBind {
        /// The socket path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A socket file could not be removed.
    #[error("removing socket {}: {source}", path.display())]
    SocketRemove {
        /// The socket path.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// A gRPC server stopped with an error.
    #[error("serving {}: {source}", path.display())]
    Serve {
        /// The socket the server listened on.
        path: PathBuf,
        /// The server's error.
        #[source]
        source: tonic::transport::Error,
    },
}

/// The result of this module's fallible calls.
pub type Result<T, E = GrpcError> = std::result::Result<T, E>;

/// Where the sockets go and how a refused registration is retried.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    /// The driver name: the registration's plugin name and the socket names.
    pub driver_name: String,
    /// The kubelet's plugin registry directory (`--kubelet-registry-dir`).
    pub registry_dir: PathBuf,
    /// The kubelet's plugins directory (`--kubelet-plugins-dir`).
    pub plugins_dir: PathBuf,
    /// The wait before the first re-creation of the registration socket after the kubelet refused
    /// the plugin; doubled after each further refusal.
    pub retry_initial: Duration,
    /// The longest wait between re-creations.
    pub retry_max: Duration,
}

impl PluginConfig {
    /// The configuration for `driver_name` with the given directories and the default retry
    /// (5 s, doubling up to 5 minutes).
    pub fn new(
        driver_name: impl Into<String>,
        registry_dir: impl Into<PathBuf>,
        plugins_dir: impl Into<PathBuf>,
    ) -> Self {
        PluginConfig {
            driver_name: driver_name.into(),
            registry_dir: registry_dir.into(),
            plugins_dir: plugins_dir.into(),
            retry_initial: Duration::from_secs(5),
            retry_max: Duration::from_secs(300),
        }
    }

    /// The wait before re-creating the registration socket after `refusals` refusals in a row
    /// (at least 1).
    pub fn retry_delay(&self, refusals: u32) -> Duration {
        let factor = 2u32.saturating_pow(refusals.saturating_sub(1));
        self.retry_initial
            .saturating_mul(factor)
            .min(self.retry_max)
    }
}

/// The services of the plugin socket, which decide what registration advertises.
pub struct PluginServices<P> {
    v1alpha2: Option<(Arc<P>, watch::Receiver<Inventory>)>,
    v1: Option<Arc<DraService<P>>>,
    health: Option<HealthService>,
}

impl<P> std::fmt::Debug for PluginServices<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginServices")
            .field("v1alpha2", &self.v1alpha2.is_some())
            .field("v1", &self.v1)
            .field("health", &self.health.is_some())
            .finish()
    }
}

impl<P: ClaimPreparer> PluginServices<P> {
    /// The Kubernetes 1.30 `v1alpha3.Node` service over `preparer`, streaming `inventory`.
    pub fn v1alpha2(preparer: Arc<P>, inventory: watch::Receiver<Inventory>) -> Self {
        PluginServices {
            v1alpha2: Some((preparer, inventory)),
            v1: None,
            health: None,
        }
    }

    /// The `v1.DRAPlugin` and `v1beta1.DRAPlugin` services of `service`.
    pub fn v1(service: DraService<P>) -> Self {
        PluginServices {
            v1alpha2: None,
            v1: Some(Arc::new(service)),
            health: None,
        }
    }

    /// These services and the v1 ones of `service` beside them.
    #[must_use]
    pub fn with_v1(mut self, service: DraService<P>) -> Self {
        self.v1 = Some(Arc::new(service));
        self
    }

    /// These services and the `v1alpha1.DRAResourceHealth` service `health` beside them.
    #[must_use]
    pub fn with_health(mut self, health: HealthService) -> Self {
        self.health = Some(health);
        self
    }

    /// What registration advertises for these services ([`supported_versions`]).
    pub fn supported_versions(&self) -> Vec<&'static str> {
        supported_versions(
            self.v1alpha2.is_some(),
            self.v1.is_some(),
            self.health.is_some(),
        )
    }
}

/// The kubelet plugin with its sockets bound, ready to serve.
#[derive(Debug)]
pub struct Plugin {
    config: PluginConfig,
    sockets: PluginSockets,
    service_socket: std::os::unix::net::UnixListener,
    registration_socket: std::os::unix::net::UnixListener,
    state: Arc<watch::Sender<RegistrationState>>,
}

impl Plugin {
    /// Creates the plugin socket (its directory mode 0700) and then the registration socket, so
    /// that the kubelet finds the service ready when it sees the registration. Stale socket files
    /// of an earlier run are replaced.
    pub fn bind(config: PluginConfig) -> Result<Self> {
        let sockets = PluginSockets::new(
            &config.driver_name,
            &config.registry_dir,
            &config.plugins_dir,
        )?;
        let service_socket = sockets.bind_plugin()?;
        let registration_socket = sockets.bind_registration()?;
        let (state, _) = watch::channel(RegistrationState::Waiting);
        Ok(Plugin {
            config,
            sockets,
            service_socket,
            registration_socket,
            state: Arc::new(state),
        })
    }

    /// The socket paths.
    pub fn sockets(&self) -> &PluginSockets {
        &self.sockets
    }

    /// The registration state as the kubelet last reported it.
    pub fn registration(&self) -> watch::Receiver<RegistrationState> {
        self.state.subscribe()
    }

    /// Serves the 1.30 `v1alpha3.Node` service over `preparer` and `inventory`; see
    /// [`Plugin::serve_services`].
    pub async fn serve<P: ClaimPreparer>(
        self,
        preparer: Arc<P>,
        inventory: watch::Receiver<Inventory>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        self.serve_services(PluginServices::v1alpha2(preparer, inventory), shutdown)
            .await
    }

    /// Serves both sockets, the plugin socket with `services`, until `shutdown` completes or a
    /// server fails, then removes the registration socket (the kubelet deregisters the plugin
    /// and closes its resource stream), lets calls in flight finish and removes the plugin
    /// socket.
    pub async fn serve_services<P: ClaimPreparer>(
        self,
        services: PluginServices<P>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let versions = services.supported_versions();
        let registration = RegistrationService::new(
            &self.config.driver_name,
            &self.sockets,
            &versions,
            Arc::clone(&self.state),
        );
        tracing::info!(
            driver = %self.config.driver_name,
            registration = %self.sockets.registration().display(),
            plugin = %self.sockets.plugin().display(),
            supported_versions = ?versions,
            "Serving the kubelet plugin sockets"
        );
        let plugin = async {
            let result = serve_plugin(
                services,
                self.service_socket,
                &self.sockets,
                stop_rx.clone(),
            )
            .await;
            stop_tx.send_replace(true);
            result
        };
        let registration = async {
            let result = registration::serve(
                registration,
                &self.config,
                &self.sockets,
                self.registration_socket,
                stop_rx.clone(),
            )
            .await;
            stop_tx.send_replace(true);
            result
        };
        let servers = async { tokio::join!(plugin, registration) };
        tokio::pin!(servers);
        let (plugin, registration) = tokio::select! {
            results = &mut servers => results,
            () = shutdown => {
                tracing::info!("Stopping the kubelet plugin");
                stop_tx.send_replace(true);
                servers.await
            }
        };
        let removed = self.sockets.remove();
        plugin.and(registration).and(removed)
    }
}

/// Serves `services` on the plugin socket until `stop`.
async fn serve_plugin<P: ClaimPreparer>(
    services: PluginServices<P>,
    listener: std::os::unix::net::UnixListener,
    sockets: &PluginSockets,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let path = sockets.plugin().to_owned();
    let listener =
        tokio::net::UnixListener::from_std(listener).map_err(|source| GrpcError::SocketBind {
            path: path.clone(),
            source,
        })?;
    let v1alpha2 = services.v1alpha2.map(|(preparer, inventory)| {
        NodeServer::new(NodeService::new(preparer, inventory, stop.clone()))
    });
    let v1 = services
        .v1
        .as_ref()
        .map(|service| v1::dra_plugin_server::DraPluginServer::from_arc(Arc::clone(service)));
    let v1beta1 = services.v1.map(|service| {
        v1beta1::dra_plugin_server::DraPluginServer::new(DraServiceV1beta1(service))
    });
    let health = services
        .health
        .map(|service| DraResourceHealthServer::new(service.with_stop(stop.clone())));
    tonic::transport::Server::builder()
        .add_optional_service(v1alpha2)
        .add_optional_service(v1)
        .add_optional_service(v1beta1)
        .add_optional_service(health)
        .serve_with_incoming_shutdown(authority::incoming(listener), stopped(stop))
        .await
        .map_err(|source| GrpcError::Serve { path, source })
}

/// Binds the sockets of `config` and serves them until `shutdown`; see [`Plugin`]. A caller
/// that needs the registration state uses [`Plugin::bind`] and [`Plugin::registration`].
pub async fn serve<P: ClaimPreparer>(
    config: PluginConfig,
    preparer: Arc<P>,
    inventory: watch::Receiver<Inventory>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    Plugin::bind(config)?
        .serve(preparer, inventory, shutdown)
        .await
}

/// Completes once `stop` says stop (or its sender is gone).
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
