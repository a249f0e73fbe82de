//! The Kubernetes 1.30 control-plane actors a classic DRA driver talks to: the resourceclaim
//! controller (`claims`), the scheduler with its `DynamicResources` plugin (`scheduler`), the garbage
//! collector (`gc`) and a minimal kubelet (`kubelet`). They share one set of informers and talk to
//! the API server only over HTTP through `kube::Client`, exactly like real controllers.
//!
//! Must not depend on the server module: actors see the cluster only through the client.

pub mod claims;
pub mod error;
pub mod gc;
pub mod kubelet;
pub mod plugins;
pub mod runtime;
pub mod scheduler;
pub mod selectors;
mod wiring;
pub mod writes;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimTemplate, ResourceClass, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::{Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::{ActorError, Result};

use claims::ClaimController;
use gc::GarbageCollector;
use kubelet::Kubelet;
use plugins::{Plugins, PluginsConfig};
use scheduler::Scheduler;
use wiring::{gc_kinds, spawn_informers, spawn_workers, Parts, Writers};

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
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The key of an object.
    pub fn of(meta: &ObjectMeta) -> Self {
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
pub fn pod_claim_names(pod: &Pod) -> Vec<String> {
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
    /// Concurrent garbage collector syncs.
    pub gc_workers: usize,
    /// How the kubelet handles the DRA plugins of nodes with a kubelet directory.
    pub plugins: PluginsConfig,
    /// The release whose controllers and kubelet behaviour the actors play.
    pub kubernetes_version: crate::KubernetesVersion,
}

impl Default for ActorsConfig {
    fn default() -> Self {
        Self {
            scheduler_workers: 8,
            claim_workers: 4,
            kubelet_workers: 4,
            gc_workers: 2,
            plugins: PluginsConfig::default(),
            kubernetes_version: crate::KubernetesVersion::default(),
        }
    }
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
        let plugins = Arc::new(Plugins::new(&client, &config.plugins, kubelet_dirs));
        let (pods, pods_w) = reflector::store::<Pod>();
        let (nodes, nodes_w) = reflector::store::<Node>();
        let (claims, claims_w) = reflector::store::<ResourceClaim>();
        let (contexts, contexts_w) = reflector::store::<PodSchedulingContext>();
        let (classes, classes_w) = reflector::store::<ResourceClass>();
        let (templates, templates_w) = reflector::store::<ResourceClaimTemplate>();
        let (slices, slices_w) = reflector::store::<ResourceSlice>();
        let (config_maps, config_maps_w) = reflector::store::<ConfigMap>();
        let parts = Parts {
            scheduler: Arc::new(Scheduler::new(
                client.clone(),
                pods.clone(),
                nodes.clone(),
                claims.clone(),
                contexts.clone(),
                classes.clone(),
            )),
            controller: Arc::new(ClaimController::new(
                client.clone(),
                pods.clone(),
                claims.clone(),
                templates.clone(),
            )),
            kubelet: Arc::new(Kubelet::new(
                client.clone(),
                pods.clone(),
                Arc::clone(&plugins),
            )),
            gc: Arc::new(GarbageCollector::new(client.clone(), gc_kinds())),
        };
        let writers = Writers {
            pods: pods_w,
            nodes: nodes_w,
            claims: claims_w,
            contexts: contexts_w,
            classes: classes_w,
            templates: templates_w,
            slices: slices_w,
            config_maps: config_maps_w,
        };
        let mut tasks = spawn_informers(&client, &parts, writers, &stop);
        let ready = async {
            wait_ready(&pods).await?;
            wait_ready(&nodes).await?;
            wait_ready(&claims).await?;
            wait_ready(&contexts).await?;
            wait_ready(&classes).await?;
            wait_ready(&templates).await?;
            wait_ready(&slices).await?;
            wait_ready(&config_maps).await
        };
        if let Err(error) = ready.await {
            let _ = shutdown.send(true);
            return Err(error);
        }
        tasks.extend(spawn_workers(&parts, config));
        tasks.extend(plugins.spawn(&stop));
        let queues_close: Vec<Box<dyn Fn() + Send + Sync>> = vec![
            Box::new({
                let q = parts.scheduler.queue.clone();
                move || q.close()
            }),
            Box::new({
                let q = parts.controller.pod_queue.clone();
                move || q.close()
            }),
            Box::new({
                let q = parts.controller.claim_queue.clone();
                move || q.close()
            }),
            Box::new({
                let q = parts.kubelet.queue.clone();
                move || q.close()
            }),
            Box::new({
                let q = parts.gc.queue.clone();
                move || q.close()
            }),
        ];
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

async fn wait_ready<K>(store: &Store<K>) -> Result<()>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .wait_until_ready()
        .await
        .map_err(|_| ActorError::Runtime("informer stopped before its first list".into()))
}
