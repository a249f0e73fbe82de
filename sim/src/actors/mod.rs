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
pub mod runtime;
pub mod scheduler;
pub mod selectors;
pub mod writes;

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimTemplate, ResourceClass, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::runtime::reflector::{self, store::Writer, Store};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::{ActorError, Result};

use claims::ClaimController;
use gc::{GarbageCollector, Kind};
use kubelet::Kubelet;
use runtime::{spawn_informer, Change};
use scheduler::Scheduler;

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
}

impl Default for ActorsConfig {
    fn default() -> Self {
        Self {
            scheduler_workers: 8,
            claim_workers: 4,
            kubelet_workers: 4,
            gc_workers: 2,
        }
    }
}

/// The running actors; dropping it does not stop them, `shutdown` does.
pub struct Actors {
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

/// The kinds the garbage collector tracks, in the order of the `GC_*` indexes.
fn gc_kinds() -> Vec<Kind> {
    vec![
        Kind {
            resource: ApiResource::erase::<Pod>(&()),
            namespaced: true,
        },
        Kind {
            resource: ApiResource::erase::<Node>(&()),
            namespaced: false,
        },
        Kind {
            resource: ApiResource::erase::<ResourceClaim>(&()),
            namespaced: true,
        },
        Kind {
            resource: ApiResource::erase::<PodSchedulingContext>(&()),
            namespaced: true,
        },
        Kind {
            resource: ApiResource::erase::<ResourceSlice>(&()),
            namespaced: false,
        },
        Kind {
            resource: ApiResource::erase::<ResourceClaimTemplate>(&()),
            namespaced: true,
        },
        Kind {
            resource: ApiResource::erase::<ResourceClass>(&()),
            namespaced: false,
        },
        Kind {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespaced: true,
        },
    ]
}
const GC_POD: usize = 0;
const GC_NODE: usize = 1;
const GC_CLAIM: usize = 2;
const GC_CONTEXT: usize = 3;
const GC_SLICE: usize = 4;
const GC_TEMPLATE: usize = 5;
const GC_CLASS: usize = 6;
const GC_CONFIGMAP: usize = 7;

fn meta_change<'a, K: Resource<DynamicType = ()>>(
    change: &Change<'a, K>,
) -> Change<'a, ObjectMeta> {
    match change {
        Change::Applied(obj) => Change::Applied(obj.meta()),
        Change::Deleted(obj) => Change::Deleted(obj.meta()),
        Change::Resynced => Change::Resynced,
    }
}

/// The actors, shared between informer handlers and workers.
struct Parts {
    scheduler: Arc<Scheduler>,
    controller: Arc<ClaimController>,
    kubelet: Arc<Kubelet>,
    gc: Arc<GarbageCollector>,
}

/// The write halves of the informer stores.
struct Writers {
    pods: Writer<Pod>,
    nodes: Writer<Node>,
    claims: Writer<ResourceClaim>,
    contexts: Writer<PodSchedulingContext>,
    classes: Writer<ResourceClass>,
    templates: Writer<ResourceClaimTemplate>,
    slices: Writer<ResourceSlice>,
    config_maps: Writer<ConfigMap>,
}

/// Starts one informer per kind; each change is routed to the actors interested in it.
fn spawn_informers(
    client: &Client,
    parts: &Parts,
    writers: Writers,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let Parts {
        scheduler,
        controller,
        kubelet,
        gc,
    } = parts;
    let (s, c, k, g) = (
        scheduler.clone(),
        controller.clone(),
        kubelet.clone(),
        gc.clone(),
    );
    let pods = spawn_informer(
        Api::<Pod>::all(client.clone()),
        writers.pods,
        move |change| {
            s.on_pod(&change);
            c.on_pod(&change);
            k.on_pod(&change);
            g.observe(GC_POD, &meta_change(&change));
        },
        stop.clone(),
    );
    let (s, g) = (scheduler.clone(), gc.clone());
    let nodes = spawn_informer(
        Api::<Node>::all(client.clone()),
        writers.nodes,
        move |change| {
            s.queue_all_waiting();
            g.observe(GC_NODE, &meta_change(&change));
        },
        stop.clone(),
    );
    let (s, c, g) = (scheduler.clone(), controller.clone(), gc.clone());
    let claims = spawn_informer(
        Api::<ResourceClaim>::all(client.clone()),
        writers.claims,
        move |change| {
            s.on_claim(&change);
            c.on_claim(&change);
            g.observe(GC_CLAIM, &meta_change(&change));
        },
        stop.clone(),
    );
    let (s, g) = (scheduler.clone(), gc.clone());
    let contexts = spawn_informer(
        Api::<PodSchedulingContext>::all(client.clone()),
        writers.contexts,
        move |change| {
            s.on_context(&change);
            g.observe(GC_CONTEXT, &meta_change(&change));
        },
        stop.clone(),
    );
    let (s, g) = (scheduler.clone(), gc.clone());
    let classes = spawn_informer(
        Api::<ResourceClass>::all(client.clone()),
        writers.classes,
        move |change| {
            s.queue_all_waiting();
            g.observe(GC_CLASS, &meta_change(&change));
        },
        stop.clone(),
    );
    let templates = gc_informer(client, writers.templates, gc, GC_TEMPLATE, stop);
    let slices = gc_informer(client, writers.slices, gc, GC_SLICE, stop);
    let config_maps = gc_informer(client, writers.config_maps, gc, GC_CONFIGMAP, stop);
    vec![
        pods,
        nodes,
        claims,
        contexts,
        classes,
        templates,
        slices,
        config_maps,
    ]
}

/// An informer whose changes only the garbage collector needs.
fn gc_informer<K>(
    client: &Client,
    writer: Writer<K>,
    gc: &Arc<GarbageCollector>,
    kind: usize,
    stop: &watch::Receiver<bool>,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    let g = gc.clone();
    spawn_informer(
        Api::<K>::all(client.clone()),
        writer,
        move |change| g.observe(kind, &meta_change(&change)),
        stop.clone(),
    )
}

/// Starts the worker loops of every actor.
fn spawn_workers(parts: &Parts, config: &ActorsConfig) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    let s = parts.scheduler.clone();
    tasks.extend(parts.scheduler.queue.spawn_workers(
        config.scheduler_workers,
        "scheduler",
        move |key| {
            let s = s.clone();
            async move { s.sync(key).await }
        },
    ));
    let c = parts.controller.clone();
    tasks.extend(parts.controller.pod_queue.spawn_workers(
        config.claim_workers,
        "resourceclaim-pods",
        move |key| {
            let c = c.clone();
            async move { c.sync_pod(key).await }
        },
    ));
    let c = parts.controller.clone();
    tasks.extend(parts.controller.claim_queue.spawn_workers(
        config.claim_workers,
        "resourceclaim-claims",
        move |key| {
            let c = c.clone();
            async move { c.sync_claim(key).await }
        },
    ));
    let k = parts.kubelet.clone();
    tasks.extend(parts.kubelet.queue.spawn_workers(
        config.kubelet_workers,
        "kubelet",
        move |key| {
            let k = k.clone();
            async move { k.sync(key).await }
        },
    ));
    let g = parts.gc.clone();
    tasks.extend(parts.gc.queue.spawn_workers(
        config.gc_workers,
        "garbage-collector",
        move |uid| {
            let g = g.clone();
            async move { g.sync(uid).await }
        },
    ));
    tasks
}

impl Actors {
    /// Starts the informers and all actors against the API server behind `client`, and waits
    /// until every informer has listed once.
    pub async fn start(client: Client, config: &ActorsConfig) -> Result<Self> {
        let (shutdown, stop) = watch::channel(false);
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
            kubelet: Arc::new(Kubelet::new(client.clone(), pods.clone())),
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
            shutdown,
            tasks,
            queues_close,
        })
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
