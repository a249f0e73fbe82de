//! The kube-scheduler with the 1.30 `DynamicResources` plugin (`v1alpha2`): schedules pods
//! whose `schedulerName` is `default-scheduler` (or unset), negotiating with DRA drivers through
//! `PodSchedulingContexts`, then reserves the claims, binds the pod and deletes the context.
//! Node filtering is basic: the node exists and is not `spec.unschedulable`; only DRA claims are
//! modelled as resources.
//!
//! The decision of a cycle is pure (`plan`, with the event texts in `explain`); this module does
//! the I/O, only through `kube::Client`, and is driven by the shared informers. Like the real
//! scheduler it posts a `FailedScheduling` event when a cycle finds no node (here only when the
//! text changed since the last one for the pod, so a pod that waits does not flood the event
//! list) and `Scheduled` when it binds.

pub mod explain;
pub mod hints;
pub mod plan;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, PodSchedulingContextSpec, ResourceClaim, ResourceClaimStatus,
    ResourceClass,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use dra_runtime::lock::LockExt;

use super::claims::pod_owner_reference;
use super::error::{is_conflict, is_not_found, ActorError, Result};
use super::indexes::{version_of, AssumedPods, ClaimUsers, NodeLoad, OwnWrites, Placement};
use super::scheduling::{bound_node, LastEvents};
use super::writes::{modify_write, read_modify_write, with_retry, Part, Unread};
use super::{pod_claim_names, scheduling, ObjectKey, ACTOR_BACKOFF};
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};
use plan::{decide_explained, pre_bind, resolve, Decision, PreBind, Snapshot};

pub use super::scheduling::wants;

/// How long a pod waiting for a claim to be created or deallocated sleeps before it is looked at
/// again even without a change (changes wake it earlier).
const WAIT_RECHECK: Duration = Duration::from_secs(1);
/// How long a pod that found no node, or waits for its drivers, sleeps before another cycle
/// without a change. kube-scheduler retries such a pod only when a change wakes it (its queueing
/// hints) or after minutes; a short recheck would publish a new random sample of potential nodes
/// every time with more than 128 feasible nodes, and the drivers' status writes would conflict
/// with it.
const WAIT_FOR_DRIVER: Duration = Duration::from_secs(10);
/// Delay after a write whose effect the caches have not shown yet.
const SETTLE: Duration = Duration::from_millis(20);

/// The scheduler actor.
pub struct Scheduler {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    claims: Store<ResourceClaim>,
    contexts: Store<PodSchedulingContext>,
    classes: Store<ResourceClass>,
    /// Claim -> the unbound pods that use it, so that a claim change wakes only its pods.
    claim_users: ClaimUsers,
    /// The last `FailedScheduling` or `Scheduled` text posted for each pod.
    last_event: LastEvents,
    /// Pods per node: those bound there plus those whose scheduling context selected it. Counting
    /// the selections in flight spreads pods that are scheduled at the same time, as the random
    /// choice among equally scored nodes does in kube-scheduler, instead of sending all of them to
    /// the same first node.
    load: NodeLoad,
    /// Each scheduling context as last seen, for the queueing hint of the next change.
    contexts_seen: Mutex<HashMap<ObjectKey, hints::Seen>>,
    /// Each claim's status as last seen, for the queueing hint of the next change.
    claims_seen: Mutex<HashMap<ObjectKey, Option<ResourceClaimStatus>>>,
    /// Each pod as last seen, for the queue's check of the next update.
    pods_seen: Mutex<HashMap<ObjectKey, Arc<Pod>>>,
    /// Pods this scheduler bound that the informer does not show bound yet.
    assumed: AssumedPods,
    /// The version of this scheduler's last status write of each claim.
    own_writes: OwnWrites,
    /// Pods waiting for a scheduling cycle.
    pub queue: WorkQueue<ObjectKey>,
}

/// The claims a pod the scheduler waits on uses (none for a pod it does not schedule).
fn waiting_claims(pod: &Pod, key: &ObjectKey) -> Vec<ObjectKey> {
    if !wants(pod) {
        return Vec::new();
    }
    pod_claim_names(pod)
        .iter()
        .map(|name| ObjectKey::new(&key.namespace, name))
        .collect()
}

/// The claims `PreBind` writes or reads: those to reserve and, as an addition to upstream's
/// `PreBind` (which leaves alone a claim the cache shows reserved for the pod), those whose
/// copy in the cycle's snapshot predates this scheduler's own last write of them. Its own
/// deallocation request (`PostFilter`) clears the reservation, and a cycle on the older copy
/// would bind the pod to a claim being deallocated; such a claim is read live first. The
/// snapshot's copy is what counts: the informer may show the write by now, while the
/// decision rests on the copy before it.
fn claims_to_write(
    own_writes: &OwnWrites,
    key: &ObjectKey,
    claims: &[plan::PodClaim],
    reserve: &[String],
) -> Vec<String> {
    claims
        .iter()
        .filter(|pc| {
            let name = pc.claim.metadata.name.as_deref().unwrap_or_default();
            if reserve.iter().any(|r| r == name) {
                return true;
            }
            let behind = own_writes.newer_than(
                &ObjectKey::new(&key.namespace, name),
                version_of(&pc.claim.metadata),
            );
            if behind {
                tracing::debug!(pod = %key, claim = %name, "The cycle's copy of a claim predates this scheduler's write of it: read live before the bind");
            }
            behind
        })
        .filter_map(|pc| pc.claim.metadata.name.clone())
        .collect()
}

impl Scheduler {
    /// A scheduler reading the given stores.
    pub fn new(
        client: Client,
        pods: Store<Pod>,
        nodes: Store<Node>,
        claims: Store<ResourceClaim>,
        contexts: Store<PodSchedulingContext>,
        classes: Store<ResourceClass>,
    ) -> Self {
        Self {
            last_event: LastEvents::default(),
            client,
            pods,
            nodes,
            claims,
            contexts,
            classes,
            claim_users: ClaimUsers::new(),
            load: NodeLoad::new(),
            contexts_seen: Mutex::new(HashMap::new()),
            claims_seen: Mutex::new(HashMap::new()),
            pods_seen: Mutex::new(HashMap::new()),
            assumed: AssumedPods::new(),
            own_writes: OwnWrites::new(),
            queue: WorkQueue::new(ACTOR_BACKOFF),
        }
    }

    /// Queues a new pod that needs scheduling, or one changed in a way that may make it
    /// schedulable ([`hints::pod_updated`]), and indexes the claims it waits for.
    pub fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied(pod) => {
                let key = ObjectKey::of(&pod.metadata);
                self.load
                    .place(Placement::Bound, key.clone(), bound_node(pod));
                self.claim_users.set(key.clone(), waiting_claims(pod, &key));
                let current = self
                    .pods
                    .get(&ObjectRef::new(&key.name).within(&key.namespace));
                let old = match current {
                    Some(current) => self
                        .pods_seen
                        .lock_or_recover()
                        .insert(key.clone(), current),
                    None => self.pods_seen.lock_or_recover().remove(&key),
                };
                if !wants(pod) {
                    self.assumed.forget(&key);
                    return;
                }
                if old.is_none_or(|old| hints::pod_updated(&old, pod)) {
                    self.queue.add(&key);
                }
            }
            Change::Deleted(pod) => {
                let key = ObjectKey::of(&pod.metadata);
                self.load.place(Placement::Bound, key.clone(), None);
                self.claim_users.remove(&key);
                self.pods_seen.lock_or_recover().remove(&key);
                self.assumed.forget(&key);
                if let Some(uid) = &pod.metadata.uid {
                    self.last_event.forget(uid);
                }
            }
            Change::Resynced => {
                let pods = self.pods.state();
                *self.pods_seen.lock_or_recover() = pods
                    .iter()
                    .map(|pod| (ObjectKey::of(&pod.metadata), pod.clone()))
                    .collect();
                self.assumed.retain(|key, uid| {
                    self.pods
                        .get(&ObjectRef::new(&key.name).within(&key.namespace))
                        .is_some_and(|pod| pod.metadata.uid.as_deref() == Some(uid) && wants(&pod))
                });
                let bound = pods.iter().map(|pod| {
                    let node = bound_node(pod).map(str::to_owned);
                    (ObjectKey::of(&pod.metadata), node)
                });
                self.load.reset(Placement::Bound, bound);
                self.claim_users.reset(pods.iter().map(|pod| {
                    let key = ObjectKey::of(&pod.metadata);
                    let claims = waiting_claims(pod, &key);
                    (key, claims)
                }));
            }
        }
    }

    /// Queues the unbound pods that use a new, deleted, or changed claim whose status changed
    /// ([`hints::claim_wakes_pods`]).
    pub fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        let claim = match change {
            Change::Applied(claim) => {
                let key = ObjectKey::of(&claim.metadata);
                let old = self
                    .claims_seen
                    .lock_or_recover()
                    .insert(key, claim.status.clone());
                if !hints::claim_wakes_pods(old.as_ref(), claim) {
                    return;
                }
                claim
            }
            Change::Deleted(claim) => {
                let key = ObjectKey::of(&claim.metadata);
                self.own_writes.forget(&key);
                self.claims_seen.lock_or_recover().remove(&key);
                claim
            }
            Change::Resynced => {
                self.own_writes
                    .retain(|key| self.cached_claim(&key.namespace, &key.name).is_some());
                *self.claims_seen.lock_or_recover() = self
                    .claims
                    .state()
                    .iter()
                    .map(|claim| (ObjectKey::of(&claim.metadata), claim.status.clone()))
                    .collect();
                return self.queue_all_waiting();
            }
        };
        for key in self.claim_users.of(&ObjectKey::of(&claim.metadata)) {
            self.queue.add(&key);
        }
    }

    /// Queues the pod of a changed scheduling context when the change is worth a cycle
    /// ([`hints::wakes_pod`]), and of a deleted one.
    pub fn on_context(&self, change: &Change<'_, PodSchedulingContext>) {
        match change {
            Change::Applied(ctx) => {
                let key = ObjectKey::of(&ctx.metadata);
                let node = ctx.spec.selected_node.as_deref();
                self.load.place(Placement::Selected, key.clone(), node);
                let old = self
                    .contexts_seen
                    .lock_or_recover()
                    .insert(key.clone(), hints::Seen::of(ctx));
                if hints::wakes_pod(self.pending_claims(&key), old.as_ref(), ctx) {
                    self.queue.add(&key);
                }
            }
            Change::Deleted(ctx) => {
                let key = ObjectKey::of(&ctx.metadata);
                self.load.place(Placement::Selected, key.clone(), None);
                self.contexts_seen.lock_or_recover().remove(&key);
                self.queue.add(&key);
            }
            Change::Resynced => {
                let contexts = self.contexts.state();
                let selected = contexts.iter().map(|ctx| {
                    let node = ctx.spec.selected_node.clone();
                    (ObjectKey::of(&ctx.metadata), node)
                });
                self.load.reset(Placement::Selected, selected);
            }
        }
    }

    /// How many claims of the pod `key` wait for a node; `None` when the pod or one of its claims
    /// is not known.
    fn pending_claims(&self, key: &ObjectKey) -> Option<usize> {
        let pod = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace))?;
        let mut pending = 0;
        for name in pod_claim_names(&pod) {
            let claim = self.cached_claim(&key.namespace, &name)?;
            pending += usize::from(hints::pending(&claim));
        }
        Some(pending)
    }

    /// The claim `namespace/name` as the informer shows it.
    fn cached_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.claims.get(&ObjectRef::new(name).within(namespace))
    }

    /// Records this scheduler's write of a claim, so that a cycle that decided on an older copy
    /// reads it live.
    fn wrote_claim(&self, written: &ResourceClaim) {
        let key = ObjectKey::of(&written.metadata);
        self.own_writes.wrote(&key, version_of(&written.metadata));
    }

    /// Queues every waiting pod (nodes or classes changed).
    pub fn queue_all_waiting(&self) {
        for pod in self.pods.state() {
            if wants(&pod) {
                self.queue.add(&ObjectKey::of(&pod.metadata));
            }
        }
    }

    /// One scheduling cycle for the pod.
    pub async fn sync(&self, key: ObjectKey) -> Result<Next> {
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        if !wants(&pod) {
            return Ok(Next::Done);
        }
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.assumed.is_assumed(&key, &pod_uid) {
            // Bound by an earlier cycle; the informer has not shown it yet.
            return Ok(Next::Done);
        }
        let lookup = |name: &str| self.cached_claim(&key.namespace, name);
        let claims = match resolve(&pod, &lookup) {
            Ok(claims) => claims,
            Err(unresolved) => {
                // `PreEnqueue` keeps the pod out of the active queue without a cycle: no event,
                // no condition. A change of its claims or of the pod queues it again.
                tracing::trace!(pod = %key, status = unresolved.upstream, "Pod gated by PreEnqueue");
                return Ok(Next::After(WAIT_RECHECK));
            }
        };
        let context = self
            .contexts
            .get(&ObjectRef::new(&key.name).within(&key.namespace));
        if let Some(ctx) = &context {
            let owned = ctx
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == pod_uid);
            if !owned {
                // Left behind by an earlier pod of the same name.
                self.delete_context(&key).await?;
                return Ok(Next::After(SETTLE));
            }
        }
        let nodes = self.nodes.state();
        let class = |name: &str| self.classes.get(&ObjectRef::new(name));
        let load_of = |node: &str| self.load.count(node);
        let (decision, failure) = decide_explained(&Snapshot {
            pod: &pod,
            claims: &claims,
            context: context.as_deref(),
            nodes: &nodes,
            class: &class,
            load: &load_of,
        });
        tracing::trace!(pod = %key, ?decision, "Scheduling cycle");
        if let Some(text) = failure {
            self.failed_scheduling(&pod, text).await;
        }
        match decision {
            Decision::Unschedulable(reason) => {
                self.report_unschedulable(&key, &pod, &reason).await;
                Ok(Next::After(WAIT_FOR_DRIVER))
            }
            Decision::Deallocate {
                claim,
                clear_selected_node,
            } => {
                self.request_deallocation(&key, &pod_uid, &claim, clear_selected_node)
                    .await?;
                let reason = format!("deallocation of resourceclaim {claim} requested");
                self.report_unschedulable(&key, &pod, &reason).await;
                Ok(Next::After(WAIT_RECHECK))
            }
            Decision::Publish {
                potential_nodes,
                selected_node,
            } => {
                let reason = if selected_node.is_some() {
                    "waiting for resource driver to allocate resource"
                } else {
                    "waiting for resource driver to provide information"
                };
                let spec = PodSchedulingContextSpec {
                    potential_nodes: Some(potential_nodes),
                    selected_node,
                };
                let next = self.publish(&key, &pod, context.is_some(), spec).await?;
                self.report_unschedulable(&key, &pod, reason).await;
                Ok(next)
            }
            Decision::Bind { node, reserve } => {
                let names = claims_to_write(&self.own_writes, &key, &claims, &reserve);
                self.reserve_and_bind(&key, &pod, &node, &names, &reserve)
                    .await
            }
        }
    }

    /// Posts an event about the pod as `default-scheduler`.
    async fn post_event(&self, pod: &Pod, type_: &str, reason: &str, action: &str, note: String) {
        scheduling::post_event(&self.client, pod, type_, reason, action, note).await;
    }

    /// Posts `FailedScheduling` with `text` unless it is the text last posted for the pod.
    async fn failed_scheduling(&self, pod: &Pod, text: String) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if !self.last_event.is_new(uid, &text) {
            return;
        }
        self.post_event(
            pod,
            "Warning",
            explain::FAILED_SCHEDULING,
            "Scheduling",
            text,
        )
        .await;
    }

    /// Posts `Scheduled` for a pod bound to `node`.
    async fn scheduled(&self, pod: &Pod, node: &str) {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let text = explain::scheduled(namespace, name, node);
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if !self.last_event.is_new(uid, &text) {
            return;
        }
        self.post_event(pod, "Normal", explain::SCHEDULED, "Binding", text)
            .await;
    }

    /// Records why the pod waits in its `PodScheduled` condition, when the message changed.
    async fn report_unschedulable(&self, key: &ObjectKey, pod: &Pod, message: &str) {
        scheduling::record_unschedulable(&self.client, key, pod, "Unschedulable", message).await;
    }

    /// `PostFilter`: stop asking for allocation on the selected node, then request deallocation.
    async fn request_deallocation(
        &self,
        key: &ObjectKey,
        pod_uid: &str,
        claim: &str,
        clear_selected_node: bool,
    ) -> Result<()> {
        if clear_selected_node {
            let contexts = Unread::namespaced::<PodSchedulingContext>(&self.client, &key.namespace);
            let patch = serde_json::json!({ "spec": { "selectedNode": null } });
            let action = format!("clear selected node of {key}");
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            match with_retry(&action, || contexts.patch(&key.name, &params, &patch)).await {
                Ok(()) => {}
                Err(ActorError::Api { source, .. }) if is_not_found(&source) => {}
                Err(error) => return Err(error),
            }
        }
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let action = format!("request deallocation of claim {}/{claim}", key.namespace);
        let written = read_modify_write(&claims, claim, Part::Status, &action, |claim| {
            let Some(status) = claim.status.as_mut() else {
                return false;
            };
            let reserved = status.reserved_for.as_deref().unwrap_or_default();
            if status.allocation.is_none()
                || status.deallocation_requested == Some(true)
                || !reserved.iter().all(|r| r.uid == pod_uid)
            {
                return false;
            }
            status.reserved_for = None;
            status.deallocation_requested = Some(true);
            true
        })
        .await?;
        match &written {
            Some(written) => {
                self.wrote_claim(written);
                tracing::debug!(pod = %key, claim, "Requested deallocation of a claim that no node can use");
            }
            None => {
                tracing::debug!(pod = %key, claim, "Claim changed since the cycle (reserved, deallocated or being deallocated): no deallocation requested");
            }
        }
        Ok(())
    }

    /// `PreBind` waiting point: publish the context (create it owned by the pod, or update its spec).
    async fn publish(
        &self,
        key: &ObjectKey,
        pod: &Pod,
        exists: bool,
        spec: PodSchedulingContextSpec,
    ) -> Result<Next> {
        let contexts = Unread::namespaced::<PodSchedulingContext>(&self.client, &key.namespace);
        if exists {
            let patch = serde_json::json!({ "spec": {
                "potentialNodes": spec.potential_nodes,
                "selectedNode": spec.selected_node,
            }});
            let action = format!("update scheduling context {key}");
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            match with_retry(&action, || contexts.patch(&key.name, &params, &patch)).await {
                Ok(()) => {}
                Err(ActorError::Api { source, .. }) if is_not_found(&source) => {
                    return Ok(Next::After(SETTLE))
                }
                Err(error) => return Err(error),
            }
        } else {
            let ctx = PodSchedulingContext {
                metadata: ObjectMeta {
                    name: Some(key.name.clone()),
                    namespace: Some(key.namespace.clone()),
                    owner_references: Some(vec![pod_owner_reference(pod)]),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            };
            let action = format!("create scheduling context {key}");
            match contexts.create(&PostParams::default(), &ctx).await {
                Ok(()) => {}
                // The cache has not caught up with an earlier create.
                Err(error) if is_conflict(&error) => return Ok(Next::After(SETTLE)),
                Err(error) => return Err(ActorError::api(action, error)),
            }
        }
        Ok(Next::After(WAIT_FOR_DRIVER))
    }

    /// `PreBind` (reserve the claims for the pod), Bind, `PostBind` (delete the context). Each
    /// of `claim_names` must still be allocated, available on `node` and not being deallocated:
    /// those in `reserve` are reserved for the pod (written from the cached copy, read live on a
    /// conflict), the others are read live and must still be reserved for it. Any that changed
    /// since the decision stops the bind.
    async fn reserve_and_bind(
        &self,
        key: &ObjectKey,
        pod: &Pod,
        node: &str,
        claim_names: &[String],
        reserve: &[String],
    ) -> Result<Next> {
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let Some(node_object) = self.nodes.get(&ObjectRef::new(node)) else {
            return Ok(Next::After(SETTLE));
        };
        for name in claim_names {
            let action = format!(
                "reserve claim {}/{name} for pod {}",
                key.namespace, key.name
            );
            let mut usable = true;
            let to_reserve = reserve.contains(name);
            // A claim to reserve is written from the cache, as upstream's `PreBind` does (a
            // stale copy conflicts and is read again); any other is here because the cache does
            // not show this scheduler's last write of it yet, and is read live.
            let known = to_reserve
                .then(|| self.cached_claim(&key.namespace, name))
                .flatten()
                .map(|claim| (*claim).clone());
            let written = modify_write(&claims, name, Part::Status, &action, known, |claim| {
                let step = pre_bind(claim, &key.name, pod_uid, to_reserve, &node_object);
                usable = step != PreBind::Unusable;
                step == PreBind::Reserve
            })
            .await?;
            if let Some(written) = &written {
                self.wrote_claim(written);
            }
            if !usable {
                // The claim changed under us; the next cycle sees the new state.
                return Ok(Next::After(SETTLE));
            }
        }
        if !scheduling::bind(&self.client, key, node).await? {
            return Ok(Next::Done);
        }
        self.assumed.assume(key, pod_uid, || {
            self.pods
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
                .is_some_and(|pod| wants(&pod))
        });
        tracing::debug!(pod = %key, node, "Bound pod");
        self.scheduled(pod, node).await;
        self.delete_context(key).await?;
        Ok(Next::Done)
    }

    async fn delete_context(&self, key: &ObjectKey) -> Result<()> {
        let contexts = Unread::namespaced::<PodSchedulingContext>(&self.client, &key.namespace);
        let action = format!("delete scheduling context {key}");
        let params = DeleteParams::default();
        match with_retry(&action, || contexts.delete(&key.name, &params)).await {
            Ok(()) => Ok(()),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests;
