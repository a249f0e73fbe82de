//! The cache of ResourceClaims the claim watch fills, by namespace and name.
//!
//! A claim the controller has nothing to do with (allocated, by any driver, and neither being
//! deleted nor asked to be deallocated: its sync ends at once) is kept in a compact form of what
//! the syncs read of such a claim: its identity, owners, finalizers, allocation mode, class,
//! driver and `reservedFor`. Its allocation result (resource handles, the nodes it is available
//! on), labels and annotations are dropped: no sync reads them, and none writes such a claim
//! back. Nor are managed fields kept of any claim. A change that gives the controller work
//! again (deletion, `deallocationRequested`, a deallocation) arrives with the whole object,
//! which is then kept whole. A cluster's claims are mostly settled, so a controller's memory
//! grows by a few hundred bytes per claim instead of the whole decoded object.
//!
//! Reads hand out whole `ResourceClaim`s; a compact entry is expanded on each read, with an
//! allocation result that has no fields set. Pure data; no I/O.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSpec,
    ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tokio::sync::watch;

/// Whether the sync of `claim` would end without doing anything, whatever the driver: it is
/// allocated and neither being deleted nor asked to be deallocated.
pub(crate) fn is_settled(claim: &ResourceClaim) -> bool {
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    status.allocation.is_some()
        && status.deallocation_requested != Some(true)
        && claim.metadata.deletion_timestamp.is_none()
}

/// What is kept of a settled claim.
#[derive(Debug)]
struct Settled {
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    generation: Option<i64>,
    owners: Box<[OwnerReference]>,
    finalizers: Box<[Arc<str>]>,
    allocation_mode: Option<Arc<str>>,
    class: Arc<str>,
    driver_name: Option<Arc<str>>,
    reserved_for: Box<[ResourceClaimConsumerReference]>,
}

/// One cached claim.
#[derive(Debug)]
enum Entry {
    Whole(Arc<ResourceClaim>),
    Settled(Box<Settled>),
}

/// Strings many claims share (namespaces, classes, finalizers, driver names), kept once.
#[derive(Debug, Default)]
struct Interner(HashSet<Arc<str>>);

impl Interner {
    fn intern(&mut self, text: &str) -> Arc<str> {
        if let Some(known) = self.0.get(text) {
            return known.clone();
        }
        let new: Arc<str> = Arc::from(text);
        self.0.insert(new.clone());
        new
    }
}

/// Claims by `namespace/name` (neither may contain a slash), each with its namespace.
type Claims = HashMap<Box<str>, (Arc<str>, Entry)>;

#[derive(Debug, Default)]
struct State {
    claims: Claims,
    /// The claims of a listing in progress, which replace `claims` once it is complete.
    relist: Option<Claims>,
    strings: Interner,
}

impl State {
    /// The key and entry of `claim`.
    fn entry(&mut self, claim: &ResourceClaim) -> (Box<str>, (Arc<str>, Entry)) {
        let namespace = self
            .strings
            .intern(claim.metadata.namespace.as_deref().unwrap_or_default());
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let key = key(&namespace, name);
        let entry = if is_settled(claim) {
            Entry::Settled(Box::new(self.settle(claim)))
        } else {
            let mut whole = claim.clone();
            // Managed fields are never read.
            whole.metadata.managed_fields = None;
            Entry::Whole(Arc::new(whole))
        };
        (key, (namespace, entry))
    }

    fn settle(&mut self, claim: &ResourceClaim) -> Settled {
        let meta = &claim.metadata;
        let status = claim.status.as_ref();
        Settled {
            uid: meta.uid.as_deref().map(Box::from),
            resource_version: meta.resource_version.as_deref().map(Box::from),
            generation: meta.generation,
            owners: meta.owner_references.clone().unwrap_or_default().into(),
            finalizers: meta
                .finalizers
                .iter()
                .flatten()
                .map(|f| self.strings.intern(f))
                .collect(),
            allocation_mode: claim
                .spec
                .allocation_mode
                .as_deref()
                .map(|m| self.strings.intern(m)),
            class: self.strings.intern(&claim.spec.resource_class_name),
            driver_name: status
                .and_then(|s| s.driver_name.as_deref())
                .map(|d| self.strings.intern(d)),
            reserved_for: status
                .and_then(|s| s.reserved_for.clone())
                .unwrap_or_default()
                .into(),
        }
    }
}

fn key(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into_boxed_str()
}

/// The claim an entry stands for.
fn expand(key: &str, namespace: &str, entry: &Entry) -> Arc<ResourceClaim> {
    let settled = match entry {
        Entry::Whole(claim) => return claim.clone(),
        Entry::Settled(settled) => settled,
    };
    let name = &key[namespace.len() + 1..];
    let non_empty = |list: Vec<String>| (!list.is_empty()).then_some(list);
    Arc::new(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            uid: settled.uid.as_deref().map(str::to_owned),
            resource_version: settled.resource_version.as_deref().map(str::to_owned),
            generation: settled.generation,
            owner_references: (!settled.owners.is_empty()).then(|| settled.owners.to_vec()),
            finalizers: non_empty(settled.finalizers.iter().map(ToString::to_string).collect()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            allocation_mode: settled.allocation_mode.as_deref().map(str::to_owned),
            parameters_ref: None,
            resource_class_name: settled.class.to_string(),
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult::default()),
            deallocation_requested: None,
            driver_name: settled.driver_name.as_deref().map(str::to_owned),
            reserved_for: (!settled.reserved_for.is_empty()).then(|| settled.reserved_for.to_vec()),
        }),
    })
}

/// The claim cache. Clones share the same cache.
#[derive(Clone, Debug)]
pub struct ClaimStore {
    state: Arc<RwLock<State>>,
    ready: watch::Sender<bool>,
}

impl Default for ClaimStore {
    fn default() -> Self {
        ClaimStore {
            state: Arc::default(),
            ready: watch::channel(false).0,
        }
    }
}

impl ClaimStore {
    /// An empty cache, not ready until its first listing is complete.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The claim `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        let key = key(namespace, name);
        let state = self.read();
        let (namespace, entry) = state.claims.get(&key)?;
        Some(expand(&key, namespace, entry))
    }

    /// Every claim of class `class`.
    pub fn of_class(&self, class: &str) -> Vec<Arc<ResourceClaim>> {
        let state = self.read();
        state
            .claims
            .iter()
            .filter(|(_, (_, entry))| match entry {
                Entry::Whole(claim) => claim.spec.resource_class_name == class,
                Entry::Settled(settled) => *settled.class == *class,
            })
            .map(|(key, (namespace, entry))| expand(key, namespace, entry))
            .collect()
    }

    /// How many claims are cached.
    pub fn len(&self) -> usize {
        self.read().claims.len()
    }

    /// Whether no claim is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds or replaces a claim; during a listing, adds it to the listing.
    pub fn apply(&self, claim: &ResourceClaim) {
        let mut state = self.write();
        let (key, value) = state.entry(claim);
        match state.relist.as_mut() {
            Some(listed) => listed.insert(key, value),
            None => state.claims.insert(key, value),
        };
    }

    /// Removes a claim.
    pub fn delete(&self, claim: &ResourceClaim) {
        let key = key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        self.write().claims.remove(&key);
    }

    /// A listing starts: the claims it applies replace the cached ones when it completes.
    pub fn begin_listing(&self) {
        self.write().relist = Some(HashMap::new());
    }

    /// The listing is complete: its claims are the cache, which is now ready.
    pub fn end_listing(&self) {
        let mut state = self.write();
        if let Some(listed) = state.relist.take() {
            state.claims = listed;
        }
        drop(state);
        self.ready.send_replace(true);
    }

    /// Completes once a first listing is complete.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|ready| *ready).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(name: &str, status: serde_json::Value) -> ResourceClaim {
        let mut claim = json!({
            "apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim",
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "7", "generation": 2,
                "labels": {"app": "a"}, "finalizers": ["gpu.example.com/deletion-protection"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                    "uid": "pod-1", "controller": true}]
            },
            "spec": {"resourceClassName": "gpu", "allocationMode": "WaitForFirstConsumer",
                "parametersRef": {"kind": "Params", "name": "one"}}
        });
        claim["status"] = status;
        serde_json::from_value(claim).unwrap()
    }

    fn allocated() -> serde_json::Value {
        json!({
            "driverName": "gpu.example.com",
            "allocation": {"resourceHandles": [{"driverName": "gpu.example.com", "data": "{}"}],
                "shareable": true},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-1"}]
        })
    }

    #[test]
    fn only_allocated_claims_without_pending_work_settle() {
        assert!(!is_settled(&claim("a", json!({}))));
        assert!(is_settled(&claim("a", allocated())));
        let mut requested = allocated();
        requested["deallocationRequested"] = json!(true);
        assert!(!is_settled(&claim("a", requested)));
        let mut deleting = serde_json::to_value(claim("a", allocated())).unwrap();
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(!is_settled(&serde_json::from_value(deleting).unwrap()));
    }

    #[test]
    fn a_settled_claim_reads_back_with_what_the_syncs_read() {
        let store = ClaimStore::new();
        let original = claim("a", allocated());
        store.apply(&original);
        let read = store.get("ns", "a").unwrap();
        assert_eq!(read.metadata.name.as_deref(), Some("a"));
        assert_eq!(read.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(read.metadata.uid, original.metadata.uid);
        assert_eq!(read.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(read.metadata.generation, Some(2));
        assert_eq!(read.metadata.finalizers, original.metadata.finalizers);
        assert_eq!(
            read.metadata.owner_references,
            original.metadata.owner_references
        );
        assert_eq!(read.spec.allocation_mode, original.spec.allocation_mode);
        assert_eq!(read.spec.resource_class_name, "gpu");
        let status = read.status.as_ref().unwrap();
        let original_status = original.status.as_ref().unwrap();
        assert_eq!(status.driver_name, original_status.driver_name);
        assert_eq!(status.reserved_for, original_status.reserved_for);
        assert!(status.allocation.is_some());
        assert!(is_settled(&read), "it reads as settled as it was");
        // What is dropped.
        assert!(read.metadata.labels.is_none());
        assert!(read.spec.parameters_ref.is_none());
        assert_eq!(status.allocation, Some(AllocationResult::default()));
    }

    #[test]
    fn a_claim_with_work_is_kept_whole_and_replaces_its_settled_entry() {
        let store = ClaimStore::new();
        store.apply(&claim("a", allocated()));
        let mut requested = allocated();
        requested["deallocationRequested"] = json!(true);
        let whole = claim("a", requested);
        store.apply(&whole);
        assert_eq!(*store.get("ns", "a").unwrap(), whole);
        let pending = claim("b", json!({}));
        store.apply(&pending);
        assert_eq!(*store.get("ns", "b").unwrap(), pending);
        assert!(store.get("other", "b").is_none());
        store.delete(&pending);
        assert!(store.get("ns", "b").is_none());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn claims_are_found_by_class_whatever_their_form() {
        let store = ClaimStore::new();
        store.apply(&claim("a", allocated()));
        store.apply(&claim("b", json!({})));
        let mut other = claim("c", json!({}));
        other.spec.resource_class_name = "nic".to_owned();
        store.apply(&other);
        let mut names: Vec<String> = store
            .of_class("gpu")
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a", "b"]);
    }

    #[tokio::test]
    async fn a_listing_replaces_the_cache_when_complete_and_makes_it_ready() {
        let store = ClaimStore::new();
        store.begin_listing();
        store.apply(&claim("a", json!({})));
        assert!(
            store.get("ns", "a").is_none(),
            "not before the listing ends"
        );
        store.end_listing();
        store.wait_until_ready().await;
        assert!(store.get("ns", "a").is_some());
        // A relisting drops what it no longer lists.
        store.begin_listing();
        store.apply(&claim("b", json!({})));
        assert!(store.get("ns", "a").is_some());
        store.end_listing();
        assert!(store.get("ns", "a").is_none());
        assert!(store.get("ns", "b").is_some());
    }
}
