//! Garbage collection of prepared claims against the API server: the 1.30 kubelet can miss an
//! unprepare (a restart between its call and its checkpoint, a forced delete), so the agent
//! unprepares claims whose `ResourceClaim` is gone or no longer allocated to this node itself.
//!
//! [`stale_claims`] is the pure decision over one list of claims; [`confirm_stale`] checks each
//! candidate again with a GET by name before it is unprepared, so that a claim prepared after the
//! list was taken is never collected. The caller unprepares what is confirmed.

use std::collections::BTreeMap;

use dra_allocator::handle::HandleData;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::{Api, Client};

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

/// Why `claim` (the cluster's object under the prepared claim's UID, if any) no longer belongs
/// prepared on `node`; `None` while it does.
pub fn stale_reason(
    claim: Option<&ResourceClaim>,
    node: &str,
    driver: &str,
) -> Option<StaleReason> {
    let Some(claim) = claim else {
        return Some(StaleReason::Gone);
    };
    match allocated_node(claim, driver) {
        None => Some(StaleReason::NotAllocated),
        Some(other) if other != node => Some(StaleReason::OtherNode(other)),
        Some(_) => None,
    }
}

/// The prepared claims that one complete list of the cluster's claims shows stale.
pub fn stale_claims(
    prepared: &[PreparedRef],
    listed: &[ResourceClaim],
    node: &str,
    driver: &str,
) -> Vec<(PreparedRef, StaleReason)> {
    let by_uid: BTreeMap<&str, &ResourceClaim> = listed
        .iter()
        .filter_map(|c| Some((c.metadata.uid.as_deref()?, c)))
        .collect();
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
    if prepared.is_empty() {
        return Ok(Vec::new());
    }
    let all: Api<ResourceClaim> = Api::all(client.clone());
    let listed = all.list(&kube::api::ListParams::default()).await?.items;
    let candidates = stale_claims(prepared, &listed, node, driver);
    confirm_stale(client, candidates, node, driver).await
}

/// Keeps the candidates that a fresh GET still shows stale.
pub async fn confirm_stale(
    client: &Client,
    candidates: Vec<(PreparedRef, StaleReason)>,
    node: &str,
    driver: &str,
) -> kube::Result<Vec<(PreparedRef, StaleReason)>> {
    let mut confirmed = Vec::new();
    for (prepared, _) in candidates {
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &prepared.namespace);
        let current = api
            .get_opt(&prepared.name)
            .await?
            .filter(|c| c.metadata.uid.as_deref() == Some(prepared.uid.as_str()));
        if let Some(reason) = stale_reason(current.as_ref(), node, driver) {
            confirmed.push((prepared, reason));
        }
    }
    Ok(confirmed)
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

    #[test]
    fn a_claim_allocated_here_is_kept_and_the_others_are_stale_with_their_reason() {
        let listed = [
            claim("here", Some((DRIVER, "node-a"))),
            claim("moved", Some((DRIVER, "node-b"))),
            claim("free", None),
            claim("foreign", Some(("other.example.com", "node-a"))),
        ];
        let all = ["here", "moved", "free", "foreign", "gone"].map(prepared);
        let stale = stale_claims(&all, &listed, "node-a", DRIVER);
        let reasons: Vec<(&str, StaleReason)> = stale
            .iter()
            .map(|(p, r)| (p.uid.as_str(), r.clone()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("moved", StaleReason::OtherNode("node-b".into())),
                ("free", StaleReason::NotAllocated),
                ("foreign", StaleReason::NotAllocated),
                ("gone", StaleReason::Gone),
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
