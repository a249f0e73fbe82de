//! Assembles a simulated cluster: the API server, the control-plane actors running against it
//! over HTTP, and the simulated hardware (Nodes plus the `ResourceSlices` that publish their devices
//! for a DRA driver). `dra-sim` and `dra-ledger sim`/`demo` start clusters through this module.
//! A node given a kubelet directory has no simulated slice: a real DRA plugin registers with its
//! simulated kubelet there and publishes the node's devices itself (`actors::plugins`).
//!
//! Depends on `server` only through its public handle and on `actors` only through `Actors`.

pub mod cli;
pub mod inventory;

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1alpha2::{ResourceClass, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::actors::writes::with_retry;
use crate::actors::{ActorError, Actors, ActorsConfig};
use crate::server::{ServerConfig, ServerError, SimServer, SimServerHandle};

/// Default DRA driver name whose devices the cluster publishes.
pub const DEFAULT_DRIVER_NAME: &str = "gpu.dra-ledger.io";

/// What went wrong while starting or running a cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The API server failed.
    #[error("api server: {0}")]
    Server(Box<ServerError>),
    /// An actor or a setup request failed.
    #[error("control plane: {0}")]
    Actors(Box<ActorError>),
    /// A device memory size is not a Kubernetes quantity.
    #[error("memory {0:?} is not a quantity such as 80Gi")]
    Quantity(String),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Waiting for a signal failed.
    #[error("signal handling: {0}")]
    Signal(#[source] std::io::Error),
    /// The fault injection is inconsistent.
    #[error("invalid configuration: {0}")]
    Faults(#[from] crate::server::faults::FaultsError),
    /// A duration flag does not parse.
    #[error(transparent)]
    Duration(#[from] dra_runtime::process::DurationError),
    /// A kubelet directory could not be created.
    #[error("kubelet directory {}: {source}", path.display())]
    KubeletDir {
        /// The directory.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// A `--fault-delay` range ends before it starts.
    #[error("delay range {0:?} ends before it starts")]
    DelayRange(String),
    /// A `--kubelet-dir` value is not `NODE=DIR`.
    #[error("{0:?} is not NODE=DIR")]
    KubeletDirFlag(String),
}

impl From<ServerError> for ClusterError {
    fn from(error: ServerError) -> Self {
        Self::Server(Box::new(error))
    }
}

impl From<ActorError> for ClusterError {
    fn from(error: ActorError) -> Self {
        Self::Actors(Box::new(error))
    }
}

/// Result alias of the cluster module.
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

/// Shape of a simulated cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The API server's configuration (listen address, fault injection, watch history).
    pub server: ServerConfig,
    /// Tuning of the control-plane actors.
    pub actors: ActorsConfig,
    /// Number of nodes to create (`<node_prefix>0` ..).
    pub nodes: usize,
    /// Devices published per node; 0 creates nodes without a `ResourceSlice`.
    pub devices_per_node: usize,
    /// Driver name in the `ResourceSlices` (and of `resource_class`).
    pub driver_name: String,
    /// Device models, cycled across nodes (`model` string attribute).
    pub models: Vec<String>,
    /// Device memory sizes as quantities, cycled across nodes (`memory` quantity attribute).
    pub memory: Vec<String>,
    /// NUMA nodes per node; the devices of a node are split evenly (`numa` int attribute).
    pub numa_nodes: usize,
    /// The `driverVersion` version attribute of every device.
    pub driver_version: String,
    /// Prefix of node names.
    pub node_prefix: String,
    /// When set, a class of this name for `driver_name` is created: a `ResourceClass` on 1.30, a
    /// `DeviceClass` selecting the driver's devices by CEL on 1.34.
    pub resource_class: Option<String>,
    /// Kubelet root directories by node name. The kubelet of such a node watches
    /// `<root>/plugins_registry/` for DRA plugins and prepares claims through them; the node
    /// gets no simulated `ResourceSlice`. On 1.30 the kubelet publishes the `ResourceSlices` the
    /// plugins report; on 1.34 the plugins publish their own.
    pub kubelet_dirs: BTreeMap<String, PathBuf>,
    /// The release the cluster plays; copied into the server's and the actors' configuration
    /// by [`start_cluster`].
    pub kubernetes_version: crate::KubernetesVersion,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::default(),
            actors: ActorsConfig::default(),
            nodes: 0,
            devices_per_node: 0,
            driver_name: DEFAULT_DRIVER_NAME.to_owned(),
            models: vec!["H100".to_owned()],
            memory: vec!["80Gi".to_owned()],
            numa_nodes: 2,
            driver_version: "1.0.0".to_owned(),
            node_prefix: "node-".to_owned(),
            resource_class: None,
            kubelet_dirs: BTreeMap::new(),
            kubernetes_version: crate::KubernetesVersion::default(),
        }
    }
}

impl ClusterConfig {
    /// Checks the configuration before anything starts.
    pub(crate) fn validate(&self) -> Result<()> {
        for memory in &self.memory {
            inventory::check_quantity(memory)?;
        }
        if self.driver_name.is_empty() || self.driver_name.contains('/') {
            return Err(ClusterError::Config(format!(
                "driver name {:?} is not a DNS subdomain",
                self.driver_name
            )));
        }
        if self.numa_nodes == 0 {
            return Err(ClusterError::Config("numa nodes must be at least 1".into()));
        }
        if let Some(unknown) = self
            .kubelet_dirs
            .keys()
            .find(|node| !(0..self.nodes).any(|i| inventory::node_name(self, i) == **node))
        {
            return Err(ClusterError::Config(format!(
                "kubelet directory for {unknown:?}, which is not a node of the cluster"
            )));
        }
        if !self.actors.kubelets && !self.kubelet_dirs.is_empty() {
            return Err(ClusterError::Config(
                "kubelet directories need the simulated kubelet, which is turned off".into(),
            ));
        }
        self.server.faults.validate()?;
        Ok(())
    }
}

/// A running cluster. `shutdown` stops the actors, then the server.
pub struct ClusterHandle {
    server: SimServerHandle,
    actors: Actors,
    client: Client,
    node_names: Vec<String>,
}

impl std::fmt::Debug for ClusterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterHandle")
            .field("url", &self.server.url())
            .field("nodes", &self.node_names.len())
            .finish_non_exhaustive()
    }
}

impl ClusterHandle {
    /// The API server (URL, kubeconfig, fault injection, in-process store reads).
    pub fn server(&self) -> &SimServerHandle {
        &self.server
    }

    /// A client for the API server (plain HTTP, default namespace `default`).
    pub fn kube_client(&self) -> Client {
        self.client.clone()
    }

    /// The base URL of the API server.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The simulated kubelets' DRA plugins, on the nodes with a kubelet directory.
    pub fn plugins(&self) -> &crate::actors::plugins::Plugins {
        self.actors.plugins()
    }

    /// Names of the nodes created at start.
    pub fn node_names(&self) -> &[String] {
        &self.node_names
    }

    /// Stops the actors, then the API server.
    pub async fn shutdown(self) {
        self.actors.shutdown().await;
        self.server.shutdown().await;
    }
}

/// Starts the API server, creates the nodes, their `ResourceSlices` and the optional `ResourceClass`,
/// then starts the control-plane actors and waits until their caches are filled.
pub async fn start_cluster(config: ClusterConfig) -> Result<ClusterHandle> {
    config.validate()?;
    for root in config.kubelet_dirs.values() {
        for dir in [
            root.join(crate::actors::plugins::REGISTRY_DIR),
            root.join(crate::actors::plugins::PLUGINS_DIR),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(|source| ClusterError::KubeletDir { path: dir, source })?;
        }
    }
    let server = SimServer::start(ServerConfig {
        kubernetes_version: config.kubernetes_version,
        ..config.server.clone()
    })
    .await?;
    let client = server.kube_client()?;
    let control_plane = server.in_process_client();
    let node_names = match populate(&control_plane, &config).await {
        Ok(names) => names,
        Err(error) => {
            server.shutdown().await;
            return Err(error);
        }
    };
    let actors_config = ActorsConfig {
        kubernetes_version: config.kubernetes_version,
        api: config.server.api.clone(),
        ..config.actors.clone()
    };
    let actors =
        match Actors::start_with_plugins(control_plane, &actors_config, &config.kubelet_dirs).await
        {
            Ok(actors) => actors,
            Err(error) => {
                server.shutdown().await;
                return Err(error.into());
            }
        };
    tracing::info!(url = %server.url(), nodes = config.nodes, devices_per_node = config.devices_per_node, "Simulated cluster started");
    Ok(ClusterHandle {
        server,
        actors,
        client,
        node_names,
    })
}

/// Creates the nodes (ready), one `ResourceSlice` per node with devices (v1alpha2 on 1.30, v1 on
/// 1.34), and the class.
pub async fn populate(client: &Client, config: &ClusterConfig) -> Result<Vec<String>> {
    if let Some(class) = config
        .resource_class
        .as_ref()
        .filter(|_| config.kubernetes_version.serves_v1())
    {
        let classes: Api<dra_types::resource_v1::DeviceClass> = Api::all(client.clone());
        let expression = format!("device.driver == {:?}", config.driver_name);
        let object = dra_types::resource_v1::DeviceClass::with_cel(class, &[&expression]);
        let params = PostParams::default();
        with_retry("create device class", || classes.create(&params, &object)).await?;
    } else if let Some(class) = &config.resource_class {
        let classes: Api<ResourceClass> = Api::all(client.clone());
        let object = ResourceClass {
            metadata: ObjectMeta {
                name: Some(class.clone()),
                ..ObjectMeta::default()
            },
            driver_name: config.driver_name.clone(),
            ..ResourceClass::default()
        };
        let params = PostParams::default();
        with_retry("create resource class", || classes.create(&params, &object)).await?;
    }
    futures::stream::iter(0..config.nodes)
        .map(|index| add_node(client, config, index))
        .buffered(16)
        .try_collect()
        .await
}

/// Creates node number `index` as a ready node and publishes its devices (unless its plugins do,
/// see [`ClusterConfig::kubelet_dirs`]); returns its name.
pub async fn add_node(client: &Client, config: &ClusterConfig, index: usize) -> Result<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = inventory::node(config, index);
    let name = inventory::node_name(config, index);
    let params = PostParams::default();
    let created = with_retry(&format!("create node {name}"), || {
        nodes.create(&params, &node)
    })
    .await?;
    let status = inventory::ready_status();
    let (patch_params, patch) = (PatchParams::default(), Patch::Merge(&status));
    with_retry(&format!("mark node {name} ready"), || {
        nodes.patch_status(&name, &patch_params, &patch)
    })
    .await?;
    if config.devices_per_node > 0
        && !config.kubelet_dirs.contains_key(&name)
        && config.kubernetes_version.serves_v1()
    {
        let slices: Api<dra_types::resource_v1::ResourceSlice> = Api::all(client.clone());
        let uid = created.metadata.uid.unwrap_or_default();
        let slice = inventory::slice_v1(config, index, &uid);
        with_retry(&format!("publish devices of {name}"), || {
            slices.create(&params, &slice)
        })
        .await?;
    } else if config.devices_per_node > 0 && !config.kubelet_dirs.contains_key(&name) {
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        let uid = created.metadata.uid.unwrap_or_default();
        let slice = inventory::resource_slice(config, index, &uid);
        with_retry(&format!("publish devices of {name}"), || {
            slices.create(&params, &slice)
        })
        .await?;
    }
    Ok(name)
}
