//! The device status the agent reports in the claims it prepares, `status.devices` of a v1
//! `ResourceClaim` (KEP-4817, gate `DRAResourceClaimDeviceStatus`: beta and on by default in
//! 1.34 to 1.36, GA in 1.37). For each device of ours in this node's pool that a prepared claim
//! holds, one entry (one per share where the claim holds the device by shares, with the
//! result's `shareID`: the API server keys entries by driver, pool, device and share ID):
//! `driver`, `pool` (named after the node), `device`, a `Ready` condition
//! (`True`, reason `Prepared`, the claim's CDI device IDs in the message, the claim's
//! `metadata.generation` as `observedGeneration` where it has one, `lastTransitionTime` kept
//! while the device stays Ready) and, where discovery knows them, the device's `uuid` and
//! `pciAddress` in `data` (`{"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
//! ...}`). Once the claim is unprepared, no entry of ours. [`plan`] decides what to write (pure);
//! [`writer`] reads and writes the claims.
//!
//! How it is written, and why:
//! - Through the status subresource, `PUT .../resourceclaims/NAME/status` of the claim as just
//!   read with only our entries changed, guarded by the resourceVersion read: a claim changed in
//!   between is a 409 and is read again. The entries of other drivers, and of our driver in
//!   other pools, go back as read: they are held as JSON, never through our model, so a field
//!   it does not know survives. A merge patch or strategic merge patch cannot change single
//!   entries of `status.devices` (a list keyed by driver, pool and device without a patch merge
//!   key is replaced whole), and server-side apply with a field manager per driver, upstream's
//!   suggestion, is not served by the simulated API server the tests run against; the guarded
//!   update keeps every other entry on any server.
//! - After the prepare is durable (journal entry and CDI spec written) and off the prepare's
//!   path: the preparer queues the claim and the kubelet's answer never waits for the write. A
//!   failed write is logged and retried with a backoff and never fails a prepare; a claim gone
//!   or replaced (another UID) meanwhile is left alone; at every start the journal's prepared
//!   claims are queued again. The journal stays the truth, the status is a report of it.
//! - Only devices that the claim's allocation holds get an entry (the API server refuses
//!   others), and the API server itself drops our entries when the claim is deallocated.
//! - The write needs `update` of `resourceclaims/status`; from Kubernetes 1.36
//!   (`DRAResourceClaimGranularStatusAuthorization`, beta and on) also `associated-node:update`
//!   of `resourceclaims/driver` named after the driver, which the API server grants a caller
//!   bound to the node the claim is allocated on.

pub mod writer;

use std::collections::BTreeSet;

use dra_allocator::model::AttributeValue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value};

use super::config::CONFIG_API_VERSION;
use crate::device::{Inventory, NodeDevice};
use dra_types::resource_v1::AllocatedDeviceStatus;

pub use writer::{ClaimStatusApi, StatusReporter, StatusWriteError, RETRY};

/// The condition type of a prepared device.
pub const READY: &str = "Ready";
/// The reason of a `Ready` condition the agent sets.
pub const PREPARED: &str = "Prepared";
/// The `kind` of our `data`.
pub const DATA_KIND: &str = "DeviceData";
/// The attributes of a device that go into `data`.
const DATA_ATTRIBUTES: [&str; 2] = ["uuid", "pciAddress"];

/// What the agent wants a claim's status to say of its devices in this node's pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Prepared: each of `devices` is Ready, prepared as the CDI devices `cdi_ids`.
    Ready {
        /// The claim's devices on this node.
        devices: Vec<String>,
        /// The claim's CDI device IDs.
        cdi_ids: Vec<String>,
    },
    /// Unprepared: no entry of ours.
    Cleared,
}

/// Whose entries the agent writes: its driver's in this node's pool (named after the node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurPool {
    /// The driver name.
    pub driver: String,
    /// The node, which names the pool.
    pub node: String,
}

impl OurPool {
    /// Whether the `status.devices` entry or allocation result `item` is of our pool.
    fn holds(&self, item: &Value) -> bool {
        item["driver"].as_str() == Some(self.driver.as_str())
            && item["pool"].as_str() == Some(self.node.as_str())
    }
}

/// What to do with a claim as read.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// There is no claim of that name, or it has another UID: nothing to report.
    Gone,
    /// Its status already says what is wanted.
    Unchanged,
    /// Write this claim (the one read, `status.devices` changed) to the status subresource.
    Write(Value),
}

/// What to write so that `claim` (as the API server returned it, `None` when there is none)
/// says `wanted` of the devices of claim `uid` in `pool`, at time `now`. Entries of other
/// drivers and pools keep their place and content; ours are replaced in place, left out or
/// added at the end; devices the allocation does not hold in our pool get none.
pub fn plan(
    claim: Option<&Value>,
    uid: &str,
    wanted: &Wanted,
    pool: &OurPool,
    inventory: &Inventory,
    now: &Time,
) -> Plan {
    let Some(claim) = claim else {
        return Plan::Gone;
    };
    if claim["metadata"]["uid"].as_str() != Some(uid) {
        return Plan::Gone;
    }
    let results = claim["status"]["allocation"]["devices"]["results"].as_array();
    let allocated: Vec<Key<'_>> = results
        .into_iter()
        .flatten()
        .filter(|result| pool.holds(result))
        .filter_map(|result| Some((result["device"].as_str()?, result["shareID"].as_str())))
        .collect();
    let (devices, message) = match wanted {
        Wanted::Ready { devices, cdi_ids } => (
            devices
                .iter()
                .flat_map(|device| allocated.iter().filter(move |(d, _)| d == device))
                .copied()
                .collect::<Vec<Key<'_>>>(),
            format!(
                "prepared on node {} as CDI device {}",
                pool.node,
                cdi_ids.join(", ")
            ),
        ),
        Wanted::Cleared => (Vec::new(), String::new()),
    };
    let ready = Ready {
        pool,
        message: &message,
        generation: claim["metadata"]["generation"].as_i64(),
        now,
    };
    let entry = |key: Key<'_>, existing| ready.entry(key, inventory.get(key.0), existing);
    let current = claim["status"]["devices"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let mut written: Vec<Value> = Vec::with_capacity(current.len() + devices.len());
    let mut placed: BTreeSet<Key<'_>> = BTreeSet::new();
    for existing in current {
        if !pool.holds(existing) {
            written.push(existing.clone());
            continue;
        }
        let key = (
            existing["device"].as_str().unwrap_or_default(),
            existing["shareID"].as_str(),
        );
        if devices.contains(&key) && placed.insert(key) {
            written.push(entry(key, Some(existing)));
        }
    }
    for key in devices {
        if placed.insert(key) {
            written.push(entry(key, None));
        }
    }
    if written.as_slice() == current {
        return Plan::Unchanged;
    }
    let mut claim = claim.clone();
    if let Some(status) = claim.get_mut("status").and_then(Value::as_object_mut) {
        if written.is_empty() {
            status.remove("devices");
        } else {
            status.insert("devices".to_owned(), Value::Array(written));
        }
    }
    Plan::Write(claim)
}

/// What names one entry of ours: the device and, for a share, its share ID.
type Key<'a> = (&'a str, Option<&'a str>);

/// The `Ready` entries of one claim.
struct Ready<'a> {
    pool: &'a OurPool,
    message: &'a str,
    generation: Option<i64>,
    now: &'a Time,
}

impl Ready<'_> {
    /// The entry of the device or share `key` (`known` as the inventory has the device),
    /// replacing `existing`, whose `lastTransitionTime` stays where it said Ready already.
    fn entry(&self, key: Key<'_>, known: Option<&NodeDevice>, existing: Option<&Value>) -> Value {
        let (device, share_id) = key;
        let status = AllocatedDeviceStatus {
            driver: self.pool.driver.clone(),
            pool: self.pool.node.clone(),
            device: device.to_owned(),
            conditions: vec![Condition {
                type_: READY.to_owned(),
                status: "True".to_owned(),
                reason: PREPARED.to_owned(),
                message: self.message.to_owned(),
                observed_generation: self.generation,
                last_transition_time: self.now.clone(),
            }],
            data: known.and_then(device_data),
            network_data: None,
            share_id: share_id.map(str::to_owned),
        };
        let mut entry = serde_json::to_value(status).unwrap_or_default();
        let since = existing
            .and_then(|e| e["conditions"].as_array())
            .into_iter()
            .flatten()
            .find(|c| c["type"] == READY && c["status"] == "True")
            .map(|c| c["lastTransitionTime"].clone());
        if let Some(since) = since.filter(Value::is_string) {
            entry["conditions"][0]["lastTransitionTime"] = since;
        }
        entry
    }
}

/// What the status says of `device` in `data`: its `uuid` and `pciAddress` where discovery
/// found them, `None` when it found neither.
pub fn device_data(device: &NodeDevice) -> Option<Value> {
    let mut data = Map::new();
    for name in DATA_ATTRIBUTES {
        if let Some(AttributeValue::String(value)) = device.attributes.get(name) {
            data.insert(name.to_owned(), Value::String(value.clone()));
        }
    }
    if data.is_empty() {
        return None;
    }
    data.insert("apiVersion".to_owned(), CONFIG_API_VERSION.into());
    data.insert("kind".to_owned(), DATA_KIND.into());
    Some(Value::Object(data))
}

#[cfg(test)]
mod tests;
