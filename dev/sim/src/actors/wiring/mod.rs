//! Wiring of the actors: one informer per kind whose changes are routed to the actors that care,
//! the garbage collector's kind table, the worker loops of every actor and how their queues close.
//!
//! What both generations share is here: the informers of pods, nodes, claims, slices, templates,
//! classes and config maps, the kubelet and the garbage collector, the workers of the scheduler,
//! the resourceclaim controller, the kubelet and the collector, and the shutdown closers in that
//! order. [`generation`] declares what tells the generations apart; [`v1alpha2`] (1.30) and
//! [`v1`] (1.34) name their types, build their scheduler, and add what only they have (1.30:
//! `PodSchedulingContexts`).
//!
//! Only plumbing; the behaviour lives in the actor modules. Must not be used outside `actors`.

mod generation;
mod v1;
mod v1alpha2;

#[cfg(test)]
pub(super) use v1alpha2::gc_kinds as v1alpha2_gc_kinds;

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::runtime::reflector::{self, store::Writer, Store};
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use generation::{ControllerLoop, Generation, SchedulerLoop, Watched};

use super::gc::{GarbageCollector, Kind};
use super::kubelet::Kubelet;
use super::plugins::Plugins;
use super::{wait_ready, ActorsConfig, Result, Started};
use dra_runtime::informer::{spawn_informer_as, Change};
use dra_runtime::workqueue::{Next, WorkQueue};

/// Starts the informers of the cluster's generation, waits until each has listed once, then
/// starts the workers.
pub(super) async fn start(
    client: &Client,
    config: &ActorsConfig,
    plugins: &Arc<Plugins>,
    stop: &watch::Receiver<bool>,
) -> Result<Started> {
    let env = Env {
        client,
        config,
        plugins,
        stop,
    };
    if config.kubernetes_version.serves_v1() {
        v1::start(&env).await
    } else {
        v1alpha2::start(&env).await
    }
}

/// What the actors of a generation are started with.
struct Env<'a> {
    client: &'a Client,
    config: &'a ActorsConfig,
    plugins: &'a Arc<Plugins>,
    stop: &'a watch::Receiver<bool>,
}

/// One kind for the garbage collector.
fn gc_kind<K: Resource<DynamicType = ()>>(namespaced: bool) -> Kind {
    Kind {
        resource: ApiResource::erase::<K>(&()),
        namespaced,
    }
}

/// The kinds the garbage collector of `G` tracks, in the order it lists dependents: pods, nodes,
/// claims, the generation's `own` kinds, slices, templates, classes and config maps.
fn gc_kinds<G: Generation>(own: Vec<Kind>) -> Vec<Kind> {
    let mut kinds = vec![
        gc_kind::<Pod>(true),
        gc_kind::<Node>(false),
        gc_kind::<G::Claim>(true),
    ];
    kinds.extend(own);
    kinds.extend([
        gc_kind::<G::Slice>(false),
        gc_kind::<G::Template>(true),
        gc_kind::<G::Class>(false),
        gc_kind::<ConfigMap>(true),
    ]);
    kinds
}

/// The metadata of an object's change, for the garbage collector.
fn meta_change<'a, K: Resource<DynamicType = ()>>(
    change: &Change<'a, K>,
) -> Change<'a, ObjectMeta> {
    match change {
        Change::Applied(obj) => Change::Applied(obj.meta()),
        Change::Deleted(obj) => Change::Deleted(obj.meta()),
        Change::Resynced => Change::Resynced,
    }
}

/// The informer stores of the kinds both generations watch.
struct Stores<G: Generation> {
    pods: Store<Pod>,
    nodes: Store<Node>,
    claims: Store<G::Claim>,
    slices: Store<G::Slice>,
    templates: Store<G::Template>,
    classes: Store<G::Class>,
}

/// The write halves of those stores, and of the config maps' (only the collector reads those).
struct Writers<G: Generation> {
    pods: Writer<Pod>,
    nodes: Writer<Node>,
    claims: Writer<G::Claim>,
    slices: Writer<G::Slice>,
    templates: Writer<G::Template>,
    classes: Writer<G::Class>,
    config_maps: Writer<ConfigMap>,
}

/// Empty stores for `G`'s common kinds.
fn stores<G: Generation>() -> (Stores<G>, Writers<G>) {
    let (pods, pods_w) = reflector::store();
    let (nodes, nodes_w) = reflector::store();
    let (claims, claims_w) = reflector::store();
    let (slices, slices_w) = reflector::store();
    let (templates, templates_w) = reflector::store();
    let (classes, classes_w) = reflector::store();
    let (_, config_maps_w) = reflector::store();
    let stores = Stores {
        pods,
        nodes,
        claims,
        slices,
        templates,
        classes,
    };
    let writers = Writers {
        pods: pods_w,
        nodes: nodes_w,
        claims: claims_w,
        slices: slices_w,
        templates: templates_w,
        classes: classes_w,
        config_maps: config_maps_w,
    };
    (stores, writers)
}

/// The informers started so far, and what tells that each has listed once.
struct Informers<'a> {
    client: &'a Client,
    stop: &'a watch::Receiver<bool>,
    tasks: Vec<JoinHandle<()>>,
    listed: Vec<BoxFuture<'static, Result<()>>>,
}

impl<'a> Informers<'a> {
    fn new(env: &Env<'a>) -> Self {
        Self {
            client: env.client,
            stop: env.stop,
            tasks: Vec::new(),
            listed: Vec::new(),
        }
    }

    /// Starts an informer that keeps `writer`'s store up to date and calls `on_change` after
    /// each change.
    fn watch<K: Watched>(
        &mut self,
        writer: Writer<K>,
        on_change: impl Fn(Change<'_, K>) + Send + 'static,
    ) {
        self.watch_as::<K, K>(writer, on_change);
    }

    /// [`Informers::watch`] with objects decoded as `W` and stored as `K`.
    fn watch_as<W: Watched + Into<K>, K: Watched>(
        &mut self,
        writer: Writer<K>,
        on_change: impl Fn(Change<'_, K>) + Send + 'static,
    ) {
        let store = writer.as_reader();
        self.listed
            .push(async move { wait_ready(&store).await }.boxed());
        self.tasks.push(spawn_informer_as::<W, K, _>(
            Api::all(self.client.clone()),
            writer,
            on_change,
            self.stop.clone(),
        ));
    }

    /// Waits until every informer has listed once, in the order they were started.
    async fn listed(self) -> Result<Vec<JoinHandle<()>>> {
        for listed in self.listed {
            listed.await?;
        }
        Ok(self.tasks)
    }
}

/// The actors of a generation, shared between informer handlers and workers.
struct Parts<G: Generation> {
    scheduler: Arc<G::Scheduler>,
    controller: Arc<G::Controller>,
    kubelet: Arc<Kubelet>,
    gc: Arc<GarbageCollector>,
}

impl<G: Generation> Parts<G> {
    /// The generation's `scheduler`, its controller, the kubelet and a collector over
    /// `gc_kinds`, reading `stores`.
    fn new(
        env: &Env<'_>,
        stores: &Stores<G>,
        scheduler: G::Scheduler,
        gc_kinds: Vec<Kind>,
    ) -> Self {
        let controller = G::Controller::new(
            env.client.clone(),
            stores.pods.clone(),
            stores.claims.clone(),
            stores.templates.clone(),
        );
        let kubelet = Kubelet::new(
            env.client.clone(),
            stores.pods.clone(),
            Arc::clone(env.plugins),
            env.config.kubelets,
        );
        Self {
            scheduler: Arc::new(scheduler),
            controller: Arc::new(controller),
            kubelet: Arc::new(kubelet),
            gc: Arc::new(GarbageCollector::new(env.client.clone(), gc_kinds)),
        }
    }

    /// The collector's number of kind `K`.
    fn gc_index<K: Resource<DynamicType = ()>>(&self) -> usize {
        self.gc
            .kind_index(&ApiResource::erase::<K>(&()))
            .expect("every watched kind is in the collector's table")
    }

    /// A handler that only records changes for the collector.
    fn observed<K: Watched>(&self) -> impl Fn(Change<'_, K>) + Send + 'static {
        let (g, kind) = (Arc::clone(&self.gc), self.gc_index::<K>());
        move |change| g.observe(kind, &meta_change(&change))
    }

    /// A handler for what the scheduler allocates from: a change wakes the waiting pods.
    fn wakes_scheduler<K: Watched>(&self) -> impl Fn(Change<'_, K>) + Send + 'static {
        let (s, g, kind) = (
            Arc::clone(&self.scheduler),
            Arc::clone(&self.gc),
            self.gc_index::<K>(),
        );
        move |change| {
            s.queue_all_waiting();
            g.observe(kind, &meta_change(&change));
        }
    }

    /// Starts the informers of the kinds both generations watch.
    fn watch_common(&self, informers: &mut Informers<'_>, writers: Writers<G>) {
        let (s, c, k, g, kind) = (
            Arc::clone(&self.scheduler),
            Arc::clone(&self.controller),
            Arc::clone(&self.kubelet),
            Arc::clone(&self.gc),
            self.gc_index::<Pod>(),
        );
        informers.watch_as::<G::PodWire, Pod>(writers.pods, move |change| {
            s.on_pod(&change);
            c.on_pod(&change);
            k.on_pod(&change);
            g.observe(kind, &meta_change(&change));
        });
        informers.watch(writers.nodes, self.wakes_scheduler());
        let (s, c, g, kind) = (
            Arc::clone(&self.scheduler),
            Arc::clone(&self.controller),
            Arc::clone(&self.gc),
            self.gc_index::<G::Claim>(),
        );
        informers.watch(writers.claims, move |change| {
            s.on_claim(&change);
            c.on_claim(&change);
            g.observe(kind, &meta_change(&change));
        });
        if G::SLICES_WAKE_SCHEDULER {
            informers.watch(writers.slices, self.wakes_scheduler());
        } else {
            informers.watch(writers.slices, self.observed());
        }
        informers.watch(writers.templates, self.observed());
        informers.watch(writers.classes, self.wakes_scheduler());
        informers.watch(writers.config_maps, self.observed());
    }

    /// Starts the informers of the common kinds and those `own` adds, waits until every one
    /// has listed once, then starts the workers.
    async fn start(
        self,
        env: &Env<'_>,
        writers: Writers<G>,
        own: impl FnOnce(&Self, &mut Informers<'_>),
    ) -> Result<Started> {
        let config = env.config;
        let mut informers = Informers::new(env);
        self.watch_common(&mut informers, writers);
        own(&self, &mut informers);
        let mut tasks = informers.listed().await?;
        tasks.extend(workers(
            &self.scheduler,
            self.scheduler.queue(),
            config.scheduler_workers,
            G::Scheduler::WORKERS,
            G::Scheduler::sync,
        ));
        tasks.extend(workers(
            &self.controller,
            self.controller.pod_queue(),
            config.claim_workers,
            "resourceclaim-pods",
            G::Controller::sync_pod,
        ));
        tasks.extend(workers(
            &self.controller,
            self.controller.claim_queue(),
            config.claim_workers,
            "resourceclaim-claims",
            G::Controller::sync_claim,
        ));
        tasks.extend(workers(
            &self.kubelet,
            &self.kubelet.queue,
            config.kubelet_workers,
            "kubelet",
            |k: Arc<Kubelet>, key| async move { k.sync(key).await },
        ));
        tasks.push(tokio::spawn(Arc::clone(&self.kubelet).follow_health()));
        tasks.extend(workers(
            &self.gc,
            &self.gc.queue,
            config.gc_workers,
            "garbage-collector",
            |g: Arc<GarbageCollector>, uid| async move { g.sync(uid).await },
        ));
        let queues_close = vec![
            closer(self.scheduler.queue()),
            closer(self.controller.pod_queue()),
            closer(self.controller.claim_queue()),
            closer(&self.kubelet.queue),
            closer(&self.gc.queue),
        ];
        Ok(Started {
            tasks,
            queues_close,
        })
    }
}

/// `count` workers named `name` that run `sync` of `actor` on the keys of `queue`.
fn workers<A, T, F, Fut>(
    actor: &Arc<A>,
    queue: &WorkQueue<T>,
    count: usize,
    name: &'static str,
    sync: F,
) -> Vec<JoinHandle<()>>
where
    A: Send + Sync + 'static,
    T: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
    F: Fn(Arc<A>, T) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Next>> + Send,
{
    let actor = Arc::clone(actor);
    queue.spawn_workers(count, name, move |key| sync(Arc::clone(&actor), key))
}

/// Closes `queue` at shutdown.
fn closer<T>(queue: &WorkQueue<T>) -> Box<dyn Fn() + Send + Sync>
where
    T: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
{
    let queue = queue.clone();
    Box::new(move || queue.shut_down())
}
