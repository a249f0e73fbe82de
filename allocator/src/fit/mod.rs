//! Pure allocation decisions over an [`Inventory`]: which devices are usable for a request,
//! choosing devices for one request (on a node, or on the best node by policy), the gang check
//! over all pending claims of a pod and the all-or-nothing choice for them on one node.
//!
//! Must not depend on the ledger, on I/O, redb, tokio or kube. Answers are deterministic: ties
//! are broken by device name and node name.
//!
//! Usability of a device: an exclusive request needs it free (no consumers), not cordoned and
//! not missing; a shared request with `maxConsumers = m` needs no exclusive holder and fewer
//! consumers than `m` and than the smallest `maxConsumers` of the existing consumers.
//! Reservations (devices promised to other pods' pending allocations) count as consumers.
//!
//! The per-node search is exact: a node is reported unsuitable only when no assignment of
//! devices to all requests exists, except that a search needing more than 50,000 steps on one
//! node gives up and reports it as "too many combinations to check" (interchangeable devices are
//! tried once, so realistic nodes stay far below that).

mod backtrack;
mod block;
mod choose;
mod compact;
mod index;
mod inventory;
mod search;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use choose::{
    choose_for_pod, choose_node, choose_node_among, choose_on_node, unsuitable_nodes,
};
pub use inventory::{Consumers, DeviceView, Inventory, NodeView, SharedConsumer};

use crate::model::{EffectiveRequest, Sharing};

/// What went wrong in the fitting layer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// The node is not in the inventory.
    #[error("unknown node {0}")]
    UnknownNode(String),
    /// The device is not on the node.
    #[error("unknown device {device} on node {node}")]
    UnknownDevice {
        /// The node looked at.
        node: String,
        /// The device asked for.
        device: String,
    },
    /// Two devices of one node carry the same name.
    #[error("duplicate device {device} on node {node}")]
    DuplicateDevice {
        /// The node.
        node: String,
        /// The repeated device name.
        device: String,
    },
    /// A consumer cannot be added: the device is held exclusively, or in use for an exclusive
    /// request.
    #[error("device {device} on node {node} is in use")]
    DeviceInUse {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
    /// The request does not fit on the node.
    #[error("node {}: {}", .0.node, .0.reason)]
    Unsuitable(UnsuitableNode),
    /// No node can hold the request.
    #[error("no node fits: {reason}")]
    NoNodeFits {
        /// Why the node that came closest was rejected, or that there are no nodes.
        reason: String,
    },
}

/// Result alias of the fitting layer.
pub type Result<T, E = FitError> = std::result::Result<T, E>;

/// A claim's effective request with the name messages should show for it.
#[derive(Clone, Copy, Debug)]
pub struct NamedRequest<'a> {
    /// The claim's name as messages should show it (pod claim name or claim name).
    pub name: &'a str,
    /// What it asks for.
    pub request: &'a EffectiveRequest,
}

/// Devices chosen for one request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// The node all devices are on.
    pub node: String,
    /// Device names, in the order they were chosen.
    pub devices: Vec<String>,
}

/// A node that cannot hold all of a pod's pending claims, and why.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnsuitableNode {
    /// The node.
    pub node: String,
    /// The first claim that could not be placed, when one claim is to blame.
    pub claim: Option<String>,
    /// A short reason, e.g. `claim gpu: 2 of 4 devices free matching model In [H200]`.
    pub reason: String,
}

impl fmt::Display for UnsuitableNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, self.reason)
    }
}

/// Devices promised to other pods' pending allocations, which count as taken, and holds to leave
/// out, whose devices count as if those claims did not hold them (a pod's own earlier, possibly
/// stale, allocations in its gang check).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reservations {
    by_node: HashMap<String, Vec<(String, Sharing)>>,
    released: HashMap<String, Vec<(String, String)>>,
}

/// The reservations and released holds on one node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeReservations<'r> {
    /// `(device, sharing)` promised to other pods.
    pub(crate) taken: &'r [(String, Sharing)],
    /// `(device, claim UID)` holds to leave out.
    pub(crate) released: &'r [(String, String)],
}

impl Reservations {
    /// No reservations.
    pub fn new() -> Self {
        Reservations::default()
    }

    /// Records that `device` on `node` is promised under `sharing`.
    pub fn reserve(&mut self, node: &str, device: &str, sharing: Sharing) {
        self.by_node
            .entry(node.to_owned())
            .or_default()
            .push((device.to_owned(), sharing));
    }

    /// Records that the hold of claim `claim_uid` on `device` of `node` is left out: the device
    /// counts as if that claim did not hold it. A device or holder the inventory does not have
    /// is ignored.
    pub fn release(&mut self, node: &str, device: &str, claim_uid: &str) {
        self.released
            .entry(node.to_owned())
            .or_default()
            .push((device.to_owned(), claim_uid.to_owned()));
    }

    /// The reservations on `node`.
    pub fn on_node(&self, node: &str) -> &[(String, Sharing)] {
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// The released holds on `node`, as `(device, claim UID)`.
    pub fn released_on_node(&self, node: &str) -> &[(String, String)] {
        self.released.get(node).map_or(&[], Vec::as_slice)
    }

    /// Everything recorded for `node`.
    pub(crate) fn on(&self, node: &str) -> NodeReservations<'_> {
        NodeReservations {
            taken: self.on_node(node),
            released: self.released_on_node(node),
        }
    }

    /// Whether nothing is reserved or released.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty() && self.released.is_empty()
    }
}
