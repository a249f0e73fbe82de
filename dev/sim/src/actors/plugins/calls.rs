//! The 1.34 kubelet's calls to a plugin: one `NodePrepareResources` or `NodeUnprepareResources`
//! with a batch of `Claim{namespace, uid, name}`, over the service chosen at registration
//! (`v1.DRAPlugin` or `v1beta1.DRAPlugin`, wire-identical apart from the package), and the answer
//! checked as the DRA manager checks it: a gRPC error, a result for a claim that was not asked
//! for, a claim's own error, or fewer results than claims fails the batch, with upstream's texts.
//!
//! I/O and the checks of the answer; which claims go into a batch is decided elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::time::Duration;

use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
use tonic::transport::Channel;
use tonic::Status;

use super::claims::ClaimCall;
use super::error::CallError;
use super::services::Service;

/// Which call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `NodePrepareResources`.
    Prepare,
    /// `NodeUnprepareResources`.
    Unprepare,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Prepare => "NodePrepareResources",
            Call::Unprepare => "NodeUnprepareResources",
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks the answer to `call` for `claims`: `errors` is each answered claim UID with its error
/// (empty when it succeeded).
pub(crate) fn check_answer<S: BuildHasher>(
    call: Call,
    claims: &[ClaimCall],
    errors: &HashMap<String, String, S>,
) -> Result<(), CallError> {
    let mut answered: Vec<(&String, &String)> = errors.iter().collect();
    answered.sort();
    for (uid, error) in answered {
        let Some(asked) = claims.iter().find(|c| c.uid == *uid) else {
            return Err(CallError::UnknownClaim {
                call,
                uid: uid.clone(),
            });
        };
        if !error.is_empty() {
            return Err(CallError::ResourceClaimFailed {
                call,
                name: asked.name.clone(),
                error: error.clone(),
            });
        }
    }
    let count = claims.len().saturating_sub(errors.len());
    if count > 0 {
        return Err(CallError::Skipped { call, count });
    }
    Ok(())
}

/// Makes `call` for `claims` over `service` and checks the answer (see [`check_answer`]).
pub(crate) async fn call(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
    timeout: Duration,
) -> Result<(), CallError> {
    let answer = tokio::time::timeout(timeout, send(channel, service, call, claims))
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("context deadline exceeded")))
        .map_err(|status| CallError::Rpc { call, status })?;
    check_answer(call, claims, &answer)
}

/// Sends `call` over the gRPC package `$api` (`v1` or `v1beta1`, the same messages apart from
/// the package) and returns each answered claim UID with its error.
macro_rules! send_over {
    ($api:ident, $channel:expr, $call:expr, $claims:expr) => {{
        let mut client = $api::dra_plugin_client::DraPluginClient::new($channel);
        let claims: Vec<$api::Claim> = $claims
            .iter()
            .map(|c| $api::Claim {
                namespace: c.namespace.clone(),
                uid: c.uid.clone(),
                name: c.name.clone(),
            })
            .collect();
        let errors: HashMap<String, String> = match $call {
            Call::Prepare => client
                .node_prepare_resources($api::NodePrepareResourcesRequest { claims })
                .await?
                .into_inner()
                .claims
                .into_iter()
                .map(|(uid, r)| (uid, r.error))
                .collect(),
            Call::Unprepare => client
                .node_unprepare_resources($api::NodeUnprepareResourcesRequest { claims })
                .await?
                .into_inner()
                .claims
                .into_iter()
                .map(|(uid, r)| (uid, r.error))
                .collect(),
        };
        Ok(errors)
    }};
}

async fn send(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
) -> Result<HashMap<String, String>, Status> {
    match service {
        Service::V1 => send_over!(v1, channel, call, claims),
        Service::V1Beta1 => send_over!(v1beta1, channel, call, claims),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(uids: &[&str]) -> Vec<ClaimCall> {
        uids.iter()
            .map(|uid| ClaimCall {
                namespace: "ns".into(),
                uid: (*uid).into(),
                name: format!("claim-{uid}"),
                resource_handle: String::new(),
            })
            .collect()
    }

    fn answer(entries: &[(&str, &str)]) -> HashMap<String, String> {
        entries
            .iter()
            .map(|(uid, error)| ((*uid).to_owned(), (*error).to_owned()))
            .collect()
    }

    #[test]
    fn every_claim_answered_without_error_is_success() {
        let claims = calls(&["a", "b"]);
        assert!(check_answer(Call::Prepare, &claims, &answer(&[("a", ""), ("b", "")])).is_ok());
    }

    #[test]
    fn a_claims_error_names_the_claim() {
        let claims = calls(&["a"]);
        assert_eq!(
            check_answer(Call::Prepare, &claims, &answer(&[("a", "no such GPU")]))
                .unwrap_err()
                .to_string(),
            "NodePrepareResources failed for ResourceClaim claim-a: no such GPU"
        );
        assert_eq!(
            check_answer(Call::Unprepare, &claims, &answer(&[("a", "busy")]))
                .unwrap_err()
                .to_string(),
            "NodeUnprepareResources failed for ResourceClaim claim-a: busy"
        );
    }

    #[test]
    fn unknown_and_missing_claims_fail_the_batch() {
        let claims = calls(&["a", "b"]);
        assert_eq!(
            check_answer(Call::Prepare, &claims, &answer(&[("a", ""), ("zz", "")]))
                .unwrap_err()
                .to_string(),
            "NodePrepareResources returned result for unknown claim UID zz"
        );
        assert_eq!(
            check_answer(Call::Unprepare, &claims, &answer(&[("b", "")]))
                .unwrap_err()
                .to_string(),
            "NodeUnprepareResources skipped 1 ResourceClaims"
        );
    }
}
