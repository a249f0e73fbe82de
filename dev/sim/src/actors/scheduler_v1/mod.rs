//! The kube-scheduler of Kubernetes 1.34 with the `DynamicResources` plugin (`v1`):
//! schedules pods whose `schedulerName` is `default-scheduler` (or unset) by allocating their
//! claims from the `ResourceSlices` itself, then writes each claim (the delete-protection
//! finalizer, then `status.allocation` and `status.reservedFor` in one `/status` update),
//! binds the pod and posts `Scheduled`; a pod no node fits gets `FailedScheduling` (when the
//! text changed since the last one) and its `PodScheduled` condition, and is tried again.
//!
//! The decision of a cycle is pure (`plan`, over the `allocator` and the CEL environment of
//! `cel_env`, with the texts in `explain` and the errors in `error`); this module does the I/O, only through
//! `kube::Client`, driven by the shared informers. Cycles decide one at a time, and an
//! allocation counts as in flight from the decision until the claim informer shows it, so two
//! pods never get the same device.

pub mod allocator;
pub mod cel_env;
pub mod error;
pub mod explain;
pub mod extended;
mod extended_bind;
mod in_use;
pub mod plan;
pub mod quantity;
pub mod semver_lib;
pub mod sharing;

use dra_runtime::lock::LockExt;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::claim_refs::resolved_claim_keys;
use super::error::{ActorError, Result};
use super::indexes::{ClaimUsers, NodeLoad, Placement};
use super::scheduling::{self, bound_node, wants, LastEvents};
use super::writes::{modify_write, read_modify_write, Part};
use super::ObjectKey;
use crate::actors::device_taints::rules::TaintSource;
use crate::actors::device_taints::TaintView;
use crate::actors::ACTOR_BACKOFF;
use allocator::DeviceId;
use cel_env::CelEnv;
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};
use dra_types::resource_v1::{
    DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice,
    DELETE_PROTECTION_FINALIZER,
};
use in_use::{holdings, shares_of, DevicesInUse, Holding, InFlightAllocations};
use plan::{decide, ClaimWrite, Decision, Snapshot};
use sharing::Sharing;

/// How long a pod that fits no node waits before it is looked at again without a change
/// (changes wake it earlier).
const WAIT_RECHECK: Duration = Duration::from_secs(1);
/// Delay before a cycle retries after its writes failed.
const SETTLE: Duration = Duration::from_millis(20);
/// Upper bound of `status.reservedFor` (API `ResourceClaimReservedForMaxSize`).
const MAX_RESERVED_FOR: usize = 256;

/// Decided allocations whose writes the claim informer has not shown yet, and pods being bound.
#[derive(Default)]
struct InFlight {
    /// The allocations decided but not yet seen stored.
    claims: InFlightAllocations,
    /// Pod UID -> the node it is being bound to.
    binds: HashMap<String, String>,
    /// The devices of the allocations the claim informer shows.
    stored: DevicesInUse,
}

/// The scheduler actor.
pub struct SchedulerV1 {
    client: Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    claims: Store<ResourceClaim>,
    slices: Store<ResourceSlice>,
    classes: Store<DeviceClass>,
    taints: TaintSource,
    cel: CelEnv,
    /// Held while a cycle decides and records what it decided.
    in_flight: Mutex<InFlight>,
    /// The last `FailedScheduling` or `Scheduled` text posted for each pod.
    last_event: LastEvents,
    /// Pods bound per node.
    load: NodeLoad,
    /// The pods this scheduler waits on, and the claims each uses.
    waiting: Mutex<HashSet<ObjectKey>>,
    claim_users: ClaimUsers,
    /// Pods waiting for a scheduling cycle.
    pub queue: WorkQueue<ObjectKey>,
    /// Whether `DRAExtendedResource` is on.
    extended_resources: bool,
    /// Whether `DRAPartitionableDevices` and `DRAConsumableCapacity` are on.
    sharing: Sharing,
}

fn devices_of(claim: &ResourceClaim) -> Vec<Holding> {
    holdings(claim.allocation().map_or(&[][..], |a| &a.devices.results))
}

impl SchedulerV1 {
    /// A scheduler reading the given stores.
    pub fn new(
        client: Client,
        pods: Store<Pod>,
        nodes: Store<Node>,
        claims: Store<ResourceClaim>,
        slices: Store<ResourceSlice>,
        classes: Store<DeviceClass>,
        taints: TaintSource,
    ) -> Self {
        Self {
            client,
            pods,
            nodes,
            claims,
            slices,
            classes,
            taints,
            cel: CelEnv::new(),
            in_flight: Mutex::new(InFlight::default()),
            last_event: LastEvents::default(),
            load: NodeLoad::new(),
            waiting: Mutex::new(HashSet::new()),
            claim_users: ClaimUsers::new(),
            queue: WorkQueue::new(ACTOR_BACKOFF),
            extended_resources: false,
            sharing: Sharing::default(),
        }
    }

    /// The scheduler with `DRAExtendedResource` on or off (off by default).
    #[must_use]
    pub fn with_extended_resources(mut self, on: bool) -> Self {
        self.extended_resources = on;
        self
    }

    /// The scheduler with partitionable devices and consumable capacity on or off (off by
    /// default).
    #[must_use]
    pub fn with_sharing(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// Queues a changed pod that needs scheduling, and keeps the node load, the waiting pods
    /// and the claims they use up to date.
    pub fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied(pod) => {
                let key = ObjectKey::of(&pod.metadata);
                self.track(pod, &key);
                if wants(pod) {
                    self.queue.add(&key);
                }
            }
            Change::Deleted(pod) => {
                let key = ObjectKey::of(&pod.metadata);
                self.load.place(Placement::Bound, key.clone(), None);
                self.waiting.lock_or_recover().remove(&key);
                self.claim_users.remove(&key);
                if let Some(uid) = &pod.metadata.uid {
                    self.last_event.forget(uid);
                    self.in_flight.lock_or_recover().binds.remove(uid);
                }
            }
            Change::Resynced => {
                let pods = self.pods.state();
                self.waiting.lock_or_recover().clear();
                self.claim_users.reset(Vec::new());
                let bound = pods.iter().map(|pod| {
                    let key = ObjectKey::of(&pod.metadata);
                    self.track(pod, &key);
                    (key, bound_node(pod).map(str::to_owned))
                });
                self.load.reset(Placement::Bound, bound.collect::<Vec<_>>());
            }
        }
    }

    /// Records where a pod is bound and, while this scheduler waits on it, the claims it uses.
    fn track(&self, pod: &Pod, key: &ObjectKey) {
        self.load
            .place(Placement::Bound, key.clone(), bound_node(pod));
        if wants(pod) {
            self.waiting.lock_or_recover().insert(key.clone());
            self.claim_users.set(key.clone(), resolved_claim_keys(pod));
        } else {
            self.waiting.lock_or_recover().remove(key);
            self.claim_users.remove(key);
        }
    }

    /// A changed claim: an in-flight allocation the informer now shows (or a deleted claim)
    /// stops being in flight; the pods that use the claim look again, and every waiting pod
    /// does when the change freed a device (as upstream's queueing hint for claims).
    pub fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        let (claim, freed) = match change {
            Change::Applied(claim) => {
                let uid = claim.metadata.uid.as_deref().unwrap_or_default();
                let mut in_flight = self.in_flight.lock_or_recover();
                if claim.is_allocated() {
                    in_flight.claims.remove(uid);
                }
                (claim, in_flight.stored.set(uid, devices_of(claim)))
            }
            Change::Deleted(claim) => {
                let uid = claim.metadata.uid.as_deref().unwrap_or_default();
                let mut in_flight = self.in_flight.lock_or_recover();
                in_flight.claims.remove(uid);
                (claim, in_flight.stored.clear(uid))
            }
            Change::Resynced => {
                let claims = self.claims.state();
                let stored = claims.iter().map(|c| {
                    let uid = c.metadata.uid.clone().unwrap_or_default();
                    (uid, devices_of(c))
                });
                self.in_flight.lock_or_recover().stored.reset(stored);
                return self.queue_all_waiting();
            }
        };
        if freed {
            return self.queue_all_waiting();
        }
        for key in self.claim_users.of(&ObjectKey::of(&claim.metadata)) {
            self.queue.add(&key);
        }
    }

    /// Queues every waiting pod (nodes, slices, classes changed, or devices freed).
    pub fn queue_all_waiting(&self) {
        let waiting: Vec<ObjectKey> = self.waiting.lock_or_recover().iter().cloned().collect();
        for key in waiting {
            self.queue.add(&key);
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
        let decision = self.decide_and_reserve(&pod, &key, &pod_uid);
        tracing::trace!(pod = %key, ?decision, "Scheduling cycle");
        match decision {
            Decision::Gated(status) => {
                // Kept out of the active queue: a change of its claims or of the pod queues it
                // again.
                tracing::trace!(pod = %key, %status, "Pod gated by PreEnqueue");
                Ok(Next::After(WAIT_RECHECK))
            }
            Decision::Wait { message, reason } => {
                scheduling::record_unschedulable(&self.client, &key, &pod, reason, &message).await;
                self.failed_scheduling(&pod, message).await;
                Ok(Next::After(WAIT_RECHECK))
            }
            Decision::Bind {
                node,
                mut claims,
                extended,
            } => {
                let made = match extended {
                    Some((claim, allocation)) => {
                        match self.create_extended(&pod, &claim, allocation).await {
                            Ok(write) => Some((write, claim)),
                            Err(error) => {
                                self.forget_bind(&pod_uid);
                                return Err(error);
                            }
                        }
                    }
                    None => None,
                };
                if let Some((write, _)) = &made {
                    claims.push(write.clone());
                }
                let mut bound = self
                    .pre_bind_and_bind(&key, &pod, &node, &claims, made.as_ref())
                    .await;
                if let (Some((write, _)), false) = (&made, matches!(bound, Ok(Next::Done))) {
                    self.delete_extended(&key, write).await;
                    bound = bound.and(Ok(Next::After(SETTLE)));
                }
                let mut in_flight = self.in_flight.lock_or_recover();
                in_flight.binds.remove(&pod_uid);
                in_flight.claims.remove(&pod_uid);
                if !matches!(bound, Ok(Next::Done)) {
                    // Unreserve: what was not written is no longer in flight.
                    for claim in &claims {
                        if claim.allocation.is_some() && !self.stored_allocated(&key, &claim.name) {
                            in_flight.claims.remove(&claim.uid);
                        }
                    }
                }
                bound
            }
        }
    }

    /// Whether the claim store shows the claim allocated.
    fn stored_allocated(&self, key: &ObjectKey, name: &str) -> bool {
        self.claims
            .get(&ObjectRef::new(name).within(&key.namespace))
            .is_some_and(|c| c.is_allocated())
    }

    /// Decides under the in-flight lock and, for a bind, records the allocations and the bind
    /// as in flight before the lock is released.
    fn decide_and_reserve(&self, pod: &Pod, key: &ObjectKey, pod_uid: &str) -> Decision {
        let mut in_flight = self.in_flight.lock_or_recover();
        let mut load = self.load.counts();
        for node in in_flight.binds.values() {
            *load.entry(node.clone()).or_default() += 1;
        }
        let nodes = self.nodes.state();
        let slices = self.slices.state();
        let claim = |name: &str| {
            self.claims
                .get(&ObjectRef::new(name).within(&key.namespace))
        };
        let class = |name: &str| self.classes.get(&ObjectRef::new(name));
        let flying = |uid: &str| in_flight.claims.has_claim(uid);
        let allocated = |id: &DeviceId| in_flight.stored.contains(id) || in_flight.claims.holds(id);
        let shares = |id: &DeviceId| shares_of(&in_flight.stored, &in_flight.claims, id);
        let load_of = |node: &str| load.get(node).copied().unwrap_or(0);
        let rules = self.taints.rules_now();
        let pod_extended = extended::plan(pod, &self.classes.state(), self.extended_resources);
        let decision = decide(&Snapshot {
            pod,
            claim: &claim,
            in_flight: &flying,
            nodes: &nodes,
            slices: &slices,
            class: &class,
            allocated: &allocated,
            shares: &shares,
            sharing: self.sharing,
            cel: &self.cel,
            load: &load_of,
            taints: rules.as_deref().map(|rules| TaintView { rules }),
            extended: &pod_extended,
        });
        if let Decision::Bind {
            node,
            claims,
            extended,
        } = &decision
        {
            let allocations = claims
                .iter()
                .filter_map(|w| Some((w.uid.as_str(), w.allocation.as_ref()?)));
            // The extended-resource claim has no UID before it is created: held under the pod's.
            let extended = extended.iter().map(|(_, a)| (pod_uid, a));
            for (uid, allocation) in allocations.chain(extended) {
                in_flight
                    .claims
                    .insert(uid, holdings(&allocation.devices.results));
            }
            in_flight.binds.insert(pod_uid.to_owned(), node.clone());
        }
        decision
    }

    /// Posts `FailedScheduling` with `text` unless it is the text last posted for the pod.
    async fn failed_scheduling(&self, pod: &Pod, text: String) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if !self.last_event.is_new(uid, &text) {
            return;
        }
        let reason = explain::FAILED_SCHEDULING;
        scheduling::post_event(&self.client, pod, "Warning", reason, "Scheduling", text).await;
    }

    /// `PreBind` (each claim: finalizer, then allocation and reservation), then Bind and the
    /// `Scheduled` event. A claim that changed since the decision stops the bind: the pod's
    /// reservations made so far are dropped again and the next cycle sees the new state.
    async fn pre_bind_and_bind(
        &self,
        key: &ObjectKey,
        pod: &Pod,
        node: &str,
        claims: &[ClaimWrite],
        extended: Option<&(ClaimWrite, extended::ExtendedClaim)>,
    ) -> Result<Next> {
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut reserved: Vec<&str> = Vec::new();
        for claim in claims {
            match self.write_claim(key, pod_uid, claim).await {
                Ok(()) => reserved.push(&claim.name),
                Err(error) => {
                    tracing::debug!(pod = %key, claim = %claim.name, %error, "Claim changed during PreBind");
                    for name in reserved {
                        self.unreserve(key, pod_uid, name).await;
                    }
                    return Ok(Next::After(SETTLE));
                }
            }
        }
        if let Some((write, claim)) = extended {
            if let Err(error) = self.record_extended(key, write, claim).await {
                tracing::debug!(pod = %key, %error, "Could not record the extended-resource claim");
                for name in reserved {
                    self.unreserve(key, pod_uid, name).await;
                }
                return Ok(Next::After(SETTLE));
            }
        }
        if !scheduling::bind(&self.client, key, node).await? {
            return Ok(Next::Done);
        }
        tracing::debug!(pod = %key, node, "Bound pod");
        let namespace = key.namespace.as_str();
        let text = explain::scheduled(namespace, &key.name, node);
        if !self.last_event.is_new(pod_uid, &text) {
            return Ok(Next::Done);
        }
        scheduling::post_event(
            &self.client,
            pod,
            "Normal",
            explain::SCHEDULED,
            "Binding",
            text,
        )
        .await;
        Ok(Next::Done)
    }

    /// Writes one claim: for an allocation the finalizer (a normal update), then allocation and
    /// `reservedFor` in one status update; otherwise only the reservation.
    async fn write_claim(&self, key: &ObjectKey, pod_uid: &str, write: &ClaimWrite) -> Result<()> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let what = format!("claim {}/{}", key.namespace, write.name);
        let refuse = |claim: &ResourceClaim| {
            if claim.metadata.uid.as_deref() != Some(write.uid.as_str())
                || claim.metadata.deletion_timestamp.is_some()
            {
                Some(format!("{what} got deleted in the meantime"))
            } else if write.allocation.is_some() && claim.is_allocated() {
                Some(format!("{what} got allocated elsewhere in the meantime"))
            } else if write.allocation.is_none() && !claim.is_allocated() {
                Some(format!("{what} got deallocated in the meantime"))
            } else {
                None
            }
        };
        let mut refusal: Option<String> = None;
        // As upstream's `PreBind`, the writes start from the cached claim and then from the
        // answer to the previous write; only a conflict reads the claim live.
        let mut known = self
            .claims
            .get(&ObjectRef::new(&write.name).within(&key.namespace))
            .map(|claim| (*claim).clone());
        if write.allocation.is_some() {
            let action = format!("add the finalizer of {what}");
            let cached = known.take();
            known = modify_write(&api, &write.name, Part::Main, &action, cached, |claim| {
                refusal = refuse(claim);
                if refusal.is_some() || claim.has_delete_protection() {
                    return false;
                }
                claim
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(DELETE_PROTECTION_FINALIZER.to_owned());
                true
            })
            .await?;
            if let Some(refusal) = refusal.take() {
                return Err(ActorError::Sync(refusal));
            }
        }
        let allocation = write.allocation.as_ref();
        let action = format!("allocate and reserve {what}");
        let mut written = false;
        modify_write(&api, &write.name, Part::Status, &action, known, |claim| {
            written = false;
            refusal = refuse(claim);
            if refusal.is_some() {
                return false;
            }
            let status = claim.status.get_or_insert_with(Default::default);
            if let Some(allocation) = allocation {
                status.allocation = Some(allocation.clone());
            }
            if status.reserved_for.iter().any(|r| r.uid == pod_uid) {
                written = true;
                return allocation.is_some();
            }
            if status.reserved_for.len() >= MAX_RESERVED_FOR {
                refusal = Some(format!("{what} has no room for another consumer"));
                return false;
            }
            status
                .reserved_for
                .push(ResourceClaimConsumerReference::pod(&key.name, pod_uid));
            written = true;
            true
        })
        .await?;
        match refusal {
            Some(refusal) => Err(ActorError::Sync(refusal)),
            None if written => Ok(()),
            None => Err(ActorError::Missing { what }),
        }
    }

    /// `Unreserve`: drops the pod from the claim's `reservedFor` (the allocation stays).
    async fn unreserve(&self, key: &ObjectKey, pod_uid: &str, name: &str) {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let action = format!("unreserve claim {}/{name}", key.namespace);
        let result = read_modify_write(&api, name, Part::Status, &action, |claim| {
            let Some(status) = claim.status.as_mut() else {
                return false;
            };
            let before = status.reserved_for.len();
            status.reserved_for.retain(|r| r.uid != pod_uid);
            status.reserved_for.len() != before
        })
        .await;
        if let Err(error) = result {
            tracing::debug!(pod = %key, claim = name, %error, "Could not unreserve a claim");
        }
    }
}
