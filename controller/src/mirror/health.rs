//! Device health as the node agents report it on `resource.k8s.io/v1`: a device of our slice
//! with the taint `<driver>/unhealthy` (value: the reason, `timeAdded`: since when) is
//! unhealthy, every other device healthy. [`unhealthy_taint`] reads one device (pure); the
//! [`Mirror`] writes each node's health into the ledger (`Ledger::set_node_health`) whenever it
//! differs from what it wrote last, counts each change, and lists the unhealthy free devices
//! for the explanations of waiting claims.

use dra_allocator::ledger::{DeviceHealth, Ledger};
use dra_node::v1::taints::unhealthy_key;
use dra_types::resource_v1::Device as SliceDevice;
use tracing::{info, warn};

use super::{Cache, Mirror};

/// The health `published` reports through its taints: `Some` when it carries our unhealthy
/// taint (the reason is the taint's value, `Unhealthy` without one; since `timeAdded`, 0 when
/// the server set none).
pub fn unhealthy_taint(driver: &str, published: &SliceDevice) -> Option<DeviceHealth> {
    let key = unhealthy_key(driver);
    let taint = published.taints.iter().find(|t| t.key == key)?;
    let since_ms = taint
        .time_added
        .as_ref()
        .map_or(0, |t| u64::try_from(t.0.timestamp_millis()).unwrap_or(0));
    Some(DeviceHealth {
        reason: taint
            .value
            .clone()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "Unhealthy".to_owned()),
        since_ms,
    })
}

impl Mirror {
    /// The free devices (no consumer, not cordoned, not missing) the ledger records unhealthy,
    /// each as `node/device (reason)`: what an explanation names when they are all that is free.
    pub(super) async fn unhealthy_free(&self) -> Vec<String> {
        let unhealthy = match self.keeper.call(Ledger::unhealthy_devices).await {
            Ok(unhealthy) => unhealthy,
            Err(error) => {
                warn!(%error, "Cannot read the ledger's device health");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        let mut nodes: Vec<String> = unhealthy.iter().map(|u| u.node.clone()).collect();
        nodes.dedup();
        for node in nodes {
            let name = node.clone();
            let Ok(Some(devices)) = self.keeper.call(move |l| l.node_devices(&name)).await else {
                continue;
            };
            for device in devices {
                let free = device.consumers.is_empty() && !device.cordoned && !device.missing;
                if let (true, Some(health)) = (free, &device.health) {
                    out.push(format!("{node}/{} ({})", device.name, health.reason));
                }
            }
        }
        out
    }

    /// Writes the health of each node whose slices report another health than last written;
    /// with `every_node`, of every node the slices or the ledger know.
    pub(super) async fn sync_health(&self, cache: &mut Cache, every_node: bool) {
        let mut nodes: Vec<String> = cache.inventory.devices.keys().cloned().collect();
        nodes.extend(cache.health_written.keys().cloned());
        if every_node {
            match self.keeper.call(Ledger::nodes).await {
                Ok(known) => nodes.extend(known.into_iter().map(|n| n.node)),
                Err(error) => warn!(%error, "Failed to read the ledger's nodes"),
            }
        }
        nodes.sort();
        nodes.dedup();
        for node in nodes {
            let reported = cache
                .inventory
                .health
                .get(&node)
                .cloned()
                .unwrap_or_default();
            if !every_node && cache.health_written.get(&node) == Some(&reported) {
                continue;
            }
            let (name, marks) = (node.clone(), reported.clone());
            match self
                .keeper
                .call(move |l| l.set_node_health(&name, marks))
                .await
            {
                Ok(changes) => {
                    for change in changes {
                        self.keeper
                            .observer()
                            .health_change(&node, change.to.is_some());
                        match &change.to {
                            Some(to) => {
                                info!(node = %node, device = %change.device, reason = %to.reason, "Device reported unhealthy");
                            }
                            None => {
                                info!(node = %node, device = %change.device, "Device reported healthy again");
                            }
                        }
                    }
                    cache.health_written.insert(node, reported);
                }
                Err(error) => {
                    // Written again by the next change or reconcile.
                    warn!(%error, node = %node, "Failed to record device health");
                    cache.health_written.remove(&node);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use dra_types::resource_v1::DeviceTaint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    const DRIVER: &str = "gpu.dra-ledger.io";

    fn device(taints: Vec<DeviceTaint>) -> SliceDevice {
        SliceDevice {
            name: "gpu-0".to_owned(),
            taints,
            ..SliceDevice::default()
        }
    }

    fn taint(key: &str, value: Option<&str>, at_ms: Option<i64>) -> DeviceTaint {
        DeviceTaint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: "NoSchedule".to_owned(),
            time_added: at_ms.map(|ms| Time(chrono::DateTime::from_timestamp_millis(ms).unwrap())),
        }
    }

    #[test]
    fn our_unhealthy_taint_gives_the_reason_and_since_when() {
        let tainted = device(vec![
            taint("gpu.dra-ledger.io/cordoned", None, None),
            taint(
                "gpu.dra-ledger.io/unhealthy",
                Some("XidCritical"),
                Some(1_700_000_000_123),
            ),
        ]);

        assert_eq!(
            unhealthy_taint(DRIVER, &tainted),
            Some(DeviceHealth {
                reason: "XidCritical".into(),
                since_ms: 1_700_000_000_123
            })
        );
    }

    #[test]
    fn no_taint_another_drivers_taint_or_the_cordon_taint_is_healthy() {
        for taints in [
            Vec::new(),
            vec![taint("gpu.dra-ledger.io/cordoned", None, Some(1))],
            vec![taint(
                "nic.example.com/unhealthy",
                Some("LinkDown"),
                Some(1),
            )],
        ] {
            assert_eq!(unhealthy_taint(DRIVER, &device(taints)), None);
        }
    }

    #[test]
    fn a_taint_without_value_or_time_is_unhealthy_for_an_unnamed_reason_since_zero() {
        let bare = device(vec![taint("gpu.dra-ledger.io/unhealthy", None, None)]);

        assert_eq!(
            unhealthy_taint(DRIVER, &bare),
            Some(DeviceHealth {
                reason: "Unhealthy".into(),
                since_ms: 0
            })
        );
    }
}
