//! The `file:PATH` source: typed attributes, and strictness with errors naming where.

use std::path::{Path, PathBuf};

use dra_allocator::model::{AttributeValue, Quantity, Version};
use dra_node::discovery::{file, DiscoveryError};

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/discovery/fixtures")
        .join(name)
}

fn refused(text: &str) -> String {
    file::parse(text).unwrap_err().to_string()
}

#[test]
fn yaml_inventory_reads_every_kind_of_attribute_value() {
    let inventory = file::read(&fixture("inventory.yaml")).unwrap();
    let gpu = &inventory["gpu-0"];
    assert_eq!(gpu.name, "gpu-0");
    let a = &gpu.attributes;
    assert_eq!(a["vendor"], AttributeValue::String("nvidia".into()));
    assert_eq!(a["numa"], AttributeValue::Int(0));
    assert_eq!(a["migEnabled"], AttributeValue::Bool(false));
    assert_eq!(
        a["memory"],
        AttributeValue::Quantity(Quantity::parse("80Gi").unwrap())
    );
    assert_eq!(
        a["driver"],
        AttributeValue::Version(Version::parse("550.54.15").unwrap())
    );
    assert_eq!(a["cores"], AttributeValue::IntSlice(vec![0, 1, 2, 3]));
    assert_eq!(
        a["links"],
        AttributeValue::StringSlice(vec!["nvlink0".into(), "nvlink1".into()])
    );
    assert_eq!(
        gpu.device_nodes,
        [
            PathBuf::from("/dev/nvidia0"),
            PathBuf::from("/dev/nvidiactl")
        ]
    );
    assert!(gpu.env["NVIDIA_VISIBLE_DEVICES"].starts_with("GPU-"));
    let bare = &inventory["gpu-1"];
    assert!(
        bare.device_nodes.is_empty() && bare.env.is_empty(),
        "both optional"
    );
}

#[test]
fn json_inventory_is_read_too() {
    let inventory = file::read(&fixture("inventory.json")).unwrap();
    assert_eq!(
        inventory["gpu-0"].attributes["numa"],
        AttributeValue::Int(1)
    );
}

#[test]
fn unquoted_numbers_are_taken_as_quantity_and_version_text() {
    let inventory = file::parse(
        "devices: [{name: a, attributes: {cores: {quantity: 1.5}, v: {version: 1.2.3}}}]",
    )
    .unwrap();
    assert_eq!(
        inventory["a"].attributes["cores"],
        AttributeValue::Quantity(Quantity::parse("1500m").unwrap())
    );
}

#[test]
fn unknown_fields_are_refused_naming_the_field() {
    let message = refused("devices:\n  - name: gpu-0\n    devicenodes: [/dev/x]\n");
    assert!(message.contains("unknown field `devicenodes`"), "{message}");
    let message = refused("devices: []\nversion: 2\n");
    assert!(message.contains("unknown field `version`"), "{message}");
}

#[test]
fn duplicate_device_names_are_refused_naming_the_device() {
    let message = refused("devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-0}]");
    assert_eq!(message, "device gpu-0: the name is used twice");
}

#[test]
fn duplicate_keys_are_refused() {
    let message = refused("devices:\n  - name: gpu-0\n    attributes: {numa: 0, numa: 1}\n");
    assert!(message.contains("duplicate"), "{message}");
}

#[test]
fn bad_attribute_values_are_refused_naming_device_and_attribute() {
    for (value, expected) in [
        ("{quantity: 80Gx}", "device gpu-0: attribute a: "),
        ("{version: v1}", "device gpu-0: attribute a: "),
        ("{size: 80Gi}", "unknown typed value `size`"),
        ("{quantity: 1, version: 1.0.0}", "exactly one key"),
        ("2.5", "not a 64-bit integer"),
        ("[]", "an empty list has no type"),
        ("[1, two]", "a list of integers holds only integers"),
        ("[one, 2]", "a list of strings holds only strings"),
        ("[[1]]", "a list holds integers or strings"),
        ("null", "no value"),
    ] {
        let message = refused(&format!(
            "devices: [{{name: gpu-0, attributes: {{a: {value}}}}}]"
        ));
        assert!(message.contains(expected), "{value}: {message}");
        assert!(
            message.starts_with("device gpu-0: attribute a: "),
            "{value}: {message}"
        );
    }
}

#[test]
fn names_paths_and_env_keys_are_checked() {
    assert!(refused("devices: [{name: GPU_0}]").contains("not a DNS label"));
    assert!(refused("devices: [{name: ''}]").contains("not a DNS label"));
    let message = refused("devices: [{name: gpu-0, deviceNodes: [dev/nvidia0]}]");
    assert_eq!(
        message,
        "device gpu-0: deviceNodes: dev/nvidia0 is not an absolute path"
    );
    let message = refused("devices: [{name: gpu-0, env: {'A=B': c}}]");
    assert!(
        message.contains("env: \"A=B\" is not a variable name"),
        "{message}"
    );
}

#[test]
fn missing_and_invalid_files_are_errors_naming_the_file() {
    let missing = fixture("absent.yaml");
    let error = file::read(&missing).unwrap_err();
    assert!(
        matches!(error, DiscoveryError::InventoryRead { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("absent.yaml"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("devices.yaml");
    std::fs::write(&bad, "device: []\n").unwrap();
    let error = file::read(&bad).unwrap_err();
    assert!(
        matches!(error, DiscoveryError::InventoryFile { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("devices.yaml") && message.contains("device"),
        "{message}"
    );
}
