//! The v1 kubelet services on the plugin socket (Kubernetes 1.34+):
//! `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` ([`DraService`]) and the wire-identical
//! `...v1beta1.DRAPlugin` ([`DraServiceV1beta1`], the same calls with the messages converted).
//!
//! A prepare request names claims only (`namespace`, `uid`, `name`): each claim is read from the
//! API server through a [`ClaimSource`], checked ([`crate::v1::allocation`]) and its devices
//! of this driver in this node's pool go to the same [`ClaimPreparer`] the 1.30 service uses.
//! The answer has one entry per claim UID of the request: the claim's error, or one `Device` per
//! allocated result of ours on this node with its request name (a subrequest `req/sub` answered
//! as `req`, as the upstream kubelet-plugin helper does), pool, device and the claim's CDI
//! device ID. A claim that fails never fails the call. Unprepare needs the UID only.

use std::sync::Arc;

use futures::future::join_all;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::batch::{log_outcome, nonempty, to_map, Batch};
use crate::metrics::{NodeMetrics, Outcome};
use crate::prepare::{ClaimPreparer, ClaimRequest};
use crate::v1::allocation::{node_allocation, ClaimError, NodeAllocation};
use crate::v1::claims::ClaimSource;
use crate::v1::config::base_request;
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};

/// The `v1.DRAPlugin` service.
pub struct DraService<P> {
    preparer: Arc<P>,
    claims: Arc<dyn ClaimSource>,
    driver: String,
    node: String,
    metrics: Option<NodeMetrics>,
}

impl<P> std::fmt::Debug for DraService<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraService")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// One claim's answer before it becomes a message: its devices, or its error text.
type Answer = Result<Vec<v1::Device>, String>;

impl<P: ClaimPreparer> DraService<P> {
    /// The service of `driver` on node `node` (whose pool is named after it), reading claims
    /// from `claims` and preparing them with `preparer`.
    pub fn new(
        preparer: Arc<P>,
        claims: Arc<dyn ClaimSource>,
        driver: impl Into<String>,
        node: impl Into<String>,
    ) -> Self {
        DraService {
            preparer,
            claims,
            driver: driver.into(),
            node: node.into(),
            metrics: None,
        }
    }

    /// Counts claims refused before the preparer (not found, not ours, bad configuration) in
    /// `metrics` as failed prepares, as the preparer's own refusals are.
    #[must_use]
    pub fn with_metrics(mut self, metrics: NodeMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Reads the claim of `request` and what it asks this node to prepare.
    async fn read(&self, request: &ClaimRequest) -> Result<NodeAllocation, ClaimError> {
        let claim = self
            .claims
            .get(&request.namespace, &request.name)
            .await
            .map_err(|source| ClaimError::Read {
                namespace: request.namespace.clone(),
                name: request.name.clone(),
                source: Box::new(source),
            })?;
        node_allocation(request, claim.as_ref(), &self.driver, &self.node)
    }

    /// Prepares the claims of one request; one answer per claim UID.
    pub async fn prepare(&self, claims: Vec<v1::Claim>) -> v1::NodePrepareResourcesResponse {
        let batch = Batch::of_requests(claims.into_iter().map(request_of).collect());
        let read = join_all(batch.requests.iter().map(|r| self.read(r))).await;
        let mut answers: Vec<(String, Answer)> = Vec::new();
        let mut allocations = Vec::new();
        for (request, read) in batch.requests.iter().zip(read) {
            match read {
                Ok(allocation) => allocations.push(allocation),
                Err(error) => {
                    if let Some(metrics) = &self.metrics {
                        metrics.prepared(Outcome::Error);
                    }
                    answers.push((request.uid.clone(), Err(error.to_string())));
                }
            }
        }
        if !allocations.is_empty() {
            let preparer = Arc::clone(&self.preparer);
            let to_prepare: Vec<_> = allocations.iter().map(NodeAllocation::to_claim).collect();
            match tokio::task::spawn_blocking(move || preparer.prepare_allocated(&to_prepare)).await
            {
                Ok(outcomes) => {
                    for (uid, result) in outcomes {
                        let answer = match allocations.iter().find(|a| a.uid == uid) {
                            Some(allocation) => result
                                .map(|cdi_ids| devices(allocation, &cdi_ids))
                                .map_err(|e| e.to_string()),
                            None => continue,
                        };
                        answers.push((uid, answer));
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "The preparer did not finish");
                    for allocation in &allocations {
                        let text =
                            format!("claim {}: prepare did not finish: {error}", allocation.uid);
                        answers.push((allocation.uid.clone(), Err(text)));
                    }
                }
            }
        }
        let claims = batch.answer(
            answers,
            |uid| Err(format!("claim {uid}: the preparer gave no answer")),
            prepare_reply,
            |error| prepare_reply(Err(error)),
        );
        log_outcome(
            "prepare",
            claims.iter().map(|(uid, r)| (uid, r.error.as_str())),
        );
        v1::NodePrepareResourcesResponse {
            claims: to_map(claims),
        }
    }

    /// Unprepares the claims of one request; one answer per claim UID (an unknown one is
    /// success).
    pub async fn unprepare(&self, claims: Vec<v1::Claim>) -> v1::NodeUnprepareResourcesResponse {
        let batch = Batch::of_requests(claims.into_iter().map(request_of).collect());
        let answers = if batch.is_empty() {
            Vec::new()
        } else {
            let preparer = Arc::clone(&self.preparer);
            let requests = batch.requests.clone();
            match tokio::task::spawn_blocking(move || preparer.unprepare(&requests)).await {
                Ok(answers) => answers
                    .into_iter()
                    .map(|(uid, r)| (uid, r.map_err(|e| e.to_string())))
                    .collect(),
                Err(error) => {
                    tracing::error!(%error, "The preparer did not finish");
                    batch
                        .requests
                        .iter()
                        .map(|r| {
                            let text =
                                format!("claim {}: unprepare did not finish: {error}", r.uid);
                            (r.uid.clone(), Err(text))
                        })
                        .collect()
                }
            }
        };
        let claims = batch.answer(
            answers,
            |uid| Err(format!("claim {uid}: the preparer gave no answer")),
            unprepare_reply,
            |error| unprepare_reply(Err(error)),
        );
        log_outcome(
            "unprepare",
            claims.iter().map(|(uid, r)| (uid, r.error.as_str())),
        );
        v1::NodeUnprepareResourcesResponse {
            claims: to_map(claims),
        }
    }
}

/// The claim of a v1 request as the preparer's request (no resource handle).
fn request_of(claim: v1::Claim) -> ClaimRequest {
    ClaimRequest {
        uid: claim.uid,
        namespace: claim.namespace,
        name: claim.name,
        resource_handle: String::new(),
    }
}

/// The answer's devices of a prepared claim: one per allocated result of ours on this node,
/// each with the claim's CDI device IDs.
pub fn devices(allocation: &NodeAllocation, cdi_ids: &[String]) -> Vec<v1::Device> {
    allocation
        .results
        .iter()
        .map(|result| v1::Device {
            request_names: vec![base_request(&result.request).to_owned()],
            pool_name: result.pool.clone(),
            device_name: result.device.clone(),
            cdi_device_ids: cdi_ids.to_vec(),
            share_id: None,
        })
        .collect()
}

fn prepare_reply(answer: Answer) -> v1::NodePrepareResourceResponse {
    match answer {
        Ok(devices) => v1::NodePrepareResourceResponse {
            devices,
            error: String::new(),
        },
        Err(error) => v1::NodePrepareResourceResponse {
            devices: Vec::new(),
            error: nonempty(error),
        },
    }
}

fn unprepare_reply(answer: Result<(), String>) -> v1::NodeUnprepareResourceResponse {
    v1::NodeUnprepareResourceResponse {
        error: answer.err().map(nonempty).unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl<P: ClaimPreparer> v1::dra_plugin_server::DraPlugin for DraService<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let span = tracing::info_span!("prepare", api = "v1", claims = claims.len());
        Ok(Response::new(self.prepare(claims).instrument(span).await))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let span = tracing::info_span!("unprepare", api = "v1", claims = claims.len());
        Ok(Response::new(self.unprepare(claims).instrument(span).await))
    }
}

/// The `v1beta1.DRAPlugin` service: [`DraService`] behind the v1beta1 messages (the same fields
/// but `share_id`, which this driver never sets).
pub struct DraServiceV1beta1<P>(pub Arc<DraService<P>>);

impl<P> std::fmt::Debug for DraServiceV1beta1<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DraServiceV1beta1").field(&self.0).finish()
    }
}

fn v1_claim(claim: v1beta1::Claim) -> v1::Claim {
    v1::Claim {
        namespace: claim.namespace,
        uid: claim.uid,
        name: claim.name,
    }
}

fn v1beta1_device(device: v1::Device) -> v1beta1::Device {
    v1beta1::Device {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
    }
}

#[tonic::async_trait]
impl<P: ClaimPreparer> v1beta1::dra_plugin_server::DraPlugin for DraServiceV1beta1<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let claims: Vec<v1::Claim> = request
            .into_inner()
            .claims
            .into_iter()
            .map(v1_claim)
            .collect();
        let span = tracing::info_span!("prepare", api = "v1beta1", claims = claims.len());
        let answer = self.0.prepare(claims).instrument(span).await;
        let claims = answer
            .claims
            .into_iter()
            .map(|(uid, claim)| {
                let claim = v1beta1::NodePrepareResourceResponse {
                    devices: claim.devices.into_iter().map(v1beta1_device).collect(),
                    error: claim.error,
                };
                (uid, claim)
            })
            .collect();
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse {
            claims,
        }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let claims: Vec<v1::Claim> = request
            .into_inner()
            .claims
            .into_iter()
            .map(v1_claim)
            .collect();
        let span = tracing::info_span!("unprepare", api = "v1beta1", claims = claims.len());
        let answer = self.0.unprepare(claims).instrument(span).await;
        let claims = answer
            .claims
            .into_iter()
            .map(|(uid, claim)| {
                let claim = v1beta1::NodeUnprepareResourceResponse { error: claim.error };
                (uid, claim)
            })
            .collect();
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse {
            claims,
        }))
    }
}

#[cfg(test)]
mod tests;
