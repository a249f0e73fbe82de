//! Read access to the watched objects, behind the [`Caches`] trait.
//!
//! Owns the trait and its implementation over kube-rs reflector stores. Must not write anything and
//! must not depend on the driver; claim reads in the sync go through the mutation cache on top.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim, ResourceClass};
use kube::runtime::reflector::{ObjectRef, Store};

use super::claim_store::ClaimStore;

/// The objects the sync reads, as last observed by the watches.
pub trait Caches: Send + Sync + 'static {
    /// A ResourceClaim by namespace and name.
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>>;
    /// A ResourceClass by name.
    fn class(&self, name: &str) -> Option<Arc<ResourceClass>>;
    /// A PodSchedulingContext by namespace and name (the pod's name).
    fn scheduling_context(&self, namespace: &str, name: &str) -> Option<Arc<PodSchedulingContext>>;
    /// A Pod by namespace and name.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// All claims whose `spec.resourceClassName` is `class`.
    fn claims_of_class(&self, class: &str) -> Vec<Arc<ResourceClaim>>;
}

/// [`Caches`] over the claim store and kube-rs reflector stores, filled by the controller's
/// watches.
#[derive(Clone)]
pub struct ReflectorCaches {
    /// ResourceClaims of all namespaces (settled ones in compact form).
    pub claims: ClaimStore,
    /// ResourceClasses.
    pub classes: Store<ResourceClass>,
    /// PodSchedulingContexts of all namespaces.
    pub contexts: Store<PodSchedulingContext>,
    /// Pods of all namespaces.
    pub pods: Store<Pod>,
}

impl Caches for ReflectorCaches {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.claims.get(namespace, name)
    }

    fn class(&self, name: &str) -> Option<Arc<ResourceClass>> {
        self.classes.get(&ObjectRef::new(name))
    }

    fn scheduling_context(&self, namespace: &str, name: &str) -> Option<Arc<PodSchedulingContext>> {
        self.contexts.get(&ObjectRef::new(name).within(namespace))
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(name).within(namespace))
    }

    /// A scan of the claim store; called only when a class of ours is added or changed.
    fn claims_of_class(&self, class: &str) -> Vec<Arc<ResourceClaim>> {
        self.claims.of_class(class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{claim, class, ClaimFixture, OTHER_CLASS};
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;

    #[test]
    fn reflector_caches_find_claims_by_name_and_class() {
        let claims = ClaimStore::new();
        let (classes, mut classes_writer) = store::<ResourceClass>();
        let (contexts, _) = store::<PodSchedulingContext>();
        let (pods, _) = store::<Pod>();
        for c in [
            claim(),
            claim().named("b"),
            claim().named("c").in_class(OTHER_CLASS),
        ] {
            claims.apply(&c);
        }
        classes_writer.apply_watcher_event(&Event::Apply(class()));
        let caches = ReflectorCaches {
            claims,
            classes,
            contexts,
            pods,
        };
        assert!(caches.claim("default", "b").is_some());
        assert!(caches.claim("other", "b").is_none());
        assert!(caches.class("mock-class").is_some());
        let mut names: Vec<String> = caches
            .claims_of_class("mock-class")
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, vec!["b".to_owned(), "claim".to_owned()]);
    }
}
