//! Wiring of the actors of a 1.30 (`v1alpha2`) cluster: one informer per kind whose changes are
//! routed to the actors that care, the garbage collector's kind table, and the worker loops of
//! every actor.
//!
//! Only plumbing; the behaviour lives in the actor modules. Must not be used outside `actors`.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimTemplate, ResourceClass, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::runtime::reflector::store::Writer;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use kube::runtime::reflector;

use super::claims::ClaimController;
use super::gc::{GarbageCollector, Kind};
use super::kubelet::Kubelet;
use super::plugins::Plugins;
use super::scheduler_v1alpha2::Scheduler;
use super::{wait_ready, ActorsConfig, Result, Started};
use dra_runtime::informer::{spawn_informer, Change};

/// Starts the 1.30 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(
    client: &Client,
    config: &ActorsConfig,
    plugins: &Arc<Plugins>,
    stop: &watch::Receiver<bool>,
) -> Result<Started> {
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
            Arc::clone(plugins),
            config.kubelets,
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
    let mut tasks = spawn_informers(client, &parts, writers, stop);
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
    ready.await?;
    tasks.extend(spawn_workers(&parts, config));
    let queues_close: Vec<Box<dyn Fn() + Send + Sync>> = vec![
        Box::new({
            let q = parts.scheduler.queue.clone();
            move || q.shut_down()
        }),
        Box::new({
            let q = parts.controller.pod_queue.clone();
            move || q.shut_down()
        }),
        Box::new({
            let q = parts.controller.claim_queue.clone();
            move || q.shut_down()
        }),
        Box::new({
            let q = parts.kubelet.queue.clone();
            move || q.shut_down()
        }),
        Box::new({
            let q = parts.gc.queue.clone();
            move || q.shut_down()
        }),
    ];
    Ok(Started {
        tasks,
        queues_close,
    })
}

/// The kinds the garbage collector tracks, in the order of the `GC_*` indexes.
pub(super) fn gc_kinds() -> Vec<Kind> {
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

/// The metadata of an object's change, for the garbage collector.
pub(super) fn meta_change<'a, K: Resource<DynamicType = ()>>(
    change: &Change<'a, K>,
) -> Change<'a, ObjectMeta> {
    match change {
        Change::Applied(obj) => Change::Applied(obj.meta()),
        Change::Deleted(obj) => Change::Deleted(obj.meta()),
        Change::Resynced => Change::Resynced,
    }
}

/// The actors, shared between informer handlers and workers.
pub(super) struct Parts {
    pub(super) scheduler: Arc<Scheduler>,
    pub(super) controller: Arc<ClaimController>,
    pub(super) kubelet: Arc<Kubelet>,
    pub(super) gc: Arc<GarbageCollector>,
}

/// The write halves of the informer stores.
pub(super) struct Writers {
    pub(super) pods: Writer<Pod>,
    pub(super) nodes: Writer<Node>,
    pub(super) claims: Writer<ResourceClaim>,
    pub(super) contexts: Writer<PodSchedulingContext>,
    pub(super) classes: Writer<ResourceClass>,
    pub(super) templates: Writer<ResourceClaimTemplate>,
    pub(super) slices: Writer<ResourceSlice>,
    pub(super) config_maps: Writer<ConfigMap>,
}

/// Starts one informer per kind; each change is routed to the actors interested in it.
pub(super) fn spawn_informers(
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
pub(super) fn gc_informer<K>(
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
pub(super) fn spawn_workers(parts: &Parts, config: &ActorsConfig) -> Vec<JoinHandle<()>> {
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
