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

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Call::Prepare => "NodePrepareResources",
            Call::Unprepare => "NodeUnprepareResources",
        })
    }
}

/// The claim of `claims` that an answer's `uid` is for; an answer for a claim that was not asked
/// for fails the call.
pub(super) fn asked<'a>(
    call: Call,
    claims: &'a [ClaimCall],
    uid: &str,
) -> Result<&'a ClaimCall, CallError> {
    claims
        .iter()
        .find(|c| c.uid == uid)
        .ok_or_else(|| CallError::UnknownClaim {
            call,
            uid: uid.to_owned(),
        })
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
        let claim = asked(call, claims, uid)?;
        if !error.is_empty() {
            return Err(CallError::ResourceClaimFailed {
                call,
                name: claim.name.clone(),
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

/// A device a plugin prepared for a claim, as the kubelet keeps it for the claim (its health
/// is reported per device, under the first CDI device ID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreparedDevice {
    /// The pool.
    pub pool: String,
    /// The device's name in the pool.
    pub device: String,
    /// The CDI device IDs the plugin answered.
    pub cdi_ids: Vec<String>,
    /// Which share of a multi-allocation device the plugin prepared (`v1` answers name it, as
    /// the kubelet keeps it from the answer; the request carries claims only).
    pub share_id: Option<String>,
}

/// The share ID of a device in a prepare answer: `v1` (1.35+) has the field, `v1beta1` not.
trait AnsweredShare {
    fn share(&mut self) -> Option<String>;
}

impl AnsweredShare for v1::Device {
    fn share(&mut self) -> Option<String> {
        self.share_id.take()
    }
}

impl AnsweredShare for v1beta1::Device {
    fn share(&mut self) -> Option<String> {
        None
    }
}

/// Each answered claim UID with its error and, for a prepare, its devices.
type Answer = HashMap<String, (String, Vec<PreparedDevice>)>;

/// Makes `call` for `claims` over `service` and checks the answer (see [`check_answer`]);
/// returns the devices the plugin prepared, by claim UID (none for an unprepare).
pub(crate) async fn call(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
    timeout: Duration,
) -> Result<HashMap<String, Vec<PreparedDevice>>, CallError> {
    let answer = tokio::time::timeout(timeout, send(channel, service, call, claims))
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("context deadline exceeded")))
        .map_err(|status| CallError::Rpc { call, status })?;
    let errors: HashMap<String, String> = answer
        .iter()
        .map(|(uid, (error, _))| (uid.clone(), error.clone()))
        .collect();
    check_answer(call, claims, &errors)?;
    Ok(answer
        .into_iter()
        .map(|(uid, (_, devices))| (uid, devices))
        .collect())
}

/// Sends a [`Call`] with `$claims` (the package's `Claim` messages) through `$client` of the
/// kubelet plugin API package `$api` (`v1alpha3`, `v1` or `v1beta1`: the same calls apart from
/// the package) and returns each answered claim UID with its error; `?` returns the gRPC status.
macro_rules! send_call {
    ($api:ident, $client:expr, $call:expr, $claims:expr) => {{
        use $crate::actors::plugins::calls::Call;
        let (mut client, claims) = ($client, $claims);
        match $call {
            Call::Prepare => claim_errors!(
                client.node_prepare_resources($api::NodePrepareResourcesRequest { claims })
            ),
            Call::Unprepare => claim_errors!(
                client.node_unprepare_resources($api::NodeUnprepareResourcesRequest { claims })
            ),
        }
    }};
}

/// Each answered claim UID of a call's `$answer` with its error.
macro_rules! claim_errors {
    ($answer:expr) => {
        $answer
            .await?
            .into_inner()
            .claims
            .into_iter()
            .map(|(uid, r)| (uid, r.error))
            .collect::<std::collections::HashMap<String, String>>()
    };
}
pub(super) use claim_errors;
pub(super) use send_call;

async fn send(
    channel: Channel,
    service: Service,
    call: Call,
    claims: &[ClaimCall],
) -> Result<Answer, Status> {
    /// `v1` and `v1beta1` take a claim as `Claim{namespace, uid, name}` and answer a prepare
    /// with the devices of each claim.
    macro_rules! over {
        ($api:ident) => {{
            let mut client = $api::dra_plugin_client::DraPluginClient::new(channel);
            let claims: Vec<$api::Claim> = claims
                .iter()
                .map(|c| $api::Claim {
                    namespace: c.namespace.clone(),
                    uid: c.uid.clone(),
                    name: c.name.clone(),
                })
                .collect();
            match call {
                Call::Prepare => Ok(client
                    .node_prepare_resources($api::NodePrepareResourcesRequest { claims })
                    .await?
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|(uid, r)| {
                        let devices = r
                            .devices
                            .into_iter()
                            .map(|mut d| PreparedDevice {
                                share_id: d.share(),
                                pool: d.pool_name,
                                device: d.device_name,
                                cdi_ids: d.cdi_device_ids,
                            })
                            .collect();
                        (uid, (r.error, devices))
                    })
                    .collect()),
                Call::Unprepare => {
                    Ok(claim_errors!(client
                        .node_unprepare_resources($api::NodeUnprepareResourcesRequest { claims }))
                    .into_iter()
                    .map(|(uid, error)| (uid, (error, Vec::new())))
                    .collect())
                }
            }
        }};
    }
    match service {
        Service::V1 => over!(v1),
        Service::V1Beta1 => over!(v1beta1),
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
