//! The 1.34 kubelet's calls to a plugin: one `NodePrepareResources` or `NodeUnprepareResources`
//! with a batch of `Claim{namespace, uid, name}`, over the service chosen at registration
//! (`v1.DRAPlugin` or `v1beta1.DRAPlugin`, wire-identical apart from the package), and the answer
//! checked as the DRA manager checks it: a gRPC error, a result for a claim that was not asked
//! for, a claim's own error, or fewer results than claims fails the batch, with upstream's texts.
//!
//! I/O and the checks of the answer; which claims go into a batch is decided elsewhere.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::Duration;

use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
use tonic::transport::Channel;
use tonic::{Code, Status};

use super::claims::ClaimCall;
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

/// A gRPC code as Go's `codes.Code` names it.
fn go_code(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// A gRPC status as grpc-go prints its error: `rpc error: code = C desc = D`.
pub fn grpc_error(status: &Status) -> String {
    format!(
        "rpc error: code = {} desc = {}",
        go_code(status.code()),
        status.message()
    )
}

/// Checks the answer to `call` for `claims`: `errors` is each answered claim UID with its error
/// (empty when it succeeded).
pub fn check_answer<S: BuildHasher>(
    call: Call,
    claims: &[ClaimCall],
    errors: &HashMap<String, String, S>,
) -> Result<(), String> {
    let mut answered: Vec<(&String, &String)> = errors.iter().collect();
    answered.sort();
    for (uid, error) in answered {
        let Some(asked) = claims.iter().find(|c| c.uid == *uid) else {
            return Err(format!(
                "{} returned result for unknown claim UID {uid}",
                call.name()
            ));
        };
        if !error.is_empty() {
            return Err(format!(
                "{} failed for ResourceClaim {}: {error}",
                call.name(),
                asked.name
            ));
        }
    }
    let skipped = claims.len().saturating_sub(errors.len());
    if skipped > 0 {
        return Err(format!("{} skipped {skipped} ResourceClaims", call.name()));
    }
    Ok(())
}

/// Makes `call` for `claims` over `service` and checks the answer (see [`check_answer`]).
pub async fn call(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
    timeout: Duration,
) -> Result<(), String> {
    let answer = tokio::time::timeout(timeout, send(channel, service, call, claims))
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("context deadline exceeded")))
        .map_err(|status| format!("{}: {}", call.name(), grpc_error(&status)))?;
    check_answer(call, claims, &answer)
}

async fn send(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
) -> Result<HashMap<String, String>, Status> {
    match service {
        Service::V1 => {
            let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);
            let claims: Vec<v1::Claim> = claims
                .iter()
                .map(|c| v1::Claim {
                    namespace: c.namespace.clone(),
                    uid: c.uid.clone(),
                    name: c.name.clone(),
                })
                .collect();
            Ok(match call {
                Call::Prepare => client
                    .node_prepare_resources(v1::NodePrepareResourcesRequest { claims })
                    .await?
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, r.error))
                    .collect(),
                Call::Unprepare => client
                    .node_unprepare_resources(v1::NodeUnprepareResourcesRequest { claims })
                    .await?
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, r.error))
                    .collect(),
            })
        }
        Service::V1Beta1 => {
            let mut client = v1beta1::dra_plugin_client::DraPluginClient::new(channel);
            let claims: Vec<v1beta1::Claim> = claims
                .iter()
                .map(|c| v1beta1::Claim {
                    namespace: c.namespace.clone(),
                    uid: c.uid.clone(),
                    name: c.name.clone(),
                })
                .collect();
            Ok(match call {
                Call::Prepare => client
                    .node_prepare_resources(v1beta1::NodePrepareResourcesRequest { claims })
                    .await?
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, r.error))
                    .collect(),
                Call::Unprepare => client
                    .node_unprepare_resources(v1beta1::NodeUnprepareResourcesRequest { claims })
                    .await?
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, r.error))
                    .collect(),
            })
        }
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
            check_answer(Call::Prepare, &claims, &answer(&[("a", "no such GPU")])).unwrap_err(),
            "NodePrepareResources failed for ResourceClaim claim-a: no such GPU"
        );
        assert_eq!(
            check_answer(Call::Unprepare, &claims, &answer(&[("a", "busy")])).unwrap_err(),
            "NodeUnprepareResources failed for ResourceClaim claim-a: busy"
        );
    }

    #[test]
    fn unknown_and_missing_claims_fail_the_batch() {
        let claims = calls(&["a", "b"]);
        assert_eq!(
            check_answer(Call::Prepare, &claims, &answer(&[("a", ""), ("zz", "")])).unwrap_err(),
            "NodePrepareResources returned result for unknown claim UID zz"
        );
        assert_eq!(
            check_answer(Call::Unprepare, &claims, &answer(&[("b", "")])).unwrap_err(),
            "NodeUnprepareResources skipped 1 ResourceClaims"
        );
    }

    #[test]
    fn grpc_errors_read_as_grpc_go_prints_them() {
        assert_eq!(
            grpc_error(&Status::unavailable("connection refused")),
            "rpc error: code = Unavailable desc = connection refused"
        );
        assert_eq!(
            grpc_error(&Status::cancelled("gone")),
            "rpc error: code = Canceled desc = gone"
        );
    }
}
