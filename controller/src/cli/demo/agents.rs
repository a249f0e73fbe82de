//! The demo's node agents: one `dra-node` agent per simulated node, in this process, with the
//! node's devices as an inventory file (the devices the simulator would have published, each
//! with a regular file standing in for its device node), its own kubelet directory (where the
//! simulated kubelet finds it), CDI directory and state directory under the demo's temporary
//! directory, and its admin server on a free loopback port.
//!
//! `LocalAgents::cdi_specs` lists the CDI specs on every node, which is how the progress line
//! and the summary show claims being prepared and unprepared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use dra_node::local::{LocalAgents, LocalNode, LocalSettings};
use dra_sim::actors::plugins;
use dra_sim::cluster::{inventory, ClusterConfig};
use k8s_openapi::api::resource::v1alpha2::NamedResourcesAttribute;
use serde_json::{json, Value};

/// The directory of node `node` under the demo's directory.
fn node_dir(workdir: &Path, node: &str) -> PathBuf {
    workdir.join("nodes").join(node)
}

/// The kubelet directory of every node, as the simulated cluster takes them.
pub fn kubelet_dirs(workdir: &Path, config: &ClusterConfig) -> BTreeMap<String, PathBuf> {
    (0..config.nodes)
        .map(|index| {
            let node = inventory::node_name(config, index);
            let dir = node_dir(workdir, &node).join("kubelet");
            (node, dir)
        })
        .collect()
}

/// One attribute of the simulator's inventory as a value of the inventory file.
fn file_value(attribute: &NamedResourcesAttribute) -> Option<Value> {
    if let Some(text) = &attribute.string {
        return Some(json!(text));
    }
    if let Some(number) = attribute.int {
        return Some(json!(number));
    }
    if let Some(flag) = attribute.bool {
        return Some(json!(flag));
    }
    if let Some(quantity) = &attribute.quantity {
        return Some(json!({"quantity": quantity.0}));
    }
    attribute
        .version
        .as_ref()
        .map(|version| json!({"version": version}))
}

/// The inventory file of node number `index`: the devices the simulator would have published
/// for it, each with a device node under `dev`.
pub fn inventory_file(config: &ClusterConfig, index: usize, dev: &Path) -> Value {
    let slice = inventory::resource_slice(config, index, "");
    let instances = slice
        .named_resources
        .map(|r| r.instances)
        .unwrap_or_default();
    let devices: Vec<Value> = instances
        .iter()
        .map(|instance| {
            let attributes: serde_json::Map<String, Value> = instance
                .attributes
                .iter()
                .flatten()
                .filter_map(|a| Some((a.name.clone(), file_value(a)?)))
                .collect();
            json!({
                "name": instance.name,
                "attributes": attributes,
                "deviceNodes": [dev.join(&instance.name)],
            })
        })
        .collect();
    json!({ "devices": devices })
}

/// Writes each node's inventory file and device files under `workdir` and starts its agent;
/// `client` reaches the API server for the agents' garbage collection.
pub async fn start(
    workdir: &Path,
    config: &ClusterConfig,
    client: &kube::Client,
) -> anyhow::Result<LocalAgents> {
    let mut nodes = Vec::new();
    for (index, (node, kubelet)) in kubelet_dirs(workdir, config).into_iter().enumerate() {
        let dir = node_dir(workdir, &node);
        let dev = dir.join("dev");
        std::fs::create_dir_all(&dev)
            .with_context(|| format!("cannot create {}", dev.display()))?;
        let inventory = inventory_file(config, index, &dev);
        for device in inventory["devices"].as_array().into_iter().flatten() {
            if let Some(path) = device["deviceNodes"][0].as_str() {
                std::fs::write(path, b"")
                    .with_context(|| format!("cannot create the device file {path}"))?;
            }
        }
        let inventory_path = dir.join("devices.json");
        std::fs::write(&inventory_path, inventory.to_string())
            .with_context(|| format!("cannot write {}", inventory_path.display()))?;
        nodes.push(LocalNode {
            name: node,
            registry_dir: kubelet.join(plugins::REGISTRY_DIR),
            plugins_dir: kubelet.join(plugins::PLUGINS_DIR),
            dir,
            inventory: inventory_path,
        });
    }
    let settings = LocalSettings {
        driver_name: config.driver_name.clone(),
        gc_interval: Duration::from_secs(10),
        inventory_interval: Duration::from_secs(30),
    };
    Ok(LocalAgents::start(&nodes, &settings, Some(client)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_allocator::model::AttributeValue;
    use dra_node::discovery::{DeviceSource, DiscoveryRoots};

    #[test]
    fn inventory_file_carries_the_simulated_devices_and_reads_as_a_file_inventory() {
        let config = ClusterConfig {
            nodes: 2,
            devices_per_node: 4,
            numa_nodes: 2,
            models: vec!["H100".into(), "A100".into()],
            memory: vec!["80Gi".into(), "40Gi".into()],
            ..ClusterConfig::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("devices.json");
        std::fs::write(
            &file,
            inventory_file(&config, 1, Path::new("/demo/dev")).to_string(),
        )
        .unwrap();
        let inventory = DeviceSource::File(file)
            .discover(&DiscoveryRoots::default())
            .unwrap();
        assert_eq!(inventory.len(), 4);
        let gpu = &inventory["gpu-3"];
        assert_eq!(gpu.device_nodes, [PathBuf::from("/demo/dev/gpu-3")]);
        assert_eq!(
            gpu.attributes["model"],
            AttributeValue::String("A100".into())
        );
        assert_eq!(
            gpu.attributes["memory"],
            AttributeValue::Quantity("40Gi".parse().unwrap())
        );
        assert_eq!(gpu.attributes["numa"], AttributeValue::Int(1));
        assert_eq!(
            gpu.attributes["driverVersion"],
            AttributeValue::Version("1.0.0".parse().unwrap())
        );
    }
}
