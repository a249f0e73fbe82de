//! `dra-ledger node check`: the inventory and the health watch of a device source, without
//! Kubernetes, the kubelet or a journal: the inventory is read once and printed, then the health
//! sources are asked every `interval` (and at once on an NVML event) for `watch`, each change
//! printed as it happens, and the health at the end. Every line written is one JSON object:
//!
//! - `{"inventory": [<device>, ...]}`, the devices as `/v1/devices` lists them (without health);
//! - `{"change": {"device", "from", "to", "reason", "message", "since"}}` per change of state;
//! - `{"health": {<device>: {"state", "reason", "message", "since"}, ...}}` at the end.
//!
//! Meant for a node with real hardware (`node/scripts/nvml-check.sh` runs it with `nvml`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;

use crate::agent::health::{sources_for, HealthConfig, HealthTracker};
use crate::discovery::{DeviceSource, DiscoveryError, DiscoveryRoots};
use crate::metrics::NodeMetrics;

/// What `check` reads and for how long.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// The device source.
    pub devices: DeviceSource,
    /// The host directories discovery reads.
    pub roots: DiscoveryRoots,
    /// How long the health is watched.
    pub watch: Duration,
    /// How often the health sources are asked.
    pub interval: Duration,
}

/// Why `check` stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The inventory could not be read.
    #[error("reading the devices of {source_name}: {source}")]
    Discovery {
        /// The `--devices` value.
        source_name: String,
        /// What discovery said.
        #[source]
        source: Box<DiscoveryError>,
    },
    /// The output could not be written.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
    /// The metrics the health tracker counts in could not be made.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Reads the inventory of `config.devices`, prints it, watches its health for `config.watch`
/// and prints the changes and the final health to `out` (one JSON object per line).
///
/// # Errors
/// The inventory cannot be read (NVML missing, a bad file), or `out` cannot be written.
pub async fn check(config: &CheckConfig, out: &mut (impl Write + Send)) -> Result<(), CheckError> {
    let discover = || {
        config
            .devices
            .discover(&config.roots)
            .map_err(|source| CheckError::Discovery {
                source_name: config.devices.to_string(),
                source: Box::new(source),
            })
    };
    let mut inventory = discover()?;
    let devices: Vec<_> = inventory.values().collect();
    writeln!(out, "{}", json!({ "inventory": devices }))?;
    let wake = Arc::new(Notify::new());
    let settings = HealthConfig {
        settle: config.interval,
        ..HealthConfig::default()
    };
    let sources = sources_for(&config.devices, &config.roots, &wake);
    let mut tracker = HealthTracker::start(sources, settings, &inventory, NodeMetrics::new()?);
    for (device, health) in tracker.current() {
        if health.state == crate::health::HealthState::Healthy {
            continue;
        }
        let change = json!({"device": device, "from": "Healthy", "to": health});
        writeln!(out, "{}", json!({ "change": change }))?;
    }
    let deadline = tokio::time::Instant::now() + config.watch;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            () = tokio::time::sleep(config.interval) => {}
            () = wake.notified() => {}
        }
        if let Ok(read) = discover() {
            inventory = read;
        }
        for change in tracker.round(&inventory) {
            let entry = json!({"device": change.device, "from": change.from, "to": change.to});
            writeln!(out, "{}", json!({ "change": entry }))?;
        }
        out.flush()?;
    }
    writeln!(out, "{}", json!({ "health": tracker.current() }))?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_source_prints_its_inventory_each_change_and_the_final_health() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.yaml");
        std::fs::write(&path, "devices:\n  - name: gpu-0\n  - name: gpu-1\n").unwrap();
        let config = CheckConfig {
            devices: DeviceSource::File(path.clone()),
            roots: DiscoveryRoots::default(),
            watch: Duration::from_millis(600),
            interval: Duration::from_millis(50),
        };
        let marker = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            std::fs::write(
                &path,
                "devices:\n  - name: gpu-0\n  - name: gpu-1\n    health: Unhealthy\n    healthMessage: fan failed\n",
            )
            .unwrap();
        });
        let mut out = Vec::new();
        check(&config, &mut out).await.unwrap();
        marker.await.unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["inventory"][1]["name"], "gpu-1", "{lines:?}");
        let changes: Vec<_> = lines.iter().filter(|l| l.get("change").is_some()).collect();
        assert_eq!(changes.len(), 1, "{lines:?}");
        assert_eq!(changes[0]["change"]["device"], "gpu-1");
        assert_eq!(changes[0]["change"]["from"], "Healthy");
        assert_eq!(changes[0]["change"]["to"]["state"], "Unhealthy");
        assert_eq!(changes[0]["change"]["to"]["message"], "fan failed");
        let last = lines.last().unwrap();
        assert_eq!(last["health"]["gpu-1"]["reason"], "Marked");
        assert_eq!(last["health"]["gpu-0"]["state"], "Healthy");
    }

    #[tokio::test]
    async fn a_source_that_cannot_be_read_is_an_error_naming_it() {
        let config = CheckConfig {
            devices: DeviceSource::File("/nonexistent/devices.yaml".into()),
            roots: DiscoveryRoots::default(),
            watch: Duration::ZERO,
            interval: Duration::from_millis(50),
        };
        let error = check(&config, &mut Vec::new())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("reading the devices of file:/nonexistent/devices.yaml: "),
            "{error}"
        );
    }
}
