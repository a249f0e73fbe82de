//! A scripted `v1alpha2` DRA driver for scenario tests. It plays the driver's side of the protocol
//! over HTTP the way the upstream controller library does, with a fixed number of devices per
//! node: answers `PodSchedulingContexts` with unsuitable nodes, allocates on the selected node
//! (finalizer first, then `status.allocation` with the pod in `reservedFor`), allocates Immediate
//! claims itself, and deallocates on `deallocationRequested` or deletion before dropping its
//! finalizer. It polls the API server every few milliseconds; it records what it did.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, PodSchedulingContext, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimSchedulingStatus, ResourceHandle,
};
use kube::api::PostParams;
use kube::runtime::reflector::{self, reflector, store::Writer, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::Notify;

/// Driver name of the scripted driver.
pub const DRIVER: &str = "gpu.dra-ledger.io";
/// The finalizer it puts on claims it allocates.
pub const FINALIZER: &str = "gpu.dra-ledger.io/deletion-protection";
/// The `ResourceClass` its claims use.
pub const CLASS: &str = "gpu";

/// What the driver did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A claim was allocated on a node (for a pod, or immediately without one).
    Allocated {
        /// Claim name.
        claim: String,
        /// Node.
        node: String,
        /// The pod it was allocated for (delayed allocation).
        pod: Option<String>,
    },
    /// A claim was deallocated.
    Deallocated {
        /// Claim name.
        claim: String,
        /// Whether `reservedFor` was empty at that moment.
        reserved_for_empty: bool,
        /// Whether the claim was being deleted (otherwise deallocation was requested).
        deleting: bool,
        /// The `selectedNode` of the owning pod's scheduling context when the request was seen.
        selected_node_at_request: Option<String>,
    },
}

/// How the driver behaves.
#[derive(Debug, Default)]
pub struct Script {
    capacity: usize,
    /// A pod claim whose first allocation fails, on the node given or (`None`) on the first node
    /// it is tried on.
    fail_once: Option<(String, Option<String>)>,
    immediate_paused: AtomicBool,
}

impl Script {
    /// Every node has `capacity` devices; every claim takes one.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity,
            ..Self::default()
        }
    }

    /// The first allocation of pod claim `pod_claim` on `node` fails; afterwards the driver
    /// reports that node unsuitable for that pod claim.
    pub fn failing_once(mut self, pod_claim: &str, node: &str) -> Self {
        self.fail_once = Some((pod_claim.into(), Some(node.into())));
        self
    }

    /// The first allocation of pod claim `pod_claim` fails, on whichever node the scheduler
    /// selected; afterwards the driver reports that node unsuitable for that pod claim.
    pub fn failing_once_on_the_first_node(mut self, pod_claim: &str) -> Self {
        self.fail_once = Some((pod_claim.into(), None));
        self
    }

    /// Immediate claims wait until `resume_immediate`.
    pub fn immediate_paused(self) -> Self {
        self.immediate_paused.store(true, Ordering::SeqCst);
        self
    }

    /// Lets immediate claims be allocated.
    pub fn resume_immediate(&self) {
        self.immediate_paused.store(false, Ordering::SeqCst);
    }
}

#[derive(Debug, Default)]
struct State {
    /// Claim UID -> node.
    allocations: HashMap<String, String>,
    failed: HashSet<(String, String)>,
    log: Vec<Record>,
    max_in_use: usize,
}

/// The running driver.
pub struct Driver {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    watches: Vec<tokio::task::JoinHandle<()>>,
}

struct Inner {
    client: Client,
    script: Arc<Script>,
    state: Arc<Mutex<State>>,
    claims: Store<ResourceClaim>,
    contexts: Store<PodSchedulingContext>,
    pods: Store<Pod>,
}

/// Keeps `writer`'s store filled from a watch and wakes `changed` on every event.
fn watch_into<K>(
    api: Api<K>,
    writer: Writer<K>,
    changed: Arc<Notify>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    tokio::spawn(async move {
        let stream = reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {
            changed.notify_one();
        }
    })
}

impl Driver {
    /// Starts the driver loop.
    pub fn start(client: Client, script: Script) -> Self {
        Self::start_shared(client, Arc::new(script))
    }

    /// Starts the driver loop with a script the test keeps a handle on.
    pub fn start_shared(client: Client, script: Arc<Script>) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let changed = Arc::new(Notify::new());
        let (claims, claims_w) = reflector::store();
        let (contexts, contexts_w) = reflector::store();
        let (pods, pods_w) = reflector::store();
        let watches = vec![
            watch_into(
                Api::<ResourceClaim>::all(client.clone()),
                claims_w,
                changed.clone(),
            ),
            watch_into(
                Api::<PodSchedulingContext>::all(client.clone()),
                contexts_w,
                changed.clone(),
            ),
            watch_into(Api::<Pod>::all(client.clone()), pods_w, changed.clone()),
        ];
        let inner = Inner {
            client,
            script,
            state: state.clone(),
            claims,
            contexts,
            pods,
        };
        let task = tokio::spawn(async move {
            let _ = inner.claims.wait_until_ready().await;
            let _ = inner.contexts.wait_until_ready().await;
            let _ = inner.pods.wait_until_ready().await;
            loop {
                // Failed writes (stale copies, injected faults) are retried on the next pass.
                let retry = if inner.pass().await { 10 } else { 200 };
                tokio::select! {
                    () = changed.notified() => {}
                    () = tokio::time::sleep(Duration::from_millis(retry)) => {}
                }
            }
        });
        Self {
            state,
            task,
            watches,
        }
    }

    /// What the driver did so far.
    pub fn log(&self) -> Vec<Record> {
        self.state.lock().unwrap().log.clone()
    }

    /// The node a claim (by UID) is allocated on.
    pub fn node_of(&self, claim_uid: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .allocations
            .get(claim_uid)
            .cloned()
    }

    /// The highest number of claims that were ever allocated on one node at once.
    pub fn max_in_use(&self) -> usize {
        self.state.lock().unwrap().max_in_use
    }

    /// Stops the driver loop.
    pub fn stop(self) {
        self.task.abort();
        for watch in self.watches {
            watch.abort();
        }
    }
}

fn name(claim: &ResourceClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

fn node_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            match_expressions: None,
        }],
    }
}

/// The pod's unallocated delayed claims of our class as `(pod claim name, claim)`; `None` while
/// a generated claim is not recorded in the pod status yet.
fn pending_claims(
    pod: &Pod,
    namespace: &str,
    claims: &[ResourceClaim],
) -> Option<Vec<(String, ResourceClaim)>> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    let mut pending = Vec::new();
    for entry in pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.clone())
        .unwrap_or_default()
    {
        let source = entry.source.clone().unwrap_or_default();
        let claim_name = source.resource_claim_name.or_else(|| {
            statuses
                .iter()
                .find(|s| s.name == entry.name)
                .and_then(|s| s.resource_claim_name.clone())
        });
        let claim_name = claim_name?;
        let Some(claim) = claims
            .iter()
            .find(|c| c.metadata.namespace.as_deref() == Some(namespace) && name(c) == claim_name)
        else {
            continue;
        };
        let delayed = claim.spec.allocation_mode.as_deref() != Some("Immediate");
        let allocated = claim
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some());
        if claim.spec.resource_class_name == CLASS
            && delayed
            && !allocated
            && claim.metadata.deletion_timestamp.is_none()
        {
            pending.push((entry.name.clone(), claim.clone()));
        }
    }
    Some(pending)
}

impl Inner {
    fn in_use(&self, node: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .allocations
            .values()
            .filter(|n| *n == node)
            .count()
    }

    /// One pass over the cached claims and contexts; returns whether some write failed.
    async fn pass(&self) -> bool {
        let claims: Vec<ResourceClaim> =
            self.claims.state().iter().map(|c| (**c).clone()).collect();
        let mut failed = false;
        for claim in claims
            .iter()
            .filter(|c| c.spec.resource_class_name == CLASS)
        {
            failed |= self.sync_claim(claim).await.is_err();
        }
        for ctx in self.contexts.state() {
            failed |= self.sync_context(&ctx, &claims).await.is_err();
        }
        failed
    }

    async fn sync_claim(&self, claim: &ResourceClaim) -> Result<(), kube::Error> {
        let status = claim.status.clone().unwrap_or_default();
        let ours = claim
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER);
        let deleting = claim.metadata.deletion_timestamp.is_some();
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        if (deleting || status.deallocation_requested == Some(true)) && ours {
            if status.reserved_for.as_ref().is_some_and(|r| !r.is_empty()) {
                return Ok(());
            }
            let selected_node_at_request = self.selected_node_of_owner(claim, &namespace).await?;
            let mut current = claim.clone();
            if status.allocation.is_some() || status.deallocation_requested.is_some() {
                let mut cleared = claim.clone();
                let s = cleared.status.get_or_insert_with(Default::default);
                s.allocation = None;
                s.driver_name = None;
                s.deallocation_requested = None;
                current = api
                    .replace_status(
                        &name(claim),
                        &PostParams::default(),
                        serde_json::to_vec(&cleared).unwrap(),
                    )
                    .await?;
            }
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            {
                let mut state = self.state.lock().unwrap();
                if state.allocations.remove(&uid).is_some() {
                    state.log.push(Record::Deallocated {
                        claim: name(claim),
                        reserved_for_empty: true,
                        deleting,
                        selected_node_at_request,
                    });
                }
            }
            current.metadata.finalizers = Some(
                current
                    .metadata
                    .finalizers
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|f| f != FINALIZER)
                    .collect(),
            );
            api.replace(&name(claim), &PostParams::default(), &current)
                .await?;
            return Ok(());
        }
        let immediate = claim.spec.allocation_mode.as_deref() == Some("Immediate");
        if immediate
            && status.allocation.is_none()
            && !deleting
            && !self.script.immediate_paused.load(Ordering::SeqCst)
        {
            // The last node with room, so that tests can tell it from the scheduler's own choice.
            let nodes = ["node-2", "node-1", "node-0"];
            if let Some(node) = nodes.iter().find(|n| self.in_use(n) < self.script.capacity) {
                self.allocate(claim, node, None).await?;
            }
        }
        Ok(())
    }

    async fn selected_node_of_owner(
        &self,
        claim: &ResourceClaim,
        namespace: &str,
    ) -> Result<Option<String>, kube::Error> {
        let Some(owner) = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Pod")
        else {
            return Ok(None);
        };
        let contexts: Api<PodSchedulingContext> = Api::namespaced(self.client.clone(), namespace);
        Ok(contexts
            .get_opt(&owner.name)
            .await?
            .and_then(|c| c.spec.selected_node))
    }

    async fn allocate(
        &self,
        claim: &ResourceClaim,
        node: &str,
        pod: Option<&Pod>,
    ) -> Result<(), kube::Error> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if self.state.lock().unwrap().allocations.contains_key(&uid) {
            // A stale cached copy of a claim this driver already allocated.
            return Ok(());
        }
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let mut current = claim.clone();
        if !current
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
        {
            current
                .metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(FINALIZER.into());
            current = api
                .replace(&name(claim), &PostParams::default(), &current)
                .await?;
        }
        let status = current.status.get_or_insert_with(Default::default);
        status.driver_name = Some(DRIVER.into());
        status.allocation = Some(AllocationResult {
            available_on_nodes: Some(node_selector(node)),
            resource_handles: Some(vec![ResourceHandle {
                driver_name: Some(DRIVER.into()),
                data: Some(format!("{{\"node\":\"{node}\"}}")),
                structured_data: None,
            }]),
            shareable: Some(false),
        });
        if let Some(pod) = pod {
            status.reserved_for = Some(vec![ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            }]);
        }
        api.replace_status(
            &name(claim),
            &PostParams::default(),
            serde_json::to_vec(&current).unwrap(),
        )
        .await?;
        let mut state = self.state.lock().unwrap();
        state
            .allocations
            .insert(claim.metadata.uid.clone().unwrap_or_default(), node.into());
        let in_use = state.allocations.values().filter(|n| *n == node).count();
        state.max_in_use = state.max_in_use.max(in_use);
        state.log.push(Record::Allocated {
            claim: name(claim),
            node: node.into(),
            pod: pod.and_then(|p| p.metadata.name.clone()),
        });
        Ok(())
    }

    /// Whether allocating `(pod claim, node)` is the scripted failure (if it has not failed yet).
    fn fails_once(&self, (pod_claim, node): &(String, String)) -> bool {
        match &self.script.fail_once {
            Some((failing, Some(on))) => failing == pod_claim && on == node,
            Some((failing, None)) => {
                failing == pod_claim
                    && !self
                        .state
                        .lock()
                        .unwrap()
                        .failed
                        .iter()
                        .any(|(c, _)| c == failing)
            }
            None => false,
        }
    }

    async fn sync_context(
        &self,
        ctx: &PodSchedulingContext,
        claims: &[ResourceClaim],
    ) -> Result<(), kube::Error> {
        let potential = ctx.spec.potential_nodes.clone().unwrap_or_default();
        let selected = ctx.spec.selected_node.clone();
        if ctx.metadata.deletion_timestamp.is_some() || (potential.is_empty() && selected.is_none())
        {
            return Ok(());
        }
        let namespace = ctx.metadata.namespace.clone().unwrap_or_default();
        let pod_ref =
            ObjectRef::new(ctx.metadata.name.as_deref().unwrap_or_default()).within(&namespace);
        let Some(pod) = self.pods.get(&pod_ref) else {
            return Ok(());
        };
        let Some(pending) = pending_claims(&pod, &namespace, claims) else {
            return Ok(());
        };
        if pending.is_empty() {
            return Ok(());
        }
        let mut candidates = potential.clone();
        if let Some(node) = &selected {
            if !candidates.contains(node) {
                candidates.push(node.clone());
            }
        }
        let report = self.unsuitable_nodes(&pending, &candidates);
        if let Some(node) = &selected {
            if !report.values().any(|nodes| nodes.contains(node)) {
                for (pod_claim, claim) in &pending {
                    let key = (pod_claim.clone(), node.clone());
                    if self.fails_once(&key) && self.state.lock().unwrap().failed.insert(key) {
                        continue;
                    }
                    self.allocate(claim, node, Some(&pod)).await?;
                }
            }
        }
        self.write_report(ctx, &namespace, report).await
    }

    /// Per pending pod claim, the candidate nodes the script finds unsuitable: a node where the
    /// claim failed, or one without room for all of the pod's pending claims.
    fn unsuitable_nodes(
        &self,
        pending: &[(String, ResourceClaim)],
        candidates: &[String],
    ) -> BTreeMap<String, Vec<String>> {
        let unsuitable = |pod_claim: &str, node: &str| {
            let state = self.state.lock().unwrap();
            let in_use = state.allocations.values().filter(|n| *n == node).count();
            state
                .failed
                .contains(&(pod_claim.to_owned(), node.to_owned()))
                || in_use + pending.len() > self.script.capacity
        };
        pending
            .iter()
            .map(|(pod_claim, _)| {
                let nodes = candidates
                    .iter()
                    .filter(|n| unsuitable(pod_claim, n))
                    .cloned()
                    .collect();
                (pod_claim.clone(), nodes)
            })
            .collect()
    }

    /// Writes `report` into the context's status unless it says so already.
    async fn write_report(
        &self,
        ctx: &PodSchedulingContext,
        namespace: &str,
        report: BTreeMap<String, Vec<String>>,
    ) -> Result<(), kube::Error> {
        let entries: Vec<ResourceClaimSchedulingStatus> = report
            .into_iter()
            .map(|(pod_claim, nodes)| ResourceClaimSchedulingStatus {
                name: Some(pod_claim),
                unsuitable_nodes: Some(nodes),
            })
            .collect();
        let current = ctx
            .status
            .as_ref()
            .and_then(|s| s.resource_claims.clone())
            .unwrap_or_default();
        if current != entries {
            let mut updated = ctx.clone();
            updated
                .status
                .get_or_insert_with(Default::default)
                .resource_claims = Some(entries);
            let api: Api<PodSchedulingContext> = Api::namespaced(self.client.clone(), namespace);
            match api
                .replace_status(
                    ctx.metadata.name.as_deref().unwrap_or_default(),
                    &PostParams::default(),
                    serde_json::to_vec(&updated).unwrap(),
                )
                .await
            {
                Ok(_) => {}
                // Stale copy or already deleted: the next pass sees the new state.
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}
