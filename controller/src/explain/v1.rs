//! Reading the facts of `dra-ledger explain pod` from a `resource.k8s.io/v1` cluster: the pod
//! (as served, so that fields newer than the typed model, `extendedResourceClaimStatus` and the
//! containers' `allocatedResourcesStatus`, are read too), its v1 ResourceClaims, our driver's
//! ResourceSlices, the DeviceTaintRules, the DeviceClasses and the events about the pod and its
//! claims. All I/O; the text is [`super::report_v1`]'s.

use dra_types::resource_v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};

use super::report::PodClaimFacts;
use super::report_v1::{DeviceHealthLine, V1Facts};
use super::{api_error, events_about, ExplainError};

/// The pod claim name the report gives the scheduler-made extended-resource claim.
pub const EXTENDED_POD_CLAIM: &str = "extended resources";

/// The pod's claims as served (the 1.31+ shape of `spec.resourceClaims`, which the typed 1.30
/// model does not read): per entry its name, the claim's name (named, or recorded in
/// `status.resourceClaimStatuses` for a template; `None` before that) and whether a template
/// makes it; then the extended-resource claim of `status.extendedResourceClaimStatus`.
pub fn pod_claims(pod: &serde_json::Value) -> Vec<(String, Option<String>, bool)> {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let recorded = |name: &str| {
        pod["status"]["resourceClaimStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"].as_str() == Some(name))
            .and_then(|s| text(&s["resourceClaimName"]))
    };
    let mut out: Vec<(String, Option<String>, bool)> = pod["spec"]["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let name = text(&entry["name"]).unwrap_or_default();
            let template = entry["resourceClaimTemplateName"].is_string();
            let claim = text(&entry["resourceClaimName"]).or_else(|| recorded(&name));
            (name, claim, template)
        })
        .collect();
    if let Some(extended) = text(&pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"])
    {
        out.push((EXTENDED_POD_CLAIM.to_owned(), Some(extended), false));
    }
    out
}

/// Reads the facts about pod `namespace/name` from a v1 cluster; `driver` picks the slices.
pub async fn gather_v1(
    client: &Client,
    namespace: &str,
    name: &str,
    driver: &str,
) -> Result<V1Facts, ExplainError> {
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Pod>(&()));
    let served = raw
        .get_opt(name)
        .await
        .map_err(api_error(format!("pod {namespace}/{name}")))?
        .ok_or_else(|| ExplainError::NotFound(format!("{namespace}/{name}")))?;
    let value = serde_json::to_value(&served).unwrap_or_default();
    let pod: Pod =
        serde_json::from_value(value.clone()).map_err(|source| ExplainError::Decode {
            what: format!("pod {namespace}/{name}"),
            source,
        })?;
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let entries = pod_claims(&value);
    let mut claims = Vec::new();
    for (pod_claim, claim_name, from_template) in entries {
        let claim = match &claim_name {
            Some(claim_name) => claims_api
                .get_opt(claim_name)
                .await
                .map_err(api_error(format!("claim {namespace}/{claim_name}")))?,
            None => None,
        };
        claims.push(PodClaimFacts {
            pod_claim,
            claim_name,
            from_template,
            claim,
        });
    }
    let slices = Api::<ResourceSlice>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
        .await
        .map_err(api_error("ResourceSlices"))?
        .items;
    let rules = Api::<DeviceTaintRule>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error("DeviceTaintRules"))?
        .items;
    let classes = Api::<DeviceClass>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error("DeviceClasses"))?
        .items;
    let events = events_about(
        client,
        namespace,
        name,
        claims.iter().map(|c| &c.claim_name),
    )
    .await?;
    Ok(V1Facts {
        health: DeviceHealthLine::of_pod(&value),
        pod,
        claims,
        slices: slices
            .into_iter()
            .filter(|s| s.spec.driver == driver)
            .collect(),
        rules,
        classes,
        events,
    })
}
