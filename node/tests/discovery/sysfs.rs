//! The `sysfs` source over fake trees of real machines.

use std::path::PathBuf;

use dra_allocator::model::AttributeValue;
use dra_node::device::Inventory;
use dra_node::discovery::{sysfs, DiscoveryError, DiscoveryRoots};

use crate::fake_sysfs::*;

fn text(value: &str) -> AttributeValue {
    AttributeValue::String(value.to_owned())
}

fn attribute<'a>(inventory: &'a Inventory, device: &str, name: &str) -> Option<&'a AttributeValue> {
    inventory[device].attributes.get(name)
}

fn nodes(paths: &[&str]) -> Vec<PathBuf> {
    paths.iter().map(PathBuf::from).collect()
}

/// An 8x H100 SXM server: two sockets (NUMA 0 and 1), each with two PCI root buses; under each
/// root port a switch with two GPUs and a ConnectX-7 NIC. Four `NVLink` switches (NVIDIA's vendor ID,
/// bridge class) hang off the last root, and the BMC's ASPEED VGA off its own.
fn h100_server() -> FakeSysfs {
    let tree = FakeSysfs::new();
    for (root, numa) in [(0x15u8, 0i64), (0x3a, 0), (0x9a, 1), (0xba, 1)] {
        let port = format!("pci0000:{root:02x}/0000:{root:02x}:01.0");
        let upstream = format!("{port}/0000:{:02x}:00.0", root + 1);
        for (slot, bus) in [(0u8, root + 3), (1, root + 4)] {
            let downstream = format!("{upstream}/0000:{:02x}:{slot:02x}.0", root + 2);
            tree.function(
                &format!("{downstream}/0000:{bus:02x}:00.0"),
                CONTROLLER_3D,
                NVIDIA,
                0x2330,
            )
            .numa(numa);
        }
        let nic_port = format!("{upstream}/0000:{:02x}:02.0", root + 2);
        tree.function(
            &format!("{nic_port}/0000:{:02x}:00.0", root + 5),
            ETHERNET,
            MELLANOX,
            0x1021,
        )
        .numa(numa);
    }
    for function in 0..4 {
        tree.function(
            &format!("pci0000:d0/0000:d0:01.0/0000:d1:00.{function}"),
            BRIDGE_OTHER,
            NVIDIA,
            0x22a3,
        )
        .numa(1);
    }
    tree.function("pci0000:00/0000:00:1c.0/0000:02:00.0", VGA, ASPEED, 0x2000)
        .numa(0);
    tree
}

#[test]
fn eight_h100_gpus_are_named_in_pci_address_order_with_their_attributes() {
    let inventory = sysfs::discover(&h100_server().roots()).unwrap();
    let names: Vec<_> = inventory.keys().cloned().collect();
    assert_eq!(
        names,
        (0..8).map(|i| format!("gpu-{i}")).collect::<Vec<_>>()
    );
    let addresses: Vec<_> = (0..8)
        .map(|i| attribute(&inventory, &format!("gpu-{i}"), "pciAddress").cloned())
        .collect();
    let expected = ["18", "19", "3d", "3e", "9d", "9e", "bd", "be"]
        .map(|bus| Some(text(&format!("0000:{bus}:00.0"))));
    assert_eq!(addresses, expected);
    let gpu = &inventory["gpu-5"];
    assert_eq!(gpu.attributes["vendor"], text("nvidia"));
    assert_eq!(gpu.attributes["model"], text("GH100 [H100 SXM5 80GB]"));
    assert_eq!(gpu.attributes["deviceId"], text("0x2330"));
    assert_eq!(gpu.attributes["numa"], AttributeValue::Int(1));
    assert_eq!(gpu.attributes["pcieRoot"], text("pci0000:9a"));
    assert!(gpu.env.is_empty(), "sysfs knows no UUID");
}

#[test]
fn gpus_behind_one_pcie_switch_share_their_pcie_root_and_numa_follows_the_socket() {
    let inventory = sysfs::discover(&h100_server().roots()).unwrap();
    let roots: Vec<_> = inventory
        .values()
        .map(|d| d.attributes["pcieRoot"].clone())
        .collect();
    let expected =
        ["15", "15", "3a", "3a", "9a", "9a", "ba", "ba"].map(|r| text(&format!("pci0000:{r}")));
    assert_eq!(roots, expected);
    let numa: Vec<_> = inventory
        .values()
        .map(|d| d.attributes["numa"].clone())
        .collect();
    assert_eq!(numa, [0, 0, 0, 0, 1, 1, 1, 1].map(AttributeValue::Int));
}

#[test]
fn nvidia_gpus_get_their_device_node_and_the_shared_control_nodes() {
    let inventory = sysfs::discover(&h100_server().roots()).unwrap();
    assert_eq!(
        inventory["gpu-0"].device_nodes,
        nodes(&["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    );
    assert_eq!(
        inventory["gpu-7"].device_nodes[0],
        PathBuf::from("/dev/nvidia7")
    );
}

#[test]
fn nics_nvswitches_and_the_bmc_display_are_not_gpus() {
    let inventory = sysfs::discover(&h100_server().roots()).unwrap();
    assert_eq!(inventory.len(), 8);
    assert!(inventory
        .values()
        .all(|d| d.attributes["deviceId"] == text("0x2330")));
}

#[test]
fn amd_mi300_gpus_get_their_drm_nodes_and_kfd() {
    let tree = FakeSysfs::new();
    for (index, (root, bus)) in [(0x00u8, 0x0cu8), (0x00, 0x22), (0x80, 0x8c), (0x80, 0xa2)]
        .iter()
        .enumerate()
    {
        let path = format!("pci{:04x}:{root:02x}/0000:{root:02x}:01.1/0000:{:02x}:00.0/0000:{:02x}:00.0/0000:{bus:02x}:00.0", 0, bus - 2, bus - 1);
        let card = format!("card{}", index + 1);
        let render = format!("renderD{}", 128 + index);
        tree.function(&path, PROCESSING_ACCELERATOR, AMD, 0x74a1)
            .numa(i64::from(*root >= 0x80))
            .drm(&[&render, &card]);
    }
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert_eq!(inventory.len(), 4);
    let gpu = &inventory["gpu-2"];
    assert_eq!(gpu.attributes["vendor"], text("amd"));
    assert_eq!(
        gpu.attributes["model"],
        text("Aqua Vanjaram [Instinct MI300X]")
    );
    assert_eq!(gpu.attributes["pciAddress"], text("0000:8c:00.0"));
    assert_eq!(gpu.attributes["pcieRoot"], text("pci0000:80"));
    assert_eq!(gpu.attributes["numa"], AttributeValue::Int(1));
    assert_eq!(
        gpu.device_nodes,
        nodes(&["/dev/dri/card3", "/dev/dri/renderD130", "/dev/kfd"])
    );
}

#[test]
fn amd_mi210_gpus_are_display_controllers() {
    let tree = FakeSysfs::new();
    tree.function(
        "pci0000:40/0000:40:01.1/0000:41:00.0",
        DISPLAY_OTHER,
        AMD,
        0x740f,
    )
    .numa(0)
    .drm(&["card0", "renderD128"]);
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert_eq!(inventory.len(), 1);
    let gpu = &inventory["gpu-0"];
    assert_eq!(
        gpu.attributes["model"],
        text("Aldebaran/MI200 [Instinct MI210]")
    );
    assert_eq!(
        gpu.device_nodes,
        nodes(&["/dev/dri/card0", "/dev/dri/renderD128", "/dev/kfd"])
    );
}

#[test]
fn intel_max_gpus_get_their_drm_nodes_under_the_dev_root() {
    let tree = FakeSysfs::new();
    tree.function(
        "pci0000:29/0000:29:01.0/0000:2a:00.0/0000:2b:01.0/0000:2c:00.0",
        DISPLAY_OTHER,
        INTEL,
        0x0bd5,
    )
    .numa(0)
    .drm(&["card0", "renderD128"]);
    tree.function(
        "pci0000:9a/0000:9a:01.0/0000:9b:00.0/0000:9c:01.0/0000:9d:00.0",
        DISPLAY_OTHER,
        INTEL,
        0x0bd5,
    )
    .numa(1)
    .drm(&["card1", "renderD129"]);
    let roots = DiscoveryRoots {
        dev: PathBuf::from("/host/dev"),
        ..tree.roots()
    };
    let inventory = sysfs::discover(&roots).unwrap();
    let gpu = &inventory["gpu-1"];
    assert_eq!(gpu.attributes["vendor"], text("intel"));
    assert_eq!(
        gpu.attributes["model"],
        text("Ponte Vecchio XT (1 Tile) [Data Center GPU Max 1100]")
    );
    assert_eq!(
        gpu.device_nodes,
        nodes(&["/host/dev/dri/card1", "/host/dev/dri/renderD129"])
    );
}

/// A workstation-like mix: an Intel iGPU and NPU, an AMD card, an NVIDIA card and a NIC.
fn mixed_machine() -> FakeSysfs {
    let tree = FakeSysfs::new();
    tree.function("pci0000:00/0000:00:02.0", VGA, INTEL, 0x4680)
        .numa(-1)
        .drm(&["card0", "renderD128"]);
    // Meteor Lake NPU: an Intel processing accelerator, not a GPU.
    tree.function(
        "pci0000:00/0000:00:0b.0",
        PROCESSING_ACCELERATOR,
        INTEL,
        0x7d1d,
    )
    .numa(-1);
    tree.gpu(NVIDIA, 0x2684).numa(-1);
    tree.function("pci0000:00/0000:00:01.1/0000:03:00.0", VGA, AMD, 0x744c)
        .numa(-1)
        .drm(&["card1", "renderD129"]);
    tree.function(
        "pci0000:00/0000:00:1c.0/0000:05:00.0",
        ETHERNET,
        INTEL,
        0x125c,
    )
    .numa(-1);
    tree
}

#[test]
fn mixed_machine_names_gpus_of_every_vendor_and_ignores_the_npu_and_the_nic() {
    let inventory = sysfs::discover(&mixed_machine().roots()).unwrap();
    let vendors: Vec<_> = inventory
        .values()
        .map(|d| d.attributes["vendor"].clone())
        .collect();
    assert_eq!(vendors, [text("intel"), text("nvidia"), text("amd")]);
    assert_eq!(
        inventory["gpu-1"].device_nodes[0],
        PathBuf::from("/dev/nvidia0")
    );
}

#[test]
fn model_is_the_device_id_where_no_database_names_it() {
    let inventory = sysfs::discover(&mixed_machine().roots()).unwrap();
    assert_eq!(
        attribute(&inventory, "gpu-1", "model"),
        Some(&text("0x2684")),
        "not in the excerpt"
    );
    let tree = h100_server();
    let roots = DiscoveryRoots {
        pci_ids: vec![PathBuf::from("/nonexistent/pci.ids")],
        ..tree.roots()
    };
    let inventory = sysfs::discover(&roots).unwrap();
    assert_eq!(
        attribute(&inventory, "gpu-0", "model"),
        Some(&text("0x2330"))
    );
}

#[test]
fn unknown_numa_node_leaves_the_attribute_out() {
    let tree = mixed_machine();
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert!(
        inventory
            .values()
            .all(|d| !d.attributes.contains_key("numa")),
        "-1 is unknown"
    );
    let tree = FakeSysfs::new();
    tree.gpu(NVIDIA, 0x2330);
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert_eq!(
        attribute(&inventory, "gpu-0", "numa"),
        None,
        "no numa_node file"
    );
}

#[test]
fn gpu_without_a_bound_driver_has_no_drm_nodes() {
    let tree = FakeSysfs::new();
    tree.gpu(AMD, 0x74a1).numa(0);
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert_eq!(inventory["gpu-0"].device_nodes, nodes(&["/dev/kfd"]));
}

#[test]
fn entry_that_is_not_a_link_has_no_pcie_root() {
    let tree = FakeSysfs::new();
    let dir = tree.sysfs().join("bus/pci/devices/0000:01:00.0");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("class"), "0x030200\n").unwrap();
    std::fs::write(dir.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(dir.join("device"), "0x2330\n").unwrap();
    let inventory = sysfs::discover(&tree.roots()).unwrap();
    assert_eq!(attribute(&inventory, "gpu-0", "pcieRoot"), None);
    assert_eq!(
        attribute(&inventory, "gpu-0", "pciAddress"),
        Some(&text("0000:01:00.0"))
    );
}

#[test]
fn missing_class_file_is_an_error_naming_it() {
    let tree = mixed_machine();
    tree.function("pci0000:00/0000:00:1f.0", ETHERNET, INTEL, 0x1234)
        .remove("class");
    let error = sysfs::discover(&tree.roots()).unwrap_err();
    assert!(
        matches!(error, DiscoveryError::SysfsRead { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("0000:00:1f.0/class"), "{message}");
}

#[test]
fn malformed_vendor_and_numa_files_are_errors_naming_them() {
    let tree = FakeSysfs::new();
    tree.function("pci0000:00/0000:00:01.0", CONTROLLER_3D, NVIDIA, 0x2330)
        .write("vendor", "nvidia\n");
    let message = sysfs::discover(&tree.roots()).unwrap_err().to_string();
    assert!(
        message.contains("\"nvidia\"") && message.contains("0000:00:01.0/vendor"),
        "{message}"
    );

    let tree = FakeSysfs::new();
    tree.function("pci0000:00/0000:00:01.0", CONTROLLER_3D, NVIDIA, 0x2330)
        .write("numa_node", "zero\n");
    let message = sysfs::discover(&tree.roots()).unwrap_err().to_string();
    assert!(
        message.contains("numa_node") && message.contains("\"zero\""),
        "{message}"
    );
}

#[test]
fn missing_pci_bus_directory_is_an_error() {
    let tree = FakeSysfs::new();
    std::fs::remove_dir_all(tree.sysfs().join("bus")).unwrap();
    let message = sysfs::discover(&tree.roots()).unwrap_err().to_string();
    assert!(message.contains("bus/pci/devices"), "{message}");
}

#[test]
fn unreadable_pci_ids_database_is_an_error_naming_it() {
    let tree = h100_server();
    let roots = DiscoveryRoots {
        pci_ids: vec![tree.dir.path().to_owned()], // a directory: exists, cannot be read
        ..tree.roots()
    };
    let error = sysfs::discover(&roots).unwrap_err();
    assert!(matches!(error, DiscoveryError::PciIds { .. }), "{error:?}");
}

#[test]
fn machine_without_gpus_has_an_empty_inventory() {
    let tree = FakeSysfs::new();
    tree.function(
        "pci0000:00/0000:00:1c.0/0000:05:00.0",
        ETHERNET,
        INTEL,
        0x125c,
    );
    assert!(sysfs::discover(&tree.roots()).unwrap().is_empty());
}
