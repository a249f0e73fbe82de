//! The simulated hardware of the end-to-end tests: nodes with hand-written device inventories
//! (model, memory, NUMA node per device), their ResourceSlices, and the parameter builders.
//!
//! Object construction plus the two create calls of `add_node`; no checks.

use std::collections::BTreeMap;

use dra_controller::params::{DeviceClaimParametersSpec, RequirementSpec, SharingSpec};
use dra_sim::cluster::inventory::{ready_status, HOSTNAME_LABEL};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesInstance, NamedResourcesResources, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::DRIVER;

/// One simulated device: its name and the attributes selectors see.
#[derive(Clone, Debug)]
pub struct DeviceSpec {
    /// Device name in the slice (`gpu-<n>`).
    pub name: String,
    /// `model` string attribute.
    pub model: String,
    /// `memory` quantity attribute.
    pub memory: String,
    /// `numa` int attribute.
    pub numa: i64,
}

/// A node and the devices its ResourceSlice publishes.
#[derive(Clone, Debug)]
pub struct NodeInventory {
    /// Node name.
    pub name: String,
    /// Devices, in slice order.
    pub devices: Vec<DeviceSpec>,
}

/// A node with one `model`/`memory` device per entry of `numa` (the device's NUMA node),
/// named `gpu-0`, `gpu-1`, ...
pub fn node(name: &str, model: &str, memory: &str, numa: &[i64]) -> NodeInventory {
    NodeInventory {
        name: name.into(),
        devices: numa
            .iter()
            .enumerate()
            .map(|(index, numa)| DeviceSpec {
                name: format!("gpu-{index}"),
                model: model.into(),
                memory: memory.into(),
                numa: *numa,
            })
            .collect(),
    }
}

/// Adds devices of another model to a node (named after the ones it has).
pub fn with_devices(
    mut node: NodeInventory,
    model: &str,
    memory: &str,
    numa: &[i64],
) -> NodeInventory {
    let first = node.devices.len();
    node.devices
        .extend(numa.iter().enumerate().map(|(index, numa)| DeviceSpec {
            name: format!("gpu-{}", first + index),
            model: model.into(),
            memory: memory.into(),
            numa: *numa,
        }));
    node
}

fn attribute(
    name: &str,
    set: impl FnOnce(&mut NamedResourcesAttribute),
) -> NamedResourcesAttribute {
    let mut attribute = NamedResourcesAttribute {
        name: name.into(),
        ..NamedResourcesAttribute::default()
    };
    set(&mut attribute);
    attribute
}

/// The ResourceSlice of `node`, owned by the Node object with `node_uid`.
pub fn slice_of(node: &NodeInventory, node_uid: &str) -> ResourceSlice {
    let instances = node
        .devices
        .iter()
        .map(|device| NamedResourcesInstance {
            name: device.name.clone(),
            attributes: Some(vec![
                attribute("model", |a| a.string = Some(device.model.clone())),
                attribute("memory", |a| {
                    a.quantity = Some(Quantity(device.memory.clone()));
                }),
                attribute("numa", |a| a.int = Some(device.numa)),
            ]),
        })
        .collect();
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{}-{DRIVER}", node.name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.name.clone(),
                uid: node_uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        driver_name: DRIVER.into(),
        node_name: Some(node.name.clone()),
        named_resources: Some(NamedResourcesResources { instances }),
    }
}

/// A requirement `{attribute, operator, values}`.
pub fn req(attribute: &str, operator: &str, values: &[&str]) -> RequirementSpec {
    RequirementSpec {
        attribute: attribute.into(),
        operator: operator.into(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

/// Claim parameters asking for `count` exclusive devices.
pub fn count(n: i64) -> DeviceClaimParametersSpec {
    DeviceClaimParametersSpec {
        count: Some(n),
        ..DeviceClaimParametersSpec::default()
    }
}

/// Device sharing `Shared` with `max_consumers`.
pub fn shared(max_consumers: u32) -> SharingSpec {
    SharingSpec {
        mode: Some("Shared".into()),
        max_consumers: Some(max_consumers),
    }
}

/// Creates Node `inventory.name` (ready) and publishes its devices.
pub async fn add_node(client: &Client, inventory: &NodeInventory) {
    let nodes = Api::<Node>::all(client.clone());
    let object = Node {
        metadata: ObjectMeta {
            name: Some(inventory.name.clone()),
            labels: Some(BTreeMap::from([(
                HOSTNAME_LABEL.to_owned(),
                inventory.name.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    };
    let created = nodes
        .create(&PostParams::default(), &object)
        .await
        .expect("node created");
    nodes
        .patch_status(
            &inventory.name,
            &PatchParams::default(),
            &Patch::Merge(ready_status()),
        )
        .await
        .expect("node ready");
    Api::<ResourceSlice>::all(client.clone())
        .create(
            &PostParams::default(),
            &slice_of(inventory, &created.uid().unwrap_or_default()),
        )
        .await
        .expect("slice created");
}
