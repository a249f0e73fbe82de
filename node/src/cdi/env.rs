//! The environment a claim's CDI edits set: `DRA_LEDGER_CLAIM_UID`, `DRA_LEDGER_DEVICES` (the
//! device names), each device's own variables (a variable that several devices set gets their
//! values comma-separated, in device order, each once: `NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b`),
//! for a MIG partition whose `uuid` attribute is a MIG device UUID `NVIDIA_VISIBLE_DEVICES`
//! naming that partition (so the container sees only it), and for the shares the claim holds
//! `DRA_LEDGER_SHARE_ID`, `DRA_LEDGER_MEMORY_LIMIT` and `DRA_LEDGER_COMPUTE_SHARE` (the share
//! IDs and the `memory` and `compute` the shares consume, as the allocation writes them,
//! comma-separated where the claim holds several shares). Pure.

use std::collections::BTreeMap;

use dra_allocator::model::AttributeValue;

use crate::device::{DeviceShare, NodeDevice};

/// The claim's UID.
pub const CLAIM_UID: &str = "DRA_LEDGER_CLAIM_UID";
/// The names of the claim's devices.
pub const DEVICES: &str = "DRA_LEDGER_DEVICES";
/// The share IDs of the claim's shares.
pub const SHARE_ID: &str = "DRA_LEDGER_SHARE_ID";
/// The `memory` the claim's shares consume.
pub const MEMORY_LIMIT: &str = "DRA_LEDGER_MEMORY_LIMIT";
/// The `compute` the claim's shares consume.
pub const COMPUTE_SHARE: &str = "DRA_LEDGER_COMPUTE_SHARE";
/// The variable the NVIDIA container toolkit reads the visible GPUs and MIG devices from.
const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// How a MIG device's UUID starts (`MIG-<uuid>`; whole GPUs are `GPU-<uuid>`).
const MIG_UUID_PREFIX: &str = "MIG-";

/// Whether `device` is a MIG partition a container cannot be confined to: a partition (`type`
/// `mig` with a `parentUUID`, as the `nvml` source derives one per placement) that names no MIG
/// device (`uuid` not `MIG-...`) and sets no `NVIDIA_VISIBLE_DEVICES` of its own. Its spec could
/// only give the parent GPU's device nodes, so the container would see the whole GPU while the
/// scheduler counts a fraction of it; the prepare refuses it instead.
pub fn unconfined_mig_partition(device: &NodeDevice) -> bool {
    let text = |name: &str| match device.attributes.get(name) {
        Some(AttributeValue::String(value)) => Some(value.as_str()),
        _ => None,
    };
    text("type") == Some("mig")
        && text("parentUUID").is_some()
        && !text("uuid").is_some_and(|uuid| uuid.starts_with(MIG_UUID_PREFIX))
        && !device.env.contains_key(NVIDIA_VISIBLE_DEVICES)
}

/// The variables of claim `uid` holding `devices` and `shares` (of those devices).
pub fn claim_env(
    uid: &str,
    devices: &[&NodeDevice],
    shares: &[DeviceShare],
) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for device in devices {
        let mut own: BTreeMap<&str, &str> = device
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(AttributeValue::String(uuid)) = device.attributes.get("uuid") {
            if uuid.starts_with(MIG_UUID_PREFIX) {
                own.insert(NVIDIA_VISIBLE_DEVICES, uuid);
            }
        }
        for (name, value) in own {
            let list = values.entry(name.to_owned()).or_default();
            if !list.contains(&value) {
                list.push(value);
            }
        }
    }
    let mut env: BTreeMap<String, String> = values
        .into_iter()
        .map(|(name, list)| (name, list.join(",")))
        .collect();
    env.insert(CLAIM_UID.into(), uid.to_owned());
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    env.insert(DEVICES.into(), names.join(","));
    if !shares.is_empty() {
        let ids: Vec<&str> = shares.iter().map(|s| s.share_id.as_str()).collect();
        env.insert(SHARE_ID.into(), ids.join(","));
    }
    for (variable, capacity) in [(MEMORY_LIMIT, "memory"), (COMPUTE_SHARE, "compute")] {
        let amounts: Vec<&str> = shares
            .iter()
            .filter_map(|s| s.consumed.get(capacity).map(String::as_str))
            .collect();
        if !amounts.is_empty() {
            env.insert(variable.into(), amounts.join(","));
        }
    }
    env
}
