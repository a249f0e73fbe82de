//! The `v1alpha1.DRAResourceHealth` service on the plugin socket (`v1` mode): the kubelet opens
//! `NodeWatchResources` once the plugin registered with the service in its
//! `supported_versions`, and gets the health of every device of this node's pool at once, then
//! again after every change of the health or the inventory, and at least every
//! [`RESEND`] (the kubelet counts a device whose health is older than its timeout, 30 s by
//! default, as Unknown). The kubelet writes it into
//! `pod.status.containerStatuses[].allocatedResourcesStatus` of the pods using the devices; when
//! the stream ends it forgets the driver's health (Unknown).
//!
//! [`response`] builds a message and is pure.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::chrono::{DateTime, Utc};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::device::Inventory;
use crate::health::{HealthMap, HealthState};
use dra_types::kubelet::v1alpha1::dra_resource_health_server::DraResourceHealth;
use dra_types::kubelet::v1alpha1::{
    DeviceHealth, DeviceIdentifier, HealthStatus, NodeWatchResourcesRequest,
    NodeWatchResourcesResponse,
};

/// The longest time between two messages of a stream.
pub const RESEND: Duration = Duration::from_secs(10);

/// The stream a `NodeWatchResources` call answers with.
pub type HealthStream =
    Pin<Box<dyn Stream<Item = Result<NodeWatchResourcesResponse, Status>> + Send + 'static>>;

/// The message for the devices of `inventory` in `pool` with `health` (a device without an
/// entry is healthy), determined at `now`.
pub fn response(
    pool: &str,
    inventory: &Inventory,
    health: &HealthMap,
    now: DateTime<Utc>,
) -> NodeWatchResourcesResponse {
    let devices = inventory
        .keys()
        .map(|name| {
            let health = health.get(name);
            let status = match health.map_or(HealthState::Healthy, |h| h.state) {
                HealthState::Healthy => HealthStatus::Healthy,
                HealthState::Unhealthy => HealthStatus::Unhealthy,
                HealthState::Unknown => HealthStatus::Unknown,
            };
            DeviceHealth {
                device: Some(DeviceIdentifier {
                    pool_name: pool.to_owned(),
                    device_name: name.clone(),
                }),
                health: status as i32,
                last_updated_time: now.timestamp(),
                health_check_timeout_seconds: 0,
                message: health.and_then(|h| h.message.clone()).unwrap_or_default(),
            }
        })
        .collect();
    NodeWatchResourcesResponse { devices }
}

/// The `v1alpha1.DRAResourceHealth` service of one node's pool.
#[derive(Clone, Debug)]
pub struct HealthService {
    pool: String,
    inventory: watch::Receiver<Inventory>,
    health: watch::Receiver<HealthMap>,
    stop: watch::Receiver<bool>,
}

impl HealthService {
    /// The service for the devices of `inventory` in `pool` (the node's name) with `health`; its
    /// streams end when `stop` turns true.
    pub fn new(
        pool: impl Into<String>,
        inventory: watch::Receiver<Inventory>,
        health: watch::Receiver<HealthMap>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        HealthService {
            pool: pool.into(),
            inventory,
            health,
            stop,
        }
    }

    /// The service with its streams also ending when `stop` turns true.
    #[must_use]
    pub fn with_stop(mut self, stop: watch::Receiver<bool>) -> Self {
        self.stop = stop;
        self
    }
}

/// What a stream holds between its messages.
struct Watch {
    service: HealthService,
    first: bool,
}

#[tonic::async_trait]
impl DraResourceHealth for HealthService {
    type NodeWatchResourcesStream = HealthStream;

    async fn node_watch_resources(
        &self,
        _request: Request<NodeWatchResourcesRequest>,
    ) -> Result<Response<HealthStream>, Status> {
        tracing::info!("The kubelet opened the health stream");
        let start = Watch {
            service: self.clone(),
            first: true,
        };
        let stream = futures::stream::unfold(start, |mut watch| async move {
            let service = &mut watch.service;
            if !watch.first {
                tokio::select! {
                    Ok(()) = service.inventory.changed() => {}
                    Ok(()) = service.health.changed() => {}
                    () = tokio::time::sleep(RESEND) => {}
                    () = super::stopped(service.stop.clone()) => return None,
                }
            }
            if *service.stop.borrow_and_update() {
                return None;
            }
            watch.first = false;
            let message = response(
                &service.pool,
                &service.inventory.borrow_and_update(),
                &service.health.borrow_and_update(),
                Utc::now(),
            );
            Some((Ok(message), watch))
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NodeDevice;
    use crate::health::{DeviceHealth as Health, Reason};

    #[test]
    fn every_device_of_the_pool_is_listed_with_its_health_and_message() {
        let inventory: Inventory = ["gpu-0", "gpu-1", "gpu-2"]
            .into_iter()
            .map(|n| {
                (
                    n.to_owned(),
                    NodeDevice {
                        name: n.to_owned(),
                        ..NodeDevice::default()
                    },
                )
            })
            .collect();
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let health = HealthMap::from([
            (
                "gpu-1".to_owned(),
                Health {
                    state: HealthState::Unhealthy,
                    reason: Some(Reason::Marked),
                    message: Some("fan failed".to_owned()),
                    since: now,
                },
            ),
            (
                "gpu-2".to_owned(),
                Health {
                    state: HealthState::Unknown,
                    reason: None,
                    message: None,
                    since: now,
                },
            ),
        ]);
        let message = response("node-0", &inventory, &health, now);
        let seen: Vec<(String, String, HealthStatus, i64, String)> = message
            .devices
            .iter()
            .map(|d| {
                let id = d.device.clone().unwrap();
                (
                    id.pool_name,
                    id.device_name,
                    d.health(),
                    d.last_updated_time,
                    d.message.clone(),
                )
            })
            .collect();
        let at = now.timestamp();
        assert_eq!(
            seen,
            [
                (
                    "node-0".into(),
                    "gpu-0".into(),
                    HealthStatus::Healthy,
                    at,
                    String::new()
                ),
                (
                    "node-0".into(),
                    "gpu-1".into(),
                    HealthStatus::Unhealthy,
                    at,
                    "fan failed".into()
                ),
                (
                    "node-0".into(),
                    "gpu-2".into(),
                    HealthStatus::Unknown,
                    at,
                    String::new()
                ),
            ]
        );
    }
}
