//! The Kubernetes 1.30 `v1alpha3.Node` service on the plugin socket: prepare and unprepare of
//! claim batches over a [`ClaimPreparer`], and the stream of the node's resources.
//!
//! A batch answers one entry per claim UID of the request; a claim that fails carries its error
//! in its own entry and the call itself succeeds, because the kubelet discards the whole answer
//! of a failed call. The messages are converted here; the call itself is [`super::calls`]'s.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::batch::{Batch, Call};
use super::calls::{self, Outcome, PreparerCall};
use super::resources;
use crate::device::Inventory;
use crate::prepare::{ClaimPreparer, ClaimRequest};
use dra_types::kubelet::v1alpha3::node_server::Node;
use dra_types::kubelet::v1alpha3::{
    Claim, NodeListAndWatchResourcesRequest, NodeListAndWatchResourcesResponse,
    NodePrepareResourceResponse, NodePrepareResourcesRequest, NodePrepareResourcesResponse,
    NodeUnprepareResourceResponse, NodeUnprepareResourcesRequest, NodeUnprepareResourcesResponse,
};

/// The `v1alpha3.Node` service.
pub struct NodeService<P> {
    preparer: Arc<P>,
    inventory: watch::Receiver<Inventory>,
    stop: watch::Receiver<bool>,
}

impl<P> std::fmt::Debug for NodeService<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeService").finish_non_exhaustive()
    }
}

impl<P: ClaimPreparer> NodeService<P> {
    /// The service over `preparer`, streaming `inventory`; its streams end when `stop` turns
    /// true, so that a graceful stop does not wait for the kubelet to hang up.
    pub fn new(
        preparer: Arc<P>,
        inventory: watch::Receiver<Inventory>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        NodeService {
            preparer,
            inventory,
            stop,
        }
    }

    /// `call` of the claims of a request through [`calls::run`], each claim's outcome made its
    /// answer message by `reply`.
    async fn call<R: Send + 'static, M>(
        &self,
        call: Call,
        claims: Vec<Claim>,
        work: PreparerCall<P, ClaimRequest, R>,
        reply: fn(Outcome<R>) -> M,
    ) -> HashMap<String, M> {
        let span = calls::span(call, None, claims.len());
        let batch = Batch::new(call, claims);
        let outcomes = calls::run(&self.preparer, batch, work, |_, given| given)
            .instrument(span)
            .await;
        calls::replies(outcomes, reply)
    }
}

/// The stream of `NodeListAndWatchResources`.
pub type ResourceStream = Pin<
    Box<dyn Stream<Item = std::result::Result<NodeListAndWatchResourcesResponse, Status>> + Send>,
>;

#[tonic::async_trait]
impl<P: ClaimPreparer> Node for NodeService<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<NodePrepareResourcesRequest>,
    ) -> std::result::Result<Response<NodePrepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let claims = self
            .call(Call::Prepare, claims, P::prepare, prepare_reply)
            .await;
        Ok(Response::new(NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<NodeUnprepareResourcesRequest>,
    ) -> std::result::Result<Response<NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let claims = self
            .call(Call::Unprepare, claims, P::unprepare, unprepare_reply)
            .await;
        Ok(Response::new(NodeUnprepareResourcesResponse { claims }))
    }

    type NodeListAndWatchResourcesStream = ResourceStream;

    async fn node_list_and_watch_resources(
        &self,
        _request: Request<NodeListAndWatchResourcesRequest>,
    ) -> std::result::Result<Response<ResourceStream>, Status> {
        tracing::info!("The kubelet opened the resource stream");
        Ok(Response::new(resource_stream(
            self.inventory.clone(),
            self.stop.clone(),
        )))
    }
}

/// The inventory now, then again after every change, until `stop`. When the inventory's sender
/// is gone the stream stays open without messages (an ended stream would make a 1.30 kubelet
/// stop watching for good).
pub fn resource_stream(
    inventory: watch::Receiver<Inventory>,
    stop: watch::Receiver<bool>,
) -> ResourceStream {
    let stream = futures::stream::unfold(
        (inventory, stop, true),
        |(mut inventory, mut stop, first)| async move {
            if !first {
                tokio::select! {
                    changed = inventory.changed() => {
                        if changed.is_err() {
                            super::stopped(stop).await;
                            return None;
                        }
                    }
                    () = super::stopped(stop.clone()) => return None,
                }
            }
            if *stop.borrow_and_update() {
                return None;
            }
            let message = resources::list_response(&inventory.borrow_and_update());
            tracing::debug!(
                resources = message.resources.len(),
                "Sending the node's resources"
            );
            Some((Ok(message), (inventory, stop, false)))
        },
    );
    Box::pin(stream)
}

fn prepare_reply(outcome: Outcome<Vec<String>>) -> NodePrepareResourceResponse {
    let (cdi_devices, error) = calls::message_parts(outcome);
    NodePrepareResourceResponse { cdi_devices, error }
}

fn unprepare_reply(outcome: Outcome<()>) -> NodeUnprepareResourceResponse {
    let ((), error) = calls::message_parts(outcome);
    NodeUnprepareResourceResponse { error }
}
