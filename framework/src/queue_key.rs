//! The keys of the work queue: which object a sync is about, as a value rather than text.
//!
//! [`QueueKey`] displays as the text keys of the upstream Go library (`claim:<ns>/<name>`,
//! `schedulingCtx:<ns>/<name>`) so that logs read the same; nothing parses that text back. Owns
//! only the key types; must not depend on the queue, the API client or the driver.

use std::fmt;

use kube::ResourceExt;

/// Namespace and name of an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// The object name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `namespace`/`name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of `object`.
    pub fn of<K: kube::Resource>(object: &K) -> Self {
        Self::new(object.namespace().unwrap_or_default(), object.name_any())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a worker syncs: a ResourceClaim or a PodSchedulingContext.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueKey {
    /// A ResourceClaim.
    Claim(ObjectKey),
    /// A PodSchedulingContext (named after its pod).
    SchedulingContext(ObjectKey),
}

impl QueueKey {
    /// The key of ResourceClaim `namespace`/`name`.
    pub fn claim(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::Claim(ObjectKey::new(namespace, name))
    }

    /// The key of PodSchedulingContext `namespace`/`name`.
    pub fn scheduling_context(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::SchedulingContext(ObjectKey::new(namespace, name))
    }
}

impl fmt::Display for QueueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Claim(object) => write!(f, "claim:{object}"),
            Self::SchedulingContext(object) => write!(f, "schedulingCtx:{object}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_display_as_the_upstream_text_keys() {
        assert_eq!(
            QueueKey::claim("default", "gpu").to_string(),
            "claim:default/gpu"
        );
        assert_eq!(
            QueueKey::scheduling_context("ml", "pod-0").to_string(),
            "schedulingCtx:ml/pod-0"
        );
    }

    #[test]
    fn a_claim_and_a_context_of_the_same_name_are_different_keys() {
        let claim = QueueKey::claim("default", "x");
        let context = QueueKey::scheduling_context("default", "x");
        assert_ne!(claim, context);
    }
}
