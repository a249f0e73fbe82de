//! The v1 kubelet services on the plugin socket (Kubernetes 1.34+):
//! `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` ([`DraService`]) and the wire-identical
//! `...v1beta1.DRAPlugin` ([`DraServiceV1beta1`], the same calls with the messages converted).
//!
//! A prepare request names claims only (`namespace`, `uid`, `name`): each claim is read from the
//! API server through a [`ClaimSource`], checked ([`crate::v1::allocation`]) and its devices
//! of this driver in this node's pool go to the same [`ClaimPreparer`] the 1.30 service uses.
//! The answer has one entry per claim UID of the request: the claim's error, or one `Device` per
//! allocated result of ours on this node with its request name (a subrequest `req/sub` answered
//! as `req`, as the upstream kubelet-plugin helper does), pool, device, the claim's CDI
//! device ID and, for a share of a device allocated to several claims, the result's share ID
//! (which the kubelet keeps with the device; v1beta1 has no such field). A claim that fails never fails the call. Unprepare needs the UID only.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::batch::{Batch, BatchClaim, Call};
use super::calls;
use crate::metrics::{NodeMetrics, Outcome};
use crate::prepare::{ClaimPreparer, ClaimRequest, PrepareError};
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

    /// Reads the claim of every request of `batch` and what it asks of this node; a claim that
    /// cannot be read or prepared here joins the refused ones (counted as a failed prepare).
    async fn read_all(&self, batch: Batch) -> Batch<NodeAllocation> {
        let read = join_all(batch.requests.iter().map(|r| self.read(r))).await;
        if let Some(metrics) = &self.metrics {
            for _ in read.iter().filter(|r| r.is_err()) {
                metrics.prepared(Outcome::Error);
            }
        }
        batch.narrowed(read)
    }

    /// Prepares the claims of one request; one answer per claim UID.
    pub async fn prepare(&self, claims: Vec<v1::Claim>) -> v1::NodePrepareResourcesResponse {
        let batch = Batch::of_requests(Call::Prepare, claims.into_iter().map(request_of).collect());
        let batch = self.read_all(batch).await;
        let outcomes = calls::run(
            &self.preparer,
            batch,
            prepare_allocated,
            |allocation, ids| devices(allocation, &ids),
        )
        .await;
        v1::NodePrepareResourcesResponse {
            claims: calls::replies(outcomes, |outcome| {
                let (devices, error) = calls::message_parts(outcome);
                v1::NodePrepareResourceResponse { devices, error }
            }),
        }
    }

    /// Unprepares the claims of one request; one answer per claim UID (an unknown one is
    /// success).
    pub async fn unprepare(&self, claims: Vec<v1::Claim>) -> v1::NodeUnprepareResourcesResponse {
        let batch = Batch::of_requests(
            Call::Unprepare,
            claims.into_iter().map(request_of).collect(),
        );
        let outcomes = calls::run(&self.preparer, batch, P::unprepare, |_, ()| ()).await;
        v1::NodeUnprepareResourcesResponse {
            claims: calls::replies(outcomes, |outcome| {
                let ((), error) = calls::message_parts(outcome);
                v1::NodeUnprepareResourceResponse { error }
            }),
        }
    }
}

impl BatchClaim for NodeAllocation {
    fn uid(&self) -> &str {
        &self.uid
    }
}

/// The preparer's call for claims read from the API server: their devices on this node.
fn prepare_allocated<P: ClaimPreparer>(
    preparer: &P,
    allocations: &[NodeAllocation],
) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
    let claims: Vec<_> = allocations.iter().map(NodeAllocation::to_claim).collect();
    preparer.prepare_allocated(&claims)
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
/// each with the claim's CDI device IDs and the result's share ID.
pub fn devices(allocation: &NodeAllocation, cdi_ids: &[String]) -> Vec<v1::Device> {
    allocation
        .results
        .iter()
        .map(|result| v1::Device {
            request_names: vec![base_request(&result.request).to_owned()],
            pool_name: result.pool.clone(),
            device_name: result.device.clone(),
            cdi_device_ids: cdi_ids.to_vec(),
            share_id: result.share_id.clone(),
        })
        .collect()
}

#[tonic::async_trait]
impl<P: ClaimPreparer> v1::dra_plugin_server::DraPlugin for DraService<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let span = calls::span(Call::Prepare, Some("v1"), claims.len());
        Ok(Response::new(self.prepare(claims).instrument(span).await))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let span = calls::span(Call::Unprepare, Some("v1"), claims.len());
        Ok(Response::new(self.unprepare(claims).instrument(span).await))
    }
}

/// The `v1beta1.DRAPlugin` service: [`DraService`] behind the v1beta1 messages (the same fields
/// but `share_id`, which v1beta1 does not carry).
pub struct DraServiceV1beta1<P>(pub Arc<DraService<P>>);

impl<P> std::fmt::Debug for DraServiceV1beta1<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DraServiceV1beta1").field(&self.0).finish()
    }
}

/// The claims of a v1beta1 request as v1 ones.
fn v1_claims(claims: Vec<v1beta1::Claim>) -> Vec<v1::Claim> {
    claims
        .into_iter()
        .map(|claim| v1::Claim {
            namespace: claim.namespace,
            uid: claim.uid,
            name: claim.name,
        })
        .collect()
}

/// Each claim's entry of a v1 answer as the v1beta1 one.
fn v1beta1_entries<A, B>(entries: HashMap<String, A>, entry: fn(A) -> B) -> HashMap<String, B> {
    entries
        .into_iter()
        .map(|(uid, answer)| (uid, entry(answer)))
        .collect()
}

fn v1beta1_prepared(
    answer: v1::NodePrepareResourceResponse,
) -> v1beta1::NodePrepareResourceResponse {
    let devices = answer.devices.into_iter().map(|device| v1beta1::Device {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
    });
    v1beta1::NodePrepareResourceResponse {
        devices: devices.collect(),
        error: answer.error,
    }
}

fn v1beta1_unprepared(
    answer: v1::NodeUnprepareResourceResponse,
) -> v1beta1::NodeUnprepareResourceResponse {
    v1beta1::NodeUnprepareResourceResponse {
        error: answer.error,
    }
}

#[tonic::async_trait]
impl<P: ClaimPreparer> v1beta1::dra_plugin_server::DraPlugin for DraServiceV1beta1<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let claims = v1_claims(request.into_inner().claims);
        let span = calls::span(Call::Prepare, Some("v1beta1"), claims.len());
        let answer = self.0.prepare(claims).instrument(span).await;
        let claims = v1beta1_entries(answer.claims, v1beta1_prepared);
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse {
            claims,
        }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let claims = v1_claims(request.into_inner().claims);
        let span = calls::span(Call::Unprepare, Some("v1beta1"), claims.len());
        let answer = self.0.unprepare(claims).instrument(span).await;
        let claims = v1beta1_entries(answer.claims, v1beta1_unprepared);
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse {
            claims,
        }))
    }
}

#[cfg(test)]
mod tests;
