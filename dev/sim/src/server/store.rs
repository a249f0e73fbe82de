//! The object store: every object as a `serde_json::Value`, one global resourceVersion counter, the
//! retained event history for watch resumption and the broadcast channel that fans events out to
//! watchers.
//!
//! The store is behind a sync mutex held only for the duration of one read or one read-modify-write;
//! it never awaits. It knows nothing about HTTP, selectors or validation rules: callers pass closures
//! that compute the new object from the current one.

use dra_runtime::lock::{LockExt, RwLockExt};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::error::{Result, StatusError};
use super::resources::Registry;

/// Capacity of the broadcast channel; a watcher that falls this far behind is ended with 410.
const BROADCAST_CAPACITY: usize = 65_536;

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// One committed change, as retained in the history and broadcast to watchers.
#[derive(Debug)]
pub struct StoredEvent {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Event type.
    pub kind: EventType,
    /// Storage key of the resource (`group/plural`).
    pub key: Arc<str>,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Object after the change (for deletions: the last state, stamped with the deletion revision).
    pub object: Arc<Value>,
    /// Object before the change, if any (lets selector-filtered watches detect objects leaving a selection).
    pub old: Option<Arc<Value>>,
    /// `object` serialized as JSON, by the first watcher that sends it as stored; the others
    /// reuse it. Dropped once the event is no longer among the most recent
    /// [`ENCODINGS_KEPT`], so that the history does not hold a second copy of every object.
    encoded: Mutex<Option<Bytes>>,
}

/// How many of the most recent events keep their JSON encoding for the watchers still to send
/// them.
const ENCODINGS_KEPT: usize = 4096;

impl StoredEvent {
    /// `object` as JSON, encoded by `encode` once while the event is recent.
    pub fn encoded(&self, encode: impl FnOnce(&Value) -> Bytes) -> Bytes {
        let mut cached = self.encoded.lock_or_recover();
        cached.get_or_insert_with(|| encode(&self.object)).clone()
    }

    fn forget_encoding(&self) {
        self.encoded.lock_or_recover().take();
    }
}

/// What a read-modify-write closure decided.
#[derive(Debug)]
pub enum Change {
    /// Store this new object (resourceVersion is stamped by the store).
    Put(Value),
    /// Remove the object.
    Remove,
    /// Leave the object as it is.
    Keep,
}

/// The outcome of a write.
#[derive(Debug, Clone)]
pub enum Written {
    /// Stored (created or updated) with a new resourceVersion.
    Stored(Arc<Value>),
    /// Removed; the last state stamped with the deletion revision.
    Removed(Arc<Value>),
    /// Nothing changed; the current object.
    Unchanged(Arc<Value>),
}

impl Written {
    /// The object the outcome carries.
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Self::Stored(o) | Self::Removed(o) | Self::Unchanged(o) => o,
        }
    }
}

type ObjectMap = BTreeMap<(String, String), Arc<Value>>;

struct Inner {
    rv: u64,
    objects: HashMap<String, ObjectMap>,
    history: VecDeque<Arc<StoredEvent>>,
    history_limit: usize,
    compacted_rv: u64,
}

/// The object store shared by all handlers.
pub struct Store {
    inner: Mutex<Inner>,
    registry: RwLock<Arc<Registry>>,
    events: broadcast::Sender<Arc<StoredEvent>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.current_rv())
            .finish_non_exhaustive()
    }
}

/// A watch starting point resolved under the store lock.
pub struct Subscription {
    /// Events to replay before the live stream (history after the requested version).
    pub replay: Vec<Arc<StoredEvent>>,
    /// Current objects to send as synthetic ADDED events (watch without a resourceVersion).
    pub snapshot: Vec<Arc<Value>>,
    /// The resourceVersion the subscription starts at.
    pub rv: u64,
    /// Live events after `rv`.
    pub receiver: broadcast::Receiver<Arc<StoredEvent>>,
}

/// Where a page of a list starts and at which revision it reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageRange<'a> {
    /// Only objects of this namespace.
    pub namespace: Option<&'a str>,
    /// Only objects after this `(namespace, name)` key.
    pub after: Option<&'a (String, String)>,
    /// The revision to read at; `None` for the present.
    pub rv: Option<u64>,
    /// Whether the page counts every accepted object after it, or only finds whether there
    /// is one (a count costs a walk over the rest of the collection).
    pub count_rest: bool,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Page {
    /// The objects of the page, in key order.
    pub items: Vec<Arc<Value>>,
    /// Objects after the page that the filter accepts: all of them when the range asked for
    /// a count, else 1 when there is any.
    pub rest: usize,
    /// The revision the page was read at.
    pub rv: u64,
}

type Key = (String, String);

/// The present objects with the keys of `undone` replaced by their older state (`None`: not
/// there yet), in key order.
fn merged<'m>(
    present: impl Iterator<Item = (&'m Key, &'m Arc<Value>)>,
    undone: impl Iterator<Item = (&'m Key, &'m Option<Arc<Value>>)>,
) -> impl Iterator<Item = (&'m Key, &'m Arc<Value>)> {
    let mut present = present.peekable();
    let mut undone = undone.peekable();
    std::iter::from_fn(move || loop {
        let order = match (present.peek(), undone.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((p, _)), Some((u, _))) => p.cmp(u),
        };
        match order {
            std::cmp::Ordering::Less => return present.next(),
            std::cmp::Ordering::Equal => {
                present.next();
            }
            std::cmp::Ordering::Greater => {}
        }
        if let Some((key, Some(object))) = undone.next() {
            return Some((key, object));
        }
    })
}

impl Store {
    /// An empty store retaining `history_limit` events for watch resumption.
    pub fn new(registry: Registry, history_limit: usize) -> Self {
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted_rv: 1,
            }),
            registry: RwLock::new(Arc::new(registry)),
            events,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock_or_recover()
    }

    /// A snapshot of the resource registry, shared until the next change (every request reads
    /// it, and CRDs change it rarely).
    pub fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.registry.read_or_recover())
    }

    /// Changes the registry (CRD establishment and removal); snapshots taken before keep the
    /// registry as it was.
    pub fn update_registry(&self, f: impl FnOnce(&mut Registry)) {
        let mut reg = self.registry.write_or_recover();
        f(Arc::make_mut(&mut reg));
    }

    /// The current (latest committed) resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, key: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let inner = self.lock();
        inner
            .objects
            .get(key)?
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Whether an object exists.
    pub fn exists(&self, key: &str, namespace: &str, name: &str) -> bool {
        self.get(key, namespace, name).is_some()
    }

    /// Objects of a resource in key order, optionally in one namespace, starting after `after`
    /// (`(namespace, name)`), together with the current resourceVersion.
    pub fn list(
        &self,
        key: &str,
        namespace: Option<&str>,
        after: Option<&(String, String)>,
    ) -> (Vec<Arc<Value>>, u64) {
        use std::ops::Bound;
        let inner = self.lock();
        let Some(map) = inner.objects.get(key) else {
            return (Vec::new(), inner.rv);
        };
        let lower = match (after, namespace) {
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let items = map
            .range((lower, Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// One page of a list: up to `limit` objects that `keep` accepts, in key order, optionally
    /// in one namespace, starting after `after` (`(namespace, name)`), as they were at
    /// resourceVersion `rv` (`None` or a version at or past the current one: the present). The
    /// retained events after `rv` are undone on the keys they touched only, so a page costs its
    /// own objects plus a count of the rest, not a copy of the collection. `None` when `rv` is
    /// older than the retained history (the caller answers 410).
    pub fn list_page(
        &self,
        key: &str,
        range: PageRange<'_>,
        limit: Option<usize>,
        keep: impl Fn(&Value) -> bool,
    ) -> Option<Page> {
        use std::ops::Bound;
        let inner = self.lock();
        let rv = range.rv.filter(|rv| *rv < inner.rv);
        if rv.is_some_and(|rv| rv < inner.compacted_rv) {
            return None;
        }
        // The state at `rv` of every key changed since: the oldest undo wins.
        let mut undone: BTreeMap<(String, String), Option<Arc<Value>>> = BTreeMap::new();
        if let Some(rv) = rv {
            for event in inner.history.iter().rev().take_while(|e| e.rv > rv) {
                if *event.key != *key {
                    continue;
                }
                let name = event.object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let before = match event.kind {
                    EventType::Added => None,
                    EventType::Modified | EventType::Deleted => event.old.clone(),
                };
                undone.insert((event.namespace.clone(), name), before);
            }
        }
        let lower = match (range.after, range.namespace) {
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let empty = ObjectMap::new();
        let present = inner.objects.get(key).unwrap_or(&empty);
        let mut objects = merged(
            present.range((lower.clone(), Bound::Unbounded)),
            undone.range((lower, Bound::Unbounded)),
        )
        .take_while(|((ns, _), _)| range.namespace.is_none_or(|want| want == ns))
        .filter(|(_, object)| keep(object));
        let items: Vec<Arc<Value>> = objects
            .by_ref()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(_, object)| object.clone())
            .collect();
        let rest = if range.count_rest {
            objects.count()
        } else {
            usize::from(objects.next().is_some())
        };
        Some(Page {
            items,
            rest,
            rv: rv.unwrap_or(inner.rv),
        })
    }

    /// Storage keys that currently hold objects in `namespace`.
    pub fn keys_with_objects_in(&self, namespace: &str) -> Vec<String> {
        let inner = self.lock();
        inner
            .objects
            .iter()
            .filter(|(_, m)| m.keys().any(|(ns, _)| ns == namespace))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Creates an object; `AlreadyExists` if the name is taken. `make` receives the new
    /// resourceVersion and returns the object to store (so generated fields can depend on it).
    pub fn create(
        &self,
        key: &str,
        namespace: &str,
        name: &str,
        group: &str,
        plural: &str,
        object: Value,
    ) -> Result<Arc<Value>> {
        let mut inner = self.lock();
        let map = inner.objects.entry(key.to_string()).or_default();
        if map.contains_key(&(namespace.to_string(), name.to_string())) {
            return Err(StatusError::already_exists(plural, group, name));
        }
        let rv = inner.rv + 1;
        let stored = Arc::new(stamp(object, rv));
        inner
            .objects
            .entry(key.to_string())
            .or_default()
            .insert((namespace.to_string(), name.to_string()), stored.clone());
        self.commit(
            &mut inner,
            rv,
            EventType::Added,
            key,
            namespace,
            stored.clone(),
            None,
        );
        Ok(stored)
    }

    /// Read-modify-write of one existing object; `NotFound` if it does not exist. The closure runs
    /// under the store lock and must be CPU-only.
    pub fn modify(
        &self,
        key: &str,
        namespace: &str,
        name: &str,
        not_found: impl FnOnce() -> StatusError,
        f: impl FnOnce(&Arc<Value>) -> Result<Change>,
    ) -> Result<Written> {
        let mut inner = self.lock();
        let map_key = (namespace.to_string(), name.to_string());
        let current = inner
            .objects
            .get(key)
            .and_then(|m| m.get(&map_key))
            .cloned()
            .ok_or_else(not_found)?;
        match f(&current)? {
            Change::Keep => Ok(Written::Unchanged(current)),
            Change::Put(mut new) => {
                if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert(
                        "resourceVersion".into(),
                        current["metadata"]["resourceVersion"].clone(),
                    );
                }
                if new == *current {
                    return Ok(Written::Unchanged(current));
                }
                let rv = inner.rv + 1;
                let stored = Arc::new(stamp(new, rv));
                inner
                    .objects
                    .entry(key.to_string())
                    .or_default()
                    .insert(map_key, stored.clone());
                self.commit(
                    &mut inner,
                    rv,
                    EventType::Modified,
                    key,
                    namespace,
                    stored.clone(),
                    Some(current),
                );
                Ok(Written::Stored(stored))
            }
            Change::Remove => {
                let rv = inner.rv + 1;
                if let Some(m) = inner.objects.get_mut(key) {
                    m.remove(&map_key);
                }
                let last = Arc::new(stamp((*current).clone(), rv));
                self.commit(
                    &mut inner,
                    rv,
                    EventType::Deleted,
                    key,
                    namespace,
                    last.clone(),
                    Some(current),
                );
                Ok(Written::Removed(last))
            }
        }
    }

    /// Removes every object of a resource (used when its CRD goes away); returns how many.
    pub fn remove_all(&self, key: &str) -> usize {
        let mut inner = self.lock();
        let Some(map) = inner.objects.remove(key) else {
            return 0;
        };
        let n = map.len();
        for ((ns, _), obj) in map {
            let rv = inner.rv + 1;
            let last = Arc::new(stamp((*obj).clone(), rv));
            self.commit(
                &mut inner,
                rv,
                EventType::Deleted,
                key,
                &ns,
                last,
                Some(obj),
            );
        }
        n
    }

    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        inner: &mut Inner,
        rv: u64,
        kind: EventType,
        key: &str,
        namespace: &str,
        object: Arc<Value>,
        old: Option<Arc<Value>>,
    ) {
        inner.rv = rv;
        let event = Arc::new(StoredEvent {
            rv,
            kind,
            key: Arc::from(key),
            namespace: namespace.to_string(),
            object,
            old,
            encoded: Mutex::new(None),
        });
        inner.history.push_back(event.clone());
        if let Some(older) = inner
            .history
            .len()
            .checked_sub(ENCODINGS_KEPT + 1)
            .and_then(|index| inner.history.get(index))
        {
            older.forget_encoding();
        }
        while inner.history.len() > inner.history_limit {
            if let Some(dropped) = inner.history.pop_front() {
                inner.compacted_rv = dropped.rv;
            }
        }
        // No receivers is fine: nobody watches yet.
        let _ = self.events.send(event);
    }

    /// Starts a watch on `key` (all namespaces; the caller filters). With `from = Some(rv)` the
    /// retained events after `rv` are replayed (410 if `rv` is older than the history window);
    /// with `None` the current objects are returned as a snapshot.
    pub fn subscribe(&self, key: &str, from: Option<u64>) -> Result<Subscription> {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        if let Some(rv) = from {
            if rv < inner.compacted_rv {
                return Err(StatusError::Gone(format!(
                    "too old resource version: {rv} ({})",
                    inner.compacted_rv
                )));
            }
            let replay = inner
                .history
                .iter()
                .filter(|e| e.rv > rv && *e.key == *key)
                .cloned()
                .collect();
            Ok(Subscription {
                replay,
                snapshot: Vec::new(),
                rv: inner.rv,
                receiver,
            })
        } else {
            let snapshot = inner
                .objects
                .get(key)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            Ok(Subscription {
                replay: Vec::new(),
                snapshot,
                rv: inner.rv,
                receiver,
            })
        }
    }

    /// Adjusts the number of retained events (shrinking compacts immediately).
    pub fn set_history_limit(&self, limit: usize) {
        let mut inner = self.lock();
        inner.history_limit = limit.max(1);
        while inner.history.len() > inner.history_limit {
            if let Some(dropped) = inner.history.pop_front() {
                inner.compacted_rv = dropped.rv;
            }
        }
    }

    /// Forgets all retained history up to now, so any older resourceVersion answers 410.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted_rv = inner.rv;
    }
}

fn stamp(mut object: Value, rv: u64) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    object
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
