//! Where the agent reads v1 `ResourceClaim`s: [`ClaimSource`], the two reads the v1 prepare
//! and garbage collection need, behind a trait so that the gRPC service and the collection can
//! be run without an API server. [`ApiClaims`] reads them from the API server;
//! [`MemoryClaims`] holds them in memory (tests, benchmarks).

use dra_runtime::lock::RwLockExt;
use std::collections::BTreeMap;
use std::sync::RwLock;

use kube::api::ListParams;
use kube::{Api, Client};

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
