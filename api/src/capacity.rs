//! The capacity view the admin API shows beside the ledger's device counts: each node's
//! physical units (GPUs), how its devices sit on them, and what claims hold of them, partitions
//! and capacity shares included. The process that follows the cluster (the `resource.k8s.io/v1`
//! mirror) builds a [`CapacityView`] from the slices and claims it already holds after each
//! change and publishes it through a [`SharedCapacity`]; the handlers read the last one.
//!
//! The view is not stored in the ledger: the slices and claims it comes from are always in the
//! cluster. Without a publisher (on `v1alpha2`, where devices are whole) the view is empty and
//! the answers leave capacity out. Depends on `dra-allocator`'s pure capacity model only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use dra_allocator::capacity::{Hold, NodeParts, NodeUtilisation};
use dra_allocator::ledger::ClaimRef;
use dra_allocator::model::Quantity;

/// What one claim holds of one device, with the claim's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimHold {
    /// The claim.
    pub claim: ClaimRef,
    /// What it holds.
    pub hold: Hold,
}

/// One node: its units and device parts, and the holds on them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCapacity {
    /// The node's units and how its devices sit on them.
    pub parts: NodeParts,
    /// What the claims allocated on the node hold.
    pub holds: Vec<ClaimHold>,
}

impl NodeCapacity {
    /// Whether the node has devices that are parts of a unit (partitions) or given to several
    /// claims at once: only such nodes have a capacity view worth showing.
    pub fn has_shared_devices(&self) -> bool {
        self.parts
            .devices
            .iter()
            .any(|(name, part)| part.multi_allocation || part.unit != *name)
    }

    /// The node's utilisation under its holds.
    pub fn utilisation(&self) -> NodeUtilisation {
        let holds: Vec<Hold> = self.holds.iter().map(|h| h.hold.clone()).collect();
        self.parts.utilisation(&holds)
    }

    /// The names of the counters a unit has exactly one of (NVIDIA's `memory-slice-0`): they
    /// mark where a partition sits, not how much it takes, and are left out of what is shown.
    pub fn placement_counters(&self) -> BTreeSet<String> {
        let one = Quantity::from_units(1);
        self.parts
            .units
            .values()
            .flat_map(|unit| unit.totals.iter())
            .filter(|(_, total)| **total == one)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The unit device `device` is a partition of (the counter set it consumes from); `None`
    /// for a device that is its own unit or that the node does not have.
    pub fn parent_of(&self, device: &str) -> Option<&str> {
        let part = self.parts.devices.get(device)?;
        (part.unit != device).then_some(part.unit.as_str())
    }

    /// The shares of multi-allocation device `device`, in claim order.
    pub fn shares_of<'a>(&'a self, device: &'a str) -> impl Iterator<Item = &'a ClaimHold> + 'a {
        self.holds
            .iter()
            .filter(move |h| h.hold.device == device && h.hold.is_share())
    }
}

/// The capacity of every node that publishes parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityView {
    /// The nodes by name.
    pub nodes: BTreeMap<String, NodeCapacity>,
}

impl CapacityView {
    /// The utilisation of the nodes with shared devices, added up (in all and per model);
    /// `None` when no node has any.
    pub fn shared_utilisation(&self) -> Option<NodeUtilisation> {
        let mut total: Option<NodeUtilisation> = None;
        for node in self.nodes.values().filter(|n| n.has_shared_devices()) {
            total
                .get_or_insert_with(NodeUtilisation::default)
                .add(&node.utilisation());
        }
        total
    }

    /// The placement counters of every node (see [`NodeCapacity::placement_counters`]).
    pub fn placement_counters(&self) -> BTreeSet<String> {
        self.nodes
            .values()
            .flat_map(NodeCapacity::placement_counters)
            .collect()
    }
}

/// The handle the publisher writes the newest [`CapacityView`] to and the handlers read it
/// from. Cheap to clone; clones share the view.
#[derive(Clone, Debug, Default)]
pub struct SharedCapacity(Arc<RwLock<Arc<CapacityView>>>);

impl SharedCapacity {
    /// Replaces the view.
    pub fn publish(&self, view: CapacityView) {
        let mut slot = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Arc::new(view);
    }

    /// The newest view.
    pub fn view(&self) -> Arc<CapacityView> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
