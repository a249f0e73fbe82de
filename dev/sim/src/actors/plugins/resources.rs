//! A registered plugin's `NodeListAndWatchResources` stream turned into the node's
//! `resource.k8s.io/v1alpha2` `ResourceSlices`, as the 1.30 kubelet does: each message replaces the
//! driver's slices of the node (writes planned by [`super::slices::plan`]); `UNIMPLEMENTED` or the
//! end of the stream stops the monitoring, other errors reopen the stream after a wait; the slices
//! are deleted when the plugin is deregistered (`delete_all`).
//!
//! I/O only; conversion and diffing live in the slices module.

use std::time::Duration;

use dra_types::kubelet::v1alpha3::node_client::NodeClient;
use dra_types::kubelet::v1alpha3::NodeListAndWatchResourcesRequest;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1alpha2::ResourceSlice;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use tonic::transport::Channel;
use tonic::Code;

use super::slices::{models, new_slice, plan, Model, SliceChange};
use crate::actors::error::{is_not_found, ActorError, Result};
use crate::actors::writes::with_retry;

/// The wait before slices that could not be written are written again.
const SYNC_RETRY: Duration = Duration::from_secs(1);

/// Follows `driver`'s resource stream over `channel` until it ends for good or the task is
/// aborted, keeping the node's slices of the driver equal to the last message.
pub(super) async fn monitor(
    client: Client,
    node: String,
    driver: String,
    channel: Channel,
    retry: Duration,
) {
    loop {
        let mut grpc = NodeClient::new(channel.clone());
        let mut stream = match grpc
            .node_list_and_watch_resources(NodeListAndWatchResourcesRequest {})
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::Unimplemented => {
                tracing::info!(%node, %driver, "The plugin does not publish resources");
                return;
            }
            Err(status) => {
                tracing::warn!(%node, %driver, %status, ?retry, "Cannot open the resource stream");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let mut pending: Option<Vec<Model>> = None;
        loop {
            let next = if pending.is_some() {
                tokio::select! {
                    next = stream.next() => Some(next),
                    () = tokio::time::sleep(SYNC_RETRY) => None,
                }
            } else {
                Some(stream.next().await)
            };
            match next {
                None => {}
                Some(Some(Ok(message))) => pending = Some(models(&message.resources)),
                Some(None) => {
                    tracing::info!(%node, %driver, "The resource stream ended");
                    return;
                }
                Some(Some(Err(status))) if status.code() == Code::Unimplemented => {
                    tracing::info!(%node, %driver, "The plugin does not publish resources");
                    return;
                }
                Some(Some(Err(status))) => {
                    tracing::warn!(%node, %driver, %status, ?retry, "The resource stream failed");
                    tokio::time::sleep(retry).await;
                    break;
                }
            }
            if let Some(wanted) = &pending {
                match sync(&client, &node, &driver, wanted).await {
                    Ok(()) => pending = None,
                    Err(error) => {
                        tracing::warn!(%node, %driver, %error, "Failed to write the resource slices");
                    }
                }
            }
        }
    }
}

fn slices_of(client: &Client) -> Api<ResourceSlice> {
    Api::all(client.clone())
}

/// The node's slices of the driver as stored.
async fn stored(client: &Client, node: &str, driver: &str) -> Result<Vec<ResourceSlice>> {
    let api = slices_of(client);
    let params = ListParams::default().fields(&format!("nodeName={node},driverName={driver}"));
    let list = with_retry(&format!("list resource slices of {node}"), || {
        api.list(&params)
    })
    .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|s| s.node_name.as_deref() == Some(node) && s.driver_name == driver)
        .collect())
}

/// Brings the node's slices of `driver` to `wanted`.
async fn sync(client: &Client, node: &str, driver: &str, wanted: &[Model]) -> Result<()> {
    let api = slices_of(client);
    let existing = stored(client, node, driver).await?;
    let named: Vec<(String, Model)> = existing
        .iter()
        .map(|s| {
            (
                s.metadata.name.clone().unwrap_or_default(),
                s.named_resources.clone(),
            )
        })
        .collect();
    let changes = plan(&named, wanted);
    if changes.is_empty() {
        return Ok(());
    }
    let mut node_uid = None;
    let params = PostParams::default();
    for change in changes {
        match change {
            SliceChange::Create(model) => {
                if node_uid.is_none() {
                    let nodes: Api<Node> = Api::all(client.clone());
                    let object =
                        with_retry(&format!("get node {node}"), || nodes.get(node)).await?;
                    node_uid = Some(object.metadata.uid.unwrap_or_default());
                }
                let slice = new_slice(node, node_uid.as_deref().unwrap_or_default(), driver, model);
                with_retry(&format!("create a resource slice of {node}"), || {
                    api.create(&params, &slice)
                })
                .await?;
            }
            SliceChange::Update(name, model) => {
                let Some(mut slice) = existing
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                    .cloned()
                else {
                    continue;
                };
                slice.named_resources = model;
                match api.replace(&name, &params, &slice).await {
                    Ok(_) => {}
                    Err(error) => {
                        return Err(ActorError::api(
                            format!("update resource slice {name}"),
                            error,
                        ))
                    }
                }
            }
            SliceChange::Delete(name) => delete(&api, &name).await?,
        }
    }
    tracing::debug!(%node, %driver, slices = wanted.len(), "Resource slices written");
    Ok(())
}

async fn delete(api: &Api<ResourceSlice>, name: &str) -> Result<()> {
    let params = DeleteParams::default();
    match with_retry(&format!("delete resource slice {name}"), || {
        api.delete(name, &params)
    })
    .await
    {
        Ok(_) => Ok(()),
        Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Deletes every slice of `driver` on `node`.
pub(super) async fn delete_all(client: &Client, node: &str, driver: &str) -> Result<()> {
    let api = slices_of(client);
    for slice in stored(client, node, driver).await? {
        if let Some(name) = &slice.metadata.name {
            delete(&api, name).await?;
        }
    }
    Ok(())
}
