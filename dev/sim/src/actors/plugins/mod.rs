//! The simulated kubelet's side of the DRA plugin interfaces, for the nodes given a kubelet
//! directory. As Kubernetes 1.30 does it: sockets created in `<root>/plugins_registry/` are
//! seen by the plugin watcher (`watcher`) and registered by the reconciler (`registry`), their `NodeListAndWatchResources` stream becomes the node's
//! `ResourceSlices` (`resources`), and a pod's claims are prepared before it runs and unprepared
//! after it ends (`prepare`). The decisions are pure and tested on their own: what registration
//! accepts (`validation`), which claims to prepare or unprepare (`claims`) and which slice
//! writes match a message (`slices`).
//!
//! As Kubernetes 1.34 does it: a plugin registers with the `DRAPlugin` services it serves and is
//! called over the first one the kubelet supports (`services`, `instances`); drivers publish
//! their own slices, the kubelet only wipes the node's slices at start and those of a driver gone
//! for the wipe delay (`wiping`); claims are checked (`checks`) and prepared with
//! `Claim{namespace, uid, name}` over `v1` or `v1beta1` (`prepare_v1`, `calls`). From 1.36
//! (`ResourceHealthStatus`) a plugin listing `v1alpha1.DRAResourceHealth` is watched for its
//! devices' health, which running pods show in their container statuses (`health`).
//!
//! Talks to the API server only through `kube::Client` and to plugins over Unix sockets with the
//! node agent's generated gRPC clients. Nodes without a kubelet directory have no [`NodePlugins`].

pub(crate) mod calls;
mod checks;
pub(crate) mod claims;
pub(crate) mod error;
pub(crate) mod health;
mod instances;
pub(crate) mod prepare;
mod prepare_v1;
mod registry;
mod resources;
pub(crate) mod services;
mod slices;
pub(crate) mod validation;
mod watcher;
pub(crate) mod wiping;

pub use services::Service;

use dra_runtime::lock::LockExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Uri};

use super::error::ActorError;
use super::ObjectKey;
use crate::KubernetesVersion;
use calls::PreparedDevice;
use claims::ClaimCache;
use error::DriverError;
use health::HealthCache;
use instances::Instance;
use validation::Version;
use watcher::DesiredSockets;

/// The directory under a kubelet root that the kubelet watches for registration sockets.
pub const REGISTRY_DIR: &str = "plugins_registry";
/// The directory under a kubelet root where plugins put their service sockets.
pub const PLUGINS_DIR: &str = "plugins";

/// Tuning of the kubelet's plugin handling; the defaults are the kubelet's where it has one.
#[derive(Debug, Clone)]
pub struct PluginsConfig {
    /// How often the reconciler looks again at the sockets the plugin watcher wants, besides
    /// each change: registrations to retry, 1.34 slice wipes that are due.
    pub registry_poll: Duration,
    /// The first wait before a failed registration is tried again, doubled after each failure.
    pub registration_retry: Duration,
    /// The longest wait between registration attempts (1.30: about 2 minutes).
    pub registration_retry_max: Duration,
    /// The wait before a failed resource stream is opened again (1.30: 5 s).
    pub stream_retry: Duration,
    /// The first wait before a failed prepare of a pod is tried again, doubled after each failure.
    pub prepare_retry: Duration,
    /// The longest wait between prepare attempts of a pod.
    pub prepare_retry_max: Duration,
    /// How often a pod whose claims are not allocated or reserved yet is looked at again.
    pub claim_poll: Duration,
    /// The deadline of one `NodePrepareResources` or `NodeUnprepareResources` call (45 s).
    pub call_timeout: Duration,
    /// 1.34: how long a driver may have no registered plugin before its slices of the node are
    /// deleted (30 s).
    pub wipe_delay: Duration,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        Self {
            registry_poll: Duration::from_millis(300),
            registration_retry: Duration::from_millis(500),
            registration_retry_max: Duration::from_secs(122),
            stream_retry: Duration::from_secs(5),
            prepare_retry: Duration::from_millis(200),
            prepare_retry_max: Duration::from_secs(10),
            claim_poll: Duration::from_millis(250),
            call_timeout: Duration::from_secs(45),
            wipe_delay: Duration::from_secs(30),
        }
    }
}

/// The wait after `failures` failures in a row (at least 1): `initial` doubled, at most `max`.
pub(crate) fn backoff(initial: Duration, max: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    initial.saturating_mul(1 << exponent).min(max)
}

/// The plugin handling of every node with a kubelet directory.
#[derive(Debug)]
pub struct Plugins {
    nodes: BTreeMap<String, Arc<NodePlugins>>,
    /// Counts the changes of device health on any node.
    health_updates: Arc<watch::Sender<u64>>,
}

impl Default for Plugins {
    fn default() -> Self {
        Self {
            nodes: BTreeMap::new(),
            health_updates: Arc::new(watch::channel(0).0),
        }
    }
}

impl Plugins {
    /// The plugin handling of the nodes in `kubelet_dirs` (node name -> kubelet root), as the
    /// kubelet of `version` does it.
    pub(crate) fn new(
        client: &Client,
        config: &PluginsConfig,
        kubelet_dirs: &BTreeMap<String, PathBuf>,
        version: KubernetesVersion,
    ) -> Self {
        let health_updates = Arc::new(watch::channel(0).0);
        let nodes = kubelet_dirs
            .iter()
            .map(|(node, root)| {
                let plugins = NodePlugins {
                    node: node.clone(),
                    root: root.clone(),
                    client: client.clone(),
                    config: config.clone(),
                    version,
                    desired: Arc::default(),
                    plugins: Mutex::new(BTreeMap::new()),
                    instances: Mutex::new(BTreeMap::new()),
                    claims: Mutex::new(ClaimCache::default()),
                    pods: Mutex::new(BTreeMap::new()),
                    failures: Mutex::new(BTreeMap::new()),
                    prepared_devices: Mutex::new(BTreeMap::new()),
                    health: Mutex::new(HealthCache::default()),
                    health_written: Mutex::new(BTreeMap::new()),
                    health_updates: Arc::clone(&health_updates),
                };
                (node.clone(), Arc::new(plugins))
            })
            .collect();
        Self {
            nodes,
            health_updates,
        }
    }

    /// Changes whenever a device's health changed on some node.
    pub(crate) fn health_updates(&self) -> watch::Receiver<u64> {
        self.health_updates.subscribe()
    }

    /// The plugin handling of `node`, if it has a kubelet directory.
    pub fn node(&self, node: &str) -> Option<&Arc<NodePlugins>> {
        self.nodes.get(node)
    }

    /// Starts the plugin watcher of every node's registry directory (creating the kubelet
    /// directories) and one reconciler per node; they stop when `stop` turns true.
    pub(crate) fn spawn(
        &self,
        stop: &watch::Receiver<bool>,
    ) -> Result<Vec<JoinHandle<()>>, Box<ActorError>> {
        if self.nodes.is_empty() {
            return Ok(Vec::new());
        }
        for node in self.nodes.values() {
            let dir = node.plugins_dir();
            std::fs::create_dir_all(&dir)
                .map_err(|source| Box::new(ActorError::KubeletDir { dir, source }))?;
        }
        let dirs = self
            .nodes
            .values()
            .map(|node| (node.registry_dir(), Arc::clone(&node.desired)))
            .collect();
        let watcher = watcher::start(dirs, stop)
            .map_err(|source| Box::new(ActorError::PluginWatcher { source }))?;
        let mut tasks = vec![watcher];
        tasks.extend(
            self.nodes
                .values()
                .map(|node| tokio::spawn(registry::reconcile(Arc::clone(node), stop.clone()))),
        );
        Ok(tasks)
    }

    /// The keys of every pod that still references claims on some node.
    pub(crate) fn tracked_keys(&self) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self
            .nodes
            .values()
            .flat_map(|node| {
                node.pods
                    .lock_or_recover()
                    .values()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The pods of `key` that still reference claims: `(node, pod UID)`.
    pub(crate) fn tracked(&self, key: &ObjectKey) -> Vec<(Arc<NodePlugins>, String)> {
        self.nodes
            .values()
            .flat_map(|node| {
                node.pods_of(key)
                    .into_iter()
                    .map(move |uid| (Arc::clone(node), uid))
            })
            .collect()
    }
}

/// A registered plugin.
struct Registered {
    /// The registration socket it came from.
    socket: PathBuf,
    /// Its highest supported version.
    version: Version,
    /// A connection to its service socket, made on first use and again after a failure.
    channel: Channel,
    /// The task turning its resource stream into `ResourceSlices`.
    stream: JoinHandle<()>,
}

/// One node's plugins and claims.
pub struct NodePlugins {
    node: String,
    root: PathBuf,
    client: Client,
    config: PluginsConfig,
    version: KubernetesVersion,
    /// The registration sockets the plugin watcher saw created, not deleted since.
    desired: Arc<DesiredSockets>,
    /// 1.30: the registered plugin of each driver.
    plugins: Mutex<BTreeMap<String, Registered>>,
    /// 1.34: the registered plugins (instances) of each driver, in registration order.
    instances: Mutex<BTreeMap<String, Vec<Instance>>>,
    claims: Mutex<ClaimCache>,
    /// The pods that reference claims, by UID, with their key.
    pods: Mutex<BTreeMap<String, ObjectKey>>,
    /// Failed prepare attempts in a row, by pod UID.
    failures: Mutex<BTreeMap<String, u32>>,
    /// 1.34: the devices each driver prepared for a claim, by claim UID and driver.
    prepared_devices: Mutex<BTreeMap<(String, String), Vec<PreparedDevice>>>,
    /// The devices' health from the plugins' health streams.
    health: Mutex<HealthCache>,
    /// The container statuses last written for a pod's device health, by pod UID.
    health_written: Mutex<BTreeMap<String, serde_json::Value>>,
    /// Where health changes are counted.
    health_updates: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for NodePlugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePlugins")
            .field("node", &self.node)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl NodePlugins {
    /// The directory watched for registration sockets.
    pub(crate) fn registry_dir(&self) -> PathBuf {
        self.root.join(REGISTRY_DIR)
    }

    /// The directory plugins put their service sockets in.
    pub(crate) fn plugins_dir(&self) -> PathBuf {
        self.root.join(PLUGINS_DIR)
    }

    /// The names of the registered drivers.
    pub fn drivers(&self) -> Vec<String> {
        if self.version.serves_v1() {
            return self.instances.lock_or_recover().keys().cloned().collect();
        }
        self.plugins.lock_or_recover().keys().cloned().collect()
    }

    /// Whether the pod references claims that are not unprepared yet.
    pub(crate) fn holds(&self, pod_uid: &str) -> bool {
        self.claims.lock_or_recover().holds(pod_uid)
    }

    fn pods_of(&self, key: &ObjectKey) -> Vec<String> {
        self.pods
            .lock_or_recover()
            .iter()
            .filter(|(_, k)| *k == key)
            .map(|(uid, _)| uid.clone())
            .collect()
    }

    /// The connection to `driver`'s plugin, or the 1.30 kubelet's error when none is registered.
    fn channel(&self, driver: &str) -> Result<Channel, DriverError> {
        self.plugins
            .lock_or_recover()
            .get(driver)
            .map(|p| p.channel.clone())
            .ok_or_else(|| DriverError::PluginNotFound {
                driver: driver.to_owned(),
            })
    }
}

/// A gRPC channel to the Unix socket at `path`, connected on first use and again after a
/// failure, as the 1.30 kubelet keeps one connection per plugin.
pub(crate) fn lazy_channel(path: &Path) -> Channel {
    let path = path.to_owned();
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(1))
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
}

/// A gRPC channel to the Unix socket at `path`, connected now, as the kubelet dials a plugin
/// (also the node agent's tests' and benchmark's kubelet side).
pub async fn connect(path: &Path) -> Result<Channel, tonic::transport::Error> {
    let path = path.to_owned();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
}

/// Owned strings, for the registration tests.
#[cfg(test)]
fn list(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|&e| e.to_owned()).collect()
}

/// What a plugin answers to `GetInfo`, for the registration tests.
#[cfg(test)]
fn plugin(
    kind: &str,
    name: &str,
    endpoint: &str,
    versions: &[String],
) -> dra_types::kubelet::pluginregistration::PluginInfo {
    dra_types::kubelet::pluginregistration::PluginInfo {
        r#type: kind.to_owned(),
        name: name.to_owned(),
        endpoint: endpoint.to_owned(),
        supported_versions: versions.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_maximum() {
        let (initial, max) = (Duration::from_millis(500), Duration::from_secs(3));
        let waits: Vec<_> = (1..=5)
            .map(|n| backoff(initial, max, n).as_millis())
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 3000, 3000]);
        assert_eq!(backoff(initial, max, u32::MAX), max);
    }
}
