//! Device health as the kubelet of a release with `ResourceHealthStatus` on (beta and on by
//! default from 1.36) takes it from DRA plugins and shows it in pods, as upstream's DRA manager
//! does (`pkg/kubelet/cm/dra/manager.go`, `healthinfo.go`):
//!
//! - a plugin that lists `v1alpha1.DRAResourceHealth` in `supported_versions` gets one
//!   `NodeWatchResources` stream when it registers; each message replaces the health of the
//!   driver's devices in the node's cache; when the stream ends the driver's health is forgotten
//!   (Unknown) and the stream is not opened again until the plugin registers again;
//! - a device whose health is older than its timeout (`health_check_timeout_seconds`, else
//!   30 s) or that no message named is `Unknown`;
//! - a running pod's `status.containerStatuses[].allocatedResourcesStatus` gets, for each claim a
//!   container names, `name: claim:<name>` (`claim:<name>/<request>` where it names a request)
//!   and one entry per device prepared for the claim: `resourceID` the device's first CDI ID
//!   (else `<driver>/<pool>/<device>`), `health`, and with `ResourceHealthStatusMessage` on the
//!   plugin's `message` where it sent one. Claims without devices get no entry.
//!
//! [`HealthCache`] and [`container_statuses`] are pure; the stream and the status write are I/O.

use dra_runtime::lock::LockExt;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_types::kubelet::v1alpha1::dra_resource_health_client::DraResourceHealthClient;
use dra_types::kubelet::v1alpha1::{
    HealthStatus, NodeWatchResourcesRequest, NodeWatchResourcesResponse,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

use super::calls::PreparedDevice;
use super::{lazy_channel, NodePlugins};
use crate::actors::claim_refs::{claim_name, pod_claim_entries};
use crate::release::{FeatureGate, ReleaseFacts};
use crate::KubernetesVersion;

/// The `supported_versions` entry of the health service.
pub(crate) const HEALTH_SERVICE: &str = "v1alpha1.DRAResourceHealth";

/// How long a device's health counts when the plugin names no timeout (upstream's
/// `DefaultHealthTimeout`).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the kubelet of `version` opens the health stream of a plugin listing `supported`.
pub(crate) fn watches_health(version: KubernetesVersion, supported: &[String]) -> bool {
    health_gate(version, FeatureGate::ResourceHealthStatus)
        && supported.iter().any(|s| s == HEALTH_SERVICE)
}

/// Whether the kubelet of `version` has `gate` on (kubelets run with the release's defaults).
pub(crate) fn health_gate(version: KubernetesVersion, gate: FeatureGate) -> bool {
    ReleaseFacts::of(version).default_gates().enabled(gate)
}

/// The health of one device as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cached {
    health: &'static str,
    message: String,
    updated: Instant,
    timeout: Duration,
}

/// The devices' health by driver, pool and device.
#[derive(Debug, Default)]
pub(crate) struct HealthCache {
    devices: BTreeMap<(String, String, String), Cached>,
}

impl HealthCache {
    /// Takes `message` of `driver`'s stream, received at `now`; returns whether a health or
    /// message changed. The message is the driver's complete list: devices it leaves out keep
    /// their entry until it is too old.
    pub(crate) fn update(
        &mut self,
        driver: &str,
        message: &NodeWatchResourcesResponse,
        now: Instant,
    ) -> bool {
        let mut changed = false;
        for device in &message.devices {
            let Some(id) = &device.device else { continue };
            let health = match device.health() {
                HealthStatus::Healthy => "Healthy",
                HealthStatus::Unhealthy => "Unhealthy",
                HealthStatus::Unknown => "Unknown",
            };
            let timeout = u64::try_from(device.health_check_timeout_seconds)
                .ok()
                .filter(|s| *s > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
            let key = (
                driver.to_owned(),
                id.pool_name.clone(),
                id.device_name.clone(),
            );
            let entry = Cached {
                health,
                message: device.message.clone(),
                updated: now,
                timeout,
            };
            if let Some(cached) = self.devices.get_mut(&key) {
                changed |= cached.health != entry.health || cached.message != entry.message;
                *cached = entry;
            } else {
                changed = true;
                self.devices.insert(key, entry);
            }
        }
        changed
    }

    /// Forgets `driver`'s devices (its stream ended); returns whether it had any.
    pub(crate) fn clear_driver(&mut self, driver: &str) -> bool {
        let before = self.devices.len();
        self.devices.retain(|(d, _, _), _| d != driver);
        before != self.devices.len()
    }

    /// The health and message of a device at `now`: `Unknown` without one when none is known
    /// or it is too old.
    pub(crate) fn health_of(
        &self,
        driver: &str,
        pool: &str,
        device: &str,
        now: Instant,
    ) -> (&'static str, String) {
        let key = (driver.to_owned(), pool.to_owned(), device.to_owned());
        match self.devices.get(&key) {
            Some(c) if now.saturating_duration_since(c.updated) <= c.timeout => {
                (c.health, c.message.clone())
            }
            _ => ("Unknown", String::new()),
        }
    }
}

/// The devices prepared for each claim a pod names, by the pod's claim entry name.
pub(crate) type EntryDevices = BTreeMap<String, Vec<(String, PreparedDevice)>>;

/// The pod's container statuses with their `allocatedResourcesStatus` (see the module
/// documentation): one status per container of `pod`'s spec (`name`, `image`, `ready`), the
/// health of a device from `health(driver, pool, device)`.
pub(crate) fn container_statuses(
    pod: &Value,
    devices: &EntryDevices,
    health: impl Fn(&str, &str, &str) -> (&'static str, String),
    message: bool,
) -> Value {
    let containers = pod["spec"]["containers"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let statuses = containers
        .iter()
        .map(|container| {
            let mut status = json!({
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": true,
                "restartCount": 0,
                "started": true,
            });
            let claims = container["resources"]["claims"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            let mut allocated = Vec::new();
            for claim in claims {
                let entry = claim["name"].as_str().unwrap_or_default();
                let name = match claim["request"].as_str().filter(|r| !r.is_empty()) {
                    Some(request) => format!("claim:{entry}/{request}"),
                    None => format!("claim:{entry}"),
                };
                let resources: Vec<Value> = devices
                    .get(entry)
                    .into_iter()
                    .flatten()
                    .map(|(driver, d)| {
                        let id = d
                            .cdi_ids
                            .first()
                            .cloned()
                            .unwrap_or_else(|| format!("{driver}/{}/{}", d.pool, d.device));
                        let (state, text) = health(driver, &d.pool, &d.device);
                        let mut resource = json!({"resourceID": id, "health": state});
                        if message && !text.is_empty() {
                            resource["message"] = json!(text);
                        }
                        resource
                    })
                    .collect();
                if !resources.is_empty() {
                    allocated.push(json!({"name": name, "resources": resources}));
                }
            }
            if !allocated.is_empty() {
                status["allocatedResourcesStatus"] = Value::Array(allocated);
            }
            status
        })
        .collect();
    Value::Array(statuses)
}

/// Follows the health stream of `driver`'s plugin at `endpoint` until it ends, then forgets
/// the driver's health.
pub(super) async fn watch(node: Arc<NodePlugins>, driver: String, endpoint: PathBuf) {
    let mut client = DraResourceHealthClient::new(lazy_channel(&endpoint));
    match client
        .node_watch_resources(NodeWatchResourcesRequest {})
        .await
    {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            tracing::info!(node = %node.node, %driver, "Watching the plugin's device health");
            loop {
                match stream.message().await {
                    Ok(Some(message)) => {
                        let changed =
                            node.health
                                .lock_or_recover()
                                .update(&driver, &message, Instant::now());
                        if changed {
                            node.health_changed();
                        }
                    }
                    Ok(None) => break,
                    Err(status) => {
                        tracing::warn!(node = %node.node, %driver, %status, "Error receiving from WatchResources stream");
                        break;
                    }
                }
            }
        }
        Err(status) => {
            tracing::warn!(node = %node.node, %driver, %status, "Failed to open the health stream");
        }
    }
    if node.health.lock_or_recover().clear_driver(&driver) {
        node.health_changed();
    }
}

impl NodePlugins {
    /// Tells the kubelet that a device's health changed.
    pub(super) fn health_changed(&self) {
        self.health_updates.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Writes the device health of `pod` (running on this node, with claims prepared here) into
    /// its container statuses where it changed since the last write.
    ///
    /// # Errors
    /// Reading or patching the pod failed; the next health change or pod change tries again.
    pub(crate) async fn sync_health(&self, pod: &Pod) -> Result<(), kube::Error> {
        if !health_gate(self.version, FeatureGate::ResourceHealthStatus) {
            return Ok(());
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut devices = EntryDevices::new();
        {
            let cache = self.claims.lock_or_recover();
            let prepared = self.prepared_devices.lock_or_recover();
            for entry in pod_claim_entries(pod) {
                let Ok(Some(claim)) = claim_name(pod, entry) else {
                    continue;
                };
                let Some(claim_uid) = cache.uid_of(&namespace, &claim.name) else {
                    continue;
                };
                let of_claim = prepared
                    .iter()
                    .filter(|((u, _), _)| u == claim_uid)
                    .flat_map(|((_, driver), list)| {
                        list.iter().map(move |d| (driver.clone(), d.clone()))
                    })
                    .collect();
                devices.insert(entry.name.clone(), of_claim);
            }
        }
        if devices.values().all(Vec::is_empty) {
            return Ok(());
        }
        let pods: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &ApiResource::erase::<Pod>(&()),
        );
        let live = pods.get(&name).await?;
        let now = Instant::now();
        let statuses = {
            let health = self.health.lock_or_recover();
            let message = health_gate(self.version, FeatureGate::ResourceHealthStatusMessage);
            container_statuses(
                &live.data,
                &devices,
                |driver, pool, device| health.health_of(driver, pool, device, now),
                message,
            )
        };
        if self.health_written.lock_or_recover().get(&uid) == Some(&statuses) {
            return Ok(());
        }
        let patch = json!({"status": {"containerStatuses": statuses}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.health_written.lock_or_recover().insert(uid, statuses);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_types::kubelet::v1alpha1::{DeviceHealth, DeviceIdentifier};

    fn message(entries: &[(&str, HealthStatus, &str)]) -> NodeWatchResourcesResponse {
        NodeWatchResourcesResponse {
            devices: entries
                .iter()
                .map(|(device, health, text)| DeviceHealth {
                    device: Some(DeviceIdentifier {
                        pool_name: "node-0".into(),
                        device_name: (*device).into(),
                    }),
                    health: *health as i32,
                    last_updated_time: 0,
                    health_check_timeout_seconds: 0,
                    message: (*text).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_cache_follows_the_stream_and_forgets_old_or_ended_health() {
        let start = Instant::now();
        let mut cache = HealthCache::default();
        let first = message(&[
            ("gpu-0", HealthStatus::Healthy, ""),
            ("gpu-1", HealthStatus::Healthy, ""),
        ]);
        assert!(cache.update("d", &first, start));
        assert!(
            !cache.update("d", &first, start),
            "the same health again is no change"
        );
        let bad = message(&[("gpu-1", HealthStatus::Unhealthy, "fan failed")]);
        assert!(cache.update("d", &bad, start));
        assert_eq!(
            cache.health_of("d", "node-0", "gpu-1", start),
            ("Unhealthy", "fan failed".into())
        );
        assert_eq!(cache.health_of("d", "node-0", "gpu-0", start).0, "Healthy");
        assert_eq!(cache.health_of("d", "node-0", "gpu-9", start).0, "Unknown");
        let late = start + DEFAULT_TIMEOUT + Duration::from_secs(1);
        assert_eq!(cache.health_of("d", "node-0", "gpu-1", late).0, "Unknown");
        assert!(cache.clear_driver("d"));
        assert_eq!(cache.health_of("d", "node-0", "gpu-0", start).0, "Unknown");
    }

    #[test]
    fn only_a_release_with_the_gate_on_watches_a_plugin_listing_the_service() {
        let listed = vec!["v1.DRAPlugin".to_owned(), HEALTH_SERVICE.to_owned()];
        assert!(watches_health(KubernetesVersion::V1_36, &listed));
        assert!(watches_health(KubernetesVersion::V1_37, &listed));
        assert!(!watches_health(KubernetesVersion::V1_35, &listed));
        assert!(!watches_health(KubernetesVersion::V1_37, &listed[..1]));
    }

    #[test]
    fn each_container_claim_shows_its_devices_under_their_cdi_id_with_health_and_message() {
        let pod = json!({"spec": {"containers": [
            {"name": "app", "image": "busybox", "resources": {"claims": [{"name": "gpu"}, {"name": "two", "request": "r"}]}},
            {"name": "sidecar", "image": "busybox"}
        ]}});
        let device = |name: &str, cdi: Option<&str>| PreparedDevice {
            pool: "node-0".into(),
            device: name.into(),
            cdi_ids: cdi.into_iter().map(str::to_owned).collect(),
            share_id: None,
        };
        let devices = EntryDevices::from([
            (
                "gpu".to_owned(),
                vec![("d".to_owned(), device("gpu-1", Some("d/claim=u1")))],
            ),
            (
                "two".to_owned(),
                vec![("d".to_owned(), device("gpu-2", None))],
            ),
        ]);
        let health = |_: &str, _: &str, device: &str| match device {
            "gpu-1" => ("Unhealthy", "fan failed".to_owned()),
            _ => ("Healthy", String::new()),
        };
        let statuses = container_statuses(&pod, &devices, health, true);
        assert_eq!(
            statuses[0]["allocatedResourcesStatus"],
            json!([
                {"name": "claim:gpu", "resources": [
                    {"resourceID": "d/claim=u1", "health": "Unhealthy", "message": "fan failed"}]},
                {"name": "claim:two/r", "resources": [
                    {"resourceID": "d/node-0/gpu-2", "health": "Healthy"}]}
            ])
        );
        assert_eq!(statuses[1]["name"], "sidecar");
        assert!(statuses[1].get("allocatedResourcesStatus").is_none());
        let without = container_statuses(&pod, &devices, health, false);
        assert!(without[0]["allocatedResourcesStatus"][0]["resources"][0]
            .get("message")
            .is_none());
    }
}
