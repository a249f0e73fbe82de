//! The reconciler of one node's plugins, as the kubelet's `pluginmanager/reconciler` runs it:
//! the sockets the plugin watcher wants ([`super::watcher`]) are registered, a failed or refused
//! registration is retried with backoff; a socket that is deleted deregisters its plugin, and a
//! socket created again under the same path (a new creation time, such as a restarted plugin's)
//! deregisters the old plugin before the new one registers.
//!
//! 1.30: registration as the 1.30 kubelet does it (dial, `GetInfo`, the checks of
//! [`super::validation`], `NotifyRegistrationStatus`); deregistration cancels the resource stream
//! and deletes the driver's `ResourceSlices` of the node at once.
//!
//! 1.34: the node's slices are wiped before the first scan; registration goes through
//! [`super::instances`]; a driver left without instances has its slices of the node deleted
//! after the wipe delay unless an instance registers again ([`super::wiping`]).
//!
//! I/O only; the decisions come from the validation, services and wiping modules.

use dra_runtime::lock::LockExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dra_types::kubelet::pluginregistration::registration_client::RegistrationClient;
use dra_types::kubelet::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tonic::transport::Channel;

use super::error::RegistrationError;
use super::validation::accept;
use super::wiping::{delete_node_slices, WipeSchedule};
use super::{backoff, connect, instances, lazy_channel, resources, NodePlugins, Registered};

/// How long dialing a registration socket may take (10 s).
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The deadline of `GetInfo` (1 s).
const INFO_TIMEOUT: Duration = Duration::from_secs(1);
/// The deadline of `NotifyRegistrationStatus` (5 s).
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// What the reconciler knows of a socket it has seen.
struct Seen {
    /// When the watcher saw the socket created: a new time is a new plugin.
    created: Instant,
    /// The driver it registered, once it did.
    driver: Option<String>,
    failures: u32,
    retry_at: Option<Instant>,
}

/// The first wait before a failed slice wipe is tried again (1.34: 1 s, doubling up to 5 min).
const WIPE_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between attempts of a slice wipe.
const WIPE_RETRY_MAX: Duration = Duration::from_secs(300);

/// Deletes every slice of the node, trying again until it succeeds; `false` when `stop` turned
/// true first.
async fn wipe_at_start(node: &NodePlugins, stop: &mut watch::Receiver<bool>) -> bool {
    let mut failures = 0;
    loop {
        match delete_node_slices(&node.client, &node.node, None).await {
            Ok(()) => return true,
            Err(error) => {
                failures += 1;
                let wait = backoff(WIPE_RETRY, WIPE_RETRY_MAX, failures);
                tracing::warn!(node = %node.node, %error, ?wait, "Failed to delete the node's resource slices at start");
                tokio::select! {
                    changed = stop.changed() => if changed.is_err() || *stop.borrow() { return false },
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Deletes the slices of the drivers whose wipe is due; a failed wipe is tried again later.
async fn run_due_wipes(node: &NodePlugins, wipes: &mut WipeSchedule, failures: &mut u32) {
    for driver in wipes.due(Instant::now()) {
        match delete_node_slices(&node.client, &node.node, Some(&driver)).await {
            Ok(()) => {
                tracing::info!(node = %node.node, %driver, "Deleted the resource slices of a driver without a registered plugin");
                wipes.done(&driver);
                *failures = 0;
            }
            Err(error) => {
                *failures = failures.saturating_add(1);
                let wait = backoff(WIPE_RETRY, WIPE_RETRY_MAX, *failures);
                tracing::warn!(node = %node.node, %driver, %error, ?wait, "Failed to delete the resource slices of a driver");
                wipes.retry(&driver, Instant::now() + wait);
            }
        }
    }
}

/// Reconciles the node's plugins with the sockets the watcher wants until `stop` turns true;
/// then the resource streams are cancelled (the slices stay, as they do when a kubelet stops).
pub(super) async fn reconcile(node: Arc<NodePlugins>, mut stop: watch::Receiver<bool>) {
    let v1 = node.version.serves_v1();
    if v1 && !wipe_at_start(&node, &mut stop).await {
        return;
    }
    let mut wipes = WipeSchedule::default();
    let mut wipe_failures = 0;
    let mut seen: BTreeMap<PathBuf, Seen> = BTreeMap::new();
    loop {
        let wanted = node.desired.snapshot();
        forget_gone(&node, &mut seen, &wanted, &mut wipes).await;
        for (path, created) in wanted {
            let entry = seen.entry(path.clone()).or_insert(Seen {
                created,
                driver: None,
                failures: 0,
                retry_at: None,
            });
            if entry.driver.is_none() && entry.retry_at.is_none_or(|at| at <= Instant::now()) {
                try_register(&node, &path, entry, &mut wipes).await;
            }
        }
        if v1 {
            run_due_wipes(&node, &mut wipes, &mut wipe_failures).await;
        }
        tokio::select! {
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { break },
            () = node.desired.changed() => {}
            () = tokio::time::sleep(node.config.registry_poll) => {}
        }
    }
    node.instances.lock_or_recover().clear();
    let registered: Vec<Registered> = std::mem::take(&mut *node.plugins.lock_or_recover())
        .into_values()
        .collect();
    for plugin in registered {
        plugin.stream.abort();
        let _ = plugin.stream.await;
    }
}

/// Deregisters the plugins of the sockets in `seen` that are not `wanted` any more or were
/// created again since (1.34: a driver left without instances has its wipe scheduled).
async fn forget_gone(
    node: &Arc<NodePlugins>,
    seen: &mut BTreeMap<PathBuf, Seen>,
    wanted: &BTreeMap<PathBuf, Instant>,
    wipes: &mut WipeSchedule,
) {
    let gone: Vec<PathBuf> = seen
        .iter()
        .filter(|(path, s)| wanted.get(*path) != Some(&s.created))
        .map(|(path, _)| path.clone())
        .collect();
    for path in gone {
        let Some(Seen {
            driver: Some(driver),
            ..
        }) = seen.remove(&path)
        else {
            continue;
        };
        if !node.version.serves_v1() {
            deregister(node, &driver, &path).await;
        } else if !instances::deregister(node, &driver, &path) {
            wipes.driver_gone(&driver, Instant::now(), node.config.wipe_delay);
        }
    }
}

/// Registers the plugin behind the socket at `path` as the node's release does; a failure is
/// tried again after a backoff.
async fn try_register(
    node: &Arc<NodePlugins>,
    path: &Path,
    entry: &mut Seen,
    wipes: &mut WipeSchedule,
) {
    let now = Instant::now();
    let registered = if node.version.serves_v1() {
        instances::register(node, path).await
    } else {
        register(node, path).await
    };
    match registered {
        Ok(driver) => {
            if wipes.driver_back(&driver) {
                tracing::info!(node = %node.node, %driver, "A plugin came back in time: its slices stay");
            }
            entry.driver = Some(driver);
            entry.failures = 0;
            entry.retry_at = None;
        }
        Err(error) => {
            entry.failures = entry.failures.saturating_add(1);
            let wait = backoff(
                node.config.registration_retry,
                node.config.registration_retry_max,
                entry.failures,
            );
            entry.retry_at = Some(now + wait);
            tracing::warn!(node = %node.node, socket = %path.display(), %error, ?wait, "Plugin registration failed");
        }
    }
}

/// Dials the registration socket at `socket` and asks the plugin who it is.
pub(super) async fn get_info(
    socket: &Path,
) -> Result<(RegistrationClient<Channel>, PluginInfo), RegistrationError> {
    let channel = timeout(DIAL_TIMEOUT, connect(socket))
        .await
        .map_err(|_| RegistrationError::DialTimeout {
            socket: socket.to_owned(),
        })?
        .map_err(|source| RegistrationError::Dial {
            socket: socket.to_owned(),
            source,
        })?;
    let mut client = RegistrationClient::new(channel);
    let info = timeout(INFO_TIMEOUT, client.get_info(InfoRequest {}))
        .await
        .map_err(|_| RegistrationError::GetInfoTimeout)?
        .map_err(RegistrationError::GetInfo)?
        .into_inner();
    Ok((client, info))
}

/// The kubelet's verdict on a plugin; a refusal is also sent back to the plugin.
pub(super) async fn verdict<T, E>(
    client: &mut RegistrationClient<Channel>,
    verdict: Result<T, E>,
) -> Result<T, RegistrationError>
where
    E: std::error::Error + Into<RegistrationError>,
{
    match verdict {
        Ok(accepted) => Ok(accepted),
        Err(refusal) => {
            notify(client, false, &refusal.to_string()).await;
            Err(refusal.into())
        }
    }
}

/// Registers the plugin behind the registration socket at `socket`; returns its driver name.
async fn register(node: &Arc<NodePlugins>, socket: &Path) -> Result<String, RegistrationError> {
    let (mut client, info) = get_info(socket).await?;
    let registered = node
        .plugins
        .lock_or_recover()
        .get(&info.name)
        .map(|p| p.version.clone());
    let accepted = verdict(&mut client, accept(socket, &info, registered.as_ref())).await?;
    let channel = lazy_channel(&accepted.endpoint);
    let stream = tokio::spawn(resources::monitor(
        node.client.clone(),
        node.node.clone(),
        accepted.name.clone(),
        channel.clone(),
        node.config.stream_retry,
    ));
    let replaced = node.plugins.lock_or_recover().insert(
        accepted.name.clone(),
        Registered {
            socket: socket.to_owned(),
            version: accepted.version.clone(),
            channel,
            stream,
        },
    );
    if let Some(old) = replaced {
        tracing::info!(node = %node.node, driver = %accepted.name, old = %old.socket.display(), "A plugin with a higher version replaces the registered one");
        old.stream.abort();
    }
    tracing::info!(node = %node.node, driver = %accepted.name, version = %accepted.version, endpoint = %accepted.endpoint.display(), "Registered a DRA plugin");
    notify(&mut client, true, "").await;
    Ok(accepted.name)
}

/// Tells the plugin the outcome; a plugin that does not listen stays registered.
pub(super) async fn notify(
    client: &mut RegistrationClient<Channel>,
    registered: bool,
    error: &str,
) {
    let status = RegistrationStatus {
        plugin_registered: registered,
        error: error.to_owned(),
    };
    match timeout(NOTIFY_TIMEOUT, client.notify_registration_status(status)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::warn!(%error, "NotifyRegistrationStatus failed"),
        Err(_) => tracing::warn!("NotifyRegistrationStatus timed out"),
    }
}

/// Drops `driver`'s plugin if it was registered from `socket`: its stream is cancelled and its
/// slices on the node deleted.
async fn deregister(node: &Arc<NodePlugins>, driver: &str, socket: &Path) {
    let removed = {
        let mut plugins = node.plugins.lock_or_recover();
        if plugins.get(driver).is_some_and(|p| p.socket == socket) {
            plugins.remove(driver)
        } else {
            None
        }
    };
    let Some(plugin) = removed else {
        return;
    };
    tracing::info!(node = %node.node, driver, "Deregistered a DRA plugin: its socket is gone");
    plugin.stream.abort();
    let _ = plugin.stream.await;
    if let Err(error) = resources::delete_all(&node.client, &node.node, driver).await {
        tracing::warn!(node = %node.node, driver, %error, "Failed to delete the resource slices of a deregistered plugin");
    }
}
