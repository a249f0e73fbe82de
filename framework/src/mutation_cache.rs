//! The mutation cache: the objects returned by our own successful writes (claims, and scheduling
//! contexts).
//!
//! A watch may still deliver an older copy of an object after we wrote it; reading through this
//! cache makes the sync see its own writes, so a stale claim never triggers a second allocation and
//! a stale context never makes a status patch conflict. Owns only the cache; must not depend on the
//! API client or the driver.

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::Resource;

/// Bounded, expiring map from `<ns>/<name>` to the object our last write returned.
pub struct MutationCache<K = ResourceClaim> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, Entry<K>>>,
}

struct Entry<K> {
    object: Arc<K>,
    written: Instant,
}

/// Ordering of two resourceVersions: numeric when both parse, otherwise unknown.
fn newer_than(a: Option<&str>, b: Option<&str>) -> Option<bool> {
    let a = a?.parse::<u64>().ok()?;
    let b = b?.parse::<u64>().ok()?;
    Some(a > b)
}

impl<K: Resource> MutationCache<K> {
    /// A cache keeping at most `capacity` objects for `ttl` each.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn key(object: &K) -> String {
        let meta = object.meta();
        format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        )
    }

    /// Records the object returned by a successful write. An entry with a numerically newer
    /// resourceVersion is kept; otherwise the newer write replaces it.
    pub fn mutation(&self, object: Arc<K>) {
        let key = Self::key(&object);
        let now = Instant::now();
        let mut entries = self.entries.lock_or_recover();
        entries.retain(|_, e| now.duration_since(e.written) < self.ttl);
        if let Some(old) = entries.get(&key) {
            let old_rv = old.object.meta().resource_version.as_deref();
            let new_rv = object.meta().resource_version.as_deref();
            if newer_than(old_rv, new_rv) == Some(true) {
                return;
            }
        }
        if !entries.contains_key(&key) && entries.len() >= self.capacity {
            if let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.written)
                .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            key,
            Entry {
                object,
                written: now,
            },
        );
    }

    /// The newer of the watched copy and our last written copy of the object `<ns>/<name>`.
    /// With no watched copy the object is treated as gone (deleted objects are not resurrected).
    pub fn newest(&self, namespace: &str, name: &str, observed: Option<Arc<K>>) -> Option<Arc<K>> {
        let observed = observed?;
        let key = format!("{namespace}/{name}");
        let mut entries = self.entries.lock_or_recover();
        let Some(entry) = entries.get(&key) else {
            return Some(observed);
        };
        if entry.written.elapsed() >= self.ttl || entry.object.meta().uid != observed.meta().uid {
            entries.remove(&key);
            return Some(observed);
        }
        let cached_rv = entry.object.meta().resource_version.as_deref();
        let observed_rv = observed.meta().resource_version.as_deref();
        match newer_than(cached_rv, observed_rv) {
            Some(false) => {
                // The watch has caught up with (or passed) our write.
                entries.remove(&key);
                Some(observed)
            }
            None if cached_rv == observed_rv => Some(observed),
            // Newer, or unparseable versions: our write is the newest we know of (the TTL bounds
            // the unparseable case).
            Some(true) | None => Some(entry.object.clone()),
        }
    }

    /// Number of entries, expired ones included until the next write.
    pub fn len(&self) -> usize {
        self.entries.lock_or_recover().len()
    }

    /// Whether the cache holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn claim(name: &str, rv: &str) -> Arc<ResourceClaim> {
        Arc::new(ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..ResourceClaim::default()
        })
    }

    fn rv(c: &ResourceClaim) -> &str {
        c.metadata.resource_version.as_deref().unwrap()
    }

    #[test]
    fn written_copy_hides_stale_watched_copy() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_secs(60), 100);
        cache.mutation(claim("a", "10"));
        let got = cache.newest("default", "a", Some(claim("a", "9"))).unwrap();
        assert_eq!(rv(&got), "10");
    }

    #[test]
    fn watched_copy_wins_once_it_is_newer() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_secs(60), 100);
        cache.mutation(claim("a", "10"));
        let got = cache
            .newest("default", "a", Some(claim("a", "11")))
            .unwrap();
        assert_eq!(rv(&got), "11");
        assert!(cache.is_empty());
    }

    #[test]
    fn older_write_does_not_replace_newer_entry() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_secs(60), 100);
        cache.mutation(claim("a", "12"));
        cache.mutation(claim("a", "10"));
        let got = cache.newest("default", "a", Some(claim("a", "5"))).unwrap();
        assert_eq!(rv(&got), "12");
    }

    #[test]
    fn entries_expire_after_ttl() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_millis(1), 100);
        cache.mutation(claim("a", "10"));
        std::thread::sleep(Duration::from_millis(5));
        let got = cache.newest("default", "a", Some(claim("a", "9"))).unwrap();
        assert_eq!(rv(&got), "9");
    }

    #[test]
    fn capacity_evicts_oldest_entry() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_secs(60), 2);
        cache.mutation(claim("a", "10"));
        std::thread::sleep(Duration::from_millis(2));
        cache.mutation(claim("b", "10"));
        cache.mutation(claim("c", "10"));
        assert_eq!(cache.len(), 2);
        let a = cache.newest("default", "a", Some(claim("a", "1"))).unwrap();
        assert_eq!(rv(&a), "1");
    }

    #[test]
    fn deleted_claim_is_not_resurrected() {
        let cache = MutationCache::<ResourceClaim>::new(Duration::from_secs(60), 100);
        cache.mutation(claim("a", "10"));
        assert!(cache.newest("default", "a", None).is_none());
    }
}
