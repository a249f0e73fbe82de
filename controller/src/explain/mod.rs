//! `dra-ledger explain pod NS/NAME`: why a pod is pending, or where its devices are, in a few
//! lines a user can act on. [`gather`] reads what the answer needs from the cluster (the pod, its
//! claims with the allocation the ledger wrote into them, its PodSchedulingContext with the
//! drivers' last UnsuitableNodes result, and the events about the pod and its claims);
//! [`report`] turns that into text without any I/O. On `resource.k8s.io/v1` clusters (chosen
//! by discovery as `run` does) [`gather_v1`] and [`report_v1`] do the same for v1 claims, our
//! driver's slices and the device taints.

mod report;
mod report_v1;
mod v1;

pub use report::{report, EventLine, Facts, PodClaimFacts};
pub use report_v1::{report_v1, untolerated, DeviceHealthLine, V1Facts};
pub use v1::{gather_v1, EXTENDED_POD_CLAIM};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};
use kube::api::ListParams;
use kube::{Api, Client};

/// Reading the cluster failed, or the pod does not exist.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The target is not `NAMESPACE/NAME`.
    #[error("expected NAMESPACE/NAME, got {0:?}")]
    Target(String),
    /// The pod does not exist.
    #[error("pod {0} not found")]
    NotFound(String),
    /// An object read from the cluster does not have the expected shape.
    #[error("cannot decode {what}")]
    Decode {
        /// What was being read.
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// An API call failed.
    #[error("cannot read {what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// Splits `NAMESPACE/NAME`.
pub fn parse_target(target: &str) -> Result<(String, String), ExplainError> {
    match target.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(ExplainError::Target(target.to_owned())),
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ExplainError {
    let what = what.into();
    move |source| ExplainError::Api {
        what,
        source: Box::new(source),
    }
}

/// The name of the ResourceClaim behind a pod claim entry: the named claim, or the one the
/// resourceclaim controller recorded for a template (`None`: not created yet).
fn claim_name(pod: &Pod, entry: &k8s_openapi::api::core::v1::PodResourceClaim) -> Option<String> {
    let source = entry.source.as_ref()?;
    if let Some(name) = &source.resource_claim_name {
        return Some(name.clone());
    }
    pod.status
        .as_ref()?
        .resource_claim_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == entry.name)?
        .resource_claim_name
        .clone()
}

/// The events in `namespace` about pod `name` and the claims named by `claim_names`.
async fn events_about<'a>(
    client: &Client,
    namespace: &str,
    name: &str,
    claim_names: impl Iterator<Item = &'a Option<String>>,
) -> Result<Vec<EventLine>, ExplainError> {
    let mut subjects: Vec<String> = vec![name.to_owned()];
    subjects.extend(claim_names.flatten().cloned());
    Ok(Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!("events of {namespace}")))?
        .items
        .into_iter()
        .filter_map(|e| EventLine::of(&e, &subjects))
        .collect())
}

/// Reads the facts about pod `namespace/name` from the cluster.
pub async fn gather(client: &Client, namespace: &str, name: &str) -> Result<Facts, ExplainError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = pods
        .get_opt(name)
        .await
        .map_err(api_error(format!("pod {namespace}/{name}")))?
        .ok_or_else(|| ExplainError::NotFound(format!("{namespace}/{name}")))?;
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let mut claims = Vec::new();
    for entry in pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
    {
        let claim_name = claim_name(&pod, entry);
        let claim = match &claim_name {
            Some(claim_name) => claims_api
                .get_opt(claim_name)
                .await
                .map_err(api_error(format!("claim {namespace}/{claim_name}")))?,
            None => None,
        };
        let from_template = entry
            .source
            .as_ref()
            .is_some_and(|s| s.resource_claim_template_name.is_some());
        claims.push(PodClaimFacts {
            pod_claim: entry.name.clone(),
            claim_name,
            from_template,
            claim,
        });
    }
    let context = Api::<PodSchedulingContext>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(api_error(format!("scheduling context {namespace}/{name}")))?;
    let events = events_about(
        client,
        namespace,
        name,
        claims.iter().map(|c| &c.claim_name),
    )
    .await?;
    Ok(Facts {
        pod,
        claims,
        context,
        events,
    })
}
