//! Test doubles of the framework: an in-memory [`FakeApi`] that stores objects, records writes and
//! can inject failures, [`MemoryCaches`] that tests fill directly, a [`ScriptedDriver`], and small
//! fixture builders. Used by this crate's tests and by the tests of drivers built on the framework.
//!
//! Compiled only for tests or with the `testing` feature (a dev-dependency with
//! `features = ["testing"]`); a product build has none of it. Must not depend on a real cluster.

mod driver;
pub mod fixtures;

use dra_runtime::lock::{LockExt, RwLockExt};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim, ResourceClass};
use kube::ResourceExt;

pub use driver::{DriverCall, ScriptedDriver, ScriptedError};

use super::api::ClusterApi;
use super::caches::Caches;
use super::error::{KubeCallError, KubeCallErrorKind};
use dra_runtime::events::EventRecord;

type Key = (String, String);

fn key_of<K: kube::Resource>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// A write the framework made through [`FakeApi`].
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// `update_claim` (metadata and spec), with the object sent.
    UpdateClaim(ResourceClaim),
    /// `update_claim_status`, with the object sent.
    UpdateClaimStatus(ResourceClaim),
    /// `patch_scheduling_context_status`, with the patch sent.
    PatchContextStatus {
        /// Namespace of the context.
        namespace: String,
        /// Name of the context.
        name: String,
        /// The JSON patch.
        patch: json_patch::Patch,
    },
}

/// Operations of [`ClusterApi`], for failure injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `update_claim`.
    UpdateClaim,
    /// `update_claim_status`.
    UpdateClaimStatus,
    /// `patch_scheduling_context_status`.
    PatchContextStatus,
    /// `post_event`.
    PostEvent,
}

#[derive(Default)]
struct FakeState {
    claims: BTreeMap<Key, ResourceClaim>,
    contexts: BTreeMap<Key, PodSchedulingContext>,
    next_version: u64,
    writes: Vec<Write>,
    events: Vec<EventRecord>,
    failures: HashMap<Operation, VecDeque<KubeCallError>>,
}

impl FakeState {
    fn bump(&mut self) -> String {
        self.next_version += 1;
        self.next_version.to_string()
    }

    fn injected(&mut self, op: Operation) -> Result<(), KubeCallError> {
        match self.failures.get_mut(&op).and_then(VecDeque::pop_front) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// An in-memory API server for claims and scheduling contexts, with optimistic concurrency on
/// resourceVersion (numeric, starting above 1000 for written objects).
pub struct FakeApi {
    state: Mutex<FakeState>,
}

impl Default for FakeApi {
    fn default() -> Self {
        Self {
            state: Mutex::new(FakeState {
                next_version: 1000,
                ..FakeState::default()
            }),
        }
    }
}

impl FakeApi {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock_or_recover()
    }

    /// Stores a claim as is.
    pub fn insert_claim(&self, claim: ResourceClaim) {
        self.lock().claims.insert(key_of(&claim), claim);
    }

    /// Stores a scheduling context as is.
    pub fn insert_context(&self, context: PodSchedulingContext) {
        self.lock().contexts.insert(key_of(&context), context);
    }

    /// The stored claim.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<ResourceClaim> {
        self.lock()
            .claims
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The stored scheduling context.
    pub fn context(&self, namespace: &str, name: &str) -> Option<PodSchedulingContext> {
        self.lock()
            .contexts
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every write so far, oldest first.
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// Every event posted so far, oldest first.
    pub fn events(&self) -> Vec<EventRecord> {
        self.lock().events.clone()
    }

    /// Makes the next call of `op` fail with `message` (calls queue up).
    pub fn fail_next(&self, op: Operation, kind: KubeCallErrorKind, message: &str) {
        self.lock()
            .failures
            .entry(op)
            .or_default()
            .push_back(KubeCallError::new(kind, message));
    }

    fn update(&self, claim: &ResourceClaim, status: bool) -> Result<ResourceClaim, KubeCallError> {
        let mut state = self.lock();
        state.injected(if status {
            Operation::UpdateClaimStatus
        } else {
            Operation::UpdateClaim
        })?;
        let key = key_of(claim);
        let Some(stored) = state.claims.get(&key).cloned() else {
            return Err(KubeCallError::new(
                KubeCallErrorKind::NotFound,
                format!("resourceclaims.resource.k8s.io {:?} not found", key.1),
            ));
        };
        if claim.metadata.resource_version.is_some()
            && claim.metadata.resource_version != stored.metadata.resource_version
        {
            return Err(KubeCallError::new(
                KubeCallErrorKind::Conflict,
                "the object has been modified; please apply your changes to the latest version",
            ));
        }
        let mut updated = if status {
            ResourceClaim {
                status: claim.status.clone(),
                ..stored
            }
        } else {
            ResourceClaim {
                status: stored.status,
                ..claim.clone()
            }
        };
        updated.metadata.resource_version = Some(state.bump());
        state.writes.push(if status {
            Write::UpdateClaimStatus(claim.clone())
        } else {
            Write::UpdateClaim(claim.clone())
        });
        state.claims.insert(key, updated.clone());
        Ok(updated)
    }
}

#[async_trait]
impl ClusterApi for FakeApi {
    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, KubeCallError> {
        self.update(claim, false)
    }

    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, KubeCallError> {
        self.update(claim, true)
    }

    async fn patch_scheduling_context_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &json_patch::Patch,
    ) -> Result<PodSchedulingContext, KubeCallError> {
        let mut state = self.lock();
        state.injected(Operation::PatchContextStatus)?;
        let key = (namespace.to_owned(), name.to_owned());
        let Some(stored) = state.contexts.get(&key) else {
            return Err(KubeCallError::new(KubeCallErrorKind::NotFound, "not found"));
        };
        let mut value = serde_json::to_value(stored)
            .map_err(|e| KubeCallError::new(KubeCallErrorKind::Other, e.to_string()))?;
        json_patch::patch(&mut value, patch).map_err(|e| {
            let kind = if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) {
                KubeCallErrorKind::Conflict
            } else {
                KubeCallErrorKind::Other
            };
            KubeCallError::new(kind, e.to_string())
        })?;
        let mut updated: PodSchedulingContext = serde_json::from_value(value)
            .map_err(|e| KubeCallError::new(KubeCallErrorKind::Other, e.to_string()))?;
        updated.metadata.resource_version = Some(state.bump());
        state.writes.push(Write::PatchContextStatus {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        state.contexts.insert(key, updated.clone());
        Ok(updated)
    }

    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError> {
        let mut state = self.lock();
        state.injected(Operation::PostEvent)?;
        state.events.push(event);
        Ok(())
    }
}

/// [`Caches`] that tests fill directly; they lag behind [`FakeApi`] until refreshed, like a watch.
#[derive(Default)]
pub struct MemoryCaches {
    claims: RwLock<BTreeMap<Key, Arc<ResourceClaim>>>,
    classes: RwLock<BTreeMap<String, Arc<ResourceClass>>>,
    contexts: RwLock<BTreeMap<Key, Arc<PodSchedulingContext>>>,
    pods: RwLock<BTreeMap<Key, Arc<Pod>>>,
}

impl MemoryCaches {
    /// Empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a claim.
    pub fn put_claim(&self, claim: ResourceClaim) {
        self.claims
            .write_or_recover()
            .insert(key_of(&claim), Arc::new(claim));
    }

    /// Removes a claim.
    pub fn remove_claim(&self, namespace: &str, name: &str) {
        self.claims
            .write_or_recover()
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Adds or replaces a class.
    pub fn put_class(&self, class: ResourceClass) {
        self.classes
            .write_or_recover()
            .insert(class.name_any(), Arc::new(class));
    }

    /// Adds or replaces a scheduling context.
    pub fn put_context(&self, context: PodSchedulingContext) {
        self.contexts
            .write_or_recover()
            .insert(key_of(&context), Arc::new(context));
    }

    /// Adds or replaces a pod.
    pub fn put_pod(&self, pod: Pod) {
        self.pods
            .write_or_recover()
            .insert(key_of(&pod), Arc::new(pod));
    }
}

impl Caches for MemoryCaches {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.claims.read_or_recover().get(&key).cloned()
    }

    fn class(&self, name: &str) -> Option<Arc<ResourceClass>> {
        self.classes.read_or_recover().get(name).cloned()
    }

    fn scheduling_context(&self, namespace: &str, name: &str) -> Option<Arc<PodSchedulingContext>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.contexts.read_or_recover().get(&key).cloned()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.pods.read_or_recover().get(&key).cloned()
    }

    fn claims_of_class(&self, class: &str) -> Vec<Arc<ResourceClaim>> {
        self.claims
            .read_or_recover()
            .values()
            .filter(|c| c.spec.resource_class_name == class)
            .cloned()
            .collect()
    }
}
