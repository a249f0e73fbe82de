//! The Kubernetes 1.30 `v1alpha3.Node` service on the plugin socket: prepare and unprepare of
//! claim batches over a [`ClaimPreparer`], and the stream of the node's resources.
//!
//! A batch answers one entry per claim UID of the request; a claim that fails carries its error
//! in its own entry and the call itself succeeds, because the kubelet discards the whole answer
//! of a failed call. The preparer blocks (it commits to disk), so it runs on the blocking pool.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::batch::{log_outcome, nonempty, to_map, Batch, Call};
use super::resources;
use crate::device::Inventory;
use crate::prepare::{ClaimPreparer, ClaimRequest};
use dra_types::kubelet::v1alpha3::node_server::Node;
use dra_types::kubelet::v1alpha3::{
    NodeListAndWatchResourcesRequest, NodeListAndWatchResourcesResponse,
    NodePrepareResourceResponse, NodePrepareResourcesRequest, NodePrepareResourcesResponse,
    NodeUnprepareResourceResponse, NodeUnprepareResourcesRequest, NodeUnprepareResourcesResponse,
};

/// One blocking call of the preparer: `ClaimPreparer::prepare` or `ClaimPreparer::unprepare`.
type PreparerCall<P, A> = fn(&P, &[ClaimRequest]) -> Vec<(String, A)>;

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

    /// Runs `call` of the preparer on the blocking pool with the batch's requests.
    async fn run<A: Send + 'static>(
        &self,
        batch: &Batch,
        call: PreparerCall<P, A>,
    ) -> std::result::Result<Vec<(String, A)>, String> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let preparer = Arc::clone(&self.preparer);
        let requests = batch.requests.clone();
        tokio::task::spawn_blocking(move || call(&preparer, &requests))
            .await
            .map_err(|error| {
                tracing::error!(%error, "The preparer did not finish");
                error.to_string()
            })
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
        let span = tracing::info_span!("prepare", claims = claims.len());
        async {
            let batch = Batch::new(Call::Prepare, claims);
            let answers = self.run(&batch, P::prepare).await;
            let claims = match answers {
                Ok(answers) => batch.answer(
                    answers
                        .into_iter()
                        .map(|(uid, r)| (uid, r.map_err(|e| e.to_string())))
                        .collect(),
                    |uid| Err(format!("claim {uid}: the preparer gave no answer")),
                    prepare_reply,
                    prepare_refused,
                ),
                Err(error) => {
                    let failed =
                        |uid: &str| Err(format!("claim {uid}: prepare did not finish: {error}"));
                    batch.answer(Vec::new(), failed, prepare_reply, prepare_refused)
                }
            };
            log_outcome(
                "prepare",
                claims.iter().map(|(uid, r)| (uid, r.error.as_str())),
            );
            Ok(Response::new(NodePrepareResourcesResponse {
                claims: to_map(claims),
            }))
        }
        .instrument(span)
        .await
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<NodeUnprepareResourcesRequest>,
    ) -> std::result::Result<Response<NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims;
        let span = tracing::info_span!("unprepare", claims = claims.len());
        async {
            let batch = Batch::new(Call::Unprepare, claims);
            let answers = self.run(&batch, P::unprepare).await;
            let claims = match answers {
                Ok(answers) => batch.answer(
                    answers
                        .into_iter()
                        .map(|(uid, r)| (uid, r.map_err(|e| e.to_string())))
                        .collect(),
                    |uid| Err(format!("claim {uid}: the preparer gave no answer")),
                    unprepare_reply,
                    unprepare_refused,
                ),
                Err(error) => {
                    let failed =
                        |uid: &str| Err(format!("claim {uid}: unprepare did not finish: {error}"));
                    batch.answer(Vec::new(), failed, unprepare_reply, unprepare_refused)
                }
            };
            log_outcome(
                "unprepare",
                claims.iter().map(|(uid, r)| (uid, r.error.as_str())),
            );
            Ok(Response::new(NodeUnprepareResourcesResponse {
                claims: to_map(claims),
            }))
        }
        .instrument(span)
        .await
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

fn prepare_reply(answer: std::result::Result<Vec<String>, String>) -> NodePrepareResourceResponse {
    match answer {
        Ok(cdi_devices) => NodePrepareResourceResponse {
            cdi_devices,
            error: String::new(),
        },
        Err(error) => prepare_refused(error),
    }
}

fn prepare_refused(error: String) -> NodePrepareResourceResponse {
    NodePrepareResourceResponse {
        cdi_devices: Vec::new(),
        error: nonempty(error),
    }
}

fn unprepare_reply(answer: std::result::Result<(), String>) -> NodeUnprepareResourceResponse {
    match answer {
        Ok(()) => NodeUnprepareResourceResponse {
            error: String::new(),
        },
        Err(error) => unprepare_refused(error),
    }
}

fn unprepare_refused(error: String) -> NodeUnprepareResourceResponse {
    NodeUnprepareResourceResponse {
        error: nonempty(error),
    }
}
