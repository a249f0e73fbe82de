//! The public fitting entry points: the gang check over a pod's pending claims, the atomic
//! choice for all of them on one node, and the choice for a single request on a node or on the
//! best node by policy. Pure; reads the [`Inventory`] only.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::index::FnvBuild;
use super::inventory::NodeRef;
use super::search::{Failure, Prepared};
use super::{FitError, Inventory, NamedRequest, Placement, Reservations, Result, UnsuitableNode};
use crate::model::Policy;

const NO_DEVICES: &str = "no devices of this driver on the node";

/// Candidates the gang check resolves ahead of the search.
const BATCH: usize = 32;

fn unsuitable(node: &str, claims: &[NamedRequest<'_>], failure: Failure) -> UnsuitableNode {
    UnsuitableNode {
        node: node.to_owned(),
        claim: failure.claim.map(|i| claims[i].name.to_owned()),
        reason: failure.reason,
    }
}

fn unknown(node: &str) -> UnsuitableNode {
    UnsuitableNode {
        node: node.to_owned(),
        claim: None,
        reason: NO_DEVICES.to_owned(),
    }
}

/// The gang check: which `candidates` cannot hold all `claims` (the pending claims of one pod)
/// at once, each with a reason naming the first claim that failed. Claims of the pod never take
/// the same exclusive device, shared devices respect `maxConsumers`, and `reservations` count as
/// taken. A node the inventory does not know is unsuitable. The result keeps candidate order;
/// repeated candidates are reported once.
///
/// ```
/// use dra_allocator::fit::{
///     unsuitable_nodes, DeviceView, Inventory, NamedRequest, NodeView, Reservations,
/// };
/// use dra_allocator::model::{
///     AttributeValue, ClaimRequest, ClassDefaults, Device, EffectiveRequest, Operator,
///     Requirement,
/// };
///
/// let gpu = |name: &str, model: &str| {
///     DeviceView::free(Device::new(name).with("model", AttributeValue::String(model.into())))
/// };
/// let inventory = Inventory::from_nodes([
///     NodeView::new("node-a", vec![gpu("gpu-0", "H200"), gpu("gpu-1", "H200")]),
///     NodeView::new("node-b", vec![gpu("gpu-0", "H200"), gpu("gpu-1", "L4")]),
/// ])?;
/// let class = ClassDefaults {
///     selector: vec![Requirement::new("model", Operator::In, &["H200"])],
///     ..ClassDefaults::default()
/// };
/// let claim = ClaimRequest { count: 2, ..ClaimRequest::default() };
/// let two_h200 = EffectiveRequest::combine(&class, &claim)?;
/// let claims = [NamedRequest { name: "gpus", request: &two_h200 }];
///
/// let candidates = ["node-a", "node-b"];
/// let unsuitable = unsuitable_nodes(&inventory, &claims, &candidates, &Reservations::new());
/// assert_eq!(unsuitable.len(), 1);
/// assert_eq!(unsuitable[0].node, "node-b");
/// assert_eq!(unsuitable[0].claim.as_deref(), Some("gpus"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn unsuitable_nodes<S: AsRef<str>>(
    inventory: &Inventory,
    claims: &[NamedRequest<'_>],
    candidates: &[S],
    reservations: &Reservations,
) -> Vec<UnsuitableNode> {
    if claims.is_empty() {
        return Vec::new();
    }
    let mut prepared = Prepared::new(claims, inventory.interner());
    // Grown as needed: a large allocation up front makes glibc consolidate every small block the
    // caller freed since the last check (the previous result's strings) on the spot.
    let mut result: Vec<UnsuitableNode> = Vec::new();
    let mut seen = Seen::new(inventory.slots());
    // Candidates are resolved a batch ahead of the search so that the independent lookups
    // overlap their memory latency; a fixed batch keeps this free of allocations.
    let mut batch: [(&str, Option<NodeRef<'_>>); BATCH] = [("", None); BATCH];
    for chunk in candidates.chunks(BATCH) {
        for (slot, node) in batch.iter_mut().zip(chunk) {
            let node = node.as_ref();
            let entry = inventory.entry(node);
            if let Some(entry) = &entry {
                entry.block.touch();
            }
            *slot = (node, entry);
        }
        for &(node, entry) in &batch[..chunk.len()] {
            match entry {
                None if seen.first_unknown(node) => result.push(unknown(node)),
                Some(entry) if seen.first_slot(entry.slot()) => {
                    let verdict =
                        prepared.fits(inventory.interner(), &entry, reservations.on(node));
                    if let Err(failure) = verdict {
                        result.push(unsuitable(node, claims, failure));
                    }
                }
                _ => {}
            }
        }
    }
    result
}

/// The candidates a gang check has looked at: inventory slots in a bit set, names the inventory
/// does not know in a set made only when one turns up.
struct Seen<'a> {
    slots: Vec<u64>,
    unknown: Option<HashSet<&'a str, FnvBuild>>,
}

impl<'a> Seen<'a> {
    fn new(slots: usize) -> Self {
        Seen {
            slots: vec![0; slots.div_ceil(64)],
            unknown: None,
        }
    }

    /// Whether `slot` is seen for the first time (and marks it seen).
    fn first_slot(&mut self, slot: usize) -> bool {
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        let first = self.slots[word] & bit == 0;
        self.slots[word] |= bit;
        first
    }

    /// Whether the unknown `node` is seen for the first time (and marks it seen).
    fn first_unknown(&mut self, node: &'a str) -> bool {
        self.unknown
            .get_or_insert_with(HashSet::default)
            .insert(node)
    }
}

fn placements(entry: &NodeRef<'_>, chosen: Vec<Vec<usize>>) -> Vec<Placement> {
    let view = entry.view();
    chosen
        .into_iter()
        .map(|devices| Placement {
            node: view.name.clone(),
            devices: devices
                .into_iter()
                .map(|d| view.devices[d].device.name.clone())
                .collect(),
        })
        .collect()
}

/// Chooses devices on `node` for all `claims` of one pod at once, or none: one placement per
/// claim, in claim order. Agrees with [`unsuitable_nodes`]: it succeeds exactly on the nodes the
/// gang check does not report.
///
/// ```
/// use dra_allocator::fit::{
///     choose_for_pod, DeviceView, Inventory, NamedRequest, NodeView, Reservations,
/// };
/// use dra_allocator::model::{ClassDefaults, Device, EffectiveRequest};
///
/// let devices = ["gpu-0", "gpu-1"].map(|name| DeviceView::free(Device::new(name)));
/// let inventory = Inventory::from_nodes([NodeView::new("node-a", devices.to_vec())])?;
/// let one = EffectiveRequest::from_class(&ClassDefaults::default())?;
/// let claims = [
///     NamedRequest { name: "first", request: &one },
///     NamedRequest { name: "second", request: &one },
/// ];
/// let placements = choose_for_pod(&inventory, "node-a", &claims, &Reservations::new())?;
/// assert_eq!(placements[0].devices, ["gpu-0"]);
/// assert_eq!(placements[1].devices, ["gpu-1"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn choose_for_pod(
    inventory: &Inventory,
    node: &str,
    claims: &[NamedRequest<'_>],
    reservations: &Reservations,
) -> Result<Vec<Placement>> {
    let entry = inventory
        .entry(node)
        .ok_or_else(|| FitError::Unsuitable(unknown(node)))?;
    let mut prepared = Prepared::new(claims, inventory.interner());
    let chosen = prepared
        .place(inventory.interner(), &entry, reservations.on(node))
        .map_err(|f| FitError::Unsuitable(unsuitable(node, claims, f)))?;
    Ok(placements(&entry, chosen))
}

/// Chooses devices for one request on `node`.
pub fn choose_on_node(
    inventory: &Inventory,
    node: &str,
    claim: NamedRequest<'_>,
    reservations: &Reservations,
) -> Result<Placement> {
    let mut placements = choose_for_pod(inventory, node, &[claim], reservations)?;
    Ok(placements.remove(0))
}

/// Chooses the best node of the whole inventory for one request, by the request's policy:
/// `Pack` takes the busiest node that fits (highest fraction of devices in use), `Spread` the
/// emptiest; ties go to the smaller node name.
pub fn choose_node(
    inventory: &Inventory,
    claim: NamedRequest<'_>,
    reservations: &Reservations,
) -> Result<Placement> {
    best_node(
        inventory,
        claim,
        inventory.entries().collect(),
        reservations,
    )
}

/// Like [`choose_node`], restricted to `candidates` (unknown names are skipped).
pub fn choose_node_among<S: AsRef<str>>(
    inventory: &Inventory,
    claim: NamedRequest<'_>,
    candidates: &[S],
    reservations: &Reservations,
) -> Result<Placement> {
    let mut entries: Vec<NodeRef<'_>> = candidates
        .iter()
        .filter_map(|c| inventory.entry(c.as_ref()))
        .collect();
    entries.sort_by(|a, b| a.view().name.cmp(&b.view().name));
    entries.dedup_by_key(|e| e.slot());
    best_node(inventory, claim, entries, reservations)
}

/// Orders nodes by fraction of devices in use: descending for Pack, ascending for Spread;
/// then by name.
fn by_policy(policy: Policy, a: &NodeRef<'_>, b: &NodeRef<'_>) -> Ordering {
    // in_use_a / total_a compared with in_use_b / total_b without division.
    let (a_block, b_block) = (a.block, b.block);
    let fraction = (a_block.in_use() * b_block.len()).cmp(&(b_block.in_use() * a_block.len()));
    let fraction = match policy {
        Policy::Pack => fraction.reverse(),
        Policy::Spread => fraction,
    };
    fraction.then_with(|| a.view().name.cmp(&b.view().name))
}

fn best_node(
    inventory: &Inventory,
    claim: NamedRequest<'_>,
    mut entries: Vec<NodeRef<'_>>,
    reservations: &Reservations,
) -> Result<Placement> {
    entries.retain(|e| e.block.len() > 0);
    entries.sort_by(|a, b| by_policy(claim.request.policy, a, b));
    let claims = [claim];
    let mut prepared = Prepared::new(&claims, inventory.interner());
    let mut first_failure: Option<UnsuitableNode> = None;
    for entry in &entries {
        let node = entry.view().name.as_str();
        match prepared.place(inventory.interner(), entry, reservations.on(node)) {
            Ok(chosen) => return Ok(placements(entry, chosen).remove(0)),
            Err(f) => {
                if first_failure.is_none() {
                    first_failure = Some(unsuitable(node, &claims, f));
                }
            }
        }
    }
    let reason = match first_failure {
        None => "no node has devices of this driver".to_owned(),
        Some(u) => format!("none of {} nodes fits; {u}", entries.len()),
    };
    Err(FitError::NoNodeFits { reason })
}
