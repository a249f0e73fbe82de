//! Wiring of the actors of a 1.34 (`v1`) cluster: informers on pods (read in the 1.34
//! shape), nodes, config maps and the `resource.k8s.io/v1` kinds, routed to the 1.34
//! v1 scheduler, the resourceclaim controller, the kubelet and the garbage collector, and
//! their worker loops. The `v1alpha2` scheduler does not run: `PodSchedulingContexts` are not
//! served in 1.34.
//!
//! Only plumbing; the behaviour lives in the actor modules. Must not be used outside `actors`.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::ApiResource;

use kube::runtime::reflector::{self, store::Writer};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::claims::v1::ClaimControllerV1;
use super::gc::{GarbageCollector, Kind};
use super::kubelet::Kubelet;
use super::plugins::Plugins;
use super::pod_shape::Pod134;
use super::resource_v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use super::scheduler_v1::SchedulerV1;
use super::wiring::{gc_informer, meta_change};
use super::{wait_ready, ActorsConfig, Result, Started};
use dra_runtime::informer::{spawn_informer, spawn_informer_as};
use dra_runtime::workqueue::WorkQueue;

/// The kinds the garbage collector tracks in 1.34, in the order of the `GC_*` indexes.
fn gc_kinds() -> Vec<Kind> {
    let kind = |resource: ApiResource, namespaced: bool| Kind {
        resource,
        namespaced,
    };
    vec![
        kind(ApiResource::erase::<Pod>(&()), true),
        kind(ApiResource::erase::<Node>(&()), false),
        kind(ApiResource::erase::<ResourceClaim>(&()), true),
        kind(ApiResource::erase::<ResourceSlice>(&()), false),
        kind(ApiResource::erase::<ResourceClaimTemplate>(&()), true),
        kind(ApiResource::erase::<DeviceClass>(&()), false),
        kind(ApiResource::erase::<ConfigMap>(&()), true),
    ]
}
const GC_POD: usize = 0;
const GC_NODE: usize = 1;
const GC_CLAIM: usize = 2;
const GC_SLICE: usize = 3;
const GC_TEMPLATE: usize = 4;
const GC_CLASS: usize = 5;
const GC_CONFIGMAP: usize = 6;

/// Starts the 1.34 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(
    client: &Client,
    config: &ActorsConfig,
    plugins: &Arc<Plugins>,
    stop: &watch::Receiver<bool>,
) -> Result<Started> {
    let (pods, pods_w) = reflector::store::<Pod>();
    let (nodes, nodes_w) = reflector::store::<Node>();
    let (claims, claims_w) = reflector::store::<ResourceClaim>();
    let (templates, templates_w) = reflector::store::<ResourceClaimTemplate>();
    let (slices, slices_w) = reflector::store::<ResourceSlice>();
    let (classes, classes_w) = reflector::store::<DeviceClass>();
    let (config_maps, config_maps_w) = reflector::store::<ConfigMap>();
    let controller = Arc::new(ClaimControllerV1::new(
        client.clone(),
        pods.clone(),
        claims.clone(),
        templates.clone(),
    ));
    let kubelet = Arc::new(Kubelet::new(
        client.clone(),
        pods.clone(),
        Arc::clone(plugins),
        config.kubelets,
    ));
    let gc = Arc::new(GarbageCollector::new(client.clone(), gc_kinds()));
    let scheduler = Arc::new(SchedulerV1::new(
        client.clone(),
        pods.clone(),
        nodes.clone(),
        claims.clone(),
        slices.clone(),
        classes.clone(),
    ));

    let (sched, c, k, g) = (
        scheduler.clone(),
        controller.clone(),
        kubelet.clone(),
        gc.clone(),
    );
    let mut tasks = vec![spawn_informer_as::<Pod134, Pod, _>(
        Api::all(client.clone()),
        pods_w,
        move |change| {
            sched.on_pod(&change);
            c.on_pod(&change);
            k.on_pod(&change);
            g.observe(GC_POD, &meta_change(&change));
        },
        stop.clone(),
    )];
    tasks.push(inventory_informer(
        client, nodes_w, &scheduler, &gc, GC_NODE, stop,
    ));
    let (sched, c, g) = (scheduler.clone(), controller.clone(), gc.clone());
    tasks.push(spawn_informer(
        Api::<ResourceClaim>::all(client.clone()),
        claims_w,
        move |change| {
            sched.on_claim(&change);
            c.on_claim(&change);
            g.observe(GC_CLAIM, &meta_change(&change));
        },
        stop.clone(),
    ));
    tasks.push(gc_informer(client, templates_w, &gc, GC_TEMPLATE, stop));
    tasks.push(inventory_informer(
        client, slices_w, &scheduler, &gc, GC_SLICE, stop,
    ));
    tasks.push(inventory_informer(
        client, classes_w, &scheduler, &gc, GC_CLASS, stop,
    ));
    tasks.push(gc_informer(client, config_maps_w, &gc, GC_CONFIGMAP, stop));

    wait_ready(&pods).await?;
    wait_ready(&nodes).await?;
    wait_ready(&claims).await?;
    wait_ready(&templates).await?;
    wait_ready(&slices).await?;
    wait_ready(&classes).await?;
    wait_ready(&config_maps).await?;

    tasks.extend(spawn_workers(
        &scheduler,
        &controller,
        &kubelet,
        &gc,
        config,
    ));
    let queues_close = vec![
        closer(&scheduler.queue),
        closer(&controller.pod_queue),
        closer(&controller.claim_queue),
        closer(&kubelet.queue),
        closer(&gc.queue),
    ];
    Ok(Started {
        tasks,
        queues_close,
    })
}

/// Closes `queue` at shutdown.
fn closer<T>(queue: &WorkQueue<T>) -> Box<dyn Fn() + Send + Sync>
where
    T: Clone + Eq + std::hash::Hash + fmt::Debug + Send + Sync + 'static,
{
    let queue = queue.clone();
    Box::new(move || queue.shut_down())
}

/// An informer on what the scheduler allocates from (nodes, slices, classes): a change wakes
/// the waiting pods.
fn inventory_informer<K>(
    client: &Client,
    writer: Writer<K>,
    scheduler: &Arc<SchedulerV1>,
    gc: &Arc<GarbageCollector>,
    kind: usize,
    stop: &watch::Receiver<bool>,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    let (sched, g) = (scheduler.clone(), gc.clone());
    spawn_informer(
        Api::<K>::all(client.clone()),
        writer,
        move |change| {
            sched.queue_all_waiting();
            g.observe(kind, &meta_change(&change));
        },
        stop.clone(),
    )
}

/// Starts the worker loops of the 1.34 actors.
fn spawn_workers(
    scheduler: &Arc<SchedulerV1>,
    controller: &Arc<ClaimControllerV1>,
    kubelet: &Arc<Kubelet>,
    gc: &Arc<GarbageCollector>,
    config: &ActorsConfig,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    let sched = scheduler.clone();
    tasks.extend(scheduler.queue.spawn_workers(
        config.scheduler_workers,
        "scheduler-v1",
        move |key| {
            let sched = sched.clone();
            async move { sched.sync(key).await }
        },
    ));
    let c = controller.clone();
    tasks.extend(controller.pod_queue.spawn_workers(
        config.claim_workers,
        "resourceclaim-pods",
        move |key| {
            let c = c.clone();
            async move { c.sync_pod(key).await }
        },
    ));
    let c = controller.clone();
    tasks.extend(controller.claim_queue.spawn_workers(
        config.claim_workers,
        "resourceclaim-claims",
        move |key| {
            let c = c.clone();
            async move { c.sync_claim(key).await }
        },
    ));
    let k = kubelet.clone();
    tasks.extend(
        kubelet
            .queue
            .spawn_workers(config.kubelet_workers, "kubelet", move |key| {
                let k = k.clone();
                async move { k.sync(key).await }
            }),
    );
    let g = gc.clone();
    tasks.extend(
        gc.queue
            .spawn_workers(config.gc_workers, "garbage-collector", move |uid| {
                let g = g.clone();
                async move { g.sync(uid).await }
            }),
    );
    tasks
}
