//! The `nvml` source: NVIDIA GPUs as the NVIDIA management library reports them. The library
//! (`libnvidia-ml.so`, installed with the driver) is opened at run time and only in builds with
//! the cargo feature `nvml`; it sits behind [`GpuLibrary`], so that the mapping of its answers to
//! devices ([`inventory_from`]) is pure and tested without a GPU.
//!
//! Each GPU gets the attributes `vendor` (`nvidia`), `model` (the NVML name, e.g.
//! `NVIDIA H100 80GB HBM3`), `uuid`, `memory` (a quantity), `pciAddress` (in sysfs spelling,
//! `0000:3b:00.0`), `numa` (from NVML, else the sysfs `numa_node`; left out when unknown),
//! `pcieRoot` (from sysfs, as the `sysfs` source reads it; left out when sysfs has no link) and
//! `migEnabled` (the current MIG mode, where the GPU has one). Names are `gpu-N` in PCI address
//! order, as with `sysfs`, so switching sources keeps the names. Device nodes: `nvidiaN` with the
//! minor number NVML reports (the position among NVIDIA GPUs when it reports none), `nvidiactl`,
//! `nvidia-uvm`; the CDI env sets `NVIDIA_VISIBLE_DEVICES` to the GPU's UUID. Where MIG mode is
//! on, the GPU's MIG profiles and their placements add partitions, and `--gpu-sharing capacity`
//! shares the other GPUs by amount ([`super::gpu_sharing`]).

use std::collections::BTreeMap;
use std::path::Path;

use dra_allocator::model::{AttributeValue, Quantity};

use super::gpu_sharing::{capacity_sharing, mig_layout, GpuSharing};
use super::{gpu_name, sysfs, DiscoveryError, DiscoveryRoots};
use crate::device::{Discovered, Inventory, NodeDevice};

/// What the library reports about one GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuInfo {
    /// `GPU-5d2a...`.
    pub uuid: String,
    /// The product name.
    pub name: String,
    /// Total memory in bytes.
    pub memory_total_bytes: u64,
    /// The PCI bus ID as NVML writes it (`00000000:3B:00.0`).
    pub pci_bus_id: String,
    /// The NUMA node, where the driver reports one.
    pub numa: Option<u32>,
    /// The minor number of `/dev/nvidiaN`, where the driver reports one.
    pub minor: Option<u32>,
    /// Whether MIG mode is on; `None` for GPUs without MIG.
    pub mig_enabled: Option<bool>,
    /// The GPU-instance profiles the GPU supports with their placements (read where MIG
    /// mode is on; empty otherwise).
    pub mig_profiles: Vec<MigProfile>,
}

/// A GPU-instance (MIG) profile as NVML reports it (`nvmlDeviceGetGpuInstanceProfileInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigProfile {
    /// The `NVML_GPU_INSTANCE_PROFILE_*` constant NVML was asked about (0 is one slice, 7 one
    /// slice with a media engine, 9 one slice with twice the memory, ...).
    pub profile: u32,
    /// The GPU-instance profile ID NVML answered (`nvidia-smi mig -lgip`'s ID: 19 for
    /// `1g.10gb` on an H100).
    pub id: u32,
    /// Its compute slices.
    pub slice_count: u32,
    /// Its memory in MiB.
    pub memory_mib: u64,
    /// Where an instance of it may be placed (`nvmlDeviceGetGpuInstancePossiblePlacements`).
    pub placements: Vec<MigPlacement>,
}

/// A placement of a MIG profile: the memory slices `start..start + size`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigPlacement {
    /// The first memory slice.
    pub start: u32,
    /// How many memory slices.
    pub size: u32,
}

/// A source of [`GpuInfo`]: NVML in production, a list in tests.
pub trait GpuLibrary {
    /// Every GPU the library sees.
    ///
    /// # Errors
    /// The library failed.
    fn devices(&self) -> Result<Vec<GpuInfo>, DiscoveryError>;
}

/// Reads the GPUs through NVML, shared as `sharing` says.
///
/// # Errors
/// NVML cannot be opened or fails ([`DiscoveryError::NvmlNotBuilt`] without the `nvml` feature).
pub fn discover(roots: &DiscoveryRoots, sharing: GpuSharing) -> Result<Discovered, DiscoveryError> {
    #[cfg(feature = "nvml")]
    {
        discovered_from(&library::Nvml::open()?, roots, sharing)
    }
    #[cfg(not(feature = "nvml"))]
    {
        let _ = (roots, sharing);
        Err(DiscoveryError::NvmlNotBuilt)
    }
}

/// The devices, partitions and counter sets of the GPUs `library` reports: each GPU as
/// [`inventory_from`] maps it; where its MIG mode is on, its partitions and counter set; with
/// `sharing` [`GpuSharing::Capacity`], each GPU without partitions shared by capacity.
///
/// # Errors
/// As [`inventory_from`].
pub fn discovered_from(
    library: &dyn GpuLibrary,
    roots: &DiscoveryRoots,
    sharing: GpuSharing,
) -> Result<Discovered, DiscoveryError> {
    let gpus = sorted(library)?;
    let mut found = Discovered::default();
    for (index, (address, gpu)) in gpus.into_iter().enumerate() {
        let device = gpu_device(index, &address, &gpu, roots)?;
        let name = device.name.clone();
        if let Some(layout) = mig_layout(&name, index, &gpu, &device) {
            found
                .counter_sets
                .insert(layout.counter_set.name.clone(), layout.counter_set);
            found.sharing.insert(name.clone(), layout.whole);
            for (partition, consumes) in layout.partitions {
                found.sharing.insert(partition.name.clone(), consumes);
                found.devices.insert(partition.name.clone(), partition);
            }
        } else if sharing == GpuSharing::Capacity {
            if let Some(shared) = capacity_sharing(gpu.memory_total_bytes) {
                found.sharing.insert(name.clone(), shared);
            }
        }
        found.devices.insert(name, device);
    }
    Ok(found)
}

/// The GPUs `library` reports with their sysfs addresses, in address order.
fn sorted(library: &dyn GpuLibrary) -> Result<Vec<(String, GpuInfo)>, DiscoveryError> {
    let mut gpus: Vec<(String, GpuInfo)> = library
        .devices()?
        .into_iter()
        .map(|gpu| (sysfs_address(&gpu.pci_bus_id), gpu))
        .collect();
    gpus.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(gpus)
}

/// The inventory of the GPUs `library` reports; sysfs under `roots` adds `pcieRoot` (and `numa`
/// where NVML has none), device nodes are named under `roots.dev`.
///
/// # Errors
/// The library failed, or a sysfs `numa_node` file holds something unexpected.
pub fn inventory_from(
    library: &dyn GpuLibrary,
    roots: &DiscoveryRoots,
) -> Result<Inventory, DiscoveryError> {
    let mut inventory = Inventory::new();
    for (index, (address, gpu)) in sorted(library)?.into_iter().enumerate() {
        let device = gpu_device(index, &address, &gpu, roots)?;
        inventory.insert(device.name.clone(), device);
    }
    Ok(inventory)
}

/// The `index`th GPU, at sysfs `address`, as a whole device.
fn gpu_device(
    index: usize,
    address: &str,
    gpu: &GpuInfo,
    roots: &DiscoveryRoots,
) -> Result<NodeDevice, DiscoveryError> {
    let sysfs_dir = roots.sysfs.join("bus/pci/devices").join(address);
    let mut attributes = BTreeMap::from([
        ("vendor".to_owned(), text("nvidia")),
        ("model".to_owned(), text(&gpu.name)),
        ("uuid".to_owned(), text(&gpu.uuid)),
        (
            "memory".to_owned(),
            AttributeValue::Quantity(bytes(gpu.memory_total_bytes)),
        ),
        ("pciAddress".to_owned(), text(address)),
    ]);
    let numa = match gpu.numa {
        Some(node) => Some(i64::from(node)),
        None => sysfs::read_numa(&sysfs_dir.join("numa_node"))?,
    };
    if let Some(numa) = numa {
        attributes.insert("numa".to_owned(), AttributeValue::Int(numa));
    }
    if let Some(root) = std::fs::read_link(&sysfs_dir)
        .ok()
        .and_then(|target| sysfs::pcie_root(&target))
    {
        attributes.insert("pcieRoot".to_owned(), text(&root));
    }
    if let Some(mig) = gpu.mig_enabled {
        attributes.insert("migEnabled".to_owned(), AttributeValue::Bool(mig));
    }
    let minor = gpu.minor.map_or(index, |m| m as usize);
    Ok(NodeDevice {
        name: gpu_name(index),
        attributes,
        device_nodes: nvidia_nodes(&roots.dev, minor),
        env: BTreeMap::from([("NVIDIA_VISIBLE_DEVICES".to_owned(), gpu.uuid.clone())]),
    })
}

fn nvidia_nodes(dev: &Path, minor: usize) -> Vec<std::path::PathBuf> {
    vec![
        dev.join(format!("nvidia{minor}")),
        dev.join("nvidiactl"),
        dev.join("nvidia-uvm"),
    ]
}

fn text(value: &str) -> AttributeValue {
    AttributeValue::String(value.to_owned())
}

/// NVML's `00000000:3B:00.0` in sysfs spelling, `0000:3b:00.0` (a 16-bit domain, lowercase).
pub fn sysfs_address(bus_id: &str) -> String {
    let lower = bus_id.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) => match u32::from_str_radix(domain, 16) {
            Ok(domain) => format!("{domain:04x}:{rest}"),
            Err(_) => lower,
        },
        None => lower,
    }
}

/// A byte count as a quantity in the largest binary unit that divides it (`80Gi`, `81559Mi`).
pub fn bytes(count: u64) -> Quantity {
    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;
    let text = if count != 0 && count.is_multiple_of(GI) {
        format!("{}Gi", count / GI)
    } else if count != 0 && count.is_multiple_of(MI) {
        format!("{}Mi", count / MI)
    } else {
        count.to_string()
    };
    Quantity::parse(&text)
        .unwrap_or_else(|_| Quantity::from_units(i64::try_from(count).unwrap_or(i64::MAX)))
}

#[cfg(feature = "nvml")]
mod placements;

#[cfg(feature = "nvml")]
mod library {
    //! [`GpuLibrary`](super::GpuLibrary) over `nvml-wrapper`, which opens `libnvidia-ml.so.1`
    //! when [`Nvml::open`] is called (once per discovery, and closed again after it).

    use super::{DiscoveryError, GpuInfo, GpuLibrary, MigPlacement, MigProfile};

    /// NVML's GPU-instance profile IDs are `0..NVML_GPU_INSTANCE_PROFILE_COUNT` (17 in the
    /// headers nvml-wrapper 0.13 binds).
    const PROFILE_IDS: u32 = 17;

    /// The MIG profiles `device` supports with their possible placements; a profile the GPU
    /// does not support (NVML answers `NotSupported` or `InvalidArg`) is left out.
    fn mig_profiles(device: &nvml_wrapper::Device<'_>) -> Vec<MigProfile> {
        (0..PROFILE_IDS)
            .filter_map(|id| {
                let info = device.profile_info(id).ok()?;
                let placements = super::placements::possible_placements(device, id)?
                    .into_iter()
                    .map(|(start, size)| MigPlacement { start, size })
                    .collect();
                Some(MigProfile {
                    profile: id,
                    id: info.id,
                    slice_count: info.slice_count,
                    memory_mib: info.memory_size_mb,
                    placements,
                })
            })
            .collect()
    }

    /// An open NVML.
    pub struct Nvml(nvml_wrapper::Nvml);

    fn failed(call: &'static str) -> impl FnOnce(nvml_wrapper::error::NvmlError) -> DiscoveryError {
        move |error| DiscoveryError::Nvml {
            call,
            source: Box::new(error),
        }
    }

    impl Nvml {
        /// Loads and initialises the library.
        pub fn open() -> Result<Self, DiscoveryError> {
            nvml_wrapper::Nvml::init().map(Nvml).map_err(failed("init"))
        }
    }

    impl GpuLibrary for Nvml {
        fn devices(&self) -> Result<Vec<GpuInfo>, DiscoveryError> {
            let count = self.0.device_count().map_err(failed("device count"))?;
            let mut gpus = Vec::new();
            for index in 0..count {
                let device = self.0.device_by_index(index).map_err(failed("device"))?;
                let mig_enabled = device.mig_mode().ok().map(|mode| mode.current == 1);
                let mig_profiles = if mig_enabled == Some(true) {
                    mig_profiles(&device)
                } else {
                    Vec::new()
                };
                gpus.push(GpuInfo {
                    uuid: device.uuid().map_err(failed("device uuid"))?,
                    name: device.name().map_err(failed("device name"))?,
                    memory_total_bytes: device.memory_info().map_err(failed("memory info"))?.total,
                    pci_bus_id: device.pci_info().map_err(failed("pci info"))?.bus_id,
                    numa: device.numa_node_id().ok(),
                    minor: device.minor_number().ok(),
                    mig_enabled,
                    mig_profiles,
                });
            }
            Ok(gpus)
        }
    }
}
