//! An in-memory [`DriverCluster`] for tests of the driver without an API server: parameter
//! objects and claims are put in by the test, posted events are recorded.
//!
//! Compiled only for tests or with the `testing` feature of `dra-controller`; a product build has
//! none of it.

use dra_runtime::lock::LockExt;
use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::ResourceExt;

use super::DriverCluster;
use crate::params::{DeviceClaimParameters, DeviceClassParameters};
use dra_framework::{EventRecord, KubeCallError, KubeCallErrorKind};

#[derive(Default)]
struct Objects {
    class_parameters: BTreeMap<String, DeviceClassParameters>,
    claim_parameters: BTreeMap<(String, String), DeviceClaimParameters>,
    claims: BTreeMap<String, ResourceClaim>,
    events: Vec<EventRecord>,
    fail_list: bool,
    list_delay: std::time::Duration,
}

/// A cluster held in memory.
#[derive(Default)]
pub struct MemoryCluster {
    objects: Mutex<Objects>,
}

impl MemoryCluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Objects) -> T) -> T {
        f(&mut self.objects.lock_or_recover())
    }

    /// Stores a `DeviceClassParameters` under its name.
    pub fn put_class_parameters(&self, object: DeviceClassParameters) {
        self.with(|o| o.class_parameters.insert(object.name_any(), object));
    }

    /// Stores a `DeviceClaimParameters` under its namespace and name.
    pub fn put_claim_parameters(&self, object: DeviceClaimParameters) {
        let key = (object.namespace().unwrap_or_default(), object.name_any());
        self.with(|o| o.claim_parameters.insert(key, object));
    }

    /// Stores (or replaces) a claim, keyed by UID.
    pub fn put_claim(&self, claim: ResourceClaim) {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.with(|o| o.claims.insert(uid, claim));
    }

    /// Removes the claim with `uid`.
    pub fn remove_claim(&self, uid: &str) {
        self.with(|o| o.claims.remove(uid));
    }

    /// Makes `list_claims` fail (or work again).
    pub fn fail_list(&self, fail: bool) {
        self.with(|o| o.fail_list = fail);
    }

    /// Makes `list_claims` answer `delay` after it took its snapshot (a slow list).
    pub fn delay_list(&self, delay: std::time::Duration) {
        self.with(|o| o.list_delay = delay);
    }

    /// The events posted so far.
    pub fn events(&self) -> Vec<EventRecord> {
        self.with(|o| o.events.clone())
    }
}

/// Claims per page of [`MemoryCluster`]'s list: small, so that tests cross pages.
const LIST_PAGE: usize = 2;

#[async_trait]
impl DriverCluster for MemoryCluster {
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<DeviceClassParameters>, KubeCallError> {
        Ok(self.with(|o| o.class_parameters.get(name).cloned()))
    }

    async fn claim_parameters(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DeviceClaimParameters>, KubeCallError> {
        let key = (namespace.to_owned(), name.to_owned());
        Ok(self.with(|o| o.claim_parameters.get(&key).cloned()))
    }

    /// Hands the claims over in pages of a few claims, as a paged list does.
    async fn list_claims(
        &self,
        visit: &mut (dyn FnMut(Vec<ResourceClaim>) + Send),
    ) -> Result<(), KubeCallError> {
        let (listed, delay) = self.with(|o| {
            let listed = if o.fail_list {
                Err(KubeCallError::new(
                    KubeCallErrorKind::Other,
                    "injected list failure",
                ))
            } else {
                Ok(o.claims.values().cloned().collect::<Vec<_>>())
            };
            (listed, o.list_delay)
        });
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        for page in listed?.chunks(LIST_PAGE) {
            visit(page.to_vec());
        }
        Ok(())
    }

    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError> {
        self.with(|o| o.events.push(event));
        Ok(())
    }
}
