//! The `resource.k8s.io/v1` objects the agent produces, checked against the Kubernetes 1.34
//! OpenAPI schemas by `kubernetes-validate --strict` (unknown fields rejected): the node's
//! `ResourceSlice` from an inventory and a `DeviceClass`; and a slice with a misspelled field,
//! which the check must reject, so that a pass means something.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use dra_allocator::model::{AttributeValue, Quantity, Version};
use dra_node::device::{Inventory, NodeDevice};
use dra_node::v1::slice_for;
use dra_types::resource_v1::{DeviceClass, ResourceSlice};

mod validate;

use validate::{kubernetes_validate, report, validate};

const DRIVER: &str = "gpu.example.com";

fn inventory() -> Inventory {
    (0..2)
        .map(|i| {
            let device = NodeDevice {
                name: format!("gpu-{i}"),
                attributes: [
                    ("index", AttributeValue::Int(i)),
                    (
                        "model",
                        AttributeValue::String("NVIDIA A100-SXM4-80GB".into()),
                    ),
                    ("migEnabled", AttributeValue::Bool(false)),
                    (
                        "driverVersion",
                        AttributeValue::Version(Version::parse("550.54.15").unwrap()),
                    ),
                    (
                        "memory",
                        AttributeValue::Quantity(Quantity::parse("80Gi").unwrap()),
                    ),
                    ("gpu.example.com/numa", AttributeValue::Int(0)),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
                ..NodeDevice::default()
            };
            (device.name.clone(), device)
        })
        .collect()
}

/// `slice` with the name the API server would give it from its `generateName`:
/// kubernetes-validate needs `metadata.name` to report on an object at all.
fn named(mut slice: ResourceSlice) -> ResourceSlice {
    let prefix = slice.metadata.generate_name.clone().unwrap();
    slice.metadata.name = Some(format!("{prefix}x7k2q"));
    slice
}

fn write(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn the_nodes_slice_and_a_device_class_pass_the_strict_1_34_schemas() {
    let Some(tool) = kubernetes_validate() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let slice = named(slice_for("node-1", DRIVER, 1, &inventory()).unwrap());
    let class = DeviceClass::with_cel(DRIVER, &["device.driver == 'gpu.example.com'"]);
    for (name, yaml) in [
        ("slice.yaml", serde_yaml::to_string(&slice).unwrap()),
        ("class.yaml", serde_yaml::to_string(&class).unwrap()),
    ] {
        let file = write(dir.path(), name, &yaml);
        let out = validate(&tool, &file);
        assert!(out.status.success(), "{name}:\n{yaml}\n{}", report(&out));
        // the tool checked the v1 object, not nothing
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("passed"),
            "{name}: {}",
            report(&out)
        );
    }
}

#[test]
fn a_slice_with_a_misspelled_field_is_rejected() {
    let Some(tool) = kubernetes_validate() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let slice = named(slice_for("node-1", DRIVER, 1, &inventory()).unwrap());
    let mut value = serde_json::to_value(&slice).unwrap();
    let spec = value["spec"].as_object_mut().unwrap();
    let node = spec.remove("nodeName").unwrap();
    spec.insert("nodename".into(), node);
    let yaml = serde_yaml::to_string(&value).unwrap();
    let file = write(dir.path(), "misspelled.yaml", &yaml);
    let out = validate(&tool, &file);
    assert!(!out.status.success(), "{yaml}\n{}", report(&out));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("nodename"), "{}", report(&out));
}
