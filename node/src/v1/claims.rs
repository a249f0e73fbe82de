//! Where the agent reads v1 `ResourceClaim`s: [`ClaimSource`], the two reads the v1 prepare
//! and garbage collection need, behind a trait so that the gRPC service and the collection can
//! be run without an API server. [`ApiClaims`] reads them from the API server, and is where the
//! device status is written too ([`ClaimStatusApi`]: the claim read as JSON, its status
//! replaced); [`MemoryClaims`] holds them in memory (tests, benchmarks).

use dra_runtime::lock::RwLockExt;
use std::collections::BTreeMap;
use std::sync::RwLock;

use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use super::status::ClaimStatusApi;
use dra_types::resource_v1::ResourceClaim;

/// Reads v1 `ResourceClaim`s.
#[async_trait::async_trait]
pub trait ClaimSource: Send + Sync + 'static {
    /// The claim `namespace/name`, `None` when there is none.
    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<ResourceClaim>>;

    /// Every claim of every namespace.
    async fn list(&self) -> kube::Result<Vec<ResourceClaim>>;
}

/// The claims of the API server `client` reaches.
#[derive(Clone)]
pub struct ApiClaims {
    client: Client,
}

impl std::fmt::Debug for ApiClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClaims").finish_non_exhaustive()
    }
}

impl ApiClaims {
    /// The claims through `client`.
    pub fn new(client: Client) -> Self {
        ApiClaims { client }
    }
}

#[async_trait::async_trait]
impl ClaimSource for ApiClaims {
    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<ResourceClaim>> {
        Api::<ResourceClaim>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
    }

    async fn list(&self) -> kube::Result<Vec<ResourceClaim>> {
        let all: Api<ResourceClaim> = Api::all(self.client.clone());
        Ok(all.list(&ListParams::default()).await?.items)
    }
}

impl ApiClaims {
    /// The claims of `namespace` as JSON objects: every field the API server sends is kept.
    fn json_claims(&self, namespace: &str) -> Api<DynamicObject> {
        let resource = ApiResource::erase::<ResourceClaim>(&());
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }
}

#[async_trait::async_trait]
impl ClaimStatusApi for ApiClaims {
    async fn claim(&self, namespace: &str, name: &str) -> kube::Result<Option<Value>> {
        let claim = self.json_claims(namespace).get_opt(name).await?;
        claim
            .map(serde_json::to_value)
            .transpose()
            .map_err(kube::Error::SerdeError)
    }

    async fn replace_status(&self, namespace: &str, name: &str, claim: &Value) -> kube::Result<()> {
        let body = serde_json::to_vec(claim).map_err(kube::Error::SerdeError)?;
        self.json_claims(namespace)
            .replace_status(name, &PostParams::default(), body)
            .await
            .map(drop)
    }
}

/// Claims held in memory, keyed by namespace and name.
#[derive(Debug, Default)]
pub struct MemoryClaims {
    claims: RwLock<BTreeMap<(String, String), ResourceClaim>>,
}

impl MemoryClaims {
    /// Stores `claim` under its namespace and name (replacing what was there).
    pub fn put(&self, claim: ResourceClaim) {
        let key = (
            claim.metadata.namespace.clone().unwrap_or_default(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        self.claims.write_or_recover().insert(key, claim);
    }

    /// Removes the claim `namespace/name`.
    pub fn remove(&self, namespace: &str, name: &str) {
        self.claims
            .write_or_recover()
            .remove(&(namespace.to_owned(), name.to_owned()));
    }
}

#[async_trait::async_trait]
impl ClaimSource for MemoryClaims {
    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<ResourceClaim>> {
        let claims = self.claims.read_or_recover();
        Ok(claims
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned())
    }

    async fn list(&self) -> kube::Result<Vec<ResourceClaim>> {
        let claims = self.claims.read_or_recover();
        Ok(claims.values().cloned().collect())
    }
}
