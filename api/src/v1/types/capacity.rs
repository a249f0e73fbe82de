//! The JSON shapes of capacity: a node's or a model's whole-device equivalents and capacities
//! allocated of total, a device's parent GPU and the shares claims hold of it. Quantities are
//! written as Kubernetes writes them (`80Gi`), as attributes are.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::capacity::{CapacityUse, Utilisation};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::capacity::{ClaimHold, NodeCapacity};

/// Utilisation of some physical units (GPUs) whose devices are partitions or shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityItem {
    /// Physical units (GPUs).
    pub units: u64,
    /// Whole-device equivalents allocated, at most `units`: each unit counts the fractions its
    /// holders take (a partition's tightest counter, a share's largest consumed capacity), at
    /// most one; rounded to thousandths.
    pub equivalents_allocated: f64,
    /// Allocated and total per capacity or counter name (`memory`, `compute`); the counters of
    /// one unit each that mark where a partition sits (`memory-slice-0`) are left out.
    pub capacity: BTreeMap<String, CapacityUseItem>,
}

/// How much of one capacity is allocated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityUseItem {
    /// Allocated, as a quantity (`40Gi`).
    pub allocated: String,
    /// What the units have, as a quantity (`80Gi`).
    pub total: String,
}

impl From<&CapacityUse> for CapacityUseItem {
    fn from(usage: &CapacityUse) -> Self {
        CapacityUseItem {
            allocated: usage.allocated.to_string(),
            total: usage.total.to_string(),
        }
    }
}

impl CapacityItem {
    /// The item of `u`, leaving out the capacities named in `hidden` (placement counters).
    pub fn new(u: &Utilisation, hidden: &BTreeSet<String>) -> Self {
        CapacityItem {
            units: u.units,
            equivalents_allocated: u.equivalents_shown(),
            capacity: u
                .capacity
                .iter()
                .filter(|(name, _)| !hidden.contains(*name))
                .map(|(name, usage)| (name.clone(), usage.into()))
                .collect(),
        }
    }

    /// The capacity of `node`, `None` where it has no partitions or shares.
    pub fn of_node(node: Option<&NodeCapacity>) -> Option<Self> {
        let node = node.filter(|n| n.has_shared_devices())?;
        Some(Self::new(
            &node.utilisation().total,
            &node.placement_counters(),
        ))
    }
}

/// A share a claim holds of a multi-allocation device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareItem {
    /// The claim UID.
    pub claim_uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// The share ID of the allocation result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// What the share consumes per capacity name, as quantities (`memory: 40Gi`).
    pub consumed: BTreeMap<String, String>,
}

impl From<&ClaimHold> for ShareItem {
    fn from(held: &ClaimHold) -> Self {
        ShareItem {
            claim_uid: held.claim.uid.clone(),
            namespace: held.claim.namespace.clone(),
            name: held.claim.name.clone(),
            share_id: held.hold.share_id.clone(),
            consumed: held
                .hold
                .consumed
                .iter()
                .map(|(name, amount)| (name.clone(), amount.to_string()))
                .collect(),
        }
    }
}
