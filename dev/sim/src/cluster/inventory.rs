//! The simulated hardware: Node objects and the `ResourceSlices` that publish their devices for a
//! DRA driver (`namedResources` instances with 1.30 attribute kinds).
//!
//! Pure object construction: no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesInstance, NamedResourcesResources, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{ClusterConfig, ClusterError};

/// Label carrying a node's host name, as the kubelet sets it.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The name of node number `index`.
pub fn node_name(config: &ClusterConfig, index: usize) -> String {
    format!("{}{index}", config.node_prefix)
}

/// The Node object for node number `index`.
pub(crate) fn node(config: &ClusterConfig, index: usize) -> Node {
    let name = node_name(config, index);
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(HOSTNAME_LABEL.to_owned(), name)])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    }
}

/// The status a ready node reports.
pub fn ready_status() -> serde_json::Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    serde_json::json!({ "status": {
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "simulated kubelet is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
        "capacity": { "cpu": "64", "memory": "512Gi", "pods": "110" },
        "allocatable": { "cpu": "64", "memory": "512Gi", "pods": "110" },
    }})
}

/// Checks that `value` reads as a Kubernetes quantity (`80Gi`, `1.5`, `500m`, `2e3`).
pub(crate) fn check_quantity(value: &str) -> Result<(), ClusterError> {
    let bad = || ClusterError::Quantity(value.to_owned());
    let number_end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(number_end);
    if number.is_empty() || number.parse::<f64>().is_err() {
        return Err(bad());
    }
    let suffix_ok = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || suffix
        .strip_prefix(['e', 'E'])
        .is_some_and(|exp| exp.trim_start_matches(['+', '-']).parse::<u32>().is_ok());
    if suffix_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

fn cycled(list: &[String], index: usize, fallback: &str) -> String {
    if list.is_empty() {
        fallback.to_owned()
    } else {
        list[index % list.len()].clone()
    }
}

/// The NUMA node of device `device` out of `devices` on a node with `numa_nodes` NUMA nodes: the
/// devices are split in equal consecutive runs.
fn numa_of(device: usize, devices: usize, numa_nodes: usize) -> usize {
    if devices == 0 || numa_nodes == 0 {
        return 0;
    }
    (device * numa_nodes / devices).min(numa_nodes - 1)
}

/// An attribute value of a simulated device, before it takes the shape of one generation.
enum Attribute {
    Int(i64),
    String(String),
    Version(String),
}

/// The attributes of device number `device` of a node with `model` devices, as both
/// generations publish them (without `memory`, a quantity, which v1 publishes as a capacity).
fn device_attributes(
    config: &ClusterConfig,
    model: &str,
    device: usize,
) -> [(&'static str, Attribute); 5] {
    let numa = numa_of(device, config.devices_per_node, config.numa_nodes);
    [
        ("model", Attribute::String(model.to_owned())),
        (
            "numa",
            Attribute::Int(i64::try_from(numa).unwrap_or(i64::MAX)),
        ),
        ("pcieRoot", Attribute::String(format!("pci0000:{numa:02x}"))),
        (
            "index",
            Attribute::Int(i64::try_from(device).unwrap_or(i64::MAX)),
        ),
        (
            "driverVersion",
            Attribute::Version(config.driver_version.clone()),
        ),
    ]
}

/// The controller owner reference of a node's slice: the Node, so that the garbage collector
/// deletes the slice with it.
fn node_owner(node: &str, node_uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.to_owned(),
        uid: node_uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The `ResourceSlice` publishing the devices of node number `index`, owned by that node.
pub fn resource_slice(config: &ClusterConfig, index: usize, node_uid: &str) -> ResourceSlice {
    let node = node_name(config, index);
    let model = cycled(&config.models, index, "H100");
    let memory = cycled(&config.memory, index, "80Gi");
    let instances = (0..config.devices_per_node)
        .map(|device| {
            let mut attributes: Vec<NamedResourcesAttribute> =
                device_attributes(config, &model, device)
                    .into_iter()
                    .map(|(name, value)| {
                        attribute(name, |a| match value {
                            Attribute::Int(i) => a.int = Some(i),
                            Attribute::String(s) => a.string = Some(s),
                            Attribute::Version(v) => a.version = Some(v),
                        })
                    })
                    .collect();
            let memory = attribute("memory", |a| a.quantity = Some(Quantity(memory.clone())));
            attributes.insert(1, memory);
            NamedResourcesInstance {
                name: format!("gpu-{device}"),
                attributes: Some(attributes),
            }
        })
        .collect();
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{node}-{}", config.driver_name)),
            owner_references: Some(vec![node_owner(&node, node_uid)]),
            ..ObjectMeta::default()
        },
        driver_name: config.driver_name.clone(),
        node_name: Some(node),
        named_resources: Some(NamedResourcesResources { instances }),
    }
}

/// The `resource.k8s.io/v1` `ResourceSlice` of node number `index` (1.34), as a driver's
/// kubelet plugin publishes it: one pool named after the node at generation 1, `nodeName` set,
/// the same devices and attributes as [`resource_slice`] with `memory` as a capacity (v1
/// attributes have no quantities), `generateName` `<node>-<driver>-` and the Node as owner.
pub(crate) fn slice_v1(
    config: &ClusterConfig,
    index: usize,
    node_uid: &str,
) -> dra_types::resource_v1::ResourceSlice {
    use dra_types::resource_v1::{
        Device, DeviceAttribute, DeviceCapacity, ResourcePool, ResourceSlice, ResourceSliceSpec,
    };
    let node = node_name(config, index);
    let model = cycled(&config.models, index, "H100");
    let memory = cycled(&config.memory, index, "80Gi");
    let devices = (0..config.devices_per_node)
        .map(|device| {
            let attributes =
                device_attributes(config, &model, device)
                    .into_iter()
                    .map(|(name, value)| {
                        let value = match value {
                            Attribute::Int(i) => DeviceAttribute::Int(i),
                            Attribute::String(s) => DeviceAttribute::String(s),
                            Attribute::Version(v) => DeviceAttribute::Version(v),
                        };
                        (name.to_owned(), value)
                    });
            Device {
                name: format!("gpu-{device}"),
                attributes: attributes.collect(),
                capacity: [(
                    "memory".to_owned(),
                    DeviceCapacity::new(Quantity(memory.clone())),
                )]
                .into(),
                ..Device::default()
            }
        })
        .collect();
    ResourceSlice::new(
        ObjectMeta {
            generate_name: Some(format!("{node}-{}-", config.driver_name)),
            owner_references: Some(vec![node_owner(&node, node_uid)]),
            ..ObjectMeta::default()
        },
        ResourceSliceSpec {
            driver: config.driver_name.clone(),
            pool: ResourcePool {
                name: node.clone(),
                generation: 1,
                resource_slice_count: 1,
            },
            node_name: Some(node),
            devices,
            ..ResourceSliceSpec::default()
        },
    )
}

fn attribute(
    name: &str,
    set: impl FnOnce(&mut NamedResourcesAttribute),
) -> NamedResourcesAttribute {
    let mut attribute = NamedResourcesAttribute {
        name: name.to_owned(),
        ..NamedResourcesAttribute::default()
    };
    set(&mut attribute);
    attribute
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(nodes: usize, devices: usize) -> ClusterConfig {
        ClusterConfig {
            nodes,
            devices_per_node: devices,
            models: vec!["H100".into(), "A100".into()],
            memory: vec!["80Gi".into(), "40Gi".into()],
            ..ClusterConfig::default()
        }
    }

    fn attr<'a>(
        slice: &'a ResourceSlice,
        device: usize,
        name: &str,
    ) -> &'a NamedResourcesAttribute {
        slice.named_resources.as_ref().unwrap().instances[device]
            .attributes
            .as_ref()
            .unwrap()
            .iter()
            .find(|a| a.name == name)
            .unwrap()
    }

    #[test]
    fn models_and_memory_cycle_across_nodes() {
        let cfg = config(3, 2);
        let slices: Vec<_> = (0..3).map(|i| resource_slice(&cfg, i, "uid")).collect();
        let models: Vec<_> = slices
            .iter()
            .map(|s| attr(s, 0, "model").string.clone().unwrap())
            .collect();
        assert_eq!(models, ["H100", "A100", "H100"]);
        assert_eq!(
            attr(&slices[1], 1, "memory").quantity,
            Some(Quantity("40Gi".into()))
        );
    }

    #[test]
    fn numa_splits_the_devices_of_a_node_in_halves() {
        let cfg = config(1, 8);
        let slice = resource_slice(&cfg, 0, "uid");
        let numa: Vec<_> = (0..8)
            .map(|d| attr(&slice, d, "numa").int.unwrap())
            .collect();
        assert_eq!(numa, [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(numa_of(0, 1, 2), 0);
        assert_eq!(numa_of(2, 3, 2), 1);
    }

    #[test]
    fn slice_belongs_to_its_node_and_driver() {
        let cfg = config(2, 4);
        let slice = resource_slice(&cfg, 1, "node-uid");
        assert_eq!(slice.node_name.as_deref(), Some("node-1"));
        assert_eq!(slice.driver_name, "gpu.dra-ledger.io");
        assert_eq!(
            slice.metadata.name.as_deref(),
            Some("node-1-gpu.dra-ledger.io")
        );
        assert_eq!(
            slice.metadata.owner_references.as_ref().unwrap()[0].uid,
            "node-uid"
        );
        let names: Vec<_> = slice
            .named_resources
            .unwrap()
            .instances
            .into_iter()
            .map(|i| i.name)
            .collect();
        assert_eq!(names, ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]);
    }

    #[test]
    fn quantities_are_checked() {
        for good in ["80Gi", "1", "1.5", "500m", "2e3", "16G"] {
            assert!(check_quantity(good).is_ok(), "{good}");
        }
        for bad in ["", "Gi", "80GB", "eighty", "1..2"] {
            assert!(check_quantity(bad).is_err(), "{bad}");
        }
    }
}
