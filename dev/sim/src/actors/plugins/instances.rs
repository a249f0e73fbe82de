//! The registered plugin instances of a 1.34 kubelet: registration of a socket found in the
//! registry directory (dial, `GetInfo`, the verdict of [`super::services`],
//! `NotifyRegistrationStatus`), deregistration when the socket goes, and the instance a call to a
//! driver uses (the most recently registered one). There is no resource stream: 1.34 drivers
//! publish their `ResourceSlices` themselves; an instance listing the health service gets its
//! health stream followed while it is registered (1.36+, [`super::health`]).
//!
//! I/O only; the decisions come from the services module.

use dra_runtime::lock::LockExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::transport::Channel;

use super::error::{DriverError, RegistrationError};
use super::health::{self, watches_health};
use super::registry::{get_info, notify, verdict};
use super::services::{accept, Service};
use super::{lazy_channel, NodePlugins};

/// One registered plugin of a driver.
#[derive(Debug)]
pub(super) struct Instance {
    /// The registration socket it came from.
    socket: PathBuf,
    /// Its service socket.
    endpoint: PathBuf,
    /// The service chosen at registration.
    service: Service,
    /// A connection to the service socket, made on first use and again after a failure.
    channel: Channel,
    /// The task following its health stream, where the kubelet watches it.
    health: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(task) = &self.health {
            task.abort();
        }
    }
}

/// Registers the plugin behind the registration socket at `socket`; returns its driver name.
pub(super) async fn register(
    node: &Arc<NodePlugins>,
    socket: &Path,
) -> Result<String, RegistrationError> {
    let (mut client, info) = get_info(socket).await?;
    let registered: Vec<PathBuf> = node
        .instances
        .lock_or_recover()
        .get(&info.name)
        .into_iter()
        .flatten()
        .map(|i| i.endpoint.clone())
        .collect();
    let accepted = verdict(&mut client, accept(socket, &info, &registered)).await?;
    let health = watches_health(node.version, &info.supported_versions).then(|| {
        tokio::spawn(health::watch(
            Arc::clone(node),
            accepted.name.clone(),
            accepted.endpoint.clone(),
        ))
    });
    let instance = Instance {
        socket: socket.to_owned(),
        endpoint: accepted.endpoint.clone(),
        service: accepted.service,
        channel: lazy_channel(&accepted.endpoint),
        health,
    };
    let count = {
        let mut instances = node.instances.lock_or_recover();
        let list = instances.entry(accepted.name.clone()).or_default();
        list.push(instance);
        list.len()
    };
    tracing::info!(node = %node.node, driver = %accepted.name, service = %accepted.service, endpoint = %accepted.endpoint.display(), instances = count, "Registered a DRA plugin");
    notify(&mut client, true, "").await;
    Ok(accepted.name)
}

/// Drops the instance of `driver` registered from `socket`. Returns whether the driver still has
/// a registered instance.
pub(super) fn deregister(node: &NodePlugins, driver: &str, socket: &Path) -> bool {
    let mut instances = node.instances.lock_or_recover();
    let Some(list) = instances.get_mut(driver) else {
        return false;
    };
    list.retain(|i| i.socket != socket);
    let left = list.len();
    if left == 0 {
        instances.remove(driver);
    }
    tracing::info!(node = %node.node, driver, instances = left, "Deregistered a DRA plugin: its socket is gone");
    left > 0
}

impl NodePlugins {
    /// The connection and service of `driver`'s most recent instance, or the 1.34 kubelet's
    /// error when it has none.
    pub(super) fn instance(&self, driver: &str) -> Result<(Channel, Service), DriverError> {
        if driver.is_empty() {
            return Err(DriverError::EmptyName);
        }
        self.instances
            .lock_or_recover()
            .get(driver)
            .and_then(|list| list.last())
            .map(|i| (i.channel.clone(), i.service))
            .ok_or_else(|| DriverError::NotRegistered {
                driver: driver.to_owned(),
            })
    }

    /// Whether `driver` has a registered instance.
    pub(super) fn has_instance(&self, driver: &str) -> bool {
        self.instances.lock_or_recover().contains_key(driver)
    }

    /// The service each registered driver is called over.
    pub fn services(&self) -> Vec<(String, Service)> {
        self.instances
            .lock_or_recover()
            .iter()
            .filter_map(|(driver, list)| Some((driver.clone(), list.last()?.service)))
            .collect()
    }
}
