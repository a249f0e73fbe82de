//! What the driver reads from and posts to the cluster, behind the [`DriverCluster`] trait:
//! parameter objects, the list of claims a reconcile compares with the ledger, and the events
//! that explain unsuitable nodes. [`KubeCluster`] implements it over `kube::Client`; tests use an
//! in-memory implementation.
//!
//! Must not contain allocation decisions.

use async_trait::async_trait;
use dra_runtime::events::EventRecorder;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::api::{Api, ListParams};
use kube::Client;

use super::listed_claim::ListedClaim;
use super::param_cache::ParamCache;
use crate::params::{DeviceClaimParameters, DeviceClassParameters};
use dra_framework::{kube_call_error, EventRecord, KubeCallError};

/// The driver's reads and event posts against the cluster.
#[async_trait]
pub trait DriverCluster: Send + Sync + 'static {
    /// The cluster-scoped `DeviceClassParameters` named `name`; `None` when it does not exist.
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<DeviceClassParameters>, KubeCallError>;

    /// The `DeviceClaimParameters` `namespace/name`; `None` when it does not exist.
    async fn claim_parameters(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DeviceClaimParameters>, KubeCallError>;

    /// Every ResourceClaim of the cluster (all namespaces), read fresh from the API server and
    /// handed to `page` a page at a time, so that a reconcile keeps one page of the claims in
    /// memory rather than all. Only what a reconcile reads need be set: name, namespace, uid,
    /// and of the status the driver name, the allocation's resource handles and `reservedFor`.
    async fn list_claims(
        &self,
        page: &mut (dyn FnMut(Vec<ResourceClaim>) + Send),
    ) -> Result<(), KubeCallError>;

    /// Posts an event.
    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError>;
}

/// [`DriverCluster`] over a `kube::Client`; events are reported by `resource driver <name>`.
/// Parameter objects are read from watched copies, with a live GET when the watch lacks one.
pub struct KubeCluster {
    client: Client,
    recorder: EventRecorder,
    params: ParamCache,
}

impl KubeCluster {
    /// Reads and posts through `client` on behalf of driver `driver_name`.
    pub fn new(client: Client, driver_name: &str) -> Self {
        Self {
            recorder: EventRecorder::new(client.clone(), driver_name),
            params: ParamCache::new(client.clone()),
            client,
        }
    }
}

#[async_trait]
impl DriverCluster for KubeCluster {
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<DeviceClassParameters>, KubeCallError> {
        if let Some(watched) = self.params.class(name).await {
            return Ok(Some(watched));
        }
        Api::<DeviceClassParameters>::all(self.client.clone())
            .get_opt(name)
            .await
            .map_err(kube_call_error)
    }

    async fn claim_parameters(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DeviceClaimParameters>, KubeCallError> {
        if let Some(watched) = self.params.claim(namespace, name).await {
            return Ok(Some(watched));
        }
        Api::<DeviceClaimParameters>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(kube_call_error)
    }

    async fn list_claims(
        &self,
        visit: &mut (dyn FnMut(Vec<ResourceClaim>) + Send),
    ) -> Result<(), KubeCallError> {
        let api = Api::<ListedClaim>::all(self.client.clone());
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await.map_err(kube_call_error)?;
            visit(page.items.into_iter().map(ResourceClaim::from).collect());
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(()),
            }
        }
    }

    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError> {
        self.recorder
            .post("Allocate", event)
            .await
            .map_err(kube_call_error)
    }
}
