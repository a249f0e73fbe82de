//! Garbage collection of prepared claims against the API server: the kubelet can miss an
//! unprepare (a restart between its call and its checkpoint, a forced delete), so the agent
//! unprepares claims whose `ResourceClaim` is gone or no longer allocated to this node itself.
//! Claims are read as `resource.k8s.io/v1alpha2` objects (Kubernetes 1.30: the allocation is our
//! handle, which names the node) or as `resource.k8s.io/v1` ones (1.34+: the allocation names
//! devices of pools, our pool being named after the node); [`CollectedClaim`] is what both give.
//!
//! [`stale_claims`] is the pure decision over one list of claims; [`find_stale`] (and, for v1
//! claims, [`find_stale_v1`]) takes the list and checks each candidate again with a GET by name
//! before it is unprepared, so that a claim prepared after the list was taken is never
//! collected; both generations take that one path. The caller unprepares what is confirmed.

use std::collections::BTreeMap;

use dra_allocator::handle::HandleData;
use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::{Api, Client};

use crate::v1::claims::ClaimSource;
use dra_types::resource_v1::ResourceClaim as V1ResourceClaim;

/// A claim prepared on this node, as the journal knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedRef {
    /// The claim UID.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
}

/// Why a prepared claim is collected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaleReason {
    /// No `ResourceClaim` has its UID (deleted, or deleted and created again under the name).
    Gone,
    /// The claim is not allocated, or not by this driver.
    NotAllocated,
    /// The claim is allocated to another node.
    OtherNode(String),
}

/// The node a claim's allocation by `driver` names, `None` when it is not allocated by it or
/// its handle does not parse.
pub fn allocated_node(claim: &ResourceClaim, driver: &str) -> Option<String> {
    let status = claim.status.as_ref()?;
    if status.driver_name.as_deref() != Some(driver) {
        return None;
    }
    let allocation = status.allocation.as_ref()?;
    allocation
        .resource_handles
        .iter()
        .flatten()
        .filter(|h| h.driver_name.as_deref().is_none_or(|d| d == driver))
        .find_map(|h| HandleData::parse(h.data.as_deref()?).ok())
        .map(|data| data.node)
}

/// A claim as garbage collection reads it.
pub trait CollectedClaim {
    /// The claim's UID.
    fn uid(&self) -> Option<&str>;

    /// The node the claim's allocation by `driver` is on (`node` when any of it is on `node`),
    /// `None` when it is not allocated by `driver`.
    fn allocated_node(&self, driver: &str, node: &str) -> Option<String>;
}

impl CollectedClaim for ResourceClaim {
    fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }

    fn allocated_node(&self, driver: &str, _node: &str) -> Option<String> {
        allocated_node(self, driver)
    }
}

impl CollectedClaim for V1ResourceClaim {
    fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }

    /// The pool of our devices, which is named after its node.
    fn allocated_node(&self, driver: &str, node: &str) -> Option<String> {
        let results = &self.status.as_ref()?.allocation.as_ref()?.devices.results;
        let mut pools = results
            .iter()
            .filter(|r| r.driver == driver)
            .map(|r| &r.pool);
        let first = pools.next()?;
        if first == node || pools.any(|pool| pool == node) {
            Some(node.to_owned())
        } else {
            Some(first.clone())
        }
    }
}

/// Why `claim` (the cluster's object under the prepared claim's UID, if any) no longer belongs
/// prepared on `node`; `None` while it does.
pub fn stale_reason<C: CollectedClaim>(
    claim: Option<&C>,
    node: &str,
    driver: &str,
) -> Option<StaleReason> {
    let Some(claim) = claim else {
        return Some(StaleReason::Gone);
    };
    match claim.allocated_node(driver, node) {
        None => Some(StaleReason::NotAllocated),
        Some(other) if other != node => Some(StaleReason::OtherNode(other)),
        Some(_) => None,
    }
}

/// The prepared claims that one complete list of the cluster's claims shows stale.
pub fn stale_claims<C: CollectedClaim>(
    prepared: &[PreparedRef],
    listed: &[C],
    node: &str,
    driver: &str,
) -> Vec<(PreparedRef, StaleReason)> {
    let by_uid: BTreeMap<&str, &C> = listed.iter().filter_map(|c| Some((c.uid()?, c))).collect();
    prepared
        .iter()
        .filter_map(|p| {
            let reason = stale_reason(by_uid.get(p.uid.as_str()).copied(), node, driver)?;
            Some((p.clone(), reason))
        })
        .collect()
}

/// Lists every `ResourceClaim` and returns the prepared claims it shows stale, each confirmed by a
/// GET of the claim by namespace and name.
pub async fn find_stale(
    client: &Client,
    prepared: &[PreparedRef],
    node: &str,
    driver: &str,
) -> kube::Result<Vec<(PreparedRef, StaleReason)>> {
    find_stale_in(&V1alpha2Claims(client.clone()), prepared, node, driver).await
}

/// [`find_stale`] for v1 claims read through `claims`.
pub async fn find_stale_v1(
    claims: &dyn ClaimSource,
    prepared: &[PreparedRef],
    node: &str,
    driver: &str,
) -> kube::Result<Vec<(PreparedRef, StaleReason)>> {
    find_stale_in(claims, prepared, node, driver).await
}

/// The two reads of garbage collection, in either generation: one list of every claim, then a
/// GET of each candidate by namespace and name.
#[async_trait::async_trait]
trait ClaimReads: Sync {
    /// The claim object of the generation.
    type Claim: CollectedClaim + Send;

    /// Every claim of every namespace.
    async fn list(&self) -> kube::Result<Vec<Self::Claim>>;

    /// The claim `namespace/name`, `None` when there is none.
    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<Self::Claim>>;
}

/// The `resource.k8s.io/v1alpha2` claims of the API server a client reaches.
struct V1alpha2Claims(Client);

#[async_trait::async_trait]
impl ClaimReads for V1alpha2Claims {
    type Claim = ResourceClaim;

    async fn list(&self) -> kube::Result<Vec<ResourceClaim>> {
        let all: Api<ResourceClaim> = Api::all(self.0.clone());
        Ok(all.list(&kube::api::ListParams::default()).await?.items)
    }

    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<ResourceClaim>> {
        let api: Api<ResourceClaim> = Api::namespaced(self.0.clone(), namespace);
        api.get_opt(name).await
    }
}

#[async_trait::async_trait]
impl ClaimReads for dyn ClaimSource {
    type Claim = V1ResourceClaim;

    async fn list(&self) -> kube::Result<Vec<Self::Claim>> {
        ClaimSource::list(self).await
    }

    async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<Self::Claim>> {
        ClaimSource::get(self, namespace, name).await
    }
}

/// The prepared claims one list of `claims` shows stale, each kept only while a fresh GET of the
/// claim under its namespace and name (and UID) still shows it stale.
///
/// A boxed future: as a plain `async fn` generic over the reads, the compiler cannot prove the
/// agent's collection task `Send`.
fn find_stale_in<'a, R: ClaimReads + ?Sized>(
    claims: &'a R,
    prepared: &'a [PreparedRef],
    node: &'a str,
    driver: &'a str,
) -> BoxFuture<'a, kube::Result<Vec<(PreparedRef, StaleReason)>>> {
    Box::pin(async move {
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let listed = claims.list().await?;
        let mut confirmed = Vec::new();
        for (prepared, _) in stale_claims(prepared, &listed, node, driver) {
            let current = claims
                .get(&prepared.namespace, &prepared.name)
                .await?
                .filter(|c| c.uid() == Some(prepared.uid.as_str()));
            if let Some(reason) = stale_reason(current.as_ref(), node, driver) {
                confirmed.push((prepared, reason));
            }
        }
        Ok(confirmed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1alpha2::{
        AllocationResult, ResourceClaimSpec, ResourceClaimStatus, ResourceHandle,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const DRIVER: &str = "gpu.dra-ledger.io";

    fn claim(uid: &str, allocation: Option<(&str, &str)>) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta {
                name: Some(format!("claim-{uid}")),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimSpec::default(),
            status: allocation.map(|(driver, node)| ResourceClaimStatus {
                driver_name: Some(driver.into()),
                allocation: Some(AllocationResult {
                    resource_handles: Some(vec![ResourceHandle {
                        driver_name: Some(driver.into()),
                        data: Some(format!(
                            r#"{{"node":"{node}","devices":["gpu-0"],"sharing":{{"mode":"Exclusive"}},"claimUID":"{uid}"}}"#
                        )),
                        structured_data: None,
                    }]),
                    ..AllocationResult::default()
                }),
                ..ResourceClaimStatus::default()
            }),
        }
    }

    fn prepared(uid: &str) -> PreparedRef {
        PreparedRef {
            uid: uid.into(),
            namespace: "default".into(),
            name: format!("claim-{uid}"),
        }
    }

    /// The claims of `uids` prepared here that `listed` shows stale on node-a, with their
    /// reasons.
    fn stale_reasons<C: CollectedClaim>(uids: &[&str], listed: &[C]) -> Vec<(String, StaleReason)> {
        let all: Vec<PreparedRef> = uids.iter().map(|uid| prepared(uid)).collect();
        stale_claims(&all, listed, "node-a", DRIVER)
            .into_iter()
            .map(|(p, reason)| (p.uid, reason))
            .collect()
    }

    /// What both generations find stale of claims `moved` (allocated on node-b), `free`
    /// (unallocated), `foreign` (another driver's) and `gone` (not listed), in that order.
    fn moved_free_foreign_gone() -> Vec<(String, StaleReason)> {
        [
            ("moved", StaleReason::OtherNode("node-b".into())),
            ("free", StaleReason::NotAllocated),
            ("foreign", StaleReason::NotAllocated),
            ("gone", StaleReason::Gone),
        ]
        .into_iter()
        .map(|(uid, reason)| (uid.to_owned(), reason))
        .collect()
    }

    #[test]
    fn a_claim_allocated_here_is_kept_and_the_others_are_stale_with_their_reason() {
        let listed = [
            claim("here", Some((DRIVER, "node-a"))),
            claim("moved", Some((DRIVER, "node-b"))),
            claim("free", None),
            claim("foreign", Some(("other.example.com", "node-a"))),
        ];
        let all = ["here", "moved", "free", "foreign", "gone"];
        assert_eq!(stale_reasons(&all, &listed), moved_free_foreign_gone());
    }

    fn v1_claim(uid: &str, results: &[(&str, &str)]) -> V1ResourceClaim {
        use dra_types::resource_v1::{DeviceAllocationResult, DeviceRequestAllocationResult};
        let claim = V1ResourceClaim::new("default", &format!("claim-{uid}"), uid);
        if results.is_empty() {
            return claim;
        }
        claim.allocated(DeviceAllocationResult {
            results: results
                .iter()
                .map(|(driver, pool)| {
                    DeviceRequestAllocationResult::new("gpu", driver, pool, "gpu-0")
                })
                .collect(),
            config: Vec::new(),
        })
    }

    #[test]
    fn v1_claims_are_stale_when_gone_unallocated_foreign_or_in_another_nodes_pool() {
        let listed = [
            v1_claim("here", &[(DRIVER, "node-a")]),
            v1_claim("partly", &[(DRIVER, "node-b"), (DRIVER, "node-a")]),
            v1_claim("moved", &[(DRIVER, "node-b")]),
            v1_claim("free", &[]),
            v1_claim("foreign", &[("other.example.com", "node-a")]),
        ];
        let all = ["here", "partly", "moved", "free", "foreign", "gone"];
        assert_eq!(stale_reasons(&all, &listed), moved_free_foreign_gone());
    }

    #[tokio::test]
    async fn a_v1_candidate_is_confirmed_by_a_get_and_one_recreated_under_its_name_is_gone() {
        use crate::v1::claims::MemoryClaims;
        let claims = MemoryClaims::default();
        claims.put(v1_claim("kept", &[(DRIVER, "node-a")]));
        claims.put(v1_claim("moved", &[(DRIVER, "node-b")]));
        // the name of claim "old" now holds a new claim allocated here
        let mut reborn = v1_claim("new", &[(DRIVER, "node-a")]);
        reborn.metadata.name = Some("claim-old".into());
        claims.put(reborn);
        let all = ["kept", "moved", "old"].map(prepared);
        let stale = find_stale_v1(&claims, &all, "node-a", DRIVER)
            .await
            .unwrap();
        let uids: Vec<(&str, &StaleReason)> =
            stale.iter().map(|(p, r)| (p.uid.as_str(), r)).collect();
        assert_eq!(
            uids,
            [
                ("moved", &StaleReason::OtherNode("node-b".into())),
                ("old", &StaleReason::Gone)
            ]
        );
    }

    #[test]
    fn a_claim_whose_handle_does_not_parse_counts_as_not_allocated_by_us() {
        let mut broken = claim("x", Some((DRIVER, "node-a")));
        let status = broken.status.as_mut().unwrap();
        status
            .allocation
            .as_mut()
            .unwrap()
            .resource_handles
            .as_mut()
            .unwrap()[0]
            .data = Some("not json".into());
        assert_eq!(allocated_node(&broken, DRIVER), None);
        assert_eq!(
            stale_reason(Some(&broken), "node-a", DRIVER),
            Some(StaleReason::NotAllocated)
        );
    }
}
