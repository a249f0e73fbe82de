//! The cache of ResourceClaims the claim watch fills, by namespace and name.
//!
//! A claim the controller has nothing to do with (allocated, by any driver, and neither being
//! deleted nor asked to be deallocated: its sync ends at once) is kept in a compact form of what
//! the syncs read of such a claim: its identity, owners, finalizers, allocation mode, class,
//! driver and `reservedFor`, encoded with postcard in one allocation with its key, the strings
//! many claims share kept once. Its allocation result (resource handles, the nodes it is
//! available on), labels and annotations are dropped: no sync reads them, and none writes such
//! a claim back. Nor are managed fields kept of any claim. A change that gives the controller
//! work again (deletion, `deallocationRequested`, a deallocation) arrives with the whole object,
//! which is then kept whole. A cluster's claims are mostly settled, so a controller's memory
//! grows by about a hundred bytes per claim instead of the whole decoded object.
//!
//! Reads hand out whole `ResourceClaim`s; a compact entry is decoded on each read, with an
//! allocation result that has no fields set. Pure data; no I/O.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

use dra_runtime::lock::RwLockExt;

use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSpec,
    ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
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

/// What is kept of a settled claim, with text `S` (`&str` to encode, `String` decoded); the
/// strings many claims share are ids of the store's [`Interner`].
#[derive(Debug, Serialize, Deserialize)]
struct Settled<S> {
    uid: Option<S>,
    resource_version: Option<S>,
    generation: Option<i64>,
    owners: Vec<Owner<S>>,
    finalizers: Vec<u32>,
    allocation_mode: Option<u32>,
    class: u32,
    driver_name: Option<u32>,
    reserved_for: Vec<Consumer<S>>,
}

/// An owner reference of a settled claim.
#[derive(Debug, Serialize, Deserialize)]
struct Owner<S> {
    api_version: u32,
    kind: u32,
    name: S,
    uid: S,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

/// A `reservedFor` entry of a settled claim.
#[derive(Debug, Serialize, Deserialize)]
struct Consumer<S> {
    api_group: Option<u32>,
    resource: u32,
    name: S,
    uid: S,
}

/// A settled claim in one allocation: the length of its key (two bytes, little-endian), its
/// key `namespace/name`, then its [`Settled`] record in postcard. Hashes and compares as its
/// key, so a set of them is a map by key.
#[derive(Debug)]
struct Packed(Box<[u8]>);

impl Packed {
    fn new(key: &str, record: &Settled<&str>) -> Option<Packed> {
        let length = u16::try_from(key.len()).ok()?;
        let mut bytes = Vec::with_capacity(2 + key.len() + 64);
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(key.as_bytes());
        let bytes = postcard::to_extend(record, bytes).ok()?;
        Some(Packed(bytes.into_boxed_slice()))
    }

    fn split(&self) -> (&str, &[u8]) {
        let length = usize::from(u16::from_le_bytes([self.0[0], self.0[1]]));
        let (key, record) = self.0[2..].split_at(length);
        // Written from a `&str` by `new`.
        let key = std::str::from_utf8(key).unwrap_or_default();
        (key, record)
    }

    fn key(&self) -> &str {
        self.split().0
    }

    fn record(&self) -> Settled<String> {
        postcard::from_bytes(self.split().1).expect("a settled record decodes as it was encoded")
    }
}

impl Borrow<str> for Packed {
    fn borrow(&self) -> &str {
        self.key()
    }
}

impl Hash for Packed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for Packed {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Packed {}

/// One cached claim.
#[derive(Debug)]
enum Entry {
    Whole(Arc<ResourceClaim>),
    Settled(Packed),
}

/// Strings many claims share (namespaces, classes, finalizers, driver names, owner kinds),
/// each kept once under a number.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Arc<str>, u32>,
    texts: Vec<Arc<str>>,
}

impl Interner {
    fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        let text: Arc<str> = Arc::from(text);
        self.texts.push(text.clone());
        self.ids.insert(text, id);
        id
    }

    fn text(&self, id: u32) -> &str {
        self.texts.get(id as usize).map_or("", |text| text)
    }
}

/// Claims by `namespace/name` (neither may contain a slash): settled ones packed, the others
/// whole.
#[derive(Debug, Default)]
struct Claims {
    whole: HashMap<Box<str>, Arc<ResourceClaim>>,
    settled: HashSet<Packed>,
}

impl Claims {
    fn insert(&mut self, key: Box<str>, entry: Entry) {
        match entry {
            Entry::Whole(claim) => {
                self.settled.remove(&*key);
                self.whole.insert(key, claim);
            }
            Entry::Settled(packed) => {
                self.whole.remove(&key);
                self.settled.replace(packed);
            }
        }
    }

    fn remove(&mut self, key: &str) {
        self.whole.remove(key);
        self.settled.remove(key);
    }

    fn len(&self) -> usize {
        self.whole.len() + self.settled.len()
    }
}

#[derive(Debug, Default)]
struct State {
    claims: Claims,
    /// The claims of a listing in progress, which replace `claims` once it is complete.
    relist: Option<Claims>,
    strings: Interner,
}

impl State {
    /// The key and entry of `claim`.
    fn entry(&mut self, claim: &ResourceClaim) -> (Box<str>, Entry) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let key = key(namespace, name);
        if is_settled(claim) {
            if let Some(packed) = Packed::new(&key, &self.settle(claim)) {
                return (key, Entry::Settled(packed));
            }
        }
        let mut whole = claim.clone();
        // Managed fields are never read.
        whole.metadata.managed_fields = None;
        (key, Entry::Whole(Arc::new(whole)))
    }

    fn settle<'c>(&mut self, claim: &'c ResourceClaim) -> Settled<&'c str> {
        let meta = &claim.metadata;
        let status = claim.status.as_ref();
        let strings = &mut self.strings;
        Settled {
            uid: meta.uid.as_deref(),
            resource_version: meta.resource_version.as_deref(),
            generation: meta.generation,
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|owner| Owner {
                    api_version: strings.intern(&owner.api_version),
                    kind: strings.intern(&owner.kind),
                    name: owner.name.as_str(),
                    uid: owner.uid.as_str(),
                    controller: owner.controller,
                    block_owner_deletion: owner.block_owner_deletion,
                })
                .collect(),
            finalizers: meta
                .finalizers
                .iter()
                .flatten()
                .map(|f| strings.intern(f))
                .collect(),
            allocation_mode: claim
                .spec
                .allocation_mode
                .as_deref()
                .map(|m| strings.intern(m)),
            class: strings.intern(&claim.spec.resource_class_name),
            driver_name: status
                .and_then(|s| s.driver_name.as_deref())
                .map(|d| strings.intern(d)),
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .map(|consumer| Consumer {
                    api_group: consumer.api_group.as_deref().map(|g| strings.intern(g)),
                    resource: strings.intern(&consumer.resource),
                    name: consumer.name.as_str(),
                    uid: consumer.uid.as_str(),
                })
                .collect(),
        }
    }

    /// The claim `key`.
    fn get(&self, key: &str) -> Option<Arc<ResourceClaim>> {
        if let Some(claim) = self.claims.whole.get(key) {
            return Some(claim.clone());
        }
        let packed = self.claims.settled.get(key)?;
        Some(self.expand(key, &packed.record()))
    }

    /// The claim a settled record stands for.
    fn expand(&self, key: &str, settled: &Settled<String>) -> Arc<ResourceClaim> {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let text = |id: u32| self.strings.text(id).to_owned();
        let non_empty = |list: Vec<String>| (!list.is_empty()).then_some(list);
        let owners: Vec<OwnerReference> = settled
            .owners
            .iter()
            .map(|owner| OwnerReference {
                api_version: text(owner.api_version),
                kind: text(owner.kind),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                controller: owner.controller,
                block_owner_deletion: owner.block_owner_deletion,
            })
            .collect();
        let reserved_for: Vec<ResourceClaimConsumerReference> = settled
            .reserved_for
            .iter()
            .map(|consumer| ResourceClaimConsumerReference {
                api_group: consumer.api_group.map(text),
                resource: text(consumer.resource),
                name: consumer.name.clone(),
                uid: consumer.uid.clone(),
            })
            .collect();
        Arc::new(ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                uid: settled.uid.clone(),
                resource_version: settled.resource_version.clone(),
                generation: settled.generation,
                owner_references: (!owners.is_empty()).then_some(owners),
                finalizers: non_empty(settled.finalizers.iter().map(|&f| text(f)).collect()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimSpec {
                allocation_mode: settled.allocation_mode.map(text),
                parameters_ref: None,
                resource_class_name: text(settled.class),
            },
            status: Some(ResourceClaimStatus {
                allocation: Some(AllocationResult::default()),
                deallocation_requested: None,
                driver_name: settled.driver_name.map(text),
                reserved_for: (!reserved_for.is_empty()).then_some(reserved_for),
            }),
        })
    }
}

fn key(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into_boxed_str()
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
        self.state.read_or_recover()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write_or_recover()
    }

    /// The claim `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.read().get(&key(namespace, name))
    }

    /// Every claim of class `class`.
    pub fn of_class(&self, class: &str) -> Vec<Arc<ResourceClaim>> {
        let state = self.read();
        let whole = state
            .claims
            .whole
            .values()
            .filter(|claim| claim.spec.resource_class_name == class)
            .cloned();
        let settled = state.claims.settled.iter().filter_map(|packed| {
            let record = packed.record();
            (state.strings.text(record.class) == class).then(|| state.expand(packed.key(), &record))
        });
        whole.chain(settled).collect()
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
        let (key, entry) = state.entry(claim);
        match state.relist.as_mut() {
            Some(listed) => listed.insert(key, entry),
            None => state.claims.insert(key, entry),
        }
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
        self.write().relist = Some(Claims::default());
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
    fn a_settled_claim_is_replaced_and_deleted_by_key() {
        let store = ClaimStore::new();
        store.apply(&claim("a", allocated()));
        let mut moved = allocated();
        moved["reservedFor"] = json!([{"apiGroup": "batch", "resource": "jobs", "name": "j",
            "uid": "job-1"}]);
        let mut updated = claim("a", moved);
        updated.metadata.resource_version = Some("8".to_owned());
        store.apply(&updated);
        assert_eq!(store.len(), 1);
        let read = store.get("ns", "a").unwrap();
        assert_eq!(read.metadata.resource_version.as_deref(), Some("8"));
        assert_eq!(
            read.status.as_ref().unwrap().reserved_for,
            updated.status.as_ref().unwrap().reserved_for
        );
        // Another namespace's claim of the same name is another entry.
        let mut elsewhere = claim("a", allocated());
        elsewhere.metadata.namespace = Some("other".to_owned());
        store.apply(&elsewhere);
        assert_eq!(store.len(), 2);
        store.delete(&updated);
        assert!(store.get("ns", "a").is_none());
        assert_eq!(
            store
                .get("other", "a")
                .unwrap()
                .metadata
                .namespace
                .as_deref(),
            Some("other")
        );
    }

    #[test]
    fn a_claim_whose_key_is_too_long_to_pack_is_kept_whole() {
        let store = ClaimStore::new();
        let long = claim(&"n".repeat(70_000), allocated());
        store.apply(&long);
        let read = store.get("ns", &"n".repeat(70_000)).unwrap();
        assert_eq!(
            read.spec.parameters_ref, long.spec.parameters_ref,
            "kept whole"
        );
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
