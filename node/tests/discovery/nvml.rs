//! The `nvml` mapping over a fake library: what NVML reports becomes attributes, device nodes
//! and the CDI env, with sysfs filling in the root bus.

use std::path::PathBuf;

use dra_allocator::model::{AttributeValue, Quantity};
use dra_node::discovery::nvml::{self, GpuInfo, GpuLibrary};
use dra_node::discovery::DiscoveryError;

use crate::fake_sysfs::*;

pub(crate) struct FakeLibrary(pub(crate) Vec<GpuInfo>);

impl GpuLibrary for FakeLibrary {
    fn devices(&self) -> Result<Vec<GpuInfo>, DiscoveryError> {
        Ok(self.0.clone())
    }
}

struct BrokenLibrary;

impl GpuLibrary for BrokenLibrary {
    fn devices(&self) -> Result<Vec<GpuInfo>, DiscoveryError> {
        Err(DiscoveryError::Nvml {
            call: "device count",
            source: "driver/library version mismatch".into(),
        })
    }
}

pub(crate) fn h100(uuid: &str, bus_id: &str, minor: u32) -> GpuInfo {
    GpuInfo {
        uuid: uuid.to_owned(),
        name: "NVIDIA H100 80GB HBM3".to_owned(),
        memory_total_bytes: 81_559 * 1024 * 1024,
        pci_bus_id: bus_id.to_owned(),
        numa: Some(1),
        minor: Some(minor),
        mig_enabled: Some(false),
        mig_profiles: Vec::new(),
    }
}

#[test]
fn nvml_answers_become_attributes_nodes_and_the_visible_devices_env() {
    let tree = FakeSysfs::new();
    tree.function(
        "pci0000:9a/0000:9a:01.0/0000:9b:00.0/0000:9c:00.0/0000:9d:00.0",
        CONTROLLER_3D,
        NVIDIA,
        0x2330,
    )
    .numa(1);
    // NVML enumerates in its own order; names follow PCI addresses.
    let library = FakeLibrary(vec![
        h100("GPU-bbbb", "00000000:9D:00.0", 4),
        h100("GPU-aaaa", "00000000:1B:00.0", 0),
    ]);
    let inventory = nvml::inventory_from(&library, &tree.roots()).unwrap();
    let gpu = &inventory["gpu-1"];
    let a = &gpu.attributes;
    assert_eq!(a["vendor"], AttributeValue::String("nvidia".into()));
    assert_eq!(
        a["model"],
        AttributeValue::String("NVIDIA H100 80GB HBM3".into())
    );
    assert_eq!(a["uuid"], AttributeValue::String("GPU-bbbb".into()));
    assert_eq!(
        a["memory"],
        AttributeValue::Quantity(Quantity::parse("81559Mi").unwrap())
    );
    assert_eq!(
        a["pciAddress"],
        AttributeValue::String("0000:9d:00.0".into())
    );
    assert_eq!(a["pcieRoot"], AttributeValue::String("pci0000:9a".into()));
    assert_eq!(a["numa"], AttributeValue::Int(1));
    assert_eq!(a["migEnabled"], AttributeValue::Bool(false));
    assert_eq!(
        gpu.device_nodes,
        ["/dev/nvidia4", "/dev/nvidiactl", "/dev/nvidia-uvm"].map(PathBuf::from)
    );
    assert_eq!(gpu.env["NVIDIA_VISIBLE_DEVICES"], "GPU-bbbb");
    assert_eq!(inventory["gpu-0"].env["NVIDIA_VISIBLE_DEVICES"], "GPU-aaaa");
    assert!(
        !inventory["gpu-0"].attributes.contains_key("pcieRoot"),
        "not in this sysfs"
    );
}

#[test]
fn values_nvml_does_not_report_are_left_out_or_taken_from_sysfs() {
    let tree = FakeSysfs::new();
    tree.gpu(NVIDIA, 0x1eb8).numa(0);
    let gpu = GpuInfo {
        uuid: "GPU-t4".to_owned(),
        name: "Tesla T4".to_owned(),
        memory_total_bytes: 15_843_721_216,
        pci_bus_id: "00000000:01:00.0".to_owned(),
        numa: None,
        minor: None,
        mig_enabled: None,
        mig_profiles: Vec::new(),
    };
    let inventory = nvml::inventory_from(&FakeLibrary(vec![gpu]), &tree.roots()).unwrap();
    let a = &inventory["gpu-0"].attributes;
    assert_eq!(a["numa"], AttributeValue::Int(0), "from sysfs");
    assert!(!a.contains_key("migEnabled"), "no MIG on a T4");
    assert_eq!(
        a["memory"],
        AttributeValue::Quantity(Quantity::from_units(15_843_721_216))
    );
    assert_eq!(
        inventory["gpu-0"].device_nodes[0],
        PathBuf::from("/dev/nvidia0"),
        "position"
    );
}

#[test]
fn library_failure_is_the_discovery_error() {
    let error = nvml::inventory_from(&BrokenLibrary, &FakeSysfs::new().roots()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "nvml device count: driver/library version mismatch"
    );
}

#[test]
fn bus_ids_and_byte_counts_are_spelt_as_sysfs_and_kubernetes_spell_them() {
    assert_eq!(nvml::sysfs_address("00000000:3B:00.0"), "0000:3b:00.0");
    assert_eq!(nvml::sysfs_address("00000001:C1:00.0"), "0001:c1:00.0");
    assert_eq!(nvml::sysfs_address("0000:3b:00.0"), "0000:3b:00.0");
    assert_eq!(nvml::bytes(80 << 30).to_string(), "80Gi");
    assert_eq!(nvml::bytes(81_559 << 20).to_string(), "81559Mi");
    assert_eq!(nvml::bytes(1000), Quantity::from_units(1000));
}
