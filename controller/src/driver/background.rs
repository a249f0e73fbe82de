//! The driver's background work: the ResourceSlice watch that keeps the ledger's inventory in
//! step with the cluster, and the reconcile at start and every `reconcile_interval`. Both stop
//! when the shutdown future completes.
//!
//! The watch is the only network code of the driver besides [`super::KubeCluster`]; the
//! conversion of slices to devices is in [`super::inventory`].

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dra_allocator::model::Device;
use futures::StreamExt;
use k8s_openapi::api::resource::v1alpha2::ResourceSlice;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use tracing::{info, warn};

use super::inventory::{devices_by_node, slice_node};
use super::reconcile::RETRY_DELAY;
use super::{LedgerDriver, Result};

/// How many nodes' devices one step of a flush copies and writes.
const FLUSH_CHUNK: usize = 256;

/// How often nodes whose inventory update failed are retried.
const INVENTORY_RETRY: Duration = Duration::from_secs(5);

/// Runs the inventory watch and the reconcile loop until `shutdown` completes: the inventory is
/// synced from the ResourceSlices first, then the initial reconcile runs (retried until it
/// succeeds), then the driver is ready and reconciles every `reconcile_interval`.
pub async fn run_background(
    driver: Arc<LedgerDriver>,
    client: Client,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let inventory = tokio::spawn(sync_inventory(driver.clone(), client, async move {
        let mut rx = stop_rx;
        let _ = rx.wait_for(|stop| *stop).await;
    }));
    tokio::select! {
        () = &mut shutdown => {}
        () = reconcile_loop(&driver) => {}
    }
    let _ = stop_tx.send(true);
    let _ = inventory.await;
}

async fn reconcile_loop(driver: &LedgerDriver) {
    let readiness = driver.readiness();
    readiness.wait_inventory_synced().await;
    loop {
        match driver.reconcile_now().await {
            Ok(_) => break,
            Err(error) => {
                warn!(%error, "Initial reconcile failed, retrying");
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    }
    readiness.set_reconciled();
    info!(driver = %driver.config.driver_name, "Driver ready: inventory synced and ledger reconciled");
    let interval = driver.config.reconcile_interval.max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(interval).await;
        if let Err(error) = driver.reconcile_now().await {
            warn!(%error, "Periodic reconcile failed");
        }
    }
}

/// What the watch knows: the devices of this driver's slices by slice name (converted once, as
/// each slice arrives: the slices themselves are not kept) and the slices' names by node, and
/// the nodes whose devices are still to be written.
struct InventorySync {
    driver: Arc<LedgerDriver>,
    slices: BTreeMap<String, PublishedSlice>,
    by_node: BTreeMap<String, BTreeSet<String>>,
    dirty: BTreeSet<String>,
}

/// The devices one slice publishes, and its node.
struct PublishedSlice {
    node: String,
    devices: PackedDevices,
}

/// A slice's devices encoded with postcard: a tenth of the memory of the decoded devices,
/// which matters when a watch holds the slices of thousands of nodes. Decoded when their node
/// is written.
struct PackedDevices(Box<[u8]>);

impl PackedDevices {
    fn pack(devices: &[Device]) -> Self {
        // Devices are plain data (strings, numbers, lists and maps of them): encoding them
        // into memory cannot fail.
        PackedDevices(
            postcard::to_allocvec(devices)
                .unwrap_or_default()
                .into_boxed_slice(),
        )
    }

    fn unpack(&self) -> Vec<Device> {
        // Bytes this process encoded from the same types; quantities and versions read back
        // from their canonical text, as they do from the ledger file.
        postcard::from_bytes(&self.0).unwrap_or_default()
    }
}

impl InventorySync {
    /// The devices the slices of `node` publish, in the order of the slices' names; a device
    /// name that appears in two slices keeps its first instance.
    fn devices_of(&self, node: &str) -> Vec<Device> {
        let mut devices: Vec<Device> = Vec::new();
        let on_node = self
            .by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|name| self.slices.get(name));
        for slice in on_node {
            for device in slice.devices.unpack() {
                if !devices.iter().any(|d| d.name == device.name) {
                    devices.push(device);
                }
            }
        }
        devices
    }

    /// Writes the devices of every dirty node, several nodes at once so that the ledger's
    /// group commit batches them, and [`FLUSH_CHUNK`] nodes' devices copied at a time rather
    /// than every node's; the ledger leaves a node whose devices are unchanged as it is.
    async fn flush(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        let mut failed = Vec::new();
        let mut nodes = dirty.into_iter().peekable();
        while nodes.peek().is_some() {
            let pending: Vec<(String, Vec<Device>)> = nodes
                .by_ref()
                .take(FLUSH_CHUNK)
                .map(|node| {
                    let devices = self.devices_of(&node);
                    (node, devices)
                })
                .collect();
            for (node, result) in self.driver.keeper.write_inventories(pending).await {
                if let Err(error) = result {
                    warn!(%error, node = %node, "Failed to update inventory, retrying");
                    failed.push(node);
                }
            }
        }
        self.dirty.extend(failed);
    }

    fn apply(&mut self, slice: &ResourceSlice) {
        let name = slice.name_any();
        self.forget(&name);
        if let Some(published) = published(&self.driver.config.driver_name, slice) {
            self.insert(name, published);
        }
    }

    fn insert(&mut self, name: String, slice: PublishedSlice) {
        self.dirty.insert(slice.node.clone());
        self.by_node
            .entry(slice.node.clone())
            .or_default()
            .insert(name.clone());
        self.slices.insert(name, slice);
    }

    fn delete(&mut self, slice: &ResourceSlice) {
        self.forget(&slice.name_any());
    }

    /// Drops the slice called `name`, marking its node dirty.
    fn forget(&mut self, name: &str) {
        let Some(old) = self.slices.remove(name) else {
            return;
        };
        if let Some(names) = self.by_node.get_mut(&old.node) {
            names.remove(name);
            if names.is_empty() {
                self.by_node.remove(&old.node);
            }
        }
        self.dirty.insert(old.node);
    }

    /// Sets `inventory_synced` once a complete listing has been written without failures.
    fn mark_synced(&self, listed: bool) {
        let readiness = self.driver.keeper.readiness();
        if listed && self.dirty.is_empty() && !readiness.inventory_synced() {
            info!(
                nodes = self.by_node.len(),
                "Inventory synced from ResourceSlices"
            );
            readiness.set_inventory_synced();
        }
    }

    /// A complete listing replaces what was known; nodes the ledger knows without any slice
    /// now are updated to no devices (allocated ones become missing).
    async fn relist(&mut self, listed: BTreeMap<String, PublishedSlice>) -> Result<()> {
        let ledger_nodes = self
            .driver
            .keeper
            .call(dra_allocator::ledger::Ledger::nodes)
            .await?;
        self.dirty.extend(ledger_nodes.into_iter().map(|n| n.node));
        self.dirty.extend(self.by_node.keys().cloned());
        self.slices.clear();
        self.by_node.clear();
        for (name, slice) in listed {
            self.insert(name, slice);
        }
        Ok(())
    }
}

/// The devices `slice` publishes, if it is one of `driver_name`'s slices of a node; attributes
/// that cannot be used are logged and dropped.
fn published(driver_name: &str, slice: &ResourceSlice) -> Option<PublishedSlice> {
    let node = slice_node(driver_name, slice)?;
    let (mut nodes, skipped) = devices_by_node(driver_name, [slice]);
    for s in skipped {
        warn!(node = %s.node, device = %s.device, attribute = %s.attribute, reason = %s.reason, "Dropped device attribute");
    }
    Some(PublishedSlice {
        node: node.to_owned(),
        devices: PackedDevices::pack(&nodes.remove(node).unwrap_or_default()),
    })
}

/// Watches this driver's ResourceSlices and keeps the ledger's inventory per node in step until
/// `shutdown` completes. After the first complete listing is written, the readiness flag
/// `inventory_synced` is set.
pub async fn sync_inventory(
    driver: Arc<LedgerDriver>,
    client: Client,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let api = Api::<ResourceSlice>::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    tokio::pin!(stream);
    let mut sync = InventorySync {
        driver: driver.clone(),
        slices: BTreeMap::new(),
        by_node: BTreeMap::new(),
        dirty: BTreeSet::new(),
    };
    let mut listing: Option<BTreeMap<String, PublishedSlice>> = None;
    let mut listed = false;
    let mut retry = tokio::time::interval(INVENTORY_RETRY);
    loop {
        let event = tokio::select! {
            () = &mut shutdown => return,
            _ = retry.tick() => None,
            event = stream.next() => match event {
                Some(event) => Some(event),
                None => return,
            },
        };
        let Some(event) = event else {
            sync.flush().await;
            sync.mark_synced(listed);
            continue;
        };
        match event {
            Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(slice)) => {
                let published = published(&driver.config.driver_name, &slice);
                if let (Some(list), Some(published)) = (listing.as_mut(), published) {
                    list.insert(slice.name_any(), published);
                }
            }
            Ok(watcher::Event::InitDone) => {
                match sync.relist(listing.take().unwrap_or_default()).await {
                    Ok(()) => listed = true,
                    Err(error) => warn!(%error, "Failed to read ledger nodes after listing slices"),
                }
                sync.flush().await;
            }
            Ok(watcher::Event::Apply(slice)) => {
                sync.apply(&slice);
                sync.flush().await;
            }
            Ok(watcher::Event::Delete(slice)) => {
                sync.delete(&slice);
                sync.flush().await;
            }
            Err(error) => warn!(%error, "ResourceSlice watch failed, retrying"),
        }
        sync.mark_synced(listed);
    }
}

#[cfg(test)]
mod tests {
    use super::PackedDevices;
    use dra_allocator::model::{AttributeValue, Device, Quantity, Version};

    #[test]
    fn packed_devices_read_back_equal_with_every_kind_of_attribute() {
        let devices = vec![
            Device::new("gpu-0")
                .with("bool", AttributeValue::Bool(true))
                .with("int", AttributeValue::Int(-7))
                .with(
                    "quantity",
                    AttributeValue::Quantity(Quantity::parse("1536Mi").unwrap()),
                )
                .with(
                    "milli",
                    AttributeValue::Quantity(Quantity::parse("250m").unwrap()),
                )
                .with("string", AttributeValue::String("H100".to_owned()))
                .with(
                    "version",
                    AttributeValue::Version(Version::parse("1.2.3-rc.1+build.5").unwrap()),
                )
                .with("ints", AttributeValue::IntSlice(vec![0, 1, i64::MAX]))
                .with(
                    "strings",
                    AttributeValue::StringSlice(vec![String::new(), "a".to_owned()]),
                ),
            Device::new("gpu-1"),
        ];
        assert_eq!(PackedDevices::pack(&devices).unpack(), devices);
        assert!(PackedDevices::pack(&[]).unpack().is_empty());
    }
}
