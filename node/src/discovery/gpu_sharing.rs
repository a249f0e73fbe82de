//! How the `nvml` source shares NVIDIA GPUs, a pure mapping of what the library reports
//! ([`super::nvml::GpuInfo`]) onto partitions, counter sets and capacities:
//!
//! - **MIG partitions**, for a GPU whose MIG mode is on and that reports its GPU-instance
//!   profiles: one counter set per GPU, `gpu-N-counter-set`, with the GPU's MIG memory
//!   (`memory`), its compute slices (`compute-slices`) and one counter per memory slice
//!   (`memory-slice-I`, 1 each); one device per (profile, placement), named as NVIDIA's DRA
//!   driver names them, `gpu-N-mig-<profile without dots>-<profile id>-<placement start>`,
//!   consuming the profile's memory and compute slices and the memory slices of its placement,
//!   with the attributes `type` (`mig`), `profile` (`1g.10gb`), `parentUUID`, `parentIndex`
//!   and `productName` and the capacity `memory`. The whole GPU stays published and consumes
//!   every counter of its set, so that it and any partition of it exclude each other.
//! - **Capacity** (`--gpu-sharing capacity`), for a GPU without MIG partitions: the whole GPU
//!   for several claims at once (`allowMultipleAllocations`), with the capacities `memory` (the
//!   GPU's memory, requests in whole GiB from 1 GiB, 1 GiB steps; a request that names no
//!   amount takes all whole GiB) and `compute` (100, requests from 1 in steps of 1, default 100).
//!
//! No library calls and no Kubernetes: the slices are laid out by `v1::pool`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use dra_allocator::model::AttributeValue;
use dra_types::resource_v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, Counter, CounterSet, DeviceCapacity,
    DeviceCounterConsumption,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::nvml::{bytes, GpuInfo, MigProfile};
use crate::device::{DeviceSharing, NodeDevice};

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

/// How whole GPUs are shared (`--gpu-sharing`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuSharing {
    /// One claim per GPU (MIG partitions are published where MIG mode is on).
    #[default]
    None,
    /// Several claims per GPU, each with an amount of its memory and compute.
    Capacity,
}

/// A `--gpu-sharing` value that is neither.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU sharing {0:?}: expected none or capacity")]
pub struct GpuSharingParse(pub String);

impl FromStr for GpuSharing {
    type Err = GpuSharingParse;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "none" => Ok(GpuSharing::None),
            "capacity" => Ok(GpuSharing::Capacity),
            other => Err(GpuSharingParse(other.to_owned())),
        }
    }
}

impl fmt::Display for GpuSharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuSharing::None => "none",
            GpuSharing::Capacity => "capacity",
        })
    }
}

/// The name of GPU `gpu`'s counter set (`gpu` is its device name, `gpu-N`).
pub fn counter_set_name(gpu: &str) -> String {
    format!("{gpu}-counter-set")
}

/// The name of memory slice `index`'s counter.
fn memory_slice(index: u32) -> String {
    format!("memory-slice-{index}")
}

/// A profile's name as `nvidia-smi` writes it: compute slices, memory in GB as a share of the
/// GPU's memory rounded up to eighths (`1g.10gb` on an 80 GB GPU), and the media-engine
/// variant (`+me`, `-me`, `+me.all`, `+gfx`) of NVML's profile constant.
pub fn profile_name(profile: &MigProfile, gpu_memory_bytes: u64) -> String {
    let share = if gpu_memory_bytes == 0 {
        1.0
    } else {
        (profile.memory_mib * MI) as f64 / gpu_memory_bytes as f64
    };
    let eighths = (share * 8.0).ceil() / 8.0;
    let gpu_gb = gpu_memory_bytes.div_ceil(GI) as f64;
    let gb = (eighths * gpu_gb).round() as u64;
    let variant = match profile.profile {
        7 => "+me",
        15 | 16 => "+me.all",
        10..=12 => "+gfx",
        13 | 14 => "-me",
        _ => "",
    };
    format!("{}g.{gb}gb{variant}", profile.slice_count)
}

/// The device name of `profile` (named `name`) at memory slice `start` of GPU `gpu`.
fn partition_name(gpu: &str, name: &str, profile: &MigProfile, start: u32) -> String {
    let label: String = name
        .chars()
        .filter(|c| *c != '.')
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{gpu}-mig-{label}-{}-{start}", profile.id)
}

fn counter(value: u64) -> Counter {
    Counter {
        value: Quantity(value.to_string()),
    }
}

fn memory_counter(bytes_total: u64) -> Counter {
    Counter {
        value: Quantity(bytes(bytes_total).to_string()),
    }
}

/// What a GPU with MIG partitions adds to the pool: its counter set, what the whole GPU
/// consumes of it (everything), and its partitions with what each consumes.
#[derive(Clone, Debug, PartialEq)]
pub struct MigLayout {
    /// The GPU's counter set.
    pub counter_set: CounterSet,
    /// What the whole GPU consumes.
    pub whole: DeviceSharing,
    /// The partitions, with what each consumes.
    pub partitions: Vec<(NodeDevice, DeviceSharing)>,
}

/// The MIG layout of `gpu` (device name `name`, position `index`), or `None` when its MIG
/// mode is off or it reports no profile with a placement. `whole` is the whole GPU's device,
/// whose device nodes the partitions share.
pub fn mig_layout(
    name: &str,
    index: usize,
    gpu: &GpuInfo,
    whole: &NodeDevice,
) -> Option<MigLayout> {
    if gpu.mig_enabled != Some(true) {
        return None;
    }
    let profiles: Vec<&MigProfile> = gpu
        .mig_profiles
        .iter()
        .filter(|p| !p.placements.is_empty())
        .collect();
    let memory_slices = profiles
        .iter()
        .flat_map(|p| &p.placements)
        .map(|p| p.start + p.size)
        .max()?;
    let memory_mib = profiles.iter().map(|p| p.memory_mib).max()?;
    let compute = profiles.iter().map(|p| p.slice_count).max()?;
    let set = counter_set_name(name);
    let mut counters = BTreeMap::from([
        ("memory".to_owned(), memory_counter(memory_mib * MI)),
        ("compute-slices".to_owned(), counter(u64::from(compute))),
    ]);
    for slice in 0..memory_slices {
        counters.insert(memory_slice(slice), counter(1));
    }
    let consume = |counters: BTreeMap<String, Counter>| DeviceSharing {
        consumes_counters: vec![DeviceCounterConsumption {
            counter_set: set.clone(),
            counters,
        }],
        ..DeviceSharing::default()
    };
    let mut partitions = Vec::new();
    for profile in profiles {
        let profile_name = profile_name(profile, gpu.memory_total_bytes);
        for placement in &profile.placements {
            let device = partition_name(name, &profile_name, profile, placement.start);
            let attributes = BTreeMap::from([
                ("type".to_owned(), text("mig")),
                ("vendor".to_owned(), text("nvidia")),
                ("profile".to_owned(), text(&profile_name)),
                ("parentUUID".to_owned(), text(&gpu.uuid)),
                (
                    "parentIndex".to_owned(),
                    AttributeValue::Int(i64::try_from(index).unwrap_or(i64::MAX)),
                ),
                ("productName".to_owned(), text(&gpu.name)),
                (
                    "memory".to_owned(),
                    AttributeValue::Quantity(bytes(profile.memory_mib * MI)),
                ),
            ]);
            let mut used = BTreeMap::from([
                ("memory".to_owned(), memory_counter(profile.memory_mib * MI)),
                (
                    "compute-slices".to_owned(),
                    counter(u64::from(profile.slice_count)),
                ),
            ]);
            for slice in placement.start..placement.start + placement.size {
                used.insert(memory_slice(slice), counter(1));
            }
            let partition = NodeDevice {
                name: device,
                attributes,
                device_nodes: whole.device_nodes.clone(),
                env: BTreeMap::new(),
            };
            partitions.push((partition, consume(used)));
        }
    }
    Some(MigLayout {
        counter_set: CounterSet {
            name: set.clone(),
            counters: counters.clone(),
        },
        whole: consume(counters),
        partitions,
    })
}

/// How a whole GPU with `memory_bytes` of memory is shared under `--gpu-sharing capacity`, or
/// `None` where its memory is under 2 GiB (one request step would not fit).
pub fn capacity_sharing(memory_bytes: u64) -> Option<DeviceSharing> {
    if memory_bytes < 2 * GI {
        return None;
    }
    let whole_gib = memory_bytes / GI;
    let memory = DeviceCapacity {
        value: Quantity(bytes(memory_bytes).to_string()),
        request_policy: Some(CapacityRequestPolicy {
            default: Some(Quantity(format!("{whole_gib}Gi"))),
            valid_values: Vec::new(),
            valid_range: Some(CapacityRequestPolicyRange {
                min: Some(Quantity("1Gi".to_owned())),
                max: None,
                step: Some(Quantity("1Gi".to_owned())),
            }),
        }),
    };
    let compute = DeviceCapacity {
        value: Quantity("100".to_owned()),
        request_policy: Some(CapacityRequestPolicy {
            default: Some(Quantity("100".to_owned())),
            valid_values: Vec::new(),
            valid_range: Some(CapacityRequestPolicyRange {
                min: Some(Quantity("1".to_owned())),
                max: None,
                step: Some(Quantity("1".to_owned())),
            }),
        }),
    };
    Some(DeviceSharing {
        capacity: BTreeMap::from([
            ("memory".to_owned(), memory),
            ("compute".to_owned(), compute),
        ]),
        allow_multiple_allocations: true,
        consumes_counters: Vec::new(),
    })
}

fn text(value: &str) -> AttributeValue {
    AttributeValue::String(value.to_owned())
}
