//! Indexes the actors keep beside their informer stores, updated on each change instead of
//! recomputed over the whole store at every sync (which made a cycle cost grow with the cluster):
//!
//! - [`NodeLoad`]: pods per node as the schedulers' spreading counts them (pods bound there, and on
//!   1.30 the nodes their scheduling contexts selected);
//! - [`OwnedClaims`]: the claims a pod controls, by pod UID, as upstream's resourceclaim controller
//!   indexes them to adopt a claim it created before a crash instead of creating a second one;
//! - [`ClaimUsers`]: the pods that use a claim, so that a claim change wakes only them;
//! - [`AssumedPods`]: the pods a scheduler bound that its informer does not show bound yet;
//! - [`OwnWrites`]: the version of a scheduler's last write of each object, to tell a copy that
//!   predates it.
//!
//! Plain data behind a mutex (read beside the informer stores); must not do I/O.

use dra_runtime::lock::LockExt;
use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{ObjectRef, Store};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::claims::owning_pod_of;
use super::ObjectKey;

/// What put a pod on a node for [`NodeLoad`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Placement {
    /// The pod is bound to the node (`spec.nodeName`).
    Bound,
    /// The pod's scheduling context selected the node (`spec.selectedNode`).
    Selected,
}

#[derive(Debug, Default)]
struct LoadState {
    placed: HashMap<(Placement, ObjectKey), String>,
    per_node: HashMap<String, usize>,
}

impl LoadState {
    fn remove(&mut self, entry: &(Placement, ObjectKey)) {
        if let Some(node) = self.placed.remove(entry) {
            if let Some(count) = self.per_node.get_mut(&node) {
                *count -= 1;
                if *count == 0 {
                    self.per_node.remove(&node);
                }
            }
        }
    }

    fn place(&mut self, placement: Placement, key: ObjectKey, node: Option<&str>) {
        let entry = (placement, key);
        match node.filter(|n| !n.is_empty()) {
            Some(node) => {
                if self.placed.get(&entry).is_some_and(|n| n == node) {
                    return;
                }
                self.remove(&entry);
                *self.per_node.entry(node.to_owned()).or_insert(0) += 1;
                self.placed.insert(entry, node.to_owned());
            }
            None => self.remove(&entry),
        }
    }
}

/// Pods per node, counted once per pod and placement.
#[derive(Debug, Default)]
pub(crate) struct NodeLoad {
    state: Mutex<LoadState>,
}

impl NodeLoad {
    /// No pod on any node.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records that `key` is placed on `node` by `placement` (`None` or empty: on no node).
    pub(crate) fn place(&self, placement: Placement, key: ObjectKey, node: Option<&str>) {
        self.state.lock_or_recover().place(placement, key, node);
    }

    /// Replaces every entry of `placement` with `entries` (after a relist, which reports no
    /// deletions missed while the watch was down).
    pub(crate) fn reset(
        &self,
        placement: Placement,
        entries: impl IntoIterator<Item = (ObjectKey, Option<String>)>,
    ) {
        let mut state = self.state.lock_or_recover();
        let outdated: Vec<_> = state
            .placed
            .keys()
            .filter(|(p, _)| *p == placement)
            .cloned()
            .collect();
        for entry in &outdated {
            state.remove(entry);
        }
        for (key, node) in entries {
            state.place(placement, key, node.as_deref());
        }
    }

    /// The count of pods on `node`.
    pub(crate) fn count(&self, node: &str) -> usize {
        self.state
            .lock_or_recover()
            .per_node
            .get(node)
            .copied()
            .unwrap_or(0)
    }

    /// The count of every node with at least one pod.
    pub(crate) fn counts(&self) -> HashMap<String, usize> {
        self.state.lock_or_recover().per_node.clone()
    }
}

/// A relation from keys to values, kept with its reverse (the keys of each value), so that both
/// directions are a lookup.
#[derive(Debug)]
struct Reverse<K, V> {
    values_of: HashMap<K, Vec<V>>,
    keys_of: HashMap<V, HashSet<K>>,
}

impl<K, V> Default for Reverse<K, V> {
    fn default() -> Self {
        Self {
            values_of: HashMap::new(),
            keys_of: HashMap::new(),
        }
    }
}

impl<K: Clone + Eq + Hash, V: Clone + Eq + Hash> Reverse<K, V> {
    fn remove(&mut self, key: &K) {
        for value in self.values_of.remove(key).unwrap_or_default() {
            if let Some(keys) = self.keys_of.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.keys_of.remove(&value);
                }
            }
        }
    }

    /// Relates `key` to `values` only (none: forgets the key).
    fn set(&mut self, key: K, values: Vec<V>) {
        if self.values_of.get(&key) == Some(&values) {
            return;
        }
        self.remove(&key);
        if values.is_empty() {
            return;
        }
        for value in &values {
            self.keys_of
                .entry(value.clone())
                .or_default()
                .insert(key.clone());
        }
        self.values_of.insert(key, values);
    }

    fn keys<Q: Eq + Hash + ?Sized>(&self, value: &Q) -> Vec<K>
    where
        V: Borrow<Q>,
    {
        self.keys_of
            .get(value)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Claims by the UID of the pod that controls them.
#[derive(Debug, Default)]
pub(crate) struct OwnedClaims {
    /// Claim -> the UID of its controlling pod (at most one).
    state: Mutex<Reverse<ObjectKey, String>>,
}

/// The UID of the pod that controls the object of `meta`, as the relation's values.
fn owner(meta: &ObjectMeta) -> Vec<String> {
    owning_pod_of(meta)
        .map(|(_, uid)| uid)
        .into_iter()
        .collect()
}

impl OwnedClaims {
    /// No claim known.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records a created or changed claim.
    pub(crate) fn applied(&self, meta: &ObjectMeta) {
        self.state
            .lock_or_recover()
            .set(ObjectKey::of(meta), owner(meta));
    }

    /// Forgets a deleted claim.
    pub(crate) fn deleted(&self, meta: &ObjectMeta) {
        self.state.lock_or_recover().remove(&ObjectKey::of(meta));
    }

    /// Replaces the index with the claims of a relist.
    pub(crate) fn reset<'a>(&self, claims: impl IntoIterator<Item = &'a ObjectMeta>) {
        let mut state = self.state.lock_or_recover();
        *state = Reverse::default();
        for meta in claims {
            state.set(ObjectKey::of(meta), owner(meta));
        }
    }

    /// The claims controlled by the pod with this UID.
    pub(crate) fn of_pod(&self, pod_uid: &str) -> Vec<ObjectKey> {
        self.state.lock_or_recover().keys(pod_uid)
    }

    /// The first claim of `store` controlled by the pod with this UID that `matches` accepts.
    pub(crate) fn find<K>(
        &self,
        pod_uid: &str,
        store: &Store<K>,
        matches: impl Fn(&K) -> bool,
    ) -> Option<Arc<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone,
    {
        self.of_pod(pod_uid).into_iter().find_map(|key| {
            let claim = store.get(&ObjectRef::new(&key.name).within(&key.namespace))?;
            matches(&claim).then_some(claim)
        })
    }
}

/// The pods that use each claim (by the claim names they resolve to), as upstream's pod index by
/// claim: a claim change reaches only its pods.
#[derive(Debug, Default)]
pub(crate) struct ClaimUsers {
    /// Pod -> the claims it uses.
    state: Mutex<Reverse<ObjectKey, ObjectKey>>,
}

impl ClaimUsers {
    /// No pod known.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records that `pod` uses `claims` (none: forgets the pod).
    pub(crate) fn set(&self, pod: ObjectKey, claims: Vec<ObjectKey>) {
        self.state.lock_or_recover().set(pod, claims);
    }

    /// Forgets a pod.
    pub(crate) fn remove(&self, pod: &ObjectKey) {
        self.state.lock_or_recover().remove(pod);
    }

    /// Replaces the index with the pods of a relist.
    pub(crate) fn reset(&self, pods: impl IntoIterator<Item = (ObjectKey, Vec<ObjectKey>)>) {
        let mut state = self.state.lock_or_recover();
        *state = Reverse::default();
        for (pod, claims) in pods {
            state.set(pod, claims);
        }
    }

    /// The pods that use `claim`.
    pub(crate) fn of(&self, claim: &ObjectKey) -> Vec<ObjectKey> {
        self.state.lock_or_recover().keys(claim)
    }
}

/// The pods a scheduler bound whose binding its informer has not shown yet, with their UIDs:
/// upstream's assumed pods, which `skipPodSchedule` gives no further scheduling cycle (a change
/// that arrived during the binding would otherwise run one on the stale cached pod and bind it
/// again).
#[derive(Debug, Default)]
pub(crate) struct AssumedPods {
    state: Mutex<HashMap<ObjectKey, String>>,
}

impl AssumedPods {
    /// No pod assumed.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records the pod `key` with `uid` as bound, unless `still_waiting` (asked under the lock,
    /// after the bind) finds that the informer shows the binding already.
    pub(crate) fn assume(&self, key: &ObjectKey, uid: &str, still_waiting: impl FnOnce() -> bool) {
        let mut state = self.state.lock_or_recover();
        if still_waiting() {
            state.insert(key.clone(), uid.to_owned());
        }
    }

    /// Whether the pod `key` with `uid` was bound by this scheduler.
    pub(crate) fn is_assumed(&self, key: &ObjectKey, uid: &str) -> bool {
        self.state
            .lock_or_recover()
            .get(key)
            .is_some_and(|assumed| assumed == uid)
    }

    /// Forgets the pod `key`: the informer shows it bound, or it is gone.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.state.lock_or_recover().remove(key);
    }

    /// Keeps only the pods that `still_waiting` accepts (after a relist).
    pub(crate) fn retain(&self, mut still_waiting: impl FnMut(&ObjectKey, &str) -> bool) {
        self.state
            .lock_or_recover()
            .retain(|key, uid| still_waiting(key, uid));
    }
}

/// The objects (claims) whose status a scheduler wrote, with the resourceVersion of its last
/// write. A scheduling cycle decides on a snapshot of the informer; a claim whose copy in that
/// snapshot is older than this scheduler's own last write of it (its deallocation request, most
/// often) is read live before the cycle relies on it, as upstream's claim assume cache would show
/// the write. The check is against the copy the decision used, not against the informer now: the
/// informer may catch up between the snapshot and the check, and the decision would still rest
/// on the older copy. An entry lives as long as its object.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    state: Mutex<HashMap<ObjectKey, u64>>,
}

/// The resourceVersion of an object as a number (the simulator's are); `None` without one.
pub(crate) fn version_of(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

impl OwnWrites {
    /// No write recorded.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records this scheduler's write of `key` that produced version `written`. A version that is
    /// not a number counts as later than any copy: the object is read live until it is gone.
    pub(crate) fn wrote(&self, key: &ObjectKey, written: Option<u64>) {
        let written = written.unwrap_or(u64::MAX);
        let mut state = self.state.lock_or_recover();
        let at = state.entry(key.clone()).or_insert(written);
        *at = (*at).max(written);
    }

    /// Whether a copy of `key` at version `copy` predates this scheduler's last write of it.
    pub(crate) fn newer_than(&self, key: &ObjectKey, copy: Option<u64>) -> bool {
        self.state
            .lock_or_recover()
            .get(key)
            .is_some_and(|at| copy.is_none_or(|copy| copy < *at))
    }

    /// Forgets `key` (deleted).
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.state.lock_or_recover().remove(key);
    }

    /// After a relist: forgets the writes of objects that `exists` no longer finds.
    pub(crate) fn retain(&self, mut exists: impl FnMut(&ObjectKey) -> bool) {
        self.state.lock_or_recover().retain(|key, _| exists(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn an_assumed_pod_is_known_by_key_and_uid_until_forgotten() {
        let assumed = AssumedPods::new();
        assumed.assume(&key("a"), "uid-a", || true);
        assumed.assume(&key("b"), "uid-b", || false);
        assert!(assumed.is_assumed(&key("a"), "uid-a"));
        assert!(
            !assumed.is_assumed(&key("a"), "uid-other"),
            "a new pod of the same name is not the one bound"
        );
        assert!(
            !assumed.is_assumed(&key("b"), "uid-b"),
            "a pod the informer shows bound already is not assumed"
        );
        assumed.assume(&key("c"), "uid-c", || true);
        assumed.retain(|key, _| key.name != "c");
        assert!(!assumed.is_assumed(&key("c"), "uid-c"));
        assumed.forget(&key("a"));
        assert!(!assumed.is_assumed(&key("a"), "uid-a"));
    }

    #[test]
    fn a_copy_older_than_the_last_own_write_is_behind_whatever_the_informer_shows_since() {
        let writes = OwnWrites::new();
        writes.wrote(&key("a"), Some(10));
        assert!(writes.newer_than(&key("a"), Some(9)));
        assert!(!writes.newer_than(&key("a"), Some(10)));
        assert!(
            writes.newer_than(&key("a"), Some(9)),
            "a decision on the older copy is behind even after a newer copy was seen"
        );
        assert!(!writes.newer_than(&key("b"), Some(1)), "never written");
        writes.wrote(&key("c"), Some(30));
        writes.wrote(&key("c"), Some(25));
        assert!(
            writes.newer_than(&key("c"), Some(29)),
            "the last write counts"
        );
        writes.wrote(&key("d"), None);
        assert!(
            writes.newer_than(&key("d"), Some(1_000_000)),
            "a version that is not a number is never shown"
        );
        assert!(
            writes.newer_than(&key("a"), None),
            "a copy without a version"
        );
        writes.forget(&key("d"));
        assert!(!writes.newer_than(&key("d"), Some(1)));
        writes.retain(|key| key.name == "c");
        assert!(!writes.newer_than(&key("a"), Some(1)), "gone at the relist");
        assert!(writes.newer_than(&key("c"), Some(1)));
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("default", name)
    }

    #[test]
    fn a_pod_counts_once_per_placement_and_moves_with_its_node() {
        let load = NodeLoad::new();
        load.place(Placement::Selected, key("a"), Some("n1"));
        load.place(Placement::Selected, key("a"), Some("n1"));
        load.place(Placement::Bound, key("a"), Some("n1"));
        load.place(Placement::Selected, key("b"), Some("n1"));
        assert_eq!(load.counts()["n1"], 3);
        load.place(Placement::Selected, key("b"), Some("n2"));
        assert_eq!(load.counts()["n1"], 2);
        assert_eq!(load.counts()["n2"], 1);
        load.place(Placement::Selected, key("a"), None);
        load.place(Placement::Selected, key("b"), Some(""));
        assert_eq!(
            load.counts().get("n2"),
            None,
            "a node without pods is left out"
        );
        assert_eq!(load.counts()["n1"], 1);
        assert_eq!(load.count("n1"), 1);
        assert_eq!(load.count("n9"), 0);
    }

    #[test]
    fn reset_replaces_only_its_own_placement() {
        let load = NodeLoad::new();
        load.place(Placement::Bound, key("a"), Some("n1"));
        load.place(Placement::Selected, key("b"), Some("n1"));
        load.place(Placement::Bound, key("gone"), Some("n2"));
        load.reset(
            Placement::Bound,
            [(key("a"), Some("n1".to_owned())), (key("c"), None)],
        );
        let counts = load.counts();
        assert_eq!(counts["n1"], 2);
        assert_eq!(
            counts.get("n2"),
            None,
            "a pod missing from the relist is dropped"
        );
    }

    fn claim(name: &str, owner: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: "pod".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn claims_are_found_by_their_controlling_pod_until_deleted() {
        let owned = OwnedClaims::new();
        owned.applied(&claim("a", Some("uid-1")));
        owned.applied(&claim("b", Some("uid-1")));
        owned.applied(&claim("c", Some("uid-2")));
        owned.applied(&claim("free", None));
        let mut of_one = owned.of_pod("uid-1");
        of_one.sort();
        assert_eq!(of_one, vec![key("a"), key("b")]);
        owned.deleted(&claim("a", Some("uid-1")));
        assert_eq!(owned.of_pod("uid-1"), vec![key("b")]);
        // An owner reference that changes moves the claim.
        owned.applied(&claim("b", Some("uid-2")));
        assert!(owned.of_pod("uid-1").is_empty());
        assert_eq!(owned.of_pod("uid-2").len(), 2);
        owned.reset([&claim("c", Some("uid-2"))]);
        assert_eq!(owned.of_pod("uid-2"), vec![key("c")]);
    }

    #[test]
    fn a_claim_change_reaches_the_pods_that_use_it() {
        let users = ClaimUsers::new();
        users.set(key("p1"), vec![key("c1"), key("c2")]);
        users.set(key("p2"), vec![key("c2")]);
        let mut of_c2 = users.of(&key("c2"));
        of_c2.sort();
        assert_eq!(of_c2, vec![key("p1"), key("p2")]);
        users.set(key("p1"), vec![key("c1")]);
        assert_eq!(users.of(&key("c2")), vec![key("p2")]);
        users.remove(&key("p2"));
        assert!(users.of(&key("c2")).is_empty());
        users.set(key("p1"), Vec::new());
        assert!(users.of(&key("c1")).is_empty());
        users.reset([(key("p3"), vec![key("c3")])]);
        assert_eq!(users.of(&key("c3")), vec![key("p3")]);
    }
}
