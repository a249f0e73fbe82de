//! The `sysfs` source: the GPUs of NVIDIA (`0x10de`), AMD (`0x1002`) and Intel (`0x8086`) under
//! `<sysfs-root>/bus/pci/devices`. A GPU is a VGA (class `0x0300xx`), 3D (`0x0302xx`) or other
//! display controller (`0x0380xx`: AMD Instinct MI100 to MI250, Intel Data Center GPU Max), or an
//! AMD processing accelerator (`0x1200xx`: Instinct MI300 and later). Intel's processing
//! accelerators are NPUs, not GPUs, and are left out.
//!
//! Each GPU gets the attributes
//! - `vendor`: `nvidia`, `amd` or `intel`;
//! - `model`: its name in the PCI IDs database where one is installed, else the device ID;
//! - `deviceId`: the PCI device ID (`0x2330`);
//! - `pciAddress`: the directory name (`0000:3b:00.0`);
//! - `numa`: the `numa_node` file; left out when the kernel reports `-1` (no NUMA information)
//!   or has no such file, because `0` would claim an affinity nobody measured;
//! - `pcieRoot`: the root bus the device hangs from (`pci0000:3a`), read from where its
//!   `bus/pci/devices` link points (`../../../devices/pci0000:3a/0000:3a:00.0/.../0000:3b:00.0`);
//!   GPUs behind one switch share it. Left out when the entry is not a link.
//!
//! Names are `gpu-0`, `gpu-1`, ... in PCI address order, so they stay the same across restarts
//! as long as the hardware does. Device nodes (named under `--dev-root`, not checked for
//! existence: a missing node shows when the runtime applies the CDI edits):
//! - NVIDIA: `nvidiaN`, where `N` counts the NVIDIA GPUs in PCI address order (the driver
//!   numbers its minors that way unless told otherwise), plus `nvidiactl` and `nvidia-uvm`;
//! - AMD and Intel: `dri/cardN` and `dri/renderDN` for each entry of the device's `drm`
//!   directory (none when no driver is bound), plus `kfd` for AMD.
//!
//! Missing files: the `bus/pci/devices` directory and a device's `class`, `vendor` and `device`
//! files are required (an error names the path); `numa_node`, the link and the `drm` directory
//! are optional. A file with unexpected content is an error naming the file.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use dra_allocator::model::AttributeValue;

use super::pci_ids::{self, PciIds};
use super::{gpu_name, DiscoveryError, DiscoveryRoots};
use crate::device::{Inventory, NodeDevice};

/// A GPU vendor this source knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// PCI vendor `0x10de`.
    Nvidia,
    /// PCI vendor `0x1002`.
    Amd,
    /// PCI vendor `0x8086`.
    Intel,
}

impl Vendor {
    /// The vendor of a PCI vendor ID, if it is one of ours.
    pub fn from_pci_id(id: u16) -> Option<Self> {
        match id {
            0x10de => Some(Vendor::Nvidia),
            0x1002 => Some(Vendor::Amd),
            0x8086 => Some(Vendor::Intel),
            _ => None,
        }
    }

    /// The `vendor` attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
        }
    }
}

/// Whether a PCI class code (`0x030200`) is one a GPU of some vendor reports.
pub fn is_candidate_class(class: u32) -> bool {
    matches!(class >> 8, 0x0300 | 0x0302 | 0x0380 | 0x1200)
}

/// Whether a PCI function of `vendor` with class code `class` is a GPU.
pub fn is_gpu(class: u32, vendor: Vendor) -> bool {
    match class >> 8 {
        0x0300 | 0x0302 | 0x0380 => true,
        0x1200 => vendor == Vendor::Amd,
        _ => false,
    }
}

/// The root bus (`pci0000:3a`) in the path a `bus/pci/devices` entry links to.
pub fn pcie_root(link_target: &Path) -> Option<String> {
    link_target.components().find_map(|c| match c {
        Component::Normal(name) => name.to_str().filter(|n| is_root_bus(n)).map(str::to_owned),
        _ => None,
    })
}

/// `pciDDDD:BB`: a PCI domain and bus in hex.
fn is_root_bus(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("pci") else {
        return false;
    };
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    rest.split_once(':')
        .is_some_and(|(domain, bus)| hex(domain, 4) && hex(bus, 2))
}

/// What sysfs says about one GPU, before it is named.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Found {
    address: String,
    vendor: Vendor,
    device_id: u16,
    numa: Option<i64>,
    pcie_root: Option<String>,
    drm: Vec<String>,
}

/// Reads the GPUs of this node from sysfs.
///
/// # Errors
/// See the module documentation for which files are required.
pub fn discover(roots: &DiscoveryRoots) -> Result<Inventory, DiscoveryError> {
    let ids = pci_ids::load(&roots.pci_ids)?;
    let devices_dir = roots.sysfs.join("bus/pci/devices");
    let mut addresses = read_dir_names(&devices_dir)?;
    // PCI addresses are fixed-width lowercase hex, so text order is address order.
    addresses.sort();
    let mut found = Vec::new();
    for address in addresses {
        if let Some(gpu) = read_device(&devices_dir, &address)? {
            found.push(gpu);
        }
    }
    Ok(inventory(&found, ids.as_ref(), &roots.dev))
}

/// One `bus/pci/devices` entry, if it is a GPU of ours.
fn read_device(devices_dir: &Path, address: &str) -> Result<Option<Found>, DiscoveryError> {
    let dir = devices_dir.join(address);
    let class = read_hex(&dir.join("class"))?;
    if !is_candidate_class(class) {
        return Ok(None);
    }
    let Some(vendor) = Vendor::from_pci_id(read_hex_u16(&dir.join("vendor"))?)
        .filter(|&vendor| is_gpu(class, vendor))
    else {
        return Ok(None);
    };
    let device_id = read_hex_u16(&dir.join("device"))?;
    let pcie_root = std::fs::read_link(&dir)
        .ok()
        .and_then(|target| pcie_root(&target));
    let drm = match vendor {
        Vendor::Nvidia => Vec::new(),
        Vendor::Amd | Vendor::Intel => drm_nodes(&dir.join("drm"))?,
    };
    Ok(Some(Found {
        address: address.to_owned(),
        vendor,
        device_id,
        numa: read_numa(&dir.join("numa_node"))?,
        pcie_root,
        drm,
    }))
}

/// Names and describes the GPUs found, in the order given (PCI address order).
fn inventory(found: &[Found], ids: Option<&PciIds>, dev: &Path) -> Inventory {
    let mut nvidia_index = 0usize;
    let mut inventory = Inventory::new();
    for (index, gpu) in found.iter().enumerate() {
        let device_id = format!("{:#06x}", gpu.device_id);
        let vendor_id = match gpu.vendor {
            Vendor::Nvidia => 0x10de,
            Vendor::Amd => 0x1002,
            Vendor::Intel => 0x8086,
        };
        let model = ids
            .and_then(|ids| ids.device_name(vendor_id, gpu.device_id))
            .map_or_else(|| device_id.clone(), str::to_owned);
        let mut attributes = BTreeMap::from([
            ("vendor".to_owned(), text(gpu.vendor.as_str())),
            ("model".to_owned(), text(&model)),
            ("deviceId".to_owned(), text(&device_id)),
            ("pciAddress".to_owned(), text(&gpu.address)),
        ]);
        if let Some(numa) = gpu.numa {
            attributes.insert("numa".to_owned(), AttributeValue::Int(numa));
        }
        if let Some(root) = &gpu.pcie_root {
            attributes.insert("pcieRoot".to_owned(), text(root));
        }
        let device_nodes = match gpu.vendor {
            Vendor::Nvidia => {
                let node = dev.join(format!("nvidia{nvidia_index}"));
                nvidia_index += 1;
                vec![node, dev.join("nvidiactl"), dev.join("nvidia-uvm")]
            }
            Vendor::Amd => drm_paths(dev, &gpu.drm).chain([dev.join("kfd")]).collect(),
            Vendor::Intel => drm_paths(dev, &gpu.drm).collect(),
        };
        let name = gpu_name(index);
        inventory.insert(
            name.clone(),
            NodeDevice {
                name,
                attributes,
                device_nodes,
                env: BTreeMap::new(),
            },
        );
    }
    inventory
}

fn text(value: &str) -> AttributeValue {
    AttributeValue::String(value.to_owned())
}

fn drm_paths<'a>(dev: &'a Path, names: &'a [String]) -> impl Iterator<Item = PathBuf> + 'a {
    names.iter().map(move |name| dev.join("dri").join(name))
}

/// The `cardN` and `renderDN` entries of a device's `drm` directory, cards first; none when the
/// directory is missing (no DRM driver bound).
fn drm_nodes(drm: &Path) -> Result<Vec<String>, DiscoveryError> {
    let names = match std::fs::read_dir(drm) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        _ => read_dir_names(drm)?,
    };
    let number = |name: &str, prefix: &str| {
        name.strip_prefix(prefix)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
    };
    let mut cards: Vec<_> = names.iter().filter_map(|n| number(n, "card")).collect();
    let mut renders: Vec<_> = names.iter().filter_map(|n| number(n, "renderD")).collect();
    cards.sort_unstable();
    renders.sort_unstable();
    Ok(cards
        .into_iter()
        .map(|n| format!("card{n}"))
        .chain(renders.into_iter().map(|n| format!("renderD{n}")))
        .collect())
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>, DiscoveryError> {
    let failed = |source| DiscoveryError::SysfsRead {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

fn read_text(path: &Path) -> Result<String, DiscoveryError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|source| DiscoveryError::SysfsRead {
            path: path.to_owned(),
            source,
        })
}

/// A `0x...` file such as `class`.
fn read_hex(path: &Path) -> Result<u32, DiscoveryError> {
    let content = read_text(path)?;
    content
        .strip_prefix("0x")
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or_else(|| DiscoveryError::SysfsContent {
            path: path.to_owned(),
            reason: "expected a hexadecimal number such as 0x030200",
            content,
        })
}

/// A `0x...` file holding a 16-bit ID (`vendor`, `device`).
fn read_hex_u16(path: &Path) -> Result<u16, DiscoveryError> {
    let value = read_hex(path)?;
    u16::try_from(value).map_err(|_| DiscoveryError::SysfsContent {
        path: path.to_owned(),
        content: format!("{value:#x}"),
        reason: "expected a 16-bit pci id",
    })
}

/// `numa_node`: `None` when missing or `-1`.
pub(crate) fn read_numa(path: &Path) -> Result<Option<i64>, DiscoveryError> {
    let content = match read_text(path) {
        Err(DiscoveryError::SysfsRead { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None)
        }
        other => other?,
    };
    match content.parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(node) if node >= 0 => Ok(Some(node)),
        _ => Err(DiscoveryError::SysfsContent {
            path: path.to_owned(),
            content,
            reason: "expected a numa node number or -1",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_controllers_of_every_vendor_and_amd_accelerators_are_gpus() {
        for vendor in [Vendor::Nvidia, Vendor::Amd, Vendor::Intel] {
            assert!(is_gpu(0x03_00_00, vendor), "VGA");
            assert!(is_gpu(0x03_02_00, vendor), "3D controller");
            assert!(is_gpu(0x03_80_00, vendor), "other display controller");
            assert!(!is_gpu(0x02_00_00, vendor), "ethernet");
            assert!(!is_gpu(0x06_80_00, vendor), "bridge");
        }
        assert!(is_gpu(0x12_00_00, Vendor::Amd), "Instinct MI300");
        assert!(!is_gpu(0x12_00_00, Vendor::Intel), "an Intel NPU");
        assert!(!is_gpu(0x12_00_00, Vendor::Nvidia));
        assert!(is_candidate_class(0x12_00_00) && !is_candidate_class(0x02_00_00));
    }

    #[test]
    fn pcie_root_is_the_root_bus_component_of_the_link() {
        let link = Path::new("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
        assert_eq!(pcie_root(link).as_deref(), Some("pci0000:3a"));
        let absolute = Path::new("/sys/devices/pci0001:c0/0001:c0:01.0/0001:c1:00.0");
        assert_eq!(pcie_root(absolute).as_deref(), Some("pci0001:c0"));
        assert_eq!(pcie_root(Path::new("../../../devices/platform/x")), None);
        assert_eq!(pcie_root(Path::new("devices/pci_express")), None);
    }
}
