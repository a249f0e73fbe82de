//! The [`Controller`]: configuration, event handlers, the worker loop and the mapping of sync
//! results to queue actions.
//!
//! The sync functions (`sync_claim`, `sync_context`, `allocate`) decide; this module does the
//! queue bookkeeping and posts the Warning event of a failed sync. Must not depend on a particular
//! driver.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim, ResourceClass};
use kube::ResourceExt;
use tracing::{debug, instrument, warn};

use super::api::ClusterApi;
use super::caches::Caches;
use super::claim_store::is_settled;
use super::driver::Driver;
use super::error::{Error, KubeCallError, Result};
use super::kube_api::Watches;
use super::mutation_cache::MutationCache;
use super::queue_key::{ObjectKey, QueueKey};
use dra_runtime::events::{object_reference, EventRecord};
use dra_runtime::workqueue::{RateLimit, WorkQueue};

/// Tunables of the controller. `Default` gives the upstream values.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Delay of the periodic recheck of a PodSchedulingContext with pending claims (30 s).
    pub recheck_delay: Duration,
    /// Whether a claim allocated for a pod gets the pod in `status.reservedFor` in the same write.
    pub set_reserved_for: bool,
    /// Retry limits of the work queue.
    pub rate_limit: RateLimit,
    /// How long our own claim and context writes shadow older watched copies (60 s).
    pub mutation_cache_ttl: Duration,
    /// How many written claims (and, separately, contexts) are remembered (100).
    pub mutation_cache_size: usize,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            recheck_delay: Duration::from_secs(30),
            set_reserved_for: true,
            rate_limit: RateLimit::default(),
            mutation_cache_ttl: Duration::from_secs(60),
            mutation_cache_size: 100,
        }
    }
}

/// What a successful sync asks of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Done: forget the key's failures.
    Done,
    /// Try again with backoff (e.g. a claim of a class of another driver).
    Requeue,
    /// Look again after the recheck delay (a PodSchedulingContext with pending claims).
    Periodic,
}

/// The `v1alpha2` DRA controller: watches claims, classes, scheduling contexts and pods and calls the
/// [`Driver`]. Clones share the same controller.
pub struct Controller<D: Driver> {
    pub(crate) syncer: Arc<Syncer<D>>,
    watches: Option<Watches>,
}

impl<D: Driver> Clone for Controller<D> {
    fn clone(&self) -> Self {
        Self {
            syncer: self.syncer.clone(),
            watches: None,
        }
    }
}

/// What every sync of one controller works with: the driver, the API writes, the caches of
/// the watches, the work queue and the copies of objects this controller wrote.
pub(crate) struct Syncer<D: Driver> {
    pub(crate) name: String,
    pub(crate) finalizer: String,
    pub(crate) driver: Arc<D>,
    pub(crate) api: Arc<dyn ClusterApi>,
    pub(crate) caches: Arc<dyn Caches>,
    pub(crate) queue: WorkQueue<QueueKey>,
    pub(crate) claims: MutationCache<ResourceClaim>,
    pub(crate) contexts: MutationCache<PodSchedulingContext>,
    pub(crate) config: ControllerConfig,
}

impl<D: Driver> Controller<D> {
    /// A controller for driver `name` against a real cluster. [`Controller::run`] starts the
    /// watches of ResourceClaims, ResourceClasses, PodSchedulingContexts and Pods.
    pub fn new(
        name: impl Into<String>,
        driver: Arc<D>,
        client: kube::Client,
        config: ControllerConfig,
    ) -> Self {
        let name = name.into();
        let (watches, caches) = Watches::new(client.clone());
        let api = Arc::new(super::kube_api::KubeApi::new(client, &name));
        let mut controller = Self::from_parts(name, driver, api, Arc::new(caches), config);
        controller.watches = Some(watches);
        controller
    }

    /// A controller over given writes and caches, without watches: the caller fills the caches and
    /// reports changes through the `*_changed` handlers (tests, embedding).
    pub fn from_parts(
        name: impl Into<String>,
        driver: Arc<D>,
        api: Arc<dyn ClusterApi>,
        caches: Arc<dyn Caches>,
        config: ControllerConfig,
    ) -> Self {
        let name = name.into();
        Self {
            syncer: Arc::new(Syncer {
                finalizer: format!("{name}/deletion-protection"),
                name,
                driver,
                api,
                caches,
                queue: WorkQueue::new(config.rate_limit),
                claims: MutationCache::new(config.mutation_cache_ttl, config.mutation_cache_size),
                contexts: MutationCache::new(config.mutation_cache_ttl, config.mutation_cache_size),
                config,
            }),
            watches: None,
        }
    }

    /// The driver name.
    pub fn name(&self) -> &str {
        &self.syncer.name
    }

    /// The finalizer this controller puts on claims: `<name>/deletion-protection`.
    pub fn finalizer(&self) -> &str {
        &self.syncer.finalizer
    }

    /// The work queue (its length is the `workqueue_depth` metric).
    pub fn queue(&self) -> &WorkQueue<QueueKey> {
        &self.syncer.queue
    }

    /// Starts the watches (when built with [`Controller::new`]), waits until their caches are
    /// filled, then runs `workers` concurrent workers until `shutdown` completes. On shutdown no new
    /// key is taken; syncs in flight finish and the watches are stopped before this returns.
    pub async fn run(mut self, workers: usize, shutdown: impl Future<Output = ()> + Send) {
        tokio::pin!(shutdown);
        let watch_task = self.watches.take().map(|watches| {
            let ready = watches.ready();
            let handle = tokio::spawn(watches.run(self.clone()));
            (ready, handle)
        });
        let watch_handle = match watch_task {
            Some((ready, handle)) => {
                tokio::select! {
                    () = &mut shutdown => {
                        handle.abort();
                        let _ = handle.await;
                        return;
                    }
                    () = ready => {}
                }
                Some(handle)
            }
            None => None,
        };
        debug!(driver = %self.syncer.name, workers, "Caches synced, starting workers");
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..workers.max(1) {
            let controller = self.clone();
            set.spawn(async move { controller.worker().await });
        }
        shutdown.await;
        self.syncer.queue.shut_down();
        while set.join_next().await.is_some() {}
        if let Some(handle) = watch_handle {
            // Awaited so that the watches' handle on the driver is gone when this returns.
            handle.abort();
            let _ = handle.await;
        }
    }

    async fn worker(&self) {
        while let Some(key) = self.syncer.queue.get().await {
            let _ = self.sync(&key).await;
            self.syncer.queue.done(&key);
        }
    }

    /// Syncs one key and applies the result to the queue: `Done` forgets the key, `Requeue`
    /// re-adds it with backoff, `Periodic` re-adds it after the recheck delay, an error posts a
    /// Warning event `Failed` on the object and re-adds it with backoff. A passing failure (a
    /// status patch that lost the race against a newer copy, a pod claim not created yet) is
    /// retried with the key's own backoff only, without event.
    #[instrument(skip_all, fields(key = %key, driver = %self.syncer.name))]
    pub async fn sync(&self, key: &QueueKey) -> Result<SyncOutcome> {
        let (result, object) = self.syncer.sync_key(key).await;
        let queue = &self.syncer.queue;
        match &result {
            Ok(SyncOutcome::Done) => {
                debug!("Synced");
                queue.forget(key);
            }
            Ok(SyncOutcome::Requeue) => {
                debug!("Requeued");
                queue.add_rate_limited(key);
            }
            Ok(SyncOutcome::Periodic) => {
                debug!("Synced, rechecking later");
                queue.forget(key);
                queue.add_after(key, self.syncer.config.recheck_delay);
            }
            Err(error) if error.is_passing() => {
                // Not worth an event, nor the overall retry budget: under load the scheduler
                // changes contexts all the time, and the bucket would delay every other retry.
                debug!(%error, "Sync met a passing state (a newer copy, a claim not created yet), retrying");
                queue.add_backoff(key);
            }
            Err(error) => {
                warn!(%error, kind = error.kind(), "Sync failed");
                if let Some(regarding) = object {
                    self.syncer
                        .post_event(EventRecord {
                            regarding,
                            type_: dra_runtime::events::EventType::Warning,
                            reason: "Failed".to_owned(),
                            message: error.to_string(),
                        })
                        .await;
                }
                queue.add_rate_limited(key);
            }
        }
        result
    }

    /// A claim was added or changed: the driver sees it first ([`Driver::claim_seen`]). An
    /// unallocated claim made for a pod also queues the pod's PodSchedulingContext, if one
    /// exists: the context may have been synced before the claim
    /// reached our cache, and would otherwise wait for the periodic recheck. A settled claim
    /// (allocated, neither being deleted nor asked to be deallocated) is not queued: its sync
    /// would end at once, and a start on a cluster of many allocated claims would queue and sync
    /// every one of them for nothing.
    pub fn claim_changed(&self, claim: &ResourceClaim) {
        self.syncer.driver.claim_seen(claim);
        if is_settled(claim) {
            return;
        }
        let namespace = claim.namespace().unwrap_or_default();
        self.syncer
            .queue
            .add(&QueueKey::claim(namespace.clone(), claim.name_any()));
        let unallocated = claim.status.as_ref().is_none_or(|s| s.allocation.is_none());
        if !unallocated || claim.metadata.deletion_timestamp.is_some() {
            return;
        }
        let owner = claim
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "Pod");
        if let Some(owner) = owner {
            if self
                .syncer
                .caches
                .scheduling_context(&namespace, &owner.name)
                .is_some()
            {
                self.syncer
                    .queue
                    .add(&QueueKey::scheduling_context(namespace, &owner.name));
            }
        }
    }

    /// A claim was deleted: the driver is told and the claim's backoff reset.
    pub fn claim_deleted(&self, claim: &ResourceClaim) {
        self.syncer.driver.claim_gone(claim);
        self.syncer
            .queue
            .forget(&QueueKey::Claim(ObjectKey::of(claim)));
    }

    /// A PodSchedulingContext was added or changed.
    pub fn scheduling_context_changed(&self, context: &PodSchedulingContext) {
        self.syncer
            .queue
            .add(&QueueKey::SchedulingContext(ObjectKey::of(context)));
    }

    /// A PodSchedulingContext was deleted: only its backoff is reset.
    pub fn scheduling_context_deleted(&self, context: &PodSchedulingContext) {
        self.syncer
            .queue
            .forget(&QueueKey::SchedulingContext(ObjectKey::of(context)));
    }

    /// A ResourceClass was added or changed: if it is ours, every claim of the class is queued, so
    /// fixed parameters are picked up without waiting for backoff.
    pub fn class_changed(&self, class: &ResourceClass) {
        if class.driver_name != self.syncer.name {
            return;
        }
        for claim in self.syncer.caches.claims_of_class(&class.name_any()) {
            self.claim_changed(&claim);
        }
    }

    /// A pod was added or changed: its PodSchedulingContext (same name), if one exists, is queued.
    pub fn pod_changed(&self, pod: &Pod) {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        if self
            .syncer
            .caches
            .scheduling_context(&namespace, &name)
            .is_some()
        {
            self.syncer
                .queue
                .add(&QueueKey::scheduling_context(namespace, name));
        }
    }
}

impl<D: Driver> Syncer<D> {
    /// Syncs one key; also returns the object a failure event should be posted on.
    async fn sync_key(&self, key: &QueueKey) -> (Result<SyncOutcome>, Option<ObjectReference>) {
        match key {
            QueueKey::Claim(ObjectKey { namespace, name }) => match self.claim(namespace, name) {
                None => (Ok(SyncOutcome::Done), None),
                Some(claim) => {
                    let object = object_reference(claim.as_ref());
                    (self.sync_claim(claim).await, Some(object))
                }
            },
            QueueKey::SchedulingContext(ObjectKey { namespace, name }) => {
                match self.scheduling_context(namespace, name) {
                    None => (Ok(SyncOutcome::Done), None),
                    Some(context) => {
                        let object = object_reference(context.as_ref());
                        (self.sync_context(context).await, Some(object))
                    }
                }
            }
        }
    }

    /// A claim as seen through the mutation cache.
    pub(crate) fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.claims
            .newest(namespace, name, self.caches.claim(namespace, name))
    }

    /// The class of `claim` from the cache.
    pub(crate) fn class_of(&self, claim: &ResourceClaim) -> Result<Arc<ResourceClass>> {
        let name = &claim.spec.resource_class_name;
        self.caches
            .class(name)
            .ok_or_else(|| Error::ClassNotFound(name.clone()))
    }

    /// A scheduling context as seen through the mutation cache.
    pub(crate) fn scheduling_context(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<PodSchedulingContext>> {
        self.contexts.newest(
            namespace,
            name,
            self.caches.scheduling_context(namespace, name),
        )
    }

    /// Writes a claim (metadata or status) and remembers the result in the mutation cache.
    pub(crate) async fn write_claim(
        &self,
        claim: &ResourceClaim,
        status: bool,
    ) -> std::result::Result<Arc<ResourceClaim>, KubeCallError> {
        let updated = if status {
            self.api.update_claim_status(claim).await?
        } else {
            self.api.update_claim(claim).await?
        };
        let updated = Arc::new(updated);
        self.claims.mutation(updated.clone());
        Ok(updated)
    }

    pub(crate) async fn post_event(&self, event: EventRecord) {
        if let Err(error) = self.api.post_event(event).await {
            warn!(%error, "Failed to post event");
        }
    }

    pub(crate) fn has_finalizer(&self, claim: &ResourceClaim) -> bool {
        claim.finalizers().contains(&self.finalizer)
    }
}
