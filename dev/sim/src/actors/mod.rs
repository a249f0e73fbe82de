//! The control-plane actors a DRA driver talks to. For Kubernetes 1.30 (`v1alpha2`): the
//! resourceclaim controller (`claims`), the scheduler with its `DynamicResources` plugin
//! (`scheduler_v1alpha2`), the garbage collector (`gc`) and a minimal kubelet (`kubelet`). For
//! 1.34 (`resource.k8s.io/v1`): the scheduler with the 1.34 `DynamicResources` plugin, which
//! allocates claims from the `ResourceSlices` with CEL (`scheduler_v1`), the 1.34 resourceclaim
//! controller (`claims::v1`), the garbage collector and the kubelet, with the kubelet talking to
//! plugins as 1.34 does. What both schedulers write besides claims is in `scheduling`. The actors
//! of a release share one set of informers (`wiring`: what both releases share once, each
//! release only what differs) and talk to the API server only over HTTP through `kube::Client`,
//! exactly like real controllers.
//!
//! Public: [`Actors`], [`ActorsConfig`], [`ActorError`], [`POD_CLAIM_NAME_ANNOTATION`],
//! `kubelet::RUN_SECONDS_ANNOTATION` and the plugins' configuration, directories and services.
//!
//! Must not depend on the server module: actors see the cluster only through the client.

pub(crate) mod claim_refs;
pub(crate) mod claims;
pub(crate) mod device_taints;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod gc;
pub(crate) mod indexes;
pub mod kubelet;
pub mod plugins;
pub(crate) mod pod_shape;
pub(crate) mod scheduler_v1;
pub(crate) mod scheduler_v1alpha2;
pub(crate) mod scheduling;
pub(crate) mod selectors;
pub(crate) mod taint_eviction;
mod wiring;
pub(crate) mod writes;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dra_runtime::workqueue::RateLimit;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;
use kube::{Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::ActorError;
pub(crate) use error::Result;

use plugins::{Plugins, PluginsConfig};

/// The retry backoff of every actor's work queue and write loop: 5 ms doubling up to 5 s per key,
/// without an overall bucket.
pub(crate) const ACTOR_BACKOFF: RateLimit =
    RateLimit::per_key(Duration::from_millis(5), Duration::from_secs(5));

/// Annotation on a claim generated from a template naming the pod claim it was made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// A namespaced object's key in the work queues.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `namespace/name`.
    pub(crate) fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The key of an object.
    pub(crate) fn of(meta: &ObjectMeta) -> Self {
        Self::new(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The names of the `ResourceClaims` a pod uses, as far as they are known: direct references and
/// the generated names recorded in `status.resourceClaimStatuses`.
pub(crate) fn pod_claim_names(pod: &Pod) -> Vec<String> {
    let direct = pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.source.as_ref()?.resource_claim_name.clone());
    let generated = pod
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .filter_map(|s| s.resource_claim_name.clone());
    direct.chain(generated).collect()
}

/// Tuning of the actors.
#[derive(Debug, Clone)]
pub struct ActorsConfig {
    /// Concurrent scheduling cycles.
    pub scheduler_workers: usize,
    /// Concurrent syncs of the resourceclaim controller (per queue).
    pub claim_workers: usize,
    /// Concurrent kubelet syncs.
    pub kubelet_workers: usize,
    /// Whether every node runs the simulated kubelet. Without, bound pods are never started and
    /// stay Pending, and a pod deleted after binding keeps its deletion timestamp, as on the fake
    /// nodes of the upstream `scheduler_perf` harness.
    pub kubelets: bool,
    /// Concurrent garbage collector syncs.
    pub gc_workers: usize,
    /// How the kubelet handles the DRA plugins of nodes with a kubelet directory.
    pub plugins: PluginsConfig,
    /// The release whose controllers and kubelet behaviour the actors play.
    pub kubernetes_version: crate::KubernetesVersion,
    /// The feature gates and API versions the server was started with (which taint features
    /// the scheduler and the eviction controller honour, and where they read the rules).
    pub api: crate::ApiOverrides,
    /// The shortest time between two updates of a `DeviceTaintRule`'s status while its
    /// generation stays (upstream: 10 s).
    pub rule_status_period: Duration,
}

impl Default for ActorsConfig {
    fn default() -> Self {
        Self {
            scheduler_workers: 8,
            claim_workers: 4,
            kubelet_workers: 4,
            kubelets: true,
            gc_workers: 2,
            plugins: PluginsConfig::default(),
            kubernetes_version: crate::KubernetesVersion::default(),
            api: crate::ApiOverrides::default(),
            rule_status_period: Duration::from_secs(10),
        }
    }
}

/// What the wiring of a release started: the tasks and how to close every work queue.
struct Started {
    tasks: Vec<JoinHandle<()>>,
    queues_close: Vec<Box<dyn Fn() + Send + Sync>>,
}

/// The running actors; dropping it does not stop them, `shutdown` does.
pub struct Actors {
    plugins: Arc<Plugins>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    queues_close: Vec<Box<dyn Fn() + Send + Sync>>,
}

impl fmt::Debug for Actors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Actors")
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl Actors {
    /// Starts the informers and all actors against the API server behind `client`, and waits
    /// until every informer has listed once. No node has DRA plugins.
    pub async fn start(client: Client, config: &ActorsConfig) -> Result<Self> {
        Self::start_with_plugins(client, config, &BTreeMap::new()).await
    }

    /// [`Actors::start`], with the kubelet driving the DRA plugins of the nodes in
    /// `kubelet_dirs` (node name -> kubelet root directory).
    pub async fn start_with_plugins(
        client: Client,
        config: &ActorsConfig,
        kubelet_dirs: &BTreeMap<String, PathBuf>,
    ) -> Result<Self> {
        let (shutdown, stop) = watch::channel(false);
        let plugins = Arc::new(Plugins::new(
            &client,
            &config.plugins,
            kubelet_dirs,
            config.kubernetes_version,
        ));
        let started = wiring::start(&client, config, &plugins, &stop).await;
        let Started {
            mut tasks,
            queues_close,
        } = match started {
            Ok(started) => started,
            Err(error) => {
                let _ = shutdown.send(true);
                return Err(error);
            }
        };
        match plugins.spawn(&stop) {
            Ok(started) => tasks.extend(started),
            Err(error) => {
                let _ = shutdown.send(true);
                return Err(*error);
            }
        }
        tracing::debug!("Control-plane actors started");
        Ok(Self {
            plugins,
            shutdown,
            tasks,
            queues_close,
        })
    }

    /// The DRA plugin handling of the nodes with a kubelet directory.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// Stops the informers and workers: queues close, a sync in progress gets two seconds to
    /// finish its current request before its task is aborted.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for close in &self.queues_close {
            close();
        }
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

/// Waits until the informer behind `store` has listed once.
async fn wait_ready<K>(store: &Store<K>) -> Result<()>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .wait_until_ready()
        .await
        .map_err(|_| ActorError::InformerStopped)
}
