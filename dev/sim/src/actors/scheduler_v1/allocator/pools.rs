//! `GatherPools`: the resource pools whose devices a node can use, from every `ResourceSlice`
//! that names the node, selects it or serves all nodes; only a pool's newest generation counts.
//! A pool with fewer slices of that generation than `resourceSliceCount` is incomplete, one
//! that lists a device name twice is invalid.
//!
//! Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::actors::selectors::node_matches;
use dra_types::resource_v1::ResourceSlice;

/// A device's identity: driver, pool and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device's name in the pool.
    pub device: String,
}

impl DeviceId {
    /// The id of `device` in `pool` of `driver`.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        Self {
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            device: device.to_owned(),
        }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// One pool as the node sees it.
#[derive(Debug)]
pub struct Pool<'a> {
    /// The driver.
    pub driver: &'a str,
    /// The pool's name.
    pub name: &'a str,
    /// The slices of the newest generation that target the node, by name.
    pub slices: Vec<&'a ResourceSlice>,
    /// Fewer slices than the pool says it has.
    pub incomplete: bool,
    /// A device name appears twice.
    pub invalid: bool,
}

impl Pool<'_> {
    /// `driver/pool`, as upstream names a pool in messages.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }
}

/// Whether the slice's devices are reachable from `node`.
fn targets(slice: &ResourceSlice, node: &Node) -> bool {
    let spec = &slice.spec;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name) == node.metadata.name.as_deref();
    }
    if spec.all_nodes == Some(true) {
        return true;
    }
    spec.node_selector
        .as_ref()
        .is_some_and(|selector| node_matches(selector, node))
}

/// The pools of the slices that target `node`, ordered by driver and pool name (upstream's
/// order is a Go map's, arbitrary).
pub fn gather<'a>(slices: &'a [Arc<ResourceSlice>], node: &Node) -> Vec<Pool<'a>> {
    let mut by_pool: BTreeMap<(&'a str, &'a str), Vec<&'a ResourceSlice>> = BTreeMap::new();
    for slice in slices.iter().map(AsRef::as_ref) {
        if !targets(slice, node) {
            continue;
        }
        let key = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
        let entry = by_pool.entry(key).or_default();
        let newest = entry.first().map(|s| s.spec.pool.generation);
        match newest {
            Some(generation) if slice.spec.pool.generation < generation => {}
            Some(generation) if slice.spec.pool.generation > generation => {
                *entry = vec![slice];
            }
            _ => entry.push(slice),
        }
    }
    by_pool
        .into_iter()
        .map(|((driver, name), mut slices)| {
            slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let expected = slices
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            let mut names: Vec<&str> = slices
                .iter()
                .flat_map(|s| &s.spec.devices)
                .map(|d| d.name.as_str())
                .collect();
            names.sort_unstable();
            let invalid = names.windows(2).any(|pair| pair[0] == pair[1]);
            Pool {
                driver,
                name,
                incomplete: i64::try_from(slices.len()).ok() != Some(expected),
                slices,
                invalid,
            }
        })
        .collect()
}
